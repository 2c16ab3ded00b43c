// SPDX-License-Identifier: GPL-2.0-only
// Helpers for platform tests that run the mmusim binary (a SystemC simulation elaborates once per
// process, so tests that compare runs start each as a process of its own).
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

namespace mmusim_test {

struct Result {
  int status;       // the exit status (-1: killed)
  std::string out;  // stdout and stderr together
};

inline Result run_mmusim(const std::string& args) {
  std::string cmd = std::string(MMUSIM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    char tmpl[] = "/tmp/mmusim-test-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string file(const std::string& name, const std::string& text) const {
    std::filesystem::path p = dir / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The stats JSON (a --stats file's text), read by nlohmann-json, in the file's key order.
inline nlohmann::ordered_json stats_json(const std::string& text) {
  nlohmann::ordered_json j;
  REQUIRE_NOTHROW(j = nlohmann::ordered_json::parse(text));
  REQUIRE(j.is_object());
  return j;
}

// A number of the flat stats JSON: the statistic `key`.
inline double json_number(const std::string& json, const std::string& key) {
  const nlohmann::ordered_json j = stats_json(json);
  if (!j.contains(key)) FAIL("no key " << key << " in the stats JSON");
  REQUIRE(j[key].is_number());
  return j[key].get<double>();
}

}  // namespace mmusim_test
