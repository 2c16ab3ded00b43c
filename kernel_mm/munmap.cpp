// SPDX-License-Identifier: GPL-2.0-only
// munmap, mprotect and madvise (mm/mmap.c, mm/vma.c, mm/mprotect.c, mm/madvise.c,
// mm/huge_memory.c change_huge_pmd/hugepage_madvise).
//
// munmap: __vm_munmap -> do_vmi_munmap -> do_vmi_align_munmap: vms_gather_munmap_vmas (split at the
// ends, write-lock and detach every VMA), clear them from the tree, vms_complete_munmap_vmas
// (downgrade mmap_lock, unmap through one mmu_gather, free_pgtables, free the VMAs).
// mprotect: do_mprotect_pkey -> mprotect_fixup -> vma_modify_flags (merge or split) ->
// change_protection -> change_pmd_range (a huge PMD is split unless the range covers it; this is
// how the workloads make PTE-mapped 2M THPs, as selftests/mm/cow.c does) -> change_pte_range
// (ptep_modify_prot_start/commit, pte_modify, the MM_CP_TRY_CHANGE_WRITABLE upgrade, the TLB flush
// of changed PTEs through the gather).
// madvise: MADV_NORMAL/RANDOM/SEQUENTIAL (the readahead hints of file mappings), MADV_DONTNEED
// (zap_page_range_single), MADV_[NO]HUGEPAGE, MADV_DONTFORK/DOFORK,
// MADV_WIPEONFORK/KEEPONFORK; everything else is -EINVAL (madvise_behavior_valid()).
//
// Simplifications: anonymous private memory only (no files, no VM_SHARED), no pkeys, no
// userfaultfd, no mlock (VM_LOCKED never set), no NUMA hinting (MM_CP_PROT_NUMA), no soft-dirty
// tracking, no memory accounting (VM_ACCOUNT is kept in the flags as the kernel keeps it, since it
// decides merges). VMA merging on mprotect/madvise (vma_merge_existing_range) is ported, because
// mprotect(RO) then mprotect(RW) of a page must leave one VMA again: the fault and fork batches
// stop at VMA boundaries.
#include <algorithm>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

// mm/internal.h / include/linux/mm.h
constexpr unsigned long MM_CP_TRY_CHANGE_WRITABLE = 1ul << 0;
constexpr unsigned long MM_CP_PROT_NUMA = 1ul << 1;
constexpr vm_flags_t VM_SPECIAL = VM_IO | VM_DONTEXPAND | VM_PFNMAP | VM_MIXEDMAP;
constexpr int PROT_SEM = 0x8;
constexpr uint64_t PGDIR_SIZE = uint64_t(1) << PGDIR_SHIFT;

inline uint64_t PAGE_ALIGN(uint64_t x) { return ALIGN(x, PAGE_SIZE); }

inline uint64_t addr_end(uint64_t addr, uint64_t end, uint64_t size) {
  uint64_t boundary = (addr + size) & ~(size - 1);
  return (boundary - 1 < end - 1) ? boundary : end;
}

// vma_wants_manual_pte_write_upgrade() (include/linux/mm.h): private writable mappings must
// check each PTE (COW); shared ones ask vma_wants_writenotify().
bool vma_wants_manual_pte_write_upgrade(const Kernel& k, const vm_area_struct* vma) {
  if (vma->vm_flags & VM_SHARED) return k.vma_wants_writenotify(vma);
  return vma->vm_flags & VM_WRITE;
}

// The VMA tree neighbours (vma_prev() / vma_next() on the maple tree; here the map by vm_end).
vm_area_struct* vma_prev_of(mm_struct* mm, vm_area_struct* vma) {
  auto it = mm->mm_mt.find(vma->vm_end);
  MMUSIM_CHECK(it != mm->mm_mt.end() && it->second.get() == vma, "VMA [{:#x},{:#x}) not in the tree",
               vma->vm_start, vma->vm_end);
  if (it == mm->mm_mt.begin()) return nullptr;
  return std::prev(it)->second.get();
}
vm_area_struct* vma_next_of(mm_struct* mm, vm_area_struct* vma) {
  auto it = mm->mm_mt.find(vma->vm_end);
  MMUSIM_CHECK(it != mm->mm_mt.end() && it->second.get() == vma, "VMA [{:#x},{:#x}) not in the tree",
               vma->vm_start, vma->vm_end);
  ++it;
  return it == mm->mm_mt.end() ? nullptr : it->second.get();
}

// vma_set_range() + vma_iter_store(): change a VMA's range in place, re-keying the tree.
void vma_set_range(mm_struct* mm, vm_area_struct* vma, uint64_t start, uint64_t end, uint64_t pgoff) {
  auto node = mm->mm_mt.extract(vma->vm_end);
  MMUSIM_CHECK(!node.empty() && node.mapped().get() == vma, "vma_set_range of a VMA not in the tree");
  vma->vm_start = start;
  vma->vm_end = end;
  vma->vm_pgoff = pgoff;
  node.key() = end;
  auto r = mm->mm_mt.insert(std::move(node));
  MMUSIM_CHECK(r.inserted, "vma_set_range: another VMA ends at {:#x}", end);
}

// ---- VMA merging (mm/vma.c:10-330, 586-925) ----------------------------------------------------

// What vma_merge_existing_range() is asked (struct vma_merge_struct).
struct vma_merge_struct {
  mm_struct* mm = nullptr;
  vm_area_struct* prev = nullptr;
  vm_area_struct* next = nullptr;
  vm_area_struct* vma = nullptr;
  uint64_t start = 0, end = 0, pgoff = 0;
  vm_flags_t flags = 0;
  std::shared_ptr<anon_vma> anon;
  address_space* file = nullptr;
};

// list_is_singular(&vma->anon_vma_chain): one anon_vma_chain entry, i.e. an anon_vma of its own
// that was not cloned from a parent by fork (anon_vma_fork links the parent's anon_vmas too).
bool anon_vma_chain_singular(const vm_area_struct* vma) {
  return vma->anon && vma->anon->root_id == vma->anon->id;
}

// is_mergeable_vma() (mm/vma.c:10): same flags except VM_SOFTDIRTY, the same file; no policies,
// uffd contexts or anon names here.
bool is_mergeable_vma(const vma_merge_struct& vmg, bool merge_next) {
  const vm_area_struct* vma = merge_next ? vmg.next : vmg.prev;
  if ((vma->vm_flags ^ vmg.flags) & ~VM_SOFTDIRTY) return false;
  if (vma->vm_file != vmg.file) return false;
  return true;
}

// is_mergeable_anon_vma() (mm/vma.c:35)
bool is_mergeable_anon_vma(const anon_vma* anon_vma1, const anon_vma* anon_vma2, const vm_area_struct* vma) {
  // The list_is_singular() test is to avoid merging VMA cloned from parents. This can improve
  // scalability caused by anon_vma lock.
  if ((!anon_vma1 || !anon_vma2) && (!vma || anon_vma_chain_singular(vma))) return true;
  return anon_vma1 == anon_vma2;
}

// are_anon_vmas_compatible() (mm/vma.c:49)
bool are_anon_vmas_compatible(const vm_area_struct* vma1, const vm_area_struct* vma2) {
  return is_mergeable_anon_vma(vma1->anon.get(), vma2->anon.get(), nullptr);
}

// can_vma_merge_before() (mm/vma.c:97)
bool can_vma_merge_before(const vma_merge_struct& vmg) {
  const uint64_t pglen = (vmg.end - vmg.start) >> PAGE_SHIFT;
  if (is_mergeable_vma(vmg, true) && is_mergeable_anon_vma(vmg.anon.get(), vmg.next->anon.get(), vmg.next)) {
    if (vmg.next->vm_pgoff == vmg.pgoff + pglen) return true;
  }
  return false;
}

// can_vma_merge_after() (mm/vma.c:119)
bool can_vma_merge_after(const vma_merge_struct& vmg) {
  if (is_mergeable_vma(vmg, false) && is_mergeable_anon_vma(vmg.anon.get(), vmg.prev->anon.get(), vmg.prev)) {
    if (vmg.prev->vm_pgoff + vma_pages(vmg.prev) == vmg.pgoff) return true;
  }
  return false;
}

// can_vma_merge_left() / can_vma_merge_right() (mm/vma.c:292/306)
bool can_vma_merge_left(const vma_merge_struct& vmg) {
  return vmg.prev && vmg.prev->vm_end == vmg.start && can_vma_merge_after(vmg);
}
bool can_vma_merge_right(const vma_merge_struct& vmg, bool can_merge_left) {
  if (!vmg.next || vmg.end != vmg.next->vm_start || !can_vma_merge_before(vmg)) return false;
  if (!can_merge_left) return true;
  // If we can merge with prev (left) and next (right), indicating that each VMA's anon_vma is
  // compatible with the proposed anon_vma, this does not mean prev and next are compatible with
  // EACH OTHER. We therefore check this in addition to mergeability to either side.
  return are_anon_vmas_compatible(vmg.prev, vmg.next);
}

// dup_anon_vma() (mm/vma.c:512): the surviving VMA takes the anon_vma of the one it absorbs.
void dup_anon_vma(vm_area_struct* dst, vm_area_struct* src) {
  if (src->anon && !dst->anon) dst->anon = src->anon;  // anon_vma_clone()
}

// vma_merge_existing_range() (mm/vma.c:669): the flags of [start, end) of vmg.vma change; merge
// that range into prev and/or next if they match. Returns the merged VMA, or null.
vm_area_struct* vma_merge_existing_range(Kernel& k, vma_merge_struct& vmg) {
  vm_area_struct* vma = vmg.vma;
  vm_area_struct* prev = vmg.prev;
  vm_area_struct* next = nullptr;
  mm_struct* mm = vmg.mm;
  const uint64_t start = vmg.start, end = vmg.end;
  const bool left_side = vma && start == vma->vm_start;
  const bool right_side = vma && end == vma->vm_end;
  bool merge_left, merge_right, merge_both;
  vm_area_struct* adjust = nullptr;
  int64_t adj_start = 0;

  MMUSIM_CHECK(mm->mmap_lock.write_locked(), "vma_merge_existing_range without mmap_lock for writing");

  // If a special mapping or if the range being modified is neither at the furthermost left or
  // right side of the VMA, then we have no chance of merging and should abort.
  if ((vmg.flags & VM_SPECIAL) || (!left_side && !right_side)) return nullptr;

  merge_left = left_side ? can_vma_merge_left(vmg) : false;
  if (right_side) {
    next = vmg.next = vma_next_of(mm, vma);
    merge_right = can_vma_merge_right(vmg, merge_left);
  } else {
    merge_right = false;
    next = nullptr;
  }
  if (!merge_left && !merge_right) return nullptr;  // If we have nothing to merge, abort.

  merge_both = merge_left && merge_right;
  // If we span the entire VMA, a merge implies it will be deleted.
  const bool merge_will_delete_vma = left_side && right_side;
  // (can_merge_remove_vma(): no vm_ops->close here.) If we merge both VMAs, then next is also
  // deleted.
  const bool merge_will_delete_next = merge_both;

  // No matter what happens, we will be adjusting vma.
  k.vma_start_write(vma);
  if (merge_left) k.vma_start_write(prev);
  if (merge_right) k.vma_start_write(next);

  if (merge_both) {
    //         |<----->|
    // |-------*********-------|
    //   prev     vma     next
    //  extend   delete  delete
    vmg.vma = prev;
    vmg.start = prev->vm_start;
    vmg.end = next->vm_end;
    vmg.pgoff = prev->vm_pgoff;
    // We already ensured anon_vma compatibility above, so now it's simply a case of, if prev has
    // no anon_vma object, which of next or vma contains the anon_vma we must duplicate.
    dup_anon_vma(prev, next->anon ? next : vma);
  } else if (merge_left) {
    //         |<----->| OR
    //         |<--------->|
    // |-------*************
    //   prev       vma
    //  extend shrink/delete
    vmg.vma = prev;
    vmg.start = prev->vm_start;
    vmg.pgoff = prev->vm_pgoff;
    if (!merge_will_delete_vma) {
      adjust = vma;
      adj_start = int64_t(vmg.end - vma->vm_start);
    }
    dup_anon_vma(prev, vma);
  } else {  // merge_right
    //     |<----->| OR
    // |<--------->|
    // *************-------|
    //      vma       next
    // shrink/delete extend
    const uint64_t pglen = (vmg.end - vmg.start) >> PAGE_SHIFT;
    if (merge_will_delete_vma) {
      vmg.vma = next;
      vmg.end = next->vm_end;
      vmg.pgoff = next->vm_pgoff - pglen;
    } else {
      // We shrink vma and expand next. IMPORTANT: This is the ONLY case where the final merged
      // VMA is NOT vmg->vma, but rather vmg->next.
      vmg.start = vma->vm_start;
      vmg.end = start;
      vmg.pgoff = vma->vm_pgoff;
      adjust = next;
      adj_start = -int64_t(vma->vm_end - start);
    }
    dup_anon_vma(next, vma);
  }

  // commit_merge() (mm/vma.c:588): vma_prepare ... vma_complete. The removed VMAs are detached and
  // freed; the survivors get their new ranges. (vma_adjust_trans_huge(): a boundary that moves
  // here was a boundary already, so no huge PMD straddles it.)
  vm_area_struct* remove = merge_will_delete_vma ? vma : nullptr;
  vm_area_struct* remove2 = merge_will_delete_next ? next : nullptr;
  for (vm_area_struct* r : {remove, remove2}) {
    if (!r) continue;
    k.vma_mark_detached(r, true);
    std::unique_ptr<vm_area_struct> gone = k.vma_remove(mm, r);  // vm_area_free()
    k.charge(Cost::vma_op);
  }
  if (adj_start < 0) {
    // next's start moves down into the shrunk vma: shrink vma first (its end key changes)
    vma_set_range(mm, vmg.vma, vmg.start, vmg.end, vmg.pgoff);
    vma_set_range(mm, adjust, uint64_t(int64_t(adjust->vm_start) + adj_start), adjust->vm_end,
                  adjust->vm_pgoff - (uint64_t(-adj_start) >> PAGE_SHIFT));
  } else {
    if (adj_start > 0)
      vma_set_range(mm, adjust, adjust->vm_start + uint64_t(adj_start), adjust->vm_end,
                    adjust->vm_pgoff + (uint64_t(adj_start) >> PAGE_SHIFT));
    vma_set_range(mm, vmg.vma, vmg.start, vmg.end, vmg.pgoff);
  }
  k.charge(Cost::vma_op);

  // khugepaged_enter_vma(): no khugepaged
  return merge_left ? prev : next;
}

// ---- munmap (mm/vma.c:1099-1430, mm/mmap.c:1633) ------------------------------------------------

// struct vma_munmap_struct (mm/vma.h)
struct vma_munmap_struct {
  vm_area_struct* vma = nullptr;  // the first vma to munmap
  vm_area_struct* prev = nullptr;
  vm_area_struct* next = nullptr;
  uint64_t start = 0, end = 0;
  uint64_t unmap_start = 0, unmap_end = 0;  // FIRST_USER_ADDRESS / USER_PGTABLES_CEILING
  int vma_count = 0;
  uint64_t nr_pages = 0;
  bool unlock = false;
  bool clear_ptes = false;
  // mas_detach: the detached VMAs, in address order, and their ownership once out of the tree
  std::vector<vm_area_struct*> detached;
  std::vector<std::unique_ptr<vm_area_struct>> owned;
};

// vms_gather_munmap_vmas() (mm/vma.c:1200): split the first and last VMA if the range starts or
// ends inside them, then write-lock and detach every VMA of the range.
int vms_gather_munmap_vmas(Kernel& k, mm_struct* mm, vma_munmap_struct* vms) {
  int error;
  // If we need to split any vma, do it now to save pain later. Does it split the first one?
  if (vms->start > vms->vma->vm_start) {
    // (map_count limit, can_modify_vma(): no sealing here)
    error = k.split_vma(mm, vms->vma, vms->start);
    if (error) return error;
    vms->vma = k.vma_lookup(mm, vms->start);  // the iterator is at the part from start
  }
  vms->prev = vma_prev_of(mm, vms->vma);
  if (vms->prev) vms->unmap_start = vms->prev->vm_end;

  // Detach a range of VMAs from the mm.
  for (vm_area_struct* next = vms->vma; next && next->vm_start < vms->end;) {
    // Does it split the end?
    if (next->vm_end > vms->end) {
      error = k.split_vma(mm, next, vms->end);
      if (error) return error;  // (reattach_vmas(): the detached ones go back; here nothing else fails)
      next = k.vma_lookup(mm, vms->end - PAGE_SIZE);
    }
    k.vma_start_write(next);
    vms->detached.push_back(next);  // mas_store_gfp(mas_detach, next)
    vms->vma_count++;
    k.vma_mark_detached(next, true);
    vms->nr_pages += vma_pages(next);
    // locked_vm, nr_accounted, exec/stack/data_vm statistics: not kept here
    next = vma_next_of(mm, next);
  }

  vms->next = vma_next_of(mm, vms->detached.back());
  if (vms->next) vms->unmap_end = vms->next->vm_start;
  vms->clear_ptes = true;
  return 0;
}

// vms_clear_ptes() (mm/vma.c:1099): unmap and free the page tables of the detached VMAs through
// one gather.
void vms_clear_ptes(Kernel& k, vma_munmap_struct* vms, bool mm_wr_locked) {
  if (!vms->clear_ptes) return;  // Nothing to do
  mmu_gather tlb;
  // We can free page tables without write-locking mmap_lock because VMAs were isolated before we
  // downgraded mmap_lock.
  k.lru_add_drain();
  k.tlb_gather_mmu(&tlb, vms->vma->vm_mm);
  // update_hiwater_rss()
  k.unmap_vmas(&tlb, vms->detached, vms->start, vms->end);
  // start and end may be different if there is no prev or next vma.
  k.free_pgtables(&tlb, vms->detached, vms->unmap_start, vms->unmap_end, mm_wr_locked);
  k.tlb_finish_mmu(&tlb);
  vms->clear_ptes = false;
}

// vms_complete_munmap_vmas() (mm/vma.c:1149): downgrade the lock, unmap, free the VMAs.
void vms_complete_munmap_vmas(Kernel& k, mm_struct* mm, vma_munmap_struct* vms) {
  if (vms->unlock) k.mmap_write_downgrade(mm);
  if (!vms->nr_pages) return;
  vms_clear_ptes(k, vms, !vms->unlock);
  // Remove and clean up vmas: remove_vma(vma, unreachable = false)
  for (auto& v : vms->owned) {
    v.reset();
    k.charge(Cost::vma_op);
  }
  vms->owned.clear();
  vms->detached.clear();
  if (vms->unlock) k.mmap_read_unlock(mm);
}

// can_change_pmd_writable() (mm/huge_memory.c:1905)
bool can_change_pmd_writable(Kernel& k, vm_area_struct* vma, uint64_t addr, pmd_t pmd) {
  if (!(vma->vm_flags & VM_WRITE)) return false;  // WARN_ON_ONCE
  // pmd_protnone() (NUMA hinting), pmd_needs_soft_dirty_wp(), userfaultfd_huge_pmd_wp(): off
  if (!(vma->vm_flags & VM_SHARED)) {
    // See can_change_pte_writable(). vm_normal_page_pmd(): not the huge zero page
    if (k.is_huge_zero_pmd(pmd)) return false;
    page* pg = k.pfn_to_page(k.arch().pmd_pfn(pmd));
    return folio_test_anon(page_folio(pg)) && PageAnonExclusive(pg);
  }
  return k.arch().pmd_dirty(pmd);
}

}  // namespace

// do_vmi_munmap() (mm/vma.c:1399) -> do_vmi_align_munmap() (mm/vma.c:1352). Called with the mmap
// write lock; with `unlock`, returns with it released on success.
int Kernel::do_vmi_munmap(mm_struct* mm, uint64_t start, uint64_t len, bool unlock) {
  const uint64_t TASK_SIZE = arch_->task_size();
  if ((start & ~PAGE_MASK) || start > TASK_SIZE || len > TASK_SIZE - start) return -EINVAL;
  const uint64_t end = start + PAGE_ALIGN(len);
  if (end == start) return -EINVAL;

  // Find the first overlapping VMA: vma_find(vmi, end)
  vm_area_struct* vma = find_vma(mm, start);
  if (vma && vma->vm_start >= end) vma = nullptr;
  if (!vma) {
    if (unlock) mmap_write_unlock(mm);
    return 0;
  }

  // do_vmi_align_munmap()
  vma_munmap_struct vms;  // init_vma_munmap()
  vms.vma = vma;
  vms.start = start;
  vms.end = end;
  vms.unlock = unlock;
  vms.unmap_start = 0;  // FIRST_USER_ADDRESS
  vms.unmap_end = 0;    // USER_PGTABLES_CEILING
  int error = vms_gather_munmap_vmas(*this, mm, &vms);
  if (error) return error;

  // vma_iter_clear_gfp(vmi, start, end): the detached VMAs leave the tree (faults can no longer
  // find them); they stay allocated until vms_complete_munmap_vmas() frees them.
  for (vm_area_struct* v : vms.detached) vms.owned.push_back(vma_remove(mm, v));

  // Point of no return
  vms_complete_munmap_vmas(*this, mm, &vms);
  return 0;
}

// munmap() -> __vm_munmap(start, len, unlock = true) (mm/mmap.c:1633)
int Kernel::sys_munmap(task_struct* t, uint64_t addr, uint64_t len) {
  mm_struct* mm = t->mm;
  charge(Cost::syscall);
  mmap_write_lock(mm);  // mmap_write_lock_killable()
  int ret = do_vmi_munmap(mm, addr, len, true);
  if (ret) mmap_write_unlock(mm);
  // userfaultfd_unmap_complete(): none
  check_invariants("munmap");
  return ret;
}

// ---- mprotect (mm/mprotect.c) ----------------------------------------------------------------

// vma_modify_flags() (mm/vma.c:1477) -> vma_modify() (mm/vma.c:1437): first try to merge, else
// split so that [start, end) is a VMA of its own.
vm_area_struct* Kernel::vma_modify_flags(vm_area_struct* prev, vm_area_struct* vma, uint64_t start, uint64_t end,
                                         vm_flags_t new_flags, int* err) {
  mm_struct* mm = vma->vm_mm;
  *err = 0;
  // VMG_VMA_STATE(vmg, vmi, prev, vma, start, end)
  vma_merge_struct vmg;
  vmg.mm = mm;
  vmg.prev = prev;
  vmg.vma = vma;
  vmg.start = start;
  vmg.end = end;
  vmg.pgoff = vma->vm_pgoff + ((start - vma->vm_start) >> PAGE_SHIFT);
  vmg.flags = new_flags;
  vmg.anon = vma->anon;
  vmg.file = vma->vm_file;

  // First, try to merge.
  vm_area_struct* merged = vma_merge_existing_range(*this, vmg);
  if (merged) return merged;

  // Split any preceding portion of the VMA.
  if (vma->vm_start < start) {
    *err = split_vma(mm, vma, start);
    if (*err) return nullptr;
    vma = vma_lookup(mm, start);
  }
  // Split any trailing portion of the VMA.
  if (vma->vm_end > end) {
    *err = split_vma(mm, vma, end);
    if (*err) return nullptr;
    vma = vma_lookup(mm, start);
  }
  return vma;
}

// change_pte_range() (mm/mprotect.c:84): under the PTE table's lock, each present PTE is rewritten
// with the new protection; changed PTEs that need it are added to the gather's flush range.
long Kernel::change_pte_range(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, uint64_t end,
                              pgprot_t newprot, unsigned long cp_flags) {
  uint32_t* ptl = nullptr;
  long pages = 0;
  const bool prot_numa = cp_flags & MM_CP_PROT_NUMA;
  MMUSIM_CHECK(!prot_numa, "change_pte_range: no NUMA hinting in this port");

  // tlb_change_page_size(tlb, PAGE_SIZE): empty
  pte_t* pte = pte_offset_map_lock(vma->vm_mm, pmd, addr, &ptl);
  if (!pte) return -EAGAIN;

  // flush_tlb_batched_pending(vma->vm_mm): nothing pending
  do {
    pte_t oldpte = arch_->ptep_get(pte);
    charge(Cost::pte_scan);
    if (arch_->pte_present(oldpte)) {
      pte_t ptent;
      oldpte = arch_->ptep_modify_prot_start(vma, addr, pte);
      ptent = arch_->pte_modify(oldpte, newprot);
      // (uffd_wp / uffd_wp_resolve: off)

      // In all writable, private mappings, we have to properly handle COW. We can sometimes still
      // change PTEs writable and avoid the write-fault handler, for example, if a PTE is already
      // dirty and no other COW or special handling is required.
      if ((cp_flags & MM_CP_TRY_CHANGE_WRITABLE) && !arch_->pte_write(ptent) &&
          can_change_pte_writable(vma, addr, ptent))
        ptent = arch_->pte_mkwrite(ptent, vma);

      arch_->ptep_modify_prot_commit(vma, addr, pte, oldpte, ptent);
      if (arch_->pte_needs_flush(oldpte, ptent)) {
        // tlb_flush_pte_range(tlb, addr, PAGE_SIZE)
        tlb->start = std::min(tlb->start, addr);
        tlb->end = std::max(tlb->end, addr + PAGE_SIZE);
        tlb->cleared_ptes = true;
      }
      pages++;
    } else {
      // A swap entry keeps its protection until it is faulted in (no migration, device or
      // marker entries here); nobody plays with any none ptes besides userfaultfd when applying
      // the protections.
      MMUSIM_CHECK(pte_none(oldpte) || arch_->is_swap_pte(oldpte), "change_pte_range: non-present PTE {:#x} at {:#x}",
                   pte_val(oldpte), addr);
    }
  } while (pte++, addr += PAGE_SIZE, addr != end);
  pte_unmap_unlock(pte - 1, ptl);
  return pages;
}

// change_huge_pmd() (mm/huge_memory.c:2260): the whole PMD keeps its mapping with the new
// protection. Returns 0 if the PMD is no longer huge, HPAGE_PMD_NR when changed.
int Kernel::change_huge_pmd(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, pgprot_t newprot,
                            unsigned long cp_flags) {
  mm_struct* mm = vma->vm_mm;
  // tlb_change_page_size(tlb, HPAGE_PMD_SIZE): empty; prot_numa: off
  // __pmd_trans_huge_lock()
  uint32_t* ptl = pmd_lock(mm, pmd);
  if (!arch_->pmd_trans_huge(*pmd)) {
    spin_unlock(ptl);
    return 0;
  }
  // (is_swap_pmd: no THP migration entries here.)
  // pmdp_invalidate_ad() is required to make sure we don't miss dirty/young flags set by hardware.
  pmd_t oldpmd = arch_->pmdp_invalidate_ad(vma, addr, pmd);
  pmd_t entry = arch_->pmd_modify(oldpmd, newprot);
  // See change_pte_range().
  if ((cp_flags & MM_CP_TRY_CHANGE_WRITABLE) && !arch_->pmd_write(entry) &&
      can_change_pmd_writable(*this, vma, addr, entry))
    entry = arch_->pmd_mkwrite(entry, vma);

  arch_->set_pmd_at(mm, addr, pmd, entry);
  if (arch_->huge_pmd_needs_flush(oldpmd, entry)) {
    // tlb_flush_pmd_range(tlb, addr, HPAGE_PMD_SIZE)
    tlb->start = std::min(tlb->start, addr);
    tlb->end = std::max(tlb->end, addr + HPAGE_PMD_SIZE);
    tlb->cleared_pmds = true;
  }
  spin_unlock(ptl);
  return int(HPAGE_PMD_NR);
}

// change_pmd_range() (mm/mprotect.c:376): a huge PMD the range does not cover whole is split (its
// folio stays, now mapped by 512 PTEs), then its PTEs are changed.
long Kernel::change_pmd_range(mmu_gather* tlb, vm_area_struct* vma, pud_t* pud, uint64_t addr, uint64_t end,
                              pgprot_t newprot, unsigned long cp_flags) {
  uint64_t next;
  long pages = 0;
  pmd_t* pmd = pmd_offset(pud, addr);
  do {
    long ret;
  again:
    next = addr_end(addr, end, PMD_SIZE);
    // change_pmd_prepare(): only for uffd-wp markers
    if (pmd_none(*pmd)) goto next;

    {
      pmd_t _pmd = *pmd;  // pmdp_get_lockless()
      if (arch_->pmd_trans_huge(_pmd)) {
        if (next - addr != HPAGE_PMD_SIZE /* || pgtable_split_needed(): uffd-wp only */) {
          __split_huge_pmd(vma, pmd, addr);
          // fall through, the trans huge pmd just split
        } else {
          ret = change_huge_pmd(tlb, vma, pmd, addr, newprot, cp_flags);
          if (ret) {
            if (ret == long(HPAGE_PMD_NR)) pages += HPAGE_PMD_NR;  // nr_huge_updates++
            // huge pmd was handled
            goto next;
          }
        }
        // fall through
      }
    }
    ret = change_pte_range(tlb, vma, pmd, addr, next, newprot, cp_flags);
    if (ret < 0) goto again;
    pages += ret;
  next:;
  } while (pmd++, addr = next, addr != end);
  return pages;
}

// change_protection() (mm/mprotect.c:541) -> change_protection_range() -> p4d/pud/pmd levels.
long Kernel::change_protection(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end,
                               unsigned long cp_flags) {
  const pgprot_t newprot = vma_page_prot(vma);  // vma->vm_page_prot
  long pages = 0;
  uint64_t addr = start, next;
  MMUSIM_CHECK(addr < end, "change_protection [{:#x},{:#x})", addr, end);
  // hugetlb: none. change_protection_range():
  uint64_t* pgd = pgd_offset(vma->vm_mm, addr);
  tlb_start_vma(tlb, vma);
  do {
    next = addr_end(addr, end, PGDIR_SIZE);
    if (!arch_->table_present(*pgd)) continue;  // pgd_none_or_clear_bad(); p4d folded
    // change_pud_range()
    uint64_t a = addr, n;
    pud_t* pudp = pud_offset(pgd, a);
    do {
      n = addr_end(a, next, PUD_SIZE);
      if (!arch_->table_present(pudp->val)) continue;  // pud_none(); no PUD leaves
      pages += change_pmd_range(tlb, vma, pudp, a, n, newprot, cp_flags);
    } while (pudp++, a = n, a != next);
  } while (pgd++, addr = next, addr != end);
  tlb_end_vma(tlb, vma);
  return pages;
}

long Kernel::change_protection(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end) {
  unsigned long cp_flags = vma_wants_manual_pte_write_upgrade(*this, vma) ? MM_CP_TRY_CHANGE_WRITABLE : 0;
  return change_protection(tlb, vma, start, end, cp_flags);
}

// mprotect_fixup() (mm/mprotect.c:602)
int Kernel::mprotect_fixup(mmu_gather* tlb, vm_area_struct* vma, vm_area_struct** pprev, uint64_t start,
                           uint64_t end, vm_flags_t newflags) {
  const vm_flags_t oldflags = vma->vm_flags;
  unsigned long mm_cp_flags = 0;
  int error = 0;

  // can_modify_vma(): no sealing
  if (newflags == oldflags) {
    *pprev = vma;
    return 0;
  }
  // (PROT_NONE PFN permission checks: no VM_PFNMAP here.)

  // If we make a private mapping writable we increase our commit; but (without finer accounting)
  // cannot reduce our commit if we make it unwritable again except in the anonymous case where no
  // anon_vma has yet to be assigned.
  if (newflags & VM_WRITE) {
    // may_expand_vm(), security_vm_enough_memory_mm(): always succeed here
    if (!(oldflags & (VM_ACCOUNT | VM_WRITE | VM_HUGETLB | VM_SHARED | VM_NORESERVE))) newflags |= VM_ACCOUNT;
  } else if ((oldflags & VM_ACCOUNT) && !vma->anon) {  // vma_is_anonymous(vma) && !vma->anon_vma
    newflags &= ~VM_ACCOUNT;
  }

  vma = vma_modify_flags(*pprev, vma, start, end, newflags, &error);
  if (!vma) return error;
  *pprev = vma;

  // vm_flags and vm_page_prot are protected by the mmap_lock held in write mode.
  vma_start_write(vma);
  vma->vm_flags = newflags;  // vm_flags_reset()
  if (vma_wants_manual_pte_write_upgrade(*this, vma)) mm_cp_flags |= MM_CP_TRY_CHANGE_WRITABLE;
  // vma_set_page_prot(vma): vm_page_prot is derived from vm_flags when needed here

  change_protection(tlb, vma, start, end, mm_cp_flags);
  // vm_unacct_memory(); VM_LOCKED populate; vm_stat_account(); perf_event_mmap(): none
  return 0;
}

// mprotect_fixup() with its own gather (for callers outside do_mprotect_pkey()).
int Kernel::mprotect_fixup(vm_area_struct* vma, uint64_t start, uint64_t end, vm_flags_t newflags) {
  mmu_gather tlb;
  vm_area_struct* prev = start > vma->vm_start ? vma : vma_prev_of(vma->vm_mm, vma);
  tlb_gather_mmu(&tlb, vma->vm_mm);
  int err = mprotect_fixup(&tlb, vma, &prev, start, end, newflags);
  tlb_finish_mmu(&tlb);
  return err;
}

// mprotect() -> do_mprotect_pkey(start, len, prot, pkey = -1) (mm/mprotect.c:707)
int Kernel::sys_mprotect(task_struct* t, uint64_t start, uint64_t len, int prot) {
  mm_struct* mm = t->mm;
  mmu_gather tlb;
  uint64_t nstart, end, tmp;
  int error;
  const int reqprot = prot;
  charge(Cost::syscall);

  // (PROT_GROWSDOWN / PROT_GROWSUP: not supported here, no VM_GROWSDOWN mappings)
  if (start & ~PAGE_MASK) return -EINVAL;
  if (!len) return 0;
  len = PAGE_ALIGN(len);
  end = start + len;
  if (end <= start) return -ENOMEM;
  if (prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM)) return -EINVAL;  // arch_validate_prot()

  mmap_write_lock(mm);  // mmap_write_lock_killable()

  vm_area_struct* vma = find_vma(mm, start);  // vma_find(&vmi, end)
  if (vma && vma->vm_start >= end) vma = nullptr;
  vm_area_struct* prev;
  error = -ENOMEM;
  if (!vma) goto out;
  if (vma->vm_start > start) goto out;

  prev = vma_prev_of(mm, vma);
  if (start > vma->vm_start) prev = vma;

  tlb_gather_mmu(&tlb, mm);
  nstart = start;
  tmp = vma->vm_start;
  // for_each_vma_range(vmi, vma, end)
  while (vma && vma->vm_start < end) {
    if (vma->vm_start != tmp) {
      error = -ENOMEM;
      break;
    }
    // (READ_IMPLIES_EXEC personality: no.) Each mprotect() call explicitly passes r/w/x
    // permissions. If a permission is not passed to mprotect(), it must be cleared from the VMA.
    const vm_flags_t mask_off_old_flags = VM_ACCESS_FLAGS;  // | VM_FLAGS_CLEAR (no pkeys, no arch bits)
    vm_flags_t newflags = calc_vm_prot_bits(prot);
    newflags |= (vma->vm_flags & ~mask_off_old_flags);

    // newflags >> 4 shift VM_MAY% in place of VM_%
    if ((newflags & ~(newflags >> 4)) & VM_ACCESS_FLAGS) {
      error = -EACCES;
      break;
    }
    // map_deny_write_exec(), arch_validate_flags(), security_file_mprotect(), vm_ops->mprotect: none

    tmp = vma->vm_end;
    if (tmp > end) tmp = end;

    error = mprotect_fixup(&tlb, vma, &prev, nstart, tmp, newflags);
    if (error) break;

    tmp = prev->vm_end;  // vma_iter_end(&vmi): the end of the VMA just modified (maybe merged)
    nstart = tmp;
    prot = reqprot;
    vma = vma_next_of(mm, prev);
  }
  tlb_finish_mmu(&tlb);

  if (!error && tmp < end) error = -ENOMEM;

out:
  mmap_write_unlock(mm);
  check_invariants("mprotect");
  return error;
}

// ---- madvise (mm/madvise.c) --------------------------------------------------------------------

namespace {

// madvise_behavior_valid() (mm/madvise.c), restricted to the advice this port implements.
bool madvise_behavior_valid(int behavior) {
  switch (behavior) {
    case MADV_NORMAL:
    case MADV_RANDOM:
    case MADV_SEQUENTIAL:
    case MADV_DONTNEED:
    case MADV_DONTFORK:
    case MADV_DOFORK:
    case MADV_WIPEONFORK:
    case MADV_KEEPONFORK:
    case MADV_HUGEPAGE:
    case MADV_NOHUGEPAGE:
      return true;
    default:
      return false;
  }
}

// madvise_need_mmap_write() (mm/madvise.c)
bool madvise_need_mmap_write(int behavior) {
  switch (behavior) {
    case MADV_DONTNEED:
      return false;
    default:
      // be safe, default to 1. list exceptions explicitly
      return true;
  }
}

// hugepage_madvise() (mm/khugepaged.c)
int hugepage_madvise(vm_area_struct* vma, vm_flags_t* vm_flags, int advice) {
  switch (advice) {
    case MADV_HUGEPAGE:
      *vm_flags &= ~VM_NOHUGEPAGE;
      *vm_flags |= VM_HUGEPAGE;
      // khugepaged_enter_vma(): no khugepaged
      break;
    case MADV_NOHUGEPAGE:
      *vm_flags &= ~VM_HUGEPAGE;
      *vm_flags |= VM_NOHUGEPAGE;
      break;
  }
  return 0;
}

}  // namespace

// sys_madvise() -> do_madvise() -> madvise_walk_vmas() -> madvise_vma_behavior() (mm/madvise.c)
int Kernel::sys_madvise(task_struct* t, uint64_t start, uint64_t len_in, int behavior) {
  mm_struct* mm = t->mm;
  charge(Cost::syscall);

  // do_madvise()
  if (!madvise_behavior_valid(behavior)) return -EINVAL;
  if (!IS_ALIGNED(start, PAGE_SIZE)) return -EINVAL;
  const uint64_t len = PAGE_ALIGN(len_in);
  // Check to see whether len was rounded up from small -ve to zero
  if (len_in && !len) return -EINVAL;
  uint64_t end = start + len;
  if (end < start) return -EINVAL;
  if (end == start) return 0;

  const bool write = madvise_need_mmap_write(behavior);
  if (write) mmap_write_lock(mm);  // mmap_write_lock_killable()
  else mmap_read_lock(mm);

  // madvise_vma_behavior() for one VMA and [s, e) inside it.
  auto madvise_vma_behavior = [&](vm_area_struct* vma, vm_area_struct** prev, uint64_t s, uint64_t e) -> int {
    vm_flags_t new_flags = vma->vm_flags;
    int error = 0;
    switch (behavior) {
      case MADV_DONTNEED: {
        // madvise_dontneed_free()
        *prev = vma;
        // madvise_dontneed_free_valid_vma(): not VM_LOCKED / VM_PFNMAP (and no hugetlb)
        if (vma->vm_flags & (VM_LOCKED | VM_PFNMAP)) return -EINVAL;
        if (s == e) return 0;
        // userfaultfd_remove(): no uffd; madvise_dontneed_single_vma()
        zap_page_range_single(vma, s, e - s);
        return 0;
      }
      case MADV_NORMAL:
        new_flags = new_flags & ~VM_RAND_READ & ~VM_SEQ_READ;
        break;
      case MADV_SEQUENTIAL:
        new_flags = (new_flags & ~VM_RAND_READ) | VM_SEQ_READ;
        break;
      case MADV_RANDOM:
        new_flags = (new_flags & ~VM_SEQ_READ) | VM_RAND_READ;
        break;
      case MADV_DONTFORK:
        new_flags |= VM_DONTCOPY;
        break;
      case MADV_DOFORK:
        if (vma->vm_flags & VM_IO) return -EINVAL;
        new_flags &= ~VM_DONTCOPY;
        break;
      case MADV_WIPEONFORK:
        // MADV_WIPEONFORK is only supported on anonymous memory.
        if (vma->vm_file || (vma->vm_flags & VM_SHARED)) return -EINVAL;
        new_flags |= VM_WIPEONFORK;
        break;
      case MADV_KEEPONFORK:
        new_flags &= ~VM_WIPEONFORK;
        break;
      case MADV_HUGEPAGE:
      case MADV_NOHUGEPAGE:
        error = hugepage_madvise(vma, &new_flags, behavior);
        if (error) return error;
        break;
    }
    // madvise_update_vma()
    if (new_flags == vma->vm_flags) {
      *prev = vma;
      return 0;
    }
    vm_area_struct* v = vma_modify_flags(*prev, vma, s, e, new_flags, &error);
    if (!v) return error == -ENOMEM ? -EAGAIN : error;
    *prev = v;
    // vm_flags is protected by the mmap_lock held in write mode.
    vma_start_write(v);
    v->vm_flags = new_flags;  // vm_flags_reset()
    return 0;
  };

  // madvise_walk_vmas(): if the interval [start,end) covers some unmapped address ranges, just
  // ignore them, but return -ENOMEM at the end.
  int unmapped_error = 0, error = 0;
  vm_area_struct* vma = find_vma(mm, start);  // find_vma_prev(mm, start, &prev)
  vm_area_struct* prev = vma ? vma_prev_of(mm, vma) : (mm->mm_mt.empty() ? nullptr : mm->mm_mt.rbegin()->second.get());
  if (vma && start > vma->vm_start) prev = vma;
  for (;;) {
    // Still start < end.
    if (!vma) {
      error = -ENOMEM;
      break;
    }
    // Here start < (end|vma->vm_end).
    if (start < vma->vm_start) {
      unmapped_error = -ENOMEM;
      start = vma->vm_start;
      if (start >= end) break;
    }
    // Here vma->vm_start <= start < (end|vma->vm_end)
    uint64_t tmp = vma->vm_end;
    if (end < tmp) tmp = end;
    // Here vma->vm_start <= start < tmp <= (end|vma->vm_end).
    error = madvise_vma_behavior(vma, &prev, start, tmp);
    if (error) break;
    start = tmp;
    if (prev && start < prev->vm_end) start = prev->vm_end;
    if (start >= end) break;
    vma = prev ? find_vma(mm, prev->vm_end) : find_vma(mm, start);
  }
  if (!error) error = unmapped_error;

  if (write) mmap_write_unlock(mm);
  else mmap_read_unlock(mm);
  check_invariants("madvise");
  return error;
}

}  // namespace kmm
