// SPDX-License-Identifier: GPL-2.0-only
// Regression tests of the fuzzers (fuzz/): every saved input in tests/base/data/fuzz/<harness>/
// replayed through the same function the fuzzer runs (fuzz/harness.hpp), on the built-in schema
// (fuzz/schema_from_list.hpp; the fuzzers use the real one). An input a fuzzer found a failure
// with goes there (and gets a case below if it needs a closer look): the expected answer is a
// clean UserError or success, never another exception, a failed round trip or a crash (the
// sanitizer build, .ci/sanitize, runs these too).
//
// The inputs there now are hand-made corner cases (CRLF lines, include cycles, empty sections,
// high bytes, huge numbers, exponents, signs): as of this writing the fuzzers found no failure.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "base/params.hpp"
#include "fuzz/harness.hpp"
#include "fuzz/schema_from_list.hpp"

namespace fs = std::filesystem;
using namespace mmusim;

namespace {

fs::path data_dir(const char* harness) {
  return fs::path(MMUSIM_SOURCE_DIR) / "tests/base/data/fuzz" / harness;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  std::string dir;
  TempDir() {
    char tmpl[] = "/tmp/mmusim-fuzzreg-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(dir); }
};

const Schema& schema() {
  static Schema s;
  static bool init = false;
  if (!init) {
    fuzz::builtin_schema(s);
    init = true;
  }
  return s;
}

}  // namespace

TEST_CASE("fuzz regressions: saved config-file inputs", "[fuzz]") {
  TempDir t;
  size_t n = 0;
  for (auto& e : fs::directory_iterator(data_dir("config"))) {
    INFO(e.path().string());
    std::string finding;
    REQUIRE_NOTHROW(finding = fuzz::config_file_input(schema(), t.dir, slurp(e.path())));
    CHECK(finding.empty());
    ++n;
  }
  CHECK(n >= 10);
}

TEST_CASE("fuzz regressions: saved --set inputs", "[fuzz]") {
  // The config inputs, read as --set lines, and the values under every key of the schema.
  for (auto& e : fs::directory_iterator(data_dir("config"))) {
    INFO(e.path().string());
    std::string finding;
    REQUIRE_NOTHROW(finding = fuzz::set_override_input(schema(), slurp(e.path())));
    CHECK(finding.empty());
  }
  for (auto& e : fs::directory_iterator(data_dir("values"))) {
    std::string lines;
    for (auto& spec : schema().all()) lines += spec.key + "=" + slurp(e.path()) + "\n";
    INFO(lines);
    std::string finding;
    REQUIRE_NOTHROW(finding = fuzz::set_override_input(schema(), lines));
    CHECK(finding.empty());
  }
}

TEST_CASE("fuzz regressions: saved value inputs", "[fuzz]") {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(data_dir("values"))) {
    const std::string v = slurp(e.path());
    INFO("'" << v << "'");
    std::string finding;
    REQUIRE_NOTHROW(finding = fuzz::values_input(v));
    CHECK(finding.empty());
    ++n;
  }
  CHECK(n >= 20);
}

TEST_CASE("fuzz regressions: corner cases answer with the expected error", "[fuzz]") {
  TempDir t;
  auto load = [&](const std::string& text) -> std::string {
    fuzz::config_file_input(schema(), t.dir, text);  // writes a.cfg ...
    Config cfg(schema());
    try {
      cfg.load_file(t.dir + "/a.cfg");
      return "";
    } catch (const UserError& e) {
      return e.what();
    }
  };
  CHECK(load("include = a.cfg\n").find("include cycle") != std::string::npos);
  CHECK(load("include = b.cfg\n#@@\ninclude = c.cfg\n#@@\ninclude = b.cfg\n").find("include cycle") != std::string::npos);
  CHECK(load("[sim]\nseed = 99999999999999999999999\n").find("not an integer") != std::string::npos);
  CHECK(load("[]\nx=1\n").find("malformed section header") != std::string::npos);
  CHECK(load("=\n").find("has no key") != std::string::npos);
  CHECK(load("").find("empty") != std::string::npos);
  CHECK(load("[workload]\r\nsize = 4M\r\n").empty());  // CRLF files are fine
  CHECK(parse_size("18446744073709551616K") == std::nullopt);
  CHECK(parse_size(".5K") == std::optional<uint64_t>(512));
}
