// SPDX-License-Identifier: GPL-2.0-only
// The LRU lists and direct reclaim of the page cache: include/linux/mm_inline.h (lruvec_add_folio,
// lruvec_del_folio), mm/vmscan.c (try_to_free_pages down to shrink_folio_list), the file side of
// mm/rmap.c (folio_referenced, try_to_unmap, the batched unmap flush). Linux 6.12, the classic LRU
// (not MGLRU: CONFIG_LRU_GEN off or lru_gen disabled); docs/research-filemap-swap-io.md §4 has the
// map with line numbers.
//
// What is here: an allocation that finds its node without free memory reclaims before it fails
// (__alloc_pages_direct_reclaim()): the file LRU lists of the node are scanned from the tail, 32
// folios at a time, at priority 12 down to 0; a folio whose PTEs were young gets a second chance
// (PG_referenced) or is activated; a clean one is unmapped from every process (the rmap walk over
// the file's VMAs, the TLB flush batched as the arch batches it) and dropped from the page cache;
// the active file list is aged into the inactive one when the inactive one is low.
// With swap (swap.size, swap.cpp) the anonymous lists are scanned too (get_scan_count()'s
// balance by swappiness and reclaim cost): an anonymous folio gets a swap slot, its PTEs become
// swap entries, it is written and freed on a later pass once the write completed.
// Dirty page-cache folios are marked and activated (direct reclaim does not write them); a batch
// that is all dirty wakes the flusher (page_writeback.cpp), whose write's end rotates them to the
// inactive tail.
// Not here (each marked where it happens): no shadow entries for anonymous memory, no
// kswapd or watermarks, no i_mmap_rwsem or LRU lock timing, large anonymous folios are not split
// for swap-out (they are activated); large page-cache folios are unmapped and dropped whole, as
// 6.12 does.
#include <algorithm>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
constexpr int DEF_PRIORITY = 12;           // include/linux/mmzone.h

enum folio_references { FOLIOREF_RECLAIM, FOLIOREF_RECLAIM_CLEAN, FOLIOREF_KEEP, FOLIOREF_ACTIVATE };

// int_sqrt() (lib/math/int_sqrt.c)
uint64_t int_sqrt(uint64_t x) {
  uint64_t r = 0;
  while ((r + 1) * (r + 1) <= x) ++r;
  return r;
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// The lists (include/linux/mm_inline.h)

// lruvec_add_folio() and lruvec_add_folio_tail(): list_add() / list_add_tail() on
// folio_lru_list(); the two differ only in the end of the list.
void Kernel::lruvec_add_folio_at(lruvec& lv, folio* f, bool tail) {
  MMUSIM_CHECK(!folio_test_lru(f), "{}: pfn {:#x} is on an LRU list",
               tail ? "lruvec_add_folio_tail" : "lruvec_add_folio", page_to_pfn(f));
  lruvec::list& l = lv.lists[folio_lru_list(f)];
  const pfn_t pfn = page_to_pfn(f);
  // The new neighbour's link field and the list end it replaces, by the side it goes on.
  pfn_t& end = tail ? l.tail : l.head;
  pfn_t& other_end = tail ? l.head : l.tail;
  (tail ? f->lru_next : f->lru_prev) = 0;
  (tail ? f->lru_prev : f->lru_next) = uint32_t(end);
  if (end) (tail ? mem_map_[end].lru_next : mem_map_[end].lru_prev) = uint32_t(pfn);
  else other_end = pfn;
  end = pfn;
  l.nr_pages += uint64_t(folio_nr_pages(f));
  f->flags |= PG_lru;
}

// lruvec_del_folio(): list_del() from its list.
void Kernel::lruvec_del_folio(lruvec& lv, folio* f) {
  MMUSIM_CHECK(folio_test_lru(f), "lruvec_del_folio: pfn {:#x} is on no LRU list", page_to_pfn(f));
  lruvec::list& l = lv.lists[folio_lru_list(f)];
  if (f->lru_prev) mem_map_[f->lru_prev].lru_next = f->lru_next;
  else l.head = f->lru_next;
  if (f->lru_next) mem_map_[f->lru_next].lru_prev = f->lru_prev;
  else l.tail = f->lru_prev;
  f->lru_prev = f->lru_next = 0;
  l.nr_pages -= uint64_t(folio_nr_pages(f));
  f->flags &= ~PG_lru;
}

// ------------------------------------------------------------------------------------------------
// The file rmap (mm/rmap.c)

template <typename F>
void Kernel::vma_interval_tree_foreach(address_space* mapping, uint64_t pgoff, uint64_t pgoff_last, F&& fn) {
  // (The kernel keeps the file's VMAs in an interval tree, mapping->i_mmap, under i_mmap_rwsem;
  // the same set is found here by a search of the live mms.)
  for (const auto& up : mms_) {
    mm_struct* mm = up.get();
    if (!mm || mm->pgd == 0) continue;
    for (auto& [end, v] : mm->mm_mt) {
      vm_area_struct* vma = v.get();
      if (vma->vm_file != mapping) continue;
      if (pgoff_last < vma->vm_pgoff || pgoff >= vma->vm_pgoff + vma_pages(vma)) continue;
      fn(vma);
    }
  }
}

// rmap_walk() (mm/rmap.c): the VMAs that may map the folio, with the folio's address in each.
// A page-cache folio: rmap_walk_file() over the file's VMAs that overlap its range (a large
// folio's first page may lie before the VMA: the walkers look at each of its pages that the VMA
// covers, folio_walk_ptes()). An anonymous one: rmap_walk_anon()
// over its anon_vma's chain; the port keeps no anon_vma chains, so every anonymous VMA of a live mm
// that covers the folio's linear index is visited (a superset: the walkers look for the folio's
// pfn in the PTE).
template <typename F>
void Kernel::rmap_walk(folio* f, F&& fn) {
  if (!folio_test_anon(f)) {
    vma_interval_tree_foreach(f->mapping, f->index, f->index + uint64_t(folio_nr_pages(f)) - 1,
                              [&](vm_area_struct* vma) {
                                fn(vma, vma->vm_start + ((f->index - vma->vm_pgoff) << PAGE_SHIFT));  // vma_address()
                              });
    return;
  }
  for (const auto& up : mms_) {
    mm_struct* mm = up.get();
    if (!mm || mm->pgd == 0) continue;
    for (auto& [end, v] : mm->mm_mt) {
      vm_area_struct* vma = v.get();
      if (!vma->anon || vma->vm_file) continue;
      if (f->index < vma->vm_pgoff || f->index >= vma->vm_pgoff + vma_pages(vma)) continue;
      fn(vma, vma->vm_start + ((f->index - vma->vm_pgoff) << PAGE_SHIFT));
    }
  }
}

// page_vma_mapped_walk() (mm/page_vma_mapped.c) over the PTEs of `vma` that may map pages of the
// folio: for each of its pages the VMA covers, the PTE at the page's address taken under its PTL
// and passed to fn(pte, address, page number in the folio) if it maps that page. (The kernel takes
// each page table's PTL once for the PTEs in it; here each PTE's, which is the same lock.)
template <typename F>
void Kernel::folio_walk_ptes(folio* f, vm_area_struct* vma, uint64_t address, F&& fn) {
  const pfn_t pfn = page_to_pfn(f);
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  for (uint64_t i = 0; i < nr; ++i) {
    const uint64_t addr = address + (i << PAGE_SHIFT);
    if (addr < vma->vm_start || addr >= vma->vm_end) continue;  // (a large file folio's page outside it)
    mm_struct* mm = vma->vm_mm;
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd || !arch_->table_present(pmd->val) || arch_->pmd_trans_huge(*pmd)) continue;
    uint32_t* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
    const pte_t ptent = arch_->ptep_get(pte);
    if (arch_->pte_present(ptent) && arch_->pte_pfn(ptent) == pfn + i) fn(pte, addr, i);
    pte_unmap_unlock(pte, ptl);
  }
}

// page_vma_mapped_walk() (mm/page_vma_mapped.c) of a PMD-mappable folio: the PMD at the folio's
// address, if the VMA covers the whole 2 MiB and the PMD maps the folio (pvmw.pte == NULL).
template <typename F>
void Kernel::folio_walk_pmd(folio* f, vm_area_struct* vma, uint64_t address, F&& fn) {
  if (!folio_test_pmd_mappable(f)) return;
  if (address < vma->vm_start || address + HPAGE_PMD_SIZE > vma->vm_end || (address & ~PMD_MASK)) return;
  mm_struct* mm = vma->vm_mm;
  pmd_t* pmd = mm_find_pmd(mm, address);
  if (!pmd) return;
  pt_touch(pmd, sizeof(pmd_t), false);
  uint32_t* ptl = pmd_lock(mm, pmd);
  if (arch_->pmd_trans_huge(*pmd) && arch_->pmd_pfn(*pmd) == folio_pfn(f)) fn(pmd, address);
  spin_unlock(ptl);
}

// folio_referenced() (mm/rmap.c:983) -> rmap_walk() -> folio_referenced_one() (846): each PTE
// that maps the folio, taken under its PTL (page_vma_mapped_walk()), its accessed bit cleared
// (ptep_clear_flush_young_notify()); a PMD that maps it likewise (pmdp_clear_flush_young_notify(),
// which flushes the 2 MiB if it was young). A VMA in which one was young counts once, and only
// then adds its flags.
int Kernel::folio_referenced(folio* f, vm_flags_t* vm_flags) {
  *vm_flags = 0;
  if (!folio_mapped(f) || (!f->mapping && !folio_test_anon(f))) return 0;
  int referenced = 0;
  int mapcount = folio_mapcount(f);
  rmap_walk(f, [&](vm_area_struct* vma, uint64_t address) {
    if (mapcount <= 0) return;  // if (!pra->mapcount) return false: stop the walk
    // Every PTE of the folio in the VMA has its accessed bit cleared; the VMA counts once if any
    // was young (pra->referenced++).
    int young = 0;
    folio_walk_pmd(f, vma, address, [&](pmd_t* pmd, uint64_t haddr) {
      if (arch_->pmdp_clear_flush_young(vma, haddr, pmd)) ++young;
      --mapcount;  // a PMD counts one in the folio's mapcount
    });
    folio_walk_ptes(f, vma, address, [&](pte_t* pte, uint64_t addr, uint64_t) {
      if (arch_->ptep_clear_flush_young(vma, addr, pte)) ++young;
      --mapcount;
    });
    if (young) {
      ++referenced;
      *vm_flags |= vma->vm_flags;  // pra->vm_flags |= vma->vm_flags & ~VM_LOCKED
    }
  });
  return referenced;
}

// try_to_unmap() (mm/rmap.c:2013) -> rmap_walk() -> try_to_unmap_one() (1642), TTU_BATCH_FLUSH:
// the PTE cleared (deferred flush where the arch batches it, else ptep_clear_flush()), its dirty
// bit moved to the folio; a page-cache folio's MM_FILEPAGES dropped, an anonymous one's PTE
// replaced by its swap entry (swap_duplicate(), exclusive if the page was, MM_ANONPAGES ->
// MM_SWAPENTS); the rmap and the mapping's reference dropped. A large page-cache folio: each of
// its PTEs so (the folio is never split), and a PMD that maps it is zapped by the PMD split;
// swap-cache folios are order 0 here.
void Kernel::try_to_unmap(folio* f) {
  MMUSIM_CHECK(f->mapping || (!folio_test_large(f) && folio_test_anon(f) && folio_test_swapcache(f)),
               "try_to_unmap: pfn {:#x}: only page-cache and small swap-cache folios here", page_to_pfn(f));
  rmap_walk(f, [&](vm_area_struct* vma, uint64_t address) {
    if (!folio_mapped(f)) return;
    mm_struct* mm = vma->vm_mm;
    // A PMD that maps the folio (TTU_SPLIT_HUGE_PMD, which shrink_folio_list() passes for a
    // PMD-mappable folio): split_huge_pmd_locked(), which for a file VMA unmaps it (the split's
    // flush is immediate: TTU_BATCH_FLUSH defers only PTE flushes); the walk then finds no PTE.
    folio_walk_pmd(f, vma, address, [&](pmd_t* pmd, uint64_t haddr) { __split_huge_pmd_locked(vma, pmd, haddr); });
    folio_walk_ptes(f, vma, address, [&](pte_t* pte, uint64_t addr, uint64_t i) {
      pte_t pteval;
      // should_defer_flush() (mm/rmap.c:727)
      if (arch_->arch_tlbbatch_should_defer(mm, cpu_)) {
        pteval = arch_->ptep_get_and_clear(mm, addr, pte);
        // set_tlb_ubc_flush_pending() (mm/rmap.c:682)
        arch_->arch_tlbbatch_add_pending(tlb_ubc_.arch, vma, addr);
        tlb_ubc_.flush_required = true;
      } else {
        pteval = arch_->ptep_clear_flush(vma, addr, pte);
      }
      // Set the dirty flag on the folio now the PTE is gone.
      if (arch_->pte_dirty(pteval)) folio_mark_dirty(f);
      if (folio_test_anon(f)) {
        const swp_entry_t entry{f->swap};
        swap_duplicate(entry);
        // folio_try_share_anon_rmap_pte(): the page is no longer exclusive to one mm; the swap
        // PTE remembers whether it was.
        const bool anon_exclusive = PageAnonExclusive(f);
        ClearPageAnonExclusive(f);
        add_mm_counter(mm, MM_ANONPAGES, -1);
        add_mm_counter(mm, MM_SWAPENTS, 1);
        pte_t swp_pte = arch_->swp_entry_to_pte(entry);
        if (anon_exclusive) swp_pte = arch_->pte_swp_mkexclusive(swp_pte);
        arch_->set_pte_at(mm, addr, pte, swp_pte);
      } else {
        add_mm_counter(mm, MM_FILEPAGES, -1);  // dec_mm_counter(mm, mm_counter_file(folio))
      }
      folio_remove_rmap_pte(f, folio_page(f, i), vma);
      folio_put(f);
      ctr_.reclaim_unmapped_ptes.inc();
    });
  });
}

// try_to_unmap_flush() (mm/rmap.c:649): the deferred flushes at once (arch_tlbbatch_flush()).
void Kernel::try_to_unmap_flush() {
  if (!tlb_ubc_.flush_required) return;
  ctr_.tlbbatch_flushes.inc();
  arch_->arch_tlbbatch_flush(tlb_ubc_.arch);
  tlb_ubc_.flush_required = false;
}

// folio_mkclean() (mm/rmap.c:1094) -> rmap_walk() -> page_mkclean_one() (1047) ->
// page_vma_mkclean_one() (1021): in each shared mapping of the page-cache folio, a PTE that is
// dirty or writable is cleared and flushed at once (ptep_clear_flush(): no batching), then set
// again write-protected and clean; the next store faults (wp_page_shared()) and dirties the
// folio again. Returns the PTEs cleaned.
int Kernel::folio_mkclean(folio* f) {
  if (!folio_mapped(f) || folio_test_anon(f) || !f->mapping) return 0;
  int cleaned = 0;
  rmap_walk(f, [&](vm_area_struct* vma, uint64_t address) {
    if (!(vma->vm_flags & VM_SHARED)) return;  // rmap_walk_control.invalid_vma: invalid_mkclean_vma()
    mm_struct* mm = vma->vm_mm;
    // A PMD (page_vma_mkclean_one(), rmap.c:1055): invalidated (a flush of its 2 MiB), then set
    // again write-protected and clean.
    folio_walk_pmd(f, vma, address, [&](pmd_t* pmd, uint64_t haddr) {
      if (!arch_->pmd_dirty(*pmd) && !arch_->pmd_write(*pmd)) return;
      // flush_cache_range(): nothing on x86 and arm64.
      pmd_t entry = arch_->pmdp_invalidate(vma, haddr, pmd);
      entry = arch_->pmd_wrprotect(entry);
      entry = arch_->pmd_mkclean(entry);
      arch_->set_pmd_at(mm, haddr, pmd, entry);
      ++cleaned;
      ctr_.folio_mkclean_ptes.inc();
    });
    folio_walk_ptes(f, vma, address, [&](pte_t* pte, uint64_t addr, uint64_t) {
      const pte_t old = arch_->ptep_get(pte);
      if (!arch_->pte_dirty(old) && !arch_->pte_write(old)) return;
      pte_t entry = arch_->ptep_clear_flush(vma, addr, pte);
      entry = arch_->pte_wrprotect(entry);
      entry = arch_->pte_mkclean(entry);
      arch_->set_pte_at(mm, addr, pte, entry);
      ++cleaned;
      ctr_.folio_mkclean_ptes.inc();
    });
  });
  return cleaned;
}

// ------------------------------------------------------------------------------------------------
// Reclaim (mm/vmscan.c)

// __remove_mapping() (mm/vmscan.c:720) of a clean page-cache folio: only if nobody but the cache
// and the isolation holds it (folio_ref_freeze(folio, 1 + nr): the cache's references and ours);
// its shadow entry stays at its index.
bool Kernel::__remove_mapping(address_space* mapping, folio* f) {
  const int refcount = 1 + int(folio_nr_pages(f));
  if (folio_ref_count(f) != refcount) return false;  // folio_ref_freeze() failed
  if (folio_test_dirty(f)) return false;
  if (folio_test_swapcache(f)) {
    // __delete_from_swap_cache() and put_swap_folio(): the swap entry stays in the PTEs (no
    // shadow entries for anonymous memory here).
    const swp_entry_t swap{f->swap};
    swap_slot_store(f);
    remove_swap_cache_entry(f, swap);
    struct_page_touch(f, 1, true);
    return true;
  }
  // What the disk holds of a page written back (page_writeback.cpp), taken again now the folio
  // leaves memory, as swap_slot_store() does: a store of a core behind in simulated time made
  // before the write in simulated time but after it in the port's order is in it (the folio is
  // clean: any later store would have faulted and dirtied it).
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  for (uint64_t i = 0; i < nr; ++i) {
    if (auto w = mapping->written.find(f->index + i); w != mapping->written.end()) {
      const uint8_t* data = phys_.frame_data(folio_pfn(f) + i);
      w->second.assign(data, data + PAGE_SIZE);
    }
  }
  // shadow = workingset_eviction(folio, target_memcg); __filemap_remove_folio(folio, shadow) ->
  // page_cache_delete(): the shadow takes the folio's slots, all of a large folio's range.
  const address_space::shadow_entry shadow = workingset_eviction(f);
  for (uint64_t i = 0; i < nr; ++i) mapping->shadows[f->index + i] = shadow;
  mapping->i_pages.erase(f->index);
  mapping->nrpages -= uint64_t(folio_nr_pages(f));
  // filemap_unaccount_folio(): NR_FILE_THPS (NR_FILE_PAGES is not kept).
  if (folio_test_pmd_mappable(f)) nr_file_thps_ -= nr;
  f->mapping = nullptr;
  f->flags &= ~(PG_uptodate | PG_readahead | PG_referenced | PG_workingset | PG_active);
  f->io_until_ps = 0;
  struct_page_touch(f, 1, true);
  charge(Cost::folio_op);
  return true;
}

// shrink_folio_list() (mm/vmscan.c:1049) with folio_check_references() (865) and pageout() (638),
// for memory-cgroup and direct reclaim (cgroup v2: writeback_throttling_sane()).
unsigned Kernel::shrink_folio_list(std::vector<folio*>& folio_list, uint64_t* nr_pageout, reclaim_stat* stat) {
  writeback_end_due();
  reclaim_stat dummy;
  if (!stat) stat = &dummy;
  unsigned nr_reclaimed = 0;
  std::vector<folio*> ret_folios, free_folios;
  for (folio* f : folio_list) {
    MMUSIM_CHECK(!folio_test_lru(f), "shrink_folio_list: pfn {:#x} not isolated", page_to_pfn(f));
    // A folio under read is locked (folio_trylock() fails): keep it.
    if (folio_io_pending(f) || !folio_trylock(f)) {
      ret_folios.push_back(f);
      continue;
    }
    bool activate = false, keep = false, unlocked = false;
    const uint64_t nr_pages = uint64_t(folio_nr_pages(f));
    // folio_check_dirty_writeback() (mm/vmscan.c:928): page-cache folios only. Dirty or under
    // writeback: nr_dirty; dirty and not yet queued: nr_unqueued_dirty; under writeback and
    // already marked for reclaim (it came round again before its write ended): nr_congested.
    if (folio_is_file_lru(f)) {
      const bool dirty = folio_test_dirty(f), writeback = folio_test_writeback(f);
      if (dirty || writeback) stat->nr_dirty += nr_pages;
      if (dirty && !writeback) stat->nr_unqueued_dirty += nr_pages;
      if (writeback && folio_test_reclaim(f)) stat->nr_congested += nr_pages;
    }
    // A folio under writeback: memcg and direct reclaim mark it for reclaim and activate it; the
    // write's end rotates it to the inactive tail (mm/vmscan.c:1150, case 2).
    if (folio_test_writeback(f)) {
      f->flags |= PG_reclaim;  // folio_set_reclaim()
      stat->nr_writeback += nr_pages;
      activate = true;
    }
    folio_references references = FOLIOREF_RECLAIM;
    if (!activate) {
      // folio_check_references()
      vm_flags_t vm_flags = 0;
      const int referenced_ptes = folio_referenced(f, &vm_flags);
      const bool referenced_folio = folio_test_referenced(f);
      f->flags &= ~PG_referenced;  // folio_test_clear_referenced()
      if (referenced_ptes) {
        // All mapped folios start out with page table references from the instantiating fault,
        // so we need to look twice if a mapped file/anon folio is used more than once. Mark it
        // and spare it for another trip around the inactive list.
        f->flags |= PG_referenced;  // folio_set_referenced()
        if (referenced_folio || referenced_ptes > 1) references = FOLIOREF_ACTIVATE;
        else if ((vm_flags & VM_EXEC) && folio_is_file_lru(f)) references = FOLIOREF_ACTIVATE;
        else references = FOLIOREF_KEEP;
      } else if (referenced_folio && folio_is_file_lru(f)) {
        references = FOLIOREF_RECLAIM_CLEAN;  // Reclaim if clean, defer dirty folios to writeback
      }
      switch (references) {
        case FOLIOREF_ACTIVATE: activate = true; break;
        case FOLIOREF_KEEP: keep = true; break;
        case FOLIOREF_RECLAIM:
        case FOLIOREF_RECLAIM_CLEAN: break;
      }
    }
    // Anonymous process memory has backing store? Try to allocate it some swap space here.
    if (!activate && !keep && folio_test_anon(f) && !folio_test_swapcache(f)) {
      // (A large folio would be split first, split_folio_to_list(): not ported; it stays.)
      if (folio_test_large(f) || !add_to_swap(f)) activate = true;  // activate_locked_split
    }
    if (!activate && !keep && folio_mapped(f)) {
      // The folio is mapped into the page tables of one or more processes. Try to unmap it here.
      // (TTU_BATCH_FLUSH; TTU_SPLIT_HUGE_PMD for a PMD-mappable folio and TTU_SYNC for a large
      // one: try_to_unmap() here always does both. A large anonymous folio never gets here: it
      // was activated above.)
      try_to_unmap(f);
      if (folio_mapped(f)) activate = true;  // stat->nr_unmap_fail
    }
    bool clean_path = !activate && !keep;
    if (clean_path && folio_test_dirty(f)) {
      clean_path = false;
      if (folio_is_file_lru(f)) {
        // Only kswapd writes page-cache folios (mm/vmscan.c:1347): the flusher will (reclaim
        // wakes it when a whole batch is dirty, shrink_inactive_list()); immediately reclaim when
        // written back (mm/vmscan.c:1360).
        ctr_.nr_vmscan_immediate_reclaim.inc(nr_pages);  // NR_VMSCAN_IMMEDIATE
        f->flags |= PG_reclaim;
        activate = true;
      } else {
        // The folio is dirty and anonymous: write it to swap. A TLB entry of a cleared PTE that
        // was writable must be gone before the write starts (try_to_unmap_flush_dirty()).
        try_to_unmap_flush();
        // pageout(): is_page_cache_freeable() (the swap cache's references and ours only).
        if (folio_ref_count(f) != 1 + int(folio_nr_pages(f))) {
          keep = true;
        } else {
          f->flags &= ~PG_dirty;    // folio_clear_dirty_for_io()
          f->flags |= PG_reclaim;   // folio_set_reclaim()
          swap_writepage(f);        // unlocks the folio
          unlocked = true;
          if (!folio_test_writeback(f)) f->flags &= ~PG_reclaim;  // synchronous (zeromap, or freed)
          if (nr_pageout) *nr_pageout += uint64_t(folio_nr_pages(f));
          // PAGE_SUCCESS: under writeback or dirty again: keep; else reclaim it now.
          if (!folio_test_writeback(f) && !folio_test_dirty(f) && folio_trylock(f)) {
            unlocked = false;
            clean_path = true;
          } else {
            keep = true;
          }
        }
      }
    }
    if (clean_path) {
      if (__remove_mapping(f->mapping, f)) {
        folio_unlock(f);
        // free_it: the cache's references and ours go once the TLBs are flushed
        // (try_to_unmap_flush() before free_unref_folios()).
        free_folios.push_back(f);
        nr_reclaimed += unsigned(folio_nr_pages(f));
        continue;
      }
      keep = true;  // keep_locked
    }
    if (activate) {
      // activate_locked: Not a candidate for swapping, so reclaim swap space.
      if (folio_test_swapcache(f) && mem_cgroup_swap_full(f)) folio_free_swap(f);
      f->flags |= PG_active;
      ctr_.pgactivate.inc(uint64_t(folio_nr_pages(f)));
      if (!folio_is_file_lru(f)) ctr_.pgactivate_anon.inc(uint64_t(folio_nr_pages(f)));
    }
    if (!unlocked) folio_unlock(f);
    ret_folios.push_back(f);
  }
  // 'folio_list' is always empty here; try_to_unmap_flush() before the folios are freed.
  try_to_unmap_flush();
  for (folio* f : free_folios) folios_put_refs(f, 1 + int(folio_nr_pages(f)));
  folio_list.swap(ret_folios);
  return nr_reclaimed;
}

// isolate_lru_folios() (mm/vmscan.c:1672): take up to nr_to_scan folios from the tail of the
// list, each with a reference, off the LRU.
uint64_t Kernel::isolate_lru_folios(uint64_t nr_to_scan, lruvec& lv, std::vector<folio*>* dst,
                                    uint64_t* nr_scanned, lru_list lru) {
  uint64_t nr_taken = 0, scan = 0, folios = 0;
  while (scan < nr_to_scan && lv.lists[lru].tail) {
    folio* f = &mem_map_[lv.lists[lru].tail];
    // Account all pages in a folio.
    scan += uint64_t(folio_nr_pages(f));
    ++folios;
    folio_get(f);  // folio_try_get()
    lruvec_del_folio(lv, f);  // folio_test_clear_lru()
    dst->push_back(f);
    nr_taken += uint64_t(folio_nr_pages(f));
  }
  *nr_scanned = scan;  // (total_scan: no zone skips here, the same)
  charge(Cost::folio_op, folios);
  return nr_taken;
}

// move_folios_to_lru() (mm/vmscan.c:1778): back onto the LRU (their lists by PG_active), the
// isolation's reference dropped.
void Kernel::move_folios_to_lru(lruvec& lv, std::vector<folio*>& list) {
  for (folio* f : list) {
    lruvec_add_folio(lv, f);
    if (folio_test_active(f)) workingset_age_nonresident(lv, uint64_t(folio_nr_pages(f)));
    folio_put(f);
  }
  list.clear();
}

// ------------------------------------------------------------------------------------------------
// Refault detection (mm/workingset.c), the classic LRU's

// workingset_age_nonresident() (mm/workingset.c:356): the lruvec and its ancestors' (the root's).
void Kernel::workingset_age_nonresident(lruvec& lv, uint64_t nr_pages) {
  lv.nonresident_age += nr_pages;
  if (lv.memcg_id != 0) memcgs_[0]->nodeinfo[size_t(lv.nid)].nonresident_age += nr_pages;  // parent_lruvec()
}

// workingset_eviction() (mm/workingset.c:382): the eviction's place in the reclaimed lruvec's
// (the target memcg's, the root's for global reclaim) nonresident age, which it advances.
address_space::shadow_entry Kernel::workingset_eviction(folio* f) {
  mem_cgroup* target = reclaim_target_ ? reclaim_target_ : memcgs_[0].get();
  lruvec& lv = target->nodeinfo[size_t(pfn_to_nid(page_to_pfn(f)))];
  address_space::shadow_entry s;
  s.memcgid = target->id;
  s.nid = uint16_t(lv.nid);
  s.eviction = lv.nonresident_age;
  s.workingset = folio_test_workingset(f);
  workingset_age_nonresident(lv, uint64_t(folio_nr_pages(f)));
  return s;
}

// workingset_refault() (mm/workingset.c:538) with workingset_test_recent() (419): the refault
// distance (evictions and activations in the evicting lruvec since) against the workingset it
// could have displaced, the active file list (no swap: the anon lists do not count). Close
// enough: the folio starts active, and if it had been active before, it is workingset again.
void Kernel::workingset_refault(folio* f, const address_space::shadow_entry& shadow) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  lruvec& lv = folio_lruvec(f);
  ctr_.workingset_refault_file.inc(nr);
  const lruvec& eviction_lruvec = memcgs_[shadow.memcgid]->nodeinfo[shadow.nid];
  const uint64_t refault_distance = eviction_lruvec.nonresident_age - shadow.eviction;
  const uint64_t workingset_size = eviction_lruvec.lists[LRU_ACTIVE_FILE].nr_pages;
  if (refault_distance > workingset_size) return;
  f->flags |= PG_active;  // folio_set_active()
  workingset_age_nonresident(lv, nr);
  ctr_.workingset_activate_file.inc(nr);
  // Folio was active prior to eviction
  if (shadow.workingset) {
    f->flags |= PG_workingset;
    ctr_.workingset_restore_file.inc(nr);
  }
}

// shrink_inactive_list() (mm/vmscan.c:1937)
// The vmstat counts global reclaim only (if (!cgroup_reclaim(sc)) __count_vm_events()); the
// memcg's count both (__count_memcg_events()): here memcg reclaim's are memcg.pgscan/.pgsteal.
uint64_t Kernel::shrink_inactive_list(uint64_t nr_to_scan, lruvec& lv, lru_list lru, bool cgroup) {
  lru_add_drain();
  std::vector<folio*> folio_list;
  uint64_t nr_scanned = 0;
  const uint64_t nr_taken = isolate_lru_folios(nr_to_scan, lv, &folio_list, &nr_scanned, lru);
  (cgroup ? ctr_.memcg_pgscan : ctr_.pgscan_direct).inc(nr_scanned);
  sc_nr_scanned_ += nr_scanned;
  if (nr_taken == 0) return 0;
  uint64_t nr_pageout = 0;
  reclaim_stat stat;
  const unsigned nr_reclaimed = shrink_folio_list(folio_list, &nr_pageout, &stat);
  move_folios_to_lru(lv, folio_list);
  // If dirty folios are scanned that are not queued for IO, it implies that the flushers are not
  // doing their job. This can happen when memory pressure pushes dirty folios to the end of the
  // LRU before the dirty limits are breached and the dirty data has expired. It can also happen
  // when the proportion of dirty folios grows not through writes but through memory pressure
  // reclaiming all the clean cache. And in some cases, the flushers simply cannot keep up with
  // the allocation rate. Nudge the flusher threads in case they are asleep.
  // (Cgroup v2 and global reclaim are writeback_throttling_sane(): no reclaim_throttle(WRITEBACK)
  // here, which is cgroup v1's.)
  if (stat.nr_unqueued_dirty == nr_taken) wakeup_flusher_threads_vmscan();
  sc_nr_.dirty += stat.nr_dirty;
  sc_nr_.congested += stat.nr_congested;
  lru_note_cost(lv, is_file_lru(lru), nr_pageout, nr_scanned - std::min<uint64_t>(nr_scanned, nr_reclaimed));
  (cgroup ? ctr_.memcg_pgsteal : ctr_.pgsteal_direct).inc(nr_reclaimed);
  return nr_reclaimed;
}

// shrink_active_list() (mm/vmscan.c:2057): folios from the active list's tail move to the inactive
// list, but referenced executable file folios, which get one more trip around the active list.
void Kernel::shrink_active_list(uint64_t nr_to_scan, lruvec& lv, lru_list lru) {
  lru_add_drain();
  std::vector<folio*> l_hold, l_active, l_inactive;
  uint64_t nr_scanned = 0;
  isolate_lru_folios(nr_to_scan, lv, &l_hold, &nr_scanned, lru);
  ctr_.pgrefill.inc(nr_scanned);
  for (folio* f : l_hold) {
    // Referenced or rmap lock contention: rotate
    vm_flags_t vm_flags = 0;
    if (folio_referenced(f, &vm_flags) != 0 && (vm_flags & VM_EXEC) && folio_is_file_lru(f)) {
      l_active.push_back(f);
      continue;
    }
    f->flags &= ~PG_active;  // we are de-activating
    f->flags |= PG_workingset;
    l_inactive.push_back(f);
  }
  ctr_.pgdeactivate.inc(l_inactive.size());
  lru_note_cost(lv, is_file_lru(lru), 0, l_active.size());  // nr_rotated
  // Move folios back to the lru list.
  move_folios_to_lru(lv, l_active);
  move_folios_to_lru(lv, l_inactive);
}

// inactive_is_low() (mm/vmscan.c:2251)
bool Kernel::inactive_is_low(const lruvec& lv, lru_list inactive_lru) const {
  const uint64_t inactive = lv.lists[inactive_lru].nr_pages;
  const uint64_t active = lv.lists[inactive_lru + 1].nr_pages;
  const uint64_t gb = (inactive + active) >> (30 - PAGE_SHIFT);
  const uint64_t inactive_ratio = gb ? int_sqrt(10 * gb) : 1;
  return inactive * inactive_ratio < active;
}

// lru_note_cost() (mm/swap.c:271): what reclaiming from one type cost (I/O weighs
// SWAP_CLUSTER_MAX per page, a rotation 1), decayed by half once the costs exceed a quarter of the
// lists. (The kernel also charges the ancestors' lruvecs; the proportions here use the reclaimed
// lruvec's.)
void Kernel::lru_note_cost(lruvec& lv, bool file, uint64_t nr_io, uint64_t nr_rotated) {
  const uint64_t cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
  (file ? lv.file_cost : lv.anon_cost) += cost;
  uint64_t lrusize = 0;
  for (const auto& l : lv.lists) lrusize += l.nr_pages;
  if (lv.file_cost + lv.anon_cost > lrusize / 4) {
    lv.file_cost /= 2;
    lv.anon_cost /= 2;
  }
}

// shrink_lruvec() (mm/vmscan.c:5701) with get_scan_count() (2392) and prepare_scan_control()'s
// cache_trim_mode (6.12, classic LRU): without swap (or with none free) only the file lists are
// scanned (SCAN_FILE); with it, SCAN_EQUAL at priority 0, SCAN_FILE while the inactive file list is
// large and not low (cache_trim_mode), else SCAN_FRACT: anon by swappiness, file by
// 200 - swappiness, each weighted by the other's recent reclaim cost. Each list `size >> priority`
// times its fraction, 32 at a time; the active lists are aged when their inactive list is low
// (shrink_list(): sc->may_deactivate); once enough is reclaimed the smaller side stops and the
// other is cut to the same proportion (not in global reclaim at DEF_PRIORITY); then the anon
// active list is aged if its inactive list is low. (No file_is_tiny: there are no watermarks; no
// memory.min/low.)
uint64_t Kernel::shrink_lruvec(lruvec& lv, int priority, uint64_t nr_to_reclaim, bool cgroup) {
  enum { SCAN_EQUAL, SCAN_FRACT, SCAN_ANON, SCAN_FILE } scan_balance;
  const bool may_deactivate_file = inactive_is_low(lv, LRU_INACTIVE_FILE);
  const bool may_deactivate_anon = inactive_is_low(lv, LRU_INACTIVE_ANON);
  const unsigned swappiness = params_.swappiness;
  uint64_t fraction[2] = {0, 0}, denominator = 0;
  // can_reclaim_anon_pages(): swap space left, for the lruvec's memcg within its memory.swap.max.
  const bool can_reclaim_anon = mem_cgroup_get_nr_swap_pages(memcgs_[lv.memcg_id].get()) > 0;
  if (!can_reclaim_anon) {
    // If we have no swap space, do not bother scanning anon folios.
    scan_balance = SCAN_FILE;
  } else if (cgroup && !swappiness) {
    scan_balance = SCAN_FILE;
  } else if (!priority && swappiness) {
    // Do not apply any pressure balancing cleverness when the system is close to OOM, scan both
    // anon and file equally.
    scan_balance = SCAN_EQUAL;
  } else if ((lv.lists[LRU_INACTIVE_FILE].nr_pages >> priority) && !may_deactivate_file) {
    // If there is enough inactive page cache, we do not reclaim anything from the anonymous
    // working right now (cache_trim_mode).
    scan_balance = SCAN_FILE;
  } else {
    // Calculate the pressure balance between anon and file pages.
    scan_balance = SCAN_FRACT;
    uint64_t total_cost = lv.anon_cost + lv.file_cost;
    const uint64_t anon_cost = total_cost + lv.anon_cost;
    const uint64_t file_cost = total_cost + lv.file_cost;
    total_cost = anon_cost + file_cost;
    const uint64_t ap = swappiness * (total_cost + 1) / (anon_cost + 1);
    const uint64_t fp = (200 - swappiness) * (total_cost + 1) / (file_cost + 1);
    fraction[0] = ap;
    fraction[1] = fp;
    denominator = ap + fp;
  }
  uint64_t nr[NR_LRU_LISTS] = {}, targets[NR_LRU_LISTS] = {};
  for (unsigned l = 0; l < NR_LRU_LISTS; ++l) {
    const bool file = is_file_lru(lru_list(l));
    uint64_t scan = lv.lists[l].nr_pages >> priority;
    // (A list too small to scan at this priority is scanned in full once priority reaches 0.)
    switch (scan_balance) {
      case SCAN_EQUAL: break;
      case SCAN_FRACT: scan = scan * fraction[file] / denominator; break;
      case SCAN_FILE:
      case SCAN_ANON:
        if ((scan_balance == SCAN_FILE) != file) scan = 0;
        break;
    }
    nr[l] = targets[l] = scan;
  }
  const bool proportional_reclaim = !cgroup && priority == DEF_PRIORITY;
  uint64_t nr_reclaimed = 0;
  while (nr[LRU_INACTIVE_ANON] || nr[LRU_ACTIVE_FILE] || nr[LRU_INACTIVE_FILE]) {
    for (unsigned li = 0; li < NR_LRU_LISTS; ++li) {  // for_each_evictable_lru()
      const lru_list l = lru_list(li);
      if (!nr[l]) continue;
      const uint64_t nr_to_scan = std::min(nr[l], SWAP_CLUSTER_MAX);
      nr[l] -= nr_to_scan;
      // shrink_list()
      if (is_active_lru(l)) {
        if (is_file_lru(l) ? may_deactivate_file : may_deactivate_anon) shrink_active_list(nr_to_scan, lv, l);
      } else {
        nr_reclaimed += shrink_inactive_list(nr_to_scan, lv, l, cgroup);
      }
    }
    if (nr_reclaimed < nr_to_reclaim || proportional_reclaim) continue;
    // For kswapd and memcg, reclaim at least the number of pages requested. Ensure that the
    // anon and file LRUs are scanned proportionally what was requested by get_scan_count(). We
    // stop reclaiming one LRU and reduce the amount scanning proportional to the original scan
    // target.
    const uint64_t nr_file = nr[LRU_INACTIVE_FILE] + nr[LRU_ACTIVE_FILE];
    const uint64_t nr_anon = nr[LRU_INACTIVE_ANON] + nr[LRU_ACTIVE_ANON];
    // It's just vindictive to attack the larger once the smaller has gone to zero.
    if (!nr_file || !nr_anon) break;
    unsigned lru;
    uint64_t percentage;
    if (nr_file > nr_anon) {
      const uint64_t scan_target = targets[LRU_INACTIVE_ANON] + targets[LRU_ACTIVE_ANON] + 1;
      lru = LRU_INACTIVE_ANON;
      percentage = nr_anon * 100 / scan_target;
    } else {
      const uint64_t scan_target = targets[LRU_INACTIVE_FILE] + targets[LRU_ACTIVE_FILE] + 1;
      lru = LRU_INACTIVE_FILE;
      percentage = nr_file * 100 / scan_target;
    }
    // Stop scanning the smaller of the LRU
    nr[lru] = 0;
    nr[lru + 1] = 0;
    // Recalculate the other LRU scan count based on its original scan target and the percentage
    // scanning already complete
    lru = (lru == LRU_INACTIVE_FILE) ? LRU_INACTIVE_ANON : LRU_INACTIVE_FILE;
    for (unsigned l : {lru, lru + 1}) {
      const uint64_t nr_scanned = targets[l] - nr[l];
      nr[l] = targets[l] * (100 - percentage) / 100;
      nr[l] -= std::min(nr[l], nr_scanned);
    }
  }
  // Even if we did not try to evict anon pages at all, we want to rebalance the anon lru
  // active/inactive ratio (can_age_anon_pages(): with swap).
  if (can_reclaim_anon && inactive_is_low(lv, LRU_INACTIVE_ANON))
    shrink_active_list(SWAP_CLUSTER_MAX, lv, LRU_ACTIVE_ANON);
  return nr_reclaimed;
}

// shrink_node() (mm/vmscan.c:5968) for order-0 reclaim (should_continue_reclaim() is false): sc->nr
// counted afresh; shrink_node_memcgs() (5889) over the target's lruvecs on the node (every memcg's
// for global reclaim, from the root; no memory.min/low protection); then, if every dirty folio
// reclaim met was under writeback and already marked for immediate reclaim (nr.congested: folios
// cycling through the LRU faster than they are written), cgroup v2 reclaim flags its target's
// lruvec LRUVEC_CGROUP_CONGESTED, and a direct reclaimer (no kswapd here) whose target lruvec is
// flagged sleeps in reclaim_throttle(CONGESTED). (The root's lruvec, global reclaim's target, is
// flagged only by kswapd's LRUVEC_NODE_CONGESTED: global direct reclaim never sleeps here.)
void Kernel::shrink_node(int nid, int priority, uint64_t nr_to_reclaim, uint64_t* nr_reclaimed) {
  mem_cgroup* target = reclaim_target_;
  lruvec& target_lruvec = (target ? target : memcgs_[0].get())->nodeinfo[size_t(nid)];
  sc_nr_ = {};
  if (target) {
    *nr_reclaimed += shrink_lruvec(target->nodeinfo[size_t(nid)], priority, nr_to_reclaim, true);
  } else {
    for (const auto& memcg : memcgs_)
      *nr_reclaimed += shrink_lruvec(memcg->nodeinfo[size_t(nid)], priority, nr_to_reclaim, false);
  }
  // Tag a node/memcg as congested if all the dirty pages were marked for writeback and immediate
  // reclaim (counted in nr.congested).
  if (sc_nr_.dirty && sc_nr_.dirty == sc_nr_.congested && target) target_lruvec.flags |= LRUVEC_CGROUP_CONGESTED;
  // Stall direct reclaim for IO completions if the lruvec is node is congested. (current_may_throttle():
  // no PF_LOCAL_THROTTLE task here.)
  if (target_lruvec.flags & LRUVEC_CGROUP_CONGESTED) reclaim_throttle(nid, VMSCAN_THROTTLE_CONGESTED);
}

// zone_reclaimable_pages() (mm/vmscan.c:368), summed over the node's zones: its file LRU pages,
// and its anonymous ones while there is swap to put them in (can_reclaim_anon_pages(NULL)); the free
// pages if there are none.
uint64_t Kernel::zone_reclaimable_pages(int nid) const {
  uint64_t nr = 0;
  const bool anon = get_nr_swap_pages() > 0;
  for (const auto& memcg : memcgs_) {
    const lruvec& lv = memcg->nodeinfo[size_t(nid)];
    nr += lv.lists[LRU_INACTIVE_FILE].nr_pages + lv.lists[LRU_ACTIVE_FILE].nr_pages;
    if (anon) nr += lv.lists[LRU_INACTIVE_ANON].nr_pages + lv.lists[LRU_ACTIVE_ANON].nr_pages;
  }
  if (nr) return nr;
  for (unsigned order = 0; order <= MAX_PAGE_ORDER; ++order)  // NR_FREE_PAGES of the node
    nr += uint64_t(free_area_[size_t(nid)][order].size()) << order;
  return nr;
}

// skip_throttle_noprogress() (mm/vmscan.c:494): no sleep when kswapd has given up on the node (no
// kswapd here: never), or when the node's dirty and writeback pages are at most half of what it
// could reclaim ("throttling will occur when the folios cycle towards the end of the LRU if still
// under writeback"). A memcg small against its node is therefore rarely throttled.
bool Kernel::skip_throttle_noprogress(int nid) const {
  const uint64_t reclaimable = zone_reclaimable_pages(nid);
  const uint64_t write_pending = node_write_pending_[size_t(nid)];
  return 2 * write_pending <= reclaimable;
}

// reclaim_throttle() (mm/vmscan.c:527). The flusher's work (no kernel thread here, but a kthread
// in the kernel) only cond_resched()s. CONGESTED and NOPROGRESS sleep schedule_timeout(1) unless
// skip_throttle_noprogress(): until the next timer tick (`sched.hz`), nobody wakes a CONGESTED
// sleeper earlier. (WRITEBACK, HZ/10 and woken by __acct_reclaim_writeback(), is kswapd's and
// cgroup v1's; ISOLATED, HZ/50, waits for too_many_isolated() reclaimers: neither arises here.)
// The sleep is the entry's throttle_cycles, as balance_dirty_pages()' pause; the writes that
// completed meanwhile end when the task wakes. Trace event mm_vmscan_throttled with the kernel's
// fields (its usec_delayed counts whole jiffies: timeout - the jiffies left).
void Kernel::reclaim_throttle(int nid, vmscan_throttle_state reason) {
  static const char* const kReason[] = {"VMSCAN_THROTTLE_WRITEBACK", "VMSCAN_THROTTLE_ISOLATED",
                                        "VMSCAN_THROTTLE_NOPROGRESS", "VMSCAN_THROTTLE_CONGESTED"};
  if (in_flusher_) return;  // current->flags & PF_KTHREAD: cond_resched()
  uint64_t timeout = 0;
  switch (reason) {
    case VMSCAN_THROTTLE_CONGESTED:
    case VMSCAN_THROTTLE_NOPROGRESS:
      if (skip_throttle_noprogress(nid)) return;  // cond_resched()
      timeout = 1;
      break;
    case VMSCAN_THROTTLE_WRITEBACK: timeout = params_.hz / 10; break;
    case VMSCAN_THROTTLE_ISOLATED: timeout = params_.hz / 50; break;
  }
  // A flusher a dirtier woke (wb_wakeup(), not yet run) runs while the reclaimer sleeps.
  wb_run_queued_work();
  // schedule_timeout(timeout): the timer fires at the tick jiffies + timeout.
  const uint64_t now = time_now_ps();
  const uint64_t wake = jiffies_to_ps(jiffies() + timeout);
  const uint64_t sleep_ps = wake > now ? wake - now : 0;
  cost_.throttle_cycles += double(sleep_ps) * ghz_ / 1000.0;
  ctr_.reclaim_throttles.inc();
  ctr_.reclaim_throttle_ns.inc((sleep_ps + 500) / 1000);
  const uint64_t usec_timeout = timeout * (1'000'000ull / params_.hz);
  trace_event("mm_vmscan_throttled", {mmusim::TraceField::dec("nid", uint64_t(nid)),
                                      mmusim::TraceField::dec("usec_timeout", usec_timeout),
                                      mmusim::TraceField::dec("usec_delayed", usec_timeout),
                                      mmusim::TraceField::str("reason", kReason[reason])});
  writeback_end_due();
}

// consider_reclaim_throttle() (mm/vmscan.c:6117), after shrink_zones()' nodes at one priority: over
// 12% efficiency wakes NOPROGRESS sleepers (the port's sleeps are not cut short: nobody is woken);
// cgroup reclaim (and kswapd) never throttle here; a direct reclaimer that got nothing at priority 1
// sleeps in reclaim_throttle(NOPROGRESS).
void Kernel::consider_reclaim_throttle(int nid, int priority, uint64_t nr_reclaimed) {
  if (nr_reclaimed > (sc_nr_scanned_ >> 3)) return;
  if (reclaim_target_) return;
  if (priority == 1 && !nr_reclaimed) reclaim_throttle(nid, VMSCAN_THROTTLE_NOPROGRESS);
}

// NR_ZONE_WRITE_PENDING of the folio's node (zone_stat_mod_folio()).
void Kernel::node_write_pending_mod(const folio* f, int64_t nr) {
  uint64_t& v = node_write_pending_[size_t(pfn_to_nid(page_to_pfn(f)))];
  MMUSIM_CHECK(nr >= 0 || v >= uint64_t(-nr), "NR_ZONE_WRITE_PENDING: pfn {:#x}: below zero", page_to_pfn(f));
  v = uint64_t(int64_t(v) + nr);
}

// try_to_free_pages() (mm/vmscan.c:6511) -> do_try_to_free_pages() (6278): at each priority,
// shrink_zones() over the zonelist (the nodes from `nid` on) -> shrink_node(), then
// consider_reclaim_throttle() for the first node.
uint64_t Kernel::try_to_free_pages(int nid, uint64_t nr_pages) {
  ctr_.allocstall.inc();
  reclaim_target_ = nullptr;
  const uint64_t nr_to_reclaim = std::max(nr_pages, SWAP_CLUSTER_MAX);
  const unsigned nodes = std::max(1u, params_.nr_nodes);
  uint64_t nr_reclaimed = 0;
  for (int priority = DEF_PRIORITY; priority >= 0 && nr_reclaimed < nr_to_reclaim; --priority) {
    sc_nr_scanned_ = 0;
    for (unsigned i = 0; i < nodes && nr_reclaimed < nr_to_reclaim; ++i)
      shrink_node(int((unsigned(nid) + i) % nodes), priority, nr_to_reclaim, &nr_reclaimed);
    consider_reclaim_throttle(nid, priority, nr_reclaimed);
  }
  trace_event("mm_vmscan_direct_reclaim_end", {mmusim::TraceField::dec("nr_reclaimed", nr_reclaimed),
                                               mmusim::TraceField::dec("node", uint64_t(nid))});
  return nr_reclaimed;
}

// try_to_free_mem_cgroup_pages() (mm/vmscan.c:6596): nr_to_reclaim = max(nr_pages,
// SWAP_CLUSTER_MAX), priority 12 down to 0 (do_try_to_free_pages()), the memcg's lruvec on every
// node (shrink_zones() over the whole zonelist -> shrink_node() of the target's subtree); at the
// end the target's lruvecs lose LRUVEC_CGROUP_CONGESTED.
uint64_t Kernel::try_to_free_mem_cgroup_pages(mem_cgroup* memcg, uint64_t nr_pages) {
  const uint64_t nr_to_reclaim = std::max(nr_pages, SWAP_CLUSTER_MAX);
  uint64_t nr_reclaimed = 0;
  reclaim_target_ = memcg;
  for (int priority = DEF_PRIORITY; priority >= 0 && nr_reclaimed < nr_to_reclaim; --priority) {
    for (lruvec& lv : memcg->nodeinfo) {
      if (nr_reclaimed >= nr_to_reclaim) break;
      shrink_node(lv.nid, priority, nr_to_reclaim, &nr_reclaimed);
    }
  }
  for (lruvec& lv : memcg->nodeinfo) lv.flags &= ~LRUVEC_CGROUP_CONGESTED;
  reclaim_target_ = nullptr;
  trace_event("mm_vmscan_memcg_reclaim_end", {mmusim::TraceField::dec("nr_reclaimed", nr_reclaimed),
                                              mmusim::TraceField::dec("memcg", memcg->id)});
  return nr_reclaimed;
}

// __alloc_pages_direct_reclaim() (mm/page_alloc.c) in __alloc_pages_slowpath()'s loop: reclaim,
// then try again; give up after MAX_RECLAIM_RETRIES (16) rounds without progress
// (should_reclaim_retry()). Order 0 only: a large folio's caller falls back to smaller ones, and
// there is no compaction.
pfn_t Kernel::alloc_pages_direct_reclaim(int nid) {
  constexpr int MAX_RECLAIM_RETRIES = 16;
  for (int no_progress = 0; no_progress < MAX_RECLAIM_RETRIES;) {
    const uint64_t progress = try_to_free_pages(nid, 1);
    if (const pfn_t pfn = buddy_alloc(0, nid)) return pfn;
    if (!progress) ++no_progress;
  }
  return 0;
}

}  // namespace kmm
