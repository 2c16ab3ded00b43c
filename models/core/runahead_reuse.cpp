// SPDX-License-Identifier: GPL-2.0-only
// The run-ahead reuse (runahead_reuse.hpp says what it is, what it checks and why the results do
// not change).
#include "models/core/runahead_reuse.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "models/core/ooo_core.hpp"

namespace mmusim::hw {

RunaheadReuse::RunaheadReuse(const CoreParams& p, bool cache_faulting_entries, Tlb& l1_load,
                             Tlb& l1_store, Tlb* l2, Tlb* itlb, PipelineState& pipe,
                             const UopWindow& window)
    : possible_(p.runahead_reuse && l2 && cache_faulting_entries && TlbReplay(*l2).usable() &&
                TlbReplay(l1_store).usable()),
      check_(p.runahead_check),
      rob_(p.rob),
      store_buffer_(p.store_buffer),
      l1_store_(l1_store),
      l2_(l2),
      itlb_(itlb),
      pipe_(pipe),
      window_(window) {
  ahead_.allocate(p.rob);
  if (l2_) l2_owner_.assign(l2_->capacity(), ~uint64_t(0));
  // Only the L2 TLB's changes are asked for (replay_segment).
  if (&l1_load != l2_) TlbReplay(l1_load).set_change_log(false);
  if (&l1_store != l2_) TlbReplay(l1_store).set_change_log(false);
  if (itlb) TlbReplay(*itlb).set_change_log(false);
}

void RunaheadReuse::register_stats(Stats& stats) {
  replayed_uops_ = &stats.counter("core.replayed_uops", "squashed micro-ops replayed from the previous fault's run-ahead instead of simulated again (core.runahead_reuse; host speed only, included in core.squashed_uops)");
}

RunaheadReuse::Start RunaheadReuse::begin(uint64_t nuke, uint64_t seq, uint16_t asid,
                                          bool tracing, RunaheadCore& core) {
  nuke_ = nuke;
  seq_ = seq;
  asid_ = asid;
  replayed_ = 0;
  // Recording costs a little per micro-op: where replays keep failing (the N1's short run-aheads,
  // C1's RDTSCP-bounded ones) it stops for a while.
  Start s;
  s.record = possible_ && !tracing;
  l2_mark_ = l2_ ? TlbReplay(*l2_).changes() : 0;
  if (s.record && ahead_backoff_ > 0) {
    --ahead_backoff_;
    s.record = false;
  }
  attempt_ = s.record && ahead_.size() > 0;
  if (!s.record) {
    ahead_.resize(0);
    ahead_.periodic_upto = 0;
    ahead_.end_at = ~size_t(0);
    return s;
  }
  // The record keeps the positions done (replayed ones as they were, relative to the flush).
  // R ended at a micro-op that could not issue before the flush (its state there recorded).
  const bool r_ended = ahead_.end_at == ahead_.size();
  ahead_.end_at = ~size_t(0);
  const Reused ru = reuse_run_ahead(r_ended, core);
  ahead_.resize(ru.positions);
  ahead_.head_seq = seq_;
  s.positions = ru.positions;
  s.ended = ru.ended;
  replayed_ = ru.replayed;
  replayed_uops_->inc(ru.replayed);
  return s;
}

void RunaheadReuse::end(uint64_t n) {
  ahead_.l2_mark = l2_mark_;
  ahead_.asid = asid_;
  if (attempt_) {
    if (2 * replayed_ >= n) {
      ahead_failures_ = 0;
      ahead_backoff_next_ = kReplayBackoffFaults;
    } else if (++ahead_failures_ >= kReplayFailuresBeforeBackoff) {
      // Each back-off in a row twice as long as the last.
      ahead_failures_ = 0;
      ahead_backoff_ = ahead_backoff_next_;
      ahead_backoff_next_ = std::min(2 * ahead_backoff_next_, kReplayBackoffMax);
    }
  }
}

// The previous run-ahead R (head at R.head_seq) and this one (head at seq_, delta micro-ops
// later) share micro-ops: this one's positions [0, P), P = |R| - delta, hold the micro-ops R ran
// at [delta, |R|) (the window keeps them; a new task's window drops the record). If the pipeline
// before a position is as R had it before the same position, relative to the flush, the
// micro-op there has R's shape (kind, flags, latency), nothing holds it back that did not in R,
// and its translation does what R's did at that position, then it issues at R's time and does the
// same. Positions where R's micro-op did an L1 miss and an L2 hit (or an L1 miss too late for the
// L2), and ALU positions, are replayed a segment at a time (replay_segment); a position where R's
// did anything else (the walk at the frontier of what the L2 TLB holds, a wait for a ROB or buffer
// slot) is simulated, and the replay goes on after it if the pipeline is then again as R had it.
RunaheadReuse::Reused RunaheadReuse::reuse_run_ahead(bool r_ended, RunaheadCore& core) {
  Reused ru;
  AheadRecord& r = ahead_;
  if (r.size() == 0 || seq_ <= r.head_seq) return ru;
  const uint64_t delta = seq_ - r.head_seq;
  if (delta >= r.size()) return ru;
  size_t P = r.size() - delta;
  if (window_.size() < P + 1 || !(before() == r.state[0])) return ru;
  // The micro-op at position i is the one R had at i + delta: R recorded its shape. (What an
  // earlier replay with the same delta checked still holds: see AheadRecord::periodic_upto.)
  for (size_t i = r.period == delta ? r.periodic_upto : 0; i < P; ++i)
    if (r.shape[i] != r.shape[i + delta]) {
      P = i;
      break;
    }
  // Worth it only where most positions replay: each position R simulated is simulated again,
  // and each ends a segment.
  if (P == 0) return ru;
  // Positions [P, |R|) hold micro-ops R never ran. Where they have the shapes of R's at the same
  // positions, they are replayed like the others (their pages read from the micro-ops), up to
  // the position where R ended (its state there is recorded): Q.
  size_t Q = P;
  if (r_ended && P == r.size() - delta) {
    core.fetch(r.size() + 1);
    const size_t lim = std::min(r.size(), window_.size() - 1);
    while (Q < lim) {
      const wl::Uop& y = window_[Q + 1];
      if (uop_shape(y) != r.shape[Q] || y.kind == wl::UopKind::Syscall ||
          y.kind == wl::UopKind::Marker)
        break;
      ++Q;
    }
    if (Q < r.size()) Q = P;  // (a replay ends at a recorded state: state[|R|] or a position's)
  }
  // Each position R simulated is simulated again, and each ends a segment.
  const size_t n_others =
      size_t(std::lower_bound(r.others.begin(), r.others.end(), uint32_t(Q)) - r.others.begin());
  if (n_others > kMaxSimulatedInReplay) return ru;
  // Positions [0, P) keep R's record (the same shapes; the same times and outcomes if replayed);
  // so shape[i] == shape[i + delta] holds below P - delta for this run-ahead's record too.
  r.period = delta;
  r.periodic_upto = P - std::min<size_t>(P, delta);
  // The per-store arrays follow the micro-ops: store k now is the one R had at k + ds.
  {
    // (A few stores are counted one by one; a longer shift searches.)
    size_t ds = 0;
    while (ds < 8 && ds < r.n_stores && r.stores[ds] < delta) ++ds;
    if (ds == 8)
      ds = size_t(std::lower_bound(r.stores.data() + 8, r.stores.data() + r.n_stores,
                                   uint32_t(delta)) - r.stores.data());
    if (ds) {
      r.shift_stores(ds);
      r.mono_end = r.mono_end > ds ? r.mono_end - ds : 0;
    }
    // The stores of positions [P, Q), R's last ds ones by position: their micro-ops' pages, no
    // known L2 slot.
    if (Q > P) {
      uint64_t* page = r.page();
      for (size_t k = r.n_stores - ds; k < r.n_stores; ++k) {
        page[k] = window_[r.stores[k] + 1].addr >> Tlb::kPageShift;
        r.set_slot(k, Tlb::kNoSlot);
        r.ro()[k] = 0;
        if (r.mono_end == k && (k == 0 || page[k] > page[k - 1])) r.mono_end = k + 1;
      }
    }
  }
  // If every micro-op with an instruction address fetched from position 0 on is on the front
  // end's page, no position translates its code page (the simulated ones neither: the front
  // end's page stays), and no segment needs to check it again (replay_segment).
  fetch_stable_ = no_fetch_from(0);
  size_t i = 0, st = 0, oi = 0;
  while (i < Q) {
    // (The list changes only at positions simulated in place, which are at or before i.)
    while (oi < r.others.size() && r.others[oi] < i) ++oi;
    const size_t e = oi < r.others.size() ? std::min<size_t>(r.others[oi], Q) : Q;
    if (e > i) {
      if (!replay_segment(i, e, &st)) return ru;  // the pipeline is as before position i
      ru.replayed += e - i;
      ru.positions = i = e;
      if (i >= Q) break;
    }
    // Position i: simulated (and recorded in place).
    if (!core.simulate(i + 1, st)) {
      ru.ended = true;
      return ru;
    }
    ru.positions = ++i;
    while (st < r.n_stores && r.stores[st] < i) ++st;
    if (i >= Q || !(before() == r.state[i])) return ru;
  }
  return ru;
}

// Positions [from, to) of the record, ALU micro-ops and stores that missed the L1 and hit the L2
// (or missed the L1 too late for the L2), with the pipeline as the record had it before `from`
// and the shapes checked. Checks that each does the same now; if so makes their TLB lookups and
// fills, leaves the pipeline as the record had it before `to` and returns true; else changes
// nothing but the record's slot hints (st_slot, st_ro: still true of the TLB). The L1 misses are proved, not assumed: the L1 is full and fully associative, the
// stores' pages strictly increase and the fills are 4K entries (no store can find an earlier fill
// of the segment), and no store before the capacity-th fill finds an entry the L1 holds now (those
// after it cannot: every such entry has been evicted by then).
bool RunaheadReuse::replay_segment(size_t from, size_t to, size_t* stp) {
  const uint64_t nuke = nuke_;
  const AheadRecord& r = ahead_;
  if (!fetch_stable_ && !no_fetch_from(from)) return false;
  Tlb& l1 = l1_store_;
  TlbReplay l1r(l1);
  if (!l1r.full_fully_associative() || !(l1.page_sizes() & page_size_bit(PageSize::k4K))) return false;
  // The ROB slots the positions wait for: those of micro-ops older than the head (the run-ahead
  // is shorter than the ROB), retired, free at their retirement cycles, which grow with the
  // sequence number, as allocation cycles do. If the youngest of them is free before the first
  // position allocates, none holds any position back; else each is checked.
  {
    const uint64_t last = seq_ + to;  // the sequence number of position to - 1
    const uint64_t a0 = unrel(r.alloc[from], nuke);
    const uint64_t* __restrict rob_free = pipe_.rob_free_.data();
    const uint64_t rob = rob_, rob_mask = pipe_.rob_mask_;
    if (last >= rob && rob_free[(last - rob) & rob_mask] + 1 > a0) {
      for (size_t i = from; i < to; ++i) {
        const uint64_t seq = seq_ + 1 + i;
        if (seq >= rob && rob_free[(seq - rob) & rob_mask] + 1 > unrel(r.alloc[i], nuke))
          return false;
      }
    }
  }
  const uint16_t asid = asid_;
  // The record's stores in [from, to): [k0, k1).
  const uint32_t* __restrict stores = r.stores.data();
  const size_t k0 = *stp;
  const size_t k1 = size_t(std::lower_bound(stores + k0, stores + r.n_stores, uint32_t(to)) - stores);
  const int64_t* __restrict alloc_of = r.alloc.data();
  // The store-buffer slots: store k (ordinal st_ord_ + k - k0) allocates once the store
  // store_buffer ordinals older has freed its slot. One of this run-ahead's never does (it is
  // squashed first). The older ones: if they are all retired stores (not the faulting micro-op,
  // whose slot reads as never free), they are checked from the youngest down until the latest
  // slot-free cycle of all older ones (sb_free_upto_) is before the first store allocates (the
  // allocations grow with the position); else each is checked.
  const uint64_t sb_size = store_buffer_, sb_mask = pipe_.sb_mask_;
  const uint64_t st_ord = pipe_.st_ord_, spec_st_base = pipe_.spec_st_base_;
  if (k1 > k0 && st_ord + (k1 - k0) > sb_size) {
    const uint64_t q_last = st_ord + (k1 - k0) - 1 - sb_size;
    if (q_last >= spec_st_base) return false;
    const uint64_t q_first = st_ord >= sb_size ? st_ord - sb_size : 0;
    const size_t k_first = k0 + size_t(q_first + sb_size - st_ord);
    const uint64_t* __restrict sb_free = pipe_.sb_free_.data();
    if (q_last + 1 >= spec_st_base) {
      for (uint64_t q = q_first, k = k_first; q <= q_last; ++q, ++k)
        if (sb_free[q & sb_mask] > unrel(alloc_of[stores[k]], nuke)) return false;
    } else {
      // Retired stores: from the youngest down, until the latest of the older ones' slots is
      // free before the first store allocates.
      const uint64_t first_alloc = unrel(alloc_of[stores[k_first]], nuke);
      const uint64_t* __restrict upto = pipe_.sb_free_upto_.data();
      for (uint64_t d = q_last - q_first + 1; d-- > 0;) {
        const uint64_t q = q_first + d;
        if (upto[q & sb_mask] <= first_alloc) break;
        if (sb_free[q & sb_mask] > unrel(alloc_of[stores[k_first + d]], nuke)) return false;
      }
    }
  }
  // Each store's translation: an L1 miss (proved), and for kPosStoreL2 an L2 hit in the slot
  // that translated the same micro-op at the previous fault, if it still holds its page.
  const size_t cap = l1.capacity();
  const uint8_t* __restrict cls_of = r.cls.data();
  const uint64_t* __restrict st_page = r.page();
  const uint32_t* st_slot = r.slot();
  // The pages strictly increase: no store finds the fill of an earlier one of the segment.
  if (k1 > r.mono_end) {  // the record does not know: each checked
    uint64_t descents = 0;  // the sign bit: some page at or below the one before (pages < 2^52)
    for (size_t k = k0 + 1; k < k1; ++k) descents |= st_page[k] - st_page[k - 1] - 1;
    if (descents >> 63) return false;
  }
  // The stores up to the capacity-th fill: none may find an entry the L1 holds now (after it, every
  // such entry has been evicted). If the L1 holds no page in the range of their pages, none can;
  // else each is probed.
  const bool any_late = k1 > k0 && r.any_late(from, to);
  if (k1 > k0) {
    // Without kPosStoreLate stores the capacity-th fill is the capacity-th store; with them, the
    // segment's last store at most.
    const size_t last = any_late ? k1 - 1 : std::min(k1, k0 + cap) - 1;
    if (l1r.covers_page_in(asid, st_page[k0], st_page[last])) {
      for (size_t k = k0, fills = 0; k < k1 && fills < cap; ++k) {
        if (l1.probe(st_page[k] << Tlb::kPageShift, asid)) return false;
        fills += cls_of[stores[k]] != kPosStoreLate;
      }
    }
  }
  // The stores that look the L2 up (kPosStoreL2): all of them, none, or (rarely) some, gathered.
  const uint32_t* slots = st_slot + k0;
  const uint64_t* pages = st_page + k0;
  size_t n_slots = k1 - k0;
  const uint32_t* kidx = nullptr;  // store index of slots[m] when gathered
  uint32_t* gathered = nullptr;    // slots, when gathered
  if (any_late) {
    if (ahead_slots_.size() < r.n_stores) {  // never shrunk
      ahead_slots_.resize(r.n_stores);
      ahead_pages_.resize(r.n_stores);
      ahead_kidx_.resize(r.n_stores);
    }
    n_slots = 0;
    for (size_t k = k0; k < k1; ++k) {
      if (cls_of[stores[k]] == kPosStoreLate) continue;
      ahead_slots_[n_slots] = st_slot[k];
      ahead_pages_[n_slots] = st_page[k];
      ahead_kidx_[n_slots++] = uint32_t(k);
    }
    slots = gathered = ahead_slots_.data();
    pages = ahead_pages_.data();
    kidx = ahead_kidx_.data();
  }
  // Each L2 slot still holds its page; else the page's slot now, found and remembered for the next
  // fault (the slot was refilled, or the micro-op's translation left none). Only the slots changed
  // since the record's mark (each claimed by at most one store: l2_owner_), and the unknown ones,
  // need looking at; all of them if the TLB's log of changes no longer reaches back that far.
  Tlb& l2 = *l2_;
  TlbReplay l2r(l2);
  uint8_t* __restrict st_ro = ahead_.ro();
  bool failed = false;
  auto check = [&](size_t m) {  // slots[m] for pages[m]: held, or found
    if (slots[m] != Tlb::kNoSlot && l2r.slot_holds_4k(slots[m], pages[m] << Tlb::kPageShift, asid)) {
      if (!kidx) st_ro[k0 + m] = !l2r.slot_entry(slots[m]).writable;
      return;
    }
    // 4K entries only: a larger one would cover later stores' pages (hits the replay cannot see).
    const TlbEntry* e = l2.probe(pages[m] << Tlb::kPageShift, asid);
    if (!e || e->size != PageSize::k4K) {
      failed = true;
      return;
    }
    if (!kidx) {
      claim_l2_slot(k0 + m, l2.slot_of(e));
      st_ro[k0 + m] = !e->writable;
    } else {
      gathered[m] = l2.slot_of(e);
    }
  };
  if (!kidx && r.asid == asid &&
      l2r.for_each_change_since(r.l2_mark, [&](uint32_t c) {
        const uint64_t k = l2_owner_[c] - spec_st_base;  // wraps if older: out of range
        if (k >= k0 && k < k1 && st_slot[k] == c) check(k - k0);
      })) {
    if (r.any_unknown(k0, k1))
      for (size_t m = 0; m < n_slots && !failed; ++m)
        if (slots[m] == Tlb::kNoSlot) check(m);
  } else {
    for (size_t m = 0; m < n_slots && !failed; ++m) check(m);
  }
  if (failed) return false;
  if (kidx)
    for (size_t m = 0; m < n_slots; ++m) {
      claim_l2_slot(kidx[m], slots[m]);
      st_ro[kidx[m]] = !l2r.slot_entry(slots[m]).writable;
    }
  // Each entry had arrived before the segment's first allocation, so no hit waits for a walk still
  // in flight (such a hit is simulated).
  {
    const uint64_t a0 = unrel(r.alloc[from], nuke);
    for (size_t m = 0; m < n_slots; ++m)
      if (l2r.slot_entry(slots[m]).ready > a0) return false;
  }
  if (check_) {
    check_replay(k0, k1, slots, pages, n_slots, kidx);
    for (size_t i = from; itlb_ && i < to; ++i) {
      const wl::Uop& u = window_[i + 1];
      MMUSIM_CHECK(u.ip == wl::kNoIp || (u.ip & pg::kBasePageMask) == pipe_.fetch_page_,
                   "run-ahead replay: position {} (ip {:#x}) is not on the front end's page {:#x}",
                   i, u.ip, pipe_.fetch_page_);
    }
  }
  if (l1r.contiguous_64k())
    for (size_t m = 0; m < n_slots; ++m)
      if (!l1r.places_4k_as_is(l2r.slot_entry(slots[m]))) return false;
  size_t readonly = 0;
  if (kidx) {
    readonly = l2r.count_readonly(slots, n_slots);
  } else {
    readonly = sum_bytes(st_ro + k0, n_slots);
  }
  l2r.hit_slots(slots, n_slots);
  l1r.count_misses(k1 - k0);
  l1r.fill_sequence_evicting(l2, slots, n_slots, true, readonly);
  const AheadState& at = r.state[to];
  pipe_.alloc_cycle_ = unrel(at.alloc_cycle, nuke);
  pipe_.prev_done_ = unrel(at.prev_done, nuke);
  pipe_.older_done_max_ = unrel(at.older_done_max, nuke);
  pipe_.no_issue_before_ = unrel(at.no_issue_before, nuke);
  pipe_.alloc_in_cycle_ = at.alloc_in_cycle;
  pipe_.st_ord_ = spec_st_base + at.stores;
  pipe_.ld_ord_ = pipe_.spec_ld_base_ + at.loads;
  *stp = k1;
  return true;
}


// core.runahead_check: what replay_segment's incremental checks concluded for the stores [k0, k1)
// of the record, checked the slow way.
void RunaheadReuse::check_replay(size_t k0, size_t k1, const uint32_t* slots, const uint64_t* pages,
                           size_t n_slots, const uint32_t* kidx) const {
  const AheadRecord& r = ahead_;
  const uint16_t asid = asid_;
  for (size_t k = k0; k < k1; ++k) {
    MMUSIM_CHECK(k == k0 || r.page()[k] > r.page()[k - 1],
                 "run-ahead replay: the pages of stores {} and {} do not increase", k - 1, k);
    const wl::Uop& u = window_.ring()[(window_.head() + 1 + r.stores[k]) & window_.mask()];
    const uint64_t addr = u.addr;
    MMUSIM_CHECK(u.kind == wl::UopKind::Store && r.page()[k] == addr >> Tlb::kPageShift,
                 "run-ahead replay: store {} of the record has page {:#x}, its micro-op {:#x}", k,
                 r.page()[k], addr);
  }
  for (size_t m = 0; m < n_slots; ++m) {
    const size_t k = kidx ? kidx[m] : k0 + m;
    MMUSIM_CHECK(pages[m] == r.page()[k], "run-ahead replay: slot list out of step at {}", k);
    const TlbEntry* e = l2_->probe(pages[m] << Tlb::kPageShift, asid);
    MMUSIM_CHECK(e && e->size == PageSize::k4K && l2_->slot_of(e) == slots[m] &&
                     r.slot()[k] == slots[m] && r.ro()[k] == !e->writable &&
                     e->ready <= unrel(r.alloc[r.stores[k]], nuke_),
                 "run-ahead replay: store {} (page {:#x}) replays L2 slot {} (read-only {}), the L2 "
                 "has it in slot {}",
                 k, pages[m], slots[m], int(r.ro()[k]), e ? int64_t(l2_->slot_of(e)) : int64_t(-1));
  }
}

// Store k of the record (ordinal spec_st_base_ + k) has its page in L2 slot `slot` now; a store
// that claimed the slot before no longer has its page there.
void RunaheadReuse::claim_l2_slot(size_t k, uint32_t slot) {
  AheadRecord& r = ahead_;
  const uint64_t prev = l2_owner_[slot] - pipe_.spec_st_base_;  // wraps if older: out of range
  if (prev != k && prev < r.n_stores && r.slot()[prev] == slot) r.set_slot(prev, Tlb::kNoSlot);
  l2_owner_[slot] = pipe_.spec_st_base_ + k;
  r.set_slot(k, slot);
}

}  // namespace mmusim::hw
