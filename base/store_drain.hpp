// SPDX-License-Identifier: GPL-2.0-only
// The wait of a fault handler for the user's buffered stores: one rule that the core (which knows
// when its store buffer drains) and the system (which knows where the handler's first store
// barrier is, and makes the fault's time and trace) share.
#pragma once

namespace mmusim {

// The wait for the store buffer in a fault whose user stores drain `drain` cycles after the
// exception's start: at the handler's first store barrier, or if it has none at the serialising
// exception return (x86 IRET, SDM Vol 3A §9.3) after `cycles`; arm64's ERET does not wait. The
// user's stores drain while the exception is delivered and the handler runs up to that point.
inline double store_drain_wait(double drain, double barrier_at, bool exit_drains, double cycles) {
  const double at = barrier_at >= 0 ? barrier_at : exit_drains ? cycles : -1;
  return at >= 0 && drain > at ? drain - at : 0;
}

}  // namespace mmusim
