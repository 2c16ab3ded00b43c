// SPDX-License-Identifier: GPL-2.0-only
// One direction of the path from one core to DRAM as a bandwidth; a MemoryHierarchy has two.
// Fills (a load's, a store's read-for-ownership, a walk's read) take 64 bytes /
// memory.read_bandwidth of theirs, and one that finds it busy waits; the wait adds to the fill's
// latency (memory.latency is the unloaded one). Write-backs of the dirty lines the LLC evicts take
// 64 bytes / memory.write_bandwidth of theirs: posted, nobody waits for them but the line whose
// place in the LLC the victim held. Two paths, not one shared channel: what bounds one core is
// what it can have in flight in each direction, far below the DDR channels' peak (a memset, which
// only writes, runs at a seventh of it: docs/x86-memory-path.md §6-7). With several cores the
// fills of all of them share one path (MemoryHierarchy::share_fills: the DDR channels serve every
// core); the write-back paths stay per core.
//
// Requests do not arrive in time order (the core times each micro-op in program order, a load at
// its execution, a store when it drains, a walk's reads at their own times), so the occupancy is
// a calendar, not a single "free at" time: time is cut into slots of kLinesPerSlot transfers, and
// the path serves requests first come, first served: a request at cycle t takes the first slot
// at or after t that holds fewer than kLinesPerSlot transfers of requests that came at or before
// t. (Those that came later but were simulated first do not hold it back: a walk's read at t
// queues behind the store stream's fills issued before t, not behind those the stream issues
// after t.) A request older than the calendar's reach (`reach_slots` slots behind the newest)
// finds the path free. A path that several cores share needs a long reach (HwPlatform gives its
// shared paths about 2 ms): a kernel entry that copies a 2M page takes its source lines at its
// own times, up to about 1 ms ahead of the other cores' requests, and with a short reach (2^14
// slots, 72 us on the E5-2699 v3) those requests found the path free.
#pragma once

#include <cstdint>
#include <vector>

#include "base/stats.hpp"

namespace mmusim::hw {

class DramChannel {
 public:
  // `line_cycles`: core cycles one 64-byte transfer occupies the path (64 B / bandwidth).
  // `reach_slots` (a power of two): how far back from the newest request the calendar remembers,
  // in slots of kLinesPerSlot transfers.
  DramChannel(double line_cycles, Stats& stats, size_t reach_slots = kDefaultReach);
  static constexpr size_t kDefaultReach = size_t(1) << 14;

  // A line fill requested at cycle `t`: the cycles it waits before its transfer starts.
  uint64_t read(uint64_t t) {
    reads_->inc();
    const uint64_t w = take(t);
    queue_cycles_->inc(w);
    return w;
  }
  // A dirty line written back at cycle `t`: the cycles until its transfer starts (posted: only
  // a line whose place it frees waits for it).
  uint64_t write_back(uint64_t t) {
    writebacks_->inc();
    return take(t);
  }
  // A write-back with no time (the kernel's bulk zeroing evicting dirty lines: its cost is
  // clear_page's price): counted, takes no bandwidth.
  void write_back_untimed() { writebacks_untimed_->inc(); }
  double line_cycles() const { return line_cycles_; }

 private:
  static constexpr unsigned kLinesPerSlot = 4;
  static constexpr unsigned kKept = 2 * kLinesPerSlot;  // arrivals remembered per slot
  struct Slot {
    uint64_t index = ~uint64_t(0);  // which slot of time this entry holds
    uint32_t n = 0;                 // transfers taken (the first kKept remembered)
    uint64_t arrival[kKept];        // the cycles their requests came
  };
  uint64_t take(uint64_t t);

  double line_cycles_;
  double slot_cycles_;
  double inv_slot_cycles_;
  std::vector<Slot> slots_;
  size_t reach_;  // slots_.size(), a power of two
  uint64_t newest_ = 0;
  Counter* reads_;
  Counter* writebacks_;
  Counter* writebacks_untimed_;
  Counter* queue_cycles_;
};

}  // namespace mmusim::hw
