// SPDX-License-Identifier: GPL-2.0-only
#include "models/walker/walker.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace mmusim::hw {

// ---------------------------------------------------------------------------------------------
// Parameters

void WalkerParams::visit(Params& p) {
  p.integer("walker.count", count, count, 1, 64,
            "Page walks in flight at once (page-miss handlers)");
  p.integer("walker.overhead", overhead, overhead, 0, 10000,
            "Fixed cycles of a walk besides its memory reads",
            "cycles");
  const bool x86 = isa == pg::Isa::x86_64;
  for (PscArrayParams& a : psc) {
    std::string what =
        x86 ? "the " + a.name + " paging-structure cache (SDM Vol 3A §4.10.3; size not published "
                                "for Golden Cove [U])"
            : "the " + a.name + " (table-descriptor entries of levels 0-2; the N1 keeps them in "
                                "the L2 TLB's capacity, modelled as a separate array [U])";
    p.integer("walker.psc." + a.name + ".entries", a.entries, a.entries, 1, 1 << 16,
              "Entries of " + what);
    p.integer("walker.psc." + a.name + ".ways", a.ways, a.ways, 1, 1 << 16,
              "Associativity of " + what + " (= entries: fully associative)");
    replacement_param(p, "walker.psc." + a.name + ".replacement", a.replacement, what);
  }
  if (!p.is_declaring()) validate();
}

void WalkerParams::validate() const {
  for (const PscArrayParams& a : psc)
    if (a.ways == 0 || a.ways > a.entries || a.entries % a.ways != 0)
      fatal("walker.psc.{0}.entries = {1} and walker.psc.{0}.ways = {2}: the entries must be a "
            "multiple of the ways (ways = entries for a fully associative cache)",
            a.name, a.entries, a.ways);
}

std::vector<std::string> WalkerParams::level_names(pg::Isa isa) {
  if (isa == pg::Isa::x86_64) return {"pte", "pde", "pdpte", "pml4e"};
  return {"l3", "l2", "l1", "l0"};
}

// ---------------------------------------------------------------------------------------------
// PageWalker

PageWalker::PageWalker(const WalkerParams& p, PhysMem& mem, MemoryHierarchy& caches, Stats& stats,
                       pg::WalkOptions opt)
    : isa_(p.isa),
      overhead_(p.overhead),
      mem_(mem),
      caches_(caches),
      opt_(opt),
      psc_(pg::geometry(p.isa), p.psc, WalkerParams::level_names(p.isa), stats),
      busy_until_(std::max<uint32_t>(p.count, 1), 0) {
  StatGroup g(stats, "walker");
  walks_ = &g.counter("walks", "Page walks (TLB misses that reached a walker)", "walks");
  walks_speculative_ = &g.counter(
      "walks_speculative", "Walks requested by an access that had not retired", "walks");
  walks_faulted_ = &g.counter("walks_faulted",
                              "Walks that found no valid translation (not present, access flag)",
                              "walks");
  cycles_ = &g.counter("cycles", "Sum of walk durations, walker taken to result", "cycles");
  wait_cycles_ = &g.counter("wait_cycles", "Sum of cycles walks waited for a free walker",
                            "cycles");
  mem_reads_ = &g.counter("mem_reads", "Paging-structure entries read through the caches",
                          "reads");
}

uint64_t PageWalker::earliest_free() const {
  return *std::min_element(busy_until_.begin(), busy_until_.end());
}

WalkOutcome PageWalker::walk(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t now,
                             bool speculative) {
  WalkOutcome out;
  // (a) the walker free first; ties go to the lowest index, so the choice is deterministic.
  auto it = std::min_element(busy_until_.begin(), busy_until_.end());
  out.start = std::max(now, *it);
  out.speculative = speculative;

  // (b) the deepest cached table entry: levels below it are read from memory.
  const pg::Geometry& g = pg::geometry(isa_);
  bool skipped = false;  // a PSC entry an older walk has not read yet
  unsigned hit = psc_.lookup(va, asid, nullptr, out.start, &skipped);
  out.psc_level = hit ? int(hit) : -1;
  const unsigned top = hit ? hit - 1 : g.levels - 1;  // the first level read from memory

  // (d) the functional walk (sets A/AF in memory as the architecture does).
  if (opt_.history) opt_.at_ps = uint64_t(double(out.start) * 1000.0 / ghz_ + 0.5);
  out.walk = pg::walk(isa_, mem_, root_pa, va, opt_);

  // (c) timing of the entries read, in walk order; (d) the PSC learns the table entries read.
  uint64_t cycles = overhead_;
  for (unsigned i = 0; i < out.walk.nsteps; ++i) {
    const pg::WalkStep& st = out.walk.steps[i];
    if (st.level > top) continue;  // supplied by the PSC
    cycles += caches_.access(st.entry_pa, false, out.start + cycles);
    ++out.mem_reads;
    if (st.level >= 1 && psc_.holds_level(st.level)) {
      pg::HwEntry h = pg::decode(isa_, st.entry, st.level);
      // (The lookup missed at every level read from memory, unless it skipped an entry on its
      // way; the entry is there from the cycle this read completes.) Not an entry read from the
      // past, or one below it (WalkOutcome::cacheable).
      if (h.valid && h.table && int(st.level) > out.walk.past_level)
        psc_.fill(st.level, va, asid, h.pa, !skipped, out.start + cycles);
    }
  }

  // (e)
  out.done = out.start + cycles;
  *it = out.done;
  walks_->inc();
  if (speculative) walks_speculative_->inc();
  if (out.walk.result != pg::Walk::Ok) walks_faulted_->inc();
  cycles_->inc(cycles);
  wait_cycles_->inc(out.start - now);
  mem_reads_->inc(out.mem_reads);
  return out;
}

}  // namespace mmusim::hw
