// SPDX-License-Identifier: GPL-2.0-only
// The seam between the simulated OS's timing of kernel entries on several cores (os/lock_timing)
// and the hardware's cache-line transfers between cores (models/cache/coherence.hpp): the OS knows
// when, in simulated time, each access of an entry happens; the hardware knows where the line is
// and what moving it costs. In base/ so that neither side sees the other.
#pragma once

#include <cstdint>

namespace mmusim {

class LineTransfers {
 public:
  virtual ~LineTransfers() = default;
  // Entries start in simulated-time order; the next accesses are at or after `start_ps`.
  virtual void begin(uint64_t start_ps) = 0;
  // Core `cpu` reads (or, `write`, needs exclusive) the cache line of physical address `pa` at
  // simulated time `t_ps`; `cls` indexes the kernel-data classes (kmm::LineClass). Returns the
  // cycles the access waits for the line to come from another core (0: it is local, or comes
  // from the LLC or DRAM, which the kernel's prices cover).
  virtual double access(int cpu, uint64_t pa, bool write, uint64_t t_ps, unsigned cls) = 0;
};

}  // namespace mmusim
