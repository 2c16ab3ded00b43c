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

SimTask* Scheduler::switch_to_next(int cpu, uint64_t now_ps) {
  // Wake-ups due by now, earliest first (then in the order they slept).
  for (;;) {
    SimTask* due = nullptr;
    for (SimTask* t : sleeping_)
      if (t->cpu == cpu && t->sleep_until_ps <= now_ps && (!due || t->sleep_until_ps < due->sleep_until_ps)) due = t;
    if (!due) break;
    sleeping_.erase(std::find(sleeping_.begin(), sleeping_.end(), due));
    due->blocked = false;
    due->sleep_until_ps = 0;
    runq_[size_t(cpu)].push_back(due);
  }
  auto& q = runq_[size_t(cpu)];
  while (!q.empty() && (q.front()->blocked || q.front()->exited)) q.pop_front();
  if (q.empty()) {
    running_[size_t(cpu)] = nullptr;
    return nullptr;
  }
  SimTask* next = q.front();
  q.pop_front();
  running_[size_t(cpu)] = next;
  return next;
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
