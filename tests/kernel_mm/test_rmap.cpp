// SPDX-License-Identifier: GPL-2.0-only
// rmap accounting (kernel_mm/rmap.cpp): mapcounts, _nr_pages_mapped and ENTIRELY_MAPPED,
// PageAnonExclusive, the MM-id slots and the "maybe mapped shared" bit of CONFIG_MM_ID (v6.15+),
// fork's folio_try_dup_anon_rmap (-EBUSY for possibly pinned folios), the deferred split flag, and
// the reuse decisions that read them (wp_can_reuse_anon_folio, __wp_can_reuse_large_anon_folio).
//
// The folios here are not mapped by page tables: the rmap calls are made directly, so these tests
// run no kernel entry point that would check the invariants against the page tables.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;

namespace {
struct Rmap {
  Env e;
  std::vector<vm_area_struct*> vmas;  // one VMA per mm, all at the same address
  uint64_t va = 0;

  explicit Rmap(bool mm_ids = true, int nr_mms = 3) : e([mm_ids](KernelParams& p) { p.large_folio_reuse = mm_ids; }) {
    for (int i = 0; i < nr_mms; ++i) {
      task_struct* t = e.proc("p");
      uint64_t a = e.mmap(t, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, 0x40000000, MAP_FIXED);
      va = a;
      vm_area_struct* v = e.k.vma_lookup(t->mm, a);
      REQUIRE(e.k.anon_vma_prepare(v) == 0);
      vmas.push_back(v);
    }
  }
  // A new anonymous folio of `order` mapped by `vma` as do_anonymous_page() maps it (one
  // reference per page).
  folio* new_folio(unsigned order, vm_area_struct* vma) {
    folio* f = e.k.folio_alloc(order, true);
    REQUIRE(f);
    folio_ref_add(f, int(folio_nr_pages(f)) - 1);
    e.k.folio_add_new_anon_rmap(f, vma, va, RMAP_EXCLUSIVE);
    return f;
  }
  int id(int i) const { return vmas[size_t(i)]->vm_mm->id; }
};
}  // namespace

TEST_CASE("rmap: a new small folio, dup and remove", "[rmap]") {
  Rmap r;
  folio* f = r.new_folio(0, r.vmas[0]);
  CHECK(folio_test_anon(f));
  CHECK(f->anon_vma == r.vmas[0]->anon->id);
  CHECK(f->index == r.va >> PAGE_SHIFT);
  CHECK(folio_mapcount(f) == 1);
  CHECK(PageAnonExclusive(f));
  // Small folios have no MM ids.
  CHECK(folio_mm_id(f, 0) == MM_ID_DUMMY);

  REQUIRE(r.e.k.folio_try_dup_anon_rmap_pte(f, f, r.vmas[1], r.vmas[0]) == 0);
  CHECK(folio_mapcount(f) == 2);
  CHECK_FALSE(PageAnonExclusive(f));
  r.e.k.folio_remove_rmap_pte(f, f, r.vmas[1]);
  CHECK(folio_mapcount(f) == 1);
  CHECK_FALSE(PageAnonExclusive(f));  // only a reuse fault sets it again
}

TEST_CASE("rmap: MM-id slots and the maybe-mapped-shared bit", "[rmap][mm_id]") {
  Rmap r;
  Kernel& k = r.e.k;
  vm_area_struct *A = r.vmas[0], *B = r.vmas[1], *C = r.vmas[2];
  folio* f = r.new_folio(4, A);
  // folio_set_large_mapcount(): slot 0 = A with all 16 mappings (kernel encoding 15).
  CHECK(folio_large_mapcount(f) == 16);
  CHECK(folio_mm_id(f, 0) == r.id(0));
  CHECK(f->mm_id_mapcount[0] == 15);
  CHECK(folio_mm_id(f, 1) == MM_ID_DUMMY);
  CHECK(f->mm_id_mapcount[1] == -1);
  CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
  CHECK(f->nr_pages_mapped == 16);

  // fork: the child's mappings go to slot 1 and mark the folio shared.
  REQUIRE(k.folio_try_dup_anon_rmap_ptes(f, f, 16, B, A) == 0);
  CHECK(folio_large_mapcount(f) == 32);
  CHECK(folio_mm_id(f, 1) == r.id(1));
  CHECK(f->mm_id_mapcount[1] == 15);
  CHECK(folio_test_large_maybe_mapped_shared(f));
  for (int i = 0; i < 16; ++i) {
    CHECK(folio_page(f, unsigned(i))->mapcount == 2);
    CHECK_FALSE(PageAnonExclusive(folio_page(f, unsigned(i))));
  }
  CHECK(f->nr_pages_mapped == 16);  // no page became newly mapped

  SECTION("the child unmaps: slot 1 freed, exclusive again") {
    k.folio_remove_rmap_ptes(f, f, 16, B);
    CHECK(folio_large_mapcount(f) == 16);
    CHECK(folio_mm_id(f, 1) == MM_ID_DUMMY);
    CHECK(f->mm_id_mapcount[1] == -1);
    CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
    CHECK(f->mm_id_mapcount[0] == 15);
    CHECK_FALSE(folio_test_partially_mapped(f));
  }

  SECTION("a partial unmap by the child keeps it shared") {
    k.folio_remove_rmap_ptes(f, f + 4, 4, B);
    CHECK(folio_large_mapcount(f) == 28);
    CHECK(f->mm_id_mapcount[1] == 11);
    CHECK(folio_test_large_maybe_mapped_shared(f));
  }

  SECTION("a third mm while both slots are taken") {
    REQUIRE(k.folio_try_dup_anon_rmap_ptes(f, f, 16, C, A) == 0);
    CHECK(folio_large_mapcount(f) == 48);
    CHECK(folio_mm_id(f, 0) == r.id(0));
    CHECK(folio_mm_id(f, 1) == r.id(1));
    CHECK(folio_test_large_maybe_mapped_shared(f));
    // A unmaps: slot 0 goes free, but B's slot does not hold all the rest: still shared.
    k.folio_remove_rmap_ptes(f, f, 16, A);
    CHECK(folio_mm_id(f, 0) == MM_ID_DUMMY);
    CHECK(f->mm_id_mapcount[0] == -1);
    CHECK(folio_test_large_maybe_mapped_shared(f));
    // C unmaps (it has no slot): now B's slot holds everything: exclusive.
    k.folio_remove_rmap_ptes(f, f, 16, C);
    CHECK(folio_large_mapcount(f) == 16);
    CHECK(f->mm_id_mapcount[1] == 15);
    CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
    // A maps one page again: it takes the free slot 0, and there are other mappings: shared.
    k.folio_add_anon_rmap_ptes(f, f + 3, 1, A, r.va + 3 * PAGE_SIZE, RMAP_NONE);
    CHECK(folio_mm_id(f, 0) == r.id(0));
    CHECK(f->mm_id_mapcount[0] == 0);
    CHECK(folio_test_large_maybe_mapped_shared(f));
  }
  CHECK_FALSE(f->flags & PG_large_mapcount_locked);
}

TEST_CASE("rmap: 6.12 (no MM ids) keeps a plain large mapcount", "[rmap][mm_id]") {
  Rmap r(/*mm_ids=*/false);
  Kernel& k = r.e.k;
  folio* f = r.new_folio(4, r.vmas[0]);
  k.take_cost();
  REQUIRE(k.folio_try_dup_anon_rmap_ptes(f, f, 16, r.vmas[1], r.vmas[0]) == 0);
  CostAccount c = k.take_cost();
  CHECK(folio_large_mapcount(f) == 32);
  CHECK(folio_mm_id(f, 0) == MM_ID_DUMMY);
  CHECK(folio_mm_id(f, 1) == MM_ID_DUMMY);
  CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
  CHECK(c[Cost::lock_op] == 0);  // no large mapcount lock in 6.12

  Rmap r2(/*mm_ids=*/true);
  folio* g = r2.new_folio(4, r2.vmas[0]);
  r2.e.k.take_cost();
  REQUIRE(r2.e.k.folio_try_dup_anon_rmap_ptes(g, g, 16, r2.vmas[1], r2.vmas[0]) == 0);
  CHECK(r2.e.k.take_cost()[Cost::lock_op] == 1);  // folio_lock_large_mapcount()
}

TEST_CASE("rmap: PMD and PTE mappings of a THP, partial unmap queues a deferred split", "[rmap]") {
  Rmap r;
  Kernel& k = r.e.k;
  vm_area_struct* A = r.vmas[0];
  folio* f = k.folio_alloc(HPAGE_PMD_ORDER, true);
  k.folio_add_new_anon_rmap(f, A, r.va, RMAP_EXCLUSIVE);
  CHECK(folio_entire_mapcount(f) == 1);
  CHECK(folio_large_mapcount(f) == 1);
  CHECK(f->nr_pages_mapped == ENTIRELY_MAPPED);
  CHECK(PageAnonExclusive(f));
  CHECK_FALSE(PageAnonExclusive(f + 1));

  // __split_huge_pmd_locked(): PTE-map all pages (propagating PAE), then drop the PMD mapping.
  folio_ref_add(f, HPAGE_PMD_NR - 1);
  k.folio_add_anon_rmap_ptes(f, f, HPAGE_PMD_NR, A, r.va, RMAP_EXCLUSIVE);
  CHECK(folio_large_mapcount(f) == int(HPAGE_PMD_NR) + 1);
  CHECK(f->nr_pages_mapped == ENTIRELY_MAPPED + int(HPAGE_PMD_NR));
  CHECK(page_mapcount(f + 7) == 2);
  k.folio_remove_rmap_pmd(f, f, A);
  CHECK(folio_entire_mapcount(f) == 0);
  CHECK(folio_large_mapcount(f) == int(HPAGE_PMD_NR));
  CHECK(f->nr_pages_mapped == int(HPAGE_PMD_NR));
  CHECK(PageAnonExclusive(f + 100));
  CHECK_FALSE(folio_test_partially_mapped(f));  // every page still mapped
  CHECK(f->mm_id_mapcount[0] == int(HPAGE_PMD_NR) - 1);

  // One page unmapped: partially mapped, queued for deferred split.
  k.folio_remove_rmap_pte(f, f + 9, A);
  CHECK(f->nr_pages_mapped == int(HPAGE_PMD_NR) - 1);
  CHECK(folio_test_partially_mapped(f));
}

TEST_CASE("rmap: a possibly pinned exclusive page cannot be shared by fork", "[rmap]") {
  Rmap r;
  Kernel& k = r.e.k;
  vm_area_struct *A = r.vmas[0], *B = r.vmas[1];
  folio* small = r.new_folio(0, A);
  folio* large = r.new_folio(4, A);
  // Not pinned or no MMF_HAS_PINNED: fine. Here: pinned in an mm that has pinned.
  A->vm_mm->has_pinned = true;
  folio_ref_add(small, 1024);  // GUP_PIN_COUNTING_BIAS
  large->pincount = 1;
  CHECK(k.folio_try_dup_anon_rmap_pte(small, small, B, A) == -EBUSY);
  CHECK(folio_mapcount(small) == 1);
  CHECK(PageAnonExclusive(small));
  CHECK(k.folio_try_dup_anon_rmap_ptes(large, large, 16, B, A) == -EBUSY);
  CHECK(folio_large_mapcount(large) == 16);
  CHECK(PageAnonExclusive(large + 15));
  // Already shared pages (not PAE) of a pinned folio may be duplicated.
  ClearPageAnonExclusive(large + 2);
  CHECK(k.folio_try_dup_anon_rmap_ptes(large, large + 2, 1, B, A) == 0);
  CHECK((large + 2)->mapcount == 2);
}

TEST_CASE("rmap: wp_can_reuse_anon_folio, small folios", "[rmap][reuse]") {
  Rmap r;
  Kernel& k = r.e.k;
  vm_area_struct *A = r.vmas[0], *B = r.vmas[1];
  folio* f = r.new_folio(0, A);
  k.folio_add_lru_vma(f, A);  // +1 in the LRU-add batch
  REQUIRE(folio_ref_count(f) == 2);
  // As if the folio still pointed to another anon_vma (e.g. the one it had before a fork).
  f->anon_vma = B->anon->id;
  // Not on the LRU yet: the batch is drained, then refcount 1: reuse, moved to A's anon_vma.
  CHECK(k.wp_can_reuse_anon_folio(f, A));
  CHECK(folio_ref_count(f) == 1);
  CHECK(folio_test_lru(f));
  CHECK(f->anon_vma == A->anon->id);
  CHECK_FALSE(folio_test_locked(f));
  // Another reference (another mapping): no reuse.
  folio_get(f);
  CHECK_FALSE(k.wp_can_reuse_anon_folio(f, A));
  folio_ref_sub(f, 1);
  // Locked by someone: no reuse.
  REQUIRE(k.folio_trylock(f));
  CHECK_FALSE(k.wp_can_reuse_anon_folio(f, A));
  k.folio_unlock(f);
}

TEST_CASE("rmap: wp_can_reuse_anon_folio, large folios", "[rmap][reuse]") {
  SECTION("v6.15+: exclusive when every reference is a mapping of this mm") {
    Rmap r;
    Kernel& k = r.e.k;
    vm_area_struct *A = r.vmas[0], *B = r.vmas[1];
    folio* f = r.new_folio(4, A);
    CHECK(k.wp_can_reuse_anon_folio(f, A));
    // Shared with another mm: no.
    folio_ref_add(f, 16);
    REQUIRE(k.folio_try_dup_anon_rmap_ptes(f, f, 16, B, A) == 0);
    CHECK_FALSE(k.wp_can_reuse_anon_folio(f, A));
    // The child unmapped but its references are not yet dropped (mmu_gather pending): no.
    k.folio_remove_rmap_ptes(f, f, 16, B);
    CHECK_FALSE(folio_test_large_maybe_mapped_shared(f));
    CHECK_FALSE(k.wp_can_reuse_anon_folio(f, A));
    folio_ref_sub(f, 16);
    CHECK(k.wp_can_reuse_anon_folio(f, A));
    CHECK_FALSE(f->flags & PG_large_mapcount_locked);
    // Only one page still mapped: give the folio back rather than reuse.
    k.folio_remove_rmap_ptes(f, f, 15, A);
    folio_ref_sub(f, 15);
    CHECK_FALSE(k.wp_can_reuse_anon_folio(f, A));
  }
  SECTION("6.12: never for a large folio") {
    Rmap r(/*mm_ids=*/false);
    folio* f = r.new_folio(4, r.vmas[0]);
    CHECK_FALSE(r.e.k.wp_can_reuse_anon_folio(f, r.vmas[0]));
  }
}
