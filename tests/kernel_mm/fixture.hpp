// SPDX-License-Identifier: GPL-2.0-only
// A kernel without hardware timing, for tests of the port: x86 or arm64, invariants checked after
// every entry, user accesses through kmm::UserAccess (no TLB).
#pragma once

#include <functional>
#include <memory>

#include "base/stats.hpp"
#include "base/tlb_maintenance.hpp"
#include "kernel_mm/kernel.hpp"
#include "kernel_mm/user_access.hpp"

namespace kmmtest {

struct Fixture {
  mmusim::Stats stats;
  kmm::NullMmuHw hw;
  std::unique_ptr<kmm::Kernel> k;
  std::unique_ptr<kmm::UserAccess> ua;

  explicit Fixture(mmusim::pg::Isa isa = mmusim::pg::Isa::x86_64,
                   const std::function<void(kmm::KernelParams&)>& tweak = {}) {
    kmm::KernelParams p;
    p.phys_mem = 1ull << 30;
    p.check_invariants = true;
    if (tweak) tweak(p);
    k = std::make_unique<kmm::Kernel>(p, isa, hw, stats);
    ua = std::make_unique<kmm::UserAccess>(*k);
  }
  kmm::Kernel& kernel() { return *k; }
  // The value of a counter since the start of the test.
  uint64_t count(const std::string& key) const { return stats.total_value(key); }
};

}  // namespace kmmtest
