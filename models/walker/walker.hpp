// SPDX-License-Identifier: GPL-2.0-only
// The timed page walker: N walkers in parallel (Golden Cove's page-miss handlers, UARCH A.1), one
// walk description for both ISAs (the paging geometry), paging-structure caches per level.
//
// A walk requested at cycle `now`:
//  (a) waits for a free walker: start = max(now, the earliest cycle a walker is free);
//  (b) finds the deepest PSC hit (a PDE-cache hit leaves only the PTE to read);
//  (c) reads the remaining levels' entries through the MemoryHierarchy, one after the other
//      (each costs that access's load-to-use latency), plus a fixed overhead (walker.overhead);
//  (d) takes the functional result from pg::walk() on the tables in memory, so accessed bits are
//      set exactly as the architecture says, and fills the PSC with the table entries it read;
//  (e) returns start and done cycles; the walker is busy until done.
// No queue model beyond "wait for the earliest free walker": walks are served in call order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/hwwalk.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/walker/psc.hpp"

namespace mmusim::hw {

// walker.count, walker.overhead, walker.psc.<array>.entries / .ways / .replacement. The platforms'
// values are their config files' (platforms/platform.cpp build_schema); a preset gives the arrays.
struct WalkerParams {
  pg::Isa isa = pg::Isa::x86_64;  // fixed by the preset, not a parameter
  uint32_t count = 0;     // the values: the platform config files (a preset gives the arrays)
  uint32_t overhead = 0;
  std::vector<PscArrayParams> psc;

  void visit(Params& p);
  void validate() const;  // throws UserError naming the keys

  // The stats names of the PSC levels: x86 pde/pdpte/pml4e; arm64 the Arm ARM lookup level of
  // the table descriptor (our level 1 = l2, 2 = l1, 3 = l0). Index = our level.
  static std::vector<std::string> level_names(pg::Isa isa);
};

struct WalkOutcome {
  uint64_t start = 0;      // cycle a walker took the walk
  uint64_t done = 0;       // cycle the translation (or the fault) is known
  pg::Walk walk;           // the functional result (result, leaf, permissions, entries read)
  unsigned mem_reads = 0;  // entries read through the memory hierarchy
  int psc_level = -1;      // level of the PSC entry the walk started from; -1: from the root
  bool speculative = false;

  // Whether the TLBs may keep the walk's translation. Not if it read an entry as it was at its
  // time with memory holding a later value (pg::Walk::past_level, base/entry_history.hpp): a core
  // behind the kernel in simulated time walks after, in host order, another CPU's entry that
  // rewrote the entry later in simulated time, and did the TLB maintenance that goes with it
  // then (an unmap's shootdown: flush_tlb_mm_range(), arch_tlbbatch_flush()). On the machine that
  // invalidation reaches this core after the walk and removes what the walk cached; here it has
  // been done already, so a translation cached now would outlive the write (a freed frame still
  // mapped: the invariant checker's item 8). The walk's translation serves its own access only;
  // the next access walks again, and from the write's time on finds what it left. The paging-
  // structure caches keep the entries above the first such level (PageWalker::walk).
  bool cacheable() const { return walk.past_level < 0; }
};

class PageWalker {
 public:
  // `opt`: arm64 hardware access flag (HA) off makes AF=0 leaves fault; x86 always sets A.
  PageWalker(const WalkerParams& p, PhysMem& mem, MemoryHierarchy& caches, Stats& stats,
             pg::WalkOptions opt = {});

  WalkOutcome walk(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t now, bool speculative);

  // The cycle the first walker becomes free (a walk requested at `now` starts at max(now, this)).
  uint64_t earliest_free() const;
  unsigned count() const { return unsigned(busy_until_.size()); }
  uint32_t overhead() const { return overhead_; }
  pg::Isa isa() const { return isa_; }

  // x86 INVLPG, MOV CR3 (SDM §4.10.4.1: all PSC entries of the PCID); arm64 TLBI ASIDE1.
  unsigned invalidate_asid(uint16_t asid) { return psc_.invalidate_asid(asid); }
  // x86 #PF (the entries that would be used for the address); arm64 TLBI VAE1 (not VALE1).
  // `at`: the cycle of the invalidation (PSC entries a walk in flight reads later stay).
  unsigned invalidate_va(uint64_t va, uint16_t asid, uint64_t at = PagingStructureCache::kArrived) {
    return psc_.invalidate_va(va, asid, at);
  }
  unsigned invalidate_all() { return psc_.invalidate_all(); }

  PagingStructureCache& psc() { return psc_; }
  const PagingStructureCache& psc() const { return psc_; }

  // Several cores: read the page tables as they were at the walk's start in simulated time
  // (base/entry_history.hpp), not as the latest kernel entry in host order left them. `ghz`
  // converts the core's cycles to picoseconds.
  void set_entry_history(const EntryHistory* h, double ghz) {
    opt_.history = h;
    ghz_ = ghz;
  }

 private:
  double ghz_ = 0;
  pg::Isa isa_;
  uint32_t overhead_;
  PhysMem& mem_;
  MemoryHierarchy& caches_;
  pg::WalkOptions opt_;
  PagingStructureCache psc_;
  std::vector<uint64_t> busy_until_;
  Counter* walks_;
  Counter* walks_speculative_;
  Counter* walks_faulted_;
  Counter* cycles_;
  Counter* wait_cycles_;
  Counter* mem_reads_;
};

}  // namespace mmusim::hw
