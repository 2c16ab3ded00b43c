// SPDX-License-Identifier: GPL-2.0-only
// PMD THP paths (mm/huge_memory.c).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

unsigned long Kernel::thp_vma_allowable_orders(vm_area_struct* vma, vm_flags_t vm_flags, bool in_pf, bool enforce_sysfs, unsigned long orders) { mmusim::panic("thp_vma_allowable_orders: not yet ported"); }

bool Kernel::thp_vma_suitable_order(vm_area_struct* vma, uint64_t addr, unsigned order) { mmusim::panic("thp_vma_suitable_order: not yet ported"); }

unsigned long Kernel::thp_vma_suitable_orders(vm_area_struct* vma, uint64_t addr, unsigned long orders) { mmusim::panic("thp_vma_suitable_orders: not yet ported"); }

vm_fault_t Kernel::create_huge_pmd(vm_fault* vmf) { mmusim::panic("create_huge_pmd: not yet ported"); }

vm_fault_t Kernel::do_huge_pmd_anonymous_page(vm_fault* vmf) { mmusim::panic("do_huge_pmd_anonymous_page: not yet ported"); }

vm_fault_t Kernel::__do_huge_pmd_anonymous_page(vm_fault* vmf, folio* f) { mmusim::panic("__do_huge_pmd_anonymous_page: not yet ported"); }

vm_fault_t Kernel::wp_huge_pmd(vm_fault* vmf) { mmusim::panic("wp_huge_pmd: not yet ported"); }

vm_fault_t Kernel::do_huge_pmd_wp_page(vm_fault* vmf) { mmusim::panic("do_huge_pmd_wp_page: not yet ported"); }

void Kernel::huge_pmd_set_accessed(vm_fault* vmf) { mmusim::panic("huge_pmd_set_accessed: not yet ported"); }

void Kernel::__split_huge_pmd(vm_area_struct* vma, pmd_t* pmd, uint64_t address) { mmusim::panic("__split_huge_pmd: not yet ported"); }

void Kernel::__split_huge_pmd_locked(vm_area_struct* vma, pmd_t* pmd, uint64_t haddr) { mmusim::panic("__split_huge_pmd_locked: not yet ported"); }

int Kernel::copy_huge_pmd(mm_struct* dst_mm, mm_struct* src_mm, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr, vm_area_struct* dst_vma, vm_area_struct* src_vma) { mmusim::panic("copy_huge_pmd: not yet ported"); }

page* Kernel::mm_get_huge_zero_page(mm_struct* mm) { mmusim::panic("mm_get_huge_zero_page: not yet ported"); }

}  // namespace kmm
