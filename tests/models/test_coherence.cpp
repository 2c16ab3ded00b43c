// SPDX-License-Identifier: GPL-2.0-only
// Cache-line transfers of the kernel's data between cores (models/cache/coherence.hpp): a line
// ping-ponged between two cores, transfers queueing on one line, a holder that no longer has the
// line, readers sharing it; and the queued-spinlock handover through os/lock_timing.
#include <catch2/catch.hpp>

#include <memory>

#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/cache/coherence.hpp"
#include "models/presets.hpp"
#include "os/lock_timing.hpp"

using namespace mmusim;
using namespace mmusim::hw;

namespace {
constexpr double kGhz = 1.0;  // a cycle is a nanosecond
constexpr uint64_t kNs = 1000;  // picoseconds

struct Rig {
  Stats stats;
  Cache llc{presets::i7().caches.llc, stats};
  std::vector<std::unique_ptr<MemoryHierarchy>> cores;
  std::unique_ptr<KernelLineCoherence> coh;
  explicit Rig(unsigned n, double transfer = 35, double occupancy = 35) {
    std::vector<MemoryHierarchy*> v;
    for (unsigned i = 0; i < n; ++i) {
      cores.push_back(std::make_unique<MemoryHierarchy>(presets::i7().caches, kGhz, stats, &llc));
      v.push_back(cores.back().get());
    }
    coh = std::make_unique<KernelLineCoherence>(v, transfer, occupancy, kGhz,
                                                std::vector<std::string>{"lock", "data", "ptl"}, stats);
  }
  // Core `cpu` accesses the line at `t_ns` (and its caches then hold it, as the kernel's touch
  // leaves it).
  double access(int cpu, uint64_t pa, bool write, uint64_t t_ns, unsigned cls = 0) {
    const double c = coh->access(cpu, pa, write, t_ns * kNs, cls);
    cores[size_t(cpu)]->touch(pa, 8, write);
    return c;
  }
  uint64_t stat(const std::string& k) { return stats.total_value(k); }
};
}  // namespace

TEST_CASE("coherence: a line ping-ponged between two cores costs one transfer per handoff", "[coherence]") {
  Rig r(2);
  const uint64_t pa = 0x10000;
  CHECK(r.access(0, pa, true, 0) == 0);     // first use: from memory, priced by the kernel
  CHECK(r.access(0, pa, true, 100) == 0);   // still here
  // Ten handoffs, far apart in time: each waits exactly one transfer.
  for (unsigned i = 1; i <= 10; ++i) CHECK(r.access(int(i % 2), pa, true, 1000 * i) == Approx(35));
  CHECK(r.stat("coherence.lock.transfers") == 10);
  CHECK(r.stat("coherence.lock.queued") == 0);
  CHECK(r.stat("coherence.lock.cycles") == 350);
  // Another line of the same core: untouched by the other, nothing moves.
  CHECK(r.access(0, pa + 64, true, 20000, 1) == 0);
  CHECK(r.stat("coherence.data.transfers") == 0);
}

TEST_CASE("coherence: transfers of one line queue, readers share a line", "[coherence]") {
  Rig r(5);
  const uint64_t pa = 0x20000;
  r.access(0, pa, true, 0);
  r.coh->begin(1000 * kNs);
  // Four cores want the line at the same time: it serves one transfer at a time, 35 ns each.
  CHECK(r.access(1, pa, true, 1000) == Approx(35));
  CHECK(r.access(2, pa, true, 1000) == Approx(70));
  CHECK(r.access(3, pa, true, 1000) == Approx(105));
  CHECK(r.access(4, pa, true, 1000) == Approx(140));
  CHECK(r.stat("coherence.lock.queued") == 3);
  // A request that comes earlier in simulated time than one already placed (entries run in
  // start order, their accesses need not be): it uses the gap before it, if there is one.
  r.coh->begin(2000 * kNs);
  CHECK(r.access(1, pa, true, 3000) == Approx(35));   // from core 4 (its use at 1140 ns)
  CHECK(r.access(2, pa, true, 2000) == Approx(35));   // before that: from core 4, in the gap
  // At 2990 the line is core 2's, but busy from 3000 to 3035 with core 1's transfer (placed
  // first): this one waits until 3035, then takes 35.
  CHECK(r.access(3, pa, true, 2990) == Approx(45 + 35));
  // Readers: a line one core wrote is fetched by the first reader, then shared.
  const uint64_t d = 0x30000;
  r.coh->begin(10000 * kNs);
  r.access(0, d, true, 10000, 1);
  CHECK(r.access(1, d, false, 11000, 1) == Approx(35));
  CHECK(r.access(2, d, false, 12000, 1) == 0);  // core 1's read left it shared, not modified
  CHECK(r.access(1, d, false, 13000, 1) == 0);
  CHECK(r.access(3, d, true, 14000, 1) == Approx(35));  // a writer takes it from the readers
}

TEST_CASE("coherence: a core whose caches lost the line does not forward it", "[coherence]") {
  Rig r(2);
  const uint64_t pa = 0x40000;
  r.access(0, pa, true, 0);
  // Core 0 streams 4 MiB through its caches (more than its L1D and L2): the line is gone.
  r.cores[0]->touch(0x10000000, 4u << 20, false);
  REQUIRE_FALSE(r.cores[0]->l1d().probe(pa));
  REQUIRE_FALSE(r.cores[0]->l2().probe(pa));
  // 30 us later: nobody forwards it (an ordinary miss, the kernel's price covers it).
  CHECK(r.access(1, pa, true, 30000) == 0);
  CHECK(r.stat("coherence.lock.transfers") == 0);
  // Within 20 us of another core's use the line is taken to be there (the tags follow the
  // port's order of entries, not simulated time: KernelLineCoherence::kRecentPs).
  CHECK(r.access(0, pa, true, 40000) == Approx(35));
}

TEST_CASE("coherence: a line in a cluster's shared L2 is the mates' own, and another core's to fetch",
          "[coherence][cluster]") {
  // E-cores 0 and 1 share one L2 (Gracemont's cluster); core 2 is a P-core with its own.
  Stats stats;
  HierarchyParams ep = presets::i7_ecore().caches;
  const HierarchyParams& pp = presets::i7().caches;
  ep.memory_latency = pp.memory_latency;
  ep.memory_read_bandwidth = pp.memory_read_bandwidth;
  ep.memory_write_bandwidth = pp.memory_write_bandwidth;
  Cache llc(pp.llc, stats), l2(ep.l2, stats);
  MemoryHierarchy e0(ep, kGhz, stats, &llc, &l2), e1(ep, kGhz, stats, &llc, &l2), p(pp, kGhz, stats, &llc);
  const std::vector<MemoryHierarchy*> mates{&e0, &e1};
  e0.set_cluster(&mates);
  e1.set_cluster(&mates);
  KernelLineCoherence coh({&e0, &e1, &p}, 35, 35, kGhz, {"lock"}, stats);
  // E-core 0 writes two lines at 0; its L1D then evicts them into the cluster's L2.
  const uint64_t a = 0x40000, b = 0x80000;
  for (uint64_t pa : {a, b}) {
    CHECK(coh.access(0, pa, true, 0, 0) == 0);
    e0.touch(pa, 8, true);
    REQUIRE(e0.l1d().invalidate(pa));
    REQUIRE(l2.write_back_into(pa));
  }
  // 30 us later (older than KernelLineCoherence::kRecentPs, so the tags decide): for its mate the
  // line is in its own L2, nothing moves; the P-core takes it from the cluster's L2.
  CHECK(coh.access(1, a, true, 30000 * kNs, 0) == 0);
  CHECK(coh.access(2, b, true, 30000 * kNs, 0) == Approx(35));
  CHECK(stats.total_value("coherence.lock.transfers") == 1);
}

TEST_CASE("coherence: a queued spinlock under N waiters hands the lock word over once per waiter", "[coherence]") {
  // Through the OS's lock timing: CPU 0 holds a PTE lock from 0 to 500 ns; CPUs 1-3 ask for it at
  // 100 ns. Each acquisition pulls the lock word (its atomic), waits for the holder's release,
  // and pulls the line again from the releaser (the handover); so does each release store of a
  // line another waiter has taken meanwhile.
  Rig r(4);
  LockTiming lt(r.stats, kGhz);
  lt.set_line_transfers(r.coh.get());
  int ptl;
  const uint64_t pa = 0x50000;
  const auto cls = kmm::LockClass::ptl;
  auto take = [&](int cpu, uint64_t start_ns, double at, double hold) {
    lt.begin(cpu, start_ns * kNs);
    lt.line_access(pa, kmm::LineClass::ptl, true, at);
    r.cores[size_t(cpu)]->touch(pa, 8, true);
    lt.acquire(&ptl, cls, true, at, pa);
    lt.line_access(pa, kmm::LineClass::ptl, true, at + hold);
    lt.release(&ptl, cls, true, at + hold, pa);
    return lt.end(0);
  };
  CHECK(take(0, 0, 0, 500) == 0);
  // CPU 1 at 100: the word from CPU 0 (35), waits for the release at 500 (365), the word again
  // (35): holds the lock from 535, releases at 585 (its own line by then).
  CHECK(take(1, 100, 0, 50) == Approx(35 + 365 + 35));
  // CPU 2 at 100: its first pull of the word queues behind CPU 1's (35 + 35); it waits for CPU
  // 1's release at 585 and takes the word from CPU 1 (35); releases at 670.
  CHECK(take(2, 100, 0, 50) == Approx(585 + 35 - 100));
  // CPU 3 at 100: behind two pulls (70 + 35), the release at 670, the handover (35).
  CHECK(take(3, 100, 0, 50) == Approx(670 + 35 - 100));
  CHECK(r.stat("kernel.lock.ptl.contended") == 3);
  // Three waiters: each pulled the word when it arrived and once more at its handover.
  CHECK(r.stat("coherence.ptl.transfers") == 6);
  CHECK(r.stat("coherence.ptl.queued") == 2);
}

TEST_CASE("coherence: CPUs at different clocks: a transfer costs its pair's ns in the requester's cycles", "[coherence][clocks]") {
  Rig r(3);  // 35-cycle transfers at 1 GHz; CPU 2 becomes a 4 GHz core
  // Pairs: 35 ns between CPUs 0 and 1, 50 ns to or from CPU 2.
  r.coh->set_cpu_timing({1.0, 1.0, 4.0}, [](int from, int to) { return from == 2 || to == 2 ? 50.0 : 35.0; });
  const uint64_t pa = 0x30000;
  r.access(0, pa, true, 0);
  CHECK(r.access(2, pa, true, 1000) == Approx(200));  // 50 ns at 4 GHz
  CHECK(r.access(1, pa, true, 2000) == Approx(50));   // 50 ns at 1 GHz
  CHECK(r.access(0, pa, true, 3000) == Approx(35));   // P to P
  // Queued behind a transfer: the wait too is in the requester's cycles. CPU 1 takes the line at
  // 4000 ns; CPU 2 asks at the same time and waits the 35 ns occupancy (140 cycles) first.
  r.coh->begin(4000 * kNs);
  CHECK(r.access(1, pa, true, 4000) == Approx(35));
  CHECK(r.access(2, pa, true, 4000) == Approx(35 * 4 + 200));
}
