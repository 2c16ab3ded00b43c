// SPDX-License-Identifier: GPL-2.0-only
// The translation path of a core: the L1 TLBs (x86: dtlb_load and dtlb_store; arm64: one l1_dtlb
// for both), the instruction TLB (x86 itlb, arm64 l1_itlb) for the front end's fetches, an
// optional L2 TLB (stlb, l2_tlb) and the page walker, which the two sides share. Both cores
// translate every load and store through it (OooCore::translate) and every code page the front
// end reaches (TranslationPath::fetch, from OooCore::issue), and the exact-latency tests drive it
// as the cores do, built by the same builder (models/core/core_mmu.hpp: CoreMmu).
//
// Timing, for an access requested at cycle `now`:
//   L1 hit:  now + l1.latency
//   L2 hit:  now + l1.latency + l2.latency                     (L1 filled from the L2 entry)
//   walk:    requested at now + l1.latency + l2.latency, started when a walker is free; ready at
//            the walk's done cycle (L2 and L1 filled from the walk if the rules below allow; the
//            entries are there from that cycle: TlbEntry::ready)
//   a hit on an entry whose walk is still in flight (the same 4K page): ready when that walk is
//            done (the miss joins the walk); another page it covers misses (models/walker/README)
//
// The architectural rules it applies (TranslationRules, from the core's parameters):
//  - A walk that finds no valid translation for a user access (x86 not present or supervisor;
//    arm64 translation or access-flag fault) faults and fills nothing: such entries are never
//    cached (SDM Vol 3A §4.10.2.3, Arm ARM D8.16; pg::walk_faults).
//  - A translation that does not permit the access (a store through a read-only entry) faults; it
//    IS cached (read-only included), unless `cache_faulting_entries` is off. Then no TLB ever
//    holds it, and a store that finds a read-only entry (a load's fill) does not fault on it but
//    looks further and walks again, as QEMU's softmmu refills on a write miss (tlb_fill) before it
//    raises the fault.
//  - `speculative` accesses (younger than a faulting micro-op, squashed at the flush at cycle
//    `limit`): nothing that would happen at or after the limit takes effect. An L2 lookup or a
//    walk that would start at or after it does not happen (the access is not translated: ok is
//    false); a walk that started before it but finishes at or after it fills the TLBs only with
//    `walk_squash = complete` (cancel: its fills are dropped).
//  - Hardware A/D updates: the walker sets A/AF (arm64 AF only with HA; models/walker/walker.hpp).
//    arm64 FEAT_HAFDBS (`hafdbs`): a retiring store's walk to a writable-clean leaf makes it
//    writable-dirty (Arm ARM D8.5); a speculative one does not write the PTE. x86: a store
//    through a writable entry with D = 0 needs the microcode assist at retirement (need_dirty;
//    assist_dirty() does its walk and refill).
//  - The syndrome of a fault is pg::fault_syndrome (x86 #PF error code, arm64 ESR_EL1), the same
//    function the functional platform's UserAccess uses.
//
// Beside the architecture, and only if asked (a ReplayHint*), the path says what the access did
// to the L2 TLB, for the core's run-ahead replay (host speed, not hardware; RunaheadReuse::record_position).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/hwwalk.hpp"
#include "base/physmem.hpp"
#include "models/tlb/tlb.hpp"
#include "models/walker/walker.hpp"

namespace mmusim::hw {

// Page walks in flight when the pipeline is flushed: complete (and fill the TLBs) or cancel.
enum class WalkSquash : uint8_t { complete, cancel };

// What the core's configuration says about translation (core.cache_faulting_entries,
// core.walk_squash, core.hafdbs; the ISA from the platform).
struct TranslationRules {
  pg::Isa isa = pg::Isa::x86_64;
  bool cache_faulting_entries = true;
  WalkSquash walk_squash = WalkSquash::complete;
  bool hafdbs = true;
};

struct TranslateResult {
  // Where the translation came from; None: nothing happened before the limit (the L2 lookup or
  // the walk would have started at or after it).
  enum Source : uint8_t { None, L1Hit, L2Hit, Walked } source = None;
  bool ok = false;          // obtained before the limit (always, for a non-speculative access)
  bool fault = false;       // the access faults (taken at retirement)
  bool need_dirty = false;  // x86: a store through a writable entry with D = 0 (the assist)
  uint64_t ready = 0;       // cycle the translation (or the fault) is known
  uint64_t syndrome = 0;    // of the fault: x86 #PF error code, arm64 ESR_EL1
  uint64_t pa = 0;          // the physical address (when a translation was found)
  // The translation used: a TLB's entry, or after a walk the path's copy of the walk's translation
  // (valid until the next walk, whether or not a TLB kept it). Null: none (a walk fault, None).
  const TlbEntry* entry = nullptr;
};

// Host-speed bookkeeping for the run-ahead replay (RunaheadReuse, models/core/runahead_reuse.hpp), not architecture:
// what a translation did to the L2 TLB. Filled only when the caller passes one.
struct ReplayHint {
  enum Kind : uint8_t {
    Other,
    L2Refill,  // L1 miss, L2 hit, the L1 filled from the L2 entry at the same size
    LateL2,    // L1 miss, the L2 lookup would have been at or after the limit
  } kind = Other;
  uint32_t l2_slot = Tlb::kNoSlot;  // the L2 slot that translated it (L2Refill) or that the walk filled
};

class TranslationPath {
 public:
  // `l1_load` and `l1_store` may be the same TLB (arm64); `l2` may be null. `trace` (may be null)
  // gets the page_walk_start/done events, at `ghz` cycles per ns.
  // `itlb` (may be null: no instruction-side translation) is the instruction TLB that fetch()
  // looks up first; it misses to the same L2 TLB and walker.
  TranslationPath(Tlb& l1_load, Tlb& l1_store, Tlb* l2, PageWalker& walker, PhysMem& mem,
                  const TranslationRules& rules, TraceContext* trace, double ghz,
                  Tlb* itlb = nullptr);

  // The translation of an access (`write`: a store) to `va` requested at cycle `now`. With
  // `speculative`, nothing at or after `limit` takes effect (see above); a non-speculative access
  // ignores `limit`. Counts TLB hits, misses, fills and walks in their statistics.
  // (The simulator's hottest code: the TLB lookups are inlined into it, the trace is a call.)
  __attribute__((flatten)) TranslateResult translate(uint64_t va, bool write, uint16_t asid,
                                                     uint64_t root_pa, uint64_t now, uint64_t limit,
                                                     bool speculative, ReplayHint* hint = nullptr);
  // The same for an access that has retired or will (no limit).
  TranslateResult translate(uint64_t va, bool write, uint16_t asid, uint64_t root_pa, uint64_t now) {
    return translate(va, write, asid, root_pa, now, 0, false, nullptr);
  }
  // The translation of an instruction fetch from `va` (the front end, OooCore::issue): the ITLB,
  // the L2 TLB, a walk, with the same timing and speculation rules as a load. It faults when no
  // user translation exists or it does not permit execution (x86 XD, arm64 UXN), with the fetch
  // syndrome (pg::fetch_fault_syndrome); a walk fills the L2 TLB and the ITLB.
  __attribute__((flatten)) TranslateResult fetch(uint64_t va, uint16_t asid, uint64_t root_pa,
                                                 uint64_t now, uint64_t limit, bool speculative);
  // x86 D-flag assist of a store with need_dirty, at retirement: the walk that sets D, then the
  // L2 and the store's L1 hold the dirty translation. Returns the physical address the store
  // writes (`pa` if the PTE no longer permits the write: the store writes through its stale entry).
  uint64_t assist_dirty(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t pa);

  // The last walk (valid after a translate() whose source was Walked).
  const WalkOutcome& last_walk() const { return last_walk_; }
  const TranslationRules& rules() const { return rules_; }
  Tlb& l1(bool write) { return write ? l1_store_ : l1_load_; }
  Tlb* itlb() { return itlb_; }
  Tlb* l2() { return l2_; }
  PageWalker& walker() { return walker_; }

 private:
  __attribute__((noinline, cold)) void trace_walk(uint64_t va, const WalkOutcome& wo);
  template <bool kFetch>
  TranslateResult translate_in(Tlb& l1, uint64_t va, bool write, uint16_t asid, uint64_t root_pa,
                               uint64_t now, uint64_t limit, bool speculative, ReplayHint* hint);

  Tlb& l1_load_;
  Tlb& l1_store_;
  Tlb* itlb_;
  Tlb* l2_;
  PageWalker& walker_;
  PhysMem& mem_;
  TranslationRules rules_;
  TraceContext* trace_;
  double ghz_;
  std::vector<std::string> level_names_;  // for the trace (WalkerParams::level_names)
  WalkOutcome last_walk_;
  TlbEntry walked_;  // the last walk's translation
};

}  // namespace mmusim::hw
