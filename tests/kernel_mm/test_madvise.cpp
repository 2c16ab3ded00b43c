// SPDX-License-Identifier: GPL-2.0-only
// madvise (kernel_mm/munmap.cpp; mm/madvise.c): MADV_DONTNEED through zap_page_range_single,
// MADV_[NO]HUGEPAGE, MADV_DONTFORK/DOFORK, MADV_WIPEONFORK/KEEPONFORK, invalid advice.
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

namespace {
size_t nr_vmas(task_struct* t) { return t->mm->mm_mt.size(); }
}  // namespace

TEST_CASE("madvise: MADV_DONTNEED drops the pages, a later read returns 0", "[madvise]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 16 * PAGE_SIZE);
  for (unsigned i = 0; i < 16; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE + 9, 0xab));
  const uint64_t free_full = e.k.nr_free_pages();
  const int64_t pt = t->mm->pgtables_bytes;

  REQUIRE(e.k.sys_madvise(t, va + 4 * PAGE_SIZE, 8 * PAGE_SIZE, MADV_DONTNEED) == 0);
  CHECK(e.rss(t) == 8);
  CHECK(e.k.nr_free_pages() == free_full + 8);
  CHECK(t->mm->pgtables_bytes == pt);  // MADV_DONTNEED keeps the page tables
  CHECK(nr_vmas(t) == 1);              // and the VMA
  CHECK(e.count("kernel.ptes_zapped") == 8);
  for (unsigned i = 4; i < 12; ++i) CHECK(pte_none(e.pte(t, va + i * PAGE_SIZE)));
  // The zapped range reads zero (the zero page), the rest kept its data.
  CHECK(e.load(t, va + 4 * PAGE_SIZE + 9) == 0);
  CHECK(e.a.pte_pfn(e.pte(t, va + 4 * PAGE_SIZE)) == e.k.zero_pfn());
  CHECK(e.load(t, va + 11 * PAGE_SIZE + 9) == 0);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 9) == 0xab);
  CHECK(e.load(t, va + 12 * PAGE_SIZE + 9) == 0xab);
  // A write allocates a fresh zeroed page.
  REQUIRE(e.store(t, va + 5 * PAGE_SIZE, 1));
  CHECK(e.load(t, va + 5 * PAGE_SIZE + 9) == 0);
  CHECK(e.load(t, va + 5 * PAGE_SIZE) == 1);
  CHECK_FALSE(t->mm->mmap_lock.is_locked());
}

TEST_CASE("madvise: MADV_DONTNEED of part of a PMD THP splits it", "[madvise][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  for (uint64_t off = 0; off < PMD_SIZE; off += 64 * PAGE_SIZE) REQUIRE(e.store(t, va + off, 0x5c));
  REQUIRE(e.pmd_huge(t, va));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));

  REQUIRE(e.k.sys_madvise(t, va, 64 * PAGE_SIZE, MADV_DONTNEED) == 0);
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK_FALSE(e.pmd_huge(t, va));
  CHECK(folio_mapcount(f) == int(HPAGE_PMD_NR - 64));
  CHECK(folio_ref_count(f) == int(HPAGE_PMD_NR - 64));
  CHECK(folio_test_partially_mapped(f));
  CHECK(e.rss(t) == HPAGE_PMD_NR - 64);
  CHECK(e.load(t, va) == 0);
  CHECK(e.load(t, va + 64 * PAGE_SIZE) == 0x5c);
}

TEST_CASE("madvise: MADV_DONTNEED of a whole PMD THP zaps it without a split", "[madvise][thp]") {
  Env e2([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* u = e2.proc("q");
  const uint64_t vb = e2.mmap(u, PMD_SIZE);
  REQUIRE(e2.store(u, vb, 1));
  REQUIRE(e2.pmd_huge(u, vb));
  const uint64_t free_full = e2.k.nr_free_pages();
  REQUIRE(e2.k.sys_madvise(u, vb, PMD_SIZE, MADV_DONTNEED) == 0);
  CHECK(e2.count("kernel.split_huge_pmd") == 0);
  CHECK(pmd_none(e2.pmd(u, vb)));
  CHECK(e2.rss(u) == 0);
  CHECK(e2.k.nr_free_pages() == free_full + HPAGE_PMD_NR + 1);  // the folio + its deposited table
  CHECK(e2.load(u, vb + 100) == 0);
}

TEST_CASE("madvise: MADV_HUGEPAGE / MADV_NOHUGEPAGE", "[madvise][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::madvise, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 4 * PMD_SIZE);
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));

  // THP "madvise": no huge page without the advice.
  REQUIRE(e.store(t, va, 1));
  CHECK_FALSE(e.pmd_huge(t, va));
  CHECK(folio_order(e.folio_at(t, va)) == 0);

  // Advise the second 2M: the VMA is split, the flag set on the middle part only.
  REQUIRE(e.k.sys_madvise(t, va + PMD_SIZE, PMD_SIZE, MADV_HUGEPAGE) == 0);
  CHECK(nr_vmas(t) == 3);
  vm_area_struct* mid = e.k.vma_lookup(t->mm, va + PMD_SIZE);
  REQUIRE(mid);
  CHECK(mid->vm_start == va + PMD_SIZE);
  CHECK(mid->vm_end == va + 2 * PMD_SIZE);
  CHECK(mid->vm_flags & VM_HUGEPAGE);
  CHECK_FALSE(e.k.vma_lookup(t->mm, va)->vm_flags & VM_HUGEPAGE);
  REQUIRE(e.store(t, va + PMD_SIZE + 5, 2));
  CHECK(e.pmd_huge(t, va + PMD_SIZE));
  REQUIRE(e.store(t, va + 2 * PMD_SIZE, 3));
  CHECK_FALSE(e.pmd_huge(t, va + 2 * PMD_SIZE));

  // Advising the next 2M too merges it into the advised VMA.
  REQUIRE(e.k.sys_madvise(t, va + 3 * PMD_SIZE, PMD_SIZE, MADV_HUGEPAGE) == 0);
  CHECK(nr_vmas(t) == 4);
  REQUIRE(e.k.sys_madvise(t, va + 2 * PMD_SIZE, PMD_SIZE, MADV_HUGEPAGE) == 0);
  CHECK(nr_vmas(t) == 2);
  CHECK(e.k.vma_lookup(t->mm, va + PMD_SIZE)->vm_end == va + 4 * PMD_SIZE);

  // NOHUGEPAGE on everything: flags flip, one VMA again.
  REQUIRE(e.k.sys_madvise(t, va, 4 * PMD_SIZE, MADV_NOHUGEPAGE) == 0);
  CHECK(nr_vmas(t) == 1);
  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  CHECK(v->vm_flags & VM_NOHUGEPAGE);
  CHECK_FALSE(v->vm_flags & VM_HUGEPAGE);
  REQUIRE(e.store(t, va + 3 * PMD_SIZE + 7, 4));
  CHECK_FALSE(e.pmd_huge(t, va + 3 * PMD_SIZE));
  // Existing huge mappings are not touched by the advice.
  CHECK(e.pmd_huge(t, va + PMD_SIZE));
  CHECK(e.load(t, va + PMD_SIZE + 5) == 2);
}

TEST_CASE("madvise: MADV_DONTFORK and MADV_WIPEONFORK decide what the child gets", "[madvise][fork]") {
  Env e;
  task_struct* p = e.proc("parent");
  const uint64_t a = e.mmap(p, 4 * PAGE_SIZE);
  const uint64_t b = e.mmap(p, 4 * PAGE_SIZE);
  const uint64_t c = e.mmap(p, 4 * PAGE_SIZE);
  for (uint64_t va : {a, b, c})
    for (unsigned i = 0; i < 4; ++i) REQUIRE(e.store(p, va + i * PAGE_SIZE, 0x21));

  REQUIRE(e.k.sys_madvise(p, a, 4 * PAGE_SIZE, MADV_DONTFORK) == 0);
  CHECK(e.k.vma_lookup(p->mm, a)->vm_flags & VM_DONTCOPY);
  REQUIRE(e.k.sys_madvise(p, b, 4 * PAGE_SIZE, MADV_WIPEONFORK) == 0);
  CHECK(e.k.vma_lookup(p->mm, b)->vm_flags & VM_WIPEONFORK);

  task_struct* ch = e.k.sys_fork(p);
  REQUIRE(ch);
  CHECK(e.k.vma_lookup(ch->mm, a) == nullptr);  // not copied
  REQUIRE(e.k.vma_lookup(ch->mm, b) != nullptr);  // copied, empty
  CHECK(pte_none(e.pte(ch, b)));
  CHECK(e.load(ch, b) == 0);
  CHECK(e.load(ch, c) == 0x21);
  CHECK(e.load(p, b) == 0x21);
  e.k.enter(ch, 0);
  e.k.sys_exit(ch, 0);
  e.k.enter(p, 0);
  REQUIRE(e.k.sys_wait(p, ch) == ch->pid);

  // DOFORK / KEEPONFORK undo them.
  REQUIRE(e.k.sys_madvise(p, a, 4 * PAGE_SIZE, MADV_DOFORK) == 0);
  REQUIRE(e.k.sys_madvise(p, b, 4 * PAGE_SIZE, MADV_KEEPONFORK) == 0);
  CHECK_FALSE(e.k.vma_lookup(p->mm, a)->vm_flags & VM_DONTCOPY);
  CHECK_FALSE(e.k.vma_lookup(p->mm, b)->vm_flags & VM_WIPEONFORK);
  task_struct* ch2 = e.k.sys_fork(p);
  REQUIRE(ch2);
  CHECK(e.load(ch2, a) == 0x21);
  CHECK(e.load(ch2, b) == 0x21);
}

TEST_CASE("madvise: invalid advice and holes", "[madvise]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 8 * PAGE_SIZE);
  CHECK(e.k.sys_madvise(t, va, PAGE_SIZE, 12345) == -EINVAL);
  CHECK(e.k.sys_madvise(t, va, PAGE_SIZE, 9 /* MADV_REMOVE: not ported */) == -EINVAL);
  CHECK(e.k.sys_madvise(t, va + 1, PAGE_SIZE, MADV_DONTNEED) == -EINVAL);
  CHECK(e.k.sys_madvise(t, va, 0, MADV_DONTNEED) == 0);
  // A hole in the range: the mapped part is advised, the result is -ENOMEM.
  REQUIRE(e.k.sys_munmap(t, va + 2 * PAGE_SIZE, 2 * PAGE_SIZE) == 0);
  CHECK(e.k.sys_madvise(t, va, 8 * PAGE_SIZE, MADV_DONTFORK) == -ENOMEM);
  CHECK(e.k.vma_lookup(t->mm, va)->vm_flags & VM_DONTCOPY);
  CHECK(e.k.vma_lookup(t->mm, va + 4 * PAGE_SIZE)->vm_flags & VM_DONTCOPY);
  CHECK(e.k.sys_madvise(t, va + 2 * PAGE_SIZE, 2 * PAGE_SIZE, MADV_DONTNEED) == -ENOMEM);
  CHECK_FALSE(t->mm->mmap_lock.is_locked());
}
