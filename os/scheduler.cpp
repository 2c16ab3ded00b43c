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
