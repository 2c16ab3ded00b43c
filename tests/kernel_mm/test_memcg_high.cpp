// SPDX-License-Identifier: GPL-2.0-only
// memory.high (kernel_mm/memcontrol.cpp, mm/memcontrol.c of 6.12): the throttling arithmetic in
// the kernel's fixed point; which charges check the limit (the batch charges of the per-CPU
// stock); reclaim on the return to user mode that keeps the cgroup near memory.high while swap
// has room, and the throttling sleep when nothing can be freed. The fixture checks every
// invariant after every kernel entry.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;

TEST_CASE("memcg.high: the penalty grows with the square of the overage as calculate_high_delay computes it", "[memcg]") {
  // Not over: nothing.
  CHECK(calculate_overage(100, 100) == 0);
  CHECK(calculate_high_delay(64, 0, 250) == 0);
  // Twice memory.high: an overage of 1.0 (1 << 20); 2^40 * HZ >> 34 = 64 * HZ jiffies for a
  // nominal batch of 64 pages, a 64th of it for one page.
  CHECK(calculate_overage(200, 100) == (uint64_t(1) << 20));
  CHECK(calculate_high_delay(64, uint64_t(1) << 20, 250) == 16000);
  CHECK(calculate_high_delay(1, uint64_t(1) << 20, 250) == 250);
  CHECK(calculate_high_delay(64, uint64_t(1) << 20, 1000) == 64000);
  // 10% over: (104857^2 * 250) >> 34 = 159 jiffies, truncated at each step as the kernel does.
  CHECK(calculate_overage(110, 100) == 104857);
  CHECK(calculate_high_delay(64, 104857, 250) == 159);
  // A threshold of 0 acts as one page.
  CHECK(calculate_overage(3, 0) == (uint64_t(2) << 20));
}

namespace {

int64_t swapents(task_struct* t) { return get_mm_counter(t->mm, MM_SWAPENTS); }

}  // namespace

TEST_CASE("memcg.high: only the stock's batch charges check it, 64 pages at a time", "[memcg]") {
  Env e([](KernelParams& p) { p.memcg_high = 100 * PAGE_SIZE; });
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  CHECK(cg->max == UINT64_MAX);  // memory.high alone makes the cgroup; memory.max stays "max"
  CHECK(cg->high == 100);
  const uint64_t va = e.mmap(t, 256 * PAGE_SIZE);
  // CPU 0's stock: charge 1 is a batch (64 pages, 63 left), 2-64 come from it, 65 and 129 are
  // batches again. Usage is counted page by page: over 100 pages only from the 101st charge, and
  // the first batch charge after that is the 129th.
  for (uint64_t p = 0; p < 128; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE, 1));
  CHECK(cg->usage == 128);
  CHECK(t->memcg_nr_pages_over_high == 0);
  REQUIRE(e.store(t, va + 128 * PAGE_SIZE, 1));
  CHECK(t->memcg_nr_pages_over_high == 64);
  // The return to user mode: no swap and nothing on the file lists, so reclaim frees nothing; at
  // 29% over, 64 pages owe (304,087^2 * 250) >> 34 = 1,345 jiffies, clamped to 2 s (500).
  e.k.resume_user_mode_work();
  CHECK(t->memcg_nr_pages_over_high == 0);
  CHECK(e.count("memcg.high_events") == 17);  // the first round and 16 retries (MAX_RECLAIM_RETRIES)
  CHECK(e.count("memcg.high_throttles") == 1);
  CHECK(e.count("memcg.high_throttle_ns") == 2'000'000'000ull);
  CHECK(e.k.cost().throttle_cycles > 0);
  // Only memory.high: the charges never failed, the cgroup holds all of it.
  CHECK(cg->usage == 129);
  CHECK(e.count("memcg.max_events") == 0);
}

TEST_CASE("memcg.high: with swap, reclaim on the return to user mode keeps the cgroup near it", "[memcg][swap]") {
  const auto isa = GENERATE(mmusim::pg::Isa::x86_64, mmusim::pg::Isa::arm64);
  Env e([](KernelParams& p) {
    p.memcg_high = 1ull << 20;  // 256 pages
    p.swap_size = 4ull << 20;
  }, isa);
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  const uint64_t va = e.mmap(t, 1024 * PAGE_SIZE);
  uint64_t most = 0;
  for (uint64_t p = 0; p < 1024; ++p) {
    REQUIRE(e.store(t, va + p * PAGE_SIZE + 5, uint8_t(p % 251 + 1)));
    e.k.resume_user_mode_work();  // as the platform does before the exception return
    e.k.clear_cost();
    most = std::max(most, cg->usage);
  }
  // Never more than a batch over before the return reclaims; the rest went to swap.
  CHECK(most <= 256 + MEMCG_CHARGE_BATCH);
  CHECK(cg->usage <= 256 + MEMCG_CHARGE_BATCH);
  CHECK(e.count("memcg.high_events") > 0);
  CHECK(e.count("kernel.pswpout") >= 1024 - 256 - MEMCG_CHARGE_BATCH);
  CHECK(e.rss(t) + swapents(t) == 1024);
  // Reclaim kept up: no sleep.
  CHECK(e.count("memcg.high_throttles") == 0);
  // Every byte reads back.
  for (uint64_t p = 0; p < 1024; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE + 5) == int(p % 251 + 1));
}

TEST_CASE("memcg.swap_max: the cgroup's swap is bounded, slots are charged to it and uncharged when freed", "[memcg][swap]") {
  Env e([](KernelParams& p) {
    p.memcg_max = 1ull << 20;  // 256 pages
    p.swap_size = 4ull << 20;  // 1024 slots
    p.memcg_swap_max = 128 * PAGE_SIZE;
  });
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  CHECK(cg->swap_max == 128);
  const uint64_t va = e.mmap(t, 352 * PAGE_SIZE);
  // 352 pages fit: 256 in memory (some of it the LRU-add batch and the swap cache), the rest in
  // swap, and never more than 128 slots.
  for (uint64_t p = 0; p < 352; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 9, uint8_t(p % 251 + 1)));
  CHECK(cg->usage <= 256);
  CHECK(cg->swap_usage <= 128);
  CHECK(cg->swap_usage >= 96);
  CHECK(cg->swap_usage == e.k.swap_info()->inuse_pages);
  CHECK(uint64_t(swapents(t)) <= 128);
  CHECK(e.rss(t) + swapents(t) == 352);
  // What the cgroup may still take is its limit's rest, not the device's free slots.
  CHECK(e.k.get_nr_swap_pages() > 800);
  CHECK(e.k.mem_cgroup_get_nr_swap_pages(cg) == 128 - cg->swap_usage);
  for (uint64_t p = 0; p < 352; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE + 9) == int(p % 251 + 1));
  REQUIRE(e.k.sys_munmap(t, va, 352 * PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  CHECK(cg->swap_usage == 0);
  CHECK(e.k.swap_info()->inuse_pages == 0);
}

TEST_CASE("memcg.swap_max: with memory.high, what swap cannot take stays and the task is throttled", "[memcg][swap]") {
  Env e([](KernelParams& p) {
    p.memcg_high = 1ull << 20;  // 256 pages
    p.swap_size = 4ull << 20;
    p.memcg_swap_max = 64 * PAGE_SIZE;
  });
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  const uint64_t va = e.mmap(t, 512 * PAGE_SIZE);
  for (uint64_t p = 0; p < 512; ++p) {
    REQUIRE(e.store(t, va + p * PAGE_SIZE, 1));
    e.k.resume_user_mode_work();
    e.k.clear_cost();
  }
  CHECK(cg->swap_usage == 64);  // swap took its limit
  CHECK(cg->usage == 512 - 64);  // the rest stayed, over memory.high
  CHECK(e.count("memcg.high_throttles") > 0);
  // Swap-outs reclaim tried past the limit failed and were counted (memory.swap.events).
  CHECK(e.count("memcg.swap_fail") == e.count("memcg.swap_max_events"));
}

TEST_CASE("memcg.swap_high: swap over memory.swap.high throttles the task by the swap overage, swap-outs go on", "[memcg][swap]") {
  Env e([](KernelParams& p) {
    p.memcg_max = 1ull << 20;  // 256 pages
    p.swap_size = 4ull << 20;  // 1024 slots
    p.memcg_swap_high = 64 * PAGE_SIZE;
  });
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  CHECK(cg->swap_high == 64);
  CHECK(cg->swap_max == UINT64_MAX);
  const uint64_t va = e.mmap(t, 512 * PAGE_SIZE);
  uint64_t slept_ns = 0;
  for (uint64_t p = 0; p < 512; ++p) {
    REQUIRE(e.store(t, va + p * PAGE_SIZE, uint8_t(p % 251 + 1)));
    const uint64_t before = e.count("memcg.high_throttle_ns");
    const uint64_t over = t->memcg_nr_pages_over_high;
    const uint64_t swap = cg->swap_usage;
    e.k.resume_user_mode_work();
    const uint64_t slept = e.count("memcg.high_throttle_ns") - before;
    if (over) {
      // memory.high is max: the penalty is the swap overage's alone, as calculate_high_delay()
      // computes it for the owed pages (HZ 250), clamped to 2 s; none at or below HZ / 100.
      uint64_t jiffies = std::min<uint64_t>(calculate_high_delay(over, calculate_overage(swap, 64), 250), 500);
      if (jiffies <= 2) jiffies = 0;
      CHECK(slept == jiffies * 4'000'000);
    } else {
      CHECK(slept == 0);
    }
    slept_ns += slept;
    e.k.clear_cost();
  }
  // swap.high is no limit: the cgroup's swap grew past it, holding what memory.max could not.
  CHECK(cg->swap_usage > 128);
  CHECK(cg->usage <= 256);
  CHECK(e.count("memcg.swap_fail") == 0);
  CHECK(e.count("memcg.high_events") == 0);  // memory.high itself was never crossed
  CHECK(e.count("memcg.swap_high_events") > 0);
  CHECK(e.count("memcg.high_throttles") > 0);
  CHECK(slept_ns == e.count("memcg.high_throttle_ns"));
  for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE) == int(p % 251 + 1));
}
