// SPDX-License-Identifier: GPL-2.0-only
// The simulated OS's scheduler (os/scheduler.*): placement, run queues in order, blocked and
// exited tasks skipped, idle CPUs, the wake-up of the CPU a task becomes runnable on.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "os/scheduler.hpp"

using namespace mmusim;

namespace {

struct Tasks {
  std::vector<kmm::task_struct> t;
  explicit Tasks(int n) : t(size_t(n)) {
    for (int i = 0; i < n; ++i) t[size_t(i)].pid = 100 + i;
  }
};

}  // namespace

TEST_CASE("scheduler: threads pinned to CPU i mod cores", "[os]") {
  Scheduler s(4);
  CHECK(s.cpu_for_thread(0) == 0);
  CHECK(s.cpu_for_thread(3) == 3);
  CHECK(s.cpu_for_thread(4) == 0);
  CHECK(s.cpu_for_thread(9) == 1);
}

TEST_CASE("scheduler: hybrid placement, P-cores then E-cores then SMT siblings, or by number", "[os]") {
  auto order = [](const Scheduler& s, unsigned n) {
    std::vector<int> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(s.cpu_for_thread(i));
    return v;
  };
  Scheduler s(1);
  // The whole i7-12700: 8 P-cores x 2 threads (CPUs 0-15), E-cores 16-19 (research §3.1, §3.4).
  s.set_cpus(20, 2, 1, 4);
  CHECK(order(s, 21) == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19,
                                          1, 3, 5, 7, 9, 11, 13, 15, 0});
  // SMT off: P-cores 0-7, E-cores 8-11.
  s.set_cpus(12, 1, 1, 4);
  CHECK(order(s, 13) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0});
  // No E-core: every core, then the siblings, as before.
  s.set_cpus(8, 2);
  CHECK(order(s, 9) == std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7, 0});
  // taskset -c i.
  s.set_cpus(20, 2, 1, 4);
  s.set_placement(Scheduler::Placement::by_number);
  CHECK(order(s, 21) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                          16, 17, 18, 19, 0});
}

TEST_CASE("scheduler: a fork child goes to an idle E-core before an idle SMT sibling", "[os]") {
  Tasks k(20);
  Scheduler s(1);
  s.set_cpus(20, 2, 1, 4);
  int n = 0;
  for (int cpu : {0, 2, 4, 6, 8, 10, 12, 14}) s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, cpu));
  CHECK(s.cpu_for_fork(0) == 16);
  for (int cpu : {16, 17, 18}) s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, cpu));
  CHECK(s.cpu_for_fork(0) == 19);
  s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, 19));
  CHECK(s.cpu_for_fork(0) == 1);  // every core busy: the first sibling
}

TEST_CASE("scheduler: a CPU runs its queue in order, skipping blocked and exited tasks", "[os]") {
  Tasks k(4);
  Scheduler s(2);
  std::vector<int> woken;
  s.set_wake([&](int cpu) { woken.push_back(cpu); });
  SimTask* a = s.add(&k.t[0], nullptr, 0);
  SimTask* b = s.add(&k.t[1], nullptr, 0);
  SimTask* c = s.add(&k.t[2], nullptr, 0);
  SimTask* d = s.add(&k.t[3], nullptr, 1);
  for (SimTask* x : {a, b, c, d}) s.make_runnable(x);
  CHECK(woken == std::vector<int>{0, 0, 0, 1});

  CHECK(s.current(0) == nullptr);
  CHECK_FALSE(s.keeps_running(0));
  CHECK(s.switch_to_next(0, 0) == a);
  CHECK(s.keeps_running(0));
  a->blocked = true;  // wait(): off the CPU until woken
  CHECK_FALSE(s.keeps_running(0));
  b->exited = true;   // exited while queued: never runs
  CHECK(s.switch_to_next(0, 0) == c);
  c->exited = true;
  CHECK(s.switch_to_next(0, 0) == nullptr);  // a is blocked and not queued: CPU 0 idles
  CHECK(s.current(0) == nullptr);
  a->blocked = false;
  s.make_runnable(a);
  CHECK(s.switch_to_next(0, 0) == a);
  CHECK(s.switch_to_next(1, 0) == d);  // CPU 1's queue is its own
  CHECK(s.find_pid(103) == d);
  CHECK(s.find_pid(7) == nullptr);
  CHECK_FALSE(s.all_exited());
  a->exited = d->exited = true;
  CHECK(s.all_exited());
}

TEST_CASE("scheduler: a fork child starts on the idlest CPU", "[os]") {
  Tasks k(6);
  SECTION("one CPU: the parent's") {
    Scheduler s(1);
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 0);
  }
  SECTION("the parent runs on CPU 0: its children fill the idle CPUs, then the least loaded") {
    Scheduler s(3);
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 1);
    s.make_runnable(s.add(&k.t[1], nullptr, 1));
    CHECK(s.cpu_for_fork(0) == 2);
    s.make_runnable(s.add(&k.t[2], nullptr, 2));
    CHECK(s.cpu_for_fork(0) == 0);  // all hold one task: the parent's own
    // A blocked parent leaves its CPU idle (it waits for its children).
    p->blocked = true;
    s.make_runnable(s.add(&k.t[3], nullptr, 1));
    CHECK(s.cpu_for_fork(1) == 0);
  }
  SECTION("SMT: an idle core before an idle sibling") {
    Scheduler s(4);
    s.set_cpus(4, 2);  // cores 0 (CPUs 0, 1) and 1 (CPUs 2, 3)
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 2);
  }
  SECTION("two sockets: the node with the most idle CPUs first, the parent's on a tie") {
    Scheduler s(6);
    s.set_cpus(6, 1, 2);  // socket 0: CPUs 0-2, socket 1: CPUs 3-5
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 3);  // 2 idle CPUs here, 3 there
    s.make_runnable(s.add(&k.t[1], nullptr, 3));
    CHECK(s.cpu_for_fork(0) == 1);  // 2 and 2: the parent's node
    s.make_runnable(s.add(&k.t[2], nullptr, 1));
    CHECK(s.cpu_for_fork(0) == 4);  // 1 here, 2 there
    s.make_runnable(s.add(&k.t[3], nullptr, 4));
    CHECK(s.cpu_for_fork(0) == 2);
    s.make_runnable(s.add(&k.t[4], nullptr, 2));
    CHECK(s.cpu_for_fork(0) == 5);
    s.make_runnable(s.add(&k.t[5], nullptr, 5));
    CHECK(s.cpu_for_fork(0) == 0);  // none idle anywhere: the parent's node, its own CPU
  }
}

// EEVDF (os/scheduler.*): a task alone is never preempted; a new task (half a slice) preempts one
// whose protected slice is over; two busy tasks share the CPU evenly at the tick; a task that slept
// comes back with its lag; blocked and exited ones are not preempted.
TEST_CASE("scheduler: EEVDF slices, deadlines and lag", "[os][sched]") {
  Tasks k(3);
  Scheduler s(1);
  s.set_slice(1000);
  SimTask* a = s.add(&k.t[0], nullptr, 0);
  SimTask* b = s.add(&k.t[1], nullptr, 0);
  SimTask* c = s.add(&k.t[2], nullptr, 0);
  s.make_runnable(a);
  CHECK(s.switch_to_next(0, 0) == a);
  CHECK_FALSE(s.resched_check(0, 400));
  CHECK_FALSE(s.resched_check(0, 1500));  // past its deadline, but alone: a new one, to 2500
  CHECK(s.keeps_running(0));
  CHECK(a->deadline == 2500);
  // b arrives at 1600 at the average (a's 1600) with half a slice: deadline 2100 < 2500, and a's
  // protection ended with its renewal.
  s.make_runnable(b);
  CHECK(s.resched_check(0, 1600));
  CHECK_FALSE(s.keeps_running(0));
  CHECK(s.switch_to_next(0, 1600) == b);
  CHECK(b->vruntime == 1600);
  // Two busy tasks, a check every 1000: the CPU alternates and their vruntimes stay within a
  // slice of each other.
  uint64_t now = 1600;
  unsigned switches = 0;
  for (int i = 0; i < 40; ++i) {
    now += 1000;
    if (s.resched_check(0, now)) {
      s.switch_to_next(0, now);
      ++switches;
    }
  }
  CHECK(switches >= 10);
  CHECK(std::abs(a->vruntime - b->vruntime) <= 2000);
  // The running one sleeps briefly; it comes back with its lag and, having run less by then,
  // preempts the other at once.
  SimTask* runner = s.current(0);
  SimTask* other = runner == a ? b : a;
  s.sleep_until(0, now + 3000);
  CHECK(s.switch_to_next(0, now) == other);
  CHECK(s.resched_check(0, now + 3000) == (runner->vruntime < other->vruntime + 3000));
  // A blocked or exited task is not preempted; a queued one that exited does not count.
  s.make_runnable(c);
  c->exited = true;
  SimTask* cur = s.current(0);
  if (!s.keeps_running(0)) cur = s.switch_to_next(0, now + 3000);
  (cur == a ? b : a)->exited = true;
  CHECK_FALSE(s.resched_check(0, now + 9000));
  CHECK(s.keeps_running(0));
}
