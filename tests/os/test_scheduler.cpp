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
  for (int cpu : {0, 2, 4, 6, 8, 10, 12, 14}) s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, cpu), 0);
  CHECK(s.cpu_for_fork(0) == 16);
  for (int cpu : {16, 17, 18}) s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, cpu), 0);
  CHECK(s.cpu_for_fork(0) == 19);
  s.make_runnable(s.add(&k.t[size_t(n++)], nullptr, 19), 0);
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
  for (SimTask* x : {a, b, c, d}) s.make_runnable(x, 0);
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
  s.make_runnable(a, 0);
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
    s.make_runnable(p, 0);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 0);
  }
  SECTION("the parent runs on CPU 0: its children fill the idle CPUs, then the least loaded") {
    Scheduler s(3);
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p, 0);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 1);
    s.make_runnable(s.add(&k.t[1], nullptr, 1), 0);
    CHECK(s.cpu_for_fork(0) == 2);
    s.make_runnable(s.add(&k.t[2], nullptr, 2), 0);
    CHECK(s.cpu_for_fork(0) == 0);  // all hold one task: the parent's own
    // A blocked parent leaves its CPU idle (it waits for its children).
    p->blocked = true;
    s.make_runnable(s.add(&k.t[3], nullptr, 1), 0);
    CHECK(s.cpu_for_fork(1) == 0);
  }
  SECTION("SMT: an idle core before an idle sibling") {
    Scheduler s(4);
    s.set_cpus(4, 2);  // cores 0 (CPUs 0, 1) and 1 (CPUs 2, 3)
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p, 0);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 2);
  }
  SECTION("two sockets: the node with the most idle CPUs first, the parent's on a tie") {
    Scheduler s(6);
    s.set_cpus(6, 1, 2);  // socket 0: CPUs 0-2, socket 1: CPUs 3-5
    SimTask* p = s.add(&k.t[0], nullptr, 0);
    s.make_runnable(p, 0);
    REQUIRE(s.switch_to_next(0, 0) == p);
    CHECK(s.cpu_for_fork(0) == 3);  // 2 idle CPUs here, 3 there
    s.make_runnable(s.add(&k.t[1], nullptr, 3), 0);
    CHECK(s.cpu_for_fork(0) == 1);  // 2 and 2: the parent's node
    s.make_runnable(s.add(&k.t[2], nullptr, 1), 0);
    CHECK(s.cpu_for_fork(0) == 4);  // 1 here, 2 there
    s.make_runnable(s.add(&k.t[3], nullptr, 4), 0);
    CHECK(s.cpu_for_fork(0) == 2);
    s.make_runnable(s.add(&k.t[4], nullptr, 2), 0);
    CHECK(s.cpu_for_fork(0) == 5);
    s.make_runnable(s.add(&k.t[5], nullptr, 5), 0);
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
  s.make_runnable(a, 0);
  CHECK(s.switch_to_next(0, 0) == a);
  CHECK_FALSE(s.resched_check(0, 400));
  CHECK_FALSE(s.resched_check(0, 1500));  // past its deadline, but alone: a new one, to 2500
  CHECK(s.keeps_running(0));
  CHECK(a->deadline == 2500);
  // b arrives at 1600 at the average (a's 1600) with half a slice: deadline 2100 < 2500, and a's
  // protection ended with its renewal.
  s.make_runnable(b, 0);
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
  s.make_runnable(c, 0);
  c->exited = true;
  SimTask* cur = s.current(0);
  if (!s.keeps_running(0)) cur = s.switch_to_next(0, now + 3000);
  (cur == a ? b : a)->exited = true;
  CHECK_FALSE(s.resched_check(0, now + 9000));
  CHECK(s.keeps_running(0));
}

// sched.affinity (os/scheduler.*): pinned tasks never move; with `all` a CPU about to idle pulls
// a queued task that is not cache-hot from the busiest CPU of its smallest domain
// (sched_balance_newidle()), and a task woken while its CPU is busy goes to an idle CPU of its LLC,
// an idle core before an idle sibling (select_idle_sibling()).
TEST_CASE("scheduler: load balancing moves unpinned tasks only", "[os][sched]") {
  Tasks k(8);
  struct Move {
    int pid, from, to;
    uint64_t at;
    Scheduler::Migration why;
    bool operator==(const Move& o) const {
      return pid == o.pid && from == o.from && to == o.to && at == o.at && why == o.why;
    }
  };
  std::vector<Move> moves;
  auto watch = [&](Scheduler& s) {
    s.set_on_migrate([&](const SimTask& t, int from, int to, uint64_t at, Scheduler::Migration why) {
      moves.push_back({t.t->pid, from, to, at, why});
    });
  };
  constexpr uint64_t ms = 1'000'000'000;  // ps

  SECTION("new-idle: pinned tasks stay; unpinned ones move unless cache-hot") {
    Scheduler s(2);
    s.set_slice(3 * ms);
    watch(s);
    SimTask* a = s.add(&k.t[0], nullptr, 0);
    SimTask* b = s.add(&k.t[1], nullptr, 0);
    s.make_runnable(a, 0);
    s.make_runnable(b, 0);
    REQUIRE(s.switch_to_next(0, 0) == a);
    CHECK(s.switch_to_next(1, ms) == nullptr);  // pinned: CPU 1 idles beside CPU 0's queue
    s.set_affinity(Scheduler::Affinity::all);
    b->ran = true;
    b->last_ran_ps = ms / 2 + ms / 10;           // left CPU 0 at 0.6 ms
    CHECK(s.switch_to_next(1, ms) == nullptr);   // 0.4 ms ago: cache-hot, stays
    CHECK(s.switch_to_next(1, ms, false) == nullptr);
    CHECK(moves.empty());
    CHECK(s.switch_to_next(1, ms + ms / 10 + 1) == b);  // more than 0.5 ms ago: pulled
    CHECK(b->cpu == 1);
    CHECK(b->runnable_from_ps == 0);  // queued at 0: it may run on CPU 1 at once
    CHECK(moves == std::vector<Move>{{101, 0, 1, ms + ms / 10 + 1, Scheduler::Migration::newidle}});
    CHECK(s.current(0) == a);  // the running task is never taken
  }

  SECTION("new-idle: the SMT sibling's queue first, then the busiest CPU of the LLC, the running task never") {
    Scheduler s(4);
    s.set_cpus(4, 2);  // core 0: CPUs 0, 1; core 1: CPUs 2, 3
    s.set_affinity(Scheduler::Affinity::all);
    watch(s);
    std::vector<SimTask*> t;
    for (int i = 0; i < 5; ++i) t.push_back(s.add(&k.t[size_t(i)], nullptr, i < 2 ? 0 : 2));
    for (SimTask* x : t) s.make_runnable(x, 0);
    REQUIRE(s.switch_to_next(0, 0) == t[0]);
    REQUIRE(s.switch_to_next(2, 0) == t[2]);
    // CPU 2 runs 3 tasks, CPU 0 two: CPU 1 takes its sibling's queued one.
    CHECK(s.switch_to_next(1, ms) == t[1]);
    // CPU 3's sibling (2) has two queued: it takes the one queued longest.
    CHECK(s.switch_to_next(3, ms) == t[3]);
    // Nothing left to take (every CPU runs one).
    t[0]->blocked = true;
    CHECK(s.switch_to_next(0, 2 * ms) == t[4]);  // from the busiest CPU, 2 (in 0's LLC)
    CHECK(moves.size() == 3);
    CHECK(moves[2].from == 2);
  }

  SECTION("wake-up: the previous CPU if idle, else an idle core, else an idle sibling, never another socket") {
    Scheduler s(8);
    s.set_cpus(8, 2, 2);  // socket 0: cores {0,1}, {2,3}; socket 1: {4,5}, {6,7}
    s.set_affinity(Scheduler::Affinity::all);
    std::vector<int> woken;
    s.set_wake([&](int cpu) { woken.push_back(cpu); });
    watch(s);
    std::vector<SimTask*> t;
    for (int i = 0; i < 6; ++i) t.push_back(s.add(&k.t[size_t(i)], nullptr, 0));
    // Each runs once on CPU 0 and blocks (they have run: a wake-up may move them).
    for (int i = 0; i < 6; ++i) {
      s.make_runnable(t[size_t(i)], uint64_t(i) * 10);
      REQUIRE(s.switch_to_next(0, uint64_t(i) * 10) == t[size_t(i)]);
      t[size_t(i)]->blocked = true;
    }
    REQUIRE(s.switch_to_next(0, 100) == nullptr);
    auto wake = [&](SimTask* x, uint64_t at) {
      x->blocked = false;
      s.make_runnable(x, at);
      return x->cpu;
    };
    CHECK(wake(t[0], 200) == 0);  // its CPU is idle: it stays
    CHECK(moves.empty());
    REQUIRE(s.switch_to_next(0, 200) == t[0]);
    woken.clear();
    CHECK(wake(t[1], 300) == 2);  // CPU 1 is idle but its core is not: the idle core 1's CPU 2
    CHECK(t[1]->runnable_from_ps == 300);
    CHECK(woken == std::vector<int>{2});
    CHECK(moves == std::vector<Move>{{101, 0, 2, 300, Scheduler::Migration::wakeup}});
    REQUIRE(s.switch_to_next(2, 300) == t[1]);
    CHECK(wake(t[2], 400) == 1);  // no idle core in the LLC: the first idle sibling
    REQUIRE(s.switch_to_next(1, 400) == t[2]);
    CHECK(wake(t[3], 500) == 3);
    REQUIRE(s.switch_to_next(3, 500) == t[3]);
    CHECK(wake(t[4], 600) == 0);  // socket 0 full: queued on its own CPU, socket 1 stays idle
    CHECK(moves.size() == 3);
    // pinned: never moved.
    s.set_affinity(Scheduler::Affinity::pinned);
    t[0]->blocked = true;
    REQUIRE(s.switch_to_next(0, 700) == t[4]);
    CHECK(wake(t[5], 800) == 0);
    t[1]->blocked = true;
    CHECK(s.switch_to_next(2, 900) == nullptr);  // pinned: CPU 2 does not take t[5]
    CHECK(moves.size() == 3);
  }
}
