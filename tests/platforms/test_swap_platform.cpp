// SPDX-License-Identifier: GPL-2.0-only
// Swap on the platforms: C1's parent in a memory cgroup smaller than its region, swapped out and
// in on one core of the i7-12700kf and on the functional platform; bad input for swap and for
// V10(b)'s workload (swap-readers); swap-readers on 20 logical CPUs (4 of them E-cores), every reader load checked.
#include <catch2/catch.hpp>

#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;
static constexpr auto mmusim = mmusim_test::run_mmusim;
static constexpr auto stat = mmusim_test::json_number;

// C1's 256 MiB parent with order-0 pages in a 64 MiB memory cgroup with 512 MiB of swap: most of
// it is swapped out while the parent populates it, and read back (and written) in its pass after
// the fork; the invariant checker runs every 200th kernel entry.
TEST_CASE("swap: a region four times the memory cgroup goes out to swap and comes back", "[swap][memcg]") {
  TempDir t;
  for (const char* plat : {"i7-12700kf", "functional"}) {
    INFO(plat);
    Result r = mmusim(std::string("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=") + plat +
                      " --set workload.folio=4K --set memcg.max=64M --set swap.size=512M"
                      " --set kernel.check_invariants=true --set kernel.check_every=200"
                      " --set output.host_stats=false --quiet --stats " + t.path("s.json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    const std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "total.kernel.pswpout") > 60000);  // of 65,536 pages, 16,384 fit
    CHECK(stat(js, "kernel.pswpin") > 60000);
    CHECK(stat(js, "kernel.swap_ra") > stat(js, "kernel.pgmajfault"));  // read ahead: most faults are minor
    CHECK(stat(js, "kernel.swap_ra_hit") > 0);
    CHECK(stat(js, "total.kernel.swap_write_requests") == stat(js, "total.kernel.pswpout"));
  }
}

// V10(b)'s config at 16 MiB (its cgroup and pressure thread scaled alike), 1 ms: 12 readers on
// the 8 P-cores and the 4 E-cores, every load checked against what the main thread wrote (a frame reused
// while a reader's walk still reached it stops the run: exit 1), invariants every 1000th entry.
TEST_CASE("swap-readers on several cores: readers fault their shares back from swap, every load checked",
          "[swap][multicore]") {
  TempDir t;
  for (const char* variant : {"fallback", "retry-once"}) {
    INFO(variant);
    Result r = mmusim(std::string("run " MMUSIM_SOURCE_DIR "/configs/experiments/v10b-swap-readers.cfg"
                                  " --set workload.size=16M --set memcg.max=8M --set workload.pressure_size=4M"
                                  " --set workload.duration=1ms --set kernel.fault_retry=") + variant +
                      " --set kernel.check_invariants=true --set kernel.check_every=1000"
                      " --set output.host_stats=false --quiet --stats " + t.path("s.json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    const std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "workload.rounds") > 0);
    CHECK(stat(js, "kernel.pswpout") > 0);  // the pressure thread's reclaim during the region
    CHECK(stat(js, "kernel.pswpin") > 0);
    CHECK(stat(js, "kernel.do_swap_page") > stat(js, "kernel.pswpin") / 2);
    // A fault that found its page under read dropped its lock: retried under the per-VMA lock
    // with the patch, else on mmap_lock every time.
    CHECK(stat(js, "kernel.vma_lock.retry") > 0);
    if (std::string(variant) == "retry-once") CHECK(stat(js, "kernel.mmap_lock_fallback") == 0);
    else CHECK(stat(js, "kernel.mmap_lock_fallback") == stat(js, "kernel.vma_lock.retry"));
  }
}

TEST_CASE("swap: bad input is refused naming the key", "[swap][cli]") {
  const std::string run = "run " MMUSIM_SOURCE_DIR "/configs/default.cfg --quiet ";
  const std::string sr = "--set workload.name=swap-readers --set workload.folio=4K ";
  struct Bad {
    std::string sets, names;
  };
  for (const Bad& b : {Bad{"--set workload.name=swap-readers --set workload.folio=64K", "workload.folio"},
                       Bad{"--set workload.pressure_size=2M", "workload.pressure_size"},
                       Bad{sr + "--set platform.name=functional", "functional"},
                       Bad{"--set swap.size=1000", "swap.size"},
                       Bad{"--set swap.page_cluster=6", "swap.page_cluster"},
                       Bad{"--set swap.swappiness=201", "swap.swappiness"},
                       Bad{"--set disk.write_bandwidth=0", "disk.write_bandwidth"}}) {
    INFO(b.sets);
    Result r = mmusim(run + b.sets);
    INFO(r.out);
    CHECK(r.status != 0);
    CHECK(r.out.find(b.names) != std::string::npos);
  }
  // A cgroup that cannot hold the readers' memory, without swap or with too little: warned about
  // naming what is missing, then the cgroup's OOM kill (status 3).
  for (const Bad& b : {Bad{sr + "--set workload.size=16M --set memcg.max=4M", "there is no swap"},
                       Bad{sr + "--set workload.size=16M --set memcg.max=4M --set swap.size=4M", "swap.size = 4M"}}) {
    INFO(b.sets);
    Result r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --stats - " + b.sets);
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find(b.names) != std::string::npos);
    CHECK(r.out.find("its OOM killer kill the workload") != std::string::npos);
    CHECK(r.out.find("Memory cgroup out of memory: Killed process 1 (swap-readers)") != std::string::npos);
  }
}
