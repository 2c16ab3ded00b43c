// SPDX-License-Identifier: GPL-2.0-only
// The platform config files as the home of each platform's clock and instruction prices
// (platforms/platform_files.hpp): mmusim is built with the files as they are in the tree, takes
// their values as the platforms' defaults and says where each comes from; and the presets the
// hardware models declare agree with everything else the files restate.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "kernel_mm/cost.hpp"
#include "platforms/platform.hpp"
#include "platforms/platform_files.hpp"

using namespace mmusim;

namespace {
std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(MMUSIM_SOURCE_DIR) + "/" + rel, std::ios::binary);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("platform files: built in as they are in the tree and one per platform", "[platform_files]") {
  REQUIRE(platform_files().size() == 2);
  CHECK(std::string(platform_files()[0].platform) == "i7-12700kf");  // the generic defaults' first source
  for (const PlatformFile& f : platform_files()) {
    INFO(f.path);
    CHECK(read_source(f.path) == f.text);
  }
}

TEST_CASE("platform files: platform.name alone gives every value the file states and says where from",
          "[platform_files]") {
  const Schema schema = build_schema();
  for (const PlatformFile& f : platform_files()) {
    INFO(f.path);
    Config file(schema);
    file.load_file(std::string(MMUSIM_SOURCE_DIR) + "/" + f.path);
    Config named(schema);
    named.set("platform.name", f.platform, "test");
    size_t stated = 0, from_file = 0;
    for (auto& [spec, st] : file.effective()) {
      if (file.is_default(spec->key)) continue;
      ++stated;
      INFO(spec->key);
      CHECK(named.setting(spec->key).text == st->text);
      const std::string& origin = named.setting(spec->key).origin;
      const bool home = spec->key == "platform.clock_ghz" || spec->key.rfind("cost.", 0) == 0;
      // The clock and the prices come from the file itself (file:line); the other keys from the
      // declarations (the models' presets), which the file restates.
      if (home) {
        CHECK(origin.rfind(std::string("default (") + f.platform + ": " + f.path + ":", 0) == 0);
        ++from_file;
      } else if (spec->key != "platform.name") {
        CHECK(origin.rfind("default", 0) == 0);
        CHECK(origin.find(".cfg") == std::string::npos);
      }
    }
    CHECK(stated > 20);
    CHECK(from_file >= 5);
  }
}

TEST_CASE("platform files: the hardware prices have no default in the kernel port", "[platform_files]") {
  // Declared without the platform files, a hardware item is a 0 placeholder; a software item has
  // its price from kernel_mm/cost.hpp.
  Schema s;
  Params p = Params::declaring(s);
  kmm::CostModel().visit(p);
  size_t hw = 0;
  for (size_t i = 0; i < kmm::kNumCosts; ++i) {
    const kmm::Cost c = kmm::Cost(i);
    const ParamSpec* spec = s.find(std::string("cost.") + kmm::cost_name(c));
    REQUIRE(spec);
    if (kmm::cost_is_hardware(c)) {
      ++hw;
      CHECK(spec->default_text == "0cyc");
    } else {
      CHECK(spec->default_text != "0cyc");
    }
  }
  CHECK(hw == 10);
  // With them, every hardware item's generic default names the file that states it.
  const Schema full = build_schema();
  Config functional(full);
  functional.set("platform.name", "functional", "test");
  CHECK(functional.setting("cost.exc_entry").text == "715cyc");
  CHECK(functional.setting("cost.exc_entry").origin.rfind("default (from configs/platforms/i7-12700kf.cfg:", 0) == 0);
  CHECK(functional.setting("cost.dsb_bcast").origin.rfind("default (from configs/platforms/neoverse-n1.cfg:", 0) == 0);
  CHECK(functional.setting("cost.fault_core").origin == "default");
}
