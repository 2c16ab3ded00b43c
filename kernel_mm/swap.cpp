// SPDX-License-Identifier: GPL-2.0-only
// Swap: the swap device's slots (mm/swapfile.c), the swap cache and swap readahead
// (mm/swap_state.c), the reads and writes of swap pages (mm/page_io.c) and the fault on a swap
// PTE (do_swap_page(), mm/memory.c). Linux 6.12; docs/research-filemap-swap-io.md §3-4 has the
// map with line numbers.
//
// What is here: one swap partition (type 0) on the platform's disk, `swap.size` bytes. Reclaim
// (vmscan.cpp) gives an anonymous folio a slot (add_to_swap(): the folio enters the swap cache,
// dirty), unmaps it (try_to_unmap(): each PTE becomes the swap entry, MM_SWAPENTS) and writes it
// (pageout() -> swap_writepage(): a zero-filled page only sets its bit in the zeromap, any other
// is one write request; the folio is under writeback until the write completes, then rotated to
// the inactive list's tail, PG_reclaim) and frees it on a later pass (__remove_mapping()). A fault
// on a swap PTE finds the folio in the swap cache or reads it with VMA-based readahead
// (swap_vma_readahead(): up to 2^page_cluster pages around the fault, within the VMA and the PMD,
// the window grown by readahead hits); a fault that finds its folio still under read drops its
// fault lock and returns VM_FAULT_RETRY (folio_lock_or_retry()), as the file faults do.
// The slots keep what was written (their contents on the disk), so what comes back is checked.
// Simplified (each marked where it happens): order-0 folios only (a large anonymous folio is
// not split for swap-out: reclaim activates it); no swap cgroup (a swap-in is charged to the
// faulting task's memory cgroup, which every process shares here) and no memory.swap.max; slot
// allocation by per-CPU clusters without the free/nonfull/frag lists' order; no zswap, no swap
// slot cache, no swapoff, no shadow entries for swap (no anon refault detection).
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
constexpr uint8_t SWAP_HAS_CACHE = 0x40;      // include/linux/swap.h: the folio is in the swap cache
constexpr uint8_t SWAP_MAP_MAX = 0x3e;        // the largest count swap_map holds (no continuation here)
constexpr uint64_t SWAPFILE_CLUSTER = 512;    // mm/swapfile.c: HPAGE_PMD_NR slots per cluster
constexpr unsigned SWAP_RA_ORDER_CEILING = 5;  // mm/swap_state.c
constexpr unsigned SWAP_RA_HITS_MAX = 0xff;    // SWAP_RA_HITS_MASK

// __swapin_nr_pages() (mm/swap_state.c:583): the readahead window from the hits of the last
// window, or 2 pages for a fault next to the last one, else 1; never below half the last window.
unsigned __swapin_nr_pages(uint64_t prev_offset, uint64_t offset, unsigned hits, unsigned max_pages,
                           unsigned prev_win) {
  unsigned pages = hits + 2;
  if (pages == 2) {
    // We can have no readahead hits to judge by: but must not get stuck here forever, so check
    // for an adjacent offset instead.
    if (offset != prev_offset + 1 && offset != prev_offset - 1) pages = 1;
  } else {
    unsigned roundup = 4;
    while (roundup < pages) roundup <<= 1;
    pages = roundup;
  }
  if (pages > max_pages) pages = max_pages;
  // Don't shrink readahead too fast
  const unsigned last_ra = prev_win / 2;
  if (pages < last_ra) pages = last_ra;
  return pages;
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// The swap device's slots (mm/swapfile.c)

// sys_swapon() of a partition of `bytes`: slot 0 holds the swap header (never allocated).
void Kernel::swapon(uint64_t bytes) {
  si_ = std::make_unique<swap_info_struct>();
  si_->max = bytes >> PAGE_SHIFT;
  MMUSIM_CHECK(si_->max >= 2, "swapon: {} bytes of swap hold no slot", bytes);
  si_->swap_map.assign(si_->max, 0);
  si_->zeromap.assign(si_->max, false);
  si_->swap_cgroup.assign(si_->max, 0);
  si_->cluster_count.assign((si_->max + SWAPFILE_CLUSTER - 1) / SWAPFILE_CLUSTER, 0);
  si_->swap_map[0] = SWAP_MAP_MAX;  // the header
  si_->cluster_count[0] = 1;
}

// folio_alloc_swap() -> get_swap_pages() -> scan_swap_map_slots() (mm/swapfile.c) for an SSD:
// the CPU's current cluster gives the next slot in order; when it is used up, the CPU takes a free
// cluster, else any slot left (the kernel's fragmented clusters). The slot leaves with
// SWAP_HAS_CACHE (the folio is about to enter the swap cache); then mem_cgroup_try_charge_swap()
// (mm/swap_slots.c: folio_alloc_swap()), which frees the slot again over memory.swap.max. Returns
// the offset, 0: swap full or the memcg's swap limit reached.
uint64_t Kernel::folio_alloc_swap(folio* f) {
  MMUSIM_CHECK(!folio_test_large(f), "folio_alloc_swap: large folios are not swapped here");
  if (!si_) return 0;
  if (get_nr_swap_pages() == 0) {
    if (f->memcg_id != 0) ctr_.memcg_swap_fail.inc();  // mem_cgroup_try_charge_swap(): no entry
    return 0;
  }
  swap_info_struct& si = *si_;
  auto free_in_cluster = [&](uint64_t from) -> uint64_t {
    const uint64_t end = std::min((from / SWAPFILE_CLUSTER + 1) * SWAPFILE_CLUSTER, si.max);
    for (uint64_t o = from; o < end; ++o)
      if (!si.swap_map[o]) return o;
    return 0;
  };
  uint64_t& next = si.percpu_next[size_t(cpu_) % si.percpu_next.size()];
  uint64_t off = next ? free_in_cluster(next) : 0;
  if (!off) {
    const uint64_t n = si.cluster_count.size();
    for (uint64_t i = 0; i < n && !off; ++i) {  // a free cluster
      const uint64_t c = (si.next_cluster + i) % n;
      if (si.cluster_count[c] == 0 && (off = free_in_cluster(c * SWAPFILE_CLUSTER))) si.next_cluster = (c + 1) % n;
    }
    for (uint64_t c = 0; c < n && !off; ++c) off = free_in_cluster(c * SWAPFILE_CLUSTER);
  }
  MMUSIM_CHECK(off, "folio_alloc_swap: {} slots counted free, none found", get_nr_swap_pages());
  next = ((off + 1) % SWAPFILE_CLUSTER && off + 1 < si.max) ? off + 1 : 0;
  si.swap_map[off] = SWAP_HAS_CACHE;
  ++si.cluster_count[off / SWAPFILE_CLUSTER];
  ++si.inuse_pages;
  charge(Cost::folio_op);
  if (mem_cgroup_try_charge_swap(f, off)) {
    // put_swap_folio(): the slot, never used, is free again.
    swap_entry_free(off);
    return 0;
  }
  return off;
}

// swap_entry_range_free() (mm/swapfile.c): the slot free again, its contents gone.
void Kernel::swap_entry_free(uint64_t offset) {
  swap_info_struct& si = *si_;
  mem_cgroup_uncharge_swap(offset);
  si.swap_map[offset] = 0;
  si.zeromap[offset] = false;  // swap_zeromap clear
  si.data.erase(offset);
  --si.cluster_count[offset / SWAPFILE_CLUSTER];
  --si.inuse_pages;
}

// __swap_count() (mm/swapfile.c): the PTEs (and other references) that hold the entry.
int Kernel::__swap_count(swp_entry_t e) const {
  return si_->swap_map[swp_offset(e)] & ~SWAP_HAS_CACHE;
}

// swap_duplicate() (mm/swapfile.c) -> __swap_duplicate(): one more reference (fork).
int Kernel::swap_duplicate(swp_entry_t e) {
  uint8_t& m = si_->swap_map[swp_offset(e)];
  MMUSIM_CHECK((m & ~SWAP_HAS_CACHE) > 0 || (m & SWAP_HAS_CACHE), "swap_duplicate: free slot {}", swp_offset(e));
  MMUSIM_CHECK((m & ~SWAP_HAS_CACHE) < SWAP_MAP_MAX, "swap_duplicate: slot {} has {} references (no swap count "
               "continuation here)", swp_offset(e), m & ~SWAP_HAS_CACHE);
  ++m;
  return 0;
}

// swap_free_nr() (mm/swapfile.c) -> __swap_entry_free(): a PTE's reference dropped; the slot is
// free once neither a PTE nor the swap cache holds it.
void Kernel::swap_free_nr(swp_entry_t e, int nr) {
  for (int i = 0; i < nr; ++i) {
    const uint64_t off = swp_offset(e) + uint64_t(i);
    uint8_t& m = si_->swap_map[off];
    MMUSIM_CHECK((m & ~SWAP_HAS_CACHE) > 0, "swap_free: slot {} has no reference", off);
    --m;
    if (m == 0) swap_entry_free(off);
  }
}

// put_swap_folio() (mm/swapfile.c): the swap cache's hold on the slot dropped.
static void put_swap_cache_ref(Kernel::swap_info_struct& si, uint64_t off, bool* now_free) {
  si.swap_map[off] &= uint8_t(~SWAP_HAS_CACHE);
  *now_free = si.swap_map[off] == 0;
}

// vm_swap_full() (include/linux/swap.h): more than half the swap used.
bool Kernel::vm_swap_full() const { return si_ && get_nr_swap_pages() * 2 < si_->max - 1; }

// free_swap_and_cache_nr() (mm/swapfile.c): a zapped swap PTE's reference dropped; if only the
// swap cache holds the slot now, the cache's folio goes too when nothing maps it
// (__try_to_reclaim_swap(TTRS_UNMAPPED | TTRS_FULL)).
int Kernel::free_swap_and_cache(swp_entry_t e) {
  const uint64_t off = swp_offset(e);
  MMUSIM_CHECK(si_ && off < si_->max, "free_swap_and_cache: bad swap entry {:#x}", e.val);
  swap_free_nr(e, 1);
  if (si_->swap_map[off] == SWAP_HAS_CACHE) {
    writeback_end_due();
    auto it = swap_cache_.find(e.val);
    if (it != swap_cache_.end()) {
      folio* f = it->second;
      if (!folio_io_pending(f) && folio_trylock(f)) {
        folio_get(f);
        if (!folio_mapped(f) || mem_cgroup_swap_full(f)) folio_free_swap(f);
        folio_unlock(f);
        folio_put(f);
      }
    }
  }
  return 1;
}

// ------------------------------------------------------------------------------------------------
// The swap cache (mm/swap_state.c)

// add_to_swap_cache() (mm/swap_state.c:86): the folio under its entry, one reference per page.
int Kernel::add_to_swap_cache(folio* f, swp_entry_t e) {
  MMUSIM_CHECK(!folio_test_swapcache(f) && folio_test_swapbacked(f), "add_to_swap_cache: pfn {:#x}",
               page_to_pfn(f));
  folio_ref_add(f, int(folio_nr_pages(f)));
  f->flags |= PG_swapcache;
  f->swap = e.val;
  swap_cache_[e.val] = f;
  charge(Cost::folio_op);
  return 0;
}

// __delete_from_swap_cache() (mm/swap_state.c:141)
void Kernel::__delete_from_swap_cache(folio* f, swp_entry_t e) {
  swap_cache_.erase(e.val);
  f->swap = 0;
  f->flags &= ~PG_swapcache;
  charge(Cost::folio_op);
}

// __delete_from_swap_cache() then put_swap_folio(): out of the cache, the slot's cache hold
// dropped (the slot is free if no PTE holds it either); the cache's references are the caller's.
void Kernel::remove_swap_cache_entry(folio* f, swp_entry_t e) {
  __delete_from_swap_cache(f, e);
  bool now_free = false;
  put_swap_cache_ref(*si_, swp_offset(e), &now_free);
  if (now_free) swap_entry_free(swp_offset(e));
}

// delete_from_swap_cache() (mm/swap_state.c:236): out of the cache, the slot's cache hold and the
// cache's references dropped.
void Kernel::delete_from_swap_cache(folio* f) {
  remove_swap_cache_entry(f, swp_entry_t{f->swap});
  folio_ref_sub(f, int(folio_nr_pages(f)));
}

// folio_free_swap() (mm/swapfile.c): a swap-cache folio whose slot no PTE holds any more leaves
// the cache (dirty: its only copy is in memory now). Not while it is being written.
bool Kernel::folio_free_swap(folio* f) {
  if (!folio_test_swapcache(f) || folio_test_writeback(f)) return false;  // folio_swapcache_freeable()
  if (__swap_count(swp_entry_t{f->swap}) > 0) return false;                 // folio_swapped()
  delete_from_swap_cache(f);
  f->flags |= PG_dirty;  // folio_set_dirty()
  return true;
}

// add_to_swap() (mm/swap_state.c:180): a slot for an anonymous folio reclaim wants to swap out,
// the folio into the swap cache, marked dirty so that pageout() writes it.
bool Kernel::add_to_swap(folio* f) {
  const uint64_t off = folio_alloc_swap(f);
  if (!off) return false;
  // An anonymous folio is uptodate from its allocation (__folio_mark_uptodate() in
  // do_anonymous_page(), wp_page_copy(), ...), which the port records only from here: a swap-cache
  // hit maps it.
  f->flags |= PG_uptodate;
  add_to_swap_cache(f, swp_entry(0, off));
  folio_mark_dirty(f);
  return true;
}

// swap_cache_get_folio() (mm/swap_state.c:351): the entry's folio with a reference, or null; a
// folio read ahead counts as a readahead hit, which the VMA's readahead window grows with.
folio* Kernel::swap_cache_get_folio(swp_entry_t e, vm_area_struct* vma, uint64_t addr) {
  auto it = swap_cache_.find(e.val);
  if (it == swap_cache_.end()) return nullptr;
  folio* f = it->second;
  folio_get(f);
  charge(Cost::folio_op);
  const bool readahead = folio_test_readahead(f);
  f->flags &= ~PG_readahead;  // folio_test_clear_readahead()
  if (vma) {
    if (readahead) vma->swap_ra_hits = std::min(vma->swap_ra_hits + 1, SWAP_RA_HITS_MAX);
    vma->swap_ra_addr = addr;  // SWAP_RA_VAL(addr, win, hits)
  }
  if (readahead) ctr_.swap_ra_hit.inc();
  return f;
}

// __read_swap_cache_async() (mm/swap_state.c:432): the entry's folio from the swap cache, or a
// new one, locked, charged (mem_cgroup_swapin_charge_folio(): to the faulting task's memory
// cgroup here, no swap cgroup), in the swap cache and on the LRU, for the caller to read
// (*new_page_allocated). Null if the slot was freed meanwhile or memory ran out.
folio* Kernel::__read_swap_cache_async(swp_entry_t e, vm_area_struct* vma, uint64_t addr, bool* new_page_allocated) {
  *new_page_allocated = false;
  if (auto it = swap_cache_.find(e.val); it != swap_cache_.end()) {
    folio_get(it->second);  // filemap_get_folio()
    return it->second;
  }
  // Just skip read ahead for unused swap slot.
  if (!__swap_count(e)) return nullptr;
  folio* nf = vma_alloc_folio(0, vma, addr, false);  // folio_alloc_mpol()
  if (!nf) return nullptr;
  // swapcache_prepare(): the slot's SWAP_HAS_CACHE (the port's kernel entries do not
  // interleave, so no other task is half-way through adding it: no -EEXIST).
  si_->swap_map[swp_offset(e)] |= SWAP_HAS_CACHE;
  nf->flags |= PG_locked | PG_swapbacked;  // __folio_set_locked(), __folio_set_swapbacked()
  if (mem_cgroup_charge(nf, vma ? vma->vm_mm : nullptr) != 0) {
    // fail_unlock: put_swap_folio(), folio_unlock(), folio_put()
    bool now_free = false;
    put_swap_cache_ref(*si_, swp_offset(e), &now_free);
    if (now_free) swap_entry_free(swp_offset(e));
    nf->flags &= ~PG_locked;
    folio_put(nf);
    return nullptr;
  }
  add_to_swap_cache(nf, e);
  folio_add_lru_vma(nf, nullptr);  // folio_add_lru()
  *new_page_allocated = true;
  return nf;
}

// ------------------------------------------------------------------------------------------------
// Reads and writes (mm/page_io.c)

// swap_read_folio() (mm/page_io.c:608): a zero-filled slot (zeromap) fills the folio with zeros
// and needs no I/O; else its contents come from the disk. The folio is uptodate and unlocked when
// the read completes (end_swap_bio_read()), which the other tasks see (folio_io_pending()); the
// port fills it at submission. `plug`: the read waits in the caller's block plug (swap readahead's
// blk_start_plug()), merged there with reads of adjacent slots; null: submitted now. Returns when
// the folio is uptodate (0: now).
uint64_t Kernel::swap_read_folio(folio* f, std::vector<folio*>* plug) {
  const uint64_t off = swp_offset(swp_entry_t{f->swap});
  uint8_t* data = phys_.frame_data(folio_pfn(f));
  if (si_->zeromap[off]) {  // swap_read_folio_zeromap()
    std::memset(data, 0, PAGE_SIZE);
    f->flags |= PG_uptodate;
    folio_unlock(f);
    return 0;
  }
  auto it = si_->data.find(off);
  MMUSIM_CHECK(it != si_->data.end(), "swap_read_folio: slot {} was never written", off);
  std::memcpy(data, it->second.data(), PAGE_SIZE);
  f->flags |= PG_uptodate;
  ctr_.pswpin.inc();
  if (plug) {
    plug->push_back(f);
    return 0;
  }
  std::vector<folio*> one{f};
  swap_read_unplug(one);
  return f->io_until_ps;
}

// blk_finish_plug() for swap reads: each run of folios in adjacent slots is one request (the
// block layer merges the bios of a plug, blk_attempt_plug_merge()); its folios are unlocked when
// it completes.
void Kernel::swap_read_unplug(std::vector<folio*>& plug) {
  std::sort(plug.begin(), plug.end(), [](const folio* a, const folio* b) { return a->swap < b->swap; });
  for (size_t i = 0; i < plug.size();) {
    size_t j = i + 1;
    while (j < plug.size() && plug[j]->swap == plug[j - 1]->swap + 1) ++j;
    charge(Cost::io_request);
    ctr_.io_requests.inc();
    const uint64_t now = time_now_ps();
    const uint64_t bytes = uint64_t(j - i) << PAGE_SHIFT;
    const uint64_t done = bdev_ ? bdev_->submit_read(now, bytes) : now;
    trace_event("block_rq_issue", {mmusim::TraceField::dec("bytes", bytes), mmusim::TraceField::dec("submit_ps", now),
                                   mmusim::TraceField::dec("complete_ps", done)});
    for (size_t k = i; k < j; ++k) {
      plug[k]->io_until_ps = done;
      folio_unlock(plug[k]);  // end_swap_bio_read(), at `done` as the other tasks see it
    }
    i = j;
  }
  plug.clear();
}

// swap_writepage() (mm/page_io.c:241) of a locked, dirty-for-io swap-cache folio: if no PTE
// holds its slot any more it just leaves the swap cache; a zero-filled page sets its zeromap bit
// (no I/O); any other is written (__swap_writepage() -> swap_writepage_bdev_async(): one request
// per folio), under writeback until the write completes. The folio is unlocked. True: a write is
// in flight.
bool Kernel::swap_writepage(folio* f) {
  if (folio_free_swap(f)) {
    folio_unlock(f);
    return false;
  }
  const uint64_t off = swp_offset(swp_entry_t{f->swap});
  charge(Cost::folio_op);  // is_folio_zero_filled(): a scan of the page (mostly one line, for a page that is not zero)
  if (folio_zero_filled(f)) {
    si_->zeromap[off] = true;  // swap_zeromap_folio_set()
    ctr_.swap_zeromap.inc();
    folio_unlock(f);
    return false;
  }
  si_->zeromap[off] = false;
  f->flags |= PG_writeback;  // folio_start_writeback()
  node_write_pending_mod(f, int64_t(folio_nr_pages(f)));  // NR_ZONE_WRITE_PENDING (NR_WRITEBACK of an anonymous folio)
  charge(Cost::io_request);
  ctr_.io_requests.inc();
  ctr_.swap_write_requests.inc();
  ctr_.pswpout.inc();
  const uint64_t now = time_now_ps();
  const uint64_t done = bdev_ ? bdev_->submit_write(now, PAGE_SIZE) : now;
  trace_event("block_rq_issue", {mmusim::TraceField::dec("bytes", PAGE_SIZE), mmusim::TraceField::dec("submit_ps", now),
                                 mmusim::TraceField::dec("complete_ps", done), mmusim::TraceField::str("rw", "write")});
  writeback_.emplace_back(done, f);
  folio_unlock(f);
  return true;
}

bool Kernel::folio_zero_filled(const folio* f) {
  const uint8_t* data = phys_.frame_data(folio_pfn(f));
  return std::all_of(data, data + PAGE_SIZE, [](uint8_t b) { return b == 0; });
}

// What the slot holds when reclaim frees its folio (__remove_mapping()): the folio's contents. The
// write (or the zeromap bit) was decided at pageout(); the port takes the bytes now, when the
// folio leaves memory: a store of a core that is behind in simulated time, made before the unmap
// in simulated time but after the pageout in the port's order, is in them (a swap-cache folio
// that is unmapped and clean is not written after its pageout otherwise).
void Kernel::swap_slot_store(folio* f) {
  const uint64_t off = swp_offset(swp_entry_t{f->swap});
  if (folio_zero_filled(f)) {
    si_->zeromap[off] = true;
    si_->data.erase(off);
    return;
  }
  si_->zeromap[off] = false;
  const uint8_t* data = phys_.frame_data(folio_pfn(f));
  si_->data[off].assign(data, data + PAGE_SIZE);
}

// folio_end_writeback() (mm/filemap.c:1594) when a write completes (end_swap_bio_write(),
// mpage_write_end_io()): a folio reclaim wrote or marked (PG_reclaim) moves to the tail of the
// inactive list for the next scan (folio_rotate_reclaimable() -> lru_move_tail(): PGROTATED);
// __folio_end_writeback() ends the page-cache folio's writeback accounting.
void Kernel::folio_end_writeback(folio* f) {
  f->flags &= ~PG_writeback;
  if (!folio_test_anon(f)) __folio_end_writeback(f);
  else node_write_pending_mod(f, -int64_t(folio_nr_pages(f)));
  if (!folio_test_reclaim(f)) return;
  f->flags &= ~PG_reclaim;
  if (folio_test_locked(f) || folio_test_dirty(f) || !folio_test_lru(f)) return;
  lruvec& lv = folio_lruvec(f);
  lruvec_del_folio(lv, f);
  f->flags &= ~PG_active;
  lruvec_add_folio_tail(lv, f);
  ctr_.pgrotated.inc(uint64_t(folio_nr_pages(f)));
}

// The completions of the writes whose time has come, in completion order (the disk's interrupts
// before this entry).
void Kernel::writeback_end_due() {
  if (writeback_.empty()) return;
  const uint64_t now = time_now_ps();
  std::stable_sort(writeback_.begin(), writeback_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t n = 0;
  while (n < writeback_.size() && writeback_[n].first <= now) folio_end_writeback(writeback_[n++].second);
  writeback_.erase(writeback_.begin(), writeback_.begin() + std::ptrdiff_t(n));
}

// ------------------------------------------------------------------------------------------------
// Swap readahead (mm/swap_state.c)

// swap_vma_ra_win() (mm/swap_state.c:745): the window around the fault from the VMA's
// readahead state, within the VMA and the PMD; records this fault in the state.
unsigned Kernel::swap_vma_ra_win(vm_fault* vmf, uint64_t* start, uint64_t* end) {
  vm_area_struct* vma = vmf->vma;
  const unsigned max_win = 1u << std::min(params_.page_cluster, SWAP_RA_ORDER_CEILING);
  if (max_win == 1) return 1;
  const uint64_t faddr = vmf->address;
  const uint64_t prev_faddr = vma->swap_ra_addr;
  const unsigned win = __swapin_nr_pages(prev_faddr >> PAGE_SHIFT, faddr >> PAGE_SHIFT, vma->swap_ra_hits,
                                         max_win, vma->swap_ra_win);
  vma->swap_ra_addr = faddr;  // SWAP_RA_VAL(faddr, win, 0)
  vma->swap_ra_win = win;
  vma->swap_ra_hits = 0;
  if (win == 1) return 1;
  uint64_t left;
  if (faddr == prev_faddr + PAGE_SIZE) left = faddr;
  else if (prev_faddr == faddr + PAGE_SIZE) left = faddr - (uint64_t(win) << PAGE_SHIFT) + PAGE_SIZE;
  else left = faddr - (uint64_t((win - 1) / 2) << PAGE_SHIFT);
  const uint64_t right = left + (uint64_t(win) << PAGE_SHIFT);
  if (int64_t(left) < 0) left = 0;
  *start = std::max({left, vma->vm_start, faddr & PMD_MASK});
  *end = std::min({right, vma->vm_end, (faddr & PMD_MASK) + PMD_SIZE});
  return win;
}

// swapin_readahead() (mm/swap_state.c:872) -> swap_vma_readahead() (799): a non-rotational swap
// device reads the swap PTEs around the fault in the same VMA, each missing folio one read (in a
// block plug: adjacent slots merge), the others marked PG_readahead; then the faulting entry's
// folio, with a reference.
folio* Kernel::swapin_readahead(swp_entry_t targ_entry, vm_fault* vmf) {
  uint64_t start = 0, end = 0;
  const unsigned win = swap_vma_ra_win(vmf, &start, &end);
  bool page_allocated = false;
  if (win != 1) {
    std::vector<folio*> plug;  // blk_start_plug()
    for (uint64_t addr = start; addr < end; addr += PAGE_SIZE) {
      pte_t* pte = pte_offset_map(vmf->pmd, addr);
      if (!pte) break;
      pt_touch(pte, sizeof(pte_t), false);
      const pte_t pentry = arch_->ptep_get_lockless(pte);
      if (!arch_->is_swap_pte(pentry)) continue;
      const swp_entry_t entry = arch_->pte_to_swp_entry(pentry);
      folio* f = __read_swap_cache_async(entry, vmf->vma, addr, &page_allocated);
      if (!f) continue;
      if (page_allocated) {
        swap_read_folio(f, &plug);
        if (addr != vmf->address) {
          f->flags |= PG_readahead;  // folio_set_readahead()
          ctr_.swap_ra.inc();
        }
      }
      folio_put(f);
    }
    swap_read_unplug(plug);  // blk_finish_plug(), swap_read_unplug()
    lru_add_drain();
  }
  folio* f = __read_swap_cache_async(targ_entry, vmf->vma, vmf->address, &page_allocated);
  if (f && page_allocated) swap_read_folio(f, nullptr);
  return f;
}

// ------------------------------------------------------------------------------------------------
// The fault (mm/memory.c)

// folio_lock_or_retry() (include/linux/pagemap.h:1207) -> __folio_lock_or_retry()
// (mm/filemap.c:1687): a folio still locked (under read) makes the fault's first attempt drop
// its lock (mmap_lock or the per-VMA lock), wait for the folio and return VM_FAULT_RETRY;
// FAULT_FLAG_RETRY_NOWAIT returns at once, with the lock still held.
vm_fault_t Kernel::folio_lock_or_retry(folio* f, vm_fault* vmf) {
  if (!folio_io_pending(f) && folio_trylock(f)) return 0;
  if (fault_flag_allow_retry_first(vmf->flags)) {
    // CAUTION! In this case, mmap_lock/per-VMA lock is not released even though returning
    // VM_FAULT_RETRY.
    if (vmf->flags & FAULT_FLAG_RETRY_NOWAIT) return VM_FAULT_RETRY;
    release_fault_lock(vmf);
    folio_wait_io(f);  // folio_wait_locked_killable()
    return VM_FAULT_RETRY;
  }
  folio_wait_io(f);  // __folio_lock_killable()
  const bool locked = folio_trylock(f);
  MMUSIM_CHECK(locked, "folio_lock_or_retry: swap folio {:#x} still locked after its read", f->swap);
  return 0;
}

// should_try_to_free_swap() (mm/memory.c:3922): after a swap-in, free the slot (the folio is
// the only copy) when swap is more than half full, or when this write fault is the folio's only
// user.
static bool should_try_to_free_swap(const Kernel& k, const folio* f, const vm_area_struct* vma, uint32_t fault_flags) {
  if (!folio_test_swapcache(f)) return false;
  if (k.mem_cgroup_swap_full(f) || (vma->vm_flags & VM_LOCKED)) return true;
  // If we want to map a page that's in the swapcache writable, we have to detect via the
  // refcount if we're really the exclusive user.
  return (fault_flags & FAULT_FLAG_WRITE) && folio_ref_count(f) == 1 + int(folio_nr_pages(f));
}

// do_swap_page() (mm/memory.c:4201) for an order-0 folio in the swap cache (an SSD swap device
// is not SWP_SYNCHRONOUS_IO: no swap-cache bypass).
vm_fault_t Kernel::do_swap_page(vm_fault* vmf) {
  vm_area_struct* vma = vmf->vma;
  mm_struct* mm = vma->vm_mm;
  ctr_.do_swap_page.inc();
  // pte_unmap_same(): the PTE is still the swap entry the lockless read saw.
  {
    uint32_t* ptl = pte_lockptr(mm, vmf->pmd);
    spin_lock(ptl);
    const bool same = pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte);
    spin_unlock(ptl);
    vmf->pte = nullptr;  // pte_unmap()
    if (!same) {
      ctr_.fault_race.inc();
      last_fault_.kind = FaultKind::race;
      return 0;
    }
  }
  const swp_entry_t entry = arch_->pte_to_swp_entry(vmf->orig_pte);
  MMUSIM_CHECK(si_ && swp_type(entry) == 0 && swp_offset(entry) > 0 && swp_offset(entry) < si_->max &&
                   __swap_count(entry) > 0,
               "do_swap_page: bad swap PTE {:#x} at {:#x}", vmf->orig_pte.val, vmf->address);
  vm_fault_t ret = 0;
  folio* f = swap_cache_get_folio(entry, vma, vmf->address);
  last_fault_.kind = FaultKind::swap_map;
  if (!f) {
    f = swapin_readahead(entry, vmf);
    if (!f) {
      // Back out if somebody else faulted in this pte while we released the pte lock.
      vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
      if (vmf->pte && pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte)) ret = VM_FAULT_OOM;
      if (vmf->pte) pte_unmap_unlock(vmf->pte, vmf->ptl);
      return ret;
    }
    // Had to read the page from swap area: Major fault
    ret = VM_FAULT_MAJOR;
    ctr_.pgmajfault.inc();  // count_vm_event(PGMAJFAULT)
    last_fault_.kind = FaultKind::swap_read;
  }
  ret |= folio_lock_or_retry(f, vmf);
  if (ret & VM_FAULT_RETRY) {
    folio_put(f);  // out_release
    return ret;
  }
  // Make sure folio_free_swap() did not release the swapcache from under us.
  if (!folio_test_swapcache(f) || f->swap != entry.val) {
    folio_unlock(f);  // out_page
    folio_put(f);
    return ret;
  }
  // If we want to map a page that's in the swapcache writable, we have to detect via the refcount
  // if we're really the exclusive owner. Try removing the extra reference from the local LRU
  // caches if required.
  if ((vmf->flags & FAULT_FLAG_WRITE) && !folio_test_lru(f)) lru_add_drain();

  // Back out if somebody else already faulted in this pte.
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte || !pte_same(arch_->ptep_get(vmf->pte), vmf->orig_pte)) {
    if (vmf->pte) pte_unmap_unlock(vmf->pte, vmf->ptl);  // out_nomap
    ctr_.fault_race.inc();
    last_fault_.kind = FaultKind::race;
    folio_unlock(f);
    folio_put(f);
    return ret;
  }
  MMUSIM_CHECK(folio_test_uptodate(f), "do_swap_page: folio of entry {:#x} not uptodate", entry.val);
  MMUSIM_CHECK(!folio_test_anon(f) || !PageAnonExclusive(f), "do_swap_page: a swap-cache page is PageAnonExclusive");
  // check_folio: the entry's exclusive marker (an SSD has no SWP_STABLE_WRITES).
  const bool exclusive = arch_->pte_swp_exclusive(vmf->orig_pte);
  swap_free_nr(entry, 1);
  if (should_try_to_free_swap(*this, f, vma, vmf->flags)) folio_free_swap(f);
  add_mm_counter(mm, MM_ANONPAGES, 1);
  add_mm_counter(mm, MM_SWAPENTS, -1);
  pte_t pte = arch_->pfn_pte(folio_pfn(f), arch_->vm_get_page_prot(vma->vm_flags));  // mk_pte()
  rmap_t rmap_flags = RMAP_NONE;
  if (exclusive || folio_ref_count(f) == 1) {
    if (vma->vm_flags & VM_WRITE) {
      pte = arch_->pte_mkwrite(pte, vma);
      if (vmf->flags & FAULT_FLAG_WRITE) {
        pte = arch_->pte_mkdirty(pte);
        vmf->flags &= ~FAULT_FLAG_WRITE;
      }
    }
    rmap_flags |= RMAP_EXCLUSIVE;
  }
  vmf->orig_pte = pte;
  if (!folio_test_anon(f)) folio_add_new_anon_rmap(f, vma, vmf->address, rmap_flags);
  else folio_add_anon_rmap_ptes(f, f, 1, vma, vmf->address, rmap_flags);
  charge(Cost::folio_op);
  arch_->set_ptes(mm, vmf->address, vmf->pte, pte, 1);
  last_fault_.ptes_changed = 1;
  folio_unlock(f);
  if (vmf->flags & FAULT_FLAG_WRITE) {
    // A shared swap-cache folio mapped read-only: the write copies it (PTL held).
    ret |= do_wp_page(vmf);
    if (ret & VM_FAULT_ERROR) ret &= VM_FAULT_ERROR;
    return ret;
  }
  arch_->update_mmu_cache_range(vma, vmf->address, vmf->pte, 1);
  pte_unmap_unlock(vmf->pte, vmf->ptl);
  return ret;
}

}  // namespace kmm
