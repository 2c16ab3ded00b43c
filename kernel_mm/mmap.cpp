// SPDX-License-Identifier: GPL-2.0-only
// Address space: mmap, munmap, mprotect, madvise (mm/mmap.c, mm/vma.c, mm/mprotect.c, mm/madvise.c).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

int64_t Kernel::sys_mmap(task_struct* t, uint64_t addr, uint64_t len, int prot, int flags) { mmusim::panic("sys_mmap: not yet ported"); }

vm_area_struct* Kernel::find_vma(mm_struct* mm, uint64_t addr) { mmusim::panic("find_vma: not yet ported"); }

vm_area_struct* Kernel::vma_lookup(mm_struct* mm, uint64_t addr) { mmusim::panic("vma_lookup: not yet ported"); }

uint64_t Kernel::get_unmapped_area(mm_struct* mm, uint64_t addr, uint64_t len, uint64_t align) { mmusim::panic("get_unmapped_area: not yet ported"); }

vm_area_struct* Kernel::vma_insert(mm_struct* mm, std::unique_ptr<vm_area_struct> vma) { mmusim::panic("vma_insert: not yet ported"); }

std::unique_ptr<vm_area_struct> Kernel::vma_remove(mm_struct* mm, vm_area_struct* vma) { mmusim::panic("vma_remove: not yet ported"); }

int Kernel::split_vma(mm_struct* mm, vm_area_struct* vma, uint64_t addr) { mmusim::panic("split_vma: not yet ported"); }

int Kernel::anon_vma_prepare(vm_area_struct* vma) { mmusim::panic("anon_vma_prepare: not yet ported"); }

}  // namespace kmm
