// SPDX-License-Identifier: GPL-2.0-only
// When a cached translation (a TLB entry, a paging-structure-cache entry) arrives: the walks that
// fill it complete at their own cycles, while the core evaluates them in program order. One rule
// for both caches (models/walker/README.md, "Time"), on an entry's `ready` (the cycle it is there;
// 0: already) and `refill` (a later fill of the same entry still to come; 0: none).
#pragma once

#include <algorithm>
#include <cstdint>

namespace mmusim::hw {

// The same entry filled again, arriving at `r`: it has been there since the earlier arrival, and
// a later one is kept as its refill.
inline void arrival_merge(uint64_t& ready, uint64_t& refill, uint64_t r) {
  const uint64_t late = std::max({refill, ready, r});
  ready = std::min(ready, r);
  refill = late > ready ? late : 0;
}

// An invalidation at cycle `at`: whether the entry stays, because it was not there yet or because
// a refill still in flight brings it back (it is then pending until that refill).
inline bool arrival_survives_invalidation(uint64_t& ready, uint64_t& refill, uint64_t at) {
  if (ready > at) return true;
  if (refill <= at) return false;
  ready = refill;
  refill = 0;
  return true;
}

}  // namespace mmusim::hw
