// SPDX-License-Identifier: GPL-2.0-only
// Several cores: kernel locks as simulated resources (rwsem semantics), TLB shootdowns that reach
// exactly the CPUs in mm_cpumask, two threads faulting one folio, determinism with 8 cores.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <sys/wait.h>

#include "kernel_mm/arch/x86/x86.hpp"
#include "os/lock_timing.hpp"
#include "os/scheduler.hpp"
#include "platforms/hw_platform.hpp"
#include "platforms/platform.hpp"
#include "platforms/run_mmusim.hpp"

using namespace mmusim;

namespace {

using mmusim_test::slurp;

// Runs mmusim (a SystemC simulation elaborates once per process, so each run is its own process)
// on the default experiment with `sets`; returns the stats JSON text (and the trace).
std::string run(const std::vector<std::string>& sets, std::string* trace_out = nullptr) {
  char dir[] = "/tmp/mmusim-mc-XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string cmd = std::string(MMUSIM_BINARY) + " run " + MMUSIM_SOURCE_DIR + "/configs/default.cfg --quiet";
  for (auto& s : sets) cmd += " --set " + s;
  cmd += std::string(" --stats ") + dir + "/s.json";
  if (trace_out) cmd += std::string(" --trace ") + dir + "/t.txt";
  int st = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  std::string json = slurp(std::string(dir) + "/s.json");
  if (trace_out) *trace_out = slurp(std::string(dir) + "/t.txt");
  std::system((std::string("rm -rf ") + dir).c_str());
  return json;
}

// A count of the stats JSON.
uint64_t stat(const std::string& json, const std::string& key) {
  const nlohmann::ordered_json j = mmusim_test::stats_json(json);
  REQUIRE(j.contains(key));
  REQUIRE(j[key].is_number_unsigned());
  return j[key].get<uint64_t>();
}

// A hardware platform built (not run) from `sets` (key=value overrides).
struct HwRig {
  Stats stats;
  Trace trace;
  std::unique_ptr<Platform> base;
  HwPlatform* p = nullptr;
  explicit HwRig(const std::vector<std::string>& sets) {
    Schema schema = build_schema();
    Config cfg(schema);
    for (const std::string& s : sets) cfg.set_override(s);
    base = build_platform(cfg, stats, trace);
    p = dynamic_cast<HwPlatform*>(base.get());
    REQUIRE(p);
  }
};

}  // namespace

TEST_CASE("kernel locks in simulated time: an entry waits in its CPU's cycles", "[multicore][clocks]") {
  Stats stats;
  LockTiming lt(stats, 1.0);  // 1 GHz: a cycle is a nanosecond
  int ptl;
  using LC = kmm::LockClass;
  lt.begin(0, 0);
  lt.acquire(&ptl, LC::ptl, true, 0, 0);
  lt.release(&ptl, LC::ptl, true, 40, 0);  // held until 40 ns
  CHECK(lt.end(40) == 0);
  // A 2 GHz CPU starts at 10 ns and asks 10 of its cycles (5 ns) later: it waits 25 ns, 50 cycles.
  lt.begin(1, 10'000, 2.0);
  lt.acquire(&ptl, LC::ptl, true, 10, 0);
  lt.release(&ptl, LC::ptl, true, 20, 0);
  CHECK(lt.end(20) == Approx(50));
  // Its hold ended 70 of its cycles after its start: at 45 ns. Without a clock, the next entry is
  // at the constructor's: a 1 GHz CPU asking at 42 ns waits 3 ns, 3 cycles.
  lt.begin(0, 42'000);
  lt.acquire(&ptl, LC::ptl, true, 0, 0);
  lt.release(&ptl, LC::ptl, true, 1, 0);
  CHECK(lt.end(1) == Approx(3));
}

TEST_CASE("kernel locks in simulated time: rwsem semantics", "[multicore]") {
  Stats stats;
  LockTiming lt(stats, 1.0);  // 1 GHz: a cycle is a nanosecond
  int rwsem;                  // any address identifies a lock
  int ptl;
  using LC = kmm::LockClass;

  // CPU A takes the lock for reading at t=0 and holds it until 100.
  lt.begin(0, 0);
  lt.acquire(&rwsem, LC::mmap_lock, false, 0, 0);
  lt.release(&rwsem, LC::mmap_lock, false, 100, 0);
  CHECK(lt.end(0) == 0);
  // CPU B asks for writing at t=10: it waits for the reader (until 100), holds it 50.
  lt.begin(0, 10'000);
  lt.acquire(&rwsem, LC::mmap_lock, true, 0, 0);
  lt.release(&rwsem, LC::mmap_lock, true, 50, 0);
  CHECK(lt.end(0) == Approx(90));
  // CPU C asks for reading at t=20, behind the waiting writer: it waits until the writer has
  // released (t=150) although only a reader held the lock when it arrived.
  lt.begin(0, 20'000);
  lt.acquire(&rwsem, LC::mmap_lock, false, 0, 0);
  lt.release(&rwsem, LC::mmap_lock, false, 5, 0);
  CHECK(lt.end(0) == Approx(130));
  // Readers share: CPU D reads at t=200 and E at t=210 while D holds it: no wait.
  lt.begin(0, 200'000);
  lt.acquire(&rwsem, LC::mmap_lock, false, 0, 0);
  lt.release(&rwsem, LC::mmap_lock, false, 100, 0);
  CHECK(lt.end(0) == 0);
  lt.begin(0, 210'000);
  lt.acquire(&rwsem, LC::mmap_lock, false, 0, 0);
  lt.release(&rwsem, LC::mmap_lock, false, 10, 0);
  CHECK(lt.end(0) == 0);
  // An exclusive lock (a PTE lock): the second CPU waits for the first's release, and the wait
  // delays its later events (its release comes later too).
  lt.begin(0, 1'000'000);
  lt.acquire(&ptl, LC::ptl, true, 0, 0);
  lt.release(&ptl, LC::ptl, true, 40, 0);
  CHECK(lt.end(0) == 0);
  lt.begin(0, 1'010'000);
  lt.acquire(&ptl, LC::ptl, true, 5, 0);
  lt.release(&ptl, LC::ptl, true, 15, 0);
  CHECK(lt.end(0) == Approx(25));
  lt.begin(0, 1'020'000);  // arrives at 1020 ns, the second holder releases at 1010+15+25 = 1050
  lt.acquire(&ptl, LC::ptl, true, 0, 0);
  lt.release(&ptl, LC::ptl, true, 1, 0);
  CHECK(lt.end(0) == Approx(30));
  CHECK(stats.total_value("kernel.lock.mmap_lock.contended") == 2);
  CHECK(stats.total_value("kernel.lock.ptl.contended") == 2);
  CHECK(stats.total_value("kernel.lock.mmap_lock.wait_ns") == 220);

  // An entry that starts first but takes a lock late (a fault that copies a huge page, then
  // takes the folio's lock for a moment): an entry starting after it that wants the lock before
  // that hold begins takes it at once; one that wants it during the hold waits for it.
  int folio;
  lt.begin(0, 2'000'000);
  lt.acquire(&folio, LC::large_mapcount, true, 500, 0);  // at 2500 ns, for 2 ns
  lt.release(&folio, LC::large_mapcount, true, 502, 0);
  CHECK(lt.end(0) == 0);
  lt.begin(1, 2'010'000);
  lt.acquire(&folio, LC::large_mapcount, true, 0, 0);  // at 2010 ns
  lt.release(&folio, LC::large_mapcount, true, 3, 0);
  CHECK(lt.end(0) == 0);
  lt.begin(2, 2'020'000);
  lt.acquire(&folio, LC::large_mapcount, true, 481, 0);  // at 2501 ns: inside the first hold
  lt.release(&folio, LC::large_mapcount, true, 482, 0);
  CHECK(lt.end(0) == Approx(1));
}

TEST_CASE("an x86 TLB shootdown reaches exactly the CPUs in mm_cpumask", "[multicore]") {
  HwRig rig({"platform.name=i7-12700kf", "platform.cores=3"});
  HwPlatform* p = rig.p;
  Stats& stats = rig.stats;
  kmm::Kernel& k = p->system().kernel();
  kmm::task_struct* t = k.tasks().front().get();
  kmm::mm_struct* mm = t->mm;
  const uint64_t va = 0x7f0000123000ull;
  const uint16_t asid = uint16_t(mm->id);
  // CPUs 0 and 1 run the mm; CPU 2 does not (its entry is for the same ASID all the same, so that
  // only mm_cpumask decides who is reached).
  k.arch().switch_mm(0, mm);
  k.arch().switch_mm(1, mm);
  REQUIRE(mm->cpumask.count() == 2);
  hw::TlbEntry e;
  e.vbase = va;
  e.pbase = 0x5000;
  e.asid = asid;
  e.writable = false;
  e.user = true;
  for (int c = 0; c < 3; ++c) {
    p->core(c).l2()->fill(va, e);
    p->core(c).l1_store().fill(va, e);
    REQUIRE(p->core(c).l2()->probe(va, asid));
  }
  k.enter(t, 0, 0);
  static_cast<kmm::X86Arch&>(k.arch()).flush_tlb_mm_range(mm, va, va + kmm::PAGE_SIZE, kmm::PAGE_SHIFT, false);
  CHECK_FALSE(p->core(0).l2()->probe(va, asid));
  CHECK_FALSE(p->core(0).l1_store().probe(va, asid));
  CHECK_FALSE(p->core(1).l2()->probe(va, asid));
  CHECK_FALSE(p->core(1).l1_store().probe(va, asid));
  CHECK(p->core(2).l2()->probe(va, asid));  // not in mm_cpumask: not reached
  CHECK(stats.total_value("kernel.tlb_shootdown_ipis") == 1);  // to CPU 1 only
  CHECK(k.take_cost()[kmm::Cost::ipi] == 1);
}

TEST_CASE("an x86 TLB shootdown: the sender waits for the slowest acknowledgement, not the sum", "[multicore]") {
  // 4 cores at 1 GHz (a cycle is a nanosecond), all running the mm. CPU 0 flushes one page: for
  // each target the ICR write (cost.ipi), then its own INVLPG, then the wait for the last
  // acknowledgement: the last IPI's send + platform.ipi_latency + half of platform.ipi_handler
  // (the entry) + the target's INVLPG + the csd line coming back (coherence.transfer_latency).
  auto sender_cycles = [](unsigned cores) {
    HwRig rig({"platform.name=i7-12700kf", "platform.cores=" + std::to_string(cores), "platform.clock_ghz=1",
               "cost.ipi=100cyc", "cost.invlpg=50cyc", "platform.ipi_latency=300ns",
               "platform.ipi_handler=400cyc", "coherence.transfer_latency=35ns"});
    HwPlatform* p = rig.p;
    Stats& stats = rig.stats;
    kmm::Kernel& k = p->system().kernel();
    kmm::task_struct* t = k.tasks().front().get();
    for (unsigned c = 0; c < cores; ++c) k.arch().switch_mm(int(c), t->mm);
    k.enter(t, 0, 0);
    k.clear_cost();
    const uint64_t va = 0x7f0000123000ull;
    static_cast<kmm::X86Arch&>(k.arch()).flush_tlb_mm_range(t->mm, va, va + kmm::PAGE_SIZE, kmm::PAGE_SHIFT, false);
    CHECK(stats.total_value("kernel.tlb_shootdown_ipis") == cores - 1);
    const double c = p->system().cost_model().cycles(k.cost(), 1.0, [](size_t, uint64_t) {});
    CHECK(k.cost()[kmm::Cost::invlpg] == 1);  // the sender's own; the targets' are theirs
    return c;
  };
  // One target: 100 + 300 + 200 + 50 + 35 after the start (the own INVLPG runs meanwhile).
  CHECK(sender_cycles(2) == Approx(100 + 300 + 200 + 50 + 35));
  // Three targets: the IPIs go out one after the other, the waits overlap.
  CHECK(sender_cycles(4) == Approx(3 * 100 + 300 + 200 + 50 + 35));
}

TEST_CASE("two threads faulting one folio at once: one reuse, one pte_same failure behind the PTE lock", "[multicore]") {
  // Two threads on two cores walk a 2M region of 64K folios side by side (thread 0 page 0,
  // thread 1 page 1, ...), an LFENCE after each store so that nothing runs ahead: each folio's
  // first two stores fault within a few ns of each other. The first fault reuses the whole folio
  // (patched) under the folio's PTE lock; the second read its PTE (lockless) before that, then
  // waits for the lock and finds the PTE changed: pte_same() fails, the kernel returns (the
  // "race" result) and the store, whose TLB entry the #PF removed, retries without a fault.
  // The threads leave the barrier in the same cycle: no idle-state exit for the woken one.
  std::string trace;
  std::string j = run({"platform.name=i7-12700kf", "platform.cores=2", "workload.threads=2",
                       "platform.idle_exit_latency=0",
                       "workload.thread_split=interleave", "workload.size=2M", "workload.folio=64K",
                       "workload.pattern=seq-byte-lfence", "kernel.wp_reuse=pagetable",
                       "output.host_stats=false"}, &trace);
  CHECK(stat(j, "kernel.wp_reuse") == 32);
  CHECK(stat(j, "kernel.fault_race") == 32);
  CHECK(stat(j, "faults.spurious") == 0);
  CHECK(stat(j, "faults.region") == 64);
  CHECK(stat(j, "kernel.wp_copy") == 0);
  CHECK(stat(j, "kernel.lock.ptl.contended") == 32);
  // The first folio: CPU 0's reuse of all 16 PTEs, CPU 1's race for page 1 ends when the lock
  // is released (at the same time), with nothing changed.
  // (Times: the event's stamp in the ftrace text, seconds.)
  auto stamp = [&](const std::string& cpu, const std::string& event) -> double {
    const size_t at = trace.find(event);
    if (at == std::string::npos) return -1;
    const size_t line = trace.rfind('\n', at) + 1;
    if (trace.compare(trace.find('[', line), cpu.size(), cpu) != 0) return -2;
    return std::stod(trace.substr(trace.find("] .....", line) + 7, at - line));
  };
  const double fault1 = stamp("[001]", "page_fault_user: address=0x7effffc01000");
  const double reuse0 = stamp("[000]", "mm_fault_done: address=0x7effffc00000 result=reuse ptes=16");
  const double race1 = stamp("[001]", "mm_fault_done: address=0x7effffc01000 result=race ptes=0");
  CHECK(fault1 > 0);
  CHECK(reuse0 > fault1);
  // It ends two cache-line transfers after CPU 0's (coherence.transfer_latency = 35 ns each):
  // when CPU 0 releases the PTE lock, CPU 1 takes the lock word from it (the handover), and its
  // vma_end_read() takes the per-VMA lock's line back from CPU 0, whose own vma_end_read() came
  // last. The rest of the two paths costs the same.
  CHECK(race1 - reuse0 == Approx(70e-9).margin(1e-12));
  CHECK(stat(j, "coherence.ptl.transfers") >= 32);
}

TEST_CASE("lockless PTE reads see the value at their own simulated time", "[multicore]") {
  Stats stats;
  LockTiming lt(stats, 1.0);  // 1 GHz: a cycle is 1000 ps
  uint64_t pte = 0x1000 | 0x5;  // read-only
  // CPU A's entry starts at 100 ns and upgrades the PTE 500 cycles in (at 600 ns).
  lt.begin(0, 100000);
  lt.pte_write(&pte, 1, 500);
  pte = 0x1000 | 0x7;
  lt.end(0);
  // CPU B's entry starts at 300 ns: a read 100 cycles in (400 ns) sees the old value, one 400
  // cycles in (700 ns) the new one.
  lt.begin(0, 300000);
  CHECK(lt.lockless_read(&pte, pte, 100) == (0x1000 | 0x5));
  CHECK(lt.lockless_read(&pte, pte, 400) == (0x1000 | 0x7));
  uint64_t other = 0x2000;
  CHECK(lt.lockless_read(&other, other, 100) == 0x2000);  // never written: as it is
  // Waiting for a lock moves the entry's time: B waits for a lock A held until 650 ns.
  const int lock = 0;
  lt.end(0);
  lt.begin(0, 100000);
  lt.acquire(&lock, kmm::LockClass::ptl, true, 0, 0);
  lt.release(&lock, kmm::LockClass::ptl, true, 550, 0);  // held until 650 ns
  lt.end(0);
  lt.begin(0, 300000);
  lt.acquire(&lock, kmm::LockClass::ptl, true, 10, 0);  // at 310 ns: waits until 650 ns
  CHECK(lt.lockless_read(&pte, pte, 10) == (0x1000 | 0x7));  // 650 ns: after A's write at 600 ns
  CHECK(lt.end(0) == Approx(340.0));
  // An entry starting after the write reads the new value; the write stays logged for readers
  // behind in simulated time (another core's page walk), up to LockTiming::kKeepPs.
  lt.begin(0, 700000);
  CHECK(lt.lockless_read(&pte, pte, 0) == (0x1000 | 0x7));
  CHECK(lt.pte_log_size() == 1);
  lt.pte_write(&pte, 1, 50);  // at 750 ns
  pte = 0x1000 | 0x67;
  CHECK(lt.pte_log_size() == 2);
  CHECK(lt.lockless_read(&pte, pte, 10) == (0x1000 | 0x7));  // at 710 ns, before this write
  CHECK(lt.value_at(&pte, pte, 500000) == (0x1000 | 0x5));   // a walk at 500 ns: the first value
  CHECK(lt.value_at(&pte, pte, 800000) == (0x1000 | 0x67));
  // An entry more than kKeepPs later: writing the entry again drops the records nobody can see.
  lt.begin(0, 750000 + LockTiming::kKeepPs + 1);
  lt.pte_write(&pte, 1, 0);
  CHECK(lt.pte_log_size() == 1);
}

TEST_CASE("a fault that read a PTE another CPU fills later in simulated time waits for it", "[multicore]") {
  Stats stats;
  LockTiming lt(stats, 1.0);  // 1 GHz: a cycle is 1000 ps
  uint64_t pte = 0;
  // CPU 1's fault slept on the disk: it runs first in the port and fills the PTE at 600 ns.
  lt.begin(1, 100000);
  lt.pte_write(&pte, 1, 500);
  pte = 0x1000 | 0x67;
  lt.end(600);
  // CPU 0's fault at the same address starts at 200 ns and reads the PTE locklessly at 210 ns:
  // none then. Its entry would end at 300 ns, and return to an access that faults again; it waits
  // until the PTE is there instead (as on the folio lock), and sleeps meanwhile.
  lt.begin(0, 200000);
  CHECK(lt.lockless_read(&pte, pte, 10) == 0);
  const double waited = lt.end(100);
  CHECK(waited == Approx(300.001));
  CHECK(lt.slept() == Approx(waited));
  CHECK(stats.find_counter("kernel.pte_waits")->value() == 1);
  // An entry that ends after the fill does not wait.
  lt.begin(0, 200000);
  CHECK(lt.lockless_read(&pte, pte, 10) == 0);
  CHECK(lt.end(500) == Approx(0.0));
  CHECK(stats.find_counter("kernel.pte_waits")->value() == 1);
}

TEST_CASE("a PTE's value at a time is the one its last write stamped by then left, in the log's order", "[multicore]") {
  // Memcg reclaim on CPU A, an entry of a millisecond, starts at 100 ns and clears the PTE's
  // Accessed bit late in it (stamped 1000 ns). CPU B's munmap() starts after it, at 200 ns, and
  // zaps the PTE at 300 ns; the port ran A's entry first, so B's write comes after A's in the log
  // although it is stamped earlier. From 300 ns on the PTE is none: B's write, which A's preceded,
  // is there. (The earliest write after the time, A's, would bring the mapping back: a walk would
  // cache the frame the munmap freed.)
  Stats stats;
  LockTiming lt(stats, 1.0);  // 1 GHz: a cycle is 1000 ps
  uint64_t pte = 0x1000 | 0x67;
  lt.begin(0, 100000);
  lt.pte_write(&pte, 1, 900);  // at 1000 ns
  pte = 0x1000 | 0x47;
  lt.end(0);
  lt.begin(1, 200000);
  lt.pte_write(&pte, 1, 100);  // at 300 ns
  pte = 0;
  lt.end(0);
  CHECK(lt.value_at(&pte, pte, 250000) == (0x1000 | 0x67));  // before both
  CHECK(lt.value_at(&pte, pte, 500000) == 0);
  CHECK(lt.value_at(&pte, pte, 1100000) == 0);
  lt.begin(2, 400000);
  CHECK(lt.lockless_read(&pte, pte, 0) == 0);
  lt.end(0);
}

TEST_CASE("8 cores: the same config and seed give identical statistics and traces", "[multicore][determinism]") {
  std::vector<std::string> sets = {"platform.name=i7-12700kf", "platform.cores=8", "workload.threads=8",
                                   "workload.size=16M", "workload.pattern=random-byte",
                                   "kernel.wp_reuse=pagetable", "sim.seed=3", "output.host_stats=false"};
  std::string t1, t2;
  std::string a = run(sets, &t1);
  std::string b = run(sets, &t2);
  CHECK(a == b);
  CHECK(t1 == t2);
  CHECK(t1.find("clone") != std::string::npos);
  CHECK(stat(a, "faults.region") >= 256);
}

TEST_CASE("several cores: sim.uops_per_host_second counts each retired micro-op once", "[multicore]") {
  std::vector<std::string> sets = {"platform.name=i7-12700kf", "platform.cores=4", "workload.threads=4",
                                   "workload.size=8M", "kernel.wp_reuse=pagetable"};
  std::string js = run(sets);
  const double uops = mmusim_test::json_number(js, "total.core.uops");
  const double rate = mmusim_test::json_number(js, "sim.uops_per_host_second");
  const double host = mmusim_test::json_number(js, "sim.host_seconds");
  REQUIRE(uops > 0);
  REQUIRE(host > 0);
  CHECK(rate * host == Approx(uops).epsilon(1e-6));
  // The measured region's own: its micro-ops (core.uops is the region's) over its CPU time.
  const double region_uops = mmusim_test::json_number(js, "core.uops");
  const double region_cpu = mmusim_test::json_number(js, "sim.region_cpu_seconds");
  REQUIRE(region_cpu > 0);
  CHECK(region_cpu <= host);
  CHECK(region_uops < uops);
  CHECK(mmusim_test::json_number(js, "sim.region_uops_per_cpu_second") * region_cpu ==
        Approx(region_uops).epsilon(1e-6));
}

TEST_CASE("TLB shootdowns are traced: one tlb_shootdown event per IPI or broadcast TLBI", "[multicore]") {
  for (const char* platform : {"i7-12700kf", "neoverse-n1"}) {
    INFO(platform);
    std::vector<std::string> sets = {std::string("platform.name=") + platform, "platform.cores=4",
                                     "workload.threads=4", "workload.size=8M", "kernel.wp_reuse=off",
                                     "kernel.arm64_spurious_flush=local", "output.host_stats=false"};
    std::string trace;
    std::string js = run(sets, &trace);
    const bool x86 = std::string(platform) == "i7-12700kf";
    const uint64_t n = stat(js, x86 ? "total.kernel.tlb_shootdown_ipis" : "total.kernel.tlbi_broadcasts");
    CHECK(n > 0);
    size_t events = 0;
    std::istringstream in(trace);
    for (std::string line; std::getline(in, line);) {
      if (line.find(": tlb_shootdown: ") == std::string::npos) continue;
      ++events;
      CHECK(line.find(x86 ? "kind=ipi from=" : "kind=tlbi_broadcast from=") != std::string::npos);
    }
    CHECK(events == n);
  }
}

TEST_CASE("the trace's mm_fault_done comes after the handler's wait for the store buffer", "[trace][drain]") {
  // C5's 4K row at 8M, through an LLC of 2.5 MiB (so that the stream goes to DRAM as at 256M): each
  // reuse fault's handler waits for the memset's buffered stores at its first LOCK-prefixed
  // instruction. mm_fault_done is stamped where the handler ends, wait
  // included: the faulting store's walk again (the #PF removed its entry) starts right after it.
  std::string trace;
  std::string j = run({"platform.name=i7-12700kf", "workload.size=8M", "workload.folio=4K",
                       "workload.pattern=memset", "kernel.wp_reuse=off", "cache.llc.size=2560K",
                       "output.host_stats=false"},
                      &trace);
  REQUIRE(stat(j, "core.fault_store_drain_cycles") > 0);
  std::istringstream in(trace);
  std::string line;
  double done = -1, worst = 0;
  size_t pairs = 0;
  auto stamp = [](const std::string& l) { return std::stod(l.substr(l.find("] .....") + 7)); };
  while (std::getline(in, line)) {
    if (line.find("mm_fault_done:") != std::string::npos && line.find("result=reuse") != std::string::npos) {
      done = stamp(line);
    } else if (done >= 0 && line.find("page_walk_start:") != std::string::npos && line.find("spec=0") != std::string::npos) {
      worst = std::max(worst, stamp(line) - done);
      ++pairs;
      done = -1;
    }
  }
  CHECK(pairs >= 2048);
  CHECK(worst < 30e-9);  // seconds: restart_delay and the front end, not the drain
}

TEST_CASE("SMT: siblings share the core's caches and TLB arrays, and keep their entries apart", "[multicore][smt]") {
  HwRig rig({"platform.name=i7-12700kf", "platform.cores=2", "platform.smt=true"});
  HwPlatform* p = rig.p;
  // Logical CPUs 0 and 1 are core 0's threads, 2 and 3 core 1's.
  CHECK(&p->core(0).caches() == &p->core(1).caches());
  CHECK(&p->core(2).caches() == &p->core(3).caches());
  CHECK(&p->core(0).caches() != &p->core(2).caches());
  CHECK(p->core(0).l2() == p->core(1).l2());
  CHECK(p->core(1).l2() != p->core(2).l2());
  CHECK(&p->core(0).walker() == &p->core(1).walker());
  // Each thread's entries carry its tag: an INVLPG on CPU 1 drops CPU 1's entry only.
  kmm::Kernel& k = p->system().kernel();
  const uint64_t va = 0x7f0000123000ull;
  const uint16_t pcid = 5;
  hw::TlbEntry e;
  e.vbase = va;
  e.pbase = 0x5000;
  e.writable = false;
  e.user = true;
  e.asid = uint16_t(pcid | p->core(0).asid_tag());
  p->core(0).l2()->fill(va, e);
  e.asid = uint16_t(pcid | p->core(1).asid_tag());
  p->core(1).l2()->fill(va, e);
  CHECK(p->core(0).asid_tag() != p->core(1).asid_tag());
  REQUIRE(p->core(0).l2()->probe(va, uint16_t(pcid | p->core(0).asid_tag())));
  REQUIRE(p->core(1).l2()->probe(va, uint16_t(pcid | p->core(1).asid_tag())));
  k.hw().x86_invlpg(1, pcid, va);
  CHECK(p->core(0).l2()->probe(va, uint16_t(pcid | p->core(0).asid_tag())));
  CHECK_FALSE(p->core(1).l2()->probe(va, uint16_t(pcid | p->core(1).asid_tag())));
}

TEST_CASE("SMT: threads go one per core first, then to the second hardware threads", "[multicore][smt]") {
  Scheduler s;
  s.set_cpus(8, 2);  // 4 cores x 2 threads
  std::vector<int> cpus;
  for (unsigned i = 0; i < 9; ++i) cpus.push_back(s.cpu_for_thread(i));
  CHECK(cpus == std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7, 0});
  s.set_cpus(4);
  CHECK(s.cpu_for_thread(5) == 1);
}

TEST_CASE("SMT: sched.placement: thread 1 on the other core (spread) or on CPU 1, the sibling (by-number)", "[multicore][smt]") {
  for (const char* pl : {"spread", "by-number"}) {
    INFO(pl);
    std::string trace;
    run({"platform.cores=2", "platform.smt=true", "workload.threads=2", "workload.size=2M",
         std::string("sched.placement=") + pl},
        &trace);
    const std::string cpu = std::string(pl) == "spread" ? "[002]" : "[001]";
    bool found = false;
    std::istringstream in(trace);
    for (std::string line; std::getline(in, line);)
      if (line.find("sched_switch:") != std::string::npos && line.find("next_pid=3") != std::string::npos) {
        CHECK(line.find(cpu) != std::string::npos);
        found = true;
      }
    CHECK(found);
  }
}

TEST_CASE("SMT: 16 threads on 8 cores run to the end, checked, and the same seed gives the same results", "[multicore][smt][determinism]") {
  // With the kernel's invariant checker on, which compares every TLB entry of every hardware
  // thread (the shared arrays, untagged) with the page tables.
  std::vector<std::string> sets = {"platform.name=i7-12700kf", "platform.cores=8", "platform.smt=true",
                                   "workload.threads=16", "workload.size=8M", "workload.folio=64K",
                                   "workload.pattern=random-byte", "kernel.wp_reuse=pagetable",
                                   "kernel.check_invariants=true", "sim.seed=5", "output.host_stats=false"};
  std::string t1, t2;
  const std::string a = run(sets, &t1);
  const std::string b = run(sets, &t2);
  CHECK(a == b);
  CHECK(t1 == t2);
  CHECK(stat(a, "faults.region") >= 128);  // at least one per folio
  CHECK(stat(a, "kernel.wp_reuse") == 128);
  // The siblings' kernel accesses do not move lines between them; other cores' do.
  CHECK(stat(a, "coherence.transfers") > 0);
}

TEST_CASE("SMT: impossible on the Neoverse N1, a clear error", "[multicore][smt]") {
  char dir[] = "/tmp/mmusim-smt-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string cmd = std::string(MMUSIM_BINARY) + " run " + MMUSIM_SOURCE_DIR +
                          "/configs/default.cfg --quiet --set platform.name=neoverse-n1 --set platform.smt=true"
                          " --stats /dev/null 2> " + dir + "/err.txt";
  const int st = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  const std::string err = slurp(std::string(dir) + "/err.txt");
  CHECK(err.find("platform.smt") != std::string::npos);
  CHECK(err.find("neoverse-n1") != std::string::npos);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST_CASE("x86 lazy TLB: an idle CPU gets no flush IPI, and flushes when it runs the mm again", "[multicore]") {
  HwRig rig({"platform.name=i7-12700kf", "platform.cores=2"});
  HwPlatform* p = rig.p;
  Stats& stats = rig.stats;
  kmm::Kernel& k = p->system().kernel();
  auto& x86 = static_cast<kmm::X86Arch&>(k.arch());
  kmm::task_struct* t = k.tasks().front().get();
  kmm::mm_struct* mm = t->mm;
  const uint64_t va = 0x7f0000123000ull;
  const uint16_t asid = uint16_t(mm->id);
  x86.switch_mm(0, mm);
  x86.switch_mm(1, mm);
  hw::TlbEntry e;
  e.vbase = va;
  e.pbase = 0x5000;
  e.asid = asid;
  e.user = true;
  p->core(1).l2()->fill(va, e);
  // CPU 1 idles: lazy, still in mm_cpumask, its TLB as it was.
  x86.enter_lazy_tlb(1);
  CHECK(x86.is_lazy(1));
  CHECK(mm->cpumask.test(1));
  k.enter(t, 0, 0);
  x86.flush_tlb_mm_range(mm, va, va + kmm::PAGE_SIZE, kmm::PAGE_SHIFT, false);
  CHECK(stats.total_value("kernel.tlb_shootdown_ipis") == 0);  // should_flush_tlb(): lazy
  CHECK(p->core(1).l2()->probe(va, asid));                     // out of date, and unused
  CHECK(x86.tlb_flush_deferred(1, mm));
  // Back to the mm: its generation moved on, so switch_mm_irqs_off() flushes.
  x86.switch_mm(1, mm);
  CHECK_FALSE(x86.is_lazy(1));
  CHECK_FALSE(p->core(1).l2()->probe(va, asid));
  CHECK_FALSE(x86.tlb_flush_deferred(1, mm));
  // Freed page tables reach lazy CPUs too (native_flush_tlb_multi: on_each_cpu_mask), which
  // leave the mm (switch to init_mm).
  x86.enter_lazy_tlb(1);
  x86.flush_tlb_mm_range(mm, va, va + kmm::PAGE_SIZE, kmm::PAGE_SHIFT, true);
  CHECK(stats.total_value("kernel.tlb_shootdown_ipis") == 1);
  CHECK_FALSE(mm->cpumask.test(1));
  CHECK(x86.loaded_mm(1) == nullptr);
  // Switching to another mm leaves the old one's cpumask.
  x86.switch_mm(1, mm);
  CHECK(mm->cpumask.test(1));
}

namespace {
// The stamps (seconds) of the trace's events of `name` whose line contains `with`, in file order.
std::vector<double> stamps(const std::string& trace, const std::string& name, const std::string& with = "") {
  std::vector<double> out;
  std::istringstream in(trace);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(": " + name + ":");
    if (at == std::string::npos || line.find(with) == std::string::npos) continue;
    const size_t t = line.find("] .....");
    if (t == std::string::npos) continue;
    out.push_back(std::stod(line.substr(t + 7, at - t - 7)));
  }
  return out;
}
}  // namespace

TEST_CASE("idle CPUs: a task woken onto one runs platform.idle_exit_latency after the wake-up", "[multicore]") {
  // Two threads on two cores, the pass behind a barrier. Thread 1 arrives last (its CPU left the
  // idle state after the clone): it opens the barrier and goes on at once; the main thread, asleep
  // there, runs 100 us later, when CPU 0 has left its idle state. Each CPU that slept is traced
  // (Linux's power:cpu_idle: state=1 in, 4294967295 out).
  const std::vector<std::string> common = {
      "platform.name=i7-12700kf", "platform.cores=2", "workload.threads=2", "workload.size=4M",
      "workload.folio=64K", "workload.pattern=seq-byte", "kernel.wp_reuse=pagetable", "output.host_stats=false"};
  auto with = [&](const std::string& lat, std::string* trace) {
    std::vector<std::string> s = common;
    s.push_back("platform.idle_exit_latency=" + lat);
    return run(s, trace);
  };
  std::string t100, t0;
  const std::string j100 = with("100us", &t100);
  const std::string j0 = with("0", &t0);
  // In the region (the statistics' values): the barrier's wake of CPU 0.
  CHECK(stat(j100, "sched.idle_wakeups") >= 1);
  CHECK(stat(j0, "sched.idle_wakeups") == 0);
  CHECK(stamps(t0, "cpu_idle").empty());

  const std::vector<double> begin = stamps(t100, "region_begin");
  REQUIRE(begin.size() == 1);
  // CPU 0 leaves its idle state exactly 100 us after the barrier opened, and runs the main thread.
  const std::vector<double> out0 = stamps(t100, "cpu_idle", "[000]");
  bool found = false;
  for (double t : stamps(t100, "cpu_idle", "state=4294967295 cpu_id=0"))
    if (t > begin[0]) {
      CHECK(t - begin[0] == Approx(100e-6).margin(1e-9));
      found = true;
      break;
    }
  CHECK(found);
  CHECK(out0.size() >= 2);
  // The same work, begun 100 us later on one of the two CPUs: the pass is longer by less than
  // that (thread 1 ran alone meanwhile, without the main thread's contention for the per-VMA
  // lock's line and the memory path) and by no more than two wake-ups (the barrier's and the
  // join's, had the main thread waited for thread 1).
  const double d = mmusim_test::json_number(j100, "region.time_ns") - mmusim_test::json_number(j0, "region.time_ns");
  CHECK(d >= 50e3);
  CHECK(d <= 200e3 + 1);
  CHECK(stat(j100, "faults.region") == stat(j0, "faults.region"));
}

TEST_CASE("idle CPUs: an SMT thread whose sibling runs wakes without the idle state's exit", "[multicore]") {
  // Two threads on the two hardware threads of one core: whoever wakes the other runs on the same
  // physical core, which therefore never sleeps.
  std::string trace;
  const std::string j = run({"platform.name=i7-12700kf", "platform.cores=1", "platform.smt=true",
                             "workload.threads=2", "workload.size=4M", "workload.folio=64K",
                             "workload.pattern=seq-byte", "kernel.wp_reuse=pagetable",
                             "platform.idle_exit_latency=100us", "output.host_stats=false"},
                            &trace);
  CHECK(stat(j, "sched.idle_wakeups") == 0);
  CHECK(stamps(trace, "cpu_idle", "state=4294967295").empty());
}

TEST_CASE("anon-cow-seq: the children spread over the cores, each copies every huge page once", "[multicore][v9]") {
  const std::vector<std::string> base = {"platform.name=xeon-e5-2699v3", "platform.cores=4",
                                         "workload.name=anon-cow-seq", "workload.size=4M",
                                         "workload.folio=2M-pmd", "workload.processes=4",
                                         "kernel.check_invariants=true", "output.host_stats=false"};
  std::vector<std::string> copy = base;
  copy.push_back("kernel.thp_cow=copy");
  std::string trace;
  const std::string j = run(copy, &trace);
  // 4 children x 2 THPs, each copied whole at the child's first store into it.
  CHECK(stat(j, "kernel.huge_pmd_copy") == 8);
  CHECK(stat(j, "kernel.split_huge_pmd") == 0);
  CHECK(stat(j, "kernel.pages_copied") == 8 * 512);
  // Each child writes all of the area: 4M / 8 stores, with its loop micro-ops.
  CHECK(stat(j, "core.uops") >= 4 * (4u << 20) / 8 * 3);
  // The children ran on four CPUs (fork balancing), not one after the other on the parent's.
  for (const char* cpu : {"[000]", "[001]", "[002]", "[003]"})
    CHECK(trace.find(std::string(cpu) + " .....") != std::string::npos);
  CHECK(trace.find("result=huge_copy") != std::string::npos);
  // The copy order decides where the faulting store finds its line when it retires after the
  // copy: target-last (the default) copies its sub-page last, so the line is in the L1D; a
  // sequential copy has long evicted it from there.
  CHECK(stat(j, "core.fault_resume_store.l1d") == 8);
  std::vector<std::string> seq = copy;
  seq.push_back("kernel.huge_copy_order=sequential");
  CHECK(stat(run(seq), "core.fault_resume_store.l1d") == 0);
  // 6.12's split instead: no whole copy, one 4K copy per fault.
  std::vector<std::string> split = base;
  split.push_back("kernel.thp_cow=split");
  const std::string s = run(split);
  CHECK(stat(s, "kernel.huge_pmd_copy") == 0);
  CHECK(stat(s, "kernel.split_huge_pmd") == 8);
  // The same config twice: the same statistics.
  CHECK(run(copy) == j);
}

// vm-scalability's throughput is the sum of the per-process rates usemem prints (lkp-tests
// stats/vm-scalability adds them): each child's area + area/8 (--prealloc) over its time from the
// region's start (before the first fork) to its exit. The trace gives those times.
TEST_CASE("anon-cow-seq: vm-scalability's throughput sums each child's bytes over its own time", "[multicore][v9]") {
  std::string trace;
  const std::string j = run({"platform.name=xeon-e5-2699v3", "platform.cores=4", "workload.name=anon-cow-seq",
                             "workload.size=4M", "workload.folio=2M-pmd", "workload.processes=4",
                             "kernel.thp_cow=copy", "output.host_stats=false"},
                            &trace);
  const double got = mmusim_test::stats_json(j)["region.process_bytes_per_second"].get<double>();
  // The trace's lines: "<comm>-<pid> [cpu] ..... <seconds>: <event>: ..."
  double begin = -1, want = 0, last = 0;
  unsigned children = 0;
  std::istringstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    const size_t sp = line.rfind(' ', colon);
    const double t = std::stod(line.substr(sp + 1, colon - sp - 1));
    if (line.find(": region_begin:") != std::string::npos) begin = t;
    if (line.find(": exit: pid=") != std::string::npos && line.find("pid=1 ") == std::string::npos) {
      REQUIRE(begin >= 0);
      want += 4.5 * 1024 * 1024 / (t - begin);
      last = std::max(last, t);
      ++children;
    }
  }
  REQUIRE(children == 4);
  // (The report retires just before the exit system call: within 0.5%.)
  CHECK(got == Approx(want).epsilon(0.005));
  // More than processes x bytes over the whole region: the children that end early count at
  // their own rate, not the last one's.
  CHECK(got > 1.01 * 4 * 4.5 * 1024 * 1024 / (last - begin));
}

TEST_CASE("two sockets: each child's pages on its own node, its copies read across the link", "[multicore][v9][numa]") {
  const std::vector<std::string> base = {"platform.name=xeon-e5-2699v3", "platform.cores=4",
                                         "platform.sockets=2", "workload.name=anon-cow-seq",
                                         "workload.size=4M", "workload.folio=2M-pmd",
                                         "workload.processes=4", "kernel.thp_cow=copy",
                                         "kernel.check_invariants=true", "output.host_stats=false"};
  std::string trace;
  const std::string j = run(base, &trace);
  // Children on both sockets (CPUs 2 and 3 are socket 1's).
  for (const char* cpu : {"[000]", "[001]", "[002]", "[003]"})
    CHECK(trace.find(std::string(cpu) + " .....") != std::string::npos);
  // First touch: every allocation on the allocating CPU's node, none fell back.
  CHECK(stat(j, "kernel.numa_miss") == 0);
  CHECK(stat(j, "kernel.numa_other") == 0);
  CHECK(stat(j, "kernel.numa_local") >= 8 * 512);
  // The children on socket 1 copy the parent's huge pages, which are on node 0 (or modified in
  // socket 0's LLC): the first of them to copy a page takes its 512 x 64 lines across the link,
  // the second finds most of them in socket 1's LLC then (shared with socket 0's).
  const uint64_t crossed = stat(j, "memory.remote_lines_kernel");
  CHECK(crossed >= 2 * 512 * 64 * 9 / 10);
  CHECK(crossed < 2 * 2 * 512 * 64);
  // The kernel's lines, by where they were found: at least each copy's 2 x 512 x 64 (source
  // and destination), most of them in no cache or the LLC.
  uint64_t kernel_lines = 0;
  for (const char* l : {"l1d", "l2", "llc", "dram"}) kernel_lines += stat(j, std::string("cache.kernel.") + l);
  CHECK(kernel_lines >= 8 * 2 * 512 * 64);
  CHECK(stat(j, "cache.kernel.llc") + stat(j, "cache.kernel.dram") > kernel_lines / 2);
  // Their page tables were copied at fork by the parent's CPU, on node 0: their walks cross too.
  CHECK(stat(j, "memory.remote_fills") + stat(j, "coherence.socket.forwards") > 0);
  CHECK(run(base) == j);
  // One socket: none of this.
  std::vector<std::string> one = base;
  one[2] = "platform.sockets=1";
  const nlohmann::ordered_json o = mmusim_test::stats_json(run(one));
  CHECK_FALSE(o.contains("kernel.numa_hit"));
  CHECK_FALSE(o.contains("memory.remote_fills"));
}

TEST_CASE("two sockets: impossible combinations are refused, naming the keys", "[multicore][numa]") {
  const std::string cfg = std::string(MMUSIM_SOURCE_DIR) + "/configs/default.cfg";
  // The cores do not split evenly.
  mmusim_test::Result r = mmusim_test::run_mmusim(
      "run " + cfg + " --quiet --set platform.name=xeon-e5-2699v3 --set platform.cores=3 --set platform.sockets=2");
  CHECK(r.status == 2);
  CHECK(r.out.find("platform.sockets = 2 does not divide platform.cores = 3") != std::string::npos);
  // A platform file without the latencies between sockets.
  r = mmusim_test::run_mmusim("run " + cfg + " --quiet --set platform.cores=2 --set platform.sockets=2");
  CHECK(r.status == 2);
  CHECK(r.out.find("memory.remote_latency") != std::string::npos);
  CHECK(r.out.find("coherence.remote_transfer_latency") != std::string::npos);
  // Remote memory nearer than local.
  r = mmusim_test::run_mmusim("run " + cfg + " --quiet --set platform.name=xeon-e5-2699v3 --set platform.cores=2 "
                              "--set platform.sockets=2 --set memory.remote_latency=50ns");
  CHECK(r.status == 2);
  CHECK(r.out.find("memory.remote_latency = 50ns is below memory.latency") != std::string::npos);
}

TEST_CASE("page copies: a COW copy waits for its source lines where they are (LLC or DRAM)", "[copy]") {
  // C2's copy fault (64K folios, no reuse: every store copies its 4K): at 8 MiB the parent's
  // pages are still in the 25 MB LLC when the pass copies them, at 64 MiB they are not.
  auto at = [](const char* size) {
    return run({std::string("workload.size=") + size, "kernel.wp_reuse=off", "kernel.large_folio_reuse=false",
                "output.host_stats=false"});
  };
  const std::string hot = at("8M"), cold = at("64M");
  const uint64_t hot_copies = stat(hot, "kernel.pages_copied"), cold_copies = stat(cold, "kernel.pages_copied");
  CHECK(hot_copies == 2048);
  CHECK(cold_copies == 16384);
  // 64 lines at the LLC's 60 cycles, 8 at a time (half of the 16 fill buffers): 480 cycles each.
  CHECK(stat(hot, "cache.kernel.copy_wait_cycles") == 480 * hot_copies);
  // From DRAM: 8 rounds of memory.latency (441 cycles) at least, plus their transfers.
  const uint64_t cold_wait = stat(cold, "cache.kernel.copy_wait_cycles");
  CHECK(cold_wait >= 8 * 441 * cold_copies);
  CHECK(cold_wait <= 8 * (441 + 8 * 5) * cold_copies);
  // The fault's latency moves by the difference, and nothing else (4.9 GHz).
  auto median = [](const std::string& j) {
    return mmusim_test::stats_json(j)["fault.latency_ns.copy.median"].get<double>();
  };
  const double moved = median(cold) - median(hot);
  CHECK(moved > (3528 - 480) / 4.9 - 5);
  CHECK(moved < (8 * (441 + 8 * 5) - 480) / 4.9 + 5);
  // The functional platform has no caches: the copy is its price alone.
  const std::string f = run({"platform.name=functional", "workload.size=8M", "kernel.wp_reuse=off",
                             "kernel.large_folio_reuse=false", "output.host_stats=false"});
  CHECK_FALSE(mmusim_test::stats_json(f).contains("cache.kernel.copy_wait_cycles"));
}

// ---------------------------------------------------------------------------------------------
// The i7-12700's E-cores (platform.ecores): Gracemont cores after the P-core threads, 4 to a
// cluster sharing an L2, at their own clock (docs/design-ecores.md).

TEST_CASE("E-cores: the whole 20-thread part is built, E-cores after the P-core threads", "[multicore][ecores]") {
  HwRig rig({"platform.name=i7-12700kf", "platform.cores=8", "platform.smt=true", "platform.ecores=4"});
  HwPlatform* p = rig.p;
  CHECK(p->system().platform().cpus() == 20);
  // CPUs 16-19: one cluster, one L2, each its own L1D and TLBs.
  CHECK(&p->core(16).caches().l2() == &p->core(19).caches().l2());
  CHECK(&p->core(16).caches().l2() != &p->core(14).caches().l2());
  CHECK(&p->core(16).caches() != &p->core(17).caches());
  CHECK(p->core(16).owns_mmu());
  CHECK(p->core(16).l1_load().capacity() == 48);  // Gracemont's DTLB, not Golden Cove's
  CHECK(p->core(0).l1_load().capacity() == 64 + 32 + 8);
  CHECK(p->core(16).caches().l1d().sets() * 8 * 64 == 32 * 1024);
  CHECK(p->core(16).caches().l2().sets() * 16 * 64 == 2 * 1024 * 1024);
  CHECK(p->core(16).ghz() == Approx(3.8));
  CHECK(p->core(15).ghz() == Approx(4.9));
  CHECK(p->core(16).core().params().rob == 256);  // not halved: E-cores have no SMT
  CHECK(p->core(15).core().params().rob == 256);  // a P-core thread's half of 512
  // The E-cores' statistics are their own.
  CHECK(rig.stats.find_counter("ecore.tlb.dtlb.hits"));
  CHECK(rig.stats.find_counter("ecore.core.uops"));
  CHECK(rig.stats.find_counter("ecore.cache.l2.hits"));
  CHECK_FALSE(rig.stats.find_counter("ecore.memory.fills"));
}

TEST_CASE("E-cores: impossible combinations and E-core keys without E-cores are errors", "[multicore][ecores]") {
  auto fails = [](const std::vector<std::string>& sets, const std::string& what) {
    Stats stats;
    Trace trace;
    Schema schema = build_schema();
    Config cfg(schema);
    for (const std::string& s : sets) cfg.set_override(s);
    try {
      build_platform(cfg, stats, trace);
    } catch (const UserError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
      return;
    }
    FAIL("no error");
  };
  fails({"platform.name=neoverse-n1", "platform.ecores=4"}, "only the i7-12700kf has E-cores");
  fails({"platform.name=i7-12700kf", "platform.sockets=2", "platform.cores=2", "platform.ecores=4"}, "one socket");
  fails({"platform.name=i7-12700kf", "ecore.tlb.dtlb.entries=64", "ecore.tlb.dtlb.ways=64"}, "platform.ecores = 0");
}

TEST_CASE("E-cores: 20 threads run checked and deterministic, E-core work counted as theirs", "[multicore][ecores][determinism]") {
  std::vector<std::string> sets = {"platform.name=i7-12700kf", "platform.cores=8", "platform.smt=true",
                                   "platform.ecores=4", "workload.threads=20", "workload.size=8M",
                                   "workload.folio=64K", "workload.pattern=random-byte",
                                   "kernel.wp_reuse=pagetable", "kernel.check_invariants=true", "sim.seed=5",
                                   "output.host_stats=false"};
  std::string t1, t2;
  const std::string a = run(sets, &t1);
  const std::string b = run(sets, &t2);
  CHECK(a == b);
  CHECK(t1 == t2);
  CHECK(stat(a, "faults.region") >= 128);
  CHECK(stat(a, "ecore.tlb.dtlb.hits") > 0);
  CHECK(stat(a, "ecore.core.uops") > 0);
  CHECK(stat(a, "coherence.transfers") > 0);
  CHECK(stat(a, "total.core.uops") > 0);
}

TEST_CASE("E-cores: a pass split between a P-core and an E-core takes longer than between two P-cores", "[multicore][ecores]") {
  // Thread 0 (the main thread) on CPU 0, thread 1 on CPU 1: a second P-core, or the E-core.
  std::vector<std::string> base = {"platform.name=i7-12700kf", "workload.threads=2", "workload.size=16M",
                                   "workload.folio=4K", "workload.pattern=seq-byte", "output.host_stats=false"};
  std::vector<std::string> pp = base, pe = base;
  pp.push_back("platform.cores=2");
  pe.push_back("platform.cores=1");
  pe.push_back("platform.ecores=1");
  const std::string a = run(pp), b = run(pe);
  const double tp = mmusim_test::stats_json(a)["region.time_ns"].get<double>();
  const double te = mmusim_test::stats_json(b)["region.time_ns"].get<double>();
  CHECK(stat(b, "ecore.core.uops") > 0);
  CHECK(stat(a, "faults.region") == stat(b, "faults.region"));
  INFO("P+P " << tp << " ns, P+E " << te << " ns");
  // The E-core's half is slower: its user work at 3.8 GHz with its smaller DTLB, and the kernel's
  // cycle-priced items (exception entry and exit, the fault's software, ...) at 3.8 GHz and
  // ecore.core.kernel_cycle_scale = 1.3 of them (Gracemont's lower IPC: 1.3 x 4.9 / 3.8 = 1.68 the
  // P-core's time); the items priced in ns cost the same on both.
  CHECK(te > 1.25 * tp);
  CHECK(te < 2.0 * tp);
  // Without Gracemont's kernel IPC the E-core's half is only its clock's and its DTLB's slower.
  const double te1 = mmusim_test::stats_json(run([&] {
                       auto v = pe;
                       v.push_back("ecore.core.kernel_cycle_scale=1.0");
                       return v;
                     }()))["region.time_ns"].get<double>();
  INFO("P+E at kernel_cycle_scale 1: " << te1 << " ns");
  CHECK(te1 < te);
  CHECK(te1 > tp);
}

// SMT: the kernel's items priced in cycles cost core.smt_kernel_scale (1.6: 2 / a yield of 1.25,
// docs/research-kernel-ipc.md) times their cycles on a thread whose sibling has a task, read at
// each kernel entry; a thread whose sibling is idle runs the kernel at the whole core's prices.
TEST_CASE("SMT: kernel work costs core.smt_kernel_scale more while the sibling has a task, nothing more while it is idle", "[multicore][smt]") {
  const std::vector<std::string> base = {"platform.name=i7-12700kf", "platform.cores=1", "platform.smt=true",
                                         "workload.size=16M", "workload.folio=4K", "workload.pattern=seq-byte",
                                         "output.host_stats=false"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> v = base;
    v.insert(v.end(), more.begin(), more.end());
    return mmusim_test::stats_json(run(v));
  };
  // One thread: its sibling never has a task, so the scale changes nothing at all.
  {
    auto a = with({"workload.threads=1", "core.smt_kernel_scale=1.6"});
    auto b = with({"workload.threads=1", "core.smt_kernel_scale=1.0"});
    CHECK(a["region.time_ns"].get<double>() == b["region.time_ns"].get<double>());
    CHECK(a["kcost.cycles"].get<uint64_t>() == b["kcost.cycles"].get<uint64_t>());
  }
  // Two threads on the two siblings: the pass's faults all run while the other thread has a task.
  auto one = with({"workload.threads=2", "core.smt_kernel_scale=1.0"});
  auto smt = with({"workload.threads=2", "core.smt_kernel_scale=1.6"});
  CHECK(one["faults.region"].get<uint64_t>() == smt["faults.region"].get<uint64_t>());
  const double ratio = double(smt["kcost.cycles"].get<uint64_t>()) / double(one["kcost.cycles"].get<uint64_t>());
  INFO("kernel cycles ratio " << ratio);
  // At most 1.6: only the items priced in cycles are scaled, not the line transfers' extra cycles
  // (and nothing of this pass is priced in ns).
  CHECK(ratio > 1.5);
  CHECK(ratio <= 1.6 + 1e-9);
  CHECK(smt["region.time_ns"].get<double>() > 1.1 * one["region.time_ns"].get<double>());
}
