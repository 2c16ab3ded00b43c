// SPDX-License-Identifier: GPL-2.0-only
// Invariant checker (PORTMAP §3.3), in the spirit of mm/page_table_check.c and the
// VM_BUG_ON_FOLIO checks of mm/rmap.c, but global: at a quiescent point (the end of a kernel
// entry) it walks every mm's page tables, all four levels, builds one tally per folio and compares
// it with the folio's counters.
//
// What is checked (each panic message starts "invariant N (...) violated after '<where>'"):
//  1  mapcount = reality: per page, page->mapcount == PTEs mapping it; per large folio,
//     large_mapcount == PTEs + PMDs mapping it and entire_mapcount == PMDs mapping it, over all mms
//     (Documentation/mm/transhuge.rst "mapcount"). A folio with a mapcount nothing maps is caught
//     when it is reachable (LRU batch).
//  2  large-folio bookkeeping: large_mapcount == sum of page mapcounts + entire_mapcount;
//     nr_pages_mapped & FOLIO_PAGES_MAPPED == pages with mapcount >= 1; ENTIRELY_MAPPED set iff
//     entire_mapcount >= 1 (mm/internal.h, mm/rmap.c __folio_add_rmap/__folio_remove_rmap).
//     MM-id slots (CONFIG_MM_ID, v6.15+ mm/rmap.c folio_add_return_large_mapcount /
//     folio_sub_return_large_mapcount): a free slot has id MM_ID_DUMMY and mapcount -1; a slot
//     in use counts >= 1 and at most the mappings its mm really has (a slot can undercount after
//     a third mm mapped the folio while both slots were taken, never overcount); both slots in
//     use => distinct ids and SHARED set; when tracking is on (kernel.large_folio_reuse, or the
//     folio shows slot state): two mms map it => SHARED set, SHARED clear => one slot holds all
//     mappings. SHARED may be set spuriously.
//  3  refcount >= mapcount; an anon folio without pins or swap cache has refcount == mapcount +
//     (small folio in a per-CPU LRU-add batch ? 1 per batch slot : 0) + pending mmu_gather refs.
//     An mmu_gather never lives across a quiescent point (the teardown code keeps gathers local),
//     so pending refs are 0 here. Tail pages have refcount 0. The huge zero folio and the zero
//     page are skipped. Freed pages (buddy heads): refcount 0, mapcounts 0, and the free lists
//     add up to nr_free_pages(). No leaks: every allocated page is a page table (walked or
//     deposited), a mapped folio, a folio in an LRU batch or the huge zero folio.
//  4  a writable anon PTE => PageAnonExclusive(page); a writable anon PMD => PAE(head). The zero
//     page and the huge zero folio are never mapped writable.
//  5  PAE => at most one mapping of the page system-wide; a PMD-mapped PAE head => the folio has
//     entire_mapcount 1 and no PTE maps it (page_table_check_set: an anon page may not be
//     writable while mapped more than once). An anon page is mapped at most once per mm.
//  6  a page mapped more than once (shared by fork) is read-only in every mapping (and !PAE, by 5).
//  7  RSS: MM_ANONPAGES == anon pages mapped by PTEs + HPAGE_PMD_NR x anon PMDs (the zero page
//     and the huge zero folio are not counted, as in do_anonymous_page/do_huge_pmd_anonymous_page);
//     MM_FILEPAGES: see CACHE below; MM_SWAPENTS == the swap PTEs; MM_SHMEMPAGES 0 (no shmem). pgtables_bytes == PAGE_SIZE x (PUD +
//     PMD + PTE tables present + tables deposited under this mm's huge PMDs): mm_inc_nr_puds/
//     pmds/ptes; the PGD is not counted (as in the kernel).
//  8  TLB coherence, if a TLB enumerator is registered (except on a CPU that defers its flush of
//     the mm, Arch::tlb_flush_deferred: x86 lazy TLB): every cached translation maps, for each
//     4 KiB it covers, the PFN the PTE/PMD maps now, with equal or less permission (stale
//     read-only entries are fine; a writable entry for a read-only or absent PTE, or another
//     PFN, is not). Entries of an ASID no live mm owns are reported: the platform must flush
//     them when the mm goes away.
//  9  liveness is not checked here: the drivers catch a fault that repeats with nothing changed
//     (UserAccess::translate panics "livelock"; the platforms do the same).
//  10 arm64 contpte: a PTE_CONT entry => its 16-aligned block is all valid, all PTE_CONT,
//     consecutive PFNs from a 16-aligned PFN, one folio, equal prot modulo AF/dirty (compared as
//     __contpte_try_fold does: pte_pgprot(pte_mkold(pte_mkclean(pte)))).
// Also:
//  - page-table structure: every table referenced is PG_table and referenced once; no PUD leaves;
//    a non-present non-none PTE is a swap entry of a slot in use, in an anonymous VMA (SWAP below: each slot's count is its swap PTEs; no migration entries in this port); huge PMDs map the
//    head of a PMD-order folio and have a deposited table, but for a page-cache folio's, which
//    has none; no orphan deposited tables; special
//    PTEs map only the zero page.
//  - locks at a quiescent point: no split PTL (ptdesc lock in each table page) held, no folio
//    lock or large-mapcount lock held, mmap_lock free and mm_lock_seq even, no VMA read- or
//    write-locked.
//  - VMAs: the tree is ordered by vm_end, VMAs do not overlap, are attached, belong to the mm;
//    every present PTE/PMD lies inside a VMA; a writable entry lies in a VM_WRITE VMA.
//  - anon rmap: a mapped folio is anon (the port has only anonymous memory); the VMA has an
//    anon_vma; folio->anon_vma is the VMA's anon_vma, or its root, or an anon_vma with the same
//    root (the port keeps only ids and roots, not anon_vma chains: an anon_vma that no live VMA
//    uses any more cannot be placed in a chain and is accepted); folio->index + page index ==
//    linear_page_index(vma, address) (__folio_set_anon).
//  - tasks: a zombie has no mm; a task's mm is a live mm.
//  - page cache (CACHE; docs/research-filemap-swap-io.md §8 items 1, 2 and 10): a folio in a
//    file's cache is that file's at its index, uptodate, neither anon nor PageAnonExclusive, not
//    left locked, and holds one reference per page for the cache (refcount = mapcount + cache +
//    LRU-add batch slots); nrpages adds up; a PTE that maps a page-cache page lies in a VMA of
//    that file at that page's offset, before the end of the file (CACHE-L4), is writable only in
//    a shared mapping and then only with the folio dirty; a PMD maps a whole order-9 folio before
//    the end of the file at a 2 MiB-aligned file offset; MM_FILEPAGES = the PTEs that map
//    page-cache pages + 512 per such PMD; NR_FILE_THPS and NR_FILE_PMDMAPPED add up. (Invariants 4-6 are about
//    anonymous pages: a shared file page may be writable in several mappings.)
//  - LRU (kernel_mm/vmscan.cpp): each node's lists are well linked and counted, every folio on a
//    list belongs there (anon or file, PG_active) and to that node, and has PG_lru; every mapped
//    or cached folio (not the zero pages) is on one list or in one CPU's LRU-add batch, not both.
//
// Speed: one walk collects a record per present leaf; records are sorted by PFN so each folio's
// mappings are contiguous; a pass over 262144 PTEs costs a few tens of milliseconds.
#include <algorithm>
#include <unordered_set>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

namespace pgf = mmusim::pg;

constexpr const char* INV1 = "1 (mapcount = reality)";
constexpr const char* INV2 = "2 (large-folio bookkeeping)";
constexpr const char* INV2_MMID = "2 (MM-id slots)";
constexpr const char* INV3 = "3 (refcount)";
constexpr const char* INV_SWAP = "SWAP (swap counts and the swap cache)";
constexpr const char* INV3_FREE = "3 (freed pages)";
constexpr const char* INV3_LEAK = "3 (no leaked pages)";
constexpr const char* INV4 = "4 (writable anon mapping => PageAnonExclusive)";
constexpr const char* INV4_ZERO = "4 (zero page read-only)";
constexpr const char* INV5 = "5 (PageAnonExclusive => one mapping)";
constexpr const char* INV6 = "6 (page shared by several mappings => read-only everywhere)";
constexpr const char* INV7_RSS = "7 (RSS)";
constexpr const char* INV7_PGT = "7 (pgtables_bytes)";
constexpr const char* INV8 = "8 (TLB coherence)";
constexpr const char* INV10 = "10 (arm64 contpte)";
constexpr const char* INV_PT = "PT (page-table structure)";
constexpr const char* INV_LOCK = "LOCK (no lock held at a quiescent point)";
constexpr const char* INV_VMA = "VMA (mappings inside VMAs)";
constexpr const char* INV_RMAP = "RMAP (anon_vma and index)";
constexpr const char* INV_TASK = "TASK (task/mm state)";
constexpr const char* INV_CACHE = "CACHE (page cache and file mappings)";
constexpr const char* INV_LRU = "LRU (every user folio on its LRU list or in an LRU-add batch)";

std::string flag_names(uint32_t f) {
  static const std::pair<uint32_t, const char*> names[] = {
      {PG_locked, "locked"},   {PG_head, "head"},
      {PG_lru, "lru"},         {PG_anon_exclusive, "anon_exclusive"},
      {PG_swapcache, "swapcache"}, {PG_anon, "anon"},
      {PG_buddy, "buddy"},     {PG_table, "table"},
      {PG_reserved, "reserved"}, {PG_partially_mapped, "partially_mapped"},
      {PG_dirty, "dirty"},     {PG_ksm, "ksm"},
      {PG_large_mapcount_locked, "large_mapcount_locked"}, {PG_uptodate, "uptodate"}, {PG_readahead, "readahead"},
  };
  std::string s;
  for (auto& [bit, name] : names)
    if (f & bit) {
      if (!s.empty()) s += '|';
      s += name;
    }
  return s.empty() ? "0" : s;
}

// One present leaf mapping of a user page found by the walk.
struct MapRec {
  pfn_t pfn;      // PTE: the page; PMD: the folio's head
  uint64_t va;
  uint64_t entry; // raw PTE/PMD value
  const vm_area_struct* vma;
  uint32_t mm;    // index into Checker::mms_
  bool pmd;
  bool writable;
};

struct MmTally {
  uint64_t anon_ptes = 0;
  uint64_t file_ptes = 0;  // PTEs mapping page-cache folios (MM_FILEPAGES)
  uint64_t anon_pmds = 0;
  uint64_t file_pmds = 0;  // huge PMDs mapping page-cache folios (512 pages each of MM_FILEPAGES)
  uint64_t swap_ptes = 0;  // swap entries in PTEs (MM_SWAPENTS)
  uint64_t tables = 0;  // PUD + PMD + PTE tables + deposited tables (what pgtables_bytes counts)
  const vm_area_struct* vma_cache = nullptr;
};

// The private kernel state the checker reads (read-only).
struct KernelPrivate {
  const std::vector<std::vector<folio*>>& lru_batch;
  const std::map<uint64_t, pfn_t>& deposited;
  const folio* huge_zero;
  const std::vector<FreeArea>& free_area;  // per node
  const Kernel::TlbEnumerator& tlb_enum;
  const std::unordered_map<uint64_t, folio*>& swap_cache;
  const std::vector<uint64_t>& node_write_pending;  // NR_ZONE_WRITE_PENDING per node
};

class Checker {
 public:
  Checker(Kernel& k, const char* where, const KernelPrivate& priv)
      : k_(k), arch_(k.arch()), isa_(k.isa()), where_(where ? where : "?"), priv_(priv) {}

  // The local check (kernel.check_local), as DEBUG_VM's at the point of change: the mm's VMAs and
  // locks, then the page table that maps `addr` (its 512 PTEs, or the huge PMD) with each entry's
  // VMA and page, and the folios they map by what a folio alone says (invariants 2 and 3's
  // refcount >= mapcount, no lock left held). What needs every mapping of a folio (invariant 1's
  // mapcount = the PTEs that map it, 3's exact refcount, 5, 6) is the whole check's.
  void run_local(const mm_struct* target, uint64_t addr) {
    collect_mms();
    uint32_t mi = 0;
    while (mi < mms_.size() && mms_[mi] != target) ++mi;
    if (mi == mms_.size()) return;  // (torn down)
    check_mm_locks_and_vmas(mi);
    mm_struct* mm = mms_[mi];
    const uint64_t* pgdt = table(mm->pgd >> PAGE_SHIFT);
    if (!pgdt) return;
    const uint64_t e = pgdt[(addr >> PGDIR_SHIFT) & (PTRS_PER_PMD - 1)];
    if (!e) return;
    if (!arch_.table_present(e))
      fail(INV_PT, "mm {}: PGD entry for va {:#x} ({:#x}) is neither none nor a table", mm->id, addr, e);
    const uint64_t* pudt = table(arch_.table_pfn(e));
    if (!pudt) return;
    const uint64_t e2 = pudt[(addr >> PUD_SHIFT) & (PTRS_PER_PMD - 1)];
    if (!e2) return;
    if (!arch_.table_present(e2)) fail(INV_PT, "mm {}: PUD entry for va {:#x} ({:#x}) is not a table", mm->id, addr, e2);
    const pfn_t pmdt_pfn = arch_.table_pfn(e2);
    const uint64_t* pmdt = table(pmdt_pfn);
    if (!pmdt) return;
    const unsigned l = (addr >> PMD_SHIFT) & (PTRS_PER_PMD - 1);
    const pmd_t pmd{pmdt[l]};
    const uint64_t va_l = addr & ~(PMD_SIZE - 1);
    if (pmd_none(pmd)) return;
    if (arch_.pmd_trans_huge(pmd)) {
      walk_huge_pmd(mi, va_l, pmd, (pmdt_pfn << PAGE_SHIFT) + l * sizeof(pmd_t));
    } else {
      if (!arch_.table_present(pmd.val))
        fail(INV_PT, "mm {}: PMD for va {:#x} ({:#x}) is neither none, a huge leaf nor a table", mm->id, va_l, pmd.val);
      walk_pte_table(mi, va_l, arch_.table_pfn(pmd.val));
    }
    const folio* last = nullptr;
    for (const MapRec& m : recs_) {
      const folio* f = page_folio(k_.pfn_to_page(m.pfn));
      if (f != last) check_folio_alone(f);
      last = f;
    }
  }

  void run() {
    collect_mms();
    for (uint32_t i = 0; i < mms_.size(); ++i) check_mm_locks_and_vmas(i);
    check_tasks();
    for (uint32_t i = 0; i < mms_.size(); ++i) walk_mm(i);
    check_tables_unique();
    check_deposits();
    check_folios();
    check_lru();
    check_mm_counters();
    check_swap();
    check_free_lists();
    check_leaks();
    check_tlbs();
  }

 private:
  // ---- reporting -------------------------------------------------------------------------------
  template <typename... Args>
  [[noreturn]] void fail(const char* inv, fmt::format_string<Args...> f, Args&&... args) const {
    mmusim::panic("invariant {} violated after '{}': {}", inv, where_,
                  fmt::format(f, std::forward<Args>(args)...));
  }

  std::string folio_state(const folio* f) const {
    return fmt::format(
        "folio pfn {:#x} order {} refcount {} mapcount {} large_mapcount {} entire_mapcount {} "
        "nr_pages_mapped {:#x} pincount {} flags {} anon_vma {} index {:#x} mm_id [{},{}] "
        "mm_id_mapcount [{},{}] mm_ids {:#x}",
        k_.page_to_pfn(f), folio_order(f), f->refcount, f->mapcount, f->large_mapcount,
        f->entire_mapcount, f->nr_pages_mapped, f->pincount, flag_names(f->flags), f->anon_vma,
        f->index, f->mm_id[0], f->mm_id[1], f->mm_id_mapcount[0], f->mm_id_mapcount[1], f->mm_ids);
  }
  std::string page_state(const page* p) const {
    return fmt::format("page pfn {:#x} (index {} in its folio) mapcount {} refcount {} flags {}",
                       k_.page_to_pfn(p), p->head_off, p->mapcount, p->refcount, flag_names(p->flags));
  }
  std::string rec_state(const MapRec& r) const {
    return fmt::format("mm {} va {:#x} {} {:#x} (pfn {:#x}{})", mms_[r.mm]->id, r.va,
                       r.pmd ? "PMD" : "PTE", r.entry, r.pfn, r.writable ? ", writable" : ", read-only");
  }
  std::string vma_state(const vm_area_struct* v) const {
    if (!v) return "no VMA";
    return fmt::format("VMA [{:#x}, {:#x}) flags {:#x} pgoff {:#x} anon_vma {} (root {})", v->vm_start,
                       v->vm_end, v->vm_flags, v->vm_pgoff, v->anon ? int64_t(v->anon->id) : -1,
                       v->anon ? int64_t(v->anon->root_id) : -1);
  }
  // The mappings of one page (or of a folio when `page_idx` < 0), for messages.
  std::string recs_of(const MapRec* r, size_t n, pfn_t pfn, bool whole_folio) const {
    std::string s;
    int shown = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!whole_folio && !r[i].pmd && r[i].pfn != pfn) continue;
      if (shown == 6) {
        s += "; ...";
        break;
      }
      s += shown++ ? "; " : "";
      s += rec_state(r[i]);
    }
    return shown ? s : "no mappings";
  }

  // ---- mms, VMAs, locks, tasks -----------------------------------------------------------------
  void collect_mms() {
    for (const auto& up : k_.mms()) {
      mm_struct* mm = up.get();
      if (!mm || mm->pgd == 0) continue;  // torn down (exit_mmap freed the PGD)
      mms_.push_back(mm);
    }
    tally_.resize(mms_.size());
    // One record per PTE/PMD: reserve what the RSS counters promise (growing the vector costs more
    // than the walk).
    uint64_t expect = 0;
    for (const mm_struct* mm : mms_) expect += uint64_t(std::max<int64_t>(0, get_mm_counter(mm, MM_ANONPAGES)));
    recs_.reserve(size_t(std::min<uint64_t>(expect, k_.nr_frames())) + 64);
  }

  void check_mm_locks_and_vmas(uint32_t mi) {
    mm_struct* mm = mms_[mi];
    if (mm->mmap_lock.is_locked())
      fail(INV_LOCK, "mmap_lock of mm {} is held (readers {}, writer {})", mm->id, mm->mmap_lock.readers(),
           mm->mmap_lock.write_locked());
    if (mm->mm_lock_seq & 1)
      fail(INV_LOCK, "mm {}: mm_lock_seq {} is odd (an mmap write section was not closed)", mm->id,
           mm->mm_lock_seq);
    uint64_t prev_end = 0;
    for (const auto& [key, up] : mm->mm_mt) {
      const vm_area_struct* v = up.get();
      if (!v) fail(INV_VMA, "mm {}: null VMA in the tree at key {:#x}", mm->id, key);
      if (key != v->vm_end) fail(INV_VMA, "mm {}: VMA tree key {:#x} is not vm_end ({})", mm->id, key, vma_state(v));
      if (v->vm_start >= v->vm_end || !IS_ALIGNED(v->vm_start, PAGE_SIZE) || !IS_ALIGNED(v->vm_end, PAGE_SIZE))
        fail(INV_VMA, "mm {}: malformed {}", mm->id, vma_state(v));
      if (v->vm_start < prev_end)
        fail(INV_VMA, "mm {}: {} overlaps the previous VMA (ending at {:#x})", mm->id, vma_state(v), prev_end);
      prev_end = v->vm_end;
      if (v->vm_mm != mm) fail(INV_VMA, "mm {}: {} has vm_mm of another mm", mm->id, vma_state(v));
      if (v->detached) fail(INV_VMA, "mm {}: detached {} is still in the VMA tree", mm->id, vma_state(v));
      if (v->vm_lock.is_locked())
        fail(INV_LOCK, "mm {}: the per-VMA lock of {} is held (readers {}, writer {})", mm->id, vma_state(v),
             v->vm_lock.readers(), v->vm_lock.write_locked());
      if (v->vm_lock_seq == mm->mm_lock_seq)
        fail(INV_LOCK, "mm {}: {} is write-locked (vm_lock_seq {} == mm_lock_seq)", mm->id, vma_state(v),
             v->vm_lock_seq);
      if (v->anon) av_root_[v->anon->id] = v->anon->root_id;
    }
  }

  void check_tasks() {
    for (const auto& up : k_.tasks()) {
      const task_struct* t = up.get();
      if (!t || !t->mm) continue;
      if (t->state == TaskState::Zombie || t->state == TaskState::Dead)
        fail(INV_TASK, "task {} ({}) is a zombie/dead but still has mm {}", t->pid, t->comm, t->mm->id);
      if (std::find(mms_.begin(), mms_.end(), t->mm) == mms_.end())
        fail(INV_TASK, "task {} ({}) uses mm {} which is not a live mm (torn down or unknown)", t->pid, t->comm,
             t->mm->id);
    }
  }

  const vm_area_struct* vma_at(uint32_t mi, uint64_t va) {
    MmTally& t = tally_[mi];
    if (t.vma_cache && t.vma_cache->vm_start <= va && va < t.vma_cache->vm_end) return t.vma_cache;
    const auto& mt = mms_[mi]->mm_mt;
    auto it = mt.upper_bound(va);
    if (it == mt.end() || it->second->vm_start > va) return nullptr;
    t.vma_cache = it->second.get();
    return t.vma_cache;
  }

  // ---- page-table walk -------------------------------------------------------------------------
  const uint64_t* table(pfn_t t) const {
    return reinterpret_cast<const uint64_t*>(k_.phys().frame_data_if(t));
  }

  void check_table(uint32_t mi, pfn_t pfn, const char* level, uint64_t va) {
    const mm_struct* mm = mms_[mi];
    if (pfn < 2 || pfn >= k_.nr_frames())
      fail(INV_PT, "mm {}: the {} table for va {:#x} is at pfn {:#x}, outside memory", mm->id, level, va, pfn);
    const page* p = k_.pfn_to_page(pfn);
    if (!(p->flags & PG_table) || (p->flags & PG_buddy) || p->refcount <= 0)
      fail(INV_PT, "mm {}: the {} table for va {:#x} at pfn {:#x} is not an allocated PG_table page ({})",
           mm->id, level, va, pfn, page_state(p));
    if (p->ptl_owner)
      fail(INV_LOCK, "mm {}: the page-table lock in the {} table pfn {:#x} (va {:#x}) is held by cpu {}",
           mm->id, level, pfn, va, p->ptl_owner - 1);
    tables_.push_back(pfn);
  }

  void walk_mm(uint32_t mi) {
    mm_struct* mm = mms_[mi];
    const pfn_t pgd = mm->pgd >> PAGE_SHIFT;
    check_table(mi, pgd, "PGD", 0);
    const uint64_t* pgdt = table(pgd);
    if (!pgdt) return;
    for (unsigned i = 0; i < PTRS_PER_PMD; ++i) {
      const uint64_t e = pgdt[i];
      if (!e) continue;
      const uint64_t va_i = uint64_t(i) << PGDIR_SHIFT;
      if (!arch_.table_present(e))
        fail(INV_PT, "mm {}: PGD entry {} ({:#x}) is neither none nor a table", mm->id, i, e);
      const pfn_t pud = arch_.table_pfn(e);
      check_table(mi, pud, "PUD", va_i);
      ++tally_[mi].tables;
      const uint64_t* pudt = table(pud);
      if (!pudt) continue;
      for (unsigned j = 0; j < PTRS_PER_PMD; ++j) {
        const uint64_t e2 = pudt[j];
        if (!e2) continue;
        const uint64_t va_j = va_i + (uint64_t(j) << PUD_SHIFT);
        if (!arch_.table_present(e2))
          fail(INV_PT, "mm {}: PUD entry for va {:#x} ({:#x}) is not a table (no PUD leaves in this port)",
               mm->id, va_j, e2);
        const pfn_t pmdt_pfn = arch_.table_pfn(e2);
        check_table(mi, pmdt_pfn, "PMD", va_j);
        ++tally_[mi].tables;
        const uint64_t* pmdt = table(pmdt_pfn);
        if (!pmdt) continue;
        for (unsigned l = 0; l < PTRS_PER_PMD; ++l) {
          const pmd_t pmd{pmdt[l]};
          if (pmd_none(pmd)) continue;
          const uint64_t va_l = va_j + (uint64_t(l) << PMD_SHIFT);
          if (arch_.pmd_trans_huge(pmd)) {
            walk_huge_pmd(mi, va_l, pmd, (pmdt_pfn << PAGE_SHIFT) + l * sizeof(pmd_t));
            continue;
          }
          if (!arch_.table_present(pmd.val))
            fail(INV_PT, "mm {}: PMD for va {:#x} ({:#x}) is neither none, a huge leaf nor a table", mm->id,
                 va_l, pmd.val);
          const pfn_t pt = arch_.table_pfn(pmd.val);
          check_table(mi, pt, "PTE", va_l);
          ++tally_[mi].tables;
          walk_pte_table(mi, va_l, pt);
        }
      }
    }
  }

  // The folio a leaf maps must be allocated user memory.
  void check_mapped_pfn(uint32_t mi, uint64_t va, uint64_t entry, pfn_t pfn, const char* what) {
    if (pfn < 2 || pfn >= k_.nr_frames())
      fail(INV_PT, "mm {} va {:#x}: {} {:#x} maps pfn {:#x}, outside memory or reserved", mms_[mi]->id, va, what,
           entry, pfn);
    const page* p = k_.pfn_to_page(pfn);
    const folio* f = page_folio(p);
    if ((p->flags & (PG_buddy | PG_table | PG_reserved)) || f->refcount <= 0 || (f->flags & PG_buddy))
      fail(INV3_FREE, "mm {} va {:#x}: {} {:#x} maps a page that is free or not user memory: {}; {}",
           mms_[mi]->id, va, what, entry, page_state(p), folio_state(f));
  }

  bool is_huge_zero(pfn_t pfn) const {
    if (!priv_.huge_zero) return false;
    const pfn_t h = k_.page_to_pfn(priv_.huge_zero);
    return pfn >= h && pfn < h + folio_nr_pages(priv_.huge_zero);
  }

  void walk_huge_pmd(uint32_t mi, uint64_t va, pmd_t pmd, uint64_t slot_pa) {
    mm_struct* mm = mms_[mi];
    const vm_area_struct* vma = vma_at(mi, va);
    if (!vma || vma->vm_end < va + PMD_SIZE)
      fail(INV_VMA, "mm {}: huge PMD {:#x} at va {:#x} is not inside one VMA ({})", mm->id, pmd.val, va,
           vma_state(vma));
    const bool w = arch_.pmd_write(pmd);
    if (w && !(vma->vm_flags & VM_WRITE))
      fail(INV_VMA, "mm {}: writable huge PMD {:#x} at va {:#x} in a VMA without VM_WRITE ({})", mm->id, pmd.val,
           va, vma_state(vma));
    const pfn_t pfn = arch_.pmd_pfn(pmd);
    if (!IS_ALIGNED(pfn, HPAGE_PMD_NR))
      fail(INV_PT, "mm {}: huge PMD {:#x} at va {:#x} maps unaligned pfn {:#x}", mm->id, pmd.val, va, pfn);
    // A page-cache folio's PMD (do_set_pmd()) has no deposited table: arch_needs_pgtable_deposit()
    // is false on x86 and arm64.
    const bool file = pfn < k_.nr_frames() && !is_huge_zero(pfn) && k_.pfn_to_page(pfn)->mapping &&
                      !folio_test_anon(page_folio(k_.pfn_to_page(pfn)));
    auto dep = priv_.deposited.find(slot_pa);
    if (file) {
      if (dep != priv_.deposited.end())
        fail(INV_PT, "mm {}: the huge PMD {:#x} at va {:#x} of a page-cache folio has a deposited page table", mm->id,
             pmd.val, va);
    } else {
      // pgtable_trans_huge_deposit(): every anonymous huge PMD keeps a PTE table for its split.
      if (dep == priv_.deposited.end())
        fail(INV_PT, "mm {}: huge PMD {:#x} at va {:#x} has no deposited page table", mm->id, pmd.val, va);
      check_table(mi, dep->second, "deposited PTE", va);
      ++tally_[mi].tables;
      deposits_found_.push_back(slot_pa);
    }
    if (is_huge_zero(pfn)) {
      if (w) fail(INV4_ZERO, "mm {}: the huge zero folio is mapped writable by PMD {:#x} at va {:#x}", mm->id, pmd.val, va);
      return;
    }
    check_mapped_pfn(mi, va, pmd.val, pfn, "PMD");
    const folio* f = k_.pfn_to_page(pfn);
    if (f->head_off != 0 || folio_order(f) != HPAGE_PMD_ORDER)
      fail(INV_PT, "mm {}: huge PMD {:#x} at va {:#x} does not map a whole PMD-order folio: {}", mm->id, pmd.val,
           va, folio_state(page_folio(f)));
    if (file) ++tally_[mi].file_pmds;
    else ++tally_[mi].anon_pmds;
    recs_.push_back(MapRec{pfn, va, pmd.val, vma, mi, true, w});
  }

  void walk_pte_table(uint32_t mi, uint64_t va0, pfn_t pt) {
    const uint64_t* t = table(pt);
    if (!t) return;
    mm_struct* mm = mms_[mi];
    const pfn_t zero = k_.zero_pfn();
    for (unsigned i = 0; i < PTRS_PER_PTE; ++i) {
      const pte_t pte{t[i]};
      if (pte_none(pte)) continue;
      const uint64_t va = va0 + uint64_t(i) * PAGE_SIZE;
      if (!arch_.pte_present(pte)) {
        // A swap entry (no migration or device entries in this port): a slot in use, in an
        // anonymous VMA.
        const auto* si = k_.swap_info();
        const swp_entry_t e = arch_.pte_to_swp_entry(pte);
        if (!si || swp_type(e) != 0 || swp_offset(e) == 0 || swp_offset(e) >= si->max)
          fail(INV_PT, "mm {}: PTE {:#x} at va {:#x} is neither none, present nor a swap entry of the swap device",
               mm->id, pte.val, va);
        const vm_area_struct* vma = vma_at(mi, va);
        if (!vma || vma->vm_file)
          fail(INV_VMA, "mm {}: swap PTE {:#x} at va {:#x} outside an anonymous VMA", mm->id, pte.val, va);
        ++tally_[mi].swap_ptes;
        ++swap_refs_[swp_offset(e)];
        continue;
      }
      const vm_area_struct* vma = vma_at(mi, va);
      if (!vma) fail(INV_VMA, "mm {}: PTE {:#x} maps va {:#x}, which no VMA covers", mm->id, pte.val, va);
      const bool w = arch_.pte_write(pte);
      if (w && !(vma->vm_flags & VM_WRITE))
        fail(INV_VMA, "mm {}: writable PTE {:#x} at va {:#x} in a VMA without VM_WRITE ({})", mm->id, pte.val, va,
             vma_state(vma));
      const pfn_t pfn = arch_.pte_pfn(pte);
      const bool special = arch_.pte_special(pte);
      if (special || pfn == zero) {
        // do_anonymous_page(): the zero page, pte_mkspecial(pfn_pte(my_zero_pfn)), read-only.
        if (!special || pfn != zero)
          fail(INV_PT, "mm {}: PTE {:#x} at va {:#x}: special PTEs map only the zero page (zero pfn {:#x})", mm->id,
               pte.val, va, zero);
        if (w) fail(INV4_ZERO, "mm {}: the zero page is mapped writable by PTE {:#x} at va {:#x}", mm->id, pte.val, va);
        continue;
      }
      if (is_huge_zero(pfn)) {
        if (w) fail(INV4_ZERO, "mm {}: a huge zero folio page is mapped writable by PTE {:#x} at va {:#x}", mm->id,
                    pte.val, va);
        continue;
      }
      check_mapped_pfn(mi, va, pte.val, pfn, "PTE");
      if (folio_test_anon(page_folio(k_.pfn_to_page(pfn)))) ++tally_[mi].anon_ptes;
      else ++tally_[mi].file_ptes;
      recs_.push_back(MapRec{pfn, va, pte.val, vma, mi, false, w});
    }
    if (isa_ == pgf::Isa::arm64) check_contpte(mi, va0, t);
  }

  // Invariant 10 (arch/arm64/mm/contpte.c: what contpte_convert()/contpte_set_ptes() create).
  void check_contpte(uint32_t mi, uint64_t va0, const uint64_t* t) {
    const int mmid = mms_[mi]->id;
    auto norm = [&](pte_t p) { return arch_.pte_pgprot(arch_.pte_mkold(arch_.pte_mkclean(p))).val; };
    for (unsigned b = 0; b < PTRS_PER_PTE; b += CONT_PTES) {
      bool any = false;
      for (unsigned i = 0; i < CONT_PTES; ++i) any |= (t[b + i] & pgf::arm64::CONT) != 0;
      if (!any) continue;
      const uint64_t va = va0 + uint64_t(b) * PAGE_SIZE;
      const pte_t first{t[b]};
      for (unsigned i = 0; i < CONT_PTES; ++i) {
        const pte_t p{t[b + i]};
        if (!(p.val & pgf::arm64::VALID) || !(p.val & pgf::arm64::CONT))
          fail(INV10, "mm {}: the contpte block at va {:#x} has entry {} = {:#x}, not {} (block: {})", mmid, va, i,
               p.val, (p.val & pgf::arm64::VALID) ? "PTE_CONT" : "valid", block_str(t + b));
      }
      const pfn_t pfn0 = arch_.pte_pfn(first);
      if (!IS_ALIGNED(pfn0, CONT_PTES))
        fail(INV10, "mm {}: the contpte block at va {:#x} starts at pfn {:#x}, not 16-aligned (block: {})", mmid, va,
             pfn0, block_str(t + b));
      const folio* f0 = page_folio(k_.pfn_to_page(pfn0));
      for (unsigned i = 1; i < CONT_PTES; ++i) {
        const pte_t p{t[b + i]};
        if (arch_.pte_pfn(p) != pfn0 + i)
          fail(INV10, "mm {}: the contpte block at va {:#x}: entry {} maps pfn {:#x}, not {:#x} (block: {})", mmid,
               va, i, arch_.pte_pfn(p), pfn0 + i, block_str(t + b));
        if (norm(p) != norm(first))
          fail(INV10, "mm {}: the contpte block at va {:#x}: entry {} ({:#x}) differs from entry 0 ({:#x}) in more "
               "than AF/dirty", mmid, va, i, p.val, first.val);
        if (page_folio(k_.pfn_to_page(pfn0 + i)) != f0)
          fail(INV10, "mm {}: the contpte block at va {:#x} spans more than one folio (entry {}: {})", mmid, va, i,
               folio_state(page_folio(k_.pfn_to_page(pfn0 + i))));
      }
    }
  }
  static std::string block_str(const uint64_t* e) {
    std::string s;
    for (unsigned i = 0; i < CONT_PTES; ++i) s += fmt::format("{}{:#x}", i ? " " : "", e[i]);
    return s;
  }

  void check_tables_unique() {
    std::sort(tables_.begin(), tables_.end());
    auto it = std::adjacent_find(tables_.begin(), tables_.end());
    if (it != tables_.end())
      fail(INV_PT, "page-table page pfn {:#x} is referenced twice (shared or also deposited)", *it);
  }

  void check_deposits() {
    if (deposits_found_.size() == priv_.deposited.size()) return;
    std::sort(deposits_found_.begin(), deposits_found_.end());
    for (const auto& [slot, table_pfn] : priv_.deposited)
      if (!std::binary_search(deposits_found_.begin(), deposits_found_.end(), slot))
        fail(INV_PT, "a page table (pfn {:#x}) is deposited for the PMD slot at pa {:#x}, which holds no huge PMD "
             "of a live mm (leaked deposit)", table_pfn, slot);
  }

  // ---- per folio -------------------------------------------------------------------------------
  void check_folios() {
    std::sort(recs_.begin(), recs_.end(), [](const MapRec& a, const MapRec& b) {
      if (a.pfn != b.pfn) return a.pfn < b.pfn;
      if (a.mm != b.mm) return a.mm < b.mm;
      return a.va < b.va;
    });
    for (size_t c = 0; c < priv_.lru_batch.size(); ++c)
      for (const folio* f : priv_.lru_batch[c]) {
        if (!f || f->head_off != 0 || f->refcount <= 0 || (f->flags & PG_buddy))
          fail(INV3, "cpu {}'s LRU-add batch holds a page that is not an allocated folio head: {}", c,
               f ? page_state(f) : "null");
        if (folio_test_large(f))
          fail(INV3, "cpu {}'s LRU-add batch holds a large folio (large folios never wait there, "
               "folio_may_be_lru_cached): {}", c, folio_state(f));
        ++lru_refs_[f];
      }
    size_t i = 0;
    while (i < recs_.size()) {
      const folio* f = page_folio(k_.pfn_to_page(recs_[i].pfn));
      const pfn_t hp = k_.page_to_pfn(f);
      const pfn_t end = hp + pfn_t(folio_nr_pages(f));
      size_t j = i;
      while (j < recs_.size() && recs_[j].pfn < end) ++j;
      check_folio(f, &recs_[i], j - i);
      accounted_pages_ += uint64_t(folio_nr_pages(f));
      i = j;
    }
    check_page_cache();
    // Swap-cache folios no PTE maps (swapped out and not yet freed, or read ahead): the cache's
    // references, and the LRU-add batch's.
    for (const auto& [val, f] : priv_.swap_cache) {
      if (folio_mapped(f)) continue;
      int lru = 0;
      if (auto it = lru_refs_.find(f); it != lru_refs_.end()) {
        lru = it->second;
        lru_refs_.erase(it);
      }
      const int expected = int(folio_nr_pages(f)) + lru;
      // (Reclaim's isolation holds one more only inside an entry.)
      if (f->refcount != expected)
        fail(INV3, "an unmapped swap-cache folio has refcount {} (expected {} for the cache + {} LRU-add batch "
             "slot(s)): {}", f->refcount, folio_nr_pages(f), lru, folio_state(f));
      if ((f->flags & PG_locked) && !k_.folio_io_pending(f)) fail(INV_LOCK, "folio left locked: {}", folio_state(f));
      accounted_pages_ += uint64_t(folio_nr_pages(f));
    }
    // Folios only the LRU-add batch holds (e.g. the old page after a COW copy).
    for (const auto& [f, n] : lru_refs_) {
      if (folio_mapcount(f) != 0)
        fail(INV1, "folio mapcount {} but no page table maps it (it waits in an LRU-add batch): {}",
             folio_mapcount(f), folio_state(f));
      if (!folio_maybe_dma_pinned(f) && !folio_test_swapcache(f) && f->refcount != n)
        fail(INV3, "unmapped folio held by {} LRU-add batch slot(s) has refcount {} (expected {}): {}", n,
             f->refcount, n, folio_state(f));
      if (f->flags & PG_locked) fail(INV_LOCK, "folio left locked: {}", folio_state(f));
      accounted_pages_ += uint64_t(folio_nr_pages(f));
    }
  }

  // What a folio says of itself (run_local()).
  void check_folio_alone(const folio* f) {
    const long nr = folio_nr_pages(f);
    if (!folio_test_anon(f) && !f->mapping)
      fail(INV_RMAP, "a mapped folio is neither anon nor in a page cache: {}", folio_state(f));
    if (folio_test_large(f)) {
      long sum = 0;
      for (long p = 0; p < nr; ++p) sum += f[p].mapcount;
      if (f->large_mapcount != sum + f->entire_mapcount)
        fail(INV2, "large_mapcount {} != sum of page mapcounts {} + entire_mapcount {}: {}", f->large_mapcount, sum,
             f->entire_mapcount, folio_state(f));
      for (long p = 1; p < nr; ++p)
        if (f[p].head_off != uint32_t(p) || (f[p].flags & PG_head) || f[p].refcount != 0)
          fail(INV2, "tail page {} of the folio is malformed: {}; {}", p, page_state(f + p), folio_state(f));
    }
    const int mapcount = folio_mapcount(f);
    if (mapcount < 1) fail(INV1, "a mapped folio has mapcount {}: {}", mapcount, folio_state(f));
    if (f->refcount < mapcount) fail(INV3, "refcount {} < mapcount {}: {}", f->refcount, mapcount, folio_state(f));
    if (f->flags & (PG_locked | PG_large_mapcount_locked))
      fail(INV_LOCK, "folio left {}: {}", (f->flags & PG_locked) ? "locked" : "with its large-mapcount lock held",
           folio_state(f));
  }

  void check_folio(const folio* f, const MapRec* r, size_t n) {
    const long nr = folio_nr_pages(f);
    const pfn_t hp = k_.page_to_pfn(f);
    const bool large = folio_test_large(f);
    if (large != (folio_order(f) > 0))
      fail(INV2, "PG_head does not match the folio order: {}", folio_state(f));
    pte_cnt_.assign(size_t(nr), 0);
    pte_wr_.assign(size_t(nr), 0);
    int n_pmd = 0, n_pte = 0;
    bool pmd_wr = false;
    per_mm_.clear();
    for (size_t i = 0; i < n; ++i) {
      const MapRec& m = r[i];
      if (m.pmd) {
        ++n_pmd;
        pmd_wr |= m.writable;
      } else {
        ++n_pte;
        ++pte_cnt_[m.pfn - hp];
        pte_wr_[m.pfn - hp] |= m.writable;
        if (folio_test_anon(f) && i > 0 && !r[i - 1].pmd && r[i - 1].pfn == m.pfn && r[i - 1].mm == m.mm)
          fail(INV5, "an anon page is mapped twice in one mm ({} and {}); {}", rec_state(r[i - 1]), rec_state(m),
               folio_state(f));
      }
      const int id = mms_[m.mm]->id;
      auto it = std::find_if(per_mm_.begin(), per_mm_.end(), [&](auto& pr) { return pr.first == id; });
      if (it == per_mm_.end()) per_mm_.emplace_back(id, 1);
      else ++it->second;
    }
    const bool anon = folio_test_anon(f);
    if (!anon && !f->mapping)
      fail(INV_RMAP, "a mapped folio is neither anon nor in a page cache: {}; mappings: {}", folio_state(f),
           recs_of(r, n, 0, true));

    // Invariant 1.
    for (long p = 0; p < nr; ++p)
      if (f[p].mapcount != pte_cnt_[p])
        fail(INV1, "page mapcount {} but {} PTE(s) map it: {}; {}; mappings: {}", f[p].mapcount, pte_cnt_[p],
             page_state(f + p), folio_state(f), recs_of(r, n, hp + p, false));
    if (large) {
      if (f->entire_mapcount != n_pmd)
        fail(INV1, "entire_mapcount {} but {} PMD(s) map the folio: {}; mappings: {}", f->entire_mapcount, n_pmd,
             folio_state(f), recs_of(r, n, 0, true));
      if (f->large_mapcount != n_pte + n_pmd)
        fail(INV1, "large_mapcount {} but {} PTE(s) and {} PMD(s) map the folio: {}; mappings: {}",
             f->large_mapcount, n_pte, n_pmd, folio_state(f), recs_of(r, n, 0, true));
    } else if (n_pmd) {
      fail(INV_PT, "a PMD maps a small folio: {}", folio_state(f));
    }

    // Invariant 2.
    if (large) {
      long sum = 0, mapped = 0;
      for (long p = 0; p < nr; ++p) {
        sum += f[p].mapcount;
        mapped += f[p].mapcount >= 1;
      }
      if (f->large_mapcount != sum + f->entire_mapcount)
        fail(INV2, "large_mapcount {} != sum of page mapcounts {} + entire_mapcount {}: {}", f->large_mapcount, sum,
             f->entire_mapcount, folio_state(f));
      if (f->nr_pages_mapped < 0 || (f->nr_pages_mapped & ~(ENTIRELY_MAPPED | FOLIO_PAGES_MAPPED)))
        fail(INV2, "nr_pages_mapped {:#x} is malformed: {}", f->nr_pages_mapped, folio_state(f));
      if ((f->nr_pages_mapped & FOLIO_PAGES_MAPPED) != mapped)
        fail(INV2, "nr_pages_mapped & FOLIO_PAGES_MAPPED = {} but {} page(s) have mapcount >= 1: {}",
             f->nr_pages_mapped & FOLIO_PAGES_MAPPED, mapped, folio_state(f));
      if (bool(f->nr_pages_mapped & ENTIRELY_MAPPED) != (f->entire_mapcount >= 1))
        fail(INV2, "ENTIRELY_MAPPED is {} but entire_mapcount is {}: {}",
             (f->nr_pages_mapped & ENTIRELY_MAPPED) ? "set" : "clear", f->entire_mapcount, folio_state(f));
      for (long p = 1; p < nr; ++p)
        if (f[p].head_off != uint32_t(p) || (f[p].flags & PG_head))
          fail(INV2, "tail page {} of the folio is malformed: {}; {}", p, page_state(f + p), folio_state(f));
      check_mm_ids(f);
    }

    // Invariant 3.
    const int mapcount = folio_mapcount(f);
    int lru = 0;
    if (auto it = lru_refs_.find(f); it != lru_refs_.end()) {
      lru = it->second;
      lru_refs_.erase(it);
    }
    if (f->refcount < mapcount)
      fail(INV3, "refcount {} < mapcount {}: {}", f->refcount, mapcount, folio_state(f));
    // A page-cache folio: one more reference per page for the cache (__filemap_add_folio()).
    const int cache = anon ? 0 : int(nr);
    if (!folio_maybe_dma_pinned(f) && !folio_test_swapcache(f) && f->refcount != mapcount + lru + cache)
      fail(INV3, "refcount {} != mapcount {} + {} LRU-add batch reference(s) + {} page-cache reference(s) (no "
           "pins, no pending mmu_gather at a quiescent point): {}; mappings: {}", f->refcount, mapcount, lru, cache,
           folio_state(f), recs_of(r, n, 0, true));
    if (!anon) {
      check_cached_folio(f);
      for (size_t i = 0; i < n; ++i) check_file_rmap(f, hp, r[i]);
      return;
    }
    for (long p = 1; p < nr; ++p)
      if (f[p].refcount != 0)
        fail(INV3, "tail page {} has refcount {} (tails hold none): {}", p, f[p].refcount, folio_state(f));
    if (f->flags & (PG_locked | PG_large_mapcount_locked))
      fail(INV_LOCK, "folio left {}: {}", (f->flags & PG_locked) ? "locked" : "with its large-mapcount lock held",
           folio_state(f));

    // Invariants 6, 4, 5 per page.
    for (long p = 0; p < nr; ++p) {
      const int total = pte_cnt_[p] + n_pmd;
      if (total == 0) continue;
      if (total >= 2 && (pte_wr_[p] || pmd_wr))
        fail(INV6, "a page mapped {} times is writable in a mapping: {}; {}; mappings: {}", total,
             page_state(f + p), folio_state(f), recs_of(r, n, hp + p, false));
      if (pte_wr_[p] && !PageAnonExclusive(f + p))
        fail(INV4, "a writable PTE maps a page without PageAnonExclusive: {}; {}; mappings: {}", page_state(f + p),
             folio_state(f), recs_of(r, n, hp + p, false));
      if (PageAnonExclusive(f + p) && total >= 2)
        fail(INV5, "a PageAnonExclusive page is mapped {} times: {}; {}; mappings: {}", total, page_state(f + p),
             folio_state(f), recs_of(r, n, hp + p, false));
    }
    if (pmd_wr && !PageAnonExclusive(f))
      fail(INV4, "a writable PMD maps a folio whose head is not PageAnonExclusive: {}; mappings: {}",
           folio_state(f), recs_of(r, n, 0, true));
    if (n_pmd && PageAnonExclusive(f) && (n_pmd != 1 || f->entire_mapcount != 1 || n_pte))
      fail(INV5, "a PMD-mapped PageAnonExclusive head needs entire_mapcount 1 and no PTE mapping, but {} PMD(s) "
           "and {} PTE(s) map it: {}; mappings: {}", n_pmd, n_pte, folio_state(f), recs_of(r, n, 0, true));

    // anon rmap: anon_vma and index (__folio_set_anon, folio_move_anon_rmap, anon_vma_fork).
    for (size_t i = 0; i < n; ++i) check_rmap(f, hp, r[i]);
  }

  // Page cache (docs/research-filemap-swap-io.md §8, invariant 1): the folio is its mapping's at
  // its index, uptodate, not PageAnonExclusive, not left locked.
  void check_cached_folio(const folio* f) {
    const address_space* m = f->mapping;
    auto it = m->i_pages.find(f->index);
    if (it == m->i_pages.end() || it->second != f)
      fail(INV_CACHE, "folio->mapping is file {} ({}) but its page cache holds {} at index {:#x}: {}", m->ino, m->name,
           it == m->i_pages.end() ? "nothing" : "another folio", f->index, folio_state(f));
    if (!folio_test_uptodate(f)) fail(INV_CACHE, "a page-cache folio is not uptodate: {}", folio_state(f));
    if (f->flags & (PG_anon | PG_anon_exclusive))
      fail(INV_CACHE, "a page-cache folio is marked anon or PageAnonExclusive: {}", folio_state(f));
    if (f->flags & PG_locked) fail(INV_LOCK, "folio left locked: {}", folio_state(f));
  }

  // A PTE that maps a page-cache page (invariant 2 of §8): in a VMA of the same file at the page's
  // offset; writable only in a shared mapping, and then the folio is dirty.
  void check_file_rmap(const folio* f, pfn_t hp, const MapRec& m) {
    const vm_area_struct* v = m.vma;
    if (v->vm_file != f->mapping)
      fail(INV_CACHE, "a page of file {} is mapped in a VMA of {}: {}; {}; {}", f->mapping->ino,
           v->vm_file ? std::to_string(v->vm_file->ino) : "no file (anonymous)", rec_state(m), vma_state(v),
           folio_state(f));
    const uint64_t linear = v->vm_pgoff + ((m.va - v->vm_start) >> PAGE_SHIFT);
    if (linear != f->index + (m.pfn - hp))
      fail(INV_CACHE, "file page index {:#x} mapped at linear_page_index {:#x}: {}; {}; {}", f->index + (m.pfn - hp),
           linear, rec_state(m), vma_state(v), folio_state(f));
    // CACHE-L4 (filemap_map_pages()'s end_pgoff clamp to the last page, filemap_fault()'s
    // SIGBUS at or past i_size): no PTE maps a file page at or past the end of the file.
    if (const uint64_t eof = (f->mapping->i_size + PAGE_SIZE - 1) >> PAGE_SHIFT; linear >= eof)
      fail(INV_CACHE, "file {} ({} pages): page index {:#x} at or past the end of the file is mapped: {}; {}; {}",
           f->mapping->ino, eof, linear, rec_state(m), vma_state(v), folio_state(f));
    // A PMD (do_set_pmd(), finish_fault()'s needs_fallback): the head of an order-9 folio, in a
    // VMA whose file offset is 2 MiB-aligned with its address (thp_vma_suitable_order()), and the
    // whole folio before the end of the file.
    if (m.pmd) {
      const uint64_t eof = (f->mapping->i_size + PAGE_SIZE - 1) >> PAGE_SHIFT;
      if (m.pfn != hp || folio_order(f) != HPAGE_PMD_ORDER ||
          ((v->vm_start >> PAGE_SHIFT) - v->vm_pgoff) % HPAGE_PMD_NR != 0 || f->index + HPAGE_PMD_NR > eof)
        fail(INV_CACHE, "file {} ({} pages): a PMD maps page-cache folio at index {:#x} {}: {}; {}; {}",
             f->mapping->ino, eof, f->index,
             m.pfn != hp || folio_order(f) != HPAGE_PMD_ORDER ? "that is not a whole order-9 folio"
             : f->index + HPAGE_PMD_NR > eof                  ? "across the end of the file"
                                                              : "in a VMA whose offset is not 2 MiB-aligned with it",
             rec_state(m), vma_state(v), folio_state(f));
    }
    if (m.writable && !(v->vm_flags & VM_SHARED))
      fail(INV_CACHE, "a page-cache page is writable in a private mapping (a write must copy it): {}; {}; {}",
           rec_state(m), vma_state(v), folio_state(f));
    if (m.writable && !folio_test_dirty(f))
      fail(INV_CACHE, "a page-cache page is writable but the folio is not dirty: {}; {}", rec_state(m), folio_state(f));
  }

  // The LRU lists (mm/vmscan.c, include/linux/mm_inline.h): each list well linked, its folios on
  // it by their type and PG_active, of its node, counted; every mapped or cached folio (not the
  // huge zero folio) is on one of the lists or in an LRU-add batch, not both, and PG_lru says which.
  void check_lru() {
    std::unordered_set<const folio*> listed, batched;
    const uint64_t max_steps = k_.nr_frames() + 1;
    for (const auto& memcg : k_.memcgs())
    for (const lruvec& lv : memcg->nodeinfo) {
      for (unsigned l = 0; l < NR_LRU_LISTS; ++l) {
        const lruvec::list& list = lv.lists[l];
        uint64_t pages = 0, steps = 0;
        pfn_t prev = 0;
        for (pfn_t p = list.head; p; p = k_.pfn_to_page(p)->lru_next) {
          const folio* f = k_.pfn_to_page(p);
          if (++steps > max_steps) {
            fail(INV_LRU, "node {} list {}: a cycle", lv.nid, l);
            break;
          }
          if (f->lru_prev != prev)
            fail(INV_LRU, "node {} list {}: pfn {:#x} links back to {:#x}, not {:#x}", lv.nid, l, p, f->lru_prev, prev);
          if (f->head_off != 0 || f->refcount <= 0 || (f->flags & (PG_buddy | PG_table | PG_reserved)))
            fail(INV_LRU, "node {} list {} holds a page that is not an allocated user folio: {}", lv.nid, l, folio_state(f));
          if (!folio_test_lru(f)) fail(INV_LRU, "a folio on an LRU list without PG_lru: {}", folio_state(f));
          if (folio_lru_list(f) != l)
            fail(INV_LRU, "a folio on list {} belongs on list {} (anon {}, active {}): {}", l, unsigned(folio_lru_list(f)),
                 folio_test_anon(f), folio_test_active(f), folio_state(f));
          if (k_.pfn_to_nid(p) != lv.nid)
            fail(INV_LRU, "a folio of node {} on node {}'s list: {}", k_.pfn_to_nid(p), lv.nid, folio_state(f));
          if (f->memcg_id != memcg->id)
            fail(INV_LRU, "a folio charged to memcg {} on memcg {}'s list: {}", f->memcg_id, memcg->id, folio_state(f));
          if (!listed.insert(f).second) fail(INV_LRU, "a folio on two LRU lists: {}", folio_state(f));
          pages += uint64_t(folio_nr_pages(f));
          prev = p;
        }
        if (prev != list.tail) fail(INV_LRU, "node {} list {}: tail {:#x}, the last folio {:#x}", lv.nid, l, list.tail, prev);
        if (pages != list.nr_pages)
          fail(INV_LRU, "node {} list {}: nr_pages {} but it holds {}", lv.nid, l, list.nr_pages, pages);
      }
    }
    for (const auto& b : priv_.lru_batch)
      for (const folio* f : b) batched.insert(f);
    for (const folio* f : batched)
      if (folio_test_lru(f) || listed.count(f)) fail(INV_LRU, "a folio in an LRU-add batch and on a list: {}", folio_state(f));
    // A memcg's page counter is the pages of the folios charged to it, each on an LRU list or in
    // a batch between kernel entries (the root counts nothing).
    std::vector<uint64_t> charged(k_.memcgs().size(), 0);
    for (const auto* set : {&listed, &batched})
      for (const folio* f : *set) {
        if (f->memcg_id >= charged.size()) fail(INV_LRU, "a folio charged to memcg {}, which does not exist: {}", f->memcg_id, folio_state(f));
        else charged[f->memcg_id] += uint64_t(folio_nr_pages(f));
      }
    for (const auto& memcg : k_.memcgs()) {
      const uint64_t expect = memcg->id ? charged[memcg->id] : 0;
      if (memcg->usage != expect)
        fail(INV_LRU, "memcg {} ('{}'): usage {} pages but its folios hold {}", memcg->id, memcg->name, memcg->usage, expect);
      if (memcg->usage > memcg->max)
        fail(INV_LRU, "memcg {} ('{}'): usage {} pages over memory.max {}", memcg->id, memcg->name, memcg->usage, memcg->max);
    }
    auto on_lru = [&](const folio* f) {
      if (is_huge_zero(k_.page_to_pfn(f)) || (f->flags & PG_reserved)) return;  // (the zero pages)
      const bool l = listed.count(f) != 0;
      if (l == (batched.count(f) != 0))
        fail(INV_LRU, "a {} folio is {} (every user folio is on an LRU list or in an LRU-add batch): {}",
             f->mapping ? "page-cache" : "mapped", l ? "on a list and in a batch" : "on no list and in no batch",
             folio_state(f));
      if (folio_test_lru(f) != l) fail(INV_LRU, "PG_lru {} but on a list {}: {}", folio_test_lru(f), l, folio_state(f));
    };
    const folio* last = nullptr;
    for (const MapRec& m : recs_) {
      const folio* f = page_folio(k_.pfn_to_page(m.pfn));
      if (f != last) on_lru(f);
      last = f;
    }
    for (const auto& up : k_.files())
      for (const auto& [index, f] : up->i_pages) on_lru(f);
  }

  // The page-cache folios no page table maps: the cache's reference (and LRU-add batch slots) only.
  void check_page_cache() {
    // Writeback accounting (page_writeback.cpp): NR_FILE_DIRTY and NR_WRITEBACK, global and per
    // memcg, are the dirty and the under-writeback page-cache pages; a dirty folio's index is
    // tagged dirty; a file with tagged indices is on the dirty-inode list.
    uint64_t dirty = 0, writeback = 0;
    std::vector<uint64_t> memcg_dirty(k_.memcgs().size()), memcg_writeback(k_.memcgs().size());
    // NR_ZONE_WRITE_PENDING per node: those dirty and under-writeback page-cache pages, and the
    // swap cache's folios under writeback.
    std::vector<uint64_t> write_pending(priv_.node_write_pending.size());
    for (const auto& [entry, f] : priv_.swap_cache)
      if (folio_test_writeback(f)) write_pending.at(size_t(k_.pfn_to_nid(k_.page_to_pfn(f)))) += uint64_t(folio_nr_pages(f));
    for (const auto& up : k_.files()) {
      const address_space* m = up.get();
      for (const auto& [index, f] : m->i_pages) {
        const uint64_t nr = uint64_t(folio_nr_pages(f));
        if (folio_test_dirty(f)) {
          dirty += nr;
          memcg_dirty.at(f->memcg_id) += nr;
          if (!m->dirty_tags.count(index))
            fail(INV_CACHE, "file {} ({}): a dirty folio's index {:#x} is not tagged dirty: {}", m->ino, m->name,
                 index, folio_state(f));
        }
        if (folio_test_writeback(f)) {
          writeback += nr;
          memcg_writeback.at(f->memcg_id) += nr;
        }
        // (A folio dirtied again under writeback counts twice, as the kernel's two increments do.)
        write_pending.at(size_t(k_.pfn_to_nid(k_.page_to_pfn(f)))) +=
            nr * (uint64_t(folio_test_dirty(f)) + uint64_t(folio_test_writeback(f)));
      }
      if (!m->dirty_tags.empty() && !m->inode_dirty)
        fail(INV_CACHE, "file {} ({}): {} indices tagged dirty but the inode is not dirty", m->ino, m->name,
             m->dirty_tags.size());
    }
    if (dirty != k_.nr_file_dirty() || writeback != k_.nr_writeback())
      fail(INV_CACHE, "NR_FILE_DIRTY {} and NR_WRITEBACK {} but the page cache holds {} dirty and {} under writeback",
           k_.nr_file_dirty(), k_.nr_writeback(), dirty, writeback);
    for (size_t n = 0; n < write_pending.size(); ++n)
      if (write_pending[n] != priv_.node_write_pending[n])
        fail(INV_CACHE, "node {}: NR_ZONE_WRITE_PENDING {} but {} pages are dirty or under writeback", n,
             priv_.node_write_pending[n], write_pending[n]);
    for (size_t i = 0; i < k_.memcgs().size(); ++i)
      if (memcg_dirty[i] != k_.memcgs()[i]->nr_file_dirty || memcg_writeback[i] != k_.memcgs()[i]->nr_writeback)
        fail(INV_CACHE, "memcg {}: file_dirty {} and file_writeback {} but its page cache holds {} dirty and {} "
             "under writeback", i, k_.memcgs()[i]->nr_file_dirty, k_.memcgs()[i]->nr_writeback, memcg_dirty[i],
             memcg_writeback[i]);
    // NR_FILE_THPS and NR_FILE_PMDMAPPED: the cached folios of PMD order, and those of them that a
    // PMD maps.
    uint64_t thps = 0, pmdmapped = 0;
    for (const auto& up : k_.files())
      for (const auto& [index, f] : up->i_pages)
        if (folio_test_pmd_mappable(f)) {
          thps += uint64_t(folio_nr_pages(f));
          if (f->entire_mapcount > 0) pmdmapped += uint64_t(folio_nr_pages(f));
        }
    if (thps != k_.nr_file_thps() || pmdmapped != k_.nr_file_pmdmapped())
      fail(INV_CACHE, "NR_FILE_THPS {} and NR_FILE_PMDMAPPED {} but the page cache holds {} pages in PMD-order folios, {} "
           "of them PMD-mapped", k_.nr_file_thps(), k_.nr_file_pmdmapped(), thps, pmdmapped);
    for (const auto& up : k_.files()) {
      const address_space* m = up.get();
      // CACHE-L2: no shadow at an index a cached folio covers (a large folio's whole range).
      for (const auto& [index, shadow] : m->shadows)
        if (filemap_get_entry(m, index) || shadow.memcgid >= k_.memcgs().size())
          fail(INV_CACHE, "file {} ({}): a shadow entry at index {:#x} {}", m->ino, m->name, index,
               filemap_get_entry(m, index) ? "where a folio is cached" : "of a memcg that does not exist");
      uint64_t pages = 0;
      uint64_t next_free = 0;  // the first index after the previous folio
      const uint64_t eof = (m->i_size + PAGE_SIZE - 1) >> PAGE_SHIFT;
      for (const auto& [index, f] : m->i_pages) {
        const uint64_t nr = uint64_t(folio_nr_pages(f));
        pages += nr;
        if (f->mapping != m || f->index != index || f->head_off != 0 || (f->flags & PG_buddy))
          fail(INV_CACHE, "file {} ({}): the page cache holds at index {:#x} a folio that is not its own: {}", m->ino,
               m->name, index, folio_state(f));
        // CACHE-L1 (__filemap_add_folio(), readahead's limit): a folio is naturally aligned, of an
        // order the mapping allows, overlaps no other, and starts before the end of the file.
        if (index % nr || folio_order(f) < mapping_min_folio_order(m) || folio_order(f) > mapping_max_folio_order(m) ||
            index < next_free || index >= eof)
          fail(INV_CACHE, "file {} ({}, {} pages, orders {}-{}): an order-{} folio at index {:#x} is {}: {}", m->ino,
               m->name, eof, mapping_min_folio_order(m), mapping_max_folio_order(m), folio_order(f), index,
               index % nr ? "not naturally aligned"
               : index < next_free ? "overlapping the folio before it"
               : index >= eof      ? "beyond the end of the file"
                                   : "of an order the mapping does not allow",
               folio_state(f));
        next_free = index + nr;
        // CACHE-L3: a large folio's state is its head's; no tail page holds page-cache state.
        for (uint64_t i = 1; i < nr; ++i)
          if (f[i].flags & (PG_locked | PG_uptodate | PG_dirty | PG_writeback | PG_readahead | PG_lru | PG_head))
            fail(INV_CACHE, "file {} ({}): tail page {} of the folio at index {:#x} holds folio flags {:#x}: {}",
                 m->ino, m->name, i, index, f[i].flags, folio_state(f));
        if (folio_mapcount(f) != 0) continue;  // checked with its mappings
        check_cached_folio(f);
        int lru = 0;
        if (auto it = lru_refs_.find(f); it != lru_refs_.end()) {
          lru = it->second;
          lru_refs_.erase(it);
        }
        if (f->refcount != int(folio_nr_pages(f)) + lru)
          fail(INV3, "an unmapped page-cache folio has refcount {} (expected {} for the cache + {} LRU-add batch "
               "slot(s)): {}", f->refcount, folio_nr_pages(f), lru, folio_state(f));
        accounted_pages_ += uint64_t(folio_nr_pages(f));
      }
      if (pages != m->nrpages)
        fail(INV_CACHE, "file {} ({}): nrpages {} but the page cache holds {} pages", m->ino, m->name, m->nrpages,
             pages);
    }
  }

  void check_rmap(const folio* f, pfn_t hp, const MapRec& m) {
    const vm_area_struct* v = m.vma;
    if (!v->anon)
      fail(INV_RMAP, "an anon folio is mapped in a VMA without anon_vma: {}; {}; {}", rec_state(m), vma_state(v),
           folio_state(f));
    const uint32_t av = f->anon_vma;
    if (av == 0) fail(INV_RMAP, "a mapped anon folio has no anon_vma: {}; {}", rec_state(m), folio_state(f));
    if (av != v->anon->id && av != v->anon->root_id) {
      auto it = av_root_.find(av);
      if (it != av_root_.end() && it->second != v->anon->root_id)
        fail(INV_RMAP, "folio->anon_vma {} (root {}) is not in the anon_vma chain of the mapping VMA: {}; {}; {}",
             av, it->second, rec_state(m), vma_state(v), folio_state(f));
    }
    const uint64_t linear = v->vm_pgoff + ((m.va - v->vm_start) >> PAGE_SHIFT);
    const uint64_t idx = f->index + (m.pmd ? 0 : m.pfn - hp);
    if (linear != idx)
      fail(INV_RMAP, "page index {:#x} (folio->index {:#x}) != linear_page_index {:#x} of the mapping: {}; {}; {}",
           idx, f->index, linear, rec_state(m), vma_state(v), folio_state(f));
  }

  void check_mm_ids(const folio* f) {
    const bool shared = f->mm_ids & FOLIO_MM_IDS_SHARED_BIT;
    const bool in_use[2] = {f->mm_id[0] != MM_ID_DUMMY, f->mm_id[1] != MM_ID_DUMMY};
    auto actual = [&](mm_id_t id) {
      for (auto& [mid, c] : per_mm_)
        if (mid == id) return c;
      return 0;
    };
    for (int s = 0; s < 2; ++s) {
      if (!in_use[s]) {
        if (f->mm_id_mapcount[s] != -1)
          fail(INV2_MMID, "free MM-id slot {} has mapcount {} (must be -1): {}", s, f->mm_id_mapcount[s],
               folio_state(f));
        continue;
      }
      const int slot = f->mm_id_mapcount[s] + 1;
      if (slot < 1)
        fail(INV2_MMID, "MM-id slot {} (mm {}) is in use with mapcount {}: {}", s, f->mm_id[s],
             f->mm_id_mapcount[s], folio_state(f));
      if (slot > actual(f->mm_id[s]))
        fail(INV2_MMID, "MM-id slot {} says mm {} maps the folio {} time(s) but it maps it {} time(s): {}", s,
             f->mm_id[s], slot, actual(f->mm_id[s]), folio_state(f));
    }
    if (in_use[0] && in_use[1]) {
      if (f->mm_id[0] == f->mm_id[1])
        fail(INV2_MMID, "both MM-id slots hold mm {}: {}", f->mm_id[0], folio_state(f));
      if (!shared) fail(INV2_MMID, "both MM-id slots are in use but the SHARED bit is clear: {}", folio_state(f));
    }
    const bool tracking = k_.params().large_folio_reuse || in_use[0] || in_use[1] || shared;
    if (!tracking || f->large_mapcount == 0) return;
    if (per_mm_.size() >= 2 && !shared)
      fail(INV2_MMID, "{} mms map the folio but the SHARED bit is clear: {}", per_mm_.size(), folio_state(f));
    if (!shared) {
      bool owner = false;
      for (int s = 0; s < 2; ++s) owner |= in_use[s] && f->mm_id_mapcount[s] + 1 == f->large_mapcount;
      if (!owner)
        fail(INV2_MMID, "the SHARED bit is clear but no MM-id slot holds all {} mappings: {}", f->large_mapcount,
             folio_state(f));
    }
  }

  // ---- per mm counters (invariant 7) -----------------------------------------------------------
  void check_mm_counters() {
    for (uint32_t i = 0; i < mms_.size(); ++i) {
      const mm_struct* mm = mms_[i];
      const MmTally& t = tally_[i];
      const int64_t anon = int64_t(t.anon_ptes + uint64_t(HPAGE_PMD_NR) * t.anon_pmds);
      if (get_mm_counter(mm, MM_ANONPAGES) != anon)
        fail(INV7_RSS, "mm {}: MM_ANONPAGES {} but {} anon PTE(s) + {} anon PMD(s) x {} = {}", mm->id,
             get_mm_counter(mm, MM_ANONPAGES), t.anon_ptes, t.anon_pmds, HPAGE_PMD_NR, anon);
      const int64_t file = int64_t(t.file_ptes + uint64_t(HPAGE_PMD_NR) * t.file_pmds);
      if (get_mm_counter(mm, MM_FILEPAGES) != file)
        fail(INV7_RSS, "mm {}: MM_FILEPAGES {} but {} PTE(s) + {} PMD(s) x {} map page-cache pages", mm->id,
             get_mm_counter(mm, MM_FILEPAGES), t.file_ptes, t.file_pmds, HPAGE_PMD_NR);
      if (get_mm_counter(mm, MM_SWAPENTS) != int64_t(t.swap_ptes))
        fail(INV7_RSS, "mm {}: MM_SWAPENTS {} but {} swap PTE(s)", mm->id, get_mm_counter(mm, MM_SWAPENTS),
             t.swap_ptes);
      if (get_mm_counter(mm, MM_SHMEMPAGES) != 0)
        fail(INV7_RSS, "mm {}: MM_SHMEMPAGES is {} (no shmem pages in this port)", mm->id,
             get_mm_counter(mm, MM_SHMEMPAGES));
      const int64_t bytes = int64_t(t.tables * PAGE_SIZE);
      if (mm->pgtables_bytes != bytes)
        fail(INV7_PGT, "mm {}: pgtables_bytes {} but the PUD/PMD/PTE and deposited tables present take {} ({} "
             "tables)", mm->id, mm->pgtables_bytes, bytes, t.tables);
    }
  }

  // ---- swap (invariant SWAP) ------------------------------------------------------------------
  // Each slot's swap count is the swap PTEs that hold it, its SWAP_HAS_CACHE bit says whether the
  // swap cache has a folio for it; a swap-cache folio is PG_swapcache with its entry and one
  // reference per page for the cache, and unmapped it is not PageAnonExclusive (memory.c:4478);
  // inuse_pages counts the slots in use.
  void check_swap() {
    const auto* si = k_.swap_info();
    if (!si) {
      if (!swap_refs_.empty() || !priv_.swap_cache.empty()) fail(INV_SWAP, "swap entries without a swap device");
      return;
    }
    constexpr uint8_t HAS_CACHE = 0x40;
    uint64_t inuse = 0;
    for (uint64_t off = 1; off < si->max; ++off) {
      const uint8_t m = si->swap_map[off];
      if (m) ++inuse;
      auto it = swap_refs_.find(off);
      const uint64_t ptes = it == swap_refs_.end() ? 0 : it->second;
      if (uint64_t(m & ~HAS_CACHE) != ptes)
        fail(INV_SWAP, "swap slot {}: swap count {} but {} swap PTE(s) hold it", off, m & ~HAS_CACHE, ptes);
      const bool cached = priv_.swap_cache.count(swp_entry(0, off).val) != 0;
      if (bool(m & HAS_CACHE) != cached)
        fail(INV_SWAP, "swap slot {}: SWAP_HAS_CACHE {} but the swap cache {} a folio for it", off,
             bool(m & HAS_CACHE), cached ? "has" : "has no");
    }
    if (inuse != si->inuse_pages)
      fail(INV_SWAP, "swap: {} slots in use but inuse_pages {}", inuse, si->inuse_pages);
    // A memcg's swap counter is the slots recorded for it (swap_cgroup), within memory.swap.max;
    // a free slot belongs to no memcg.
    std::vector<uint64_t> swapped(k_.memcgs().size(), 0);
    for (uint64_t off = 1; off < si->max; ++off) {
      const uint16_t id = si->swap_cgroup[off];
      if (id >= swapped.size()) fail(INV_SWAP, "swap slot {}: recorded for memcg {}, which does not exist", off, id);
      else if (id && !si->swap_map[off]) fail(INV_SWAP, "swap slot {}: free but recorded for memcg {}", off, id);
      else ++swapped[id];
    }
    for (const auto& memcg : k_.memcgs()) {
      if (memcg->id && memcg->swap_usage != swapped[memcg->id])
        fail(INV_SWAP, "memcg {} ('{}'): swap usage {} but {} slots recorded for it", memcg->id, memcg->name,
             memcg->swap_usage, swapped[memcg->id]);
      if (memcg->swap_usage > memcg->swap_max)
        fail(INV_SWAP, "memcg {} ('{}'): swap usage {} over memory.swap.max {}", memcg->id, memcg->name,
             memcg->swap_usage, memcg->swap_max);
    }
    for (const auto& [val, f] : priv_.swap_cache) {
      if (!folio_test_swapcache(f) || f->swap != val || f->refcount < int(folio_nr_pages(f)))
        fail(INV_SWAP, "swap cache entry {:#x}: {} (PG_swapcache, folio->swap and the cache's references)", val,
             folio_state(f));
      if (!folio_mapped(f) && PageAnonExclusive(f))
        fail(INV_SWAP, "an unmapped swap-cache page is PageAnonExclusive: {}", folio_state(f));
    }
  }

  // ---- the allocator ---------------------------------------------------------------------------
  void check_free_lists() {
    uint64_t sum = 0;
    for (size_t nid = 0; nid < priv_.free_area.size(); ++nid)
      for (unsigned o = 0; o <= MAX_PAGE_ORDER; ++o)
        for (pfn_t pfn : priv_.free_area[nid][o]) {
          const page* p = k_.pfn_to_page(pfn);
          if (!(p->flags & PG_buddy) || p->order != o || p->refcount != 0 || p->mapcount != 0 ||
              p->large_mapcount != 0 || p->entire_mapcount != 0)
            fail(INV3_FREE, "free block of order {} at pfn {:#x} is not a clean free page: {}", o, pfn, folio_state(p));
          // A block never spans two nodes, and is on its own node's lists.
          const pfn_t last = pfn + (pfn_t(1) << o) - 1;
          if (k_.pfn_to_nid(pfn) != int(nid) || k_.pfn_to_nid(last) != int(nid))
            fail(INV3_FREE, "free block of order {} at pfn {:#x} is on node {}'s lists but its frames are on "
                 "nodes {} to {}", o, pfn, nid, k_.pfn_to_nid(pfn), k_.pfn_to_nid(last));
          sum += uint64_t(1) << o;
        }
    if (sum != k_.nr_free_pages())
      fail(INV3_FREE, "the free lists hold {} pages but nr_free_pages() is {}", sum, k_.nr_free_pages());
  }

  void check_leaks() {
    uint64_t accounted = accounted_pages_ + tables_.size();
    if (priv_.huge_zero && priv_.huge_zero->refcount > 0) accounted += uint64_t(folio_nr_pages(priv_.huge_zero));
    // pfn 0 and the zero page are reserved, never in the allocator.
    const uint64_t allocated = k_.nr_frames() - 2 - k_.nr_free_pages() - k_.nr_pending_free_pages();
    if (accounted == allocated) return;
    // Find examples (slow path, only on failure): allocated heads nothing accounted for.
    std::vector<pfn_t> known(tables_);
    for (const MapRec& m : recs_) known.push_back(k_.page_to_pfn(page_folio(k_.pfn_to_page(m.pfn))));
    for (const auto& [f, n] : lru_refs_) known.push_back(k_.page_to_pfn(f));
    for (const auto& m : k_.files())
      for (const auto& [index, f] : m->i_pages) known.push_back(k_.page_to_pfn(f));
    std::sort(known.begin(), known.end());
    std::string ex;
    int shown = 0;
    for (pfn_t pfn = 2; pfn < k_.nr_frames() && shown < 4; ++pfn) {
      const page* p = k_.pfn_to_page(pfn);
      if (p->head_off != 0 || p->refcount <= 0 || (p->flags & (PG_buddy | PG_reserved))) continue;
      if (is_huge_zero(pfn) || std::binary_search(known.begin(), known.end(), pfn)) continue;
      if (folio_mapcount(p) != 0)
        fail(INV1, "folio mapcount {} but no page table maps it: {}", folio_mapcount(p), folio_state(p));
      ex += fmt::format("{}{}", shown++ ? "; " : "", folio_state(p));
    }
    fail(INV3_LEAK, "{} pages are allocated but {} are accounted for (page tables {}, mapped or LRU-batched folios "
         "{}, huge zero folio); unaccounted: {}", allocated, accounted, tables_.size(), accounted_pages_,
         ex.empty() ? "none found" : ex);
  }

  // ---- TLBs (invariant 8) ----------------------------------------------------------------------
  struct Leaf {
    bool present = false;
    pfn_t pfn = 0;
    bool writable = false;
    uint64_t entry = 0;
    bool huge = false;
  };
  Leaf lookup(const mm_struct* mm, uint64_t va) const {
    Leaf r;
    const uint64_t* pgdt = table(mm->pgd >> PAGE_SHIFT);
    if (!pgdt) return r;
    uint64_t e = pgdt[(va >> PGDIR_SHIFT) & (PTRS_PER_PGD - 1)];
    if (!arch_.table_present(e)) return r;
    const uint64_t* pudt = table(arch_.table_pfn(e));
    if (!pudt) return r;
    e = pudt[(va >> PUD_SHIFT) & (PTRS_PER_PUD - 1)];
    if (!arch_.table_present(e)) return r;
    const uint64_t* pmdt = table(arch_.table_pfn(e));
    if (!pmdt) return r;
    const pmd_t pmd{pmdt[(va >> PMD_SHIFT) & (PTRS_PER_PMD - 1)]};
    if (pmd_none(pmd)) return r;
    if (arch_.pmd_trans_huge(pmd)) {
      r.present = pgf::decode(isa_, pmd.val, 1).valid;
      r.pfn = arch_.pmd_pfn(pmd) + ((va >> PAGE_SHIFT) & (HPAGE_PMD_NR - 1));
      r.writable = arch_.pmd_write(pmd);
      r.entry = pmd.val;
      r.huge = true;
      return r;
    }
    if (!arch_.table_present(pmd.val)) return r;
    const uint64_t* pt = table(arch_.table_pfn(pmd.val));
    if (!pt) return r;
    const pte_t pte{pt[(va >> PAGE_SHIFT) & (PTRS_PER_PTE - 1)]};
    r.entry = pte.val;
    if (pte_none(pte) || !pgf::decode(isa_, pte.val, 0).valid) return r;
    r.present = true;
    r.pfn = arch_.pte_pfn(pte);
    r.writable = arch_.pte_write(pte);
    return r;
  }

  void check_tlbs() {
    if (!priv_.tlb_enum) return;
    std::unordered_map<uint16_t, const mm_struct*> by_asid;
    for (const mm_struct* mm : mms_) by_asid[uint16_t(mm->id)] = mm;
    std::string violation;
    priv_.tlb_enum([&](const Kernel::CachedTranslation& t) {
      if (!violation.empty()) return;
      auto desc = [&] {
        return fmt::format("cpu {} asid {} va {:#x} size {:#x} pfn {:#x} {}", t.cpu, t.asid, t.va, t.page_size,
                           t.pfn, t.writable ? "writable" : "read-only");
      };
      auto it = by_asid.find(t.asid);
      if (it == by_asid.end()) {
        violation = fmt::format("a cached translation of an mm that no longer exists (not flushed): {}", desc());
        return;
      }
      const mm_struct* mm = it->second;
      // A CPU that will flush mm's entries before it uses them (x86 lazy TLB, or switched away,
      // with its generation of mm behind): they may be out of date.
      if (arch_.tlb_flush_deferred(t.cpu, mm)) return;
      const uint64_t size = t.page_size ? t.page_size : PAGE_SIZE;
      for (uint64_t off = 0; off < size;) {
        const uint64_t va = t.va + off;
        const pfn_t want = t.pfn + (off >> PAGE_SHIFT);
        const Leaf l = lookup(mm, va);
        if (!l.present) {
          violation = fmt::format("{}: the page tables of mm {} no longer map va {:#x} (entry {:#x})", desc(), mm->id,
                                  va, l.entry);
          return;
        }
        if (l.pfn != want) {
          violation = fmt::format("{}: va {:#x} is cached as pfn {:#x} but mm {} maps pfn {:#x} ({} {:#x})", desc(),
                                  va, want, mm->id, l.pfn, l.huge ? "PMD" : "PTE", l.entry);
          return;
        }
        if (t.writable && !l.writable) {
          violation = fmt::format("{}: a writable cached entry for va {:#x}, which mm {} maps read-only ({} {:#x})",
                                  desc(), va, mm->id, l.huge ? "PMD" : "PTE", l.entry);
          return;
        }
        // A PMD leaf covers the rest of its 2M at once.
        if (l.huge) {
          const uint64_t next = ALIGN_DOWN(va, PMD_SIZE) + PMD_SIZE;
          off = next - t.va;
        } else {
          off += PAGE_SIZE;
        }
      }
    });
    if (!violation.empty()) fail(INV8, "{}", violation);
  }

  Kernel& k_;
  Arch& arch_;
  const pgf::Isa isa_;
  const char* where_;
  const KernelPrivate& priv_;

  std::vector<mm_struct*> mms_;
  std::vector<MmTally> tally_;
  std::vector<MapRec> recs_;
  std::vector<pfn_t> tables_;
  std::vector<uint64_t> deposits_found_;
  std::unordered_map<uint32_t, uint32_t> av_root_;  // anon_vma id -> root id, of live VMAs
  std::map<uint64_t, uint64_t> swap_refs_;           // swap slot -> swap PTEs that hold it
  std::unordered_map<const folio*, int> lru_refs_;
  uint64_t accounted_pages_ = 0;
  // scratch, per folio
  std::vector<int> pte_cnt_;
  std::vector<uint8_t> pte_wr_;
  std::vector<std::pair<int, int>> per_mm_;
};

}  // namespace

// check_invariants(): see the top of this file.
void Kernel::check_local(const char* where, const mm_struct* mm, uint64_t addr) {
  if (!params_.check_local || !mm) return;
  ctr_.local_checks.inc();
  KernelPrivate priv{lru_batch_, deposited_, huge_zero_folio_, free_area_, tlb_enum_, swap_cache_, node_write_pending_};
  Checker(*this, where, priv).run_local(mm, addr);
}

void Kernel::check_invariants(const char* where, bool force) {
  if (!(params_.check_invariants || force)) return;
  if (!force && params_.check_every > 1 && ++checks_skipped_ % params_.check_every != 0) return;
  ctr_.invariant_checks.inc();
  KernelPrivate priv{lru_batch_, deposited_, huge_zero_folio_, free_area_, tlb_enum_, swap_cache_, node_write_pending_};
  Checker(*this, where, priv).run();
}

}  // namespace kmm
