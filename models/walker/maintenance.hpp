// SPDX-License-Identifier: GPL-2.0-only
// The architectural effect of each TLB-maintenance operation on one core's translation caches
// (its TLBs, the instruction TLB among them, and its walker's paging-structure caches), so that the rules live in the models and
// the platform only forwards the kernel's MmuHw calls (base/tlb_maintenance.hpp, the seam both
// sides see) and the core its page faults here.
//
//   x86 INVLPG va           TLB entries of any size covering va (PCID); ALL PSC entries of the
//                           PCID (SDM Vol 3A §4.10.4.1)
//   x86 #PF at va           TLB entries covering va (PCID); the PSC entries a walk for va would
//                           use (§4.10.4.1: "so the page-fault exception will not recur")
//   x86 MOV CR3 (flush)     every entry of the PCID, TLBs and PSCs
//   arm64 TLBI VALE1        TLB entries covering va (ASID); the walk cache is kept (last level)
//   arm64 TLBI VAE1         the same, and the walk-cache entries for va
//   arm64 TLBI ASIDE1       every entry of the ASID
//   arm64 TLBI VMALLE1      everything
// An arm64 Permission fault invalidates nothing (Arm ARM D8.15 I_WJLXV): there is no call for it.
// "TLB entries" are those of every TLB, the instruction TLB's included: the SDM states the x86
// rules for "the TLBs", which may include TLBs "only for instruction fetches" (§4.10.2.2), so a
// #PF removes the faulting address's entries there too (and only those: a data fault leaves the
// code page's entry), INVLPG the page's and MOV CR3 every non-global one of the PCID; the arm64
// TLBI VA*/ASID*/VMALL* operations apply to instruction and data entries alike (Arm ARM D8.13).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/tlb_maintenance.hpp"
#include "models/tlb/tlb.hpp"
#include "models/walker/walker.hpp"

namespace mmusim::hw {

class TranslationCaches {
 public:
  TranslationCaches(std::vector<Tlb*> tlbs, PageWalker* walker)
      : tlbs_(std::move(tlbs)), walker_(walker) {}

  // The instruction TLB (one of tlbs(); null: none watched) and what to call after an operation
  // took one of its entries or made one pending again (Tlb::removals() moved): the core's front
  // end, which looks the ITLB up only when the code page changes (OooCore::issue).
  // `who` names the watcher (an SMT core has one per hardware thread: each front end is told);
  // a null `on_loss` stops its watch.
  void watch_itlb(const Tlb* itlb, std::function<void()> on_loss, const void* who = nullptr) {
    for (auto it = watchers_.begin(); it != watchers_.end(); ++it)
      if (it->first == who) {
        watchers_.erase(it);
        break;
      }
    if (on_loss) {
      itlb_ = itlb;
      watchers_.emplace_back(who, std::move(on_loss));
    }
    if (watchers_.empty()) itlb_ = nullptr;
  }

  // Each returns the number of TLB entries removed (PSC entries are counted in their stats).
  unsigned x86_invlpg(uint16_t pcid, uint64_t va) {
    const ItlbWatch w(*this);
    unsigned n = 0;
    for (Tlb* t : tlbs_) n += t->invalidate_page(va, pcid, "invlpg");
    if (walker_) walker_->invalidate_asid(pcid);
    return n;
  }
  // At the flush, cycle `at`: what a walk still in flight then brings comes after it and stays
  // (core.walk_squash = complete).
  unsigned x86_page_fault(uint16_t pcid, uint64_t va, uint64_t at = Tlb::kArrived) {
    const ItlbWatch w(*this);
    unsigned n = 0;
    for (Tlb* t : tlbs_) n += t->invalidate_page(va, pcid, "page_fault", at);
    if (walker_) walker_->invalidate_va(va, pcid, at);
    return n;
  }
  unsigned x86_flush_pcid(uint16_t pcid) {
    const ItlbWatch w(*this);
    unsigned n = 0;
    for (Tlb* t : tlbs_) n += t->invalidate_asid(pcid, "cr3");
    if (walker_) walker_->invalidate_asid(pcid);
    return n;
  }
  unsigned arm64_tlbi(TlbiOp op, uint16_t asid, uint64_t va) {
    const ItlbWatch w(*this);
    unsigned n = 0;
    switch (op) {
      case TlbiOp::VALE1:
        for (Tlb* t : tlbs_) n += t->invalidate_page(va, asid, "tlbi_vale1");
        break;
      case TlbiOp::VAE1:
        for (Tlb* t : tlbs_) n += t->invalidate_page(va, asid, "tlbi_vae1");
        if (walker_) walker_->invalidate_va(va, asid);
        break;
      case TlbiOp::ASIDE1:
        for (Tlb* t : tlbs_) n += t->invalidate_asid(asid, "tlbi_aside1");
        if (walker_) walker_->invalidate_asid(asid);
        break;
      case TlbiOp::VMALLE1:
        for (Tlb* t : tlbs_) n += t->invalidate_all("tlbi_vmalle1");
        if (walker_) walker_->invalidate_all();
        break;
    }
    return n;
  }

  const std::vector<Tlb*>& tlbs() const { return tlbs_; }
  PageWalker* walker() const { return walker_; }

 private:
  // Around one operation: calls on_itlb_loss_ if the watched ITLB's removals() moved.
  struct ItlbWatch {
    explicit ItlbWatch(TranslationCaches& c) : c(c), before(c.itlb_ ? c.itlb_->removals() : 0) {}
    ~ItlbWatch() {
      if (c.itlb_ && c.itlb_->removals() != before)
        for (auto& w : c.watchers_) w.second();
    }
    TranslationCaches& c;
    const uint64_t before;
  };

  std::vector<Tlb*> tlbs_;
  PageWalker* walker_;
  const Tlb* itlb_ = nullptr;
  std::vector<std::pair<const void*, std::function<void()>>> watchers_;
};

}  // namespace mmusim::hw
