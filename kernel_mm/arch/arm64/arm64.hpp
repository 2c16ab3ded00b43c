// SPDX-License-Identifier: GPL-2.0-only
// The arm64 arch layer (4K granule, 4 levels, 48-bit VA), following Linux 6.12:
//   arm64.cpp  — arch/arm64/include/asm/pgtable.h, pgtable-prot.h, pgtable-hwdef.h (PTE/PMD
//                helpers, the public contpte-hiding wrappers), arch/arm64/mm/mmap.c
//                (protection_map), arch/arm64/mm/mmu.c (ptep_modify_prot_*, the newer batched
//                modify_prot_*_ptes overrides), arch/arm64/include/asm/tlbflush.h and asm/tlb.h
//                (TLB maintenance);
//   contpte.cpp — arch/arm64/mm/contpte.c (the whole file);
//   fault.cpp  — arch/arm64/mm/fault.c (__ptep_set_access_flags, do_page_fault, the ESR decode)
//                and the flush_tlb_fix_spurious_fault() variants.
//
// What matters for the experiments (PORTMAP §4): PTE_CONT is a private detail of the public PTE
// API; a change of the write bit of one PTE in a contpte block unfolds it (contpte_convert: a
// break-before-make of 16 PTEs with 16 broadcast TLBIs); a write fault that upgrades a PTE always
// broadcasts a TLBI of that page (__ptep_set_access_flags, 6.12); the hardware does not drop a
// TLB entry on a permission fault, so the kernel's TLBIs are the only invalidations.
//
// Modelled CPU: Neoverse N1 (Armv8.2): no FEAT_TLBIRANGE, no FEAT_TTL, no BBML2, no EPAN, no
// KPTI (N1 is not affected by Meltdown, so no __tlbi_user twins).
#pragma once

#include <string>

#include "kernel_mm/arch/arch.hpp"

namespace kmm {

// ---- bits (arch/arm64/include/asm/pgtable-hwdef.h, pgtable-prot.h) not in base/pgformat.hpp ----
namespace arm64b {
namespace a = mmusim::pg::arm64;
inline constexpr uint64_t PTE_VALID = a::VALID;
inline constexpr uint64_t PTE_TYPE_MASK = a::TYPE_MASK;
inline constexpr uint64_t PTE_TYPE_PAGE = a::TYPE_PAGE;
inline constexpr uint64_t PTE_TABLE_BIT = a::TABLE_BIT;
inline constexpr uint64_t PTE_USER = a::USER;
inline constexpr uint64_t PTE_RDONLY = a::RDONLY;
inline constexpr uint64_t PTE_SHARED = a::SHARED;
inline constexpr uint64_t PTE_AF = a::AF;
inline constexpr uint64_t PTE_NG = a::NG;
inline constexpr uint64_t PTE_GP = mmusim::pg::bit(50);
inline constexpr uint64_t PTE_DBM = a::DBM;
inline constexpr uint64_t PTE_CONT = a::CONT;
inline constexpr uint64_t PTE_PXN = a::PXN;
inline constexpr uint64_t PTE_UXN = a::UXN;
inline constexpr uint64_t PTE_WRITE = a::WRITE;  // == PTE_DBM
inline constexpr uint64_t PTE_DIRTY = a::DIRTY;
inline constexpr uint64_t PTE_SPECIAL = a::SPECIAL;
inline constexpr uint64_t PTE_DEVMAP = a::DEVMAP;
inline constexpr uint64_t PTE_PRESENT_INVALID = a::PRESENT_INVALID;  // == PTE_NG, only when !VALID
inline constexpr uint64_t PTE_ATTRINDX_MASK = uint64_t(7) << 2;
inline constexpr uint64_t PTE_ATTRINDX_NORMAL = a::ATTRINDX_NORMAL;  // PTE_ATTRINDX(MT_NORMAL)
inline constexpr uint64_t PTE_PO_IDX_MASK = mmusim::pg::genmask(62, 60);
// PTE_ADDR_LOW without CONFIG_ARM64_PA_BITS_52: bits 49..PAGE_SHIFT.
inline constexpr uint64_t PTE_ADDR_LOW = mmusim::pg::genmask(49, PAGE_SHIFT);
inline constexpr uint64_t PMD_TYPE_MASK = 3;
inline constexpr uint64_t PMD_TYPE_TABLE = 3;
inline constexpr uint64_t PMD_TYPE_SECT = 1;
inline constexpr uint64_t PMD_TABLE_BIT = uint64_t(1) << 1;
inline constexpr uint64_t PMD_TABLE_PXN = mmusim::pg::bit(59);  // also PUD/P4D_TABLE_PXN

// pgtable-prot.h
inline constexpr uint64_t _PROT_DEFAULT = PTE_TYPE_PAGE | PTE_AF | PTE_SHARED;
inline constexpr uint64_t _PAGE_DEFAULT = _PROT_DEFAULT | PTE_ATTRINDX_NORMAL;
inline constexpr uint64_t _PAGE_SHARED =
    _PAGE_DEFAULT | PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_UXN | PTE_WRITE;
inline constexpr uint64_t _PAGE_SHARED_EXEC = _PAGE_DEFAULT | PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_WRITE;
inline constexpr uint64_t _PAGE_READONLY = _PAGE_DEFAULT | PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_UXN;
inline constexpr uint64_t _PAGE_READONLY_EXEC = _PAGE_DEFAULT | PTE_USER | PTE_RDONLY | PTE_NG | PTE_PXN;
inline constexpr uint64_t _PAGE_EXECONLY = _PAGE_DEFAULT | PTE_RDONLY | PTE_NG | PTE_PXN;
inline constexpr uint64_t PAGE_NONE =
    (_PAGE_DEFAULT & ~PTE_VALID) | PTE_PRESENT_INVALID | PTE_RDONLY | PTE_NG | PTE_PXN | PTE_UXN;
inline constexpr uint64_t PAGE_SHARED = _PAGE_SHARED;
inline constexpr uint64_t PAGE_SHARED_EXEC = _PAGE_SHARED_EXEC;
inline constexpr uint64_t PAGE_READONLY = _PAGE_READONLY;
inline constexpr uint64_t PAGE_READONLY_EXEC = _PAGE_READONLY_EXEC;

// tlbflush.h: MAX_DVM_OPS = PTRS_PER_PTE (TLBI_TTL_UNKNOWN: arch.hpp).
inline constexpr unsigned MAX_DVM_OPS = PTRS_PER_PTE;
}  // namespace arm64b

// ---- ESR_EL1 of a data/instruction abort (arch/arm64/include/asm/esr.h) ------------------------
namespace esr {
inline constexpr uint64_t ESR_ELx_EC_SHIFT = 26;
inline constexpr uint64_t ESR_ELx_EC_MASK = uint64_t(0x3f) << ESR_ELx_EC_SHIFT;
inline constexpr uint64_t ESR_ELx_EC_IABT_LOW = 0x20;
inline constexpr uint64_t ESR_ELx_EC_IABT_CUR = 0x21;
inline constexpr uint64_t ESR_ELx_EC_DABT_LOW = 0x24;
inline constexpr uint64_t ESR_ELx_EC_DABT_CUR = 0x25;
inline constexpr uint64_t ESR_ELx_IL = uint64_t(1) << 25;
inline constexpr uint64_t ESR_ELx_CM = uint64_t(1) << 8;
inline constexpr uint64_t ESR_ELx_WNR = uint64_t(1) << 6;
inline constexpr uint64_t ESR_ELx_FSC = 0x3f;
inline constexpr uint64_t ESR_ELx_FSC_TYPE = 0x3c;
inline constexpr uint64_t ESR_ELx_FSC_LEVEL = 0x03;
inline constexpr uint64_t ESR_ELx_FSC_FAULT = 0x04;   // translation fault, + level
inline constexpr uint64_t ESR_ELx_FSC_ACCESS = 0x08;  // access flag fault, + level
inline constexpr uint64_t ESR_ELx_FSC_PERM = 0x0c;    // permission fault, + level
inline constexpr uint64_t ESR_ELx_FSC_FAULT_L_M1 = 0x2b;  // level -1 translation fault (LPA2)
inline uint64_t ESR_ELx_EC(uint64_t e) { return (e & ESR_ELx_EC_MASK) >> ESR_ELx_EC_SHIFT; }
// esr_fsc_is_translation_fault() and friends (asm/esr.h)
inline bool esr_fsc_is_translation_fault(uint64_t e) {
  e &= ESR_ELx_FSC;
  return (e & ESR_ELx_FSC_TYPE) == ESR_ELx_FSC_FAULT || e == ESR_ELx_FSC_FAULT_L_M1;
}
inline bool esr_fsc_is_access_flag_fault(uint64_t e) {
  return (e & ESR_ELx_FSC_TYPE) == ESR_ELx_FSC_ACCESS;
}
inline bool esr_fsc_is_permission_fault(uint64_t e) {
  return (e & ESR_ELx_FSC_TYPE) == ESR_ELx_FSC_PERM;
}
}  // namespace esr

// What do_mem_abort()/do_page_fault() read from an ESR (for tests and traces).
struct Arm64Abort {
  enum Kind : uint8_t { translation, access_flag, permission, other } kind = other;
  bool el0 = false;          // from user space (EC *_LOW)
  bool instruction = false;  // instruction abort (EC IABT_*)
  bool write = false;        // is_write_abort(): WnR && !CM
  int level = 0;             // architectural level of the fault (3 = the PTE level)
};
Arm64Abort arm64_decode_esr(uint64_t esr);

class Arm64Arch : public Arch {
 public:
  using Arch::Arch;
  mmusim::pg::Isa isa() const override { return mmusim::pg::Isa::arm64; }

  // VA_BITS (CONFIG_ARM64_VA_BITS_48): the descriptor's 48-bit virtual address space.
  static constexpr unsigned VA_BITS = mmusim::pg::kArm64_4K.va_bits();
  // TASK_SIZE_64 (asm/processor.h): all of TTBR0's range.
  static constexpr uint64_t TASK_SIZE_64 = uint64_t(1) << VA_BITS;
  // Arm ARM B2.3.12: a DSB completes only when every explicit memory access before it has
  // completed (the stores included); the acquire/release atomics of the kernel's locks order
  // accesses without waiting for older stores to complete, and ERET is a context synchronization
  // event, not a barrier for stores (D1.x): only the DSB items wait.
  uint32_t store_barrier_items() const override;
  bool exception_return_drains_stores() const override { return false; }
  uint64_t task_size() const override { return TASK_SIZE_64; }
  bool arch_has_hw_pte_young(bool cpu_has_hw_af) const override;

  // ---- PTE helpers (pgtable.h) ----
  bool pte_present(pte_t) const override;
  bool pte_write(pte_t) const override;
  bool pte_dirty(pte_t) const override;
  bool pte_young(pte_t) const override;
  bool pte_special(pte_t) const override;
  bool pte_protnone(pte_t) const override;
  bool pte_cont(pte_t) const override;
  pfn_t pte_pfn(pte_t) const override;
  pte_t pfn_pte(pfn_t, pgprot_t) const override;
  pgprot_t pte_pgprot(pte_t) const override;
  pte_t pte_mkwrite_novma(pte_t) const override;
  pte_t pte_wrprotect(pte_t) const override;
  pte_t pte_mkdirty(pte_t) const override;
  pte_t pte_mkclean(pte_t) const override;
  pte_t pte_mkyoung(pte_t) const override;
  pte_t pte_mkold(pte_t) const override;
  pte_t pte_mkspecial(pte_t) const override;
  pte_t pte_advance_pfn(pte_t, unsigned long) const override;
  // Swap PTEs (arch/arm64/include/asm/pgtable.h): bits 0-1 zero (not valid), bit 2
  // PTE_SWP_EXCLUSIVE, the type in bits 6-10, bit 11 (PTE_PRESENT_INVALID) zero, the offset in
  // bits 12-61.
  pte_t __swp_entry_to_pte(unsigned type, uint64_t offset) const override {
    return pte_t{(uint64_t(type & 0x1f) << 6) | ((offset & ((uint64_t(1) << 50) - 1)) << 12)};
  }
  unsigned __swp_type(pte_t p) const override { return unsigned((p.val >> 6) & 0x1f); }
  uint64_t __swp_offset(pte_t p) const override { return (p.val >> 12) & ((uint64_t(1) << 50) - 1); }
  uint64_t swp_exclusive_bit() const override { return uint64_t(1) << 2; }
  pgprot_t vm_get_page_prot(vm_flags_t) const override;
  pte_t pte_modify(pte_t, pgprot_t) const override;
  // arm64-only helpers
  bool pte_valid(pte_t p) const { return p.val & arm64b::PTE_VALID; }
  bool pte_valid_cont(pte_t p) const { return pte_valid(p) && pte_cont(p); }
  bool pte_present_invalid(pte_t p) const {
    return (p.val & (arm64b::PTE_VALID | arm64b::PTE_PRESENT_INVALID)) == arm64b::PTE_PRESENT_INVALID;
  }
  bool pte_rdonly(pte_t p) const { return p.val & arm64b::PTE_RDONLY; }
  bool pte_user(pte_t p) const { return p.val & arm64b::PTE_USER; }
  bool pte_user_exec(pte_t p) const { return !(p.val & arm64b::PTE_UXN); }
  bool pte_hw_dirty(pte_t p) const { return pte_write(p) && !pte_rdonly(p); }
  bool pte_sw_dirty(pte_t p) const { return p.val & arm64b::PTE_DIRTY; }
  pte_t pte_mkcont(pte_t p) const { return pte_t{p.val | arm64b::PTE_CONT | arm64b::PTE_TYPE_PAGE}; }
  pte_t pte_mknoncont(pte_t p) const { return pte_t{p.val & ~arm64b::PTE_CONT}; }
  pte_t pte_mkinvalid(pte_t p) const {
    return pte_t{(p.val | arm64b::PTE_PRESENT_INVALID) & ~arm64b::PTE_VALID};
  }
  // pte_accessible() (pgtable.h): no mm_tlb_flush_pending() in this port, so pte_valid().
  bool pte_accessible(mm_struct*, pte_t p) const { return pte_valid(p); }

  // ---- PMD / table helpers ----
  bool pmd_present(pmd_t) const override;
  bool pmd_trans_huge(pmd_t) const override;
  bool pmd_write(pmd_t) const override;
  bool pmd_dirty(pmd_t) const override;
  bool pmd_young(pmd_t) const override;
  pfn_t pmd_pfn(pmd_t) const override;
  pmd_t pmd_mkwrite_novma(pmd_t) const override;
  pmd_t pmd_wrprotect(pmd_t) const override;
  pmd_t pmd_mkdirty(pmd_t) const override;
  pmd_t pmd_mkclean(pmd_t) const override;
  pmd_t pmd_mkyoung(pmd_t) const override;
  pmd_t pmd_mkold(pmd_t) const override;
  pmd_t pmd_mkinvalid(pmd_t) const override;
  pmd_t pmd_modify(pmd_t, pgprot_t) const override;
  pmd_t mk_huge_pmd(pfn_t, pgprot_t) const override;
  uint64_t mk_table(pfn_t) const override;
  bool table_present(uint64_t) const override;
  pfn_t table_pfn(uint64_t) const override;

  // ---- the public PTE API that hides PTE_CONT (pgtable.h:1536-1808) ----
  pte_t ptep_get(pte_t* ptep) override;
  pte_t ptep_get_lockless(pte_t* ptep) override;
  void set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) override;
  pte_t ptep_get_and_clear(mm_struct* mm, uint64_t addr, pte_t* ptep) override;
  pte_t get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) override;
  void clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) override;
  void ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep) override;
  void wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) override;
  int ptep_set_access_flags(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t entry, int dirty) override;
  pte_t ptep_clear_flush(vm_area_struct* vma, uint64_t addr, pte_t* ptep) override;
  unsigned pte_batch_hint(pte_t* ptep, pte_t pte) override;
  pte_t ptep_modify_prot_start(vm_area_struct* vma, uint64_t addr, pte_t* ptep) override;
  void ptep_modify_prot_commit(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t old_pte, pte_t pte) override;
  pte_t modify_prot_start_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, unsigned nr) override;
  void modify_prot_commit_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t old_pte, pte_t pte,
                               unsigned nr) override;
  void flush_tlb_fix_spurious_fault(vm_area_struct* vma, uint64_t addr, pte_t* ptep) override;
  int pmdp_set_access_flags(vm_area_struct* vma, uint64_t haddr, pmd_t* pmdp, pmd_t entry, int dirty) override;
  void pmdp_set_wrprotect(mm_struct* mm, uint64_t addr, pmd_t* pmdp) override;
  // Extra public API (pgtable.h) the generic port does not call through Arch yet.
  void pte_clear(mm_struct* mm, uint64_t addr, pte_t* ptep);
  // (ptep_clear_flush_young() is the generic one over this: arm64's pgtable.h:1285 and
  // contpte_ptep_clear_flush_young() do the same with a no-sync TLBI.)
  int ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) override;
  bool arch_tlbbatch_should_defer(const mm_struct*, int) const override { return true; }
  void arch_tlbbatch_add_pending(std::vector<mm_struct*>& batch, vm_area_struct* vma, uint64_t addr) override;
  void arch_tlbbatch_flush(std::vector<mm_struct*>& batch) override;

  // ---- TLB maintenance (tlbflush.h, tlb.h) ----
  void flush_tlb_page(vm_area_struct* vma, uint64_t addr) override;
  void flush_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) override;
  void flush_pmd_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) override;
  void flush_tlb_mm(mm_struct* mm) override;
  void tlb_flush_mmu_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift, int tlb_level,
                           bool freed_tables) override;
  void flush_tlb_local() override;
  // __flush_tlb_range() (tlbflush.h:507): DSB ISHST, a TLBI VALE1IS/VAE1IS per stride, DSB ISH;
  // flush_tlb_mm() instead from MAX_DVM_OPS strides on (no FEAT_TLBIRANGE on N1).
  void __flush_tlb_range(mm_struct* mm, uint64_t start, uint64_t end, uint64_t stride, bool last_level,
                         int tlb_level);
  // local_flush_tlb_page_nonotify() (v6.19 tlbflush.h): DSB NSHST, TLBI VALE1, DSB NSH.
  void local_flush_tlb_page_nonotify(mm_struct* mm, uint64_t uaddr);

  // ---- fault entry (arch/arm64/mm/fault.c) ----
  FaultReturn handle_user_fault(task_struct* tsk, uint64_t addr, uint64_t esr, uint64_t ip) override;
  int __ptep_set_access_flags(vm_area_struct* vma, uint64_t address, pte_t* ptep, pte_t entry, int dirty);

  // ---- the private (double-underscore) PTE API (pgtable.h) ----
  pte_t __ptep_get(const pte_t* ptep) const { return *ptep; }
  void __set_pte(pte_t* ptep, pte_t pte);
  void __set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr);
  pte_t __ptep_get_and_clear(mm_struct* mm, uint64_t addr, pte_t* ptep);
  void __clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  pte_t __get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  void ___ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  void __ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep);
  void __wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  int __ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep);

  // ---- contpte.c (contpte.cpp) ----
  void contpte_try_fold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  void contpte_try_unfold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  void __contpte_try_fold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  void __contpte_try_unfold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  pte_t contpte_ptep_get(pte_t* ptep, pte_t orig_pte);
  pte_t contpte_ptep_get_lockless(pte_t* orig_ptep);
  void contpte_set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr);
  void contpte_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  pte_t contpte_get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  int contpte_ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep);
  void contpte_wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  int contpte_ptep_set_access_flags(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t entry, int dirty);

  // contpte_align_down(): the first PTE of ptep's 16-entry (128-byte) aligned group. The kernel
  // aligns the pointer; host buffers of simulated frames are not 128-byte aligned, so the slot
  // comes from the table's physical address.
  pte_t* contpte_align_down(pte_t* ptep) const;
  unsigned pte_slot(const pte_t* ptep) const;  // index of ptep in its table (0..PTRS_PER_PTE-1)

 private:
  void contpte_try_unfold_partial(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  void contpte_convert(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte);
  bool contpte_all_subptes_match_access_flags(pte_t* ptep, pte_t entry);
  bool mm_is_user(mm_struct* mm) const { return mm != nullptr; }  // no init_mm/efi_mm here
};

std::unique_ptr<Arch> make_arm64_arch(Kernel& k);

// PORTMAP §3.3 item 10, for the invariant checker and the tests: if any PTE of the aligned
// 16-entry block starting at `block_start` has PTE_CONT, then all 16 are valid, all have PTE_CONT,
// map consecutive PFNs from a 16-aligned PFN, have the same prot modulo AF/dirty
// (pte_mkold(pte_mkclean())), and map pages of one folio that covers the whole block. A block with
// no PTE_CONT is consistent. On failure, `why` (if given) says what is wrong.
bool arm64_contpte_block_consistent(Kernel& k, const pte_t* block_start, std::string* why = nullptr);
// The same over the 32 blocks of one PTE table (`table` = its first entry).
bool arm64_contpte_table_consistent(Kernel& k, const pte_t* table, std::string* why = nullptr);

}  // namespace kmm
