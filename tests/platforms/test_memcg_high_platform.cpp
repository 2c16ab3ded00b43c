// SPDX-License-Identifier: GPL-2.0-only
// memory.high on the platforms (memcg.high): C1 at 64 MiB of order-0 pages in a cgroup with
// memory.high at 16 MiB, on one core of the i7-12700kf and on the functional platform. With swap
// the return to user mode reclaims and nobody sleeps; without, reclaim frees nothing and the
// tasks sleep (the region's time is mostly that sleep). V10(b)'s workload on 20 logical CPUs (4 E-cores)
// with memory.high under memory.max: memory.high's reclaim keeps memory.max from being reached.
#include <catch2/catch.hpp>

#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;
static constexpr auto mmusim = mmusim_test::run_mmusim;
static constexpr auto stat = mmusim_test::json_number;

TEST_CASE("memcg.high: reclaim on the return to user mode with swap, throttling sleeps without", "[memcg][swap]") {
  TempDir t;
  for (const char* plat : {"i7-12700kf", "functional"}) {
    INFO(plat);
    const std::string base = std::string("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=") + plat +
                             " --set workload.folio=4K --set workload.size=64M --set memcg.high=16M"
                             " --set kernel.check_invariants=true --set kernel.check_every=200"
                             " --set output.host_stats=false --quiet";
    Result r = mmusim(base + " --set swap.size=512M --stats " + t.path("swap.json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::string js = slurp(t.path("swap.json"));
    // The child's pass copies every page: over memory.high at every 64th charge, reclaimed.
    CHECK(stat(js, "memcg.high_events") > 100);
    CHECK(stat(js, "kernel.pswpout") > 10000);
    CHECK(stat(js, "memcg.high_throttles") == 0);
    CHECK(stat(js, "memcg.max_events") == 0);
    const double swap_time = stat(js, "region.time_ns");

    r = mmusim(base + " --stats " + t.path("noswap.json") + " --trace " + t.path("noswap.trace"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    js = slurp(t.path("noswap.json"));
    CHECK(stat(js, "kernel.pswpout") == 0);
    CHECK(stat(js, "memcg.high_throttles") >= 1);
    CHECK(stat(js, "memcg.high_throttle_ns") >= 2e9);  // far over: the 2 s clamp
    // The sleep is the task's time, not the kernel's work.
    CHECK(stat(js, "region.time_ns") > stat(js, "memcg.high_throttle_ns"));
    CHECK(stat(js, "region.time_ns") > 5 * swap_time);  // (with swap: about 0.2 s, the swap I/O)
    // (cycles at a few GHz: counted as work, 2 s of sleep would be far more cycles than its ns)
    CHECK(stat(js, "kcost.cycles") < stat(js, "memcg.high_throttle_ns"));
    CHECK(slurp(t.path("noswap.trace")).find("memcg_high_throttle: pages=64") != std::string::npos);
  }
}

TEST_CASE("memcg.high: under memcg.max on several cores, its reclaim keeps memory.max from being reached",
          "[memcg][multicore]") {
  TempDir t;
  Result r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/experiments/v10b-swap-readers.cfg"
                    " --set workload.size=16M --set memcg.max=8M --set memcg.high=6M --set workload.pressure_size=4M"
                    " --set workload.duration=1ms --set kernel.check_invariants=true --set kernel.check_every=1000"
                    " --set output.host_stats=false --quiet --stats " + t.path("s.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const std::string js = slurp(t.path("s.json"));
  CHECK(stat(js, "workload.rounds") > 0);
  CHECK(stat(js, "memcg.high_events") > 0);
  CHECK(stat(js, "kernel.pswpout") > 0);
  CHECK(stat(js, "memcg.max_events") == 0);
}

TEST_CASE("memcg.high: a limit reclaim cannot meet is warned about, one above memcg.max too", "[memcg]") {
  TempDir t;
  Result r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=functional"
                    " --set workload.folio=4K --set workload.size=16M --set memcg.high=8M"
                    " --set output.host_stats=false --stats " + t.path("a.json"));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("memcg.high = 8M") != std::string::npos);
  CHECK(r.out.find("throttled") != std::string::npos);
  r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=functional"
             " --set workload.folio=4K --set workload.size=16M --set memcg.max=64M --set memcg.high=64M"
             " --set output.host_stats=false --stats " + t.path("b.json"));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("memory.high never acts") != std::string::npos);
  // Not a multiple of the page size: refused, naming the key.
  r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set memcg.high=1000 --quiet");
  CHECK(r.status != 0);
  CHECK(r.out.find("memcg.high") != std::string::npos);
}

TEST_CASE("memcg.swap_max: the cgroup's swap bounded on a platform run, refused where it cannot fit", "[memcg][swap]") {
  TempDir t;
  const std::string base = "run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set workload.measure=populate"
                           " --set workload.folio=4K --set workload.size=64M --set swap.size=512M"
                           " --set kernel.check_invariants=true --set kernel.check_every=200"
                           " --set output.host_stats=false --quiet";
  // memory.high 16M, swap 8M: 8 MiB go to swap, the other 40 MiB over memory.high stay and throttle.
  Result r = mmusim(base + " --set memcg.high=16M --set memcg.swap_max=8M --stats " + t.path("s.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string js = slurp(t.path("s.json"));
  CHECK(stat(js, "kernel.pswpout") == 2048);
  CHECK(stat(js, "memcg.swap_max_events") > 0);
  CHECK(stat(js, "memcg.swap_fail") == stat(js, "memcg.swap_max_events"));
  CHECK(stat(js, "memcg.high_throttles") > 0);
  // The default (1T) is no limit: the same run swaps what memory.high asks.
  r = mmusim(base + " --set memcg.high=16M --stats " + t.path("u.json"));
  REQUIRE(r.status == 0);
  js = slurp(t.path("u.json"));
  CHECK(stat(js, "kernel.pswpout") > 10000);
  CHECK(stat(js, "memcg.swap_max_events") == 0);
  // memory.max 32M with 16M of swap cannot hold 64M: warned about before the run, naming the
  // key, then the cgroup's OOM kill once the 16M are swapped out.
  const std::string loud = base.substr(0, base.rfind(" --quiet"));
  r = mmusim(loud + " --set memcg.max=32M --set memcg.swap_max=16M --stats " + t.path("k.json"));
  CHECK(r.status == 3);
  CHECK(r.out.find("memcg.swap_max = 16M (--set memcg.swap_max)") != std::string::npos);
  CHECK(stat(slurp(t.path("k.json")), "memcg.oom_kill") == 1);
  CHECK(stat(slurp(t.path("k.json")), "memcg.swap_fail") > 0);
  CHECK(r.out.find("Memory cgroup out of memory: Killed process 1") != std::string::npos);
}
