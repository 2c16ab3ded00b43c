// SPDX-License-Identifier: GPL-2.0-only
// The kernel: one simulated Linux MM instance. Generic code mirrors mm/memory.c, mm/huge_memory.c,
// mm/rmap.c, kernel/fork.c, mm/mmap.c, mm/mmu_gather.c and mm/mprotect.c, as member functions with
// the kernel's names; the arch layer (arch/) supplies what include/asm supplies.
//
// Each source file names the kernel file it follows; each function has a comment naming the
// kernel function it ports. Where the port simplifies (no swap, no file pages, no LRU lists, no
// memcg), the condition keeps its shape with the "feature off" value.
//
// Callers (the functional driver, the platforms, tests) enter the kernel through the syscall and
// fault entry points at the end of this header, after setting the CPU and task with `enter()`.
// After each entry they read what it cost with `take_cost()`.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "base/tlb_maintenance.hpp"
#include "base/trace.hpp"
#include "kernel_mm/arch/arch.hpp"
#include "kernel_mm/cost.hpp"
#include "kernel_mm/mm_types.hpp"
#include "kernel_mm/page.hpp"
#include "base/physmem.hpp"
#include "kernel_mm/types.hpp"

namespace kmm {

// The TLB-maintenance seam to the hardware (base/tlb_maintenance.hpp), by the kernel's names.
using mmusim::MmuHw;
using mmusim::NullMmuHw;
using mmusim::TlbiOp;
using mmusim::tlbi_op_name;

using mmusim::PhysMem;

// ---- run-time kernel variants (../shared/reference/patches/README.md) ---------------------------
enum class WpReuse : uint8_t { off, block16, pagetable, pagetable_flush };
enum class ForkCopy : uint8_t { per_pte, batched };
enum class HugeCopyOrder : uint8_t { sequential, target_last };
// A write fault on a shared PMD-mapped THP: 6.12 splits the PMD (and copies 4K), before 5.8 the
// whole huge page was copied (commit 3917c80280c9, "thp: change CoW semantics for anon-THP").
enum class ThpCow : uint8_t { split, copy };
enum class FaultRetry : uint8_t { fallback, retry_once };
// memory.numa: where a NUMA machine's pages come from (the task's memory policy,
// mm/mempolicy.c): first-touch = MPOL_DEFAULT (the node of the CPU that allocates, "local"
// allocation), interleave = MPOL_INTERLEAVE over every node.
enum class NumaPolicy : uint8_t { first_touch, interleave };
enum class SpuriousFlush : uint8_t { none, local };
// THP sysfs settings: /sys/kernel/mm/transparent_hugepage/enabled and hugepages-<size>kB/enabled.
enum class ThpMode : uint8_t { always, inherit, madvise, never };

struct KernelParams {
  WpReuse wp_reuse = WpReuse::off;
  ForkCopy fork_copy = ForkCopy::batched;
  HugeCopyOrder huge_copy_order = HugeCopyOrder::target_last;
  ThpCow thp_cow = ThpCow::split;
  FaultRetry fault_retry = FaultRetry::fallback;
  SpuriousFlush arm64_spurious_flush = SpuriousFlush::none;
  bool large_folio_reuse = true;  // v6.15+ wp_can_reuse_anon_folio for large folios
  bool check_invariants = false;
  uint64_t check_every = 1;       // with check_invariants: the full check every N-th kernel entry
  bool check_local = false;       // after every fault: the checks at its page table and folios
  uint64_t phys_mem = 0;          // bytes of simulated physical memory
  ThpMode thp_enabled = ThpMode::always;
  // Per order 2..9 (16K..2M): hugepages-<size>kB/enabled. Index = order. The defaults are the
  // kernel's (and visit()'s): mTHP sizes never, the PMD size inherits `enabled`.
  std::array<ThpMode, HPAGE_PMD_ORDER + 1> thp_order{ThpMode::never, ThpMode::never, ThpMode::never,
                                                     ThpMode::never, ThpMode::never, ThpMode::never,
                                                     ThpMode::never, ThpMode::never, ThpMode::never,
                                                     ThpMode::inherit};
  bool thp_use_zero_page = true;
  unsigned lru_batch = 31;        // PAGEVEC_SIZE: small folios waiting in the per-CPU LRU-add batch
  uint64_t memcg_max = 0;         // memcg.max: the workload's memory cgroup's memory.max (0: none)
  uint64_t memcg_high = 0;        // memcg.high: its memory.high (0: none, "max")
  uint64_t memcg_swap_max = kMemcgSwapUnlimited;  // memcg.swap_max: its memory.swap.max
  uint64_t memcg_swap_high = kMemcgSwapUnlimited;  // memcg.swap_high: its memory.swap.high
  static constexpr uint64_t kMemcgSwapUnlimited = 1ull << 40;  // 1T: more than swap.size can be ("max")
  // CONFIG_HZ, for what the kernel counts in jiffies (memory.high's throttling): the platform's
  // sched.hz, or Kconfig's default 250 where sched.hz = 0 turns the tick off.
  unsigned hz = 250;
  uint64_t swap_size = 0;         // swap.size: bytes of swap on the disk (0: no swap)
  unsigned page_cluster = 3;      // swap.page_cluster: vm.page_cluster (swap readahead <= 2^n pages)
  unsigned swappiness = 60;       // swap.swappiness: vm.swappiness (memory.swappiness)
  unsigned dirty_ratio = 20;      // kernel.dirty_ratio: vm.dirty_ratio, percent
  unsigned dirty_background_ratio = 10;  // kernel.dirty_background_ratio: vm.dirty_background_ratio
  unsigned dirty_writeback_centisecs = 500;  // kernel.dirty_writeback_centisecs (0: no periodic writeback)
  unsigned dirty_expire_centisecs = 3000;    // kernel.dirty_expire_centisecs
  NumaPolicy numa = NumaPolicy::first_touch;  // memory.numa
  // The machine's NUMA topology, from the platform (platform.sockets), not a key of its own: one
  // node per socket, CPUs [n * cpus_per_node, (n + 1) * cpus_per_node) on node n, memory split
  // evenly between the nodes (Kernel::pfn_to_nid).
  unsigned nr_nodes = 1;
  unsigned cpus_per_node = 1u << 16;

  void visit(mmusim::Params& p);
};

// Kernel counters (names in the INTERFACE: kernel.*, faults.*).
struct KernelCounters {
  explicit KernelCounters(mmusim::Stats& s);
  mmusim::Counter &faults_total, &faults_write, &faults_read, &faults_spurious, &faults_sigsegv;
  mmusim::Counter &handle_mm_fault, &do_anonymous_page, &do_wp_page, &wp_reuse, &wp_copy,
      &wp_reuse_large_ptes, &fault_race, &huge_pmd_anonymous, &huge_pmd_wp, &huge_pmd_split, &huge_pmd_copy,
      &vma_lock_success, &vma_lock_retry, &vma_lock_miss, &vma_lock_abort, &mmap_lock_fallback;
  mmusim::Counter &contpte_convert, &contpte_fold, &contpte_unfold;
  mmusim::Counter &tlb_flush_page, &tlb_flush_range, &tlb_flush_mm, &tlb_flush_local,
      &tlb_flush_spurious_fix;
  mmusim::Counter &folios_allocated, &folios_freed, &pages_zeroed, &pages_copied, &pt_pages;
  mmusim::Counter &forks, &exits, &ptes_copied_fork, &ptes_zapped, &invariant_checks, &local_checks;
  // File-backed memory (filemap.cpp).
  mmusim::Counter &do_read_fault, &do_cow_fault, &do_shared_fault, &pgmajfault, &fault_around_ptes,
      &filemap_read_pages, &filemap_fault_retry, &faults_sigbus, &pagecache_large_folios;
  // /proc/vmstat's thp_file_mapped: PMD mappings of page-cache folios made (do_set_pmd()).
  mmusim::Counter &thp_file_mapped;
  // The disk (a BlockDev): read requests (file and swap), and waits for folios still under read.
  mmusim::Counter &io_requests, &folio_io_waits, &io_wait_ns;
  // fsync (msync(MS_SYNC)): vfs_fsync_range() calls, and its waits for folios under writeback.
  mmusim::Counter &fsyncs, &writeback_waits;
  // Reclaim (vmscan.cpp): /proc/vmstat's allocstall, pgscan_direct, pgsteal_direct, pgrefill,
  // pgactivate, pgdeactivate; and the rmap walks' PTEs unmapped.
  mmusim::Counter &allocstall, &pgscan_direct, &pgsteal_direct, &pgrefill, &pgactivate, &pgdeactivate,
      &reclaim_unmapped_ptes, &tlbbatch_flushes;
  // Memory cgroups (memcontrol.cpp): memory.events' max, memory.stat's pgscan/pgsteal of memcg
  // reclaim, and charges that failed (the caller fell back or gave up).
  mmusim::Counter &memcg_max_events, &memcg_pgscan, &memcg_pgsteal, &memcg_charge_failed;
  // memory.high: memory.events' high, and the throttling sleeps of tasks reclaim could not bring
  // under it (mem_cgroup_handle_over_high()).
  mmusim::Counter &memcg_high_events, &memcg_high_throttles, &memcg_high_throttle_ns;
  // memory.swap.max: memory.swap.events' max and fail (swap-outs refused a slot by the limit).
  mmusim::Counter &memcg_swap_max_events, &memcg_swap_fail;
  // memory.swap.high: memory.swap.events' high (the over-high checks on the return to user mode
  // that found the cgroup's swap over it).
  mmusim::Counter &memcg_swap_high_events;
  // The memcg's OOM killer (oom_kill.cpp): memory.events' oom and oom_kill.
  mmusim::Counter &memcg_oom_events, &memcg_oom_kill;
  // Refaults of evicted page cache (mm/workingset.c): /proc/vmstat's workingset_refault_file,
  // workingset_activate_file, workingset_restore_file.
  mmusim::Counter &workingset_refault_file, &workingset_activate_file, &workingset_restore_file;
  // Swap (swap.cpp): /proc/vmstat's pswpin, pswpout, swap_ra, swap_ra_hit; do_swap_page() calls,
  // zero-filled pages kept in the zeromap (no I/O), swap-cache folios freed by reclaim, writes.
  mmusim::Counter &pswpin, &pswpout, &swap_ra, &swap_ra_hit, &do_swap_page, &swap_zeromap, &swap_write_requests,
      &pgactivate_anon;
  // Writeback of dirty page cache (page_writeback.cpp): /proc/vmstat's nr_dirtied, nr_written,
  // nr_vmscan_immediate_reclaim, pgrotated; write requests, PTEs write-protected for writeback
  // (folio_mkclean), the flusher's runs by reason, and dirtiers' checks against the dirty limits.
  mmusim::Counter &nr_dirtied, &nr_written, &nr_vmscan_immediate_reclaim, &pgrotated, &file_write_requests,
      &folio_mkclean_ptes, &flusher_background, &flusher_vmscan, &flusher_periodic, &balance_dirty_pages, &dirty_over_freerun,
      &dirty_throttle_pauses, &dirty_throttle_ns;
  // Reclaim's own throttling (reclaim_throttle()): sleeps of reclaimers that found the LRU tail
  // congested with folios under writeback (CONGESTED) or direct reclaim without progress
  // (NOPROGRESS), and the time they slept.
  mmusim::Counter &reclaim_throttles, &reclaim_throttle_ns;
  // Several NUMA nodes only (registered then): /proc/vmstat's numa_hit, numa_miss, local_node,
  // other_node, summed over the nodes.
  mmusim::Counter *numa_hit = nullptr, *numa_miss = nullptr, *numa_local = nullptr, *numa_other = nullptr;
};

// What one fault did, for the trace's mm_fault_done and the latency breakdown.
enum class FaultKind : uint8_t {
  none, alloc, reuse, copy, spurious, race, huge_alloc, huge_reuse, huge_split, huge_copy, zero_page,
  sigsegv,
  file_map,   // a page-cache page mapped (fault-around or ->fault of a cached page): a minor fault
  file_read,  // a file page read from the disk first (VM_FAULT_MAJOR)
  sigbus,     // no page behind the mapping (beyond the end of the file)
  swap_map,   // a swap PTE's page found in the swap cache and mapped: a minor fault
  swap_read   // a swap PTE's page read from the swap device first (VM_FAULT_MAJOR)
};
const char* fault_kind_name(FaultKind k);
struct FaultRecord {
  FaultKind kind = FaultKind::none;
  unsigned ptes_changed = 0;
  unsigned order = 0;  // folio order involved
  // The task slept in the fault (balance_dirty_pages()' pause, reclaim_throttle()) and the
  // flusher's work ran meanwhile: it may have put back what the fault changed (folio_mkclean()
  // write-protects the entry the fault made writable), and the access faults again.
  bool others_ran = false;
};

// The state generic code works on (struct vm_fault, include/linux/mm.h).
struct vm_fault {
  vm_area_struct* vma = nullptr;
  uint64_t pgoff = 0;
  uint64_t address = 0;       // faulting address, page aligned
  uint64_t real_address = 0;  // unmasked
  uint32_t flags = 0;
  pmd_t* pmd = nullptr;
  pud_t* pud = nullptr;
  pte_t orig_pte{0};
  pmd_t orig_pmd{0};
  page* cow_page = nullptr;
  page* page_ = nullptr;   // vmf->page
  pte_t* pte = nullptr;
  uint32_t* ptl = nullptr;
};

// An mmu_gather (include/asm-generic/tlb.h, mm/mmu_gather.c): the range to flush and the folio
// references to drop once the TLBs no longer map them.
struct mmu_gather {
  mm_struct* mm = nullptr;
  bool fullmm = false;
  bool freed_tables = false;
  uint64_t start = ~0ull, end = 0;
  struct Deferred {
    page* pg;
    unsigned nr;
  };
  std::vector<Deferred> pending;  // __tlb_remove_folio_pages(): refs dropped after the flush
  void reset_range() {
    start = ~0ull;
    end = 0;
  }
  // More of the kernel's fields (include/asm-generic/tlb.h), used by mmu_gather.cpp.
  bool need_flush_all = false;
  bool cleared_ptes = false, cleared_pmds = false, cleared_puds = false, cleared_p4ds = false;
  bool vma_pfn = false;
  // The page batches (struct mmu_gather_batch): only their fill levels are kept, as they decide
  // when zap must flush early (tlb_next_batch() failing at MAX_GATHER_BATCH_COUNT).
  unsigned batch_active = 0;  // 0: the on-stack batch (tlb->local), then the allocated ones
  unsigned batch_nr = 0;      // entries in the active batch (2 per multi-page entry)
  unsigned batch_count = 0;   // batches allocated (tlb->batch_count)
  // tlb_remove_table(): page-table pages freed after the TLB flush (struct mmu_table_batch).
  std::vector<pfn_t> tables;
};

// Kernel locks seen by a multi-core platform: each acquisition and release during one kernel entry,
// with the entry's kernel time so far, so that the platform can make a CPU wait for a lock another
// CPU holds in simulated time (the port itself runs one entry at a time).
enum class LockClass : uint8_t { mmap_lock, vma_lock, ptl, folio_lock, large_mapcount, COUNT };
const char* lock_class_name(LockClass c);
// The kernel data whose cache lines move between cores (several cores): the lock words of the
// lock classes above (same order), page-table entries, struct pages.
enum class LineClass : uint8_t { mmap_lock, vma_lock, ptl, folio_lock, large_mapcount, pte, struct_page, COUNT };
const char* line_class_name(LineClass c);
class LockObserver {
 public:
  virtual ~LockObserver() = default;
  // `line_pa`: the physical address of the lock word (its cache line; Kernel::lock_event).
  virtual void acquire(const void* lock, LockClass cls, bool write, double cycles_so_far, uint64_t line_pa) = 0;
  virtual void release(const void* lock, LockClass cls, bool write, double cycles_so_far, uint64_t line_pa) = 0;
  // Page-table entries about to be written (their old values still in memory), at this point of
  // the entry; and the kernel's lockless read of a PTE (handle_pte_fault's ptep_get_lockless):
  // the value it saw at this point of the entry in simulated time, which is an older one if
  // another CPU's entry, overlapping this one in simulated time, wrote the entry later.
  virtual void pte_write(const uint64_t* entry, unsigned n, double cycles_so_far) {}
  virtual uint64_t lockless_read(const uint64_t* entry, uint64_t value, double cycles_so_far) { return value; }
  // A page-table page allocated (`entries`, its 512 entries): what its frame held in an earlier
  // life (a table an overlapping entry of another CPU freed) is no history of this table.
  virtual void table_alloc(const uint64_t* entries, unsigned n) {}
  // The entry reads (or, `write`, writes or updates atomically) the kernel data in the cache line
  // of physical address `pa`, at this point of the entry.
  virtual void line_access(uint64_t pa, LineClass cls, bool write, double cycles_so_far) {}
  // The cycles the current entry has waited for locks so far (held by other CPUs' entries that
  // overlap it in simulated time): part of its time, beyond its own cycles.
  virtual double wait_cycles() const { return 0; }
};

// The disk the page cache reads from, as the kernel sees a block device: a request submitted at a
// simulated time completes at a later one (the device's queue, latency and bandwidth decide;
// os/block_device.hpp). Without one, reads complete as they are submitted (kernel tests).
class BlockDev {
 public:
  virtual ~BlockDev() = default;
  // A read of `bytes` submitted at `submit_ps`: when it completes (its folios are unlocked and
  // uptodate then: folio_end_read()).
  virtual uint64_t submit_read(uint64_t submit_ps, uint64_t bytes) = 0;
  // A write of `bytes` (swap-out): when it completes (folio_end_writeback()).
  virtual uint64_t submit_write(uint64_t submit_ps, uint64_t bytes) = 0;
};

using FreeArea = std::array<std::set<pfn_t>, MAX_PAGE_ORDER + 1>;

// The LRU lists (include/linux/mmzone.h: enum lru_list, struct lruvec), one lruvec per node: the
// evictable lists; folios are linked through page::lru_prev/lru_next by pfn, the head the most
// recently added.
enum lru_list : unsigned { LRU_INACTIVE_ANON, LRU_ACTIVE_ANON, LRU_INACTIVE_FILE, LRU_ACTIVE_FILE, NR_LRU_LISTS };
inline bool is_file_lru(lru_list l) { return l == LRU_INACTIVE_FILE || l == LRU_ACTIVE_FILE; }
inline bool is_active_lru(lru_list l) { return l == LRU_ACTIVE_ANON || l == LRU_ACTIVE_FILE; }
struct lruvec {
  struct list {
    pfn_t head = 0, tail = 0;
    uint64_t nr_pages = 0;  // lruvec_page_state(NR_LRU_BASE + lru)
  } lists[NR_LRU_LISTS];
  int nid = 0;
  uint16_t memcg_id = 0;        // lruvec_memcg()
  uint64_t nonresident_age = 0;  // evictions and activations so far (mm/workingset.c)
  uint64_t anon_cost = 0, file_cost = 0;  // lru_note_cost(): what reclaiming each type cost lately
  unsigned long flags = 0;                // enum lruvec_flags
};
// enum lruvec_flags (include/linux/mmzone.h), bits of lruvec::flags. LRUVEC_CGROUP_CONGESTED: cgroup
// reclaim found every dirty folio it scanned under writeback and already marked for immediate
// reclaim; set on the reclaim target's lruvec, cleared when the target's reclaim ends.
// (LRUVEC_NODE_CONGESTED is kswapd's: no kswapd here.)
inline constexpr unsigned long LRUVEC_CGROUP_CONGESTED = 1ul << 0;
// enum vmscan_throttle_state (include/linux/mmzone.h): why reclaim_throttle() sleeps.
enum vmscan_throttle_state : unsigned {
  VMSCAN_THROTTLE_WRITEBACK,
  VMSCAN_THROTTLE_ISOLATED,
  VMSCAN_THROTTLE_NOPROGRESS,
  VMSCAN_THROTTLE_CONGESTED,
};
// A writeback domain's smoothed hard limit (struct wb_domain, include/linux/writeback.h): the
// global one and each memory cgroup's (memcg->cgwb_domain). dirty_limit follows the throttle
// threshold up at once and down slowly, every BANDWIDTH_INTERVAL (update_dirty_limit()), pages;
// its time stamp in jiffies.
struct wb_domain {
  uint64_t dirty_limit = 0;
  uint64_t dirty_limit_tstamp = 0;
};

// A memory cgroup (struct mem_cgroup, include/linux/memcontrol.h; cgroup v2): its page counter
// (memory.current against memory.max, in pages) and its LRU lists, one lruvec per node
// (mem_cgroup_per_node). The root (id 0) has no limit and holds every folio not charged elsewhere.
struct mem_cgroup {
  uint16_t id = 0;
  std::string name;
  uint64_t usage = 0;           // page_counter_read(&memcg->memory): pages charged
  uint64_t max = UINT64_MAX;    // memory.max, pages
  uint64_t high = UINT64_MAX;   // memory.high, pages
  uint64_t swap_usage = 0;      // page_counter_read(&memcg->swap): swap slots charged (memory.swap.current)
  uint64_t swap_max = UINT64_MAX;  // memory.swap.max, slots
  uint64_t swap_high = UINT64_MAX;  // memory.swap.high, slots
  uint64_t peak = 0;            // memory.peak, pages
  // memory.stat's file_dirty and file_writeback (lruvec_page_state NR_FILE_DIRTY, NR_WRITEBACK
  // summed over the nodes), pages.
  uint64_t nr_file_dirty = 0, nr_writeback = 0;
  wb_domain cgwb_domain;         // its dirty-throttling domain (balance_dirty_pages())
  std::vector<lruvec> nodeinfo;  // per node
};

// memory.high's throttling arithmetic (mm/memcontrol.c:1984-2068), in the kernel's fixed point.
inline constexpr uint64_t SWAP_CLUSTER_MAX = 32;   // include/linux/swap.h
inline constexpr unsigned MEMCG_CHARGE_BATCH = 64;  // include/linux/memcontrol.h
inline constexpr unsigned MEMCG_DELAY_PRECISION_SHIFT = 20;
inline constexpr unsigned MEMCG_DELAY_SCALING_SHIFT = 14;
// calculate_overage(): how far usage is over high, as a fraction of high << 20.
inline uint64_t calculate_overage(uint64_t usage, uint64_t high) {
  if (usage <= high) return 0;
  high = std::max<uint64_t>(high, 1);  // as if it were a threshold of 1 page
  return ((usage - high) << MEMCG_DELAY_PRECISION_SHIFT) / high;
}
// calculate_high_delay(): the jiffies to sleep for an overage, grown with its square and scaled
// by the task's own share of the charges (nr_pages against a nominal batch of 64).
inline uint64_t calculate_high_delay(uint64_t nr_pages, uint64_t max_overage, unsigned hz) {
  if (!max_overage) return 0;
  uint64_t penalty_jiffies = max_overage * max_overage * hz;
  penalty_jiffies >>= MEMCG_DELAY_PRECISION_SHIFT;
  penalty_jiffies >>= MEMCG_DELAY_SCALING_SHIFT;
  return penalty_jiffies * nr_pages / MEMCG_CHARGE_BATCH;
}

// folio_lru_list() (include/linux/mm_inline.h), without the unevictable list.
inline lru_list folio_lru_list(const folio* f) {
  unsigned l = folio_is_file_lru(f) ? LRU_INACTIVE_FILE : LRU_INACTIVE_ANON;
  if (folio_test_active(f)) ++l;
  return lru_list(l);
}

class Kernel {
 public:
  Kernel(const KernelParams& params, mmusim::pg::Isa isa, MmuHw& hw, mmusim::Stats& stats,
         mmusim::Trace* trace = nullptr);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // ============ entry points for drivers, platforms and tests ====================================
  // Which CPU executes the next entry, for which task, at what simulated time (trace stamps).
  void enter(task_struct* tsk, int cpu, uint64_t now_ps = 0) {
    current_ = tsk;
    cpu_ = cpu;
    now_ps_ = now_ps;
    // The entry's time is the cycles of the CPU that runs it (before the flusher's work, which
    // runs on this CPU's account).
    ghz_ = size_t(cpu) < cpu_ghz_.size() ? cpu_ghz_[size_t(cpu)] : base_ghz_;
    cost_scale_ = cost_scale_of_ ? cost_scale_of_(cpu) : 1.0;
    // The flusher's work (wb->dwork) runs first when its timer has fired or a waker made it due
    // (wb_wakeup()): no kernel threads, so at the first entry from then on.
    if (wb_dwork_now_ || (wb_dwork_ps_ && now_ps >= wb_dwork_ps_)) wb_workfn();
  }
  task_struct* current() const { return current_; }
  int smp_processor_id() const { return cpu_; }

  // A new process with an empty address space (what exec leaves), with one task.
  task_struct* create_process(const std::string& comm);
  // What exec() and the dynamic loader map besides anonymous memory, for the core's instruction
  // fetches and the vDSO's data (exec.cpp): a file's text, the vDSO text, the vvar area, mapped
  // at [start, start + len) with the first `populated` bytes present. Before the simulation
  // starts: nothing is charged or timed. Returns 0 or -errno.
  // `file`: a private file mapping with `prot` (a recorded program's executable, libraries and
  // their data), populated like the text; `anon`: private anonymous memory with `prot` (its
  // stack, bss, heap), nothing present.
  enum class ExecMapping : uint8_t { text, vdso, vvar, file, anon };
  int map_exec_image(task_struct* t, ExecMapping kind, uint64_t start, uint64_t len, uint64_t populated,
                     int prot = 0);
  // A trace's mmap() of a file, MAP_PRIVATE | MAP_FIXED (there is no page cache yet): what is
  // mapped there is unmapped, then the range is mapped as map_exec_image(file) maps it, every page
  // present. Charged as a system call and its munmap; the population is not (exec.cpp).
  int64_t mmap_file_stand_in(task_struct* t, uint64_t addr, uint64_t len, int prot);
  // The syscalls the workloads use. Return -errno on failure, as the kernel does.
  int64_t sys_mmap(task_struct* t, uint64_t addr, uint64_t len, int prot, int flags,
                   address_space* file = nullptr, uint64_t offset = 0);
  int sys_munmap(task_struct* t, uint64_t addr, uint64_t len);
  int sys_mprotect(task_struct* t, uint64_t addr, uint64_t len, int prot);
  int sys_madvise(task_struct* t, uint64_t addr, uint64_t len, int advice);
  // msync() (mm/msync.c): MS_SYNC writes the dirty pages of the shared file mappings in the range
  // and waits for them (vfs_fsync_range()); MS_ASYNC does nothing (since 2.6.19).
  int sys_msync(task_struct* t, uint64_t start, uint64_t len, int flags);
  task_struct* sys_fork(task_struct* parent);   // kernel_clone -> copy_process -> dup_mmap
  // clone(CLONE_VM | CLONE_THREAD ...): a thread of `parent`'s process, sharing its mm.
  task_struct* sys_clone_thread(task_struct* parent);
  void sys_exit(task_struct* t, int code);      // do_exit -> exit_mm -> mmput -> exit_mmap
  int sys_wait(task_struct* parent, task_struct* child);  // reap a zombie
  // A user page fault: the arch handler (x86 do_user_addr_fault / arm64 do_page_fault).
  FaultReturn handle_user_fault(task_struct* t, uint64_t addr, uint64_t syndrome, uint64_t ip);
  const FaultRecord& last_fault() const { return last_fault_; }

  // What the last entries cost; the caller converts it to time and clears it.
  CostAccount take_cost() {
    CostAccount c = cost_;
    clear_cost();
    return c;
  }
  CostAccount& cost() { return cost_; }
  // The same in place: the caller reads cost(), then clears it (no copy of the account).
  void clear_cost() {
    cost_.clear();
    cycles_so_far_ = 0;
    store_barrier_seen_ = false;
  }
  // The account as it stood when this entry first executed an instruction that waits for the
  // CPU's older stores (Arch::store_barrier_items): what ran before it overlaps the draining of
  // the user's buffered stores, what follows waits for them. Null: no such instruction yet.
  const CostAccount* cost_before_store_barrier() const {
    return store_barrier_seen_ ? &before_store_barrier_ : nullptr;
  }
  void charge(Cost c, uint64_t k = 1) {
    if (!store_barrier_seen_ && (store_barrier_items_ >> unsigned(c) & 1)) {
      store_barrier_seen_ = true;
      before_store_barrier_ = cost_;
    }
    cost_.charge(c, k);
    if (prices_) cycles_so_far_ += prices_->price(c, ghz_, cost_scale_) * double(k);
  }
  // This entry's cycles so far (multi-core platforms, which give the kernel its prices; else 0),
  // and one item's price in cycles (0 without prices).
  double cycles_now() const { return cycles_so_far_ + cost_.extra_cycles + cost_.sleep_cycles(); }
  double price_cycles(Cost c) const { return prices_ ? prices_->price(c, ghz_, cost_scale_) : 0; }
  // One item's price in the cycles of another CPU, at its clock and its cost scale now (the work
  // an IPI makes a remote CPU do: flush_tlb_func() there).
  double price_cycles_on(Cost c, int cpu) const {
    if (!prices_) return 0;
    const double g = size_t(cpu) < cpu_ghz_.size() ? cpu_ghz_[size_t(cpu)] : base_ghz_;
    return prices_->price(c, g, cost_scale_of_ ? cost_scale_of_(cpu) : 1.0);
  }
  // The simulated time now, inside the current entry: its start plus its cycles so far and its
  // waits for other CPUs' locks (without prices, the entry's start).
  uint64_t time_now_ps() const {
    const double waited = lock_obs_ ? lock_obs_->wait_cycles() : 0;
    return now_ps_ + uint64_t((cycles_now() + waited) * 1000.0 / ghz_ + 0.5);
  }
  // A platform gives the kernel its price list, so that lock events and disk requests carry the
  // entry's time so far, and (several cores) an observer of the locks.
  void set_lock_timing(const CostModel* prices, double ghz, LockObserver* obs) {
    prices_ = prices;
    ghz_ = base_ghz_ = ghz;
    lock_obs_ = obs;
  }
  // Each CPU's clock, where they differ (E-cores): an entry's prices and times are in the cycles
  // of the CPU it runs on (enter()). Empty: the set_lock_timing() clock for every CPU.
  void set_cpu_clocks(std::vector<double> ghz_of_cpu) { cpu_ghz_ = std::move(ghz_of_cpu); }
  double clock_ghz() const { return ghz_; }
  // How many of the CPU's cycles one calibrated cycle of the items priced in cycles takes on the
  // CPU an entry runs on, asked at each enter() (CostModel::cycles): the P-core's 1 unless the
  // platform says otherwise (an E-core's kernel IPC, an SMT sibling busy meanwhile). Null: 1.
  void set_cost_scale(std::function<double(int cpu)> scale_of_cpu) { cost_scale_of_ = std::move(scale_of_cpu); }
  double cost_scale() const { return cost_scale_; }
  // `line_pa`: the physical address of the lock word (lock_pa()); taking or releasing a lock
  // writes it (an atomic, or the unlock's store).
  void lock_event(const void* lock, LockClass cls, bool write, bool acquire, uint64_t line_pa) {
    if (!lock_obs_) return;
    shared_lines(line_pa, sizeof(uint64_t), LineClass(cls), true);
    if (hw_touch_) hw_.kernel_memory(cpu_, line_pa, sizeof(uint64_t), true);
    double t = cycles_now();
    if (acquire) lock_obs_->acquire(lock, cls, write, t, line_pa);
    else lock_obs_->release(lock, cls, write, t, line_pa);
  }
  // `nr` PTEs from `ptep` are about to be written (every PTE store of the port calls this first).
  void pte_changing(const pte_t* ptep, unsigned nr = 1) {
    if (lock_obs_) lock_obs_->pte_write(&ptep->val, nr, cycles_now());
  }
  // The value a lockless read of `*ptep` returns at this point of the entry (see LockObserver).
  pte_t pte_seen_lockless(const pte_t* ptep, pte_t value) const {
    if (!lock_obs_) return value;
    const uint64_t v = lock_obs_->lockless_read(&ptep->val, ptep->val, cycles_now());
    return v == ptep->val ? value : pte_t{v};
  }
  // The kernel read or wrote page-table entries (or other memory) through a host pointer into
  // simulated memory: the platform's caches see the lines (so the walker finds them warm).
  void pt_touch(const void* entry, size_t bytes, bool write) {
    if (!hw_touch_) return;
    const uint64_t pa = phys_.phys_of(entry);
    shared_lines(pa, bytes, LineClass::pte, write);
    hw_.kernel_memory(cpu_, pa, bytes, write);
  }
  // Several cores: the cache lines of [pa, pa + bytes) of kernel data, accessed now (their
  // transfers from other cores, LockObserver::line_access).
  void shared_lines(uint64_t pa, uint64_t bytes, LineClass cls, bool write) {
    if (!lock_obs_ || bytes == 0) return;
    for (uint64_t l = pa >> 6, last = (pa + bytes - 1) >> 6; l <= last; ++l)
      lock_obs_->line_access(l << 6, cls, write, cycles_now());
  }
  // Where the lock words live in physical memory (their cache lines): mmap_lock in the mm_struct,
  // the per-VMA lock in its struct vma_lock (6.12 allocates it apart from the VMA,
  // vma_lock_alloc() in kernel/fork.c), a split page-table lock in its table's struct page
  // (ptdesc->ptl, include/linux/mm.h ptlock_ptr() without ALLOC_SPLIT_PTLOCKS), the folio lock in
  // the head page's flags, the large-mapcount lock with _large_mapcount in the folio's first tail
  // page (struct folio, include/linux/mm_types.h). The mm and VMA objects get a line each, in
  // kernel memory above the vmemmap, the first time their lock is taken (kobj_line).
  uint64_t mm_lock_pa(mm_struct* mm) { return kobj_line(&mm->kobj_pa); }
  uint64_t vma_lock_pa(vm_area_struct* vma) { return kobj_line(&vma->kobj_pa); }
  uint64_t page_field_pa(const void* field) const {
    return struct_page_pa(pfn_t((static_cast<const char*>(field) - reinterpret_cast<const char*>(mem_map_)) /
                                ptrdiff_t(sizeof(page))));
  }
  uint64_t kobj_line(uint64_t* slot) {
    if (!*slot) {
      *slot = kobj_next_pa_;
      kobj_next_pa_ += 64;
    }
    return *slot;
  }
  // The kernel read or wrote the struct pages [p, p + nr) (mapcounts, flags, refcounts): their
  // lines go through the caches as the page tables' do. The port keeps mem_map_ in host memory;
  // the real kernel's is the vmemmap, 64 bytes per page frame (sizeof(struct page) on x86-64 and
  // arm64, include/linux/mm_types.h) in memory reserved at boot. Its physical place here:
  // kVmemmapPa + pfn * 64, above the frames the allocator hands out (only the cache lines are
  // modelled; no simulated memory backs them). A fork() of 256 MiB of 4K pages touches 4 MiB of
  // them twice (the parent's dup, the child's zap): they evict the page tables from the L2.
  static constexpr uint64_t kStructPageBytes = 64;
  uint64_t struct_page_pa(pfn_t pfn) const { return vmemmap_pa_ + pfn * kStructPageBytes; }
  void struct_page_touch(const page* p, long nr, bool write) {
    if (hw_touch_ && nr > 0) {
      const uint64_t pa = struct_page_pa(page_to_pfn(p));
      shared_lines(pa, uint64_t(nr) * kStructPageBytes, LineClass::struct_page, write);
      hw_.kernel_memory(cpu_, pa, uint64_t(nr) * kStructPageBytes, write);
    }
  }

  // ============ state ==========================================================================
  const KernelParams& params() const { return params_; }
  KernelParams& mutable_params() { return params_; }  // the THP "sysfs" knobs workloads set
  Arch& arch() { return *arch_; }
  mmusim::pg::Isa isa() const { return isa_; }
  PhysMem& phys() { return phys_; }
  MmuHw& hw() { return hw_; }
  KernelCounters& counters() { return ctr_; }
  mmusim::Stats& stats() { return stats_; }
  mmusim::Trace* trace() { return trace_; }
  uint64_t now_ps() const { return now_ps_; }
  const std::vector<std::unique_ptr<mm_struct>>& mms() const { return mms_; }
  const std::vector<std::unique_ptr<task_struct>>& tasks() const { return tasks_; }
  LockStats& mmap_lock_stats() { return mmap_lock_stats_; }
  LockStats& vma_lock_stats() { return vma_lock_stats_; }

  // ============ memmap and allocator (mm/page_alloc.c, include/linux/mm.h) ========================
  page* pfn_to_page(pfn_t pfn) { return &mem_map_[pfn]; }
  pfn_t page_to_pfn(const page* p) const { return pfn_t(p - mem_map_); }
  pfn_t folio_pfn(const folio* f) const { return page_to_pfn(f); }
  uint64_t page_to_phys(const page* p) const { return page_to_pfn(p) << PAGE_SHIFT; }
  uint64_t nr_frames() const { return nr_frames_; }
  uint64_t nr_free_pages() const { return nr_free_; }
  // Several cores: pages freed by an entry whose simulated time other CPUs have not reached.
  uint64_t nr_pending_free_pages() const { return nr_pending_free_; }
  // Several cores: the simulated time every core has reached (the platform's global time; cores
  // only run ahead of it): a frame freed later than that is not reused yet (buddy_free()).
  void set_horizon(std::function<uint64_t()> fn) { horizon_ps_ = std::move(fn); }
  // Several cores: the current entry ended at `end_ps` (the platform's leave_kernel()): the folios
  // it unmapped are unmapped, with their TLBs flushed, from then on (buddy_free()).
  void entry_end(uint64_t end_ps);
  // The rmap removal of a mapping of folio `f` (several cores: noted for entry_end()).
  void note_unmap(const folio* f) {
    if (lock_obs_) unmapped_this_entry_.push_back(page_to_pfn(f));
  }
  // NUMA (KernelParams::nr_nodes): the node of a frame (pfn_to_nid()) and of the running CPU
  // (numa_node_id()).
  unsigned nr_nodes() const { return unsigned(free_area_.size()); }
  int pfn_to_nid(pfn_t pfn) const {
    return int(std::min<uint64_t>(pfn / node_span_, free_area_.size() - 1));
  }
  uint64_t node_span_frames() const { return node_span_; }
  int numa_node_id() const { return int(unsigned(cpu_) / params_.cpus_per_node); }
  pfn_t zero_pfn() const { return zero_pfn_; }  // my_zero_pfn(): the shared zero page
  bool is_zero_pfn(pfn_t pfn) const { return pfn == zero_pfn_; }

  folio* folio_alloc(unsigned order, bool zero);  // __folio_alloc(); null when out of memory
  // vma_alloc_folio() (mm/mempolicy.c): the node memory.numa chooses for `addr` in `vma`.
  folio* vma_alloc_folio(unsigned order, vm_area_struct* vma, uint64_t addr, bool zero);
  folio* folio_alloc_node(unsigned order, bool zero, int nid);
  folio* folio_prealloc(mm_struct* mm, vm_area_struct* vma, uint64_t addr, bool need_zero);
  static bool vma_thp_gfp_may_reclaim(const vm_area_struct* vma);
  void folio_put(folio* f);           // drop a reference; frees the folio at zero
  void folios_put_refs(folio* f, int refs);
  void free_folio(folio* f);          // back to the buddy allocator (refcount 0, unmapped)
  // Per-CPU LRU-add batch (mm/swap.c): small folios wait there holding a reference.
  void folio_add_lru_vma(folio* f, vm_area_struct* vma);
  void lru_add_drain();               // this CPU's batch
  void lru_add_drain_all();

  // ============ the LRU lists and reclaim (vmscan.cpp; mm/vmscan.c, mm/rmap.c, mm/swap.c) =========
  // folio_lruvec(): the lruvec of the folio's memcg on the folio's node.
  lruvec& folio_lruvec(const folio* f) {
    return memcgs_[f->memcg_id]->nodeinfo[size_t(pfn_to_nid(page_to_pfn(f)))];
  }
  const std::vector<lruvec>& lruvecs() const { return memcgs_[0]->nodeinfo; }  // the root's
  // The memory cgroups (memcontrol.cpp; mm/memcontrol.c): the root (0) and, with memcg.max, the
  // workload's, which every process the kernel creates joins (as a benchmark started in a cgroup
  // with memory.max set: its children inherit it).
  const std::vector<std::unique_ptr<mem_cgroup>>& memcgs() const { return memcgs_; }
  mem_cgroup* mem_cgroup_create(const std::string& name, uint64_t max_bytes, uint64_t high_bytes = 0,
                                uint64_t swap_max_bytes = KernelParams::kMemcgSwapUnlimited,
                                uint64_t swap_high_bytes = KernelParams::kMemcgSwapUnlimited);
  // mem_cgroup_charge() (include/linux/memcontrol.h -> __mem_cgroup_charge(), mm/memcontrol.c:4536):
  // charge a new folio to mm's memcg (null mm: the current task's). Over the limit it reclaims
  // from the memcg (try_charge_memcg()); `may_retry` false is __GFP_NORETRY (readahead: one
  // round of reclaim) and `may_reclaim` false a gfp without __GFP_DIRECT_RECLAIM (THP faults
  // outside MADV_HUGEPAGE): then it fails instead. 0, or -ENOMEM. A charge that may retry and
  // still fails is the memcg's OOM (mem_cgroup_oom()): the OOM killer kills a process of the
  // memcg (oom_kill.cpp); the charge fails only for a task that is dying.
  int mem_cgroup_charge(folio* f, mm_struct* mm, bool may_retry = true, bool may_reclaim = true);
  void mem_cgroup_uncharge(folio* f);
  // resume_user_mode_work() (include/linux/resume_user_mode.h): what a task does on its way back
  // to user mode after an entry that set TIF_NOTIFY_RESUME; here mem_cgroup_handle_over_high(),
  // the only such work the port has. The platform calls it before the exception return or the
  // system call's return; a throttling sleep is CostAccount::throttle_cycles of the entry.
  void resume_user_mode_work();
  // mem_cgroup_handle_over_high() (mm/memcontrol.c:2076): reclaim what the current task charged
  // over memory.high, and sleep (schedule_timeout_killable()) if reclaim cannot keep up.
  void mem_cgroup_handle_over_high();
  // ============ the OOM killer and fatal signals (oom_kill.cpp; mm/oom_kill.c) =====================
  // A process the memcg's OOM killer killed (the kernel's "Memory cgroup out of memory: Killed
  // process ..." line), and a task a fault gave SIGSEGV or SIGBUS: the platform reports them.
  struct OomKill {
    int pid = 0, invoked_by = 0;
    std::string comm, memcg;
    uint64_t anon_rss_kb = 0, file_rss_kb = 0, swapents = 0, pgtables_kb = 0, usage_pages = 0, max_pages = 0;
  };
  struct FatalFault {
    int pid = 0, sig = 0;
    std::string comm;
    uint64_t address = 0;
  };
  const std::vector<OomKill>& oom_kills() const { return oom_kills_; }
  const std::vector<FatalFault>& fatal_faults() const { return fatal_faults_; }
  bool task_is_dying() const;
  bool mem_cgroup_oom(mem_cgroup* memcg, uint64_t nr_pages);
  bool out_of_memory(mem_cgroup* memcg);
  int64_t oom_badness(const task_struct* p) const;
  void oom_kill_process(task_struct* victim, mem_cgroup* memcg);
  void mark_oom_victim(task_struct* tsk);
  void oom_reap_task_mm(task_struct* tsk, mm_struct* mm);
  // A fatal signal `sig` to p's thread group (task_struct::fatal_signal).
  void do_send_sig_kill(task_struct* p, int sig);
  // A user fault's SIGSEGV or SIGBUS (FaultReturn::sigsegv/sigbus): with no handler, fatal.
  void force_sig_fault(task_struct* t, int sig, uint64_t address);
  // A fault's VM_FAULT_OOM (both arch handlers).
  void pagefault_out_of_memory(uint64_t address);
  // try_to_free_mem_cgroup_pages() (mm/vmscan.c:6596): reclaim from the memcg's lruvecs.
  uint64_t try_to_free_mem_cgroup_pages(mem_cgroup* memcg, uint64_t nr_pages);
  void lruvec_add_folio(lruvec& lv, folio* f) { lruvec_add_folio_at(lv, f, false); }  // at the head, PG_lru
  void lruvec_add_folio_tail(lruvec& lv, folio* f) { lruvec_add_folio_at(lv, f, true); }  // at the tail (reclaimed next)
  void lruvec_add_folio_at(lruvec& lv, folio* f, bool tail);
  void lruvec_del_folio(lruvec& lv, folio* f);       // off its list, PG_lru cleared
  // try_to_free_pages() (mm/vmscan.c:6511): direct reclaim on node `nid` for an allocation that
  // failed: at least SWAP_CLUSTER_MAX pages, priority 12 down to 0. Returns the pages freed.
  uint64_t try_to_free_pages(int nid, uint64_t nr_pages);
  // The VMAs that map a page of [pgoff, pgoff_last] of `mapping` (vma_interval_tree_foreach()
  // over i_mmap: every live mm's VMAs of the file, in mm creation then address order).
  template <typename F>
  void vma_interval_tree_foreach(address_space* mapping, uint64_t pgoff, uint64_t pgoff_last, F&& fn);
  // page_vma_mapped_walk() over the PTEs of `vma` that map pages of `f` (`address`: the folio's
  // first page's address in the VMA, which may lie outside it): fn(pte, addr, page in folio).
  template <typename F>
  void folio_walk_ptes(folio* f, vm_area_struct* vma, uint64_t address, F&& fn);
  // page_vma_mapped_walk()'s PMD case: the huge PMD of `vma` that maps the order-9 folio `f` at
  // `address` (its first page's), under the PMD lock: fn(pmd, address).
  template <typename F>
  void folio_walk_pmd(folio* f, vm_area_struct* vma, uint64_t address, F&& fn);
  // folio_referenced() (mm/rmap.c:983): the VMAs in which a PTE that maps the folio was young,
  // every such accessed bit cleared; `vm_flags` the union of their VMAs' flags.
  int folio_referenced(folio* f, vm_flags_t* vm_flags);
  // try_to_unmap() (mm/rmap.c:2013) of a page-cache folio, TTU_BATCH_FLUSH: every PTE mapping it
  // cleared; the flush deferred (try_to_unmap_flush()) where the arch batches it.
  void try_to_unmap(folio* f);
  void try_to_unmap_flush();
  // rmap_walk() (mm/rmap.c): fn(vma, address) for each VMA that may map the folio.
  template <typename F>
  void rmap_walk(folio* f, F&& fn);

  // process_huge_page() / folio_zero_user() / copy_user_large_folio() (mm/memory.c)
  void process_huge_page(uint64_t addr_hint, unsigned nr_pages,
                         const std::function<void(unsigned long idx, uint64_t addr)>& process_subpage);
  void folio_zero_user(folio* f, uint64_t addr_hint);
  void clear_user_highpage(page* p, uint64_t vaddr);
  void copy_user_highpage(page* to, page* from, uint64_t vaddr);
  int copy_user_large_folio(folio* dst, folio* src, uint64_t addr_hint, vm_area_struct* vma);

  // ============ page tables (mm/memory.c, mm/pgtable-generic.c, include/linux/pgtable.h) ========
  uint64_t* pgd_offset(mm_struct* mm, uint64_t addr);
  pud_t* pud_offset(uint64_t* pgd, uint64_t addr);   // p4d folded
  pmd_t* pmd_offset(pud_t* pud, uint64_t addr);
  pte_t* pte_offset_map(pmd_t* pmd, uint64_t addr);  // null if the PMD has no PTE table
  pte_t* pte_offset_map_lock(mm_struct* mm, pmd_t* pmd, uint64_t addr, uint32_t** ptlp);
  pte_t* pte_offset_map_nolock(mm_struct* mm, pmd_t* pmd, uint64_t addr, uint32_t** ptlp);
  void pte_unmap_unlock(pte_t* pte, uint32_t* ptl) { spin_unlock(ptl); }
  uint32_t* pte_lockptr(mm_struct* mm, pmd_t* pmd);
  uint32_t* pmd_lockptr(mm_struct* mm, pmd_t* pmd);
  uint32_t* pmd_lock(mm_struct* mm, pmd_t* pmd);
  void spin_lock(uint32_t* lock);
  void spin_unlock(uint32_t* lock);
  pud_t* pud_alloc(mm_struct* mm, uint64_t* pgd, uint64_t addr);
  pmd_t* pmd_alloc(mm_struct* mm, pud_t* pud, uint64_t addr);
  int __pte_alloc(mm_struct* mm, pmd_t* pmd);
  bool pte_alloc(mm_struct* mm, pmd_t* pmd) { return pmd_none(*pmd) && __pte_alloc(mm, pmd); }
  pfn_t pte_alloc_one(mm_struct* mm);   // a zeroed page-table page
  void pte_free(mm_struct* mm, pfn_t table);
  // The PMD entry for addr, or null if the upper levels are not there.
  pmd_t* mm_find_pmd(mm_struct* mm, uint64_t addr);
  // The PTE slot for addr, or null (no allocation, no lock).
  pte_t* find_pte(mm_struct* mm, uint64_t addr);
  pte_t* pt_entry(pfn_t table, unsigned index) {
    return reinterpret_cast<pte_t*>(phys_.frame_data(table)) + index;
  }
  // pgtable_trans_huge_deposit/withdraw (mm/pgtable-generic.c): a PTE table kept per huge PMD.
  void pgtable_trans_huge_deposit(mm_struct* mm, pmd_t* pmdp, pfn_t pgtable);
  pfn_t pgtable_trans_huge_withdraw(mm_struct* mm, pmd_t* pmdp);
  void free_pgtables(mm_struct* mm, uint64_t start, uint64_t end);  // tables no VMA needs now
  void free_pgd_range_all(mm_struct* mm);

  // ============ rmap (mm/rmap.c, include/linux/rmap.h) ============================================
  void __folio_set_anon(folio* f, vm_area_struct* vma, uint64_t address, bool exclusive);
  void folio_add_new_anon_rmap(folio* f, vm_area_struct* vma, uint64_t address, rmap_t flags);
  void folio_add_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma,
                                uint64_t address, rmap_t flags);
  void folio_add_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* vma, uint64_t address, rmap_t flags);
  void folio_remove_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma);
  void folio_remove_rmap_pte(folio* f, page* pg, vm_area_struct* vma) { folio_remove_rmap_ptes(f, pg, 1, vma); }
  void folio_remove_rmap_pmd(folio* f, page* pg, vm_area_struct* vma);
  // fork: duplicate the mappings for the child; -EBUSY when a possibly pinned page must be copied.
  int folio_try_dup_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* src_vma);
  int folio_try_dup_anon_rmap_pte(folio* f, page* pg, vm_area_struct* src_vma) {
    return folio_try_dup_anon_rmap_ptes(f, pg, 1, src_vma);
  }
  int folio_try_dup_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* src_vma);
  // CONFIG_MM_ID (v6.15+): the duplicated mappings belong to the child's MM, so these take both
  // VMAs, as the kernel's do since then. The forms above are for 6.12 / small folios only.
  int folio_try_dup_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* dst_vma,
                                   vm_area_struct* src_vma);
  int folio_try_dup_anon_rmap_pte(folio* f, page* pg, vm_area_struct* dst_vma, vm_area_struct* src_vma) {
    return folio_try_dup_anon_rmap_ptes(f, pg, 1, dst_vma, src_vma);
  }
  int folio_try_dup_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* dst_vma, vm_area_struct* src_vma);
  void folio_move_anon_rmap(folio* f, vm_area_struct* vma);
  // Page-cache folios (filemap.cpp): folio_add_file_rmap_ptes() when a fault maps them,
  // folio_dup_file_rmap_ptes() when fork copies their PTEs.
  void folio_add_file_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma);
  void folio_add_file_rmap_pmd(folio* f, page* pg, vm_area_struct* vma);
  void folio_dup_file_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* dst_vma);
  void folio_dup_file_rmap_pte(folio* f, page* pg, vm_area_struct* dst_vma) {
    folio_dup_file_rmap_ptes(f, pg, 1, dst_vma);
  }
  // CONFIG_MM_ID (newer): the large mapcount with its MM-id slots, under the large-mapcount lock.
  void folio_add_large_mapcount(folio* f, int diff, vm_area_struct* vma);
  void folio_sub_large_mapcount(folio* f, int diff, vm_area_struct* vma);
  void folio_lock_large_mapcount(folio* f);
  void folio_unlock_large_mapcount(folio* f);
  void deferred_split_folio(folio* f, bool partially_mapped);
  bool folio_trylock(folio* f);
  void folio_unlock(folio* f);
  bool folio_needs_cow_for_dma(vm_area_struct* vma, folio* f) {
    return vma->vm_mm->has_pinned && folio_maybe_dma_pinned(f);
  }

  // ============ fault paths (mm/memory.c) =========================================================
  vm_fault_t handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags);
  vm_fault_t __handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags);
  vm_fault_t handle_pte_fault(vm_fault* vmf);
  vm_fault_t do_pte_missing(vm_fault* vmf);
  // File faults (mm/memory.c's do_fault() family and mm/filemap.c; filemap.cpp).
  vm_fault_t do_fault(vm_fault* vmf);
  vm_fault_t do_read_fault(vm_fault* vmf);
  vm_fault_t do_cow_fault(vm_fault* vmf);
  vm_fault_t do_shared_fault(vm_fault* vmf);
  vm_fault_t __do_fault(vm_fault* vmf);
  vm_fault_t do_fault_around(vm_fault* vmf);
  bool should_fault_around(vm_fault* vmf);
  vm_fault_t finish_fault(vm_fault* vmf);
  // do_set_pmd() (mm/memory.c:4926): map an order-9 page-cache folio with one PMD.
  vm_fault_t do_set_pmd(vm_fault* vmf, folio* f, page* pg);
  // filemap_map_pmd() (mm/filemap.c:3466): true if the fault is done (a PMD mapped or found).
  bool filemap_map_pmd(vm_fault* vmf, folio* f, uint64_t start, bool* oom);
  void set_pte_range(vm_fault* vmf, folio* f, page* pg, unsigned nr, uint64_t addr);
  vm_fault_t do_page_mkwrite(vm_fault* vmf, folio* f);
  vm_fault_t fault_dirty_shared_page(vm_fault* vmf);
  vm_fault_t wp_page_shared(vm_fault* vmf, folio* f);
  vm_fault_t finish_mkwrite_fault(vm_fault* vmf, folio* f);
  vm_fault_t filemap_fault(vm_fault* vmf);
  vm_fault_t filemap_map_pages(vm_fault* vmf, uint64_t start_pgoff, uint64_t end_pgoff);
  vm_fault_t filemap_map_folio_range(vm_fault* vmf, folio* f, uint64_t index, uint64_t addr, unsigned nr_pages,
                                     uint64_t* rss, unsigned* mmap_miss);
  vm_fault_t filemap_page_mkwrite(vm_fault* vmf);
  // vma->vm_page_prot: the VMA's protection, without write for a shared file mapping that wants
  // write notification (vma_set_page_prot(), mm/mmap.c).
  pgprot_t vma_page_prot(const vm_area_struct* vma) const;
  bool vma_wants_writenotify(const vm_area_struct* vma) const;
  vm_fault_t do_anonymous_page(vm_fault* vmf);
  folio* alloc_anon_folio(vm_fault* vmf, bool* again);
  vm_fault_t vmf_anon_prepare(vm_fault* vmf);
  bool vmf_pte_changed(vm_fault* vmf);
  bool pte_range_none(pte_t* pte, int nr_pages);
  vm_fault_t do_wp_page(vm_fault* vmf);
  bool wp_can_reuse_anon_folio(folio* f, vm_area_struct* vma);
  bool __wp_can_reuse_large_anon_folio(folio* f, vm_area_struct* vma);
  void wp_reuse_large_anon_folio(vm_fault* vmf, folio* f);  // the patch
  void wp_page_reuse(vm_fault* vmf, folio* f);
  vm_fault_t wp_page_copy(vm_fault* vmf);
  int __wp_page_copy_user(page* dst, page* src, vm_fault* vmf);
  page* vm_normal_page(vm_area_struct* vma, uint64_t addr, pte_t pte);
  folio* vm_normal_folio(vm_area_struct* vma, uint64_t addr, pte_t pte);
  // folio_pte_batch() (6.12 mm/internal.h) and folio_pte_batch_flags() (newer).
  int folio_pte_batch(folio* f, uint64_t addr, pte_t* start_ptep, pte_t pte, int max_nr,
                      fpb_t flags, bool* any_writable, bool* any_young, bool* any_dirty);
  int folio_pte_batch_flags(folio* f, vm_area_struct* vma, pte_t* ptep, pte_t* ptentp, int max_nr,
                            fpb_t flags);
  // vma_soft_dirty_enabled() and pte_needs_soft_dirty_wp() (mm/internal.h): soft-dirty tracking
  // is on for a VMA whose VM_SOFTDIRTY was cleared (clear_refs), where the arch has
  // CONFIG_MEM_SOFT_DIRTY (x86); new VMAs carry VM_SOFTDIRTY.
  bool vma_soft_dirty_enabled(const vm_area_struct* vma) const {
    if (!arch_->mem_soft_dirty()) return false;
    return !(vma->vm_flags & VM_SOFTDIRTY);
  }
  bool pte_needs_soft_dirty_wp(const vm_area_struct* vma, pte_t pte) const {
    return vma_soft_dirty_enabled(vma) && !arch_->pte_soft_dirty(pte);
  }
  // can_change_pte_writable() (mm/mprotect.c)
  bool can_change_pte_writable(vm_area_struct* vma, uint64_t addr, pte_t pte);
  void mm_account_fault(uint64_t address, uint32_t flags, vm_fault_t ret);

  // ============ per-VMA lock and mmap_lock (mm/memory.c, include/linux/mm.h, mmap_lock.h) =========
  vm_area_struct* lock_vma_under_rcu(mm_struct* mm, uint64_t address);
  vm_area_struct* lock_mm_and_find_vma(mm_struct* mm, uint64_t address);
  bool vma_start_read(vm_area_struct* vma);
  void vma_end_read(vm_area_struct* vma);
  void vma_start_write(vm_area_struct* vma);
  void vma_mark_detached(vm_area_struct* vma, bool detached) { vma->detached = detached; }
  void mmap_read_lock(mm_struct* mm);
  bool mmap_read_trylock(mm_struct* mm);
  void mmap_read_unlock(mm_struct* mm);
  void mmap_write_lock(mm_struct* mm);
  void mmap_write_unlock(mm_struct* mm);
  void mmap_write_downgrade(mm_struct* mm);
  void release_fault_lock(vm_fault* vmf);  // mmap_lock or VMA lock, by FAULT_FLAG_VMA_LOCK

  // ============ huge pages (mm/huge_memory.c, include/linux/huge_mm.h) ============================
  unsigned long thp_vma_allowable_orders(vm_area_struct* vma, vm_flags_t vm_flags, bool in_pf,
                                         bool enforce_sysfs, unsigned long orders);
  bool thp_vma_suitable_order(vm_area_struct* vma, uint64_t addr, unsigned order);
  unsigned long thp_vma_suitable_orders(vm_area_struct* vma, uint64_t addr, unsigned long orders);
  vm_fault_t create_huge_pmd(vm_fault* vmf);
  vm_fault_t do_huge_pmd_anonymous_page(vm_fault* vmf);
  vm_fault_t __do_huge_pmd_anonymous_page(vm_fault* vmf, folio* f);
  vm_fault_t wp_huge_pmd(vm_fault* vmf);
  vm_fault_t do_huge_pmd_wp_page(vm_fault* vmf);
  vm_fault_t do_huge_pmd_wp_page_copy(vm_fault* vmf, folio* old);  // kernel.thp_cow = copy
  void huge_pmd_set_accessed(vm_fault* vmf);
  void __split_huge_pmd(vm_area_struct* vma, pmd_t* pmd, uint64_t address);
  void __split_huge_pmd_locked(vm_area_struct* vma, pmd_t* pmd, uint64_t haddr);
  int copy_huge_pmd(mm_struct* dst_mm, mm_struct* src_mm, pmd_t* dst_pmd, pmd_t* src_pmd,
                    uint64_t addr, vm_area_struct* dst_vma, vm_area_struct* src_vma);
  int zap_huge_pmd(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr);
  page* mm_get_huge_zero_page(mm_struct* mm);
  // is_huge_zero_folio()/is_huge_zero_pmd() (include/linux/huge_mm.h)
  bool is_huge_zero_folio(const folio* f) const { return f && f == huge_zero_folio_; }
  bool is_huge_zero_pmd(pmd_t pmd) {
    return huge_zero_folio_ && arch_->pmd_present(pmd) && arch_->pmd_pfn(pmd) == folio_pfn(huge_zero_folio_);
  }

  // ============ fork (kernel/fork.c, mm/memory.c) ==================================================
  int dup_mmap(mm_struct* mm, mm_struct* oldmm);
  int copy_page_range(vm_area_struct* dst_vma, vm_area_struct* src_vma);
  bool vma_needs_copy(vm_area_struct* dst_vma, vm_area_struct* src_vma);
  int copy_pmd_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pud_t* dst_pud, pud_t* src_pud,
                     uint64_t addr, uint64_t end);
  int copy_pte_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd,
                     uint64_t addr, uint64_t end);
  int copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte,
                        pte_t pte, uint64_t addr, int max_nr, int* rss, folio** prealloc);
  void __copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte,
                           pte_t* src_pte, pte_t pte, uint64_t addr, int nr);
  int copy_present_page(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte,
                        uint64_t addr, int* rss, folio** prealloc, page* pg);

  // ============ teardown (mm/memory.c, mm/mmap.c, mm/mmu_gather.c) ===============================
  void tlb_gather_mmu(mmu_gather* tlb, mm_struct* mm);
  void tlb_gather_mmu_fullmm(mmu_gather* tlb, mm_struct* mm);
  void tlb_finish_mmu(mmu_gather* tlb);
  void tlb_flush_mmu(mmu_gather* tlb);
  void tlb_flush_mmu_tlbonly(mmu_gather* tlb);
  void tlb_remove_tlb_entries(mmu_gather* tlb, pte_t* ptep, unsigned nr, uint64_t address);
  bool __tlb_remove_folio_pages(mmu_gather* tlb, page* pg, unsigned nr_pages);  // true: flush now
  void unmap_vmas(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end);
  void unmap_page_range(mmu_gather* tlb, vm_area_struct* vma, uint64_t addr, uint64_t end);
  uint64_t zap_pmd_range(mmu_gather* tlb, vm_area_struct* vma, pud_t* pud, uint64_t addr, uint64_t end);
  uint64_t zap_pte_range(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, uint64_t end);
  int zap_present_ptes(mmu_gather* tlb, vm_area_struct* vma, pte_t* pte, pte_t ptent, unsigned max_nr,
                       uint64_t addr, int* rss, bool* force_flush, bool* force_break);
  void zap_present_folio_ptes(mmu_gather* tlb, vm_area_struct* vma, folio* f, page* pg, pte_t* pte,
                              pte_t ptent, unsigned nr, uint64_t addr, int* rss, bool* force_flush,
                              bool* force_break);
  void exit_mmap(mm_struct* mm);
  void mmput(mm_struct* mm);
  void zap_page_range_single(vm_area_struct* vma, uint64_t address, uint64_t size);  // MADV_DONTNEED
  // The kernel's own forms where the short ones above lack state (teardown: mmu_gather.cpp,
  // exit.cpp, munmap.cpp). `vmas`: the VMAs in address order (the maple state the kernel passes).
  bool __tlb_remove_page_size(mmu_gather* tlb, page* pg, uint64_t page_size);  // true: flush now
  void tlb_remove_page_size(mmu_gather* tlb, page* pg, uint64_t page_size);
  void tlb_remove_table(mmu_gather* tlb, pfn_t table);
  void tlb_table_flush(mmu_gather* tlb);
  void tlb_batch_pages_flush(mmu_gather* tlb);
  void tlb_flush(mmu_gather* tlb);  // the arch's tlb_flush() (asm/tlb.h)
  void tlb_start_vma(mmu_gather* tlb, vm_area_struct* vma);
  void tlb_end_vma(mmu_gather* tlb, vm_area_struct* vma);
  void unmap_vmas(mmu_gather* tlb, const std::vector<vm_area_struct*>& vmas, uint64_t start, uint64_t end);
  void unmap_single_vma(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end);
  uint64_t zap_pud_range(mmu_gather* tlb, vm_area_struct* vma, uint64_t* pgd, uint64_t addr, uint64_t end);
  void free_pgtables(mmu_gather* tlb, const std::vector<vm_area_struct*>& vmas, uint64_t floor,
                     uint64_t ceiling, bool mm_wr_locked);
  void free_pgd_range(mmu_gather* tlb, uint64_t addr, uint64_t end, uint64_t floor, uint64_t ceiling);
  void zap_deposited_table(mm_struct* mm, pmd_t* pmd);
  void exit_mm(task_struct* t);
  void __mmput(mm_struct* mm);
  int do_vmi_munmap(mm_struct* mm, uint64_t start, uint64_t len, bool unlock);

  // ============ address space (mm/mmap.c, mm/vma.c, mm/mprotect.c, mm/madvise.c) =================
  vm_area_struct* find_vma(mm_struct* mm, uint64_t addr);  // first VMA with vm_end > addr
  vm_area_struct* vma_lookup(mm_struct* mm, uint64_t addr); // the VMA containing addr
  uint64_t get_unmapped_area(mm_struct* mm, uint64_t addr, uint64_t len, uint64_t align, uint64_t pgoff = 0);
  vm_area_struct* vma_insert(mm_struct* mm, std::unique_ptr<vm_area_struct> vma);
  std::unique_ptr<vm_area_struct> vma_remove(mm_struct* mm, vm_area_struct* vma);
  // Splits so that a VMA boundary falls at addr (__split_vma).
  int split_vma(mm_struct* mm, vm_area_struct* vma, uint64_t addr);
  int anon_vma_prepare(vm_area_struct* vma);
  int mprotect_fixup(vm_area_struct* vma, uint64_t start, uint64_t end, vm_flags_t newflags);
  long change_protection(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end);
  // The kernel's own forms (munmap.cpp): mprotect_fixup() with the caller's gather and `*pprev`,
  // change_protection() with MM_CP_* flags, and the VMA modification that merges or splits.
  int mprotect_fixup(mmu_gather* tlb, vm_area_struct* vma, vm_area_struct** pprev, uint64_t start,
                     uint64_t end, vm_flags_t newflags);
  long change_protection(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end,
                         unsigned long cp_flags);
  long change_pmd_range(mmu_gather* tlb, vm_area_struct* vma, pud_t* pud, uint64_t addr, uint64_t end,
                        pgprot_t newprot, unsigned long cp_flags);
  long change_pte_range(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, uint64_t end,
                        pgprot_t newprot, unsigned long cp_flags);
  int change_huge_pmd(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, pgprot_t newprot,
                      unsigned long cp_flags);
  // vma_modify_flags() (mm/vma.c): merge with a neighbour or split so that [start, end) is one
  // VMA; null with *err set on failure.
  vm_area_struct* vma_modify_flags(vm_area_struct* prev, vm_area_struct* vma, uint64_t start,
                                   uint64_t end, vm_flags_t new_flags, int* err);

  // ============ invariants (PORTMAP §3.3) ==========================================================
  // Checks every invariant over every mm; panics with the state that shows a violation. `where`
  // names the operation just done. A no-op unless kernel.check_invariants (or `force`).
  void check_invariants(const char* where, bool force = false);
  uint64_t checks_skipped_ = 0;  // kernel.check_every's count of the calls
  // kernel.check_local: after a fault at `addr` in `mm`, the checks there (check.cpp run_local()).
  void check_local(const char* where, const mm_struct* mm, uint64_t addr);
  // TLB coherence (invariant 8) needs the hardware's TLB contents; the platform registers them.
  struct CachedTranslation {
    int cpu;
    uint16_t asid;
    uint64_t va;        // page-aligned
    uint64_t page_size;
    pfn_t pfn;
    bool writable;
  };
  using TlbEnumerator = std::function<void(const std::function<void(const CachedTranslation&)>&)>;
  void set_tlb_enumerator(TlbEnumerator e) { tlb_enum_ = std::move(e); }

  // Trace helper for kernel events (contpte_convert, fork, exit).
  void trace_event(const char* name, std::initializer_list<mmusim::TraceField> fields);
  // The `mmap` event: a VMA `t`'s process created (sys_mmap, the program image): start, len,
  // prot ("rwx" with '-'), kind (anon, file, text, vdso, vvar).
  void trace_mmap(task_struct* t, uint64_t start, uint64_t len, vm_flags_t flags, const char* kind);

  FaultRecord& fault_record() { return last_fault_; }

  // ============ files and the page cache (filemap.cpp; mm/filemap.c, mm/readahead.c) =============
  // A file of `size` bytes whose contents follow from `seed` (file_word()), nothing cached.
  address_space* file_create(const std::string& name, uint64_t size, uint64_t seed);
  const std::vector<std::unique_ptr<address_space>>& files() const { return files_; }
  // The 8 bytes at `offset` (8-aligned) of a file as created (beyond i_size: zero).
  static uint64_t file_word(const address_space* m, uint64_t offset);
  // The same as the file's disk holds them now: what writeback wrote there, else as created.
  static uint64_t disk_word(const address_space* m, uint64_t offset);
  folio* filemap_get_folio(address_space* mapping, uint64_t index);  // +1 reference, or null
  // How filemap_add_folio() charges the folio (mem_cgroup_charge(folio, NULL, gfp)): the current
  // task's memcg with the mapping's gfp (reclaim, retry, OOM), with readahead's (__GFP_NORETRY:
  // one round of reclaim, then -ENOMEM), or not at all (filled before the run, by nobody of the
  // workload: the root's).
  enum class CacheCharge : uint8_t { mapping_gfp, readahead_gfp, root };
  int filemap_add_folio(address_space* mapping, folio* f, uint64_t index,
                        CacheCharge how = CacheCharge::mapping_gfp);
  void filemap_read_folio(address_space* mapping, folio* f);  // contents from the disk
  // Drops the fault lock on the first attempt of a fault that may retry (*fpin: it was dropped).
  void maybe_unlock_mmap_for_io(vm_fault* vmf, bool* fpin);
  void do_sync_mmap_readahead(vm_fault* vmf, bool* fpin);
  void folio_mark_dirty(folio* f);
  // Writeback (page_writeback.cpp: mm/page-writeback.c, fs/fs-writeback.c).
  // The dirty-page state, global (global_node_page_state NR_FILE_DIRTY, NR_WRITEBACK), pages.
  uint64_t nr_file_dirty() const { return nr_file_dirty_; }
  // Node statistics of PMD-sized page cache, pages: NR_FILE_THPS (cached folios of order >= 9)
  // and NR_FILE_PMDMAPPED (of them, those mapped by at least one PMD).
  uint64_t nr_file_thps() const { return nr_file_thps_; }
  uint64_t nr_file_pmdmapped() const { return nr_file_pmdmapped_; }
  uint64_t nr_writeback() const { return nr_writeback_; }
  // folio_clear_dirty_for_io() (mm/page-writeback.c): the folio's PTEs write-protected and clean
  // (folio_mkclean()), its dirty state taken for a write; true: it was dirty. Locked folio.
  bool folio_clear_dirty_for_io(folio* f);
  int folio_mkclean(folio* f);  // mm/rmap.c: PTEs cleaned
  // do_writepages() of a mapping (WB_SYNC_NONE, range-cyclic): up to nr_to_write dirty folios
  // from mapping->writeback_index written, adjacent ones in one request; returns pages written.
  uint64_t do_writepages(address_space* mapping, uint64_t nr_to_write);
  // The same with WB_SYNC_ALL over the pages [first, last] (__filemap_fdatawrite_range()): every
  // dirty folio there written, one under writeback waited for first (a data-integrity write).
  uint64_t do_writepages_range(address_space* mapping, uint64_t first, uint64_t last);
  uint64_t writepages(address_space* mapping, uint64_t nr_to_write, bool sync_all, uint64_t first, uint64_t last);
  // fsync of [fstart, fend] (bytes, inclusive): vfs_fsync_range() -> the filesystem's ->fsync
  // -> file_write_and_wait_range(): written and waited for.
  int vfs_fsync_range(address_space* mapping, uint64_t fstart, uint64_t fend, int datasync);
  // __filemap_fdatawait_range(): wait for every folio under writeback in [first, last].
  void __filemap_fdatawait_range(address_space* mapping, uint64_t first, uint64_t last);
  // folio_wait_writeback(): the task sleeps until the folio's write completes (its end then
  // processed, as the disk's interrupt does before the waiter runs).
  void folio_wait_writeback(folio* f);
  // wakeup_flusher_threads(WB_REASON_VMSCAN) (fs/fs-writeback.c) with the work done at once: the
  // flusher writes every dirty page (wb_check_start_all()).
  void wakeup_flusher_threads_vmscan();
  // wb_start_background_writeback() (fs/fs-writeback.c): wakes the flusher, whose work (later:
  // wb_workfn() -> wb_check_background_flush()) writes while a domain is over its background
  // threshold.
  void wb_start_background_writeback(const mem_cgroup* memcg);
  void wb_check_background_flush(const mem_cgroup* memcg);
  // wb_wakeup(): the flusher's work is due now; wb_run_queued_work(): it runs while the current
  // task sleeps (the kworker gets the CPU).
  void wb_wakeup();
  void wb_run_queued_work();
  // balance_dirty_pages_ratelimited() (mm/page-writeback.c), after the current task dirtied a
  // page of `mapping`.
  void balance_dirty_pages_ratelimited(address_space* mapping, const folio* f);
  // The dirty limits of a domain (struct dirty_throttle_control): what can be dirty (avail), the
  // background and the throttle thresholds, and what is dirty (NR_FILE_DIRTY, + NR_WRITEBACK);
  // for balance_dirty_pages() also the wb's share and state in it (one wb: the whole domain) and
  // the position ratio (fixed point, RATELIMIT_CALC_SHIFT).
  struct dirty_throttle_control {
    uint64_t avail = 0, bg_thresh = 0, thresh = 0, file_dirty = 0, dirty = 0;
    wb_domain* dom = nullptr;
    uint64_t wb_thresh = 0, wb_bg_thresh = 0, wb_dirty = 0;
    int64_t pos_ratio = 0;
    bool dirty_exceeded = false, freerun = false;
  };
  // The bdi's writeback state that dirty throttling uses (struct bdi_writeback, one for the disk):
  // the write bandwidth estimate and the base dirty rate limit, in pages per second, with their
  // time stamp (jiffies) and the WB_DIRTIED / WB_WRITTEN counts they were last computed from.
  struct bdi_writeback {
    uint64_t bw_time_stamp = 0;
    uint64_t dirtied = 0, written = 0;  // wb_stat(WB_DIRTIED), wb_stat(WB_WRITTEN)
    uint64_t dirtied_stamp = 0, written_stamp = 0;
    uint64_t write_bandwidth = 0, avg_write_bandwidth = 0;
    uint64_t dirty_ratelimit = 0, balanced_dirty_ratelimit = 0;
    bool dirty_exceeded = false;
  };
  const bdi_writeback& wb() const { return wb_; }
  dirty_throttle_control global_dirty_limits() const;
  // The memory cgroup's domain (mem_cgroup_wb_stats() + mdtc_calc_avail()); root: none (false).
  bool memcg_dirty_limits(const mem_cgroup* memcg, const dirty_throttle_control& gdtc,
                          dirty_throttle_control* mdtc) const;
  // One read of `nr` pages from the disk, submitted now: its cost and count; returns when it
  // completes (simulated time; now without a disk).
  uint64_t read_request(unsigned nr);
  void set_block_device(BlockDev* b) { bdev_ = b; }
  // Whether the folio's read is still in flight at this point of the entry: PG_locked and not
  // PG_uptodate as the other tasks see it (the port fills the folio at submission).
  bool folio_io_pending(const folio* f) const { return f->io_until_ps > time_now_ps(); }
  // The current task sleeps until the folio's read completes (folio_wait_locked()): the time is
  // the entry's (CostAccount::io_wait_cycles).
  void folio_wait_io(folio* f);
  // lock_folio_maybe_drop_mmap() (mm/filemap.c): the folio locked, waiting for its read with the
  // fault lock dropped if that is allowed; false: FAULT_FLAG_RETRY_NOWAIT and it is locked.
  bool lock_folio_maybe_drop_mmap(vm_fault* vmf, folio* f, bool* fpin);
  // Every page of the file in the page cache, uptodate and clean, as after a read of the whole
  // file before the run: not simulated (nothing charged or timed).
  void file_fill_cache(address_space* mapping);
  // Reads `nr` pages from [index, ...) into the page cache: one I/O request per run of missing
  // pages, submitted, not waited for (the folios stay under read until it completes).
  // `simulated` false: outside the simulation (file_fill_cache()), not charged or counted. The
  // folio `nr - lookahead` pages in (if one is added there) gets PG_readahead.
  unsigned page_cache_ra_unbounded(address_space* mapping, uint64_t index, uint64_t nr, uint64_t lookahead = 0,
                                   bool simulated = true);
  // do_page_cache_ra() (mm/readahead.c): page_cache_ra_unbounded() up to the end of the file.
  void do_page_cache_ra(address_space* mapping, uint64_t index, uint64_t nr, uint64_t lookahead,
                        bool simulated = true);
  // page_cache_ra_order() (mm/readahead.c): the window [index, index + size), its last
  // `async_size` pages the async part, in folios of new_order + 2 where the mapping allows
  // large folios, else do_page_cache_ra().
  void page_cache_ra_order(address_space* mapping, uint64_t index, uint64_t size, uint64_t async_size,
                           unsigned new_order, bool simulated = true);
  // read_pages() (mm/readahead.c): one request for the batch's locked folios, unlocked at its
  // completion; the batch emptied.
  void read_pages(std::vector<folio*>& batch, bool simulated);
  // page_cache_async_ra() (mm/readahead.c): a fault found `f` (at `index`) marked PG_readahead.
  void page_cache_async_ra(address_space* mapping, folio* f, uint64_t index, uint64_t req_count);

  // ============ swap (swap.cpp; mm/swapfile.c, mm/swap_state.c, mm/page_io.c, do_swap_page()) ====
  // One swap device (type 0) on the disk, `swap.size` bytes: per slot a swap count (swap_map) and
  // what was written there; the swap cache (swapper_spaces) holds the folios of swap entries by
  // entry. A swap PTE is the arch's encoding of an entry (Arch::swp_entry_to_pte()).
  struct swap_info_struct {
    uint64_t max = 0;               // slots; slot 0 is the swap header, never used
    std::vector<uint8_t> swap_map;  // swap count | SWAP_HAS_CACHE
    std::vector<bool> zeromap;      // the slot's page was zero-filled: not written, read as zeros
    uint64_t inuse_pages = 0;
    // Per-CPU clusters of SWAPFILE_CLUSTER slots (swap_cluster_info, percpu_cluster): each CPU
    // allocates in order within its own cluster, so one CPU's swap-out is contiguous on the disk.
    std::vector<uint32_t> cluster_count;  // slots in use per cluster
    std::array<uint64_t, 64> percpu_next{};  // a CPU's next slot, 0: it has no cluster
    uint64_t next_cluster = 0;      // where the search for a free cluster starts
    std::unordered_map<uint64_t, std::vector<uint8_t>> data;  // the slots' contents on the disk
    std::vector<uint16_t> swap_cgroup;  // the memcg charged for each slot (swap_cgroup_record())
  };
  void swapon(uint64_t bytes);  // sys_swapon() of a swap partition of `bytes`
  bool swap_enabled() const { return bool(si_); }
  uint64_t get_nr_swap_pages() const { return si_ ? si_->max - 1 - si_->inuse_pages : 0; }
  const swap_info_struct* swap_info() const { return si_.get(); }
  int __swap_count(swp_entry_t e) const;
  int swap_duplicate(swp_entry_t e);
  void swap_free_nr(swp_entry_t e, int nr);
  int free_swap_and_cache(swp_entry_t e);
  folio* swap_cache_get_folio(swp_entry_t e, vm_area_struct* vma, uint64_t addr);
  // The swap cache's folio for `e`, if any, without a reference or readahead statistics (for
  // checkers: filemap_get_entry() on the swap address space).
  folio* swap_cache_peek(swp_entry_t e) const {
    auto it = swap_cache_.find(e.val);
    return it == swap_cache_.end() ? nullptr : it->second;
  }
  bool folio_free_swap(folio* f);
  bool add_to_swap(folio* f);
  void delete_from_swap_cache(folio* f);
  bool vm_swap_full() const;
  // mem_cgroup_swap_full() (mm/memcontrol.c): vm_swap_full(), or the folio's memcg has used half
  // its memory.swap.max.
  bool mem_cgroup_swap_full(const folio* f) const;
  // mem_cgroup_get_nr_swap_pages() (mm/memcontrol.c): the free slots the memcg may still take.
  uint64_t mem_cgroup_get_nr_swap_pages(const mem_cgroup* memcg) const;
  // __mem_cgroup_try_charge_swap() / __mem_cgroup_uncharge_swap() (mm/memcontrol.c), cgroup v2:
  // a slot charged to the folio's memcg against memory.swap.max (-ENOMEM over it), and the
  // charge dropped when the slot is freed.
  int mem_cgroup_try_charge_swap(const folio* f, uint64_t offset);
  void mem_cgroup_uncharge_swap(uint64_t offset);
  vm_fault_t do_swap_page(vm_fault* vmf);
  // Writes in flight whose time has come end (folio_end_writeback()); reclaim looks first.
  void writeback_end_due();

 private:
  uint64_t folio_alloc_swap(folio* f);  // a free slot's offset, 0: none (get_swap_pages())
  void swap_entry_free(uint64_t offset);
  int add_to_swap_cache(folio* f, swp_entry_t e);
  void __delete_from_swap_cache(folio* f, swp_entry_t e);
  void remove_swap_cache_entry(folio* f, swp_entry_t e);
  bool folio_zero_filled(const folio* f);  // is_folio_zero_filled() (mm/page_io.c)
  void swap_slot_store(folio* f);
  folio* __read_swap_cache_async(swp_entry_t e, vm_area_struct* vma, uint64_t addr, bool* new_page_allocated);
  uint64_t swap_read_folio(folio* f, std::vector<folio*>* plug);
  void swap_read_unplug(std::vector<folio*>& plug);
  bool swap_writepage(folio* f);          // true: written (under writeback), false: no I/O needed
  folio* swapin_readahead(swp_entry_t e, vm_fault* vmf);
  unsigned swap_vma_ra_win(vm_fault* vmf, uint64_t* start, uint64_t* end);
  void folio_end_writeback(folio* f);
  vm_fault_t folio_lock_or_retry(folio* f, vm_fault* vmf);
  std::unique_ptr<swap_info_struct> si_;
  std::unordered_map<uint64_t, folio*> swap_cache_;  // swp_entry_t.val -> folio
  std::vector<std::pair<uint64_t, folio*>> writeback_;  // (completion, folio) of writes in flight
  // Writeback (page_writeback.cpp).
  void folio_account_dirtied(folio* f, address_space* mapping);
  void folio_account_cleaned(folio* f);
  void __folio_start_writeback(folio* f);
  void __folio_end_writeback(folio* f);
  // wb_writeback() (fs/fs-writeback.c): dirty inodes written, oldest first, in chunks of
  // writeback_chunk_size(), until nr_pages are written or (background) the thresholds are met.
  // The work's kind: every dirty page (WB_REASON_VMSCAN's start-all), background (while over a
  // background threshold) or periodic (kupdate: the inodes dirtied dirty_expire_centisecs ago).
  enum class WbWork : uint8_t { all, background, periodic };
  uint64_t wb_writeback(uint64_t nr_pages, WbWork kind, const mem_cgroup* memcg);
  // wb_workfn() -> wb_do_writeback() (fs/fs-writeback.c): the flusher's delayed work when its
  // timer fires: wb_check_old_data_flush() (kupdate), wb_check_background_flush(); armed again
  // while inodes are dirty (wb_wakeup_delayed(): dirty_writeback_centisecs).
  void wb_workfn();
  void wb_wakeup_delayed();
  uint64_t wb_dwork_ps_ = 0;      // when the delayed work's timer fires (0: not queued)
  bool wb_dwork_now_ = false;     // wb_wakeup(): the work is due now (runs at the next entry or sleep)
  int wb_bg_memcg_id_ = -1;       // the memcg whose dirtier woke the background work (-1: none)
  uint64_t wb_last_old_flush_ = 0;  // wb->last_old_flush, jiffies
  bool wb_over_bg_thresh(const mem_cgroup* memcg) const;
  uint64_t nr_file_dirty_ = 0, nr_writeback_ = 0;
  uint64_t nr_file_thps_ = 0, nr_file_pmdmapped_ = 0;  // __mod_lruvec_stat NR_FILE_THPS, NR_FILE_PMDMAPPED
  bdi_writeback wb_;                     // (wb_init(): the estimates start at INIT_BW)
  wb_domain global_wb_domain_;
  std::vector<address_space*> b_dirty_;  // the wb's dirty inodes, in dirtied_when order
  // balance_dirty_pages() (mm/page-writeback.c) and what it uses.
  void balance_dirty_pages(const mem_cgroup* memcg, uint64_t pages_dirtied);
  void wb_position_ratio(dirty_throttle_control* dtc) const;
  void __wb_update_bandwidth(dirty_throttle_control* gdtc, dirty_throttle_control* mdtc, uint64_t now);
  void wb_update_dirty_ratelimit(dirty_throttle_control* dtc, uint64_t dirtied, uint64_t elapsed);
  void wb_update_write_bandwidth(uint64_t elapsed, uint64_t written);
  void trace_balance_dirty_pages(const dirty_throttle_control& dtc, uint64_t dirty_ratelimit, uint64_t task_ratelimit,
                                 uint64_t dirtied, int64_t period, int64_t pause, uint64_t start_time);
  uint64_t jiffies() const;  // the simulated time now, in ticks of params_.hz
  uint64_t jiffies_to_ps(uint64_t j) const;  // when tick `j` comes (a timer set for it fires then)
  // The flusher's work for `reason` (trace events writeback_start / writeback_written around it).
  uint64_t wb_start_work(const char* reason, mmusim::Counter& runs, uint64_t nr_pages, WbWork kind,
                         const mem_cgroup* memcg);
  void wb_init();
  bool in_flusher_ = false;              // the flusher's work is running (no recursion)

 private:
  // The running entry's account, put back when this goes: what is done meanwhile is not the
  // entry's work (the flusher's, a kernel thread's; or work outside the simulation). Its cost,
  // its cycles so far and its store-barrier mark.
  struct OtherContext {
    Kernel& k;
    const CostAccount cost = k.cost_;
    const double so_far = k.cycles_so_far_;
    const bool barrier_seen = k.store_barrier_seen_;
    const CostAccount before_barrier = k.before_store_barrier_;
    explicit OtherContext(Kernel& kk) : k(kk) {}
    ~OtherContext() {
      k.cost_ = cost;
      k.cycles_so_far_ = so_far;
      k.store_barrier_seen_ = barrier_seen;
      k.before_store_barrier_ = before_barrier;
    }
    OtherContext(const OtherContext&) = delete;
    OtherContext& operator=(const OtherContext&) = delete;
  };
  // What the kernel does outside the simulation (the program image, a file read before the run):
  // no cost, no cache traffic, no lock timing while it lives (put back when it goes).
  struct NotSimulated : OtherContext {
    const bool touch = k.hw_touch_;
    LockObserver* const obs = k.lock_obs_;
    const bool reclaim = k.may_reclaim_;
    explicit NotSimulated(Kernel& kk) : OtherContext(kk) {
      k.hw_touch_ = false;
      k.lock_obs_ = nullptr;
      k.may_reclaim_ = false;  // (a page cache filled before the run does not evict itself)
    }
    ~NotSimulated() {
      k.hw_touch_ = touch;
      k.lock_obs_ = obs;
      k.may_reclaim_ = reclaim;
    }
  };
  void init_memmap();
  mm_struct* mm_alloc();
  void buddy_free(pfn_t pfn, unsigned order);
  void __free_one_page(pfn_t pfn, unsigned order, bool give_back = true);
  void release_pending_frees(bool all);
  pfn_t buddy_alloc(unsigned order, int nid);
  pfn_t buddy_alloc_now(unsigned order, int nid);
  // Several cores: blocks freed, allocatable from their free's simulated time on (buddy_free()).
  struct PendingFree {
    uint64_t at_ps;
    pfn_t pfn;
    unsigned order;
  };
  std::vector<PendingFree> pending_free_;
  uint64_t nr_pending_free_ = 0;
  // Several cores: the folios this entry unmapped (their head pfns), and for each folio an earlier
  // entry unmapped, that entry's end in simulated time. Its unmaps and their TLB flushes are done
  // by then; a later-run entry of another CPU that frees the folio may be earlier in simulated
  // time, and the folio's frames must stay what they were until the unmaps' time (buddy_free()).
  std::vector<pfn_t> unmapped_this_entry_;
  std::unordered_map<pfn_t, uint64_t> unmapped_until_ps_;
  std::function<uint64_t()> horizon_ps_;
  pfn_t rmqueue_node(unsigned order, int nid);

  KernelParams params_;
  mmusim::pg::Isa isa_;
  PhysMem phys_;
  MmuHw& hw_;
  mmusim::Stats& stats_;
  mmusim::Trace* trace_;
  bool hw_touch_;
  KernelCounters ctr_;
  std::unique_ptr<Arch> arch_;
  CostAccount cost_;
  uint32_t store_barrier_items_ = 0;  // arch_->store_barrier_items()
  bool store_barrier_seen_ = false;
  CostAccount before_store_barrier_;
  const CostModel* prices_ = nullptr;
  double ghz_ = 1;                // the clock of the current entry's CPU
  double base_ghz_ = 1;           // set_lock_timing()'s: every CPU's without set_cpu_clocks()
  std::vector<double> cpu_ghz_;   // set_cpu_clocks()
  std::function<double(int)> cost_scale_of_;  // set_cost_scale()
  double cost_scale_ = 1;         // this entry's (enter())
  double cycles_so_far_ = 0;
  LockObserver* lock_obs_ = nullptr;
  BlockDev* bdev_ = nullptr;
  LockStats mmap_lock_stats_, vma_lock_stats_;

  uint64_t nr_frames_ = 0;
  uint64_t vmemmap_pa_ = 0;  // struct_page_pa(): just above the last frame
  uint64_t kobj_next_pa_ = 0;  // kobj_line(): just above the vmemmap
  page* mem_map_ = nullptr;  // calloc'd: untouched entries cost no host memory
  uint64_t nr_free_ = 0;
  std::vector<FreeArea> free_area_;  // per NUMA node (its pglist_data's zone's free_area)
  uint64_t node_span_ = 0;           // frames per node (the last node also takes the rest)
  uint64_t interleave_next_ = 0;     // memory.numa = interleave: the next node without a VMA offset
  pfn_t zero_pfn_ = 0;
  folio* huge_zero_folio_ = nullptr;
  std::vector<std::vector<folio*>> lru_batch_;  // per CPU
  std::vector<std::unique_ptr<mem_cgroup>> memcgs_;  // [0] the root
  mem_cgroup* workload_memcg_ = nullptr;             // memcg.max's cgroup, which new mms join
  // struct tlbflush_unmap_batch (current->tlb_ubc): the mms whose PTEs try_to_unmap() cleared
  // without a flush yet.
  // current->tlb_ubc (struct tlbflush_unmap_batch, include/linux/sched.h): the arch's batch (the
  // mms whose flush is deferred) and whether a flush is owed. One per kernel: the kernel runs one
  // entry at a time and flushes before the entry's reclaim returns.
  struct tlbflush_unmap_batch {
    std::vector<mm_struct*> arch;
    bool flush_required = false;
  } tlb_ubc_;
  struct scan_control;
  // `nr_pageout`: pages written (or zero-filled and kept in the zeromap) are added there.
  // struct reclaim_stat (include/linux/vmstat.h): what shrink_folio_list() found, pages.
  struct reclaim_stat {
    uint64_t nr_dirty = 0, nr_unqueued_dirty = 0, nr_congested = 0, nr_writeback = 0;
  };
  // scan_control's nr (mm/vmscan.c): what shrink_inactive_list() found during one shrink_node(),
  // pages (the counts kswapd's flags use are left out: no kswapd); and sc->nr_scanned of one
  // priority of direct reclaim (do_try_to_free_pages() resets it).
  struct {
    uint64_t dirty = 0, congested = 0;
  } sc_nr_;
  uint64_t sc_nr_scanned_ = 0;
  // shrink_node() (mm/vmscan.c:5968) on node `nid`: the lruvecs of the reclaim's target (every
  // memcg's for global reclaim, reclaim_target_'s for cgroup reclaim) at `priority`, added to
  // `*nr_reclaimed`; then the congestion flag and reclaim_throttle(CONGESTED).
  void shrink_node(int nid, int priority, uint64_t nr_to_reclaim, uint64_t* nr_reclaimed);
  // reclaim_throttle() (mm/vmscan.c:527): the reclaiming task sleeps (the entry's throttle_cycles).
  void reclaim_throttle(int nid, vmscan_throttle_state reason);
  bool skip_throttle_noprogress(int nid) const;
  uint64_t zone_reclaimable_pages(int nid) const;
  void consider_reclaim_throttle(int nid, int priority, uint64_t nr_reclaimed);
  // NR_ZONE_WRITE_PENDING per node (include/linux/mmzone.h): folios dirty (page cache, accounted)
  // or under writeback (page cache and swap), pages.
  std::vector<uint64_t> node_write_pending_;
  void node_write_pending_mod(const folio* f, int64_t nr);
  unsigned shrink_folio_list(std::vector<folio*>& folio_list, uint64_t* nr_pageout = nullptr,
                             reclaim_stat* stat = nullptr);
  uint64_t shrink_inactive_list(uint64_t nr_to_scan, lruvec& lv, lru_list lru, bool cgroup);
  void shrink_active_list(uint64_t nr_to_scan, lruvec& lv, lru_list lru);
  uint64_t isolate_lru_folios(uint64_t nr_to_scan, lruvec& lv, std::vector<folio*>* dst, uint64_t* nr_scanned,
                              lru_list lru);
  void move_folios_to_lru(lruvec& lv, std::vector<folio*>& list);
  bool inactive_is_low(const lruvec& lv, lru_list inactive_lru) const;
  uint64_t shrink_lruvec(lruvec& lv, int priority, uint64_t nr_to_reclaim, bool cgroup);
  void lru_note_cost(lruvec& lv, bool file, uint64_t nr_io, uint64_t nr_rotated);
  int try_charge_memcg(mem_cgroup* memcg, uint64_t nr_pages, bool may_retry, bool may_reclaim);
  // reclaim_high() (mm/memcontrol.c:1899): reclaim `nr_pages` from a memcg over memory.high.
  uint64_t reclaim_high(mem_cgroup* memcg, uint64_t nr_pages);
  // The per-CPU charge stock's fill (memcg_stock_pcp.nr_pages): how many pages of the last batch
  // charge (MEMCG_CHARGE_BATCH) the CPU still holds. The port charges the counter page by page
  // (usage is exact); the stock's fill only decides, as in the kernel, which charges are batch
  // charges, the ones that check memory.high, and with how many pages (stock_batch_charge()).
  std::vector<uint32_t> memcg_stock_;
  uint64_t stock_batch_charge(uint64_t nr_pages);
  bool __remove_mapping(address_space* mapping, folio* f);
  // mm/workingset.c: the shadow of an evicted folio, its refault's activation decision.
  void workingset_age_nonresident(lruvec& lv, uint64_t nr_pages);
  address_space::shadow_entry workingset_eviction(folio* f);
  void workingset_refault(folio* f, const address_space::shadow_entry& shadow);
  // scan_control's target_mem_cgroup: the memcg being reclaimed (null: global reclaim).
  mem_cgroup* reclaim_target_ = nullptr;
  pfn_t alloc_pages_direct_reclaim(int nid);
  bool may_reclaim_ = true;  // false outside the simulation (NotSimulated)
  std::map<uint64_t, pfn_t> deposited_;         // PMD slot (phys addr) -> deposited PTE table

  std::vector<std::unique_ptr<address_space>> files_;
  std::vector<std::unique_ptr<mm_struct>> mms_;
  std::vector<std::unique_ptr<task_struct>> tasks_;
  int next_pid_ = 1;
  int next_mm_id_ = 1;
  uint32_t next_anon_vma_id_ = 1;

  task_struct* current_ = nullptr;
  std::vector<OomKill> oom_kills_;
  std::vector<FatalFault> fatal_faults_;
  int cpu_ = 0;
  uint64_t now_ps_ = 0;
  FaultRecord last_fault_;
  TlbEnumerator tlb_enum_;
};

// vm_area_dup() (kernel/fork.c): a copy of a VMA with a fresh per-VMA lock.
std::unique_ptr<vm_area_struct> vm_area_dup(const vm_area_struct* orig);

// Builds the arch layer for an ISA (arch/x86, arch/arm64).
std::unique_ptr<Arch> make_arch(mmusim::pg::Isa isa, Kernel& k);

}  // namespace kmm
