// SPDX-License-Identifier: GPL-2.0-only
// arm64 arch layer, part 1: the PTE/PMD helpers of arch/arm64/include/asm/pgtable.h and
// pgtable-prot.h (bit for bit), protection_map (arch/arm64/mm/mmap.c), the public PTE API that
// hides PTE_CONT (pgtable.h:1536-1808), ptep_modify_prot_* (arch/arm64/mm/mmu.c:1537) with the
// newer batched modify_prot_*_ptes overrides, and the TLB maintenance of
// arch/arm64/include/asm/tlbflush.h and asm/tlb.h. contpte.c is in contpte.cpp, fault.c in
// fault.cpp.
#include "kernel_mm/arch/arm64/arm64.hpp"

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

using namespace arm64b;

// ------------------------------------------------------------------------------------------------
// PTE helpers (arch/arm64/include/asm/pgtable.h)

// pte_present() (pgtable.h:105): valid, or present-invalid (PROT_NONE / pmd_mkinvalid).
bool Arm64Arch::pte_present(pte_t p) const { return pte_valid(p) || pte_present_invalid(p); }
bool Arm64Arch::pte_write(pte_t p) const { return p.val & PTE_WRITE; }
// pte_dirty() (pgtable.h:131): sw dirty, or hw dirty (writable and !PTE_RDONLY).
bool Arm64Arch::pte_dirty(pte_t p) const { return pte_sw_dirty(p) || pte_hw_dirty(p); }
bool Arm64Arch::pte_young(pte_t p) const { return p.val & PTE_AF; }
bool Arm64Arch::pte_special(pte_t p) const { return p.val & PTE_SPECIAL; }
// pte_protnone() (pgtable.h:530)
bool Arm64Arch::pte_protnone(pte_t p) const {
  return pte_present_invalid(p) && !pte_user(p) && !pte_user_exec(p);
}
bool Arm64Arch::pte_cont(pte_t p) const { return p.val & PTE_CONT; }
// pte_pfn()/pfn_pte() (pgtable.h:90): __pte_to_phys() without 52-bit PAs.
pfn_t Arm64Arch::pte_pfn(pte_t p) const { return (p.val & PTE_ADDR_LOW) >> PAGE_SHIFT; }
pte_t Arm64Arch::pfn_pte(pfn_t pfn, pgprot_t prot) const { return pte_t{(pfn << PAGE_SHIFT) | prot.val}; }
// pte_pgprot() (pgtable.h:408): all bits except the pfn.
pgprot_t Arm64Arch::pte_pgprot(pte_t p) const {
  pfn_t pfn = pte_pfn(p);
  return pgprot_t{pfn_pte(pfn, pgprot_t{0}).val ^ p.val};
}
// pte_mkwrite_novma() (pgtable.h:208)
pte_t Arm64Arch::pte_mkwrite_novma(pte_t p) const {
  p.val |= PTE_WRITE;
  if (pte_sw_dirty(p)) p.val &= ~PTE_RDONLY;
  return p;
}
// pte_mkclean() (pgtable.h:216)
pte_t Arm64Arch::pte_mkclean(pte_t p) const {
  p.val &= ~PTE_DIRTY;
  p.val |= PTE_RDONLY;
  return p;
}
// pte_mkdirty() (pgtable.h:224)
pte_t Arm64Arch::pte_mkdirty(pte_t p) const {
  p.val |= PTE_DIRTY;
  if (pte_write(p)) p.val &= ~PTE_RDONLY;
  return p;
}
// pte_wrprotect() (pgtable.h:234): move hardware dirtiness to PTE_DIRTY, then read-only.
pte_t Arm64Arch::pte_wrprotect(pte_t p) const {
  if (pte_hw_dirty(p)) p.val |= PTE_DIRTY;
  p.val &= ~PTE_WRITE;
  p.val |= PTE_RDONLY;
  return p;
}
pte_t Arm64Arch::pte_mkold(pte_t p) const { return pte_t{p.val & ~PTE_AF}; }
pte_t Arm64Arch::pte_mkyoung(pte_t p) const { return pte_t{p.val | PTE_AF}; }
pte_t Arm64Arch::pte_mkspecial(pte_t p) const { return pte_t{p.val | PTE_SPECIAL}; }
// pte_advance_pfn() (pgtable.h:418)
pte_t Arm64Arch::pte_advance_pfn(pte_t p, unsigned long nr) const {
  return pfn_pte(pte_pfn(p) + nr, pte_pgprot(p));
}

// protection_map[] and vm_get_page_prot() (arch/arm64/mm/mmap.c, 6.12). Private writable maps
// are PAGE_READONLY: the write fault makes them writable (COW). Exec-only would be PAGE_EXECONLY
// with Enhanced PAN only; N1 (v8.2) has no EPAN. No BTI (PTE_GP) or MTE VMAs here.
pgprot_t Arm64Arch::vm_get_page_prot(vm_flags_t f) const {
  static const uint64_t protection_map[16] = {
      /* VM_NONE */ PAGE_NONE,
      /* VM_READ */ PAGE_READONLY,
      /* VM_WRITE */ PAGE_READONLY,
      /* VM_WRITE | VM_READ */ PAGE_READONLY,
      /* VM_EXEC */ PAGE_READONLY_EXEC,
      /* VM_EXEC | VM_READ */ PAGE_READONLY_EXEC,
      /* VM_EXEC | VM_WRITE */ PAGE_READONLY_EXEC,
      /* VM_EXEC | VM_WRITE | VM_READ */ PAGE_READONLY_EXEC,
      /* VM_SHARED */ PAGE_NONE,
      /* VM_SHARED | VM_READ */ PAGE_READONLY,
      /* VM_SHARED | VM_WRITE */ PAGE_SHARED,
      /* VM_SHARED | VM_WRITE | VM_READ */ PAGE_SHARED,
      /* VM_SHARED | VM_EXEC */ PAGE_READONLY_EXEC,
      /* VM_SHARED | VM_EXEC | VM_READ */ PAGE_READONLY_EXEC,
      /* VM_SHARED | VM_EXEC | VM_WRITE */ PAGE_SHARED_EXEC,
      /* VM_SHARED | VM_EXEC | VM_WRITE | VM_READ */ PAGE_SHARED_EXEC,
  };
  return pgprot_t{protection_map[f & (VM_READ | VM_WRITE | VM_EXEC | VM_SHARED)]};
}

// pte_modify() (pgtable.h:1153)
pte_t Arm64Arch::pte_modify(pte_t p, pgprot_t newprot) const {
  // Normal and Normal-Tagged are two different memory types and indices in MAIR_EL1. The mask
  // below has to include PTE_ATTRINDX_MASK.
  const uint64_t mask = PTE_USER | PTE_PXN | PTE_UXN | PTE_RDONLY | PTE_PRESENT_INVALID | PTE_VALID |
                        PTE_WRITE | PTE_GP | PTE_ATTRINDX_MASK | PTE_PO_IDX_MASK;
  // preserve the hardware dirty information
  if (pte_hw_dirty(p)) p.val |= PTE_DIRTY;
  p.val = (p.val & ~mask) | (newprot.val & mask);
  // If we end up clearing hw dirtiness for a sw-dirty PTE, set hardware dirtiness again.
  if (pte_sw_dirty(p)) p = pte_mkdirty(p);
  return p;
}

// ------------------------------------------------------------------------------------------------
// PMD helpers: the PTE ones through pmd_pte()/pte_pmd() (pgtable.h:540-570)

bool Arm64Arch::pmd_present(pmd_t p) const { return pte_present(pte_t{p.val}); }
// pmd_trans_huge() (pgtable.h:720): present and not a table (present-invalid counts: force VALID).
bool Arm64Arch::pmd_trans_huge(pmd_t p) const {
  return p.val && pmd_present(p) && ((p.val | PTE_VALID) & PMD_TYPE_MASK) != PMD_TYPE_TABLE;
}
bool Arm64Arch::pmd_write(pmd_t p) const { return pte_write(pte_t{p.val}); }
bool Arm64Arch::pmd_dirty(pmd_t p) const { return pte_dirty(pte_t{p.val}); }
bool Arm64Arch::pmd_young(pmd_t p) const { return pte_young(pte_t{p.val}); }
// pmd_pfn() (pgtable.h:589)
pfn_t Arm64Arch::pmd_pfn(pmd_t p) const { return ((p.val & PTE_ADDR_LOW) & PMD_MASK) >> PAGE_SHIFT; }
pmd_t Arm64Arch::pmd_mkwrite_novma(pmd_t p) const { return pmd_t{pte_mkwrite_novma(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_wrprotect(pmd_t p) const { return pmd_t{pte_wrprotect(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_mkdirty(pmd_t p) const { return pmd_t{pte_mkdirty(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_mkclean(pmd_t p) const { return pmd_t{pte_mkclean(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_mkyoung(pmd_t p) const { return pmd_t{pte_mkyoung(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_mkold(pmd_t p) const { return pmd_t{pte_mkold(pte_t{p.val}).val}; }
pmd_t Arm64Arch::pmd_mkinvalid(pmd_t p) const { return pmd_t{pte_mkinvalid(pte_t{p.val}).val}; }
// pmd_modify() (pgtable.h:1170): pte_modify() on the block entry (the mask keeps PMD_TABLE_BIT).
pmd_t Arm64Arch::pmd_modify(pmd_t p, pgprot_t newprot) const { return pmd_t{pte_modify(pte_t{p.val}, newprot).val}; }
// mk_huge_pmd() = pmd_mkhuge(mk_pmd(page, prot)) (include/linux/huge_mm.h, pgtable.h:577):
// clearing PMD_TABLE_BIT turns PTE_TYPE_PAGE into PMD_TYPE_SECT (a level-2 block).
pmd_t Arm64Arch::mk_huge_pmd(pfn_t pfn, pgprot_t prot) const {
  return pmd_t{((pfn << PAGE_SHIFT) | prot.val) & ~PMD_TABLE_BIT};
}
// pmd_populate()/pud_populate()/p4d_populate() for a user mm (asm/pgalloc.h): the table's
// physical address | PMD_TYPE_TABLE | PMD_TABLE_PXN.
uint64_t Arm64Arch::mk_table(pfn_t t) const { return (t << PAGE_SHIFT) | PMD_TYPE_TABLE | PMD_TABLE_PXN; }
// pmd_table() (pgtable.h:704)
bool Arm64Arch::table_present(uint64_t e) const { return (e & PMD_TYPE_MASK) == PMD_TYPE_TABLE; }
pfn_t Arm64Arch::table_pfn(uint64_t e) const { return (e & PTE_ADDR_LOW) >> PAGE_SHIFT; }

// ------------------------------------------------------------------------------------------------
// The private PTE API (pgtable.h: __set_pte, __set_ptes, __ptep_get_and_clear, ...). Every PTE
// store/exchange is one pte_write on the cost account.

// __set_pte() (pgtable.h:351): the DSB ISHST + ISB only for valid kernel PTEs, never here.
void Arm64Arch::__set_pte(pte_t* ptep, pte_t pte) {
  k_.pte_changing(ptep);
  *ptep = pte;  // WRITE_ONCE
  k_.charge(Cost::pte_write);
}

// __set_ptes() (pgtable.h:422)
void Arm64Arch::__set_ptes(mm_struct*, uint64_t, pte_t* ptep, pte_t pte, unsigned nr) {
  for (;;) {
    __set_pte(ptep, pte);
    if (--nr == 0) break;
    ptep++;
    pte = pte_advance_pfn(pte, 1);
  }
}

// __ptep_get_and_clear() (pgtable.h:1297): xchg with 0.
pte_t Arm64Arch::__ptep_get_and_clear(mm_struct*, uint64_t, pte_t* ptep) {
  pte_t pte = *ptep;
  k_.pte_changing(ptep);
  *ptep = pte_t{0};
  k_.charge(Cost::pte_write);
  return pte;
}

// __clear_full_ptes() (pgtable.h:1307)
void Arm64Arch::__clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int) {
  for (;;) {
    __ptep_get_and_clear(mm, addr, ptep);
    if (--nr == 0) break;
    ptep++;
    addr += PAGE_SIZE;
  }
}

// __get_and_clear_full_ptes() (pgtable.h:1319): dirty/young of all gathered into the first.
pte_t Arm64Arch::__get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int) {
  pte_t pte = __ptep_get_and_clear(mm, addr, ptep);
  while (--nr) {
    ptep++;
    addr += PAGE_SIZE;
    pte_t tmp = __ptep_get_and_clear(mm, addr, ptep);
    if (pte_dirty(tmp)) pte = pte_mkdirty(pte);
    if (pte_young(tmp)) pte = pte_mkyoung(pte);
  }
  return pte;
}

// ___ptep_set_wrprotect() (pgtable.h:1349): cmpxchg loop with pte_wrprotect().
void Arm64Arch::___ptep_set_wrprotect(mm_struct*, uint64_t, pte_t* ptep, pte_t pte) {
  k_.pte_changing(ptep);
  *ptep = pte_wrprotect(pte);
  k_.charge(Cost::pte_write);
}

// __ptep_set_wrprotect() (pgtable.h:1366)
void Arm64Arch::__ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep) {
  ___ptep_set_wrprotect(mm, addr, ptep, __ptep_get(ptep));
}

// __wrprotect_ptes() (pgtable.h:1372)
void Arm64Arch::__wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  for (unsigned i = 0; i < nr; i++, addr += PAGE_SIZE, ptep++) __ptep_set_wrprotect(mm, addr, ptep);
}

// __ptep_test_and_clear_young() (pgtable.h:1252)
int Arm64Arch::__ptep_test_and_clear_young(vm_area_struct*, uint64_t, pte_t* ptep) {
  pte_t pte = *ptep;
  k_.pte_changing(ptep);
  *ptep = pte_mkold(pte);
  k_.charge(Cost::pte_write);
  return pte_young(pte);
}

// ------------------------------------------------------------------------------------------------
// The public PTE API (pgtable.h:1536-1808, CONFIG_ARM64_CONTPTE). PTE_CONT is a private detail:
// setters strip it from what they are given and apply it themselves.

// contpte_try_fold() (pgtable.h:1574): only try when addr and pfn are the last of a block; the
// core code mostly fills ranges low to high.
void Arm64Arch::contpte_try_fold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) {
  constexpr uint64_t contmask = CONT_PTES - 1;
  const bool valign = ((addr >> PAGE_SHIFT) & contmask) == contmask;
  if (valign) {
    const bool palign = (pte_pfn(pte) & contmask) == contmask;
    if (palign && pte_valid(pte) && !pte_cont(pte) && !pte_special(pte)) __contpte_try_fold(mm, addr, ptep, pte);
  }
}

// contpte_try_unfold() (pgtable.h:1597)
void Arm64Arch::contpte_try_unfold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) {
  if (pte_valid_cont(pte)) __contpte_try_unfold(mm, addr, ptep, pte);
}

// pte_batch_hint() (pgtable.h:1605): the PTEs left in ptep's contpte block.
unsigned Arm64Arch::pte_batch_hint(pte_t* ptep, pte_t pte) {
  if (!pte_valid_cont(pte)) return 1;
  return CONT_PTES - (pte_slot(ptep) & (CONT_PTES - 1));
}

// ptep_get() (pgtable.h:1632)
pte_t Arm64Arch::ptep_get(pte_t* ptep) {
  pte_t pte = __ptep_get(ptep);
  if (!pte_valid_cont(pte)) return pte;
  return contpte_ptep_get(ptep, pte);
}

// ptep_get_lockless() (pgtable.h:1643)
pte_t Arm64Arch::ptep_get_lockless(pte_t* ptep) {
  pte_t pte = __ptep_get(ptep);
  if (!pte_valid_cont(pte)) return pte;
  return contpte_ptep_get_lockless(ptep);
}

// set_ptes() (pgtable.h:1669): one PTE: unfold what is there, write, maybe fold; several (the
// set_ptes() contract: all currently not present): contpte_set_ptes().
void Arm64Arch::set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) {
  pte = pte_mknoncont(pte);
  if (nr == 1) {
    contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));
    __set_ptes(mm, addr, ptep, pte, 1);
    contpte_try_fold(mm, addr, ptep, pte);
  } else {
    contpte_set_ptes(mm, addr, ptep, pte, nr);
  }
}

// pte_clear() (pgtable.h:1683)
void Arm64Arch::pte_clear(mm_struct* mm, uint64_t addr, pte_t* ptep) {
  contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));
  __set_pte(ptep, pte_t{0});  // __pte_clear()
}

// clear_full_ptes() (pgtable.h:1691)
void Arm64Arch::clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) {
  if (nr == 1) {
    contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));
    __clear_full_ptes(mm, addr, ptep, nr, full);
  } else {
    contpte_clear_full_ptes(mm, addr, ptep, nr, full);
  }
}

// get_and_clear_full_ptes() (pgtable.h:1703)
pte_t Arm64Arch::get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) {
  pte_t pte;
  if (nr == 1) {
    contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));
    pte = __get_and_clear_full_ptes(mm, addr, ptep, nr, full);
  } else {
    pte = contpte_get_and_clear_full_ptes(mm, addr, ptep, nr, full);
  }
  return pte;
}

// ptep_get_and_clear() (pgtable.h:1720): unfolds a contpte block first.
pte_t Arm64Arch::ptep_get_and_clear(mm_struct* mm, uint64_t addr, pte_t* ptep) {
  contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));
  return __ptep_get_and_clear(mm, addr, ptep);
}

// The batched unmap flush (arch/arm64/include/asm/tlbflush.h:331-367): always deferred; each page
// gets its broadcast TLBI at once (arch_tlbbatch_add_pending() -> __flush_tlb_page_nosync()) and
// the batch's flush is the one DSB that waits for them all (arch_tlbbatch_flush()). Here each
// TLBI is issued with its DSB (flush_tlb_page()), so the batch's flush has nothing left to do.
void Arm64Arch::arch_tlbbatch_add_pending(std::vector<mm_struct*>&, vm_area_struct* vma, uint64_t addr) {
  flush_tlb_page(vma, addr);
}
void Arm64Arch::arch_tlbbatch_flush(std::vector<mm_struct*>& batch) { batch.clear(); }

// ptep_test_and_clear_young() (pgtable.h:1728)
int Arm64Arch::ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  pte_t orig_pte = __ptep_get(ptep);
  if (!pte_valid_cont(orig_pte)) return __ptep_test_and_clear_young(vma, addr, ptep);
  return contpte_ptep_test_and_clear_young(vma, addr, ptep);
}

// wrprotect_ptes() (pgtable.h:1752)
void Arm64Arch::wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  if (nr == 1) {
    // Optimization: wrprotect_ptes() can only be called for present ptes so we only need to
    // check contig bit as condition for unfold, and we can remove the contig bit from the pte we
    // read to avoid re-reading. Equivalent to contpte_try_unfold().
    pte_t orig_pte = __ptep_get(ptep);
    if (pte_cont(orig_pte)) {
      __contpte_try_unfold(mm, addr, ptep, orig_pte);
      orig_pte = pte_mknoncont(orig_pte);
    }
    ___ptep_set_wrprotect(mm, addr, ptep, orig_pte);
  } else {
    contpte_wrprotect_ptes(mm, addr, ptep, nr);
  }
}

// ptep_set_wrprotect() (pgtable.h:1776)
void Arm64Arch::ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep) { wrprotect_ptes(mm, addr, ptep, 1); }

// ptep_set_access_flags() (pgtable.h:1783)
int Arm64Arch::ptep_set_access_flags(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t entry, int dirty) {
  pte_t orig_pte = __ptep_get(ptep);
  entry = pte_mknoncont(entry);
  if (!pte_valid_cont(orig_pte)) return __ptep_set_access_flags(vma, addr, ptep, entry, dirty);
  return contpte_ptep_set_access_flags(vma, addr, ptep, entry, dirty);
}

// ptep_clear_flush() (mm/pgtable-generic.c:94) with arm64's pte_accessible() (pte_valid()).
pte_t Arm64Arch::ptep_clear_flush(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  mm_struct* mm = vma->vm_mm;
  pte_t pte = ptep_get_and_clear(mm, addr, ptep);
  if (pte_accessible(mm, pte)) flush_tlb_page(vma, addr);
  return pte;
}

// ptep_modify_prot_start() (arch/arm64/mm/mmu.c:1537): ptep_get_and_clear(), which unfolds a
// contpte block. (Erratum 2645198's BBM for exec->non-exec does not apply to N1.)
pte_t Arm64Arch::ptep_modify_prot_start(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  return ptep_get_and_clear(vma->vm_mm, addr, ptep);
}

// ptep_modify_prot_commit() (arch/arm64/mm/mmu.c:1551)
void Arm64Arch::ptep_modify_prot_commit(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t, pte_t pte) {
  set_pte_at(vma->vm_mm, addr, ptep, pte);
}

// modify_prot_start_ptes() [newer arch/arm64/mm/mmu.c, the reuse patch's base]:
// get_and_clear_ptes(mm, addr, ptep, nr) = get_and_clear_full_ptes(..., nr, 0). With nr > 1,
// whole contpte blocks are cleared without unfolding and without a TLBI; only partially covered
// end blocks are unfolded.
pte_t Arm64Arch::modify_prot_start_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, unsigned nr) {
  return get_and_clear_full_ptes(vma->vm_mm, addr, ptep, nr, 0);
}

// modify_prot_commit_ptes() [newer arch/arm64/mm/mmu.c]: set_ptes(); with nr > 1
// contpte_set_ptes() re-applies PTE_CONT to whole aligned blocks directly (no convert).
void Arm64Arch::modify_prot_commit_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t, pte_t pte,
                                        unsigned nr) {
  set_ptes(vma->vm_mm, addr, ptep, pte, nr);
}

// pmdp_set_wrprotect() (pgtable.h:1421)
void Arm64Arch::pmdp_set_wrprotect(mm_struct* mm, uint64_t addr, pmd_t* pmdp) {
  __ptep_set_wrprotect(mm, addr, reinterpret_cast<pte_t*>(pmdp));
}

// ------------------------------------------------------------------------------------------------
// TLB maintenance (arch/arm64/include/asm/tlbflush.h, asm/tlb.h). Every operation goes to the
// hardware model through MmuHw::arm64_tlbi/arm64_dsb on the CPU running the kernel, tagged with
// the mm's ASID (mm->id). The IS forms reach every core.
//   dsb(ishst): Cost::dsb_local   (orders the PTE stores before the TLBI; does not wait for it)
//   TLBI *IS:   Cost::tlbi_bcast  (VALE1IS/VAE1IS) or Cost::tlbi_asid (ASIDE1IS)
//   dsb(ish):   Cost::dsb_bcast   (__tlbi_sync_s1ish: waits for the broadcast maintenance)
//   local: TLBI VALE1 / ASIDE1 = Cost::tlbi_local, dsb(nshst)/dsb(nsh) = Cost::dsb_local

namespace {
inline uint16_t ASID(const mm_struct* mm) { return uint16_t(mm->id); }
}  // namespace

// flush_tlb_mm() (tlbflush.h:257): DSB ISHST; TLBI ASIDE1IS; DSB ISH.
void Arm64Arch::flush_tlb_mm(mm_struct* mm) {
  k_.counters().tlb_flush_mm.inc();
  const int cpu = k_.smp_processor_id();
  k_.hw().arm64_dsb(cpu, true);  // dsb(ishst)
  k_.charge(Cost::dsb_local);
  k_.cost().extra_cycles += k_.hw().arm64_tlbi(cpu, TlbiOp::ASIDE1, ASID(mm), 0, true);  // __tlbi(aside1is, asid)
  k_.charge(Cost::tlbi_asid);
  k_.hw().arm64_dsb(cpu, true);  // __tlbi_sync_s1ish()
  k_.charge(Cost::dsb_bcast);
}

// flush_tlb_page() (tlbflush.h:285) = __flush_tlb_page_nosync() + __tlbi_sync_s1ish():
// DSB ISHST; TLBI VALE1IS; DSB ISH.
void Arm64Arch::flush_tlb_page(vm_area_struct* vma, uint64_t uaddr) {
  k_.counters().tlb_flush_page.inc();
  const int cpu = k_.smp_processor_id();
  k_.hw().arm64_dsb(cpu, true);  // dsb(ishst)
  k_.charge(Cost::dsb_local);
  k_.cost().extra_cycles += k_.hw().arm64_tlbi(cpu, TlbiOp::VALE1, ASID(vma->vm_mm), uaddr & PAGE_MASK, true);  // __tlbi(vale1is)
  k_.charge(Cost::tlbi_bcast);
  k_.hw().arm64_dsb(cpu, true);  // __tlbi_sync_s1ish()
  k_.charge(Cost::dsb_bcast);
}

// __flush_tlb_range() (tlbflush.h:507) = __flush_tlb_range_nosync() (475) + __tlbi_sync_s1ish().
// N1 has no FEAT_TLBIRANGE, so __flush_tlb_range_op() issues one TLBI per stride, and from
// MAX_DVM_OPS strides on the whole ASID is flushed instead. No TTL hint (no FEAT_TTL).
void Arm64Arch::__flush_tlb_range(mm_struct* mm, uint64_t start, uint64_t end, uint64_t stride, bool last_level,
                                  int tlb_level) {
  (void)tlb_level;
  k_.counters().tlb_flush_range.inc();
  start = ALIGN_DOWN(start, stride);  // round_down
  end = ALIGN(end, stride);           // round_up
  // When not using TLB range ops, we can handle up to (MAX_DVM_OPS - 1) pages.
  if ((end - start) >= uint64_t(MAX_DVM_OPS) * stride) {
    flush_tlb_mm(mm);
    return;
  }
  const int cpu = k_.smp_processor_id();
  k_.hw().arm64_dsb(cpu, true);  // dsb(ishst)
  k_.charge(Cost::dsb_local);
  const TlbiOp op = last_level ? TlbiOp::VALE1 : TlbiOp::VAE1;  // vale1is / vae1is
  for (uint64_t addr = start; addr < end; addr += stride) {
    k_.cost().extra_cycles += k_.hw().arm64_tlbi(cpu, op, ASID(mm), addr, true);
    k_.charge(Cost::tlbi_bcast);
  }
  k_.hw().arm64_dsb(cpu, true);  // __tlbi_sync_s1ish()
  k_.charge(Cost::dsb_bcast);
}

// flush_tlb_range() (tlbflush.h:516): not leaf-only (may be invalidating table entries).
void Arm64Arch::flush_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) {
  __flush_tlb_range(vma->vm_mm, start, end, PAGE_SIZE, false, TLBI_TTL_UNKNOWN);
}

// flush_pmd_tlb_range() (pgtable.h:46): __flush_tlb_range(vma, addr, end, PMD_SIZE, false, 2).
void Arm64Arch::flush_pmd_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) {
  __flush_tlb_range(vma->vm_mm, start, end, PMD_SIZE, false, 2);
}

// tlb_flush() (arch/arm64/include/asm/tlb.h:53). A fullmm gather (exit) has start == end == ~0
// (__tlb_reset_range, include/asm-generic/tlb.h) and only flushes when page tables were freed:
// "If we're tearing down the address space then we only care about invalidating the
// walk-cache, since the ASID allocator won't reallocate our ASID without invalidating the entire
// TLB." Otherwise __flush_tlb_range() of the gathered range, leaf-only unless tables were freed.
// The stride is tlb_get_unmap_size() (a gather of PMD leaves only: PMD_SIZE, one TLBI per block),
// the level tlb_get_level().
void Arm64Arch::tlb_flush_mmu_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift,
                                    int tlb_level, bool freed_tables) {
  const bool last_level = !freed_tables;
  const bool fullmm = start == ~uint64_t(0) && end == ~uint64_t(0);
  if (fullmm) {
    if (!last_level) flush_tlb_mm(mm);
    return;
  }
  if (end <= start) return;  // nothing gathered
  __flush_tlb_range(mm, start, end, uint64_t(1) << stride_shift, last_level, tlb_level);
}

// flush_tlb_local(): the `pagetable+flush` experiment's "this CPU only, the current mm":
// local_flush_tlb_all()'s sequence (tlbflush.h:240) restricted to the loaded ASID:
// DSB NSHST; TLBI ASIDE1; DSB NSH.
void Arm64Arch::flush_tlb_local() {
  k_.counters().tlb_flush_local.inc();
  const int cpu = k_.smp_processor_id();
  mm_struct* mm = loaded_mm_[cpu];
  if (!mm) return;
  k_.hw().arm64_dsb(cpu, false);  // dsb(nshst)
  k_.charge(Cost::dsb_local);
  k_.cost().extra_cycles += k_.hw().arm64_tlbi(cpu, TlbiOp::ASIDE1, ASID(mm), 0, false);  // __tlbi(aside1, asid)
  k_.charge(Cost::tlbi_local);
  k_.hw().arm64_dsb(cpu, false);  // dsb(nsh)
  k_.charge(Cost::dsb_local);
}

// local_flush_tlb_page_nonotify() (v6.19 tlbflush.h, commit cb1fa2e99955):
// DSB NSHST; TLBI VALE1 (this CPU); DSB NSH.
void Arm64Arch::local_flush_tlb_page_nonotify(mm_struct* mm, uint64_t uaddr) {
  const int cpu = k_.smp_processor_id();
  k_.hw().arm64_dsb(cpu, false);  // dsb(nshst)
  k_.charge(Cost::dsb_local);
  k_.cost().extra_cycles += k_.hw().arm64_tlbi(cpu, TlbiOp::VALE1, ASID(mm), uaddr & PAGE_MASK, false);  // __tlbi(vale1)
  k_.charge(Cost::tlbi_local);
  k_.hw().arm64_dsb(cpu, false);  // dsb(nsh)
  k_.charge(Cost::dsb_local);
}

std::unique_ptr<Arch> make_arm64_arch(Kernel& k) { return std::make_unique<Arm64Arch>(k); }

}  // namespace kmm
