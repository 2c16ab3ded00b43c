// SPDX-License-Identifier: GPL-2.0-only
// Writeback of dirty page cache: dirty accounting and the dirtier's check of the dirty limits
// (mm/page-writeback.c), the flusher (fs/fs-writeback.c) and the filesystem's writepages (fs/mpage.c,
// as a simple block filesystem such as ext2 writes). Linux 6.12; docs/research-writeback.md has
// the map with the sources.
//
// What is here:
//   - folio_mark_dirty() of a page-cache folio accounts it (NR_FILE_DIRTY, node and memcg;
//     NR_DIRTIED), tags its index dirty and puts its inode on the wb's dirty list;
//   - writing a folio: folio_clear_dirty_for_io() -> folio_mkclean() (every PTE of a shared
//     mapping write-protected and cleaned, one TLB flush each, so the next store faults and
//     dirties it again), __folio_start_writeback() (NR_WRITEBACK), one request to the disk per
//     run of adjacent pages (at most 256: a bio's BIO_MAX_VECS), folio_end_writeback() when the
//     disk completes it (NR_WRITTEN; a folio reclaim marked moves to the inactive tail);
//   - the disk keeps what was written (address_space::written); a folio reclaim drops is read
//     from there again;
//   - the flusher, woken for background writeback (a dirtier found a domain over its limits) or
//     by reclaim that found only dirty folios (WB_REASON_VMSCAN: every dirty page), writes inodes
//     oldest first in chunks (writeback_chunk_size());
//   - balance_dirty_pages(), every nr_dirtied_pause pages a task dirties: the global domain and
//     the memory cgroup's (mdtc_calc_avail()), the background kick, freerun.
// Simplified (each marked where it happens): the flusher's work runs at once, in the entry that
// wakes it, and its CPU work is charged to nobody (a kernel thread on another CPU: there are no
// kernel threads; the remote TLB flushes of folio_mkclean() still reach the CPUs that hold the
// mm); one wb for all inodes (no cgroup writeback: a memcg's background writeback writes every
// dirty inode); the write bandwidth estimate stays at its initial value (INIT_BW); no periodic
// (kupdate, 5 s / 30 s) writeback; a dirtier over the freerun ceiling is not paused
// (kernel.dirty_over_freerun counts where the kernel would pause it): no dirty_ratelimit,
// pos_ratio or pause yet.
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

// vm_dirty_ratio, dirty_background_ratio (mm/page-writeback.c defaults), percent.
constexpr uint64_t kDirtyRatio = 20, kDirtyBackgroundRatio = 10;
// MIN_WRITEBACK_PAGES (fs/fs-writeback.c): 4 MiB.
constexpr uint64_t MIN_WRITEBACK_PAGES = 4096 >> (PAGE_SHIFT - 10);
// INIT_BW (include/linux/backing-dev-defs.h): 100 MB/s, in pages per second: the wb's
// avg_write_bandwidth before its first estimate (kept: see the header).
constexpr uint64_t INIT_BW = (100 << 20) >> PAGE_SHIFT;
constexpr uint64_t DIRTY_SCOPE = 8;        // include/linux/writeback.h
constexpr size_t BIO_MAX_VECS = 256;       // include/linux/bio.h: vectors per bio

// dirty_poll_interval() (mm/page-writeback.c): pages a task may dirty before the next check,
// about the square root of the margin to the threshold.
uint64_t dirty_poll_interval(uint64_t dirty, uint64_t thresh) {
  if (thresh > dirty) return uint64_t(1) << (unsigned(63 - __builtin_clzll(thresh - dirty)) >> 1);
  return 1;
}

// domain_dirty_limits() (mm/page-writeback.c) with the default ratios.
void domain_dirty_limits(Kernel::dirty_throttle_control* dtc) {
  dtc->thresh = dtc->avail * kDirtyRatio / 100;
  dtc->bg_thresh = dtc->avail * kDirtyBackgroundRatio / 100;
  if (dtc->bg_thresh >= dtc->thresh) dtc->bg_thresh = dtc->thresh / 2;
}

// The freerun ceiling (dirty_freerun_ceiling()): halfway between the two thresholds.
uint64_t dirty_freerun_ceiling(const Kernel::dirty_throttle_control& dtc) {
  return (dtc.thresh + dtc.bg_thresh) / 2;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Dirty accounting

// folio_mark_dirty() (mm/page-writeback.c) -> filemap_dirty_folio() -> __folio_mark_dirty() and
// __mark_inode_dirty(I_DIRTY_PAGES) for a page-cache folio; a folio with a mapping (the page
// cache's or the swap cache's) loses PG_reclaim first: a folio dirtied again is no longer to be
// rotated when its write ends. Anything else only gets PG_dirty (noop_dirty_folio()).
void Kernel::folio_mark_dirty(folio* f) {
  address_space* mapping = folio_test_anon(f) ? nullptr : f->mapping;
  if (mapping || folio_test_swapcache(f)) f->flags &= ~PG_reclaim;
  if (folio_test_dirty(f)) return;
  f->flags |= PG_dirty;
  charge(Cost::folio_op);
  if (mapping) folio_account_dirtied(f, mapping);
}

// folio_account_dirtied() (mm/page-writeback.c) with the xarray's PAGECACHE_TAG_DIRTY and
// __mark_inode_dirty(): a clean inode goes on the wb's b_dirty list, dirtied now.
void Kernel::folio_account_dirtied(folio* f, address_space* mapping) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  nr_file_dirty_ += nr;
  memcgs_[f->memcg_id]->nr_file_dirty += nr;
  ctr_.nr_dirtied.inc(nr);
  if (current_) current_->nr_dirtied += unsigned(nr);
  mapping->dirty_tags.insert(f->index);
  if (!mapping->inode_dirty) {
    mapping->inode_dirty = true;
    mapping->dirtied_when_ps = time_now_ps();
    b_dirty_.push_back(mapping);
  }
}

// folio_account_cleaned() (mm/page-writeback.c)
void Kernel::folio_account_cleaned(folio* f) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  MMUSIM_CHECK(nr_file_dirty_ >= nr && memcgs_[f->memcg_id]->nr_file_dirty >= nr,
               "folio_account_cleaned: pfn {:#x}: more cleaned than dirty", page_to_pfn(f));
  nr_file_dirty_ -= nr;
  memcgs_[f->memcg_id]->nr_file_dirty -= nr;
}

// folio_clear_dirty_for_io() (mm/page-writeback.c), the folio locked: the PTEs' dirty bits moved
// to the folio and the PTEs write-protected (folio_mkclean()), then PG_dirty taken for the write.
bool Kernel::folio_clear_dirty_for_io(folio* f) {
  MMUSIM_CHECK(folio_test_locked(f), "folio_clear_dirty_for_io: pfn {:#x} not locked", page_to_pfn(f));
  if (folio_mkclean(f)) folio_mark_dirty(f);
  if (!folio_test_dirty(f)) return false;
  f->flags &= ~PG_dirty;
  folio_account_cleaned(f);
  return true;
}

// __folio_start_writeback() (mm/page-writeback.c): PG_writeback, the DIRTY tag cleared (the folio
// is clean), NR_WRITEBACK up.
void Kernel::__folio_start_writeback(folio* f) {
  f->flags |= PG_writeback;
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  nr_writeback_ += nr;
  memcgs_[f->memcg_id]->nr_writeback += nr;
  if (!folio_test_dirty(f)) f->mapping->dirty_tags.erase(f->index);
}

// __folio_end_writeback() (mm/page-writeback.c) of a page-cache folio: NR_WRITEBACK down,
// NR_WRITTEN up.
void Kernel::__folio_end_writeback(folio* f) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  MMUSIM_CHECK(nr_writeback_ >= nr && memcgs_[f->memcg_id]->nr_writeback >= nr,
               "__folio_end_writeback: pfn {:#x}: more ended than started", page_to_pfn(f));
  nr_writeback_ -= nr;
  memcgs_[f->memcg_id]->nr_writeback -= nr;
  ctr_.nr_written.inc(nr);
}

// ------------------------------------------------------------------------------------------------
// Writing a mapping's folios

// do_writepages() -> mpage_writepages() -> writeback_iter() (mm/page-writeback.c), WB_SYNC_NONE
// and range-cyclic: from mapping->writeback_index to the end of the file (no wrap in the same
// pass), each dirty-tagged folio locked, skipped if under writeback, else cleaned for I/O
// (folio_clear_dirty_for_io()) and put under writeback; mpage's bio goes to the disk when the next
// folio does not follow it or it is full (BIO_MAX_VECS). The disk keeps the bytes (the file's
// blocks); the folio is unlocked at submission and its write ends at the request's completion.
uint64_t Kernel::do_writepages(address_space* mapping, uint64_t nr_to_write) {
  std::vector<folio*> bio;
  uint64_t written = 0;
  auto submit = [&]() {  // mpage_bio_submit_write()
    if (bio.empty()) return;
    charge(Cost::io_request);
    ctr_.io_requests.inc();
    ctr_.file_write_requests.inc();
    const uint64_t bytes = uint64_t(bio.size()) << PAGE_SHIFT;
    const uint64_t now = time_now_ps();
    const uint64_t done = bdev_ ? bdev_->submit_write(now, bytes) : now;
    trace_event("block_rq_issue", {mmusim::TraceField::dec("bytes", bytes), mmusim::TraceField::dec("submit_ps", now),
                                   mmusim::TraceField::dec("complete_ps", done), mmusim::TraceField::str("rw", "write")});
    for (folio* f : bio) writeback_.emplace_back(done, f);
    bio.clear();
  };
  // The tagged indices from writeback_index on (a copy: writing changes the tags).
  const std::vector<uint64_t> indices(mapping->dirty_tags.lower_bound(mapping->writeback_index),
                                      mapping->dirty_tags.end());
  uint64_t next_index = 0;  // where the next pass starts: 0 once the end of the file was reached
  for (const uint64_t index : indices) {
    if (written >= nr_to_write) {
      next_index = index;
      break;
    }
    auto it = mapping->i_pages.find(index);
    MMUSIM_CHECK(it != mapping->i_pages.end(), "do_writepages: {}: index {} tagged dirty but not cached",
                 mapping->name, index);
    folio* f = it->second;
    // writeback_get_folio() locks the folio (a folio under read is clean: not tagged).
    if (folio_io_pending(f) || !folio_trylock(f)) {
      submit();
      continue;
    }
    // folio_prepare_writeback(): WB_SYNC_NONE skips a folio whose earlier write is still in flight.
    if (folio_test_writeback(f)) {
      folio_unlock(f);
      submit();
      continue;
    }
    if (!folio_clear_dirty_for_io(f)) {
      mapping->dirty_tags.erase(index);  // clean: the tag goes
      folio_unlock(f);
      submit();
      continue;
    }
    // __mpage_writepage(): a folio that does not follow the bio's last one, or a full bio, sends it.
    if (!bio.empty() && (bio.back()->index + 1 != index || bio.size() == BIO_MAX_VECS)) submit();
    __folio_start_writeback(f);  // folio_start_writeback()
    const uint8_t* data = phys_.frame_data(folio_pfn(f));
    mapping->written[index].assign(data, data + PAGE_SIZE);
    folio_unlock(f);
    bio.push_back(f);
    ++written;
  }
  submit();
  mapping->writeback_index = next_index;
  return written;
}

// ------------------------------------------------------------------------------------------------
// The flusher (fs/fs-writeback.c)

// wb_writeback() (fs/fs-writeback.c) with queue_io(), writeback_sb_inodes() and requeue_inode():
// the dirty inodes oldest first, each given a chunk (writeback_chunk_size(): about half a second
// of the write bandwidth, at least and in multiples of MIN_WRITEBACK_PAGES, within the work's
// pages); an inode still dirty after a used-up chunk goes behind the others (b_more_io); a
// background work stops once no domain is over its background threshold.
// Simplified: the work runs now, inside the entry that woke the flusher, and its CPU work
// (cleaning PTEs, submitting requests) is charged to nobody: the flusher is a kernel thread of
// another CPU, which the platform does not model. Its remote TLB flushes still reach the CPUs
// that hold the mm. The 100 ms slice (writeback_sb_inodes()) cannot end a work that takes no time.
uint64_t Kernel::wb_writeback(uint64_t nr_pages, bool for_background, const mem_cgroup* memcg) {
  if (in_flusher_) return 0;  // writeback_in_progress(wb)
  in_flusher_ = true;
  const CostAccount cost = cost_;
  const double so_far = cycles_so_far_;
  const bool barrier_seen = store_barrier_seen_;
  const CostAccount before_barrier = before_store_barrier_;
  uint64_t total = 0;
  size_t idle = 0;  // inodes in a row that had nothing to write (all under writeback)
  while (!b_dirty_.empty() && idle < b_dirty_.size()) {
    if (for_background ? !wb_over_bg_thresh(memcg) : nr_pages == 0) break;
    address_space* mapping = b_dirty_.front();
    // writeback_chunk_size(), WB_SYNC_NONE
    uint64_t pages = std::min(INIT_BW / 2, global_dirty_limits().thresh / DIRTY_SCOPE);
    pages = std::min(pages, nr_pages);
    pages = (pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES;
    const uint64_t written = do_writepages(mapping, pages);
    b_dirty_.erase(b_dirty_.begin());
    if (mapping->dirty_tags.empty()) {
      mapping->inode_dirty = false;  // clean: off the lists
    } else {
      b_dirty_.push_back(mapping);  // requeue_io() / redirty_tail(): after the others
    }
    total += written;
    nr_pages -= std::min(nr_pages, written);
    idle = written ? 0 : idle + 1;
  }
  cost_ = cost;
  cycles_so_far_ = so_far;
  store_barrier_seen_ = barrier_seen;
  before_store_barrier_ = before_barrier;
  in_flusher_ = false;
  return total;
}

// wb_over_bg_thresh() (fs/fs-writeback.c) -> domain_over_bg_thresh(): the global domain's or the
// memory cgroup's dirty pages (NR_FILE_DIRTY) over its background threshold. (The per-wb share
// wb_bg_thresh is left out: one wb.)
bool Kernel::wb_over_bg_thresh(const mem_cgroup* memcg) const {
  const dirty_throttle_control gdtc = global_dirty_limits();
  if (gdtc.file_dirty > gdtc.bg_thresh) return true;
  dirty_throttle_control mdtc;
  return memcg_dirty_limits(memcg, gdtc, &mdtc) && mdtc.file_dirty > mdtc.bg_thresh;
}

// wb_start_background_writeback() (fs/fs-writeback.c): the flusher's background work
// (wb_check_background_flush(): LONG_MAX pages while over the background thresholds).
void Kernel::wb_start_background_writeback(const mem_cgroup* memcg) {
  if (in_flusher_ || !wb_over_bg_thresh(memcg)) return;
  ctr_.flusher_background.inc();
  trace_event("writeback_start", {mmusim::TraceField::str("reason", "background"),
                                  mmusim::TraceField::dec("nr_dirty", nr_file_dirty_)});
  const uint64_t written = wb_writeback(UINT64_MAX, true, memcg);
  trace_event("writeback_written", {mmusim::TraceField::str("reason", "background"),
                                    mmusim::TraceField::dec("pages", written)});
}

// wakeup_flusher_threads(WB_REASON_VMSCAN) (fs/fs-writeback.c) -> wb_start_writeback() ->
// wb_check_start_all(): every dirty page (get_nr_dirty_pages()).
void Kernel::wakeup_flusher_threads_vmscan() {
  if (in_flusher_ || nr_file_dirty_ == 0) return;
  ctr_.flusher_vmscan.inc();
  trace_event("writeback_start", {mmusim::TraceField::str("reason", "vmscan"),
                                  mmusim::TraceField::dec("nr_dirty", nr_file_dirty_)});
  const uint64_t written = wb_writeback(nr_file_dirty_, false, nullptr);
  trace_event("writeback_written", {mmusim::TraceField::str("reason", "vmscan"),
                                    mmusim::TraceField::dec("pages", written)});
}

// ------------------------------------------------------------------------------------------------
// The dirty limits (mm/page-writeback.c)

// global_dirtyable_memory() + domain_dirty_limits() of the global domain: free pages and the
// file LRU pages (no totalreserve_pages, no highmem), 20% and 10% of it.
Kernel::dirty_throttle_control Kernel::global_dirty_limits() const {
  dirty_throttle_control gdtc;
  uint64_t file = 0;
  for (const auto& m : memcgs_)
    for (const lruvec& lv : m->nodeinfo)
      file += lv.lists[LRU_INACTIVE_FILE].nr_pages + lv.lists[LRU_ACTIVE_FILE].nr_pages;
  gdtc.avail = nr_free_ + file + 1;
  domain_dirty_limits(&gdtc);
  gdtc.file_dirty = nr_file_dirty_;
  gdtc.dirty = nr_file_dirty_ + nr_writeback_;
  return gdtc;
}

// The memory cgroup's domain: mem_cgroup_wb_stats() (mm/memcontrol.c: its file LRU pages, its
// dirty and writeback pages, the headroom min(memory.max, memory.high) - usage; the parent is the
// root, which has none) and mdtc_calc_avail() (what can be dirty: its file pages and as much of
// the headroom as other clean file memory could give), then domain_dirty_limits().
bool Kernel::memcg_dirty_limits(const mem_cgroup* memcg, const dirty_throttle_control& gdtc,
                                dirty_throttle_control* mdtc) const {
  if (!memcg || memcg->id == 0) return false;  // mem_cgroup_wb_domain(): none for the root
  uint64_t filepages = 0;
  for (const lruvec& lv : memcg->nodeinfo)
    filepages += lv.lists[LRU_INACTIVE_FILE].nr_pages + lv.lists[LRU_ACTIVE_FILE].nr_pages;
  const uint64_t ceiling = std::min(memcg->max, memcg->high);
  const uint64_t headroom = ceiling - std::min(ceiling, memcg->usage);
  mdtc->file_dirty = memcg->nr_file_dirty;
  mdtc->dirty = memcg->nr_file_dirty + memcg->nr_writeback;
  // mdtc_calc_avail()
  const uint64_t clean = filepages - std::min(filepages, mdtc->dirty);
  const uint64_t global_clean = gdtc.avail - std::min(gdtc.avail, gdtc.dirty);
  const uint64_t other_clean = global_clean - std::min(global_clean, clean);
  mdtc->avail = filepages + std::min(headroom, other_clean);
  domain_dirty_limits(mdtc);
  return true;
}

// balance_dirty_pages_ratelimited() (mm/page-writeback.c) -> balance_dirty_pages() once the task
// has dirtied nr_dirtied_pause pages (the per-CPU bdp_ratelimits path is left out): the limits of
// the global domain and of the folio's memory cgroup; the global dirty pages over the background
// threshold, or any domain over its freerun ceiling, start background writeback; all domains in
// freerun: no pause, the next check after dirty_poll_interval() pages. Over a freerun ceiling the
// kernel pauses the dirtier in proportion to how far it is over (pos_ratio, dirty_ratelimit):
// not modelled (kernel.dirty_over_freerun counts these checks), the next check after the initial
// 32 pages.
void Kernel::balance_dirty_pages_ratelimited(address_space* mapping, const folio* f) {
  (void)mapping;  // (one bdi, one wb)
  task_struct* t = current_;
  if (!t || t->nr_dirtied < t->nr_dirtied_pause) return;
  ctr_.balance_dirty_pages.inc();
  const mem_cgroup* memcg = memcgs_[f->memcg_id].get();
  const dirty_throttle_control gdtc = global_dirty_limits();
  dirty_throttle_control mdtc;
  const bool have_mdtc = memcg_dirty_limits(memcg, gdtc, &mdtc);
  if (gdtc.file_dirty > gdtc.bg_thresh) wb_start_background_writeback(memcg);
  const bool g_freerun = gdtc.dirty <= dirty_freerun_ceiling(gdtc);
  const bool m_freerun = !have_mdtc || mdtc.dirty <= dirty_freerun_ceiling(mdtc);
  t->nr_dirtied = 0;
  if (g_freerun && m_freerun) {
    uint64_t intv = dirty_poll_interval(gdtc.dirty, gdtc.thresh);
    if (have_mdtc) intv = std::min(intv, dirty_poll_interval(mdtc.dirty, mdtc.thresh));
    t->nr_dirtied_pause = unsigned(std::max<uint64_t>(intv, 1));
    return;
  }
  ctr_.dirty_over_freerun.inc();
  // "Unconditionally start background writeback if it's not already in progress" (the global
  // test above does not see a memcg over its limits).
  wb_start_background_writeback(memcg);
  t->nr_dirtied_pause = 32;
}

}  // namespace kmm
