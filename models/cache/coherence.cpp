// SPDX-License-Identifier: GPL-2.0-only
#include "models/cache/coherence.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"

namespace mmusim::hw {

KernelLineCoherence::KernelLineCoherence(std::vector<MemoryHierarchy*> caches, double transfer_cycles,
                                         double occupancy_cycles, double ghz,
                                         const std::vector<std::string>& classes, Stats& stats)
    : caches_(std::move(caches)),
      transfer_cycles_(transfer_cycles),
      occupancy_cycles_(occupancy_cycles),
      ghz_(ghz) {
  MMUSIM_CHECK(ghz > 0 && transfer_cycles >= 0 && occupancy_cycles >= 0,
               "coherence: clock {} GHz, transfer {} cycles, occupancy {} cycles", ghz,
               transfer_cycles, occupancy_cycles);
  for (const std::string& c : classes) {
    StatGroup g(stats, "coherence." + c);
    ctr_.push_back({&g.counter("transfers", "kernel accesses to " + c + " lines that took the line from another core", "transfers"),
                    &g.counter("queued", "of those, transfers that waited for the line to finish an earlier transfer", "transfers"),
                    &g.counter("cycles", "cycles the kernel waited for " + c + " lines from other cores (queueing included)", "cycles")});
  }
  cycles_frac_.assign(ctr_.size(), 0.0);
  all_transfers_ = &stats.counter("coherence.transfers", "kernel accesses that took their line from another core (all classes)", "transfers");
}

// Whether a core other than `cpu` (and its SMT sibling) has the line in its L1D or L2. (Not
// only the one the history names: the MESI states of the private caches follow the accesses in
// the order the port ran them, and a later-run entry's access may have taken the line from it
// already.) A cluster's mates share `cpu`'s L2: a line there is `cpu`'s own, not held elsewhere.
bool KernelLineCoherence::held_elsewhere(int cpu, uint64_t pa) {
  MemoryHierarchy* self = caches_.at(size_t(cpu));
  for (MemoryHierarchy* h : caches_)
    if (h != self && (h->l1d().probe(pa) || (&h->l2() != &self->l2() && h->l2().probe(pa)))) return true;
  return false;
}

double KernelLineCoherence::access(int cpu, uint64_t pa, bool write, uint64_t t, unsigned cls) {
  MMUSIM_CHECK(cls < ctr_.size(), "coherence: line class {}", cls);
  Line& ln = lines_[pa >> kLineShift];
  std::vector<Use>& u = ln.uses;
  // Forget what no access from now on can see: of the uses before the current entry's start, all
  // but the latest; the transfers that ended before it.
  size_t old = 0;
  while (old < u.size() && u[old].t_ps < start_ps_) ++old;
  if (old > 1) u.erase(u.begin(), u.begin() + std::ptrdiff_t(old - 1));
  const uint64_t occ = ps(occupancy_cycles_);
  size_t done = 0;
  while (done < ln.busy.size() && ln.busy[done] + occ <= start_ps_) ++done;
  if (done) ln.busy.erase(ln.busy.begin(), ln.busy.begin() + std::ptrdiff_t(done));

  // Where the line is at t: the latest use before t decides. This core's own: its copy is
  // still valid. Another core's write: that core holds it modified (or, for a write, wanted
  // exclusive); another core's read: it is shared, and a read takes a clean copy (from the LLC,
  // as an ordinary miss) while a write must take it from the readers.
  const size_t p = size_t(std::upper_bound(u.begin(), u.end(), t, [](uint64_t x, const Use& y) { return x < y.t_ps; }) - u.begin());
  int from = -1;
  uint64_t from_t = 0;
  if (p > 0 && u[p - 1].cpu != cpu && (write || u[p - 1].write)) {
    from = u[p - 1].cpu;
    from_t = u[p - 1].t_ps;
  }
  double cycles = 0;
  uint64_t at = t;
  // (SMT siblings share the core's caches: nothing moves between them.)
  // A use within kRecentPs: the line is still in that core's caches (at most ~4,000 lines in
  // 20 us of kernel work, against a 1.25 MB L2), whatever the tags say now (they follow the
  // port's order, and a later-run entry may have taken it already). An older one: if no other
  // core's caches hold it any more, it was evicted and comes from the LLC or DRAM.
  if (from >= 0 && caches_[size_t(from)] != caches_[size_t(cpu)] &&
      (t <= from_t + kRecentPs || held_elsewhere(cpu, pa))) {
    // The line moves from `from`: the earliest time from t on when it is not serving another
    // transfer.
    uint64_t s = t;
    size_t ins = 0;
    for (; ins < ln.busy.size(); ++ins) {
      const uint64_t b = ln.busy[ins];
      if (b + occ <= s) continue;
      if (b >= s + occ) break;
      s = b + occ;
    }
    ln.busy.insert(ln.busy.begin() + std::ptrdiff_t(ins), s);
    ClassCounters& c = ctr_[cls];
    c.transfers->inc();
    all_transfers_->inc();
    if (s > t) c.queued->inc();
    const bool remote = !socket_of_.empty() && socket_of_[size_t(from)] != socket_of_[size_t(cpu)];
    // In the requester's cycles.
    const double g = cpu_ghz_.empty() ? ghz_ : cpu_ghz_[size_t(cpu)];
    const double transfer = remote ? remote_transfer_cycles_
                            : cpu_ghz_.empty() ? transfer_cycles_
                                               : transfer_ns_(from, cpu) * g;
    cycles = double(s - t) * g / 1000.0 + transfer;
    at = t + ps(cycles, g);
    cycles_frac_[cls] += cycles;
    const uint64_t whole = uint64_t(cycles_frac_[cls]);
    c.cycles->inc(whole);
    cycles_frac_[cls] -= double(whole);
  }
  const auto pos = std::upper_bound(u.begin(), u.end(), at, [](uint64_t x, const Use& y) { return x < y.t_ps; });
  u.insert(pos, Use{at, int16_t(cpu), write});
  return cycles;
}

}  // namespace mmusim::hw
