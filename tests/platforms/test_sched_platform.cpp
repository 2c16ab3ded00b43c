// SPDX-License-Identifier: GPL-2.0-only
// More threads than CPUs on the cycle-level platforms: time slices (sched.*), the idle states the
// menu governor picks for short sleeps, and V10(a)'s workload (file-faults): file faults under a
// memory-cgroup limit with mappers taking mmap_lock for writing, baseline and patched.
#include <catch2/catch.hpp>

#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;
static constexpr auto mmusim = mmusim_test::run_mmusim;
static constexpr auto stat = mmusim_test::json_number;

namespace {

// file-faults on 2 cores: 3 readers and 2 mappers of a 64 MiB file in an 8 MiB memory cgroup.
std::string file_faults(TempDir& t, const std::string& sets, const std::string& out = "s.json") {
  const std::string cfg = t.file("ff.cfg",
                                 "[platform]\nname = i7-12700kf\ncores = 2\n"
                                 "[workload]\nname = file-faults\nsize = 64M\nthreads = 3\nmmap_threads = 2\n"
                                 "duration = 8ms\n[memcg]\nmax = 8M\n[output]\nhost_stats = false\n");
  Result r = mmusim("run " + cfg + " " + sets + " --quiet --stats " + t.path(out));
  INFO(r.out);
  REQUIRE(r.status == 0);
  return slurp(t.path(out));
}

}  // namespace

// A mapper never sleeps: it keeps its CPU until its slice (1.5 ms on 2 CPUs) is used and another
// task waits there, at the next tick or wake-up on its CPU. Without that the main thread, queued
// behind a mapper on CPU 0 once its nanosleep(workload.duration) ends, could never stop them.
TEST_CASE("file-faults: time slices let the tasks queued behind a busy mapper run", "[sched][filemap]") {
  TempDir t;
  const std::string js = file_faults(t, "");
  CHECK(stat(js, "sched.preemptions") > 0);
  CHECK(mmusim_test::stats_json(js)["config"]["sched.hz"].get<int>() == 250);
  // The threads stop when the main thread's nanosleep(workload.duration) has ended: within a
  // slice and a tick (4 ms) of it.
  CHECK(stat(js, "region.time_ns") > 8e6);
  CHECK(stat(js, "region.time_ns") < 8e6 + 1.5e6 + 4e6);
  // Same config, same statistics.
  CHECK(file_faults(t, "", "again.json") == js);
}

// V10(a)'s mechanism: a reader's fault waits for the disk and returns VM_FAULT_RETRY; 6.12 retries
// under mmap_lock (behind the mappers' write holds), the patch under the per-VMA lock.
TEST_CASE("file-faults: the retry under mmap_lock (fallback) or the per-VMA lock (retry-once)", "[sched][filemap][memcg]") {
  TempDir t;
  const std::string base = file_faults(t, "--set kernel.fault_retry=fallback");
  CHECK(stat(base, "faults.region") > 100);
  CHECK(stat(base, "kernel.vma_lock.retry") > 50);
  CHECK(stat(base, "kernel.mmap_lock_fallback") == stat(base, "kernel.vma_lock.retry"));
  CHECK(stat(base, "kernel.lock.mmap_lock.contended") > 0);
  CHECK(stat(base, "memcg.pgsteal") > 1000);  // the page cache keeps being evicted
  CHECK(stat(base, "sched.io_sleeps") > 50);
  CHECK(stat(base, "region.faults_per_second") ==
        Approx(stat(base, "faults.region") * 1e9 / stat(base, "region.time_ns")));
  const std::string patched = file_faults(t, "--set kernel.fault_retry=retry-once", "p.json");
  CHECK(stat(patched, "kernel.vma_lock.retry") > 50);
  CHECK(stat(patched, "kernel.mmap_lock_fallback") == 0);
}

// Short sleeps on the disk: after six of them a CPU's menu governor predicts a short idle and
// takes C1E (2 us to leave) instead of the deep state (175 us); with no shallow state configured
// every wake-up pays the deep state's exit.
TEST_CASE("file-faults: short idle periods take the shallow idle state", "[sched][cpuidle]") {
  TempDir t;
  const std::string js = file_faults(t, "");
  CHECK(stat(js, "sched.idle_wakeups_shallow") > 0);
  const std::string deep = file_faults(t, "--set platform.idle_deep_residency=0", "d.json");
  CHECK(stat(deep, "sched.idle_wakeups_shallow") == 0);
  CHECK(stat(deep, "sched.idle_wakeups") > stat(js, "sched.idle_wakeups"));
}

// The experiment's config at its full size: 36 readers and 4 mappers on 16 logical CPUs. Faults
// overlap long sleeps on the disk here: a fault whose PTE another CPU's overlapping fault fills
// later in simulated time waits for it (kernel.pte_waits; its unit test is in test_multicore.cpp)
// instead of returning to an access that would fault again (which the core's watchdog stopped as a
// livelock). (Since an entry's time includes its lock waits, this config no longer makes such an
// overlap: kernel.pte_waits went from 5 to 0; the run completing is the check.)
TEST_CASE("V10(a)'s config runs in both variants", "[sched][filemap][memcg][experiment]") {
  TempDir t;
  for (const char* v : {"fallback", "retry-once"}) {
    INFO(v);
    Result r = mmusim(std::string("run " MMUSIM_SOURCE_DIR "/configs/experiments/v10a-file-faults.cfg --set kernel.fault_retry=") +
                      v + " --set output.host_stats=false --quiet --stats " + t.path("v.json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    const std::string js = slurp(t.path("v.json"));
    CHECK(stat(js, "faults.region") > 500);
    CHECK(stat(js, "sched.lock_sleeps") > 0);  // the mappers behind each other's mmap_lock
  }
}

// sched.affinity = all: a reader woken by its disk read while its CPU runs a mapper goes to the
// other CPU if that one is idle (select_idle_sibling()), and a CPU about to idle takes a waiting
// task (sched_balance_newidle()). The readers then fault more often in the same time than pinned,
// where they wait for the mapper's slice. Each move is counted and traced; pinned, none is.
TEST_CASE("file-faults: unpinned threads move to idle CPUs, pinned ones never", "[sched][migration]") {
  TempDir t;
  const std::string pinned = file_faults(t, "--trace " + t.path("p.trace") + " --trace-events sched_migrate_task", "p.json");
  const auto pj = mmusim_test::stats_json(pinned);
  CHECK_FALSE(pj.contains("total.sched.migrations_wakeup"));
  CHECK(slurp(t.path("p.trace")).find("sched_migrate_task:") == std::string::npos);

  const std::string sets = "--set sched.affinity=all --trace " + t.path("a.trace") + " --trace-events sched_migrate_task";
  const std::string all = file_faults(t, sets, "a.json");
  const double wakeups = stat(all, "total.sched.migrations_wakeup"), pulls = stat(all, "total.sched.migrations_newidle");
  CHECK(wakeups > 0);
  CHECK(pulls > 0);
  CHECK(stat(all, "faults.region") > 1.3 * stat(pinned, "faults.region"));
  // One trace event per move, between the two CPUs, with its reason.
  const std::string tr = slurp(t.path("a.trace"));
  size_t events = 0, newidle = 0;
  for (size_t at = tr.find("sched_migrate_task:"); at != std::string::npos; at = tr.find("sched_migrate_task:", at + 1)) {
    const std::string line = tr.substr(at, tr.find('\n', at) - at);
    INFO(line);
    ++events;
    const bool a = line.find("orig_cpu=0 dest_cpu=1") != std::string::npos;
    const bool b = line.find("orig_cpu=1 dest_cpu=0") != std::string::npos;
    CHECK((a || b));
    if (line.find("reason=newidle") != std::string::npos) ++newidle;
    else CHECK(line.find("reason=wakeup") != std::string::npos);
  }
  CHECK(events == size_t(wakeups + pulls));
  CHECK(newidle == size_t(pulls));
  // Same config, same statistics and trace.
  const std::string again = file_faults(t, "--set sched.affinity=all --trace " + t.path("b.trace") +
                                               " --trace-events sched_migrate_task", "b.json");
  CHECK(again == all);
  CHECK(slurp(t.path("b.trace")) == tr);
}

TEST_CASE("file-faults: bad input is refused naming the key", "[sched][cli]") {
  const std::string run = "run " MMUSIM_SOURCE_DIR "/configs/default.cfg --quiet ";
  const std::string ff = "--set workload.name=file-faults ";
  struct Bad {
    std::string sets, names;
  };
  for (const Bad& b : {Bad{ff + "--set workload.duration=1000cyc", "workload.duration"},
                       Bad{"--set workload.mmap_threads=2", "workload.mmap_threads"},
                       Bad{ff + "--set workload.threads=250 --set workload.mmap_threads=10", "256"},
                       Bad{ff + "--set platform.name=functional", "functional"},
                       Bad{ff + "--set sched.hz=0", "sched.hz"},
                       Bad{"--set sched.hz=5000", "sched.hz"},
                       Bad{"--set sched.affinity=some", "sched.affinity"}}) {
    INFO(b.sets);
    const Result r = mmusim(run + b.sets);
    CHECK(r.status == 2);
    CHECK(r.out.find(b.names) != std::string::npos);
  }
}
