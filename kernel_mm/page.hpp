// SPDX-License-Identifier: GPL-2.0-only
// struct page and struct folio metadata (include/linux/mm_types.h, page-flags.h, page_ref.h,
// mm.h accessors).
//
// As in the kernel, there is one `page` per page frame, in one array (the memmap), and a folio is
// its head page: `folio_page(folio, n)` is `folio + n`, `page_folio(page)` goes back to the head.
// The folio fields live in the head page here (the kernel spreads them over the first tail
// pages; the accessors give the same results).
//
// Counts are stored natural, not -1 biased: `mapcount` 0 means unmapped (the kernel's -1). The
// accessors return what the kernel's accessors return (folio_mapcount(), page_mapcount(), ...).
// The MM-id slots (CONFIG_MM_ID, v6.15+) keep the kernel's encoding: slot mapcount -1 = none.
#pragma once

#include <cstdint>

#include "kernel_mm/types.hpp"

namespace kmm {

// Page flags, per page (PG_* in include/linux/page-flags.h; a subset, plus PG_buddy/PG_table
// page types).
enum : uint32_t {
  PG_locked = 1u << 0,
  PG_head = 1u << 1,            // head of a large folio (order > 0)
  PG_lru = 1u << 2,
  PG_anon_exclusive = 1u << 3,  // PageAnonExclusive (per page; head page for PMD mappings)
  PG_swapcache = 1u << 4,
  PG_anon = 1u << 5,            // folio->mapping has PAGE_MAPPING_ANON (folio_test_anon)
  PG_buddy = 1u << 6,           // free, in the buddy allocator (page type)
  PG_table = 1u << 7,           // a page-table page (page type)
  PG_reserved = 1u << 8,        // never allocated (pfn 0, the zero page)
  PG_partially_mapped = 1u << 9,  // on the deferred-split queue (folio_test_partially_mapped)
  PG_dirty = 1u << 10,
  PG_ksm = 1u << 11,            // never set: no KSM; kept so the conditions keep their shape
  PG_large_mapcount_locked = 1u << 12,  // FOLIO_MM_IDS_LOCK_BIT (newer kernel)
  PG_uptodate = 1u << 13,       // the folio's contents are valid (a page-cache folio read in)
  PG_readahead = 1u << 14,      // a page-cache folio whose access starts the next readahead
  PG_active = 1u << 15,         // on an active LRU list (folio_test_active)
  PG_referenced = 1u << 16,     // seen referenced once by reclaim: a second chance (folio_test_referenced)
  PG_workingset = 1u << 17,     // was active once, deactivated (folio_test_workingset)
  PG_swapbacked = 1u << 18,     // backed by swap, not a file: anon, or read in from swap (folio_test_swapbacked)
  PG_writeback = 1u << 19,      // its contents are being written to the disk (folio_test_writeback)
  PG_reclaim = 1u << 20,        // written by reclaim: to the inactive tail when the write ends (folio_test_reclaim)
};

struct address_space;

// Shared bit of folio->_mm_ids (mm/rmap.c, CONFIG_MM_ID).
inline constexpr uint32_t FOLIO_MM_IDS_SHARED_BIT = 1u << 0;
using mm_id_t = int32_t;
inline constexpr mm_id_t MM_ID_DUMMY = 0;
// _nr_pages_mapped: pages mapped by PTEs, plus this when PMD-mapped (mm/internal.h).
inline constexpr int32_t ENTIRELY_MAPPED = 0x800000;
inline constexpr int32_t FOLIO_PAGES_MAPPED = ENTIRELY_MAPPED - 1;

struct page {
  // --- per page ---
  uint32_t flags = 0;
  int32_t mapcount = 0;    // PTE mappings of this page (kernel: page->_mapcount + 1)
  uint32_t head_off = 0;   // this page's index in its folio (0 for the head)
  uint8_t order = 0;       // head: folio order; buddy: free block order
  uint8_t pad_ = 0;
  uint16_t memcg_id = 0;   // head: the memory cgroup it is charged to (folio->memcg_data; 0: none, the root)

  // --- folio fields (head page) ---
  int32_t refcount = 0;         // _refcount
  int32_t large_mapcount = 0;   // _large_mapcount + 1: all PTE and PMD mappings
  int32_t entire_mapcount = 0;  // _entire_mapcount + 1: PMD mappings
  int32_t nr_pages_mapped = 0;  // _nr_pages_mapped (with ENTIRELY_MAPPED)
  int32_t pincount = 0;         // _pincount (GUP pins; large folios)
  mm_id_t mm_id[2] = {MM_ID_DUMMY, MM_ID_DUMMY};
  int32_t mm_id_mapcount[2] = {-1, -1};  // kernel encoding: -1 = no mappings
  uint32_t mm_ids = 0;          // FOLIO_MM_IDS_SHARED_BIT
  uint32_t anon_vma = 0;        // folio->mapping: the owning anon_vma's id (0: none)
  address_space* mapping = nullptr;  // folio->mapping of a page-cache folio (its file's)
  uint64_t index = 0;           // folio->index: linear page index within the anon_vma, or the
                                // page offset in the file of a page-cache folio
  uint64_t last_cpupid = 0;     // folio_xchg_last_cpupid()
  uint64_t swap = 0;            // folio->swap: the swap entry of a swap-cache folio (swp_entry_t.val)
  uint64_t io_until_ps = 0;     // a page-cache folio under read: when the read completes (until
                                // then it is locked and not uptodate to every task: folio_end_read())

  // --- page-table pages (ptdesc) ---
  uint32_t ptl_owner = 0;       // split PTE lock: 0 free, else cpu+1 holding it

  // --- folio->lru: the LRU list a folio is on (PG_lru), as pfns (0: none; pfn 0 is reserved) ---
  uint32_t lru_prev = 0;        // towards the list's head (more recently added)
  uint32_t lru_next = 0;        // towards its tail (reclaim takes from there)
};

using folio = page;

// --- page/folio navigation (include/linux/mm.h, page-flags.h) ---
inline folio* page_folio(page* p) { return p - p->head_off; }
inline const folio* page_folio(const page* p) { return p - p->head_off; }
inline page* folio_page(folio* f, unsigned long n) { return f + n; }
inline unsigned folio_order(const folio* f) { return f->order; }
inline long folio_nr_pages(const folio* f) { return 1L << f->order; }
inline uint64_t folio_size(const folio* f) { return PAGE_SIZE << f->order; }
inline bool folio_test_large(const folio* f) { return f->flags & PG_head; }
inline bool folio_test_anon(const folio* f) { return f->flags & PG_anon; }
inline bool folio_test_ksm(const folio* f) { return f->flags & PG_ksm; }
inline bool folio_test_swapcache(const folio* f) { return f->flags & PG_swapcache; }
inline bool folio_test_lru(const folio* f) { return f->flags & PG_lru; }
inline bool folio_test_locked(const folio* f) { return f->flags & PG_locked; }
inline bool folio_test_uptodate(const folio* f) { return f->flags & PG_uptodate; }
inline bool folio_test_dirty(const folio* f) { return f->flags & PG_dirty; }
inline bool folio_test_readahead(const folio* f) { return f->flags & PG_readahead; }
inline bool folio_test_active(const folio* f) { return f->flags & PG_active; }
inline bool folio_test_referenced(const folio* f) { return f->flags & PG_referenced; }
inline bool folio_test_workingset(const folio* f) { return f->flags & PG_workingset; }
inline bool folio_test_swapbacked(const folio* f) { return f->flags & (PG_swapbacked | PG_anon); }
inline bool folio_test_writeback(const folio* f) { return f->flags & PG_writeback; }
inline bool folio_test_reclaim(const folio* f) { return f->flags & PG_reclaim; }
// folio_is_file_lru() (include/linux/mm_inline.h): !folio_test_swapbacked() (no shmem here: a
// page-cache folio).
inline bool folio_is_file_lru(const folio* f) { return !folio_test_swapbacked(f); }
inline bool folio_test_pmd_mappable(const folio* f) { return f->order >= HPAGE_PMD_ORDER; }
inline bool folio_test_partially_mapped(const folio* f) { return f->flags & PG_partially_mapped; }
inline unsigned long folio_page_idx(const folio* f, const page* p) { return (unsigned long)(p - f); }

// --- PageAnonExclusive (include/linux/page-flags.h) ---
inline bool PageAnonExclusive(const page* p) { return p->flags & PG_anon_exclusive; }
inline void SetPageAnonExclusive(page* p) { p->flags |= PG_anon_exclusive; }
inline void ClearPageAnonExclusive(page* p) { p->flags &= ~PG_anon_exclusive; }

// --- refcount (include/linux/page_ref.h, mm.h) ---
inline int folio_ref_count(const folio* f) { return f->refcount; }
inline void folio_ref_add(folio* f, int nr) { f->refcount += nr; }
inline void folio_ref_sub(folio* f, int nr) { f->refcount -= nr; }
inline void folio_get(folio* f) { ++f->refcount; }

// --- mapcounts (include/linux/mm.h) ---
inline int folio_large_mapcount(const folio* f) { return f->large_mapcount; }
inline int folio_entire_mapcount(const folio* f) { return f->entire_mapcount; }
inline int folio_nr_pages_mapped(const folio* f) { return f->nr_pages_mapped & FOLIO_PAGES_MAPPED; }
// folio_mapcount(): small folio -> its page's mapcount; large -> the large mapcount.
inline int folio_mapcount(const folio* f) {
  return folio_test_large(f) ? f->large_mapcount : f->mapcount;
}
inline bool folio_mapped(const folio* f) { return folio_mapcount(f) >= 1; }
// page_mapcount() as in 6.12 (include/linux/mm.h): the page's PTE mappings, plus the folio's
// PMD mappings for a page of a large folio.
inline int page_mapcount(const page* p) {
  const folio* f = page_folio(p);
  return p->mapcount + (folio_test_large(f) ? f->entire_mapcount : 0);
}
inline bool folio_maybe_dma_pinned(const folio* f) {
  return folio_test_large(f) ? f->pincount > 0 : f->refcount >= 1024;  // GUP_PIN_COUNTING_BIAS
}

// --- MM-id tracking (CONFIG_MM_ID, newer kernel; include/linux/mm.h, mm/rmap.c) ---
inline mm_id_t folio_mm_id(const folio* f, int idx) { return f->mm_id[idx]; }
inline bool folio_test_large_maybe_mapped_shared(const folio* f) {
  return f->mm_ids & FOLIO_MM_IDS_SHARED_BIT;
}
inline bool folio_test_anon_large_maybe_mapped_shared(const folio* f) {
  return folio_test_large(f) && folio_test_large_maybe_mapped_shared(f);
}

}  // namespace kmm
