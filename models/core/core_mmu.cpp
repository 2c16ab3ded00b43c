// SPDX-License-Identifier: GPL-2.0-only
#include "models/core/core_mmu.hpp"

namespace mmusim::hw {

CoreMmuParams CoreMmuParams::golden_cove() {
  CoreMmuParams p;
  p.l1 = {TlbParams::golden_cove_dtlb_load(), TlbParams::golden_cove_dtlb_store()};
  p.l2 = TlbParams::golden_cove_stlb();
  p.walker = WalkerParams::golden_cove();
  p.caches = HierarchyParams::golden_cove();
  p.core = CoreParams::golden_cove();
  return p;
}

CoreMmuParams CoreMmuParams::neoverse_n1() {
  CoreMmuParams p;
  p.l1 = {TlbParams::neoverse_n1_l1_dtlb()};
  p.l2 = TlbParams::neoverse_n1_l2_tlb();
  p.walker = WalkerParams::neoverse_n1();
  p.caches = HierarchyParams::neoverse_n1();
  p.core = CoreParams::neoverse_n1();
  return p;
}

CoreMmu::CoreMmu(const CoreMmuParams& p, pg::Isa isa, PhysMem& mem, double ghz, Stats& stats,
                 TraceContext* trace, Cache* shared_llc)
    : isa_(isa), mem_(mem), ghz_(ghz), trace_(trace) {
  caches_ = std::make_unique<MemoryHierarchy>(p.caches, ghz, stats, shared_llc);
  l1_load_ = std::make_unique<Tlb>(p.l1.at(0), stats, trace);
  if (p.l1.size() > 1) {
    l1_store_owned_ = std::make_unique<Tlb>(p.l1.at(1), stats, trace);
    l1_store_ = l1_store_owned_.get();
  } else {
    l1_store_ = l1_load_.get();
  }
  if (p.has_l2) l2_ = std::make_unique<Tlb>(p.l2, stats, trace);
  // The hardware access flag: x86 always sets A; arm64 with FEAT_HAFDBS (HA), else an AF = 0
  // leaf faults.
  pg::WalkOptions wopt;
  wopt.set_accessed = isa == pg::Isa::x86_64 || p.core.hafdbs;
  walker_ = std::make_unique<PageWalker>(p.walker, mem, *caches_, stats, wopt);
  std::vector<Tlb*> tlbs;
  tlbs.reserve(3);
  for (Tlb* t : {l1_load_.get(), l1_store_ != l1_load_.get() ? l1_store_ : nullptr, l2_.get()})
    if (t) tlbs.push_back(t);
  maint_ = std::make_unique<TranslationCaches>(tlbs, walker_.get());
}

}  // namespace mmusim::hw
