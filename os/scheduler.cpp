// SPDX-License-Identifier: GPL-2.0-only
#include "os/scheduler.hpp"

#include <algorithm>

namespace mmusim {

SimTask* Scheduler::add(kmm::task_struct* t, std::unique_ptr<wl::Program> prog, int cpu) {
  auto st = std::make_unique<SimTask>();
  st->t = t;
  st->prog = std::move(prog);
  st->cpu = cpu;
  tasks_.push_back(std::move(st));
  return tasks_.back().get();
}

void Scheduler::make_runnable(SimTask* t) {
  runq_[size_t(t->cpu)].push_back(t);
  if (wake_) wake_(t->cpu);
}

SimTask* Scheduler::switch_to_next(int cpu) {
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
  int best = parent_cpu;
  size_t best_load = load(parent_cpu);
  for (unsigned i = 0; i < running_.size() && best_load > 0; ++i) {
    const int cpu = cpu_for_thread(i);
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
