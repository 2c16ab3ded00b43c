// SPDX-License-Identifier: GPL-2.0-only
// The run-ahead reuse (core.runahead_reuse): host-speed memoisation of a fault's run-ahead, not
// hardware. It lives apart from the core's pipeline (models/core/ooo_core.*), which calls it at a
// few places and owns what it reads (PipelineState, pipeline_state.hpp), so that a change to a
// mechanism of the core shows here as a check that no longer holds, not as a replay gone wrong.
//
// What it is. In a fault storm (C3: a fault per loop iteration, each with ~330 micro-ops of
// run-ahead) consecutive run-aheads cover almost the same micro-ops at the same times relative
// to their flush. The last run-ahead is recorded per position: the micro-op's shape (kind, flags,
// latency), its allocation cycle and the pipeline state before it (relative to the flush), and
// what its translation did (each store's page and the L2 TLB slot that translated it). The next
// run-ahead, delta micro-ops later, replays the part it shares with it without simulating each
// micro-op, and the core simulates the rest.
//
// What it proves before replaying a segment of positions (replay_segment), every time:
//  - the pipeline before the segment is as the record had it, relative to the flush, and each
//    micro-op there has the recorded shape: each then allocates and executes at the recorded
//    cycle, unless a slot holds it back, and
//  - no ROB slot and no store-buffer slot holds back a position that the record did not wait
//    for (the slots of the older micro-ops are checked against the recorded allocation cycles);
//  - each store misses the L1 store DTLB: proved from what it holds (full and fully associative,
//    the stores' pages strictly increasing, 4K fills, and no store before the capacity-th fill
//    finds an entry held now), not assumed;
//  - each store that hit the L2 TLB finds its page, as a 4K entry, in the slot the record has for
//    it (the slots changed since the record was made are looked at again through the L2's change
//    log, and all of them when the log no longer reaches back that far), and the L1 would place
//    the entry as it is;
//  - no micro-op of the segment makes the front end translate its code page: every micro-op
//    fetched from the segment's first on is on the page the front end translated last (the run
//    of fetched micro-ops on one page began before the segment: PipelineState::fetched_page_since_),
//    or has no instruction address. A position whose micro-op did translate its code page is
//    simulated.
// Only then does it make the segment's lookups and fills (through TlbReplay: the L2 hits in
// order, the L1 refill as one sequence) and set the pipeline state the record had after the
// segment. A segment may be only ALU micro-ops and such stores; a position whose micro-op did
// anything else (the walk at the frontier of what the L2 TLB holds, a wait for a ROB or buffer
// slot) is simulated by the core and recorded in place, and the replay goes on after it if the
// pipeline is then again as the record had it.
//
// The invariant: every statistic, every trace and every result is identical with the reuse on or
// off. A check that does not hold means simulation, never an approximation; the reuse is off
// while tracing (a replay emits no trace events) and with a replacement policy other than LRU on
// the store DTLB or the L2 TLB (TlbReplay::usable). core.runahead_check verifies every replayed
// segment the slow way (check_replay: each store's page against its micro-op, its L2 slot and
// permissions looked up again); tests/platforms/test_runahead_reuse.cpp compares whole runs with
// it on and off, tests/models/test_core.cpp changes L2 entries under the replay.
//
// How the core uses it, per fault (OooCore::run_ahead): begin() replays what it can from the
// first position, calling the core back (RunaheadCore) for the positions it simulates; the core
// simulates the rest, each position as before() / OooCore::issue / record_position(); end()
// closes the record. forget() when the window's micro-ops are dropped (a new task).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/bytescan.hpp"
#include "base/stats.hpp"
#include "models/core/pipeline_state.hpp"
#include "models/tlb/tlb.hpp"
#include "models/tlb/tlb_replay.hpp"
#include "models/walker/translation.hpp"
#include "workloads/uop.hpp"

namespace mmusim::hw {

struct CoreParams;  // models/core/ooo_core.hpp
class UopWindow;

// What a replay asks of the core: more micro-ops fetched into the window, and a position it does
// not replay simulated (issued as the core issues a run-ahead micro-op) and recorded.
class RunaheadCore {
 public:
  virtual bool fetch(size_t n) = 0;  // OooCore::fetch
  // Window position j, as the core's run-ahead loop simulates it (through record_position); false:
  // it did not issue before the flush. `st_hint`: the index of its store in the record, if it is
  // a store and the replay knows it.
  virtual bool simulate(size_t j, size_t st_hint) = 0;

 protected:
  ~RunaheadCore() = default;
};

class RunaheadReuse {
 public:
  // `pipe`: the core's pipeline state; `window`: its fetched micro-ops (window position 0 is the
  // faulting micro-op, position j is run-ahead position j - 1). Both outlive this.
  // `itlb`: the core's instruction TLB (null: none).
  RunaheadReuse(const CoreParams& p, bool cache_faulting_entries, Tlb& l1_load, Tlb& l1_store,
                Tlb* l2, Tlb* itlb, PipelineState& pipe, const UopWindow& window);
  // Registered by the core after its own counters (the statistics' order is their registration
  // order, part of the output format).
  void register_stats(Stats& stats);

  // The pipeline before a position, relative to the flush.
  struct AheadState {
    int64_t alloc_cycle, prev_done, older_done_max, no_issue_before;
    uint32_t alloc_in_cycle;
    uint32_t stores, loads;  // issued before it in this run-ahead
    bool operator==(const AheadState& o) const {
      return alloc_cycle == o.alloc_cycle && prev_done == o.prev_done &&
             older_done_max == o.older_done_max && no_issue_before == o.no_issue_before &&
             alloc_in_cycle == o.alloc_in_cycle && stores == o.stores && loads == o.loads;
    }
  };

  // The start of the run-ahead of the micro-op at sequence `seq` (window position 0), flushed at
  // `nuke`, with the pipeline's spec_st_base_ / spec_ld_base_ set. `record`: whether this
  // run-ahead is recorded (every position the core simulates goes through record_position); if
  // so, the first `positions` window positions after the head are done (replayed or simulated
  // through `core`), and `ended`: the last of them did not issue (the run-ahead is over).
  struct Start {
    bool record = false;
    size_t positions = 0;
    bool ended = false;
  };
  Start begin(uint64_t nuke, uint64_t seq, uint16_t asid, bool tracing, RunaheadCore& core);
  // Before a position the core simulates while recording: the pipeline state then.
  AheadState before() const {
    return {rel(pipe_.alloc_cycle_, nuke_), rel(pipe_.prev_done_, nuke_),
            rel(pipe_.older_done_max_, nuke_), rel(pipe_.no_issue_before_, nuke_),
            pipe_.alloc_in_cycle_, uint32_t(pipe_.st_ord_ - pipe_.spec_st_base_),
            uint32_t(pipe_.ld_ord_ - pipe_.spec_ld_base_)};
  }
  // After it: window position j, micro-op y, issued (at allocation cycle `alloc`) or not (the
  // run-ahead ends there); `ring_bound`: it waited for a ROB or buffer slot; `fetch_translated`:
  // the front end translated its code page; `hint`: what its translation did to the L2 TLB (a
  // store's). Returns `issued`. Inlined into the core's
  // run-ahead loop, as the rest of a simulated position is (a call per micro-op shows).
  __attribute__((always_inline)) inline bool record_position(size_t j, const wl::Uop& y,
                                                             const AheadState& before, bool issued,
                                                             uint64_t alloc, bool ring_bound,
                                                             bool fetch_translated,
                                                             const ReplayHint& hint,
                                                             size_t st_hint = ~size_t(0));
  // The run-ahead is over: `n` positions issued.
  void end(uint64_t n);
  // The window's micro-ops are gone (a system call that reschedules, a new task).
  void forget() { ahead_.resize(0); }

 private:
  enum : uint8_t { kPosAlu = 0, kPosStoreL2 /* L1 miss, L2 hit, L1 fill */, kPosStoreLate /* L1 miss, no L2 lookup before the flush */, kPosOther };
  // The last run-ahead, per position (arrays of the ROB's size, allocated once: the checks run
  // down them).
  struct AheadRecord {
    uint64_t head_seq = 0;          // the faulting micro-op it ran ahead of
    size_t n = 0;                   // positions recorded
    std::vector<uint64_t> shape;    // kind, flags, latency: what the micro-op's timing depends on
    std::vector<int64_t> alloc;     // its allocation cycle
    std::vector<uint8_t> cls;
    std::vector<uint32_t> others;  // the positions with cls kPosOther, ascending
    void set_cls(size_t i, uint8_t c) {  // position i < n (in place) or the next one (i == n)
      if (i < n && cls[i] != c && (cls[i] == kPosOther || c == kPosOther)) {
        auto it = std::lower_bound(others.begin(), others.end(), uint32_t(i));
        if (c == kPosOther) others.insert(it, uint32_t(i));
        else others.erase(it);
      } else if (i >= n && c == kPosOther) {
        others.push_back(uint32_t(i));
      }
      cls[i] = c;
      const uint64_t bit = uint64_t(1) << (i & 63);
      if (c == kPosStoreLate) late[i >> 6] |= bit;
      else late[i >> 6] &= ~bit;
    }
    std::vector<uint64_t> late;  // a bit per position: cls is kPosStoreLate
    // Some position of [from, to) has cls kPosStoreLate.
    bool any_late(size_t from, size_t to) const { return any_bit_in(late.data(), from, to); }
    std::vector<AheadState> state;  // before it issued
    std::vector<uint32_t> stores;   // the positions of stores, ascending
    size_t n_stores = 0;
    // Per store (indexed like `stores`), of the micro-op there: its 4K page number and the L2 TLB
    // slot that translated it (Tlb::kNoSlot: none known; verified before use). Unlike the rest,
    // these follow the micro-ops: a replay shifts them by the stores of its delta.
    // (Each in a buffer of twice the positions, store k at st0 + k: a shift moves st0, and the
    // buffers are compacted when the window would run past their end.)
    std::vector<uint64_t> st_page;
    std::vector<uint32_t> st_slot;
    std::vector<uint8_t> st_ro;  // the entry in st_slot was read-only
    std::vector<uint64_t> st_unknown;  // a bit per buffer index: st_slot is Tlb::kNoSlot
    size_t st0 = 0, positions = 0;
    uint64_t* page() { return st_page.data() + st0; }
    const uint64_t* page() const { return st_page.data() + st0; }
    const uint32_t* slot() const { return st_slot.data() + st0; }
    uint8_t* ro() { return st_ro.data() + st0; }
    const uint8_t* ro() const { return st_ro.data() + st0; }
    void set_slot(size_t k, uint32_t s) {
      const size_t b = st0 + k;
      st_slot[b] = s;
      const uint64_t bit = uint64_t(1) << (b & 63);
      if (s == Tlb::kNoSlot) st_unknown[b >> 6] |= bit;
      else st_unknown[b >> 6] &= ~bit;
    }
    // Some store of [k0, k1) has no known slot.
    bool any_unknown(size_t k0, size_t k1) const {
      return any_bit_in(st_unknown.data(), st0 + k0, st0 + k1);
    }
    // The per-store arrays follow the micro-ops: store k becomes store k - ds.
    void shift_stores(size_t ds) {
      st0 += ds;
      if (st0 + positions <= st_page.size()) return;
      const size_t live = st_page.size() - st0;
      std::memmove(st_page.data(), st_page.data() + st0, live * sizeof(uint64_t));
      std::memmove(st_slot.data(), st_slot.data() + st0, live * sizeof(uint32_t));
      std::memmove(st_ro.data(), st_ro.data() + st0, live);
      st0 = 0;
      std::fill(st_unknown.begin(), st_unknown.end(), 0);
      for (size_t b = 0; b < live; ++b)
        if (st_slot[b] == Tlb::kNoSlot) st_unknown[b >> 6] |= uint64_t(1) << (b & 63);
    }
    // Each st_slot held its page (for `asid`, with st_ro) at some time after the L2 TLB's
    // changes() was l2_mark (the start of the run-ahead that recorded or replayed it): only the
    // slots changed since need checking again.
    uint64_t l2_mark = 0;
    uint16_t asid = 0;
    // st_page[0..mono_end) strictly increases (kept as stores are recorded and shifted).
    size_t mono_end = 0;
    // shape[i] == shape[i + period] for every i < periodic_upto (what a replay with delta ==
    // period has already checked).
    uint64_t period = 0;
    size_t periodic_upto = 0;
    // The run-ahead ended because the micro-op at position end_at could not issue before the
    // flush, and state[end_at] is the pipeline before it (~0: ended otherwise). Valid when
    // end_at == n.
    size_t end_at = ~size_t(0);
    void allocate(size_t positions) {
      shape.resize(positions);
      alloc.resize(positions);
      cls.resize(positions);
      late.assign((positions + 63) / 64, 0);
      others.reserve(positions);
      state.resize(positions);
      stores.resize(positions);
      st_page.resize(2 * positions);
      st_slot.assign(2 * positions, Tlb::kNoSlot);
      st_ro.resize(2 * positions);
      st_unknown.assign((2 * positions + 63) / 64, ~uint64_t(0));
      this->positions = positions;
    }
    size_t size() const { return n; }
    void resize(size_t m) {  // m <= n
      n = m;
      if (end_at != m) end_at = ~size_t(0);
      while (!others.empty() && others.back() >= m) others.pop_back();
      while (n_stores && stores[n_stores - 1] >= m) --n_stores;
      if (periodic_upto > m) periodic_upto = m;
      if (mono_end > n_stores) mono_end = n_stores;
    }
  };
  static uint64_t uop_shape(const wl::Uop& u) {
    return uint64_t(u.kind) | uint64_t(u.flags) << 8 | uint64_t(u.latency) << 24;
  }
  // Relative to the flush; every time at or beyond kNever is "never" (only compared with the
  // flush in the run-ahead).
  static int64_t rel(uint64_t v, uint64_t nuke) {
    return v >= PipelineState::kNever ? std::numeric_limits<int64_t>::max() : int64_t(v - nuke);
  }
  static uint64_t unrel(int64_t r, uint64_t nuke) {
    return r == std::numeric_limits<int64_t>::max() ? PipelineState::kNever
                                                    : uint64_t(int64_t(nuke) + r);
  }
  struct Reused {
    size_t positions = 0;  // positions done (replayed or simulated); the record holds them
    size_t replayed = 0;   // of which replayed
    bool ended = false;    // a simulated position did not issue: the run-ahead is over
  };
  Reused reuse_run_ahead(bool r_ended, RunaheadCore& core);
  static constexpr size_t kMaxSimulatedInReplay = 4;  // more positions to simulate: no replay
  // After this many run-aheads in a row replayed less than half, none is recorded for the next
  // kReplayBackoffFaults faults, then twice as many after each further failing series, up to
  // kReplayBackoffMax (host speed only: the results are the same).
  static constexpr unsigned kReplayFailuresBeforeBackoff = 8;
  static constexpr unsigned kReplayBackoffFaults = 16;
  static constexpr unsigned kReplayBackoffMax = 8192;
  unsigned ahead_failures_ = 0, ahead_backoff_ = 0, ahead_backoff_next_ = kReplayBackoffFaults;
  // `st` indexes the record's stores: the first at or after `from`; on success, the first at or
  // after `to`.
  bool replay_segment(size_t from, size_t to, size_t* st);
  // No position from `from` on translates its code page (OooCore::issue does when the page
  // differs from the front end's, which an ITLB invalidation or a new task resets): every
  // micro-op with an instruction address fetched since position `from`'s is on the front end's
  // page (or none has one: fetched_page_ is still kNoFetchPage).
  bool no_fetch_from(size_t from) const {
    return !itlb_ || (pipe_.fetched_page_since_ <= seq_ + 1 + from &&
                      (pipe_.fetched_page_ == pipe_.fetch_page_ ||
                       pipe_.fetched_page_ == PipelineState::kNoFetchPage));
  }
  bool fetch_stable_ = false;  // no_fetch_from(0) at the start of this replay
  void claim_l2_slot(size_t k, uint32_t slot);
  void check_replay(size_t k0, size_t k1, const uint32_t* slots, const uint64_t* pages,
                    size_t n_slots, const uint32_t* kidx) const;

  // Fixed at construction: the reuse is possible at all (core.runahead_reuse, an L2 TLB, faulting
  // entries cached, LRU on the store DTLB and the L2: TlbReplay::usable).
  bool possible_;
  bool check_;  // core.runahead_check
  uint64_t rob_, store_buffer_;
  Tlb& l1_store_;
  Tlb* l2_;
  const Tlb* itlb_;  // (only whether there is one: the front end's state is the pipeline's)
  PipelineState& pipe_;
  const UopWindow& window_;
  Counter* replayed_uops_ = nullptr;

  // This run-ahead (begin): its flush, its head, its ASID, the L2's changes() at its start,
  // whether it replays the record (the back-off counts it) and how many positions it replayed.
  uint64_t nuke_ = 0;
  uint64_t seq_ = 0;
  uint16_t asid_ = 0;
  uint64_t l2_mark_ = 0;
  bool attempt_ = false;
  uint64_t replayed_ = 0;

  AheadRecord ahead_;  // the last run-ahead
  // Scratch for a replayed segment with stores of both kinds: the L2 slots, pages and store
  // indices of the kPosStoreL2 ones, in order.
  std::vector<uint32_t> ahead_slots_;
  std::vector<uint64_t> ahead_pages_;
  std::vector<uint32_t> ahead_kidx_;
  // Per L2 TLB slot: the store ordinal of the record's store that last claimed it (its st_slot).
  std::vector<uint64_t> l2_owner_;
};

bool RunaheadReuse::record_position(size_t j, const wl::Uop& y, const AheadState& before,
                                    bool issued, uint64_t alloc_cycle, bool ring_bound,
                                    bool fetch_translated, const ReplayHint& hint,
                                    size_t st_hint) {
  AheadRecord& r = ahead_;
  const size_t i = j - 1;  // < rob - 1: within the arrays
  if (!issued) {
    r.state[i] = before;  // (the arrays hold the ROB's size: i < rob)
    r.end_at = i;
    return false;
  }
  // The class of a store follows from what its translation did to the L2 TLB (the path's hint).
  const uint8_t tr_cls = hint.kind == ReplayHint::L2Refill ? uint8_t(kPosStoreL2)
                       : hint.kind == ReplayHint::LateL2   ? uint8_t(kPosStoreLate)
                                                           : uint8_t(kPosOther);
  const uint32_t tr_slot = hint.l2_slot;
  const uint8_t cls = ring_bound || fetch_translated ? uint8_t(kPosOther)
                    : y.kind == wl::UopKind::Alu ? uint8_t(kPosAlu)
                    : y.kind == wl::UopKind::Store ? tr_cls : uint8_t(kPosOther);
  r.set_cls(i, cls);
  if (i >= r.n) r.n = i + 1;
  if (y.kind == wl::UopKind::Store) {
    size_t k = r.n_stores;
    if (k == 0 || r.stores[k - 1] < i) {
      r.stores[r.n_stores++] = uint32_t(i);
      if (r.mono_end == k && (k == 0 || (y.addr >> Tlb::kPageShift) > r.page()[k - 1]))
        r.mono_end = k + 1;
    } else if (st_hint < r.n_stores && r.stores[st_hint] == i) {
      k = st_hint;  // a position reuse_run_ahead simulates in place (the same micro-op: the same page)
    } else {
      k = size_t(std::lower_bound(r.stores.data(), r.stores.data() + r.n_stores, uint32_t(i)) -
                 r.stores.data());
    }
    r.page()[k] = y.addr >> Tlb::kPageShift;
    r.set_slot(k, Tlb::kNoSlot);
    if (tr_slot != Tlb::kNoSlot) claim_l2_slot(k, tr_slot);
    r.ro()[k] = tr_slot != Tlb::kNoSlot && !TlbReplay(*l2_).slot_entry(tr_slot).writable;
  }
  r.shape[i] = uop_shape(y);
  r.alloc[i] = rel(alloc_cycle, nuke_);
  r.state[i] = before;
  return true;
}

}  // namespace mmusim::hw
