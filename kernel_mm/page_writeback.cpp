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
//     the memory cgroup's (mdtc_calc_avail()), the background kick, freerun; over a freerun
//     ceiling the dirtier sleeps so that it dirties at task_ratelimit = dirty_ratelimit *
//     pos_ratio (wb_position_ratio(): the cubic global line and the wb's linear one), with the
//     write bandwidth and dirty_ratelimit estimated every 200 ms (__wb_update_bandwidth()).
// Simplified (each marked where it happens): the flusher's work runs at once, in the entry that
// wakes it, and its CPU work is charged to nobody (a kernel thread on another CPU: there are no
// kernel threads; the remote TLB flushes of folio_mkclean() still reach the CPUs that hold the
// mm); one wb for all inodes (no cgroup writeback: a memcg's background writeback writes every
// dirty inode, and the wb's share of a domain is the whole domain); the bandwidth estimate moves
// only in balance_dirty_pages() (not also after writeback ends); periodic (kupdate) writeback
// runs at the first kernel entry after its timer; no strictlimit, no per-CPU bdp_ratelimits.
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

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

// domain_dirty_limits() (mm/page-writeback.c) with vm.dirty_ratio and vm.dirty_background_ratio
// (kernel.dirty_ratio, kernel.dirty_background_ratio; no dirty_bytes, no real-time boost): the
// ratios converted to per-PAGE_SIZE for higher precision, as the kernel does.
void domain_dirty_limits(Kernel::dirty_throttle_control* dtc, uint64_t dirty_ratio, uint64_t dirty_background_ratio) {
  const uint64_t ratio = (dirty_ratio * PAGE_SIZE) / 100;
  const uint64_t bg_ratio = (dirty_background_ratio * PAGE_SIZE) / 100;
  dtc->thresh = (ratio * dtc->avail) / PAGE_SIZE;
  dtc->bg_thresh = (bg_ratio * dtc->avail) / PAGE_SIZE;
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
  node_write_pending_mod(f, int64_t(nr));
  ctr_.nr_dirtied.inc(nr);
  wb_.dirtied += nr;  // WB_DIRTIED
  if (current_) current_->nr_dirtied += unsigned(nr);
  mapping->dirty_tags.insert(f->index);
  if (!mapping->inode_dirty) {
    mapping->inode_dirty = true;
    mapping->dirtied_when_ps = time_now_ps();
    // If this is the first dirty inode for this bdi, we have to wake up the corresponding bdi
    // thread to make sure background write-back happens later.
    const bool wakeup_bdi = b_dirty_.empty();
    b_dirty_.push_back(mapping);
    if (wakeup_bdi) wb_wakeup_delayed();
  }
}

// folio_account_cleaned() (mm/page-writeback.c)
void Kernel::folio_account_cleaned(folio* f) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  MMUSIM_CHECK(nr_file_dirty_ >= nr && memcgs_[f->memcg_id]->nr_file_dirty >= nr,
               "folio_account_cleaned: pfn {:#x}: more cleaned than dirty", page_to_pfn(f));
  nr_file_dirty_ -= nr;
  memcgs_[f->memcg_id]->nr_file_dirty -= nr;
  node_write_pending_mod(f, -int64_t(nr));
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
  node_write_pending_mod(f, int64_t(nr));
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
  node_write_pending_mod(f, -int64_t(nr));
  ctr_.nr_written.inc(nr);
  wb_.written += nr;  // WB_WRITTEN
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
  return writepages(mapping, nr_to_write, false, 0, ~uint64_t(0));
}

// __filemap_fdatawrite_range(mapping, start, end, WB_SYNC_ALL) -> do_writepages(): the same walk
// over the range's dirty tags (not range-cyclic: writeback_index stays), with nothing skipped:
// folio_prepare_writeback() waits for a folio's write still in flight (folio_wait_writeback())
// and writes it again.
uint64_t Kernel::do_writepages_range(address_space* mapping, uint64_t first, uint64_t last) {
  return writepages(mapping, ~uint64_t(0), true, first, last);
}

uint64_t Kernel::writepages(address_space* mapping, uint64_t nr_to_write, bool sync_all, uint64_t first,
                            uint64_t last) {
  std::vector<folio*> bio;  // one bvec per folio (bio_add_folio())
  uint64_t bio_pages = 0;
  uint64_t written = 0;
  auto submit = [&]() {  // mpage_bio_submit_write()
    if (bio.empty()) return;
    charge(Cost::io_request);
    ctr_.io_requests.inc();
    ctr_.file_write_requests.inc();
    const uint64_t bytes = bio_pages << PAGE_SHIFT;
    bio_pages = 0;
    const uint64_t now = time_now_ps();
    const uint64_t done = bdev_ ? bdev_->submit_write(now, bytes) : now;
    trace_event("block_rq_issue", {mmusim::TraceField::dec("bytes", bytes), mmusim::TraceField::dec("submit_ps", now),
                                   mmusim::TraceField::dec("complete_ps", done), mmusim::TraceField::str("rw", "write")});
    for (folio* f : bio) writeback_.emplace_back(done, f);
    bio.clear();
  };
  // The tagged indices from writeback_index on, or in [first, last] (a copy: writing changes the
  // tags). The tags are at the folios' first pages: a range that starts inside a large folio
  // starts at it (filemap_get_folios_tag() finds the folio that contains the index).
  if (sync_all) {
    if (const folio* f = filemap_get_entry(mapping, first)) first = f->index;
  }
  const std::vector<uint64_t> indices(mapping->dirty_tags.lower_bound(sync_all ? first : mapping->writeback_index),
                                      sync_all ? mapping->dirty_tags.upper_bound(last) : mapping->dirty_tags.end());
  uint64_t next_index = 0;  // where the next pass starts: 0 once the end of the file was reached
  for (const uint64_t index : indices) {
    if (written >= nr_to_write) {
      next_index = index;
      break;
    }
    auto it = mapping->i_pages.find(index);
    MMUSIM_CHECK(it != mapping->i_pages.end(), "do_writepages: {}: index {} tagged dirty but no folio starts there",
                 mapping->name, index);
    folio* f = it->second;
    const uint64_t nr = uint64_t(folio_nr_pages(f));
    // writeback_get_folio() locks the folio (a folio under read is clean: not tagged).
    if (folio_io_pending(f) || !folio_trylock(f)) {
      MMUSIM_CHECK(!sync_all, "fsync: {}: dirty folio at index {} is locked", mapping->name, index);
      submit();
      continue;
    }
    // folio_prepare_writeback(): WB_SYNC_NONE skips a folio whose earlier write is still in
    // flight; WB_SYNC_ALL waits for it (what is in the bio goes first: its folios are unlocked).
    if (folio_test_writeback(f)) {
      if (!sync_all) {
        folio_unlock(f);
        submit();
        continue;
      }
      submit();
      folio_wait_writeback(f);
    }
    if (!folio_clear_dirty_for_io(f)) {
      mapping->dirty_tags.erase(index);  // clean: the tag goes
      folio_unlock(f);
      submit();
      continue;
    }
    // __mpage_writepage(): a folio that does not follow the bio's last one, or a full bio, sends it.
    if (!bio.empty() && (bio.back()->index + uint64_t(folio_nr_pages(bio.back())) != index || bio.size() == BIO_MAX_VECS))
      submit();
    __folio_start_writeback(f);  // folio_start_writeback()
    for (uint64_t i = 0; i < nr; ++i) {
      const uint8_t* data = phys_.frame_data(folio_pfn(f) + i);
      mapping->written[index + i].assign(data, data + PAGE_SIZE);
    }
    folio_unlock(f);
    bio.push_back(f);
    bio_pages += nr;
    written += nr;  // (writeback_iter(): wbc->nr_to_write -= folio_nr_pages())
  }
  submit();
  if (!sync_all) mapping->writeback_index = next_index;
  return written;
}

void Kernel::folio_wait_writeback(folio* f) {
  if (!folio_test_writeback(f)) return;
  uint64_t done = 0;  // when its last write completes (0 is a time too: no disk, at time 0)
  bool in_flight = false;
  for (const auto& [at, w] : writeback_)
    if (w == f) {
      done = std::max(done, at);
      in_flight = true;
    }
  MMUSIM_CHECK(in_flight, "folio_wait_writeback: a folio under writeback with no write in flight");
  const uint64_t now = time_now_ps();
  if (done > now) {
    // (folio_wait_bit_common(): TASK_UNINTERRUPTIBLE, as a fault's wait for a read.)
    const uint64_t waited = done - now;
    cost_.io_wait_cycles += double(waited) * ghz_ / 1000.0;
    ctr_.io_wait_ns.inc((waited + 500) / 1000);
    ctr_.writeback_waits.inc();
  }
  writeback_end_due();  // its completion (and those before it) ran before the task woke
  MMUSIM_CHECK(!folio_test_writeback(f), "folio_wait_writeback: still under writeback after its completion");
}

// __filemap_fdatawait_range() (mm/filemap.c:502): every folio of [first, last] under writeback
// (filemap_get_folios_tag(PAGECACHE_TAG_WRITEBACK)), in index order.
void Kernel::__filemap_fdatawait_range(address_space* mapping, uint64_t first, uint64_t last) {
  if (const folio* f = filemap_get_entry(mapping, first)) first = f->index;
  for (auto it = mapping->i_pages.lower_bound(first); it != mapping->i_pages.end() && it->first <= last; ++it)
    folio_wait_writeback(it->second);
}

// vfs_fsync_range() (fs/sync.c) -> the filesystem's ->fsync: a simple block filesystem's, as
// ext2's (ext2_fsync() -> generic_buffers_fsync() -> generic_buffers_fsync_noflush()):
// file_write_and_wait_range() (mm/filemap.c:772), then the inode (sync_inode_metadata(): only its
// dirty-pages state here, no metadata is written) and the disk's cache flush
// (blkdev_issue_flush()), which is not modelled (the disk keeps no volatile cache: a write is
// durable at its completion).
int Kernel::vfs_fsync_range(address_space* mapping, uint64_t fstart, uint64_t fend, int datasync) {
  (void)datasync;  // (only the inode's timestamps would differ)
  if (fend < fstart) return 0;
  ctr_.fsyncs.inc();
  // file_write_and_wait_range(): mapping_needs_writeback() -> __filemap_fdatawrite_range(WB_SYNC_ALL),
  // then __filemap_fdatawait_range().
  const uint64_t first = fstart >> PAGE_SHIFT, last = fend >> PAGE_SHIFT;
  if (mapping->nrpages) {
    if (!mapping->dirty_tags.empty()) do_writepages_range(mapping, first, last);
    __filemap_fdatawait_range(mapping, first, last);
  }
  // generic_buffers_fsync_noflush() -> sync_inode_metadata() -> writeback_single_inode()
  // (WB_SYNC_ALL, nr_to_write 0): __writeback_single_inode() clears I_DIRTY_PAGES once nothing is
  // tagged dirty, and a clean inode leaves the wb's lists.
  if (mapping->inode_dirty && mapping->dirty_tags.empty()) {
    mapping->inode_dirty = false;
    b_dirty_.erase(std::remove(b_dirty_.begin(), b_dirty_.end(), mapping), b_dirty_.end());
  }
  return 0;
}

// ------------------------------------------------------------------------------------------------
// The flusher (fs/fs-writeback.c)

// wb_writeback() (fs/fs-writeback.c) with queue_io(), writeback_sb_inodes() and requeue_inode():
// the dirty inodes oldest first, each given a chunk (writeback_chunk_size(): about half a second
// of the write bandwidth, at least and in multiples of MIN_WRITEBACK_PAGES, within the work's
// pages); an inode still dirty after a used-up chunk goes behind the others (b_more_io); a
// background work stops once no domain is over its background threshold.
// Simplified: the work runs in the kworker's place (wb_workfn(): at the next entry after its
// wake-up or timer, or in the waker's sleep), inside whichever entry that is, and its CPU work
// (cleaning PTEs, submitting requests) is charged to nobody: the flusher is a kernel thread of
// another CPU, which the platform does not model. Its remote TLB flushes still reach the CPUs
// that hold the mm. The 100 ms slice (writeback_sb_inodes()) cannot end a work that takes no time.
// A periodic (kupdate) work writes only the inodes dirtied before now - dirty_expire_centisecs
// (queue_io()'s dirtied_before), every dirty page of them within the work's pages.
uint64_t Kernel::wb_writeback(uint64_t nr_pages, WbWork kind, const mem_cgroup* memcg) {
  const bool for_background = kind == WbWork::background;
  if (in_flusher_) return 0;  // writeback_in_progress(wb)
  in_flusher_ = true;
  // wb_bandwidth_estimate_start(): after more than a second without writeback the bandwidth
  // estimate starts afresh (the idle time is not the disk's).
  const uint64_t now = jiffies();
  if (now - std::min(now, wb_.bw_time_stamp) > params_.hz && nr_writeback_ == 0) {
    wb_.dirtied_stamp = wb_.dirtied;
    wb_.written_stamp = wb_.written;
    wb_.bw_time_stamp = now;
  }
  uint64_t total = 0;
  {
  // The flusher's work is a kworker's, not this entry's: its account is put back after.
  const OtherContext flusher(*this);
  size_t idle = 0;  // inodes in a row that had nothing to write (all under writeback)
  const uint64_t expire_ps = uint64_t(params_.dirty_expire_centisecs) * 10'000'000'000ull;
  const uint64_t now_ps = time_now_ps();
  while (!b_dirty_.empty() && idle < b_dirty_.size()) {
    if (for_background ? !wb_over_bg_thresh(memcg) : nr_pages == 0) break;
    address_space* mapping = b_dirty_.front();
    // (Expired: dirtied at or before now - dirty_expire_centisecs.)
    auto expired = [&](const address_space* m) { return m->dirtied_when_ps + expire_ps <= now_ps; };
    if (kind == WbWork::periodic && !expired(mapping)) {
      // Not expired: behind the others; the work ends when none is left that is.
      bool any = false;
      for (const address_space* m : b_dirty_) any = any || expired(m);
      if (!any) break;
      b_dirty_.erase(b_dirty_.begin());
      b_dirty_.push_back(mapping);
      continue;
    }
    // writeback_chunk_size(), WB_SYNC_NONE: half a second of the estimated write bandwidth, at
    // most an eighth of the global domain's smoothed limit (before the first dirtier's check has
    // set it, the threshold writeback_set_ratelimit() would have set at boot).
    const uint64_t dirty_limit = global_wb_domain_.dirty_limit ? global_wb_domain_.dirty_limit
                                                               : global_dirty_limits().thresh;
    uint64_t pages = std::min(wb_.avg_write_bandwidth / 2, dirty_limit / DIRTY_SCOPE);
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
  }
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

// wb_start_background_writeback() (fs/fs-writeback.c) -> wb_wakeup(): the dirtier wakes the
// flusher and goes on; the background work runs later, in the kworker (wb_workfn() ->
// wb_check_background_flush()), not inside the dirtier's entry. The domain to look at is the
// dirtier's memory cgroup's (with cgroup writeback, its wb's).
void Kernel::wb_start_background_writeback(const mem_cgroup* memcg) {
  if (in_flusher_) return;
  trace_event("writeback_wake_background", {mmusim::TraceField::dec("nr_dirty", nr_file_dirty_)});
  wb_bg_memcg_id_ = memcg ? int(memcg->id) : -1;
  wb_wakeup();
}

// wb_check_background_flush() (fs/fs-writeback.c), in the kworker: LONG_MAX pages while a domain
// of the wb is over its background threshold.
void Kernel::wb_check_background_flush(const mem_cgroup* memcg) {
  if (!wb_over_bg_thresh(memcg)) return;
  wb_start_work("background", ctr_.flusher_background, UINT64_MAX, WbWork::background, memcg);
}

// wakeup_flusher_threads(WB_REASON_VMSCAN) (fs/fs-writeback.c) -> wb_start_writeback() ->
// wb_check_start_all(): every dirty page (get_nr_dirty_pages()). Simplified: unlike the
// dirtier's wake-up (wb_start_background_writeback()), the work runs at once, inside the
// reclaim: the kworker runs on another CPU while reclaim goes on, and global direct reclaim here
// never sleeps to let it run on this one (docs/plan-flusher-kworker.md §3).
void Kernel::wakeup_flusher_threads_vmscan() {
  if (in_flusher_ || nr_file_dirty_ == 0) return;
  wb_start_work("vmscan", ctr_.flusher_vmscan, nr_file_dirty_, WbWork::all, nullptr);
}

// wb_wakeup() (fs/fs-writeback.c): mod_delayed_work(bdi_wq, &wb->dwork, 0): the flusher's work
// is due now (a pending timer is moved to now). The kworker is not simulated as a thread: the work
// runs at the next kernel entry (Kernel::enter()) or while the task that woke it sleeps
// (wb_run_queued_work()), whichever comes first, as an unbound kworker that the waker's
// return to user mode or its sleep lets run.
void Kernel::wb_wakeup() { wb_dwork_now_ = true; }

// The woken kworker runs while the current task sleeps (io_schedule_timeout() in
// balance_dirty_pages(), schedule_timeout() in reclaim_throttle()).
void Kernel::wb_run_queued_work() {
  if (!wb_dwork_now_ || in_flusher_) return;
  last_fault_.others_ran = true;
  wb_workfn();
}

uint64_t Kernel::wb_start_work(const char* reason, mmusim::Counter& runs, uint64_t nr_pages, WbWork kind,
                               const mem_cgroup* memcg) {
  runs.inc();
  trace_event("writeback_start", {mmusim::TraceField::str("reason", reason),
                                  mmusim::TraceField::dec("nr_dirty", nr_file_dirty_)});
  const uint64_t written = wb_writeback(nr_pages, kind, memcg);
  trace_event("writeback_written", {mmusim::TraceField::str("reason", reason),
                                    mmusim::TraceField::dec("pages", written)});
  return written;
}

// wb_wakeup_delayed() (mm/backing-dev.c): queue the flusher's delayed work
// dirty_writeback_centisecs from now, unless it is queued already (queue_delayed_work()).
void Kernel::wb_wakeup_delayed() {
  if (wb_dwork_ps_ || !params_.dirty_writeback_centisecs) return;
  // msecs_to_jiffies(dirty_writeback_interval * 10), rounded up; the timer fires at that tick.
  const uint64_t timeout = (uint64_t(params_.dirty_writeback_centisecs) * 10 * params_.hz + 999) / 1000;
  wb_dwork_ps_ = std::max<uint64_t>(1, jiffies_to_ps(jiffies() + timeout));
}

// wb_workfn() (fs/fs-writeback.c) -> wb_do_writeback(): no queued works (a reclaimer's
// wakeup_flusher_threads() runs its work at once), wb_check_old_data_flush() and
// wb_check_background_flush(); then the delayed work is queued again while the wb has dirty
// inodes (wb_has_dirty_io()). It runs when its timer fires (wb_wakeup_delayed()) or when a waker
// made it due (wb_wakeup()).
void Kernel::wb_workfn() {
  wb_dwork_ps_ = 0;
  wb_dwork_now_ = false;
  if (in_flusher_) return;
  // wb_check_old_data_flush(): every dirty_writeback_centisecs since the last one, every dirty
  // page of the inodes dirtied longer than dirty_expire_centisecs ago (WB_REASON_PERIODIC).
  const uint64_t now = jiffies();
  const uint64_t interval = (uint64_t(params_.dirty_writeback_centisecs) * 10 * params_.hz + 999) / 1000;
  if (params_.dirty_writeback_centisecs && now >= wb_last_old_flush_ + interval) {
    wb_last_old_flush_ = now;
    if (nr_file_dirty_) wb_start_work("periodic", ctr_.flusher_periodic, nr_file_dirty_, WbWork::periodic, nullptr);
  }
  // wb_check_background_flush(): the wb's domains (the global one, and the cgroup's whose dirtier
  // woke it, else the workload cgroup's: the one wb here stands for every cgroup's).
  const mem_cgroup* memcg = wb_bg_memcg_id_ >= 0 ? memcgs_[size_t(wb_bg_memcg_id_)].get() : workload_memcg_;
  wb_bg_memcg_id_ = -1;
  wb_check_background_flush(memcg);
  if (!b_dirty_.empty()) wb_wakeup_delayed();
}

// ------------------------------------------------------------------------------------------------
// The dirty limits (mm/page-writeback.c)

// global_dirtyable_memory() + domain_dirty_limits() of the global domain: free pages and the
// file LRU pages (no totalreserve_pages, no highmem), dirty_ratio and dirty_background_ratio of it.
Kernel::dirty_throttle_control Kernel::global_dirty_limits() const {
  dirty_throttle_control gdtc;
  uint64_t file = 0;
  for (const auto& m : memcgs_)
    for (const lruvec& lv : m->nodeinfo)
      file += lv.lists[LRU_INACTIVE_FILE].nr_pages + lv.lists[LRU_ACTIVE_FILE].nr_pages;
  gdtc.avail = nr_free_ + file + 1;
  domain_dirty_limits(&gdtc, params_.dirty_ratio, params_.dirty_background_ratio);
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
  domain_dirty_limits(mdtc, params_.dirty_ratio, params_.dirty_background_ratio);
  return true;
}

// ------------------------------------------------------------------------------------------------
// Dirty throttling (mm/page-writeback.c): the dirtier's pause

// wb_init() (mm/backing-dev.c): the bandwidth estimates and the base rate limit start at INIT_BW,
// the time stamps now (jiffies 0: the machine's start).
void Kernel::wb_init() {
  wb_ = {};
  wb_.write_bandwidth = wb_.avg_write_bandwidth = INIT_BW;
  wb_.dirty_ratelimit = wb_.balanced_dirty_ratelimit = INIT_BW;
}

uint64_t Kernel::jiffies() const {
  return uint64_t((unsigned __int128)time_now_ps() * params_.hz / 1'000'000'000'000ull);
}

uint64_t Kernel::jiffies_to_ps(uint64_t j) const {
  const uint64_t hz = params_.hz;
  return uint64_t(((unsigned __int128)j * 1'000'000'000'000ull + hz - 1) / hz);
}

namespace {

constexpr unsigned RATELIMIT_CALC_SHIFT = 10;                       // mm/page-writeback.c
constexpr uint64_t DIRTY_POLL_THRESH = 128 >> (PAGE_SHIFT - 10);    // 32 pages
// wb_stat_error(): the error per-CPU counters may have. The port's counts are exact, so the
// uniprocessor value (1) is used where the kernel stops its hard-limit loop ("a pipe to go
// through"); with many CPUs the kernel stops that loop a few hundred pages earlier.
constexpr uint64_t kWbStatError = 1;

uint64_t roundup_pow_of_two(uint64_t x) { return x <= 1 ? 1 : uint64_t(1) << (64 - __builtin_clzll(x - 1)); }
int64_t ilog2(uint64_t x) { return x ? 63 - __builtin_clzll(x) : 0; }

// MAX_PAUSE and BANDWIDTH_INTERVAL: HZ/5 (200 ms), at least one tick.
uint64_t max_pause_jiffies(unsigned hz) { return std::max<uint64_t>(hz / 5, 1); }
uint64_t bandwidth_interval(unsigned hz) { return std::max<uint64_t>(hz / 5, 1); }

// hard_dirty_limit(): the domain's smoothed limit, never below the threshold.
uint64_t hard_dirty_limit(const wb_domain* dom, uint64_t thresh) { return std::max(thresh, dom->dirty_limit); }

// pos_ratio_polynom(): 1 + ((setpoint - dirty) / (limit - setpoint))^3 in fixed point, within
// [0, 2]: 2 at freerun, 1 at the setpoint, 0 at the limit.
int64_t pos_ratio_polynom(uint64_t setpoint, uint64_t dirty, uint64_t limit) {
  const int64_t x = (int64_t(setpoint) - int64_t(dirty)) * (int64_t(1) << RATELIMIT_CALC_SHIFT) /
                    int64_t((limit - setpoint) | 1);
  int64_t pos_ratio = x;
  pos_ratio = pos_ratio * x >> RATELIMIT_CALC_SHIFT;
  pos_ratio = pos_ratio * x >> RATELIMIT_CALC_SHIFT;
  pos_ratio += int64_t(1) << RATELIMIT_CALC_SHIFT;
  return std::clamp<int64_t>(pos_ratio, 0, int64_t(2) << RATELIMIT_CALC_SHIFT);
}

// wb_dirty_limits() with __wb_calc_thresh() for the one wb: its share of the domain's thresholds
// by recent completions is all of them (bdi min_ratio 0, max_ratio 100%), and its dirty and
// writeback pages are the domain's.
void wb_dirty_limits(Kernel::dirty_throttle_control* dtc) {
  dtc->wb_thresh = dtc->thresh;
  dtc->wb_bg_thresh = dtc->thresh ? dtc->wb_thresh * dtc->bg_thresh / dtc->thresh : 0;
  dtc->wb_dirty = dtc->dirty;
}

// update_dirty_limit() every BANDWIDTH_INTERVAL (domain_update_dirty_limit()): up to the
// threshold in one step, down by 1/32 of the distance to max(thresh, dirty).
void domain_update_dirty_limit(Kernel::dirty_throttle_control* dtc, uint64_t now, unsigned hz) {
  wb_domain* dom = dtc->dom;
  if (now < dom->dirty_limit_tstamp + bandwidth_interval(hz)) return;
  uint64_t limit = dom->dirty_limit;
  if (limit < dtc->thresh) {
    dom->dirty_limit = dtc->thresh;
  } else {
    const uint64_t thresh = std::max(dtc->thresh, dtc->dirty);
    if (limit > thresh) dom->dirty_limit = limit - ((limit - thresh) >> 5);
  }
  dom->dirty_limit_tstamp = now;
}

}  // namespace

// wb_position_ratio() (mm/page-writeback.c), without strictlimit: the global control line (a cubic
// through freerun, the setpoint and the limit), scaled by the wb's linear line (slope
// 1 / (8 * write bandwidth) around its setpoint, not below 1/4) and raised in the wb's reserve
// area (below half its threshold, up to 8x). 0 at or above the limit.
void Kernel::wb_position_ratio(dirty_throttle_control* dtc) const {
  const uint64_t write_bw = wb_.avg_write_bandwidth;
  const uint64_t freerun = dirty_freerun_ceiling(*dtc);
  const uint64_t limit = hard_dirty_limit(dtc->dom, dtc->thresh);
  uint64_t wb_thresh = dtc->wb_thresh;
  dtc->pos_ratio = 0;
  if (dtc->dirty >= limit) return;
  const uint64_t setpoint = (freerun + limit) / 2;
  int64_t pos_ratio = pos_ratio_polynom(setpoint, dtc->dirty, limit);
  if (wb_thresh > dtc->thresh) wb_thresh = dtc->thresh;
  // A wb whose threshold is near 0 because it was idle still gets a reasonable one.
  wb_thresh = std::max(wb_thresh, (limit - dtc->dirty) / 8);
  const uint64_t x = (wb_thresh << 16) / (dtc->thresh | 1);
  const uint64_t wb_setpoint = setpoint * x >> 16;
  const uint64_t span = (dtc->thresh - wb_thresh + 8 * write_bw) * x >> 16;
  uint64_t x_intercept = wb_setpoint + span;
  if (dtc->wb_dirty < x_intercept - span / 4) {
    pos_ratio = int64_t(uint64_t(pos_ratio) * (x_intercept - dtc->wb_dirty) / ((x_intercept - wb_setpoint) | 1));
  } else {
    pos_ratio /= 4;
  }
  // The wb's reserve area: against the dirty pool running dry and the disk going idle.
  x_intercept = wb_thresh / 2;
  if (dtc->wb_dirty < x_intercept) {
    if (dtc->wb_dirty > x_intercept / 8) pos_ratio = int64_t(uint64_t(pos_ratio) * x_intercept / dtc->wb_dirty);
    else pos_ratio *= 8;
  }
  dtc->pos_ratio = pos_ratio;
}

// wb_update_write_bandwidth() (mm/page-writeback.c): the pages written since the last estimate
// over the time, blended into a 3 s (rounded up to a power of two) window, and a smoother average.
void Kernel::wb_update_write_bandwidth(uint64_t elapsed, uint64_t written) {
  const unsigned hz = params_.hz;
  const uint64_t period = roundup_pow_of_two(3ull * hz);
  uint64_t avg = wb_.avg_write_bandwidth;
  const uint64_t old = wb_.write_bandwidth;
  uint64_t bw = (written - std::min(written, wb_.written_stamp)) * hz;
  if (elapsed > period) {
    bw /= elapsed;
    avg = bw;
  } else {
    bw += wb_.write_bandwidth * (period - elapsed);
    bw >>= ilog2(period);
    // One more level of smoothing, against sudden spikes.
    if (avg > old && old >= bw) avg -= (avg - old) >> 3;
    if (avg < old && old <= bw) avg += (old - avg) >> 3;
  }
  wb_.write_bandwidth = bw;
  wb_.avg_write_bandwidth = std::max<uint64_t>(avg, 1);
}

// wb_update_dirty_ratelimit() (mm/page-writeback.c): the base rate every dirtier is throttled
// around, toward write_bw / N for N dirtiers: the balanced rate is the task rate the dirtiers had
// times write_bw over the dirty rate measured; dirty_ratelimit steps toward it only where the
// position error agrees, by a step that shrinks near the target.
void Kernel::wb_update_dirty_ratelimit(dirty_throttle_control* dtc, uint64_t dirtied, uint64_t elapsed) {
  const unsigned hz = params_.hz;
  const uint64_t dirty = dtc->dirty;
  const uint64_t freerun = dirty_freerun_ceiling(*dtc);
  const uint64_t limit = hard_dirty_limit(dtc->dom, dtc->thresh);
  const uint64_t setpoint = (freerun + limit) / 2;
  const uint64_t write_bw = wb_.avg_write_bandwidth;
  uint64_t dirty_ratelimit = wb_.dirty_ratelimit;
  const uint64_t dirty_rate = (dirtied - wb_.dirtied_stamp) * hz / elapsed;
  // The task rate of the last 200 ms (+1: helps ramping up from tiny values).
  const uint64_t task_ratelimit = (dirty_ratelimit * uint64_t(dtc->pos_ratio) >> RATELIMIT_CALC_SHIFT) + 1;
  uint64_t balanced_dirty_ratelimit = task_ratelimit * write_bw / (dirty_rate | 1);
  if (balanced_dirty_ratelimit > write_bw) balanced_dirty_ratelimit = write_bw;
  uint64_t step = 0;
  if (dirty < setpoint) {
    const uint64_t x = std::min({wb_.balanced_dirty_ratelimit, balanced_dirty_ratelimit, task_ratelimit});
    if (dirty_ratelimit < x) step = x - dirty_ratelimit;
  } else {
    const uint64_t x = std::max({wb_.balanced_dirty_ratelimit, balanced_dirty_ratelimit, task_ratelimit});
    if (dirty_ratelimit > x) step = dirty_ratelimit - x;
  }
  // Slower near the target: no chase of the fluctuating balanced rate.
  const uint64_t shift = dirty_ratelimit / (2 * step + 1);
  step = shift < 64 ? ((step >> shift) + 7) / 8 : 0;
  if (dirty_ratelimit < balanced_dirty_ratelimit) dirty_ratelimit += step;
  else dirty_ratelimit -= step;
  wb_.dirty_ratelimit = std::max<uint64_t>(dirty_ratelimit, 1);
  wb_.balanced_dirty_ratelimit = balanced_dirty_ratelimit;
  trace_event("bdi_dirty_ratelimit",
              {mmusim::TraceField::dec("write_bw", wb_.write_bandwidth << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("avg_write_bw", wb_.avg_write_bandwidth << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("dirty_rate", dirty_rate << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("dirty_ratelimit", wb_.dirty_ratelimit << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("task_ratelimit", task_ratelimit << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("balanced_dirty_ratelimit", balanced_dirty_ratelimit << (PAGE_SHIFT - 10))});
}

// __wb_update_bandwidth(..., update_ratelimit = true) (mm/page-writeback.c): each domain's smoothed
// limit and the base rate, then the write bandwidth, from the pages dirtied and written since.
// (The kernel also updates the bandwidth, without the rate, BANDWIDTH_INTERVAL after the wb's
// writeback ends, from a delayed work: left out; the estimate moves only while a dirtier is
// throttled.)
void Kernel::__wb_update_bandwidth(dirty_throttle_control* gdtc, dirty_throttle_control* mdtc, uint64_t now) {
  const uint64_t elapsed = std::max<uint64_t>(now - std::min(now, wb_.bw_time_stamp), 1);
  const uint64_t dirtied = wb_.dirtied, written = wb_.written;
  domain_update_dirty_limit(gdtc, now, params_.hz);
  wb_update_dirty_ratelimit(gdtc, dirtied, elapsed);
  if (mdtc) {
    domain_update_dirty_limit(mdtc, now, params_.hz);
    wb_update_dirty_ratelimit(mdtc, dirtied, elapsed);
  }
  wb_update_write_bandwidth(elapsed, written);
  wb_.dirtied_stamp = dirtied;
  wb_.written_stamp = written;
  wb_.bw_time_stamp = now;
}

// balance_dirty_pages_ratelimited() (mm/page-writeback.c): balance_dirty_pages() once the task has
// dirtied nr_dirtied_pause pages, or 8 while the wb is over its limits (dirty_exceeded). (The
// per-CPU bdp_ratelimits and the pages of exited tasks are left out.)
void Kernel::balance_dirty_pages_ratelimited(address_space* mapping, const folio* f) {
  (void)mapping;  // (one bdi, one wb)
  task_struct* t = current_;
  if (!t) return;
  unsigned ratelimit = t->nr_dirtied_pause;
  if (wb_.dirty_exceeded) ratelimit = std::min(ratelimit, 32u >> (PAGE_SHIFT - 10));
  if (t->nr_dirtied < ratelimit) return;
  balance_dirty_pages(memcgs_[f->memcg_id].get(), t->nr_dirtied);
}

// balance_dirty_pages() (mm/page-writeback.c), without strictlimit and laptop mode, for the one wb.
// Each round: the completions due (the disk's interrupts before now), the global domain and the
// folio's memory cgroup's (mem_cgroup_wb_stats(), mdtc_calc_avail()); global dirty pages over the
// background threshold, or any domain over its freerun ceiling, start background writeback. All
// domains in freerun: no pause, the next check after dirty_poll_interval() pages. Otherwise the
// dirtier is throttled to task_ratelimit = dirty_ratelimit * pos_ratio of the stricter domain: it
// sleeps (io_schedule_timeout(), the entry's CostAccount::throttle_cycles) for the period its
// pages take at that rate less the time since its last pause, between min_pause (below it the debt
// carries over) and max_pause; at or over the hard limit (task_ratelimit 0) it sleeps max_pause and
// looks again.
void Kernel::balance_dirty_pages(const mem_cgroup* memcg_c, uint64_t pages_dirtied) {
  task_struct* t = current_;
  mem_cgroup* memcg = memcgs_[memcg_c->id].get();
  const unsigned hz = params_.hz;
  const uint64_t start_time = jiffies();
  ctr_.balance_dirty_pages.inc();
  bool counted_over = false;
  for (unsigned round = 0;; ++round) {
    MMUSIM_CHECK(round < 1'000'000, "balance_dirty_pages: task {} still over the hard dirty limit after {} pauses",
                 t->pid, round);
    writeback_end_due();
    uint64_t now = jiffies();
    const uint64_t nr_dirty = nr_file_dirty_;
    // balance_domain_limits()
    dirty_throttle_control gdtc = global_dirty_limits();
    gdtc.dom = &global_wb_domain_;
    // writeback_set_ratelimit() (page_writeback_init() at boot): the global domain's limit starts
    // at its threshold (here: at the first check, when the port's memory is set up).
    if (global_wb_domain_.dirty_limit == 0) global_wb_domain_.dirty_limit = gdtc.thresh;
    gdtc.freerun = gdtc.dirty <= dirty_freerun_ceiling(gdtc);
    dirty_throttle_control mdtc;
    const bool have_mdtc = memcg_dirty_limits(memcg, gdtc, &mdtc);
    if (have_mdtc) {
      mdtc.dom = &memcg->cgwb_domain;
      mdtc.freerun = mdtc.dirty <= dirty_freerun_ceiling(mdtc);
    }
    if (nr_dirty > gdtc.bg_thresh) wb_start_background_writeback(memcg);
    if (gdtc.freerun && (!have_mdtc || mdtc.freerun)) {  // free_running:
      uint64_t intv = dirty_poll_interval(gdtc.dirty, gdtc.thresh);
      if (have_mdtc) intv = std::min(intv, dirty_poll_interval(mdtc.dirty, mdtc.thresh));
      t->dirty_paused_when = now;
      t->nr_dirtied = 0;
      t->nr_dirtied_pause = unsigned(std::max<uint64_t>(intv, 1));
      return;
    }
    if (!counted_over) ctr_.dirty_over_freerun.inc();
    counted_over = true;
    // "Start writeback even when in laptop mode" (the global test above does not see a memcg over
    // its limits).
    wb_start_background_writeback(memcg);
    // balance_wb_limits(): the global domain's pos_ratio, and the memcg's; the lower one rules.
    wb_dirty_limits(&gdtc);
    gdtc.dirty_exceeded = gdtc.wb_dirty > gdtc.wb_thresh && gdtc.dirty > gdtc.thresh;
    wb_position_ratio(&gdtc);
    dirty_throttle_control* sdtc = &gdtc;
    if (have_mdtc) {
      wb_dirty_limits(&mdtc);
      mdtc.dirty_exceeded = mdtc.wb_dirty > mdtc.wb_thresh && mdtc.dirty > mdtc.thresh;
      wb_position_ratio(&mdtc);
      if (mdtc.pos_ratio < gdtc.pos_ratio) sdtc = &mdtc;
    }
    wb_.dirty_exceeded = gdtc.dirty_exceeded || (have_mdtc && mdtc.dirty_exceeded);
    if (wb_.bw_time_stamp + bandwidth_interval(hz) < now) __wb_update_bandwidth(&gdtc, have_mdtc ? &mdtc : nullptr, now);
    // Throttle according to the chosen domain.
    const uint64_t dirty_ratelimit = wb_.dirty_ratelimit;
    const uint64_t task_ratelimit = dirty_ratelimit * uint64_t(sdtc->pos_ratio) >> RATELIMIT_CALC_SHIFT;
    // wb_max_pause(): short enough that a small pool of dirty pages does not run dry.
    const uint64_t bw = wb_.avg_write_bandwidth;
    const int64_t max_pause = int64_t(std::min(sdtc->wb_dirty / (1 + bw / roundup_pow_of_two(1 + hz / 8)) + 1,
                                               max_pause_jiffies(hz)));
    // wb_min_pause(): a pause of about 10 ms for one dirtier (more for several), and the pages to
    // dirty before the next check.
    int64_t min_pause;
    uint64_t nr_dirtied_pause;
    {
      const int64_t hi = ilog2(wb_.avg_write_bandwidth), lo = ilog2(dirty_ratelimit);
      int64_t tp = std::max<int64_t>(1, hz / 100);
      if (hi > lo) tp += (hi - lo) * (10 * int64_t(hz)) / 1024;
      tp = std::min(tp, 1 + max_pause / 2);
      const uint64_t hz_pow2 = roundup_pow_of_two(hz);
      uint64_t pages = dirty_ratelimit * uint64_t(tp) / hz_pow2;
      if (pages < DIRTY_POLL_THRESH) {
        tp = max_pause;
        pages = dirty_ratelimit * uint64_t(tp) / hz_pow2;
        if (pages > DIRTY_POLL_THRESH) {
          pages = DIRTY_POLL_THRESH;
          tp = int64_t(hz * DIRTY_POLL_THRESH / dirty_ratelimit);
        }
      }
      const int64_t est = int64_t(hz * pages / (task_ratelimit + 1));
      if (est > max_pause) {
        tp = max_pause;
        pages = task_ratelimit * uint64_t(tp) / hz_pow2;
      }
      nr_dirtied_pause = pages;
      min_pause = pages >= DIRTY_POLL_THRESH ? 1 + tp / 2 : tp;
    }
    int64_t period, pause;
    if (task_ratelimit == 0) {
      period = max_pause;
      pause = max_pause;
    } else {
      period = int64_t(hz * pages_dirtied / task_ratelimit);
      pause = period;
      if (t->dirty_paused_when) pause -= int64_t(now - t->dirty_paused_when);
      // Below min_pause: no sleep; under a second of think time the debt carries over to the
      // next period (the virtual clock advances), else a reset (a light dirtier).
      if (pause < min_pause) {
        trace_balance_dirty_pages(*sdtc, dirty_ratelimit, task_ratelimit, pages_dirtied, period,
                                  std::min<int64_t>(pause, 0), start_time);
        if (pause < -int64_t(hz)) {
          t->dirty_paused_when = now;
          t->nr_dirtied = 0;
        } else if (period) {
          t->dirty_paused_when += uint64_t(period);
          t->nr_dirtied = 0;
        } else if (t->nr_dirtied_pause <= pages_dirtied) {
          t->nr_dirtied_pause += unsigned(pages_dirtied);
        }
        return;
      }
      if (pause > max_pause) {  // for an occasional dropped task_ratelimit
        now += uint64_t(std::min(pause - max_pause, max_pause));
        pause = max_pause;
      }
    }
    // pause:
    trace_balance_dirty_pages(*sdtc, dirty_ratelimit, task_ratelimit, pages_dirtied, period, pause, start_time);
    // The flusher woken above gets the CPU while the dirtier sleeps: its writes go out from the
    // sleep's start.
    wb_run_queued_work();
    const uint64_t sleep_ns = uint64_t(pause) * (1'000'000'000ull / hz);
    cost_.throttle_cycles += double(sleep_ns) * ghz_;  // io_schedule_timeout(pause), TASK_KILLABLE
    ctr_.dirty_throttle_pauses.inc();
    ctr_.dirty_throttle_ns.inc(sleep_ns);
    t->dirty_paused_when = now + uint64_t(pause);
    t->nr_dirtied = 0;
    t->nr_dirtied_pause = unsigned(nr_dirtied_pause);
    if (task_ratelimit) return;
    // Over the hard limit: look again after the pause, unless the wb is all but clean.
    if (sdtc->wb_dirty <= kWbStatError) return;
    if (t->fatal_signal) return;
  }
}

// The balance_dirty_pages tracepoint (include/trace/events/writeback.h): rates in KB/s, times in ms.
void Kernel::trace_balance_dirty_pages(const dirty_throttle_control& dtc, uint64_t dirty_ratelimit,
                                       uint64_t task_ratelimit, uint64_t dirtied, int64_t period, int64_t pause,
                                       uint64_t start_time) {
  if (!trace_ || !trace_->on()) return;
  const unsigned hz = params_.hz;
  const uint64_t freerun = dirty_freerun_ceiling(dtc);
  const uint64_t limit = global_wb_domain_.dirty_limit;
  const uint64_t setpoint = (limit + freerun) / 2;
  const uint64_t now = jiffies();
  const task_struct* t = current_;
  const std::string pause_ms = std::to_string(pause * 1000 / int64_t(hz));
  const std::string think_ms =
      std::to_string(t->dirty_paused_when == 0 ? 0 : (int64_t(now) - int64_t(t->dirty_paused_when)) * 1000 / int64_t(hz));
  trace_event("balance_dirty_pages",
              {mmusim::TraceField::dec("limit", limit), mmusim::TraceField::dec("setpoint", setpoint),
               mmusim::TraceField::dec("dirty", dtc.dirty),
               mmusim::TraceField::dec("bdi_setpoint", setpoint * dtc.wb_thresh / (dtc.thresh + 1)),
               mmusim::TraceField::dec("bdi_dirty", dtc.wb_dirty),
               mmusim::TraceField::dec("dirty_ratelimit", dirty_ratelimit << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("task_ratelimit", task_ratelimit << (PAGE_SHIFT - 10)),
               mmusim::TraceField::dec("dirtied", dirtied), mmusim::TraceField::dec("dirtied_pause", t->nr_dirtied_pause),
               mmusim::TraceField::dec("paused", (now - start_time) * 1000 / hz), mmusim::TraceField::str("pause", pause_ms),
               mmusim::TraceField::dec("period", uint64_t(std::max<int64_t>(period, 0)) * 1000 / hz),
               mmusim::TraceField::str("think", think_ms)});
}

}  // namespace kmm
