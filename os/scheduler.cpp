// SPDX-License-Identifier: GPL-2.0-only
#include "os/scheduler.hpp"

#include <algorithm>

namespace mmusim {

SimTask* Scheduler::add(kmm::task_struct* t, std::unique_ptr<wl::Program> prog, int cpu) {
  auto st = std::make_unique<SimTask>();
  st->t = t;
  st->prog = std::move(prog);
  st->resumable = std::make_unique<wl::ResumableProgram>(st->prog.get());
  st->cpu = cpu;
  tasks_.push_back(std::move(st));
  return tasks_.back().get();
}

void Scheduler::make_runnable(SimTask* t, uint64_t now_ps) {
  t->to_place = true;
  t->queued_ps = now_ps;
  // try_to_wake_up() -> select_task_rq(): a task woken from a wait may go to an idle CPU; a new
  // one starts where it was placed (wake_up_new_task(): cpu_for_fork(), cpu_for_thread()).
  if (affinity_ == Affinity::all && t->ran) {
    const int to = select_idle_sibling(t->cpu);
    if (to != t->cpu) {
      const int from = t->cpu;
      t->cpu = to;
      t->runnable_from_ps = now_ps;
      if (on_migrate_) on_migrate_(*t, from, to, now_ps, Migration::wakeup);
    }
  }
  runq_[size_t(t->cpu)].push_back(t);
  if (wake_) wake_(t->cpu);
}

size_t Scheduler::nr_running(int cpu) const {
  size_t n = 0;
  if (const SimTask* r = running_[size_t(cpu)]; r && runnable(r) && !r->preempted) ++n;
  for (const SimTask* q : runq_[size_t(cpu)])
    if (runnable(q)) ++n;
  return n;
}

int Scheduler::smt_sibling(int cpu) const {
  if (threads_per_core_ < 2) return -1;
  const unsigned pthreads = unsigned(running_.size()) - ecores_;
  return unsigned(cpu) < pthreads ? (cpu ^ 1) : -1;
}

// select_idle_sibling() (kernel/sched/fair.c) for a wake-up whose target is the task's previous
// CPU (the waker's CPU is not preferred here: wake_affine() is not modelled): the target if it is
// idle; else, within the target's LLC (its socket), the first idle core (every hardware thread
// idle: select_idle_core()), then the first idle hardware thread (select_idle_cpu()), scanning
// from the CPU after the target (for_each_cpu_wrap(..., target + 1)); else the target. (SIS_UTIL's
// limit on the scan's length is not modelled: the whole LLC is scanned.)
int Scheduler::select_idle_sibling(int target) const {
  if (idle_cpu(target)) return target;
  const int n = int(running_.size());
  const int llc = socket_of(target);
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 1; i < n; ++i) {
      const int c = (target + i) % n;
      if (socket_of(c) != llc || !idle_cpu(c)) continue;
      const int sib = smt_sibling(c);
      if (pass == 1 || sib < 0 || idle_cpu(sib)) return c;
    }
  return target;
}

namespace {
// update_entity_lag()'s clamp: twice the slice, at least a tick's worth (4 ms).
int64_t lag_limit(uint64_t slice_ps) { return int64_t(std::max<uint64_t>(2 * slice_ps, 4'000'000'000ull)); }
}  // namespace

// detach_task() + attach_task(): `t`, queued on its CPU and not running, moves to `to`'s queue
// with its lag (dequeue_entity() -> update_entity_lag(); place_entity() on the new queue), and
// runs there from when it became runnable on.
void Scheduler::move_task(SimTask* t, int to, uint64_t now_ps, Migration why) {
  const int from = t->cpu;
  auto& q = runq_[size_t(from)];
  q.erase(std::find(q.begin(), q.end(), t));
  if (!t->to_place) {
    const int64_t limit = lag_limit(slice_ps_);
    t->vlag = std::clamp(avg_vruntime(from, t) - t->vruntime, -limit, limit);
    t->to_place = true;
  }
  t->cpu = to;
  t->runnable_from_ps = t->queued_ps;
  runq_[size_t(to)].push_back(t);
  if (on_migrate_) on_migrate_(*t, from, to, now_ps, why);
}

// sched_balance_newidle() -> sched_balance_rq(CPU_NEWLY_IDLE) over the CPU's domains from the
// smallest (its SMT sibling, its LLC, every node): in the first domain with a CPU running more than
// one task (sched_balance_find_src_group()/_src_rq(): the busiest, the lowest-numbered on a tie)
// that has a task it may take, one such task moves here (an idle CPU's imbalance is a task:
// calculate_imbalance(), migrate_task). detach_tasks() looks from the tail of cfs_tasks, the least
// recently run first: here the task queued longest. can_migrate_task(): not running, allowed here
// (sched.affinity), not cache-hot (task_hot(): it ran in the last sysctl_sched_migration_cost).
// (The kernel skips the balance when the CPU's average idle time is below the balance's own cost,
// sd->max_newidle_lb_cost, a few microseconds: not modelled.)
bool Scheduler::sched_balance_newidle(int cpu, uint64_t now_ps) {
  const int n = int(running_.size());
  auto candidate = [&](int src) -> SimTask* {
    const SimTask* cur = running_[size_t(src)];
    for (SimTask* t : runq_[size_t(src)]) {
      if (!runnable(t) || t == cur) continue;
      if (t->ran && now_ps < t->last_ran_ps + kMigrationCostPs) continue;  // task_hot()
      return t;
    }
    return nullptr;
  };
  const int sib = smt_sibling(cpu);
  for (int level = 0; level < 3; ++level) {
    if (level == 0 && sib < 0) continue;
    if (level == 2 && sockets_ < 2) break;
    int busiest = -1;
    size_t most = 1;
    SimTask* take = nullptr;
    for (int c = 0; c < n; ++c) {
      if (c == cpu) continue;
      if (level == 0 && c != sib) continue;
      if (level == 1 && socket_of(c) != socket_of(cpu)) continue;
      const size_t r = nr_running(c);
      if (r <= most) continue;
      if (SimTask* t = candidate(c)) {
        busiest = c;
        most = r;
        take = t;
      }
    }
    if (busiest >= 0) {
      move_task(take, cpu, now_ps, Migration::newidle);
      return true;
    }
  }
  return false;
}

void Scheduler::sleep_until(int cpu, uint64_t until_ps) {
  SimTask* t = running_[size_t(cpu)];
  MMUSIM_CHECK(t && !t->blocked, "cpu {}: no running task to put to sleep", cpu);
  t->blocked = true;
  t->sleep_until_ps = until_ps;
  sleeping_.push_back(t);
}

uint64_t Scheduler::next_wake_ps(int cpu) const {
  uint64_t first = 0;
  for (const SimTask* t : sleeping_)
    if (t->cpu == cpu && (first == 0 || t->sleep_until_ps < first)) first = t->sleep_until_ps;
  return first;
}

void Scheduler::wake_due(int cpu, uint64_t now_ps) {
  // Wake-ups due by now, earliest first (then in the order they slept).
  for (;;) {
    SimTask* due = nullptr;
    for (SimTask* t : sleeping_)
      if (t->cpu == cpu && t->sleep_until_ps <= now_ps && (!due || t->sleep_until_ps < due->sleep_until_ps)) due = t;
    if (!due) break;
    sleeping_.erase(std::find(sleeping_.begin(), sleeping_.end(), due));
    due->blocked = false;
    due->queued_ps = due->sleep_until_ps;
    due->sleep_until_ps = 0;
    due->to_place = true;
    // The completion's try_to_wake_up(): an idle CPU of the LLC if this one is busy (see make_runnable()).
    const int to = affinity_ == Affinity::all ? select_idle_sibling(cpu) : cpu;
    if (to != cpu) {
      due->cpu = to;
      due->runnable_from_ps = due->queued_ps;
      if (on_migrate_) on_migrate_(*due, cpu, to, now_ps, Migration::wakeup);
    }
    runq_[size_t(to)].push_back(due);
    if (to != cpu && wake_) wake_(to);
  }
}

bool Scheduler::update_curr(int cpu, uint64_t now_ps) {
  SimTask* cur = running_[size_t(cpu)];
  if (!cur || !runnable(cur) || cur->preempted) return false;
  if (now_ps > cur->exec_start_ps) {
    cur->vruntime += int64_t(now_ps - cur->exec_start_ps);
    cur->exec_start_ps = now_ps;
  }
  if (cur->vruntime < cur->deadline) return false;
  // update_deadline(): a new slice; the protection of RUN_TO_PARITY ends.
  cur->deadline = cur->vruntime + int64_t(slice_ps_);
  cur->protect = false;
  return true;
}

// avg_vruntime(): the mean vruntime of the CPU's runnable tasks (placed ones), the running one
// included, `leave_out` not.
int64_t Scheduler::avg_vruntime(int cpu, const SimTask* leave_out) const {
  int64_t sum = 0, n = 0;
  const SimTask* cur = running_[size_t(cpu)];
  if (cur && cur != leave_out && runnable(cur) && !cur->preempted) {
    sum += cur->vruntime;
    ++n;
  }
  for (const SimTask* t : runq_[size_t(cpu)])
    if (t != leave_out && runnable(t) && !t->to_place) {
      sum += t->vruntime;
      ++n;
    }
  return n ? sum / n : 0;
}

// place_entity() for the tasks queued on `cpu` since its last check: at the average, less the lag
// they kept (scaled by (n + 1) / n, as the kernel keeps the average where it was), a deadline a
// slice later; a new task without lag and half a slice (PLACE_DEADLINE_INITIAL).
void Scheduler::place_pending(int cpu, uint64_t now_ps) {
  for (SimTask* t : runq_[size_t(cpu)]) {
    if (!t->to_place || !runnable(t)) continue;
    int64_t n = 0;
    const SimTask* cur = running_[size_t(cpu)];
    if (cur && cur != t && runnable(cur) && !cur->preempted) ++n;
    for (const SimTask* o : runq_[size_t(cpu)])
      if (o != t && runnable(o) && !o->to_place) ++n;
    if (n) {
      const int64_t lag = t->fresh ? 0 : t->vlag * (n + 1) / n;
      t->vruntime = avg_vruntime(cpu, t) - lag;
    }
    t->deadline = t->vruntime + int64_t(t->fresh ? slice_ps_ / 2 : slice_ps_);
    t->to_place = false;
    t->fresh = false;
  }
}

// pick_eevdf(): the running task while RUN_TO_PARITY protects it and it is eligible; else the
// eligible task (vruntime <= average) with the earliest deadline, the first queued on a tie.
SimTask* Scheduler::pick_eevdf(int cpu) const {
  const int64_t avg = avg_vruntime(cpu, nullptr);
  SimTask* cur = running_[size_t(cpu)];
  const bool cur_runs = cur && runnable(cur) && !cur->preempted;
  if (cur_runs && cur->protect && cur->vruntime <= avg) return cur;
  SimTask* best = nullptr;
  auto consider = [&](SimTask* t) {
    if (t->vruntime > avg) return;
    if (!best || t->deadline < best->deadline) best = t;
  };
  if (cur_runs) consider(cur);
  for (SimTask* t : runq_[size_t(cpu)])
    if (runnable(t) && !t->to_place) consider(t);
  if (!best) {  // (rounding: the smallest vruntime is always eligible)
    for (SimTask* t : runq_[size_t(cpu)])
      if (runnable(t) && !t->to_place && (!best || t->vruntime < best->vruntime)) best = t;
    if (!best && cur_runs) best = cur;
  }
  return best;
}

SimTask* Scheduler::switch_to_next(int cpu, uint64_t now_ps, bool balance) {
  // The task leaving the CPU: its runtime, and its lag if it blocked (update_entity_lag():
  // clamped to twice the slice, at least a tick's worth [4 ms]).
  if (SimTask* prev = running_[size_t(cpu)]) {
    prev->last_ran_ps = now_ps;
    if (runnable(prev) && !prev->preempted) {
      // Still runnable (not asked to switch): it goes back to the queue.
      update_curr(cpu, now_ps);
      prev->queued_ps = now_ps;
      runq_[size_t(cpu)].push_back(prev);
    } else if (!prev->preempted) {
      if (now_ps > prev->exec_start_ps) prev->vruntime += int64_t(now_ps - prev->exec_start_ps);
      prev->exec_start_ps = 0;
      if (!prev->exited) {
        // The average with it, as dequeue_entity() computes the lag before it leaves.
        int64_t sum = prev->vruntime, n = 1;
        for (const SimTask* t : runq_[size_t(cpu)])
          if (runnable(t) && !t->to_place) {
            sum += t->vruntime;
            ++n;
          }
        const int64_t limit = lag_limit(slice_ps_);
        prev->vlag = std::clamp(sum / n - prev->vruntime, -limit, limit);
      }
    } else {
      // Preempted by resched_check(), already queued: the time since its last update.
      if (now_ps > prev->exec_start_ps) {
        prev->vruntime += int64_t(now_ps - prev->exec_start_ps);
        prev->exec_start_ps = now_ps;
      }
      prev->preempted = false;  // queued: a queued task is counted there
    }
    running_[size_t(cpu)] = nullptr;  // (placement and the pick among the queued ones)
  }
  wake_due(cpu, now_ps);
  auto& q = runq_[size_t(cpu)];
  q.erase(std::remove_if(q.begin(), q.end(), [&](const SimTask* t) { return !runnable(t); }), q.end());
  place_pending(cpu, now_ps);
  SimTask* next = pick_eevdf(cpu);
  if (!next && balance && affinity_ == Affinity::all && sched_balance_newidle(cpu, now_ps)) {
    place_pending(cpu, now_ps);
    next = pick_eevdf(cpu);
  }
  if (!next) return nullptr;
  q.erase(std::find(q.begin(), q.end(), next));
  running_[size_t(cpu)] = next;
  next->ran = true;
  next->preempted = false;
  next->exec_start_ps = now_ps;
  next->protect = true;
  return next;
}

bool Scheduler::resched_check(int cpu, uint64_t now_ps) {
  wake_due(cpu, now_ps);
  SimTask* cur = running_[size_t(cpu)];
  if (!cur || !runnable(cur) || cur->preempted) return false;
  const bool renewed = update_curr(cpu, now_ps);
  place_pending(cpu, now_ps);
  auto& q = runq_[size_t(cpu)];
  if (std::none_of(q.begin(), q.end(), [&](const SimTask* t) { return runnable(t); })) return false;
  if (!renewed && pick_eevdf(cpu) == cur) return false;
  cur->preempted = true;
  cur->queued_ps = now_ps;
  q.push_back(cur);
  return true;
}

int Scheduler::cpu_for_fork(int parent_cpu) const {
  auto load = [&](int cpu) {
    size_t n = 0;
    if (const SimTask* r = running_[size_t(cpu)]; r && !r->exited && !r->blocked) ++n;
    for (const SimTask* q : runq_[size_t(cpu)])
      if (!q->exited && !q->blocked) ++n;
    return n;
  };
  const unsigned cpus = unsigned(running_.size());
  const unsigned per_socket = cpus / sockets_;
  // find_idlest_group() at the NUMA level: the node with the most idle CPUs, the parent's on a tie.
  unsigned socket = unsigned(parent_cpu) / per_socket;
  if (sockets_ > 1 && load(parent_cpu) > 0) {
    auto idle = [&](unsigned s) {
      unsigned n = 0;
      for (unsigned c = s * per_socket; c < (s + 1) * per_socket; ++c) n += load(int(c)) == 0;
      return n;
    };
    unsigned best_idle = idle(socket);
    for (unsigned s = 0; s < sockets_; ++s)
      if (const unsigned n = idle(s); n > best_idle) {
        best_idle = n;
        socket = s;
      }
  }
  const bool parents = unsigned(parent_cpu) / per_socket == socket;
  int best = parents ? parent_cpu : -1;
  size_t best_load = parents ? load(parent_cpu) : ~size_t(0);
  for (unsigned i = 0; i < cpus && best_load > 0; ++i) {
    const int cpu = cpu_for_thread(i);
    if (unsigned(cpu) / per_socket != socket) continue;
    const size_t l = load(cpu);
    if (l < best_load) {
      best = cpu;
      best_load = l;
    }
  }
  return best;
}

bool Scheduler::all_exited() const {
  return std::all_of(tasks_.begin(), tasks_.end(), [](auto& t) { return t->exited; });
}

SimTask* Scheduler::find_pid(int pid) const {
  SimTask* found = nullptr;
  for (auto& c : tasks_)
    if (c->t->pid == pid) found = c.get();
  return found;
}

}  // namespace mmusim
