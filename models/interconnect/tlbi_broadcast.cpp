// SPDX-License-Identifier: GPL-2.0-only
#include "models/interconnect/tlbi_broadcast.hpp"

namespace mmusim::hw {

TlbiBroadcast::Cost TlbiBroadcast::broadcast(int cpu, unsigned cpus, uint64_t now_ps) {
  Cost c;
  if (broadcasts_) broadcasts_->inc();
  last_ps_.resize(cpus, ~uint64_t(0));
  last_ps_[size_t(cpu)] = now_ps;
  for (size_t i = 0; i < cpus; ++i) {
    const uint64_t t = last_ps_[i];
    if (int(i) != cpu && t != ~uint64_t(0) && (t > now_ps ? t - now_ps : now_ps - t) <= window_ps_)
      ++c.contending;
  }
  if (c.contending && contended_) contended_->inc();
  c.extra_cycles = double(c.contending) * contention_cycles_;
  return c;
}

}  // namespace mmusim::hw
