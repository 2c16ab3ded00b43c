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
// Not here (each marked where it happens): anonymous memory is never scanned (there is no swap:
// get_scan_count()'s SCAN_FILE), dirty page-cache folios are activated (direct reclaim does not
// write; no writeback or flusher threads), no shadow entries or refault detection (workingset),
// no kswapd, no memory cgroups yet, no i_mmap_rwsem or LRU lock timing, no large page-cache folios.
#include <algorithm>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
constexpr uint64_t SWAP_CLUSTER_MAX = 32;  // include/linux/swap.h
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

// lruvec_add_folio(): list_add() at the head of folio_lru_list().
void Kernel::lruvec_add_folio(lruvec& lv, folio* f) {
  MMUSIM_CHECK(!folio_test_lru(f), "lruvec_add_folio: pfn {:#x} is on an LRU list", page_to_pfn(f));
  lruvec::list& l = lv.lists[folio_lru_list(f)];
  const pfn_t pfn = page_to_pfn(f);
  f->lru_prev = 0;
  f->lru_next = uint32_t(l.head);
  if (l.head) mem_map_[l.head].lru_prev = uint32_t(pfn);
  else l.tail = pfn;
  l.head = pfn;
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
void Kernel::vma_interval_tree_foreach(address_space* mapping, uint64_t pgoff, F&& fn) {
  // (The kernel keeps the file's VMAs in an interval tree, mapping->i_mmap, under i_mmap_rwsem;
  // the same set is found here by a search of the live mms.)
  for (const auto& up : mms_) {
    mm_struct* mm = up.get();
    if (!mm || mm->pgd == 0) continue;
    for (auto& [end, v] : mm->mm_mt) {
      vm_area_struct* vma = v.get();
      if (vma->vm_file != mapping) continue;
      if (pgoff < vma->vm_pgoff || pgoff >= vma->vm_pgoff + vma_pages(vma)) continue;
      fn(vma);
    }
  }
}

// folio_referenced() (mm/rmap.c:983) -> rmap_walk_file() -> folio_referenced_one() (846): each
// PTE that maps the folio, taken under its PTL (page_vma_mapped_walk()), its accessed bit cleared
// (ptep_clear_flush_young_notify()).
int Kernel::folio_referenced(folio* f, vm_flags_t* vm_flags) {
  *vm_flags = 0;
  if (!folio_mapped(f) || !f->mapping) return 0;
  int referenced = 0;
  int mapcount = folio_mapcount(f);
  vma_interval_tree_foreach(f->mapping, f->index, [&](vm_area_struct* vma) {
    if (mapcount <= 0) return;  // if (!pra->mapcount) return false: stop the walk
    const uint64_t address = vma->vm_start + ((f->index - vma->vm_pgoff) << PAGE_SHIFT);  // vma_address()
    pmd_t* pmd = mm_find_pmd(vma->vm_mm, address);
    if (!pmd || !arch_->table_present(pmd->val) || arch_->pmd_trans_huge(*pmd)) return;
    uint32_t* ptl;
    pte_t* pte = pte_offset_map_lock(vma->vm_mm, pmd, address, &ptl);
    const pte_t ptent = arch_->ptep_get(pte);
    if (arch_->pte_present(ptent) && arch_->pte_pfn(ptent) == page_to_pfn(f)) {
      if (arch_->ptep_clear_flush_young(vma, address, pte)) ++referenced;
      --mapcount;
      *vm_flags |= vma->vm_flags;
    }
    pte_unmap_unlock(pte, ptl);
  });
  return referenced;
}

// try_to_unmap() (mm/rmap.c:2013) -> rmap_walk_file() -> try_to_unmap_one() (1642), the file
// folio path, TTU_BATCH_FLUSH: the PTE cleared (deferred flush where the arch batches it, else
// ptep_clear_flush()), its dirty bit moved to the folio, MM_FILEPAGES, the rmap and the mapping's
// reference dropped.
void Kernel::try_to_unmap(folio* f) {
  MMUSIM_CHECK(!folio_test_anon(f) && f->mapping, "try_to_unmap: only page-cache folios here");
  const pfn_t pfn = page_to_pfn(f);
  vma_interval_tree_foreach(f->mapping, f->index, [&](vm_area_struct* vma) {
    if (!folio_mapped(f)) return;
    mm_struct* mm = vma->vm_mm;
    const uint64_t address = vma->vm_start + ((f->index - vma->vm_pgoff) << PAGE_SHIFT);
    pmd_t* pmd = mm_find_pmd(mm, address);
    if (!pmd || !arch_->table_present(pmd->val) || arch_->pmd_trans_huge(*pmd)) return;
    uint32_t* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, address, &ptl);
    pte_t pteval = arch_->ptep_get(pte);
    if (arch_->pte_present(pteval) && arch_->pte_pfn(pteval) == pfn) {
      // should_defer_flush() (mm/rmap.c:727)
      if (arch_->arch_tlbbatch_should_defer(mm, cpu_)) {
        pteval = arch_->ptep_get_and_clear(mm, address, pte);
        // set_tlb_ubc_flush_pending() (mm/rmap.c:682)
        arch_->arch_tlbbatch_add_pending(tlb_ubc_.arch, vma, address);
        tlb_ubc_.flush_required = true;
      } else {
        pteval = arch_->ptep_clear_flush(vma, address, pte);
      }
      // Set the dirty flag on the folio now the PTE is gone.
      if (arch_->pte_dirty(pteval)) folio_mark_dirty(f);
      add_mm_counter(mm, MM_FILEPAGES, -1);  // dec_mm_counter(mm, mm_counter_file(folio))
      folio_remove_rmap_pte(f, f, vma);
      folio_put(f);
      ctr_.reclaim_unmapped_ptes.inc();
    }
    pte_unmap_unlock(pte, ptl);
  });
}

// try_to_unmap_flush() (mm/rmap.c:649): the deferred flushes at once (arch_tlbbatch_flush()).
void Kernel::try_to_unmap_flush() {
  if (!tlb_ubc_.flush_required) return;
  ctr_.tlbbatch_flushes.inc();
  arch_->arch_tlbbatch_flush(tlb_ubc_.arch);
  tlb_ubc_.flush_required = false;
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
  // shadow = workingset_eviction(folio, target_memcg); __filemap_remove_folio(folio, shadow) ->
  // page_cache_delete(): the shadow takes the folio's slot.
  mapping->shadows[f->index] = workingset_eviction(f);
  mapping->i_pages.erase(f->index);
  mapping->nrpages -= uint64_t(folio_nr_pages(f));
  f->mapping = nullptr;
  f->flags &= ~(PG_uptodate | PG_readahead | PG_referenced | PG_workingset | PG_active);
  f->io_until_ps = 0;
  struct_page_touch(f, 1, true);
  charge(Cost::folio_op);
  return true;
}

// folio_check_references() (mm/vmscan.c:865)
unsigned Kernel::shrink_folio_list(std::vector<folio*>& folio_list) {
  unsigned nr_reclaimed = 0;
  std::vector<folio*> ret_folios, free_folios;
  for (folio* f : folio_list) {
    MMUSIM_CHECK(!folio_test_lru(f) && !folio_test_anon(f), "shrink_folio_list: pfn {:#x} not an isolated file folio",
                 page_to_pfn(f));
    // A folio under read is locked (folio_trylock() fails): keep it.
    if (folio_io_pending(f) || !folio_trylock(f)) {
      ret_folios.push_back(f);
      continue;
    }
    // folio_check_references()
    vm_flags_t vm_flags = 0;
    const int referenced_ptes = folio_referenced(f, &vm_flags);
    const bool referenced_folio = folio_test_referenced(f);
    f->flags &= ~PG_referenced;  // folio_test_clear_referenced()
    folio_references references;
    if (referenced_ptes) {
      // All mapped folios start out with page table references from the instantiating fault, so
      // we need to look twice if a mapped file/anon folio is used more than once. Mark it and
      // spare it for another trip around the inactive list.
      f->flags |= PG_referenced;  // folio_set_referenced()
      if (referenced_folio || referenced_ptes > 1) references = FOLIOREF_ACTIVATE;
      else if ((vm_flags & VM_EXEC) && folio_is_file_lru(f)) references = FOLIOREF_ACTIVATE;
      else references = FOLIOREF_KEEP;
    } else if (referenced_folio && folio_is_file_lru(f)) {
      references = FOLIOREF_RECLAIM_CLEAN;  // Reclaim if clean, defer dirty folios to writeback
    } else {
      references = FOLIOREF_RECLAIM;
    }
    bool activate = false, keep = false;
    switch (references) {
      case FOLIOREF_ACTIVATE: activate = true; break;
      case FOLIOREF_KEEP: keep = true; break;
      case FOLIOREF_RECLAIM:
      case FOLIOREF_RECLAIM_CLEAN: break;
    }
    if (!activate && !keep && folio_mapped(f)) {
      // The folio is mapped into the page tables of one or more processes. Try to unmap it here.
      try_to_unmap(f);
      if (folio_mapped(f)) activate = true;
    }
    // A dirty page-cache folio: direct reclaim does not write it (only kswapd would, and there is
    // no writeback here): activate it (mm/vmscan.c:1360, folio_set_reclaim()).
    if (!activate && !keep && folio_test_dirty(f)) activate = true;
    if (!activate && !keep) {
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
      // activate_locked:
      f->flags |= PG_active;
      ctr_.pgactivate.inc(uint64_t(folio_nr_pages(f)));
    }
    folio_unlock(f);
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
  uint64_t nr_taken = 0, scan = 0;
  while (scan < nr_to_scan && lv.lists[lru].tail) {
    folio* f = &mem_map_[lv.lists[lru].tail];
    ++scan;
    folio_get(f);  // folio_try_get()
    lruvec_del_folio(lv, f);  // folio_test_clear_lru()
    dst->push_back(f);
    nr_taken += uint64_t(folio_nr_pages(f));
  }
  *nr_scanned = scan;
  charge(Cost::folio_op, scan);
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
  if (nr_taken == 0) return 0;
  const unsigned nr_reclaimed = shrink_folio_list(folio_list);
  move_folios_to_lru(lv, folio_list);
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

// shrink_lruvec() (mm/vmscan.c:5701) with get_scan_count() (2392) for a system without swap:
// SCAN_FILE, each file list scanned `size >> priority` (the anon lists not at all); the active
// list is aged when the inactive one is low (shrink_list(): sc->may_deactivate).
uint64_t Kernel::shrink_lruvec(lruvec& lv, int priority, uint64_t nr_to_reclaim, bool cgroup) {
  uint64_t nr[NR_LRU_LISTS] = {};
  // get_scan_count(): If we have no swap space, do not bother scanning anon folios.
  for (lru_list l : {LRU_INACTIVE_FILE, LRU_ACTIVE_FILE}) {
    nr[l] = lv.lists[l].nr_pages >> priority;
    // (A list too small to scan at this priority is scanned in full once priority reaches 0.)
  }
  const bool may_deactivate_file = inactive_is_low(lv, LRU_INACTIVE_FILE);
  uint64_t nr_reclaimed = 0;
  while (nr[LRU_ACTIVE_FILE] || nr[LRU_INACTIVE_FILE]) {
    for (lru_list l : {LRU_INACTIVE_FILE, LRU_ACTIVE_FILE}) {  // for_each_evictable_lru()
      if (!nr[l]) continue;
      const uint64_t nr_to_scan = std::min(nr[l], SWAP_CLUSTER_MAX);
      nr[l] -= nr_to_scan;
      if (is_active_lru(l)) {
        if (may_deactivate_file) shrink_active_list(nr_to_scan, lv, l);
      } else {
        nr_reclaimed += shrink_inactive_list(nr_to_scan, lv, l, cgroup);
      }
    }
    // Global direct reclaim at DEF_PRIORITY does not abort (proportional_reclaim); below it, and
    // for memcg reclaim always, once enough is reclaimed the scan stops (the anon lists, the
    // other side of the proportion, are not scanned at all here).
    const bool proportional_reclaim = !cgroup && priority == DEF_PRIORITY;
    if (nr_reclaimed >= nr_to_reclaim && !proportional_reclaim) break;
  }
  // Even if we did not try to evict anon pages at all, we want to rebalance the anon lru active/
  // inactive ratio (shrink_active_list() on the anon lists when low): no swap, nothing to balance.
  return nr_reclaimed;
}

// try_to_free_pages() (mm/vmscan.c:6511) -> do_try_to_free_pages() (6278): at each priority,
// shrink_zones() over the zonelist (the nodes from `nid` on) -> shrink_node() ->
// shrink_node_memcgs() (5889): every memcg's lruvec on the node (mem_cgroup_iter() from the
// root; no memory.min/low protection).
uint64_t Kernel::try_to_free_pages(int nid, uint64_t nr_pages) {
  ctr_.allocstall.inc();
  reclaim_target_ = nullptr;
  const uint64_t nr_to_reclaim = std::max(nr_pages, SWAP_CLUSTER_MAX);
  const unsigned nodes = std::max(1u, params_.nr_nodes);
  uint64_t nr_reclaimed = 0;
  for (int priority = DEF_PRIORITY; priority >= 0 && nr_reclaimed < nr_to_reclaim; --priority)
    for (unsigned i = 0; i < nodes && nr_reclaimed < nr_to_reclaim; ++i)
      for (const auto& memcg : memcgs_)
        nr_reclaimed += shrink_lruvec(memcg->nodeinfo[(unsigned(nid) + i) % nodes], priority, nr_to_reclaim, false);
  trace_event("mm_vmscan_direct_reclaim_end", {mmusim::TraceField::dec("nr_reclaimed", nr_reclaimed),
                                               mmusim::TraceField::dec("node", uint64_t(nid))});
  return nr_reclaimed;
}

// try_to_free_mem_cgroup_pages() (mm/vmscan.c:6596): nr_to_reclaim = max(nr_pages,
// SWAP_CLUSTER_MAX), priority 12 down to 0 (do_try_to_free_pages()), the memcg's lruvec on every
// node (shrink_zones() over the whole zonelist, shrink_node_memcgs() of the target's subtree).
uint64_t Kernel::try_to_free_mem_cgroup_pages(mem_cgroup* memcg, uint64_t nr_pages) {
  const uint64_t nr_to_reclaim = std::max(nr_pages, SWAP_CLUSTER_MAX);
  uint64_t nr_reclaimed = 0;
  reclaim_target_ = memcg;
  for (int priority = DEF_PRIORITY; priority >= 0 && nr_reclaimed < nr_to_reclaim; --priority)
    for (lruvec& lv : memcg->nodeinfo) {
      if (nr_reclaimed >= nr_to_reclaim) break;
      nr_reclaimed += shrink_lruvec(lv, priority, nr_to_reclaim, true);
    }
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
