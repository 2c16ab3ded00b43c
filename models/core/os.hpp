// SPDX-License-Identifier: GPL-2.0-only
// What a core model needs from the rest of the system: which task to run, system calls, fault
// delivery into the kernel, the workload's markers. Implemented by the platform's System
// (platforms/common); the core sees only this.
#pragma once

#include "base/store_drain.hpp"

#include <cstdint>

#include "base/trace.hpp"
#include "workloads/program.hpp"

namespace mmusim::hw {

struct RunContext {
  wl::Program* prog = nullptr;
  uint16_t asid = 0;      // PCID / ASID of the task's mm
  uint64_t root_pa = 0;   // CR3 / TTBR0: the top-level table
  TraceTask task;
  // Non-zero once the task has a fatal signal (the platform's SimTask::killed): the core drops
  // what it fetched for it and fetches again, which gives the task's exit (an interrupt between
  // instructions: the kernel's kick of a CPU running a task it killed). Null: never.
  const int* killed = nullptr;
};

struct OsCall {
  double cycles = 0;       // time in the kernel
  bool reschedule = false; // the task blocked or exited
  // Of `cycles`: how long the task slept in the call; the CPU is free after `cycles -
  // sleep_cycles` (the task leaves it, reschedule is set) and the task runs again once woken.
  double sleep_cycles = 0;
};

struct OsFault {
  double cycles = 0;       // exception entry + kernel + exit
  int kind = 0;            // kmm::FaultKind
  bool in_region = false;  // the address is in the measured region, while it is being measured
  bool signal = false;     // SIGSEGV/SIGBUS: the task's process dies (RunContext::killed ends it)
  // Cycles from the start of the exception entry to the handler's first instruction that waits
  // until the CPU's older stores are globally visible (x86: the first LOCK-prefixed instruction,
  // in lock_vma_under_rcu; arm64: a DSB); < 0: the handler has none. The core holds the handler
  // there until its store buffer has drained.
  double store_barrier_at = -1;
  bool exit_drains_stores = false;  // the exception return waits for the store buffer (x86 IRET)
  // Of `cycles`: how long the handler waited there for the store buffer (store_drain_wait).
  double store_wait = 0;
  // Of `cycles`: how long the task slept (it waited for the disk). The CPU is free after
  // `cycles - sleep_cycles`: the task leaves it, handing back the micro-ops fetched for it
  // (Program::put_back()), and runs again once it has woken and is scheduled.
  double sleep_cycles = 0;
};


class Os {
 public:
  virtual ~Os() = default;
  // The task `cpu` should run at `now_ps` (false: none runnable); `cycles` is the context switch.
  virtual bool schedule(int cpu, uint64_t now_ps, RunContext* ctx, double* cycles) = 0;
  virtual bool all_exited() const = 0;
  // When the earliest task asleep on `cpu` wakes, in ps (0: none): an idle CPU waits until then.
  virtual uint64_t next_wake_ps(int cpu) const { return 0; }
  // The scheduler tick's period in ps (0: none, no preemption), and the scheduler's check at a
  // tick or a wake-up on `cpu` at `now_ps`, taken at an instruction boundary: true if it preempts
  // the running task (`cycles`: the interrupt's entry and return); the core then hands the task's
  // fetched micro-ops back and schedules.
  virtual uint64_t tick_ps() const { return 0; }
  virtual bool resched_check(int cpu, uint64_t now_ps, double* cycles) { return false; }
  virtual OsCall syscall(int cpu, const wl::Uop& u, uint64_t now_ps) = 0;
  // A page fault taken at `now_ps`; the core's buffered stores drain `stores_drain` cycles later
  // (0: none buffered). The fault's cycles include the handler's wait for them (store_drain_wait).
  virtual OsFault page_fault(int cpu, uint64_t va, uint64_t syndrome, uint64_t ip, uint64_t now_ps,
                             double stores_drain) = 0;
  virtual void marker(int cpu, const wl::Uop& u, uint64_t now_ps) = 0;
  virtual bool region_active() const = 0;
  // What the core reports of retirement, for whoever measures the workload (the platform's
  // wl::FaultLatencyMeter): rare events only, never a call per micro-op; times in core cycles.
  // An RDTSCP retired (`cycle`: when it read the TSC).
  virtual void rdtscp_retired(int cpu, uint64_t cycle) = 0;
  // A fault was taken on the micro-op at the head of the ROB, there since `head_cycle`;
  // `repeat`: the same micro-op faulted before and has not retired since.
  virtual void fault_taken(int cpu, uint64_t head_cycle, bool repeat, const OsFault& f) = 0;
  // The micro-op that faulted retired at `cycle`.
  virtual void faulted_retired(int cpu, uint64_t cycle) = 0;
  virtual double ghz() const = 0;
  // CPU `cpu`'s clock, where CPUs differ (E-cores); its cycles are that CPU's.
  virtual double ghz(int cpu) const { return ghz(); }
};

}  // namespace mmusim::hw
