// SPDX-License-Identifier: GPL-2.0-only
// Reverse-map accounting (mm/rmap.c, include/linux/rmap.h), reduced to what the anonymous fault,
// fork and teardown paths decide on: mapcounts (per page, entire, large, _nr_pages_mapped),
// PageAnonExclusive, folio->mapping (the anon_vma id) and folio->index. No anon_vma chains, no
// rmap walks (nothing here reclaims or migrates).
//
// Counts are stored natural in struct page (page.hpp); the comments give the kernel's -1-biased
// operation next to each natural one ("atomic_inc_and_test(&page->_mapcount)" is "++mapcount == 1").
//
// CONFIG_MM_ID (v6.15+, mm/rmap.c and include/linux/rmap.h of that kernel) is the "patch base"
// bookkeeping: two MM-id slots with per-MM mapcounts, the "maybe mapped shared" bit and the large
// mapcount bit spinlock, all updated in folio_{add,sub}_large_mapcount(). It is on when
// params().large_folio_reuse is (the kernels that have __wp_can_reuse_large_anon_folio() have it);
// with 6.12 (large_folio_reuse = false) the large mapcount is a plain atomic and the slots stay
// empty.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
// folio_set_mm_id() (include/linux/rmap.h, CONFIG_MM_ID)
inline void folio_set_mm_id(folio* f, int idx, mm_id_t id) { f->mm_id[idx] = id; }
inline mm_id_t vma_mm_id(const vm_area_struct* vma) {
  MMUSIM_CHECK(vma && vma->vm_mm, "large mapcount update without the VMA of the MM that maps");
  return mm_id_t(vma->vm_mm->id);
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// Folio lock (include/linux/pagemap.h, mm/filemap.c). One CPU runs kernel code at a time, so a
// locked folio is only ever found locked by the code that locked it: trylock fails, lock would be a
// deadlock.

bool Kernel::folio_trylock(folio* f) {
  if (folio_test_locked(f)) {
    return false;
  }
  f->flags |= PG_locked;
  charge(Cost::lock_op);
  lock_event(f, LockClass::folio_lock, true, true, struct_page_pa(folio_pfn(f)));
  return true;
}

void Kernel::folio_unlock(folio* f) {
  MMUSIM_CHECK(folio_test_locked(f), "folio_unlock of unlocked folio pfn {:#x}", folio_pfn(f));
  f->flags &= ~PG_locked;
  lock_event(f, LockClass::folio_lock, true, false, struct_page_pa(folio_pfn(f)));
}

// ------------------------------------------------------------------------------------------------
// The large mapcount and its MM ids (include/linux/rmap.h, CONFIG_MM_ID, v6.15+).

// folio_lock_large_mapcount(): bit_spin_lock(FOLIO_MM_IDS_LOCK_BITNUM, &folio->_mm_ids)
void Kernel::folio_lock_large_mapcount(folio* f) {
  MMUSIM_CHECK(!(f->flags & PG_large_mapcount_locked),
               "large mapcount lock of folio pfn {:#x} already held", folio_pfn(f));
  f->flags |= PG_large_mapcount_locked;
  charge(Cost::lock_op);
  lock_event(&f->mm_ids, LockClass::large_mapcount, true, true, struct_page_pa(folio_pfn(f) + 1));
}

// folio_unlock_large_mapcount(): __bit_spin_unlock()
void Kernel::folio_unlock_large_mapcount(folio* f) {
  MMUSIM_CHECK(f->flags & PG_large_mapcount_locked,
               "large mapcount lock of folio pfn {:#x} released but not held", folio_pfn(f));
  f->flags &= ~PG_large_mapcount_locked;
  lock_event(&f->mm_ids, LockClass::large_mapcount, true, false, struct_page_pa(folio_pfn(f) + 1));
}

// folio_add_return_large_mapcount() (include/linux/rmap.h, CONFIG_MM_ID); 6.12: atomic_add(diff,
// &folio->_large_mapcount). `new_mapcount_val` is the kernel's -1-biased value.
void Kernel::folio_add_large_mapcount(folio* f, int diff, vm_area_struct* vma) {
  if (!params_.large_folio_reuse) {
    // 6.12: no MM ids; a plain atomic.
    f->large_mapcount += diff;
    charge(Cost::folio_op);
    return;
  }
  const mm_id_t mm_id = vma_mm_id(vma);
  int new_mapcount_val;

  folio_lock_large_mapcount(f);
  MMUSIM_CHECK(diff > 0 && mm_id != MM_ID_DUMMY, "folio_add_large_mapcount diff {} mm_id {}", diff, mm_id);

  new_mapcount_val = (f->large_mapcount - 1) + diff;  // atomic_read(&folio->_large_mapcount) + diff
  f->large_mapcount = new_mapcount_val + 1;           // atomic_set()
  charge(Cost::folio_op);

  // (The 32-bit overflow handling of the per-MM mapcounts is compiled out on 64-bit.)
  if (folio_mm_id(f, 0) == mm_id) {
    f->mm_id_mapcount[0] += diff;
  } else if (folio_mm_id(f, 1) == mm_id) {
    f->mm_id_mapcount[1] += diff;
  } else if (folio_mm_id(f, 0) == MM_ID_DUMMY) {
    folio_set_mm_id(f, 0, mm_id);
    f->mm_id_mapcount[0] = diff - 1;
    // We might have other mappings already.
    if (new_mapcount_val != diff - 1) f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
  } else if (folio_mm_id(f, 1) == MM_ID_DUMMY) {
    folio_set_mm_id(f, 1, mm_id);
    f->mm_id_mapcount[1] = diff - 1;
    // Slot 0 certainly has mappings as well.
    f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
  }
  folio_unlock_large_mapcount(f);
}

// folio_sub_return_large_mapcount() (include/linux/rmap.h, CONFIG_MM_ID); 6.12: atomic_sub().
void Kernel::folio_sub_large_mapcount(folio* f, int diff, vm_area_struct* vma) {
  if (!params_.large_folio_reuse) {
    f->large_mapcount -= diff;
    charge(Cost::folio_op);
    MMUSIM_CHECK(f->large_mapcount >= 0, "folio pfn {:#x}: large mapcount went negative",
                 folio_pfn(f));
    return;
  }
  const mm_id_t mm_id = vma_mm_id(vma);
  int new_mapcount_val;

  folio_lock_large_mapcount(f);
  MMUSIM_CHECK(diff > 0 && mm_id != MM_ID_DUMMY, "folio_sub_large_mapcount diff {} mm_id {}", diff, mm_id);

  new_mapcount_val = (f->large_mapcount - 1) - diff;
  f->large_mapcount = new_mapcount_val + 1;
  charge(Cost::folio_op);
  MMUSIM_CHECK(new_mapcount_val >= -1, "folio pfn {:#x}: large mapcount went negative", folio_pfn(f));

  // There are valid corner cases where we might underflow a per-MM mapcount (some mappings added
  // when no slot was free, some mappings added once a slot was free), so we always set it to -1
  // once we go negative.
  if (folio_mm_id(f, 0) == mm_id) {
    f->mm_id_mapcount[0] -= diff;
    if (f->mm_id_mapcount[0] >= 0) goto out;
    f->mm_id_mapcount[0] = -1;
    folio_set_mm_id(f, 0, MM_ID_DUMMY);
  } else if (folio_mm_id(f, 1) == mm_id) {
    f->mm_id_mapcount[1] -= diff;
    if (f->mm_id_mapcount[1] >= 0) goto out;
    f->mm_id_mapcount[1] = -1;
    folio_set_mm_id(f, 1, MM_ID_DUMMY);
  }

  // If one MM slot owns all mappings, the folio is mapped exclusively. Note that if the folio is
  // now unmapped (new_mapcount_val == -1), both slots must be free (mapcount == -1), and we'll
  // also mark it as exclusive.
  if (f->mm_id_mapcount[0] == new_mapcount_val || f->mm_id_mapcount[1] == new_mapcount_val)
    f->mm_ids &= ~FOLIO_MM_IDS_SHARED_BIT;
out:
  folio_unlock_large_mapcount(f);
}

namespace {
// folio_set_large_mapcount() (include/linux/rmap.h, CONFIG_MM_ID): a new folio's first mappings,
// all in one MM. 6.12: atomic_set(&folio->_large_mapcount, mapcount - 1).
void folio_set_large_mapcount(Kernel& k, folio* f, int mapcount, vm_area_struct* vma) {
  f->large_mapcount = mapcount;  // kernel: mapcount - 1
  k.charge(Cost::folio_op);
  if (!k.params().large_folio_reuse) return;
  MMUSIM_CHECK(folio_mm_id(f, 0) == MM_ID_DUMMY && folio_mm_id(f, 1) == MM_ID_DUMMY,
               "new folio pfn {:#x} already has MM ids {} {}", k.folio_pfn(f), f->mm_id[0], f->mm_id[1]);
  // Note: mapcounts start at -1.
  f->mm_id_mapcount[0] = mapcount - 1;
  folio_set_mm_id(f, 0, vma_mm_id(vma));
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// Adding mappings

// __folio_add_rmap() (mm/rmap.c:1159): returns the number of pages that became mapped (for the
// NR_ANON_MAPPED statistic, which the port does not keep); *nr_pmdmapped for PMD mappings.
static int __folio_add_rmap(Kernel& k, folio* f, page* pg, int nr_pages, vm_area_struct* vma,
                            bool pmd_level, int* nr_pmdmapped) {
  int32_t* mapped = &f->nr_pages_mapped;
  const int orig_nr_pages = nr_pages;
  int first = 0, nr = 0;

  MMUSIM_CHECK(page_folio(pg) == f && pg + nr_pages <= f + folio_nr_pages(f),
               "rmap range pfn {:#x}+{} outside its folio", k.page_to_pfn(pg), nr_pages);
  if (!pmd_level) {  // RMAP_LEVEL_PTE
    if (!folio_test_large(f)) {
      nr = ++f->mapcount == 1;  // atomic_inc_and_test(&folio->_mapcount)
      k.struct_page_touch(f, 1, true);
      k.charge(Cost::folio_op);
      return nr;
    }
    k.struct_page_touch(pg, nr_pages, true);
    do {
      first += ++pg->mapcount == 1;  // atomic_inc_and_test(&page->_mapcount)
    } while (pg++, --nr_pages > 0);
    k.charge(Cost::page_op, orig_nr_pages);

    if (first && (*mapped += first) < ENTIRELY_MAPPED) nr = first;

    k.folio_add_large_mapcount(f, orig_nr_pages, vma);
  } else {  // RMAP_LEVEL_PMD
    first = ++f->entire_mapcount == 1;  // atomic_inc_and_test(&folio->_entire_mapcount)
    if (first) {
      nr = (*mapped += ENTIRELY_MAPPED);
      if (nr < ENTIRELY_MAPPED + ENTIRELY_MAPPED) {
        *nr_pmdmapped = int(folio_nr_pages(f));
        nr = *nr_pmdmapped - (nr & FOLIO_PAGES_MAPPED);
        // Raced ahead of a remove and another add?
        if (nr < 0) nr = 0;
      } else {
        // Raced ahead of a remove of ENTIRELY_MAPPED
        nr = 0;
      }
    }
    k.charge(Cost::folio_op);
    k.folio_add_large_mapcount(f, 1, vma);  // folio_inc_large_mapcount()
  }
  return nr;
}

// folio_move_anon_rmap() (mm/rmap.c:1216)
void Kernel::folio_move_anon_rmap(folio* f, vm_area_struct* vma) {
  MMUSIM_CHECK(folio_test_locked(f), "folio_move_anon_rmap on unlocked folio pfn {:#x}", folio_pfn(f));
  MMUSIM_CHECK(vma->anon, "folio_move_anon_rmap into a VMA without anon_vma");
  // WRITE_ONCE(folio->mapping, anon_vma + PAGE_MAPPING_ANON)
  f->anon_vma = vma->anon->id;
  f->flags |= PG_anon;
  charge(Cost::folio_op);
}

// __folio_set_anon() (mm/rmap.c:1239)
void Kernel::__folio_set_anon(folio* f, vm_area_struct* vma, uint64_t address, bool exclusive) {
  MMUSIM_CHECK(vma->anon, "__folio_set_anon: VMA [{:#x},{:#x}) has no anon_vma", vma->vm_start, vma->vm_end);
  uint32_t av = vma->anon->id;
  // If the folio isn't exclusive to this vma, we must use the _oldest_ possible anon_vma for the
  // folio mapping!
  if (!exclusive) av = vma->anon->root_id;
  f->anon_vma = av;
  f->flags |= PG_anon;
  f->index = linear_page_index(vma, address);
}

// __page_check_anon_rmap() (mm/rmap.c:1271): VM_BUG_ON only.
static void __page_check_anon_rmap(Kernel& k, folio* f, page* pg, vm_area_struct* vma, uint64_t address) {
  MMUSIM_CHECK(f->index + folio_page_idx(f, pg) == linear_page_index(vma, address),
               "anon rmap of pfn {:#x} at {:#x}: page index {} != linear index {}", k.page_to_pfn(pg),
               address, f->index + folio_page_idx(f, pg), linear_page_index(vma, address));
}

// __folio_add_anon_rmap() (mm/rmap.c:1313)
static void __folio_add_anon_rmap(Kernel& k, folio* f, page* pg, int nr_pages, vm_area_struct* vma,
                                  uint64_t address, rmap_t flags, bool pmd_level) {
  int nr_pmdmapped = 0;
  MMUSIM_CHECK(folio_test_anon(f), "anon rmap of non-anon folio pfn {:#x}", k.folio_pfn(f));

  __folio_add_rmap(k, f, pg, nr_pages, vma, pmd_level, &nr_pmdmapped);

  if (!folio_test_ksm(f)) __page_check_anon_rmap(k, f, pg, vma, address);

  // __folio_mod_stat(): NR_ANON_MAPPED / NR_ANON_THPS are not kept.

  if (flags & RMAP_EXCLUSIVE) {
    if (!pmd_level) {
      for (int i = 0; i < nr_pages; i++) SetPageAnonExclusive(pg + i);
      k.charge(Cost::page_op, nr_pages);
    } else {
      SetPageAnonExclusive(pg);
      k.charge(Cost::page_op);
    }
  }
  // VM_WARN_ON_FOLIO: while PTE-mapping a THP we have a PMD and a PTE mapping; an exclusive page
  // can not be mapped twice.
  for (int i = 0; i < nr_pages; i++) {
    page* cur = pg + i;
    MMUSIM_CHECK(!((cur->mapcount > 1 || (folio_test_large(f) && folio_entire_mapcount(f) > 1)) &&
                   PageAnonExclusive(cur)),
                 "exclusive anon page pfn {:#x} mapped more than once", k.page_to_pfn(cur));
  }
  // mlock_vma_folio(): no mlock here.
}

void Kernel::folio_add_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma,
                                      uint64_t address, rmap_t flags) {
  __folio_add_anon_rmap(*this, f, pg, nr_pages, vma, address, flags, false);
}

void Kernel::folio_add_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* vma, uint64_t address, rmap_t flags) {
  __folio_add_anon_rmap(*this, f, pg, HPAGE_PMD_NR, vma, address, flags, true);
}

// __folio_add_file_rmap() (mm/rmap.c:1468) -> folio_add_file_rmap_ptes() (1491): a page-cache
// folio's pages mapped by `nr_pages` PTEs. (__folio_mod_stat(), mlock_vma_folio(): not kept.)
void Kernel::folio_add_file_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma) {
  int nr_pmdmapped = 0;
  MMUSIM_CHECK(!folio_test_anon(f), "file rmap of anon folio pfn {:#x}", folio_pfn(f));
  __folio_add_rmap(*this, f, pg, nr_pages, vma, false, &nr_pmdmapped);
}

// folio_add_file_rmap_pmd() (mm/rmap.c:1520): an order-9 page-cache folio mapped by one PMD
// (do_set_pmd()). __folio_mod_stat(): NR_FILE_PMDMAPPED += the folio's pages on its first PMD
// mapping (a node statistic, "not maintained per-memcg"); NR_FILE_MAPPED is not kept.
// (mlock_vma_folio(): no mlock here.)
void Kernel::folio_add_file_rmap_pmd(folio* f, page* pg, vm_area_struct* vma) {
  int nr_pmdmapped = 0;
  MMUSIM_CHECK(!folio_test_anon(f), "file rmap of anon folio pfn {:#x}", folio_pfn(f));
  MMUSIM_CHECK(folio_test_pmd_mappable(f) && pg == f, "file PMD rmap of pfn {:#x}: not the head of a PMD-order folio",
               page_to_pfn(pg));
  __folio_add_rmap(*this, f, pg, HPAGE_PMD_NR, vma, true, &nr_pmdmapped);
  nr_file_pmdmapped_ += uint64_t(nr_pmdmapped);
}

// __folio_dup_file_rmap() (include/linux/rmap.h:341) -> folio_dup_file_rmap_ptes(): fork()
// copies the PTEs of a page-cache folio (the caller took the references).
void Kernel::folio_dup_file_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* dst_vma) {
  MMUSIM_CHECK(!folio_test_anon(f), "file rmap dup of anon folio pfn {:#x}", folio_pfn(f));
  const int orig_nr_pages = nr_pages;
  if (!folio_test_large(f)) {
    ++f->mapcount;  // atomic_inc(&folio->_mapcount)
    struct_page_touch(f, 1, true);
    charge(Cost::folio_op);
    return;
  }
  struct_page_touch(pg, nr_pages, true);
  do {
    ++pg->mapcount;  // atomic_inc(&page->_mapcount)
  } while (pg++, --nr_pages > 0);
  charge(Cost::page_op, orig_nr_pages);
  folio_add_large_mapcount(f, orig_nr_pages, dst_vma);
}

// folio_add_new_anon_rmap() (mm/rmap.c:1422)
void Kernel::folio_add_new_anon_rmap(folio* f, vm_area_struct* vma, uint64_t address, rmap_t flags) {
  const int nr = int(folio_nr_pages(f));
  const bool exclusive = flags & RMAP_EXCLUSIVE;

  MMUSIM_CHECK(exclusive || folio_test_locked(f), "shared new anon folio must be locked");
  MMUSIM_CHECK(address >= vma->vm_start && address + (uint64_t(nr) << PAGE_SHIFT) <= vma->vm_end,
               "new anon folio of {} pages at {:#x} outside VMA [{:#x},{:#x})", nr, address,
               vma->vm_start, vma->vm_end);

  // __folio_set_swapbacked(): no swap.
  __folio_set_anon(f, vma, address, exclusive);

  if (!folio_test_large(f)) {
    // increment count (starts at -1)
    f->mapcount = 1;
    if (exclusive) SetPageAnonExclusive(f);
    struct_page_touch(f, 1, true);
    charge(Cost::page_op);
  } else if (!folio_test_pmd_mappable(f)) {
    struct_page_touch(f, nr, true);
    for (int i = 0; i < nr; i++) {
      page* p = folio_page(f, unsigned(i));
      // increment count (starts at -1)
      p->mapcount = 1;
      if (exclusive) SetPageAnonExclusive(p);
    }
    charge(Cost::page_op, nr);
    // increment count (starts at -1)
    folio_set_large_mapcount(*this, f, nr, vma);
    f->nr_pages_mapped = nr;
  } else {
    // increment count (starts at -1)
    f->entire_mapcount = 1;
    // increment count (starts at -1)
    folio_set_large_mapcount(*this, f, 1, vma);
    f->nr_pages_mapped = ENTIRELY_MAPPED;
    if (exclusive) SetPageAnonExclusive(f);
    struct_page_touch(f, 1, true);
    charge(Cost::page_op);
  }
  // __folio_mod_stat(), mod_mthp_stat(): statistics not kept.
}

// ------------------------------------------------------------------------------------------------
// Removing mappings

// __folio_remove_rmap() (mm/rmap.c:1530)
// Returns nr_pmdmapped (the pages whose last PMD mapping went), for __folio_mod_stat().
static int __folio_remove_rmap(Kernel& k, folio* f, page* pg, int nr_pages, vm_area_struct* vma,
                               bool pmd_level) {
  int32_t* mapped = &f->nr_pages_mapped;
  int last = 0, nr = 0, nr_pmdmapped = 0;
  bool partially_mapped = false;

  MMUSIM_CHECK(page_folio(pg) == f && pg + nr_pages <= f + folio_nr_pages(f),
               "rmap range pfn {:#x}+{} outside its folio", k.page_to_pfn(pg), nr_pages);
  k.note_unmap(f);
  if (!pmd_level) {  // RMAP_LEVEL_PTE
    if (!folio_test_large(f)) {
      MMUSIM_CHECK(f->mapcount > 0, "removing a mapping of unmapped pfn {:#x}", k.folio_pfn(f));
      nr = --f->mapcount == 0;  // atomic_add_negative(-1, &folio->_mapcount)
      k.struct_page_touch(f, 1, true);
      k.charge(Cost::folio_op);
    } else {
      const int orig = nr_pages;
      k.folio_sub_large_mapcount(f, nr_pages, vma);
      k.struct_page_touch(pg, nr_pages, true);
      do {
        MMUSIM_CHECK(pg->mapcount > 0, "removing a mapping of unmapped pfn {:#x}", k.page_to_pfn(pg));
        last += --pg->mapcount == 0;  // atomic_add_negative(-1, &page->_mapcount)
      } while (pg++, --nr_pages > 0);
      k.charge(Cost::page_op, orig);

      if (last && (*mapped -= last) < ENTIRELY_MAPPED) nr = last;

      partially_mapped = nr && *mapped;  // atomic_read(mapped)
    }
  } else {  // RMAP_LEVEL_PMD
    k.folio_sub_large_mapcount(f, 1, vma);  // folio_dec_large_mapcount()
    MMUSIM_CHECK(f->entire_mapcount > 0, "removing a PMD mapping of unmapped folio pfn {:#x}", k.folio_pfn(f));
    last = --f->entire_mapcount == 0;  // atomic_add_negative(-1, &folio->_entire_mapcount)
    k.charge(Cost::folio_op);
    if (last) {
      nr = (*mapped -= ENTIRELY_MAPPED);
      if (nr < ENTIRELY_MAPPED) {
        nr_pmdmapped = int(folio_nr_pages(f));
        nr = nr_pmdmapped - (nr & FOLIO_PAGES_MAPPED);
        // Raced ahead of another remove and an add?
        if (nr < 0) nr = 0;
      } else {
        // An add of ENTIRELY_MAPPED raced ahead
        nr = 0;
      }
    }
    partially_mapped = nr && nr < nr_pmdmapped;
  }

  // Queue anon large folio for deferred split if at least one page of the folio is unmapped and
  // at least one page is still mapped. Check partially_mapped first to ensure it is a large folio.
  if (partially_mapped && folio_test_anon(f) && !folio_test_partially_mapped(f))
    k.deferred_split_folio(f, true);

  // __folio_mod_stat(): NR_FILE_PMDMAPPED by the caller (the rest not kept); munlock_vma_folio():
  // no mlock.
  return nr_pmdmapped;
}

void Kernel::folio_remove_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma) {
  __folio_remove_rmap(*this, f, pg, nr_pages, vma, false);
}

void Kernel::folio_remove_rmap_pmd(folio* f, page* pg, vm_area_struct* vma) {
  const int nr_pmdmapped = __folio_remove_rmap(*this, f, pg, HPAGE_PMD_NR, vma, true);
  if (!folio_test_anon(f)) {
    MMUSIM_CHECK(nr_file_pmdmapped_ >= uint64_t(nr_pmdmapped), "NR_FILE_PMDMAPPED below zero");
    nr_file_pmdmapped_ -= uint64_t(nr_pmdmapped);  // __folio_mod_stat(folio, -nr, -nr_pmdmapped)
  }
}

// ------------------------------------------------------------------------------------------------
// fork: duplicating mappings

// __folio_try_dup_anon_rmap() (include/linux/rmap.h:391). With CONFIG_MM_ID the duplicated
// mappings are accounted to the child's MM (dst_vma), as in v6.15 where the function takes both
// VMAs.
static int __folio_try_dup_anon_rmap(Kernel& k, folio* f, page* pg, int nr_pages, vm_area_struct* dst_vma,
                                     vm_area_struct* src_vma, bool pmd_level) {
  const int orig_nr_pages = nr_pages;
  bool maybe_pinned;

  MMUSIM_CHECK(folio_test_anon(f), "dup anon rmap of non-anon folio pfn {:#x}", k.folio_pfn(f));
  MMUSIM_CHECK(page_folio(pg) == f && pg + nr_pages <= f + folio_nr_pages(f),
               "rmap range pfn {:#x}+{} outside its folio", k.page_to_pfn(pg), nr_pages);

  // If this folio may have been pinned by the parent process, don't allow to duplicate the
  // mappings but instead require to e.g., copy the subpage immediately for the child so that
  // we'll always guarantee the pinned folio won't be randomly replaced in the future on write
  // faults. (No device-private folios here.)
  maybe_pinned = k.folio_needs_cow_for_dma(src_vma, f);

  // No need to check+clear for already shared PTEs/PMDs of the folio. But if any page is
  // PageAnonExclusive, we must fallback to copying if the folio maybe pinned.
  if (!pmd_level) {
    if (maybe_pinned) {
      for (int i = 0; i < nr_pages; i++)
        if (PageAnonExclusive(pg + i)) return -EBUSY;
    }
    if (!folio_test_large(f)) {
      if (PageAnonExclusive(pg)) ClearPageAnonExclusive(pg);
      ++f->mapcount;  // atomic_inc(&folio->_mapcount)
      k.struct_page_touch(f, 1, true);
      k.charge(Cost::folio_op);
      return 0;
    }
    k.struct_page_touch(pg, nr_pages, true);
    do {
      if (PageAnonExclusive(pg)) ClearPageAnonExclusive(pg);
      ++pg->mapcount;  // atomic_inc(&page->_mapcount)
    } while (pg++, --nr_pages > 0);
    k.charge(Cost::page_op, orig_nr_pages);
    k.folio_add_large_mapcount(f, orig_nr_pages, dst_vma);
  } else {
    if (PageAnonExclusive(pg)) {
      if (maybe_pinned) return -EBUSY;
      ClearPageAnonExclusive(pg);
      k.charge(Cost::page_op);
    }
    ++f->entire_mapcount;  // atomic_inc(&folio->_entire_mapcount)
    k.charge(Cost::folio_op);
    k.folio_add_large_mapcount(f, 1, dst_vma);  // folio_inc_large_mapcount()
  }
  return 0;
}

int Kernel::folio_try_dup_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* dst_vma,
                                         vm_area_struct* src_vma) {
  return __folio_try_dup_anon_rmap(*this, f, pg, nr_pages, dst_vma, src_vma, false);
}

int Kernel::folio_try_dup_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* dst_vma, vm_area_struct* src_vma) {
  return __folio_try_dup_anon_rmap(*this, f, pg, HPAGE_PMD_NR, dst_vma, src_vma, true);
}

// The 6.12 signatures (no dst_vma): only usable where the large mapcount needs no MM id (small
// folios, or 6.12 without CONFIG_MM_ID).
int Kernel::folio_try_dup_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* src_vma) {
  MMUSIM_CHECK(!folio_test_large(f) || !params_.large_folio_reuse,
               "folio_try_dup_anon_rmap_ptes on a large folio with MM ids needs the child's VMA");
  return __folio_try_dup_anon_rmap(*this, f, pg, nr_pages, nullptr, src_vma, false);
}

int Kernel::folio_try_dup_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* src_vma) {
  MMUSIM_CHECK(!params_.large_folio_reuse,
               "folio_try_dup_anon_rmap_pmd with MM ids needs the child's VMA");
  return __folio_try_dup_anon_rmap(*this, f, pg, HPAGE_PMD_NR, nullptr, src_vma, true);
}

// ------------------------------------------------------------------------------------------------
// deferred_split_folio() (mm/huge_memory.c:3750): the port has no deferred split queue or shrinker
// (nothing reclaims); what is kept is the partially-mapped flag the rmap code tests.
void Kernel::deferred_split_folio(folio* f, bool partially_mapped) {
  // Order 1 folios have no space for a deferred list.
  if (folio_order(f) <= 1) return;
  // (!partially_mapped && !split_underused_thp): split_underused_thp is true by default.
  if (folio_test_swapcache(f)) return;
  if (partially_mapped) {
    if (!folio_test_partially_mapped(f)) f->flags |= PG_partially_mapped;  // folio_set_partially_mapped()
  } else {
    // partially mapped folios cannot become non-partially mapped
    MMUSIM_CHECK(!folio_test_partially_mapped(f), "deferred_split_folio(false) of a partially mapped folio");
  }
  // list_add_tail(&folio->_deferred_list, ...): no queue.
  charge(Cost::folio_op);
}

}  // namespace kmm
