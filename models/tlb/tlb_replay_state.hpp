// SPDX-License-Identifier: GPL-2.0-only
// What a Tlb keeps for the core's run-ahead replay only (RunaheadReuse, through
// TlbReplay in tlb_replay.hpp): host speed, nothing architectural. Tlb's fill and invalidations
// update it through the few calls below; nothing the TLB answers depends on it except the
// sequence state's lookup (Tlb::seq_find), which finds what the index would.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmusim::hw {

struct TlbReplayState {
  // The sequence state of a fully associative TLB under LRU (Tlb, above seq_find): no index;
  // slots [seq_rot, capacity) the run, [0, seq_rot) the extras, seq_rot the LRU slot.
  bool seq = false;
  uint32_t seq_rot = 0;
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
