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
