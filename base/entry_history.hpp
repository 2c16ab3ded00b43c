// SPDX-License-Identifier: GPL-2.0-only
// Page-table entries at a time in the past (several cores). The kernel port runs one entry at a
// time, so memory holds the page tables as the latest entry in host order left them; another
// core's fault that has begun but, in simulated time, not yet reached a PTE store may already have
// written it. The simulated OS logs each PTE store with its simulated time
// (os/lock_timing.hpp); a reader at an earlier simulated time (the kernel's lockless read, a
// hardware page walk of another core) asks here for the value the entry had then.
#pragma once

#include <cstdint>

namespace mmusim {

class EntryHistory {
 public:
  virtual ~EntryHistory() = default;
  // The value of the entry at host address `entry` at simulated time `t_ps`, given its value in
  // memory now (`current`): the value the last logged store stamped at or before t_ps left (the
  // old value of the store logged after it), else current. (Stores are logged in the order they
  // were made; their stamps need not rise in that order: os/lock_timing.cpp, value_at().)
  virtual uint64_t value_at(const uint64_t* entry, uint64_t current, uint64_t t_ps) const = 0;
};

}  // namespace mmusim
