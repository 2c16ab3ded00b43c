// SPDX-License-Identifier: GPL-2.0-only
#include "os/system.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "os/lock_timing.hpp"

// System-call emulation: each system call of a workload's program enters the kernel port's sys_*
// function; fork, clone, exit and wait also create, place, wake or retire simulated tasks
// (os/scheduler.*), and a barrier is the effect of a futex-based pthread barrier.
namespace mmusim {

SyscallOutcome System::syscall(int cpu, SimTask& t, const wl::Uop& u, uint64_t now_ps) {
  SyscallOutcome out;
  kmm::Kernel& k = *kernel_;
  if (u.sys == wl::Sys::Gate) {
    // Not a system call: a trace's thread waits until the earlier ordered calls of its process
    // (its other threads') have run. It costs what the serialising micro-op costs the core.
    const uint64_t key = t.prog->gate_key();
    MMUSIM_CHECK(key, "a Gate from a program without a gate");
    Gate& g = gates_[key];
    MMUSIM_CHECK(g.passed <= u.addr, "gate {}: call {} is already behind ({} passed)", key, u.addr, g.passed);
    if (g.passed != u.addr) {
      MMUSIM_CHECK(!g.waiting.count(u.addr), "gate {}: two tasks wait for call {}", key, u.addr);
      g.waiting[u.addr] = &t;
      t.blocked = true;
      out.blocked = true;
    } else {
      t.prog->syscall_return(0);
    }
    return out;
  }
  const uint64_t gate_key = (u.flags & wl::kUopOrdered) ? t.prog->gate_key() : 0;
  double extra_cycles = 0;
  uint64_t sleep_ns = 0;  // nanosleep()
  SimTask* forked = nullptr;
  enter_kernel(cpu, now_ps);
  k.enter(t.t, cpu, now_ps);  // the sys_* functions charge Cost::syscall themselves
  switch (u.sys) {
    case wl::Sys::Mmap: {
      // A file's number (Workload::files()) and page offset above the flags (wl::mmap_file_extra).
      const uint64_t nr = u.extra >> wl::kMmapFileShift;
      const uint64_t pgoff = (u.extra >> wl::kMmapPgoffShift) & ((uint64_t(1) << (wl::kMmapFileShift - wl::kMmapPgoffShift)) - 1);
      MMUSIM_CHECK(nr <= files_.size(), "mmap of file {} of a workload with {} files", nr, files_.size());
      out.ret = k.sys_mmap(t.t, 0, u.addr, int(u.value), int(u.extra & ((1u << wl::kMmapPgoffShift) - 1)),
                           nr ? files_[nr - 1] : nullptr, pgoff << kmm::PAGE_SHIFT);
      break;
    }
    case wl::Sys::MmapFixed:
      out.ret = k.sys_mmap(t.t, u.addr, u.value, int(u.extra), kmm::MAP_PRIVATE | kmm::MAP_ANONYMOUS | kmm::MAP_FIXED);
      break;
    case wl::Sys::MmapFile: out.ret = k.mmap_file_stand_in(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Gate: break;  // (above)
    case wl::Sys::Munmap: out.ret = k.sys_munmap(t.t, u.addr, u.value); break;
    case wl::Sys::Mprotect: out.ret = k.sys_mprotect(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Madvise: out.ret = k.sys_madvise(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Msync: out.ret = k.sys_msync(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Fork: {
      kmm::task_struct* child = k.sys_fork(t.t);
      const int cpu = sched_.cpu_for_fork(t.cpu);
      child->cpu = cpu;
      forked = sched_.add(child, workload_->child_program(forks_++, u.addr), cpu);
      sched_.make_runnable(forked, now_ps);
      out.ret = child->pid;
      break;
    }
    case wl::Sys::Clone: {
      kmm::task_struct* th = k.sys_clone_thread(t.t);
      const int cpu_of = sched_.cpu_for_thread(unsigned(u.addr));
      th->cpu = cpu_of;
      auto prog = workload_->thread_program(unsigned(u.addr), u.value, u.extra);
      MMUSIM_CHECK(prog, "the workload cloned a thread it has no program for");
      sched_.make_runnable(sched_.add(th, std::move(prog), cpu_of), now_ps);
      out.ret = th->pid;
      break;
    }
    case wl::Sys::Barrier: {
      // A futex-based barrier: the last arrival wakes the others; their wait returns now.
      k.charge(kmm::Cost::syscall);
      auto& b = barriers_[u.addr];
      b.push_back(&t);
      if (b.size() < u.value) {
        t.blocked = true;
        out.blocked = true;
      } else {
        if (region_at_barrier_) {
          begin_region(region_start_, region_end_ - region_start_, now_ps);
          if (trace_.on())
            trace_.event(now_ps, cpu, TraceTask{t.t->comm, t.t->pid}, "region_begin",
                         {TraceField::hex("start", region_start_), TraceField::hex("end", region_end_)});
        }
        for (SimTask* w : b) {
          if (w == &t) continue;
          w->blocked = false;
          w->prog->syscall_return(0);
          sched_.make_runnable(w, now_ps);
        }
        b.clear();
      }
      break;
    }
    case wl::Sys::Exit: {
      k.sys_exit(t.t, int(u.addr));
      t.exited = true;
      out.exited = true;
      for (auto& p : sched_.tasks()) {
        if (p->waiting_for == &t) {  // wake the parent; its wait() returns now
          p->waiting_for = nullptr;
          p->blocked = false;
          out.ret = k.sys_wait(p->t, t.t);
          p->prog->syscall_return(t.t->pid);
          sched_.make_runnable(p.get(), now_ps);
        }
      }
      break;
    }
    case wl::Sys::Wait: {
      SimTask* child = sched_.find_pid(int(u.addr));
      MMUSIM_CHECK(child, "wait() for pid {} that does not exist", u.addr);
      if (child->exited) {
        out.ret = k.sys_wait(t.t, child->t);
      } else {
        t.blocked = true;
        t.waiting_for = child;
        out.blocked = true;
      }
      break;
    }
    case wl::Sys::Yield: k.charge(kmm::Cost::syscall); break;
    case wl::Sys::Nanosleep:
      // hrtimer_nanosleep(): the task sleeps until the timer fires, its CPU free (below).
      k.charge(kmm::Cost::syscall);
      if (!io_sleep_) panic("nanosleep() on a platform without timed sleeps (the functional one)");
      sleep_ns = u.addr;
      break;
    case wl::Sys::None:
      k.charge(kmm::Cost::syscall);
      // A recorded system call the port does not model: its class's time (workload.syscall_time).
      if (u.addr >= 1 && u.addr <= wp_.syscall_time.size())
        extra_cycles = wp_.syscall_time[u.addr - 1].cycles(ghz(cpu));
      break;
  }
  // A call that charged memory may have made the memcg's OOM killer kill tasks (the caller
  // among them, whose charge then failed: it dies on its way back to user mode).
  deliver_fatal_signals(&t, now_ps);
  if (out.ret < 0 && u.sys != wl::Sys::Wait && !t.killed) {
    if (!(u.flags & wl::kUopReplayed))
      panic("the workload's {} system call failed with {} (task {})", int(u.sys), out.ret, t.t->pid);
    MMUSIM_CHECK(syscalls_refused_, "a replayed system call outside a trace workload");
    if (!syscalls_refused_->value())
      log::get("system")->warn("a replayed system call ({}, {:#x}, {:#x}, {:#x}) failed in the kernel "
                               "port with {} where the recorded one succeeded (trace.syscalls_refused "
                               "counts them)",
                               int(u.sys), u.addr, u.value, u.extra, out.ret);
    syscalls_refused_->inc();
  }
  if (gate_key) {
    // This ordered call has run: the next one of the process may.
    Gate& g = gates_[gate_key];
    ++g.passed;
    if (auto it = g.waiting.find(g.passed); it != g.waiting.end()) {
      SimTask* w = it->second;
      g.waiting.erase(it);
      w->blocked = false;
      w->prog->syscall_return(0);
      sched_.make_runnable(w, now_ps);
    }
  }
  // The return to user mode: memory.high's reclaim and throttling (exit_to_user_mode_loop()); a
  // task that blocks returns later, and does it after its next entry.
  if (!out.exited && !out.blocked) k.resume_user_mode_work();
  const double throttle = k.cost().throttle_cycles;
  const double io_wait = k.cost().io_wait_cycles;
  out.cycles = leave_kernel() + extra_cycles;
  // It slept waiting for mmap_lock (an mmap() or munmap() behind another writer), for the disk
  // (msync(MS_SYNC)'s writes) or was throttled for memory.high: its CPU was free meanwhile (the
  // sleep's place in the call is not kept).
  const double lock_slept = locks_ ? locks_->slept() : 0.0;
  if (io_sleep_ && lock_slept + throttle + io_wait > 0 && !out.blocked && !out.exited) {
    out.sleep_cycles = std::min(lock_slept + throttle + io_wait, out.cycles);
    sched_.sleep_until(cpu, now_ps + cycles_to_ps(out.cycles, cpu));
    if (lock_slept > 0) lock_sleeps_.inc();
    if (io_wait > 0) io_sleeps_.inc();
  }
  if (forked) forked->not_before_ps = now_ps + cycles_to_ps(out.cycles, cpu);
  if (sleep_ns) {
    // Its result is 0 when it wakes; it leaves the CPU now.
    t.prog->syscall_return(0);
    sched_.sleep_until(cpu, now_ps + cycles_to_ps(out.cycles, cpu) + sleep_ns * 1000);
    out.blocked = true;
  }
  if (!out.blocked && !out.exited) t.prog->syscall_return(out.ret);
  return out;
}

}  // namespace mmusim
