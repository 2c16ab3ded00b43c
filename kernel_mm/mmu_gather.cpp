// SPDX-License-Identifier: GPL-2.0-only
// Teardown: the mmu_gather (mm/mmu_gather.c, include/asm-generic/tlb.h, the arch tlb_flush()), the
// zap paths (mm/memory.c: unmap_vmas ... zap_present_folio_ptes, zap_page_range_single), the
// page-table freeing (mm/memory.c: free_pgtables, free_pgd_range) and zap_huge_pmd
// (mm/huge_memory.c).
//
// The ordering rule this file keeps (PORTMAP §3.2, §2.3): zap clears the PTEs and removes the rmap
// (mapcounts) under the PTL at once; the folio references the mappings held are only queued
// (__tlb_remove_folio_pages) and dropped by tlb_flush_mmu() AFTER the TLB flush; page-table pages
// are likewise freed only after the flush that covers them (tlb_remove_table).
//
// Simplifications: no migration/device entries, no uffd-wp markers, no hugetlb, no
// mmu-notifiers, no delayed rmap (only file folios use it). CONFIG_MMU_GATHER_PAGE_SIZE is off (as
// on x86 and arm64), so tlb_change_page_size() is empty; CONFIG_MMU_GATHER_MERGE_VMAS is off, so
// tlb_end_vma() flushes. The page batches are not allocated in simulated memory; only their fill
// levels are tracked, so that a huge unmap forces the same intermediate flushes as the kernel's.
#include <algorithm>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

// include/asm-generic/tlb.h, 64-bit, 4K pages
constexpr unsigned MMU_GATHER_BUNDLE = 8;                             // tlb->__pages[]
constexpr unsigned MAX_GATHER_BATCH = (PAGE_SIZE - 16) / sizeof(void*);  // 510 per batch page
constexpr unsigned MAX_GATHER_BATCH_COUNT = 10000UL / MAX_GATHER_BATCH;  // 19
constexpr unsigned MAX_TABLE_BATCH = (PAGE_SIZE - 24) / sizeof(void*);   // 509 (rcu_head + nr)

constexpr unsigned PGDIR_SHIFT_ = PGDIR_SHIFT;
constexpr uint64_t PGDIR_SIZE = uint64_t(1) << PGDIR_SHIFT_;
constexpr uint64_t PGDIR_MASK = ~(PGDIR_SIZE - 1);
constexpr uint64_t P4D_MASK = PGDIR_MASK;  // p4d folded into the pgd (4-level paging)

// pgd_addr_end() / pud_addr_end() / pmd_addr_end() (include/linux/pgtable.h)
inline uint64_t addr_end(uint64_t addr, uint64_t end, uint64_t size) {
  uint64_t boundary = (addr + size) & ~(size - 1);
  return (boundary - 1 < end - 1) ? boundary : end;
}
inline uint64_t pgd_addr_end(uint64_t addr, uint64_t end) { return addr_end(addr, end, PGDIR_SIZE); }
inline uint64_t pud_addr_end(uint64_t addr, uint64_t end) { return addr_end(addr, end, PUD_SIZE); }
inline uint64_t pmd_addr_end(uint64_t addr, uint64_t end) { return addr_end(addr, end, PMD_SIZE); }

// FIRST_USER_ADDRESS and USER_PGTABLES_CEILING (include/linux/pgtable.h): 0 on x86 and arm64.
constexpr uint64_t FIRST_USER_ADDRESS = 0;
constexpr uint64_t USER_PGTABLES_CEILING = 0;

// mm_tlb_flush_nested() (include/linux/mm_types.h): another gather of this mm in flight. Kernel
// entries are serialised in this port, so two gathers never overlap: always false.
inline bool mm_tlb_flush_nested(mm_struct*) { return false; }

// __tlb_reset_range() (include/asm-generic/tlb.h)
void __tlb_reset_range(mmu_gather* tlb) {
  if (tlb->fullmm) {
    tlb->start = tlb->end = ~0ull;
  } else {
    tlb->start = ~0ull;  // TASK_SIZE: above any user address
    tlb->end = 0;
  }
  tlb->freed_tables = false;
  tlb->cleared_ptes = false;
  tlb->cleared_pmds = false;
  tlb->cleared_puds = false;
  tlb->cleared_p4ds = false;
  // Do not reset mmu_gather::vma_* fields here, we do not call into tlb_start_vma() again to set
  // them if there is an intermediate flush.
}

// __tlb_adjust_range() and the tlb_flush_{pte,pmd,pud,p4d}_range() helpers (asm-generic/tlb.h)
void __tlb_adjust_range(mmu_gather* tlb, uint64_t address, uint64_t range_size) {
  tlb->start = std::min(tlb->start, address);
  tlb->end = std::max(tlb->end, address + range_size);
}
void tlb_flush_pte_range(mmu_gather* tlb, uint64_t address, uint64_t size) {
  __tlb_adjust_range(tlb, address, size);
  tlb->cleared_ptes = true;
}
void tlb_flush_pmd_range(mmu_gather* tlb, uint64_t address, uint64_t size) {
  __tlb_adjust_range(tlb, address, size);
  tlb->cleared_pmds = true;
}
void tlb_flush_pud_range(mmu_gather* tlb, uint64_t address, uint64_t size) {
  __tlb_adjust_range(tlb, address, size);
  tlb->cleared_puds = true;
}
void tlb_flush_p4d_range(mmu_gather* tlb, uint64_t address, uint64_t size) {
  __tlb_adjust_range(tlb, address, size);
  tlb->cleared_p4ds = true;
}

// __tlb_gather_mmu() (mm/mmu_gather.c)
void __tlb_gather_mmu(mmu_gather* tlb, mm_struct* mm, bool fullmm) {
  *tlb = mmu_gather{};
  tlb->mm = mm;
  tlb->fullmm = fullmm;
  tlb->need_flush_all = false;
  tlb->batch_active = 0;  // tlb->active = &tlb->local
  tlb->batch_nr = 0;
  tlb->batch_count = 0;
  tlb->vma_pfn = false;
  __tlb_reset_range(tlb);
  // inc_tlb_flush_pending(tlb->mm): see mm_tlb_flush_nested()
}

// tlb_next_batch() (mm/mmu_gather.c:19): move to the next batch page, allocating one if needed;
// false when MAX_GATHER_BATCH_COUNT are in use (the caller must flush). No delayed rmaps here.
bool tlb_next_batch(mmu_gather* tlb) {
  if (tlb->batch_active < tlb->batch_count) {  // batch->next already allocated
    ++tlb->batch_active;
    tlb->batch_nr = 0;
    return true;
  }
  if (tlb->batch_count == MAX_GATHER_BATCH_COUNT) return false;
  // __get_free_page(GFP_NOWAIT): always succeeds here
  ++tlb->batch_count;
  ++tlb->batch_active;
  tlb->batch_nr = 0;
  return true;
}

inline unsigned batch_max(const mmu_gather* tlb) {
  return tlb->batch_active == 0 ? MMU_GATHER_BUNDLE : MAX_GATHER_BATCH;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// mmu_gather (mm/mmu_gather.c)

void Kernel::tlb_gather_mmu(mmu_gather* tlb, mm_struct* mm) { __tlb_gather_mmu(tlb, mm, false); }

void Kernel::tlb_gather_mmu_fullmm(mmu_gather* tlb, mm_struct* mm) { __tlb_gather_mmu(tlb, mm, true); }

// tlb_get_unmap_shift() (include/asm-generic/tlb.h): the smallest level the gather cleared.
static unsigned tlb_get_unmap_shift(const mmu_gather* tlb) {
  if (tlb->cleared_ptes) return PAGE_SHIFT;
  if (tlb->cleared_pmds) return PMD_SHIFT;
  if (tlb->cleared_puds) return PUD_SHIFT;
  if (tlb->cleared_p4ds) return PGDIR_SHIFT;  // P4D_SHIFT (folded: 4 levels)
  return PAGE_SHIFT;
}

// tlb_get_level() (arch/arm64/include/asm/tlb.h): the TTL hint, the level when only one level's
// leaves were cleared and no table freed (3 = PTE, 2 = PMD, 1 = PUD, 0 = P4D).
static int tlb_get_level(const mmu_gather* tlb) {
  if (tlb->freed_tables) return TLBI_TTL_UNKNOWN;  // the TTL field is only valid for the leaf entry
  const int n = int(tlb->cleared_ptes) + int(tlb->cleared_pmds) + int(tlb->cleared_puds) + int(tlb->cleared_p4ds);
  if (n != 1) return TLBI_TTL_UNKNOWN;
  return tlb->cleared_ptes ? 3 : tlb->cleared_pmds ? 2 : tlb->cleared_puds ? 1 : 0;
}

// tlb_flush() (arch/x86/include/asm/tlb.h; arch/arm64/include/asm/tlb.h): the arch layer's
// tlb_flush_mmu_range() gets the gathered range, or start = end = ~0 (TLB_FLUSH_ALL) for a fullmm
// gather or need_flush_all: x86 then flushes the whole mm; arm64 flushes only if tables were freed
// (a fullmm teardown relies on the ASID not being reused without a flush).
void Kernel::tlb_flush(mmu_gather* tlb) {
  uint64_t start = ~0ull, end = ~0ull;
  if (!tlb->fullmm && !tlb->need_flush_all) {
    start = tlb->start;
    end = tlb->end;
  }
  arch_->tlb_flush_mmu_range(tlb->mm, start, end, tlb_get_unmap_shift(tlb), tlb_get_level(tlb), tlb->freed_tables);
}

// tlb_flush_mmu_tlbonly() (include/asm-generic/tlb.h): flush what was gathered, reset the range.
void Kernel::tlb_flush_mmu_tlbonly(mmu_gather* tlb) {
  // Anything calling __tlb_adjust_range() also sets at least one of these bits.
  if (!(tlb->freed_tables || tlb->cleared_ptes || tlb->cleared_pmds || tlb->cleared_puds ||
        tlb->cleared_p4ds))
    return;
  tlb_flush(tlb);
  __tlb_reset_range(tlb);
}

// tlb_table_flush() (mm/mmu_gather.c:313): the page-table pages queued by tlb_remove_table() are
// freed once no TLB (or paging-structure cache) can reach them: tlb_table_invalidate() flushes
// first; the kernel then frees them after an RCU grace period (tlb_remove_table_rcu), here at
// once.
void Kernel::tlb_table_flush(mmu_gather* tlb) {
  if (tlb->tables.empty()) return;
  tlb_flush_mmu_tlbonly(tlb);  // tlb_table_invalidate(): tlb_needs_table_invalidate() is true
  for (pfn_t t : tlb->tables) pte_free(tlb->mm, t);  // __tlb_remove_table()
  tlb->tables.clear();
}

// tlb_remove_table() (mm/mmu_gather.c:327)
void Kernel::tlb_remove_table(mmu_gather* tlb, pfn_t table) {
  tlb->tables.push_back(table);
  if (tlb->tables.size() == MAX_TABLE_BATCH) tlb_table_flush(tlb);
}

// tlb_batch_pages_flush() (mm/mmu_gather.c:133) -> __tlb_batch_free_encoded_pages() ->
// free_pages_and_swap_cache() (mm/swap_state.c:309): drop the references of the zapped mappings,
// nr per multi-page entry (folios_put_refs). The folio is freed when its last reference goes.
void Kernel::tlb_batch_pages_flush(mmu_gather* tlb) {
  if (!tlb->pending.empty()) {
    lru_add_drain();
    for (const mmu_gather::Deferred& d : tlb->pending) {
      folio* f = page_folio(d.pg);
      // free_swap_cache() (mm/swap_state.c:289): an unmapped swap-cache folio whose slot no swap
      // PTE holds leaves the cache with its last mapping.
      if (folio_test_swapcache(f) && !folio_mapped(f) && !folio_io_pending(f) && folio_trylock(f)) {
        folio_free_swap(f);
        folio_unlock(f);
      }
      folios_put_refs(f, int(d.nr));
    }
    tlb->pending.clear();
  }
  tlb->batch_active = 0;  // tlb->active = &tlb->local
  tlb->batch_nr = 0;
}

// tlb_flush_mmu() (mm/mmu_gather.c:400): the TLB flush, THEN free the tables and drop the refs.
void Kernel::tlb_flush_mmu(mmu_gather* tlb) {
  tlb_flush_mmu_tlbonly(tlb);
  // tlb_flush_mmu_free()
  tlb_table_flush(tlb);
  tlb_batch_pages_flush(tlb);
}

// tlb_finish_mmu() (mm/mmu_gather.c:464)
void Kernel::tlb_finish_mmu(mmu_gather* tlb) {
  // If there are parallel threads doing PTE changes on the same range under a non-exclusive lock
  // but deferring the TLB flush by batching, flush everything (never here: see
  // mm_tlb_flush_nested()).
  if (mm_tlb_flush_nested(tlb->mm)) {
    tlb->fullmm = true;
    __tlb_reset_range(tlb);
    tlb->freed_tables = true;
  }
  tlb_flush_mmu(tlb);
  // tlb_batch_list_free(tlb); dec_tlb_flush_pending(tlb->mm)
  tlb->batch_count = 0;
}

// tlb_remove_tlb_entries() (include/asm-generic/tlb.h): remember the range to flush;
// __tlb_remove_tlb_entry() is empty on x86 and arm64.
void Kernel::tlb_remove_tlb_entries(mmu_gather* tlb, pte_t* ptep, unsigned nr, uint64_t address) {
  tlb_flush_pte_range(tlb, address, PAGE_SIZE * nr);
}

// __tlb_remove_folio_pages_size() (mm/mmu_gather.c:142): queue the references of `nr_pages`
// consecutive pages of one folio (one entry, or two: page + nr_pages). True when the batches are
// full: the caller must flush before adding more.
bool Kernel::__tlb_remove_folio_pages(mmu_gather* tlb, page* pg, unsigned nr_pages) {
  MMUSIM_CHECK(tlb->end, "__tlb_remove_folio_pages with no range gathered");  // VM_BUG_ON(!tlb->end)
  MMUSIM_CHECK(page_folio(pg) == page_folio(pg + nr_pages - 1),
               "__tlb_remove_folio_pages: pages {:#x}+{} span folios", page_to_pfn(pg), nr_pages);
  tlb->pending.push_back({pg, nr_pages});
  tlb->batch_nr += nr_pages == 1 ? 1 : 2;  // ENCODED_PAGE_BIT_NR_PAGES_NEXT: page + nr_pages
  // Make sure that we can always add another "page" + "nr_pages", requiring two entries instead
  // of only a single one.
  if (tlb->batch_nr >= batch_max(tlb) - 1) {
    if (!tlb_next_batch(tlb)) return true;
  }
  return false;
}

// __tlb_remove_page_size() (mm/mmu_gather.c:195)
bool Kernel::__tlb_remove_page_size(mmu_gather* tlb, page* pg, uint64_t page_size) {
  return __tlb_remove_folio_pages(tlb, pg, 1);
}

// tlb_remove_page_size() (include/asm-generic/tlb.h)
void Kernel::tlb_remove_page_size(mmu_gather* tlb, page* pg, uint64_t page_size) {
  if (__tlb_remove_page_size(tlb, pg, page_size)) tlb_flush_mmu(tlb);
}

// tlb_start_vma() / tlb_end_vma() (include/asm-generic/tlb.h). Without
// CONFIG_MMU_GATHER_MERGE_VMAS (only s390 has it) the range is flushed at each VMA end, so it
// does not grow over the gaps between VMAs; the references are still dropped only at the end.
void Kernel::tlb_start_vma(mmu_gather* tlb, vm_area_struct* vma) {
  if (tlb->fullmm) return;
  // tlb_update_vma_flags(); flush_cache_range() is empty on x86 and arm64
  tlb->vma_pfn = vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP);
}

void Kernel::tlb_end_vma(mmu_gather* tlb, vm_area_struct* vma) {
  if (tlb->fullmm) return;
  // VM_PFNMAP is more fragile ...; and !IS_ENABLED(CONFIG_MMU_GATHER_MERGE_VMAS):
  tlb_flush_mmu_tlbonly(tlb);
}

// ------------------------------------------------------------------------------------------------
// Zap (mm/memory.c)

// zap_present_folio_ptes() (mm/memory.c:1484): clear `nr` PTEs mapping consecutive pages of one
// folio, account them, remove the rmap now (under the PTL) and queue the references for after the
// flush.
void Kernel::zap_present_folio_ptes(mmu_gather* tlb, vm_area_struct* vma, folio* f, page* pg, pte_t* pte,
                                    pte_t ptent, unsigned nr, uint64_t addr, int* rss, bool* force_flush,
                                    bool* force_break) {
  mm_struct* mm = tlb->mm;
  const bool delay_rmap = false;

  if (!folio_test_anon(f)) {
    // A page-cache folio: the PTEs' dirty bit goes to the folio (a shared mapping's writes).
    ptent = arch_->get_and_clear_full_ptes(mm, addr, pte, nr, tlb->fullmm);
    // On SMP the kernel then also delays the rmap removal until after the TLB flush and forces
    // the flush at the end of this table (tlb_delay_rmap(), tlb_flush_rmaps()), so that no
    // writeback's folio_mkclean() can miss a write through a stale entry. There is no writeback
    // here: the rmap goes at once and the flush is not forced [a simplification].
    if (arch_->pte_dirty(ptent)) folio_mark_dirty(f);
    // pte_young() && vma_has_recency(): folio_mark_accessed(), no LRU ages here.
    rss[MM_FILEPAGES] -= int(nr);  // mm_counter(folio)
  } else {
    // We don't need up-to-date accessed/dirty bits.
    arch_->clear_full_ptes(mm, addr, pte, nr, tlb->fullmm);
    rss[MM_ANONPAGES] -= int(nr);
  }
  // arch_check_zapped_pte(): x86 shadow-stack check only
  tlb_remove_tlb_entries(tlb, pte, nr, addr);
  // userfaultfd_pte_wp(): no uffd-wp here
  ctr_.ptes_zapped.inc(nr);

  if (!delay_rmap) {
    folio_remove_rmap_ptes(f, pg, int(nr), vma);
    MMUSIM_CHECK(folio_mapcount(f) >= 0, "bad pte: folio pfn {:#x} mapcount {} after zap at {:#x}",
                 page_to_pfn(f), folio_mapcount(f), addr);  // print_bad_pte()
  }
  if (__tlb_remove_folio_pages(tlb, pg, nr)) {
    *force_flush = true;
    *force_break = true;
  }
}

// zap_present_ptes() (mm/memory.c:1535): zap at least one present PTE, batching the following PTEs
// that map consecutive pages of the same large folio. Returns the PTEs processed.
int Kernel::zap_present_ptes(mmu_gather* tlb, vm_area_struct* vma, pte_t* pte, pte_t ptent, unsigned max_nr,
                             uint64_t addr, int* rss, bool* force_flush, bool* force_break) {
  const fpb_t fpb_flags = FPB_IGNORE_DIRTY | FPB_IGNORE_SOFT_DIRTY;
  mm_struct* mm = tlb->mm;

  page* pg = vm_normal_page(vma, addr, ptent);
  if (!pg) {
    // The zero page (or another special PTE): we don't need up-to-date accessed/dirty bits.
    arch_->ptep_get_and_clear_full(mm, addr, pte, tlb->fullmm);
    tlb_remove_tlb_entries(tlb, pte, 1, addr);  // tlb_remove_tlb_entry()
    ctr_.ptes_zapped.inc();
    // ksm_might_unmap_zero_page(): no KSM
    return 1;
  }

  folio* f = page_folio(pg);
  // should_zap_folio(details, folio): every caller here zaps private (COWed) pages too
  // (unmap_vmas: even_cows; zap_page_range_single: details == NULL).

  // Make sure that the common "small folio" case is as fast as possible by keeping the batching
  // logic separate.
  if (folio_test_large(f) && max_nr != 1) {
    int nr = folio_pte_batch(f, addr, pte, ptent, int(max_nr), fpb_flags, nullptr, nullptr, nullptr);
    zap_present_folio_ptes(tlb, vma, f, pg, pte, ptent, unsigned(nr), addr, rss, force_flush, force_break);
    return nr;
  }
  zap_present_folio_ptes(tlb, vma, f, pg, pte, ptent, 1, addr, rss, force_flush, force_break);
  return 1;
}

// zap_pte_range() (mm/memory.c:1582): under the PTE table's lock.
uint64_t Kernel::zap_pte_range(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, uint64_t end) {
  bool force_flush = false, force_break = false;
  mm_struct* mm = tlb->mm;
  int rss[NR_MM_COUNTERS] = {};  // init_rss_vec()
  uint32_t* ptl = nullptr;
  int nr;

  // tlb_change_page_size(tlb, PAGE_SIZE): CONFIG_MMU_GATHER_PAGE_SIZE off
  pte_t* start_pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
  pte_t* pte = start_pte;
  if (!pte) return addr;

  // flush_tlb_batched_pending(mm): no reclaim unmapping with deferred flushes here.
  do {
    pte_t ptent = arch_->ptep_get(pte);
    charge(Cost::pte_scan);
    nr = 1;
    if (pte_none(ptent)) continue;
    // need_resched(): never

    if (arch_->pte_present(ptent)) {
      unsigned max_nr = unsigned((end - addr) / PAGE_SIZE);
      nr = zap_present_ptes(tlb, vma, pte, ptent, max_nr, addr, rss, &force_flush, &force_break);
      if (force_break) {
        addr += uint64_t(nr) * PAGE_SIZE;
        break;
      }
      continue;
    }
    // zap_nonpresent_ptes(): genuine swap entries, hence private anon pages (migration, device,
    // marker and poison entries do not exist in this port).
    MMUSIM_CHECK(arch_->is_swap_pte(ptent) && swap_enabled(), "zap_pte_range: unrecognized non-present PTE {:#x} at {:#x}",
                 pte_val(ptent), addr);
    rss[MM_SWAPENTS] -= 1;
    free_swap_and_cache(arch_->pte_to_swp_entry(ptent));
    arch_->ptep_get_and_clear(vma->vm_mm, addr, pte);  // clear_not_present_full_ptes()
  } while (pte += nr, addr += PAGE_SIZE * uint64_t(nr), addr != end);

  // add_mm_rss_vec()
  for (int i = 0; i < NR_MM_COUNTERS; ++i)
    if (rss[i]) add_mm_counter(mm, i, rss[i]);

  // Do the actual TLB flush before dropping ptl
  if (force_flush) {
    tlb_flush_mmu_tlbonly(tlb);
    // tlb_flush_rmaps(tlb, vma): no delayed rmaps
  }
  pte_unmap_unlock(start_pte, ptl);

  // If we forced a TLB flush (either due to running out of batch buffers or because we needed to
  // flush dirty TLB entries before releasing the ptl), free the batched memory too. Come back
  // again if we didn't do everything.
  if (force_flush) tlb_flush_mmu(tlb);

  return addr;
}

// zap_pmd_range() (mm/memory.c:1703): a huge PMD is zapped whole when the range covers it, else
// split first (and its PTEs zapped below).
uint64_t Kernel::zap_pmd_range(mmu_gather* tlb, vm_area_struct* vma, pud_t* pud, uint64_t addr, uint64_t end) {
  uint64_t next;
  pmd_t* pmd = pmd_offset(pud, addr);
  do {
    next = pmd_addr_end(addr, end);
    if (arch_->pmd_trans_huge(*pmd)) {  // is_swap_pmd() || pmd_trans_huge() || pmd_devmap()
      if (next - addr != HPAGE_PMD_SIZE) {
        __split_huge_pmd(vma, pmd, addr);
      } else if (zap_huge_pmd(tlb, vma, pmd, addr)) {
        addr = next;
        continue;
      }
      // fall through
    }
    // (details->single_folio: only unmap_mapping_folio(), file folios)
    if (pmd_none(*pmd)) {
      addr = next;
      continue;
    }
    addr = zap_pte_range(tlb, vma, pmd, addr, next);
    if (addr != next) pmd--;
  } while (pmd++, addr != end);  // cond_resched()
  return addr;
}

// zap_pud_range() (mm/memory.c:1745); zap_p4d_range() folds into it (4-level paging). No PUD
// leaves for anonymous memory.
uint64_t Kernel::zap_pud_range(mmu_gather* tlb, vm_area_struct* vma, uint64_t* pgd, uint64_t addr, uint64_t end) {
  uint64_t next;
  pud_t* pud = pud_offset(pgd, addr);
  do {
    next = pud_addr_end(addr, end);
    if (!arch_->table_present(pud->val)) continue;  // pud_none_or_clear_bad()
    next = zap_pmd_range(tlb, vma, pud, addr, next);
  } while (pud++, addr = next, addr != end);
  return addr;
}

// unmap_page_range() (mm/memory.c:1793)
void Kernel::unmap_page_range(mmu_gather* tlb, vm_area_struct* vma, uint64_t addr, uint64_t end) {
  uint64_t next;
  MMUSIM_CHECK(addr < end, "unmap_page_range [{:#x},{:#x})", addr, end);
  tlb_start_vma(tlb, vma);
  uint64_t* pgd = pgd_offset(vma->vm_mm, addr);
  do {
    next = pgd_addr_end(addr, end);
    if (!arch_->table_present(*pgd)) continue;  // pgd_none_or_clear_bad()
    next = zap_pud_range(tlb, vma, pgd, addr, next);  // zap_p4d_range()
  } while (pgd++, addr = next, addr != end);
  tlb_end_vma(tlb, vma);
}

// unmap_single_vma() (mm/memory.c:1814)
void Kernel::unmap_single_vma(mmu_gather* tlb, vm_area_struct* vma, uint64_t start_addr, uint64_t end_addr) {
  uint64_t start = std::max(vma->vm_start, start_addr);
  if (start >= vma->vm_end) return;
  uint64_t end = std::min(vma->vm_end, end_addr);
  if (end <= vma->vm_start) return;
  // uprobe_munmap (files), untrack_pfn (VM_PFNMAP), hugetlb: none here
  if (start != end) unmap_page_range(tlb, vma, start, end);
}

// unmap_vmas() (mm/memory.c:1879): unmap [start_addr, end_addr) of each VMA of the list (the
// caller flushes after).
void Kernel::unmap_vmas(mmu_gather* tlb, const std::vector<vm_area_struct*>& vmas, uint64_t start_addr,
                        uint64_t end_addr) {
  // struct zap_details { .zap_flags = ZAP_FLAG_DROP_MARKER | ZAP_FLAG_UNMAP, .even_cows = true }
  // mmu_notifier_invalidate_range_start/end: none
  for (vm_area_struct* vma : vmas) unmap_single_vma(tlb, vma, start_addr, end_addr);
}

// unmap_vmas() starting at `vma` and walking the mm's VMA tree (what exit_mmap passes).
void Kernel::unmap_vmas(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end) {
  std::vector<vm_area_struct*> vmas;
  for (auto it = vma->vm_mm->mm_mt.find(vma->vm_end); it != vma->vm_mm->mm_mt.end(); ++it) {
    if (it->second->vm_start >= end) break;  // mas_find(mas, tree_end - 1)
    vmas.push_back(it->second.get());
  }
  unmap_vmas(tlb, vmas, start, end);
}

// zap_page_range_single() (mm/memory.c:1915): MADV_DONTNEED of a range inside one VMA, with its
// own gather.
void Kernel::zap_page_range_single(vm_area_struct* vma, uint64_t address, uint64_t size) {
  const uint64_t end = address + size;
  mmu_gather tlb;

  lru_add_drain();
  tlb_gather_mmu(&tlb, vma->vm_mm);
  // update_hiwater_rss(); mmu notifiers; hugetlb_zap_begin/end: none
  unmap_single_vma(&tlb, vma, address, end);
  tlb_finish_mmu(&tlb);
}

// ------------------------------------------------------------------------------------------------
// zap_huge_pmd() (mm/huge_memory.c:2095)

// zap_deposited_table() (mm/huge_memory.c:2086): the deposited PTE table was never visible to the
// hardware, so it is freed at once, not through the gather.
void Kernel::zap_deposited_table(mm_struct* mm, pmd_t* pmd) {
  pfn_t pgtable = pgtable_trans_huge_withdraw(mm, pmd);
  pte_free(mm, pgtable);
  mm->pgtables_bytes -= PAGE_SIZE;  // mm_dec_nr_ptes()
}

int Kernel::zap_huge_pmd(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr) {
  mm_struct* mm = tlb->mm;
  // tlb_change_page_size(tlb, HPAGE_PMD_SIZE): CONFIG_MMU_GATHER_PAGE_SIZE off

  // __pmd_trans_huge_lock()
  uint32_t* ptl = pmd_lock(mm, pmd);
  if (!arch_->pmd_trans_huge(*pmd)) {
    spin_unlock(ptl);
    return 0;
  }
  // For architectures like ppc64 we look at deposited pgtable when calling
  // pmdp_huge_get_and_clear. So do the pgtable_trans_huge_withdraw after finishing pmdp related
  // operations.
  pmd_t orig_pmd = arch_->pmdp_huge_get_and_clear(mm, addr, pmd);  // pmdp_huge_get_and_clear_full()
  // arch_check_zapped_pmd(): x86 shadow-stack check only
  tlb_flush_pmd_range(tlb, addr, HPAGE_PMD_SIZE);  // tlb_remove_pmd_tlb_entry()
  ctr_.ptes_zapped.inc();
  // vma_is_special_huge(vma): no DAX / PFNMAP here
  if (is_huge_zero_pmd(orig_pmd)) {
    zap_deposited_table(mm, pmd);
    spin_unlock(ptl);
  } else {
    folio* f = nullptr;
    const bool flush_needed = true;

    MMUSIM_CHECK(arch_->pmd_present(orig_pmd),
                 "zap_huge_pmd: non-present huge PMD {:#x} at {:#x} (no THP migration here)",
                 pmd_val(orig_pmd), addr);
    page* pg = pfn_to_page(arch_->pmd_pfn(orig_pmd));
    f = page_folio(pg);
    folio_remove_rmap_pmd(f, pg, vma);
    MMUSIM_CHECK(folio_mapcount(f) >= 0, "zap_huge_pmd: folio pfn {:#x} mapcount {}", page_to_pfn(f),
                 folio_mapcount(f));
    MMUSIM_CHECK(pg == f, "zap_huge_pmd: PMD at {:#x} maps a tail page", addr);  // !PageHead

    if (folio_test_anon(f)) {
      zap_deposited_table(mm, pmd);
      add_mm_counter(mm, MM_ANONPAGES, -int64_t(HPAGE_PMD_NR));
    } else {
      // A page-cache folio mapped by do_set_pmd(): arch_needs_pgtable_deposit() is false (no
      // table to zap). No folio_mark_accessed() for a young PMD, unlike the PTE zap.
      add_mm_counter(mm, MM_FILEPAGES, -int64_t(HPAGE_PMD_NR));  // mm_counter_file()
      if (arch_->pmd_dirty(orig_pmd)) folio_mark_dirty(f);
    }
    spin_unlock(ptl);
    if (flush_needed) tlb_remove_page_size(tlb, f, HPAGE_PMD_SIZE);
  }
  return 1;
}

// ------------------------------------------------------------------------------------------------
// Page-table freeing (mm/memory.c:190-400). The tables go to the gather (pte_free_tlb and
// friends set freed_tables and extend the range) and are freed after the flush.

namespace {

// pte_free_tlb() / pmd_free_tlb() / pud_free_tlb() (include/asm-generic/tlb.h)
void pte_free_tlb(Kernel& k, mmu_gather* tlb, pfn_t table, uint64_t address) {
  tlb_flush_pmd_range(tlb, address, PAGE_SIZE);
  tlb->freed_tables = true;
  k.tlb_remove_table(tlb, table);  // __pte_free_tlb(): x86 paravirt_tlb_remove_table, arm64 tlb_remove_ptdesc
}
void pmd_free_tlb(Kernel& k, mmu_gather* tlb, pfn_t table, uint64_t address) {
  tlb_flush_pud_range(tlb, address, PAGE_SIZE);
  tlb->freed_tables = true;
  k.tlb_remove_table(tlb, table);
}
void pud_free_tlb(Kernel& k, mmu_gather* tlb, pfn_t table, uint64_t address) {
  tlb_flush_p4d_range(tlb, address, PAGE_SIZE);
  tlb->freed_tables = true;
  k.tlb_remove_table(tlb, table);
}

// free_pte_range() (mm/memory.c:190): the PTEs were zapped earlier; this frees the table.
void free_pte_range(Kernel& k, mmu_gather* tlb, pmd_t* pmd, uint64_t addr) {
  pfn_t token = k.arch().table_pfn(pmd->val);  // pmd_pgtable()
  pmd->val = 0;                                // pmd_clear()
  k.charge(Cost::pte_write);
  pte_free_tlb(k, tlb, token, addr);
  tlb->mm->pgtables_bytes -= PAGE_SIZE;  // mm_dec_nr_ptes()
}

// pmd_none_or_clear_bad() etc.: a leaf here means a huge PMD that zap did not clear (a bug).
bool none_or_bad(Kernel& k, uint64_t entry, uint64_t addr, const char* level) {
  if (entry == 0) return true;
  MMUSIM_CHECK(k.arch().table_present(entry), "free_pgtables: bad {} entry {:#x} at {:#x}", level, entry,
               addr);
  return false;
}

// free_pmd_range() (mm/memory.c:199)
void free_pmd_range(Kernel& k, mmu_gather* tlb, pud_t* pud, uint64_t addr, uint64_t end, uint64_t floor,
                    uint64_t ceiling) {
  uint64_t next;
  uint64_t start = addr;
  pmd_t* pmd = k.pmd_offset(pud, addr);
  do {
    next = pmd_addr_end(addr, end);
    if (none_or_bad(k, pmd->val, addr, "pmd")) continue;
    free_pte_range(k, tlb, pmd, addr);
  } while (pmd++, addr = next, addr != end);

  start &= PUD_MASK;
  if (start < floor) return;
  if (ceiling) {
    ceiling &= PUD_MASK;
    if (!ceiling) return;
  }
  if (end - 1 > ceiling - 1) return;

  pfn_t table = k.arch().table_pfn(pud->val);  // pmd = pmd_offset(pud, start)
  pud->val = 0;                                  // pud_clear()
  k.charge(Cost::pte_write);
  pmd_free_tlb(k, tlb, table, start);
  tlb->mm->pgtables_bytes -= PAGE_SIZE;  // mm_dec_nr_pmds()
}

// free_pud_range() (mm/memory.c:233)
void free_pud_range(Kernel& k, mmu_gather* tlb, uint64_t* p4d, uint64_t addr, uint64_t end, uint64_t floor,
                    uint64_t ceiling) {
  uint64_t next;
  uint64_t start = addr;
  pud_t* pud = k.pud_offset(p4d, addr);
  do {
    next = pud_addr_end(addr, end);
    if (none_or_bad(k, pud->val, addr, "pud")) continue;
    free_pmd_range(k, tlb, pud, addr, next, floor, ceiling);
  } while (pud++, addr = next, addr != end);

  start &= P4D_MASK;
  if (start < floor) return;
  if (ceiling) {
    ceiling &= P4D_MASK;
    if (!ceiling) return;
  }
  if (end - 1 > ceiling - 1) return;

  pfn_t table = k.arch().table_pfn(*p4d);  // pud = pud_offset(p4d, start)
  *p4d = 0;                                  // p4d_clear()
  k.charge(Cost::pte_write);
  pud_free_tlb(k, tlb, table, start);
  tlb->mm->pgtables_bytes -= PAGE_SIZE;  // mm_dec_nr_puds()
}

// free_p4d_range() (mm/memory.c:267): the p4d level is folded into the pgd, so its loop is the
// one pgd entry and p4d_free_tlb()/pgd_clear() are empty.
void free_p4d_range(Kernel& k, mmu_gather* tlb, uint64_t* pgd, uint64_t addr, uint64_t end, uint64_t floor,
                    uint64_t ceiling) {
  if (none_or_bad(k, *pgd, addr, "p4d")) return;
  free_pud_range(k, tlb, pgd, addr, end, floor, ceiling);
}

}  // namespace

// free_pgd_range() (mm/memory.c:303): free the tables of [addr, end) that no address outside
// [floor, ceiling) needs. 0 as ceiling means the top of the address space.
void Kernel::free_pgd_range(mmu_gather* tlb, uint64_t addr, uint64_t end, uint64_t floor, uint64_t ceiling) {
  uint64_t next;
  // The rule is that addr 0 and floor 0 refer to the bottom of the address space, but end 0 and
  // ceiling 0 refer to the top. Comparisons need to use "end - 1" and "ceiling - 1".
  addr &= PMD_MASK;
  if (addr < floor) {
    addr += PMD_SIZE;
    if (!addr) return;
  }
  if (ceiling) {
    ceiling &= PMD_MASK;
    if (!ceiling) return;
  }
  if (end - 1 > ceiling - 1) end -= PMD_SIZE;
  if (addr > end - 1) return;
  // tlb_change_page_size(tlb, PAGE_SIZE): CONFIG_MMU_GATHER_PAGE_SIZE off
  uint64_t* pgd = pgd_offset(tlb->mm, addr);
  do {
    next = pgd_addr_end(addr, end);
    if (!*pgd) continue;  // pgd_none_or_clear_bad()
    free_p4d_range(*this, tlb, pgd, addr, next, floor, ceiling);
  } while (pgd++, addr = next, addr != end);
}

// free_pgtables() (mm/memory.c:365): for each run of VMAs less than a PMD apart, free the tables
// between the previous VMA's end (or floor) and the next one's start (or ceiling).
void Kernel::free_pgtables(mmu_gather* tlb, const std::vector<vm_area_struct*>& vmas, uint64_t floor,
                           uint64_t ceiling, bool mm_wr_locked) {
  size_t i = 0;
  while (i < vmas.size()) {
    vm_area_struct* vma = vmas[i];
    const uint64_t addr = vma->vm_start;
    vm_area_struct* next = i + 1 < vmas.size() ? vmas[i + 1] : nullptr;  // mas_find(mas, ceiling - 1)

    // Hide vma from rmap and truncate_pagecache before freeing pgtables
    if (mm_wr_locked) vma_start_write(vma);
    // unlink_anon_vmas(vma): the anon_vma reference goes with the VMA

    // Optimization: gather nearby vmas into one call down
    while (next && next->vm_start <= vma->vm_end + PMD_SIZE) {
      vma = next;
      ++i;
      next = i + 1 < vmas.size() ? vmas[i + 1] : nullptr;
      if (mm_wr_locked) vma_start_write(vma);
    }
    free_pgd_range(tlb, addr, vma->vm_end, floor, next ? next->vm_start : ceiling);
    ++i;
  }
}

// free_pgtables(mm, start, end): the tables of [start, end) that no VMA needs now (the range
// between the neighbouring VMAs), with a gather of its own.
void Kernel::free_pgtables(mm_struct* mm, uint64_t start, uint64_t end) {
  vm_area_struct* next = find_vma(mm, start);
  if (next && next->vm_start < end) mmusim::panic("free_pgtables [{:#x},{:#x}) overlaps a VMA", start, end);
  uint64_t floor = FIRST_USER_ADDRESS;
  for (auto& [vend, v] : mm->mm_mt) {
    if (vend > start) break;
    floor = vend;
  }
  mmu_gather tlb;
  tlb_gather_mmu(&tlb, mm);
  free_pgd_range(&tlb, start, end, floor, next ? next->vm_start : USER_PGTABLES_CEILING);
  tlb_finish_mmu(&tlb);
}

// Every table below the pgd (what exit_mmap's free_pgtables leaves when no VMA remains).
void Kernel::free_pgd_range_all(mm_struct* mm) {
  MMUSIM_CHECK(mm->mm_mt.empty(), "free_pgd_range_all of an mm that still has VMAs");
  mmu_gather tlb;
  tlb_gather_mmu_fullmm(&tlb, mm);
  // [FIRST_USER_ADDRESS, TASK_SIZE) rounded up to whole pgd entries: every user pgd entry
  const uint64_t top = ALIGN(arch_->task_size(), uint64_t(1) << PGDIR_SHIFT);
  free_pgd_range(&tlb, FIRST_USER_ADDRESS, top, FIRST_USER_ADDRESS, USER_PGTABLES_CEILING);
  tlb_finish_mmu(&tlb);
}

}  // namespace kmm
