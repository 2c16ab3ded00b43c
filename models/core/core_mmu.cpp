// SPDX-License-Identifier: GPL-2.0-only
#include "models/core/core_mmu.hpp"

namespace mmusim::hw {

namespace {
TlbParams tlb(const std::string& name, std::initializer_list<const char*> arrays) {
  TlbParams t;
  t.name = name;
  for (const char* a : arrays) t.arrays.push_back(TlbArrayParams{a, 0, 0, "", 0});
  return t;
}
// What every x86 core here has: the PML4E, PDPTE and PDE caches of SDM Vol 3A §4.10.3 (our
// levels 3, 2, 1), and the L1D, L2 and LLC.
void x86_walker_and_caches(CoreMmuParams& p) {
  p.walker.isa = pg::Isa::x86_64;
  p.walker.psc = {{"pml4e", 0, 0, uint8_t(1u << 3)}, {"pdpte", 0, 0, uint8_t(1u << 2)},
                  {"pde", 0, 0, uint8_t(1u << 1)}};
  p.caches.l1d.name = "l1d";
  p.caches.l2.name = "l2";
  p.caches.llc.name = "llc";
}
}  // namespace

// The structure only: which TLBs, arrays and paging-structure caches the core has, their names
// and ISA-fixed facts (the levels a PSC array holds). Every value (sizes, ways, page sizes,
// latencies, core widths, rules) is stated in configs/platforms/i7-12700kf.cfg and
// neoverse-n1.cfg, with its source; the platform reads them (platforms/platform.cpp).
CoreMmuParams CoreMmuParams::golden_cove_structure() {
  CoreMmuParams p;
  // CPUID leaf 0x18 of the i7-12700K: a load DTLB per page size, a store DTLB, a two-array STLB.
  p.l1 = {tlb("dtlb_load", {"4k", "2m", "1g"}), tlb("dtlb_store", {""})};
  // CPUID leaf 0x18 subleaves 1-2: an instruction TLB per page size (4K; 2M/4M).
  p.itlb = tlb("itlb", {"4k", "2m"});
  p.has_itlb = true;
  p.l2 = tlb("stlb", {"a", "b"});
  x86_walker_and_caches(p);
  return p;
}

// Haswell (the Xeon E5-2699 v3's cores): one L1 DTLB for loads and stores with an array per page
// size (4K; 2M/4M; 1G), an instruction TLB per page size (4K; 2M/4M), one STLB that holds 4K and
// 2M translations (1G ones are not cached there) [docs/research-haswell-ep.md].
CoreMmuParams CoreMmuParams::haswell_structure() {
  CoreMmuParams p;
  p.l1 = {tlb("dtlb", {"4k", "2m", "1g"})};
  p.itlb = tlb("itlb", {"4k", "2m"});
  p.has_itlb = true;
  p.l2 = tlb("stlb", {""});
  x86_walker_and_caches(p);
  return p;
}

// Gracemont (the i7-12700's E-cores), from CPUID leaf 0x18 of an Alder Lake E-core
// (docs/research-smt-ecores.md §2.1): one L1 DTLB for loads and stores (48 entries, fully
// associative, 4K only: a 2M page is cached as the touched 4K fragment, Tlb::placement()), a 4K
// instruction TLB, and a second level of two arrays: 2048 entries for 4K and 2M, 8 for 1G.
CoreMmuParams CoreMmuParams::gracemont_structure() {
  CoreMmuParams p;
  p.l1 = {tlb("dtlb", {""})};
  p.itlb = tlb("itlb", {""});
  p.has_itlb = true;
  p.l2 = tlb("stlb", {"4k_2m", "1g"});
  x86_walker_and_caches(p);
  return p;
}

CoreMmuParams CoreMmuParams::neoverse_n1_structure() {
  CoreMmuParams p;
  // Cortex-A76 TRM §A5.2: one L1 DTLB for loads and stores, a unified L2 TLB.
  p.l1 = {tlb("l1_dtlb", {""})};
  // Cortex-A76 TRM §A5.2.1: the L1 instruction TLB, one fully associative array.
  p.itlb = tlb("l1_itlb", {""});
  p.has_itlb = true;
  p.l2 = tlb("l2_tlb", {""});
  p.walker.isa = pg::Isa::arm64;
  // One walk cache for the table descriptors of levels 1-3 (see psc.hpp).
  p.walker.psc = {{"walk_cache", 0, 0, uint8_t((1u << 1) | (1u << 2) | (1u << 3))}};
  p.caches.l1d.name = "l1d";
  p.caches.l2.name = "l2";
  p.caches.llc.name = "llc";
  return p;
}

CoreMmu::CoreMmu(const CoreMmuParams& p, pg::Isa isa, PhysMem& mem, double ghz, Stats& stats,
                 TraceContext* trace, Cache* shared_llc, Cache* shared_l2)
    : isa_(isa), mem_(mem), ghz_(ghz), trace_(trace) {
  caches_ = std::make_unique<MemoryHierarchy>(p.caches, ghz, stats, shared_llc, shared_l2);
  l1_load_ = std::make_unique<Tlb>(p.l1.at(0), stats, trace);
  if (p.l1.size() > 1) {
    l1_store_owned_ = std::make_unique<Tlb>(p.l1.at(1), stats, trace);
    l1_store_ = l1_store_owned_.get();
  } else {
    l1_store_ = l1_load_.get();
  }
  if (p.has_itlb) itlb_ = std::make_unique<Tlb>(p.itlb, stats, trace);
  if (p.has_l2) l2_ = std::make_unique<Tlb>(p.l2, stats, trace);
  // The hardware access flag: x86 always sets A; arm64 with FEAT_HAFDBS (HA), else an AF = 0
  // leaf faults.
  pg::WalkOptions wopt;
  wopt.set_accessed = isa == pg::Isa::x86_64 || p.core.hafdbs;
  walker_ = std::make_unique<PageWalker>(p.walker, mem, *caches_, stats, wopt);
  // Every TLB the maintenance operations reach: the instruction TLB too (x86 INVLPG, #PF and MOV
  // CR3 act on "the TLBs", instruction TLBs included, SDM Vol 3A §4.10.2.2 and §4.10.4.1; arm64
  // TLBI VA*/ASID*/VMALL* on instruction and data entries alike, Arm ARM D8.13).
  std::vector<Tlb*> tlbs;
  tlbs.reserve(4);
  for (Tlb* t : {l1_load_.get(), l1_store_ != l1_load_.get() ? l1_store_ : nullptr, itlb_.get(),
                 l2_.get()})
    if (t) tlbs.push_back(t);
  maint_ = std::make_unique<TranslationCaches>(tlbs, walker_.get());
}

}  // namespace mmusim::hw
