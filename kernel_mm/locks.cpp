// SPDX-License-Identifier: GPL-2.0-only
// mmap_lock and the per-VMA lock: include/linux/mmap_lock.h, include/linux/mm.h (vma_start_read,
// vma_end_read, vma_start_write), mm/memory.c (lock_vma_under_rcu, lock_mm_and_find_vma).
//
// The rwsem follows the semantics of kernel/locking/rwsem.c that matter here: trylocks never wait,
// and a waiting writer blocks new readers. One CPU runs kernel code at a time in this port, so a
// blocking acquisition that would have to wait is a bug (multi-core platforms add waiting).
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

bool rw_semaphore::down_read_trylock() {
  if (writer_ || waiting_writers_ > 0) {
    if (stats_) ++stats_->trylock_failures;
    return false;
  }
  ++readers_;
  if (stats_) ++stats_->acquisitions;
  return true;
}

void rw_semaphore::down_read() {
  if (!down_read_trylock()) {
    if (stats_) ++stats_->contended;
    mmusim::panic("down_read() would wait (writer {}, waiting writers {}) and nothing can wake it",
                  writer_, waiting_writers_);
  }
}

void rw_semaphore::up_read() {
  MMUSIM_CHECK(readers_ > 0, "up_read() of an rwsem with no readers");
  --readers_;
}

bool rw_semaphore::down_write_trylock() {
  if (writer_ || readers_ > 0) {
    if (stats_) ++stats_->trylock_failures;
    return false;
  }
  writer_ = true;
  if (stats_) ++stats_->acquisitions;
  return true;
}

void rw_semaphore::down_write() {
  if (!down_write_trylock()) {
    if (stats_) ++stats_->contended;
    mmusim::panic("down_write() would wait (writer {}, readers {}) and nothing can wake it", writer_,
                  readers_);
  }
}

void rw_semaphore::up_write() {
  MMUSIM_CHECK(writer_, "up_write() of an rwsem not held for writing");
  writer_ = false;
}

void rw_semaphore::downgrade_write() {
  MMUSIM_CHECK(writer_, "downgrade_write() of an rwsem not held for writing");
  writer_ = false;
  ++readers_;
}

// ---- mmap_lock (include/linux/mmap_lock.h) ------------------------------------------------------

void Kernel::mmap_read_lock(mm_struct* mm) {
  mm->mmap_lock.down_read();
  charge(Cost::lock_op);
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, false, true, mm_lock_pa(mm));
}

bool Kernel::mmap_read_trylock(mm_struct* mm) {
  bool ok = mm->mmap_lock.down_read_trylock();
  if (ok) {
    charge(Cost::lock_op);
    lock_event(&mm->mmap_lock, LockClass::mmap_lock, false, true, mm_lock_pa(mm));
  }
  return ok;
}

void Kernel::mmap_read_unlock(mm_struct* mm) {
  mm->mmap_lock.up_read();
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, false, false, mm_lock_pa(mm));
}

// mmap_write_lock(): down_write + mm_lock_seqcount_begin (the sequence goes odd).
void Kernel::mmap_write_lock(mm_struct* mm) {
  mm->mmap_lock.down_write();
  ++mm->mm_lock_seq;
  charge(Cost::lock_op);
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, true, true, mm_lock_pa(mm));
}

// mmap_write_unlock(): vma_end_write_all (the sequence goes even: every VMA write lock taken in
// this section is released at once) + up_write.
void Kernel::mmap_write_unlock(mm_struct* mm) {
  MMUSIM_CHECK(mm->mm_lock_seq & 1, "mmap_write_unlock without mmap_write_lock");
  ++mm->mm_lock_seq;
  mm->mmap_lock.up_write();
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, true, false, mm_lock_pa(mm));
}

void Kernel::mmap_write_downgrade(mm_struct* mm) {
  MMUSIM_CHECK(mm->mm_lock_seq & 1, "mmap_write_downgrade without mmap_write_lock");
  ++mm->mm_lock_seq;
  mm->mmap_lock.downgrade_write();
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, true, false, mm_lock_pa(mm));
  lock_event(&mm->mmap_lock, LockClass::mmap_lock, false, true, mm_lock_pa(mm));
}

// ---- per-VMA lock (include/linux/mm.h, CONFIG_PER_VMA_LOCK) -------------------------------------

// vma_start_read() (mm.h:692): fails if the VMA is write-locked in the current mmap write section,
// or the trylock fails; rechecks the sequence under the lock.
bool Kernel::vma_start_read(vm_area_struct* vma) {
  if (vma->vm_lock_seq == vma->vm_mm->mm_lock_seq) return false;
  if (!vma->vm_lock.down_read_trylock()) return false;
  if (vma->vm_lock_seq == vma->vm_mm->mm_lock_seq) {
    vma->vm_lock.up_read();
    return false;
  }
  charge(Cost::lock_op);
  lock_event(&vma->vm_lock, LockClass::vma_lock, false, true, vma_lock_pa(vma));
  return true;
}

void Kernel::vma_end_read(vm_area_struct* vma) {
  vma->vm_lock.up_read();
  lock_event(&vma->vm_lock, LockClass::vma_lock, false, false, vma_lock_pa(vma));
}

// vma_start_write() (mm.h:750): needs mmap_lock held for writing; drains readers.
void Kernel::vma_start_write(vm_area_struct* vma) {
  mm_struct* mm = vma->vm_mm;
  MMUSIM_CHECK(mm->mmap_lock.write_locked(), "vma_start_write() without mmap_lock held for writing");
  if (vma->vm_lock_seq == mm->mm_lock_seq) return;
  vma->vm_lock.down_write();
  lock_event(&vma->vm_lock, LockClass::vma_lock, true, true, vma_lock_pa(vma));
  vma->vm_lock_seq = mm->mm_lock_seq;
  vma->vm_lock.up_write();
  charge(Cost::lock_op);
  lock_event(&vma->vm_lock, LockClass::vma_lock, true, false, vma_lock_pa(vma));
}

// release_fault_lock() (include/linux/mm.h)
void Kernel::release_fault_lock(vm_fault* vmf) {
  if (vmf->flags & FAULT_FLAG_VMA_LOCK) vma_end_read(vmf->vma);
  else mmap_read_unlock(vmf->vma->vm_mm);
}

// lock_vma_under_rcu() (mm/memory.c:6260): look up the VMA and read-lock it without mmap_lock;
// NULL rather than waiting.
vm_area_struct* Kernel::lock_vma_under_rcu(mm_struct* mm, uint64_t address) {
  vm_area_struct* vma = vma_lookup(mm, address);  // mas_walk()
  if (!vma) {
    ctr_.vma_lock_abort.inc();
    return nullptr;
  }
  if (!vma_start_read(vma)) {
    ctr_.vma_lock_abort.inc();
    return nullptr;
  }
  // Check if the VMA got isolated after we found it.
  if (vma->detached) {
    vma_end_read(vma);
    ctr_.vma_lock_miss.inc();
    return nullptr;  // the kernel retries the walk; a detached VMA cannot be found again here
  }
  // At this point, we have a stable reference to a VMA: check the range again.
  if (address < vma->vm_start || address >= vma->vm_end) {
    vma_end_read(vma);
    ctr_.vma_lock_abort.inc();
    return nullptr;
  }
  return vma;
}

// lock_mm_and_find_vma() (mm/memory.c:6198): mmap_read_trylock, else mmap_read_lock; no stack
// expansion (no VM_GROWSDOWN mappings here).
vm_area_struct* Kernel::lock_mm_and_find_vma(mm_struct* mm, uint64_t address) {
  if (!mmap_read_trylock(mm)) mmap_read_lock(mm);
  vm_area_struct* vma = find_vma(mm, address);
  if (vma && vma->vm_start <= address) return vma;
  mmap_read_unlock(mm);
  return nullptr;
}

}  // namespace kmm
