// SPDX-License-Identifier: GPL-2.0-only
// The rules the translation path applies on top of the TLBs and the walker, as the cores run them
// (TranslationPath, built by CoreMmu from the platform presets: tests/models/mmu_rig.hpp):
//  a. a speculative walk that finishes at or after the flush fills nothing unless
//     core.walk_squash = complete; an L2 lookup or a walk that would start at or after it does
//     not happen;
//  b. core.cache_faulting_entries = false: a store that finds a read-only entry walks again;
//  c. a walk that finds no translation (not present, supervisor) is never cached;
//  d. the syndromes: x86 #PF error codes, arm64 ESR_EL1 (the same function UserAccess uses);
//  e. hardware A/D: arm64 FEAT_HAFDBS on a retiring store only; the x86 D-flag assist;
//  f. the run-ahead replay's hint (host speed, beside the rules).
#include <catch2/catch.hpp>

#include "base/hwwalk.hpp"
#include "models/walker/translation.hpp"
#include "tests/models/mmu_rig.hpp"
#include "tests/models/page_tables.hpp"

using namespace mmusim;
using namespace mmusim::hw;
using mmusim::hw::test::MmuRig;
using mmusim::hw::test::Perm;

namespace {

constexpr uint64_t K4 = 4096;
constexpr uint32_t kStlb = 7, kOverhead = 8, kDram = 441;  // Golden Cove at 4.9 GHz
constexpr uint64_t kVa = 0x7f00'0000'5000;
constexpr uint64_t kPa = 0x1234'5000;

void with_squash(CoreMmuParams& p, WalkSquash s) { p.core.walk_squash = s; }

}  // namespace

TEST_CASE("translation: a speculative walk done at or after the flush fills only with walk_squash = complete",
          "[translation][rules]") {
  const uint64_t now = 1000;
  // A cold walk: requested after the STLB miss, four levels from DRAM.
  const uint64_t done = now + kStlb + kOverhead + 4 * kDram;
  for (WalkSquash squash : {WalkSquash::complete, WalkSquash::cancel}) {
    const bool complete = squash == WalkSquash::complete;
    INFO("walk_squash " << (complete ? "complete" : "cancel"));
    {  // done exactly at the flush
      MmuRig r(pg::Isa::x86_64, [&](CoreMmuParams& p) { with_squash(p, squash); });
      r.pt.map(kVa, kPa, 0, Perm{false, true, false});
      TranslateResult t = r.spec(true, kVa, 1, now, /*limit=*/done);
      CHECK(t.source == TranslateResult::Walked);
      CHECK_FALSE(t.ok);  // the micro-op is still translating at the flush
      CHECK(t.ready == done);
      CHECK(r.count("walker.walks_speculative") == 1);
      CHECK(bool(r.l1.probe(kVa, 1)) == complete);
      CHECK(bool(r.l2.probe(kVa, 1)) == complete);
    }
    {  // done a cycle before the flush: filled either way
      MmuRig r(pg::Isa::x86_64, [&](CoreMmuParams& p) { with_squash(p, squash); });
      r.pt.map(kVa, kPa, 0, Perm{false, true, false});
      TranslateResult t = r.spec(true, kVa, 1, now, done + 1);
      CHECK(t.ok);
      CHECK(t.fault);  // read-only: cached, and the store would fault
      CHECK(r.l1.probe(kVa, 1));
      CHECK(r.l2.probe(kVa, 1));
    }
  }
  SECTION("an STLB lookup at the flush does not happen") {
    MmuRig r(pg::Isa::x86_64);
    r.pt.map(kVa, kPa, 0);
    ReplayHint h;
    TranslateResult t = r.spec(true, kVa, 1, now, now + kStlb, &h);
    CHECK(t.source == TranslateResult::None);
    CHECK_FALSE(t.ok);
    CHECK(h.kind == ReplayHint::LateL2);
    CHECK(r.count("tlb.stlb.misses") == 0);
    CHECK(r.count("walker.walks") == 0);
  }
  SECTION("a walk that would start at the flush (every walker busy) does not happen") {
    MmuRig r(pg::Isa::x86_64);
    // Pages in other PML4 slots: cold walks, each busy for about three DRAM reads.
    auto page = [](unsigned i) { return kVa + uint64_t(i) * (uint64_t(1) << 39); };
    for (unsigned i = 0; i < 5; ++i) r.pt.map(page(i), kPa + i * K4, 0);
    for (unsigned i = 1; i < 5; ++i) r.store(page(i), 1, now);  // the four walkers, busy
    REQUIRE(r.walker.earliest_free() > now + 100);
    TranslateResult t = r.spec(true, kVa, 1, now, now + 100);
    CHECK(t.source == TranslateResult::None);
    CHECK_FALSE(t.ok);
    CHECK(r.count("walker.walks") == 4);
    CHECK_FALSE(r.l2.probe(kVa, 1));
  }
}

TEST_CASE("translation: cache_faulting_entries = false: a store finding a read-only entry walks again",
          "[translation][rules]") {
  for (bool cache_faulting : {true, false}) {
    INFO("cache_faulting_entries " << cache_faulting);
    // (A store whose L1 entry is read-only while the PTE permits it.)
    MmuRig r(pg::Isa::x86_64, [&](CoreMmuParams& p) { p.core.cache_faulting_entries = cache_faulting; });
    r.pt.map(kVa, kPa, 0, Perm{false, true, false});
    // A read-only translation in the store DTLB (as after a squashed store's fill), and the PTE
    // made writable since, without a flush (the kernel's reuse of a folio).
    TlbEntry ro;
    ro.vbase = kVa;
    ro.pbase = kPa;
    ro.asid = 1;
    ro.user = true;
    r.l1.fill(kVa, ro);
    r.pt.map(kVa, kPa, 0, Perm{true, true, true});
    TranslateResult t = r.store(kVa, 1, 0);
    if (cache_faulting) {
      // The cached entry says read-only: a spurious fault, no walk (the C3 mechanism).
      CHECK(t.source == TranslateResult::L1Hit);
      CHECK(t.fault);
      CHECK(t.syndrome == 0x7);
      CHECK(r.count("walker.walks") == 0);
    } else {
      // Not usable for a store: the STLB (a miss), then a walk, which finds the writable PTE.
      CHECK(t.source == TranslateResult::Walked);
      CHECK_FALSE(t.fault);
      CHECK(t.ready == kStlb + kOverhead + 4 * kDram);
      CHECK(r.count("walker.walks") == 1);
      REQUIRE(r.l1.probe(kVa, 1));
      CHECK(r.l1.probe(kVa, 1)->writable);
    }
  }
  {  // a store to a read-only page: faults, and no TLB keeps the translation
    MmuRig r(pg::Isa::x86_64, [](CoreMmuParams& p) { p.core.cache_faulting_entries = false; });
    r.pt.map(kVa, kPa, 0, Perm{false, true, false});
    TranslateResult t = r.store(kVa, 1, 0);
    CHECK(t.fault);
    CHECK(t.syndrome == 0x7);
    CHECK_FALSE(r.l1.probe(kVa, 1));
    CHECK_FALSE(r.l2.probe(kVa, 1));
    // A load may use it: cached in the load DTLB and the STLB; the store still walks past both.
    CHECK_FALSE(r.load(kVa, 1, 0).fault);
    CHECK(r.l2.probe(kVa, 1));
    t = r.store(kVa, 1, 5000);
    CHECK(t.source == TranslateResult::Walked);
    CHECK(t.fault);
    CHECK(r.count("walker.walks") == 3);
  }
}

TEST_CASE("translation: a walk that finds no translation is never cached", "[translation][rules]") {
  MmuRig r(pg::Isa::x86_64);
  const uint64_t sup = kVa + K4;
  r.pt.map(kVa + 2 * K4, kPa, 0);        // the tables exist; kVa itself is not present
  r.pt.map(sup, kPa, 0, Perm{true, false, true});  // a supervisor page
  for (bool spec : {true, false}) {
    INFO("speculative " << spec);
    TranslateResult t = spec ? r.spec(true, kVa, 1, 0) : r.store(kVa, 1, 0);
    CHECK(t.source == TranslateResult::Walked);
    CHECK(t.ok);
    CHECK(t.fault);
    CHECK(t.syndrome == 0x6);  // W, U: not present
    CHECK(t.entry == nullptr);
    t = r.store(sup, 1, 0);
    CHECK(t.fault);
    CHECK(t.syndrome == 0x7);  // P, W, U: a protection fault
  }
  CHECK_FALSE(r.l1.probe(kVa, 1));
  CHECK_FALSE(r.l2.probe(kVa, 1));
  CHECK_FALSE(r.l2.probe(sup, 1));
  CHECK(r.count("walker.walks") == 4);  // each one walked again
  CHECK(r.count("tlb.stlb.fills") == 0);
}

TEST_CASE("translation: fault syndromes, from a walk and from a cached entry", "[translation][rules]") {
  SECTION("x86: #PF error codes") {
    MmuRig r(pg::Isa::x86_64);
    r.pt.map(kVa, kPa, 0, Perm{false, true, false});
    TranslateResult walked = r.store(kVa, 1, 0);
    TranslateResult cached = r.store(kVa, 1, 5000);
    CHECK(walked.source == TranslateResult::Walked);
    CHECK(cached.source == TranslateResult::L1Hit);
    CHECK(walked.syndrome == 0x7);  // P | W | U: a write to a read-only page
    CHECK(cached.syndrome == 0x7);
    CHECK_FALSE(r.load(kVa, 1, 0).fault);
    CHECK(r.load(kVa + 16 * K4, 1, 0).syndrome == 0x4);  // U: a load, not present
  }
  SECTION("arm64: ESR_EL1 of a Data Abort from EL0, permission fault at the leaf's level") {
    MmuRig r(pg::Isa::arm64);
    const uint64_t block2m = 0x40'0000'0000, block1g = 0x80'0000'0000;
    r.pt.map(kVa, kPa, 0, Perm{false, true, false});
    r.pt.map(block2m, 0x4000'0000, 1, Perm{false, true, false});
    r.pt.map(block1g, 0x8000'0000, 2, Perm{false, true, false});
    for (uint64_t now : {0, 5000}) {  // walked, then from the TLBs
      INFO("cycle " << now);
      CHECK(r.store(kVa, 1, now).syndrome == 0x9200004full);          // WnR, level 3
      CHECK(r.store(block2m + K4, 1, now).syndrome == 0x9200004eull);  // WnR, level 2
    }
    // A 1G block is a level-1 leaf. (The L1 DTLB, without 1G entries, holds it as a 2M entry, and a
    // permission fault found there reports level 2: a TLB entry keeps its size, not its leaf's
    // level. A limitation; the kernel's handler reads the fault class, not the level.)
    TranslateResult t = r.store(block1g + K4, 1, 0);
    CHECK(t.source == TranslateResult::Walked);
    CHECK(t.syndrome == 0x9200004dull);
    t = r.store(block1g + K4, 1, 5000);
    CHECK(t.source == TranslateResult::L1Hit);
    CHECK(t.syndrome == 0x9200004eull);
    CHECK((r.load(kVa + 16 * K4, 1, 0).syndrome & pg::esr::FSC_MASK) == 0x07);  // translation, level 3
  }
}

TEST_CASE("translation: hardware dirty state: arm64 FEAT_HAFDBS on retiring stores, the x86 D assist",
          "[translation][rules]") {
  // arm64 writable-clean: DBM = 1, AP[2] = 1 (read-only until the hardware or the kernel writes it).
  auto map_clean = [](MmuRig& r) {
    r.pt.map(kVa, kPa, 0, Perm{false, true, false});
    r.pt.set_entry(kVa, 0, r.pt.entry_at(kVa, 0) | pg::arm64::DBM);
  };
  SECTION("arm64, a retiring store: the walk makes the PTE writable-dirty, no fault") {
    MmuRig r(pg::Isa::arm64);
    map_clean(r);
    TranslateResult t = r.store(kVa, 1, 0);
    CHECK_FALSE(t.fault);
    CHECK_FALSE(t.need_dirty);
    CHECK_FALSE((r.pt.entry_at(kVa, 0) & pg::arm64::RDONLY));
    REQUIRE(r.l1.probe(kVa, 1));
    CHECK(r.l1.probe(kVa, 1)->writable);
  }
  SECTION("arm64, a speculative store: the PTE is left alone, the entry cached read-only") {
    MmuRig r(pg::Isa::arm64);
    map_clean(r);
    TranslateResult t = r.spec(true, kVa, 1, 0);
    CHECK(t.fault);
    CHECK((r.pt.entry_at(kVa, 0) & pg::arm64::RDONLY));
    REQUIRE(r.l1.probe(kVa, 1));
    CHECK_FALSE(r.l1.probe(kVa, 1)->writable);
  }
  SECTION("arm64 without HAFDBS: a permission fault") {
    MmuRig r(pg::Isa::arm64, [](CoreMmuParams& p) { p.core.hafdbs = false; });
    map_clean(r);
    TranslateResult t = r.store(kVa, 1, 0);
    CHECK(t.fault);
    CHECK(t.syndrome == 0x9200004full);
    CHECK((r.pt.entry_at(kVa, 0) & pg::arm64::RDONLY));
  }
  SECTION("x86: a store through a clean writable entry needs the assist, which sets D and refills") {
    MmuRig r(pg::Isa::x86_64);
    r.pt.map(kVa, kPa, 0, Perm{true, true, false});
    TranslateResult t = r.store(kVa + 8, 1, 0);
    CHECK_FALSE(t.fault);
    CHECK(t.need_dirty);
    CHECK_FALSE((r.pt.entry_at(kVa, 0) & pg::x86::DIRTY));  // the walk sets A, not D
    CHECK(r.path.assist_dirty(kVa + 8, 1, r.pt.root(), t.pa) == kPa + 8);
    CHECK((r.pt.entry_at(kVa, 0) & pg::x86::DIRTY));
    CHECK(r.l1.probe(kVa, 1)->dirty);
    CHECK(r.l2.probe(kVa, 1)->dirty);
    t = r.store(kVa, 1, 5000);
    CHECK(t.source == TranslateResult::L1Hit);
    CHECK_FALSE(t.need_dirty);
  }
}

TEST_CASE("translation: the replay hint says what the access did to the L2 TLB", "[translation][runahead]") {
  MmuRig r(pg::Isa::x86_64);
  r.pt.map(kVa, kPa, 0, Perm{false, true, false});
  ReplayHint h;
  // A walk: the slot it filled in the STLB.
  r.spec(true, kVa, 1, 0, MmuRig::kNoLimit, &h);
  CHECK(h.kind == ReplayHint::Other);
  REQUIRE(r.l2.probe(kVa, 1));
  CHECK(h.l2_slot == r.l2.slot_of(r.l2.probe(kVa, 1)));
  // An L1 hit: nothing about the L2.
  r.spec(true, kVa, 1, 5000, MmuRig::kNoLimit, &h);
  CHECK(h.kind == ReplayHint::Other);
  CHECK(h.l2_slot == Tlb::kNoSlot);
  // An L1 miss and an STLB hit that refills the L1: the STLB's slot.
  r.l1.invalidate_all("test");
  r.spec(true, kVa, 1, 6000, MmuRig::kNoLimit, &h);
  CHECK(h.kind == ReplayHint::L2Refill);
  CHECK(h.l2_slot == r.l2.slot_of(r.l2.probe(kVa, 1)));
}

// g. A walk fills the TLBs when it is done (TlbEntry::ready), not when it starts. A younger access
// to the same 4K page before then waits for that walk (its miss joins the walk in flight); one to
// another page of the large page the walk brings misses and walks itself (nothing tells the
// hardware what size the walk in flight will find); after the walk is done both hit.
TEST_CASE("translation: an access during a walk in flight waits for it on its page, walks on another",
          "[translation][rules][in_flight]") {
  const uint64_t now = 1000;
  const uint64_t done = now + kStlb + kOverhead + 4 * kDram;  // a cold 4K walk
  SECTION("the same 4K page: the younger load waits for the walk, no second walk") {
    MmuRig r(pg::Isa::x86_64);
    r.pt.map(kVa, kPa, 0);
    TranslateResult a = r.store(kVa, 1, now);
    REQUIRE(a.ready == done);
    TranslateResult b = r.store(kVa + 8, 1, now + 3);
    CHECK(b.source == TranslateResult::L1Hit);
    CHECK(b.ready == done);  // not now + 3
    CHECK(r.count("walker.walks") == 1);
    TranslateResult c = r.store(kVa + 16, 1, done + 10);  // after it: a plain L1 hit
    CHECK(c.ready == done + 10);
  }
  SECTION("another 4K page of a 2M page in flight: a walk of its own") {
    MmuRig r(pg::Isa::x86_64);
    const uint64_t big = 0x7f00'0020'0000;  // 2M-aligned
    r.pt.map(big, 0x4000'0000, 1);
    const uint64_t done2m = now + kStlb + kOverhead + 3 * kDram;  // PML4E, PDPTE, PDE
    TranslateResult a = r.store(big, 1, now);
    REQUIRE(a.ready == done2m);
    REQUIRE(a.entry->size == PageSize::k2M);
    TranslateResult b = r.store(big + 5 * K4, 1, now + 3);
    CHECK(b.source == TranslateResult::Walked);
    CHECK(r.count("walker.walks") == 2);
    // Its reads find the first walk's lines on their way: it is done when they have arrived.
    CHECK(b.ready == done2m);
    TranslateResult c = r.store(big + 9 * K4, 1, done2m + 1);
    CHECK(c.source == TranslateResult::L1Hit);
    CHECK(r.count("walker.walks") == 2);
  }
}

// h. An invalidation at a cycle removes what had arrived then: a walk still in flight fills after
// it (the x86 #PF at the flush with walk_squash = complete). A refill of an entry that arrives
// after the invalidation keeps the entry (pending until the refill), one that arrived before does
// not.
TEST_CASE("translation: a #PF invalidation at the flush leaves what a walk in flight brings later",
          "[translation][rules][in_flight]") {
  const uint64_t now = 1000;
  const uint64_t done = now + kStlb + kOverhead + 4 * kDram;
  MmuRig r(pg::Isa::x86_64);
  r.pt.map(kVa, kPa, 0, Perm{false, true, false});
  TranslateResult a = r.spec(true, kVa, 1, now, /*limit=*/done + 100);
  REQUIRE(a.ok);
  SECTION("invalidated after the walk is done: gone") {
    CHECK(r.maint.x86_page_fault(1, kVa, done) == 2);
    CHECK_FALSE(r.l1.probe(kVa, 1));
    CHECK_FALSE(r.l2.probe(kVa, 1));
  }
  SECTION("invalidated while it is in flight: it stays, and is found once it has arrived") {
    CHECK(r.maint.x86_page_fault(1, kVa, done - 1) == 0);
    CHECK(r.l2.probe(kVa, 1));
    TranslateResult b = r.spec(true, kVa, 1, done + 5, done + 100);
    CHECK(b.source == TranslateResult::L1Hit);
    CHECK(b.fault);  // the stale read-only entry
  }
  SECTION("an entry that arrived, refilled by a walk still in flight at the invalidation") {
    TlbEntry late = *r.l2.probe(kVa, 1);
    late.ready = done + 50;
    r.l2.fill(kVa, late);
    CHECK(r.l2.invalidate_page(kVa, 1, "test", done + 10) == 0);
    REQUIRE(r.l2.probe(kVa, 1));
    CHECK(r.l2.probe(kVa, 1)->ready == done + 50);  // gone until the refill arrives
    CHECK(r.l2.lookup(kVa + 8, 1, done + 20) != nullptr);  // its own page waits for it
    CHECK(r.l2.invalidate_page(kVa, 1, "test", done + 60) == 1);
  }
}
