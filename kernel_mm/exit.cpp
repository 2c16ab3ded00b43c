// SPDX-License-Identifier: GPL-2.0-only
// Process exit and wait (kernel/exit.c: do_exit, exit_mm, exit_notify, wait/release_task),
// kernel/fork.c (mmput, __mmput, __mmdrop, check_mm) and mm/mmap.c (exit_mmap).
//
// What the experiments need from here (PORTMAP §2.3): when a forked child exits, exit_mmap zaps
// its mappings: the mapcounts of the folios it shared with its parent drop under the PTL, their
// references after the mmu_gather flush; the parent then finds them exclusive on its next write
// fault.
//
// Simplifications: no signals, no threads groups beyond tasks sharing an mm (mm_users), no
// ptrace/cgroups. The mm_struct object stays in the kernel's list after __mmdrop() with no VMAs, no
// page tables and pgd 0 (so platforms and zombie tasks never hold a dangling pointer); its pgd
// page is freed. Orphans are reaped by "init" at once.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
constexpr uint64_t FIRST_USER_ADDRESS = 0;
constexpr uint64_t USER_PGTABLES_CEILING = 0;
}  // namespace

// exit_mmap() (mm/mmap.c:1916): the last user of the mm is gone; tear everything down with one
// fullmm gather.
void Kernel::exit_mmap(mm_struct* mm) {
  mmu_gather tlb;
  // mmu_notifier_release(mm): none
  mmap_read_lock(mm);
  // arch_exit_mmap(mm): nothing on x86/arm64 here

  std::vector<vm_area_struct*> vmas;  // the VMA iterator over the whole tree
  for (auto& [end, v] : mm->mm_mt) vmas.push_back(v.get());
  if (vmas.empty()) {
    // Can happen if dup_mmap() received an OOM
    mmap_read_unlock(mm);
    mmap_write_lock(mm);
    goto destroy;
  }

  lru_add_drain();
  // flush_cache_mm(mm): empty
  tlb_gather_mmu_fullmm(&tlb, mm);
  // update_hiwater_rss(mm) here? but nobody should be looking
  // Use ULONG_MAX here to ensure all VMAs in the mm are unmapped
  unmap_vmas(&tlb, vmas, 0, ~0ull);
  mmap_read_unlock(mm);

  // Set MMF_OOM_SKIP to hide this task from the oom killer/reaper because the memory has been
  // already freed.
  mm->oom_skip = true;
  mmap_write_lock(mm);
  free_pgtables(&tlb, vmas, FIRST_USER_ADDRESS, USER_PGTABLES_CEILING, true);
  tlb_finish_mmu(&tlb);

  // Walk the list again, actually closing and freeing it, with preemption enabled, without holding
  // any MM locks besides the unreachable mmap_write_lock.
  for (vm_area_struct* vma : vmas) {
    // remove_vma(vma, unreachable = true): vm_area_free; the anon_vma reference goes with it
    vma_remove(mm, vma);
    charge(Cost::vma_op);
  }

destroy:
  // __mt_destroy(&mm->mm_mt)
  MMUSIM_CHECK(mm->mm_mt.empty(), "exit_mmap left VMAs");
  mmap_write_unlock(mm);
  // vm_unacct_memory(nr_accounted): no overcommit accounting here
}

// __mmput() (kernel/fork.c:1369) and __mmdrop() (kernel/fork.c:935), with check_mm() (842).
void Kernel::__mmput(mm_struct* mm) {
  MMUSIM_CHECK(mm->mm_users == 0, "__mmput with mm_users {}", mm->mm_users);
  // uprobe_clear_state, exit_aio, ksm_exit, khugepaged_exit: none here
  exit_mmap(mm);
  // mm_put_huge_zero_folio(mm): the huge zero folio keeps its global reference (the kernel frees
  // it only from its shrinker).

  // mmdrop(mm) -> __mmdrop(mm): nobody holds mm_count beyond mm_users here.
  // cleanup_lazy_tlbs(mm): CPUs still showing this mm as loaded keep it only as a lazy TLB mm; the
  // flush of exit_mmap removed its translations there. CPUs that switched away still hold some
  // under its PCID: destroy_context() drops them (the kernel's reuse of the PCID would).
  arch_->destroy_context(mm);
  // mm_free_pgd(mm) -> pgd_free()
  if (mm->pgd) {
    pte_free(mm, pfn_t(mm->pgd >> PAGE_SHIFT));
    mm->pgd = 0;
  }
  // check_mm(mm): the kernel only reports "BUG: Bad rss-counter state"; here it is a port bug.
  static const char* const resident_page_types[NR_MM_COUNTERS] = {"MM_FILEPAGES", "MM_ANONPAGES",
                                                                  "MM_SWAPENTS", "MM_SHMEMPAGES"};
  for (int i = 0; i < NR_MM_COUNTERS; ++i)
    MMUSIM_CHECK(get_mm_counter(mm, i) == 0, "BUG: Bad rss-counter state mm:{} type:{} val:{}", mm->id,
                 resident_page_types[i], get_mm_counter(mm, i));
  MMUSIM_CHECK(mm->pgtables_bytes == 0, "BUG: non-zero pgtables_bytes on freeing mm {}: {}", mm->id,
               mm->pgtables_bytes);
}

// mmput() (kernel/fork.c:1394): drop a user of the mm; the last one tears it down.
void Kernel::mmput(mm_struct* mm) {
  MMUSIM_CHECK(mm->mm_users > 0, "mmput of mm {} with mm_users {}", mm->id, mm->mm_users);
  if (--mm->mm_users == 0) __mmput(mm);
}

// exit_mm() (kernel/exit.c:541): the task stops using its mm and drops its reference.
void Kernel::exit_mm(task_struct* t) {
  mm_struct* mm = t->mm;
  // exit_mm_release(current, mm): no futexes / vfork completion here
  if (!mm) return;
  mmap_read_lock(mm);
  // mmgrab_lazy_tlb(mm); BUG_ON(mm != current->active_mm); task_lock(current)
  t->mm = nullptr;
  // membarrier_update_current_mm(NULL); enter_lazy_tlb(mm, current): the CPU keeps the mm loaded
  mmap_read_unlock(mm);
  // mm_update_next_owner(mm)
  mmput(mm);
}

// do_exit() (kernel/exit.c:873) for the parts that concern memory, then exit_notify(): the task is
// a zombie until its parent reaps it with sys_wait().
void Kernel::sys_exit(task_struct* t, int code) {
  MMUSIM_CHECK(t && (t->state == TaskState::Runnable || t->state == TaskState::Blocked),
               "sys_exit of a task that is not alive");
  charge(Cost::syscall);
  charge(Cost::exit_fixed);
  ctr_.exits.inc();
  trace_event("exit", {mmusim::TraceField::dec("pid", uint64_t(t->pid)),
                       mmusim::TraceField::dec("code", uint64_t(int64_t(code)))});

  exit_mm(t);

  // exit_notify(): forget_original_parent() hands the children to init, which reaps the zombies;
  // the task itself becomes a zombie (or is released at once when nobody will wait for it).
  for (auto& c : tasks_) {
    if (c->parent != t) continue;
    c->parent = nullptr;
    if (c->state == TaskState::Zombie) c->state = TaskState::Dead;
  }
  t->exit_code = code;
  t->state = t->parent ? TaskState::Zombie : TaskState::Dead;
  check_invariants("exit");
}

// wait4() -> do_wait() -> wait_task_zombie() -> release_task(): reap a zombie child. Returns its
// pid, 0 if the child has not exited yet (as with WNOHANG: nothing here can block), -ECHILD if it is
// not a child of `parent` or already reaped.
int Kernel::sys_wait(task_struct* parent, task_struct* child) {
  charge(Cost::syscall);
  if (!child || child->parent != parent || child->state == TaskState::Dead) return -ECHILD;
  if (child->state != TaskState::Zombie) return 0;
  child->state = TaskState::Dead;  // EXIT_DEAD; release_task()
  return child->pid;
}

}  // namespace kmm
