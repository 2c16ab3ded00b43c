// SPDX-License-Identifier: GPL-2.0-only
// mprotect (kernel_mm/munmap.cpp; mm/mprotect.c, mm/vma.c): VMA split and merge, change_pte_range
// with the MM_CP_TRY_CHANGE_WRITABLE upgrade, the TLB flush of changed PTEs, and the split of a
// PMD THP by a partial mprotect (selftests/mm/cow.c's way of making a PTE-mapped THP).
#include <catch2/catch.hpp>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

namespace {
size_t nr_vmas(task_struct* t) { return t->mm->mm_mt.size(); }
}  // namespace

TEST_CASE("mprotect: RO then RW of one page of a PMD THP leaves 512 PTEs mapping the same folio",
          "[mprotect][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));
  for (uint64_t off = 0; off < PMD_SIZE; off += PAGE_SIZE) REQUIRE(e.store(t, va + off, uint8_t(off >> 12)));
  REQUIRE(e.pmd_huge(t, va));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));
  REQUIRE(folio_order(f) == HPAGE_PMD_ORDER);
  const uint64_t flushes0 = e.count("kernel.tlb_flush_range") + e.count("kernel.tlb_flush_page");

  // mprotect(mem + pagesize, pagesize, PROT_READ)
  REQUIRE(e.k.sys_mprotect(t, va + PAGE_SIZE, PAGE_SIZE, PROT_READ) == 0);
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK_FALSE(e.pmd_huge(t, va));
  CHECK(nr_vmas(t) == 3);
  CHECK_FALSE(e.writable(t, va + PAGE_SIZE));
  CHECK(e.writable(t, va));
  CHECK(e.writable(t, va + 2 * PAGE_SIZE));
  // The RW -> RO change was flushed.
  CHECK(e.count("kernel.tlb_flush_range") + e.count("kernel.tlb_flush_page") > flushes0);
  // A write to the RO page is refused.
  CHECK_FALSE(e.store(t, va + PAGE_SIZE, 0xff));

  // mprotect(mem + pagesize, pagesize, PROT_READ | PROT_WRITE)
  REQUIRE(e.k.sys_mprotect(t, va + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
  CHECK(nr_vmas(t) == 1);  // merged back: vma_merge_existing_range()
  vm_area_struct* v = e.k.vma_lookup(t->mm, va);
  REQUIRE(v);
  CHECK(v->vm_start == va);
  CHECK(v->vm_end == va + PMD_SIZE);
  CHECK(v->vm_pgoff == va >> PAGE_SHIFT);

  CHECK_FALSE(e.pmd_huge(t, va));
  for (unsigned i = 0; i < HPAGE_PMD_NR; ++i) {
    const pte_t p = e.pte(t, va + i * PAGE_SIZE);
    REQUIRE(e.a.pte_present(p));
    CHECK(e.a.pte_pfn(p) == e.k.page_to_pfn(f) + i);
    // Exclusive anon pages: can_change_pte_writable() made the page writable again.
    CHECK(e.a.pte_write(p));
    CHECK(PageAnonExclusive(folio_page(f, i)));
  }
  CHECK(folio_mapcount(f) == int(HPAGE_PMD_NR));
  CHECK(folio_entire_mapcount(f) == 0);
  CHECK(folio_ref_count(f) == int(HPAGE_PMD_NR));
  CHECK(e.rss(t) == HPAGE_PMD_NR);
  // No fault needed to write anywhere, and the data survived.
  const uint64_t faults0 = e.count("faults.total");
  for (unsigned i = 0; i < HPAGE_PMD_NR; i += 37) REQUIRE(e.load(t, va + i * PAGE_SIZE) == int(uint8_t(i)));
  REQUIRE(e.store(t, va + PAGE_SIZE, 0x77));
  CHECK(e.count("faults.total") == faults0);
  CHECK(e.load(t, va + PAGE_SIZE) == 0x77);
}

TEST_CASE("mprotect: a range covering a whole PMD keeps it huge", "[mprotect][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 2 * PMD_SIZE);
  REQUIRE(e.store(t, va, 1));
  REQUIRE(e.store(t, va + PMD_SIZE, 2));
  REQUIRE(e.pmd_huge(t, va));
  REQUIRE(e.a.pmd_write(e.pmd(t, va)));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));

  REQUIRE(e.k.sys_mprotect(t, va, PMD_SIZE, PROT_READ) == 0);
  CHECK(nr_vmas(t) == 2);
  CHECK(e.pmd_huge(t, va));
  CHECK_FALSE(e.a.pmd_write(e.pmd(t, va)));
  CHECK(e.a.pmd_pfn(e.pmd(t, va)) == e.k.page_to_pfn(f));
  CHECK(e.a.pmd_write(e.pmd(t, va + PMD_SIZE)));
  CHECK(e.count("kernel.split_huge_pmd") == 0);
  CHECK_FALSE(e.store(t, va + 8, 3));
  CHECK(e.load(t, va) == 1);

  REQUIRE(e.k.sys_mprotect(t, va, PMD_SIZE, PROT_READ | PROT_WRITE) == 0);
  CHECK(nr_vmas(t) == 1);
  CHECK(e.pmd_huge(t, va));
  CHECK(e.a.pmd_write(e.pmd(t, va)));  // PAE head: can_change_pmd_writable()
  CHECK(folio_entire_mapcount(f) == 1);
  CHECK(e.count("kernel.split_huge_pmd") == 0);
}

TEST_CASE("mprotect: small pages, RO and back, and PROT_NONE", "[mprotect]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 8 * PAGE_SIZE);
  for (unsigned i = 0; i < 8; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE, uint8_t(0x10 + i)));
  const uint64_t flushes0 = e.count("kernel.tlb_flush_range");

  REQUIRE(e.k.sys_mprotect(t, va, 8 * PAGE_SIZE, PROT_READ) == 0);
  CHECK(nr_vmas(t) == 1);
  CHECK(e.k.vma_lookup(t->mm, va)->vm_flags & VM_READ);
  CHECK_FALSE(e.k.vma_lookup(t->mm, va)->vm_flags & VM_WRITE);
  for (unsigned i = 0; i < 8; ++i) {
    CHECK_FALSE(e.writable(t, va + i * PAGE_SIZE));
    CHECK(e.a.pte_dirty(e.pte(t, va + i * PAGE_SIZE)));  // pte_modify() keeps dirty
  }
  // One flush for the gathered range (tlb_end_vma); x86 flushes on a cleared _PAGE_RW.
  CHECK(e.count("kernel.tlb_flush_range") - flushes0 == 1);
  CHECK_FALSE(e.store(t, va, 0));
  CHECK(e.load(t, va + 3 * PAGE_SIZE) == 0x13);

  REQUIRE(e.k.sys_mprotect(t, va, 8 * PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
  for (unsigned i = 0; i < 8; ++i) CHECK(e.writable(t, va + i * PAGE_SIZE));
  const uint64_t faults0 = e.count("faults.total");
  REQUIRE(e.store(t, va + 5 * PAGE_SIZE, 0x99));
  CHECK(e.count("faults.total") == faults0);

  SECTION("PROT_NONE makes every access fail, and back") {
    REQUIRE(e.k.sys_mprotect(t, va + 2 * PAGE_SIZE, PAGE_SIZE, PROT_NONE) == 0);
    CHECK(nr_vmas(t) == 3);
    CHECK(e.load(t, va + 2 * PAGE_SIZE) == -1);
    CHECK(e.load(t, va + 3 * PAGE_SIZE) == 0x13);
    REQUIRE(e.k.sys_mprotect(t, va + 2 * PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
    CHECK(nr_vmas(t) == 1);
    CHECK(e.load(t, va + 2 * PAGE_SIZE) == 0x12);
    CHECK(e.writable(t, va + 2 * PAGE_SIZE));
  }
}

TEST_CASE("mprotect: RW after fork does not make shared pages writable", "[mprotect][fork]") {
  Env e;
  task_struct* p = e.proc("parent");
  const uint64_t va = e.mmap(p, 4 * PAGE_SIZE);
  for (unsigned i = 0; i < 4; ++i) REQUIRE(e.store(p, va + i * PAGE_SIZE, 1));
  REQUIRE(e.k.sys_mprotect(p, va, 4 * PAGE_SIZE, PROT_READ) == 0);
  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  e.k.enter(p, 0);
  REQUIRE(e.k.sys_mprotect(p, va, 4 * PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
  // The pages are shared with the child (not PageAnonExclusive): they stay RO for COW.
  for (unsigned i = 0; i < 4; ++i) {
    CHECK_FALSE(e.writable(p, va + i * PAGE_SIZE));
    CHECK_FALSE(PageAnonExclusive(e.page_at(p, va + i * PAGE_SIZE)));
  }
  const uint64_t copies0 = e.count("kernel.wp_copy");
  REQUIRE(e.store(p, va, 2));
  CHECK(e.count("kernel.wp_copy") == copies0 + 1);
  CHECK(e.load(c, va) == 1);
}

TEST_CASE("mprotect: arguments and holes", "[mprotect]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 4 * PAGE_SIZE);
  CHECK(e.k.sys_mprotect(t, va + 1, PAGE_SIZE, PROT_READ) == -EINVAL);
  CHECK(e.k.sys_mprotect(t, va, 0, PROT_READ) == 0);
  CHECK(e.k.sys_mprotect(t, va, PAGE_SIZE, 0x100) == -EINVAL);
  CHECK(e.k.sys_mprotect(t, va - 16 * PAGE_SIZE, PAGE_SIZE, PROT_READ) == -ENOMEM);
  // A range running past the VMA changes what is mapped and reports -ENOMEM.
  CHECK(e.k.sys_mprotect(t, va + 2 * PAGE_SIZE, 8 * PAGE_SIZE, PROT_READ) == -ENOMEM);
  CHECK(nr_vmas(t) == 2);
  CHECK_FALSE(e.k.vma_lookup(t->mm, va + 3 * PAGE_SIZE)->vm_flags & VM_WRITE);
  CHECK(e.k.vma_lookup(t->mm, va)->vm_flags & VM_WRITE);
  CHECK_FALSE(t->mm->mmap_lock.is_locked());
}
