// SPDX-License-Identifier: GPL-2.0-only
// PMD THP paths (mm/huge_memory.c, include/linux/huge_mm.h): the THP order policy, the PMD fault,
// the huge zero page, PMD write faults (reuse or split), PMD split, and fork's copy_huge_pmd.
// zap_huge_pmd() belongs to teardown (mmu_gather.cpp).
//
// The order policy serves anonymous VMAs: a file VMA gets no THP through it (no ->huge_fault); its
// PMD mappings come from do_set_pmd() (filemap.cpp) of order-9 page-cache folios, and the split,
// zap and fork paths here handle them as 6.12 does (the !vma_is_anonymous() branches). No
// userfaultfd, no THP migration entries, no khugepaged.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

using mmusim::panic;

namespace {
inline int highest_order(unsigned long orders) { return orders ? 63 - __builtin_clzl(orders) : -1; }
inline int next_order(unsigned long* orders, int prev) {
  *orders &= ~(1ul << prev);
  return highest_order(*orders);
}
// THP_ORDERS_ALL_ANON (include/linux/huge_mm.h): orders 2..PMD_ORDER.
constexpr unsigned long THP_ORDERS_ALL_ANON = ((1ul << (HPAGE_PMD_ORDER + 1)) - 1) & ~((1ul << 0) | (1ul << 1));
}  // namespace

// ------------------------------------------------------------------------------------------------
// Order policy

// thp_vma_allowable_orders() (include/linux/huge_mm.h:294) -> __thp_vma_allowable_orders()
// (mm/huge_memory.c:149). The sysfs masks huge_anon_orders_{always,madvise,inherit} are the
// params().thp_order[] settings; hugepage_global_{always,enabled}() is params().thp_enabled.
unsigned long Kernel::thp_vma_allowable_orders(vm_area_struct* vma, vm_flags_t vm_flags, bool in_pf,
                                               bool enforce_sysfs, unsigned long orders) {
  // A file VMA (the branch of __thp_vma_allowable_orders() for !vma_is_anonymous()): THPs at
  // fault time only through ->huge_fault (DAX, shmem), and for collapse only with
  // CONFIG_READ_ONLY_THP_FOR_FS on read-only executables; the files here have neither. (A file
  // PMD comes from do_set_pmd(), which does not ask this policy.)
  if (vma->vm_file) return 0;
  const bool global_always = params_.thp_enabled == ThpMode::always;
  const bool global_enabled = params_.thp_enabled == ThpMode::always || params_.thp_enabled == ThpMode::madvise;
  // Optimization to check if required orders are enabled early.
  if (enforce_sysfs /* && vma_is_anonymous(vma) */) {
    unsigned long always = 0, madvise = 0, inherit = 0;
    for (unsigned o = 2; o <= HPAGE_PMD_ORDER; ++o) {
      switch (params_.thp_order[o]) {
        case ThpMode::always: always |= 1ul << o; break;
        case ThpMode::madvise: madvise |= 1ul << o; break;
        case ThpMode::inherit: inherit |= 1ul << o; break;
        case ThpMode::never: break;
      }
    }
    unsigned long mask = always;
    if (vm_flags & VM_HUGEPAGE) mask |= madvise;
    if (global_always || ((vm_flags & VM_HUGEPAGE) && global_enabled)) mask |= inherit;
    orders &= mask;
    if (!orders) return 0;
  }

  // __thp_vma_allowable_orders()
  const bool smaps = false;
  // Check the intersection of requested and supported orders.
  orders &= THP_ORDERS_ALL_ANON;
  if (!orders) return 0;
  if (!vma->vm_mm) return 0;  // vdso
  // thp_disabled_by_hw() || vma_thp_disabled(): VM_NOHUGEPAGE (MMF_DISABLE_THP: no prctl here).
  if (vm_flags & VM_NOHUGEPAGE) return 0;
  // vma_is_dax(): no.
  // khugepaged special VMA and hugetlb VMA.
  if (!in_pf && !smaps && (vm_flags & (VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_MIXEDMAP | VM_HUGETLB)))
    return 0;
  // Check alignment for file vma and size for both file and anon vma by filtering out the
  // unsuitable orders. Skip the check for page fault. Huge fault does the check in fault handlers.
  if (!in_pf) {
    int order = highest_order(orders);
    while (orders) {
      uint64_t addr = vma->vm_end - (PAGE_SIZE << order);
      if (thp_vma_suitable_order(vma, addr, unsigned(order))) break;
      order = next_order(&orders, order);
    }
    if (!orders) return 0;
  }
  // shmem VMAs: none; file VMAs: above. vma_is_temporary_stack(): no stacks.
  // THPeligible bit of smaps should show 1 for proper VMAs even though anon_vma is not
  // initialized yet. Allow page fault since anon_vma may be not initialized until the first page
  // fault.
  if (!vma->anon) return (smaps || in_pf) ? orders : 0;
  return orders;
}

// thp_vma_suitable_order() (include/linux/huge_mm.h:212)
bool Kernel::thp_vma_suitable_order(vm_area_struct* vma, uint64_t addr, unsigned order) {
  const uint64_t hpage_size = PAGE_SIZE << order;
  // Don't have to check pgoff for anonymous vma
  if (vma->vm_file /* !vma_is_anonymous() */) {
    if (!IS_ALIGNED((vma->vm_start >> PAGE_SHIFT) - vma->vm_pgoff, uint64_t(1) << order)) return false;
  }
  const uint64_t haddr = ALIGN_DOWN(addr, hpage_size);
  if (haddr < vma->vm_start || haddr + hpage_size > vma->vm_end) return false;
  return true;
}

// thp_vma_suitable_orders() (include/linux/huge_mm.h:234)
unsigned long Kernel::thp_vma_suitable_orders(vm_area_struct* vma, uint64_t addr, unsigned long orders) {
  // Iterate over orders, highest to lowest, removing orders that don't meet alignment
  // requirements from the set. Exit loop at first order that meets requirements, since all lower
  // orders must also meet requirements.
  int order = highest_order(orders);
  while (orders) {
    if (thp_vma_suitable_order(vma, addr, unsigned(order))) break;
    order = next_order(&orders, order);
  }
  return orders;
}

// ------------------------------------------------------------------------------------------------
// The huge zero page (mm/huge_memory.c:236 get_huge_zero_page, 281 mm_get_huge_zero_folio). It is
// allocated on first use and never freed (the shrinker that would free it does not run here), so
// the per-mm MMF_HUGE_ZERO_PAGE reference is not tracked. It is PG_reserved so that a stray
// folio_put() leaves it alone, like the small zero page.
page* Kernel::mm_get_huge_zero_page(mm_struct* mm) {
  if (!huge_zero_folio_) {
    folio* zero_folio = folio_alloc(HPAGE_PMD_ORDER, /*zero=*/true);
    if (!zero_folio) return nullptr;  // count_vm_event(THP_ZERO_PAGE_ALLOC_FAILED)
    zero_folio->flags |= PG_reserved;
    // Paired with atomic_inc_not_zero(). +1 for shrinker pin.
    zero_folio->refcount = 2;
    huge_zero_folio_ = zero_folio;
  }
  return huge_zero_folio_;
}

namespace {
// mm_inc_nr_ptes()
inline void mm_inc_nr_ptes(mm_struct* mm) { mm->pgtables_bytes += PAGE_SIZE; }
}  // namespace

// set_huge_zero_folio() (mm/huge_memory.c:1306). Caller must hold page table lock.
static void set_huge_zero_folio(Kernel& k, pfn_t pgtable, mm_struct* mm, vm_area_struct* vma, uint64_t haddr,
                                pmd_t* pmd, folio* zero_folio) {
  Arch& a = k.arch();
  if (!pmd_none(*pmd)) return;
  pmd_t entry = a.mk_huge_pmd(k.folio_pfn(zero_folio), a.vm_get_page_prot(vma->vm_flags));  // mk_pmd + pmd_mkhuge
  k.pgtable_trans_huge_deposit(mm, pmd, pgtable);
  a.set_pmd_at(mm, haddr, pmd, entry);
  mm_inc_nr_ptes(mm);
}

// ------------------------------------------------------------------------------------------------
// PMD faults

// do_huge_pmd_anonymous_page() (mm/huge_memory.c:1324)
vm_fault_t Kernel::do_huge_pmd_anonymous_page(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  folio* f;
  const uint64_t haddr = vmf->address & PMD_MASK;
  vm_fault_t ret;

  ctr_.huge_pmd_anonymous.inc();
  if (!thp_vma_suitable_order(vma, haddr, HPAGE_PMD_ORDER)) return VM_FAULT_FALLBACK;
  ret = vmf_anon_prepare(vmf);
  if (ret) return ret;
  // khugepaged_enter_vma(): no khugepaged.

  if (!(vmf->flags & FAULT_FLAG_WRITE) && /* !mm_forbids_zeropage && */ params_.thp_use_zero_page) {
    pfn_t pgtable = pte_alloc_one(mm);
    if (!pgtable) return VM_FAULT_OOM;
    page* zero_folio = mm_get_huge_zero_page(mm);
    if (!zero_folio) {
      pte_free(mm, pgtable);
      return VM_FAULT_FALLBACK;  // count_vm_event(THP_FAULT_FALLBACK)
    }
    vmf->ptl = pmd_lock(mm, vmf->pmd);
    ret = 0;
    if (pmd_none(*vmf->pmd)) {
      // check_stable_address_space(), userfaultfd_missing(): no.
      set_huge_zero_folio(*this, pgtable, mm, vma, haddr, vmf->pmd, zero_folio);
      // update_mmu_cache_pmd(): nothing on x86/arm64 here.
      spin_unlock(vmf->ptl);
      last_fault_.kind = FaultKind::zero_page;
      last_fault_.ptes_changed = 1;
      last_fault_.order = HPAGE_PMD_ORDER;
    } else {
      spin_unlock(vmf->ptl);
      pte_free(mm, pgtable);
      ctr_.fault_race.inc();
      last_fault_.kind = FaultKind::race;
    }
    return ret;
  }
  // gfp = vma_thp_gfp_mask(vma)
  f = vma_alloc_folio(HPAGE_PMD_ORDER, vma, haddr, /*zero=*/false);
  if (!f) return VM_FAULT_FALLBACK;  // count_vm_event(THP_FAULT_FALLBACK)
  // __do_huge_pmd_anonymous_page(): mem_cgroup_charge(folio, vma->vm_mm, gfp), on failure
  // THP_FAULT_FALLBACK_CHARGE.
  if (mem_cgroup_charge(f, mm, true, vma_thp_gfp_may_reclaim(vma))) {
    folio_put(f);
    return VM_FAULT_FALLBACK;
  }
  return __do_huge_pmd_anonymous_page(vmf, f);
}

// __do_huge_pmd_anonymous_page() (mm/huge_memory.c:1192)
vm_fault_t Kernel::__do_huge_pmd_anonymous_page(vm_fault* vmf, folio* f) {
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  pfn_t pgtable;
  const uint64_t haddr = vmf->address & PMD_MASK;
  vm_fault_t ret = 0;

  MMUSIM_CHECK(folio_test_large(f), "__do_huge_pmd_anonymous_page of a small folio");
  // mem_cgroup_charge(): always succeeds.

  pgtable = pte_alloc_one(mm);
  if (!pgtable) {
    ret = VM_FAULT_OOM;
    goto release;
  }

  folio_zero_user(f, vmf->address);
  // __folio_mark_uptodate()

  vmf->ptl = pmd_lock(mm, vmf->pmd);
  if (!pmd_none(*vmf->pmd)) {
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    goto unlock_release;
  } else {
    pmd_t entry;
    // check_stable_address_space(), userfaultfd_missing(): no.
    entry = arch_->mk_huge_pmd(folio_pfn(f), arch_->vm_get_page_prot(vma->vm_flags));
    entry = arch_->maybe_pmd_mkwrite(arch_->pmd_mkdirty(entry), vma);
    folio_add_new_anon_rmap(f, vma, haddr, RMAP_EXCLUSIVE);
    folio_add_lru_vma(f, vma);
    pgtable_trans_huge_deposit(mm, vmf->pmd, pgtable);
    arch_->set_pmd_at(mm, haddr, vmf->pmd, entry);
    // update_mmu_cache_pmd()
    add_mm_counter(mm, MM_ANONPAGES, HPAGE_PMD_NR);
    mm_inc_nr_ptes(mm);
    deferred_split_folio(f, false);
    spin_unlock(vmf->ptl);
    // count_vm_event(THP_FAULT_ALLOC)
    last_fault_.kind = FaultKind::huge_alloc;
    last_fault_.ptes_changed = 1;
    last_fault_.order = HPAGE_PMD_ORDER;
  }
  return 0;
unlock_release:
  spin_unlock(vmf->ptl);
release:
  if (pgtable) pte_free(mm, pgtable);
  folio_put(f);
  return ret;
}

// touch_pmd() (mm/huge_memory.c:1565); returns whether the PMD changed.
static bool touch_pmd(Kernel& k, vm_area_struct* vma, uint64_t addr, pmd_t* pmd, bool write) {
  Arch& a = k.arch();
  pmd_t _pmd = a.pmd_mkyoung(*pmd);
  if (write) _pmd = a.pmd_mkdirty(_pmd);
  if (a.pmdp_set_access_flags(vma, addr & PMD_MASK, pmd, _pmd, write)) {
    // update_mmu_cache_pmd()
    return true;
  }
  return false;
}

// huge_pmd_set_accessed() (mm/huge_memory.c:1804). When the PMD already allows the access the
// fault was spurious (a stale TLB entry), as in handle_pte_fault().
void Kernel::huge_pmd_set_accessed(vm_fault* vmf) {
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  vmf->ptl = pmd_lock(vmf->vma->vm_mm, vmf->pmd);
  if (!pmd_same(*vmf->pmd, vmf->orig_pmd)) {
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    goto unlock;
  }
  if (touch_pmd(*this, vmf->vma, vmf->address, vmf->pmd, write)) {
    last_fault_.kind = FaultKind::none;
    last_fault_.ptes_changed = 1;
  } else {
    ctr_.faults_spurious.inc();
    last_fault_.kind = FaultKind::spurious;
    last_fault_.ptes_changed = 0;
  }
  last_fault_.order = HPAGE_PMD_ORDER;
unlock:
  spin_unlock(vmf->ptl);
}

// do_huge_pmd_wp_page() (mm/huge_memory.c:1818)
vm_fault_t Kernel::do_huge_pmd_wp_page(vm_fault* vmf) {
  const bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  vm_area_struct* vma = vmf->vma;
  folio* f;
  page* pg;
  const uint64_t haddr = vmf->address & PMD_MASK;
  const pmd_t orig_pmd = vmf->orig_pmd;

  ctr_.huge_pmd_wp.inc();
  charge(Cost::wp_fixed);
  vmf->ptl = pmd_lockptr(vma->vm_mm, vmf->pmd);
  MMUSIM_CHECK(vma->anon, "PMD write fault in a VMA without anon_vma");

  if (is_huge_zero_pmd(orig_pmd)) goto fallback;

  spin_lock(vmf->ptl);

  if (!pmd_same(*vmf->pmd, orig_pmd)) {
    spin_unlock(vmf->ptl);
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    return 0;
  }

  pg = pfn_to_page(arch_->pmd_pfn(orig_pmd));
  f = page_folio(pg);
  MMUSIM_CHECK(pg == f && folio_test_large(f), "huge PMD maps pfn {:#x}, not a THP head", page_to_pfn(pg));

  // Early check when only holding the PT lock.
  if (PageAnonExclusive(pg)) goto reuse;

  if (!folio_trylock(f)) {
    // folio_get(); spin_unlock(); folio_lock(); spin_lock(); recheck; folio_put(): with one CPU
    // in the kernel nobody else holds the folio lock.
    panic("do_huge_pmd_wp_page: folio pfn {:#x} locked by someone else", folio_pfn(f));
  }

  // Recheck after temporarily dropping the PT lock.
  if (PageAnonExclusive(pg)) {
    folio_unlock(f);
    goto reuse;
  }

  // See do_wp_page(): we can only reuse the folio exclusively if there are no additional
  // references. Note that we always drain the LRU cache immediately after adding a THP.
  if (folio_ref_count(f) > 1 + int(folio_test_swapcache(f)) * int(folio_nr_pages(f))) goto unlock_fallback;
  // folio_test_swapcache() -> folio_free_swap(): no swap.
  if (folio_ref_count(f) == 1) {
    pmd_t entry;

    folio_move_anon_rmap(f, vma);
    SetPageAnonExclusive(pg);
    charge(Cost::page_op);
    folio_unlock(f);
  reuse:
    if (unshare) {
      spin_unlock(vmf->ptl);
      return 0;
    }
    entry = arch_->pmd_mkyoung(orig_pmd);
    entry = arch_->maybe_pmd_mkwrite(arch_->pmd_mkdirty(entry), vma);
    arch_->pmdp_set_access_flags(vma, haddr, vmf->pmd, entry, 1);  // -> update_mmu_cache_pmd()
    spin_unlock(vmf->ptl);
    last_fault_.kind = FaultKind::huge_reuse;
    last_fault_.ptes_changed = 1;
    last_fault_.order = HPAGE_PMD_ORDER;
    return 0;
  }

unlock_fallback:
  folio_unlock(f);
  spin_unlock(vmf->ptl);
fallback:
  // Before 5.8 the fault copied the huge page here (or zeroed a new one for the huge zero page).
  if (params_.thp_cow == ThpCow::copy && !unshare) {
    const vm_fault_t ret = do_huge_pmd_wp_page_copy(vmf, is_huge_zero_pmd(orig_pmd) ? nullptr : f);
    if (!(ret & VM_FAULT_FALLBACK)) return ret;
  }
  __split_huge_pmd(vma, vmf->pmd, vmf->address);
  last_fault_.kind = FaultKind::huge_split;
  last_fault_.order = HPAGE_PMD_ORDER;
  return VM_FAULT_FALLBACK;
}

// The copying half of do_huge_pmd_wp_page() before 5.8 (mm/huge_memory.c of v4.16-v5.7, from the
// `alloc:` label; the copy-huge-page-target-last patch's base), reached where 6.12 splits: `old`
// is the shared THP (null: the huge zero page). A new THP of the VMA's node is allocated, the old
// one copied into it (copy_user_huge_page(), whose order is kernel.huge_copy_order: 6.12's
// copy_user_large_folio() -> process_huge_page() is the same loop) or it is zeroed
// (clear_huge_page()), and under the PMD lock the PMD is switched to it
// (pmdp_huge_clear_flush_notify(), page_add_new_anon_rmap(), set_pmd_at()), the old mapping
// removed (page_remove_rmap(page, true), put_page()). 6.12's names are used for the same steps;
// the memcg charge always succeeds here. Without a THP (THP off for the VMA, or no memory) the
// fault falls back to the split, as the old code split too.
vm_fault_t Kernel::do_huge_pmd_wp_page_copy(vm_fault* vmf, folio* old) {
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  const uint64_t haddr = vmf->address & PMD_MASK;
  const pmd_t orig_pmd = vmf->orig_pmd;

  // transparent_hugepage_enabled(vma) && !transparent_hugepage_debug_cow()
  if (!thp_vma_allowable_orders(vma, vma->vm_flags, /*in_pf=*/true, /*enforce_sysfs=*/true,
                                1ul << HPAGE_PMD_ORDER))
    return VM_FAULT_FALLBACK;
  folio* nf = vma_alloc_folio(HPAGE_PMD_ORDER, vma, haddr, false);  // alloc_hugepage_vma()
  if (!nf) return VM_FAULT_FALLBACK;                                  // THP_FAULT_FALLBACK
  if (mem_cgroup_charge(nf, mm, true, vma_thp_gfp_may_reclaim(vma))) {  // mem_cgroup_charge()
    folio_put(nf);
    return VM_FAULT_FALLBACK;
  }
  // prep_transhuge_page(); the old code took this reference under the PMD lock (get_page()).
  if (old) folio_get(old);
  if (!old) folio_zero_user(nf, vmf->address);                        // clear_huge_page()
  else copy_user_large_folio(nf, old, vmf->address, vma);             // copy_user_huge_page()
  // __SetPageUptodate()

  spin_lock(vmf->ptl);
  if (old) folio_put(old);
  if (!pmd_same(*vmf->pmd, orig_pmd)) {
    spin_unlock(vmf->ptl);
    folio_put(nf);
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    return 0;
  }
  pmd_t entry = arch_->mk_huge_pmd(folio_pfn(nf), arch_->vm_get_page_prot(vma->vm_flags));
  entry = arch_->maybe_pmd_mkwrite(arch_->pmd_mkdirty(entry), vma);
  // pmdp_huge_clear_flush_notify(): the old read-only translation leaves every TLB first.
  arch_->pmdp_huge_get_and_clear(mm, haddr, vmf->pmd);
  arch_->flush_pmd_tlb_range(vma, haddr, haddr + HPAGE_PMD_SIZE);
  folio_add_new_anon_rmap(nf, vma, haddr, RMAP_EXCLUSIVE);           // page_add_new_anon_rmap()
  folio_add_lru_vma(nf, vma);                                        // lru_cache_add_active_or_unevictable()
  arch_->set_pmd_at(mm, haddr, vmf->pmd, entry);
  // update_mmu_cache_pmd()
  if (!old) {
    add_mm_counter(mm, MM_ANONPAGES, HPAGE_PMD_NR);
  } else {
    folio_remove_rmap_pmd(old, old, vma);                            // page_remove_rmap(page, true)
    folio_put(old);
  }
  spin_unlock(vmf->ptl);
  ctr_.huge_pmd_copy.inc();
  last_fault_.kind = FaultKind::huge_copy;
  last_fault_.ptes_changed = 1;
  last_fault_.order = HPAGE_PMD_ORDER;
  return 0;  // VM_FAULT_WRITE
}

// ------------------------------------------------------------------------------------------------
// PMD split

// __split_huge_zero_page_pmd() (mm/huge_memory.c:2680)
static void __split_huge_zero_page_pmd(Kernel& k, vm_area_struct* vma, uint64_t haddr, pmd_t* pmd) {
  Arch& a = k.arch();
  mm_struct* mm = vma->vm_mm;
  // Leave pmd empty until pte is filled. pmdp_huge_clear_flush():
  a.pmdp_huge_get_and_clear(mm, haddr, pmd);
  a.flush_pmd_tlb_range(vma, haddr, haddr + HPAGE_PMD_SIZE);

  pfn_t pgtable = k.pgtable_trans_huge_withdraw(mm, pmd);
  pte_t* pte = k.pt_entry(pgtable, 0);
  const pgprot_t prot = a.vm_get_page_prot(vma->vm_flags);
  uint64_t addr = haddr;
  for (unsigned i = 0; i < HPAGE_PMD_NR; i++, addr += PAGE_SIZE) {
    pte_t entry = a.pte_mkspecial(a.pfn_pte(k.zero_pfn(), prot));  // my_zero_pfn(addr)
    // pmd_uffd_wp(): no.
    MMUSIM_CHECK(pte_none(a.ptep_get(pte)), "deposited table not empty");
    a.set_pte_at(mm, addr, pte, entry);
    pte++;
  }
  // smp_wmb(): make pte visible before pmd. pmd_populate():
  pmd->val = a.mk_table(pgtable);
  k.charge(Cost::pte_write);
}

// __split_huge_pmd_locked() (mm/huge_memory.c:2716), freeze = false. A file VMA's PMD is zapped
// (the page cache keeps the folio); an anonymous one's becomes a table of 512 PTEs.
void Kernel::__split_huge_pmd_locked(vm_area_struct* vma, pmd_t* pmd, uint64_t haddr) {
  mm_struct* mm = vma->vm_mm;
  folio* f;
  page* pg;
  pfn_t pgtable;
  pmd_t old_pmd;
  bool young, write, soft_dirty, anon_exclusive = false, dirty = false;
  pte_t* pte;
  pte_t entry;

  MMUSIM_CHECK(!(haddr & ~PMD_MASK) && vma->vm_start <= haddr && vma->vm_end >= haddr + HPAGE_PMD_SIZE,
               "__split_huge_pmd_locked at {:#x} in VMA [{:#x},{:#x})", haddr, vma->vm_start, vma->vm_end);
  MMUSIM_CHECK(arch_->pmd_trans_huge(*pmd), "__split_huge_pmd_locked of a non-huge PMD");

  ctr_.huge_pmd_split.inc();  // count_vm_event(THP_SPLIT_PMD)

  if (vma->vm_file /* !vma_is_anonymous() */) {
    // pmdp_huge_clear_flush():
    old_pmd = arch_->pmdp_huge_get_and_clear(mm, haddr, pmd);
    arch_->flush_pmd_tlb_range(vma, haddr, haddr + HPAGE_PMD_SIZE);
    // We are going to unmap this huge page. So just go ahead and zap it.
    // (arch_needs_pgtable_deposit(): false, no table to zap. vma_is_special_huge(): no DAX.
    // pmd migration entries: none.)
    pg = pfn_to_page(arch_->pmd_pfn(old_pmd));
    f = page_folio(pg);
    if (!folio_test_dirty(f) && arch_->pmd_dirty(old_pmd)) folio_mark_dirty(f);
    if (!folio_test_referenced(f) && arch_->pmd_young(old_pmd)) f->flags |= PG_referenced;  // folio_set_referenced()
    folio_remove_rmap_pmd(f, pg, vma);
    add_mm_counter(mm, MM_FILEPAGES, -int64_t(HPAGE_PMD_NR));  // mm_counter_file()
    folio_put(f);
    // The PMD stays none: the next fault maps PTEs or a PMD again.
    return;
  }

  if (is_huge_zero_pmd(*pmd)) {
    // We are going from a zero huge page write protected to zero small page also write protected.
    __split_huge_zero_page_pmd(*this, vma, haddr, pmd);
    return;
  }

  // (pmd migration entries: none.) Up to this point the pmd is present and huge and userland has
  // the whole access to the hugepage during the split (which happens in place). ... So instead of
  // doing "pmd_populate(); flush_pmd_tlb_range();" we first mark the current pmd notpresent
  // (atomically because here the pmd_trans_huge must remain set at all times on the pmd until the
  // split is complete for this pmd), then we flush the SMP TLB and finally we write the non-huge
  // version of the pmd entry with pmd_populate.
  old_pmd = arch_->pmdp_invalidate(vma, haddr, pmd);
  pg = pfn_to_page(arch_->pmd_pfn(old_pmd));
  f = page_folio(pg);
  if (arch_->pmd_dirty(old_pmd)) {
    dirty = true;
    f->flags |= PG_dirty;  // folio_set_dirty()
  }
  write = arch_->pmd_write(old_pmd);
  young = arch_->pmd_young(old_pmd);
  // pmd_soft_dirty(): the PMD's soft-dirty bit sits where the PTE's does (x86 _PAGE_SOFT_DIRTY);
  // arm64 has none.
  soft_dirty = arch_->pte_soft_dirty(pte_t{old_pmd.val});
  // pmd_uffd_wp(): no.

  MMUSIM_CHECK(folio_ref_count(f) && folio_test_anon(f), "splitting PMD of bad folio pfn {:#x}", folio_pfn(f));

  // Without "freeze", we'll simply split the PMD, propagating the PageAnonExclusive() flag for
  // each PTE by setting it for each subpage -- no need to (temporarily) clear.
  anon_exclusive = PageAnonExclusive(pg);
  {
    rmap_t rmap_flags = RMAP_NONE;
    folio_ref_add(f, HPAGE_PMD_NR - 1);
    charge(Cost::folio_op);
    if (anon_exclusive) rmap_flags |= RMAP_EXCLUSIVE;
    folio_add_anon_rmap_ptes(f, pg, HPAGE_PMD_NR, vma, haddr, rmap_flags);
  }

  // Withdraw the table only after we mark the pmd entry invalid.
  pgtable = pgtable_trans_huge_withdraw(mm, pmd);
  pte = pt_entry(pgtable, 0);

  // Note that NUMA hinting access restrictions are not transferred to avoid any possibility of
  // altering permissions across VMAs.
  entry = arch_->pfn_pte(page_to_pfn(pg), arch_->vm_get_page_prot(vma->vm_flags));  // mk_pte()
  if (write) entry = arch_->pte_mkwrite(entry, vma);
  if (!young) entry = arch_->pte_mkold(entry);
  // NOTE: this may set soft-dirty too on some archs
  if (dirty) entry = arch_->pte_mkdirty(entry);
  if (soft_dirty) { /* pte_mksoft_dirty(): soft-dirty is not tracked in this port */ }
  // uffd_wp: no.

  for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
    MMUSIM_CHECK(pte_none(arch_->ptep_get(pte + i)), "deposited table not empty at {}", i);

  arch_->set_ptes(mm, haddr, pte, entry, HPAGE_PMD_NR);

  folio_remove_rmap_pmd(f, pg, vma);

  // smp_wmb(): make pte visible before pmd. pmd_populate(mm, pmd, pgtable):
  pmd->val = arch_->mk_table(pgtable);
  charge(Cost::pte_write);
}

// __split_huge_pmd() (mm/huge_memory.c:2964) -> split_huge_pmd_locked() (freeze = false, folio =
// NULL). mmu notifiers: none.
void Kernel::__split_huge_pmd(vm_area_struct* vma, pmd_t* pmd, uint64_t address) {
  uint32_t* ptl = pmd_lock(vma->vm_mm, pmd);
  if (arch_->pmd_trans_huge(*pmd)) __split_huge_pmd_locked(vma, pmd, address & PMD_MASK);
  spin_unlock(ptl);
}

// ------------------------------------------------------------------------------------------------
// fork: copy_huge_pmd() (mm/huge_memory.c:1618)
int Kernel::copy_huge_pmd(mm_struct* dst_mm, mm_struct* src_mm, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr,
                          vm_area_struct* dst_vma, vm_area_struct* src_vma) {
  uint32_t *dst_ptl, *src_ptl;
  page* src_page;
  folio* src_folio;
  pmd_t pmd;
  pfn_t pgtable = 0;
  int ret = -ENOMEM;

  // pmd_special(): no special huge PMDs.
  // Skip if can be re-fill on fault (a page-cache folio's PMD: the child faults it in again).
  if (dst_vma->vm_file /* !vma_is_anonymous(dst_vma) */) return 0;

  pgtable = pte_alloc_one(dst_mm);
  if (!pgtable) goto out;

  dst_ptl = pmd_lock(dst_mm, dst_pmd);
  src_ptl = pmd_lockptr(src_mm, src_pmd);
  spin_lock(src_ptl);  // spin_lock_nested(SINGLE_DEPTH_NESTING)

  ret = -EAGAIN;
  pmd = *src_pmd;

  // is_swap_pmd(): no THP migration entries.

  if (!arch_->pmd_trans_huge(pmd)) {
    pte_free(dst_mm, pgtable);
    goto out_unlock;
  }
  // When page table lock is held, the huge zero pmd should not be under splitting since we don't
  // split the page itself, only pmd to a page table.
  if (is_huge_zero_pmd(pmd)) {
    // mm_get_huge_zero_folio() will never allocate a new folio here, since we already have a zero
    // page to copy. It just takes a reference.
    mm_get_huge_zero_page(dst_mm);
    goto out_zero_page;
  }

  src_page = pfn_to_page(arch_->pmd_pfn(pmd));
  MMUSIM_CHECK(src_page->head_off == 0, "huge PMD not mapping a head page");
  src_folio = page_folio(src_page);

  folio_get(src_folio);
  charge(Cost::folio_op);
  if (folio_try_dup_anon_rmap_pmd(src_folio, src_page, dst_vma, src_vma)) {
    // Page maybe pinned: split and retry the fault on PTEs.
    folio_put(src_folio);
    pte_free(dst_mm, pgtable);
    spin_unlock(src_ptl);
    spin_unlock(dst_ptl);
    __split_huge_pmd(src_vma, src_pmd, addr);
    return -EAGAIN;
  }
  add_mm_counter(dst_mm, MM_ANONPAGES, HPAGE_PMD_NR);
out_zero_page:
  mm_inc_nr_ptes(dst_mm);
  pgtable_trans_huge_deposit(dst_mm, dst_pmd, pgtable);
  arch_->pmdp_set_wrprotect(src_mm, addr, src_pmd);
  // pmd_clear_uffd_wp(): no.
  pmd = arch_->pmd_wrprotect(pmd);
  // set_pmd:
  pmd = arch_->pmd_mkold(pmd);
  arch_->set_pmd_at(dst_mm, addr, dst_pmd, pmd);
  ctr_.ptes_copied_fork.inc();
  ret = 0;
out_unlock:
  spin_unlock(src_ptl);
  spin_unlock(dst_ptl);
out:
  return ret;
}

}  // namespace kmm
