// SPDX-License-Identifier: GPL-2.0-only
// Page-table access and allocation: pgd/pud/pmd/pte offsets and allocation (mm/memory.c:
// __pte_alloc, pmd_install, __pud_alloc, __pmd_alloc), the split page-table locks
// (include/linux/mm.h: pte_lockptr, pmd_lockptr), pgtable_trans_huge_deposit/withdraw
// (mm/pgtable-generic.c) and the generic arch hooks of include/linux/pgtable.h.
//
// Tables are frames of simulated physical memory in the hardware's format; 4 levels
// (pgd -> pud -> pmd -> pte; p4d folded) on both x86-64 and arm64 with the 4K granule.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
// pgd_index() .. pte_index(): every level has the same number of entries (PTRS_PER_*).
inline unsigned idx(uint64_t addr, unsigned shift) { return unsigned((addr >> shift) & (PTRS_PER_PTE - 1)); }
}  // namespace

// pgd_offset(mm, addr)
uint64_t* Kernel::pgd_offset(mm_struct* mm, uint64_t addr) {
  return reinterpret_cast<uint64_t*>(phys_.frame_data(mm->pgd >> PAGE_SHIFT)) + idx(addr, PGDIR_SHIFT);
}

// pud_offset(p4d, addr): the PGD entry must point to a table.
pud_t* Kernel::pud_offset(uint64_t* pgd, uint64_t addr) {
  pfn_t t = arch_->table_pfn(*pgd);
  return reinterpret_cast<pud_t*>(phys_.frame_data(t)) + idx(addr, PUD_SHIFT);
}

// pmd_offset(pud, addr)
pmd_t* Kernel::pmd_offset(pud_t* pud, uint64_t addr) {
  pfn_t t = arch_->table_pfn(pud->val);
  return reinterpret_cast<pmd_t*>(phys_.frame_data(t)) + idx(addr, PMD_SHIFT);
}

// pte_offset_map(pmd, addr): null if the PMD is none or a huge leaf (__pte_offset_map).
pte_t* Kernel::pte_offset_map(pmd_t* pmd, uint64_t addr) {
  pmd_t v = *pmd;
  if (pmd_none(v) || !arch_->table_present(v.val) || arch_->pmd_trans_huge(v)) return nullptr;
  return pt_entry(arch_->table_pfn(v.val), idx(addr, PAGE_SHIFT));
}

pte_t* Kernel::pte_offset_map_nolock(mm_struct* mm, pmd_t* pmd, uint64_t addr, uint32_t** ptlp) {
  pte_t* pte = pte_offset_map(pmd, addr);
  if (pte) *ptlp = pte_lockptr(mm, pmd);
  return pte;
}

// pte_offset_map_lock(): map and take the PTE table's split lock.
pte_t* Kernel::pte_offset_map_lock(mm_struct* mm, pmd_t* pmd, uint64_t addr, uint32_t** ptlp) {
  pte_t* pte = pte_offset_map(pmd, addr);
  if (!pte) return nullptr;
  uint32_t* ptl = pte_lockptr(mm, pmd);
  spin_lock(ptl);
  *ptlp = ptl;
  return pte;
}

// pte_lockptr(): the lock lives in the PTE table's struct page (ptdesc->ptl).
uint32_t* Kernel::pte_lockptr(mm_struct* mm, pmd_t* pmd) {
  return &pfn_to_page(arch_->table_pfn(pmd->val))->ptl_owner;
}

// pmd_lockptr(): split PMD locks, in the PMD table's struct page.
uint32_t* Kernel::pmd_lockptr(mm_struct* mm, pmd_t* pmd) {
  return &pfn_to_page(phys_.phys_of(pmd) >> PAGE_SHIFT)->ptl_owner;
}

uint32_t* Kernel::pmd_lock(mm_struct* mm, pmd_t* pmd) {
  uint32_t* ptl = pmd_lockptr(mm, pmd);
  spin_lock(ptl);
  return ptl;
}

// Spinlocks: one CPU runs kernel code at a time in this port, so a held lock met again is a
// bug in the port (a deadlock in the kernel). Multi-core platforms serialise kernel entries.
void Kernel::spin_lock(uint32_t* lock) {
  MMUSIM_CHECK(*lock == 0, "spinlock at {} already held by cpu {} (cpu {} takes it again)",
               static_cast<void*>(lock), *lock - 1, cpu_);
  *lock = uint32_t(cpu_ + 1);
  charge(Cost::lock_op);
  lock_event(lock, LockClass::ptl, true, true, page_field_pa(lock));
}

void Kernel::spin_unlock(uint32_t* lock) {
  MMUSIM_CHECK(*lock != 0, "spin_unlock of a free spinlock at {}", static_cast<void*>(lock));
  *lock = 0;
  lock_event(lock, LockClass::ptl, true, false, page_field_pa(lock));
}

// pte_alloc_one(): a zeroed page-table page.
pfn_t Kernel::pte_alloc_one(mm_struct* mm) {
  folio* f = folio_alloc(0, /*zero=*/false);
  if (!f) return 0;
  pfn_t pfn = page_to_pfn(f);
  f->flags |= PG_table;
  // (A table always has backing: the kernel holds pointers into it.)
  const auto* entries = reinterpret_cast<const uint64_t*>(phys_.frame_data(pfn));
  if (lock_obs_) lock_obs_->table_alloc(entries, unsigned(PAGE_SIZE / sizeof(uint64_t)));
  charge(Cost::pt_alloc);
  ctr_.pt_pages.inc();
  return pfn;
}

void Kernel::pte_free(mm_struct* mm, pfn_t table) {
  page* p = pfn_to_page(table);
  MMUSIM_CHECK(p->flags & PG_table, "pte_free of pfn {:#x}, which is not a page table", table);
  MMUSIM_CHECK(p->ptl_owner == 0, "freeing page table pfn {:#x} with its lock held", table);
  p->flags &= ~PG_table;
  folio_put(p);
}

// __pud_alloc()/__pmd_alloc() (mm/memory.c): populate under mm->page_table_lock.
pud_t* Kernel::pud_alloc(mm_struct* mm, uint64_t* pgd, uint64_t addr) {
  if (*pgd == 0) {
    pfn_t t = pte_alloc_one(mm);
    if (!t) return nullptr;
    mm->pgtables_bytes += PAGE_SIZE;
    *pgd = arch_->mk_table(t);
  }
  return pud_offset(pgd, addr);
}

pmd_t* Kernel::pmd_alloc(mm_struct* mm, pud_t* pud, uint64_t addr) {
  if (pud->val == 0) {
    pfn_t t = pte_alloc_one(mm);
    if (!t) return nullptr;
    mm->pgtables_bytes += PAGE_SIZE;
    pud->val = arch_->mk_table(t);
  }
  return pmd_offset(pud, addr);
}

// __pte_alloc() -> pmd_install() (mm/memory.c): returns -ENOMEM, 0 on success (also when
// someone else populated it meanwhile).
int Kernel::__pte_alloc(mm_struct* mm, pmd_t* pmd) {
  pfn_t t = pte_alloc_one(mm);
  if (!t) return -ENOMEM;
  uint32_t* ptl = pmd_lock(mm, pmd);
  if (pmd_none(*pmd)) {
    mm->pgtables_bytes += PAGE_SIZE;  // mm_inc_nr_ptes()
    pmd->val = arch_->mk_table(t);   // pmd_populate()
    t = 0;
  }
  spin_unlock(ptl);
  if (t) pte_free(mm, t);
  return 0;
}

pmd_t* Kernel::mm_find_pmd(mm_struct* mm, uint64_t addr) {
  uint64_t* pgd = pgd_offset(mm, addr);
  if (!arch_->table_present(*pgd)) return nullptr;
  pud_t* pud = pud_offset(pgd, addr);
  if (!arch_->table_present(pud->val)) return nullptr;
  return pmd_offset(pud, addr);
}

pte_t* Kernel::find_pte(mm_struct* mm, uint64_t addr) {
  pmd_t* pmd = mm_find_pmd(mm, addr);
  return pmd ? pte_offset_map(pmd, addr) : nullptr;
}

// pgtable_trans_huge_deposit()/withdraw() (mm/pgtable-generic.c): a huge PMD keeps a PTE table in
// reserve so that splitting it never needs an allocation.
void Kernel::pgtable_trans_huge_deposit(mm_struct* mm, pmd_t* pmdp, pfn_t pgtable) {
  uint64_t key = phys_.phys_of(pmdp);
  MMUSIM_CHECK(!deposited_.count(key), "PMD at {:#x} already has a deposited table", key);
  deposited_[key] = pgtable;
}

pfn_t Kernel::pgtable_trans_huge_withdraw(mm_struct* mm, pmd_t* pmdp) {
  uint64_t key = phys_.phys_of(pmdp);
  auto it = deposited_.find(key);
  MMUSIM_CHECK(it != deposited_.end(), "PMD at {:#x} has no deposited table", key);
  pfn_t t = it->second;
  deposited_.erase(it);
  return t;
}

// ------------------------------------------------------------------------------------------------
// Generic arch hooks (include/linux/pgtable.h), used unless an arch overrides them.

void Arch::set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) {
  k_.pt_touch(ptep, nr * sizeof(pte_t), true);
  k_.pte_changing(ptep, nr);
  for (;;) {
    *ptep = pte;
    k_.charge(Cost::pte_write);
    if (--nr == 0) break;
    ptep++;
    pte = pte_next_pfn(pte);
  }
}

pte_t Arch::ptep_get_and_clear(mm_struct* mm, uint64_t addr, pte_t* ptep) {
  k_.pt_touch(ptep, sizeof(pte_t), true);
  pte_t pte = *ptep;
  k_.pte_changing(ptep);
  *ptep = pte_t{0};
  k_.charge(Cost::pte_write);
  return pte;
}

// get_and_clear_full_ptes(): accumulate dirty/young of all into the first.
pte_t Arch::get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) {
  pte_t pte = ptep_get_and_clear_full(mm, addr, ptep, full);
  for (;;) {
    if (--nr == 0) break;
    ptep++;
    addr += PAGE_SIZE;
    pte_t tmp = ptep_get_and_clear_full(mm, addr, ptep, full);
    if (pte_dirty(tmp)) pte = pte_mkdirty(pte);
    if (pte_young(tmp)) pte = pte_mkyoung(pte);
  }
  return pte;
}

void Arch::clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) {
  for (;;) {
    ptep_get_and_clear_full(mm, addr, ptep, full);
    if (--nr == 0) break;
    ptep++;
    addr += PAGE_SIZE;
  }
}

void Arch::wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  for (;;) {
    ptep_set_wrprotect(mm, addr, ptep);
    if (--nr == 0) break;
    ptep++;
    addr += PAGE_SIZE;
  }
}

// ptep_clear_flush() (mm/pgtable-generic.c:94)
pte_t Arch::ptep_clear_flush(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  mm_struct* mm = vma->vm_mm;
  pte_t pte = ptep_get_and_clear(mm, addr, ptep);
  if (pte_present(pte))  // pte_accessible()
    flush_tlb_page(vma, addr);
  return pte;
}

// ptep_test_and_clear_young() (include/linux/pgtable.h): the accessed bit cleared if set.
int Arch::ptep_test_and_clear_young(vm_area_struct*, uint64_t, pte_t* ptep) {
  const pte_t pte = ptep_get(ptep);
  if (!pte_young(pte)) return 0;
  k_.pte_changing(ptep);
  ptep->val = pte_mkold(pte).val;  // test_and_clear_bit()
  k_.charge(Cost::pte_write);
  return 1;
}

// ptep_clear_flush_young() (mm/pgtable-generic.c:80): ptep_test_and_clear_young(), then
// flush_tlb_page() if it was young. (arm64's flush is __flush_tlb_page_nosync(): the TLBI
// without the DSB, here with it.)
int Arch::ptep_clear_flush_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  k_.pt_touch(ptep, sizeof(pte_t), false);
  const int young = ptep_test_and_clear_young(vma, addr, ptep);
  if (young) flush_tlb_page(vma, addr);
  return young;
}

// The generic arch has no batched unmap flush (no ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH):
// arch_tlbbatch_should_defer() is false and these are never reached.
void Arch::arch_tlbbatch_add_pending(std::vector<mm_struct*>&, vm_area_struct*, uint64_t) {
  MMUSIM_CHECK(false, "arch_tlbbatch_add_pending: this arch does not batch unmap flushes");
}
void Arch::arch_tlbbatch_flush(std::vector<mm_struct*>& batch) {
  MMUSIM_CHECK(batch.empty(), "arch_tlbbatch_flush: this arch does not batch unmap flushes");
}

// modify_prot_start_ptes() (newer include/linux/pgtable.h): OR dirty/young of all into the result.
pte_t Arch::modify_prot_start_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, unsigned nr) {
  pte_t pte = ptep_modify_prot_start(vma, addr, ptep);
  for (unsigned i = 1; i < nr; ++i) {
    ptep++;
    addr += PAGE_SIZE;
    pte_t tmp = ptep_modify_prot_start(vma, addr, ptep);
    if (pte_dirty(tmp)) pte = pte_mkdirty(pte);
    if (pte_young(tmp)) pte = pte_mkyoung(pte);
  }
  return pte;
}

// modify_prot_commit_ptes() (newer include/linux/pgtable.h)
void Arch::modify_prot_commit_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t old_pte,
                                   pte_t pte, unsigned nr) {
  for (unsigned i = 0; i < nr; ++i) {
    ptep_modify_prot_commit(vma, addr, ptep, old_pte, pte);
    ptep++;
    addr += PAGE_SIZE;
    old_pte = pte_next_pfn(old_pte);
    pte = pte_next_pfn(pte);
  }
}

pmd_t Arch::pmdp_huge_get_and_clear(mm_struct* mm, uint64_t addr, pmd_t* pmdp) {
  pmd_t pmd = *pmdp;
  *pmdp = pmd_t{0};
  k_.charge(Cost::pte_write);
  return pmd;
}

int Arch::pmdp_clear_flush_young(vm_area_struct* vma, uint64_t haddr, pmd_t* pmdp) {
  k_.pt_touch(pmdp, sizeof(pmd_t), false);
  // pmdp_test_and_clear_young()
  const pmd_t pmd = *pmdp;
  if (!pmd_young(pmd)) return 0;
  *pmdp = pmd_mkold(pmd);
  k_.charge(Cost::pte_write);
  flush_pmd_tlb_range(vma, haddr, haddr + HPAGE_PMD_SIZE);
  return 1;
}

// pmdp_invalidate() (mm/pgtable-generic.c): make it not present, flush, return the old value.
pmd_t Arch::pmdp_invalidate(vm_area_struct* vma, uint64_t addr, pmd_t* pmdp) {
  pmd_t old = *pmdp;
  *pmdp = pmd_mkinvalid(old);
  k_.charge(Cost::pte_write);
  flush_pmd_tlb_range(vma, addr & PMD_MASK, (addr & PMD_MASK) + PMD_SIZE);
  return old;
}

void Arch::switch_mm(int cpu, mm_struct* next) {
  loaded_mm_[cpu] = next;
  if (next) next->cpumask.set(size_t(cpu));
}

void Arch::set_pmd_at(mm_struct* mm, uint64_t addr, pmd_t* pmdp, pmd_t pmd) {
  *pmdp = pmd;
  k_.charge(Cost::pte_write);
}

}  // namespace kmm
