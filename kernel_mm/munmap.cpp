// SPDX-License-Identifier: GPL-2.0-only
// munmap, mprotect and madvise (mm/mmap.c, mm/vma.c, mm/mprotect.c, mm/madvise.c).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

int Kernel::sys_munmap(task_struct* t, uint64_t addr, uint64_t len) { mmusim::panic("sys_munmap: not yet ported"); }

int Kernel::sys_mprotect(task_struct* t, uint64_t addr, uint64_t len, int prot) { mmusim::panic("sys_mprotect: not yet ported"); }

int Kernel::sys_madvise(task_struct* t, uint64_t addr, uint64_t len, int advice) { mmusim::panic("sys_madvise: not yet ported"); }

int Kernel::mprotect_fixup(vm_area_struct* vma, uint64_t start, uint64_t end, vm_flags_t newflags) { mmusim::panic("mprotect_fixup: not yet ported"); }

long Kernel::change_protection(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end) { mmusim::panic("change_protection: not yet ported"); }

}  // namespace kmm
