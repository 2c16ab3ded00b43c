// SPDX-License-Identifier: GPL-2.0-only
#include "models/tlb/tlb_replay.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace mmusim::hw {

void TlbReplay::hit_slots(const uint32_t* slots, size_t n) {
  LruReplacement* lru = t_.repl_.lru();
  MMUSIM_CHECK(lru, "TLB {}: the run-ahead replay needs LRU replacement", t_.name_);
  t_.hits_->inc(n);
  lru->touch_in_order(slots, n);
  if (t_.fully_associative_ && n) {
    // A hit on any slot but the most recently used reorders what the sequence state keeps.
    if (t_.rs_.seq) {
      const uint32_t mru = t_.rs_.seq_mru(t_.cap_);
      for (size_t k = 0; k < n; ++k)
        if (slots[k] != mru) {
          t_.seq_leave();
          break;
        }
    }
    t_.hint_ = slots[n - 1];
  }
}

bool TlbReplay::covers_page_in(uint16_t asid, uint64_t lo, uint64_t hi) const {
  const TlbReplayState& rs = t_.rs_;
  if (rs.reach_end <= lo << Tlb::kPageShift) return false;  // no entry reaches that far
  const uint64_t* __restrict t = t_.tags_.data();
  const Tlb::Slot* __restrict sl = t_.slots_.data();
  const size_t n = t_.cap_;
  if (rs.seq && ((t[rs.seq_rot] >> Tlb::kPageShift) > hi || (t[n - 1] >> Tlb::kPageShift) < lo)) {
    // The sequence state's run of 4K pages lies outside the range: the extras only.
    for (size_t i = 0; i < rs.seq_rot; ++i) {
      const uint64_t first = t[i] >> Tlb::kPageShift;
      const uint64_t end = first + (page_size_bytes(PageSize((t[i] >> 1) & 3)) >> Tlb::kPageShift);
      if (first <= hi && end > lo && sl[i].e.asid == asid) return true;
    }
    return false;
  }
  if (t_.n_of_size_[unsigned(PageSize::k4K)] == t_.n_valid_) {
    // 4K entries only: the entry's own page in the range (an invalid slot's tag, 0, is
    // checked after the range, which holds page 0 only if lo is 0).
    const uint64_t span = hi - lo;
    for (size_t i = 0; i < n; ++i)
      if ((t[i] >> Tlb::kPageShift) - lo <= span && t[i] && sl[i].e.asid == asid) return true;
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!t[i]) continue;
    const uint64_t first = t[i] >> Tlb::kPageShift;  // the tag: the virtual base, the size, a valid bit
    const uint64_t end = first + (page_size_bytes(PageSize((t[i] >> 1) & 3)) >> Tlb::kPageShift);
    if (first <= hi && end > lo && sl[i].e.asid == asid) return true;
  }
  return false;
}

void TlbReplay::fill_sequence_evicting(const Tlb& from, const uint32_t* slots, size_t n,
                                       bool speculative, size_t readonly) {
  Tlb& t = t_;
  LruReplacement* lru = t.repl_.lru();
  MMUSIM_CHECK(full_fully_associative() && lru,
               "TLB {}: fill_sequence_evicting needs a full fully associative TLB under LRU", t.name_);
  if (n == 0) return;
  const size_t cap = t.cap_;
  TlbReplayState& rs = t.rs_;
  t.fills_->inc(n);
  t.fills_readonly_->inc(readonly);
  t.evictions_->inc(n);
  t.removals_ += n;
  Tlb::Slot* __restrict to = t.slots_.data();
  const Tlb::Slot* __restrict fr = from.slots_.data();
  if (n >= cap) {
    // Every entry is replaced: the TLB holds the last `capacity` fills, in fill order from the
    // least recently used. Which slot holds which is not observable; they go in slot order.
    uint64_t* __restrict tags = t.tags_.data();
    const uint32_t* __restrict src = slots + (n - cap);
    const uint64_t* __restrict from_tags = from.tags_.data();
    // Whether the tags are 4K ones (their size bits all 0) strictly increasing: the sign bit of
    // `descents` (tags < 2^63) and the size bits of `sizes`.
    uint64_t sizes = 0, descents = 0, last = 0;
    for (size_t v = 0; v < cap; ++v) {
      const uint32_t f = src[v];
      to[v].e = fr[f].e;
      to[v].e.speculative = speculative;
      const uint64_t tg = tags[v] = from_tags[f];  // the same entry: the same tag
      sizes |= tg;
      descents |= tg - last - 1;
      last = tg;
    }
    lru->skip(n - cap);  // the fills that were evicted again
    lru->touch_range(0, uint32_t(cap));
    t.hint_ = uint32_t(cap - 1);
    // Every slot changed (only the last kChangeLog are logged).
    if (rs.log_changes) {
      const size_t unlogged = cap > TlbReplayState::kChangeLog ? cap - TlbReplayState::kChangeLog : 0;
      rs.n_changes += unlogged;
      for (size_t v = unlogged; v < cap; ++v) rs.note_change(uint32_t(v));
    }
    if (!((sizes >> 1) & 3) && !(descents >> 63)) {
      std::fill(std::begin(t.n_of_size_), std::end(t.n_of_size_), 0);
      t.n_of_size_[unsigned(PageSize::k4K)] = uint32_t(cap);
      rs.reach_end = (last & pg::kBasePageMask) + page_size_bytes(PageSize::k4K);
      if (cap >= 2 * TlbReplayState::kSeqMaxExtras) {  // the sequence state: no index (yet)
        rs.seq = true;
        rs.seq_rot = 0;
        return;
      }
    } else {
      uint32_t of_size[kNumPageSizes] = {};
      uint64_t reach = 0;
      for (size_t v = 0; v < cap; ++v) {
        const PageSize sz = PageSize((tags[v] >> 1) & 3);
        ++of_size[unsigned(sz)];
        reach = std::max(reach, (tags[v] & pg::kBasePageMask) + page_size_bytes(sz));
      }
      std::copy(std::begin(of_size), std::end(of_size), std::begin(t.n_of_size_));
      rs.reach_end = reach;
    }
    rs.seq = false;
    std::fill(t.index_.begin(), t.index_.end(), Tlb::kNone);
    for (size_t v = 0; v < cap; ++v) t.fa_index(uint32_t(v));
    return;
  }
  // Fewer fills than entries: fill k lands in the k-th least recently used slot.
  if (rs.seq) t.seq_leave();
  std::vector<uint32_t>& order = rs.order_scratch;  // least recently used first
  order.resize(cap);
  uint32_t* __restrict o = order.data();
  lru->order(0, uint32_t(cap), o);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t v = o[k];
    t.fa_remove(v);
    --t.n_of_size_[unsigned(to[v].e.size)];
    TlbEntry& e = to[v].e;
    e = fr[slots[k]].e;
    rs.note_change(v);
    e.speculative = speculative;
    lru->touch(v);  // the most recently used: the fills end in fill order after the untouched
    t.tags_[v] = Tlb::tag_of(e.vbase, e.size);
    ++t.n_of_size_[unsigned(e.size)];
    rs.note_reach(e.vbase + e.bytes());
    t.fa_index(v);
  }
  t.hint_ = o[n - 1];
}

}  // namespace mmusim::hw
