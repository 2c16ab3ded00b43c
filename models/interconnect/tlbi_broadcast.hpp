// SPDX-License-Identifier: GPL-2.0-only
// Broadcast TLB invalidations on the interconnect (arm64: TLBI ...IS, carried as DVM messages on
// the mesh). What one broadcast costs its sender depends on how many other CPUs broadcast at the
// same time: "latency ... increases almost linearly with the number of CPUs trying to send tlbi
// broadcasts at the same time" (A. Arcangeli, UARCH C.4). The model: a broadcast by one CPU
// costs `platform.tlbi_contention` more per other CPU whose last broadcast lies within
// `platform.tlbi_window` of it, in simulated time. The invalidation itself (what each core's TLBs
// drop) is models/walker/maintenance.hpp's; this is only its time.
#pragma once

#include <cstdint>
#include <vector>

#include "base/stats.hpp"

namespace mmusim::hw {

class TlbiBroadcast {
 public:
  // `broadcasts`, `contended`: kernel.tlbi_broadcasts and kernel.tlbi_broadcasts_contended (null:
  // not counted).
  TlbiBroadcast(double contention_cycles, uint64_t window_ps, Counter* broadcasts = nullptr,
                Counter* contended = nullptr)
      : contention_cycles_(contention_cycles),
        window_ps_(window_ps),
        broadcasts_(broadcasts),
        contended_(contended) {}

  struct Cost {
    double extra_cycles = 0;  // on the sender, beyond the TLBI's own price
    unsigned contending = 0;  // other CPUs broadcasting within the window
  };
  // A broadcast by `cpu` at `now_ps` among `cpus` CPUs.
  Cost broadcast(int cpu, unsigned cpus, uint64_t now_ps);

 private:
  double contention_cycles_;
  uint64_t window_ps_;
  Counter* broadcasts_;
  Counter* contended_;
  std::vector<uint64_t> last_ps_;  // per CPU: its last broadcast (~0: none yet)
};

}  // namespace mmusim::hw
