// SPDX-License-Identifier: GPL-2.0-only
// The program image: what exec() and the dynamic loader leave mapped besides anonymous memory,
// for the core's instruction fetches and the vDSO's data read (workloads/image.hpp says where).
//
// What the real kernel has there, and what this port makes of it (anonymous memory only, PORTMAP
// §8.3: no page cache, no special mappings):
//   - a file's text (load_elf_binary() -> elf_map() -> vm_mmap(PROT_READ | PROT_EXEC,
//     MAP_PRIVATE) of the executable; ld.so's mmap of libc.so.6): a private file mapping whose
//     pages are page-cache folios, mapped by the read faults of the first fetches
//     (filemap_map_pages(), with fault-around). Here: a private VMA with VM_READ | VM_EXEC and
//     the VM_MAY* bits do_mmap() gives a private mapping, no vm_file, no anon_vma;
//   - the vDSO text (map_vdso() -> _install_special_mapping(VM_READ | VM_EXEC | VM_MAYREAD |
//     VM_MAYWRITE | VM_MAYEXEC), arch/x86/entry/vdso/vma.c; __install_special_mapping() adds
//     VM_DONTEXPAND | VM_SOFTDIRTY): the kernel image's vDSO pages, inserted by vdso_fault(). The
//     same flags here, no vm_ops;
//   - the vvar area (vdso_install_vvar_mapping(): VM_READ | VM_MAYREAD | VM_IO | VM_DONTDUMP |
//     VM_PFNMAP, and the special mapping's VM_DONTEXPAND | VM_SOFTDIRTY): the kernel's vvar data
//     page, inserted by vvar_fault() with vmf_insert_pfn() as a special PTE; only the pages a
//     clock uses are ever inserted (pvclock and hvclock need a hypervisor clock, timens a time
//     namespace). The same flags here.
// Every present page maps the shared zero page with a special PTE (pte_mkspecial(pfn_pte(
// my_zero_pfn(), vma->vm_page_prot)), as do_anonymous_page() maps a read fault): the model needs
// their translations, not their bytes (the core has no instruction cache and decodes nothing; the
// vDSO's read of the vvar page is only timed), and vm_normal_page() then finds no page to count,
// as for the real vvar's PFN mapping.
//
// The pages are present from the start: the program has run through its text, clock_gettime()
// and the vvar page before anything is measured (its set-up and the populating pass), so the
// faults that brought them in are not in any measured count. Nothing is charged or timed: exec is
// not simulated.
//
// fork() (dup_mmap() -> copy_page_range(), fork.cpp) then does what it does for these VMAs in the
// real kernel: vma_needs_copy() skips the text and vDSO VMAs (no anon_vma, neither VM_PFNMAP nor
// VM_MIXEDMAP: "Don't copy ptes where a page fault will fill them correctly"), so a child faults
// its text in when it first fetches from it (the port maps the zero page there again: a read
// fault of a private VMA without anon_vma); the vvar VMA is VM_PFNMAP, so its PTE is copied
// (copy_present_ptes(): vm_normal_page() finds no page, the PTE is copied as it is).
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

int Kernel::map_exec_image(task_struct* t, ExecMapping kind, uint64_t start, uint64_t len,
                           uint64_t populated, int prot_bits) {
  mm_struct* mm = t->mm;
  if (!len || !IS_ALIGNED(start, PAGE_SIZE) || !IS_ALIGNED(len, PAGE_SIZE) ||
      !IS_ALIGNED(populated, PAGE_SIZE) || populated > len || start + len > arch_->task_size())
    return -EINVAL;
  if (vm_area_struct* old = find_vma(mm, start); old && old->vm_start < start + len) return -EEXIST;

  if (kind == ExecMapping::anon) {
    // What do_mmap() makes of MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED; nothing is charged.
    NotSimulated quiet(*this);  // no cost, no cache traffic, no lock timing
    const int64_t r = sys_mmap(t, start, len, prot_bits, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
    return r < 0 ? int(r) : 0;
  }
  vm_flags_t vm_flags = 0;
  switch (kind) {
    case ExecMapping::text:
      // elf_map(): PROT_READ | PROT_EXEC, MAP_PRIVATE; do_mmap() adds VM_MAYREAD | VM_MAYWRITE |
      // VM_MAYEXEC (a private mapping of a file opened for reading).
      vm_flags = VM_READ | VM_EXEC | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC;
      break;
    case ExecMapping::vdso:
      vm_flags = VM_READ | VM_EXEC | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC | VM_DONTEXPAND | VM_SOFTDIRTY;
      break;
    case ExecMapping::vvar:
      vm_flags = VM_READ | VM_MAYREAD | VM_IO | VM_DONTDUMP | VM_PFNMAP | VM_DONTEXPAND | VM_SOFTDIRTY;
      break;
    case ExecMapping::file:
      // do_mmap() of a private file mapping (a file opened for reading and writing: every VM_MAY*).
      vm_flags = calc_vm_prot_bits(prot_bits) | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC;
      // A PROT_NONE reservation (ld.so's before it maps a library's segments) has no pages.
      if (!(prot_bits & (PROT_READ | PROT_WRITE | PROT_EXEC))) populated = 0;
      break;
    case ExecMapping::anon: break;  // (above)
  }

  int err = 0;
  {
    NotSimulated quiet(*this);  // no cost, no cache traffic, no lock timing
    mmap_write_lock(mm);
    auto vma = std::make_unique<vm_area_struct>();
    vma->vm_start = start;
    vma->vm_end = start + len;
    vma->vm_pgoff = start >> PAGE_SHIFT;  // (a file offset in the real kernel; unused here)
    vma->vm_flags = vm_flags;
    vm_area_struct* v = vma_insert(mm, std::move(vma));
    static const char* kind_names[] = {"text", "vdso", "vvar", "file", "anon"};
    trace_mmap(t, start, len, vm_flags, kind_names[unsigned(kind)]);

    const pgprot_t prot = arch_->vm_get_page_prot(v->vm_flags);  // vma->vm_page_prot
    for (uint64_t addr = start; addr < start + populated && !err; addr += PAGE_SIZE) {
      uint64_t* pgd = pgd_offset(mm, addr);
      pud_t* pud = pud_alloc(mm, pgd, addr);
      pmd_t* pmd = pud ? pmd_alloc(mm, pud, addr) : nullptr;
      if (!pmd || pte_alloc(mm, pmd)) {
        err = -ENOMEM;
        break;
      }
      pte_t* pte = pte_offset_map(pmd, addr);
      MMUSIM_CHECK(pte && pte_none(*pte), "map_exec_image: the PTE for {:#x} is not empty", addr);
      arch_->set_pte_at(mm, addr, pte, arch_->pte_mkspecial(arch_->pfn_pte(zero_pfn(), prot)));
    }
    mmap_write_unlock(mm);
  }
  if (err == -ENOMEM) mmusim::fatal("out of simulated physical memory mapping the program image: raise memory.size");
  check_invariants("exec");
  return err;
}

// A private file mapping for a recorded program (workloads/trace_workload.cpp): mmap_region()'s
// unmapping of what was there (as sys_mmap() does for MAP_FIXED), then the stand-in for the file:
// the zero page in every PTE, read-only, so that a write copies it (do_wp_page() -> wp_page_copy(),
// as for a page-cache page of a private mapping) and a read or fetch finds it present (the page
// cache would have it, and fault-around would map it: not modelled).
int64_t Kernel::mmap_file_stand_in(task_struct* t, uint64_t addr, uint64_t len, int prot) {
  mm_struct* mm = t->mm;
  charge(Cost::syscall);
  len = ALIGN(len, PAGE_SIZE);
  if (!len || !IS_ALIGNED(addr, PAGE_SIZE) || addr < 65536 || addr > arch_->task_size() - len) return -EINVAL;
  if (vm_area_struct* old = find_vma(mm, addr); old && old->vm_start < addr + len) {
    mmap_write_lock(mm);
    const int err = do_vmi_munmap(mm, addr, len, /*unlock=*/false);
    mmap_write_unlock(mm);
    if (err) return err;
  }
  charge(Cost::vma_op);
  const int err = map_exec_image(t, ExecMapping::file, addr, len, len, prot);
  return err ? err : int64_t(addr);
}

}  // namespace kmm
