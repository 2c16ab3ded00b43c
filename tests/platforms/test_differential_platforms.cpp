// SPDX-License-Identifier: GPL-2.0-only
// Differential testing of memory contents on the platforms: the random-ops workload (random
// mmap/munmap/mprotect/madvise/fork/exit/stores/loads over several processes, every load checked
// against the workload's reference model by the driver: the functional driver's UserAccess load,
// the core model's load at retirement through the translation it used) with the invariant
// checker after every kernel entry (kernel.check_invariants; on the hardware platforms it also
// checks the TLBs against the page tables), on functional, i7-12700kf, neoverse-n1 and
// xeon-e5-2699v3.
//
// neoverse-n1 runs with kernel.arm64_spurious_flush = local: with `none` and the whole-folio reuse
// the simulated hardware livelocks by design (configs/experiments/c4-hazard-spurious-none.cfg).
//
// MMUSIM_DIFF_PLATFORM_OPS=N runs N operations per run (default 12,500: 8 runs, 100,000 operations per platform per CI run).
// Also: determinism of the random-ops workload on each platform (identical stats JSON and trace).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;

namespace {

Result mmusim(const std::string& args) { return mmusim_test::run_mmusim(args); }

// A number of the flat stats JSON.
double stat(const std::string& json, const std::string& key) { return mmusim_test::json_number(json, key); }

uint64_t ops_per_run() {
  const char* s = std::getenv("MMUSIM_DIFF_PLATFORM_OPS");
  return s && *s ? std::strtoull(s, nullptr, 0) : 12500;
}

const char* kRandomOps =
    "[workload]\nname = random-ops\nprocesses = 4\nmax_mapped = 16M\n"
    "[kernel]\ncheck_invariants = true\n[output]\nhost_stats = false\n";

std::string platform_args(const std::string& platform) {
  std::string a = " --set platform.name=" + platform;
  if (platform == "neoverse-n1") a += " --set kernel.arm64_spurious_flush=local";
  return a;
}

// A random-ops run's stats: every operation done, loads compared, forks, invariants checked.
void check_run(const std::string& js, uint64_t ops) {
  CHECK(stat(js, "check.ops") == double(ops));
  CHECK(stat(js, "check.bytes_compared") > 0);
  CHECK(stat(js, "check.forks") > 0);
  CHECK(stat(js, "kernel.invariant_checks") > 0);
}

void run_differential(const std::string& platform) {
  TempDir t;
  const std::string cfg = t.file("rops.cfg", kRandomOps);
  const uint64_t ops = ops_per_run();
  uint64_t total_ops = 0, bytes = 0, checks = 0;
  // The baseline kernel and the whole-folio reuse (with its fork-copy variants), two seeds each.
  for (const char* wp : {"off", "pagetable"}) {
    for (const char* fc : {"per-pte", "batched"}) {
      for (int seed : {11, 12}) {
        INFO(platform << " wp_reuse=" << wp << " fork_copy=" << fc << " seed " << seed);
        Result r = mmusim("run " + cfg + platform_args(platform) + " --set kernel.wp_reuse=" + wp +
                          " --set kernel.fork_copy=" + fc + " --set workload.ops=" + std::to_string(ops) +
                          " --seed " + std::to_string(seed) + " --stats " + t.path("s.json") + " --quiet");
        INFO(r.out);
        REQUIRE(r.status == 0);
        const std::string js = slurp(t.path("s.json"));
        check_run(js, ops);
        total_ops += uint64_t(stat(js, "check.ops"));
        bytes += uint64_t(stat(js, "check.bytes_compared"));
        checks += uint64_t(stat(js, "kernel.invariant_checks"));
      }
    }
  }
  std::printf("differential on %s: ops %llu, bytes compared %llu, invariant checks %llu\n", platform.c_str(),
              (unsigned long long)total_ops, (unsigned long long)bytes, (unsigned long long)checks);
}

void run_determinism(const std::string& platform) {
  TempDir t;
  const std::string cfg = t.file("rops.cfg", kRandomOps);
  const std::string args = "run " + cfg + platform_args(platform) +
                           " --set kernel.wp_reuse=pagetable --set workload.ops=1500 --seed 5";
  REQUIRE(mmusim(args + " --stats " + t.path("a.json") + " --trace " + t.path("a.trace") + " --quiet").status == 0);
  REQUIRE(mmusim(args + " --stats " + t.path("b.json") + " --trace " + t.path("b.trace") + " --quiet").status == 0);
  const std::string ta = slurp(t.path("a.trace"));
  CHECK(ta.find("page_fault_user") != std::string::npos);
  CHECK(ta.find("fork") != std::string::npos);
  CHECK(ta == slurp(t.path("b.trace")));
  CHECK(slurp(t.path("a.json")) == slurp(t.path("b.json")));
  // Another seed, another sequence.
  REQUIRE(mmusim("run " + cfg + platform_args(platform) +
                 " --set kernel.wp_reuse=pagetable --set workload.ops=1500 --seed 6 --trace " +
                 t.path("c.trace") + " --quiet").status == 0);
  CHECK(ta != slurp(t.path("c.trace")));
}

}  // namespace

TEST_CASE("random-ops on the functional platform: every load checked, invariants on", "[differential]") {
  run_differential("functional");
}

TEST_CASE("random-ops on the i7-12700kf: every load checked, invariants and TLBs on", "[differential]") {
  run_differential("i7-12700kf");
}

TEST_CASE("random-ops on the neoverse-n1: every load checked, invariants and TLBs on", "[differential]") {
  run_differential("neoverse-n1");
}

TEST_CASE("random-ops on the xeon-e5-2699v3: every load checked, invariants and TLBs on", "[differential]") {
  run_differential("xeon-e5-2699v3");
}

// Several cores: the processes run at once, their kernel entries in simulated-time order, the
// walkers reading the page tables as they were at each walk's time. (This found three bugs: a
// fork child given the program of another parent's fork, a CPU that missed a wake-up while it
// waited for the others before idling, and a fork child that ran before its fork() returned; and
// a walk of a new page table reading the writes logged for its frame's earlier life.)
TEST_CASE("random-ops on several cores and two sockets: every load checked, invariants and TLBs on",
          "[differential][multicore]") {
  TempDir t;
  const std::string cfg = t.file("rops.cfg", kRandomOps);
  const uint64_t ops = ops_per_run();
  for (const char* where : {" --set platform.name=i7-12700kf --set platform.cores=4",
                            " --set platform.name=xeon-e5-2699v3 --set platform.cores=4 --set platform.sockets=2",
                            " --set platform.name=xeon-e5-2699v3 --set platform.cores=4 --set platform.sockets=2 "
                            "--set memory.numa=interleave"}) {
    for (const char* wp : {"off", "pagetable"}) {
      INFO(where << " wp_reuse=" << wp);
      Result r = mmusim("run " + cfg + where + " --set kernel.wp_reuse=" + wp + " --set workload.ops=" +
                        std::to_string(ops) + " --seed 12 --stats " + t.path("s.json") + " --quiet");
      INFO(r.out);
      REQUIRE(r.status == 0);
      check_run(slurp(t.path("s.json")), ops);
    }
  }
}

TEST_CASE("random-ops is deterministic on the functional platform", "[determinism]") {
  run_determinism("functional");
}

TEST_CASE("random-ops is deterministic on the i7-12700kf", "[determinism]") {
  run_determinism("i7-12700kf");
}

TEST_CASE("random-ops is deterministic on the neoverse-n1", "[determinism]") {
  run_determinism("neoverse-n1");
}

TEST_CASE("random-ops is deterministic on the xeon-e5-2699v3", "[determinism]") {
  run_determinism("xeon-e5-2699v3");
}

TEST_CASE("random-ops: its parameters are checked", "[differential]") {
  TempDir t;
  const std::string cfg = t.file("rops.cfg", kRandomOps);
  Result r = mmusim("run " + cfg + " --set workload.max_mapped=4M");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.max_mapped") != std::string::npos);
  Result p = mmusim("run " + cfg + " --set workload.processes=0");
  CHECK(p.status == 2);
  CHECK(p.out.find("workload.processes") != std::string::npos);
}

TEST_CASE("anon-cow-seq: threads of one process are refused, naming the keys", "[differential]") {
  TempDir t;
  const std::string cfg = t.file("acs.cfg", "[workload]\nname = anon-cow-seq\nsize = 4M\nprocesses = 2\nthreads = 2\n");
  Result r = mmusim("run " + cfg + " --set platform.name=functional");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.threads") != std::string::npos);
  CHECK(r.out.find("workload.processes") != std::string::npos);
}

// ---- resource limits and the forward-progress watchdog ----------------------------------------

TEST_CASE("a run that needs more memory than allowed is refused before it starts", "[limits]") {
  TempDir t;
  const std::string cfg = t.file("big.cfg", "[platform]\nname = functional\n[workload]\nsize = 8G\n");
  // The region does not fit the simulated physical memory (memory.size = 4G by default).
  Result r = mmusim("run " + cfg + " --quiet");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.size = 8G needs about") != std::string::npos);
  CHECK(r.out.find("memory.size = 4G") != std::string::npos);
  // It fits memory.size, but not the host budget.
  Result h = mmusim("run " + cfg + " --set memory.size=32G --set sim.host_memory_budget=4G --quiet");
  CHECK(h.status == 2);
  CHECK(h.out.find("sim.host_memory_budget = 4G") != std::string::npos);
  CHECK(h.out.find("workload.size = 8G") != std::string::npos);
  // random-ops: processes x max_mapped.
  Result o = mmusim("run " + t.file("r.cfg", kRandomOps) +
                    " --set workload.processes=64 --set workload.max_mapped=1G --set memory.size=128G --quiet");
  CHECK(o.status == 2);
  CHECK(o.out.find("workload.processes = 64 x workload.max_mapped = 1G") != std::string::npos);
  CHECK(o.out.find("sim.host_memory_budget") != std::string::npos);
}

TEST_CASE("the core's forward-progress watchdog: no retirement for core.watchdog_cycles", "[watchdog]") {
  TempDir t;
  const std::string cfg = t.file("w.cfg",
      "[platform]\nname = i7-12700kf\n[workload]\nsize = 4M\npattern = seq-byte-clock\n");
  // A crafted stall: an RDTSCP whose latency (block-younger: nothing younger allocates until it
  // has executed) is longer than the watchdog allows.
  Result r = mmusim("run " + cfg + " --set core.rdtscp_latency=10000 --set core.watchdog_cycles=5000 --quiet");
  CHECK(r.status == 1);
  CHECK(r.out.find("watchdog: cpu 0") != std::string::npos);
  CHECK(r.out.find("no micro-op retired for more than 5000 cycles (core.watchdog_cycles)") != std::string::npos);
  CHECK(r.out.find("is a rdtscp") != std::string::npos);
  CHECK(r.out.find("fences hold younger micro-ops") != std::string::npos);
  // A memory access that never completes in time, on the arm64 core: the dump has the fault the
  // store would take, its PTE and the TLBs.
  Result m = mmusim("run " + cfg + " --set platform.name=neoverse-n1 --set memory.latency=1ms "
                    "--set core.watchdog_cycles=100000 --set workload.pattern=seq-byte --quiet");
  CHECK(m.status == 1);
  CHECK(m.out.find("no micro-op retired for more than 100000 cycles") != std::string::npos);
  CHECK(m.out.find("is a store") != std::string::npos);
  CHECK(m.out.find("The PTE is") != std::string::npos);
  // The default allows every real run.
  CHECK(mmusim("run " + cfg + " --quiet").status == 0);
}

// Every platform, with two cores where it has several (and two sockets for the Xeon).
const char* const kEveryPlatform[] = {
    " --set platform.name=functional", " --set platform.name=i7-12700kf --set platform.cores=2",
    " --set platform.name=neoverse-n1 --set kernel.arm64_spurious_flush=local",
    " --set platform.name=xeon-e5-2699v3 --set platform.cores=2 --set platform.sockets=2"};

// A random-ops run of 4,000 operations over two files (workload.files = 2), seed 21, with `args`:
// its statistics, the run checked (check_run).
std::string run_file_ops(TempDir& t, const std::string& args) {
  constexpr uint64_t ops = 4000;
  Result r = mmusim("run " + t.file("rops.cfg", kRandomOps) + args + " --set workload.files=2 --set workload.ops=" +
                    std::to_string(ops) + " --seed 21 --stats " + t.path("s.json") + " --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string js = slurp(t.path("s.json"));
  check_run(js, ops);
  return js;
}

// Private file mappings among the random operations (workload.files): page-cache reads with
// read-around and fault-around, COW of file pages, MADV_DONTNEED back to the file's bytes; every
// load checked against the file's contents or the process's own writes.
TEST_CASE("random-ops with file mappings on every platform: every load checked, invariants on",
          "[differential][filemap]") {
  TempDir t;
  for (const char* where : kEveryPlatform) {
    for (const char* wp : {"off", "pagetable"}) {
      INFO(where << " wp_reuse=" << wp);
      const std::string js = run_file_ops(t, std::string(where) + " --set kernel.wp_reuse=" + wp);
      CHECK(stat(js, "kernel.do_read_fault") > 0);
      CHECK(stat(js, "kernel.do_cow_fault") > 0);
      CHECK(stat(js, "kernel.filemap_read_pages") > 0);
    }
  }
}

// The same under a memory cgroup too small for the page cache (memcg.max): charges reclaim the
// cgroup's file folios while the processes fork, map, write and unmap around them (the rmap walk
// over their VMAs, the batched unmap flush where another CPU holds the mm), refaults come back
// through shadow entries; every load still checked, invariants (the LRU lists and the cgroup's
// usage among them) after every kernel entry. 8M: a MADV_HUGEPAGE'd file VMA reads 4 MiB ahead
// (do_sync_mmap_readahead()'s VM_HUGEPAGE branch), folios locked until the disk completes, which
// 6M of memory.max with the processes' anonymous memory cannot always hold: the charges that
// find nothing else to reclaim end in the cgroup's OOM kill, as on Linux. On the functional
// platform this run also has faults that find their PTE changed by their own charge's reclaim
// (the accessed bit cleared, set again by the retried access's walk): not a livelock.
TEST_CASE("random-ops with file mappings under memcg.max: reclaim among the operations, every load checked",
          "[differential][filemap][reclaim][memcg]") {
  TempDir t;
  for (const char* where : kEveryPlatform) {
    INFO(where);
    const std::string js = run_file_ops(t, std::string(where) + " --set memcg.max=8M");
    CHECK(stat(js, "memcg.max_events") > 0);
    CHECK(stat(js, "memcg.pgsteal") > 1000);
    CHECK(stat(js, "kernel.reclaim_unmapped_ptes") > 0);
    CHECK(stat(js, "kernel.workingset_refault_file") > 0);
    CHECK(stat(js, "kernel.allocstall") == 0);
    if (std::string(where).find("cores=2") != std::string::npos) CHECK(stat(js, "kernel.tlbbatch_flushes") > 0);
  }
}

// A task whose fault waits for the disk sleeps and its CPU runs another (sched.io_sleeps): with
// four processes on one CPU the CPU idles for less than the tasks slept; a lone reader's CPU
// idles for all of it (the cold read of test_filemap_platform.cpp's first case).
TEST_CASE("a task sleeping on the disk leaves its CPU to another task", "[filemap][sched]") {
  TempDir t;
  const std::string js = run_file_ops(t, " --set platform.name=i7-12700kf");
  CHECK(stat(js, "sched.io_sleeps") > 10);
  const double ghz = mmusim_test::stats_json(js)["config"]["platform.clock_ghz"].get<double>();
  REQUIRE(ghz > 0);
  const double idle_ns = stat(js, "core.idle_cycles") / ghz;
  const double slept_ns = stat(js, "kernel.io_wait_ns");
  CHECK(idle_ns < 0.9 * slept_ns);
  Result r = mmusim("run " + t.file("read.cfg", "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file\n"
                                                "folio = 4K\npattern = seq-read\nsize = 16M\n[output]\nhost_stats = false\n") +
                    " --set platform.name=i7-12700kf --quiet --stats " + t.path("r.json"));
  REQUIRE(r.status == 0);
  const std::string rj = slurp(t.path("r.json"));
  CHECK(stat(rj, "sched.io_sleeps") == 128);
  const double lone_idle_ns = stat(rj, "core.idle_cycles") / ghz;
  CHECK(lone_idle_ns == Approx(stat(rj, "kernel.io_wait_ns")).epsilon(0.01));
}
