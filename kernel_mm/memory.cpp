// SPDX-License-Identifier: GPL-2.0-only
// Fault paths (mm/memory.c).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

vm_fault_t Kernel::handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags) { mmusim::panic("handle_mm_fault: not yet ported"); }

vm_fault_t Kernel::__handle_mm_fault(vm_area_struct* vma, uint64_t address, uint32_t flags) { mmusim::panic("__handle_mm_fault: not yet ported"); }

vm_fault_t Kernel::handle_pte_fault(vm_fault* vmf) { mmusim::panic("handle_pte_fault: not yet ported"); }

vm_fault_t Kernel::do_pte_missing(vm_fault* vmf) { mmusim::panic("do_pte_missing: not yet ported"); }

vm_fault_t Kernel::do_anonymous_page(vm_fault* vmf) { mmusim::panic("do_anonymous_page: not yet ported"); }

folio* Kernel::alloc_anon_folio(vm_fault* vmf, bool* again) { mmusim::panic("alloc_anon_folio: not yet ported"); }

vm_fault_t Kernel::vmf_anon_prepare(vm_fault* vmf) { mmusim::panic("vmf_anon_prepare: not yet ported"); }

bool Kernel::vmf_pte_changed(vm_fault* vmf) { mmusim::panic("vmf_pte_changed: not yet ported"); }

bool Kernel::pte_range_none(pte_t* pte, int nr_pages) { mmusim::panic("pte_range_none: not yet ported"); }

vm_fault_t Kernel::do_wp_page(vm_fault* vmf) { mmusim::panic("do_wp_page: not yet ported"); }

bool Kernel::wp_can_reuse_anon_folio(folio* f, vm_area_struct* vma) { mmusim::panic("wp_can_reuse_anon_folio: not yet ported"); }

bool Kernel::__wp_can_reuse_large_anon_folio(folio* f, vm_area_struct* vma) { mmusim::panic("__wp_can_reuse_large_anon_folio: not yet ported"); }

void Kernel::wp_reuse_large_anon_folio(vm_fault* vmf, folio* f) { mmusim::panic("wp_reuse_large_anon_folio: not yet ported"); }

void Kernel::wp_page_reuse(vm_fault* vmf, folio* f) { mmusim::panic("wp_page_reuse: not yet ported"); }

vm_fault_t Kernel::wp_page_copy(vm_fault* vmf) { mmusim::panic("wp_page_copy: not yet ported"); }

int Kernel::__wp_page_copy_user(page* dst, page* src, vm_fault* vmf) { mmusim::panic("__wp_page_copy_user: not yet ported"); }

page* Kernel::vm_normal_page(vm_area_struct* vma, uint64_t addr, pte_t pte) { mmusim::panic("vm_normal_page: not yet ported"); }

folio* Kernel::vm_normal_folio(vm_area_struct* vma, uint64_t addr, pte_t pte) { mmusim::panic("vm_normal_folio: not yet ported"); }

int Kernel::folio_pte_batch(folio* f, uint64_t addr, pte_t* start_ptep, pte_t pte, int max_nr, fpb_t flags, bool* any_writable, bool* any_young, bool* any_dirty) { mmusim::panic("folio_pte_batch: not yet ported"); }

int Kernel::folio_pte_batch_flags(folio* f, vm_area_struct* vma, pte_t* ptep, pte_t* ptentp, int max_nr, fpb_t flags) { mmusim::panic("folio_pte_batch_flags: not yet ported"); }

bool Kernel::can_change_pte_writable(vm_area_struct* vma, uint64_t addr, pte_t pte) { mmusim::panic("can_change_pte_writable: not yet ported"); }

void Kernel::mm_account_fault(uint64_t address, uint32_t flags, vm_fault_t ret) { mmusim::panic("mm_account_fault: not yet ported"); }

}  // namespace kmm
