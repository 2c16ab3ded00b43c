// SPDX-License-Identifier: GPL-2.0-only
// The anonymous fault paths (kernel_mm/memory.c, PORTMAP §1): handle_mm_fault, handle_pte_fault
// with its spurious path, do_anonymous_page (zero page, order-0 and mTHP allocation), the write
// fault on the zero page (wp_page_copy), the per-VMA-lock RETRY convention of vmf_anon_prepare, and
// mmap/get_unmapped_area.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

TEST_CASE("faults: a read fault maps the shared zero page", "[faults]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 16 * PAGE_SIZE);

  REQUIRE(e.load(t, va + 5 * PAGE_SIZE + 7) == 0);
  const pte_t p = e.pte(t, va + 5 * PAGE_SIZE);
  CHECK(e.a.pte_present(p));
  CHECK(e.a.pte_special(p));
  CHECK_FALSE(e.a.pte_write(p));
  CHECK(e.a.pte_pfn(p) == e.k.zero_pfn());
  CHECK(e.rss(t) == 0);
  CHECK(e.k.last_fault().kind == FaultKind::zero_page);
  CHECK(e.count("kernel.do_anonymous_page") == 1);
  CHECK(e.count("faults.read") == 1);
  // A read fault does not prepare the anon_vma.
  CHECK(e.k.vma_lookup(t->mm, va)->anon == nullptr);
  // Other pages of the table are untouched.
  CHECK(pte_none(e.pte(t, va + 4 * PAGE_SIZE)));

  SECTION("a write to it copies the zero page into a new page") {
    REQUIRE(e.store(t, va + 5 * PAGE_SIZE + 7, 0xab));
    const pte_t q = e.pte(t, va + 5 * PAGE_SIZE);
    CHECK(e.a.pte_write(q));
    CHECK(e.a.pte_dirty(q));
    CHECK_FALSE(e.a.pte_special(q));
    CHECK(e.a.pte_pfn(q) != e.k.zero_pfn());
    folio* f = e.folio_at(t, va + 5 * PAGE_SIZE);
    CHECK(folio_test_anon(f));
    CHECK(PageAnonExclusive(f));
    CHECK(folio_mapcount(f) == 1);
    CHECK(e.rss(t) == 1);
    CHECK(e.k.last_fault().kind == FaultKind::copy);
    CHECK(e.count("kernel.do_wp_page") == 1);
    CHECK(e.count("kernel.wp_copy") == 1);
    CHECK(e.count("kernel.wp_reuse") == 0);
    // The zero page was cleared, not copied: the page reads zero except the byte written.
    CHECK(e.count("kernel.pages_copied") == 0);
    CHECK(e.load(t, va + 5 * PAGE_SIZE + 7) == 0xab);
    CHECK(e.load(t, va + 5 * PAGE_SIZE + 8) == 0);
    // ptep_clear_flush() before installing the new PTE (break before make).
    CHECK(e.count("kernel.tlb_flush_page") == 1);
  }
}

TEST_CASE("faults: a write fault allocates an exclusive order-0 folio", "[faults]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 64 * PAGE_SIZE);

  REQUIRE(e.store(t, va + 3 * PAGE_SIZE + 100, 0x5a));
  const pte_t p = e.pte(t, va + 3 * PAGE_SIZE);
  CHECK(e.a.pte_present(p));
  CHECK(e.a.pte_write(p));
  CHECK(e.a.pte_dirty(p));
  CHECK(e.a.pte_young(p));
  folio* f = e.folio_at(t, va + 3 * PAGE_SIZE);
  CHECK(folio_order(f) == 0);
  CHECK(folio_test_anon(f));
  CHECK(PageAnonExclusive(f));
  CHECK(folio_mapcount(f) == 1);
  // One reference for the PTE and one held by the per-CPU LRU-add batch.
  CHECK(folio_ref_count(f) == 2);
  e.k.lru_add_drain();
  CHECK(folio_ref_count(f) == 1);
  CHECK(folio_test_lru(f));
  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  REQUIRE(v->anon);
  CHECK(f->anon_vma == v->anon->id);
  CHECK(f->index == (va + 3 * PAGE_SIZE) >> PAGE_SHIFT);
  CHECK(e.rss(t) == 1);
  CHECK(e.k.last_fault().kind == FaultKind::alloc);
  CHECK(e.k.last_fault().order == 0);
  CHECK(e.count("faults.write") == 1);
  CHECK(e.count("kernel.handle_mm_fault") == 1);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 100) == 0x5a);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 101) == 0);
  // No further fault for the same page.
  const uint64_t faults = e.count("faults.total");
  REQUIRE(e.store(t, va + 3 * PAGE_SIZE + 200, 1));
  CHECK(e.count("faults.total") == faults);
}

TEST_CASE("faults: a write to a PTE that already allows it is spurious", "[faults]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 16 * PAGE_SIZE);
  REQUIRE(e.store(t, va, 1));
  const pte_t before = e.pte(t, va);

  // A stale read-only TLB entry would make the hardware fault here.
  FaultReturn r = e.write_fault(t, va, /*present=*/true);
  CHECK_FALSE(r.sigsegv);
  CHECK(r.fault == 0);
  CHECK(e.count("faults.spurious") == 1);
  CHECK(e.k.last_fault().kind == FaultKind::spurious);
  CHECK(e.k.last_fault().ptes_changed == 0);
  CHECK(pte_same(e.pte(t, va), before));
  CHECK(e.count("kernel.do_wp_page") == 0);
  // x86: flush_tlb_fix_spurious_fault() is empty.
  CHECK(e.count("kernel.tlb_flush_page") == 0);
}

TEST_CASE("faults: access errors give SIGSEGV", "[faults]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t ro = e.mmap(t, 4 * PAGE_SIZE, PROT_READ);
  CHECK_FALSE(e.store(t, ro, 1));  // write to a read-only mapping
  CHECK(e.count("faults.sigsegv") == 1);
  CHECK(e.load(t, ro) == 0);       // reading it is fine (zero page)
  CHECK(e.load(t, 0x10000) == -1); // no VMA
  CHECK(e.count("faults.sigsegv") == 2);
  CHECK(e.k.last_fault().kind == FaultKind::sigsegv);
}

TEST_CASE("faults: mTHP order selection", "[faults][mthp]") {
  Env e([](KernelParams& p) {
    set_thp(p, ThpMode::never, {{kmmtest::ORDER_16K, ThpMode::always},
                                {kmmtest::ORDER_32K, ThpMode::always},
                                {kmmtest::ORDER_64K, ThpMode::always}});
  });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 2 * PMD_SIZE);  // a PMD multiple: PMD-aligned address
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));

  SECTION("the largest enabled order whose aligned range is empty and inside the VMA") {
    REQUIRE(e.store(t, va + 5 * PAGE_SIZE + 1, 0x11));
    folio* f = e.folio_at(t, va + 5 * PAGE_SIZE);
    REQUIRE(folio_order(f) == kmmtest::ORDER_64K);
    CHECK(e.k.last_fault().kind == FaultKind::alloc);
    CHECK(e.k.last_fault().order == 4);
    CHECK(e.k.last_fault().ptes_changed == 16);
    // All 16 PTEs of the aligned 64K range map the folio's pages in order, writable.
    for (unsigned i = 0; i < 16; ++i) {
      const pte_t p = e.pte(t, va + i * PAGE_SIZE);
      CHECK(e.a.pte_write(p));
      CHECK(e.a.pte_pfn(p) == e.k.folio_pfn(f) + i);
      CHECK(PageAnonExclusive(folio_page(f, i)));
      CHECK(folio_page(f, i)->mapcount == 1);
    }
    CHECK(pte_none(e.pte(t, va + 16 * PAGE_SIZE)));
    CHECK(folio_ref_count(f) == 16);  // one per PTE; large folios skip the LRU batch
    CHECK(folio_large_mapcount(f) == 16);
    CHECK(folio_nr_pages_mapped(f) == 16);
    CHECK(e.rss(t) == 16);
    // MM id slot 0 owns all 16 mappings (kernel encoding: 15).
    CHECK(folio_mm_id(f, 0) == t->mm->id);
    CHECK(f->mm_id_mapcount[0] == 15);
    CHECK(folio_mm_id(f, 1) == MM_ID_DUMMY);
    CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
    // folio_zero_user() zeroed 16 pages; the data is right.
    CHECK(e.count("kernel.pages_zeroed") == 16);
    CHECK(e.load(t, va + 5 * PAGE_SIZE + 1) == 0x11);
    CHECK(e.load(t, va + 15 * PAGE_SIZE + 4095) == 0);
    // The other pages of the folio need no fault.
    const uint64_t faults = e.count("faults.total");
    REQUIRE(e.store(t, va + 9 * PAGE_SIZE, 2));
    CHECK(e.count("faults.total") == faults);
  }

  SECTION("a populated PTE in the range makes it fall back to a smaller order") {
    const uint64_t base = va + 0x40 * PAGE_SIZE;
    REQUIRE(e.load(t, base) == 0);  // the zero page at page 0x40
    REQUIRE(e.store(t, base + 5 * PAGE_SIZE, 1));
    // 64K [0x40,0x50) and 32K [0x40,0x48) contain page 0x40; 16K [0x44,0x48) does not.
    folio* f = e.folio_at(t, base + 5 * PAGE_SIZE);
    CHECK(folio_order(f) == kmmtest::ORDER_16K);
    CHECK(e.pfn_at(t, base + 4 * PAGE_SIZE) == e.k.folio_pfn(f));
    CHECK(e.pfn_at(t, base) == e.k.zero_pfn());

    // Page 0x41: every enabled order's range contains page 0x40 or the 16K folio: order 0.
    REQUIRE(e.store(t, base + 1 * PAGE_SIZE, 1));
    CHECK(folio_order(e.folio_at(t, base + PAGE_SIZE)) == 0);
    CHECK(e.rss(t) == 5);
  }
}

TEST_CASE("faults: mTHP needs the aligned range inside the VMA", "[faults][mthp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::never, {{kmmtest::ORDER_64K, ThpMode::always}}); });
  task_struct* t = e.proc("p");
  // 8 pages at a 64K-aligned address: no 64K range fits.
  const uint64_t fixed = 0x10000000;
  const uint64_t va = e.mmap(t, 8 * PAGE_SIZE, PROT_READ | PROT_WRITE, fixed, MAP_FIXED);
  REQUIRE(va == fixed);
  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  CHECK(e.k.thp_vma_suitable_orders(v, va, 1ul << 4) == 0);
  REQUIRE(e.store(t, va + PAGE_SIZE, 1));
  CHECK(folio_order(e.folio_at(t, va + PAGE_SIZE)) == 0);

  // 16 pages starting 8 pages into a 64K block: the block sticks out of the VMA on the left.
  const uint64_t va2 = e.mmap(t, 16 * PAGE_SIZE, PROT_READ | PROT_WRITE, 0x20008000, MAP_FIXED);
  REQUIRE(e.store(t, va2 + 10 * PAGE_SIZE, 1));
  CHECK(folio_order(e.folio_at(t, va2 + 10 * PAGE_SIZE)) == 0);
}

TEST_CASE("faults: THP policy (thp_vma_allowable_orders)", "[faults][mthp]") {
  using M = ThpMode;
  struct Case {
    M global, o64k, o2m;
    vm_flags_t extra;
    unsigned long want;
  };
  const unsigned long B64K = 1ul << 4, B2M = 1ul << 9;
  const Case cases[] = {
      {M::always, M::never, M::inherit, 0, B2M},
      {M::madvise, M::never, M::inherit, 0, 0},
      {M::madvise, M::never, M::inherit, VM_HUGEPAGE, B2M},
      {M::never, M::never, M::inherit, VM_HUGEPAGE, 0},
      {M::never, M::always, M::inherit, 0, B64K},
      {M::never, M::madvise, M::never, 0, 0},
      {M::never, M::madvise, M::never, VM_HUGEPAGE, B64K},
      {M::always, M::always, M::inherit, VM_NOHUGEPAGE, 0},
      {M::always, M::inherit, M::inherit, 0, B64K | B2M},
  };
  for (const Case& c : cases) {
    Env e([&](KernelParams& p) { set_thp(p, c.global, {{kmmtest::ORDER_64K, c.o64k}, {kmmtest::ORDER_2M, c.o2m}}); });
    task_struct* t = e.proc("p");
    const uint64_t va = e.mmap(t, 2 * PMD_SIZE);
    vm_area_struct* v = e.k.vma_lookup(t->mm, va);
    v->vm_flags |= c.extra;
    CHECK(e.k.thp_vma_allowable_orders(v, v->vm_flags, true, true, ~0ul) == c.want);
  }
}

TEST_CASE("faults: vmf_anon_prepare returns RETRY and drops the VMA lock", "[faults][vma_lock]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 16 * PAGE_SIZE);
  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  REQUIRE(v->anon == nullptr);

  // A writer holds mmap_lock (a concurrent mmap/munmap): the fault under the per-VMA lock cannot
  // create the anon_vma.
  e.k.mmap_write_lock(t->mm);
  REQUIRE(e.k.vma_start_read(v));
  const uint32_t flags = FAULT_FLAG_DEFAULT | FAULT_FLAG_WRITE | FAULT_FLAG_USER | FAULT_FLAG_VMA_LOCK;
  vm_fault_t ret = e.k.handle_mm_fault(v, va, flags);
  CHECK(ret == VM_FAULT_RETRY);
  CHECK(v->vm_lock.readers() == 0);  // dropped by the callee
  CHECK(v->anon == nullptr);
  CHECK(pte_none(e.pte(t, va)));
  e.k.mmap_write_unlock(t->mm);

  // Without the writer the same fault completes under the VMA lock.
  REQUIRE(e.k.vma_start_read(v));
  ret = e.k.handle_mm_fault(v, va, flags);
  CHECK(ret == 0);
  CHECK(v->vm_lock.readers() == 1);  // the caller releases it
  e.k.vma_end_read(v);
  CHECK(v->anon != nullptr);
  CHECK(e.a.pte_write(e.pte(t, va)));
  CHECK(t->mm->mmap_lock.readers() == 0);
}

TEST_CASE("faults: mmap places anonymous memory top-down, PMD-aligned for PMD multiples", "[faults][mmap]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t a1 = e.mmap(t, 3 * PAGE_SIZE);
  CHECK(a1 == t->mm->mmap_base - 3 * PAGE_SIZE);
  const uint64_t a2 = e.mmap(t, 4 * PMD_SIZE);
  CHECK(IS_ALIGNED(a2, PMD_SIZE));
  CHECK(a2 + 4 * PMD_SIZE <= a1);
  CHECK(a2 + 4 * PMD_SIZE > a1 - PMD_SIZE);  // the highest aligned spot
  // The alignment left a gap below a1: the next small mapping goes there (highest free range).
  const uint64_t a3 = e.mmap(t, 5 * PAGE_SIZE);
  CHECK(a3 == a1 - 5 * PAGE_SIZE);

  vm_area_struct* v = e.k.vma_lookup(t->mm, a2 + PMD_SIZE);
  REQUIRE(v);
  CHECK(v->vm_start == a2);
  CHECK(v->vm_end == a2 + 4 * PMD_SIZE);
  CHECK(v->vm_pgoff == a2 >> PAGE_SHIFT);
  CHECK((v->vm_flags & (VM_READ | VM_WRITE | VM_MAYWRITE | VM_ACCOUNT)) == (VM_READ | VM_WRITE | VM_MAYWRITE | VM_ACCOUNT));
  CHECK(e.k.vma_lookup(t->mm, a3 - 1) == nullptr);
  CHECK(e.k.find_vma(t->mm, a3 - 1) == e.k.vma_lookup(t->mm, a3));
  CHECK(e.k.find_vma(t->mm, a1 + 3 * PAGE_SIZE) == nullptr);

  // Refused: shared anonymous (needs shmem), a file mapping without a file (a bad fd), zero length.
  CHECK(e.k.sys_mmap(t, 0, PAGE_SIZE, PROT_READ, MAP_SHARED | MAP_ANONYMOUS) == -EINVAL);
  CHECK(e.k.sys_mmap(t, 0, PAGE_SIZE, PROT_READ, MAP_PRIVATE) == -EBADF);
  CHECK(e.k.sys_mmap(t, 0, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS) == -EINVAL);

  // A hint that is free is taken as is.
  CHECK(e.mmap(t, PAGE_SIZE, PROT_READ, 0x30000000) == 0x30000000);
  // MAP_FIXED over populated memory replaces it.
  REQUIRE(e.store(t, a1 + PAGE_SIZE, 9));
  CHECK(e.rss(t) == 1);
  CHECK(e.mmap(t, PAGE_SIZE, PROT_READ | PROT_WRITE, a1 + PAGE_SIZE, MAP_FIXED) == a1 + PAGE_SIZE);
  CHECK(e.rss(t) == 0);
  CHECK(e.load(t, a1 + PAGE_SIZE) == 0);
  CHECK(e.k.vma_lookup(t->mm, a1)->vm_end == a1 + PAGE_SIZE);
}

TEST_CASE("faults: the cost account up to the handler's first store barrier", "[faults][barrier]") {
  // x86: the first LOCK-prefixed instruction of do_user_addr_fault is vma_start_read()'s
  // down_read_trylock() in lock_vma_under_rcu(); what precedes it is the entry and fault_arch.
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 16 * PAGE_SIZE);
  REQUIRE(e.store(t, va, 1));
  e.k.clear_cost();
  CHECK(e.k.cost_before_store_barrier() == nullptr);
  e.k.charge(Cost::exc_entry);
  e.write_fault(t, va, /*present=*/true);
  const CostAccount* b = e.k.cost_before_store_barrier();
  REQUIRE(b);
  CHECK((*b)[Cost::exc_entry] == 1);
  CHECK((*b)[Cost::fault_arch] == 1);
  CHECK((*b)[Cost::lock_op] == 0);
  CHECK(e.k.cost()[Cost::lock_op] >= 1);  // the locks themselves come after it
  e.k.clear_cost();
  CHECK(e.k.cost_before_store_barrier() == nullptr);
  CHECK(e.a.exception_return_drains_stores());
}

TEST_CASE("faults: which instructions wait for the store buffer, per architecture", "[faults][barrier]") {
  auto bit = [](Cost c) { return uint32_t(1) << unsigned(c); };
  Env x86;
  const uint32_t x = x86.a.store_barrier_items();
  CHECK((x & bit(Cost::lock_op)));
  CHECK((x & bit(Cost::page_op)));
  CHECK((x & bit(Cost::invlpg)));
  CHECK((x & bit(Cost::flush_full)));
  CHECK_FALSE((x & bit(Cost::pte_write)));
  Env arm({}, mmusim::pg::Isa::arm64);
  const uint32_t a = arm.a.store_barrier_items();
  CHECK((a & bit(Cost::dsb_bcast)));
  CHECK_FALSE((a & bit(Cost::lock_op)));  // acquire/release atomics do not wait for older stores
  CHECK_FALSE(arm.a.exception_return_drains_stores());
}

// CPUs at different clocks (the i7-12700's E-cores): an entry's prices and its time are in the
// cycles of the CPU it runs on (Kernel::set_cpu_clocks, enter()).
TEST_CASE("kernel: an entry's prices and time in the cycles of its CPU's clock", "[kernel][clocks]") {
  kmmtest::Env e;
  kmm::task_struct* t = e.proc("p");
  kmm::CostModel prices;
  prices.d[size_t(kmm::Cost::syscall)] = mmusim::Duration{100, true};     // 100 ns
  prices.d[size_t(kmm::Cost::exc_entry)] = mmusim::Duration{700, false};  // 700 cycles
  e.k.set_lock_timing(&prices, 2.0, nullptr);
  e.k.set_cpu_clocks({2.0, 4.0});
  const uint64_t start = 1'000'000;
  for (int cpu : {0, 1}) {
    INFO("cpu " << cpu);
    const double ghz = cpu ? 4.0 : 2.0;
    e.k.clear_cost();
    e.k.enter(t, cpu, start);
    CHECK(e.k.clock_ghz() == ghz);
    e.k.charge(kmm::Cost::syscall);
    CHECK(e.k.cycles_now() == Approx(100 * ghz));       // 200 or 400 cycles: 100 ns either way
    CHECK(e.k.time_now_ps() == start + 100'000);
    e.k.charge(kmm::Cost::exc_entry);
    CHECK(e.k.cycles_now() == Approx(100 * ghz + 700));  // 700 cycles: 350 or 175 ns
    CHECK(e.k.time_now_ps() == start + 100'000 + uint64_t(700'000 / ghz));
  }
  // Without a table every CPU is at set_lock_timing()'s clock.
  e.k.set_cpu_clocks({});
  e.k.clear_cost();
  e.k.enter(t, 1, start);
  e.k.charge(kmm::Cost::syscall);
  CHECK(e.k.cycles_now() == Approx(200));
  e.k.clear_cost();
}

// The kernel's instruction work on a slower core (an E-core) or on an SMT thread whose sibling is
// busy (Kernel::set_cost_scale): the items priced in cycles take `scale` times their cycles there,
// the items priced in ns (memory-bound bulk work) and the extra cycles (transfers, waits) do not
// change; the scale is read at each entry, and price_cycles_on() prices another CPU's work (an
// IPI's flush) at that CPU's scale. The account's time (CostModel::cycles) agrees with the entry's.
TEST_CASE("kernel: the cost scale of the CPU an entry runs on multiplies the items priced in cycles only", "[kernel][clocks]") {
  kmmtest::Env e;
  kmm::task_struct* t = e.proc("p");
  kmm::CostModel prices;
  prices.d[size_t(kmm::Cost::syscall)] = mmusim::Duration{100, true};     // 100 ns
  prices.d[size_t(kmm::Cost::exc_entry)] = mmusim::Duration{700, false};  // 700 cycles
  prices.d[size_t(kmm::Cost::invlpg)] = mmusim::Duration{350, false};     // 350 cycles
  e.k.set_lock_timing(&prices, 2.0, nullptr);
  double sibling_factor = 1.0;  // CPU 1's scale, changed between entries
  e.k.set_cost_scale([&](int cpu) { return cpu == 1 ? sibling_factor : 1.3; });
  const uint64_t start = 1'000'000;
  auto entry = [&](int cpu) {
    e.k.clear_cost();
    e.k.enter(t, cpu, start);
    e.k.charge(kmm::Cost::syscall);
    e.k.charge(kmm::Cost::exc_entry, 2);
    e.k.cost().extra_cycles += 50;
    const double now = e.k.cycles_now();
    CHECK(prices.cycles(e.k.cost(), 2.0, e.k.cost_scale()) == Approx(now));
    return now;
  };
  CHECK(entry(0) == Approx(200 + 1400 * 1.3 + 50));
  CHECK(e.k.cost_scale() == 1.3);
  CHECK(e.k.price_cycles(kmm::Cost::invlpg) == Approx(350 * 1.3));
  CHECK(e.k.price_cycles_on(kmm::Cost::invlpg, 1) == Approx(350));  // CPU 1's scale now: 1
  CHECK(entry(1) == Approx(200 + 1400 + 50));
  sibling_factor = 1.6;
  CHECK(entry(1) == Approx(200 + 1400 * 1.6 + 50));
  CHECK(e.k.price_cycles_on(kmm::Cost::syscall, 0) == Approx(200));  // ns: the same anywhere
  e.k.set_cost_scale({});
  CHECK(entry(1) == Approx(200 + 1400 + 50));
  e.k.clear_cost();
}
