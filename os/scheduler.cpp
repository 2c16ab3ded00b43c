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

void Scheduler::make_runnable(SimTask* t) {
  t->to_place = true;
  runq_[size_t(t->cpu)].push_back(t);
  if (wake_) wake_(t->cpu);
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
    due->sleep_until_ps = 0;
    due->to_place = true;
    runq_[size_t(cpu)].push_back(due);
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

SimTask* Scheduler::switch_to_next(int cpu, uint64_t now_ps) {
  // The task leaving the CPU: its runtime, and its lag if it blocked (update_entity_lag():
  // clamped to twice the slice, at least a tick's worth [4 ms]).
  if (SimTask* prev = running_[size_t(cpu)]) {
    if (runnable(prev) && !prev->preempted) {
      // Still runnable (not asked to switch): it goes back to the queue.
      update_curr(cpu, now_ps);
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
        const int64_t limit = int64_t(std::max<uint64_t>(2 * slice_ps_, 4'000'000'000ull));
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
  if (!next) return nullptr;
  q.erase(std::find(q.begin(), q.end(), next));
  running_[size_t(cpu)] = next;
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
