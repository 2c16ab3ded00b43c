// SPDX-License-Identifier: GPL-2.0-only
// fork (kernel_mm/fork.cpp, PORTMAP §2) and the write faults that follow it (§1.5, §1.7): the
// page-table copy in both fork_copy variants, copy_huge_pmd, the pinned-page copy, VM_DONTCOPY /
// VM_WIPEONFORK, COW copies while the child lives, reuse once it has exited, the whole-folio reuse
// patch and its variants, and the C1 fault counts of the issue in the functional driver.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

namespace {
void mthp64k(KernelParams& p) { set_thp(p, ThpMode::never, {{kmmtest::ORDER_64K, ThpMode::always}}); }
void pmd_thp(KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); }

// Populate [va, va+len) with one write per page (value = page index).
void populate(Env& e, task_struct* t, uint64_t va, uint64_t len) {
  for (uint64_t off = 0; off < len; off += PAGE_SIZE) REQUIRE(e.store(t, va + off, uint8_t(off >> PAGE_SHIFT)));
}
}  // namespace

TEST_CASE("fork: order-0 pages are shared read-only, then copied on write while the child lives", "[fork]") {
  ForkCopy variant = GENERATE(ForkCopy::batched, ForkCopy::per_pte);
  Env e([&](KernelParams& p) { p.fork_copy = variant; });
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, 8 * PAGE_SIZE);
  populate(e, t, va, 8 * PAGE_SIZE);
  e.k.lru_add_drain();
  const pfn_t pfn3 = e.pfn_at(t, va + 3 * PAGE_SIZE);
  const uint64_t flush_mm = e.count("kernel.tlb_flush_mm");

  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  CHECK(c->pid != t->pid);
  CHECK(c->parent == t);
  CHECK(c->comm == t->comm);
  REQUIRE(c->mm);
  CHECK(c->mm != t->mm);
  CHECK(c->mm->id != t->mm->id);
  CHECK(e.count("kernel.fork") == 1);
  CHECK(e.count("kernel.fork_ptes_copied") == 8);
  CHECK(e.count("kernel.tlb_flush_mm") == flush_mm + 1);  // flush_tlb_mm(oldmm) in dup_mmap
  CHECK(e.rss(c) == 8);
  vm_area_struct* pv = e.k.vma_lookup(t->mm, va);
  vm_area_struct* cv = e.k.vma_lookup(c->mm, va);
  REQUIRE(cv);
  CHECK(cv->vm_start == pv->vm_start);
  CHECK(cv->vm_end == pv->vm_end);
  REQUIRE(cv->anon);
  CHECK(cv->anon != pv->anon);
  CHECK(cv->anon->root_id == pv->anon->root_id);
  for (unsigned i = 0; i < 8; ++i) {
    const uint64_t a = va + i * PAGE_SIZE;
    CHECK_FALSE(e.writable(t, a));
    CHECK_FALSE(e.writable(c, a));
    CHECK(e.pfn_at(t, a) == e.pfn_at(c, a));
    CHECK_FALSE(e.a.pte_young(e.pte(c, a)));  // pte_mkold() in the child
    folio* f = e.folio_at(t, a);
    CHECK(folio_mapcount(f) == 2);
    CHECK(folio_ref_count(f) == 2);
    CHECK_FALSE(PageAnonExclusive(f));
  }

  // The parent writes: the page is shared, it copies.
  REQUIRE(e.store(t, va + 3 * PAGE_SIZE + 1, 0xee));
  CHECK(e.k.last_fault().kind == FaultKind::copy);
  CHECK(e.count("kernel.wp_copy") == 1);
  CHECK(e.pfn_at(t, va + 3 * PAGE_SIZE) != pfn3);
  CHECK(e.writable(t, va + 3 * PAGE_SIZE));
  CHECK(PageAnonExclusive(e.page_at(t, va + 3 * PAGE_SIZE)));
  CHECK(e.pfn_at(c, va + 3 * PAGE_SIZE) == pfn3);
  folio* old = e.k.pfn_to_page(pfn3);
  CHECK(folio_mapcount(old) == 1);
  CHECK(folio_ref_count(old) == 1);
  CHECK(e.count("kernel.pages_copied") == 1);
  // Contents: the parent sees its write on top of the copy, the child the original.
  CHECK(e.load(t, va + 3 * PAGE_SIZE) == 3);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 1) == 0xee);
  CHECK(e.load(c, va + 3 * PAGE_SIZE + 1) == 0);
  CHECK(e.load(c, va + 3 * PAGE_SIZE) == 3);

  // The child writes the page it alone maps now: wp_can_reuse_anon_folio() reuses it.
  REQUIRE(e.store(c, va + 3 * PAGE_SIZE, 0x99));
  CHECK(e.k.last_fault().kind == FaultKind::reuse);
  CHECK(e.pfn_at(c, va + 3 * PAGE_SIZE) == pfn3);
  CHECK(e.writable(c, va + 3 * PAGE_SIZE));
  CHECK(PageAnonExclusive(old));

  SECTION("after the child exits the parent reuses its pages") {
    const pfn_t pfn5 = e.pfn_at(t, va + 5 * PAGE_SIZE);
    e.k.sys_exit(c, 0);
    CHECK(e.k.sys_wait(t, c) == c->pid);
    CHECK(folio_ref_count(e.k.pfn_to_page(pfn5)) == 1);
    REQUIRE(e.store(t, va + 5 * PAGE_SIZE, 0x55));
    CHECK(e.k.last_fault().kind == FaultKind::reuse);
    CHECK(e.pfn_at(t, va + 5 * PAGE_SIZE) == pfn5);
    CHECK(e.writable(t, va + 5 * PAGE_SIZE));
    CHECK(e.count("kernel.wp_copy") == 1);
  }
}

TEST_CASE("fork: a 64K folio is copied as one batch or PTE by PTE", "[fork]") {
  ForkCopy variant = GENERATE(ForkCopy::batched, ForkCopy::per_pte);
  Env e([&](KernelParams& p) {
    mthp64k(p);
    p.fork_copy = variant;
  });
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  populate(e, t, va, 64 * PAGE_SIZE);  // 4 folios
  folio* f = e.folio_at(t, va);
  REQUIRE(folio_order(f) == 4);

  e.k.take_cost();
  task_struct* c = e.k.sys_fork(t);
  const CostAccount cost = e.k.take_cost();
  REQUIRE(c);
  CHECK(e.count("kernel.fork_ptes_copied") == 64);
  CHECK(e.rss(c) == 64);
  for (unsigned i = 0; i < 16; ++i) {
    CHECK_FALSE(e.writable(t, va + i * PAGE_SIZE));
    CHECK_FALSE(e.writable(c, va + i * PAGE_SIZE));
    CHECK(e.pfn_at(c, va + i * PAGE_SIZE) == e.k.folio_pfn(f) + i);
    CHECK(folio_page(f, i)->mapcount == 2);
    CHECK_FALSE(PageAnonExclusive(folio_page(f, i)));
  }
  CHECK(folio_large_mapcount(f) == 32);
  CHECK(folio_ref_count(f) == 32);
  CHECK(folio_mm_id(f, 1) == c->mm->id);
  CHECK(f->mm_id_mapcount[1] == 15);
  CHECK(folio_test_large_maybe_mapped_shared(f));
  // Batched: one large-mapcount update (and lock) per folio; per-PTE: one per PTE.
  const uint64_t locks_per_folio = variant == ForkCopy::batched ? 1 : 16;
  // Locks besides the large mapcount: mmap_lock x2, VMA write lock, PTLs (dst, src), pte_alloc.
  CHECK(cost[Cost::lock_op] >= 4 * locks_per_folio);
  CHECK(cost[Cost::lock_op] < 4 * locks_per_folio + 10);
  CHECK(cost[Cost::pte_write] == 2 * 64);  // 64 wrprotects in the parent, 64 sets in the child

  SECTION("a write while the child lives copies 4K (the folio is shared)") {
    REQUIRE(e.store(t, va + 2 * PAGE_SIZE, 1));
    CHECK(e.k.last_fault().kind == FaultKind::copy);
    CHECK(folio_order(e.folio_at(t, va + 2 * PAGE_SIZE)) == 0);
    CHECK(folio_large_mapcount(f) == 31);
    CHECK(e.load(c, va + 2 * PAGE_SIZE) == 2);
  }
}

TEST_CASE("fork: a PMD THP is shared by copy_huge_pmd", "[fork][thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.store(t, va + 3, 7));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));

  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  REQUIRE(e.pmd_huge(c, va));
  CHECK_FALSE(e.a.pmd_write(e.pmd(t, va)));
  CHECK_FALSE(e.a.pmd_write(e.pmd(c, va)));
  CHECK(e.a.pmd_pfn(e.pmd(c, va)) == e.k.folio_pfn(f));
  CHECK(folio_entire_mapcount(f) == 2);
  CHECK(folio_large_mapcount(f) == 2);
  CHECK(folio_ref_count(f) == 2);
  CHECK_FALSE(PageAnonExclusive(f));
  CHECK(e.rss(c) == HPAGE_PMD_NR);
  CHECK(e.load(c, va + 3) == 7);

  SECTION("a parent write while the child lives splits the PMD and copies 4K") {
    REQUIRE(e.store(t, va + 3, 8));
    CHECK(e.count("kernel.split_huge_pmd") == 1);
    CHECK_FALSE(e.pmd_huge(t, va));
    CHECK(e.pmd_huge(c, va));
    CHECK(e.k.last_fault().kind == FaultKind::copy);
    CHECK(folio_order(e.folio_at(t, va)) == 0);
    CHECK(e.pfn_at(t, va + PAGE_SIZE) == e.k.folio_pfn(f) + 1);
    CHECK_FALSE(e.writable(t, va + PAGE_SIZE));
    CHECK(folio_large_mapcount(f) == 1 + 511);
    CHECK(e.load(t, va + 3) == 8);
    CHECK(e.load(c, va + 3) == 7);
  }
  SECTION("after the child exits one fault reuses the whole THP") {
    e.k.sys_exit(c, 0);
    REQUIRE(e.store(t, va + 100 * PAGE_SIZE, 8));
    CHECK(e.k.last_fault().kind == FaultKind::huge_reuse);
    CHECK(e.pmd_huge(t, va));
    CHECK(e.a.pmd_write(e.pmd(t, va)));
    CHECK(PageAnonExclusive(f));
    const uint64_t faults = e.count("faults.total");
    REQUIRE(e.store(t, va + 300 * PAGE_SIZE, 8));
    CHECK(e.count("faults.total") == faults);
  }
}

TEST_CASE("fork: a possibly pinned page is copied for the child at fork", "[fork]") {
  Env e;
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, 4 * PAGE_SIZE);
  populate(e, t, va, 4 * PAGE_SIZE);
  e.k.lru_add_drain();
  folio* pinned = e.folio_at(t, va + PAGE_SIZE);
  // A GUP pin: FOLL_PIN on a small folio adds GUP_PIN_COUNTING_BIAS; MMF_HAS_PINNED.
  folio_ref_add(pinned, 1024);
  t->mm->has_pinned = true;

  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  // The parent keeps the pinned page exclusive and writable; the child has its own copy.
  CHECK(e.writable(t, va + PAGE_SIZE));
  CHECK(PageAnonExclusive(pinned));
  CHECK(folio_mapcount(pinned) == 1);
  CHECK(e.pfn_at(c, va + PAGE_SIZE) != e.k.folio_pfn(pinned));
  CHECK(e.writable(c, va + PAGE_SIZE));
  CHECK(PageAnonExclusive(e.page_at(c, va + PAGE_SIZE)));
  CHECK(e.load(c, va + PAGE_SIZE) == 1);
  CHECK(e.count("kernel.pages_copied") == 1);
  // The others are shared as usual.
  CHECK(e.pfn_at(c, va) == e.pfn_at(t, va));
  CHECK_FALSE(e.writable(t, va));
  CHECK(e.rss(c) == 4);
  CHECK_FALSE(c->mm->has_pinned);
  folio_ref_sub(pinned, 1024);
}

TEST_CASE("fork: VM_DONTCOPY and VM_WIPEONFORK", "[fork]") {
  Env e;
  task_struct* t = e.proc("parent");
  const uint64_t a = e.mmap(t, 4 * PAGE_SIZE);
  const uint64_t b = e.mmap(t, 4 * PAGE_SIZE);
  const uint64_t d = e.mmap(t, 4 * PAGE_SIZE);
  populate(e, t, a, 4 * PAGE_SIZE);
  populate(e, t, b, 4 * PAGE_SIZE);
  populate(e, t, d, 4 * PAGE_SIZE);
  e.k.vma_lookup(t->mm, a)->vm_flags |= VM_DONTCOPY;
  e.k.vma_lookup(t->mm, b)->vm_flags |= VM_WIPEONFORK;

  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  CHECK(e.k.vma_lookup(c->mm, a) == nullptr);
  vm_area_struct* wb = e.k.vma_lookup(c->mm, b);
  REQUIRE(wb);
  CHECK(wb->anon == nullptr);
  CHECK(pte_none(e.pte(c, b)));
  CHECK(e.load(c, b + PAGE_SIZE) == 0);
  CHECK(e.load(c, d + PAGE_SIZE) == 1);
  CHECK(e.rss(c) == 4);
  // The parent keeps a and b writable: they were not write-protected.
  CHECK(e.writable(t, a));
  CHECK(e.writable(t, b));
  CHECK_FALSE(e.writable(t, d));
}

TEST_CASE("fork: whole-folio reuse after the child exits (wp-reuse-whole-folio)", "[fork][wp_reuse]") {
  const WpReuse variant = GENERATE(WpReuse::off, WpReuse::block16, WpReuse::pagetable, WpReuse::pagetable_flush);
  Env e([&](KernelParams& p) {
    set_thp(p, ThpMode::never, {{kmmtest::ORDER_1M, ThpMode::always}});
    p.wp_reuse = variant;
  });
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  populate(e, t, va, PMD_SIZE);
  folio* f = e.folio_at(t, va);
  REQUIRE(folio_order(f) == kmmtest::ORDER_1M);
  task_struct* c = e.k.sys_fork(t);
  e.k.sys_exit(c, 0);
  REQUIRE(e.k.sys_wait(t, c) == c->pid);
  CHECK(folio_ref_count(f) == 256);
  CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));

  const uint64_t fault_at = va + 37 * PAGE_SIZE;
  REQUIRE(e.store(t, fault_at, 0xaa));
  CHECK(e.k.last_fault().kind == FaultKind::reuse);
  CHECK(e.count("kernel.wp_reuse") == 1);
  CHECK(e.count("kernel.wp_copy") == 0);
  CHECK(e.pfn_at(t, fault_at) == e.k.folio_pfn(f) + 37);
  unsigned writable = 0, exclusive = 0;
  for (unsigned i = 0; i < 256; ++i) {
    writable += e.writable(t, va + i * PAGE_SIZE);
    exclusive += PageAnonExclusive(folio_page(f, i));
  }
  switch (variant) {
    case WpReuse::off:
      CHECK(writable == 1);
      CHECK(exclusive == 1);
      CHECK(e.count("kernel.wp_reuse_large_ptes") == 0);
      break;
    case WpReuse::block16:
      // The aligned block of 16 around page 37: pages 32..47.
      CHECK(writable == 16);
      CHECK(exclusive == 16);
      for (unsigned i = 32; i < 48; ++i) CHECK(e.writable(t, va + i * PAGE_SIZE));
      CHECK(e.count("kernel.wp_reuse_large_ptes") == 16);
      CHECK(e.k.last_fault().ptes_changed == 16);
      break;
    case WpReuse::pagetable:
    case WpReuse::pagetable_flush:
      CHECK(writable == 256);
      CHECK(exclusive == 256);
      CHECK(e.count("kernel.wp_reuse_large_ptes") == 256);
      CHECK(e.k.last_fault().ptes_changed == 256);
      break;
  }
  CHECK(e.count("kernel.tlb_flush_local") == (variant == WpReuse::pagetable_flush ? 1u : 0u));
  // PTEs made writable by the walk are dirty (pte_mkwrite moves SavedDirty back) and map in order.
  CHECK(e.a.pte_dirty(e.pte(t, va + 33 * PAGE_SIZE)));
  CHECK(e.load(t, fault_at) == 0xaa);
  CHECK(e.load(t, va + 40 * PAGE_SIZE) == 40);
  e.k.check_invariants("after reuse", true);
}

TEST_CASE("fork: 6.12 (no large-folio reuse) copies every page of a once-shared mTHP", "[fork][wp_reuse]") {
  Env e([](KernelParams& p) {
    mthp64k(p);
    p.large_folio_reuse = false;
    p.wp_reuse = WpReuse::pagetable;  // needs the patch base: no effect without it
  });
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  populate(e, t, va, 16 * PAGE_SIZE);
  folio* f = e.folio_at(t, va);
  task_struct* c = e.k.sys_fork(t);
  e.k.sys_exit(c, 0);
  for (unsigned i = 0; i < 16; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE, 1));
  CHECK(e.count("kernel.wp_copy") == 16);
  CHECK(e.count("kernel.wp_reuse") == 0);
  CHECK(e.count("faults.write") == 1 + 16);  // populate (one 64K folio) + the pass
  // The last copy left the old 64K folio unmapped and freed.
  CHECK(folio_order(e.folio_at(t, va)) == 0);
  CHECK(e.k.folio_pfn(e.folio_at(t, va)) != e.k.folio_pfn(f));
}

// ------------------------------------------------------------------------------------------------
// C1 in the functional driver (the issue): populate, fork, the child exits, the parent waits,
// then one store per 4K page in ascending order. Faults of the pass: one per page for 4K pages and
// for every size with wp_reuse=off; one per folio with pagetable; one per 16 pages with block16
// (1M and 2M-pte: one per 64K); one per THP when PMD-mapped, in every variant.

namespace {
enum class Folio { k4, k64, m1, m2pte, m2pmd };
const char* folio_name(Folio f) {
  switch (f) {
    case Folio::k4: return "4K";
    case Folio::k64: return "64K";
    case Folio::m1: return "1M";
    case Folio::m2pte: return "2M-pte";
    case Folio::m2pmd: return "2M-pmd";
  }
  return "?";
}
unsigned folio_pages(Folio f) {
  switch (f) {
    case Folio::k4: return 1;
    case Folio::k64: return 16;
    case Folio::m1: return 256;
    case Folio::m2pte:
    case Folio::m2pmd: return 512;
  }
  return 1;
}
}  // namespace

TEST_CASE("fork: C1 fault counts in the functional driver", "[fork][wp_reuse][c1]") {
  const Folio fs = GENERATE(Folio::k4, Folio::k64, Folio::m1, Folio::m2pte, Folio::m2pmd);
  const WpReuse variant = GENERATE(WpReuse::off, WpReuse::block16, WpReuse::pagetable, WpReuse::pagetable_flush);
  CAPTURE(folio_name(fs), int(variant));
  constexpr uint64_t kRegion = 4 * PMD_SIZE;  // 8 MiB: 2048 pages
  constexpr uint64_t kPages = kRegion / PAGE_SIZE;

  Env e([&](KernelParams& p) {
    switch (fs) {
      case Folio::k4: set_thp(p, ThpMode::never, {}); break;
      case Folio::k64: set_thp(p, ThpMode::never, {{kmmtest::ORDER_64K, ThpMode::always}}); break;
      case Folio::m1: set_thp(p, ThpMode::never, {{kmmtest::ORDER_1M, ThpMode::always}}); break;
      case Folio::m2pte:
      case Folio::m2pmd: set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); break;
    }
    p.wp_reuse = variant;
  });
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, kRegion);
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));
  populate(e, t, va, kRegion);
  if (fs == Folio::m2pte) {
    // As the cow.c selftest makes a PTE-mapped THP: mprotect one page read-only and back, which
    // splits the PMD and keeps the 2M folio.
    for (uint64_t off = 0; off < kRegion; off += PMD_SIZE) {
      REQUIRE(e.k.sys_mprotect(t, va + off + PAGE_SIZE, PAGE_SIZE, PROT_READ) == 0);
      REQUIRE(e.k.sys_mprotect(t, va + off + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
      REQUIRE_FALSE(e.pmd_huge(t, va + off));
    }
  }
  // Every page is backed by a folio of the configured size.
  if (fs == Folio::m2pmd) {
    REQUIRE(e.pmd_huge(t, va));
  } else {
    REQUIRE(folio_nr_pages(e.folio_at(t, va + kRegion - PAGE_SIZE)) == long(folio_pages(fs)));
    REQUIRE(folio_nr_pages(e.folio_at(t, va)) == long(folio_pages(fs)));
  }

  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  e.k.sys_exit(c, 0);
  REQUIRE(e.k.sys_wait(t, c) == c->pid);

  const uint64_t before = e.count("faults.total");
  for (uint64_t i = 0; i < kPages; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE + 1, 0xc1));
  const uint64_t faults = e.count("faults.total") - before;

  uint64_t want;
  if (fs == Folio::m2pmd) want = kPages / 512;
  else if (variant == WpReuse::off || fs == Folio::k4) want = kPages;
  else if (variant == WpReuse::block16) want = kPages / 16;
  else want = kPages / folio_pages(fs);
  CHECK(faults == want);
  CHECK(e.count("faults.spurious") == 0);
  CHECK(e.count("kernel.wp_copy") == 0);  // everything was reused
  // The pass left every page writable and with the right contents.
  for (uint64_t i = 0; i < kPages; i += 97) {
    CHECK(e.load(t, va + i * PAGE_SIZE) == int(uint8_t(i)));
    CHECK(e.load(t, va + i * PAGE_SIZE + 1) == 0xc1);
  }
}

// C4 (arm64, counters only): 64K folios, the first store pass after fork(). Mainline unfolds every
// contpte block once (wp_page_reuse's ptep_set_access_flags on one PTE of a live block) and
// nothing folds it again; the patch rewrites each block as a whole and unfolds none. The fork
// itself: batched keeps the parent's blocks (wrprotect_ptes over whole blocks) and creates the
// child's directly (set_ptes); per-PTE unfolds each parent block and folds each child block again.
TEST_CASE("fork: C4 contpte_convert counts on arm64", "[fork][wp_reuse][arm64]") {
  const WpReuse variant = GENERATE(WpReuse::off, WpReuse::pagetable);
  const ForkCopy copy = GENERATE(ForkCopy::batched, ForkCopy::per_pte);
  CAPTURE(int(variant), int(copy));
  constexpr uint64_t kRegion = 4 * PMD_SIZE;
  constexpr uint64_t kBlocks = kRegion / CONT_PTE_SIZE;  // 128 blocks of 16 PTEs
  Env e(
      [&](KernelParams& p) {
        mthp64k(p);
        p.wp_reuse = variant;
        p.fork_copy = copy;
      },
      mmusim::pg::Isa::arm64);
  task_struct* t = e.proc("parent");
  const uint64_t va = e.mmap(t, kRegion);
  populate(e, t, va, kRegion);
  REQUIRE(e.a.pte_cont(e.pte(t, va)));
  const uint64_t c0 = e.count("kernel.contpte_convert");
  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  const uint64_t at_fork = e.count("kernel.contpte_convert") - c0;
  CHECK(at_fork == (copy == ForkCopy::batched ? 0 : 2 * kBlocks));
  CHECK(e.a.pte_cont(e.pte(c, va)));
  e.k.sys_exit(c, 0);
  REQUIRE(e.k.sys_wait(t, c) == c->pid);

  const uint64_t c1 = e.count("kernel.contpte_convert");
  const uint64_t f1 = e.count("faults.total");
  for (uint64_t off = 0; off < kRegion; off += PAGE_SIZE) REQUIRE(e.store(t, va + off, 2));
  const uint64_t converts = e.count("kernel.contpte_convert") - c1;
  const uint64_t faults = e.count("faults.total") - f1;
  if (variant == WpReuse::off) {
    CHECK(faults == kRegion / PAGE_SIZE);
    // Per-PTE fork already unfolded the parent's blocks: nothing left to unfold.
    CHECK(converts == (copy == ForkCopy::batched ? kBlocks : 0));
  } else {
    CHECK(faults == kBlocks);
    CHECK(converts == 0);
    CHECK(e.a.pte_cont(e.pte(t, va)));
  }
}

TEST_CASE("fork: the fork trace event names parent and child", "[fork][trace]") {
  mmusim::Stats stats;
  NullMmuHw hw;
  mmusim::Trace trace;
  std::string out;
  trace.open_buffer(&out, mmusim::make_ftrace_format());
  KernelParams p;
  p.phys_mem = 256ull << 20;
  Kernel k(p, mmusim::pg::Isa::x86_64, hw, stats, &trace);
  task_struct* t = k.create_process("forker");
  k.enter(t, 0);
  task_struct* c = k.sys_fork(t);
  REQUIRE(c);
  trace.close();
  CHECK(trace.events() == 1);
  CHECK(out.find("fork") != std::string::npos);
  CHECK(out.find("parent_pid=" + std::to_string(t->pid)) != std::string::npos);
  CHECK(out.find("child_pid=" + std::to_string(c->pid)) != std::string::npos);
}

// The struct pages go through the caches (Kernel::struct_page_touch): fork() writes each shared
// page's (folio_try_dup_anon_rmap_ptes: its _mapcount), the child's exit each again
// (folio_remove_rmap_ptes), at the vmemmap's physical place: 64 bytes per frame above the frames.
TEST_CASE("fork: the struct pages of the folios go through the caches (dup, zap)", "[fork][struct_page]") {
  struct MemSpy : NullMmuHw {
    uint64_t vmemmap = 0;
    std::vector<uint64_t> written;  // struct pages (by pfn) written, in order
    bool wants_kernel_memory() const override { return true; }
    void kernel_memory(int, uint64_t pa, uint64_t bytes, bool write) override {
      if (pa < vmemmap || !write) return;
      REQUIRE((pa - vmemmap) % Kernel::kStructPageBytes == 0);
      for (uint64_t b = 0; b < bytes; b += Kernel::kStructPageBytes)
        written.push_back((pa - vmemmap + b) / Kernel::kStructPageBytes);
    }
  } hw;
  mmusim::Stats stats;
  KernelParams p;
  p.phys_mem = 256ull << 20;
  kmmtest::set_thp(p, ThpMode::never, {});
  Kernel k(p, mmusim::pg::Isa::x86_64, hw, stats);
  hw.vmemmap = k.struct_page_pa(0);
  CHECK(hw.vmemmap == k.nr_frames() * PAGE_SIZE);
  UserAccess ua(k);
  task_struct* t = kmmtest::start_process(k);
  const int64_t va = k.sys_mmap(t, 0, 64 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(va > 0);
  std::set<uint64_t> data;
  for (unsigned i = 0; i < 64; ++i) {
    k.enter(t, 0);
    REQUIRE(ua.store8(t, uint64_t(va) + i * PAGE_SIZE, 1));
    data.insert(k.page_to_pfn(k.pfn_to_page(k.arch().pte_pfn(*k.find_pte(t->mm, uint64_t(va) + i * PAGE_SIZE)))));
  }
  auto count_data = [&](size_t from) {
    size_t n = 0;
    for (size_t i = from; i < hw.written.size(); ++i) n += data.count(hw.written[i]);
    return n;
  };
  const size_t before = hw.written.size();
  task_struct* c = k.sys_fork(t);
  REQUIRE(c);
  CHECK(count_data(before) == 64);  // each data page's struct page, once
  const size_t after_fork = hw.written.size();
  k.sys_exit(c, 0);
  CHECK(k.sys_wait(t, c) == c->pid);
  CHECK(count_data(after_fork) == 64);  // and again in the child's zap
}
