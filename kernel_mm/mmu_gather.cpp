// SPDX-License-Identifier: GPL-2.0-only
// Teardown: mmu_gather and zap (mm/mmu_gather.c, mm/memory.c).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

void Kernel::tlb_gather_mmu(mmu_gather* tlb, mm_struct* mm) { mmusim::panic("tlb_gather_mmu: not yet ported"); }

void Kernel::tlb_gather_mmu_fullmm(mmu_gather* tlb, mm_struct* mm) { mmusim::panic("tlb_gather_mmu_fullmm: not yet ported"); }

void Kernel::tlb_finish_mmu(mmu_gather* tlb) { mmusim::panic("tlb_finish_mmu: not yet ported"); }

void Kernel::tlb_flush_mmu(mmu_gather* tlb) { mmusim::panic("tlb_flush_mmu: not yet ported"); }

void Kernel::tlb_flush_mmu_tlbonly(mmu_gather* tlb) { mmusim::panic("tlb_flush_mmu_tlbonly: not yet ported"); }

void Kernel::tlb_remove_tlb_entries(mmu_gather* tlb, pte_t* ptep, unsigned nr, uint64_t address) { mmusim::panic("tlb_remove_tlb_entries: not yet ported"); }

void Kernel::__tlb_remove_folio_pages(mmu_gather* tlb, page* pg, unsigned nr_pages) { mmusim::panic("__tlb_remove_folio_pages: not yet ported"); }

void Kernel::unmap_vmas(mmu_gather* tlb, vm_area_struct* vma, uint64_t start, uint64_t end) { mmusim::panic("unmap_vmas: not yet ported"); }

void Kernel::unmap_page_range(mmu_gather* tlb, vm_area_struct* vma, uint64_t addr, uint64_t end) { mmusim::panic("unmap_page_range: not yet ported"); }

uint64_t Kernel::zap_pmd_range(mmu_gather* tlb, vm_area_struct* vma, pud_t* pud, uint64_t addr, uint64_t end) { mmusim::panic("zap_pmd_range: not yet ported"); }

uint64_t Kernel::zap_pte_range(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr, uint64_t end) { mmusim::panic("zap_pte_range: not yet ported"); }

int Kernel::zap_present_ptes(mmu_gather* tlb, vm_area_struct* vma, pte_t* pte, pte_t ptent, unsigned max_nr, uint64_t addr, int* rss, bool* force_flush, bool* force_break) { mmusim::panic("zap_present_ptes: not yet ported"); }

void Kernel::zap_present_folio_ptes(mmu_gather* tlb, vm_area_struct* vma, folio* f, page* pg, pte_t* pte, pte_t ptent, unsigned nr, uint64_t addr, int* rss, bool* force_flush, bool* force_break) { mmusim::panic("zap_present_folio_ptes: not yet ported"); }

void Kernel::zap_page_range_single(vm_area_struct* vma, uint64_t address, uint64_t size) { mmusim::panic("zap_page_range_single: not yet ported"); }

void Kernel::free_pgtables(mm_struct* mm, uint64_t start, uint64_t end) { mmusim::panic("free_pgtables: not yet ported"); }

void Kernel::free_pgd_range_all(mm_struct* mm) { mmusim::panic("free_pgd_range_all: not yet ported"); }

int Kernel::zap_huge_pmd(mmu_gather* tlb, vm_area_struct* vma, pmd_t* pmd, uint64_t addr) { mmusim::panic("zap_huge_pmd: not yet ported"); }

}  // namespace kmm
