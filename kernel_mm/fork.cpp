// SPDX-License-Identifier: GPL-2.0-only
// Processes and fork (kernel/fork.c, mm/memory.c copy_page_range).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

task_struct* Kernel::create_process(const std::string& comm) { mmusim::panic("create_process: not yet ported"); }

task_struct* Kernel::sys_fork(task_struct* parent) { mmusim::panic("sys_fork: not yet ported"); }

mm_struct* Kernel::mm_alloc() { mmusim::panic("mm_alloc: not yet ported"); }

int Kernel::dup_mmap(mm_struct* mm, mm_struct* oldmm) { mmusim::panic("dup_mmap: not yet ported"); }

int Kernel::copy_page_range(vm_area_struct* dst_vma, vm_area_struct* src_vma) { mmusim::panic("copy_page_range: not yet ported"); }

bool Kernel::vma_needs_copy(vm_area_struct* dst_vma, vm_area_struct* src_vma) { mmusim::panic("vma_needs_copy: not yet ported"); }

int Kernel::copy_pmd_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pud_t* dst_pud, pud_t* src_pud, uint64_t addr, uint64_t end) { mmusim::panic("copy_pmd_range: not yet ported"); }

int Kernel::copy_pte_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr, uint64_t end) { mmusim::panic("copy_pte_range: not yet ported"); }

int Kernel::copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte, pte_t pte, uint64_t addr, int max_nr, int* rss, folio** prealloc) { mmusim::panic("copy_present_ptes: not yet ported"); }

void Kernel::__copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte, pte_t pte, uint64_t addr, int nr) { mmusim::panic("__copy_present_ptes: not yet ported"); }

int Kernel::copy_present_page(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr, int* rss, folio** prealloc, page* pg) { mmusim::panic("copy_present_page: not yet ported"); }

}  // namespace kmm
