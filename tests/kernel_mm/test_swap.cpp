// SPDX-License-Identifier: GPL-2.0-only
// Swap (kernel_mm/swap.cpp, the anon side of vmscan.cpp): anonymous memory over memory.max is
// swapped out by memcg reclaim and comes back on faults with what was written; zero-filled pages
// need no write; fork shares swap entries; unmapping frees the slots. The fixture checks every
// invariant after every kernel entry.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;

namespace {

uint8_t value_of(uint64_t p) { return uint8_t(p % 251 + 1); }

int64_t swapents(task_struct* t) { return get_mm_counter(t->mm, MM_SWAPENTS); }

void memcg_and_swap(KernelParams& p) {
  p.memcg_max = 1ull << 20;  // 256 pages
  p.swap_size = 4ull << 20;  // 1024 slots
}

}  // namespace

TEST_CASE("swap: anonymous memory over memory.max is swapped out and read back with its contents", "[swap][reclaim][memcg]") {
  const auto isa = GENERATE(mmusim::pg::Isa::x86_64, mmusim::pg::Isa::arm64);
  Env e(memcg_and_swap, isa);
  task_struct* t = e.proc("p");
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  const uint64_t va = e.mmap(t, 512 * PAGE_SIZE);
  for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 7, value_of(p)));
  // Twice memory.max written: reclaim swapped out what did not fit (no OOM, unlike without swap).
  CHECK(cg->usage <= 256);
  CHECK(e.count("kernel.pswpout") >= 256);
  CHECK(e.count("kernel.swap_write_requests") == e.count("kernel.pswpout"));
  CHECK(swapents(t) >= 256);
  CHECK(e.rss(t) + swapents(t) == 512);
  CHECK(e.k.swap_info()->inuse_pages >= 256);
  // The first page is long gone: its PTE holds its swap entry, exclusive (one mm mapped it).
  const pte_t first = e.pte(t, va);
  REQUIRE(e.a.is_swap_pte(first));
  CHECK(e.a.pte_swp_exclusive(first));
  CHECK(swp_type(e.a.pte_to_swp_entry(first)) == 0);
  CHECK(swp_offset(e.a.pte_to_swp_entry(first)) >= 1);

  // Reading it all back: every byte as written, with swap readahead around the faults.
  for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE + 7) == value_of(p));
  CHECK(e.count("kernel.do_swap_page") > 0);
  CHECK(e.count("kernel.pswpin") > 0);
  CHECK(e.count("kernel.swap_ra") > 0);
  CHECK(e.count("kernel.swap_ra_hit") > 0);
  CHECK(e.count("kernel.pgmajfault") > 0);
  CHECK(e.count("kernel.pgmajfault") < e.count("kernel.do_swap_page"));  // readahead hits are minor
  CHECK(e.rss(t) + swapents(t) == 512);
  CHECK(cg->usage <= 256);

  SECTION("a write to a page read back read-only makes it writable (exclusive), keeping the other bytes") {
    for (uint64_t p = 0; p < 512; p += 3) REQUIRE(e.store(t, va + p * PAGE_SIZE, 0xee));
    for (uint64_t p = 0; p < 512; ++p) {
      REQUIRE(e.load(t, va + p * PAGE_SIZE + 7) == value_of(p));
      if (p % 3 == 0) REQUIRE(e.load(t, va + p * PAGE_SIZE) == 0xee);
    }
  }
  SECTION("munmap frees every slot and every charge") {
    REQUIRE(e.k.sys_munmap(t, va, 512 * PAGE_SIZE) == 0);
    e.k.lru_add_drain();
    CHECK(swapents(t) == 0);
    CHECK(e.k.swap_info()->inuse_pages == 0);
    CHECK(cg->usage == 0);
  }
}

TEST_CASE("swap: a zero-filled page is kept in the zeromap without a write and reads back as zeros", "[swap][reclaim]") {
  Env e(memcg_and_swap);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 512 * PAGE_SIZE);
  // Even pages hold a byte, odd pages only zeros (a store of 0 faults in a zeroed page).
  for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 100, p % 2 ? 0 : value_of(p)));
  CHECK(e.count("kernel.swap_zeromap") > 0);
  CHECK(e.count("kernel.pswpout") > 0);
  CHECK(e.count("kernel.pswpout") + e.count("kernel.swap_zeromap") >= 256);
  const uint64_t pswpin_before = e.count("kernel.pswpin");
  for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE + 100) == (p % 2 ? 0 : value_of(p)));
  // Only the written pages came from the disk.
  CHECK(e.count("kernel.pswpin") - pswpin_before <= 256);
}

TEST_CASE("swap: fork shares the swap entries, each process reads them back, exits free the slots", "[swap][fork]") {
  Env e(memcg_and_swap);
  task_struct* parent = e.proc("parent");
  const uint64_t va = e.mmap(parent, 400 * PAGE_SIZE);
  for (uint64_t p = 0; p < 400; ++p) REQUIRE(e.store(parent, va + p * PAGE_SIZE, value_of(p)));
  REQUIRE(swapents(parent) > 0);
  const pte_t swapped = e.pte(parent, va);
  REQUIRE(e.a.is_swap_pte(swapped));
  task_struct* child = e.k.sys_fork(parent);
  REQUIRE(child);
  CHECK(swapents(child) == swapents(parent));
  // The entry is shared now: neither PTE says exclusive, the slot counts two references.
  CHECK_FALSE(e.a.pte_swp_exclusive(e.pte(parent, va)));
  CHECK_FALSE(e.a.pte_swp_exclusive(e.pte(child, va)));
  CHECK(e.k.__swap_count(e.a.pte_to_swp_entry(e.pte(child, va))) == 2);
  // The child writes its copy: the parent keeps what it wrote.
  for (uint64_t p = 0; p < 400; p += 2) REQUIRE(e.store(child, va + p * PAGE_SIZE, 0x55));
  for (uint64_t p = 0; p < 400; ++p) {
    REQUIRE(e.load(parent, va + p * PAGE_SIZE) == value_of(p));
    REQUIRE(e.load(child, va + p * PAGE_SIZE) == (p % 2 ? value_of(p) : 0x55));
  }
  e.k.sys_exit(child, 0);
  REQUIRE(e.k.sys_wait(parent, child) >= 0);
  e.k.sys_exit(parent, 0);
  CHECK(e.k.swap_info()->inuse_pages == 0);
}

namespace {
// Several cores, as the platform runs them: a lock observer (whose waits are part of an entry's
// time) and the time every core has reached (the horizon); a process with one page written.
struct ManyCores : LockObserver {
  double waited = 0;
  uint64_t horizon = 0;
  Env e;
  task_struct* t = nullptr;
  uint64_t va = 0;
  ManyCores() {
    e.k.set_lock_timing(nullptr, 1.0, this);  // 1 GHz: a cycle is 1,000 ps
    e.k.set_horizon([this] { return horizon; });
    t = e.proc("p");
    va = e.mmap(t, PAGE_SIZE);
    REQUIRE(e.store(t, va, 1));
  }
  void acquire(const void*, LockClass, bool, double, uint64_t) override {}
  void release(const void*, LockClass, bool, double, uint64_t) override {}
  double wait_cycles() const override { return waited; }
  // `pending` frames stay out of the allocator while every core is short of `at_ps` (a core there
  // may still read them: two new pages come from elsewhere), and go back to it at `at_ps`.
  void check_reused_from(uint64_t at_ps, uint64_t pending, pfn_t old) {
    horizon = at_ps - 1;
    const uint64_t va2 = e.mmap(t, 2 * PAGE_SIZE);
    REQUIRE(e.store(t, va2, 2));
    CHECK(e.pfn_at(t, va2) != old);
    CHECK(e.k.nr_pending_free_pages() == pending);
    horizon = at_ps;
    REQUIRE(e.store(t, va2 + PAGE_SIZE, 3));
    CHECK(e.k.nr_pending_free_pages() == 0);
  }
};
}  // namespace

TEST_CASE("several cores: a frame is reused only after its free, the entry's lock waits included", "[swap][multicore]") {
  ManyCores m;
  Env& e = m.e;
  const pfn_t pfn = e.pfn_at(m.t, m.va);
  // An entry at 1 us that has waited 500 cycles for a lock another CPU held: it is at 1.5 us.
  e.k.enter(m.t, 0, 1'000'000);
  m.waited = 500;
  CHECK(e.k.time_now_ps() == 1'500'000);
  REQUIRE(e.k.sys_munmap(m.t, m.va, PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  m.waited = 0;
  // The page and its page tables, freed at 1.5 us.
  const uint64_t freed = e.k.nr_pending_free_pages();
  CHECK(freed >= 1);
  m.check_reused_from(1'500'000, freed, pfn);
}

TEST_CASE("several cores: a folio another entry unmapped is reused only after that entry's end", "[swap][multicore]") {
  ManyCores m;
  Env& e = m.e;
  const pfn_t pfn = e.pfn_at(m.t, m.va);
  task_struct* c = e.k.sys_fork(m.t);
  REQUIRE(c);
  // The child's munmap runs first in the port, at 10 us, and ends at 12 us: its unmap (and the
  // TLB flush after it) are done by then. The parent still maps the page.
  e.k.enter(c, 1, 10'000'000);
  REQUIRE(e.k.sys_munmap(c, m.va, PAGE_SIZE) == 0);
  e.k.entry_end(12'000'000);
  // The parent's munmap, run after it but at 5 us on its CPU, frees the page: not before 12 us.
  // (The page tables both munmaps freed, at 10 and 5 us, are back before that.)
  e.k.enter(m.t, 0, 5'000'000);
  REQUIRE(e.k.sys_munmap(m.t, m.va, PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  e.k.entry_end(5'100'000);
  m.check_reused_from(12'000'000, 1, pfn);
}
