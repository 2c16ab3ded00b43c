// SPDX-License-Identifier: GPL-2.0-only
// A bare arm64 kernel for unit tests of the arch layer: a hand-made mm with one PTE table, a VMA,
// folios from the allocator, and an MmuHw that records every TLBI and DSB. No generic fault, fork
// or teardown path is involved.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "base/stats.hpp"
#include "kernel_mm/arch/arm64/arm64.hpp"
#include "base/tlb_maintenance.hpp"
#include "kernel_mm/kernel.hpp"

namespace arm64test {

struct HwOp {
  enum Kind { Tlbi, Dsb } kind;
  kmm::TlbiOp op = kmm::TlbiOp::VALE1;
  uint16_t asid = 0;
  uint64_t va = 0;
  bool wide = false;  // TLBI: broadcast (IS); DSB: inner shareable
  int cpu = 0;
};

class RecordingHw : public kmm::MmuHw {
 public:
  std::vector<HwOp> ops;
  void x86_invlpg(int, uint16_t, uint64_t) override { FAIL("x86 INVLPG on an arm64 kernel"); }
  void x86_flush_pcid(int, uint16_t) override { FAIL("x86 CR3 flush on an arm64 kernel"); }
  double arm64_tlbi(int cpu, kmm::TlbiOp op, uint16_t asid, uint64_t va, bool broadcast) override {
    ops.push_back({HwOp::Tlbi, op, asid, va, broadcast, cpu});
    return 0;
  }
  void arm64_dsb(int cpu, bool ish) override { ops.push_back({HwOp::Dsb, kmm::TlbiOp::VALE1, 0, 0, ish, cpu}); }

  size_t tlbis(kmm::TlbiOp op, bool broadcast) const {
    size_t n = 0;
    for (auto& o : ops) n += o.kind == HwOp::Tlbi && o.op == op && o.wide == broadcast;
    return n;
  }
  size_t all_tlbis() const {
    size_t n = 0;
    for (auto& o : ops) n += o.kind == HwOp::Tlbi;
    return n;
  }
  size_t dsbs(bool ish) const {
    size_t n = 0;
    for (auto& o : ops) n += o.kind == HwOp::Dsb && o.wide == ish;
    return n;
  }
  void clear() { ops.clear(); }
};

struct Env {
  static constexpr uint64_t kBase = 0x7f0000000000ull;  // 2 MiB aligned: PTE index 0
  mmusim::Stats stats;
  RecordingHw hw;
  std::unique_ptr<kmm::Kernel> k;
  kmm::mm_struct mm;
  kmm::vm_area_struct vma;
  kmm::pte_t* table = nullptr;  // the PTE table mapping [kBase, kBase + 2M)

  explicit Env(kmm::SpuriousFlush spurious = kmm::SpuriousFlush::none) {
    kmm::KernelParams p;
    p.phys_mem = 256ull << 20;
    p.arm64_spurious_flush = spurious;
    k = std::make_unique<kmm::Kernel>(p, mmusim::pg::Isa::arm64, hw, stats);
    k->enter(nullptr, 0);
    mm.id = 7;
    mm.pgd = k->pte_alloc_one(&mm) << kmm::PAGE_SHIFT;
    uint64_t* pgd = k->pgd_offset(&mm, kBase);
    kmm::pud_t* pud = k->pud_alloc(&mm, pgd, kBase);
    kmm::pmd_t* pmd = k->pmd_alloc(&mm, pud, kBase);
    REQUIRE(k->__pte_alloc(&mm, pmd) == 0);
    table = k->pte_offset_map(pmd, kBase);
    REQUIRE(table != nullptr);
    vma.vm_start = kBase;
    vma.vm_end = kBase + kmm::PMD_SIZE;
    vma.vm_mm = &mm;
    vma.vm_flags = kmm::VM_READ | kmm::VM_WRITE | kmm::VM_MAYREAD | kmm::VM_MAYWRITE;
    vma.vm_pgoff = kBase >> kmm::PAGE_SHIFT;
  }
  kmm::Arm64Arch& a() { return static_cast<kmm::Arm64Arch&>(k->arch()); }
  uint64_t count(const std::string& key) const { return stats.total_value(key); }
  uint64_t addr(unsigned idx) const { return kBase + uint64_t(idx) * kmm::PAGE_SIZE; }
  kmm::pte_t* ptep(unsigned idx) { return table + idx; }

  // A folio of 2^order pages (naturally aligned PFN, like the buddy allocator gives).
  kmm::folio* folio(unsigned order) {
    kmm::folio* f = k->folio_alloc(order, false);
    REQUIRE(f != nullptr);
    return f;
  }
  kmm::pfn_t pfn(kmm::folio* f) { return k->page_to_pfn(f); }

  // What do_anonymous_page() installs for a write fault in a private writable VMA:
  // pte_mkwrite(pte_mkdirty(mk_pte(page, vm_get_page_prot()))).
  kmm::pte_t anon_pte(kmm::pfn_t pfn) {
    auto& ar = a();
    kmm::pte_t e = ar.pfn_pte(pfn, ar.vm_get_page_prot(vma.vm_flags));
    return ar.pte_mkwrite(ar.pte_mkdirty(e), &vma);
  }

  // PORTMAP §3.3 item 10 over the whole table.
  void check() {
    std::string why;
    bool ok = kmm::arm64_contpte_table_consistent(*k, table, &why);
    INFO(why);
    REQUIRE(ok);
  }
  unsigned cont_count(unsigned from, unsigned n) {
    unsigned c = 0;
    for (unsigned i = from; i < from + n; ++i) c += a().pte_cont(table[i]);
    return c;
  }
};

}  // namespace arm64test
