// SPDX-License-Identifier: GPL-2.0-only
// A program: the micro-ops of one simulated thread, generated on demand (a 256 MiB pass is never
// materialised). A system call's result arrives through syscall_return() before next() is called
// again; a core never fetches past a system call before it has executed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/uop.hpp"

namespace mmusim::wl {

class Program {
 public:
  virtual ~Program() = default;
  // The next micro-op; false once the thread has exited.
  virtual bool next(Uop& u) = 0;
  virtual void syscall_return(int64_t ret) {}
  // Share of the measured pass done, in [0, 1] (for --progress).
  virtual double progress() const { return 0; }
};

}  // namespace mmusim::wl
