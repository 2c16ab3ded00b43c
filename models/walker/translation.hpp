// SPDX-License-Identifier: GPL-2.0-only
// One data-side translation path: an L1 TLB, an optional L2 TLB and the page walker, composed the
// same way for both cores (x86: dtlb_load or dtlb_store -> stlb -> walker; arm64: l1_dtlb ->
// l2_tlb -> walker). The core asks it for a translation and gets the cycle it is known and the
// entry to check permissions against; faults and retirement stay the core's business.
//
// Timing, for a request at cycle `now`:
//   L1 hit:  now + l1.latency
//   L2 hit:  now + l1.latency + l2.latency                     (L1 filled from the L2 entry)
//   walk:    requested at now + l1.latency + l2.latency; ready at the walk's done cycle
//            (L2 and L1 filled from the walk if it found a translation)
// A walk that found no valid translation (x86 not present; arm64 translation or access-flag
// fault) fills nothing: such entries are never cached (SDM Vol 3A §4.10.2.3, Arm ARM D8.16). A
// translation that does not permit the access IS cached (read-only included).
#pragma once

#include <cstdint>

#include "models/tlb/tlb.hpp"
#include "models/walker/walker.hpp"

namespace mmusim::hw {

struct TranslateResult {
  enum Source : uint8_t { L1Hit, L2Hit, Walked } source = L1Hit;
  uint64_t ready = 0;               // cycle the translation (or the walk's fault) is known
  const TlbEntry* entry = nullptr;  // the translation to use; null: the walk found none
  WalkOutcome walk;                 // valid when source == Walked
};

class TranslationPath {
 public:
  TranslationPath(Tlb& l1, Tlb* l2, PageWalker& walker) : l1_(l1), l2_(l2), walker_(walker) {}

  TranslateResult translate(uint64_t va, uint16_t asid, uint64_t root_pa, uint64_t now,
                            bool speculative) {
    TranslateResult r;
    uint64_t t = now + l1_.latency();
    if ((r.entry = l1_.lookup(va, asid))) {
      r.source = TranslateResult::L1Hit;
      r.ready = t;
      return r;
    }
    if (l2_) {
      t += l2_->latency();
      if (const TlbEntry* e = l2_->lookup(va, asid)) {
        TlbEntry copy = *e;
        copy.speculative = speculative;
        const TlbEntry* l1e = l1_.fill(va, copy);
        r.source = TranslateResult::L2Hit;
        r.entry = l1e ? l1e : e;
        r.ready = t;
        return r;
      }
    }
    r.source = TranslateResult::Walked;
    r.walk = walker_.walk(va, asid, root_pa, t, speculative);
    r.ready = r.walk.done;
    if (r.walk.walk.result == pg::Walk::Ok) {
      TlbEntry tr = translation_from_walk(r.walk.walk, va, asid, speculative);
      const TlbEntry* l2e = l2_ ? l2_->fill(va, tr) : nullptr;
      const TlbEntry* l1e = l1_.fill(va, tr);
      r.entry = l1e ? l1e : l2e;
    }
    return r;
  }

  Tlb& l1() { return l1_; }
  Tlb* l2() { return l2_; }
  PageWalker& walker() { return walker_; }

 private:
  Tlb& l1_;
  Tlb* l2_;
  PageWalker& walker_;
};

}  // namespace mmusim::hw
