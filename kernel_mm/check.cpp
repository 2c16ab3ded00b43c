// SPDX-License-Identifier: GPL-2.0-only
// Invariant checker (PORTMAP §3.3).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

void Kernel::check_invariants(const char* where, bool force) { mmusim::panic("check_invariants: not yet ported"); }

}  // namespace kmm
