// SPDX-License-Identifier: GPL-2.0-only
// arm64 contpte (arch/arm64/mm/contpte.c and the public wrappers of asm/pgtable.h): when blocks
// are created directly, folded, unfolded or kept, how many contpte_convert()s and TLBIs that
// costs, and the contpte invariant (PORTMAP §3.3 item 10) after every operation.
#include <catch2/catch.hpp>

#include "arm64_env.hpp"

using namespace kmm;
using namespace kmm::arm64b;
using arm64test::Env;
using arm64test::HwOp;

namespace {
// Rewrites the metadata of folio `f` so that it becomes folios of 2^order pages each (the pages
// stay allocated; only the folio boundaries change), to build mappings the allocator would not
// hand out in this order.
void split_folio_for_test(folio* f, unsigned order) {
  const unsigned long nr = folio_nr_pages(f);
  const int refs = f->refcount;
  for (unsigned long i = 0; i < nr; ++i) {
    page* p = f + i;
    const unsigned long head = i & ~((1ul << order) - 1);
    p->head_off = uint32_t(i - head);
    if (i == head) {
      p->order = uint8_t(order);
      p->refcount = refs;
      if (order) p->flags |= PG_head;
      else p->flags &= ~PG_head;
    }
  }
}

// A 64K folio mapped at PTE index `idx` (block aligned) by one set_ptes(16), as
// do_anonymous_page() does.
folio* map_block(Env& e, unsigned idx) {
  folio* f = e.folio(4);
  e.a().set_ptes(&e.mm, e.addr(idx), e.ptep(idx), e.anon_pte(e.pfn(f)), CONT_PTES);
  return f;
}
}  // namespace

TEST_CASE("arm64 contpte: set_ptes of 16 aligned PTEs of one folio makes a block without a convert", "[arm64]") {
  Env e;
  auto& a = e.a();
  folio* f = map_block(e, 16);
  e.check();
  CHECK(e.cont_count(16, 16) == 16);
  CHECK(e.cont_count(0, 16) == 0);
  for (unsigned i = 0; i < 16; ++i) {
    CHECK(a.pte_pfn(*e.ptep(16 + i)) == e.pfn(f) + i);
    CHECK(a.pte_write(*e.ptep(16 + i)));
  }
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());
  CHECK(e.k->take_cost()[Cost::pte_write] == 16);
  // pte_batch_hint: the PTEs left in the block.
  CHECK(a.pte_batch_hint(e.ptep(16), a.ptep_get(e.ptep(16))) == 16);
  CHECK(a.pte_batch_hint(e.ptep(21), a.ptep_get(e.ptep(21))) == 11);
  CHECK(a.pte_batch_hint(e.ptep(31), a.ptep_get(e.ptep(31))) == 1);
}

TEST_CASE("arm64 contpte: contpte_set_ptes marks only the aligned, fully covered 64K sub-ranges", "[arm64]") {
  Env e;
  auto& a = e.a();
  SECTION("a 128K folio at an aligned address: two blocks") {
    folio* f = e.folio(5);
    a.set_ptes(&e.mm, e.addr(32), e.ptep(32), e.anon_pte(e.pfn(f)), 32);
    CHECK(e.cont_count(32, 32) == 32);
  }
  SECTION("20 PTEs: one whole block and a tail") {
    folio* f = e.folio(5);
    a.set_ptes(&e.mm, e.addr(0), e.ptep(0), e.anon_pte(e.pfn(f)), 20);
    CHECK(e.cont_count(0, 16) == 16);
    CHECK(e.cont_count(16, 4) == 0);
  }
  SECTION("VA not block aligned") {
    folio* f = e.folio(4);
    a.set_ptes(&e.mm, e.addr(2), e.ptep(2), e.anon_pte(e.pfn(f)), 16);
    CHECK(e.cont_count(0, 32) == 0);
  }
  SECTION("PFN not block aligned") {
    folio* f = e.folio(5);
    a.set_ptes(&e.mm, e.addr(0), e.ptep(0), e.anon_pte(e.pfn(f) + 8), 16);
    CHECK(e.cont_count(0, 16) == 0);
  }
  e.check();
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());
}

TEST_CASE("arm64 contpte: ptep_get gathers AF and dirty over the block", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 0);
  // Make the block old and clean in place (as after fork's child mkold + a clean), then let the
  // "hardware" set AF on one sub-PTE only.
  for (unsigned i = 0; i < 16; ++i) *e.ptep(i) = a.pte_mkold(a.pte_mkclean(*e.ptep(i)));
  CHECK_FALSE(a.pte_young(a.ptep_get(e.ptep(3))));
  CHECK_FALSE(a.pte_dirty(a.ptep_get(e.ptep(3))));
  e.ptep(9)->val |= PTE_AF;
  e.ptep(12)->val &= ~PTE_RDONLY;  // HAFDBS dirtied sub-PTE 12
  pte_t g = a.ptep_get(e.ptep(3));
  CHECK(a.pte_young(g));
  CHECK(a.pte_dirty(g));
  CHECK(a.pte_pfn(g) == a.pte_pfn(*e.ptep(3)));
  CHECK(a.ptep_get_lockless(e.ptep(3)).val == g.val);
  CHECK_FALSE(a.pte_young(*e.ptep(3)));  // the raw entry is unchanged
  e.check();
}

TEST_CASE("arm64 contpte: set_pte_at of the 16th PTE folds the block (one convert, BBM)", "[arm64]") {
  Env e;
  auto& a = e.a();
  folio* f = e.folio(4);
  const pte_t pte = e.anon_pte(e.pfn(f));
  for (unsigned i = 0; i < 15; ++i) {
    a.set_pte_at(&e.mm, e.addr(i), e.ptep(i), a.pte_advance_pfn(pte, i));
    e.check();
  }
  CHECK(e.count("kernel.contpte_convert") == 0);
  a.set_pte_at(&e.mm, e.addr(15), e.ptep(15), a.pte_advance_pfn(pte, 15));
  e.check();
  CHECK(e.cont_count(0, 16) == 16);
  CHECK(e.count("kernel.contpte_convert") == 1);
  CHECK(e.count("kernel.contpte_fold") == 1);
  CHECK(e.count("kernel.contpte_unfold") == 0);
  // __flush_tlb_range over 64K: DSB ISHST, 16 x TLBI VALE1IS, DSB ISH.
  REQUIRE(e.hw.ops.size() == 18);
  CHECK(e.hw.ops.front().kind == HwOp::Dsb);
  CHECK(e.hw.ops.back().kind == HwOp::Dsb);
  CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 16);
  for (unsigned i = 0; i < 16; ++i) {
    CHECK(e.hw.ops[1 + i].va == e.addr(i));
    CHECK(e.hw.ops[1 + i].asid == 7);
  }
  CostAccount c = e.k->take_cost();
  CHECK(c[Cost::pte_write] == 15 + 1 + 16 + 16);  // 16 sets, 16 clears, 16 sets
  CHECK(c[Cost::tlbi_bcast] == 16);
  CHECK(c[Cost::dsb_local] == 1);
  CHECK(c[Cost::dsb_bcast] == 1);
}

TEST_CASE("arm64 contpte: no fold across folios, of a partial folio or with differing prot", "[arm64]") {
  Env e;
  auto& a = e.a();
  SECTION("16 order-0 folios at consecutive PFNs") {
    folio* big = e.folio(4);
    const pfn_t base = e.pfn(big);
    split_folio_for_test(big, 0);
    REQUIRE_FALSE(folio_test_large(e.k->pfn_to_page(base + 15)));
    for (unsigned i = 0; i < 16; ++i) a.set_pte_at(&e.mm, e.addr(i), e.ptep(i), e.anon_pte(base + i));
  }
  SECTION("one PTE read-only") {
    folio* f = e.folio(4);
    for (unsigned i = 0; i < 16; ++i) {
      pte_t p = e.anon_pte(e.pfn(f) + i);
      if (i == 4) p = a.pte_wrprotect(p);
      a.set_pte_at(&e.mm, e.addr(i), e.ptep(i), p);
    }
  }
  SECTION("a PFN out of order") {
    folio* f = e.folio(4);
    for (unsigned i = 0; i < 16; ++i)
      a.set_pte_at(&e.mm, e.addr(i), e.ptep(i), e.anon_pte(e.pfn(f) + (i == 2 ? 3 : i == 3 ? 2 : i)));
  }
  SECTION("a hole") {
    folio* f = e.folio(4);
    for (unsigned i = 1; i < 16; ++i) a.set_pte_at(&e.mm, e.addr(i), e.ptep(i), e.anon_pte(e.pfn(f) + i));
  }
  e.check();
  CHECK(e.cont_count(0, 16) == 0);
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());
}

TEST_CASE("arm64 contpte: a write-bit change on one PTE unfolds the block", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 32);
  a.wrprotect_ptes(&e.mm, e.addr(32), e.ptep(32), 16);  // as fork leaves the parent
  e.check();
  CHECK(e.cont_count(32, 16) == 16);
  e.hw.clear();
  e.k->take_cost();

  // wp_page_reuse(): entry = maybe_mkwrite(pte_mkdirty(pte_mkyoung(orig_pte))) for page 37.
  pte_t orig = a.ptep_get(e.ptep(37));
  pte_t entry = a.maybe_mkwrite(a.pte_mkdirty(a.pte_mkyoung(orig)), &e.vma);
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(37), e.ptep(37), entry, 1) == 1);
  e.check();
  CHECK(e.count("kernel.contpte_convert") == 1);
  CHECK(e.count("kernel.contpte_unfold") == 1);
  CHECK(e.cont_count(32, 16) == 0);
  // 16 broadcast TLBIs for the unfold (over the block), then __ptep_set_access_flags' flush_tlb_page.
  CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 17);
  CHECK(e.hw.all_tlbis() == 17);
  CHECK(e.hw.dsbs(true) == 4);
  CHECK(e.hw.ops[e.hw.ops.size() - 2].va == e.addr(37));
  CHECK(e.count("kernel.tlb_flush_page") == 1);
  CostAccount c = e.k->take_cost();
  CHECK(c[Cost::tlbi_bcast] == 17);
  CHECK(c[Cost::dsb_bcast] == 2);
  // Only the faulting page is writable (hardware-dirty); the others stay read-only, same PFNs.
  for (unsigned i = 32; i < 48; ++i) {
    pte_t p = *e.ptep(i);
    CHECK(a.pte_valid(p));
    CHECK(a.pte_write(p) == (i == 37));
    CHECK(a.pte_rdonly(p) == (i != 37));
  }
  // A later fault on a sibling is a plain per-PTE upgrade: no more converts, one TLBI.
  e.hw.clear();
  pte_t o2 = a.ptep_get(e.ptep(38));
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(38), e.ptep(38), a.maybe_mkwrite(a.pte_mkdirty(o2), &e.vma), 1) == 1);
  CHECK(e.count("kernel.contpte_convert") == 1);
  CHECK(e.hw.all_tlbis() == 1);
  e.check();
}

TEST_CASE("arm64 contpte: AF/dirty-only changes update the whole block without unfolding", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 0);
  // The block old (as fork leaves the child: pte_mkold) and read-only.
  a.wrprotect_ptes(&e.mm, e.addr(0), e.ptep(0), 16);
  for (unsigned i = 0; i < 16; ++i) *e.ptep(i) = a.pte_mkold(*e.ptep(i));
  e.check();
  e.hw.clear();
  // A read fault (no hardware AF): handle_pte_fault's entry = pte_mkyoung(orig), dirty = 0.
  pte_t entry = a.pte_mkyoung(a.ptep_get(e.ptep(5)));
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(5), e.ptep(5), entry, 0) == 1);
  e.check();
  CHECK(e.cont_count(0, 16) == 16);
  for (unsigned i = 0; i < 16; ++i) CHECK(a.pte_young(*e.ptep(i)));
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());  // dirty == 0: no flush
  // Same again: all 16 sub-PTEs already match -> no-op (0), nothing done.
  e.k->take_cost();
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(9), e.ptep(9), a.pte_mkyoung(a.ptep_get(e.ptep(9))), 0) == 0);
  CHECK(e.k->take_cost()[Cost::pte_write] == 0);
  // A dirty-bit change with the write bit unchanged (read-only, sw dirty) and dirty=1: one range
  // flush of the 64K block, still no convert.
  for (unsigned i = 0; i < 16; ++i) *e.ptep(i) = a.pte_mkclean(*e.ptep(i));
  pte_t d = a.pte_mkdirty(a.ptep_get(e.ptep(2)));
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(2), e.ptep(2), d, 1) == 1);
  e.check();
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 16);
  for (unsigned i = 0; i < 16; ++i) CHECK(a.pte_sw_dirty(*e.ptep(i)));
}

TEST_CASE("arm64 contpte: contpte_wrprotect_ptes keeps whole blocks and issues no TLBI", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 0);
  map_block(e, 16);
  e.k->take_cost();
  a.wrprotect_ptes(&e.mm, e.addr(0), e.ptep(0), 32);
  e.check();
  CHECK(e.cont_count(0, 32) == 32);
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());
  CHECK(e.k->take_cost()[Cost::pte_write] == 32);
  for (unsigned i = 0; i < 32; ++i) {
    pte_t p = *e.ptep(i);
    CHECK_FALSE(a.pte_write(p));
    CHECK(a.pte_rdonly(p));
    CHECK(a.pte_sw_dirty(p));  // the hardware dirtiness moved to PTE_DIRTY
  }
}

TEST_CASE("arm64 contpte: batched operations on the last block of a table", "[arm64]") {
  // ptep + nr is then one past the table: contpte_try_unfold_partial must still see it aligned.
  Env e;
  auto& a = e.a();
  map_block(e, 480);
  map_block(e, 496);
  a.wrprotect_ptes(&e.mm, e.addr(480), e.ptep(480), 32);
  CHECK(e.cont_count(480, 32) == 32);
  pte_t old = a.modify_prot_start_ptes(&e.vma, e.addr(496), e.ptep(496), 16);
  a.modify_prot_commit_ptes(&e.vma, e.addr(496), e.ptep(496), old, a.pte_mkwrite(old, &e.vma), 16);
  CHECK(e.cont_count(496, 16) == 16);
  a.clear_full_ptes(&e.mm, e.addr(480), e.ptep(480), 32, 1);
  CHECK(e.count("kernel.contpte_convert") == 0);
  // A range ending 4 PTEs before the end of the table cuts the last block.
  map_block(e, 496);
  a.wrprotect_ptes(&e.mm, e.addr(496), e.ptep(496), 12);
  CHECK(e.count("kernel.contpte_unfold") == 1);
  e.check();
}

TEST_CASE("arm64 contpte: partial wrprotect/clear/single-PTE clear unfold the touched blocks", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 0);
  map_block(e, 16);
  map_block(e, 32);
  SECTION("wrprotect_ptes of 8 PTEs at the start of a block") {
    a.wrprotect_ptes(&e.mm, e.addr(0), e.ptep(0), 8);
    CHECK(e.count("kernel.contpte_unfold") == 1);
    CHECK(e.cont_count(0, 16) == 0);
    for (unsigned i = 0; i < 16; ++i) CHECK(a.pte_write(*e.ptep(i)) == (i >= 8));
  }
  SECTION("wrprotect_ptes of 24 PTEs from the middle of block 0 to the middle of block 1") {
    a.wrprotect_ptes(&e.mm, e.addr(8), e.ptep(8), 16);
    CHECK(e.count("kernel.contpte_unfold") == 2);
    CHECK(e.cont_count(0, 32) == 0);
    CHECK(e.cont_count(32, 16) == 16);
  }
  SECTION("wrprotect of one PTE (ptep_set_wrprotect)") {
    a.ptep_set_wrprotect(&e.mm, e.addr(20), e.ptep(20));
    CHECK(e.count("kernel.contpte_unfold") == 1);
    CHECK(e.cont_count(16, 16) == 0);
    CHECK_FALSE(a.pte_write(*e.ptep(20)));
  }
  SECTION("clear_full_ptes of whole blocks keeps no unfold") {
    a.clear_full_ptes(&e.mm, e.addr(0), e.ptep(0), 32, 1);
    CHECK(e.count("kernel.contpte_convert") == 0);
    CHECK(e.hw.ops.empty());
    for (unsigned i = 0; i < 32; ++i) CHECK(pte_none(*e.ptep(i)));
    CHECK(e.cont_count(32, 16) == 16);
  }
  SECTION("clear_full_ptes of a tail of a block unfolds it first") {
    a.clear_full_ptes(&e.mm, e.addr(36), e.ptep(36), 12, 1);
    CHECK(e.count("kernel.contpte_unfold") == 1);
    for (unsigned i = 32; i < 36; ++i) CHECK(a.pte_valid(*e.ptep(i)));
    for (unsigned i = 36; i < 48; ++i) CHECK(pte_none(*e.ptep(i)));
  }
  SECTION("ptep_get_and_clear / ptep_clear_flush unfold (the 6.12 COW path)") {
    pte_t old = a.ptep_clear_flush(&e.vma, e.addr(17), e.ptep(17));
    CHECK(a.pte_pfn(old) == a.pte_pfn(*e.ptep(16)) + 1);
    CHECK_FALSE(a.pte_cont(old));
    CHECK(pte_none(*e.ptep(17)));
    CHECK(e.count("kernel.contpte_unfold") == 1);
    CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 17);  // unfold's 16 + flush_tlb_page
    CHECK(e.cont_count(16, 16) == 0);
  }
  SECTION("ptep_modify_prot_start (single PTE) unfolds, as 6.12's ptep_get_and_clear") {
    pte_t old = a.ptep_modify_prot_start(&e.vma, e.addr(40), e.ptep(40));
    CHECK(e.count("kernel.contpte_unfold") == 1);
    a.ptep_modify_prot_commit(&e.vma, e.addr(40), e.ptep(40), old, a.pte_mkwrite(old, &e.vma));
    CHECK(e.cont_count(32, 16) == 0);
  }
  SECTION("get_and_clear_full_ptes of one block returns the gathered young/dirty, no unfold") {
    for (unsigned i = 0; i < 16; ++i) *e.ptep(i) = a.pte_mkold(a.pte_mkclean(*e.ptep(i)));
    e.ptep(6)->val |= PTE_AF;
    e.ptep(11)->val |= PTE_DIRTY;
    pte_t g = a.get_and_clear_full_ptes(&e.mm, e.addr(0), e.ptep(0), 16, 0);
    CHECK(a.pte_young(g));
    CHECK(a.pte_dirty(g));
    CHECK(a.pte_cont(g));  // the raw first entry, PTE_CONT leaks through as in the kernel
    CHECK(e.count("kernel.contpte_convert") == 0);
  }
  e.check();
}

TEST_CASE("arm64 contpte: modify_prot_start_ptes + commit of a whole block keep it (the patch's batch)", "[arm64]") {
  Env e;
  auto& a = e.a();
  folio* f = map_block(e, 48);
  a.wrprotect_ptes(&e.mm, e.addr(48), e.ptep(48), 16);  // fork
  e.check();
  e.hw.clear();
  e.k->take_cost();

  // wp_reuse_large_anon_folio(): pte = modify_prot_start_ptes(nr); commit(pte_mkwrite(pte), nr).
  pte_t old = a.modify_prot_start_ptes(&e.vma, e.addr(48), e.ptep(48), 16);
  for (unsigned i = 48; i < 64; ++i) CHECK(pte_none(*e.ptep(i)));
  a.modify_prot_commit_ptes(&e.vma, e.addr(48), e.ptep(48), old, a.pte_mkwrite(old, &e.vma), 16);
  e.check();
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());  // no TLBI at all: stale read-only entries survive (PORTMAP §4.5 hazard)
  CHECK(e.cont_count(48, 16) == 16);
  for (unsigned i = 0; i < 16; ++i) {
    pte_t p = *e.ptep(48 + i);
    CHECK(a.pte_pfn(p) == e.pfn(f) + i);
    CHECK(a.pte_write(p));
    CHECK_FALSE(a.pte_rdonly(p));  // sw-dirty from before fork: hardware-writable at once
  }
  CostAccount c = e.k->take_cost();
  CHECK(c[Cost::pte_write] == 32);
  CHECK(c[Cost::tlbi_bcast] == 0);

  // Then wp_page_reuse() on the faulting PTE: every sub-PTE already matches -> 0, no convert.
  pte_t orig = a.ptep_get(e.ptep(50));
  pte_t entry = a.maybe_mkwrite(a.pte_mkdirty(a.pte_mkyoung(orig)), &e.vma);
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(50), e.ptep(50), entry, 1) == 0);
  CHECK(e.count("kernel.contpte_convert") == 0);
  CHECK(e.hw.ops.empty());
  e.check();
}

TEST_CASE("arm64 contpte: modify_prot_*_ptes of a range cutting blocks unfold only the cut blocks", "[arm64]") {
  Env e;
  auto& a = e.a();
  folio* f = e.folio(6);  // 256K: four blocks at PTE 64..127
  a.set_ptes(&e.mm, e.addr(64), e.ptep(64), e.anon_pte(e.pfn(f)), 64);
  a.wrprotect_ptes(&e.mm, e.addr(64), e.ptep(64), 64);
  e.check();
  // PTEs 72..107: cuts block 64 and block 96, covers block 80 whole.
  pte_t old = a.modify_prot_start_ptes(&e.vma, e.addr(72), e.ptep(72), 36);
  a.modify_prot_commit_ptes(&e.vma, e.addr(72), e.ptep(72), old, a.pte_mkwrite(old, &e.vma), 36);
  e.check();
  CHECK(e.count("kernel.contpte_unfold") == 2);
  CHECK(e.count("kernel.contpte_fold") == 0);
  CHECK(e.cont_count(64, 16) == 0);
  CHECK(e.cont_count(80, 16) == 16);
  CHECK(e.cont_count(96, 16) == 0);
  CHECK(e.cont_count(112, 16) == 16);
  for (unsigned i = 64; i < 128; ++i) CHECK(a.pte_write(*e.ptep(i)) == (i >= 72 && i < 108));
  CHECK(a.pte_pfn(*e.ptep(100)) == e.pfn(f) + 36);
}

TEST_CASE("arm64 contpte: __ptep_set_access_flags keeps the most permissive RDONLY", "[arm64]") {
  Env e;
  auto& a = e.a();
  folio* f = e.folio(0);
  // A writable-clean entry that HAFDBS already dirtied (RDONLY clear); the fault path asks for
  // writable-clean (RDONLY set) + young: RDONLY must stay clear.
  pte_t cur = a.pte_mkwrite_novma(a.pfn_pte(e.pfn(f), a.vm_get_page_prot(VM_READ | VM_WRITE)));
  cur.val &= ~PTE_RDONLY;
  cur = a.pte_mkold(cur);
  *e.ptep(100) = cur;
  pte_t entry = a.pte_mkyoung(pte_t{cur.val | PTE_RDONLY});
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(100), e.ptep(100), entry, 0) == 1);
  CHECK_FALSE(a.pte_rdonly(*e.ptep(100)));
  CHECK(a.pte_young(*e.ptep(100)));
  CHECK(e.hw.ops.empty());
  // Same value: 0, and no flush even with dirty = 1 (the spurious-fault case).
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(100), e.ptep(100), *e.ptep(100), 1) == 0);
  CHECK(e.hw.ops.empty());
  // A read-only -> writable+dirty upgrade flushes the page with a broadcast TLBI (6.12).
  *e.ptep(101) = a.pte_wrprotect(e.anon_pte(e.pfn(f)));
  pte_t up = a.pte_mkwrite_novma(a.pte_mkdirty(*e.ptep(101)));
  CHECK(a.ptep_set_access_flags(&e.vma, e.addr(101), e.ptep(101), up, 1) == 1);
  CHECK(a.pte_write(*e.ptep(101)));
  CHECK_FALSE(a.pte_rdonly(*e.ptep(101)));
  CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 1);
  CHECK(e.hw.ops[1].va == e.addr(101));
  // PMD: pmdp_set_access_flags is the same operation on the block entry.
  pmd_t pmd = a.pmd_wrprotect(a.mk_huge_pmd(0x400, a.vm_get_page_prot(VM_READ | VM_WRITE)));
  pmd_t want = a.pmd_mkwrite_novma(a.pmd_mkdirty(pmd));
  CHECK(a.pmdp_set_access_flags(&e.vma, Env::kBase, &pmd, want, 1) == 1);
  CHECK(a.pmd_write(pmd));
  CHECK(a.pmd_trans_huge(pmd));
  CHECK(e.hw.tlbis(TlbiOp::VALE1, true) == 2);
}

TEST_CASE("arm64 contpte: the invariant helper catches broken blocks", "[arm64]") {
  Env e;
  auto& a = e.a();
  map_block(e, 0);
  std::string why;
  REQUIRE(arm64_contpte_block_consistent(*e.k, e.ptep(0), &why));
  SECTION("one entry without PTE_CONT") { e.ptep(3)->val &= ~PTE_CONT; }
  SECTION("one entry invalid") { *e.ptep(15) = pte_t{0}; }
  SECTION("a PFN gap") { *e.ptep(7) = a.pte_advance_pfn(*e.ptep(7), 1); }
  SECTION("a different permission") { *e.ptep(9) = a.pte_wrprotect(*e.ptep(9)); }
  SECTION("a lone PTE_CONT outside a block") {
    folio* f = e.folio(0);
    *e.ptep(40) = a.pte_mkcont(e.anon_pte(e.pfn(f)));
    CHECK_FALSE(arm64_contpte_block_consistent(*e.k, e.ptep(32), &why));
  }
  SECTION("two folios") {
    folio* f1 = e.folio(4);
    split_folio_for_test(f1, 3);
    REQUIRE(page_folio(f1 + 8) == f1 + 8);
    a.set_ptes(&e.mm, e.addr(16), e.ptep(16), e.anon_pte(e.pfn(f1)), 16);  // contract broken on purpose
    CHECK_FALSE(arm64_contpte_block_consistent(*e.k, e.ptep(16), &why));
  }
  CHECK_FALSE(arm64_contpte_table_consistent(*e.k, e.table, &why));
  CHECK_FALSE(why.empty());
  // Hardware AF/dirty differences inside a block are fine.
  Env e2;
  map_block(e2, 0);
  e2.ptep(4)->val &= ~PTE_AF;
  e2.ptep(5)->val |= PTE_RDONLY;  // clean
  CHECK(arm64_contpte_block_consistent(*e2.k, e2.ptep(0)));
}
