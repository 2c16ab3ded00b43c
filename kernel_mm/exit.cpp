// SPDX-License-Identifier: GPL-2.0-only
// Process exit and wait (kernel/exit.c, kernel/fork.c mmput, mm/mmap.c exit_mmap).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

void Kernel::sys_exit(task_struct* t, int code) { mmusim::panic("sys_exit: not yet ported"); }

int Kernel::sys_wait(task_struct* parent, task_struct* child) { mmusim::panic("sys_wait: not yet ported"); }

void Kernel::exit_mmap(mm_struct* mm) { mmusim::panic("exit_mmap: not yet ported"); }

void Kernel::mmput(mm_struct* mm) { mmusim::panic("mmput: not yet ported"); }

}  // namespace kmm
