// SPDX-License-Identifier: GPL-2.0-only
// The kernel's own answers to a workload that cannot go on, as simulated outcomes (#20): the
// memory cgroup's OOM kill (memcg.max below what the workload pins, with no swap or swap
// exhausted) and SIGBUS past the end of a file (workload.file_size). The run finishes, writes its
// statistics, says on stderr what was killed and why, and exits with status 3; the same config
// gives the same outcome byte for byte; several threads on several CPUs all die.
#include <catch2/catch.hpp>

#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;
static constexpr auto mmusim = mmusim_test::run_mmusim;
static constexpr auto stat = mmusim_test::json_number;

namespace {
bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
}  // namespace

TEST_CASE("memcg OOM kill: C1's populate in a cgroup too small, without swap and with swap exhausted", "[memcg][oom]") {
  TempDir t;
  for (const char* plat : {"i7-12700kf", "functional", "neoverse-n1"}) {
    INFO(plat);
    const std::string base = std::string("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=") + plat +
                             " --set workload.measure=populate --set workload.folio=4K --set workload.size=64M"
                             " --set memcg.max=32M --set output.host_stats=false --quiet"
                             " --set kernel.check_invariants=true --set kernel.check_every=500";
    Result r = mmusim(base + " --stats " + t.path("noswap.json"));
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(has(r.out, "Memory cgroup out of memory: Killed process 1"));
    CHECK(has(r.out, "anon-rss:32768kB"));  // all of memcg.max
    std::string js = slurp(t.path("noswap.json"));
    CHECK(stat(js, "memcg.oom_events") == 1);
    CHECK(stat(js, "memcg.oom_kill") == 1);
    CHECK(stat(js, "sched.tasks_killed") == 1);
    CHECK(stat(js, "kernel.exit") == 1);
    // The region's pages that fitted beside the program's own (its image and stack are charged
    // too), and the one that did not.
    const double fitted = stat(js, "faults.region");
    CHECK(fitted > 8100);
    CHECK(fitted <= 8193);
    CHECK(stat(js, "region.time_ns") > 0);

    // 8 MiB of swap: 2047 slots (the first page is the header) go out before the OOM.
    r = mmusim(base + " --set swap.size=8M --stats " + t.path("swap.json"));
    INFO(r.out);
    CHECK(r.status == 3);
    js = slurp(t.path("swap.json"));
    CHECK(stat(js, "kernel.pswpout") == 2047);
    CHECK(stat(js, "memcg.oom_kill") == 1);
    // Most of the 8 MiB swapped out made room for more of the region (some were still being
    // written when the OOM came: under writeback, charged).
    CHECK(stat(js, "faults.region") > fitted + 1900);
    CHECK(stat(js, "faults.region") <= fitted + 2047);
  }
}

TEST_CASE("memcg OOM kill on 20 CPUs: V10(b)'s readers and pressure thread all die, the same way every run", "[memcg][oom][determinism]") {
  TempDir t;
  const std::string base = "run " MMUSIM_SOURCE_DIR "/configs/experiments/v10b-swap-readers.cfg"
                           " --set workload.size=16M --set workload.pressure_size=4M --set memcg.max=8M"
                           " --set swap.size=10M --set workload.duration=4ms --set output.host_stats=false --quiet"
                           // (the events of the faults, the schedule, reclaim, I/O and the kill: a trace of
                           // every event of this run is over 6 GB)
                           " --trace-events page_fault_user,mm_fault_done,sched_switch,block_rq_issue,"
                           "mm_vmscan_memcg_reclaim_end,signal_generate,mark_victim,start_task_reaping,"
                           "finish_task_reaping,exit";
  Result a = mmusim(base + " --stats " + t.path("a.json") + " --trace " + t.path("a.trace"));
  INFO(a.out);
  REQUIRE(a.status == 3);
  Result b = mmusim(base + " --stats " + t.path("b.json") + " --trace " + t.path("b.trace"));
  REQUIRE(b.status == 3);
  const std::string js = slurp(t.path("a.json"));
  CHECK(js == slurp(t.path("b.json")));
  CHECK(slurp(t.path("a.trace")) == slurp(t.path("b.trace")));
  CHECK(a.out == b.out);
  // The setup fitted (16M in 8M of memory and 10M of swap); the pressure thread's rounds did not
  // (its OOM comes about 2.5 ms into the region, before the 4 ms loop ends: with a 2 ms loop the
  // readers and mappers can finish first and only the pressure thread and the main thread die).
  CHECK(stat(js, "workload.rounds") > 0);
  CHECK(stat(js, "memcg.oom_kill") == 1);
  // The main thread, 12 readers, 4 mappers and the pressure thread: one process, all killed.
  CHECK(stat(js, "sched.tasks_killed") == 18);
  CHECK(stat(js, "kernel.exit") == 18);
  CHECK(has(a.out, "18 thread(s) died of a fatal signal"));
  CHECK(has(a.out, "the measured region ended with them"));
  const std::string tr = slurp(t.path("a.trace"));
  CHECK(has(tr, "signal_generate: sig=9"));
  CHECK(has(tr, "mark_victim: pid="));
}

TEST_CASE("a file shorter than its mapping: the access past its end gets SIGBUS, the process dies", "[filemap][oom]") {
  TempDir t;
  for (const char* plat : {"i7-12700kf", "functional"}) {
    INFO(plat);
    const std::string base = std::string("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set platform.name=") + plat +
                             " --set workload.backing=file --set workload.folio=4K --set workload.size=2M"
                             " --set output.host_stats=false --quiet --stats " + t.path("bus.json");
    Result r = mmusim(base + " --set workload.file_size=1M");
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(has(r.out, "was killed by SIGBUS at 0x"));
    const std::string js = slurp(t.path("bus.json"));
    CHECK(stat(js, "faults.sigbus") == 1);
    CHECK(stat(js, "sched.tasks_killed") == 1);
    CHECK(stat(js, "memcg.oom_kill") == 0);
    // A file of the mapping's size: no signal.
    r = mmusim(base + " --set workload.file_size=2M");
    CHECK(r.status == 0);
    CHECK(stat(slurp(t.path("bus.json")), "sched.tasks_killed") == 0);
  }
  // What cannot be: a file larger than the mapping, or one for anonymous memory.
  Result r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set workload.backing=file --set workload.folio=4K"
                    " --set workload.size=2M --set workload.file_size=4M");
  CHECK(r.status == 2);
  CHECK(has(r.out, "workload.file_size = 4M is larger than workload.size = 2M"));
  r = mmusim("run " MMUSIM_SOURCE_DIR "/configs/default.cfg --set workload.file_size=1M");
  CHECK(r.status == 2);
  CHECK(has(r.out, "workload.file_size = 1M needs workload.backing = file or file-shared"));
}
