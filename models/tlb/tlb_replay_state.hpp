// SPDX-License-Identifier: GPL-2.0-only
// What a Tlb keeps for the core's run-ahead replay only (RunaheadReuse, through
// TlbReplay in tlb_replay.hpp): host speed, nothing architectural. Tlb's fill and invalidations
// update it through the few calls below; nothing the TLB answers depends on it except the
// sequence state's lookup (seq_find), which finds what the TLB's index would.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmusim::hw {

struct TlbReplayState {
  // The sequence state (LRU only), for fully associative TLBs after a whole refill of strictly
  // increasing 4K pages (TlbReplay::fill_sequence_evicting, once per fault in the run-ahead
  // replay): the TLB's index from page to slot is not kept. Every slot is valid; slots
  // [seq_rot, capacity) hold the refill's last pages in increasing order (the run), slots
  // [0, seq_rot) the fills since, in fill order (the extras); the LRU order is seq_rot, ...,
  // capacity - 1, 0, ..., seq_rot - 1, which each fill of a new page (evicting the LRU, slot
  // seq_rot) keeps. A lookup scans the extras and binary-searches the run (a page outside the
  // run's range costs two comparisons). Whatever the state cannot express (a hit that reorders,
  // an invalidation that removes, a partial sequence, more than kSeqMaxExtras extras) first
  // builds the index (Tlb::seq_leave): the same state the fills one by one would have left.
  // The TLB reaches it only from its index's operations (Tlb::fa_*), one check of `seq` each.
  bool seq = false;
  uint32_t seq_rot = 0;
  static constexpr uint32_t kSeqMaxExtras = 8;
  // In the sequence state: the slot of `tag` for `asid` among the TLB's slots (their tags, and
  // their entries' ASIDs: slots[i].e.asid), or `none`.
  template <typename Slot>
  uint32_t seq_find(const std::vector<uint64_t>& tags, const std::vector<Slot>& slots,
                    uint64_t tag, uint16_t asid, uint32_t none) const {
    const uint64_t* __restrict t = tags.data();
    const uint32_t rot = seq_rot;
    for (uint32_t i = 0; i < rot; ++i)
      if (t[i] == tag && slots[i].e.asid == asid) return i;
    const uint32_t cap = uint32_t(tags.size());
    if (tag < t[rot] || tag > t[cap - 1]) return none;  // (rot < cap)
    const uint32_t i = uint32_t(std::lower_bound(t + rot, t + cap, tag) - t);
    return t[i] == tag && slots[i].e.asid == asid ? i : none;
  }
  // In the sequence state: the most recently used slot of `cap`.
  uint32_t seq_mru(uint32_t cap) const { return seq_rot ? seq_rot - 1 : cap - 1; }
  // At or above the end of every valid entry's range (raised by fills, zeroed when the TLB is
  // emptied, not lowered by other invalidations): TlbReplay::covers_page_in's shortcut.
  uint64_t reach_end = 0;
  // Every change of a slot's content (a fill, an invalidation), counted; the last kChangeLog
  // slots changed, by count (TlbReplay::for_each_change_since).
  static constexpr size_t kChangeLog = 64;
  bool log_changes = true;
  uint64_t n_changes = 0;
  std::array<uint32_t, kChangeLog> change_log{};
  std::vector<uint32_t> order_scratch;  // TlbReplay::fill_sequence_evicting's LRU order

  void note_change(uint32_t slot) {
    if (log_changes) change_log[n_changes++ & (kChangeLog - 1)] = slot;
  }
  void note_reach(uint64_t end) {
    if (end > reach_end) reach_end = end;
  }
};

}  // namespace mmusim::hw
