// SPDX-License-Identifier: GPL-2.0-only
// Teardown (kernel_mm/mmu_gather.cpp, exit.cpp, munmap.cpp; PORTMAP §2.3, §3.2): munmap and exit
// free folios and page tables; a partial munmap leaves a large folio partially mapped; the exit
// of a forked child gives the parent its folios back (exclusive on the next write fault); the
// mmu_gather removes the rmap at zap time and drops the references only after the TLB flush.
#include <catch2/catch.hpp>

#include <functional>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::set_thp;

namespace {

size_t nr_vmas(task_struct* t) { return t->mm->mm_mt.size(); }

// A kernel whose "hardware" reports each TLB flush, to look at folio state at that moment.
struct FlushSpy : NullMmuHw {
  std::function<void()> on_flush;
  int flushes = 0;
  void x86_invlpg(int, uint16_t, uint64_t) override { hit(); }
  void x86_flush_pcid(int, uint16_t) override { hit(); }
  void hit() {
    ++flushes;
    if (on_flush) on_flush();
  }
};

}  // namespace

TEST_CASE("teardown: munmap frees the folios, the page tables and the RSS", "[teardown]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t free0 = e.k.nr_free_pages();
  const int64_t pt0 = t->mm->pgtables_bytes;
  const uint64_t va = e.mmap(t, 64 * PAGE_SIZE);
  for (unsigned i = 0; i < 64; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE, uint8_t(i + 1)));
  REQUIRE(e.rss(t) == 64);
  // PTE table + PMD table + PUD table
  REQUIRE(t->mm->pgtables_bytes == pt0 + 3 * int64_t(PAGE_SIZE));
  REQUIRE(e.k.nr_free_pages() < free0);
  folio* last = e.folio_at(t, va + 63 * PAGE_SIZE);
  REQUIRE(folio_ref_count(last) == 2);  // the PTE + the LRU-add batch (not drained yet)

  const uint64_t flushes0 = e.count("kernel.tlb_flush_range");
  REQUIRE(e.k.sys_munmap(t, va, 64 * PAGE_SIZE) == 0);

  CHECK(e.k.nr_free_pages() == free0);
  CHECK(e.rss(t) == 0);
  CHECK(t->mm->pgtables_bytes == pt0);
  CHECK(e.k.find_pte(t->mm, va) == nullptr);   // the PTE table is gone
  CHECK(e.k.mm_find_pmd(t->mm, va) == nullptr);  // and the upper tables with it (no other VMA)
  CHECK(e.k.find_vma(t->mm, 0) == nullptr);
  CHECK(e.count("kernel.ptes_zapped") == 64);
  CHECK(e.count("kernel.folios_freed") >= 64);
  // One flush at the end of the VMA (tlb_end_vma), one for the freed tables (tlb_finish_mmu).
  CHECK(e.count("kernel.tlb_flush_range") - flushes0 == 2);
  // The range is gone: an access now gets SIGSEGV.
  CHECK(e.load(t, va) == -1);
}

TEST_CASE("teardown: munmap of part of a VMA keeps the rest and the shared tables", "[teardown]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 32 * PAGE_SIZE);
  for (unsigned i = 0; i < 32; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE, uint8_t(0x40 + i)));
  const int64_t pt = t->mm->pgtables_bytes;
  const uint64_t free_before = e.k.nr_free_pages();

  // Unmap pages [8, 16): the VMA is split in two.
  REQUIRE(e.k.sys_munmap(t, va + 8 * PAGE_SIZE, 8 * PAGE_SIZE) == 0);
  CHECK(nr_vmas(t) == 2);
  vm_area_struct* lo = e.k.vma_lookup(t->mm, va);
  vm_area_struct* hi = e.k.vma_lookup(t->mm, va + 16 * PAGE_SIZE);
  REQUIRE(lo);
  REQUIRE(hi);
  CHECK(lo->vm_end == va + 8 * PAGE_SIZE);
  CHECK(hi->vm_start == va + 16 * PAGE_SIZE);
  CHECK(e.k.vma_lookup(t->mm, va + 8 * PAGE_SIZE) == nullptr);
  CHECK(e.rss(t) == 24);
  CHECK(e.k.nr_free_pages() == free_before + 8);  // 8 order-0 folios back
  CHECK(t->mm->pgtables_bytes == pt);             // the PTE table still serves both halves
  for (unsigned i = 8; i < 16; ++i) CHECK(pte_none(e.pte(t, va + i * PAGE_SIZE)));
  CHECK(e.load(t, va + 7 * PAGE_SIZE) == 0x47);
  CHECK(e.load(t, va + 16 * PAGE_SIZE) == 0x50);
  CHECK(e.load(t, va + 8 * PAGE_SIZE) == -1);

  SECTION("munmap over a hole and both halves removes everything") {
    REQUIRE(e.k.sys_munmap(t, va, 32 * PAGE_SIZE) == 0);
    CHECK(nr_vmas(t) == 0);
    CHECK(e.rss(t) == 0);
    CHECK(t->mm->pgtables_bytes == 0);
  }
}

TEST_CASE("teardown: munmap arguments", "[teardown]") {
  Env e;
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, 4 * PAGE_SIZE);
  CHECK(e.k.sys_munmap(t, va + 1, PAGE_SIZE) == -EINVAL);
  CHECK(e.k.sys_munmap(t, va, 0) == -EINVAL);
  CHECK(e.k.sys_munmap(t, uint64_t(1) << 48, PAGE_SIZE) == -EINVAL);
  // Nothing mapped there: success, nothing changes.
  CHECK(e.k.sys_munmap(t, va + 64 * PAGE_SIZE, PAGE_SIZE) == 0);
  CHECK(nr_vmas(t) == 1);
  // A length that is not a page multiple is rounded up.
  REQUIRE(e.k.sys_munmap(t, va + 3 * PAGE_SIZE, 1) == 0);
  CHECK(e.k.vma_lookup(t->mm, va)->vm_end == va + 3 * PAGE_SIZE);
  // The mmap lock is released whatever happened.
  CHECK_FALSE(t->mm->mmap_lock.is_locked());
}

TEST_CASE("teardown: munmap of a PMD-mapped THP", "[teardown][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* t = e.proc("p");
  const uint64_t free0 = e.k.nr_free_pages();
  const uint64_t va = e.mmap(t, 2 * PMD_SIZE);
  REQUIRE(IS_ALIGNED(va, PMD_SIZE));
  REQUIRE(e.store(t, va + 5, 1));
  REQUIRE(e.store(t, va + PMD_SIZE + 5, 2));
  REQUIRE(e.pmd_huge(t, va));
  REQUIRE(e.pmd_huge(t, va + PMD_SIZE));
  REQUIRE(e.rss(t) == 2 * HPAGE_PMD_NR);

  SECTION("whole: the folio and its deposited table are freed") {
    folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));
    const int64_t pt = t->mm->pgtables_bytes;
    REQUIRE(e.k.sys_munmap(t, va, PMD_SIZE) == 0);
    CHECK(pmd_none(e.pmd(t, va)));
    CHECK(e.rss(t) == HPAGE_PMD_NR);
    CHECK(t->mm->pgtables_bytes == pt - int64_t(PAGE_SIZE));  // the deposited PTE table
    CHECK(e.count("kernel.split_huge_pmd") == 0);
    CHECK(folio_ref_count(f) == 0);  // back in the allocator
    CHECK(e.load(t, va + PMD_SIZE + 5) == 2);
    REQUIRE(e.k.sys_munmap(t, va + PMD_SIZE, PMD_SIZE) == 0);
    CHECK(e.k.nr_free_pages() == free0);
    CHECK(t->mm->pgtables_bytes == 0);
  }

  SECTION("partial: the PMD is split and the folio stays, partially mapped") {
    folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(t, va)));
    // Unmap the second half of the first THP.
    REQUIRE(e.k.sys_munmap(t, va + PMD_SIZE / 2, PMD_SIZE / 2) == 0);
    CHECK(e.count("kernel.split_huge_pmd") == 1);
    CHECK_FALSE(e.pmd_huge(t, va));
    CHECK(e.folio_at(t, va) == f);
    CHECK(e.folio_at(t, va + PMD_SIZE / 2 - PAGE_SIZE) == f);
    CHECK(pte_none(e.pte(t, va + PMD_SIZE / 2)));
    CHECK(folio_mapcount(f) == int(HPAGE_PMD_NR / 2));
    CHECK(folio_entire_mapcount(f) == 0);
    CHECK(folio_ref_count(f) == int(HPAGE_PMD_NR / 2));  // one per remaining PTE, after the flush
    CHECK(folio_test_partially_mapped(f));
    CHECK(e.rss(t) == HPAGE_PMD_NR + HPAGE_PMD_NR / 2);
    CHECK(e.load(t, va + 5) == 1);
    // Unmapping the rest frees it.
    REQUIRE(e.k.sys_munmap(t, va, PMD_SIZE / 2) == 0);
    CHECK(folio_ref_count(f) == 0);
  }
}

TEST_CASE("teardown: partial munmap of an mTHP leaves it partially mapped", "[teardown][mthp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::never, {{kmmtest::ORDER_64K, ThpMode::always}}); });
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.store(t, va, 0x11));
  folio* f = e.folio_at(t, va);
  REQUIRE(folio_order(f) == kmmtest::ORDER_64K);
  REQUIRE(folio_ref_count(f) == 16);
  REQUIRE_FALSE(folio_test_partially_mapped(f));
  const uint64_t free_before = e.k.nr_free_pages();

  // Unmap pages [4, 12) of the 16: zap sees one batch of 8 PTEs of the folio.
  REQUIRE(e.k.sys_munmap(t, va + 4 * PAGE_SIZE, 8 * PAGE_SIZE) == 0);
  CHECK(folio_mapcount(f) == 8);
  CHECK(folio_ref_count(f) == 8);
  CHECK(folio_nr_pages_mapped(f) == 8);
  CHECK(folio_test_partially_mapped(f));
  for (unsigned i = 4; i < 12; ++i) CHECK(folio_page(f, i)->mapcount == 0);
  CHECK(folio_page(f, 3)->mapcount == 1);
  CHECK(folio_page(f, 12)->mapcount == 1);
  CHECK(e.k.nr_free_pages() == free_before);  // nothing freed: the folio is still in use
  CHECK(e.rss(t) == 8);
  CHECK(e.count("kernel.ptes_zapped") == 8);
  CHECK(e.load(t, va) == 0x11);
  CHECK(e.load(t, va + 12 * PAGE_SIZE) == 0);
}

TEST_CASE("teardown: a huge munmap forces intermediate flushes when the gather batches fill", "[teardown]") {
  Env e([](KernelParams& p) { p.check_invariants = false; });  // 12000 faults: check only at the end
  task_struct* t = e.proc("p");
  const unsigned n = 12000;  // more than 7 + 19 * 509 = 9678 batch entries
  const uint64_t va = e.mmap(t, uint64_t(n) * PAGE_SIZE);
  for (unsigned i = 0; i < n; ++i) REQUIRE(e.store(t, va + uint64_t(i) * PAGE_SIZE, 1));
  const uint64_t free_mid = e.k.nr_free_pages();
  const uint64_t flushes0 = e.count("kernel.tlb_flush_range");
  REQUIRE(e.k.sys_munmap(t, va, uint64_t(n) * PAGE_SIZE) == 0);
  // forced flush + tlb_end_vma + the freed tables
  CHECK(e.count("kernel.tlb_flush_range") - flushes0 == 3);
  CHECK(e.k.nr_free_pages() > free_mid + n);
  CHECK(e.rss(t) == 0);
  CHECK(t->mm->pgtables_bytes == 0);
  e.k.check_invariants("test", true);
}

TEST_CASE("teardown: exit frees the address space, wait reaps the zombie", "[teardown][exit]") {
  Env e;
  const uint64_t free0 = e.k.nr_free_pages();
  task_struct* p = e.proc("parent");
  const uint64_t va = e.mmap(p, 16 * PAGE_SIZE);
  for (unsigned i = 0; i < 16; ++i) REQUIRE(e.store(p, va + i * PAGE_SIZE, 7));
  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  mm_struct* cmm = c->mm;
  e.k.enter(c, 0);
  e.k.sys_exit(c, 3);
  CHECK(c->state == TaskState::Zombie);
  CHECK(c->exit_code == 3);
  CHECK(c->mm == nullptr);
  CHECK(cmm->mm_users == 0);
  CHECK(cmm->pgd == 0);
  CHECK(cmm->mm_mt.empty());
  CHECK(cmm->pgtables_bytes == 0);
  CHECK(get_mm_counter(cmm, MM_ANONPAGES) == 0);
  CHECK(e.count("kernel.exit") == 1);

  e.k.enter(p, 0);
  CHECK(e.k.sys_wait(p, c) == c->pid);
  CHECK(c->state == TaskState::Dead);
  CHECK(e.k.sys_wait(p, c) == -ECHILD);

  // The parent exits too (nobody waits for it: released at once); everything is back.
  e.k.sys_exit(p, 0);
  CHECK(p->state == TaskState::Dead);
  e.k.lru_add_drain_all();
  CHECK(e.k.nr_free_pages() == free0);
}

TEST_CASE("teardown: the exit of a forked child makes the parent's pages exclusive again",
          "[teardown][exit][fork]") {
  Env e;
  task_struct* p = e.proc("parent");
  const unsigned n = 16;
  const uint64_t va = e.mmap(p, n * PAGE_SIZE);
  for (unsigned i = 0; i < n; ++i) REQUIRE(e.store(p, va + i * PAGE_SIZE, uint8_t(0x30 + i)));
  e.k.lru_add_drain();
  std::vector<folio*> fs;
  for (unsigned i = 0; i < n; ++i) fs.push_back(e.folio_at(p, va + i * PAGE_SIZE));

  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  for (folio* f : fs) {
    REQUIRE(folio_mapcount(f) == 2);
    REQUIRE(folio_ref_count(f) == 2);
    REQUIRE_FALSE(PageAnonExclusive(f));
  }
  REQUIRE_FALSE(e.writable(p, va));

  e.k.enter(c, 0);
  e.k.sys_exit(c, 0);
  for (folio* f : fs) {
    CHECK(folio_mapcount(f) == 1);
    CHECK(folio_ref_count(f) == 1);  // refcount == mapcount: exclusive in all but the flag
    CHECK_FALSE(PageAnonExclusive(f));  // set only by the next write fault, under the PTL
  }
  CHECK(e.rss(p) == n);

  // The parent's writes reuse every page: no copy, same frames, PAE set.
  const uint64_t copies0 = e.count("kernel.wp_copy");
  for (unsigned i = 0; i < n; ++i) {
    REQUIRE(e.store(p, va + i * PAGE_SIZE, 0xee));
    CHECK(e.folio_at(p, va + i * PAGE_SIZE) == fs[i]);
    CHECK(PageAnonExclusive(fs[i]));
    CHECK(e.writable(p, va + i * PAGE_SIZE));
  }
  CHECK(e.count("kernel.wp_copy") == copies0);
  CHECK(e.count("kernel.wp_reuse") == n);
  CHECK(e.count("kernel.pages_copied") == 0);
}

TEST_CASE("teardown: after the child exits a PMD THP is reused by one fault", "[teardown][exit][thp]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}}); });
  task_struct* p = e.proc("parent");
  const uint64_t va = e.mmap(p, PMD_SIZE);
  REQUIRE(e.store(p, va, 1));
  REQUIRE(e.pmd_huge(p, va));
  folio* f = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(p, va)));
  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  REQUIRE(folio_entire_mapcount(f) == 2);
  REQUIRE(folio_ref_count(f) == 2);
  e.k.enter(c, 0);
  e.k.sys_exit(c, 0);
  CHECK(folio_entire_mapcount(f) == 1);
  CHECK(folio_ref_count(f) == 1);
  const uint64_t faults0 = e.count("faults.total");
  for (uint64_t off = 0; off < PMD_SIZE; off += PAGE_SIZE) REQUIRE(e.store(p, va + off, 2));
  CHECK(e.count("faults.total") - faults0 == 1);
  CHECK(e.pmd_huge(p, va));
  CHECK(e.a.pmd_write(e.pmd(p, va)));
  CHECK(PageAnonExclusive(f));
  CHECK(e.count("kernel.split_huge_pmd") == 0);
}

TEST_CASE("teardown: mmu_gather removes the rmap at zap time and drops the refs after the flush",
          "[teardown][gather]") {
  SECTION("step by step through the gather API") {
    Env e;
    task_struct* p = e.proc("parent");
    const uint64_t va = e.mmap(p, 4 * PAGE_SIZE);
    for (unsigned i = 0; i < 4; ++i) REQUIRE(e.store(p, va + i * PAGE_SIZE, 1));
    e.k.lru_add_drain();
    folio* f = e.folio_at(p, va);
    task_struct* c = e.k.sys_fork(p);
    REQUIRE(c);
    REQUIRE(folio_mapcount(f) == 2);
    REQUIRE(folio_ref_count(f) == 2);

    // The child's zap, as exit_mmap does it, stopped before the flush.
    mm_struct* cmm = c->mm;
    vm_area_struct* cv = e.k.vma_lookup(cmm, va);
    mmu_gather tlb;
    e.k.tlb_gather_mmu_fullmm(&tlb, cmm);
    e.k.unmap_vmas(&tlb, std::vector<vm_area_struct*>{cv}, 0, ~0ull);
    CHECK(pte_none(e.pte(c, va)));
    CHECK(folio_mapcount(f) == 1);    // rmap removed under the PTL, at zap time
    CHECK(folio_ref_count(f) == 2);   // the child's reference is still held by the gather
    CHECK(tlb.pending.size() == 4);
    CHECK(tlb.cleared_ptes);
    // A parent write fault now would copy (refcount > mapcount): the window PORTMAP §2.3 names.
    e.k.tlb_flush_mmu(&tlb);
    CHECK(folio_ref_count(f) == 1);   // dropped after the flush
    CHECK(tlb.pending.empty());
    e.k.tlb_finish_mmu(&tlb);
    CHECK(folio_ref_count(f) == 1);
    e.k.enter(c, 0);
    e.k.sys_exit(c, 0);  // the rest of the teardown (tables, VMAs) still works
    CHECK(cmm->pgd == 0);
  }

  SECTION("at the moment of the TLB flush") {
    mmusim::Stats stats;
    FlushSpy hw;
    KernelParams kp;
    kp.phys_mem = 1ull << 30;
    kp.check_invariants = true;
    set_thp(kp, ThpMode::never, {});
    Kernel k(kp, mmusim::pg::Isa::x86_64, hw, stats);
    UserAccess ua(k);
    task_struct* t = k.create_process("p");
    k.enter(t, 0);
    k.arch().switch_mm(0, t->mm);
    int64_t va = k.sys_mmap(t, 0, 8 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    REQUIRE(va > 0);
    for (unsigned i = 0; i < 8; ++i) REQUIRE(ua.store8(t, uint64_t(va) + i * PAGE_SIZE, 1));
    k.lru_add_drain();
    folio* f = page_folio(k.pfn_to_page(k.arch().pte_pfn(*k.find_pte(t->mm, uint64_t(va)))));
    REQUIRE(folio_ref_count(f) == 1);
    const uint64_t freed0 = stats.total_value("kernel.folios_freed");
    int seen = 0;
    hw.on_flush = [&] {
      if (seen++) return;
      // The first flush of the munmap: the PTE is clear and the mapcount gone, but the folio is
      // still allocated with its reference: nothing was freed before the TLB forgot it.
      CHECK(folio_mapcount(f) == 0);
      CHECK(folio_ref_count(f) == 1);
      CHECK(stats.total_value("kernel.folios_freed") == freed0);
    };
    const uint64_t flushes0 = stats.total_value("kernel.tlb_flush_range");
    REQUIRE(k.sys_munmap(t, uint64_t(va), 8 * PAGE_SIZE) == 0);
    CHECK(seen >= 2);
    CHECK(stats.total_value("kernel.tlb_flush_range") - flushes0 == 2);  // tlb_end_vma + freed tables
    CHECK(stats.total_value("kernel.folios_freed") - freed0 >= 8);
    CHECK(folio_ref_count(f) == 0);
  }
}

TEST_CASE("teardown: arm64 munmap, fork and exit with contpte-mapped 64K folios", "[teardown][arm64]") {
  Env e([](KernelParams& p) { set_thp(p, ThpMode::never, {{kmmtest::ORDER_64K, ThpMode::always}}); },
        mmusim::pg::Isa::arm64);
  const uint64_t free0 = e.k.nr_free_pages();
  task_struct* p = e.proc("parent");
  const uint64_t va = e.mmap(p, PMD_SIZE);
  for (uint64_t off = 0; off < PMD_SIZE; off += 16 * PAGE_SIZE) REQUIRE(e.store(p, va + off, uint8_t(off >> 16)));
  REQUIRE(e.a.pte_cont(e.pte(p, va)));
  REQUIRE(e.rss(p) == HPAGE_PMD_NR);

  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  REQUIRE(e.a.pte_cont(e.pte(c, va)));
  const uint64_t unfold0 = e.count("kernel.contpte_unfold");
  e.k.enter(c, 0);
  e.k.sys_exit(c, 0);
  // Whole blocks are cleared with clear_full_ptes(nr = 16): no unfold.
  CHECK(e.count("kernel.contpte_unfold") == unfold0);
  folio* f = e.folio_at(p, va);
  CHECK(folio_mapcount(f) == 16);
  CHECK(folio_ref_count(f) == 16);
  e.k.enter(p, 0);
  CHECK(e.k.sys_wait(p, c) == c->pid);

  // Unmapping half of one block unfolds it (contpte_try_unfold_partial), nothing else.
  REQUIRE(e.k.sys_munmap(p, va + 8 * PAGE_SIZE, 8 * PAGE_SIZE) == 0);
  CHECK(e.count("kernel.contpte_unfold") == unfold0 + 1);
  CHECK(folio_mapcount(f) == 8);
  CHECK(folio_test_partially_mapped(f));
  CHECK_FALSE(e.a.pte_cont(e.pte(p, va)));
  CHECK(e.a.pte_cont(e.pte(p, va + 16 * PAGE_SIZE)));
  CHECK(e.load(p, va + 16 * PAGE_SIZE) == 1);

  // mprotect RO of one block, then exit: everything is returned.
  REQUIRE(e.k.sys_mprotect(p, va + 32 * PAGE_SIZE, 16 * PAGE_SIZE, PROT_READ) == 0);
  for (unsigned i = 32; i < 48; ++i) CHECK_FALSE(e.writable(p, va + i * PAGE_SIZE));
  CHECK(nr_vmas(p) == 4);  // [0,8) [16,32) [32,48) RO [48,512)
  CHECK(e.load(p, va + 32 * PAGE_SIZE) == 2);
  CHECK(e.store(p, va + 48 * PAGE_SIZE, 9));
  CHECK_FALSE(e.store(p, va + 32 * PAGE_SIZE, 9));
  e.k.sys_exit(p, 0);
  e.k.lru_add_drain_all();
  CHECK(e.k.nr_free_pages() == free0);
}
