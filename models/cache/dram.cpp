// SPDX-License-Identifier: GPL-2.0-only
#include "models/cache/dram.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace mmusim::hw {

DramChannel::DramChannel(double line_cycles, Stats& stats, size_t reach_slots)
    : line_cycles_(line_cycles),
      slot_cycles_(line_cycles * kLinesPerSlot),
      inv_slot_cycles_(1.0 / slot_cycles_),
      slots_(reach_slots),
      reach_(reach_slots) {
  MMUSIM_CHECK(reach_slots > 0 && (reach_slots & (reach_slots - 1)) == 0, "DRAM calendar of {} slots", reach_slots);
  MMUSIM_CHECK(line_cycles > 0, "DRAM transfer of {} cycles", line_cycles);
  StatGroup g(stats, "memory");
  reads_ = &g.counter("reads", "Lines filled from DRAM (loads, stores' read-for-ownership, walks)", "lines");
  writebacks_ = &g.counter("writebacks", "Dirty lines the LLC evicted to DRAM (taking memory.write_bandwidth)", "lines");
  writebacks_untimed_ = &g.counter(
      "writebacks_untimed",
      "Dirty lines evicted to DRAM by the kernel's bulk zeroing and copying (priced by clear_page / "
      "copy_page, not timed against the bandwidth)",
      "lines");
  queue_cycles_ = &g.counter("queue_cycles", "Sum of the cycles fills waited for the path to DRAM (memory.read_bandwidth)", "cycles");
}

uint64_t DramChannel::take(uint64_t t) {
  uint64_t k = uint64_t(double(t) * inv_slot_cycles_);
  // Older than the calendar reaches: nothing known to be in its way.
  if (newest_ >= reach_ && k <= newest_ - reach_) return 0;
  for (;; ++k) {
    Slot& s = slots_[k & (reach_ - 1)];
    if (s.index != k) {  // (an older slot's entry: within reach, never a newer one's)
      s.index = k;
      s.n = 0;
    }
    // The transfers of this slot that requests at or before t took.
    const unsigned kept = std::min<unsigned>(s.n, kKept);
    unsigned ahead = 0;
    for (unsigned i = 0; i < kept; ++i) ahead += s.arrival[i] <= t;
    if (s.n > kKept) ahead += s.n - kKept;  // (not remembered: counted as ahead)
    if (ahead >= kLinesPerSlot) continue;
    const double start = std::max(double(t), double(k) * slot_cycles_ + double(ahead) * line_cycles_);
    if (s.n < kKept) s.arrival[s.n] = t;
    ++s.n;
    newest_ = std::max(newest_, k);
    const uint64_t st = uint64_t(start + 0.5);
    return st > t ? st - t : 0;
  }
}

}  // namespace mmusim::hw
