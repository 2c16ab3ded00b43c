// SPDX-License-Identifier: GPL-2.0-only
// The invariant checker (kernel_mm/check.cpp, PORTMAP §3.3) on hand-made states: page tables built
// with pud_alloc/pmd_alloc/__pte_alloc, entries written through the arch layer, folios from the
// allocator with their counts set the way the kernel's paths leave them. Each consistent state
// must pass; each corruption of exactly one kind must make the checker panic with a message that
// names the invariant.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/pgformat.hpp"
#include "kernel_mm/kernel.hpp"
#include "kmm_hand.hpp"

using Catch::Matchers::Contains;
using kmmtest::Hand;
using namespace kmm;

namespace {
constexpr uint64_t VA = 0x40000000ull;  // 1 GiB: PMD- and PUD-aligned
constexpr uint64_t VA2 = 0x80000000ull;
}  // namespace

namespace {
// The checker's panic message, or "(no violation)".
std::string violation(Hand& h) {
  try {
    h.check();
  } catch (const mmusim::InternalError& e) {
    return e.what();
  }
  return "(no violation)";
}
}  // namespace

#define REQUIRE_VIOLATION(hand, text) REQUIRE_THAT(violation(hand), Contains(text))

// A helper so that the message is shown when the check throws where it should not.
#define REQUIRE_CONSISTENT(hand) REQUIRE_NOTHROW((hand).check())

TEST_CASE("invariants: consistent hand-made states pass", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("parent");
  vm_area_struct* v = h.add_vma(p->mm, VA, 8 * PMD_SIZE, 1);
  REQUIRE_CONSISTENT(h);  // an empty address space
  const uint64_t before = h.fix.count("kernel.invariant_checks");

  folio* small = h.map_new(p->mm, v, VA, 0);
  folio* m64k = h.map_new(p->mm, v, VA + 16 * PAGE_SIZE, 4);
  folio* thp = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
  folio* ro = h.map_new(p->mm, v, VA + 64 * PAGE_SIZE, 0, /*writable=*/false);  // PAE + read-only: legal
  h.map_zero(p->mm, VA + 65 * PAGE_SIZE);
  REQUIRE(small != nullptr);
  REQUIRE(ro != nullptr);
  REQUIRE_CONSISTENT(h);
  REQUIRE(h.fix.count("kernel.invariant_checks") == before + 1);

  // "fork": a child maps the same folios read-only; PAE cleared; counts as copy_present_ptes and
  // copy_huge_pmd leave them.
  task_struct* c = h.proc("child");
  vm_area_struct* cv = h.add_vma(c->mm, VA, 8 * PMD_SIZE, 2, /*root=*/1);
  h.share(small, p->mm, c->mm, cv, VA);
  h.share(m64k, p->mm, c->mm, cv, VA + 16 * PAGE_SIZE);
  h.share_pmd(thp, p->mm, c->mm, cv, VA + PMD_SIZE);
  REQUIRE_CONSISTENT(h);
  CHECK(folio_mapcount(m64k) == 32);
  CHECK(folio_ref_count(thp) == 2);

  // A small folio waiting in the LRU-add batch holds one more reference.
  folio* lru = h.map_new(p->mm, v, VA + 80 * PAGE_SIZE, 0);
  h.k.lruvec_del_folio(h.k.folio_lruvec(lru), lru);  // not drained yet: batched instead
  h.k.folio_add_lru_vma(lru, v);
  CHECK(folio_ref_count(lru) == 2);
  REQUIRE_CONSISTENT(h);
  h.k.lru_add_drain();
  CHECK(folio_ref_count(lru) == 1);
  REQUIRE_CONSISTENT(h);
}

TEST_CASE("invariants: off unless kernel.check_invariants or force", "[invariants]") {
  Hand h([](KernelParams& kp) { kp.check_invariants = false; });
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, PMD_SIZE, 1);
  folio* f = h.map_new(p->mm, v, VA, 0);
  f->mapcount = 7;  // broken
  const uint64_t before = h.fix.count("kernel.invariant_checks");
  REQUIRE_NOTHROW(h.k.check_invariants("not forced"));
  REQUIRE(h.fix.count("kernel.invariant_checks") == before);
  REQUIRE_THROWS_AS(h.k.check_invariants("forced", true), mmusim::InternalError);
}

TEST_CASE("invariants: the message names the operation and shows the state", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, PMD_SIZE, 1);
  folio* f = h.map_new(p->mm, v, VA + 3 * PAGE_SIZE, 0);
  f->mapcount = 2;
  try {
    h.k.check_invariants("my operation", true);
    FAIL("no violation reported");
  } catch (const mmusim::InternalError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("invariant 1 (") && Contains("after 'my operation'") &&
                      Contains(fmt::format("mm {}", p->mm->id)) && Contains("va 0x40003000") &&
                      Contains(fmt::format("pfn {:#x}", h.k.page_to_pfn(f))) && Contains("refcount 1") &&
                      Contains("mapcount 2") && Contains("anon_exclusive"));
  }
}

TEST_CASE("invariant 1: mapcount = reality", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  SECTION("small folio: page mapcount too high") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    f->mapcount = 2;
    f->refcount = 2;
    REQUIRE_VIOLATION(h, "invariant 1 (");
  }
  SECTION("large folio: one page's mapcount (and large_mapcount) off") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f[5].mapcount = 0;
    f->large_mapcount -= 1;
    f->refcount -= 1;
    f->mm_id_mapcount[0] -= 1;
    REQUIRE_VIOLATION(h, "invariant 1 (");
  }
  SECTION("large folio: large_mapcount off") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->large_mapcount += 1;
    REQUIRE_VIOLATION(h, "invariant 1 (");
  }
  SECTION("PMD-mapped folio: entire_mapcount off") {
    folio* f = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    f->entire_mapcount = 2;
    REQUIRE_VIOLATION(h, "invariant 1 (");
  }
  SECTION("a PTE cleared without the rmap update") {
    h.map_new(p->mm, v, VA, 0);
    *h.k.find_pte(p->mm, VA) = pte_t{0};
    add_mm_counter(p->mm, MM_ANONPAGES, -1);
    REQUIRE_VIOLATION(h, "invariant 1 (");
  }
}

TEST_CASE("invariant 2: large-folio bookkeeping and MM-id slots", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  SECTION("nr_pages_mapped off by one") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->nr_pages_mapped -= 1;
    REQUIRE_VIOLATION(h, "invariant 2 (large-folio");
  }
  SECTION("ENTIRELY_MAPPED missing on a PMD-mapped folio") {
    folio* f = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    f->nr_pages_mapped &= ~ENTIRELY_MAPPED;
    REQUIRE_VIOLATION(h, "invariant 2 (large-folio");
  }
  SECTION("ENTIRELY_MAPPED set on a PTE-mapped folio") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->nr_pages_mapped |= ENTIRELY_MAPPED;
    REQUIRE_VIOLATION(h, "invariant 2 (large-folio");
  }
  SECTION("MM-id slot counts more mappings than its mm has") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->mm_id_mapcount[0] += 1;
    REQUIRE_VIOLATION(h, "invariant 2 (MM-id");
  }
  SECTION("free MM-id slot with a mapcount") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->mm_id_mapcount[1] = 0;
    REQUIRE_VIOLATION(h, "invariant 2 (MM-id");
  }
  SECTION("two mms map the folio but SHARED is clear") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    task_struct* c = h.proc("c");
    vm_area_struct* cv = h.add_vma(c->mm, VA, 4 * PMD_SIZE, 2, 1);
    h.share(f, p->mm, c->mm, cv, VA);
    REQUIRE_CONSISTENT(h);
    f->mm_ids &= ~FOLIO_MM_IDS_SHARED_BIT;
    REQUIRE_VIOLATION(h, "invariant 2 (MM-id");
  }
  SECTION("SHARED set spuriously is allowed; clear without an owning slot is not") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
    REQUIRE_CONSISTENT(h);
    f->mm_ids &= ~FOLIO_MM_IDS_SHARED_BIT;
    f->mm_id[0] = MM_ID_DUMMY;
    f->mm_id_mapcount[0] = -1;
    REQUIRE_VIOLATION(h, "invariant 2 (MM-id");
  }
  SECTION("both slots hold the same mm") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->mm_id_mapcount[0] = 7;
    f->mm_id[1] = f->mm_id[0];
    f->mm_id_mapcount[1] = 7;
    f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
    REQUIRE_VIOLATION(h, "invariant 2 (MM-id");
  }
}

TEST_CASE("invariant 3: refcount, freed pages, leaks", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  SECTION("an extra reference nobody holds") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    f->refcount = 2;
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
  }
  SECTION("refcount below mapcount") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    f->refcount = 15;
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
  }
  SECTION("a folio in the LRU batch without the batch's reference") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    h.k.folio_add_lru_vma(f, v);
    f->refcount = 1;
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
  }
  SECTION("an unmapped folio in the LRU batch with a stale reference") {
    folio* f = h.k.folio_alloc(0, true);
    f->flags |= PG_anon;
    h.k.folio_add_lru_vma(f, v);  // refcount 2: the allocation's and the batch's
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
    folio_ref_sub(f, 1);  // the allocation's reference dropped: only the batch holds it
    REQUIRE_CONSISTENT(h);
  }
  SECTION("a tail page with a reference") {
    folio* f = h.map_new(p->mm, v, VA, 2);
    f[1].refcount = 1;
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
  }
  SECTION("a PTE maps a freed page") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    f->mapcount = 0;
    f->refcount = 0;
    h.k.free_folio(f);
    REQUIRE_VIOLATION(h, "invariant 3 (freed pages)");
  }
  SECTION("a free block with a reference") {
    folio* f = h.k.folio_alloc(0, false);
    f->refcount = 0;
    h.k.free_folio(f);
    page* head = f;  // the head of the free block f merged into: tails carry no flags
    while (!(head->flags & PG_buddy)) --head;
    head->refcount = 1;
    REQUIRE_VIOLATION(h, "invariant 3 (freed pages)");
  }
  SECTION("a folio nothing maps or holds (leak)") {
    folio* f = h.k.folio_alloc(2, false);
    REQUIRE(f != nullptr);
    REQUIRE_VIOLATION(h, "invariant 3 (no leaked pages)");
    REQUIRE_VIOLATION(h, fmt::format("pfn {:#x}", h.k.page_to_pfn(f)));
  }
}

TEST_CASE("invariant 4: writable anon mapping => PageAnonExclusive", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  SECTION("PTE") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    ClearPageAnonExclusive(f);
    REQUIRE_VIOLATION(h, "invariant 4 (writable");
  }
  SECTION("one PTE of a large folio") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    ClearPageAnonExclusive(f + 9);
    REQUIRE_VIOLATION(h, "invariant 4 (writable");
  }
  SECTION("PMD: the head page") {
    folio* f = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    ClearPageAnonExclusive(f);
    REQUIRE_VIOLATION(h, "invariant 4 (writable");
  }
  SECTION("!PAE and read-only is fine") {
    folio* f = h.map_new(p->mm, v, VA, 0, false);
    ClearPageAnonExclusive(f);
    REQUIRE_CONSISTENT(h);
  }
  SECTION("the zero page mapped writable") {
    h.map_zero(p->mm, VA);
    pte_t* pte = h.k.find_pte(p->mm, VA);
    *pte = h.k.arch().pte_mkwrite_novma(*pte);
    REQUIRE_VIOLATION(h, "invariant 4 (zero page");
  }
}

TEST_CASE("invariant 5: PageAnonExclusive => one mapping", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  task_struct* c = h.proc("c");
  vm_area_struct* cv = h.add_vma(c->mm, VA, 4 * PMD_SIZE, 2, 1);
  SECTION("small page shared read-only but still PAE") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    h.share(f, p->mm, c->mm, cv, VA);
    SetPageAnonExclusive(f);
    REQUIRE_VIOLATION(h, "invariant 5 (");
  }
  SECTION("one page of a shared large folio still PAE") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    h.share(f, p->mm, c->mm, cv, VA);
    SetPageAnonExclusive(f + 15);
    REQUIRE_VIOLATION(h, "invariant 5 (");
  }
  SECTION("PMD-mapped PAE head mapped by two PMDs") {
    folio* f = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    h.share_pmd(f, p->mm, c->mm, cv, VA + PMD_SIZE);
    SetPageAnonExclusive(f);
    REQUIRE_VIOLATION(h, "invariant 5 (");
  }
  SECTION("one page mapped twice in one mm") {
    folio* f = h.map_new(p->mm, v, VA, 0, false);
    ClearPageAnonExclusive(f);
    *h.pte_slot(p->mm, VA + PAGE_SIZE) = h.mkpte(h.k.page_to_pfn(f), false);
    f->mapcount = 2;
    f->refcount = 2;
    add_mm_counter(p->mm, MM_ANONPAGES, 1);
    REQUIRE_VIOLATION(h, "invariant 5 (");
  }
}

TEST_CASE("invariant 6: a page shared after fork is read-only everywhere", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  task_struct* c = h.proc("c");
  vm_area_struct* cv = h.add_vma(c->mm, VA, 4 * PMD_SIZE, 2, 1);
  SECTION("parent PTE left writable (wrprotect forgotten)") {
    folio* f = h.map_new(p->mm, v, VA, 4);
    h.share(f, p->mm, c->mm, cv, VA);
    pte_t* pte = h.k.find_pte(p->mm, VA + 3 * PAGE_SIZE);
    *pte = h.k.arch().pte_mkwrite_novma(*pte);
    REQUIRE_VIOLATION(h, "invariant 6 (");
  }
  SECTION("child PMD writable") {
    folio* f = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    h.share_pmd(f, p->mm, c->mm, cv, VA + PMD_SIZE);
    pmd_t* pmd = h.k.mm_find_pmd(c->mm, VA + PMD_SIZE);
    *pmd = h.k.arch().pmd_mkwrite_novma(*pmd);
    REQUIRE_VIOLATION(h, "invariant 6 (");
  }
}

TEST_CASE("invariant 7: RSS and pgtables_bytes", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  h.map_new(p->mm, v, VA, 4);
  h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
  h.map_zero(p->mm, VA + 100 * PAGE_SIZE);
  REQUIRE(get_mm_counter(p->mm, MM_ANONPAGES) == 16 + 512);
  REQUIRE_CONSISTENT(h);
  SECTION("MM_ANONPAGES off by one") {
    add_mm_counter(p->mm, MM_ANONPAGES, 1);
    REQUIRE_VIOLATION(h, "invariant 7 (RSS)");
  }
  SECTION("a file RSS counter") {
    add_mm_counter(p->mm, MM_FILEPAGES, 1);
    REQUIRE_VIOLATION(h, "invariant 7 (RSS)");
  }
  SECTION("pgtables_bytes without the deposited table") {
    p->mm->pgtables_bytes -= PAGE_SIZE;
    REQUIRE_VIOLATION(h, "invariant 7 (pgtables_bytes)");
  }
}

TEST_CASE("invariant 8: TLB coherence", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  folio* rw = h.map_new(p->mm, v, VA, 0);
  folio* ro = h.map_new(p->mm, v, VA + PAGE_SIZE, 0, false);
  folio* thp = h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
  std::vector<Kernel::CachedTranslation> tlb;
  h.k.set_tlb_enumerator([&](const std::function<void(const Kernel::CachedTranslation&)>& fn) {
    for (auto& t : tlb) fn(t);
  });
  const uint16_t asid = uint16_t(p->mm->id);
  auto pfn = [&](folio* f) { return h.k.page_to_pfn(f); };
  // CPUs 0 and 1 run the mm (a CPU that does not, or runs it lazily with its generation behind,
  // flushes before it uses the entries: they are not checked; the last section).
  h.k.arch().switch_mm(0, p->mm);
  h.k.arch().switch_mm(1, p->mm);
  // Coherent: exact entries, a stale read-only entry of a writable PTE, a 2M entry and a 4K entry
  // inside the THP.
  tlb = {{0, asid, VA, PAGE_SIZE, pfn(rw), true},
         {1, asid, VA, PAGE_SIZE, pfn(rw), false},
         {0, asid, VA + PAGE_SIZE, PAGE_SIZE, pfn(ro), false},
         {0, asid, VA + PMD_SIZE, PMD_SIZE, pfn(thp), true},
         {1, asid, VA + PMD_SIZE + 5 * PAGE_SIZE, PAGE_SIZE, pfn(thp) + 5, false}};
  REQUIRE_CONSISTENT(h);
  SECTION("writable entry for a read-only PTE") {
    tlb.push_back({0, asid, VA + PAGE_SIZE, PAGE_SIZE, pfn(ro), true});
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("another PFN") {
    tlb.push_back({0, asid, VA + PAGE_SIZE, PAGE_SIZE, pfn(rw), false});
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("the PTE is gone (no flush after the clear)") {
    tlb.push_back({0, asid, VA + 2 * PAGE_SIZE, PAGE_SIZE, pfn(ro) + 1, false});
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("a 2M entry whose PFNs do not match") {
    tlb.push_back({0, asid, VA + PMD_SIZE, PMD_SIZE, pfn(thp) + 512, false});
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("an entry of an mm that does not exist") {
    tlb.push_back({0, uint16_t(asid + 100), VA, PAGE_SIZE, pfn(rw), false});
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("writable 2M entry after the PMD was write-protected") {
    pmd_t* pmd = h.k.mm_find_pmd(p->mm, VA + PMD_SIZE);
    *pmd = h.k.arch().pmd_wrprotect(*pmd);
    REQUIRE_VIOLATION(h, "invariant 8 (");
  }
  SECTION("an x86 CPU in lazy TLB mode with its generation behind is not checked, one current is") {
    if (h.k.isa() == mmusim::pg::Isa::x86_64) {
      tlb.push_back({1, asid, VA + PAGE_SIZE, PAGE_SIZE, pfn(ro), true});  // wrong on CPU 1
      REQUIRE_VIOLATION(h, "invariant 8 (");
      h.k.arch().enter_lazy_tlb(1);
      REQUIRE_VIOLATION(h, "invariant 8 (");  // lazy, but nothing flushed since: still current
      ++p->mm->tlb_gen;                       // a flush CPU 1 was left out of
      REQUIRE_CONSISTENT(h);
    }
  }
}

TEST_CASE("invariant 10: arm64 contpte blocks", "[invariants][arm64]") {
  Hand h(mmusim::pg::Isa::arm64);
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  folio* f = h.map_new(p->mm, v, VA, 4);
  pte_t* ptep = h.k.find_pte(p->mm, VA);
  for (unsigned i = 0; i < CONT_PTES; ++i) ptep[i].val |= mmusim::pg::arm64::CONT;
  // AF/dirty may differ inside a block.
  ptep[3] = h.k.arch().pte_mkold(ptep[3]);
  ptep[4] = h.k.arch().pte_mkclean(ptep[4]);
  REQUIRE_CONSISTENT(h);
  SECTION("one entry without PTE_CONT") {
    ptep[7].val &= ~mmusim::pg::arm64::CONT;
    REQUIRE_VIOLATION(h, "invariant 10 (");
  }
  SECTION("one entry with another permission") {
    ptep[7] = h.k.arch().pte_wrprotect(ptep[7]);
    ClearPageAnonExclusive(f + 7);  // keep invariant 4 out of the way
    REQUIRE_VIOLATION(h, "invariant 10 (");
  }
  SECTION("non-consecutive PFNs") {
    // Entries 5 and 6 swapped: every page is still mapped once, the block is not consecutive.
    std::swap(ptep[5], ptep[6]);
    REQUIRE_VIOLATION(h, "invariant 10 (");
  }
  SECTION("an invalid entry inside a block") {
    // Unmap entry 9 properly (rmap and RSS), leaving a hole in the PTE_CONT block.
    ptep[9] = pte_t{0};
    f[9].mapcount = 0;
    f->large_mapcount -= 1;
    f->nr_pages_mapped -= 1;
    f->refcount -= 1;
    f->mm_id_mapcount[0] -= 1;
    add_mm_counter(p->mm, MM_ANONPAGES, -1);
    REQUIRE_VIOLATION(h, "invariant 10 (");
  }
}

TEST_CASE("invariants: page-table structure, VMAs, rmap", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  SECTION("a table page without PG_table") {
    h.map_new(p->mm, v, VA, 0);
    pmd_t* pmd = h.k.mm_find_pmd(p->mm, VA);
    h.k.pfn_to_page(h.k.arch().table_pfn(pmd->val))->flags &= ~PG_table;
    REQUIRE_VIOLATION(h, "PT (page-table");
  }
  SECTION("a huge PMD without a deposited table") {
    h.map_new_pmd(p->mm, v, VA + PMD_SIZE);
    pmd_t* pmd = h.k.mm_find_pmd(p->mm, VA + PMD_SIZE);
    pfn_t t = h.k.pgtable_trans_huge_withdraw(p->mm, pmd);
    p->mm->pgtables_bytes -= PAGE_SIZE;
    h.k.pte_free(p->mm, t);
    REQUIRE_VIOLATION(h, "PT (page-table");
  }
  SECTION("a page-table page linked twice") {
    h.map_new(p->mm, v, VA, 0);
    pmd_t* pmd = h.k.mm_find_pmd(p->mm, VA);
    pmd[3] = *pmd;  // the same PTE table for another 2M
    REQUIRE_VIOLATION(h, "PT (page-table");
  }
  SECTION("a PTE outside every VMA") {
    h.map_new(p->mm, v, VA + 4 * PMD_SIZE - PAGE_SIZE, 0);
    v->vm_end -= PAGE_SIZE;  // shrink without zapping
    auto node = p->mm->mm_mt.extract(VA + 4 * PMD_SIZE);
    node.key() = v->vm_end;
    p->mm->mm_mt.insert(std::move(node));
    REQUIRE_VIOLATION(h, "VMA (");
  }
  SECTION("a writable PTE in a read-only VMA (mprotect without wrprotect)") {
    h.map_new(p->mm, v, VA, 0);
    v->vm_flags &= ~VM_WRITE;
    REQUIRE_VIOLATION(h, "VMA (");
  }
  SECTION("folio->anon_vma of another process tree") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    task_struct* o = h.proc("other");
    h.add_vma(o->mm, VA, PMD_SIZE, 77);
    f->anon_vma = 77;
    REQUIRE_VIOLATION(h, "RMAP (");
  }
  SECTION("folio->index does not match the address") {
    folio* f = h.map_new(p->mm, v, VA + PAGE_SIZE, 0);
    f->index += 1;
    REQUIRE_VIOLATION(h, "RMAP (");
  }
  SECTION("a mapped folio that is not anon") {
    folio* f = h.map_new(p->mm, v, VA, 0);
    f->flags &= ~PG_anon;
    REQUIRE_VIOLATION(h, "RMAP (");
  }
}

TEST_CASE("invariants: task and mm state", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  REQUIRE_CONSISTENT(h);
  SECTION("a zombie that kept its mm") {
    p->state = TaskState::Zombie;
    REQUIRE_VIOLATION(h, "TASK (");
  }
  SECTION("a task whose mm was torn down") {
    task_struct* q = h.proc("q");
    q->mm = p->mm;
    const uint64_t pgd = p->mm->pgd;
    p->mm->pgd = 0;  // what exit_mmap leaves
    REQUIRE_VIOLATION(h, "TASK (");
    p->mm->pgd = pgd;
  }
}

TEST_CASE("invariants: no lock held at a quiescent point", "[invariants]") {
  Hand h;
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  folio* f = h.map_new(p->mm, v, VA, 0);
  REQUIRE_CONSISTENT(h);
  SECTION("a split PTE lock") {
    uint32_t* ptl = nullptr;
    h.k.pte_offset_map_lock(p->mm, h.k.mm_find_pmd(p->mm, VA), VA, &ptl);
    REQUIRE_VIOLATION(h, "LOCK (");
    h.k.spin_unlock(ptl);
    REQUIRE_CONSISTENT(h);
  }
  SECTION("a PMD lock") {
    uint32_t* ptl = h.k.pmd_lock(p->mm, h.k.mm_find_pmd(p->mm, VA));
    REQUIRE_VIOLATION(h, "LOCK (");
    h.k.spin_unlock(ptl);
  }
  SECTION("mmap_lock read-held") {
    h.k.mmap_read_lock(p->mm);
    REQUIRE_VIOLATION(h, "LOCK (");
    h.k.mmap_read_unlock(p->mm);
    REQUIRE_CONSISTENT(h);
  }
  SECTION("a VMA write-locked inside an open mmap write section") {
    h.k.mmap_write_lock(p->mm);
    h.k.vma_start_write(v);
    p->mm->mmap_lock.up_write();  // the lock released without closing the section
    REQUIRE_VIOLATION(h, "LOCK (");
  }
  SECTION("a VMA read lock") {
    REQUIRE(h.k.vma_start_read(v));
    REQUIRE_VIOLATION(h, "LOCK (");
    h.k.vma_end_read(v);
  }
  SECTION("a folio lock") {
    f->flags |= PG_locked;
    REQUIRE_VIOLATION(h, "LOCK (");
  }
}

TEST_CASE("invariants: a pass over 1 GiB of 4K pages takes well under a second", "[invariants][perf]") {
  Hand h([](KernelParams& kp) { kp.phys_mem = 2ull << 30; });
  task_struct* p = h.proc("p");
  const uint64_t size = 1ull << 30;
  vm_area_struct* v = h.add_vma(p->mm, VA, size, 1);
  for (uint64_t off = 0; off < size; off += PAGE_SIZE) h.map_new(p->mm, v, VA + off, 0);
  REQUIRE(get_mm_counter(p->mm, MM_ANONPAGES) == int64_t(size / PAGE_SIZE));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_CONSISTENT(h);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("one invariant pass over 262144 PTEs: " << s * 1e3 << " ms");
  REQUIRE(s < 0.5);
}

TEST_CASE("kernel.check_local: the page table and folios at the faulting address, not the rest", "[invariants]") {
  Hand h([](KernelParams& kp) { kp.check_local = true; });
  task_struct* p = h.proc("p");
  vm_area_struct* v = h.add_vma(p->mm, VA, 4 * PMD_SIZE, 1);
  folio* f = h.map_new(p->mm, v, VA, 4);        // a 64K folio at VA
  folio* g = h.map_new(p->mm, v, VA + PMD_SIZE, 0);  // a page in the next PTE table
  auto local = [&](uint64_t addr) -> std::string {
    try {
      h.k.check_local("hand-made fault", p->mm, addr);
    } catch (const mmusim::InternalError& e) {
      return e.what();
    }
    return "(no violation)";
  };
  REQUIRE(local(VA) == "(no violation)");
  REQUIRE(local(VA + PMD_SIZE) == "(no violation)");
  SECTION("refcount below mapcount, in the folio the fault's table maps") {
    f->refcount = 15;
    REQUIRE_THAT(local(VA + 3 * PAGE_SIZE), Contains("invariant 3 (refcount)"));
    // Another table's fault does not see it; the whole check does.
    REQUIRE(local(VA + PMD_SIZE) == "(no violation)");
    REQUIRE_VIOLATION(h, "invariant 3 (refcount)");
  }
  SECTION("a large folio's large_mapcount off") {
    f->large_mapcount += 1;
    REQUIRE_THAT(local(VA), Contains("invariant 2"));
  }
  SECTION("a writable PTE in a VMA without VM_WRITE") {
    v->vm_flags &= ~VM_WRITE;
    REQUIRE_THAT(local(VA + PMD_SIZE), Contains("without VM_WRITE"));
  }
  SECTION("off unless kernel.check_local") {
    g->refcount = 0;
    h.k.mutable_params().check_local = false;
    REQUIRE(local(VA + PMD_SIZE) == "(no violation)");
  }
}
