// SPDX-License-Identifier: GPL-2.0-only
// Fault paths (mm/memory.c, mm/internal.h, mm/mprotect.c: can_change_pte_writable), 6.12 plus the
// "patch base" pieces the whole-folio reuse patch needs (PORTMAP §1.7, §3.4): large-folio reuse in
// wp_can_reuse_anon_folio() (__wp_can_reuse_large_anon_folio, v6.15+), folio_pte_batch_flags()
// with FPB_RESPECT_* and the patch's wp_reuse_large_anon_folio() with its variants.
//
// Simplified away, with the "feature off" value kept in the conditions: userfaultfd (never armed),
// KSM (never), swap (no swap entries, no swapcache), NUMA hinting (no protnone PTEs on accessible
// VMAs), file and shared mappings (every VMA is private anonymous), memcg (charging always
// succeeds), mmu notifiers (none registered), hugetlb.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

using mmusim::panic;

namespace {

// vma_is_anonymous(): no vm_ops; a file VMA has generic_file_vm_ops (filemap.cpp).
inline bool vma_is_anonymous(const vm_area_struct* vma) { return !vma->vm_file; }
// vma_is_accessible() (include/linux/mm.h)
inline bool vma_is_accessible(const vm_area_struct* vma) { return vma->vm_flags & VM_ACCESS_FLAGS; }
// is_cow_mapping() (include/linux/mm.h)
inline bool is_cow_mapping(vm_flags_t flags) { return (flags & (VM_SHARED | VM_MAYWRITE)) == VM_MAYWRITE; }
// userfaultfd_armed(), userfaultfd_pte_wp(), userfaultfd_missing(): no userfaultfd.
inline bool userfaultfd_armed(const vm_area_struct*) { return false; }
inline bool userfaultfd_pte_wp(const vm_area_struct*, pte_t) { return false; }
// mm_forbids_zeropage(): only s390 KVM.
inline bool mm_forbids_zeropage(const mm_struct*) { return false; }
// highest_order()/next_order() (include/linux/huge_mm.h)
inline int highest_order(unsigned long orders) { return orders ? 63 - __builtin_clzl(orders) : -1; }
inline int next_order(unsigned long* orders, int prev) {
  *orders &= ~(1ul << prev);
  return highest_order(*orders);
}
// LAST_CPUPID_MASK for folio_xchg_last_cpupid(folio, (1 << LAST_CPUPID_SHIFT) - 1)
constexpr uint64_t kLastCpupidNone = (uint64_t(1) << 21) - 1;

}  // namespace

// ------------------------------------------------------------------------------------------------
// handle_mm_fault() (mm/memory.c:6071) and __handle_mm_fault() (5840)

// sanitize_fault_flags() (mm/memory.c:6030)
static vm_fault_t sanitize_fault_flags(vm_area_struct* vma, uint32_t* flags) {
  if (*flags & FAULT_FLAG_UNSHARE) {
    if (*flags & FAULT_FLAG_WRITE) return VM_FAULT_SIGSEGV;
    // FAULT_FLAG_UNSHARE only applies to COW mappings. Let's just treat it like an ordinary
    // read-fault otherwise.
    if (!is_cow_mapping(vma->vm_flags)) *flags &= ~FAULT_FLAG_UNSHARE;
  } else if (*flags & FAULT_FLAG_WRITE) {
    // Write faults on read-only mappings are impossible ...
    if (!(vma->vm_flags & VM_MAYWRITE)) return VM_FAULT_SIGSEGV;
    // ... and FOLL_FORCE only applies to COW mappings.
    if (!(vma->vm_flags & VM_WRITE) && !is_cow_mapping(vma->vm_flags)) return VM_FAULT_SIGSEGV;
  }
  // Per-VMA locks can't be used with FAULT_FLAG_RETRY_NOWAIT.
  if ((*flags & (FAULT_FLAG_VMA_LOCK | FAULT_FLAG_RETRY_NOWAIT)) ==
      (FAULT_FLAG_VMA_LOCK | FAULT_FLAG_RETRY_NOWAIT))
    return VM_FAULT_SIGSEGV;
  return 0;
}

vm_fault_t Kernel::handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags) {
  // If the fault handler drops the mmap_lock, vma may be freed
  vm_fault_t ret;
  ctr_.handle_mm_fault.inc();
  charge(Cost::fault_core);

  ret = sanitize_fault_flags(vma, &flags);
  if (ret) goto out;
  // arch_vma_access_permitted(): no protection keys. mem_cgroup_enter_user_fault(),
  // lru_gen_enter_fault(): nothing to do. No hugetlb VMAs.
  ret = __handle_mm_fault(vma, address, flags);
  // Warning: It is no longer safe to dereference vma-> after this point.
out:
  mm_account_fault(address, flags, ret);
  return ret;
}

// mm_account_fault() (mm/memory.c:5956): PGFAULT and the per-task maj_flt/min_flt counts. The
// simulator counts faults in the arch handler (faults.*); per-task counts are not kept.
void Kernel::mm_account_fault(uint64_t address, uint32_t flags, vm_fault_t ret) {
  // Incomplete faults will be accounted upon completion.
  if (ret & VM_FAULT_RETRY) return;
  // count_vm_event(PGFAULT), current->{maj,min}_flt++: not kept.
}

vm_fault_t Kernel::__handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags) {
  vm_fault vmf;
  vmf.vma = vma;
  vmf.address = address & PAGE_MASK;
  vmf.real_address = address;
  vmf.flags = flags;
  vmf.pgoff = linear_page_index(vma, address);
  mm_struct* mm = vma->vm_mm;
  const vm_flags_t vm_flags = vma->vm_flags;
  vm_fault_t ret;

  uint64_t* pgd = pgd_offset(mm, address);
  // p4d_alloc(): folded.
  vmf.pud = pud_alloc(mm, pgd, address);
  if (!vmf.pud) return VM_FAULT_OOM;
  // pud_none() && thp_vma_allowable_order(PUD_ORDER): no anonymous PUD THPs
  // (THP_ORDERS_ALL_ANON stops at PMD_ORDER), so never create_huge_pud(); no huge PUDs exist.

  vmf.pmd = pmd_alloc(mm, vmf.pud, address);
  if (!vmf.pmd) return VM_FAULT_OOM;

  if (pmd_none(*vmf.pmd) &&
      thp_vma_allowable_orders(vma, vm_flags, /*in_pf=*/true, /*enforce_sysfs=*/true, 1ul << HPAGE_PMD_ORDER)) {
    ret = create_huge_pmd(&vmf);
    if (ret & VM_FAULT_FALLBACK) goto fallback;
    return ret;
  }

  vmf.orig_pmd = *vmf.pmd;  // pmdp_get_lockless()
  if (pmd_none(vmf.orig_pmd)) goto fallback;

  if (!arch_->pmd_present(vmf.orig_pmd)) {
    // pmd migration entries: no migration here.
    return 0;
  }
  if (arch_->pmd_trans_huge(vmf.orig_pmd)) {
    // pmd_protnone() && vma_is_accessible(): no NUMA hinting PMDs.
    if ((flags & (FAULT_FLAG_WRITE | FAULT_FLAG_UNSHARE)) && !arch_->pmd_write(vmf.orig_pmd)) {
      ret = wp_huge_pmd(&vmf);
      if (!(ret & VM_FAULT_FALLBACK)) return ret;
    } else {
      huge_pmd_set_accessed(&vmf);
      return 0;
    }
  }

fallback:
  return handle_pte_fault(&vmf);
}

// create_huge_pmd() (mm/memory.c:5661)
vm_fault_t Kernel::create_huge_pmd(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  if (vma_is_anonymous(vma)) return do_huge_pmd_anonymous_page(vmf);
  // vm_ops->huge_fault: no file mappings.
  return VM_FAULT_FALLBACK;
}

// wp_huge_pmd() (mm/memory.c:5672)
vm_fault_t Kernel::wp_huge_pmd(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  if (vma_is_anonymous(vma)) {
    // userfaultfd_huge_pmd_wp(): no userfaultfd.
    return do_huge_pmd_wp_page(vmf);
  }
  // COW or write-notify handled on pte level: split pmd.
  __split_huge_pmd(vma, vmf->pmd, vmf->address);
  return VM_FAULT_FALLBACK;
}

// ------------------------------------------------------------------------------------------------
// handle_pte_fault() (mm/memory.c:5756), with the spurious-fault path (PORTMAP §1.3).

vm_fault_t Kernel::handle_pte_fault(vm_fault* vmf) {
  pte_t entry;
  vm_area_struct* vma = vmf->vma;

  if (pmd_none(*vmf->pmd)) {
    // Leave __pte_alloc() until later.
    vmf->pte = nullptr;
    vmf->flags &= ~FAULT_FLAG_ORIG_PTE_VALID;
  } else {
    vmf->pte = pte_offset_map_nolock(vma->vm_mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (!vmf->pte) return 0;
    pt_touch(vmf->pte, sizeof(pte_t), false);
    vmf->orig_pte = arch_->ptep_get_lockless(vmf->pte);  // NO PTL yet
    // Several cores: what the read saw at this point in simulated time (another CPU's fault may
    // have changed the PTE since; pte_same() under the PTL then fails, as in the kernel).
    vmf->orig_pte = pte_seen_lockless(vmf->pte, vmf->orig_pte);
    vmf->flags |= FAULT_FLAG_ORIG_PTE_VALID;
    if (pte_none(vmf->orig_pte)) vmf->pte = nullptr;  // pte_unmap()
  }

  if (!vmf->pte) return do_pte_missing(vmf);

  // A swap entry (no migration or device entries exist in this port).
  if (!arch_->pte_present(vmf->orig_pte)) return do_swap_page(vmf);
  // do_numa_page(): protnone PTEs only exist in PROT_NONE VMAs, which never get here.
  MMUSIM_CHECK(!(arch_->pte_protnone(vmf->orig_pte) && vma_is_accessible(vma)),
               "NUMA hinting PTE at {:#x} (no NUMA balancing here)", vmf->address);

  spin_lock(vmf->ptl);
  entry = vmf->orig_pte;
  if (!pte_same(arch_->ptep_get(vmf->pte), entry)) {
    // update_mmu_tlb(): empty on x86 and arm64. Lost a race with another fault.
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    last_fault_.ptes_changed = 0;
    goto unlock;
  }
  if (vmf->flags & (FAULT_FLAG_WRITE | FAULT_FLAG_UNSHARE)) {
    if (!arch_->pte_write(entry)) return do_wp_page(vmf);  // PTL held on entry
    else if (vmf->flags & FAULT_FLAG_WRITE)
      entry = arch_->pte_mkdirty(entry);
  }
  entry = arch_->pte_mkyoung(entry);
  if (arch_->ptep_set_access_flags(vma, vmf->address, vmf->pte, entry, vmf->flags & FAULT_FLAG_WRITE)) {
    arch_->update_mmu_cache_range(vma, vmf->address, vmf->pte, 1);
    last_fault_.kind = FaultKind::none;  // only the access flags changed
    last_fault_.ptes_changed = 1;
  } else {
    // Nothing to change: a stale TLB entry faulted (the PTE already allows the access).
    ctr_.faults_spurious.inc();
    last_fault_.kind = FaultKind::spurious;
    last_fault_.ptes_changed = 0;
    // Skip spurious TLB flush for retried page fault
    if (vmf->flags & FAULT_FLAG_TRIED) goto unlock;
    // This is needed only for protection faults but the arch code is not yet telling us if this
    // is a protection fault or not. This still avoids useless tlb flushes for .text page faults
    // with threads.
    if (vmf->flags & FAULT_FLAG_WRITE) arch_->flush_tlb_fix_spurious_fault(vma, vmf->address, vmf->pte);
  }
unlock:
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  return 0;
}

// do_pte_missing() (mm/memory.c:3961)
vm_fault_t Kernel::do_pte_missing(vm_fault* vmf) {
  if (vma_is_anonymous(vmf->vma)) return do_anonymous_page(vmf);
  return do_fault(vmf);
}

// ------------------------------------------------------------------------------------------------
// do_anonymous_page() (mm/memory.c:4736) and alloc_anon_folio() (4654)

// vmf_pte_changed() (mm/memory.c:5049)
bool Kernel::vmf_pte_changed(vm_fault* vmf) {
  if (vmf->flags & FAULT_FLAG_ORIG_PTE_VALID) return !pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte);
  return !pte_none(arch_->ptep_get(vmf->pte));
}

// pte_range_none() (mm/memory.c:4642)
bool Kernel::pte_range_none(pte_t* pte, int nr_pages) {
  for (int i = 0; i < nr_pages; i++) {
    charge(Cost::pte_scan);
    if (!pte_none(arch_->ptep_get_lockless(pte + i))) return false;
  }
  return true;
}

// __vmf_anon_prepare() (mm/memory.c:3297) and vmf_anon_prepare() (mm/internal.h:365): without an
// anon_vma, under the per-VMA lock, the mmap_lock must be taken (trylock) to create one; if that
// fails the fault is retried, with the VMA lock already dropped.
vm_fault_t Kernel::vmf_anon_prepare(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  vm_fault_t ret = 0;

  if (vma->anon) return 0;
  if (vmf->flags & FAULT_FLAG_VMA_LOCK) {
    if (!mmap_read_trylock(vma->vm_mm)) {
      ret = VM_FAULT_RETRY;
      goto out;
    }
  }
  if (anon_vma_prepare(vma)) ret = VM_FAULT_OOM;
  if (vmf->flags & FAULT_FLAG_VMA_LOCK) mmap_read_unlock(vma->vm_mm);
out:
  // vmf_anon_prepare(): the RETRY convention drops the VMA lock.
  if (ret & VM_FAULT_RETRY) vma_end_read(vma);
  return ret;
}

folio* Kernel::alloc_anon_folio(vm_fault* vmf, bool* again) {
  vm_area_struct* vma = vmf->vma;
  unsigned long orders;
  folio* f;
  uint64_t addr;
  pte_t* pte;
  int order;
  *again = false;

  // If uffd is active for the vma we need per-page fault fidelity to maintain the uffd semantics.
  if (userfaultfd_armed(vma)) goto fallback;

  // Get a list of all the (large) orders below PMD_ORDER that are enabled for this vma. Then
  // filter out the orders that can't be allocated over the faulting address and still be fully
  // contained in the vma.
  orders = thp_vma_allowable_orders(vma, vma->vm_flags, /*in_pf=*/true, /*enforce_sysfs=*/true,
                                    (1ul << HPAGE_PMD_ORDER) - 1);
  orders = thp_vma_suitable_orders(vma, vmf->address, orders);
  if (!orders) goto fallback;

  pte = pte_offset_map(vmf->pmd, vmf->address & PMD_MASK);
  if (!pte) {
    *again = true;  // ERR_PTR(-EAGAIN)
    return nullptr;
  }

  // Find the highest order where the aligned range is completely pte_none(). Note that all
  // remaining orders will be completely pte_none().
  order = highest_order(orders);
  while (orders) {
    addr = ALIGN_DOWN(vmf->address, PAGE_SIZE << order);
    if (pte_range_none(pte + pte_index(addr), 1 << order)) break;
    order = next_order(&orders, order);
  }
  if (!orders) goto fallback;

  // Try allocating the highest of the remaining orders.
  while (orders) {
    addr = ALIGN_DOWN(vmf->address, PAGE_SIZE << order);
    f = vma_alloc_folio(unsigned(order), vma, addr, /*zero=*/false);
    if (f) {
      if (mem_cgroup_charge(f, vma->vm_mm, true, vma_thp_gfp_may_reclaim(vma))) {
        // count_mthp_stat(order, MTHP_STAT_ANON_FAULT_FALLBACK_CHARGE)
        folio_put(f);
        order = next_order(&orders, order);
        continue;
      }
      folio_zero_user(f, vmf->address);
      return f;
    }
    // count_mthp_stat(order, MTHP_STAT_ANON_FAULT_FALLBACK)
    order = next_order(&orders, order);
  }

fallback:
  return folio_prealloc(vma->vm_mm, vma, vmf->address, true);
}

// We enter with non-exclusive mmap_lock (or the VMA lock), and pte mapped but not yet locked.
vm_fault_t Kernel::do_anonymous_page(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  uint64_t addr = vmf->address;
  folio* f = nullptr;
  vm_fault_t ret = 0;
  int nr_pages = 1;
  pte_t entry;
  bool again = false;
  const pgprot_t prot = arch_->vm_get_page_prot(vma->vm_flags);  // vma->vm_page_prot

  ctr_.do_anonymous_page.inc();

  // File mapping without ->vm_ops ?
  if (vma->vm_flags & VM_SHARED) return VM_FAULT_SIGBUS;

  // Use pte_alloc() instead of pte_alloc_map(), so that OOM can be distinguished from a transient
  // failure of pte_offset_map().
  if (pte_alloc(mm, vmf->pmd)) return VM_FAULT_OOM;

  // Use the zero-page for reads
  if (!(vmf->flags & FAULT_FLAG_WRITE) && !mm_forbids_zeropage(mm)) {
    entry = arch_->pte_mkspecial(arch_->pfn_pte(zero_pfn(), prot));
    vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (!vmf->pte) goto unlock;
    if (vmf_pte_changed(vmf)) {
      // update_mmu_tlb()
      ctr_.fault_race.inc();
      last_fault_.kind = FaultKind::race;
      goto unlock;
    }
    // check_stable_address_space(): no OOM reaper. userfaultfd_missing(): no.
    last_fault_.kind = FaultKind::zero_page;
    last_fault_.ptes_changed = 1;
    last_fault_.order = 0;
    goto setpte;
  }

  // Allocate our own private page.
  ret = vmf_anon_prepare(vmf);
  if (ret) return ret;
  // Returns NULL on OOM or ERR_PTR(-EAGAIN) if we must retry the fault
  f = alloc_anon_folio(vmf, &again);
  if (again) return 0;
  if (!f) goto oom;

  nr_pages = int(folio_nr_pages(f));
  addr = ALIGN_DOWN(vmf->address, uint64_t(nr_pages) * PAGE_SIZE);

  // __folio_mark_uptodate()
  entry = arch_->pfn_pte(folio_pfn(f), prot);  // mk_pte()
  entry = arch_->pte_sw_mkyoung(entry);
  if (vma->vm_flags & VM_WRITE) entry = arch_->pte_mkwrite(arch_->pte_mkdirty(entry), vma);

  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, addr, &vmf->ptl);
  if (!vmf->pte) goto release;
  if (nr_pages == 1 && vmf_pte_changed(vmf)) {
    // update_mmu_tlb()
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    goto release;
  } else if (nr_pages > 1 && !pte_range_none(vmf->pte, nr_pages)) {
    // update_mmu_tlb_range()
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    goto release;
  }
  // check_stable_address_space(), userfaultfd_missing(): no.

  folio_ref_add(f, nr_pages - 1);
  charge(Cost::folio_op);
  add_mm_counter(mm, MM_ANONPAGES, nr_pages);
  // count_mthp_stat(folio_order(folio), MTHP_STAT_ANON_FAULT_ALLOC)
  folio_add_new_anon_rmap(f, vma, addr, RMAP_EXCLUSIVE);
  folio_add_lru_vma(f, vma);
  last_fault_.kind = FaultKind::alloc;
  last_fault_.ptes_changed = unsigned(nr_pages);
  last_fault_.order = folio_order(f);
setpte:
  // vmf_orig_pte_uffd_wp(): no.
  arch_->set_ptes(mm, addr, vmf->pte, entry, unsigned(nr_pages));
  // No need to invalidate - it was non-present before
  arch_->update_mmu_cache_range(vma, addr, vmf->pte, unsigned(nr_pages));
unlock:
  if (vmf->pte) pte_unmap_unlock(vmf->pte, vmf->ptl);
  return ret;
release:
  folio_put(f);
  goto unlock;
oom:
  return VM_FAULT_OOM;
}

// ------------------------------------------------------------------------------------------------
// vm_normal_page() (mm/memory.c:594), vm_normal_folio() (660). Both arches have
// CONFIG_ARCH_HAS_PTE_SPECIAL.

page* Kernel::vm_normal_page(vm_area_struct* vma, uint64_t addr, pte_t pte) {
  const pfn_t pfn = arch_->pte_pfn(pte);
  if (!arch_->pte_special(pte)) goto check_pfn;
  // vm_ops->find_special_page: none.
  if (vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP)) return nullptr;
  if (is_zero_pfn(pfn)) return nullptr;
  // pte_devmap(): none. print_bad_pte():
  panic("vm_normal_page: bad special PTE {:#x} at {:#x}", pte.val, addr);

check_pfn:
  if (pfn >= nr_frames_) panic("vm_normal_page: PTE {:#x} at {:#x} beyond the memmap", pte.val, addr);
  MMUSIM_CHECK(!is_zero_pfn(pfn), "the zero pfn mapped without the special bit at {:#x}", addr);
  return pfn_to_page(pfn);
}

folio* Kernel::vm_normal_folio(vm_area_struct* vma, uint64_t addr, pte_t pte) {
  page* pg = vm_normal_page(vma, addr, pte);
  if (pg) return page_folio(pg);
  return nullptr;
}

// ------------------------------------------------------------------------------------------------
// PTE batches (mm/internal.h)

// folio_pte_batch() (6.12 mm/internal.h:204): __pte_batch_clear_ignored() always ignores the
// write and accessed bits; FPB_IGNORE_DIRTY / FPB_IGNORE_SOFT_DIRTY add dirty / soft-dirty.
int Kernel::folio_pte_batch(folio* f, uint64_t addr, pte_t* start_ptep, pte_t pte, int max_nr, fpb_t flags,
                            bool* any_writable, bool* any_young, bool* any_dirty) {
  Arch& a = *arch_;
  // __pte_batch_clear_ignored() (6.12 mm/internal.h:170)
  auto clear_ignored = [&](pte_t p) {
    if (flags & FPB_IGNORE_DIRTY) p = a.pte_mkclean(p);
    if (flags & FPB_IGNORE_SOFT_DIRTY) p = a.pte_clear_soft_dirty(p);
    return a.pte_wrprotect(a.pte_mkold(p));
  };
  pte_t expected_pte, *ptep;
  bool writable = false, young = false, dirty = false;
  int nr, cur_nr;

  if (any_writable) *any_writable = false;
  if (any_young) *any_young = false;
  if (any_dirty) *any_dirty = false;

  MMUSIM_CHECK(a.pte_present(pte) && folio_test_large(f) && max_nr >= 1 &&
                   page_folio(pfn_to_page(a.pte_pfn(pte))) == f,
               "folio_pte_batch: bad arguments (pte {:#x}, max_nr {})", pte.val, max_nr);

  // Limit max_nr to the actual remaining PFNs in the folio we could batch.
  max_nr = int(std::min<uint64_t>(uint64_t(max_nr), folio_pfn(f) + folio_nr_pages(f) - a.pte_pfn(pte)));

  nr = int(a.pte_batch_hint(start_ptep, pte));
  expected_pte = clear_ignored(a.pte_advance_pfn(pte, unsigned(nr)));
  ptep = start_ptep + nr;
  charge(Cost::pte_scan);

  while (nr < max_nr) {
    pte = a.ptep_get(ptep);
    charge(Cost::pte_scan);
    if (any_writable) writable = a.pte_write(pte);
    if (any_young) young = a.pte_young(pte);
    if (any_dirty) dirty = a.pte_dirty(pte);
    pte = clear_ignored(pte);

    if (!pte_same(pte, expected_pte)) break;

    if (any_writable) *any_writable |= writable;
    if (any_young) *any_young |= young;
    if (any_dirty) *any_dirty |= dirty;

    cur_nr = int(a.pte_batch_hint(ptep, pte));
    expected_pte = a.pte_advance_pfn(expected_pte, unsigned(cur_nr));
    ptep += cur_nr;
    nr += cur_nr;
  }
  return std::min(nr, max_nr);
}

// folio_pte_batch_flags() (newer mm/internal.h): the FPB_RESPECT_* spelling. Dirty, soft-dirty and
// write bits are ignored unless respected; FPB_MERGE_* fold the batch's bits into *ptentp.
int Kernel::folio_pte_batch_flags(folio* f, vm_area_struct* vma, pte_t* ptep, pte_t* ptentp, int max_nr,
                                  fpb_t flags) {
  Arch& a = *arch_;
  // __pte_batch_clear_ignored() (newer)
  auto clear_ignored = [&](pte_t p) {
    if (!(flags & FPB_RESPECT_DIRTY)) p = a.pte_mkclean(p);
    if (!(flags & FPB_RESPECT_SOFT_DIRTY)) p = a.pte_clear_soft_dirty(p);
    if (!(flags & FPB_RESPECT_WRITE)) p = a.pte_wrprotect(p);
    return a.pte_mkold(p);
  };
  bool any_writable = false, any_young = false, any_dirty = false;
  pte_t expected_pte, pte = *ptentp;
  int nr, cur_nr;

  MMUSIM_CHECK(a.pte_present(pte) && folio_test_large(f) && max_nr >= 1 &&
                   page_folio(pfn_to_page(a.pte_pfn(pte))) == f,
               "folio_pte_batch_flags: bad arguments (pte {:#x}, max_nr {})", pte.val, max_nr);

  // Limit max_nr to the actual remaining PFNs in the folio we could batch.
  max_nr = int(std::min<uint64_t>(uint64_t(max_nr), folio_pfn(f) + folio_nr_pages(f) - a.pte_pfn(pte)));

  nr = int(a.pte_batch_hint(ptep, pte));
  expected_pte = clear_ignored(a.pte_advance_pfn(pte, unsigned(nr)));
  ptep = ptep + nr;
  charge(Cost::pte_scan);

  while (nr < max_nr) {
    pte = a.ptep_get(ptep);
    charge(Cost::pte_scan);
    if (!pte_same(clear_ignored(pte), expected_pte)) break;
    if (flags & FPB_MERGE_WRITE) any_writable |= a.pte_write(pte);
    if (flags & FPB_MERGE_YOUNG_DIRTY) {
      any_young |= a.pte_young(pte);
      any_dirty |= a.pte_dirty(pte);
    }
    cur_nr = int(a.pte_batch_hint(ptep, pte));
    expected_pte = a.pte_advance_pfn(expected_pte, unsigned(cur_nr));
    ptep += cur_nr;
    nr += cur_nr;
  }

  if (any_writable) *ptentp = a.pte_mkwrite(*ptentp, vma);
  if (any_young) *ptentp = a.pte_mkyoung(*ptentp);
  if (any_dirty) *ptentp = a.pte_mkdirty(*ptentp);
  return std::min(nr, max_nr);
}

// can_change_pte_writable() (mm/mprotect.c:43)
bool Kernel::can_change_pte_writable(vm_area_struct* vma, uint64_t addr, pte_t pte) {
  page* pg;
  if (!(vma->vm_flags & VM_WRITE)) return false;  // WARN_ON_ONCE
  // Don't touch entries that are not even readable.
  if (arch_->pte_protnone(pte)) return false;
  // Do we need write faults for softdirty tracking? (On only for VMAs without VM_SOFTDIRTY, after
  // clear_refs, which never happens here; arm64 has no soft-dirty.)
  if (pte_needs_soft_dirty_wp(vma, pte)) return false;
  // Do we need write faults for uffd-wp tracking?
  if (userfaultfd_pte_wp(vma, pte)) return false;
  if (!(vma->vm_flags & VM_SHARED)) {
    // Writable MAP_PRIVATE mapping: We can only special-case on exclusive anonymous pages,
    // because we know that our write-fault handler similarly would map them writable without any
    // additional checks while holding the PT lock.
    pg = vm_normal_page(vma, addr, pte);
    return pg && folio_test_anon(page_folio(pg)) && PageAnonExclusive(pg);
  }
  // Writable MAP_SHARED mapping: none here.
  return arch_->pte_dirty(pte);
}

// ------------------------------------------------------------------------------------------------
// Write-protect faults: do_wp_page() (mm/memory.c:3656) and its helpers.

// __wp_page_copy_user() (mm/memory.c:3034)
int Kernel::__wp_page_copy_user(page* dst, page* src, vm_fault* vmf) {
  if (src) {
    // copy_mc_user_highpage(): no hardware poison here.
    copy_user_highpage(dst, src, vmf->address);
    return 0;
  }
  // The source page was a PFN mapping without a struct page: there are none in this port (the
  // zero-pfn case does not copy).
  panic("__wp_page_copy_user: no source page at {:#x}", vmf->address);
}

// wp_page_reuse() (mm/memory.c:3238)
void Kernel::wp_page_reuse(vm_fault* vmf, folio* f) {
  vm_area_struct* vma = vmf->vma;
  pte_t entry;

  MMUSIM_CHECK(vmf->flags & FAULT_FLAG_WRITE, "wp_page_reuse without FAULT_FLAG_WRITE");
  MMUSIM_CHECK(!is_zero_pfn(arch_->pte_pfn(vmf->orig_pte)), "wp_page_reuse of the zero page");
  if (f) {
    MMUSIM_CHECK(!(folio_test_anon(f) && !PageAnonExclusive(vmf->page_)),
                 "reusing a non-exclusive anon page pfn {:#x}", page_to_pfn(vmf->page_));
    // Clear the folio's cpupid information as the existing information potentially belongs to a
    // now completely unrelated process.
    f->last_cpupid = kLastCpupidNone;  // folio_xchg_last_cpupid()
  }
  // flush_cache_page(): no-op on x86/arm64.
  entry = arch_->pte_mkyoung(vmf->orig_pte);
  entry = arch_->maybe_mkwrite(arch_->pte_mkdirty(entry), vma);
  if (arch_->ptep_set_access_flags(vma, vmf->address, vmf->pte, entry, 1))
    arch_->update_mmu_cache_range(vma, vmf->address, vmf->pte, 1);
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  ctr_.wp_reuse.inc();  // count_vm_event(PGREUSE)
}

// wp_page_copy() (mm/memory.c:3332): called with the old folio referenced, without the PTL.
vm_fault_t Kernel::wp_page_copy(vm_fault* vmf) {
  const bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  folio* old_folio = nullptr;
  folio* new_folio = nullptr;
  pte_t entry;
  bool page_copied = false;
  vm_fault_t ret;
  bool pfn_is_zero;
  const pgprot_t prot = arch_->vm_get_page_prot(vma->vm_flags);

  if (vmf->page_) old_folio = page_folio(vmf->page_);
  ret = vmf_anon_prepare(vmf);
  if (ret) goto out;

  pfn_is_zero = is_zero_pfn(arch_->pte_pfn(vmf->orig_pte));
  new_folio = folio_prealloc(mm, vma, vmf->address, pfn_is_zero);
  if (!new_folio) goto oom;

  if (!pfn_is_zero) {
    int err = __wp_page_copy_user(new_folio, vmf->page_, vmf);
    if (err) {
      // COW failed, if the fault was solved by other, it's fine. If not, userspace would re-fault
      // on the same address and we will handle the fault from the second attempt.
      folio_put(new_folio);
      if (old_folio) folio_put(old_folio);
      return err == -EHWPOISON ? VM_FAULT_HWPOISON : 0;
    }
  }
  // __folio_mark_uptodate(); mmu_notifier_invalidate_range_start(): no notifiers.

  // Re-check the pte - we dropped the lock
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (vmf->pte && pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte)) {
    if (old_folio) {
      if (!folio_test_anon(old_folio)) {
        dec_mm_counter(mm, MM_FILEPAGES);  // mm_counter_file(old_folio)
        inc_mm_counter(mm, MM_ANONPAGES);
      }
    } else {
      // ksm_might_unmap_zero_page(): no KSM.
      inc_mm_counter(mm, MM_ANONPAGES);
    }
    // flush_cache_page(): no-op.
    entry = arch_->pfn_pte(folio_pfn(new_folio), prot);  // mk_pte()
    entry = arch_->pte_sw_mkyoung(entry);
    if (unshare) {
      if (arch_->pte_soft_dirty(vmf->orig_pte)) { /* pte_mksoft_dirty(): no soft-dirty tracking here */ }
      // pte_uffd_wp(): no userfaultfd.
    } else {
      entry = arch_->maybe_mkwrite(arch_->pte_mkdirty(entry), vma);
    }

    // Clear the pte entry and flush it first, before updating the pte with the new entry, to keep
    // TLBs on different CPUs in sync.
    arch_->ptep_clear_flush(vma, vmf->address, vmf->pte);
    folio_add_new_anon_rmap(new_folio, vma, vmf->address, RMAP_EXCLUSIVE);
    folio_add_lru_vma(new_folio, vma);
    MMUSIM_CHECK(!(unshare && arch_->pte_write(entry)), "unshare made a PTE writable");
    arch_->set_pte_at(mm, vmf->address, vmf->pte, entry);
    arch_->update_mmu_cache_range(vma, vmf->address, vmf->pte, 1);
    if (old_folio) {
      // Only after switching the pte to the new page may we remove the mapcount here. Otherwise
      // another process may come and find the rmap count decremented before the pte is switched
      // to the new page, and "reuse" the old page writing into it while our pte here still points
      // into it and can be read by other threads.
      folio_remove_rmap_pte(old_folio, vmf->page_, vma);
    }
    last_fault_.kind = FaultKind::copy;
    last_fault_.ptes_changed = 1;
    last_fault_.order = old_folio ? folio_order(old_folio) : 0;
    ctr_.wp_copy.inc();
    // Free the old page..
    new_folio = old_folio;
    page_copied = true;
    pte_unmap_unlock(vmf->pte, vmf->ptl);
  } else if (vmf->pte) {
    // update_mmu_tlb()
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    pte_unmap_unlock(vmf->pte, vmf->ptl);
  }
  // mmu_notifier_invalidate_range_end()

  if (new_folio) folio_put(new_folio);
  if (old_folio) {
    if (page_copied) { /* free_swap_cache(old_folio): no swap */ }
    folio_put(old_folio);
  }
  return 0;
oom:
  ret = VM_FAULT_OOM;
out:
  if (old_folio) folio_put(old_folio);
  return ret;
}

// __wp_can_reuse_large_anon_folio() (v6.15+, mm/memory.c; PORTMAP §1.5 [newer])
bool Kernel::__wp_can_reuse_large_anon_folio(folio* f, vm_area_struct* vma) {
  bool exclusive = false;

  // Let's just free up a large folio if only a single page is mapped.
  if (folio_large_mapcount(f) <= 1) return false;

  // The assumption for anonymous folios is that each page can only get mapped once into each MM.
  // The only exception are KSM folios, which are always small.
  //
  // Each taken mapcount must be paired with exactly one taken reference, whereby the refcount
  // must be incremented before the mapcount when mapping a page, and the refcount must be
  // decremented after the mapcount when unmapping a page.
  //
  // If all folio references are from mappings, and all mappings are in the page tables of this
  // MM, then this folio is exclusive to this MM.
  if (folio_test_large_maybe_mapped_shared(f)) return false;

  MMUSIM_CHECK(!folio_test_ksm(f), "KSM large folio");

  if (folio_test_swapcache(f)) {
    // Note: freeing up the swapcache will fail if some PTEs are still swap entries.
    if (!folio_trylock(f)) return false;
    // folio_free_swap(): no swap.
    folio_unlock(f);
  }

  if (folio_large_mapcount(f) != folio_ref_count(f)) return false;

  // Stabilize the mapcount vs. refcount and recheck.
  folio_lock_large_mapcount(f);
  MMUSIM_CHECK(folio_large_mapcount(f) <= folio_ref_count(f),
               "folio pfn {:#x}: large mapcount {} above refcount {}", folio_pfn(f),
               folio_large_mapcount(f), folio_ref_count(f));

  if (folio_test_large_maybe_mapped_shared(f)) goto unlock;
  if (folio_large_mapcount(f) != folio_ref_count(f)) goto unlock;

  MMUSIM_CHECK(folio_large_mapcount(f) <= folio_nr_pages(f), "folio pfn {:#x}: large mapcount {} > nr pages",
               folio_pfn(f), folio_large_mapcount(f));
  MMUSIM_CHECK(!folio_entire_mapcount(f), "PTE fault on PMD-mapped folio pfn {:#x}", folio_pfn(f));
  MMUSIM_CHECK(folio_mm_id(f, 0) == vma->vm_mm->id || folio_mm_id(f, 1) == vma->vm_mm->id,
               "exclusive folio pfn {:#x} not tracked for mm {}", folio_pfn(f), vma->vm_mm->id);

  // Do we need the folio lock? Likely not. If there would have been references from page
  // migration/swapout, we would have detected an additional folio reference and never ended up
  // here.
  exclusive = true;
unlock:
  folio_unlock_large_mapcount(f);
  return exclusive;
}

// wp_can_reuse_anon_folio() (mm/memory.c:3586)
bool Kernel::wp_can_reuse_anon_folio(folio* f, vm_area_struct* vma) {
  struct_page_touch(f, 1, false);  // folio_ref_count(), the mapcounts: the head's line
  // 6.12: "We could currently only reuse a subpage of a large folio if no other subpages of the
  // large folios are still mapped. However, let's just consistently not reuse subpages even if we
  // could reuse in that scenario, and give back a large folio a bit sooner." v6.15+ (the base of
  // the reuse patch) decides for large folios with the MM ids.
  if (folio_test_large(f)) {
    if (params_.large_folio_reuse) return __wp_can_reuse_large_anon_folio(f, vma);
    return false;
  }

  // We have to verify under folio lock: these early checks are just an optimization to avoid
  // locking the folio and freeing the swapcache if there is little hope that we can reuse.
  //
  // KSM doesn't necessarily raise the folio refcount.
  if (folio_test_ksm(f) || folio_ref_count(f) > 3) return false;
  if (!folio_test_lru(f))
    // We cannot easily detect+handle references from remote LRU caches or references to LRU
    // folios.
    lru_add_drain();
  if (folio_ref_count(f) > 1 + int(folio_test_swapcache(f))) return false;
  if (!folio_trylock(f)) return false;
  // folio_test_swapcache() -> folio_free_swap(): no swap.
  if (folio_test_ksm(f) || folio_ref_count(f) != 1) {
    folio_unlock(f);
    return false;
  }
  // Ok, we've got the only folio reference from our mapping and the folio is locked, it's dark
  // out, and we're wearing sunglasses. Hit it.
  folio_move_anon_rmap(f, vma);
  folio_unlock(f);
  return true;
}

// wp_reuse_large_anon_folio() (patches/wp-reuse-whole-folio.diff): wp_can_reuse_anon_folio()
// found a large folio to be exclusive to this MM. That holds for all of its pages and not only for
// the one that faulted: mark the ones that this page table maps exclusive as well and map them
// writable, like mprotect() would. The PTE that faulted is among them; wp_page_reuse() completes
// it.
//
// Variants (params().wp_reuse): `pagetable` is the diff; `block16` is the patch's first version,
// bounded by the aligned block of WP_REUSE_NR_PTES = 16 PTEs around the fault instead of the page
// table (PORTMAP §1.7 v1); `pagetable+flush` adds flush_tlb_local() at the end (an experiment).
// `off` never gets here.
void Kernel::wp_reuse_large_anon_folio(vm_fault* vmf, folio* f) {
  const fpb_t flags = FPB_RESPECT_WRITE | FPB_RESPECT_SOFT_DIRTY;
  const unsigned long idx = folio_page_idx(f, vmf->page_);
  vm_area_struct* vma = vmf->vma;
  uint64_t addr = vmf->address;
  const WpReuse variant = params_.wp_reuse;
  uint64_t nr_before, nr_after, end;
  page* pg;
  unsigned nr;
  pte_t *ptep, pte;
  unsigned made_writable = 0;

  MMUSIM_CHECK(variant != WpReuse::off, "wp_reuse_large_anon_folio with wp_reuse=off");
  if (variant == WpReuse::block16) {
    // v1: #define WP_REUSE_NR_PTES 16; block = ALIGN_DOWN(addr, WP_REUSE_NR_PTES * PAGE_SIZE)
    constexpr uint64_t WP_REUSE_NR_PTES = 16;
    const uint64_t block = ALIGN_DOWN(addr, WP_REUSE_NR_PTES * PAGE_SIZE);
    // Stay within the folio, the VMA and the block.
    nr_before = std::min({uint64_t(idx), (addr - block) >> PAGE_SHIFT, (addr - vma->vm_start) >> PAGE_SHIFT});
    nr_after = std::min({uint64_t(folio_nr_pages(f)) - idx, (block + WP_REUSE_NR_PTES * PAGE_SIZE - addr) >> PAGE_SHIFT,
                         (vma->vm_end - addr) >> PAGE_SHIFT});
  } else {
    const uint64_t pt_start = ALIGN_DOWN(addr, PMD_SIZE);
    // Stay within the folio, the VMA and the page table.
    nr_before = std::min({uint64_t(idx), (addr - pt_start) >> PAGE_SHIFT, (addr - vma->vm_start) >> PAGE_SHIFT});
    nr_after = std::min({uint64_t(folio_nr_pages(f)) - idx, (pt_start + PMD_SIZE - addr) >> PAGE_SHIFT,
                         (vma->vm_end - addr) >> PAGE_SHIFT});
  }
  end = addr + (nr_after << PAGE_SHIFT);
  addr -= nr_before << PAGE_SHIFT;
  ptep = vmf->pte - nr_before;
  pg = vmf->page_ - nr_before;

  for (; addr != end; addr += uint64_t(nr) * PAGE_SIZE, ptep += nr, pg += nr) {
    pte = arch_->ptep_get(ptep);
    charge(Cost::pte_scan);
    nr = 1;

    // Unmapped or replaced since, or writable already.
    if (!arch_->pte_present(pte) || arch_->pte_pfn(pte) != page_to_pfn(pg) || arch_->pte_write(pte)) continue;

    nr = unsigned(folio_pte_batch_flags(f, nullptr, ptep, &pte, int((end - addr) >> PAGE_SHIFT), flags));
    struct_page_touch(pg, nr, true);
    for (unsigned i = 0; i < nr; i++)
      if (!PageAnonExclusive(pg + i)) {
        SetPageAnonExclusive(pg + i);
        charge(Cost::page_op);
      }

    // The PTEs of a batch agree on everything this looks at.
    if (!can_change_pte_writable(vma, addr, pte)) continue;

    pte = arch_->modify_prot_start_ptes(vma, addr, ptep, nr);
    arch_->modify_prot_commit_ptes(vma, addr, ptep, pte, arch_->pte_mkwrite(pte, vma), nr);
    made_writable += nr;
  }
  ctr_.wp_reuse_large_ptes.inc(made_writable);
  last_fault_.ptes_changed = made_writable;

  if (variant == WpReuse::pagetable_flush) arch_->flush_tlb_local();
}

// do_wp_page() (mm/memory.c:3656): the PTL is held on entry, released on return.
vm_fault_t Kernel::do_wp_page(vm_fault* vmf) {
  const bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  vm_area_struct* vma = vmf->vma;
  folio* f = nullptr;

  ctr_.do_wp_page.inc();
  charge(Cost::wp_fixed);

  if (!unshare) {
    // userfaultfd_pte_wp() / userfaultfd_wp() && mm_tlb_flush_pending(): no userfaultfd.
  }

  vmf->page_ = vm_normal_page(vma, vmf->address, vmf->orig_pte);
  if (vmf->page_) f = page_folio(vmf->page_);

  // Shared mapping: we are guaranteed to have VM_WRITE and FAULT_FLAG_WRITE set at this point.
  if (vma->vm_flags & (VM_SHARED | VM_MAYSHARE)) {
    // wp_pfn_shared(): no PFN mappings are shared here.
    MMUSIM_CHECK(vmf->page_, "write fault on a shared mapping of no page at {:#x}", vmf->address);
    return wp_page_shared(vmf, f);
  }

  // Private mapping: create an exclusive anonymous page copy if reuse is impossible. We might
  // miss VM_WRITE for FOLL_FORCE handling.
  //
  // If we encounter a page that is marked exclusive, we must reuse the page without further
  // checks.
  if (f && folio_test_anon(f) && (PageAnonExclusive(vmf->page_) || wp_can_reuse_anon_folio(f, vma))) {
    last_fault_.ptes_changed = 1;
    if (!PageAnonExclusive(vmf->page_)) {
      // The whole-folio reuse patch (IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE)); `off` = mainline.
      if (params_.wp_reuse != WpReuse::off && folio_test_large(f) && !unshare && (vma->vm_flags & VM_WRITE)) {
        wp_reuse_large_anon_folio(vmf, f);
      } else {
        SetPageAnonExclusive(vmf->page_);
        struct_page_touch(vmf->page_, 1, true);
        charge(Cost::page_op);
      }
    }
    last_fault_.kind = FaultKind::reuse;
    last_fault_.order = folio_order(f);
    if (unshare) {
      pte_unmap_unlock(vmf->pte, vmf->ptl);
      return 0;
    }
    wp_page_reuse(vmf, f);
    return 0;
  }
  // Ok, we need to copy. Oh, well..
  if (f) {
    folio_get(f);
    charge(Cost::folio_op);
  }
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  return wp_page_copy(vmf);
}

}  // namespace kmm
