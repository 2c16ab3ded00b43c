// SPDX-License-Identifier: GPL-2.0-only
// Basic kernel types and flag values, with the kernel's names (include/linux/mm_types.h,
// include/linux/mm.h, include/linux/mm_types_task.h). Values follow 6.12 where a value exists.
#pragma once

#include <cerrno>
#include <cstdint>

#include "base/pgformat.hpp"

namespace kmm {

using pfn_t = uint64_t;
using vm_fault_t = uint32_t;
using fpb_t = uint32_t;

// Page table entries: opaque words whose meaning the arch layer gives (pte_val / __pte).
struct pte_t {
  uint64_t val;
};
struct pmd_t {
  uint64_t val;
};
struct pud_t {
  uint64_t val;
};
struct pgd_t {
  uint64_t val;
};
struct pgprot_t {
  uint64_t val;
};
inline uint64_t pte_val(pte_t p) { return p.val; }
inline pte_t __pte(uint64_t v) { return pte_t{v}; }
inline uint64_t pmd_val(pmd_t p) { return p.val; }
inline pmd_t __pmd(uint64_t v) { return pmd_t{v}; }
inline uint64_t pgprot_val(pgprot_t p) { return p.val; }
inline bool pte_same(pte_t a, pte_t b) { return a.val == b.val; }
inline bool pte_none(pte_t p) { return p.val == 0; }
inline bool pmd_same(pmd_t a, pmd_t b) { return a.val == b.val; }
inline bool pmd_none(pmd_t p) { return p.val == 0; }

// Swap entries (include/linux/swapops.h, include/linux/mm_types.h): the arch-independent form,
// the swap device's type in the top bits, the slot's offset below (what the swap cache is keyed
// by); the arch layer turns it into a non-present PTE and back (__swp_entry_to_pte()).
struct swp_entry_t {
  uint64_t val;
};
inline constexpr unsigned MAX_SWAPFILES_SHIFT = 5;
inline constexpr unsigned BITS_PER_XA_VALUE = 63;  // BITS_PER_LONG - 1
inline constexpr unsigned SWP_TYPE_SHIFT = BITS_PER_XA_VALUE - MAX_SWAPFILES_SHIFT;
inline constexpr uint64_t SWP_OFFSET_MASK = (uint64_t(1) << SWP_TYPE_SHIFT) - 1;
inline swp_entry_t swp_entry(uint64_t type, uint64_t offset) {
  return swp_entry_t{(type << SWP_TYPE_SHIFT) | (offset & SWP_OFFSET_MASK)};
}
inline unsigned swp_type(swp_entry_t e) { return unsigned(e.val >> SWP_TYPE_SHIFT); }
inline uint64_t swp_offset(swp_entry_t e) { return e.val & SWP_OFFSET_MASK; }

// The kernel's page-table geometry, written as the kernel writes it (asm/page_types.h,
// asm/pgtable_64_types.h, asm/pgtable-hwdef.h with 4K pages and 4 levels) and tied below to the
// paging-format descriptor both ISAs share (base/pgformat.hpp), which the hardware models use.
inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr uint64_t PAGE_SIZE = uint64_t(1) << PAGE_SHIFT;
inline constexpr uint64_t PAGE_MASK = ~(PAGE_SIZE - 1);
inline constexpr unsigned PTRS_PER_PTE = 512;
inline constexpr unsigned PTRS_PER_PMD = 512;
inline constexpr unsigned PTRS_PER_PUD = 512;
inline constexpr unsigned PTRS_PER_PGD = 512;
inline constexpr unsigned PMD_SHIFT = PAGE_SHIFT + 9;
inline constexpr uint64_t PMD_SIZE = uint64_t(1) << PMD_SHIFT;
inline constexpr uint64_t PMD_MASK = ~(PMD_SIZE - 1);
inline constexpr unsigned PUD_SHIFT = PMD_SHIFT + 9;
inline constexpr uint64_t PUD_SIZE = uint64_t(1) << PUD_SHIFT;
inline constexpr uint64_t PUD_MASK = ~(PUD_SIZE - 1);
inline constexpr unsigned PGDIR_SHIFT = PUD_SHIFT + 9;
inline constexpr unsigned HPAGE_PMD_ORDER = PMD_SHIFT - PAGE_SHIFT;  // 9
inline constexpr unsigned HPAGE_PMD_NR = 1u << HPAGE_PMD_ORDER;      // 512
inline constexpr uint64_t HPAGE_PMD_SIZE = PMD_SIZE;
inline constexpr unsigned MAX_PAGE_ORDER = 10;                        // x86/arm64 4K default
inline constexpr unsigned MAX_PTRS_PER_PTE = PTRS_PER_PTE;
// pte_index() (include/linux/pgtable.h)
inline constexpr unsigned pte_index(uint64_t addr) { return unsigned((addr >> PAGE_SHIFT) & (PTRS_PER_PTE - 1)); }
// arm64 contiguous PTEs with the 4K granule (arch/arm64/include/asm/pgtable-hwdef.h).
inline constexpr unsigned CONT_PTE_SHIFT = 4 + PAGE_SHIFT;
inline constexpr unsigned CONT_PTES = 1u << (CONT_PTE_SHIFT - PAGE_SHIFT);  // 16
inline constexpr uint64_t CONT_PTE_SIZE = uint64_t(CONT_PTES) * PAGE_SIZE;
inline constexpr uint64_t CONT_PTE_MASK = ~(CONT_PTE_SIZE - 1);

namespace geometry_check {
namespace pg = mmusim::pg;
static_assert(PAGE_SHIFT == pg::kBasePageShift && PAGE_SIZE == pg::kBasePageSize && PAGE_MASK == pg::kBasePageMask,
              "PAGE_SHIFT is the descriptor's base page");
static_assert(PTRS_PER_PTE == pg::kX86_64.ptrs_per_table() && PTRS_PER_PMD == pg::kX86_64.ptrs_per_table() &&
                  PTRS_PER_PUD == pg::kX86_64.ptrs_per_table() && PTRS_PER_PGD == pg::kX86_64.ptrs_per_table(),
              "PTRS_PER_* are the descriptor's entries per table");
static_assert(PMD_SHIFT == pg::kX86_64.level_shift(1) && PUD_SHIFT == pg::kX86_64.level_shift(2) &&
                  PGDIR_SHIFT == pg::kX86_64.level_shift(3),
              "the level shifts are the descriptor's (x86-64)");
static_assert(PMD_SHIFT == pg::kArm64_4K.level_shift(1) && PUD_SHIFT == pg::kArm64_4K.level_shift(2) &&
                  PGDIR_SHIFT == pg::kArm64_4K.level_shift(3),
              "the level shifts are the descriptor's (arm64, 4K granule)");
static_assert(CONT_PTES == pg::kArm64_4K.cont_entries, "CONT_PTES is the descriptor's contiguous hint");
}  // namespace geometry_check

inline constexpr uint64_t ALIGN_DOWN(uint64_t x, uint64_t a) { return x & ~(a - 1); }
inline constexpr uint64_t ALIGN(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
inline constexpr bool IS_ALIGNED(uint64_t x, uint64_t a) { return (x & (a - 1)) == 0; }

// vm_fault_t (include/linux/mm_types.h: enum vm_fault_reason)
inline constexpr vm_fault_t VM_FAULT_OOM = 0x000001;
inline constexpr vm_fault_t VM_FAULT_SIGBUS = 0x000002;
inline constexpr vm_fault_t VM_FAULT_MAJOR = 0x000004;
inline constexpr vm_fault_t VM_FAULT_HWPOISON = 0x000010;
inline constexpr vm_fault_t VM_FAULT_HWPOISON_LARGE = 0x000020;
inline constexpr vm_fault_t VM_FAULT_SIGSEGV = 0x000040;
inline constexpr vm_fault_t VM_FAULT_NOPAGE = 0x000100;
inline constexpr vm_fault_t VM_FAULT_LOCKED = 0x000200;
inline constexpr vm_fault_t VM_FAULT_RETRY = 0x000400;
inline constexpr vm_fault_t VM_FAULT_FALLBACK = 0x000800;
inline constexpr vm_fault_t VM_FAULT_DONE_COW = 0x001000;
inline constexpr vm_fault_t VM_FAULT_NEEDDSYNC = 0x002000;
inline constexpr vm_fault_t VM_FAULT_COMPLETED = 0x004000;
inline constexpr vm_fault_t VM_FAULT_ERROR =
    VM_FAULT_OOM | VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV | VM_FAULT_HWPOISON | VM_FAULT_HWPOISON_LARGE;

// enum fault_flag (include/linux/mm_types.h)
inline constexpr uint32_t FAULT_FLAG_WRITE = 1u << 0;
inline constexpr uint32_t FAULT_FLAG_MKWRITE = 1u << 1;
inline constexpr uint32_t FAULT_FLAG_ALLOW_RETRY = 1u << 2;
inline constexpr uint32_t FAULT_FLAG_RETRY_NOWAIT = 1u << 3;
inline constexpr uint32_t FAULT_FLAG_KILLABLE = 1u << 4;
inline constexpr uint32_t FAULT_FLAG_TRIED = 1u << 5;
inline constexpr uint32_t FAULT_FLAG_USER = 1u << 6;
inline constexpr uint32_t FAULT_FLAG_REMOTE = 1u << 7;
inline constexpr uint32_t FAULT_FLAG_INSTRUCTION = 1u << 8;
inline constexpr uint32_t FAULT_FLAG_INTERRUPTIBLE = 1u << 9;
inline constexpr uint32_t FAULT_FLAG_UNSHARE = 1u << 10;
inline constexpr uint32_t FAULT_FLAG_ORIG_PTE_VALID = 1u << 11;
inline constexpr uint32_t FAULT_FLAG_VMA_LOCK = 1u << 12;
inline constexpr uint32_t FAULT_FLAG_DEFAULT =
    FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_KILLABLE | FAULT_FLAG_INTERRUPTIBLE;
// fault_flag_allow_retry_first() (include/linux/mm.h)
inline bool fault_flag_allow_retry_first(uint32_t flags) {
  return (flags & FAULT_FLAG_ALLOW_RETRY) && !(flags & FAULT_FLAG_TRIED);
}

// vm_flags (include/linux/mm.h)
using vm_flags_t = uint64_t;
inline constexpr vm_flags_t VM_NONE = 0;
inline constexpr vm_flags_t VM_READ = 0x00000001;
inline constexpr vm_flags_t VM_WRITE = 0x00000002;
inline constexpr vm_flags_t VM_EXEC = 0x00000004;
inline constexpr vm_flags_t VM_SHARED = 0x00000008;
inline constexpr vm_flags_t VM_MAYREAD = 0x00000010;
inline constexpr vm_flags_t VM_MAYWRITE = 0x00000020;
inline constexpr vm_flags_t VM_MAYEXEC = 0x00000040;
inline constexpr vm_flags_t VM_MAYSHARE = 0x00000080;
inline constexpr vm_flags_t VM_GROWSDOWN = 0x00000100;
inline constexpr vm_flags_t VM_UFFD_MISSING = 0x00000200;
inline constexpr vm_flags_t VM_PFNMAP = 0x00000400;
inline constexpr vm_flags_t VM_UFFD_WP = 0x00001000;
inline constexpr vm_flags_t VM_LOCKED = 0x00002000;
inline constexpr vm_flags_t VM_IO = 0x00004000;
inline constexpr vm_flags_t VM_SEQ_READ = 0x00008000;   // MADV_SEQUENTIAL
inline constexpr vm_flags_t VM_RAND_READ = 0x00010000;  // MADV_RANDOM
inline constexpr vm_flags_t VM_DONTCOPY = 0x00020000;
inline constexpr vm_flags_t VM_DONTEXPAND = 0x00040000;
inline constexpr vm_flags_t VM_ACCOUNT = 0x00100000;
inline constexpr vm_flags_t VM_NORESERVE = 0x00200000;
inline constexpr vm_flags_t VM_HUGETLB = 0x00400000;
inline constexpr vm_flags_t VM_WIPEONFORK = 0x02000000;
inline constexpr vm_flags_t VM_DONTDUMP = 0x04000000;
inline constexpr vm_flags_t VM_SOFTDIRTY = 0x08000000;
inline constexpr vm_flags_t VM_MIXEDMAP = 0x10000000;
inline constexpr vm_flags_t VM_HUGEPAGE = 0x20000000;
inline constexpr vm_flags_t VM_NOHUGEPAGE = 0x40000000;
inline constexpr vm_flags_t VM_MERGEABLE = 0x80000000;
inline constexpr vm_flags_t VM_ACCESS_FLAGS = VM_READ | VM_WRITE | VM_EXEC;

// mmap prot/flags and madvise advice (include/uapi/asm-generic/mman-common.h)
inline constexpr int PROT_NONE = 0x0;
inline constexpr int PROT_READ = 0x1;
inline constexpr int PROT_WRITE = 0x2;
inline constexpr int PROT_EXEC = 0x4;
inline constexpr int MAP_SHARED = 0x01;
inline constexpr int MAP_PRIVATE = 0x02;
inline constexpr int MAP_FIXED = 0x10;
inline constexpr int MAP_ANONYMOUS = 0x20;
// msync() flags (include/uapi/asm-generic/mman-common.h)
inline constexpr int MS_ASYNC = 1;
inline constexpr int MS_INVALIDATE = 2;
inline constexpr int MS_SYNC = 4;

// calc_vm_prot_bits() (include/linux/mman.h), no pkeys / arch bits
inline vm_flags_t calc_vm_prot_bits(int prot) {
  vm_flags_t f = 0;
  if (prot & PROT_READ) f |= VM_READ;
  if (prot & PROT_WRITE) f |= VM_WRITE;
  if (prot & PROT_EXEC) f |= VM_EXEC;
  return f;
}
inline constexpr int MADV_NORMAL = 0;
inline constexpr int MADV_RANDOM = 1;
inline constexpr int MADV_SEQUENTIAL = 2;
inline constexpr int MADV_DONTNEED = 4;
inline constexpr int MADV_DONTFORK = 10;
inline constexpr int MADV_DOFORK = 11;
inline constexpr int MADV_WIPEONFORK = 18;
inline constexpr int MADV_KEEPONFORK = 19;
inline constexpr int MADV_HUGEPAGE = 14;
inline constexpr int MADV_NOHUGEPAGE = 15;

// RSS counters (include/linux/mm_types_task.h)
enum { MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES, NR_MM_COUNTERS };

// folio_pte_batch flags (mm/internal.h; FPB_RESPECT_* are the newer spelling the patch uses).
inline constexpr fpb_t FPB_IGNORE_DIRTY = 1u << 0;
inline constexpr fpb_t FPB_IGNORE_SOFT_DIRTY = 1u << 1;
inline constexpr fpb_t FPB_RESPECT_DIRTY = 1u << 2;
inline constexpr fpb_t FPB_RESPECT_SOFT_DIRTY = 1u << 3;
inline constexpr fpb_t FPB_RESPECT_WRITE = 1u << 4;
inline constexpr fpb_t FPB_MERGE_WRITE = 1u << 5;
inline constexpr fpb_t FPB_MERGE_YOUNG_DIRTY = 1u << 6;

// rmap flags (include/linux/rmap.h)
using rmap_t = uint32_t;
inline constexpr rmap_t RMAP_NONE = 0;
inline constexpr rmap_t RMAP_EXCLUSIVE = 1u << 0;
inline constexpr rmap_t RMAP_COMPOUND = 1u << 1;

// Error returns (-EAGAIN, -ENOMEM, ...) are the host's <cerrno> values, which are Linux's.

}  // namespace kmm
