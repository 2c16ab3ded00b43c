// SPDX-License-Identifier: GPL-2.0-only
// File-backed memory: files of a simulated filesystem, their page cache (mm/filemap.c,
// mm/readahead.c) and the fault paths of file mappings (mm/memory.c: do_fault() and what it
// calls). Linux 6.12 (docs/research-filemap-swap-io.md §1 has the map, with line numbers).
//
// What is here:
//   - a file is an inode with a size and contents that follow from a seed (file_word()); its
//     address_space holds the page-cache folios by index; a folio read from the disk is filled
//     with those contents, or with what was written back to it (page_writeback.cpp: a shared
//     mapping's writes are written by the flusher, and reclaim can then drop the folio);
//   - the VMA's vm_ops are generic_file_vm_ops (filemap_fault, filemap_map_pages,
//     filemap_page_mkwrite), as for a regular file of a disk filesystem: ext4 (order-0 folios in
//     6.12) or XFS (mapping_set_large_folios(): readahead makes folios of orders 2-5 with the
//     default window, page_cache_ra_order(); fault-around maps runs of them, a fault one PTE);
//   - read faults map the faulting page and fault around it (16 PTEs, fault_around_bytes =
//     64 KiB), write faults on private mappings copy the file page (do_cow_fault()), write faults
//     on shared mappings go through ->page_mkwrite and mark the folio dirty; the first write to a
//     present read-only PTE of a shared mapping is wp_page_shared() (write notification);
//   - a page-cache miss reads around the fault: 32 pages from pgoff - 16 (ra_pages = 128 KiB),
//     while mmap_miss stays at or below MMAP_LOTSAMISS (100), else the one page; the window's
//     last quarter is its async part, whose first folio (PG_readahead) fault-around leaves alone:
//     the fault on it reads the next window (page_cache_async_ra(), ramped up to ra_pages); the first
//     attempt of a fault that reads drops the fault lock first (maybe_unlock_mmap_for_io()) and
//     returns VM_FAULT_RETRY once the read is done, as 6.12 does; so does fault_dirty_shared_page()
//     with VM_FAULT_COMPLETED.
// The disk (a BlockDev, os/block_device.hpp) times every read: a request is submitted at the
// entry's simulated time and completes when the device's queue, latency and bandwidth say. Until
// then its folios are under read: locked and not uptodate to every task (folio_io_pending()).
// Fault-around skips them; a fault that needs one waits for it with the fault lock dropped
// (lock_folio_maybe_drop_mmap()) and returns VM_FAULT_RETRY, as 6.12 does; the asynchronous
// readahead is not waited for by the fault that starts it, so a reader that computes between its
// accesses overlaps the disk. (The port fills a folio's contents at submission: only what other
// tasks see of it follows the time.)
// An order-9 folio (VM_HUGEPAGE readahead with large folios) is mapped with one PMD where the
// VMA's 2 MiB block and file offset allow (do_set_pmd(), from fault-around or finish_fault()).
// Simplified (each marked where it happens): MADV_SEQUENTIAL reads a full window without the on-demand
// ramp; no truncation. (The cache's reclaim is
// vmscan.cpp's, its writeback page_writeback.cpp's.)
#include <cstring>

#include "base/error.hpp"
#include "base/file_contents.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

constexpr unsigned kFaultAroundPages = 65536 >> PAGE_SHIFT;  // fault_around_pages (mm/memory.c)
constexpr unsigned MMAP_LOTSAMISS = 100;                     // mm/filemap.c

inline uint64_t DIV_ROUND_UP(uint64_t n, uint64_t d) { return (n + d - 1) / d; }

inline uint64_t folio_next_index(const folio* f) { return f->index + uint64_t(folio_nr_pages(f)); }
// folio_file_page() (include/linux/pagemap.h:951): the page of `f` at file index `index`.
inline page* folio_file_page(folio* f, uint64_t index) { return folio_page(f, index - f->index); }

}  // namespace

page* filemap_get_entry(const address_space* m, uint64_t index) {
  auto it = m->i_pages.upper_bound(index);
  if (it == m->i_pages.begin()) return nullptr;
  --it;
  return index < it->first + uint64_t(folio_nr_pages(it->second)) ? it->second : nullptr;
}

page* filemap_find_from(const address_space* m, uint64_t index) {
  if (page* f = filemap_get_entry(m, index)) return f;
  auto it = m->i_pages.lower_bound(index);
  return it == m->i_pages.end() ? nullptr : it->second;
}

// ------------------------------------------------------------------------------------------------
// Files

address_space* Kernel::file_create(const std::string& name, uint64_t size, uint64_t seed) {
  auto m = std::make_unique<address_space>();
  m->ino = uint32_t(files_.size() + 1);
  m->name = name;
  m->i_size = size;
  m->seed = seed;
  files_.push_back(std::move(m));
  return files_.back().get();
}

void Kernel::file_fill_cache(address_space* mapping) {
  NotSimulated quiet(*this);
  const uint64_t pages = DIV_ROUND_UP(mapping->i_size, PAGE_SIZE);
  if (mapping_large_folio_support(mapping)) {
    // A sequential read of the file as its readahead reads it (page_cache_sync_ra() then
    // page_cache_async_ra() each ra_pages window): folios of order 2 in the first window, then
    // of the previous window's marker folio's order + 2, up to ilog2(ra_pages).
    unsigned order = 0;
    for (uint64_t index = 0; index < pages; index += mapping->ra_pages) {
      page_cache_ra_order(mapping, index, mapping->ra_pages, mapping->ra_pages / 4, order, /*simulated=*/false);
      if (const folio* f = filemap_get_entry(mapping, index + mapping->ra_pages - mapping->ra_pages / 4))
        order = folio_order(f);
    }
    for (auto& [index, f] : mapping->i_pages) f->flags &= ~PG_readahead;  // (the reader passed every mark)
    if (mapping->nrpages != pages)
      mmusim::fatal("out of simulated physical memory reading file {} ({} bytes) into the page cache: raise memory.size",
                    mapping->name, mapping->i_size);
    lru_add_drain();
    return;
  }
  if (page_cache_ra_unbounded(mapping, 0, pages, 0, /*simulated=*/false) != pages)
    mmusim::fatal("out of simulated physical memory reading file {} ({} bytes) into the page cache: raise memory.size",
                  mapping->name, mapping->i_size);
  lru_add_drain();
}

uint64_t Kernel::file_word(const address_space* m, uint64_t offset) {
  return mmusim::file_word(m->seed, m->ino, m->i_size, offset);
}

uint64_t Kernel::disk_word(const address_space* m, uint64_t offset) {
  if (auto w = m->written.find(offset >> PAGE_SHIFT); w != m->written.end()) {
    uint64_t v;
    std::memcpy(&v, w->second.data() + (offset & (PAGE_SIZE - 1)), 8);
    return v;
  }
  return file_word(m, offset);
}

// ------------------------------------------------------------------------------------------------
// The page cache (mm/filemap.c)

// filemap_get_folio() -> __filemap_get_folio(mapping, index, 0, 0) (mm/filemap.c:1873): the folio
// at `index` with a reference, or null.
folio* Kernel::filemap_get_folio(address_space* mapping, uint64_t index) {
  folio* f = filemap_get_entry(mapping, index);
  if (!f) return nullptr;
  folio_get(f);  // folio_try_get()
  charge(Cost::folio_op);
  return f;
}

// filemap_add_folio() (mm/filemap.c:950) -> __filemap_add_folio() (842): the folio goes into the
// cache locked, with one reference per page for the cache, then onto the LRU. A large folio is
// one multi-index entry over its naturally aligned range; any folio already in that range is
// -EEXIST, the shadows in it are overwritten (the last one iterated is the refault's).
int Kernel::filemap_add_folio(address_space* mapping, folio* f, uint64_t index, CacheCharge how) {
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  MMUSIM_CHECK(index % nr == 0 && folio_order(f) >= mapping_min_folio_order(mapping) &&
                   folio_order(f) <= mapping_max_folio_order(mapping),
               "filemap_add_folio: {}: an order-{} folio at index {} (orders {}-{}, naturally aligned)",
               mapping->name, folio_order(f), index, mapping_min_folio_order(mapping),
               mapping_max_folio_order(mapping));
  // (The kernel charges first and uncharges a folio that lost the race when it is put.)
  if (folio* old = filemap_find_from(mapping, index); old && old->index < index + nr) return -EEXIST;
  if (how != CacheCharge::root) {
    if (const int ret = mem_cgroup_charge(f, nullptr, how == CacheCharge::mapping_gfp)) return ret;
  }
  // The folio might have been evicted from cache only recently, in which case it should be
  // activated like any other repeatedly accessed folio (filemap_add_folio(): its shadow,
  // workingset_refault()).
  auto sh = mapping->shadows.lower_bound(index);
  if (sh != mapping->shadows.end() && sh->first < index + nr) {
    address_space::shadow_entry shadow{};
    while (sh != mapping->shadows.end() && sh->first < index + nr) {
      shadow = sh->second;
      sh = mapping->shadows.erase(sh);
    }
    workingset_refault(f, shadow);
  }
  f->flags |= PG_locked;  // __folio_set_locked()
  folio_ref_add(f, int(folio_nr_pages(f)));
  f->mapping = mapping;
  f->index = index;
  mapping->i_pages.emplace(index, f);
  mapping->nrpages += nr;
  // __lruvec_stat_mod_folio(NR_FILE_THPS) (NR_FILE_PAGES is not kept)
  if (folio_test_pmd_mappable(f)) nr_file_thps_ += nr;
  if (nr > 1) ctr_.pagecache_large_folios.inc();
  struct_page_touch(f, 1, true);
  charge(Cost::folio_op);
  lock_event(f, LockClass::folio_lock, true, true, struct_page_pa(folio_pfn(f)));
  folio_add_lru_vma(f, nullptr);  // folio_add_lru()
  return 0;
}

// filemap_read_folio() (mm/filemap.c:2361) with the filesystem's ->read_folio: the contents from
// the disk; the folio becomes uptodate. (The device time is the request's, charged by the caller.)
void Kernel::filemap_read_folio(address_space* mapping, folio* f) {
  f->flags |= PG_uptodate;  // folio_mark_uptodate()
  for (uint64_t i = 0; i < uint64_t(folio_nr_pages(f)); ++i) {
    const uint64_t index = f->index + i;
    uint8_t* data = phys_.frame_data(folio_pfn(f) + i);
    // A page written back holds what was written (page_writeback.cpp).
    if (auto w = mapping->written.find(index); w != mapping->written.end()) {
      std::memcpy(data, w->second.data(), PAGE_SIZE);
      continue;
    }
    const uint64_t base = index << PAGE_SHIFT;
    for (uint64_t off = 0; off < PAGE_SIZE; off += 8) {
      const uint64_t w = file_word(mapping, base + off);
      std::memcpy(data + off, &w, 8);
    }
  }
}

// read_pages() (mm/readahead.c:146) / the bio of filemap_read_folio(): one request of `nr` pages
// to the disk, submitted now (submit_bio()); its CPU work is charged, the device's time is the
// disk's. Returns when it completes (folio_end_read() of its folios).
uint64_t Kernel::read_request(unsigned nr) {
  charge(Cost::io_request);
  ctr_.filemap_read_pages.inc(nr);
  ctr_.io_requests.inc();
  const uint64_t now = time_now_ps();
  const uint64_t done = bdev_ ? bdev_->submit_read(now, uint64_t(nr) << PAGE_SHIFT) : now;
  trace_event("block_rq_issue", {mmusim::TraceField::dec("bytes", uint64_t(nr) << PAGE_SHIFT),
                                 mmusim::TraceField::dec("submit_ps", now), mmusim::TraceField::dec("complete_ps", done)});
  return done;
}

// folio_wait_locked() on a folio under read (folio_wait_bit_common(): the task sleeps on the
// folio's wait queue until folio_end_read() wakes it).
void Kernel::folio_wait_io(folio* f) {
  const uint64_t now = time_now_ps();
  if (f->io_until_ps <= now) return;
  const uint64_t waited = f->io_until_ps - now;
  cost_.io_wait_cycles += double(waited) * ghz_ / 1000.0;
  ctr_.folio_io_waits.inc();
  ctr_.io_wait_ns.inc((waited + 500) / 1000);
  trace_event("folio_wait_io", {mmusim::TraceField::dec("index", f->index), mmusim::TraceField::dec("wait_ps", waited)});
}

// lock_folio_maybe_drop_mmap() (mm/filemap.c:3105): lock the folio; if it is locked (under
// read), drop the fault lock first if this attempt may (the fault then returns VM_FAULT_RETRY),
// and sleep until it is unlocked (__folio_lock_killable()).
bool Kernel::lock_folio_maybe_drop_mmap(vm_fault* vmf, folio* f, bool* fpin) {
  if (!folio_io_pending(f) && folio_trylock(f)) return true;
  // NOTE! This will make us return with VM_FAULT_RETRY, but with the fault lock still held.
  // That's how FAULT_FLAG_RETRY_NOWAIT is supposed to work.
  if (vmf->flags & FAULT_FLAG_RETRY_NOWAIT) return false;
  maybe_unlock_mmap_for_io(vmf, fpin);
  folio_wait_io(f);
  const bool locked = folio_trylock(f);
  MMUSIM_CHECK(locked, "lock_folio_maybe_drop_mmap: folio index {} still locked after its read", f->index);
  return true;
}

// read_pages() (mm/readahead.c:146): the batch's folios, added locked and filled, read by one
// request of all their pages (blk_start_plug() around ->readahead); they are unlocked and
// uptodate when it completes (folio_end_read(), at that time as the other tasks see it:
// folio_io_pending()). `simulated` false: no request (file_fill_cache()). The batch is emptied.
void Kernel::read_pages(std::vector<folio*>& batch, bool simulated) {
  if (batch.empty()) return;
  uint64_t nr_pages = 0;
  for (const folio* f : batch) nr_pages += uint64_t(folio_nr_pages(f));
  const uint64_t done = simulated ? read_request(unsigned(nr_pages)) : 0;
  for (folio* f : batch) {
    f->io_until_ps = done;
    folio_unlock(f);  // folio_end_read()
  }
  batch.clear();
}

// page_cache_ra_unbounded() (mm/readahead.c:205) with read_pages() (146): allocate and add the
// folios of [index, index + nr) that are not cached, and read each run of them with one request.
// The folios are unlocked and uptodate when their request completes (folio_io_pending()).
unsigned Kernel::page_cache_ra_unbounded(address_space* mapping, uint64_t index, uint64_t nr, uint64_t lookahead,
                                         bool simulated) {
  unsigned added = 0;
  std::vector<folio*> run;  // the folios of the current request
  // The index that only has lookahead ("async region") gets the readahead flag (never, without).
  const uint64_t mark = lookahead && lookahead <= nr ? nr - lookahead : ~uint64_t(0);
  for (uint64_t i = 0; i < nr; ++i) {
    if (filemap_get_entry(mapping, index + i)) {
      // Page already present? Kick off the current batch of contiguous pages before continuing
      // with the next batch.
      read_pages(run, simulated);
      continue;
    }
    folio* f = folio_alloc(0, false);  // filemap_alloc_folio()
    if (!f) break;
    if (const int ret = filemap_add_folio(mapping, f, index + i,
                                          simulated ? CacheCharge::readahead_gfp : CacheCharge::root)) {
      folio_put(f);
      if (ret == -ENOMEM) break;
      read_pages(run, simulated);
      continue;
    }
    if (i == mark) f->flags |= PG_readahead;  // folio_set_readahead()
    // The read's contents now; the folio stays locked until its request is submitted, and its
    // completion (folio_end_read(): unlocked, uptodate) is the request's completion time, which
    // the other tasks see (folio_io_pending()). (Locked, reclaim cannot take it meanwhile.)
    filemap_read_folio(mapping, f);
    folio_put(f);     // readahead_folio(): the allocation's reference
    run.push_back(f);
    ++added;
  }
  read_pages(run, simulated);
  return added;
}

// maybe_unlock_mmap_for_io() (mm/internal.h:1046): FAULT_FLAG_RETRY_NOWAIT means we don't want to
// wait on page locks or anything, so we only pin the file and drop the fault lock if only
// FAULT_FLAG_ALLOW_RETRY is set, while this is the first attempt.
void Kernel::maybe_unlock_mmap_for_io(vm_fault* vmf, bool* fpin) {
  if (*fpin) return;
  if (fault_flag_allow_retry_first(vmf->flags) && !(vmf->flags & FAULT_FLAG_RETRY_NOWAIT)) {
    *fpin = true;  // get_file()
    release_fault_lock(vmf);
  }
}

// do_page_cache_ra() (mm/readahead.c:302): don't read past the page containing the last byte of
// the file. (page_cache_ra_order() falls back to it for a mapping without large folios.)
void Kernel::do_page_cache_ra(address_space* mapping, uint64_t index, uint64_t nr, uint64_t lookahead,
                              bool simulated) {
  if (mapping->i_size == 0) return;
  const uint64_t end_index = (mapping->i_size - 1) >> PAGE_SHIFT;
  if (index > end_index) return;
  if (nr > end_index - index) nr = end_index - index + 1;
  page_cache_ra_unbounded(mapping, index, nr, lookahead, simulated);
}

// page_cache_ra_order() (mm/readahead.c:452) with ra_alloc_folio() (430) and read_pages() (146):
// the window [index, index + size) in folios of `new_order` + 2 (clamped to the mapping's largest
// order and to ilog2(size)), smaller where the index is not aligned to it (__ffs()) and where a
// folio would reach past the window or the file's last page; the one whose range holds the
// window's async mark gets PG_readahead. One request reads them all. An allocation that fails
// (a large folio under the readahead gfp's __GFP_NORETRY: no reclaim here) or a folio already
// cached ends the loop: what was added is read, and do_page_cache_ra() reads the window in
// order-0 folios from where it stopped, skipping cached pages. A mapping without large folios
// (ext4) or a window below 4 pages goes there at once.
void Kernel::page_cache_ra_order(address_space* mapping, uint64_t index, uint64_t size, uint64_t async_size,
                                 unsigned new_order, bool simulated) {
  const unsigned min_order = mapping_min_folio_order(mapping);
  if (!mapping_large_folio_support(mapping) || size < std::max<uint64_t>(4, 1ull << min_order)) {
    do_page_cache_ra(mapping, index, size, async_size, simulated);
    return;
  }
  if (mapping->i_size == 0) return;
  const uint64_t limit = std::min((mapping->i_size - 1) >> PAGE_SHIFT, index + size - 1);
  const uint64_t mark = index + size - async_size;
  if (new_order < mapping_max_folio_order(mapping)) new_order += 2;
  new_order = std::min(mapping_max_folio_order(mapping), new_order);
  new_order = std::min(new_order, unsigned(63 - __builtin_clzll(size)));  // ilog2(ra->size)
  new_order = std::max(new_order, min_order);
  // mapping_align_index(): min order 0, the index as it is.
  std::vector<folio*> batch;
  int err = 0;
  while (index <= limit) {
    unsigned order = new_order;
    // Align with smaller pages if needed
    if (index & ((1ull << order) - 1)) order = unsigned(__builtin_ctzll(index));
    // Don't allocate pages past EOF
    while (order > min_order && index + (1ull << order) - 1 > limit) --order;
    // ra_alloc_folio()
    folio* f = folio_alloc(order, false);  // filemap_alloc_folio(readahead_gfp_mask())
    if (!f) {
      err = -ENOMEM;
      break;
    }
    if (index == ALIGN_DOWN(mark, uint64_t(1) << order)) f->flags |= PG_readahead;  // folio_set_readahead()
    if ((err = filemap_add_folio(mapping, f, index, simulated ? CacheCharge::readahead_gfp : CacheCharge::root)) != 0) {
      folio_put(f);
      break;
    }
    filemap_read_folio(mapping, f);  // (the contents now; the folio stays locked until its request)
    folio_put(f);                    // readahead_folio(): the allocation's reference
    batch.push_back(f);
    index += 1ull << order;
  }
  read_pages(batch, simulated);
  // If there were already pages in the page cache, then we may have left some gaps. Let the
  // regular readahead code take care of this situation.
  if (!err) return;
  do_page_cache_ra(mapping, index, size, async_size, simulated);
}

// get_next_ra_size() (mm/readahead.c:379): ramp the window up.
static uint64_t get_next_ra_size(uint64_t cur, uint64_t max) {
  if (cur < max / 16) return 4 * cur;
  if (cur <= max / 2) return 2 * cur;
  return max;
}

// page_cache_async_ra() (mm/readahead.c:611): the access reached the window's PG_readahead folio:
// read the next window (a sequential reader), or, without valid state, a window from the next
// page the cache lacks. (ractl_max_pages(): ra_pages; no larger io_pages here.)
void Kernel::page_cache_async_ra(address_space* mapping, folio* f, uint64_t index, uint64_t req_count) {
  if (!mapping->ra_pages) return;
  const unsigned order = folio_order(f);
  f->flags &= ~PG_readahead;  // folio_clear_readahead()
  const uint64_t max_pages = mapping->ra_pages;
  // It's the expected callback index, assume sequential access. Ramp up sizes, and push forward
  // the readahead window. (The index rounded down to the marker folio's size.)
  const uint64_t expected =
      ALIGN_DOWN(mapping->ra_start + mapping->ra_size - mapping->ra_async_size, uint64_t(1) << order);
  if (index == expected) {
    mapping->ra_start += mapping->ra_size;
    mapping->ra_size = std::max(mapping->ra_size, get_next_ra_size(mapping->ra_size, max_pages));
    mapping->ra_async_size = mapping->ra_size;
  } else {
    // Hit a marked folio without valid readahead state. E.g. interleaved reads. Query the
    // pagecache for async_size, which normally equals to readahead size. Ramp it up and use it
    // as the new readahead size. (page_cache_next_miss(): the first index without a folio.)
    uint64_t start = index + 1;
    while (start - index <= max_pages && filemap_get_entry(mapping, start)) ++start;
    if (!start || start - index > max_pages) return;
    mapping->ra_start = start;
    mapping->ra_size = start - index;  // old async_size
    mapping->ra_size += req_count;
    mapping->ra_size = get_next_ra_size(mapping->ra_size, max_pages);
    mapping->ra_async_size = mapping->ra_size;
  }
  page_cache_ra_order(mapping, mapping->ra_start, mapping->ra_size, mapping->ra_async_size, order);
}

// do_sync_mmap_readahead() (mm/filemap.c:3146). Drops the fault lock (*fpin) before it reads.
void Kernel::do_sync_mmap_readahead(vm_fault* vmf, bool* fpin) {
  address_space* mapping = vmf->vma->vm_file;
  const vm_flags_t vm_flags = vmf->vma->vm_flags;
  // CONFIG_TRANSPARENT_HUGEPAGE: a VM_HUGEPAGE VMA (MADV_HUGEPAGE) uses the readahead code even
  // if readahead is disabled (HPAGE_PMD_ORDER <= MAX_PAGECACHE_ORDER on x86-64 and arm64 4K):
  // from the PMD-aligned index, two PMD folios' worth (one with VM_RAND_READ), the second the
  // async part, page_cache_ra_order(HPAGE_PMD_ORDER). As in 6.12 the window's start (ra->start)
  // is left as it was. On ext4 that is 1024 order-0 pages in one go (do_page_cache_ra()); with
  // large folios, order-9 folios, which do_set_pmd() maps with one PMD where the VMA allows.
  static_assert(HPAGE_PMD_ORDER <= MAX_PAGECACHE_ORDER);
  if (vm_flags & VM_HUGEPAGE) {
    maybe_unlock_mmap_for_io(vmf, fpin);
    const uint64_t index = ALIGN_DOWN(vmf->pgoff, uint64_t(HPAGE_PMD_NR));
    mapping->ra_size = HPAGE_PMD_NR;
    // Fetch two PMD folios, so we get the chance to actually readahead, unless we've been told not to.
    if (!(vm_flags & VM_RAND_READ)) mapping->ra_size *= 2;
    mapping->ra_async_size = HPAGE_PMD_NR;
    page_cache_ra_order(mapping, index, mapping->ra_size, mapping->ra_async_size, HPAGE_PMD_ORDER);
    return;
  }
  // If we don't want any read-ahead, don't bother (the caller reads the one page).
  if (vm_flags & VM_RAND_READ) return;
  if (!mapping->ra_pages) return;
  if (vm_flags & VM_SEQ_READ) {
    maybe_unlock_mmap_for_io(vmf, fpin);
    // page_cache_sync_ra(): the window from the fault on (its on-demand ramp from the access
    // history is not ported: the full window, no async part), page_cache_ra_order(order 0).
    page_cache_ra_order(mapping, vmf->pgoff, mapping->ra_pages, 0, 0);
    return;
  }
  // Avoid banging the cache line if not needed
  if (mapping->mmap_miss < MMAP_LOTSAMISS * 10) ++mapping->mmap_miss;
  // Do we miss much more than hit in this file? If so, stop bothering with read-ahead. It will
  // only hurt.
  if (mapping->mmap_miss > MMAP_LOTSAMISS) return;
  maybe_unlock_mmap_for_io(vmf, fpin);
  // mmap read-around, then page_cache_ra_order(order 0) (order 2 with large folios, else
  // do_page_cache_ra()): the last quarter of the window is its async part (the folio holding
  // its first page gets PG_readahead).
  mapping->ra_start = vmf->pgoff > mapping->ra_pages / 2 ? vmf->pgoff - mapping->ra_pages / 2 : 0;
  mapping->ra_size = mapping->ra_pages;
  mapping->ra_async_size = mapping->ra_pages / 4;
  page_cache_ra_order(mapping, mapping->ra_start, mapping->ra_size, mapping->ra_async_size, 0);
}

// filemap_fault() (mm/filemap.c:3305), the VMA's ->fault. Returns VM_FAULT_LOCKED with
// vmf->page_ referenced and its folio locked, or VM_FAULT_RETRY with the fault lock dropped.
vm_fault_t Kernel::filemap_fault(vm_fault* vmf) {
  address_space* mapping = vmf->vma->vm_file;
  const uint64_t index = vmf->pgoff;
  bool fpin = false;  // the file pinned and the fault lock dropped (maybe_unlock_mmap_for_io())
  vm_fault_t ret = 0;

  if (index >= DIV_ROUND_UP(mapping->i_size, PAGE_SIZE)) {
    last_fault_.kind = FaultKind::sigbus;
    ctr_.faults_sigbus.inc();
    return VM_FAULT_SIGBUS;
  }

  // Do we have something in the page cache already?
  folio* f = filemap_get_folio(mapping, index);
  if (f) {
    // We found the page, so try async readahead before waiting for the lock:
    // do_async_mmap_readahead() (3215).
    if (!(vmf->flags & FAULT_FLAG_TRIED) && !(vmf->vma->vm_flags & VM_RAND_READ) && mapping->ra_pages) {
      if (mapping->mmap_miss) --mapping->mmap_miss;
      if (folio_test_readahead(f)) {
        maybe_unlock_mmap_for_io(vmf, &fpin);
        page_cache_async_ra(mapping, f, index, mapping->ra_pages);
      }
    }
  } else {
    // filemap_fault_recheck_pte_none(): only for VM_LOCKED VMAs (none here).
    // No page in the page cache at all
    ctr_.pgmajfault.inc();  // count_vm_event(PGMAJFAULT)
    ret = VM_FAULT_MAJOR;
    do_sync_mmap_readahead(vmf, &fpin);
    // __filemap_get_folio(FGP_CREAT | FGP_FOR_MMAP): the readahead's folio, or a new one, added
    // unlocked and not uptodate.
    f = filemap_get_folio(mapping, index);
    if (!f) {
      f = folio_alloc(0, false);
      if (!f || filemap_add_folio(mapping, f, index) != 0) {
        if (f) folio_put(f);
        if (fpin) return ret | VM_FAULT_RETRY;
        return VM_FAULT_OOM;
      }
      folio_unlock(f);  // FGP_FOR_MMAP: added unlocked
    }
  }

  // A folio under read (this fault's own read-around, or another's readahead) is locked: the
  // fault sleeps until its read completes, with the fault lock dropped.
  if (!lock_folio_maybe_drop_mmap(vmf, f, &fpin)) {
    folio_put(f);
    return ret | VM_FAULT_RETRY;  // out_retry with the fault lock held (RETRY_NOWAIT)
  }

  // We have a locked folio in the page cache, now we need to check that it's up-to-date.
  if (!folio_test_uptodate(f)) {
    // page_not_uptodate: read it in directly (3431), with the lock dropped if allowed;
    // filemap_read_folio() submits the read and waits for it (folio_wait_locked_killable()).
    maybe_unlock_mmap_for_io(vmf, &fpin);
    filemap_read_folio(mapping, f);
    f->io_until_ps = read_request(unsigned(folio_nr_pages(f)));
    folio_wait_io(f);
    // (6.12 then retries the lookup, or returns VM_FAULT_RETRY with fpin; the folio is
    // uptodate and locked either way.)
  }

  // We've made it this far and we had to drop our mmap_lock, now is the time to return to the
  // upper layer and have it re-find the vma and redo the fault.
  if (fpin) {
    folio_unlock(f);
    folio_put(f);  // out_retry
    ctr_.filemap_fault_retry.inc();
    return ret | VM_FAULT_RETRY;
  }
  // Found the page and have a reference on it. We must recheck i_size under page lock (no
  // truncation here: it holds).
  vmf->page_ = folio_file_page(f, index);
  return ret | VM_FAULT_LOCKED;
}

// next_uptodate_folio() (mm/filemap.c:3494): the next cached folio from *index (the one that
// contains it, else the next one) up to end_pgoff that is uptodate, unlocked and within the file,
// locked and referenced; *index becomes the first page of it to map (xas.xa_index).
static folio* next_uptodate_folio(Kernel& k, address_space* mapping, uint64_t* index, uint64_t end_pgoff) {
  const uint64_t max_idx = DIV_ROUND_UP(mapping->i_size, PAGE_SIZE);
  auto it = mapping->i_pages.lower_bound(*index);
  if (folio* f = filemap_get_entry(mapping, *index); f && f->index < *index) it = mapping->i_pages.find(f->index);
  for (; it != mapping->i_pages.end() && std::max(it->first, *index) <= end_pgoff; ++it) {
    folio* f = it->second;
    const uint64_t xa_index = std::max(it->first, *index);
    if (folio_test_locked(f) || k.folio_io_pending(f)) continue;  // (under read: locked)
    if (!folio_test_uptodate(f) || folio_test_readahead(f)) continue;
    if (xa_index >= max_idx) continue;
    folio_get(f);  // folio_try_get()
    k.charge(Cost::folio_op);
    if (!k.folio_trylock(f)) {
      k.folio_put(f);
      continue;
    }
    *index = xa_index;
    return f;
  }
  return nullptr;
}

// do_set_pmd() (mm/memory.c:4926): map the order-9 page-cache folio of `pg` with one PMD at the
// fault's 2 MiB block. Refused (VM_FAULT_FALLBACK) for a VMA with VM_NOHUGEPAGE
// (vma_thp_disabled(); no prctl(PR_SET_THP_DISABLE) here), a block the VMA does not cover whole or
// whose file offset is not 2 MiB-aligned (thp_vma_suitable_order()), a folio of another order, or
// a PMD that is no longer none. Neither the sysfs THP knob nor CONFIG_READ_ONLY_THP_FOR_FS is
// asked. No reference is taken: the caller's (->fault's or the lookup's) becomes the PMD's. No
// page table is deposited (arch_needs_pgtable_deposit() is false on x86 and arm64).
vm_fault_t Kernel::do_set_pmd(vm_fault* vmf, folio* f, page* pg) {
  vm_area_struct* vma = vmf->vma;
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  const uint64_t haddr = vmf->address & PMD_MASK;
  vm_fault_t ret = VM_FAULT_FALLBACK;
  // It is too late to allocate a small folio, we already have a large folio in the pagecache:
  // ... So let's simply refuse any PMD mappings if THPs are disabled. (thp_disabled_by_hw(): no.)
  if (vma->vm_flags & VM_NOHUGEPAGE) return ret;  // vma_thp_disabled()
  if (!thp_vma_suitable_order(vma, haddr, HPAGE_PMD_ORDER)) return ret;
  if (folio_order(f) != HPAGE_PMD_ORDER) return ret;
  pg = f;  // page = &folio->page
  // folio_test_has_hwpoisoned(): no poison. arch_needs_pgtable_deposit(): false.
  vmf->ptl = pmd_lock(vma->vm_mm, vmf->pmd);
  if (!pmd_none(*vmf->pmd)) goto out;
  {
    // flush_icache_pages(): nothing on x86 and arm64 (no executable mappings here).
    pmd_t entry = arch_->mk_huge_pmd(folio_pfn(f), vma_page_prot(vma));  // vma->vm_page_prot
    if (write) entry = arch_->maybe_pmd_mkwrite(arch_->pmd_mkdirty(entry), vma);
    add_mm_counter(vma->vm_mm, MM_FILEPAGES, HPAGE_PMD_NR);  // mm_counter_file()
    folio_add_file_rmap_pmd(f, pg, vma);
    arch_->set_pmd_at(vma->vm_mm, haddr, vmf->pmd, entry);
    // update_mmu_cache_pmd(): empty on x86 and arm64.
    // fault is handled
    ret = 0;
    ctr_.thp_file_mapped.inc();  // count_vm_event(THP_FILE_MAPPED)
    last_fault_.order = HPAGE_PMD_ORDER;
  }
out:
  spin_unlock(vmf->ptl);
  return ret;
}

// filemap_map_pmd() (mm/filemap.c:3466): the fault-around window's first folio `f` (locked,
// referenced). A huge PMD already there: nothing to do. A none PMD and a PMD-order folio:
// do_set_pmd(); mapped: the lookup's reference is the mapping's. Otherwise, a none PMD gets its
// page table (pmd_install() of do_fault_around()'s preallocated one; the port allocates it here)
// and the caller maps PTEs. *oom: that allocation failed.
bool Kernel::filemap_map_pmd(vm_fault* vmf, folio* f, uint64_t start, bool* oom) {
  mm_struct* mm = vmf->vma->vm_mm;
  // Huge page is mapped? No need to proceed.
  if (arch_->pmd_trans_huge(*vmf->pmd)) {
    folio_unlock(f);
    folio_put(f);
    return true;
  }
  if (pmd_none(*vmf->pmd) && folio_test_pmd_mappable(f)) {
    page* pg = folio_file_page(f, start);
    const vm_fault_t ret = do_set_pmd(vmf, f, pg);
    if (!ret) {
      // The page is mapped successfully, reference consumed.
      folio_unlock(f);
      return true;
    }
  }
  if (pmd_none(*vmf->pmd) && pte_alloc(mm, vmf->pmd)) *oom = true;  // pmd_install()
  return false;
}

// filemap_map_pages() (mm/filemap.c:3634), the VMA's ->map_pages: map the cached, uptodate pages
// of [start_pgoff, end_pgoff] whose PTEs are none: an order-0 folio's one PTE
// (filemap_map_order0_folio(), 3602), a large folio's pages in the window in runs of none PTEs,
// one set_pte_range() and one folio_ref_add() per run (filemap_map_folio_range(), 3539). If the
// first folio ends within the file (can_map_large), filemap_map_pmd() may map it with a PMD or
// installs the page table; if it does not and the PMD is none, nothing is mapped (the tree's
// pte_offset_map_lock() finds no table): ->fault maps the page. Returns VM_FAULT_NOPAGE if the
// faulting address was mapped.
vm_fault_t Kernel::filemap_map_pages(vm_fault* vmf, uint64_t start_pgoff, uint64_t end_pgoff) {
  vm_area_struct* vma = vmf->vma;
  address_space* mapping = vma->vm_file;
  vm_fault_t ret = 0;
  uint64_t rss = 0;
  unsigned mmap_miss = 0;
  uint64_t index = start_pgoff;

  // Recalculate end_pgoff based on file_end before calling next_uptodate_folio() to avoid races
  // with concurrent truncation.
  const uint64_t file_end = DIV_ROUND_UP(mapping->i_size, PAGE_SIZE) - 1;
  end_pgoff = std::min(end_pgoff, file_end);

  folio* f = next_uptodate_folio(*this, mapping, &index, end_pgoff);
  if (f) {
    // Do not allow to map with PTEs beyond i_size and with PMD across i_size to preserve SIGBUS
    // semantics. (The exception for shmem/tmpfs: no shmem here.)
    const bool can_map_large = file_end >= folio_next_index(f);
    bool oom = false;
    if (can_map_large && filemap_map_pmd(vmf, f, start_pgoff, &oom)) {
      ret = VM_FAULT_NOPAGE;
      goto out;
    }
    if (oom) {
      folio_unlock(f);
      folio_put(f);
      return VM_FAULT_OOM;
    }
    if (pmd_none(*vmf->pmd)) {  // pte_offset_map_lock() returned NULL
      folio_unlock(f);
      folio_put(f);
      goto out;
    }
    const uint64_t addr0 = vma->vm_start + ((start_pgoff - vma->vm_pgoff) << PAGE_SHIFT);
    vmf->pte = pte_offset_map_lock(vma->vm_mm, vmf->pmd, addr0, &vmf->ptl);
    pte_t* pte0 = vmf->pte;
    do {
      const uint64_t addr = addr0 + ((index - start_pgoff) << PAGE_SHIFT);
      vmf->pte = pte0 + (index - start_pgoff);
      if (!folio_test_large(f)) {
        // filemap_map_order0_folio(): PageHWPoison no. If there are too many folios that are
        // recently evicted in a file, they will probably continue to be evicted: a workingset
        // folio does not decrease mmap_miss, so that read-ahead can stop.
        if (!folio_test_workingset(f)) ++mmap_miss;
        pt_touch(vmf->pte, sizeof(pte_t), false);
        if (pte_none(arch_->ptep_get(vmf->pte))) {
          if (vmf->address == addr) ret = VM_FAULT_NOPAGE;
          set_pte_range(vmf, f, f, 1, addr);
          ++rss;
          folio_get(f);  // folio_ref_inc()
          ctr_.fault_around_ptes.inc();
        }
      } else {
        ret |= filemap_map_folio_range(vmf, f, index, addr,
                                       unsigned(std::min(folio_next_index(f) - 1, end_pgoff) - index + 1), &rss,
                                       &mmap_miss);
      }
      folio_unlock(f);
      folio_put(f);
      index = folio_next_index(f);
    } while (index <= end_pgoff && (f = next_uptodate_folio(*this, mapping, &index, end_pgoff)) != nullptr);
    add_mm_counter(vma->vm_mm, MM_FILEPAGES, int64_t(rss));  // mm_counter_file()
    pte_unmap_unlock(pte0, vmf->ptl);
  }
out:
  if (mmap_miss >= mapping->mmap_miss) mapping->mmap_miss = 0;
  else mapping->mmap_miss -= mmap_miss;
  return ret;
}

// filemap_map_folio_range() (mm/filemap.c:3539): map the pages [index, index + nr_pages) of the
// large folio `f` (the PTE of `index` at vmf->pte, its address `addr`), each run of none PTEs with
// one set_pte_range() (on arm64, contpte blocks where a run covers one) and one reference per
// PTE; a PTE already present ends a run; each page of a folio that is not workingset forgives
// one miss (mmap_miss, as filemap_map_order0_folio()).
vm_fault_t Kernel::filemap_map_folio_range(vm_fault* vmf, folio* f, uint64_t index, uint64_t addr, unsigned nr_pages,
                                           uint64_t* rss, unsigned* mmap_miss) {
  vm_fault_t ret = 0;
  page* pg = folio_file_page(f, index);
  unsigned count = 0;
  pte_t* old_ptep = vmf->pte;
  auto map_run = [&]() {
    if (!count) return;
    set_pte_range(vmf, f, pg, count, addr);
    *rss += count;
    folio_ref_add(f, int(count));
    ctr_.fault_around_ptes.inc(count);
    if (vmf->address >= addr && vmf->address < addr + uint64_t(count) * PAGE_SIZE) ret = VM_FAULT_NOPAGE;
  };
  pt_touch(vmf->pte, sizeof(pte_t) * nr_pages, false);
  do {
    if (!folio_test_workingset(f)) ++*mmap_miss;
    if (pte_none(arch_->ptep_get(&vmf->pte[count]))) {
      ++count;
      continue;
    }
    // skip:
    map_run();
    ++count;
    pg += count;
    vmf->pte += count;
    addr += uint64_t(count) * PAGE_SIZE;
    count = 0;
  } while (--nr_pages > 0);
  map_run();
  vmf->pte = old_ptep;
  return ret;
}

// filemap_page_mkwrite() (mm/filemap.c:3722): the folio locked and dirtied before it becomes
// writable (sb_start_pagefault(), file_update_time(), folio_wait_stable(): nothing to wait for).
vm_fault_t Kernel::filemap_page_mkwrite(vm_fault* vmf) {
  folio* f = page_folio(vmf->page_);
  const bool locked = folio_trylock(f);  // folio_lock()
  MMUSIM_CHECK(locked, "filemap_page_mkwrite: folio pfn {:#x} is locked", folio_pfn(f));
  if (f->mapping != vmf->vma->vm_file) {
    folio_unlock(f);
    return VM_FAULT_NOPAGE;
  }
  // We mark the folio dirty already here so that when freeze is in progress, we are guaranteed
  // that writeback during freezing will see the dirty folio and writeprotect it again.
  folio_mark_dirty(f);
  return VM_FAULT_LOCKED;
}

// ------------------------------------------------------------------------------------------------
// The fault paths of file mappings (mm/memory.c)

// vma_wants_writenotify() (mm/mmap.c): a shared writable mapping whose backer wants to know when
// a page is first written to (->page_mkwrite: every file here).
bool Kernel::vma_wants_writenotify(const vm_area_struct* vma) const {
  if ((vma->vm_flags & (VM_WRITE | VM_SHARED)) != (VM_WRITE | VM_SHARED)) return false;
  return vma->vm_file != nullptr;  // vma->vm_ops->page_mkwrite
}

// vma->vm_page_prot as vma_set_page_prot() (mm/mmap.c) leaves it.
pgprot_t Kernel::vma_page_prot(const vm_area_struct* vma) const {
  vm_flags_t vm_flags = vma->vm_flags;
  if (vma_wants_writenotify(vma)) vm_flags &= ~VM_SHARED;
  return arch_->vm_get_page_prot(vm_flags);
}

// set_pte_range() (mm/memory.c:5015): map `nr` pages of `f` from `pg` at `addr`.
void Kernel::set_pte_range(vm_fault* vmf, folio* f, page* pg, unsigned nr, uint64_t addr) {
  vm_area_struct* vma = vmf->vma;
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  const bool prefault = !(vmf->address >= addr && vmf->address < addr + uint64_t(nr) * PAGE_SIZE);
  pte_t entry = arch_->pfn_pte(page_to_pfn(pg), vma_page_prot(vma));  // mk_pte()
  // arch_wants_old_prefaulted_pte(): arm64 with hardware access flags; not x86.
  if (prefault && arch_->isa() == mmusim::pg::Isa::arm64) entry = arch_->pte_mkold(entry);
  else entry = arch_->pte_sw_mkyoung(entry);
  if (write) entry = arch_->maybe_mkwrite(arch_->pte_mkdirty(entry), vma);
  // copy-on-write page
  if (write && !(vma->vm_flags & VM_SHARED)) {
    MMUSIM_CHECK(nr == 1, "set_pte_range: a COW fault maps one page");
    folio_add_new_anon_rmap(f, vma, addr, RMAP_EXCLUSIVE);
    folio_add_lru_vma(f, vma);
  } else {
    folio_add_file_rmap_ptes(f, pg, int(nr), vma);
  }
  arch_->set_ptes(vma->vm_mm, addr, vmf->pte, entry, nr);
  // no need to invalidate: a not-present page won't be cached
  arch_->update_mmu_cache_range(vma, addr, vmf->pte, nr);
}

// should_fault_around() (mm/memory.c:5288): ->map_pages exists, no userfaultfd, more than one page.
bool Kernel::should_fault_around(vm_fault* vmf) { return kFaultAroundPages > 1; }

// do_fault_around() (mm/memory.c:5255): the window of fault_around_pages around the address,
// aligned, within the VMA and the page table.
vm_fault_t Kernel::do_fault_around(vm_fault* vmf) {
  const uint64_t nr_pages = kFaultAroundPages;
  const uint64_t pte_off = pte_index(vmf->address);
  // The page offset of vmf->address within the VMA.
  const uint64_t vma_off = vmf->pgoff - vmf->vma->vm_pgoff;
  // The PTE offset of the start address, clamped to the VMA.
  const uint64_t from_pte = std::max(ALIGN_DOWN(pte_off, nr_pages), pte_off - std::min(pte_off, vma_off));
  // The PTE offset of the end address, clamped to the VMA and PTE.
  const uint64_t to_pte =
      std::min({from_pte + nr_pages, uint64_t(PTRS_PER_PTE), pte_off + vma_pages(vmf->vma) - vma_off}) - 1;
  // (The page table is allocated by filemap_map_pages() when it has something to map: the
  // kernel preallocates it here and frees it unused otherwise.)
  return filemap_map_pages(vmf, vmf->pgoff + from_pte - pte_off, vmf->pgoff + to_pte - pte_off);
}

// __do_fault() (mm/memory.c:4856): the VMA's ->fault; the folio comes back locked.
vm_fault_t Kernel::__do_fault(vm_fault* vmf) {
  // (The page table is allocated by finish_fault(); the kernel preallocates it here, before the
  // folio lock, for memcg reclaim's sake.)
  const vm_fault_t ret = filemap_fault(vmf);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY | VM_FAULT_DONE_COW)) return ret;
  MMUSIM_CHECK(ret & VM_FAULT_LOCKED, "__do_fault: ->fault returned an unlocked folio");
  return ret;
}

// finish_fault() (mm/memory.c:5072): map the page ->fault found (or the COW copy) at the faulting
// address. Where the PMD is none, an order-9 page-cache folio that ends within the file is mapped
// with one PMD (do_set_pmd()); otherwise one PTE: a regular file maps its neighbours by
// fault-around only (the whole-folio PTE mapping is for anonymous shmem).
vm_fault_t Kernel::finish_fault(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  const bool is_cow = (vmf->flags & FAULT_FLAG_WRITE) && !(vma->vm_flags & VM_SHARED);
  page* pg = is_cow ? vmf->cow_page : vmf->page_;
  folio* f = page_folio(pg);
  // check_stable_address_space(): no OOM reaper here.
  bool needs_fallback = false;
  if (vma->vm_file) {
    const uint64_t file_end = DIV_ROUND_UP(vma->vm_file->i_size, PAGE_SIZE);
    // Do not allow to map with PTEs beyond i_size and with PMD across i_size to preserve SIGBUS
    // semantics. (No shmem exception: no shmem here.)
    needs_fallback = file_end < folio_next_index(f);
  }
  if (pmd_none(*vmf->pmd)) {
    if (!needs_fallback && folio_test_large(f)) {  // PageTransCompound(page)
      const vm_fault_t ret = do_set_pmd(vmf, f, pg);
      if (ret != VM_FAULT_FALLBACK) return ret;
    }
    if (pte_alloc(vma->vm_mm, vmf->pmd)) return VM_FAULT_OOM;
  }
  vmf->pte = pte_offset_map_lock(vma->vm_mm, vmf->pmd, vmf->address, &vmf->ptl);
  // Re-check under ptl
  if (vmf_pte_changed(vmf)) {
    // update_mmu_tlb(): empty on x86 and arm64.
    pte_unmap_unlock(vmf->pte, vmf->ptl);
    return VM_FAULT_NOPAGE;
  }
  // folio_ref_add(folio, nr_pages - 1): nr_pages is 1.
  set_pte_range(vmf, f, pg, 1, vmf->address);
  add_mm_counter(vma->vm_mm, is_cow ? MM_ANONPAGES : MM_FILEPAGES, 1);
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  return 0;
}

// do_read_fault() (mm/memory.c:5301): fault-around first, ->fault for what it did not map.
vm_fault_t Kernel::do_read_fault(vm_fault* vmf) {
  ctr_.do_read_fault.inc();
  vm_fault_t ret = 0;
  // Let's call ->map_pages() first and use ->fault() as fallback if page by the offset is not
  // ready to be mapped (cold cache or something).
  if (should_fault_around(vmf)) {
    ret = do_fault_around(vmf);
    if (ret) {
      last_fault_.kind = FaultKind::file_map;
      last_fault_.ptes_changed = 1;
      return ret;
    }
  }
  // vmf_can_call_fault(): the VMA has ->map_pages, so ->fault runs under the VMA lock too.
  ret = __do_fault(vmf);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) return ret;
  ret |= finish_fault(vmf);
  folio* f = page_folio(vmf->page_);
  folio_unlock(f);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) folio_put(f);
  last_fault_.kind = (ret & VM_FAULT_MAJOR) ? FaultKind::file_read : FaultKind::file_map;
  last_fault_.ptes_changed = 1;
  return ret;
}

// do_cow_fault() (mm/memory.c:5333): a write to a private file mapping where no PTE is: a copy of
// the file page in a new anonymous folio.
vm_fault_t Kernel::do_cow_fault(vm_fault* vmf) {
  ctr_.do_cow_fault.inc();
  vm_area_struct* vma = vmf->vma;
  vm_fault_t ret = vmf_anon_prepare(vmf);  // (vmf_can_call_fault(): 0, see do_read_fault)
  if (ret) return ret;
  folio* nf = folio_prealloc(vma->vm_mm, vma, vmf->address, false);
  if (!nf) return VM_FAULT_OOM;
  vmf->cow_page = nf;
  ret = __do_fault(vmf);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_put(nf);  // uncharge_out
    return ret;
  }
  // copy_mc_user_highpage(): no hardware poison.
  copy_user_highpage(vmf->cow_page, vmf->page_, vmf->address);
  // __folio_mark_uptodate()
  ret |= finish_fault(vmf);
  folio* f = page_folio(vmf->page_);
  folio_unlock(f);  // unlock_page(vmf->page)
  folio_put(f);     // put_page(vmf->page)
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_put(nf);
    return ret;
  }
  last_fault_.kind = FaultKind::copy;
  last_fault_.ptes_changed = 1;
  return ret;
}

// do_page_mkwrite() (mm/memory.c:3152): tell the filesystem a page is about to become writable.
vm_fault_t Kernel::do_page_mkwrite(vm_fault* vmf, folio* f) {
  const uint32_t old_flags = vmf->flags;
  vmf->flags = FAULT_FLAG_WRITE | FAULT_FLAG_MKWRITE;
  // IS_SWAPFILE(): no swap files.
  vm_fault_t ret = filemap_page_mkwrite(vmf);
  // Restore original flags so that caller is not surprised
  vmf->flags = old_flags;
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE)) return ret;
  MMUSIM_CHECK(ret & VM_FAULT_LOCKED, "do_page_mkwrite: ->page_mkwrite returned the folio unlocked");
  return ret;
}

// fault_dirty_shared_page() (mm/memory.c:3185): the folio dirty and unlocked; with
// ->page_mkwrite the fault lock is dropped for balance_dirty_pages_ratelimited() and the fault is
// VM_FAULT_COMPLETED.
vm_fault_t Kernel::fault_dirty_shared_page(vm_fault* vmf) {
  folio* f = page_folio(vmf->page_);
  folio_mark_dirty(f);
  MMUSIM_CHECK(!folio_test_anon(f), "fault_dirty_shared_page of an anon folio");
  folio_unlock(f);
  // `if ((dirtied || page_mkwrite) && mapping)`: every file here has ->page_mkwrite, so the lock
  // is dropped whether or not this write dirtied the folio.
  bool fpin = false;
  maybe_unlock_mmap_for_io(vmf, &fpin);
  balance_dirty_pages_ratelimited(f->mapping, f);
  return fpin ? VM_FAULT_COMPLETED : 0;
}

// do_shared_fault() (mm/memory.c:5375): a write to a shared file mapping where no PTE is.
vm_fault_t Kernel::do_shared_fault(vm_fault* vmf) {
  ctr_.do_shared_fault.inc();
  vm_fault_t ret = __do_fault(vmf);  // (vmf_can_call_fault(): 0, see do_read_fault)
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) return ret;
  folio* f = page_folio(vmf->page_);
  // Check if the backing address space wants to know that the page is about to become writable
  folio_unlock(f);
  const vm_fault_t tmp = do_page_mkwrite(vmf, f);
  if (!tmp || (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE))) {
    folio_put(f);
    return tmp;
  }
  ret |= finish_fault(vmf);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_unlock(f);
    folio_put(f);
    return ret;
  }
  last_fault_.kind = (ret & VM_FAULT_MAJOR) ? FaultKind::file_read : FaultKind::file_map;
  last_fault_.ptes_changed = 1;
  ret |= fault_dirty_shared_page(vmf);
  // (The ->fault reference is the mapping's: finish_fault() added none.)
  return ret;
}

// do_fault() (mm/memory.c:5425): the VMA has ->fault (filemap_fault).
vm_fault_t Kernel::do_fault(vm_fault* vmf) {
  if (!(vmf->flags & FAULT_FLAG_WRITE)) return do_read_fault(vmf);
  if (!(vmf->vma->vm_flags & VM_SHARED)) return do_cow_fault(vmf);
  return do_shared_fault(vmf);
}

// finish_mkwrite_fault() (mm/memory.c:3211)
vm_fault_t Kernel::finish_mkwrite_fault(vm_fault* vmf, folio* f) {
  MMUSIM_CHECK(vmf->vma->vm_flags & VM_SHARED, "finish_mkwrite_fault in a private mapping");
  vmf->pte = pte_offset_map_lock(vmf->vma->vm_mm, vmf->pmd, vmf->address, &vmf->ptl);
  // We might have raced with another page fault while we released the pte_offset_map_lock.
  if (!pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte)) {
    pte_unmap_unlock(vmf->pte, vmf->ptl);
    return VM_FAULT_NOPAGE;
  }
  wp_page_reuse(vmf, f);
  return 0;
}

// wp_page_shared() (mm/memory.c:3546): the first write to a read-only PTE of a shared file mapping
// (write notification); called with the PTL held, which it releases.
vm_fault_t Kernel::wp_page_shared(vm_fault* vmf, folio* f) {
  folio_get(f);
  charge(Cost::folio_op);
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  // vmf_can_call_fault(): the VMA has ->map_pages.
  vm_fault_t tmp = do_page_mkwrite(vmf, f);
  if (!tmp || (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE))) {
    folio_put(f);
    return tmp;
  }
  tmp = finish_mkwrite_fault(vmf, f);
  if (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE)) {
    folio_unlock(f);
    folio_put(f);
    return tmp;
  }
  last_fault_.kind = FaultKind::reuse;
  last_fault_.ptes_changed = 1;
  const vm_fault_t ret = fault_dirty_shared_page(vmf);
  folio_put(f);
  return ret;
}

}  // namespace kmm
