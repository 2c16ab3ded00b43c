// SPDX-License-Identifier: GPL-2.0-only
// The run-ahead reuse (core.runahead_reuse: RunaheadReuse, models/core/runahead_reuse.hpp) is a
// host-speed option: a fault's run-ahead replays what it shares with the previous fault's instead
// of simulating each micro-op again. These tests run the same configs with it on and off and require the same
// statistics (every key, in order, and its value), apart from the one counter that says how much was replayed (and the
// key itself in the effective config). The configs cover where it replays (C3's storm of
// spurious faults, under several pipeline parameters) and where its checks must refuse (several
// stores per page, loads, 2M entries, the N1's contiguous entries, several cores, RDTSCP).
#include <catch2/catch.hpp>

#include <string>

#include "tests/platforms/run_mmusim.hpp"

using namespace mmusim_test;

namespace {

std::string config(const std::string& name) {
  return std::string(MMUSIM_SOURCE_DIR) + "/configs/experiments/" + name;
}

// The stats JSON without the keys that name the option or count what it replayed.
nlohmann::ordered_json comparable(const std::string& text) {
  nlohmann::ordered_json j = stats_json(text);
  auto drop = [](nlohmann::ordered_json& o) {
    for (auto it = o.begin(); it != o.end();) {
      const std::string& k = it.key();
      if (k.find("replayed_uops") != std::string::npos || k.find("runahead_reuse") != std::string::npos ||
          k.find("runahead_check") != std::string::npos)
        it = o.erase(it);
      else
        ++it;
    }
  };
  drop(j);
  drop(j["config"]);
  return j;
}

// Runs `cfg` with `sets` both ways; returns the number of micro-ops replayed with reuse on.
double same_either_way(const std::string& cfg, const std::string& sets) {
  TempDir t;
  const std::string common = " --quiet --set output.host_stats=false " + sets;
  INFO(cfg << common);
  // With the replay's self-check: each replayed segment verified the slow way as well.
  const Result on = run_mmusim("run " + config(cfg) + common +
                               " --set core.runahead_reuse=true --set core.runahead_check=true --stats " +
                               t.path("on.json"));
  REQUIRE(on.status == 0);
  const Result off = run_mmusim("run " + config(cfg) + common + " --set core.runahead_reuse=false --stats " + t.path("off.json"));
  REQUIRE(off.status == 0);
  const std::string a = slurp(t.path("on.json")), b = slurp(t.path("off.json"));
  CHECK(json_number(b, "total.core.replayed_uops") == 0);
  CHECK(json_number(a, "total.core.squashed_uops") > 0);
  CHECK(comparable(a) == comparable(b));
  return json_number(a, "total.core.replayed_uops");
}

}  // namespace

TEST_CASE("run-ahead reuse: C3's spurious-fault storm replays, with the same results", "[runahead]") {
  // Most of each fault's run-ahead is replayed.
  const double replayed = same_either_way("c3-fork-reuse-nobarrier.cfg", "--set workload.size=4M");
  CHECK(replayed > 100000);
}

TEST_CASE("run-ahead reuse: the same results under other pipeline parameters", "[runahead]") {
  for (const char* sets : {"--set core.walk_squash=cancel", "--set core.fault_to_nuke=60",
                           "--set core.alloc_width=3", "--set core.store_buffer=40",
                           "--set core.rob_entries=128", "--set walker.count=1",
                           "--set tlb.dtlb_store.entries=4 --set tlb.dtlb_store.ways=4",
                           "--set core.restart_delay=0 --set core.exec_delay=0"}) {
    same_either_way("c3-fork-reuse-nobarrier.cfg", std::string("--set workload.size=2M ") + sets);
  }
}

TEST_CASE("run-ahead reuse: the same results for other folios, patterns and kernels", "[runahead]") {
  for (const char* sets : {"--set workload.folio=4K", "--set workload.folio=2M-pte",
                           "--set workload.folio=2M-pmd", "--set kernel.wp_reuse=off",
                           "--set kernel.wp_reuse=pagetable+flush", "--set workload.pattern=memset",
                           "--set workload.pattern=read-then-store", "--set workload.pattern=random-byte",
                           "--set workload.pattern=stride --set workload.stride=1024",
                           "--set workload.pattern=seq-byte-lfence"}) {
    same_either_way("c3-fork-reuse-nobarrier.cfg", std::string("--set workload.size=2M ") + sets);
  }
}

TEST_CASE("run-ahead reuse: the same results on the N1, with several cores and with RDTSCP", "[runahead]") {
  same_either_way("c4-contpte-n1.cfg", "--set workload.size=2M --set kernel.wp_reuse=off");
  same_either_way("c4-contpte-n1.cfg", "--set workload.size=2M --set tlb.l1_dtlb.contiguous_64k=false --set kernel.wp_reuse=off");
  same_either_way("c6-threads8-random.cfg", "--set workload.size=4M --set platform.cores=4");
  same_either_way("c1-fork-reuse-clock.cfg", "--set workload.size=4M --set core.rdtscp_rule=wait-older");
}

TEST_CASE("run-ahead reuse: the same results with the path to DRAM busy and faults waiting for the "
          "store buffer", "[runahead][dram]") {
  // The LLC below the region: stores' read-for-ownership, write-backs and walks' reads queue for
  // memory.read_bandwidth / write_bandwidth, and each fault's handler waits at its first locked instruction.
  for (const char* sets : {"--set cache.llc.size=640K", "--set cache.llc.size=640K --set memory.read_bandwidth=1 --set memory.write_bandwidth=1",
                           "--set cache.llc.size=640K --set workload.pattern=memset",
                           "--set cache.llc.size=640K --set workload.pattern=memset --set workload.folio=4K"}) {
    same_either_way("c3-fork-reuse-nobarrier.cfg", std::string("--set workload.size=4M ") + sets);
  }
}
