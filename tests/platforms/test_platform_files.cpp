// SPDX-License-Identifier: GPL-2.0-only
// The platform config files as the home of every value they state
// (platforms/platform_files.hpp): mmusim is built with the files as they are in the tree, takes
// every value they state as the platforms' defaults and says where each comes from; the C++
// presets state none of those values.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "kernel_mm/cost.hpp"
#include "platforms/hw_platform.hpp"
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
  REQUIRE(platform_files().size() == 3);
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
    Config named(schema);  // no include: the built-in file is the default
    named.set("platform.name", f.platform, "test");
    size_t stated = 0;
    for (auto& [spec, st] : file.effective()) {
      if (file.is_default(spec->key) || spec->key == "platform.name") continue;
      ++stated;
      INFO(spec->key);
      CHECK(named.setting(spec->key).text == st->text);
      // The very line of the file is the default's source (named from the source tree).
      const std::string line = st->origin.substr(st->origin.find(f.path));
      CHECK(named.setting(spec->key).origin == std::string("default (") + f.platform + ": " + line + ")");
    }
    CHECK(stated > 50);
  }
}

TEST_CASE("platform files: the C++ presets state no hardware value", "[platform_files]") {
  // Every hardware key (one only the hardware platforms have) has, on each platform, its default
  // from a platform config file: its own, or the first that states the key.
  const Schema schema = build_schema();
  size_t hw_keys = 0;
  for (const ParamSpec& spec : schema.all()) {
    if (spec.variants.empty()) continue;
    ++hw_keys;
    for (const std::string& v : spec.variants) {
      INFO(spec.key << " on " << v);
      auto src = spec.default_sources.find(v);
      REQUIRE(src != spec.default_sources.end());
      CHECK(src->second.find("configs/platforms/") != std::string::npos);
    }
  }
  CHECK(hw_keys > 80);
  // The presets themselves hold the structure only: read with nothing but their declarations
  // the hardware has no size, width or latency.
  for (PlatformName name : {PlatformName::i7_12700kf, PlatformName::neoverse_n1, PlatformName::xeon_e5_2699v3}) {
    const hw::CoreMmuParams p = platform_preset(name);
    CHECK(p.l2.arrays.at(0).entries == 0);
    CHECK(p.l2.arrays.at(0).page_sizes.empty());
    CHECK(p.l2.latency == 0);
    CHECK(p.walker.count == 0);
    CHECK(p.walker.psc.at(0).entries == 0);
    CHECK(p.caches.l1d.size == 0);
    CHECK(p.core.rob == 0);
    CHECK(p.caches.memory_latency.value == 0);
  }
  // With the files read in they are the platforms' (what the model tests build from).
  const hw::CoreMmuParams i7 = platform_hw_params(PlatformName::i7_12700kf);
  const hw::CoreMmuParams n1 = platform_hw_params(PlatformName::neoverse_n1);
  CHECK(i7.core.rob == 512);
  CHECK(n1.core.rob == 128);
  CHECK(i7.l2.arrays.at(0).entries == 1024);
  CHECK(n1.l2.arrays.at(0).page_sizes == "4K+64K+2M+1G");
  CHECK(n1.core.rdtscp_rule == hw::RdtscpRule::wait_older);
  // The Haswell-EP core: one L1 DTLB for loads and stores (arrays 4K, 2M, 1G), an STLB of one
  // array for 4K and 2M, one walker, 192 ROB entries.
  const hw::CoreMmuParams hsw = platform_hw_params(PlatformName::xeon_e5_2699v3);
  CHECK(hsw.core.rob == 192);
  REQUIRE(hsw.l1.size() == 1);
  REQUIRE(hsw.l1.at(0).arrays.size() == 3);
  CHECK(hsw.l1.at(0).arrays.at(2).page_sizes == "1G");
  REQUIRE(hsw.l2.arrays.size() == 1);
  CHECK(hsw.l2.arrays.at(0).entries == 1024);
  CHECK(hsw.l2.arrays.at(0).page_sizes == "4K+2M");
  CHECK(hsw.walker.count == 1);
  CHECK(hsw.caches.llc.size == 45ull << 20);
  // A key a file leaves out takes the first file's that states it, and says so.
  Config named(schema);
  named.set("platform.name", "neoverse-n1", "test");
  CHECK(named.setting("core.lfence_latency").origin.rfind("default (neoverse-n1: from configs/platforms/i7-12700kf.cfg:", 0) == 0);
}

TEST_CASE("platform files: the i7-12700kf's E-core keys (ecore.*), stated in its file or as core.X", "[platform_files]") {
  const Schema schema = build_schema();
  size_t ecore_keys = 0;
  for (const ParamSpec& spec : schema.all()) {
    if (spec.key.rfind("ecore.", 0) != 0) continue;
    ++ecore_keys;
    INFO(spec.key);
    // A variant key of the i7 only, with its default from the i7's file.
    REQUIRE(spec.variants.size() == 1);
    CHECK(spec.variants[0] == "i7-12700kf");
    const std::string& src = spec.default_sources.at("i7-12700kf");
    CHECK(src.find("configs/platforms/") != std::string::npos);
    CHECK(spec.desc.rfind("E-core: ", 0) == 0);
    // Only ecore.core.* may be inherited from the P-core's key.
    if (src.rfind("as ", 0) == 0) CHECK(spec.key.rfind("ecore.core.", 0) == 0);
  }
  CHECK(ecore_keys > 50);
  Config named(schema);
  named.set("platform.name", "i7-12700kf", "test");
  CHECK(named.setting("ecore.core.exec_delay").text == named.setting("core.exec_delay").text);
  CHECK(named.setting("ecore.core.exec_delay").origin.rfind("default (i7-12700kf: as core.exec_delay: configs/platforms/i7-12700kf.cfg:", 0) == 0);
  CHECK(named.setting("ecore.core.rob_entries").origin.rfind("default (i7-12700kf: configs/platforms/i7-12700kf.cfg:", 0) == 0);
  // A changed P-core key does not move the E-core's default (a default, not a link).
  named.set("core.exec_delay", "9", "test");
  CHECK(named.setting("ecore.core.exec_delay").text == "5");
  // The E-core keys belong to the i7 alone.
  Config n1(schema);
  n1.set("platform.name", "neoverse-n1", "test");
  n1.set("ecore.tlb.dtlb.entries", "64", "test");
  CHECK_THROWS_AS(n1.check_variant_keys(), UserError);

  // The structure alone has no value; with the file read in, the Gracemont core of CPUID 0x18
  // and leaf 4 (docs/research-smt-ecores.md §2.1).
  const hw::CoreMmuParams structure = *ecore_preset(PlatformName::i7_12700kf);
  CHECK(structure.l1.at(0).arrays.at(0).entries == 0);
  CHECK(structure.core.rob == 0);
  CHECK_FALSE(ecore_preset(PlatformName::neoverse_n1));
  CHECK_FALSE(ecore_preset(PlatformName::xeon_e5_2699v3));
  const hw::CoreMmuParams e = platform_ecore_params(PlatformName::i7_12700kf);
  REQUIRE(e.l1.size() == 1);  // one DTLB for loads and stores
  CHECK(e.l1.at(0).arrays.at(0).entries == 48);
  CHECK(e.l1.at(0).arrays.at(0).ways == 48);
  CHECK(e.l1.at(0).arrays.at(0).page_sizes == "4K");
  REQUIRE(e.l2.arrays.size() == 2);
  CHECK(e.l2.arrays.at(0).entries == 2048);
  CHECK(e.l2.arrays.at(0).ways == 4);
  CHECK(e.l2.arrays.at(0).page_sizes == "4K+2M");
  CHECK(e.l2.arrays.at(1).entries == 8);
  CHECK(e.l2.arrays.at(1).page_sizes == "1G");
  CHECK(e.itlb.arrays.at(0).entries == 64);
  CHECK(e.core.rob == 256);
  CHECK(e.core.store_buffer == 50);
  CHECK(e.core.exec_delay == 5);  // inherited
  CHECK(e.caches.l1d.size == 32 * 1024);
  CHECK(e.caches.l2.size == 2 * 1024 * 1024);
  CHECK(e.caches.llc_latency == 57);
  // The LLC and memory are the platform's, not the E-core's: not read here.
  CHECK(e.caches.llc.size == 0);
  CHECK(e.caches.memory_latency.value == 0);
  // And the P-core preset has no LLC latency of its own.
  CHECK(platform_hw_params(PlatformName::i7_12700kf).caches.llc_latency == 0);
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
