// SPDX-License-Identifier: GPL-2.0-only
// The timed page walker: exact walk latencies by PSC level and cache level, parallel walkers,
// functional equality with pg::walk(), PSC fills and invalidation (x86 INVLPG/#PF, arm64 TLBI
// VAE1 vs VALE1), and the arm64 contiguous entry through the whole translation path. The walker,
// TLBs and caches are built by CoreMmu from the platform's presets, and the translation path is
// the one the cores use (tests/models/mmu_rig.hpp).
#include <catch2/catch.hpp>

#include <memory>

#include "models/presets.hpp"
#include "base/error.hpp"
#include "base/hwwalk.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/tlb/tlb.hpp"
#include "models/walker/maintenance.hpp"
#include "models/walker/translation.hpp"
#include "models/walker/walker.hpp"
#include "tests/models/mmu_rig.hpp"
#include "tests/models/page_tables.hpp"

using namespace mmusim;
using namespace mmusim::hw;
using mmusim::hw::test::PageTables;
using mmusim::hw::test::Perm;

namespace {
// Accesses far apart in time (none waits for another's DRAM transfer: memory.read_bandwidth).
uint64_t next_t() {
  static uint64_t t = 1000000;
  return t += 10000;
}
}  // namespace

namespace {

constexpr double kGhz = 4.9;
constexpr uint32_t kL1 = 5, kL2 = 15, kLlc = 60, kDram = 441;  // Golden Cove, 90 ns at 4.9 GHz
constexpr uint32_t kOverhead = 8;
constexpr uint64_t K4 = 4096;

uint64_t count(Stats& s, const std::string& key) {
  const Counter* c = s.find_counter(key);
  REQUIRE(c);
  return c->value();
}

// One core's MMU side, x86 or arm64, with the platform's presets.
using Rig = test::MmuRig;

uint64_t va_of(unsigned i3, unsigned i2, unsigned i1, unsigned i0) {
  return (uint64_t(i3) << 39) | (uint64_t(i2) << 30) | (uint64_t(i1) << 21) | (uint64_t(i0) << 12);
}

}  // namespace

TEST_CASE("walker: a cold walk reads every level from DRAM and matches pg::walk", "[walker]") {
  Rig r(pg::Isa::x86_64);
  const uint64_t va = va_of(255, 3, 7, 9) + 0x123;
  r.pt.map(va, 0x12'3456'7000, 0, Perm{true, true, true});
  const uint64_t now = 500;
  WalkOutcome w = r.walker.walk(va, 1, r.pt.root(), now, false);
  CHECK(w.start == now);
  CHECK(w.done == now + kOverhead + 4 * kDram);
  CHECK(w.mem_reads == 4);
  CHECK(w.psc_level == -1);
  REQUIRE(w.walk.result == pg::Walk::Ok);
  CHECK(w.walk.pa(va) == 0x12'3456'7123);
  CHECK(w.walk.page_size == K4);
  CHECK(w.walk.writable);
  // The accessed flag is now set at every level, exactly as the functional walk does it.
  for (unsigned lvl = 0; lvl < 4; ++lvl) CHECK((r.pt.entry_at(va, lvl) & pg::x86::ACCESSED));
  pg::Walk f = pg::walk(pg::Isa::x86_64, r.mem, r.pt.root(), va);
  CHECK(f.result == w.walk.result);
  CHECK(f.page_pa == w.walk.page_pa);
  CHECK(f.nsteps == w.walk.nsteps);
  for (unsigned i = 0; i < f.nsteps; ++i) {
    CHECK(f.steps[i].entry_pa == w.walk.steps[i].entry_pa);
    CHECK(f.steps[i].entry == w.walk.steps[i].entry);
  }
  CHECK(count(r.stats, "walker.walks") == 1);
  CHECK(count(r.stats, "walker.cycles") == kOverhead + 4 * kDram);
  CHECK(count(r.stats, "walker.mem_reads") == 4);
  CHECK(count(r.stats, "walker.psc.misses") == 1);
  // The three table entries it read are now in the PML4E, PDPTE and PDE caches.
  CHECK(r.walker.psc().occupancy() == 3);
  CHECK(r.walker.psc().probe(va, 1) == 1);
}

TEST_CASE("walker: PDE-cache hit with the PTE line in L1 costs overhead + 5", "[walker][latency]") {
  Rig r(pg::Isa::x86_64);
  const uint64_t va = va_of(255, 3, 7, 9);
  r.pt.map(va, 0x5000'0000, 0, Perm{false, true, false});
  r.pt.map(va + K4, 0x5000'1000, 0, Perm{false, true, false});
  r.walker.walk(va, 1, r.pt.root(), 0, false);  // warms the PSC and the PTE line

  // The neighbour page: its PTE is in the same 64-byte line.
  const uint64_t now = 10'000;
  WalkOutcome w = r.walker.walk(va + K4, 1, r.pt.root(), now, false);
  CHECK(w.psc_level == 1);
  CHECK(w.mem_reads == 1);
  CHECK(w.done == now + kOverhead + kL1);  // ready at 10013 ...
  CHECK_FALSE(w.done == now + kOverhead + kL1 - 1);  // ... not at 10012
  CHECK(count(r.stats, "walker.psc.pde.hits") == 1);
  CHECK(count(r.stats, "walker.psc.pdpte.hits") == 0);

  // Through the translation path: DTLB miss, STLB miss (7), then the walk.
  r.l1.invalidate_all("test");
  r.l2.invalidate_all("test");
  TranslateResult t = r.spec(true, va, 1, now);
  CHECK(t.source == TranslateResult::Walked);
  CHECK(t.ok);
  CHECK(t.ready == now + 7 + kOverhead + kL1);
  CHECK_FALSE(t.ready == now + 7 + kOverhead + kL1 - 1);
  REQUIRE(t.entry);
  CHECK_FALSE(t.entry->writable);  // the read-only PTE is cached as such
  CHECK(t.entry->speculative);
  CHECK(t.fault);  // a store through it: #PF with P, W, U
  CHECK(t.syndrome == 0x7);
  CHECK(r.path.last_walk().psc_level == 1);
  CHECK(count(r.stats, "tlb.stlb.fills_readonly") == 1);
  CHECK(count(r.stats, "tlb.dtlb_store.fills_readonly") == 1);
  CHECK(count(r.stats, "walker.walks_speculative") == 1);
}

TEST_CASE("walker: PSC misses at each level with the entries in L1, L2, LLC and DRAM",
          "[walker][latency]") {
  Rig r(pg::Isa::x86_64);
  // Indices 1, 16, 32, 48: the four entries fall in L1D sets 0, 2, 4 and 6 of their tables.
  const uint64_t va = va_of(1, 16, 32, 48);
  r.pt.map(va, 0x7770'0000, 0);
  const uint64_t pml4e = r.pt.entry_pa_at(va, 3), pdpte = r.pt.entry_pa_at(va, 2);
  const uint64_t pde = r.pt.entry_pa_at(va, 1), pte = r.pt.entry_pa_at(va, 0);
  REQUIRE(((pml4e >> 6) & 63) == 0);
  REQUIRE(((pte >> 6) & 63) == 6);
  const uint64_t far = 0x4000'0000;  // conflict lines, away from the tables
  // PDPTE in the LLC only: 12 lines of the same L1D and L2 set push it out of both.
  r.caches.access(pdpte, false, next_t());
  for (uint64_t k = 1; k <= 12; ++k) r.caches.access(far + (pdpte & 0x1ffff) + k * (128 << 10), false, next_t());
  // PDE in the L2 only: 12 lines of the same L1D set, in other L2 sets.
  r.caches.access(pde, false, next_t());
  for (uint64_t k = 1; k <= 12; ++k) r.caches.access(far + (pde & 0x1ffff) + k * K4, false, next_t());
  // PTE in the L1D. PML4E untouched: DRAM.
  r.caches.access(pte, false, next_t());
  REQUIRE_FALSE(r.caches.llc().probe(pml4e));
  REQUIRE((r.caches.llc().probe(pdpte) && !r.caches.l2().probe(pdpte) && !r.caches.l1d().probe(pdpte)));
  REQUIRE((r.caches.l2().probe(pde) && !r.caches.l1d().probe(pde)));
  REQUIRE(r.caches.l1d().probe(pte));

  const uint64_t now = 77;
  WalkOutcome w = r.walker.walk(va, 1, r.pt.root(), now, false);
  const uint64_t expect = kOverhead + kDram + kLlc + kL2 + kL1;  // 529
  CHECK(w.psc_level == -1);
  CHECK(w.mem_reads == 4);
  CHECK(w.done == now + expect);
  CHECK_FALSE(w.done == now + expect - 1);
  CHECK(count(r.stats, "walker.cycles") == expect);

  // Now every entry is in the L1D, and the PSC has all three table levels.
  r.walker.invalidate_all();
  w = r.walker.walk(va, 1, r.pt.root(), 1000, false);
  CHECK(w.done == 1000 + kOverhead + 4 * kL1);
  w = r.walker.walk(va, 1, r.pt.root(), 2000, false);
  CHECK(w.done == 2000 + kOverhead + kL1);
}

TEST_CASE("walker: walker.count limits parallel walks, the 5th starts when the first finishes",
          "[walker][latency]") {
  Rig r(pg::Isa::x86_64);
  uint64_t va[6];
  for (unsigned i = 0; i < 6; ++i) {
    va[i] = va_of(2, 0, 0, i * 8);  // one page table, PTEs in different lines
    r.pt.map(va[i], 0x1000'0000 + i * K4, 0);
  }
  for (unsigned i = 0; i < 6; ++i) r.walker.walk(va[i], 1, r.pt.root(), 0, false);  // warm
  const uint64_t now = 1'000'000;
  const uint64_t d = kOverhead + kL1;  // every walk: PDE hit, PTE line in L1
  const uint64_t waited_before = count(r.stats, "walker.wait_cycles");
  WalkOutcome w[6];
  for (unsigned i = 0; i < 6; ++i) w[i] = r.walker.walk(va[i], 1, r.pt.root(), now, true);
  for (unsigned i = 0; i < 4; ++i) {
    CHECK(w[i].start == now);
    CHECK(w[i].done == now + d);
  }
  CHECK(w[4].start == w[0].done);  // 1000013, not 1000012
  CHECK(w[4].done == now + 2 * d);
  CHECK(w[5].start == now + d);
  CHECK(r.walker.earliest_free() == now + d);  // walkers 3 and 4 free at now + d
  CHECK(count(r.stats, "walker.wait_cycles") - waited_before == 2 * d);

  // A request after every walker is free starts at once.
  WalkOutcome late = r.walker.walk(va[0], 1, r.pt.root(), now + 100, false);
  CHECK(late.start == now + 100);

  SECTION("with walker.count = 1 the walks serialise") {
    Rig one(pg::Isa::x86_64, [](CoreMmuParams& p) { p.walker.count = 1; });
    for (unsigned i = 0; i < 3; ++i) one.pt.map(va[i], 0x1000'0000 + i * K4, 0);
    for (unsigned i = 0; i < 3; ++i) one.walker.walk(va[i], 1, one.pt.root(), 0, false);
    WalkOutcome a = one.walker.walk(va[0], 1, one.pt.root(), now, false);
    WalkOutcome b = one.walker.walk(va[1], 1, one.pt.root(), now, false);
    WalkOutcome c = one.walker.walk(va[2], 1, one.pt.root(), now + 1, false);
    CHECK(b.start == a.done);
    CHECK(c.start == b.done);
    CHECK(c.done == now + 3 * d);
  }
}

TEST_CASE("walker: INVLPG drops the page's TLB entries of all sizes and every PSC entry of the "
          "PCID, other pages stay",
          "[walker][invalidate]") {
  Rig r(pg::Isa::x86_64);
  const uint64_t a = va_of(3, 1, 2, 5), b = va_of(3, 1, 9, 5);  // different PDEs, same PML4E/PDPTE
  const uint64_t c = va_of(4, 0, 0, 0);                          // PCID 2's page
  r.pt.map(a, 0x2000'0000, 0, Perm{false, true, false});
  r.pt.map(b, 0x2000'1000, 0, Perm{false, true, false});
  r.pt.map(c, 0x2000'2000, 0);
  // Stores: the store DTLB and the STLB cache them (a and b read-only: they fault, and are cached).
  for (uint64_t v : {a, b}) REQUIRE(r.store(v, 1, 0).entry);
  REQUIRE(r.store(c, 2, 0).entry);
  // A 2M translation cached for a's block as well (another mapping of it seen earlier).
  TlbEntry big;
  big.vbase = a & ~((2ull << 20) - 1);
  big.pbase = 0x4000'0000;
  big.asid = 1;
  big.size = PageSize::k2M;
  r.l2.fill(a, big);
  REQUIRE(r.walker.psc().probe(a, 1) == 1);
  REQUIRE(r.walker.psc().probe(c, 2) == 1);

  // INVLPG a, PCID 1.
  CHECK(r.maint.x86_invlpg(1, a + 0x80) == 3);  // DTLB 4K, STLB 4K, STLB 2M
  CHECK(r.l1.probe(a, 1) == nullptr);
  CHECK(r.l2.probe(a, 1) == nullptr);
  CHECK(r.l1.probe(b, 1) != nullptr);  // other pages' TLB entries stay
  CHECK(r.l2.probe(b, 1) != nullptr);
  CHECK(r.walker.psc().probe(a, 1) == 0);
  CHECK(r.walker.psc().probe(b, 1) == 0);  // all PSC entries of the PCID
  CHECK(r.walker.psc().probe(c, 2) == 1);  // another PCID's stay
  // The next walk for a starts from the root.
  WalkOutcome w = r.walker.walk(a, 1, r.pt.root(), 100, false);
  CHECK(w.psc_level == -1);
  CHECK(w.mem_reads == 4);

  // MOV CR3 for PCID 2 (flush_tlb_local): its TLB and PSC entries go; PCID 1's stay.
  CHECK(r.maint.x86_flush_pcid(2) == 2);
  CHECK(r.l1.probe(c, 2) == nullptr);
  CHECK(r.walker.psc().probe(c, 2) == 0);
  CHECK(r.l1.probe(b, 1) != nullptr);
  CHECK(r.walker.psc().probe(a, 1) == 1);
}

TEST_CASE("walker: a #PF drops only the PSC entries the address would use", "[walker][invalidate]") {
  Rig r(pg::Isa::x86_64);
  const uint64_t a = va_of(3, 1, 2, 5), b = va_of(3, 1, 9, 5), d = va_of(3, 2, 0, 0);
  for (uint64_t v : {a, b, d}) r.pt.map(v, 0x2000'0000, 0);
  for (uint64_t v : {a, b, d}) r.walker.walk(v, 1, r.pt.root(), 0, false);
  REQUIRE(r.walker.psc().occupancy() == 1 + 2 + 3);  // PML4E; 2 PDPTEs; 3 PDEs
  REQUIRE(r.store(a, 1, 5000).entry);
  REQUIRE(r.store(b, 1, 5000).entry);
  // a's PDE, its PDPTE and the PML4E (shared by all three) go; b keeps its PDE, d its PDE.
  CHECK(r.maint.x86_page_fault(1, a) == 2);  // a's DTLB and STLB entries
  CHECK(r.l2.probe(b, 1) != nullptr);
  CHECK(r.walker.psc().probe(a, 1) == 0);
  CHECK(r.walker.psc().probe(b, 1) == 1);
  CHECK(r.walker.psc().probe(d, 1) == 1);
  CHECK(r.walker.psc().probe(va_of(3, 1, 100, 0), 1) == 0);  // a's PDPTE is gone
  CHECK(count(r.stats, "walker.psc.invalidations") == 3);
}

TEST_CASE("walker: 2M leaf, not-present and PSC fills of table entries only", "[walker]") {
  Rig r(pg::Isa::x86_64);
  const uint64_t big = va_of(5, 5, 5, 0);
  r.pt.map(big, 0x8000'0000, 1);
  TranslateResult t = r.store(big + 0x1234, 1, 0);
  CHECK(r.path.last_walk().mem_reads == 3);
  REQUIRE(t.entry);
  CHECK(t.entry->size == PageSize::k2M);
  CHECK(r.l2.probe(big + 0x1f'f000, 1)->size == PageSize::k2M);
  CHECK(t.entry->pa(big + 0x1f'f000) == 0x801f'f000);
  // The PD entry is a leaf: only the PML4E and PDPTE are cached.
  CHECK(r.walker.psc().occupancy() == 2);
  CHECK(r.walker.psc().probe(big, 1) == 2);
  // At 1000 the first walk's read of the PD entry (its third DRAM read) is still on its way: the
  // line is "in the L1D" (its tags), but its data arrives when that walk is done.
  WalkOutcome w = r.walker.walk(big + 0x10'0000, 1, r.pt.root(), 1000, false);
  CHECK(w.psc_level == 2);
  CHECK(w.mem_reads == 1);
  CHECK(w.done == t.ready);
  CHECK(t.ready == 7 + kOverhead + 3 * kDram);
  // Once it has arrived: an L1D hit.
  w = r.walker.walk(big + 0x10'0000, 1, r.pt.root(), 5000, false);
  CHECK(w.done == 5000 + kOverhead + kL1);

  // A not-present PTE: the load's walk faults (#PF: U only), nothing enters the TLBs, the PDE is
  // cached.
  const uint64_t present = va_of(6, 0, 0, 0), absent = present + K4;
  r.pt.map(present, 0x9000'0000, 0);
  size_t l1_before = r.l1_load.occupancy(), l2_before = r.l2.occupancy();
  t = r.load(absent, 1, 2000);
  CHECK(t.source == TranslateResult::Walked);
  CHECK(t.entry == nullptr);
  CHECK(t.fault);
  CHECK(t.syndrome == 0x4);
  CHECK(r.path.last_walk().walk.result == pg::Walk::NotPresent);
  CHECK(r.path.last_walk().walk.level == 0);
  CHECK(r.l1_load.occupancy() == l1_before);
  CHECK(r.l2.occupancy() == l2_before);
  CHECK(r.walker.psc().probe(present, 1) == 1);
  CHECK(count(r.stats, "walker.walks_faulted") == 1);
}

TEST_CASE("walker: arm64 contpte block through the path, VALE1 keeps the walk cache, VAE1 drops it",
          "[walker][arm64]") {
  Rig r(pg::Isa::arm64);
  const uint64_t block = va_of(1, 2, 3, 16);  // 64K-aligned: PTE index 16
  const uint64_t pa = 0x3000'0000;
  for (unsigned i = 0; i < 16; ++i)
    r.pt.map(block + i * K4, pa + i * K4, 0, Perm{false, true, false, true, /*contiguous=*/true});

  TranslateResult t = r.spec(false, block + 3 * K4 + 5, 7, 0);
  REQUIRE(t.entry);
  CHECK(t.entry->size == PageSize::k4K);  // the walk's translation, at the leaf's size
  CHECK_FALSE(t.entry->writable);
  CHECK(r.l1.occupancy() == 1);
  REQUIRE(r.l1.probe(block, 7));
  CHECK(r.l1.probe(block, 7)->size == PageSize::k64K);  // the TLB holds the block as one entry
  // Once the walk is done (before, another page of the block would walk itself), each of the 16
  // pages hits it.
  const uint64_t later = t.ready + 100;
  for (unsigned i = 0; i < 16; ++i) {
    TranslateResult h = r.load(block + i * K4, 7, later);
    CHECK(h.source == TranslateResult::L1Hit);
    CHECK(h.entry->pa(block + i * K4) == pa + i * K4);
  }
  CHECK(count(r.stats, "walker.walks") == 1);
  CHECK(count(r.stats, "tlb.l1_dtlb.fills_readonly") == 1);

  // TLBI VALE1 of page 9: the TLB entries go, the walk-cache entries stay.
  CHECK(r.maint.arm64_tlbi(mmusim::TlbiOp::VALE1, 7, block + 9 * K4) == 2);
  CHECK(r.l1.occupancy() == 0);
  CHECK(r.walker.psc().occupancy() == 3);
  t = r.load(block, 7, later + 1000);
  CHECK(t.source == TranslateResult::Walked);
  CHECK(r.path.last_walk().psc_level == 1);
  CHECK(r.path.last_walk().mem_reads == 1);
  CHECK(count(r.stats, "walker.psc.l2.hits") == 1);  // Arm ARM lookup level 2 table descriptor

  // TLBI VAE1 of page 12: the walk cache's entries for it go too.
  CHECK(r.maint.arm64_tlbi(mmusim::TlbiOp::VAE1, 7, block + 12 * K4) == 2);
  CHECK(r.walker.psc().occupancy() == 0);
  CHECK(count(r.stats, "walker.psc.invalidations") == 3);
  t = r.load(block, 7, later + 2000);
  CHECK(r.path.last_walk().psc_level == -1);
  CHECK(r.path.last_walk().mem_reads == 4);

  // ASIDE1 of another ASID leaves everything; ASIDE1 of 7 and VMALLE1 empty the TLBs and PSC.
  CHECK(r.maint.arm64_tlbi(mmusim::TlbiOp::ASIDE1, 8, 0) == 0);
  CHECK(r.maint.arm64_tlbi(mmusim::TlbiOp::ASIDE1, 7, 0) == 2);
  CHECK(r.walker.psc().occupancy() == 0);
  r.load(block, 7, later + 3000);
  CHECK(r.maint.arm64_tlbi(mmusim::TlbiOp::VMALLE1, 0, 0) == 2);
  CHECK(r.walker.psc().occupancy() == 0);
}

TEST_CASE("walker: arm64 access flag: without HA the walk faults and nothing is cached",
          "[walker][arm64]") {
  const uint64_t va = va_of(1, 1, 1, 1);
  Perm noaf{true, true, false, /*accessed=*/false};
  SECTION("HA off") {
    Rig r(pg::Isa::arm64, [](CoreMmuParams& p) { p.core.hafdbs = false; });
    r.pt.map(va, 0x1000'0000, 0, noaf);
    TranslateResult t = r.load(va, 1, 0);
    CHECK(r.path.last_walk().walk.result == pg::Walk::AccessFlag);
    CHECK(t.entry == nullptr);
    CHECK(t.fault);
    CHECK(t.syndrome == 0x9200000bull);  // Data Abort from EL0, access flag fault, level 3
    CHECK(r.l1.occupancy() == 0);
    CHECK_FALSE((r.pt.entry_at(va, 0) & pg::arm64::AF));
  }
  SECTION("HA on") {
    Rig r(pg::Isa::arm64);
    r.pt.map(va, 0x1000'0000, 0, noaf);
    TranslateResult t = r.load(va, 1, 0);
    REQUIRE(t.entry);
    CHECK_FALSE(t.fault);
    CHECK((r.pt.entry_at(va, 0) & pg::arm64::AF));
  }
}

TEST_CASE("walker: parameters", "[walker][params]") {
  Schema schema;
  WalkerParams x = presets::i7().walker;
  Params dp = Params::declaring(schema);
  x.visit(dp);
  CHECK(schema.find("walker.count")->default_text == "4");
  CHECK(schema.find("walker.overhead")->default_text == "8");
  CHECK(schema.find("walker.psc.pml4e.entries")->default_text == "2");
  CHECK(schema.find("walker.psc.pdpte.entries")->default_text == "4");
  CHECK(schema.find("walker.psc.pde.entries")->default_text == "32");
  Config cfg(schema);
  cfg.set("walker.psc.pde.entries", "64", "test");
  cfg.set("walker.psc.pde.ways", "4", "test");
  cfg.set("walker.count", "2", "test");
  WalkerParams rd = presets::i7().walker;
  Params rp = Params::reading(cfg);
  rd.visit(rp);
  CHECK(rd.count == 2);
  CHECK(rd.psc[2].entries == 64);
  CHECK(rd.psc[2].ways == 4);
  Config bad(schema);
  bad.set("walker.psc.pde.ways", "5", "test");
  WalkerParams rb = presets::i7().walker;
  Params bp = Params::reading(bad);
  CHECK_THROWS_WITH(rb.visit(bp), Catch::Contains("walker.psc.pde.ways"));

  Schema arm;
  WalkerParams n1 = presets::n1().walker;
  Params ap = Params::declaring(arm);
  n1.visit(ap);
  CHECK(arm.find("walker.psc.walk_cache.entries")->default_text == "64");
}

namespace {
// A PTE store logged by another core's kernel entry at simulated time `at_ps` (the OS's log,
// base/entry_history.hpp), with the entry's value before it.
struct OneStore : EntryHistory {
  const uint64_t* entry;
  uint64_t old, at_ps;
  OneStore(const uint64_t* e, uint64_t o, uint64_t t) : entry(e), old(o), at_ps(t) {}
  uint64_t value_at(const uint64_t* e, uint64_t current, uint64_t t) const override {
    return e == entry && t < at_ps ? old : current;
  }
};
}  // namespace

TEST_CASE("walker: with several cores a walk reads the PTE as it was at the walk's simulated time", "[walker]") {
  // Another core's fault made the PTE writable at 1 us in simulated time; memory already holds the
  // new value (the kernel port ran that entry first). A walk starting at 0.5 us sees the old,
  // read-only entry and leaves memory alone (no A-bit store over the newer value); one at 2 us
  // sees the new one.
  Rig r(pg::Isa::x86_64);
  const uint64_t va = va_of(255, 3, 7, 9);
  r.pt.map(va, 0x12'3456'7000, 0, Perm{false, true, true});
  const uint64_t ro = r.pt.entry_at(va, 0) | pg::x86::ACCESSED;
  r.pt.set_entry(va, 0, ro);
  const uint64_t rw = ro | pg::x86::RW;
  r.pt.set_entry(va, 0, rw & ~pg::x86::ACCESSED);
  const uint64_t epa = r.pt.entry_pa_at(va, 0);
  const auto* host = reinterpret_cast<const uint64_t*>(r.mem.frame_data_if(epa >> PAGE_SHIFT) + (epa & 4095));
  OneStore log(host, ro, 1'000'000);
  r.walker.set_entry_history(&log, kGhz);
  WalkOutcome early = r.walker.walk(va, 1, r.pt.root(), uint64_t(0.5e-6 * kGhz * 1e9), false);
  REQUIRE(early.walk.result == pg::Walk::Ok);
  CHECK_FALSE(early.walk.writable);
  CHECK(r.pt.entry_at(va, 0) == (rw & ~pg::x86::ACCESSED));  // untouched
  WalkOutcome late = r.walker.walk(va, 1, r.pt.root(), uint64_t(2e-6 * kGhz * 1e9), false);
  REQUIRE(late.walk.result == pg::Walk::Ok);
  CHECK(late.walk.writable);
  CHECK(r.pt.entry_at(va, 0) == rw);  // the A bit set on the current entry
}
