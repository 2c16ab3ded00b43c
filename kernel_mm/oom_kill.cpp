// SPDX-License-Identifier: GPL-2.0-only
// The OOM killer of a memory cgroup (mm/oom_kill.c: out_of_memory, select_bad_process,
// oom_evaluate_task, oom_badness, oom_kill_process, __oom_kill_process, mark_oom_victim, the
// oom_reaper's __oom_reap_task_mm; mm/memcontrol.c: mem_cgroup_oom, mem_cgroup_out_of_memory),
// and the fatal signals a fault can raise (arch/x86/mm/fault.c, arch/arm64/mm/fault.c:
// force_sig_fault with no handler installed; kernel/signal.c's default action for SIGKILL,
// SIGSEGV and SIGBUS: the whole thread group dies).
//
// What the port keeps (kernel_mm/README.md, "The OOM killer"):
// - Only a memcg's OOM: the machine's own memory (memory.size) is a simulator setting the
//   platform checks before the run, so running out of it stays an error.
// - Every task's oom_score_adj is 0 (nobody writes /proc/PID/oom_score_adj here), so the badness
//   is the mm's rss + swap entries + page-table pages; memory.oom.group is not set; nothing is
//   oom_task_origin(); no task is init or a kernel thread.
// - The oom_reaper: the kernel wakes it OOM_REAPER_DELAY (2 * HZ) after the kill, by which time
//   a victim that can run has usually exited by itself (exit_mmap() frees everything). A kernel
//   entry here runs whole: the task that charges cannot wait in its retry loop while the victim
//   runs. So a victim that is not the charging task's own process is reaped at once, by
//   __oom_reap_task_mm() as the reaper would (its private memory unmapped, MMF_OOM_SKIP set); its
//   threads die when they next run. A victim that is the charging process itself dies on the
//   way back to user mode, as in the kernel (the charge fails: VM_FAULT_OOM).
// - The kernel's log lines (dump_header(), "Killed process ...") are the platform's report; their
//   console time is not charged.
#include <csignal>

#include "base/error.hpp"
#include "base/params.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

// task_is_dying() (mm/memcontrol.c): the current task is an OOM victim, has a fatal signal
// pending or is exiting.
bool Kernel::task_is_dying() const {
  return current_ && (current_->oom_victim || current_->fatal_signal ||
                      current_->state == TaskState::Zombie || current_->state == TaskState::Dead);
}

// mem_cgroup_oom() (mm/memcontrol.c:1617) and mem_cgroup_out_of_memory() (1584): a MEMCG_OOM
// event, then the OOM killer unless the margin has come back meanwhile (the oom_lock's recheck) or
// the current task is dying anyway. True: a victim was chosen (or is still dying), retry the charge.
bool Kernel::mem_cgroup_oom(mem_cgroup* memcg, uint64_t nr_pages) {
  constexpr uint64_t COSTLY_PAGES = 1u << 3;  // order > PAGE_ALLOC_COSTLY_ORDER: no OOM kill
  if (nr_pages > COSTLY_PAGES) return false;
  ctr_.memcg_oom_events.inc();  // memcg_memory_event(memcg, MEMCG_OOM)
  // mem_cgroup_out_of_memory(): mutex_lock_killable(&oom_lock) (one kernel entry at a time here)
  if (memcg->max > memcg->usage && memcg->max - memcg->usage >= nr_pages) return true;  // mem_cgroup_margin()
  return task_is_dying() || out_of_memory(memcg);
}

// out_of_memory() (mm/oom_kill.c) for a memcg: select_bad_process() over the memcg's tasks, then
// oom_kill_process(). True if a victim was killed or one is still dying (abort).
bool Kernel::out_of_memory(mem_cgroup* memcg) {
  // task_will_free_mem(current): a current task that dies with its whole group frees its memory
  // soon: it becomes the victim without a kill.
  if (current_ && current_->fatal_signal && current_->mm && !current_->mm->oom_skip) {
    mark_oom_victim(current_);
    return true;
  }
  // select_bad_process() -> mem_cgroup_scan_tasks(oc->memcg, oom_evaluate_task, oc): the tasks in
  // the order they joined the cgroup (fork order).
  task_struct* chosen = nullptr;
  int64_t chosen_points = INT64_MIN;
  for (const auto& up : tasks_) {
    task_struct* task = up.get();
    if (!task->mm || task->mm->memcg != memcg) continue;  // not in this memcg (or exited)
    // oom_evaluate_task(): a victim that has not been reaped yet: wait for it (abort).
    if (task->oom_victim) {
      if (task->mm->oom_skip) continue;
      return true;  // oc->chosen = (void *)-1UL
    }
    const int64_t points = oom_badness(task);
    if (points == INT64_MIN || points < chosen_points) continue;
    chosen = task;  // a tie goes to the later task
    chosen_points = points;
  }
  if (!chosen) {
    // "Out of memory and no killable processes...": the kernel fails the charge and the fault
    // comes back ("VM_FAULT_OOM leaked out to the #PF handler. Retrying PF") for ever.
    mmusim::fatal("memory cgroup '{}' is out of memory (memcg.max = {}, charged {}) and has no killable "
                  "process left (every task's memory was reaped already): the kernel would retry the "
                  "fault for ever; raise memcg.max",
                  memcg->name, mmusim::format_size(memcg->max << PAGE_SHIFT),
                  mmusim::format_size(memcg->usage << PAGE_SHIFT));
  }
  oom_kill_process(chosen, memcg);
  return true;
}

// oom_badness() (mm/oom_kill.c): how much memory killing `p` frees, in pages; INT64_MIN (LONG_MIN):
// not to be killed (its mm already reaped, or none). oom_score_adj is 0: no adjustment.
int64_t Kernel::oom_badness(const task_struct* p) const {
  const mm_struct* mm = p->mm;  // find_lock_task_mm(p)
  if (!mm || mm->oom_skip) return INT64_MIN;
  return get_mm_counter(mm, MM_FILEPAGES) + get_mm_counter(mm, MM_ANONPAGES) +
         get_mm_counter(mm, MM_SHMEMPAGES) + get_mm_counter(mm, MM_SWAPENTS) +  // get_mm_rss() + swap
         mm->pgtables_bytes / int64_t(PAGE_SIZE);
}

// oom_kill_process() (mm/oom_kill.c) and __oom_kill_process(): SIGKILL to the victim's thread
// group and to every other process sharing its mm, mark it as the OOM victim, reap its mm.
void Kernel::oom_kill_process(task_struct* victim, mem_cgroup* memcg) {
  mm_struct* mm = victim->mm;
  ctr_.memcg_oom_kill.inc();  // count_vm_event(OOM_KILL); memcg_memory_event_mm(mm, MEMCG_OOM_KILL)
  OomKill rec;
  rec.pid = victim->pid;
  rec.comm = victim->comm;
  rec.memcg = memcg->name;
  rec.anon_rss_kb = uint64_t(get_mm_counter(mm, MM_ANONPAGES)) << (PAGE_SHIFT - 10);
  rec.file_rss_kb = uint64_t(get_mm_counter(mm, MM_FILEPAGES)) << (PAGE_SHIFT - 10);
  rec.swapents = uint64_t(get_mm_counter(mm, MM_SWAPENTS));
  rec.pgtables_kb = uint64_t(mm->pgtables_bytes) >> 10;
  rec.usage_pages = memcg->usage;
  rec.max_pages = memcg->max;
  rec.invoked_by = current_ ? current_->pid : 0;
  do_send_sig_kill(victim, SIGKILL);
  mark_oom_victim(victim);
  // Every other process sharing the mm (a CLONE_VM child): SIGKILL too.
  for (const auto& up : tasks_)
    if (up->mm == mm && up->tgid != victim->tgid) do_send_sig_kill(up.get(), SIGKILL);
  oom_kills_.push_back(rec);
  // queue_oom_reaper(victim): reaped at once unless the charging task is one of the victims
  // (see the top of the file).
  if (!current_ || current_->mm != mm) oom_reap_task_mm(victim, mm);
}

// mark_oom_victim() (mm/oom_kill.c): TIF_MEMDIE, signal->oom_mm.
void Kernel::mark_oom_victim(task_struct* tsk) {
  if (tsk->oom_victim) return;
  tsk->oom_victim = true;
  trace_event("mark_victim", {mmusim::TraceField::dec("pid", uint64_t(tsk->pid))});  // trace_mark_victim()
}

// oom_reap_task_mm() / __oom_reap_task_mm() (mm/oom_kill.c): unmap every private or anonymous
// VMA of the victim's mm (shared file pages stay: they are not the victim's to free), each with
// its own gather and TLB flush; then MMF_OOM_SKIP.
void Kernel::oom_reap_task_mm(task_struct* tsk, mm_struct* mm) {
  if (mm->oom_skip) return;
  mmap_read_lock(mm);  // mmap_read_trylock(): nobody holds it across a kernel entry here
  trace_event("start_task_reaping", {mmusim::TraceField::dec("pid", uint64_t(tsk->pid))});
  std::vector<vm_area_struct*> vmas;
  for (auto& [end, v] : mm->mm_mt) vmas.push_back(v.get());
  for (vm_area_struct* vma : vmas) {
    // VM_HUGETLB|VM_PFNMAP: none here. vma_is_anonymous(vma) || !(vma->vm_flags & VM_SHARED):
    if (!vma->vm_file || !(vma->vm_flags & VM_SHARED)) {
      mmu_gather tlb;
      tlb_gather_mmu(&tlb, mm);
      unmap_page_range(&tlb, vma, vma->vm_start, vma->vm_end);
      tlb_finish_mmu(&tlb);
    }
  }
  trace_event("finish_task_reaping", {mmusim::TraceField::dec("pid", uint64_t(tsk->pid))});
  mmap_read_unlock(mm);
  mm->oom_skip = true;  // oom_reap_task(): set_bit(MMF_OOM_SKIP, &mm->flags)
  // (The charging task is inside its fault, its locks held: the invariants are checked when its
  // entry ends.)
}

// do_send_sig_info(sig, SEND_SIG_PRIV, p, PIDTYPE_TGID) for a fatal signal: every thread of p's
// group has it pending (complete_signal(): a fatal signal sets SIGNAL_GROUP_EXIT and wakes them
// all); each dies when it next returns to user mode or runs.
void Kernel::do_send_sig_kill(task_struct* p, int sig) {
  trace_event("signal_generate", {mmusim::TraceField::dec("sig", uint64_t(sig)),
                                  mmusim::TraceField::dec("pid", uint64_t(p->pid))});
  for (const auto& up : tasks_) {
    task_struct* t = up.get();
    if (t->tgid != p->tgid || t->state == TaskState::Zombie || t->state == TaskState::Dead) continue;
    if (!t->fatal_signal) t->fatal_signal = sig;
  }
}

// force_sig_fault() from a user fault (bad_area / do_sigbus on x86; do_bad_area / arm64_force_sig_fault
// on arm64): no workload here installs a handler, so the signal's default action (terminate,
// with a core dump for SIGSEGV and SIGBUS) takes the whole thread group.
void Kernel::force_sig_fault(task_struct* t, int sig, uint64_t address) {
  FatalFault rec;
  rec.pid = t->pid;
  rec.comm = t->comm;
  rec.sig = sig;
  rec.address = address;
  fatal_faults_.push_back(rec);
  do_send_sig_kill(t, sig);
}

// pagefault_out_of_memory() (mm/oom_kill.c): a fault's VM_FAULT_OOM. A memcg's charge fails that
// way only for a task the OOM killer has made a victim: it dies on its way back to user mode. Any
// other VM_FAULT_OOM is the simulated machine's memory (memory.size) running out.
void Kernel::pagefault_out_of_memory(uint64_t address) {
  if (current_ && current_->fatal_signal) return;  // if (fatal_signal_pending(current)) return;
  mmusim::fatal("out of simulated physical memory handling a fault at {:#x}: raise memory.size", address);
}

}  // namespace kmm
