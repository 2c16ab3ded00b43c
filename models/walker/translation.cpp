// SPDX-License-Identifier: GPL-2.0-only
#include "models/walker/translation.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace mmusim::hw {

namespace {

// The leaf level (our numbering, 0 = the PTE level) of a translation cached at size `s`, for the
// syndrome of a permission fault found in a TLB: a 64K contiguous entry is made of level-0 leaves,
// a 2M block is a level-1 leaf, a 1G block a level-2 one.
unsigned cached_leaf_level(PageSize s) {
  return s == PageSize::k1G ? 2 : s == PageSize::k2M ? 1 : 0;
}

}  // namespace

TranslationPath::TranslationPath(Tlb& l1_load, Tlb& l1_store, Tlb* l2, PageWalker& walker,
                                 PhysMem& mem, const TranslationRules& rules, TraceContext* trace,
                                 double ghz, Tlb* itlb)
    : l1_load_(l1_load),
      l1_store_(l1_store),
      itlb_(itlb),
      l2_(l2),
      walker_(walker),
      mem_(mem),
      rules_(rules),
      trace_(trace),
      ghz_(ghz),
      level_names_(WalkerParams::level_names(rules.isa)) {}

// One access through `l1` (the load or store DTLB, or for an instruction fetch the ITLB), the L2
// TLB and the walker. The fetch differs only in what permits it (a user, executable translation)
// and in its syndrome.
template <bool kFetch>
inline __attribute__((always_inline)) TranslateResult TranslationPath::translate_in(
    Tlb& l1, uint64_t va, bool write, uint16_t asid, uint64_t root_pa, uint64_t now,
    uint64_t limit, bool spec, ReplayHint* hint) {
  TranslateResult r;
  const pg::Isa isa = rules_.isa;
  uint64_t when = now + l1.latency();
  // Without cache_faulting_entries no TLB holds a translation a store (a fetch) may not use, and
  // a store that finds a read-only entry (a fetch a non-executable one) looks further (see the
  // header).
  const bool cache_faulting = rules_.cache_faulting_entries;
  auto usable = [&](const TlbEntry* x) {
    return x && (cache_faulting || (kFetch ? x->exec : !write || x->writable));
  };
  if (hint) *hint = ReplayHint{};
  const TlbEntry* e = l1.lookup(va, asid, now);
  const bool l1_missed = !e;
  if (!usable(e)) e = nullptr;
  else r.source = TranslateResult::L1Hit;
  // An entry whose walk is still in flight: the access waits for the walk.
  if (e && e->ready > when) when = e->ready;
  if (!e && l2_) {
    when += l2_->latency();
    if (spec && when >= limit) {
      if (hint && l1_missed) hint->kind = ReplayHint::LateL2;
      return r;
    }
    if (const TlbEntry* e2 = l2_->lookup(va, asid, when); usable(e2)) {
      const bool pending = e2->ready > when;
      TlbEntry copy = *e2;
      copy.speculative = spec;
      e = l1.fill(va, copy);
      // (A hit that waits for a walk in flight is not the replay's L2 refill: it is simulated.)
      if (hint && e && l1_missed && e->size == copy.size && !pending) {
        hint->kind = ReplayHint::L2Refill;
        hint->l2_slot = l2_->slot_of(e2);
      }
      if (!e) e = e2;
      if (pending) when = e2->ready;
      r.source = TranslateResult::L2Hit;
    }
  }
  if (!e) {
    const uint64_t start = std::max(when, walker_.earliest_free());
    if (spec && start >= limit) return r;
    r.source = TranslateResult::Walked;
    WalkOutcome& wo = last_walk_;
    wo = walker_.walk(va, asid, root_pa, when, spec);
    when = wo.done;
    if (trace_ && trace_->on()) trace_walk(va, wo);
    pg::Walk& w = wo.walk;
    if (pg::walk_faults(w)) {
      // Not present, an access-flag fault without HA, a supervisor page: never cached.
      r.ok = !spec || when < limit;
      r.ready = when;
      r.fault = true;
      r.syndrome = kFetch ? pg::fetch_fault_syndrome(isa, w.result, w.level)
                          : pg::fault_syndrome(isa, w.result, w.level, write);
      return r;
    }
    // arm64 FEAT_HAFDBS: a retiring write to a writable-clean leaf is completed by the hardware
    // (D8.5); a speculative one leaves the PTE alone (and caches it read-only).
    if (write && !w.writable && !spec && pg::write_permitted(isa, w, rules_.hafdbs))
      pg::hw_mark_dirty(isa, mem_, w, true);
    walked_ = translation_from_walk(w, va, asid, spec);
    walked_.ready = when;  // the TLBs have it when the walk is done
    const bool permits = kFetch ? walked_.exec : !write || walked_.writable;
    const bool fill = (!spec || when < limit || rules_.walk_squash == WalkSquash::complete) &&
                      (permits || cache_faulting) && wo.cacheable();
    if (fill) {
      if (l2_) {
        const TlbEntry* f = l2_->fill(va, walked_);
        if (hint && f) hint->l2_slot = l2_->slot_of(f);
      }
      l1.fill(va, walked_);
    }
    e = &walked_;
  }
  r.ok = !spec || when < limit;
  r.ready = when;
  r.pa = e->pa(va);
  r.entry = e;
  if (kFetch) {
    // Execute-disable (x86 XD, arm64 UXN): a permission fault on the fetch, taken when the
    // instruction would execute (SDM Vol 3A §4.6; Arm ARM D8.5).
    if (!e->exec) {
      r.fault = true;
      r.syndrome = pg::fetch_fault_syndrome(isa, pg::Walk::Ok, cached_leaf_level(e->size));
    }
  } else if (write && !e->writable) {
    r.fault = true;
    r.syndrome = pg::fault_syndrome(isa, pg::Walk::Ok, cached_leaf_level(e->size), true);
  } else if (write && !e->dirty && isa == pg::Isa::x86_64) {
    r.need_dirty = true;
  }
  return r;
}

TranslateResult TranslationPath::translate(uint64_t va, bool write, uint16_t asid, uint64_t root_pa,
                                           uint64_t now, uint64_t limit, bool spec, ReplayHint* hint) {
  return translate_in<false>(write ? l1_store_ : l1_load_, va, write, asid, root_pa, now, limit,
                             spec, hint);
}

TranslateResult TranslationPath::fetch(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t now,
                                       uint64_t limit, bool spec) {
  MMUSIM_CHECK(itlb_, "an instruction fetch translated by a core without an instruction TLB");
  return translate_in<true>(*itlb_, va, false, asid, root_pa, now, limit, spec, nullptr);
}

uint64_t TranslationPath::assist_dirty(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t pa) {
  pg::Walk w = pg::walk(rules_.isa, mem_, root_pa, va);
  if (w.result == pg::Walk::Ok && pg::hw_mark_dirty(rules_.isa, mem_, w, rules_.hafdbs)) {
    TlbEntry t = translation_from_walk(w, va, asid, false);
    if (l2_) l2_->fill(va, t);
    l1_store_.fill(va, t);
    return w.pa(va);
  }
  return pa;
}

// page_walk_start at the cycle a walker took the walk, page_walk_done when its result is known
// (a pair: Perfetto shows it as an async slice; walks of several walkers overlap).
void TranslationPath::trace_walk(uint64_t va, const WalkOutcome& wo) {
  static const char* const kResult[] = {"ok", "not_present", "access_flag"};
  std::string_view from = "root";
  if (wo.psc_level >= 0) from = level_names_.at(size_t(wo.psc_level));
  trace_->trace->event(cycles_to_ps(wo.start, ghz_), trace_->cpu, trace_->task, "page_walk_start",
                       {TraceField::hex("address", va), TraceField::dec("spec", wo.speculative),
                        TraceField::str("from", from)});
  trace_->trace->event(cycles_to_ps(wo.done, ghz_), trace_->cpu, trace_->task, "page_walk_done",
                       {TraceField::hex("address", va), TraceField::str("result", kResult[wo.walk.result]),
                        TraceField::dec("reads", wo.mem_reads)});
}

}  // namespace mmusim::hw
