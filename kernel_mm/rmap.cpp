// SPDX-License-Identifier: GPL-2.0-only
// Reverse-map accounting (mm/rmap.c, include/linux/rmap.h).
// STUB: not yet ported. Each function below is replaced by its port.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

void Kernel::__folio_set_anon(folio* f, vm_area_struct* vma, uint64_t address, bool exclusive) { mmusim::panic("__folio_set_anon: not yet ported"); }

void Kernel::folio_add_new_anon_rmap(folio* f, vm_area_struct* vma, uint64_t address, rmap_t flags) { mmusim::panic("folio_add_new_anon_rmap: not yet ported"); }

void Kernel::folio_add_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma, uint64_t address, rmap_t flags) { mmusim::panic("folio_add_anon_rmap_ptes: not yet ported"); }

void Kernel::folio_add_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* vma, uint64_t address, rmap_t flags) { mmusim::panic("folio_add_anon_rmap_pmd: not yet ported"); }

void Kernel::folio_remove_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* vma) { mmusim::panic("folio_remove_rmap_ptes: not yet ported"); }

void Kernel::folio_remove_rmap_pmd(folio* f, page* pg, vm_area_struct* vma) { mmusim::panic("folio_remove_rmap_pmd: not yet ported"); }

int Kernel::folio_try_dup_anon_rmap_ptes(folio* f, page* pg, int nr_pages, vm_area_struct* src_vma) { mmusim::panic("folio_try_dup_anon_rmap_ptes: not yet ported"); }

int Kernel::folio_try_dup_anon_rmap_pmd(folio* f, page* pg, vm_area_struct* src_vma) { mmusim::panic("folio_try_dup_anon_rmap_pmd: not yet ported"); }

void Kernel::folio_move_anon_rmap(folio* f, vm_area_struct* vma) { mmusim::panic("folio_move_anon_rmap: not yet ported"); }

void Kernel::folio_add_large_mapcount(folio* f, int diff, vm_area_struct* vma) { mmusim::panic("folio_add_large_mapcount: not yet ported"); }

void Kernel::folio_sub_large_mapcount(folio* f, int diff, vm_area_struct* vma) { mmusim::panic("folio_sub_large_mapcount: not yet ported"); }

void Kernel::folio_lock_large_mapcount(folio* f) { mmusim::panic("folio_lock_large_mapcount: not yet ported"); }

void Kernel::folio_unlock_large_mapcount(folio* f) { mmusim::panic("folio_unlock_large_mapcount: not yet ported"); }

void Kernel::deferred_split_folio(folio* f, bool partially_mapped) { mmusim::panic("deferred_split_folio: not yet ported"); }

bool Kernel::folio_trylock(folio* f) { mmusim::panic("folio_trylock: not yet ported"); }

void Kernel::folio_unlock(folio* f) { mmusim::panic("folio_unlock: not yet ported"); }

}  // namespace kmm
