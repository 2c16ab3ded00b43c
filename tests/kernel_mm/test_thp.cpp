// SPDX-License-Identifier: GPL-2.0-only
// PMD THP (kernel_mm/huge_memory.cpp, PORTMAP §1.6): the PMD fault, the huge zero page, the split
// on a write to it, __split_huge_pmd through split_vma, and do_huge_pmd_wp_page reuse.
#include <catch2/catch.hpp>

#include <vector>

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

// ---- kernel.thp_cow = copy: the pre-5.8 whole-huge-page COW (V9's kernel) ------------------------

namespace {
void pmd_thp_copy(KernelParams& p) {
  pmd_thp(p);
  p.thp_cow = ThpCow::copy;
}
}  // namespace

TEST_CASE("thp: thp_cow = copy: a write to a THP shared after fork copies the whole huge page", "[thp]") {
  for (const ThpCow mode : {ThpCow::split, ThpCow::copy}) {
    Env e([&](KernelParams& p) {
      pmd_thp(p);
      p.thp_cow = mode;
    });
    INFO((mode == ThpCow::copy ? "copy" : "split"));
    task_struct* parent = e.proc("parent");
    const uint64_t va = e.mmap(parent, PMD_SIZE);
    REQUIRE(e.store(parent, va, 0x11));
    REQUIRE(e.store(parent, va + 300 * PAGE_SIZE + 5, 0x22));
    REQUIRE(e.store(parent, va + PMD_SIZE - 1, 0x33));
    REQUIRE(e.pmd_huge(parent, va));
    folio* old = e.k.pfn_to_page(e.a.pmd_pfn(e.pmd(parent, va)));
    e.k.enter(parent, 0);
    task_struct* child = e.k.sys_fork(parent);
    REQUIRE(child);
    REQUIRE(folio_ref_count(old) == 2);
    const uint64_t copied = e.count("kernel.pages_copied");

    REQUIRE(e.store(child, va + 7 * PAGE_SIZE, 0x44));
    CHECK(e.count("kernel.do_huge_pmd_wp_page") == 1);
    if (mode == ThpCow::copy) {
      // The child has a new THP of its own, mapped writable by its PMD, with the parent's bytes.
      REQUIRE(e.pmd_huge(child, va));
      const pmd_t m = e.pmd(child, va);
      CHECK(e.a.pmd_write(m));
      folio* nf = e.k.pfn_to_page(e.a.pmd_pfn(m));
      CHECK(nf != old);
      CHECK(folio_order(nf) == HPAGE_PMD_ORDER);
      CHECK(PageAnonExclusive(nf));
      CHECK(folio_entire_mapcount(nf) == 1);
      CHECK(folio_ref_count(nf) == 1);
      CHECK(e.count("kernel.huge_pmd_copy") == 1);
      CHECK(e.count("kernel.split_huge_pmd") == 0);
      CHECK(e.count("kernel.pages_copied") - copied == HPAGE_PMD_NR);
      CHECK(e.k.last_fault().kind == FaultKind::huge_copy);
      CHECK(std::string(fault_kind_name(e.k.last_fault().kind)) == "huge_copy");
      // The old THP is the parent's alone now.
      CHECK(folio_ref_count(old) == 1);
      CHECK(folio_entire_mapcount(old) == 1);
      CHECK(e.rss(child) == HPAGE_PMD_NR);
    } else {
      // 6.12: the PMD is split and one 4K page copied.
      CHECK_FALSE(e.pmd_huge(child, va));
      CHECK(e.count("kernel.split_huge_pmd") == 1);
      CHECK(e.count("kernel.huge_pmd_copy") == 0);
      CHECK(e.count("kernel.pages_copied") - copied == 1);
    }
    CHECK(e.load(child, va) == 0x11);
    CHECK(e.load(child, va + 300 * PAGE_SIZE + 5) == 0x22);
    CHECK(e.load(child, va + PMD_SIZE - 1) == 0x33);
    CHECK(e.load(child, va + 7 * PAGE_SIZE) == 0x44);
    // The parent still sees its own bytes, and its next write reuses its THP (copy) or faults on
    // the split-off one.
    CHECK(e.load(parent, va + 7 * PAGE_SIZE) == 0);
    REQUIRE(e.store(parent, va + 9, 0x55));
    CHECK(e.load(parent, va + 9) == 0x55);
    CHECK(e.load(child, va + 9) == 0);
    if (mode == ThpCow::copy) {
      CHECK(e.k.last_fault().kind == FaultKind::huge_reuse);
      CHECK(e.pmd_huge(parent, va));
    }
  }
}

TEST_CASE("thp: thp_cow = copy: a write to the huge zero page zeroes a new THP", "[thp]") {
  Env e(pmd_thp_copy);
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.load(t, va + 9 * PAGE_SIZE) == 0);
  REQUIRE(e.k.is_huge_zero_pmd(e.pmd(t, va)));
  const uint64_t zeroed = e.count("kernel.pages_zeroed");
  REQUIRE(e.store(t, va + 9 * PAGE_SIZE + 3, 0x42));
  REQUIRE(e.pmd_huge(t, va));
  CHECK_FALSE(e.k.is_huge_zero_pmd(e.pmd(t, va)));
  CHECK(e.a.pmd_write(e.pmd(t, va)));
  CHECK(e.count("kernel.huge_pmd_copy") == 1);
  CHECK(e.count("kernel.pages_zeroed") - zeroed == HPAGE_PMD_NR);
  CHECK(e.rss(t) == HPAGE_PMD_NR);
  CHECK(e.load(t, va + 9 * PAGE_SIZE + 3) == 0x42);
  CHECK(e.load(t, va + 10 * PAGE_SIZE) == 0);
}

namespace {
// The kernel's own reads and writes of memory, in order (what the hardware's caches see).
struct KernelMemoryLog : kmm::NullMmuHw {
  std::vector<std::pair<uint64_t, bool>> touches;
  void kernel_memory(int, uint64_t pa, uint64_t, bool write) override { touches.emplace_back(pa, write); }
  bool wants_kernel_memory() const override { return true; }
};

// The sub-pages of the new THP in the order the COW copy wrote them.
std::vector<unsigned> copy_order(HugeCopyOrder order, unsigned target) {
  mmusim::Stats stats;
  KernelMemoryLog hw;
  KernelParams p;
  p.phys_mem = 1ull << 30;
  p.check_invariants = true;
  kmmtest::set_thp(p, ThpMode::always, {{kmmtest::ORDER_2M, ThpMode::inherit}});
  p.thp_cow = ThpCow::copy;
  p.huge_copy_order = order;
  Kernel k(p, mmusim::pg::Isa::x86_64, hw, stats);
  UserAccess ua(k);
  task_struct* parent = k.create_process("parent");
  k.enter(parent, 0);
  k.arch().switch_mm(0, parent->mm);
  const int64_t va = k.sys_mmap(parent, 0, PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(va > 0);
  REQUIRE(ua.store8(parent, uint64_t(va), 1));
  task_struct* child = k.sys_fork(parent);
  REQUIRE(child);
  k.enter(child, 0);
  k.arch().switch_mm(0, child->mm);
  hw.touches.clear();
  REQUIRE(ua.store8(child, uint64_t(va) + uint64_t(target) * PAGE_SIZE, 2));
  REQUIRE(k.last_fault().kind == FaultKind::huge_copy);
  const uint64_t dst = k.page_to_phys(k.pfn_to_page(k.arch().pmd_pfn(*k.mm_find_pmd(child->mm, uint64_t(va)))));
  std::vector<unsigned> out;
  for (auto& [pa, write] : hw.touches)
    if (write && pa >= dst && pa < dst + PMD_SIZE) {
      const unsigned idx = unsigned((pa - dst) / PAGE_SIZE);
      if (out.empty() || out.back() != idx) out.push_back(idx);
    }
  return out;
}
}  // namespace

TEST_CASE("thp: thp_cow = copy copies the sub-pages in kernel.huge_copy_order", "[thp]") {
  // sequential: 0..511; target-last: the far end first, the target sub-page last.
  const std::vector<unsigned> seq = copy_order(HugeCopyOrder::sequential, 5);
  REQUIRE(seq.size() == HPAGE_PMD_NR);
  CHECK(seq.front() == 0);
  CHECK(seq.back() == HPAGE_PMD_NR - 1);
  const std::vector<unsigned> tl = copy_order(HugeCopyOrder::target_last, 5);
  REQUIRE(tl.size() == HPAGE_PMD_NR);
  CHECK(tl.front() == HPAGE_PMD_NR - 1);  // the far end first
  CHECK(tl.back() == 5);
  // ... converging left-right: (0, 9), (1, 8), (2, 7), (3, 6), (4, 5).
  CHECK(tl[tl.size() - 2] == 4);
  CHECK(tl[tl.size() - 3] == 6);
  CHECK(tl[tl.size() - 4] == 3);
  const std::vector<unsigned> hi = copy_order(HugeCopyOrder::target_last, 400);
  REQUIRE(hi.size() == HPAGE_PMD_NR);
  CHECK(hi.front() == 0);
  CHECK(hi.back() == 400);
}

namespace {
// The x86 TLB operations the kernel issues.
struct X86FlushLog : NullMmuHw {
  std::vector<uint64_t> invlpg;  // the addresses, in order
  int full = 0;                  // flushes of a whole PCID
  void x86_invlpg(int, uint16_t, uint64_t va) override { invlpg.push_back(va); }
  void x86_flush_pcid(int, uint16_t) override { ++full; }
  void clear() {
    invlpg.clear();
    full = 0;
  }
};
}  // namespace

// x86 TLB flushes of PMD mappings as in 6.12:
//   - an mmu_gather that cleared only PMD leaves flushes with stride PMD_SHIFT
//     (tlb_flush(), arch/x86/include/asm/tlb.h: tlb_get_unmap_shift()): one INVLPG per 2 MiB,
//     within tlb_single_page_flush_ceiling (33);
//   - flush_pmd_tlb_range() is flush_tlb_range() (x86 has no __HAVE_ARCH_FLUSH_PMD_TLB_RANGE,
//     include/linux/pgtable.h:1785), stride PAGE_SHIFT: 512 pages > 33, a full flush of the mm;
//     so a THP split's pmdp_invalidate() flushes the whole mm.
TEST_CASE("thp: x86 flushes a zap of PMD leaves by one INVLPG per 2 MiB and a split's PMD by the whole mm", "[thp][tlb]") {
  mmusim::Stats stats;
  X86FlushLog hw;
  KernelParams kp;
  kp.phys_mem = 1ull << 30;
  kp.check_invariants = true;
  pmd_thp(kp);
  Kernel k(kp, mmusim::pg::Isa::x86_64, hw, stats);
  UserAccess ua(k);
  task_struct* t = kmmtest::start_process(k);
  const int64_t r = k.sys_mmap(t, 0, 4 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(r > 0);
  const uint64_t base = uint64_t(r);
  REQUIRE(IS_ALIGNED(base, PMD_SIZE));
  for (unsigned i = 0; i < 4; ++i) REQUIRE(ua.store8(t, base + i * PMD_SIZE, 1));
  REQUIRE(stats.total_value("kernel.do_huge_pmd_anonymous_page") == 4);

  hw.clear();
  k.enter(t, 0);
  REQUIRE(k.sys_madvise(t, base, PMD_SIZE, MADV_DONTNEED) == 0);
  CHECK(hw.invlpg == std::vector<uint64_t>{base});
  CHECK(hw.full == 0);

  hw.clear();
  REQUIRE(k.sys_madvise(t, base + PMD_SIZE, 2 * PMD_SIZE, MADV_DONTNEED) == 0);
  CHECK(hw.invlpg == std::vector<uint64_t>{base + PMD_SIZE, base + 2 * PMD_SIZE});
  CHECK(hw.full == 0);

  // mprotect() of one page of the last THP: split_vma() splits the PMD first (__split_huge_pmd()
  // -> pmdp_invalidate() -> flush_pmd_tlb_range(): a full flush), then change_protection()'s
  // gather flushes the one PTE it changed.
  hw.clear();
  REQUIRE(k.sys_mprotect(t, base + 3 * PMD_SIZE, PAGE_SIZE, PROT_READ) == 0);
  CHECK(stats.total_value("kernel.split_huge_pmd") == 1);
  CHECK(hw.full == 1);
  CHECK(hw.invlpg == std::vector<uint64_t>{base + 3 * PMD_SIZE});
}
