// SPDX-License-Identifier: GPL-2.0-only
// The workloads' random numbers: splitmix64 (Steele, Lea, Flood 2014), fully specified, the same on
// every host and library (std::shuffle and the std distributions are not portable).
#pragma once

#include <cstdint>

namespace mmusim::wl {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

}  // namespace mmusim::wl
