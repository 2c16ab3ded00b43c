// SPDX-License-Identifier: GPL-2.0-only
// The memory side of one core, assembled from its parameters: the data caches, the L1 TLBs
// (x86: dtlb_load + dtlb_store; arm64: one l1_dtlb), the instruction TLB (x86: itlb; arm64:
// l1_itlb), the L2 TLB (stlb / l2_tlb, shared by both sides), the page walker
// with its paging-structure caches, the TLB-maintenance rules over them, and the translation path
// through them. The platform's cores (CoreModule) and the tests build it the same way, so that a
// test of the translation path tests what the cores run.
#pragma once

#include <memory>
#include <vector>

#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/core/ooo_core.hpp"
#include "models/tlb/tlb.hpp"
#include "models/walker/maintenance.hpp"
#include "models/walker/translation.hpp"
#include "models/walker/walker.hpp"

namespace mmusim::hw {

// The MMU of one core with its caches and core parameters: x86 = dtlb_load + dtlb_store (data)
// and itlb (instructions) -> stlb -> walker; arm64 = l1_dtlb and l1_itlb -> l2_tlb -> walker.
struct CoreMmuParams {
  std::vector<TlbParams> l1;   // one (shared by loads and stores) or two (load, store)
  TlbParams itlb;              // the instruction TLB (has_itlb)
  bool has_itlb = false;
  TlbParams l2;
  bool has_l2 = true;
  WalkerParams walker;
  HierarchyParams caches;
  CoreParams core;

  // The structure of the hardware platforms (i7-12700kf: Golden Cove P-core; neoverse-n1;
  // xeon-e5-2699v3: Haswell-EP):
  // which TLBs, arrays and PSC arrays exist. No value: those are the platform config files'
  // (platforms/hw_platform.hpp platform_hw_params gives a preset with them read in).
  static CoreMmuParams golden_cove_structure();
  static CoreMmuParams neoverse_n1_structure();
  static CoreMmuParams haswell_structure();
  // The i7-12700's Gracemont E-core (its keys are the `ecore.`-prefixed family, hw_platform.hpp
  // visit_ecore_params).
  static CoreMmuParams gracemont_structure();
};

class CoreMmu {
 public:
  // `shared_llc`: the last-level cache all cores share (null: this core has its own). `trace`
  // (may be null) is where the TLBs' and the walks' events go. `shared_l2`: the L2 of this
  // core's cluster (null: its own; MemoryHierarchy::set_cluster).
  CoreMmu(const CoreMmuParams& p, pg::Isa isa, PhysMem& mem, double ghz, Stats& stats,
          TraceContext* trace, Cache* shared_llc = nullptr, Cache* shared_l2 = nullptr);

  MemoryHierarchy& caches() { return *caches_; }
  Tlb& l1_load() { return *l1_load_; }
  Tlb& l1_store() { return *l1_store_; }  // the same TLB as l1_load() on arm64
  Tlb* itlb() { return itlb_.get(); }     // null: no instruction-side translation
  Tlb* l2() { return l2_.get(); }
  PageWalker& walker() { return *walker_; }
  // What each TLB-maintenance operation does to the TLBs and paging-structure caches.
  TranslationCaches& maintenance() { return *maint_; }
  // The translation path through these TLBs and this walker under `rules` (the core's
  // CoreParams::translation_rules): what OooCore translates with.
  // `trace`: where the path's walk events go (null: this CoreMmu's context; an SMT sibling sharing
  // it passes its own).
  TranslationPath translation_path(const TranslationRules& rules, TraceContext* trace = nullptr) {
    return TranslationPath(*l1_load_, *l1_store_, l2_.get(), *walker_, mem_, rules,
                           trace ? trace : trace_, ghz_, itlb_.get());
  }
  // SMT: the thread running now on a core whose TLBs two threads share attributes their events.
  void set_tlb_trace(TraceContext* t) {
    for (Tlb* x : {l1_load_.get(), l1_store_, itlb_.get(), l2_.get()})
      if (x) x->set_trace(t);
  }
  pg::Isa isa() const { return isa_; }
  double ghz() const { return ghz_; }

 private:
  pg::Isa isa_;
  PhysMem& mem_;
  double ghz_;
  TraceContext* trace_;
  std::unique_ptr<MemoryHierarchy> caches_;
  std::unique_ptr<Tlb> l1_load_, l1_store_owned_, itlb_, l2_;
  Tlb* l1_store_ = nullptr;
  std::unique_ptr<PageWalker> walker_;
  std::unique_ptr<TranslationCaches> maint_;
};

}  // namespace mmusim::hw
