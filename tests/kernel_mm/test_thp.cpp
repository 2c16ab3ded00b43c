// SPDX-License-Identifier: GPL-2.0-only
// PMD THP (kernel_mm/huge_memory.cpp, PORTMAP §1.6): the PMD fault, the huge zero page, the split
// on a write to it, __split_huge_pmd through split_vma, and do_huge_pmd_wp_page reuse.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

namespace {
void pmd_thp(KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); }
}  // namespace

TEST_CASE("thp: a write fault maps a PMD THP", "[thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 2 * PMD_SIZE);
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));
  const int64_t pt_before = t->mm->pgtables_bytes;

  REQUIRE(e.store(t, va + 300 * PAGE_SIZE + 5, 0x77));
  REQUIRE(e.pmd_huge(t, va));
  const pmd_t m = e.pmd(t, va);
  CHECK(e.a.pmd_write(m));
  CHECK(e.a.pmd_dirty(m));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(m));
  CHECK(folio_order(f) == HPAGE_PMD_ORDER);
  CHECK(folio_test_anon(f));
  CHECK(PageAnonExclusive(f));
  CHECK_FALSE(PageAnonExclusive(folio_page(f, 1)));
  CHECK(folio_entire_mapcount(f) == 1);
  CHECK(folio_large_mapcount(f) == 1);
  CHECK(f->nr_pages_mapped == ENTIRELY_MAPPED);
  CHECK(folio_page(f, 300)->mapcount == 0);
  CHECK(page_mapcount(folio_page(f, 300)) == 1);
  CHECK(folio_ref_count(f) == 1);
  CHECK(folio_mm_id(f, 0) == t->mm->id);
  CHECK(f->mm_id_mapcount[0] == 0);
  CHECK(e.rss(t) == HPAGE_PMD_NR);
  // The PUD and PMD tables (new) and the deposited PTE table; no PTE table in use.
  CHECK(t->mm->pgtables_bytes - pt_before == 3 * int64_t(PAGE_SIZE));
  CHECK(e.k.find_pte(t->mm, va) == nullptr);
  CHECK(e.k.last_fault().kind == FaultKind::huge_alloc);
  CHECK(e.k.last_fault().order == HPAGE_PMD_ORDER);
  CHECK(e.count("kernel.do_huge_pmd_anonymous_page") == 1);
  CHECK(e.count("kernel.pages_zeroed") == HPAGE_PMD_NR);
  CHECK(e.load(t, va + 300 * PAGE_SIZE + 5) == 0x77);
  CHECK(e.load(t, va + PMD_SIZE - 1) == 0);
  // The rest of the THP takes no fault.
  const uint64_t faults = e.count("faults.total");
  REQUIRE(e.store(t, va + 7, 1));
  REQUIRE(e.store(t, va + PMD_SIZE - 1, 1));
  CHECK(e.count("faults.total") == faults);
  // The next PMD range gets its own THP.
  REQUIRE(e.store(t, va + PMD_SIZE, 1));
  CHECK(e.pmd_huge(t, va + PMD_SIZE));
  CHECK(e.rss(t) == 2 * HPAGE_PMD_NR);
}

TEST_CASE("thp: no PMD THP where the aligned 2M does not fit in the VMA", "[thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("p");
  // 3M at a PMD-aligned fixed address: the second 2M range sticks out.
  const uint64_t va = e.mmap(t, 3 * PMD_SIZE / 2, PROT_READ | PROT_WRITE, 0x40000000, MAP_FIXED);
  REQUIRE(e.store(t, va + PMD_SIZE + PAGE_SIZE, 1));
  CHECK_FALSE(e.pmd_huge(t, va + PMD_SIZE));
  CHECK(folio_order(e.folio_at(t, va + PMD_SIZE + PAGE_SIZE)) == 0);
  REQUIRE(e.store(t, va, 1));
  CHECK(e.pmd_huge(t, va));
}

TEST_CASE("thp: a read fault maps the huge zero page, a write splits it and copies 4K", "[thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);

  REQUIRE(e.load(t, va + 9 * PAGE_SIZE) == 0);
  REQUIRE(e.pmd_huge(t, va));
  const pmd_t m = e.pmd(t, va);
  CHECK_FALSE(e.a.pmd_write(m));
  CHECK(e.k.is_huge_zero_pmd(m));
  CHECK(e.rss(t) == 0);
  CHECK(e.k.last_fault().kind == FaultKind::zero_page);
  CHECK(e.k.last_fault().order == HPAGE_PMD_ORDER);

  REQUIRE(e.store(t, va + 9 * PAGE_SIZE + 3, 0x42));
  CHECK_FALSE(e.pmd_huge(t, va));
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK(e.count("kernel.do_huge_pmd_wp_page") == 1);
  CHECK(e.count("kernel.wp_copy") == 1);
  CHECK(e.k.last_fault().kind == FaultKind::copy);
  // The written page is a new order-0 folio; the other 511 PTEs map the small zero page.
  CHECK(e.writable(t, va + 9 * PAGE_SIZE));
  CHECK(folio_order(e.folio_at(t, va + 9 * PAGE_SIZE)) == 0);
  for (unsigned i : {0u, 8u, 10u, 511u}) {
    const pte_t p = e.pte(t, va + i * PAGE_SIZE);
    CHECK(e.a.pte_special(p));
    CHECK(e.a.pte_pfn(p) == e.k.zero_pfn());
    CHECK_FALSE(e.a.pte_write(p));
  }
  CHECK(e.rss(t) == 1);
  CHECK(e.load(t, va + 9 * PAGE_SIZE + 3) == 0x42);
  CHECK(e.load(t, va + 10 * PAGE_SIZE) == 0);
}

TEST_CASE("thp: thp.use_zero_page = false allocates a THP on a read", "[thp]") {
  Env e([](KernelParams& p) {
    pmd_thp(p);
    p.thp_use_zero_page = false;
  });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.load(t, va) == 0);
  REQUIRE(e.pmd_huge(t, va));
  CHECK_FALSE(e.k.is_huge_zero_pmd(e.pmd(t, va)));
  CHECK(e.rss(t) == HPAGE_PMD_NR);
}

TEST_CASE("thp: splitting the VMA splits the PMD and keeps the 2M folio", "[thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.store(t, va, 0x33));
  REQUIRE(e.pmd_huge(t, va));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));
  const uint64_t flushes = e.count("kernel.tlb_flush_range");

  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  e.k.mmap_write_lock(t->mm);
  REQUIRE(e.k.split_vma(t->mm, v, va + 100 * PAGE_SIZE) == 0);
  e.k.mmap_write_unlock(t->mm);

  CHECK(v->vm_end == va + 100 * PAGE_SIZE);
  vm_area_struct* n = e.k.vma_lookup(t->mm, va + 100 * PAGE_SIZE);
  REQUIRE(n);
  CHECK(n != v);
  CHECK(n->vm_start == va + 100 * PAGE_SIZE);
  CHECK(n->vm_pgoff == (va >> PAGE_SHIFT) + 100);
  CHECK(n->anon == v->anon);

  CHECK_FALSE(e.pmd_huge(t, va));
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK(e.count("kernel.tlb_flush_range") == flushes + 1);  // pmdp_invalidate()
  // PTE-mapped now: 512 writable PTEs, every page exclusive, one mapping and one ref each.
  for (unsigned i = 0; i < HPAGE_PMD_NR; ++i) {
    const pte_t p = e.pte(t, va + i * PAGE_SIZE);
    REQUIRE(e.a.pte_write(p));
    REQUIRE(e.a.pte_pfn(p) == e.k.folio_pfn(f) + i);
    REQUIRE(PageAnonExclusive(folio_page(f, i)));
    REQUIRE(folio_page(f, i)->mapcount == 1);
  }
  CHECK(folio_order(f) == HPAGE_PMD_ORDER);
  CHECK(folio_entire_mapcount(f) == 0);
  CHECK(folio_large_mapcount(f) == HPAGE_PMD_NR);
  CHECK(f->nr_pages_mapped == int(HPAGE_PMD_NR));
  CHECK(folio_ref_count(f) == int(HPAGE_PMD_NR));
  CHECK(f->mm_id_mapcount[0] == int(HPAGE_PMD_NR) - 1);
  CHECK(e.rss(t) == HPAGE_PMD_NR);
  CHECK(e.load(t, va) == 0x33);
  const uint64_t faults = e.count("faults.total");
  REQUIRE(e.store(t, va + 200 * PAGE_SIZE, 1));
  CHECK(e.count("faults.total") == faults);
  e.k.check_invariants("after split", true);
}

TEST_CASE("thp: a PMD write fault on an exclusive THP reuses it", "[thp]") {
  Env e(pmd_thp);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.store(t, va, 1));
  pmd_t* pmdp = e.k.mm_find_pmd(t->mm, va);
  // Make it read-only as mprotect would, keeping it exclusive.
  e.a.pmdp_set_wrprotect(t->mm, va, pmdp);
  REQUIRE_FALSE(e.a.pmd_write(*pmdp));

  REQUIRE(e.store(t, va + 5 * PAGE_SIZE, 2));
  CHECK(e.a.pmd_write(*pmdp));
  CHECK(e.pmd_huge(t, va));
  CHECK(e.k.last_fault().kind == FaultKind::huge_reuse);
  CHECK(e.count("kernel.do_huge_pmd_wp_page") == 1);
  CHECK(e.count("kernel.split_huge_pmd") == 0);
}
