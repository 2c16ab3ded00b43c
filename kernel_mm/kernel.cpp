// SPDX-License-Identifier: GPL-2.0-only
// Kernel construction, parameters, counters, the memmap and the buddy allocator
// (mm/page_alloc.c), folio references (include/linux/mm.h, mm/swap.c), the per-CPU LRU-add batch
// (mm/swap.c) and the huge-page zero/copy order (mm/memory.c: process_huge_page).
#include "kernel_mm/kernel.hpp"

#include <csignal>
#include <cstdlib>

#include "base/error.hpp"
#include "base/log.hpp"

namespace kmm {

using mmusim::fatal;
using mmusim::panic;

// ------------------------------------------------------------------------------------------------
// Parameters

void KernelParams::visit(mmusim::Params& p) {
  p.enumeration("kernel.wp_reuse", wp_reuse, WpReuse::off,
                {{"off", WpReuse::off},
                 {"block16", WpReuse::block16},
                 {"pagetable", WpReuse::pagetable},
                 {"pagetable+flush", WpReuse::pagetable_flush}},
                "Write-fault reuse of an exclusive large folio: off = mainline (the faulting PTE "
                "only), block16 = the patch's first version (aligned block of 16 PTEs), pagetable = "
                "the patch (whole folio within the VMA and page table), pagetable+flush = pagetable "
                "plus flush_tlb_local()");
  p.enumeration("kernel.fork_copy", fork_copy, ForkCopy::batched,
                {{"per-pte", ForkCopy::per_pte}, {"batched", ForkCopy::batched}},
                "fork() PTE copy: per-pte (before batching) or batched (6.12 copy_present_ptes "
                "with folio_pte_batch)");
  p.enumeration("kernel.huge_copy_order", huge_copy_order, HugeCopyOrder::target_last,
                {{"sequential", HugeCopyOrder::sequential}, {"target-last", HugeCopyOrder::target_last}},
                "Order of subpages when zeroing/copying a huge page: sequential, or target-last "
                "(process_huge_page: the faulting subpage last, so it is cache-hot)");
  p.enumeration("kernel.thp_cow", thp_cow, ThpCow::split,
                {{"split", ThpCow::split}, {"copy", ThpCow::copy}},
                "A write fault on a PMD-mapped THP that cannot be reused (shared after fork, or the "
                "huge zero page): split = 6.12 (split the PMD, copy 4K); copy = before 5.8 (allocate "
                "a THP and copy or zero the whole huge page in kernel.huge_copy_order)");
  p.enumeration("kernel.fault_retry", fault_retry, FaultRetry::fallback,
                {{"fallback", FaultRetry::fallback}, {"retry-once", FaultRetry::retry_once}},
                "After VM_FAULT_RETRY under the per-VMA lock: fall back to mmap_lock (mainline) or "
                "retry once more under the per-VMA lock (the patch)");
  p.enumeration("kernel.arm64_spurious_flush", arm64_spurious_flush, SpuriousFlush::none,
                {{"none", SpuriousFlush::none}, {"local", SpuriousFlush::local}},
                "arm64 flush_tlb_fix_spurious_fault(): none (6.12: empty) or local (v6.19: local "
                "TLBI VALE1 of the faulting page)");
  p.boolean("kernel.large_folio_reuse", large_folio_reuse, true,
            "wp_can_reuse_anon_folio() reuses an exclusive large folio one page per fault (v6.15+, "
            "the base the patch applies to); false = 6.12, which copies every page of a "
            "once-shared large folio");
  p.boolean("kernel.check_invariants", check_invariants, false,
            "Check every invariant of PORTMAP §3.3 after every kernel entry (slow; for testing)");
  p.boolean("kernel.check_local", check_local, false,
            "after every fault, DEBUG_VM-style checks at the point of change: the mm's VMAs and "
            "locks, the page table that maps the address (every entry's VMA and page) and the "
            "folios it maps (what a folio says of itself); cheap enough for a replayed program, "
            "with kernel.check_invariants and kernel.check_every for the whole check now and then");
  p.integer("kernel.check_every", check_every, 1, 1, int64_t(1) << 40,
            "with kernel.check_invariants: the whole check after every N-th kernel entry only (a "
            "long run, a replayed real program, at a fraction of the cost; a broken invariant is "
            "then found up to N entries after the one that broke it)");
  p.size("memory.size", phys_mem, "4G", 64ull << 20, 1ull << 40,
         "Simulated physical memory (sparse: only touched frames cost host memory; the memmap "
         "costs 80 bytes per frame touched)",
         PMD_SIZE);
  p.enumeration("thp.enabled", thp_enabled, ThpMode::always,
                {{"always", ThpMode::always}, {"madvise", ThpMode::madvise}, {"never", ThpMode::never}},
                "/sys/kernel/mm/transparent_hugepage/enabled");
  static const char* sizes[] = {"", "", "16kB", "32kB", "64kB", "128kB", "256kB", "512kB", "1024kB", "2048kB"};
  for (unsigned order = 2; order <= HPAGE_PMD_ORDER; ++order) {
    ThpMode def = order == HPAGE_PMD_ORDER ? ThpMode::inherit : ThpMode::never;
    p.enumeration(std::string("thp.hugepages_") + sizes[order], thp_order[order], def,
                  {{"always", ThpMode::always},
                   {"inherit", ThpMode::inherit},
                   {"madvise", ThpMode::madvise},
                   {"never", ThpMode::never}},
                  std::string("/sys/kernel/mm/transparent_hugepage/hugepages-") + sizes[order] +
                      "/enabled (order " + std::to_string(order) + ")");
  }
  p.boolean("thp.use_zero_page", thp_use_zero_page, true,
            "/sys/kernel/mm/transparent_hugepage/use_zero_page: map the huge zero page on a read "
            "fault of a PMD-sized range");
  p.enumeration("memory.numa", numa, NumaPolicy::first_touch,
                {{"first-touch", NumaPolicy::first_touch}, {"interleave", NumaPolicy::interleave}},
                "With several NUMA nodes (platform.sockets > 1, one node per socket, memory.size "
                "split evenly): where pages come from. first-touch = the default memory policy "
                "(MPOL_DEFAULT): the node of the CPU whose fault or allocation asks, another node "
                "only when that one is full; interleave = MPOL_INTERLEAVE: a VMA's folios by their "
                "offset in it, round robin over the nodes (interleave_nid()), other allocations "
                "(page tables) in turn. One node: no effect");
  p.integer("kernel.lru_batch", lru_batch, 31, 1, 1024,
            "Small folios waiting in the per-CPU LRU-add batch, each holding a reference "
            "(PAGEVEC_SIZE in 6.12)");
  p.size("memcg.max", memcg_max, "0", 0, 1ull << 40,
         "The workload's memory cgroup (cgroup v2 memory.max): every process runs in it and its "
         "anonymous and page-cache folios are charged to it; at the limit a charge reclaims from "
         "its LRU lists (clean page cache, and anonymous folios swapped out with swap.size), and a charge that still cannot be met "
         "stops the run (the memcg's OOM). 0: no cgroup, the root's unlimited memory",
         PAGE_SIZE);
  p.size("memcg.high", memcg_high, "0", 0, 1ull << 40,
         "The workload's memory cgroup's memory.high (cgroup v2): a batch charge (64 pages per CPU, "
         "the charge stock's) that leaves the cgroup over it makes the task reclaim the excess on "
         "its way back to user mode, and sleep up to 2 s if reclaim cannot keep up, longer the "
         "further over it is (mem_cgroup_handle_over_high()); the cgroup exists with memcg.high "
         "alone (memory.max then unlimited). At or above memcg.max it never acts. 0: max, none",
         PAGE_SIZE);
  p.size("memcg.swap_max", memcg_swap_max, "1T", 0, kMemcgSwapUnlimited,
         "The workload's memory cgroup's memory.swap.max (cgroup v2): the swap its anonymous "
         "folios may take. A swap-out beyond it fails (memory.swap.events max and fail) and "
         "reclaim stops scanning the cgroup's anonymous lists once it is reached "
         "(mem_cgroup_get_nr_swap_pages()). 0: no swap for the cgroup; 1T (the default, more "
         "than swap.size can be): max. Below 1T it makes the cgroup by itself",
         PAGE_SIZE);
  p.size("memcg.swap_high", memcg_swap_high, "1T", 0, kMemcgSwapUnlimited,
         "The workload's memory cgroup's memory.swap.high (cgroup v2): over it, a task whose "
         "batch charge found the cgroup's swap above it sleeps on its return to user mode, "
         "longer the further over (calculate_high_delay() of the swap overage, added to memory.high's "
         "and clamped with it to 2 s; memory.swap.events high); swap-outs are not refused, and "
         "the swap cache is dropped sooner (mem_cgroup_swap_full() at half of it). 1T (the default): "
         "max. Below 1T it makes the cgroup by itself",
         PAGE_SIZE);
  p.size("swap.size", swap_size, "0", 0, 1ull << 40,
         "Swap space on the disk (a swap partition on the platform's NVMe SSD: non-rotational, "
         "not SWP_SYNCHRONOUS_IO, so swap-ins go through the swap cache with VMA readahead): "
         "reclaim then also swaps out anonymous folios. 0: no swap, reclaim drops clean page "
         "cache only", PAGE_SIZE);
  p.integer("swap.page_cluster", page_cluster, 3, 0, 5,
            "vm.page_cluster: swap readahead reads up to 2^n pages around a swap fault (the "
            "kernel's default 3, mm/swap.c swap_setup(); VMA readahead caps it at 2^5)");
  p.integer("swap.swappiness", swappiness, 60, 0, 200,
            "vm.swappiness (a memory cgroup's memory.swappiness): reclaim's relative pressure on "
            "anonymous vs file folios, get_scan_count() (the kernel's default 60, mm/vmscan.c)");
  p.integer("kernel.dirty_ratio", dirty_ratio, 20, 1, 100,
            "vm.dirty_ratio, percent: of the memory that can be dirty (free pages and file LRU "
            "pages; a memory cgroup's own file pages and headroom), how much may be dirty or under "
            "writeback before balance_dirty_pages() holds a dirtier to the disk's rate (the "
            "kernel's default 20, mm/page-writeback.c; 0, which takes vm.dirty_bytes, is not "
            "provided)");
  p.integer("kernel.dirty_writeback_centisecs", dirty_writeback_centisecs, 500, 0, 360000,
            "vm.dirty_writeback_centisecs: while inodes are dirty the flusher wakes this often "
            "(its delayed work, armed when the first inode becomes dirty) and writes the data "
            "older than kernel.dirty_expire_centisecs (periodic 'kupdate' writeback) and, over a "
            "background threshold, in the background (the kernel's default 500: 5 s; 0: never "
            "periodically). The work runs at the first kernel entry from its time on");
  p.integer("kernel.dirty_expire_centisecs", dirty_expire_centisecs, 3000, 0, 360000,
            "vm.dirty_expire_centisecs: an inode dirty for longer than this is written by the "
            "next periodic writeback (the kernel's default 3000: 30 s)");
  p.integer("kernel.dirty_background_ratio", dirty_background_ratio, 10, 0, 100,
            "vm.dirty_background_ratio, percent of the same: above it the flusher writes in the "
            "background (the kernel's default 10; at or above kernel.dirty_ratio, half of "
            "that, as domain_dirty_limits() does)");
}

const char* cost_name(Cost c) {
  static const char* names[] = {
#define KMM_COST_NAME_S(name, def, desc) #name,
#define KMM_COST_NAME_H(name, desc) #name,
      KMM_COST_ITEMS(KMM_COST_NAME_S, KMM_COST_NAME_H)
#undef KMM_COST_NAME_S
#undef KMM_COST_NAME_H
  };
  return names[static_cast<size_t>(c)];
}

bool cost_is_hardware(Cost c) {
  static const bool hw[] = {
#define KMM_COST_HW_S(name, def, desc) false,
#define KMM_COST_HW_H(name, desc) true,
      KMM_COST_ITEMS(KMM_COST_HW_S, KMM_COST_HW_H)
#undef KMM_COST_HW_S
#undef KMM_COST_HW_H
  };
  return hw[static_cast<size_t>(c)];
}

void CostModel::visit(mmusim::Params& p, const std::function<std::string(Cost)>& hw_default) {
  size_t i = 0;
  auto hw = [&](const char* key, const char* desc) {
    const std::string def = hw_default ? hw_default(Cost(i)) : "0cyc";
    p.duration(key, d[i], def, std::string(desc) + "; priced by the platform (configs/platforms/*.cfg gives the source)");
    ++i;
  };
#define KMM_COST_VISIT_S(name, def, desc) p.duration("cost." #name, d[i++], def, desc);
#define KMM_COST_VISIT_H(name, desc) hw("cost." #name, desc);
  KMM_COST_ITEMS(KMM_COST_VISIT_S, KMM_COST_VISIT_H)
#undef KMM_COST_VISIT_S
#undef KMM_COST_VISIT_H
}

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::none: return "none";
    case FaultKind::alloc: return "alloc";
    case FaultKind::reuse: return "reuse";
    case FaultKind::copy: return "copy";
    case FaultKind::spurious: return "spurious";
    case FaultKind::race: return "race";
    case FaultKind::huge_alloc: return "huge_alloc";
    case FaultKind::huge_reuse: return "huge_reuse";
    case FaultKind::huge_split: return "huge_split";
    case FaultKind::huge_copy: return "huge_copy";
    case FaultKind::zero_page: return "zero_page";
    case FaultKind::swap_map: return "swap_map";
    case FaultKind::swap_read: return "swap_read";
    case FaultKind::sigsegv: return "sigsegv";
    case FaultKind::file_map: return "file_map";
    case FaultKind::file_read: return "file_read";
    case FaultKind::sigbus: return "sigbus";
  }
  return "?";
}

const char* line_class_name(LineClass c) {
  if (c < LineClass::pte) return lock_class_name(LockClass(c));
  switch (c) {
    case LineClass::pte: return "pte";
    case LineClass::struct_page: return "struct_page";
    default: break;
  }
  return "?";
}

const char* lock_class_name(LockClass c) {
  switch (c) {
    case LockClass::mmap_lock: return "mmap_lock";
    case LockClass::vma_lock: return "vma_lock";
    case LockClass::ptl: return "ptl";
    case LockClass::folio_lock: return "folio_lock";
    case LockClass::large_mapcount: return "large_mapcount";
    case LockClass::COUNT: break;
  }
  return "?";
}

// ------------------------------------------------------------------------------------------------
// Counters

KernelCounters::KernelCounters(mmusim::Stats& s)
    : faults_total(s.counter("faults.total", "user page faults taken (arch fault handler entries)")),
      faults_write(s.counter("faults.write", "write faults")),
      faults_read(s.counter("faults.read", "read faults")),
      faults_spurious(s.counter("faults.spurious", "faults where handle_mm_fault found nothing to change (stale TLB entry)")),
      faults_sigsegv(s.counter("faults.sigsegv", "faults that found no VMA or no permission (SIGSEGV)")),
      handle_mm_fault(s.counter("kernel.handle_mm_fault", "handle_mm_fault() calls")),
      do_anonymous_page(s.counter("kernel.do_anonymous_page", "do_anonymous_page() calls")),
      do_wp_page(s.counter("kernel.do_wp_page", "do_wp_page() calls")),
      wp_reuse(s.counter("kernel.wp_reuse", "write faults that reused the page (wp_page_reuse)")),
      wp_copy(s.counter("kernel.wp_copy", "write faults that copied the page (wp_page_copy)")),
      wp_reuse_large_ptes(s.counter("kernel.wp_reuse_large_ptes", "PTEs made writable by the whole-folio walk (wp_reuse_large_anon_folio)")),
      fault_race(s.counter("kernel.fault_race", "faults that found the PTE changed under the PTL (pte_same failed)")),
      huge_pmd_anonymous(s.counter("kernel.do_huge_pmd_anonymous_page", "PMD THP allocation faults")),
      huge_pmd_wp(s.counter("kernel.do_huge_pmd_wp_page", "write faults on a read-only huge PMD")),
      huge_pmd_split(s.counter("kernel.split_huge_pmd", "huge PMDs split (THP_SPLIT_PMD): an anonymous one into a PTE table, a page-cache folio's unmapped")),
      huge_pmd_copy(s.counter("kernel.huge_pmd_copy",
                              "write faults that copied (or zeroed) a whole huge page into a new THP "
                              "(kernel.thp_cow = copy)")),
      vma_lock_success(s.counter("kernel.vma_lock.success", "faults handled under the per-VMA lock (VMA_LOCK_SUCCESS)")),
      vma_lock_retry(s.counter("kernel.vma_lock.retry", "per-VMA-lock faults that returned VM_FAULT_RETRY (VMA_LOCK_RETRY)")),
      vma_lock_miss(s.counter("kernel.vma_lock.miss", "lock_vma_under_rcu() misses (VMA_LOCK_MISS)")),
      vma_lock_abort(s.counter("kernel.vma_lock.abort", "lock_vma_under_rcu() aborts (VMA_LOCK_ABORT)")),
      mmap_lock_fallback(s.counter("kernel.mmap_lock_fallback", "faults handled under mmap_lock")),
      contpte_convert(s.counter("kernel.contpte_convert", "arm64 contpte_convert() calls (a block repainted: fold or unfold)")),
      contpte_fold(s.counter("kernel.contpte_fold", "arm64 contpte folds (contpte_convert to PTE_CONT)")),
      contpte_unfold(s.counter("kernel.contpte_unfold", "arm64 contpte unfolds (contpte_convert to non-cont)")),
      tlb_flush_page(s.counter("kernel.tlb_flush_page", "flush_tlb_page() calls")),
      tlb_flush_range(s.counter("kernel.tlb_flush_range", "flush_tlb_range() / mmu_gather range flushes")),
      tlb_flush_mm(s.counter("kernel.tlb_flush_mm", "flush_tlb_mm() calls")),
      tlb_flush_local(s.counter("kernel.tlb_flush_local", "flush_tlb_local() calls")),
      tlb_flush_spurious_fix(s.counter("kernel.tlb_flush_spurious_fix", "flush_tlb_fix_spurious_fault() flushes that did something")),
      folios_allocated(s.counter("kernel.folios_allocated", "folios allocated")),
      folios_freed(s.counter("kernel.folios_freed", "folios freed")),
      pages_zeroed(s.counter("kernel.pages_zeroed", "4 KiB pages zeroed")),
      pages_copied(s.counter("kernel.pages_copied", "4 KiB pages copied")),
      pt_pages(s.counter("kernel.pt_pages_allocated", "page-table pages allocated")),
      forks(s.counter("kernel.fork", "fork() calls")),
      exits(s.counter("kernel.exit", "exit() calls")),
      ptes_copied_fork(s.counter("kernel.fork_ptes_copied", "PTEs copied by fork")),
      ptes_zapped(s.counter("kernel.ptes_zapped", "PTEs zapped by munmap/exit/MADV_DONTNEED")),
      invariant_checks(s.counter("kernel.invariant_checks", "invariant-checker passes over all mms")),
      local_checks(s.counter("kernel.local_checks", "local checks after a fault (kernel.check_local)")),
      do_read_fault(s.counter("kernel.do_read_fault", "read faults on file mappings (do_read_fault)")),
      do_cow_fault(s.counter("kernel.do_cow_fault", "write faults on a missing PTE of a private file mapping: the file page copied (do_cow_fault)")),
      do_shared_fault(s.counter("kernel.do_shared_fault", "write faults on a missing PTE of a shared file mapping (do_shared_fault)")),
      pgmajfault(s.counter("kernel.pgmajfault", "faults that had to read the file (PGMAJFAULT, VM_FAULT_MAJOR)")),
      fault_around_ptes(s.counter("kernel.fault_around_ptes", "PTEs mapped by fault-around (filemap_map_pages), the faulting one included", "ptes")),
      filemap_read_pages(s.counter("kernel.filemap_read_pages", "pages read from files into the page cache (read-around and single reads)", "pages")),
      filemap_fault_retry(s.counter("kernel.filemap_fault_retry", "file faults that dropped the fault lock for the read and returned VM_FAULT_RETRY (maybe_unlock_mmap_for_io)")),
      faults_sigbus(s.counter("faults.sigbus", "faults that found no page behind a mapping (SIGBUS: beyond the end of the file)")),
      pagecache_large_folios(s.counter("kernel.pagecache_large_folios", "large folios (order > 0) added to the page cache: readahead on a filesystem with large folios (disk.fs = xfs)")),
      thp_file_mapped(s.counter("kernel.thp_file_mapped", "PMD mappings of page-cache folios made (do_set_pmd(), /proc/vmstat thp_file_mapped)", "mappings")),
      io_requests(s.counter("kernel.io_requests", "read requests submitted to the disk (readahead runs and single reads)")),
      folio_io_waits(s.counter("kernel.folio_io_waits", "times a task slept until a page-cache folio's read completed (lock_folio_maybe_drop_mmap, filemap_read_folio)")),
      io_wait_ns(s.counter("kernel.io_wait_ns", "time tasks slept waiting for the disk (part of their faults' and system calls' time, not of the CPU's kernel work)", "ns")),
      fsyncs(s.counter("kernel.fsyncs", "vfs_fsync_range() calls: msync(MS_SYNC) of a range of a shared file mapping (its dirty pages written and waited for)")),
      writeback_waits(s.counter("kernel.folio_writeback_waits", "times a task slept until a folio's write to the disk completed (folio_wait_writeback(): fsync)")),
      allocstall(s.counter("kernel.allocstall", "allocations that found no free memory and reclaimed directly (ALLOCSTALL: try_to_free_pages calls)")),
      pgscan_direct(s.counter("kernel.pgscan_direct", "pages direct reclaim scanned on the inactive lists, a folio counting its pages (PGSCAN_DIRECT)")),
      pgsteal_direct(s.counter("kernel.pgsteal_direct", "pages direct reclaim freed (PGSTEAL_DIRECT)", "pages")),
      pgrefill(s.counter("kernel.pgrefill", "pages scanned on the active lists to age them, a folio counting its pages (PGREFILL)")),
      pgactivate(s.counter("kernel.pgactivate", "pages reclaim moved to an active list: referenced, or dirty (PGACTIVATE)", "pages")),
      pgdeactivate(s.counter("kernel.pgdeactivate", "folios moved from an active list to an inactive one (PGDEACTIVATE)")),
      reclaim_unmapped_ptes(s.counter("kernel.reclaim_unmapped_ptes", "PTEs reclaim cleared to free the folios they mapped (try_to_unmap)", "ptes")),
      tlbbatch_flushes(s.counter("kernel.tlbbatch_flushes", "batched unmap flushes reclaim owed and did (try_to_unmap_flush() -> arch_tlbbatch_flush(): x86 when another CPU held an mm it unmapped from, arm64 always)")),
      memcg_max_events(s.counter("memcg.max_events", "charges that found the memory cgroup at memory.max and reclaimed from it (memory.events: max)")),
      memcg_pgscan(s.counter("memcg.pgscan", "pages memory-cgroup reclaim scanned on the inactive lists, a folio counting its pages (memory.stat: pgscan)")),
      memcg_pgsteal(s.counter("memcg.pgsteal", "pages memory-cgroup reclaim freed (memory.stat: pgsteal)", "pages")),
      memcg_charge_failed(s.counter("memcg.charge_failed", "charges that failed at memory.max: without retrying (readahead, THP: the caller read less or fell back to a smaller folio), or of a task the OOM killer had made a victim (it dies)")),
      memcg_high_events(s.counter("memcg.high_events", "returns to user mode that found the memory cgroup over memory.high and reclaimed from it (memory.events: high)")),
      memcg_high_throttles(s.counter("memcg.high_throttles", "returns to user mode that slept because reclaim could not bring the memory cgroup under memory.high (schedule_timeout_killable() in mem_cgroup_handle_over_high())")),
      memcg_high_throttle_ns(s.counter("memcg.high_throttle_ns", "time tasks slept for memory.high (part of their faults' or system calls' time, not of the CPU's kernel work)", "ns")),
      memcg_swap_max_events(s.counter("memcg.swap_max_events", "swap-outs that found the memory cgroup at memory.swap.max (memory.swap.events: max)")),
      memcg_swap_fail(s.counter("memcg.swap_fail", "swap-outs that failed for memory.swap.max: the folio stayed in memory (memory.swap.events: fail)")),
      memcg_swap_high_events(s.counter("memcg.swap_high_events", "returns to user mode of tasks owing reclaim or throttling that found the memory cgroup's swap over memory.swap.high (memory.swap.events: high; the swap part of the memcg.high_throttles sleeps)")),
      memcg_oom_events(s.counter("memcg.oom_events", "charges that found the memory cgroup at memory.max with nothing left to reclaim and called its OOM killer (memory.events: oom)")),
      memcg_oom_kill(s.counter("memcg.oom_kill", "processes the memory cgroup's OOM killer killed (memory.events: oom_kill)")),
      workingset_refault_file(s.counter("kernel.workingset_refault_file", "page-cache folios read again after reclaim evicted them (a shadow entry was found: WORKINGSET_REFAULT_FILE)", "pages")),
      workingset_activate_file(s.counter("kernel.workingset_activate_file", "refaults whose refault distance fit in the active list: the folio starts on it (WORKINGSET_ACTIVATE_FILE)", "pages")),
      workingset_restore_file(s.counter("kernel.workingset_restore_file", "activated refaults of folios that had been active before their eviction (WORKINGSET_RESTORE_FILE)", "pages")),
      pswpin(s.counter("kernel.pswpin", "pages read in from swap (/proc/vmstat pswpin; zero-filled ones included, which need no I/O)", "pages")),
      pswpout(s.counter("kernel.pswpout", "pages written out to swap (/proc/vmstat pswpout; zero-filled ones included, which need no I/O)", "pages")),
      swap_ra(s.counter("kernel.swap_ra", "pages swap readahead read besides the faulting one (/proc/vmstat swap_ra)", "pages")),
      swap_ra_hit(s.counter("kernel.swap_ra_hit", "swap faults that found their page read ahead (/proc/vmstat swap_ra_hit)")),
      do_swap_page(s.counter("kernel.do_swap_page", "faults on a swap PTE (do_swap_page())")),
      swap_zeromap(s.counter("kernel.swap_zeromap", "swapped-out pages that were zero-filled: kept in the swap device's zeromap, no write (swap_writepage())", "pages")),
      swap_write_requests(s.counter("kernel.swap_write_requests", "write requests to the disk for swap-out (one per folio, swap_writepage_bdev_async())")),
      pgactivate_anon(s.counter("kernel.pgactivate_anon", "anonymous folios reclaim activated (part of kernel.pgactivate)", "pages")),
      nr_dirtied(s.counter("kernel.nr_dirtied", "page-cache pages made dirty (/proc/vmstat nr_dirtied: folio_account_dirtied())", "pages")),
      nr_written(s.counter("kernel.nr_written", "page-cache pages whose write to the disk completed (/proc/vmstat nr_written: __folio_end_writeback())", "pages")),
      nr_vmscan_immediate_reclaim(s.counter("kernel.nr_vmscan_immediate_reclaim", "dirty or under-writeback page-cache folios reclaim marked to be reclaimed when their write ends, and activated (/proc/vmstat nr_vmscan_immediate_reclaim)", "pages")),
      pgrotated(s.counter("kernel.pgrotated", "folios reclaim had marked moved to the inactive tail when their write ended (/proc/vmstat pgrotated: folio_rotate_reclaimable())", "pages")),
      file_write_requests(s.counter("kernel.file_write_requests", "write requests to the disk for dirty page cache (one bio per run of adjacent folios, up to 256 of them: mpage_writepages())")),
      folio_mkclean_ptes(s.counter("kernel.folio_mkclean_ptes", "PTEs of shared file mappings write-protected and cleaned for a folio's writeback, each with its TLB flush (folio_mkclean())", "ptes")),
      flusher_background(s.counter("kernel.flusher_background", "background writeback runs: dirty page cache over dirty_background_ratio of a domain (wb_start_background_writeback())")),
      flusher_vmscan(s.counter("kernel.flusher_vmscan", "writeback of every dirty page started by reclaim that found only dirty page cache (wakeup_flusher_threads(WB_REASON_VMSCAN))")),
      flusher_periodic(s.counter("kernel.flusher_periodic", "periodic (kupdate) writeback works: every kernel.dirty_writeback_centisecs while inodes are dirty, the flusher writes those dirtied more than kernel.dirty_expire_centisecs ago (wb_check_old_data_flush(); trace event writeback_written, reason periodic, has the pages)")),
      balance_dirty_pages(s.counter("kernel.balance_dirty_pages", "dirtiers' checks of the dirty limits (balance_dirty_pages(), every nr_dirtied_pause pages a task dirties)")),
      dirty_over_freerun(s.counter("kernel.dirty_over_freerun", "checks that found a domain's dirty and writeback pages above its freerun ceiling ((dirty_ratio + dirty_background_ratio) / 2 of what can be dirty): the dirtier is throttled to its task_ratelimit (a pause, or a debt carried to the next check)")),
      dirty_throttle_pauses(s.counter("kernel.dirty_throttle_pauses", "dirtiers put to sleep by balance_dirty_pages() (io_schedule_timeout(pause)): dirtying faster than the disk writes")),
      dirty_throttle_ns(s.counter("kernel.dirty_throttle_ns", "time dirtiers slept in balance_dirty_pages() (part of their faults' time, not of the CPU's kernel work)", "ns")),
      reclaim_throttles(s.counter("kernel.reclaim_throttles", "reclaimers put to sleep by reclaim_throttle() (trace event mm_vmscan_throttled has the reason): memcg reclaim that found every dirty folio it scanned still under writeback and marked for reclaim (VMSCAN_THROTTLE_CONGESTED), direct reclaim without progress at priority 1 (VMSCAN_THROTTLE_NOPROGRESS)")),
      reclaim_throttle_ns(s.counter("kernel.reclaim_throttle_ns", "time reclaimers slept in reclaim_throttle() (schedule_timeout(1): to the next tick; part of the fault's time, not of the CPU's kernel work)", "ns")) {}

// ------------------------------------------------------------------------------------------------
// Construction

Kernel::Kernel(const KernelParams& params, mmusim::pg::Isa isa, MmuHw& hw, mmusim::Stats& stats,
               mmusim::Trace* trace)
    : params_(params),
      isa_(isa),
      phys_(params.phys_mem ? params.phys_mem : (4ull << 30)),
      hw_(hw),
      stats_(stats),
      trace_(trace),
      hw_touch_(hw.wants_kernel_memory()),
      ctr_(stats) {
  mmap_lock_stats_ = {};
  arch_ = make_arch(isa, *this);
  store_barrier_items_ = arch_->store_barrier_items();
  if (params_.nr_nodes > 1) {
    ctr_.numa_hit = &stats.counter("kernel.numa_hit", "pages allocated on the node the memory policy asked for (/proc/vmstat numa_hit)", "pages");
    ctr_.numa_miss = &stats.counter("kernel.numa_miss", "pages allocated on another node because the one asked for was full (numa_miss)", "pages");
    ctr_.numa_local = &stats.counter("kernel.numa_local", "pages allocated on the node of the allocating CPU (local_node)", "pages");
    ctr_.numa_other = &stats.counter("kernel.numa_other", "pages allocated on another node than the allocating CPU's (other_node)", "pages");
  }
  init_memmap();
  wb_init();
}

Kernel::~Kernel() { std::free(mem_map_); }

void Kernel::init_memmap() {
  nr_frames_ = phys_.nr_frames();
  vmemmap_pa_ = nr_frames_ << PAGE_SHIFT;
  kobj_next_pa_ = vmemmap_pa_ + nr_frames_ * kStructPageBytes;
  // calloc: the OS gives zero pages lazily, so a large memmap costs only what is touched. The
  // zero state of a `page` is "free, unmapped" except the MM-id slot mapcounts, which folio
  // allocation initialises.
  mem_map_ = static_cast<page*>(std::calloc(nr_frames_, sizeof(page)));
  if (!mem_map_) fatal("cannot allocate the memmap for {} page frames", nr_frames_);
  // pfn 0 is never handed out (a null pfn catches bugs); pfn 1 is the shared zero page.
  mem_map_[0].flags = PG_reserved;
  zero_pfn_ = 1;
  mem_map_[1].flags = PG_reserved;
  mem_map_[1].refcount = 1;
  lru_batch_.resize(kMaxCpus);
  mem_cgroup_create("", 0);  // the root
  if (params_.memcg_max || params_.memcg_high || params_.memcg_swap_max < KernelParams::kMemcgSwapUnlimited ||
      params_.memcg_swap_high < KernelParams::kMemcgSwapUnlimited)
    workload_memcg_ = mem_cgroup_create("workload", params_.memcg_max, params_.memcg_high, params_.memcg_swap_max,
                                        params_.memcg_swap_high);
  memcg_stock_.assign(kMaxCpus, 0);
  if (params_.swap_size) swapon(params_.swap_size);
  // NUMA: node n holds the frames [n * node_span_, (n + 1) * node_span_), the last node also the
  // rest; a span is a whole number of MAX_PAGE_ORDER blocks, so no buddy pair crosses two nodes.
  const unsigned nodes = std::max(1u, params_.nr_nodes);
  const uint64_t block = uint64_t(1) << MAX_PAGE_ORDER;
  node_span_ = nodes == 1 ? nr_frames_ : nr_frames_ / nodes / block * block;
  if (node_span_ == 0)
    mmusim::fatal("memory.size = {} is too small for {} NUMA nodes (platform.sockets): each node needs "
                  "at least {} of memory", mmusim::format_size(nr_frames_ << PAGE_SHIFT), nodes,
                  mmusim::format_size(block << PAGE_SHIFT));
  free_area_.assign(nodes, FreeArea{});
  node_write_pending_.assign(nodes, 0);
  // Free everything else in the largest aligned blocks.
  pfn_t pfn = 2;
  while (pfn < nr_frames_) {
    unsigned order = MAX_PAGE_ORDER;
    const pfn_t node_end = pfn_to_nid(pfn) + 1 == int(nodes) ? nr_frames_ : (pfn_t(pfn_to_nid(pfn)) + 1) * node_span_;
    while (order > 0 && ((pfn & ((1ull << order) - 1)) != 0 || pfn + (1ull << order) > node_end)) --order;
    __free_one_page(pfn, order, false);  // (never used: nothing to give back)
    pfn += 1ull << order;
  }
}

// ------------------------------------------------------------------------------------------------
// Buddy allocator (mm/page_alloc.c: __free_one_page, __rmqueue_smallest, expand). Lowest address
// first, so runs are reproducible.

// free_one_page(): with several cores (a lock observer), the block becomes allocatable only from
// this entry's present simulated time on, and keeps its contents until then. The port runs one
// entry at a time: an entry of another CPU that runs after this one in the port may be earlier in
// simulated time, and that CPU's accesses and walks, which read the page tables as they were at
// their time (base/entry_history.hpp), may still reach the frame through its old mapping: a frame
// freed "in their future" must neither be reused nor lose what it held before then.
void Kernel::buddy_free(pfn_t pfn, unsigned order) {
  if (lock_obs_) {
    uint64_t at = time_now_ps();
    // Unmapped by an entry that ends later in simulated time than this one is now (it ran
    // earlier in the port): the frames stay until then, when its unmaps and flushes are done.
    if (auto u = unmapped_until_ps_.find(pfn); u != unmapped_until_ps_.end()) {
      at = std::max(at, u->second);
      unmapped_until_ps_.erase(u);
    }
    pending_free_.push_back(PendingFree{at, pfn, order});
    nr_pending_free_ += 1ull << order;
    return;
  }
  __free_one_page(pfn, order);
}

void Kernel::entry_end(uint64_t end_ps) {
  for (pfn_t pfn : unmapped_this_entry_) {
    // (A folio this entry freed itself was freed after its unmaps and flushes, in the entry's own
    // order: only a folio still held waits for a later free.)
    if (folio_ref_count(&mem_map_[pfn]) <= 0 || (mem_map_[pfn].flags & PG_buddy)) continue;
    uint64_t& u = unmapped_until_ps_[pfn];
    u = std::max(u, end_ps);
  }
  unmapped_this_entry_.clear();
}

// The frames freed by now (all: every one, for an allocation that finds nothing else) go to the
// buddy allocator, in the order they were freed. "Now" is the time every core has reached (the
// platform's horizon; else this entry's time): a core behind in simulated time may still reach a
// frame through the mapping its walks see as it was then.
void Kernel::release_pending_frees(bool all) {
  if (pending_free_.empty()) return;
  const uint64_t now = horizon_ps_ ? horizon_ps_() : time_now_ps();
  size_t kept = 0;
  for (const PendingFree& f : pending_free_) {
    if (all || f.at_ps <= now) {
      nr_pending_free_ -= 1ull << f.order;
      __free_one_page(f.pfn, f.order);
    } else {
      pending_free_[kept++] = f;
    }
  }
  pending_free_.resize(kept);
}

// __free_one_page() (mm/page_alloc.c): merge with the free buddies, onto the free list; the
// frames' host memory back (the contents of free pages are irrelevant).
void Kernel::__free_one_page(pfn_t pfn, unsigned order, bool give_back) {
  if (give_back)
    for (pfn_t i = 0; i < (pfn_t(1) << order); ++i) phys_.zero_frame(pfn + i);
  nr_free_ += 1ull << order;
  FreeArea& free_area = free_area_[size_t(pfn_to_nid(pfn))];
  while (order < MAX_PAGE_ORDER) {
    pfn_t buddy = pfn ^ (1ull << order);
    if (buddy >= nr_frames_ || pfn_to_nid(buddy) != pfn_to_nid(pfn)) break;
    page* b = &mem_map_[buddy];
    if (!(b->flags & PG_buddy) || b->order != order) break;
    free_area[order].erase(buddy);
    b->flags &= ~PG_buddy;
    pfn = std::min(pfn, buddy);
    ++order;
  }
  page* p = &mem_map_[pfn];
  p->flags = PG_buddy;
  p->order = static_cast<uint8_t>(order);
  free_area[order].insert(pfn);
}

// get_page_from_freelist() over the zonelist (mm/page_alloc.c): the preferred node `nid` first,
// then the others in turn (with two nodes, the other; the SLIT distances of the machines modelled
// are equal between any two different nodes). Counts what zone_statistics() counts.
pfn_t Kernel::buddy_alloc(unsigned order, int nid) {
  release_pending_frees(false);
  if (pfn_t pfn = buddy_alloc_now(order, nid)) return pfn;
  // Nothing free by now: the frames freed later in simulated time (the allocation would have
  // waited for them; there are no watermarks to keep a reserve here).
  if (pending_free_.empty()) return 0;
  release_pending_frees(true);
  return buddy_alloc_now(order, nid);
}

pfn_t Kernel::buddy_alloc_now(unsigned order, int nid) {
  const int nodes = int(free_area_.size());
  for (int i = 0; i < nodes; ++i) {
    const int n = (nid + i) % nodes;
    const pfn_t pfn = rmqueue_node(order, n);
    if (!pfn) continue;
    if (nodes > 1) {
      (n == nid ? ctr_.numa_hit : ctr_.numa_miss)->inc(1ull << order);
      (n == numa_node_id() ? ctr_.numa_local : ctr_.numa_other)->inc(1ull << order);
    }
    return pfn;
  }
  return 0;
}

pfn_t Kernel::rmqueue_node(unsigned order, int nid) {
  FreeArea& free_area = free_area_[size_t(nid)];
  unsigned o = order;
  while (o <= MAX_PAGE_ORDER && free_area[o].empty()) ++o;
  if (o > MAX_PAGE_ORDER) return 0;
  pfn_t pfn = *free_area[o].begin();
  free_area[o].erase(free_area[o].begin());
  mem_map_[pfn].flags &= ~PG_buddy;
  // expand(): give back the upper halves.
  while (o > order) {
    --o;
    pfn_t upper = pfn + (1ull << o);
    page* u = &mem_map_[upper];
    u->flags = PG_buddy;
    u->order = static_cast<uint8_t>(o);
    free_area[o].insert(upper);
  }
  nr_free_ -= 1ull << order;
  return pfn;
}

// vma_alloc_folio() (mm/mempolicy.c): under MPOL_INTERLEAVE the node is interleave_nid() of the
// folio's index in the VMA (get_vma_policy(): vm_pgoff >> order plus the offset in folios); under
// MPOL_DEFAULT the local node (folio_alloc()).
folio* Kernel::vma_alloc_folio(unsigned order, vm_area_struct* vma, uint64_t addr, bool zero) {
  if (params_.numa != NumaPolicy::interleave || nr_nodes() == 1 || !vma) return folio_alloc(order, zero);
  const uint64_t ilx = (vma->vm_pgoff >> order) + ((addr - vma->vm_start) >> (PAGE_SHIFT + order));
  return folio_alloc_node(order, zero, int(ilx % nr_nodes()));
}

// folio_alloc() / alloc_pages(): the node of the running CPU under MPOL_DEFAULT; under
// MPOL_INTERLEAVE the next node in turn (interleave_nodes(), here one turn for the whole kernel
// rather than per task).
folio* Kernel::folio_alloc(unsigned order, bool zero) {
  int nid = numa_node_id();
  if (params_.numa == NumaPolicy::interleave && nr_nodes() > 1) nid = int(interleave_next_++ % nr_nodes());
  return folio_alloc_node(order, zero, nid);
}

// __folio_alloc_node() / __alloc_pages() with a preferred node.
folio* Kernel::folio_alloc_node(unsigned order, bool zero, int nid) {
  MMUSIM_CHECK(order <= MAX_PAGE_ORDER, "folio order {} above MAX_PAGE_ORDER", order);
  pfn_t pfn = buddy_alloc(order, nid);
  if (!pfn && order == 0 && may_reclaim_) pfn = alloc_pages_direct_reclaim(nid);  // __alloc_pages_slowpath()
  if (!pfn) return nullptr;
  folio* f = &mem_map_[pfn];
  const unsigned long nr = 1ul << order;
  for (unsigned long i = 0; i < nr; ++i) {
    page* p = f + i;
    *p = page{};
    p->head_off = static_cast<uint32_t>(i);
    if (zero) phys_.zero_frame(pfn + i);
  }
  f->order = static_cast<uint8_t>(order);
  if (order > 0) f->flags |= PG_head;
  f->refcount = 1;
  // prep_new_page() -> prep_compound_page(): every tail page's compound_head (mm/page_alloc.c)
  struct_page_touch(f, long(nr), true);
  ctr_.folios_allocated.inc();
  charge(Cost::folio_alloc);
  if (zero) {
    // __GFP_ZERO: the allocator clears it (order-0 fallbacks and page tables).
    charge(Cost::clear_page, nr);
    ctr_.pages_zeroed.inc(nr);
    hw_.kernel_memory(cpu_, pfn << PAGE_SHIFT, nr * PAGE_SIZE, true);
  }
  return f;
}

// folio_prealloc() (mm/memory.c): an order-0 folio for a COW or fork copy.
// Charged to `mm`'s memcg (src_mm for a fork copy), GFP_KERNEL: reclaim, retry, OOM.
folio* Kernel::folio_prealloc(mm_struct* mm, vm_area_struct* vma, uint64_t addr, bool need_zero) {
  folio* f = vma_alloc_folio(0, vma, addr, need_zero);
  if (f && mem_cgroup_charge(f, mm)) {
    folio_put(f);
    return nullptr;
  }
  return f;
}

// vma_thp_gfp_mask() (mm/huge_memory.c) under the default defrag setting (madvise):
// GFP_TRANSHUGE_LIGHT, with __GFP_DIRECT_RECLAIM only for an MADV_HUGEPAGE VMA: only then may a
// THP's allocation or charge reclaim.
bool Kernel::vma_thp_gfp_may_reclaim(const vm_area_struct* vma) { return vma && (vma->vm_flags & VM_HUGEPAGE); }

void Kernel::free_folio(folio* f) {
  const unsigned long nr = folio_nr_pages(f);
  MMUSIM_CHECK(f->refcount == 0, "freeing folio pfn {:#x} with refcount {}", page_to_pfn(f), f->refcount);
  for (unsigned long i = 0; i < nr; ++i) {
    page* p = f + i;
    MMUSIM_CHECK(p->mapcount == 0, "bad page state: freeing pfn {:#x} with mapcount {}",
                 page_to_pfn(p), p->mapcount);
  }
  MMUSIM_CHECK(f->large_mapcount == 0 && f->entire_mapcount == 0,
               "bad page state: freeing folio pfn {:#x} with large_mapcount {} entire_mapcount {}",
               page_to_pfn(f), f->large_mapcount, f->entire_mapcount);
  unsigned order = f->order;
  // __folio_put() -> __page_cache_release(): off the LRU; mem_cgroup_uncharge().
  if (folio_test_lru(f)) lruvec_del_folio(folio_lruvec(f), f);
  mem_cgroup_uncharge(f);
  for (unsigned long i = 0; i < nr; ++i) f[i] = page{};
  // free_pages_prepare(): each tail page checked and cleared (free_tail_page_prepare())
  struct_page_touch(f, long(nr), true);
  buddy_free(page_to_pfn(f), order);
  ctr_.folios_freed.inc();
  charge(Cost::folio_free);
}

void Kernel::folio_put(folio* f) { folios_put_refs(f, 1); }

void Kernel::folios_put_refs(folio* f, int refs) {
  MMUSIM_CHECK(f->head_off == 0, "folio_put on a tail page pfn {:#x}", page_to_pfn(f));
  if (f->flags & PG_reserved) return;  // the zero page
  MMUSIM_CHECK(f->refcount >= refs, "folio pfn {:#x}: dropping {} refs of {}", page_to_pfn(f), refs,
               f->refcount);
  f->refcount -= refs;
  charge(Cost::folio_op);
  if (f->refcount == 0) free_folio(f);
}

// folio_add_lru_vma() -> folio_add_lru() (mm/swap.c): the folio waits in this CPU's batch,
// holding a reference, until the batch is full or drained. Large folios never wait
// (folio_may_be_lru_cached()).
void Kernel::folio_add_lru_vma(folio* f, vm_area_struct* vma) {
  if (folio_test_large(f)) {
    lruvec_add_folio(folio_lruvec(f), f);
    return;
  }
  folio_get(f);
  auto& batch = lru_batch_[cpu_];
  batch.push_back(f);
  if (batch.size() >= params_.lru_batch) lru_add_drain();
}

// lru_add_drain() (mm/swap.c): move this CPU's batched folios onto the LRU, dropping the batch's
// references.
void Kernel::lru_add_drain() {
  auto& batch = lru_batch_[cpu_];
  for (folio* f : batch) {
    lruvec_add_folio(folio_lruvec(f), f);
    folio_put(f);
  }
  batch.clear();
}

void Kernel::lru_add_drain_all() {
  int saved = cpu_;
  for (int c = 0; c < kMaxCpus; ++c) {
    if (lru_batch_[c].empty()) continue;
    cpu_ = c;
    lru_add_drain();
  }
  cpu_ = saved;
}

// ------------------------------------------------------------------------------------------------
// process_huge_page() (mm/memory.c:6767): process the target subpage last, converging from both
// ends, so that it is cache-hot when the fault returns. `sequential` is the order before the
// copy-huge-page-target-last patch.

void Kernel::process_huge_page(uint64_t addr_hint, unsigned nr_pages,
                               const std::function<void(unsigned long, uint64_t)>& process_subpage) {
  const uint64_t addr = ALIGN_DOWN(addr_hint, uint64_t(nr_pages) * PAGE_SIZE);
  if (params_.huge_copy_order == HugeCopyOrder::sequential) {
    for (unsigned long i = 0; i < nr_pages; ++i) process_subpage(i, addr + i * PAGE_SIZE);
    return;
  }
  long n = long((addr_hint - addr) / PAGE_SIZE);
  long base, l;
  if (2 * n <= long(nr_pages)) {
    // If target subpage in first half of huge page
    base = 0;
    l = n;
    // Process subpages at the end of huge page
    for (long i = long(nr_pages) - 1; i >= 2 * n; i--) process_subpage(i, addr + i * PAGE_SIZE);
  } else {
    // If target subpage in second half of huge page
    base = long(nr_pages) - 2 * (long(nr_pages) - n);
    l = long(nr_pages) - n;
    // Process subpages at the begin of huge page
    for (long i = 0; i < base; i++) process_subpage(i, addr + i * PAGE_SIZE);
  }
  // Process remaining subpages in left-right-left-right pattern towards the target subpage
  for (long i = 0; i < l; i++) {
    long left_idx = base + i;
    long right_idx = base + 2 * l - 1 - i;
    process_subpage(left_idx, addr + left_idx * PAGE_SIZE);
    process_subpage(right_idx, addr + right_idx * PAGE_SIZE);
  }
}

// clear_user_highpage() (include/linux/highmem.h)
void Kernel::clear_user_highpage(page* p, uint64_t vaddr) {
  pfn_t pfn = page_to_pfn(p);
  phys_.zero_frame(pfn);
  charge(Cost::clear_page);
  ctr_.pages_zeroed.inc();
  hw_.kernel_memory(cpu_, pfn << PAGE_SHIFT, PAGE_SIZE, true);
}

// copy_user_highpage() (include/linux/highmem.h)
void Kernel::copy_user_highpage(page* to, page* from, uint64_t vaddr) {
  pfn_t dst = page_to_pfn(to), src = page_to_pfn(from);
  phys_.copy_frame(dst, src);
  charge(Cost::copy_page);
  ctr_.pages_copied.inc();
  // The source lines beyond the L1D: the copy waits for them (the hardware's part of its time).
  cost_.extra_cycles += hw_.kernel_copy_source(cpu_, src << PAGE_SHIFT, PAGE_SIZE);
  hw_.kernel_memory(cpu_, dst << PAGE_SHIFT, PAGE_SIZE, true);
}

// folio_zero_user() (mm/memory.c:6848)
void Kernel::folio_zero_user(folio* f, uint64_t addr_hint) {
  const unsigned nr = unsigned(folio_nr_pages(f));
  if (nr == 1) {
    clear_user_highpage(f, addr_hint & PAGE_MASK);
    return;
  }
  process_huge_page(addr_hint, nr, [&](unsigned long idx, uint64_t addr) {
    clear_user_highpage(folio_page(f, idx), addr);
  });
}

// copy_user_large_folio() (mm/memory.c:6897)
int Kernel::copy_user_large_folio(folio* dst, folio* src, uint64_t addr_hint, vm_area_struct* vma) {
  const unsigned nr = unsigned(folio_nr_pages(dst));
  process_huge_page(addr_hint, nr, [&](unsigned long idx, uint64_t addr) {
    copy_user_highpage(folio_page(dst, idx), folio_page(src, idx), addr);
  });
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Fault entry: the arch handler, then the invariant checker.

FaultReturn Kernel::handle_user_fault(task_struct* t, uint64_t addr, uint64_t syndrome, uint64_t ip) {
  MMUSIM_CHECK(t && t->mm, "a user fault at {:#x} without a user task", addr);
  current_ = t;
  last_fault_ = FaultRecord{};
  FaultReturn r = arch_->handle_user_fault(t, addr, syndrome, ip);
  if (r.sigsegv) {
    ctr_.faults_sigsegv.inc();
    last_fault_.kind = FaultKind::sigsegv;
  }
  // mm_fault_error() / bad_area(): do_sigbus() before a SIGSEGV.
  if (r.sigbus || r.sigsegv) force_sig_fault(t, r.sigbus ? SIGBUS : SIGSEGV, addr);
  check_local("page fault", t->mm, addr);
  check_invariants("page fault");
  return r;
}

// ------------------------------------------------------------------------------------------------
// Tracing

void Kernel::trace_mmap(task_struct* t, uint64_t start, uint64_t len, vm_flags_t flags, const char* kind) {
  if (!trace_ || !trace_->on()) return;
  const char prot[4] = {flags & VM_READ ? 'r' : '-', flags & VM_WRITE ? 'w' : '-', flags & VM_EXEC ? 'x' : '-', 0};
  trace_->event(now_ps_, cpu_, mmusim::TraceTask{std::string_view(t->comm), t->pid}, "mmap",
                {mmusim::TraceField::hex("start", start), mmusim::TraceField::hex("len", len),
                 mmusim::TraceField::str("prot", prot), mmusim::TraceField::str("kind", kind)});
}

void Kernel::trace_event(const char* name, std::initializer_list<mmusim::TraceField> fields) {
  if (!trace_ || !trace_->on()) return;
  mmusim::TraceTask t{current_ ? std::string_view(current_->comm) : std::string_view("kernel"),
                      current_ ? current_->pid : 0};
  trace_->event(now_ps_, cpu_, t, name, fields);
}

}  // namespace kmm
