// SPDX-License-Identifier: GPL-2.0-only
// msync() (mm/msync.c, Linux 6.12): MS_SYNC writes the dirty pages of each shared file mapping in
// the range and waits for them (vfs_fsync_range(), kernel_mm/page_writeback.cpp); MS_ASYNC has
// done nothing since 2.6.19 (dirty pages are already tracked, the flusher writes them);
// MS_INVALIDATE only refuses a VM_LOCKED range. An unmapped hole in the range is skipped and
// makes the call return -ENOMEM at the end.
#include <algorithm>
#include <cerrno>

#include "kernel_mm/kernel.hpp"

namespace kmm {

// SYSCALL_DEFINE3(msync) (mm/msync.c)
int Kernel::sys_msync(task_struct* t, uint64_t start, uint64_t len, int flags) {
  mm_struct* mm = t->mm;
  charge(Cost::syscall);
  int unmapped_error = 0;

  if (flags & ~(MS_ASYNC | MS_INVALIDATE | MS_SYNC)) return -EINVAL;
  if (start & ~PAGE_MASK) return -EINVAL;  // offset_in_page()
  if ((flags & MS_ASYNC) && (flags & MS_SYNC)) return -EINVAL;
  len = (len + ~PAGE_MASK) & PAGE_MASK;
  const uint64_t end = start + len;
  if (end < start) return -ENOMEM;
  if (end == start) return 0;
  // If the interval [start,end) covers some unmapped address ranges, just ignore them, but
  // return -ENOMEM at the end. Besides, if the flag is MS_ASYNC (w/o MS_INVALIDATE) the result
  // would be -ENOMEM anyway and there is nothing left to do, so return immediately.
  mmap_read_lock(mm);
  vm_area_struct* vma = find_vma(mm, start);
  for (;;) {
    // Still start < end.
    if (!vma) {
      mmap_read_unlock(mm);
      return -ENOMEM;
    }
    // Here start < vma->vm_end.
    if (start < vma->vm_start) {
      if (flags == MS_ASYNC) {
        mmap_read_unlock(mm);
        return -ENOMEM;
      }
      start = vma->vm_start;
      if (start >= end) {
        mmap_read_unlock(mm);
        return -ENOMEM;
      }
      unmapped_error = -ENOMEM;
    }
    // Here vma->vm_start <= start < vma->vm_end.
    if ((flags & MS_INVALIDATE) && (vma->vm_flags & VM_LOCKED)) {
      mmap_read_unlock(mm);
      return -EBUSY;
    }
    address_space* file = vma->vm_file;
    const uint64_t fstart = (start - vma->vm_start) + (vma->vm_pgoff << PAGE_SHIFT);
    const uint64_t fend = fstart + (std::min(end, vma->vm_end) - start) - 1;
    start = vma->vm_end;
    if ((flags & MS_SYNC) && file && (vma->vm_flags & VM_SHARED)) {
      // get_file(); the fsync runs without mmap_lock.
      mmap_read_unlock(mm);
      const int error = vfs_fsync_range(file, fstart, fend, 1);
      if (error || start >= end) return error ? error : unmapped_error;
      mmap_read_lock(mm);
      vma = find_vma(mm, start);
    } else {
      if (start >= end) {
        mmap_read_unlock(mm);
        return unmapped_error;
      }
      vma = find_vma(mm, vma->vm_end);
    }
  }
}

}  // namespace kmm
