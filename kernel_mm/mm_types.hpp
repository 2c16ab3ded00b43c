// SPDX-License-Identifier: GPL-2.0-only
// mm_struct, vm_area_struct, task_struct, anon_vma and the locks on the fault paths
// (include/linux/mm_types.h, include/linux/mmap_lock.h, include/linux/mm.h per-VMA lock).
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernel_mm/types.hpp"

namespace kmm {

inline constexpr int kMaxCpus = 64;
using cpumask_t = std::bitset<kMaxCpus>;

// Lock accounting shared by every lock of one kind (reported as kernel.lock.<name>.*).
struct LockStats {
  uint64_t acquisitions = 0;
  uint64_t contended = 0;  // an acquisition that found the lock unavailable
  uint64_t trylock_failures = 0;
};

// A writer-preferring reader/writer semaphore (kernel/locking/rwsem.c semantics that matter here:
// a waiting writer blocks new readers; trylocks never wait). Without a scheduler that can make a
// task wait in simulated time, an acquisition that would have to wait is a bug.
class rw_semaphore {
 public:
  bool down_read_trylock();
  void down_read();
  void up_read();
  bool down_write_trylock();
  void down_write();
  void up_write();
  void downgrade_write();  // writer -> reader, letting other readers in

  int readers() const { return readers_; }
  bool write_locked() const { return writer_; }
  int waiting_writers() const { return waiting_writers_; }
  bool is_locked() const { return writer_ || readers_ > 0; }
  void set_stats(LockStats* s) { stats_ = s; }
  // Multi-core platforms register writers that wait (simulated time) through this count.
  void add_waiting_writer(int d) { waiting_writers_ += d; }

 private:
  int readers_ = 0;
  bool writer_ = false;
  int waiting_writers_ = 0;
  LockStats* stats_ = nullptr;
};

struct mm_struct;
struct mem_cgroup;

// Minimal anon_vma: the identity that folio->mapping points to; fork gives the child VMA a new
// anon_vma chained to the parent's (anon_vma_fork), which is all the rmap decisions here need.
struct anon_vma {
  uint32_t id = 0;
  uint32_t root_id = 0;
  int refcount = 0;
};

struct page;

// A file of the simulated filesystem: its inode (size, contents) and its page cache
// (struct address_space, include/linux/fs.h; the xarray i_pages is a map by page index). The
// contents are a function of the file's seed and the offset (Kernel::file_word), so that a read
// is checkable; what a shared mapping wrote is written back to the disk (mm/page-writeback.c,
// kernel_mm/page_writeback.cpp) and read from there again once reclaim dropped the folio.
// The read-ahead state (struct file_ra_state) is the file's here; the kernel keeps one per open
// file.
struct address_space {
  uint32_t ino = 0;
  std::string name;
  uint64_t i_size = 0;      // bytes
  uint64_t seed = 0;
  std::map<uint64_t, page*> i_pages;  // a folio's first page index (folio->index) -> the folio
                                      // (the xarray's multi-index entry covers all its pages:
                                      // filemap_get_entry() finds it from any of them)
  uint64_t nrpages = 0;
  // The folio orders the filesystem allows in this mapping (mapping->flags' AS_FOLIO_ORDER_MIN
  // and _MAX, include/linux/pagemap.h:214): 0/0 is ext4 on 6.12 (large folios for regular files
  // only from 6.16); XFS sets [0, MAX_PAGECACHE_ORDER] (mapping_set_large_folios()).
  uint8_t min_folio_order = 0;
  uint8_t max_folio_order = 0;
  // The xarray's value entries: the shadow a reclaimed folio leaves at its index
  // (workingset_eviction(): pack_shadow()'s fields), until the page comes back.
  struct shadow_entry {
    uint16_t memcgid = 0;     // the lruvec whose pressure evicted it: its memcg
    uint16_t nid = 0;         // and node
    bool workingset = false;  // PG_workingset: it had been active
    uint64_t eviction = 0;    // that lruvec's nonresident_age then (bucket_order 0)
  };
  std::map<uint64_t, shadow_entry> shadows;  // page index -> shadow (never also in i_pages)
  // struct file_ra_state
  // Writeback (include/linux/fs.h, include/linux/writeback.h): the indices tagged
  // PAGECACHE_TAG_DIRTY, where range-cyclic writeback resumes (mapping->writeback_index), and the
  // inode's place on its wb's b_dirty list (I_DIRTY_PAGES, inode->dirtied_when).
  std::set<uint64_t> dirty_tags;
  uint64_t writeback_index = 0;
  bool inode_dirty = false;
  uint64_t dirtied_when_ps = 0;
  // What the disk holds of the file where it differs from the seed: the bytes of each page
  // written back, by index (the file's blocks; a dropped folio is read from here).
  std::map<uint64_t, std::vector<uint8_t>> written;
  unsigned ra_pages = 32;   // bdi->ra_pages: VM_READAHEAD_PAGES (128 KiB), include/linux/mm.h
  unsigned mmap_miss = 0;
  uint64_t ra_start = 0;    // the current window: its first page, size, and the pages at its
  uint64_t ra_size = 0;     // end whose first access starts the next (its PG_readahead folio)
  uint64_t ra_async_size = 0;
};

// MAX_PAGECACHE_ORDER (include/linux/pagemap.h:377): min(PMD order, the xarray's split limit
// 2 * XA_CHUNK_SHIFT - 1 = 11): 9 with 4 KiB pages.
inline constexpr unsigned MAX_PAGECACHE_ORDER = HPAGE_PMD_ORDER;

// mapping_set_large_folios() (include/linux/pagemap.h:445): folios of any order up to
// MAX_PAGECACHE_ORDER, as XFS, tmpfs, EROFS, bcachefs and the network filesystems set in 6.12.
inline void mapping_set_large_folios(address_space* m) {
  m->min_folio_order = 0;
  m->max_folio_order = uint8_t(MAX_PAGECACHE_ORDER);
}
inline unsigned mapping_min_folio_order(const address_space* m) { return m->min_folio_order; }
inline unsigned mapping_max_folio_order(const address_space* m) { return m->max_folio_order; }
// mapping_large_folio_support() (include/linux/pagemap.h:491)
inline bool mapping_large_folio_support(const address_space* m) { return m->max_folio_order > 0; }

// filemap_get_entry() (mm/filemap.c:1832) without the reference: the cached folio that contains
// page `index` (a large folio is found from any of its pages, as the xarray's multi-index entry
// is), or null. (kernel_mm/filemap.cpp)
page* filemap_get_entry(const address_space* m, uint64_t index);
// The first cached folio that contains or starts after `index` (xas_find()), or null.
page* filemap_find_from(const address_space* m, uint64_t index);

struct vm_area_struct {
  uint64_t vm_start = 0;
  uint64_t vm_end = 0;
  mm_struct* vm_mm = nullptr;
  vm_flags_t vm_flags = 0;
  uint64_t vm_pgoff = 0;  // vm_start >> PAGE_SHIFT for anonymous VMAs
  std::shared_ptr<anon_vma> anon;  // vma->anon_vma (null until the first anon fault)
  address_space* vm_file = nullptr;  // vma->vm_file->f_mapping; null: anonymous (no vm_ops)
  // vma->swap_readahead_info (mm/swap_state.c SWAP_RA_VAL()): the last swap fault's address,
  // its readahead window and the readahead hits since.
  uint64_t swap_ra_addr = 0;
  unsigned swap_ra_win = 0, swap_ra_hits = 0;

  // Per-VMA lock (CONFIG_PER_VMA_LOCK, 6.12: vm_lock_seq + vm_lock->lock + detached).
  int64_t vm_lock_seq = -1;
  rw_semaphore vm_lock;
  bool detached = false;
  uint64_t kobj_pa = 0;  // the vma_lock's line in physical memory (Kernel::vma_lock_pa), 0: none yet

  uint64_t size() const { return vm_end - vm_start; }
};

struct mm_struct {
  int id = 0;            // also the MM-id (mm->mm_id) and the ASID/PCID the TLBs tag entries with
  uint64_t pgd = 0;      // physical address of the top-level table (CR3 / TTBR0)
  // The VMAs, ordered by vm_end (the maple tree's role).
  std::map<uint64_t, std::unique_ptr<vm_area_struct>> mm_mt;
  rw_semaphore mmap_lock;
  uint64_t kobj_pa = 0;  // mmap_lock's line in physical memory (Kernel::mm_lock_pa), 0: none yet
  int64_t mm_lock_seq = 0;           // mm->mm_lock_seq (a sequence; odd while write-locked)
  int64_t rss_stat[NR_MM_COUNTERS] = {};
  int64_t pgtables_bytes = 0;
  uint32_t write_protect_seq = 0;    // raw seqcount bumped by fork's copy_page_range
  bool has_pinned = false;           // MMF_HAS_PINNED
  int mm_users = 1;
  cpumask_t cpumask;                 // mm_cpumask(): CPUs that may hold TLB entries of this mm
  uint64_t tlb_gen = 0;              // context.tlb_gen (x86)
  uint64_t mmap_base = 0x7f0000000000ull;  // top-down get_unmapped_area starts here
  std::string owner_comm;
  mem_cgroup* memcg = nullptr;       // the memory cgroup of mm->owner (get_mem_cgroup_from_mm(); null: the root)
  // MMF_OOM_SKIP: the OOM reaper (or exit_mmap()) has freed what it could of this mm; the OOM
  // killer passes over its tasks (oom_badness(), oom_evaluate_task()).
  bool oom_skip = false;
};

enum class TaskState : uint8_t { Runnable, Blocked, Zombie, Dead };

struct task_struct {
  int pid = 0;
  int tgid = 0;
  std::string comm;
  mm_struct* mm = nullptr;
  int cpu = 0;
  TaskState state = TaskState::Runnable;
  int exit_code = 0;
  task_struct* parent = nullptr;
  // Pages charged over the memcg's memory.high since the task last returned to user mode
  // (current->memcg_nr_pages_over_high; set_notify_resume() makes that return reclaim them).
  unsigned memcg_nr_pages_over_high = 0;
  // balance_dirty_pages_ratelimited()'s state (current->nr_dirtied, ->nr_dirtied_pause): pages
  // this task dirtied since its last check, and how many it may dirty before the next one (32 for
  // a new task: 128 >> (PAGE_SHIFT - 10), copy_process()).
  unsigned nr_dirtied = 0;
  unsigned nr_dirtied_pause = 32;
  // When the task's dirty-throttling clock says it last paused (current->dirty_paused_when,
  // jiffies; 0: never): a pause is the period of its pages at task_ratelimit less the time since.
  uint64_t dirty_paused_when = 0;
  // A fatal signal is pending (fatal_signal_pending(): SIGKILL, or a SIGSEGV/SIGBUS nobody
  // handles: every workload here takes the default action): its number, 0 none. The task dies
  // on its way back to user mode or when it next runs (the platform: System::deliver_fatal_signals).
  int fatal_signal = 0;
  bool oom_victim = false;  // tsk_is_oom_victim(): mark_oom_victim() chose it (TIF_MEMDIE)
};

// linear_page_index() (include/linux/pagemap.h): the page offset of `address` in what the VMA
// maps (the file, or the anon_vma's linear space).
inline uint64_t linear_page_index(const vm_area_struct* vma, uint64_t address) {
  return ((address - vma->vm_start) >> PAGE_SHIFT) + vma->vm_pgoff;
}
// vma_pages() (include/linux/mm.h)
inline uint64_t vma_pages(const vm_area_struct* vma) { return (vma->vm_end - vma->vm_start) >> PAGE_SHIFT; }

// get_mm_counter()/add_mm_counter() (include/linux/mm.h)
inline int64_t get_mm_counter(const mm_struct* mm, int member) { return mm->rss_stat[member]; }
inline void add_mm_counter(mm_struct* mm, int member, int64_t value) { mm->rss_stat[member] += value; }
inline void inc_mm_counter(mm_struct* mm, int member) { ++mm->rss_stat[member]; }
inline void dec_mm_counter(mm_struct* mm, int member) { --mm->rss_stat[member]; }

}  // namespace kmm
