// SPDX-License-Identifier: GPL-2.0-only
// The simulated tasks and where they run. A run queue per CPU, ordered as EEVDF orders it (6.12,
// kernel/sched/fair.c; tasks of equal weight): each task has a virtual runtime (its time on the
// CPU) and a deadline a slice after it; the task to run is the eligible one (vruntime at or below
// the queue's average, avg_vruntime()) with the earliest deadline (pick_eevdf()), the running one
// kept until its deadline while it stays eligible (RUN_TO_PARITY). The running task's vruntime
// advances at every check (update_curr()); past its deadline it gets a new one a slice later
// (update_deadline()) and is preempted if another task waits. A task that sleeps keeps its lag
// (vlag = avg - vruntime, clamped) and is placed with it when it wakes (place_entity(), PLACE_LAG);
// a new one starts at the average with half a slice (PLACE_DEADLINE_INITIAL). The checks run at the
// scheduler tick and whenever a task is queued on the CPU (resched_check(): task_tick_fair(),
// check_preempt_wakeup_fair()). A task runs until it blocks (wait(), a barrier, a sleep on the disk
// or on mmap_lock: sleep_until(), woken when the time comes), exits or is preempted. Placement:
// the first task on CPU 0, a fork child on the idlest CPU (cpu_for_fork), thread i on the CPU
// cpu_for_thread() gives. With sched.affinity = pinned (the reference benchmarks pin their
// threads) a task stays where it was placed. With `all` (no affinity mask, as an unpinned
// program runs) two of the load balancer's paths move tasks (kernel/sched/fair.c, 6.12):
//   - wake-up placement: a task woken while its CPU is busy goes to an idle CPU of the same LLC
//     (select_task_rq_fair() -> select_idle_sibling(): the previous CPU if idle, else an idle
//     core, else an idle hardware thread, scanned from the previous CPU on);
//   - new-idle balancing: a CPU about to idle pulls a queued task from the busiest CPU of its
//     smallest domain that has one (sched_balance_newidle() -> sched_balance_rq() ->
//     detach_tasks(): SMT siblings, then the LLC, then the other NUMA nodes), one that has not run
//     in the last sysctl_sched_migration_cost (0.5 ms: task_hot(), can_migrate_task()).
// Not modelled: weights (nice), the periodic and nohz-idle balancing (sched_balance_domains():
// intervals of sd_weight ms, times busy_factor 16 on a busy CPU: 20-320 ms on the i7-12700,
// beyond the simulated runs' length), the lag's decay while a task sleeps long (DELAY_DEQUEUE),
// the price of the balancing itself. The context switch itself is the kernel's (System::schedule
// charges it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "kernel_mm/kernel.hpp"
#include "workloads/program.hpp"

namespace mmusim {

// A simulated thread: the kernel's task and the program it runs.
struct SimTask {
  kmm::task_struct* t = nullptr;
  std::unique_ptr<wl::Program> prog;
  // What a CPU runs: prog, after the micro-ops a core handed back when the task went to sleep.
  std::unique_ptr<wl::ResumableProgram> resumable;
  int cpu = 0;
  bool blocked = false;
  // Asleep until then (blocked): a page fault waits for the disk (TASK_UNINTERRUPTIBLE in
  // folio_wait_bit_common()); the read's completion wakes it (folio_end_read() ->
  // folio_wake_bit()). 0: not asleep.
  uint64_t sleep_until_ps = 0;
  bool exited = false;
  // Died of a fatal signal (its number; 0: not killed): System::deliver_fatal_signals() saw the
  // kernel's task_struct::fatal_signal and made its program end in an exit.
  int killed = 0;
  SimTask* waiting_for = nullptr;  // wait() on this child
  // A fork child runs from the end of its parent's fork() on (kernel_clone() wakes it last,
  // wake_up_new_task()): a CPU that switches to it sooner waits until then (several cores).
  uint64_t not_before_ps = 0;
  // EEVDF (ps): virtual runtime, deadline, lag kept while not runnable, when it began to run.
  int64_t vruntime = 0;
  int64_t deadline = 0;
  int64_t vlag = 0;
  uint64_t exec_start_ps = 0;
  bool protect = false;  // RUN_TO_PARITY: picked and not yet past its deadline
  bool to_place = true;  // queued, not yet placed (place_entity() at its CPU's next check)
  bool fresh = true;     // never ran: placed at the average with half a slice
  // Preempted: queued again; it stays its CPU's current task (for the context switch's
  // accounting) until the CPU switches.
  bool preempted = false;
  // When it was last queued (runnable from then on) and last left a CPU (0: never ran): a task
  // another CPU takes runs there from queued_ps on (System::schedule waits for runnable_from_ps),
  // and one that left a CPU less than the migration cost ago is cache-hot (task_hot()).
  uint64_t queued_ps = 0;
  uint64_t runnable_from_ps = 0;
  uint64_t last_ran_ps = 0;
  bool ran = false;
};

class Scheduler {
 public:
  explicit Scheduler(unsigned cpus = 1) { set_cpus(cpus); }
  // `threads_per_core`: SMT (2): logical CPUs 2n and 2n+1 are the hardware threads of core n, as
  // Linux numbers an Alder Lake's P-cores (docs/research-smt-ecores.md §3).
  // `sockets`: CPUs [n * cpus / sockets, (n + 1) * cpus / sockets) are socket n's (a NUMA node).
  // `ecores`: the last `ecores` of the `cpus` are single-threaded E-cores, numbered after every
  // P-core thread (the i7-12700: CPUs 16-19 with SMT, 8-11 without; research §3.1).
  void set_cpus(unsigned cpus, unsigned threads_per_core = 1, unsigned sockets = 1, unsigned ecores = 0) {
    running_.assign(cpus, nullptr);
    runq_.assign(cpus, {});
    threads_per_core_ = threads_per_core;
    sockets_ = sockets;
    ecores_ = ecores;
  }
  // How the workload's threads are placed (sched.placement).
  enum class Placement : uint8_t {
    spread,     // as Linux spreads busy pinned-by-nobody threads: idle cores first (below)
    by_number,  // thread i on CPU i mod CPUs: `taskset -c i`
  };
  void set_placement(Placement p) { placement_ = p; }
  Placement placement() const { return placement_; }
  // Whether tasks may move to another CPU (sched.affinity; see the top).
  enum class Affinity : uint8_t {
    pinned,  // each task stays on the CPU it was placed on (taskset, sched_setaffinity)
    all,     // any CPU: wake-up placement and new-idle balancing move tasks
  };
  void set_affinity(Affinity a) { affinity_ = a; }
  Affinity affinity() const { return affinity_; }
  // Why a task moved (sched_migrate_task): an idle CPU pulled it, or it woke on an idle CPU.
  enum class Migration : uint8_t { newidle, wakeup };
  void set_on_migrate(std::function<void(const SimTask&, int from, int to, uint64_t now_ps, Migration)> f) {
    on_migrate_ = std::move(f);
  }
  // sysctl_sched_migration_cost (kernel/sched/fair.c: 500000 ns).
  static constexpr uint64_t kMigrationCostPs = 500'000'000;

  // A new task placed on `cpu` (not yet runnable: make_runnable()).
  SimTask* add(kmm::task_struct* t, std::unique_ptr<wl::Program> prog, int cpu);
  // Queues the task on its CPU, at `now_ps` (the waker's time), and wakes that CPU (it may
  // idle). A task woken from a wait goes to an idle CPU first if it may (select_idle_sibling()).
  void make_runnable(SimTask* t, uint64_t now_ps);
  // The CPU the workload's thread `index` is pinned to. `spread`: one thread per P-core first,
  // then the E-cores, then the P-cores' second hardware threads: the steady state Linux reaches
  // for N busy threads on a hybrid part (capacity-aware placement fills the idle big cores, then
  // the idle small ones, and uses an SMT sibling only when no core is idle;
  // docs/research-smt-ecores.md §3.4). Without E-cores: every core, then the siblings.
  // `by_number`: CPU index mod CPUs.
  int cpu_for_thread(unsigned index) const {
    const unsigned cpus = unsigned(running_.size());
    unsigned k = index % cpus;
    if (placement_ == Placement::by_number) return int(k);
    const unsigned pcores = (cpus - ecores_) / threads_per_core_;
    if (k < pcores) return int(k * threads_per_core_);
    k -= pcores;
    if (k < ecores_) return int(pcores * threads_per_core_ + k);
    k -= ecores_;  // the siblings: thread 1 of each P-core, then thread 2, ...
    return int((k % pcores) * threads_per_core_ + 1 + k / pcores);
  }

  // Where a fork child starts: wake_up_new_task() -> select_task_rq_fair(SD_BALANCE_FORK) ->
  // sched_balance_find_dst_cpu() (kernel/sched/fair.c) takes the idlest CPU of the parent's
  // domain. Here: the CPU with the fewest tasks running or queued, the parent's own on a tie,
  // else in cpu_for_thread()'s order (an idle core before an idle SMT sibling). One CPU: the
  // parent's. Several sockets: the search starts at the NUMA domain, whose groups are the nodes
  // (find_idlest_group()): the node with the most idle CPUs, the parent's on a tie, then the
  // idlest CPU in it. (6.12 also lets a few tasks stay on the parent's node while another has more
  // idle CPUs, sd->imb_numa_nr / allow_numa_imbalance(): not modelled; the kernels before 5.18,
  // V9's among them, spread at once as here.)
  int cpu_for_fork(int parent_cpu) const;

  SimTask* current(int cpu) const { return running_[size_t(cpu)]; }
  // The current task of `cpu` can go on running (no switch).
  bool keeps_running(int cpu) const {
    const SimTask* t = current(cpu);
    return t && !t->blocked && !t->exited && !t->preempted;
  }
  // The base slice, scaled for the CPUs (PlatformParams::slice_ps()).
  void set_slice(uint64_t slice_ps) { slice_ps_ = slice_ps; }
  // The check at a tick or after a task was queued on `cpu` (sleepers due by now woken, new
  // arrivals placed): update_curr(); the current task is preempted (queued again; true: the CPU
  // switches) if its deadline passed while another task waits, or if pick_eevdf() now picks
  // another.
  bool resched_check(int cpu, uint64_t now_ps);
  // The next queued task that can run becomes `cpu`'s current one (null: the CPU idles); first
  // the tasks of `cpu` whose sleep has ended by `now_ps` are woken (queued). With nothing to run
  // and `balance`, the CPU first pulls a task (sched.affinity = all: sched_balance_newidle()).
  SimTask* switch_to_next(int cpu, uint64_t now_ps, bool balance = true);
  // The current task of `cpu` sleeps until `until_ps` (try_to_wake_up() queues it on its CPU
  // then, behind whatever is queued: no preemption).
  void sleep_until(int cpu, uint64_t until_ps);
  // When the earliest sleeper of `cpu` wakes (0: none): an idle CPU waits for it.
  uint64_t next_wake_ps(int cpu) const;
  bool all_exited() const;
  SimTask* find_pid(int pid) const;
  const std::vector<std::unique_ptr<SimTask>>& tasks() const { return tasks_; }
  // The platform wakes an idle core when a task becomes runnable on it.
  void set_wake(std::function<void(int cpu)> f) { wake_ = std::move(f); }

 private:
  std::vector<std::unique_ptr<SimTask>> tasks_;
  std::vector<SimTask*> running_;
  unsigned threads_per_core_ = 1;
  unsigned sockets_ = 1;
  unsigned ecores_ = 0;
  Placement placement_ = Placement::spread;
  std::vector<std::deque<SimTask*>> runq_;
  std::vector<SimTask*> sleeping_;  // in the order they went to sleep
  std::function<void(int)> wake_;
  // Queues the sleepers of `cpu` whose sleep has ended by `now_ps`, earliest first.
  void wake_due(int cpu, uint64_t now_ps);
  // The load balancer's paths (sched.affinity = all; see the top).
  Affinity affinity_ = Affinity::pinned;
  std::function<void(const SimTask&, int, int, uint64_t, Migration)> on_migrate_;
  size_t nr_running(int cpu) const;  // rq->nr_running: the running task and the queued runnable ones
  bool idle_cpu(int cpu) const { return nr_running(cpu) == 0; }
  int socket_of(int cpu) const { return int(unsigned(cpu) / (unsigned(running_.size()) / sockets_)); }
  int smt_sibling(int cpu) const;  // -1: none
  int select_idle_sibling(int target) const;
  // Queues `t` (runnable from `at_ps`) on `cpu`, the CPU it wakes on (wake-up placement applied).
  void enqueue_woken(SimTask* t, int cpu, uint64_t at_ps);
  void move_task(SimTask* t, int to, uint64_t now_ps, Migration why);
  bool sched_balance_newidle(int cpu, uint64_t now_ps);
  // EEVDF on one CPU's queue (see the top).
  bool runnable(const SimTask* t) const { return !t->blocked && !t->exited; }
  bool update_curr(int cpu, uint64_t now_ps);   // true: the deadline was renewed
  int64_t avg_vruntime(int cpu, const SimTask* leave_out) const;
  void place_pending(int cpu, uint64_t now_ps);
  SimTask* pick_eevdf(int cpu) const;
  uint64_t slice_ps_ = 0;
};

}  // namespace mmusim
