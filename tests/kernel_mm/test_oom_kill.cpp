// SPDX-License-Identifier: GPL-2.0-only
// The memory cgroup's OOM killer and a fault's fatal signals (kernel_mm/oom_kill.cpp; 6.12's
// mm/oom_kill.c and try_charge_memcg()): which process is chosen, that the charging victim's
// charge fails while another victim is reaped at once and the charge goes on, that a reaped
// victim is passed over next time, and that SIGBUS/SIGSEGV and SIGKILL take the whole thread
// group and nothing else. The fixture checks every invariant after every kernel entry.
#include <catch2/catch.hpp>

#include <csignal>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;

namespace {
constexpr uint64_t kMax = 256;  // pages: memcg.max = 1M
void touch(Env& e, task_struct* t, uint64_t va, uint64_t pages) {
  for (uint64_t p = 0; p < pages; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE, 1));
}
}  // namespace

TEST_CASE("memcg OOM: the charging process alone in the cgroup is killed, its charge fails, its exit frees the cgroup", "[memcg][oom]") {
  Env e([](KernelParams& p) { p.memcg_max = kMax << PAGE_SHIFT; });
  task_struct* t = e.proc("p");
  mem_cgroup* cg = t->mm->memcg;
  REQUIRE(cg);
  const uint64_t anon = e.mmap(t, 512 * PAGE_SIZE);
  touch(e, t, anon, kMax);
  CHECK(cg->usage == kMax);
  CHECK(t->fatal_signal == 0);
  // One page more: reclaim finds nothing (no swap), the OOM killer chooses the only process.
  CHECK_FALSE(e.store(t, anon + kMax * PAGE_SIZE, 1));
  CHECK(t->fatal_signal == SIGKILL);
  CHECK(t->oom_victim);
  CHECK(e.count("memcg.oom_events") == 1);
  CHECK(e.count("memcg.oom_kill") == 1);
  CHECK(e.count("memcg.charge_failed") == 1);
  REQUIRE(e.k.oom_kills().size() == 1);
  CHECK(e.k.oom_kills()[0].pid == t->pid);
  CHECK(e.k.oom_kills()[0].anon_rss_kb == kMax * 4);
  CHECK(cg->usage == kMax);           // nothing forced over the limit
  CHECK_FALSE(t->mm->oom_skip);       // not reaped: it is the one that dies now
  mm_struct* mm = t->mm;
  e.k.sys_exit(t, SIGKILL);
  CHECK(cg->usage == 0);
  CHECK(mm->oom_skip);  // exit_mmap()
}

TEST_CASE("memcg OOM: another process with more memory is killed and reaped at once, the charge goes on, and a reaped victim is passed over next time", "[memcg][oom]") {
  Env e([](KernelParams& p) { p.memcg_max = kMax << PAGE_SHIFT; });
  task_struct* big = e.proc("big");
  task_struct* big_thread = e.k.sys_clone_thread(big);
  const uint64_t b = e.mmap(big, 200 * PAGE_SIZE);
  touch(e, big, b, 200);
  task_struct* small = e.proc("small");
  REQUIRE(small->mm->memcg == big->mm->memcg);
  mem_cgroup* cg = small->mm->memcg;
  const uint64_t s = e.mmap(small, 512 * PAGE_SIZE);
  touch(e, small, s, kMax - 200);
  REQUIRE(cg->usage == kMax);
  // small charges one page more: big has the larger badness and is chosen; its private memory
  // is unmapped by the reaper's walk there and then, so small's charge succeeds.
  CHECK(e.store(small, s + (kMax - 200) * PAGE_SIZE, 1));
  CHECK(small->fatal_signal == 0);
  CHECK(big->fatal_signal == SIGKILL);
  CHECK(big_thread->fatal_signal == SIGKILL);  // the whole thread group
  CHECK(big->mm->oom_skip);
  CHECK(get_mm_counter(big->mm, MM_ANONPAGES) == 0);
  for (uint64_t p = 0; p < 200; p += 37) CHECK(pte_none(e.pte(big, b + p * PAGE_SIZE)));
  CHECK(cg->usage == kMax - 200 + 1);
  CHECK(e.count("memcg.oom_kill") == 1);
  REQUIRE(e.k.oom_kills().size() == 1);
  CHECK(e.k.oom_kills()[0].invoked_by == small->pid);
  CHECK(e.k.oom_kills()[0].anon_rss_kb == 200 * 4);
  // small fills the cgroup on its own: the next OOM passes over the reaped big (MMF_OOM_SKIP)
  // and kills small itself.
  touch(e, small, s + (kMax - 200 + 1) * PAGE_SIZE, 200 - 1);
  REQUIRE(cg->usage == kMax);
  CHECK_FALSE(e.store(small, s + kMax * PAGE_SIZE, 1));
  CHECK(small->fatal_signal == SIGKILL);
  CHECK(e.count("memcg.oom_kill") == 2);
  REQUIRE(e.k.oom_kills().size() == 2);
  CHECK(e.k.oom_kills()[1].pid == small->pid);
}

TEST_CASE("a fault's SIGBUS kills every thread of the faulting process and no other and the address is recorded", "[filemap][oom]") {
  Env e;
  task_struct* t = e.proc("p");
  task_struct* th = e.k.sys_clone_thread(t);
  task_struct* other = e.proc("q");
  // A file of one page mapped over two: the second page is past the end of the file.
  address_space* f = e.k.file_create("short", PAGE_SIZE, 3);
  const int64_t va = e.k.sys_mmap(t, 0, 2 * PAGE_SIZE, PROT_READ, MAP_PRIVATE, f, 0);
  REQUIRE(va > 0);
  CHECK(e.load(t, uint64_t(va)) >= 0);
  CHECK(t->fatal_signal == 0);
  CHECK(e.load(t, uint64_t(va) + PAGE_SIZE) < 0);
  CHECK(t->fatal_signal == SIGBUS);
  CHECK(th->fatal_signal == SIGBUS);
  CHECK(other->fatal_signal == 0);
  REQUIRE(e.k.fatal_faults().size() == 1);
  CHECK(e.k.fatal_faults()[0].sig == SIGBUS);
  CHECK(e.k.fatal_faults()[0].address == uint64_t(va) + PAGE_SIZE);
  CHECK(e.k.fatal_faults()[0].pid == t->pid);
  // An access outside any VMA: SIGSEGV, in q's group only.
  CHECK(e.load(other, 0x10000) < 0);
  CHECK(other->fatal_signal == SIGSEGV);
  CHECK(t->fatal_signal == SIGBUS);
}
