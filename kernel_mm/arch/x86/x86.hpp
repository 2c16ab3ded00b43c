// SPDX-License-Identifier: GPL-2.0-only
// The x86-64 arch layer (see x86.cpp).
#pragma once

#include "kernel_mm/arch/arch.hpp"

namespace kmm {

class X86Arch : public Arch {
 public:
  using Arch::Arch;
  mmusim::pg::Isa isa() const override { return mmusim::pg::Isa::x86_64; }

  // __VIRTUAL_MASK_SHIFT (asm/page_64_types.h) with 4-level paging: 47, the lower half of the
  // descriptor's 48-bit virtual address space (the upper half is the kernel's).
  static constexpr unsigned __VIRTUAL_MASK_SHIFT = mmusim::pg::kX86_64.va_bits() - 1;
  // TASK_SIZE_MAX (asm/page_64_types.h): the guard page below the canonical hole stays unmapped.
  static constexpr uint64_t TASK_SIZE_MAX = (uint64_t(1) << __VIRTUAL_MASK_SHIFT) - PAGE_SIZE;
  uint64_t task_size() const override { return TASK_SIZE_MAX; }
  bool mem_soft_dirty() const override { return true; }
  // SDM Vol 3A §9.2.2 (memory ordering in P6 and later families): reads and writes are not
  // reordered with locked instructions or serializing instructions, and locked instructions have
  // a total order: a LOCK-prefixed read-modify-write (every spinlock, rwsem and atomic bit or
  // count operation: lock_op, page_op, folio_op) does not complete before the older stores in the
  // store buffer are globally visible. INVLPG and MOV to CR3 are serializing (§9.3): they drain
  // the store buffer before the next instruction.
  uint32_t store_barrier_items() const override;
  // IRET is serializing (SDM Vol 3A §9.3: buffered writes drain before the next instruction is
  // fetched).
  bool exception_return_drains_stores() const override { return true; }
  bool arch_has_hw_pte_young(bool) const override;

  bool pte_present(pte_t) const override;
  bool pte_write(pte_t) const override;
  bool pte_dirty(pte_t) const override;
  bool pte_young(pte_t) const override;
  int ptep_clear_flush_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) override;
  bool arch_tlbbatch_should_defer(const mm_struct* mm, int cpu) const override;
  void arch_tlbbatch_add_pending(std::vector<mm_struct*>& batch, vm_area_struct* vma, uint64_t addr) override;
  void arch_tlbbatch_flush(std::vector<mm_struct*>& batch) override;
  bool pte_special(pte_t) const override;
  bool pte_protnone(pte_t) const override;
  bool pte_soft_dirty(pte_t) const override;
  bool pte_uffd_wp(pte_t) const override;
  pfn_t pte_pfn(pte_t) const override;
  pte_t pfn_pte(pfn_t, pgprot_t) const override;
  pgprot_t pte_pgprot(pte_t) const override;
  pte_t pte_mkwrite_novma(pte_t) const override;
  pte_t pte_mkwrite(pte_t, const vm_area_struct*) const override;
  pte_t pte_wrprotect(pte_t) const override;
  pte_t pte_mkdirty(pte_t) const override;
  pte_t pte_mkclean(pte_t) const override;
  pte_t pte_mkyoung(pte_t) const override;
  pte_t pte_mkold(pte_t) const override;
  pte_t pte_mkspecial(pte_t) const override;
  pte_t pte_clear_soft_dirty(pte_t) const override;
  pte_t pte_clear_uffd_wp(pte_t) const override;
  pte_t pte_advance_pfn(pte_t, unsigned long) const override;
  // Swap PTEs (arch/x86/include/asm/pgtable_64.h): the type in bits 59-63, the offset inverted
  // (so that a non-present PTE's "pfn" bits point at no memory: the L1TF mitigation) from bit 9
  // (SWP_OFFSET_FIRST_BIT = _PAGE_BIT_PROTNONE + 1); bit 3 (_PAGE_PWT) remembers
  // PG_anon_exclusive.
  pte_t __swp_entry_to_pte(unsigned type, uint64_t offset) const override {
    constexpr unsigned SWP_TYPE_BITS = 5, SWP_OFFSET_SHIFT = 9 + SWP_TYPE_BITS;
    return pte_t{(~offset << SWP_OFFSET_SHIFT >> SWP_TYPE_BITS) | (uint64_t(type) << (64 - SWP_TYPE_BITS))};
  }
  unsigned __swp_type(pte_t p) const override { return unsigned(p.val >> (64 - 5)); }
  uint64_t __swp_offset(pte_t p) const override { return ~p.val << 5 >> (9 + 5); }
  uint64_t swp_exclusive_bit() const override { return uint64_t(1) << 3; }
  pgprot_t vm_get_page_prot(vm_flags_t) const override;
  pte_t pte_modify(pte_t, pgprot_t) const override;

  bool pmd_present(pmd_t) const override;
  bool pmd_trans_huge(pmd_t) const override;
  bool pmd_write(pmd_t) const override;
  bool pmd_dirty(pmd_t) const override;
  bool pmd_young(pmd_t) const override;
  pfn_t pmd_pfn(pmd_t) const override;
  pmd_t pmd_mkwrite_novma(pmd_t) const override;
  pmd_t pmd_mkwrite(pmd_t, const vm_area_struct*) const override;
  pmd_t pmd_wrprotect(pmd_t) const override;
  pmd_t pmd_mkdirty(pmd_t) const override;
  pmd_t pmd_mkclean(pmd_t) const override;
  pmd_t pmd_mkyoung(pmd_t) const override;
  pmd_t pmd_mkold(pmd_t) const override;
  pmd_t pmd_mkinvalid(pmd_t) const override;
  pmd_t mk_huge_pmd(pfn_t, pgprot_t) const override;
  uint64_t mk_table(pfn_t) const override;
  bool table_present(uint64_t) const override;
  pfn_t table_pfn(uint64_t) const override;

  void ptep_set_wrprotect(mm_struct*, uint64_t, pte_t*) override;
  int ptep_set_access_flags(vm_area_struct*, uint64_t, pte_t*, pte_t, int) override;
  void flush_tlb_fix_spurious_fault(vm_area_struct*, uint64_t, pte_t*) override;
  int pmdp_set_access_flags(vm_area_struct*, uint64_t, pmd_t*, pmd_t, int) override;
  void pmdp_set_wrprotect(mm_struct*, uint64_t, pmd_t*) override;

  void flush_tlb_page(vm_area_struct*, uint64_t) override;
  void flush_tlb_range(vm_area_struct*, uint64_t, uint64_t) override;
  void flush_pmd_tlb_range(vm_area_struct*, uint64_t, uint64_t) override;
  void flush_tlb_mm(mm_struct*) override;
  void tlb_flush_mmu_range(mm_struct*, uint64_t, uint64_t, unsigned, int, bool) override;
  void flush_tlb_local() override;

  FaultReturn handle_user_fault(task_struct*, uint64_t, uint64_t, uint64_t) override;

  // switch_mm_irqs_off(), enter_lazy_tlb() (arch/x86/mm/tlb.c:499, :676).
  void switch_mm(int cpu, mm_struct* next) override;
  void enter_lazy_tlb(int cpu) override;
  bool tlb_flush_deferred(int cpu, const mm_struct* mm) const override;
  void destroy_context(mm_struct* mm) override;
  bool is_lazy(int cpu) const { return is_lazy_[cpu]; }

  // flush_tlb_mm_range() with TLB_FLUSH_ALL as `end` for a full flush.
  static constexpr uint64_t kFlushAll = ~uint64_t(0);
  void flush_tlb_mm_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift, bool freed_tables);

 private:
  // Flushes `cpu`'s TLBs for the range; charges the work to this entry when `here`, else returns
  // its cycles (a remote CPU's, run in its IPI handler).
  void wait_for_acks(double last_ack);
  double flush_tlb_func(int cpu, mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift,
                        bool here = true);
  // should_flush_tlb() (tlb.c:900): a CPU in lazy TLB mode is left out (it catches up when it
  // switches back); mm_cpumask holds only CPUs that have mm loaded (switch_mm clears the old one).
  bool should_flush_tlb(int cpu, const mm_struct* mm) const { return !is_lazy_[cpu] && loaded_mm_[cpu] == mm; }

  // cpu_tlbstate: per CPU, TLB_NR_DYN_ASIDS (6) contexts, each the mm it holds and the tlb_gen
  // its TLB entries are up to date with (the hardware PCID here is the mm's id: a context only
  // tracks the generation, and an evicted context's entries are flushed as the PCID's reuse
  // would flush them); the loaded one; lazy mode (cpu_tlbstate_shared.is_lazy).
  static constexpr unsigned kNrDynAsids = 6;
  struct TlbCtx {
    int mm_id = -1;
    uint64_t tlb_gen = 0;
  };
  TlbCtx ctxs_[kMaxCpus][kNrDynAsids];
  unsigned loaded_asid_[kMaxCpus] = {};
  unsigned next_asid_[kMaxCpus] = {};
  bool is_lazy_[kMaxCpus] = {};
  // choose_new_asid() (tlb.c:217): the context slot of `next` on `cpu` and whether it must flush.
  void choose_new_asid(int cpu, const mm_struct* next, unsigned* asid, bool* need_flush);
};

// The arm64 arch layer lives in arch/arm64.
std::unique_ptr<Arch> make_arm64_arch(Kernel& k);

}  // namespace kmm
