// SPDX-License-Identifier: GPL-2.0-only
// The anonymous-memory scenarios of tools/testing/selftests/mm/cow.c (Linux 6.12), run as
// "programs" on the port through UserAccess, with the invariant checker on after every kernel
// entry (kmmtest::Fixture). Each TEST_CASE names the cow.c test it follows and keeps its
// expectations; each runs on x86-64 and arm64.
//
// cow.c's memory setups (do_run_with_base_page, do_run_with_thp) are reproduced: a base page with
// MADV_NOHUGEPAGE; a THP of each size (PMD-mapped; PTE-mapped via mprotect() of one subpage RO and
// back; a single PTE of a THP via MADV_DONTNEED of the rest; partially shared via MADV_DONTFORK +
// fork + child exit + MADV_DOFORK) with the THP sysfs settings cow.c pushes (the PMD size
// `never`, the size under test `always`, MADV_HUGEPAGE on the range). The test functions are
// test_cow_in_parent and test_cow_in_parent_mprotect (anon_test_cases[0..1]) and test_cow with
// the shared zeropage and the huge zeropage (non_anon_test_cases[0]); to these the brief adds the
// child-writes direction and the fork-then-child-exits reuse expectations (PORTMAP §2.3).
//
// Out of scope (not in the port): swapped-out variants (no swap), partially mremap()'ed THP (no
// mremap), hugetlb, vmsplice/io_uring/GUP R/O pins (no GUP), KSM, MADV_COLLAPSE/khugepaged
// (anon_thp_test_cases), memfd/tmpfile (no file memory).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "fixture.hpp"
#include "kernel_mm/kernel.hpp"
#include "kernel_mm/user_access.hpp"

using namespace kmm;
using mmusim::pg::Isa;

namespace {

// What the page tables of a task map at one address.
struct Leaf {
  bool present = false;
  bool pmd = false;
  bool writable = false;
  pfn_t pfn = 0;
};

// The THP setups of cow.c (enum thp_run, without the swap-out and mremap ones).
enum class ThpRun { pmd, pte, single_pte, partial_shared };
const char* thp_run_name(ThpRun r) {
  switch (r) {
    case ThpRun::pmd: return "THP (PMD-mapped)";
    case ThpRun::pte: return "PTE-mapped THP";
    case ThpRun::single_pte: return "single PTE of THP";
    case ThpRun::partial_shared: return "partially shared THP";
  }
  return "?";
}

unsigned order_of(uint64_t size) {
  unsigned o = 0;
  while ((PAGE_SIZE << o) < size) ++o;
  return o;
}

struct Cow {
  kmmtest::Fixture fix;
  Kernel& k;
  UserAccess& ua;
  task_struct* parent = nullptr;
  uint64_t mmap_mem = 0, mmap_size = 0;
  uint64_t mem = 0, size = 0;

  explicit Cow(Isa isa, const std::function<void(KernelParams&)>& tweak = {})
      : fix(isa, tweak), k(fix.kernel()), ua(*fix.ua) {
    parent = k.create_process("cow");
  }

  uint64_t count(const char* key) const { return fix.count(key); }

  Leaf lookup(task_struct* t, uint64_t va) {
    Leaf l;
    pmd_t* pmd = k.mm_find_pmd(t->mm, va);
    if (!pmd || pmd_none(*pmd)) return l;
    Arch& a = k.arch();
    if (a.pmd_trans_huge(*pmd)) {
      l.present = true;
      l.pmd = true;
      l.writable = a.pmd_write(*pmd);
      l.pfn = a.pmd_pfn(*pmd) + ((va >> PAGE_SHIFT) & (HPAGE_PMD_NR - 1));
      return l;
    }
    pte_t* pte = k.pte_offset_map(pmd, va);
    if (!pte) return l;
    const pte_t v = a.ptep_get(pte);
    if (!a.pte_present(v)) return l;
    l.present = true;
    l.writable = a.pte_write(v);
    l.pfn = a.pte_pfn(v);
    return l;
  }
  folio* folio_at(task_struct* t, uint64_t va) {
    Leaf l = lookup(t, va);
    REQUIRE(l.present);
    REQUIRE(!k.is_zero_pfn(l.pfn));
    return page_folio(k.pfn_to_page(l.pfn));
  }

  std::vector<uint8_t> read(task_struct* t, uint64_t va, uint64_t n) {
    std::vector<uint8_t> buf(n);
    REQUIRE(ua.load(t, va, buf.data(), n));
    return buf;
  }
  bool all_equal(task_struct* t, uint64_t va, uint64_t n, uint8_t byte) {
    std::vector<uint8_t> b = read(t, va, n);
    return std::all_of(b.begin(), b.end(), [&](uint8_t x) { return x == byte; });
  }

  // do_run_with_base_page(): one page, MADV_NOHUGEPAGE, memset(mem, 1, pagesize).
  void run_with_base_page() {
    int64_t r = k.sys_mmap(parent, 0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    REQUIRE(r > 0);
    mmap_mem = mem = uint64_t(r);
    mmap_size = size = PAGE_SIZE;
    REQUIRE(k.sys_madvise(parent, mem, PAGE_SIZE, MADV_NOHUGEPAGE) == 0);
    REQUIRE(ua.fill(parent, mem, 1, PAGE_SIZE));
    REQUIRE(folio_order(folio_at(parent, mem)) == 0);
  }

  // do_run_with_thp(): a THP-aligned THP of `thpsize`, populated with 1s, then the setup.
  void run_with_thp(ThpRun run, uint64_t thpsize) {
    mmap_size = 2 * thpsize;
    int64_t r = k.sys_mmap(parent, 0, mmap_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    REQUIRE(r > 0);
    mmap_mem = uint64_t(r);
    // We need a THP-aligned memory area.
    mem = (mmap_mem + thpsize) & ~(thpsize - 1);
    REQUIRE(k.sys_madvise(parent, mem, thpsize, MADV_HUGEPAGE) == 0);
    // Try to populate a THP. Touch the first sub-page and test if we get the last sub-page
    // populated automatically.
    REQUIRE(ua.store8(parent, mem, 1));
    REQUIRE(lookup(parent, mem + thpsize - PAGE_SIZE).present);  // cow.c skips otherwise
    REQUIRE(ua.fill(parent, mem, 1, thpsize));
    folio* f = folio_at(parent, mem);
    REQUIRE(folio_order(f) == order_of(thpsize));
    REQUIRE(lookup(parent, mem).pmd == (thpsize == PMD_SIZE));

    size = thpsize;
    switch (run) {
      case ThpRun::pmd:
        REQUIRE(thpsize == PMD_SIZE);
        break;
      case ThpRun::pte:
        // Trigger PTE-mapping the THP by temporarily mapping a single subpage R/O. This is a noop
        // if the THP is not pmdsize (and therefore already PTE-mapped).
        REQUIRE(k.sys_mprotect(parent, mem + PAGE_SIZE, PAGE_SIZE, PROT_READ) == 0);
        REQUIRE(k.sys_mprotect(parent, mem + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
        REQUIRE(!lookup(parent, mem).pmd);
        REQUIRE(folio_at(parent, mem) == f);  // still the same large folio, now PTE-mapped
        REQUIRE(folio_at(parent, mem + thpsize - PAGE_SIZE) == f);
        break;
      case ThpRun::single_pte:
        // Discard all but a single subpage of that PTE-mapped THP. What remains is a single PTE
        // mapping a single subpage.
        REQUIRE(k.sys_madvise(parent, mem + PAGE_SIZE, thpsize - PAGE_SIZE, MADV_DONTNEED) == 0);
        REQUIRE(!lookup(parent, mem + PAGE_SIZE).present);
        REQUIRE(folio_at(parent, mem) == f);
        REQUIRE(folio_mapcount(f) == 1);
        size = PAGE_SIZE;
        break;
      case ThpRun::partial_shared: {
        // Share the first page of the THP with a child and quit the child. This will result in
        // some parts of the THP never have been shared.
        REQUIRE(k.sys_madvise(parent, mem + PAGE_SIZE, thpsize - PAGE_SIZE, MADV_DONTFORK) == 0);
        task_struct* c = k.sys_fork(parent);
        REQUIRE(c);
        k.sys_exit(c, 0);
        REQUIRE(k.sys_wait(parent, c) == c->pid);
        // Allow for sharing all pages again.
        REQUIRE(k.sys_madvise(parent, mem + PAGE_SIZE, thpsize - PAGE_SIZE, MADV_DOFORK) == 0);
        REQUIRE(folio_at(parent, mem) == f);
        break;
      }
    }
  }

  // do_test_cow_in_parent() with child_memcmp_fn: the child backs up the content, the parent
  // (after an optional mprotect(PROT_READ) + mprotect(PROT_READ|PROT_WRITE)) memsets 0xff, the
  // child must still read the old values ("No leak from parent into child").
  void test_cow_in_parent(bool do_mprotect) {
    task_struct* child = k.sys_fork(parent);
    REQUIRE(child);
    const std::vector<uint8_t> old = read(child, mem, size);  // Backup the original content.
    REQUIRE(old == std::vector<uint8_t>(size, 1));
    // After fork: the parent's and the child's PTEs map the same pages, read-only, !PAE
    // (invariants 5/6 are checked after every entry; here the sharing itself).
    for (uint64_t off = 0; off < size; off += PAGE_SIZE) {
      Leaf p = lookup(parent, mem + off), c = lookup(child, mem + off);
      REQUIRE(p.present);
      REQUIRE(c.present);
      REQUIRE(p.pfn == c.pfn);
      REQUIRE(!p.writable);
      REQUIRE(!c.writable);
      REQUIRE(!PageAnonExclusive(k.pfn_to_page(p.pfn)));
    }
    if (do_mprotect) {
      // mprotect() optimizations might try avoiding write-faults by directly mapping pages
      // writable.
      REQUIRE(k.sys_mprotect(parent, mem, size, PROT_READ) == 0);
      REQUIRE(k.sys_mprotect(parent, mem, size, PROT_READ | PROT_WRITE) == 0);
    }
    const uint64_t copies = count("kernel.wp_copy");
    REQUIRE(ua.fill(parent, mem, 0xff, size));  // Modify the page.
    // The parent's writes broke COW: one 4 KiB copy per page (6.12 copies even for large folios;
    // the PMD THP is split first).
    CHECK(count("kernel.wp_copy") - copies == size / PAGE_SIZE);
    // See if we still read the old values.
    REQUIRE(read(child, mem, size) == old);
    REQUIRE(all_equal(parent, mem, size, 0xff));
    for (uint64_t off = 0; off < size; off += PAGE_SIZE) {
      Leaf p = lookup(parent, mem + off), c = lookup(child, mem + off);
      REQUIRE(p.pfn != c.pfn);
      REQUIRE(p.writable);
      REQUIRE(PageAnonExclusive(k.pfn_to_page(p.pfn)));
    }
    k.sys_exit(child, 0);
    REQUIRE(k.sys_wait(parent, child) == child->pid);
    REQUIRE(all_equal(parent, mem, size, 0xff));
  }

  // The other direction: the child writes, the parent must keep reading its values; then the
  // parent writes too, and each keeps its own.
  void test_cow_in_child() {
    task_struct* child = k.sys_fork(parent);
    REQUIRE(child);
    REQUIRE(ua.fill(child, mem, 0xaa, size));
    REQUIRE(all_equal(parent, mem, size, 1));
    REQUIRE(all_equal(child, mem, size, 0xaa));
    REQUIRE(ua.fill(parent, mem + size / 2, 0x55, size - size / 2));
    REQUIRE(all_equal(child, mem, size, 0xaa));
    REQUIRE(all_equal(parent, mem, size / 2, 1));
    REQUIRE(all_equal(parent, mem + size / 2, size - size / 2, 0x55));
    k.sys_exit(child, 0);
    REQUIRE(k.sys_wait(parent, child) == child->pid);
    REQUIRE(all_equal(parent, mem + size / 2, size - size / 2, 0x55));
  }

  // fork(), the child exits without writing, the parent writes: the child's teardown gives the
  // parent back refcount == mapcount (PORTMAP §2.3), so the parent's write faults reuse instead of
  // copying: no COW for an exclusive page. 6.12 copies the pages of a PTE-mapped large folio
  // anyway (wp_can_reuse_anon_folio() returns false for large folios); v6.15+
  // (kernel.large_folio_reuse) reuses them.
  void test_reuse_after_child_exit() {
    std::vector<pfn_t> pfns;
    for (uint64_t off = 0; off < size; off += PAGE_SIZE) pfns.push_back(lookup(parent, mem + off).pfn);
    folio* f = folio_at(parent, mem);
    const bool pmd_mapped = lookup(parent, mem).pmd;

    task_struct* child = k.sys_fork(parent);
    REQUIRE(child);
    REQUIRE(folio_mapcount(f) >= 2);
    REQUIRE(all_equal(child, mem, size, 1));
    k.sys_exit(child, 0);
    REQUIRE(k.sys_wait(parent, child) == child->pid);

    // Refcount back to mapcount (after the per-CPU LRU-add batches give back their references).
    k.lru_add_drain_all();
    REQUIRE(folio_ref_count(f) == folio_mapcount(f));
    REQUIRE(folio_mapcount(f) == (pmd_mapped ? 1 : int(size / PAGE_SIZE)));
    for (uint64_t off = 0; off < size; off += PAGE_SIZE) REQUIRE(!lookup(parent, mem + off).writable);

    // __wp_can_reuse_large_anon_folio() (v6.15+) gives a large folio back (copies) when only one
    // of its pages is mapped: "Let's just free up a large folio if only a single page is mapped."
    const bool copies_expected = folio_test_large(f) && !pmd_mapped &&
                                 (!k.params().large_folio_reuse || folio_mapcount(f) <= 1);
    const uint64_t copies = count("kernel.wp_copy");
    REQUIRE(ua.fill(parent, mem, 0xff, size));
    REQUIRE(all_equal(parent, mem, size, 0xff));
    if (copies_expected) {
      CHECK(count("kernel.wp_copy") - copies == size / PAGE_SIZE);
    } else {
      CHECK(count("kernel.wp_copy") == copies);
    }
    for (uint64_t off = 0, i = 0; off < size; off += PAGE_SIZE, ++i) {
      Leaf l = lookup(parent, mem + off);
      REQUIRE(l.writable);
      REQUIRE(PageAnonExclusive(k.pfn_to_page(pmd_mapped ? pfns[0] : l.pfn)));
      if (copies_expected) REQUIRE(l.pfn != pfns[i]);
      else REQUIRE(l.pfn == pfns[i]);
    }
    if (pmd_mapped) REQUIRE(lookup(parent, mem).pmd);  // do_huge_pmd_wp_page() reused it whole
  }

  // The fixture checked the invariants after every kernel entry; the unmap gives every page back.
  void unmap() {
    REQUIRE(count("kernel.invariant_checks") >= count("faults.total"));
    REQUIRE(k.sys_munmap(parent, mmap_mem, mmap_size) == 0);
    REQUIRE(get_mm_counter(parent->mm, MM_ANONPAGES) == 0);
  }
};

// The THP sysfs settings cow.c pushes for a size: PMD order `never`, the size under test `always`
// (run_anon_test_case), on top of enabled=always.
std::function<void(KernelParams&)> thp_settings(uint64_t thpsize, bool large_folio_reuse = true) {
  return [thpsize, large_folio_reuse](KernelParams& p) {
    p.thp_enabled = ThpMode::always;
    for (unsigned o = 2; o <= HPAGE_PMD_ORDER; ++o) p.thp_order[o] = ThpMode::never;
    p.thp_order[order_of(thpsize)] = ThpMode::always;
    p.large_folio_reuse = large_folio_reuse;
  };
}

}  // namespace

// ---- anon_test_cases[0]: "Basic COW after fork()" ---------------------------------------------

TEST_CASE("cow.c: Basic COW after fork() (small pages)", "[cow]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa);
  c.run_with_base_page();
  c.test_cow_in_parent(false);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with mprotect() optimization (small pages)", "[cow]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa);
  c.run_with_base_page();
  c.test_cow_in_parent(true);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork(), child writes (small pages)", "[cow]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa);
  c.run_with_base_page();
  c.test_cow_in_child();
  c.unmap();
}

TEST_CASE("cow.c: no COW after fork() once the child exited (small pages)", "[cow]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa);
  c.run_with_base_page();
  c.test_reuse_after_child_exit();
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with THP (PMD-mapped, 2048 kB)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const bool mprot = GENERATE(false, true);
  INFO("isa " << mmusim::pg::isa_name(isa) << (mprot ? ", with mprotect() optimization" : ""));
  Cow c(isa, thp_settings(PMD_SIZE));
  c.run_with_thp(ThpRun::pmd, PMD_SIZE);
  c.test_cow_in_parent(mprot);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with PTE-mapped THP (2048 kB)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const bool mprot = GENERATE(false, true);
  INFO("isa " << mmusim::pg::isa_name(isa) << (mprot ? ", with mprotect() optimization" : ""));
  Cow c(isa, thp_settings(PMD_SIZE));
  c.run_with_thp(ThpRun::pte, PMD_SIZE);
  c.test_cow_in_parent(mprot);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with single PTE of THP (2048 kB)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const bool mprot = GENERATE(false, true);
  INFO("isa " << mmusim::pg::isa_name(isa) << (mprot ? ", with mprotect() optimization" : ""));
  Cow c(isa, thp_settings(PMD_SIZE));
  c.run_with_thp(ThpRun::single_pte, PMD_SIZE);
  c.test_cow_in_parent(mprot);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with partially shared THP (2048 kB)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const bool mprot = GENERATE(false, true);
  INFO("isa " << mmusim::pg::isa_name(isa) << (mprot ? ", with mprotect() optimization" : ""));
  Cow c(isa, thp_settings(PMD_SIZE));
  c.run_with_thp(ThpRun::partial_shared, PMD_SIZE);
  c.test_cow_in_parent(mprot);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork() with mTHP (16 kB .. 1024 kB)", "[cow][thp][mthp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const uint64_t kb = GENERATE(16, 32, 64, 128, 256, 512, 1024);
  const ThpRun run = GENERATE(ThpRun::pte, ThpRun::single_pte, ThpRun::partial_shared);
  const bool mprot = GENERATE(false, true);
  INFO("isa " << mmusim::pg::isa_name(isa) << ", " << thp_run_name(run) << " (" << kb << " kB)"
              << (mprot ? ", with mprotect() optimization" : ""));
  Cow c(isa, thp_settings(kb << 10));
  c.run_with_thp(run, kb << 10);
  c.test_cow_in_parent(mprot);
  c.unmap();
}

TEST_CASE("cow.c: Basic COW after fork(), child writes (THP and mTHP)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const uint64_t kb = GENERATE(16, 64, 1024, 2048);
  const ThpRun run = GENERATE(ThpRun::pmd, ThpRun::pte, ThpRun::single_pte);
  if (run == ThpRun::pmd && kb != 2048) return;
  INFO("isa " << mmusim::pg::isa_name(isa) << ", " << thp_run_name(run) << " (" << kb << " kB)");
  Cow c(isa, thp_settings(kb << 10));
  c.run_with_thp(run, kb << 10);
  c.test_cow_in_child();
  c.unmap();
}

TEST_CASE("cow.c: no COW after fork() once the child exited (THP and mTHP)", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  const bool reuse = GENERATE(true, false);  // v6.15+ large-folio reuse, or 6.12
  const uint64_t kb = GENERATE(16, 64, 1024, 2048);
  const ThpRun run = GENERATE(ThpRun::pmd, ThpRun::pte, ThpRun::single_pte);
  if (run == ThpRun::pmd && kb != 2048) return;
  INFO("isa " << mmusim::pg::isa_name(isa) << ", " << thp_run_name(run) << " (" << kb << " kB), "
              << (reuse ? "large-folio reuse (v6.15+)" : "6.12"));
  Cow c(isa, thp_settings(kb << 10, reuse));
  c.run_with_thp(run, kb << 10);
  c.test_reuse_after_child_exit();
  c.unmap();
}

// ---- non_anon_test_cases[0]: "Basic COW" with the shared zeropage and the huge zeropage --------
// test_cow(): a private writable mapping and a private read-only one of the zero page; writing the
// first must not change what the second reads ("Other mapping not modified").

TEST_CASE("cow.c: Basic COW with shared zeropage", "[cow]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa);
  Kernel& k = c.k;
  task_struct* p = c.parent;
  const int64_t mem = k.sys_mmap(p, 0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  const int64_t smem = k.sys_mmap(p, 0, PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(mem > 0);
  REQUIRE(smem > 0);
  // Read from the page to populate the shared zeropage.
  REQUIRE(c.ua.load8(p, uint64_t(mem)) == 0);
  REQUIRE(c.ua.load8(p, uint64_t(smem)) == 0);
  REQUIRE(k.is_zero_pfn(c.lookup(p, uint64_t(mem)).pfn));
  REQUIRE(k.is_zero_pfn(c.lookup(p, uint64_t(smem)).pfn));
  const std::vector<uint8_t> old = c.read(p, uint64_t(smem), PAGE_SIZE);
  REQUIRE(c.ua.fill(p, uint64_t(mem), 0xff, PAGE_SIZE));  // Modify the page.
  REQUIRE(c.read(p, uint64_t(smem), PAGE_SIZE) == old);   // Other mapping not modified.
  REQUIRE(c.all_equal(p, uint64_t(mem), PAGE_SIZE, 0xff));
  REQUIRE(!k.is_zero_pfn(c.lookup(p, uint64_t(mem)).pfn));
  REQUIRE(k.is_zero_pfn(c.lookup(p, uint64_t(smem)).pfn));
  // The zero page also survives a fork in the child.
  task_struct* child = k.sys_fork(p);
  REQUIRE(child);
  REQUIRE(c.ua.store8(child, uint64_t(mem), 7));
  REQUIRE(c.ua.load8(p, uint64_t(mem)) == 0xff);
  REQUIRE(c.ua.load8(child, uint64_t(smem)) == 0);
  k.sys_exit(child, 0);
  REQUIRE(k.sys_wait(p, child) == child->pid);
  REQUIRE(k.sys_munmap(p, uint64_t(mem), PAGE_SIZE) == 0);
  REQUIRE(k.sys_munmap(p, uint64_t(smem), PAGE_SIZE) == 0);
}

TEST_CASE("cow.c: Basic COW with huge zeropage", "[cow][thp]") {
  const Isa isa = GENERATE(Isa::x86_64, Isa::arm64);
  INFO("isa " << mmusim::pg::isa_name(isa));
  Cow c(isa, thp_settings(PMD_SIZE));
  Kernel& k = c.k;
  task_struct* p = c.parent;
  REQUIRE(k.params().thp_use_zero_page);
  // For alignment purposes, we need twice the thp size.
  const uint64_t mmap_size = 2 * PMD_SIZE;
  const int64_t mmap_mem = k.sys_mmap(p, 0, mmap_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  const int64_t mmap_smem = k.sys_mmap(p, 0, mmap_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(mmap_mem > 0);
  REQUIRE(mmap_smem > 0);
  // We need a THP-aligned memory area.
  const uint64_t mem = (uint64_t(mmap_mem) + PMD_SIZE) & PMD_MASK;
  const uint64_t smem = (uint64_t(mmap_smem) + PMD_SIZE) & PMD_MASK;
  REQUIRE(k.sys_madvise(p, mem, PMD_SIZE, MADV_HUGEPAGE) == 0);
  REQUIRE(k.sys_madvise(p, smem, PMD_SIZE, MADV_HUGEPAGE) == 0);
  // Read from the memory to populate the huge shared zeropage. Read from the first sub-page and
  // test if we get another sub-page populated automatically.
  REQUIRE(c.ua.load8(p, mem) == 0);
  REQUIRE(c.ua.load8(p, smem) == 0);
  const Leaf lm = c.lookup(p, mem + PAGE_SIZE), ls = c.lookup(p, smem + PAGE_SIZE);
  REQUIRE(lm.present);
  REQUIRE(ls.present);
  REQUIRE(lm.pmd);
  REQUIRE(!lm.writable);
  REQUIRE(lm.pfn == ls.pfn);  // both map the huge zero folio
  REQUIRE(k.is_huge_zero_folio(page_folio(k.pfn_to_page(lm.pfn))));

  const std::vector<uint8_t> old = c.read(p, smem, PMD_SIZE);
  REQUIRE(c.ua.fill(p, mem, 0xff, PMD_SIZE));  // Modify the page.
  REQUIRE(c.read(p, smem, PMD_SIZE) == old);   // Other mapping not modified.
  REQUIRE(c.all_equal(p, mem, PMD_SIZE, 0xff));
  REQUIRE(!k.is_huge_zero_folio(page_folio(k.pfn_to_page(c.lookup(p, mem).pfn))));
  REQUIRE(k.sys_munmap(p, uint64_t(mmap_mem), mmap_size) == 0);
  REQUIRE(k.sys_munmap(p, uint64_t(mmap_smem), mmap_size) == 0);
}
