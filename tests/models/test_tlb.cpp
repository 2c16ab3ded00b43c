// SPDX-License-Identifier: GPL-2.0-only
// TLBs: placement over arrays, LRU, permissions as cached, invalidation, splintering, the arm64
// contiguous 64K entry, exact hit latencies, parameters and trace.
#include <algorithm>
#include <functional>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "models/presets.hpp"
#include "base/error.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"
#include "models/cache/cache.hpp"
#include "models/tlb/tlb.hpp"
#include "models/tlb/tlb_replay.hpp"
#include "models/walker/translation.hpp"
#include "tests/models/mmu_rig.hpp"
#include "tests/models/page_tables.hpp"
#include "workloads/rng.hpp"

using namespace mmusim;
using namespace mmusim::hw;

namespace {

TlbEntry tr(uint64_t va, uint64_t pa, PageSize s, bool writable = true, uint16_t asid = 1,
            bool contiguous = false) {
  TlbEntry e;
  e.vbase = va & page_size_mask(s);
  e.pbase = pa & page_size_mask(s);
  e.asid = asid;
  e.size = s;
  e.writable = writable;
  e.user = true;
  e.dirty = writable;
  e.contiguous = contiguous;
  return e;
}

uint64_t count(Stats& s, const std::string& key) {
  const Counter* c = s.find_counter(key);
  REQUIRE(c);
  return c->value();
}

constexpr uint64_t K4 = 4096, K64 = 64 << 10, M2 = 2 << 20, G1 = 1ull << 30;

}  // namespace

TEST_CASE("tlb: page size parsing and names", "[tlb]") {
  std::string why;
  CHECK(parse_page_sizes("4K+2M", &why) == (page_size_bit(PageSize::k4K) | page_size_bit(PageSize::k2M)));
  CHECK(parse_page_sizes("4k, 64K|1g", &why) == 0b1011);
  CHECK_FALSE(parse_page_sizes("4K+3M", &why));
  CHECK(why.find("3M") != std::string::npos);
  CHECK_FALSE(parse_page_sizes("4K+4K", &why));
  CHECK_FALSE(parse_page_sizes("4K+", &why));
  CHECK(format_page_sizes(0b1101) == "4K+2M+1G");
  CHECK(page_size_bytes(PageSize::k64K) == K64);
  CHECK(page_size_bytes(PageSize::k1G) == G1);
}

TEST_CASE("tlb: lookup after fill, ASID match, translation of the offset", "[tlb]") {
  Stats s;
  Tlb t(presets::i7().l1[1], s);
  CHECK(t.lookup(0x7000'1234, 1) == nullptr);
  t.fill(0x7000'1234, tr(0x7000'1000, 0x55000, PageSize::k4K));
  const TlbEntry* e = t.lookup(0x7000'1fff, 1);
  REQUIRE(e);
  CHECK(e->pa(0x7000'1abc) == 0x55abc);
  CHECK(t.lookup(0x7000'1000, 2) == nullptr);  // another ASID/PCID
  CHECK(t.lookup(0x7000'2000, 1) == nullptr);  // the next page
  CHECK(count(s, "tlb.dtlb_store.hits") == 1);
  CHECK(count(s, "tlb.dtlb_store.misses") == 3);
  CHECK(count(s, "tlb.dtlb_store.fills") == 1);
  CHECK(t.probe(0x7000'1000, 1) != nullptr);
  CHECK(count(s, "tlb.dtlb_store.hits") == 1);  // probe does not count
}

TEST_CASE("tlb: a read-only translation is cached as read-only and counted", "[tlb]") {
  Stats s;
  Tlb t(presets::i7().l2, s);
  t.fill(0x1000, tr(0x1000, 0xa000, PageSize::k4K, /*writable=*/false));
  t.fill(0x2000, tr(0x2000, 0xb000, PageSize::k4K, /*writable=*/true));
  const TlbEntry* e = t.lookup(0x1000, 1);
  REQUIRE(e);
  CHECK_FALSE(e->writable);
  CHECK(count(s, "tlb.stlb.fills") == 2);
  CHECK(count(s, "tlb.stlb.fills_readonly") == 1);
  // Refreshing the same page replaces the entry instead of duplicating it.
  t.fill(0x1000, tr(0x1000, 0xa000, PageSize::k4K, true));
  CHECK(t.occupancy() == 2);
  CHECK(t.lookup(0x1000, 1)->writable);
  CHECK(count(s, "tlb.stlb.evictions") == 0);
}

TEST_CASE("tlb: set-associative LRU replacement (Golden Cove load DTLB, 16 sets x 4 ways)",
          "[tlb]") {
  Stats s;
  Tlb t(presets::i7().l1[0], s);
  REQUIRE(t.capacity() == 64 + 32 + 8);
  // Pages 0, 16, 32, 48, 64 (x 4K) share set 0.
  for (uint64_t k = 0; k < 4; ++k) t.fill(k * 16 * K4, tr(k * 16 * K4, k * K4, PageSize::k4K));
  CHECK(t.lookup(0, 1));  // page 0 most recent; page 16 is the LRU
  t.fill(64 * K4, tr(64 * K4, 0x99000, PageSize::k4K));
  CHECK(t.probe(0, 1));
  CHECK_FALSE(t.probe(16 * K4, 1));
  CHECK(t.probe(32 * K4, 1));
  CHECK(t.probe(64 * K4, 1));
  CHECK(count(s, "tlb.dtlb_load.evictions") == 1);
  // 64 consecutive pages fill the 4K array exactly; 2M and 1G go to their own arrays.
  Tlb u(presets::named(presets::i7().l1[0], "u"), s);
  for (uint64_t k = 0; k < 64; ++k) u.fill(k * K4, tr(k * K4, k * K4, PageSize::k4K));
  u.fill(0, tr(0, 0, PageSize::k2M));
  u.fill(0, tr(0, 0, PageSize::k1G));
  CHECK(u.occupancy() == 66);
  CHECK(count(s, "tlb.u.evictions") == 0);
  for (uint64_t k = 0; k < 64; ++k) REQUIRE(u.probe(k * K4, 1)->size == PageSize::k4K);
  CHECK(u.probe(M2 - 1, 1)->size == PageSize::k2M);  // smallest size first, then the 2M
  CHECK(u.probe(G1 - 1, 1)->size == PageSize::k1G);
}

TEST_CASE("tlb: STLB arrays A {4K,2M} and B {4K,1G}, 4K entries split by a VPN bit", "[tlb]") {
  Stats s;
  Tlb t(presets::i7().l2, s);
  REQUIRE(t.capacity() == 2048);
  // 2048 consecutive 4K pages fit exactly: VPN bit 7 (above the 128-set index) picks the array.
  for (uint64_t k = 0; k < 2048; ++k) t.fill(k * K4, tr(k * K4, k * K4, PageSize::k4K));
  CHECK(t.occupancy() == 2048);
  CHECK(count(s, "tlb.stlb.evictions") == 0);
  for (uint64_t k = 0; k < 2048; ++k) REQUIRE(t.probe(k * K4, 1));

  // 2M entries only live in array A: 1024 of them fill it and evict the 4K pages of A only.
  Tlb u(presets::named(presets::i7().l2, "u"), s);
  for (uint64_t k = 0; k < 1024; ++k) u.fill(k * M2, tr(k * M2, k * M2, PageSize::k2M));
  CHECK(u.occupancy() == 1024);
  const uint64_t va_b = 128 * K4;  // VPN 128: bit 7 set -> array B
  const uint64_t va_a = 0x40000000ull + 1 * K4;  // VPN bit 7 clear -> array A
  u.fill(va_b, tr(va_b, 0x1000, PageSize::k4K));
  CHECK(count(s, "tlb.u.evictions") == 0);
  u.fill(va_a, tr(va_a, 0x2000, PageSize::k4K));
  CHECK(count(s, "tlb.u.evictions") == 1);  // took the LRU 2M entry of its set in array A
  CHECK(u.occupancy() == 1025);
  // 1G entries go to array B.
  u.fill(0, tr(0, 0, PageSize::k1G));
  CHECK(count(s, "tlb.u.evictions") == 1);
  CHECK(u.probe(G1 - 1, 1) != nullptr);
}

TEST_CASE("tlb: INVLPG removes the page's entries of every size, other pages stay", "[tlb]") {
  Stats s;
  Tlb t(presets::i7().l2, s);
  const uint64_t va = 0x4060'3000;  // in the 1G page at 1G and the 2M page at 0x4060'0000
  t.fill(va, tr(va, 0x9000, PageSize::k4K, false));
  t.fill(va, tr(va, 0x8000'0000, PageSize::k2M));
  t.fill(va, tr(va, 0x1'0000'0000, PageSize::k1G));
  t.fill(va + K4, tr(va + K4, 0x7000, PageSize::k4K, false));  // the neighbour page
  t.fill(va, tr(va, 0x6000, PageSize::k4K, false, /*asid=*/2));  // same page, another PCID
  REQUIRE(t.occupancy() == 5);
  CHECK(t.invalidate_page(va + 0x123, 1, "invlpg") == 3);
  CHECK(t.probe(va, 1) == nullptr);
  CHECK(t.probe(va + K4, 1) != nullptr);
  CHECK(t.probe(va + K4, 1)->size == PageSize::k4K);
  CHECK(t.probe(va, 2) != nullptr);
  CHECK(count(s, "tlb.stlb.invalidations") == 3);
  CHECK(t.invalidate_asid(2, "cr3") == 1);
  CHECK(t.occupancy() == 1);
  CHECK(t.invalidate_all("test") == 1);
  CHECK(t.occupancy() == 0);
  CHECK(count(s, "tlb.stlb.invalidations") == 5);
}

TEST_CASE("tlb: splintering caches a large page as the accessed 4K page", "[tlb]") {
  Stats s;
  const uint64_t va = 0x4060'3abc;
  SECTION("off: one 2M entry serves every 4K page of the block") {
    Tlb t(presets::i7().l2, s);
    const TlbEntry* e = t.fill(va, tr(va, 0x8000'0000, PageSize::k2M));
    REQUIRE(e);
    CHECK(e->size == PageSize::k2M);
    CHECK(e->vbase == 0x4060'0000);
    REQUIRE(t.lookup(0x407f'f000, 1));
    CHECK(t.lookup(0x407f'f000, 1)->pa(0x407f'f010) == 0x801f'f010);
    // A #PF on one 4K page of the block removes the whole 2M entry.
    CHECK(t.invalidate_page(0x4070'0000, 1, "pf") == 1);
    CHECK(t.probe(va, 1) == nullptr);
  }
  SECTION("on: a 4K entry for the accessed page only, at the right physical offset") {
    TlbParams p = presets::i7().l2;
    p.splinter = true;
    Tlb t(p, s);
    const TlbEntry* e = t.fill(va, tr(va, 0x8000'0000, PageSize::k2M));
    REQUIRE(e);
    CHECK(e->size == PageSize::k4K);
    CHECK(e->vbase == 0x4060'3000);
    CHECK(e->pbase == 0x8000'3000);
    CHECK(t.lookup(va, 1)->pa(va) == 0x8000'3abc);
    CHECK(t.lookup(0x407f'f000, 1) == nullptr);
    // A 1G page splinters the same way.
    e = t.fill(0x5000'5000, tr(0x4000'0000, 0x1'0000'0000, PageSize::k1G));
    CHECK(e->size == PageSize::k4K);
    CHECK(e->vbase == 0x5000'5000);
    CHECK(e->pbase == 0x1'1000'5000);
  }
}

TEST_CASE("tlb: a size no array holds is stored as the largest smaller size held", "[tlb]") {
  Stats s;
  Tlb l1(presets::n1().l1[0], s);  // 4K, 64K, 2M
  const TlbEntry* e = l1.fill(0x4123'4567, tr(0x4000'0000, 0x8000'0000, PageSize::k1G));
  REQUIRE(e);
  CHECK(e->size == PageSize::k2M);
  CHECK(e->vbase == 0x4120'0000);
  CHECK(e->pbase == 0x8120'0000);
  // A TLB with only 2M entries cannot hold a 4K page at all.
  TlbParams p;
  p.name = "only2m";
  p.arrays = {{"", 8, 8, "2M", 0}};
  p.validate();
  Tlb t(p, s);
  CHECK(t.fill(0x1000, tr(0x1000, 0x1000, PageSize::k4K)) == nullptr);
  CHECK(t.occupancy() == 0);
  CHECK(count(s, "tlb.only2m.fills") == 0);
}

TEST_CASE("tlb: the Gracemont DTLB (4K only) holds a 2M translation as the touched 4K page, its STLB as 2M",
          "[tlb]") {
  Stats s;
  Tlb l1(presets::i7_ecore().l1.at(0), s);
  const TlbEntry* e = l1.fill(0x4012'3456, tr(0x4000'0000, 0x8000'0000, PageSize::k2M));
  REQUIRE(e);
  CHECK(e->size == PageSize::k4K);
  CHECK(e->vbase == 0x4012'3000);
  CHECK(e->pbase == 0x8012'3000);
  CHECK(l1.lookup(0x4012'3fff, 1) != nullptr);
  CHECK(l1.lookup(0x4012'4000, 1) == nullptr);  // the next 4K of the same 2M page: a miss
  Tlb stlb(presets::i7_ecore().l2, s);
  const TlbEntry* e2 = stlb.fill(0x4012'3456, tr(0x4000'0000, 0x8000'0000, PageSize::k2M));
  REQUIRE(e2);
  CHECK(e2->size == PageSize::k2M);
  CHECK(stlb.lookup(0x401f'f000, 1) != nullptr);
  // A 1G page goes to the 8-entry 1G array.
  const TlbEntry* e3 = stlb.fill(0x8000'1000, tr(0x8000'0000, 0x1'0000'0000, PageSize::k1G));
  REQUIRE(e3);
  CHECK(e3->size == PageSize::k1G);
}

TEST_CASE("tlb: a contiguous block is one 64K entry serving 16 pages, TLBI of any page drops it",
          "[tlb]") {
  Stats s;
  const uint64_t block = 0x7f12'3450'000 & ~(K64 - 1);
  const uint64_t pa_block = 0x2'0030'0000;
  for (unsigned victim = 0; victim < 16; ++victim) {
    Tlb t(presets::n1().l1[0], s);
    // Filled from the walk of page 5 of the block (the leaf has the contiguous bit).
    const uint64_t va5 = block + 5 * K4;
    const TlbEntry* e =
        t.fill(va5, tr(va5, pa_block + 5 * K4, PageSize::k4K, false, 1, /*contiguous=*/true));
    REQUIRE(e);
    REQUIRE(e->size == PageSize::k64K);
    CHECK(e->pbase == pa_block);
    CHECK(t.occupancy() == 1);
    for (unsigned pg = 0; pg < 16; ++pg) {
      const TlbEntry* h = t.lookup(block + pg * K4 + 8, 1);
      REQUIRE(h);
      CHECK(h->pa(block + pg * K4 + 8) == pa_block + pg * K4 + 8);
    }
    CHECK(t.lookup(block + 16 * K4, 1) == nullptr);  // the next block
    CHECK(t.lookup(block - K4, 1) == nullptr);
    // TLBI VALE1 of page `victim` (any of the 16) removes the one entry.
    CHECK(t.invalidate_page(block + victim * K4, 1, "tlbi_vale1") == 1);
    CHECK(t.occupancy() == 0);
    CHECK(t.lookup(block + ((victim + 7) % 16) * K4, 1) == nullptr);
  }
  SECTION("with contiguous_64k off, each page needs its own entry") {
    TlbParams p = presets::n1().l1[0];
    p.contiguous_64k = false;
    Tlb t(p, s);
    const TlbEntry* e =
        t.fill(block, tr(block, pa_block, PageSize::k4K, false, 1, /*contiguous=*/true));
    CHECK(e->size == PageSize::k4K);
    CHECK(t.lookup(block + K4, 1) == nullptr);
  }
  SECTION("a 64K entry given to a TLB without 64K entries is splintered to the page") {
    Tlb t(presets::i7().l1[1], s);
    const TlbEntry* e = t.fill(block + 3 * K4, tr(block, pa_block, PageSize::k64K));
    REQUIRE(e);
    CHECK(e->size == PageSize::k4K);
    CHECK(e->pbase == pa_block + 3 * K4);
  }
}

// Through the translation path the cores use (TranslationPath, built by CoreMmu from the
// platform's preset as CoreModule builds it): a change to its timing fails here.
TEST_CASE("tlb: exact hit latencies through the translation path", "[tlb][latency]") {
  test::MmuRig r(pg::Isa::x86_64);
  Tlb& stlb = r.l2;
  const uint64_t va = 0x7f00'0000'5000;

  // STLB hit: ready 7 cycles after the request (not 6); the L1 store DTLB is filled from it.
  stlb.fill(va, tr(va, 0x33000, PageSize::k4K, false));
  const uint64_t now = 1000;
  TranslateResult t = r.spec(true, va, 1, now);
  CHECK(t.source == TranslateResult::L2Hit);
  CHECK(t.ok);
  CHECK(t.ready == now + 7);
  CHECK_FALSE(t.ready == now + 6);
  REQUIRE(t.entry);
  CHECK(t.pa == 0x33000);
  CHECK(t.entry->pa(va + 4) == 0x33004);
  CHECK_FALSE(t.entry->writable);
  CHECK(t.entry->speculative);
  CHECK(t.fault);  // a store through the read-only entry (#PF: P, W, U)
  CHECK(t.syndrome == 0x7);
  // L1 DTLB hit: ready at the request cycle (its lookup is inside the 5-cycle L1D load-to-use).
  t = r.store(va, 1, now + 50);
  CHECK(t.source == TranslateResult::L1Hit);
  CHECK(t.ready == now + 50);
  CHECK(t.fault);
  CHECK(r.count("walker.walks") == 0);
  CHECK(r.count("tlb.dtlb_store.hits") == 1);
  CHECK(r.count("tlb.dtlb_store.misses") == 1);
  CHECK(r.count("tlb.stlb.hits") == 1);
  // A load looks up the load DTLB (a miss), then the STLB: 7 cycles too.
  t = r.load(va + 8, 1, now + 100);
  CHECK(t.source == TranslateResult::L2Hit);
  CHECK(t.ready == now + 100 + 7);
  CHECK_FALSE(t.fault);
  CHECK(t.pa == 0x33008);
  CHECK(r.count("tlb.dtlb_load.misses") == 1);
  CHECK(r.l1_load.probe(va, 1));

  // With a 1-cycle L1 DTLB (tlb.dtlb_store.latency = 1) the L1 hit is ready 1 cycle later and the
  // STLB hit at 1 + 7.
  test::MmuRig slow(pg::Isa::x86_64, [](CoreMmuParams& p) { p.l1.at(1).latency = 1; });
  slow.l2.fill(va, tr(va, 0x33000, PageSize::k4K, true));
  t = slow.store(va, 1, now);
  CHECK(t.source == TranslateResult::L2Hit);
  CHECK(t.ready == now + 8);
  CHECK_FALSE(t.fault);
  t = slow.store(va, 1, now);
  CHECK(t.source == TranslateResult::L1Hit);
  CHECK(t.ready == now + 1);

  // The N1: the L1 DTLB serves loads and stores; its L2 TLB hit costs 3 cycles.
  test::MmuRig n1(pg::Isa::arm64);
  CHECK(&n1.l1 == &n1.l1_load);
  n1.l2.fill(va, tr(va, 0x44000, PageSize::k4K, true));
  t = n1.load(va, 1, now);
  CHECK(t.source == TranslateResult::L2Hit);
  CHECK(t.ready == now + 3);
  t = n1.store(va, 1, now);
  CHECK(t.source == TranslateResult::L1Hit);
  CHECK(t.ready == now);
  CHECK_FALSE(t.need_dirty);  // (arm64: no D-flag assist)
}

TEST_CASE("tlb: parameters, presets and validation", "[tlb][params]") {
  Schema schema;
  std::vector<TlbParams> presets = {
      presets::i7().l1[0], presets::i7().l1[1],
      presets::i7().l2, presets::n1().l1[0],
      presets::n1().l2};
  Params dp = Params::declaring(schema);
  for (TlbParams& t : presets) t.visit(dp);
  REQUIRE(schema.find("tlb.stlb.a.page_sizes"));
  CHECK(schema.find("tlb.stlb.a.page_sizes")->default_text == "4K+2M");
  CHECK(schema.find("tlb.stlb.b.entries")->default_text == "1024");
  CHECK(schema.find("tlb.stlb.latency")->default_text == "7");
  CHECK(schema.find("tlb.dtlb_load.4k.ways")->default_text == "4");
  CHECK(schema.find("tlb.dtlb_store.entries")->default_text == "16");
  CHECK(schema.find("tlb.l1_dtlb.contiguous_64k")->default_text == "true");
  CHECK(schema.find("tlb.l2_tlb.ways")->default_text == "5");
  CHECK(schema.find("tlb.l2_tlb.latency")->default_text == "3");
  CHECK(schema.find("tlb.stlb.splinter")->default_text == "false");

  auto read = [&](Config& cfg, TlbParams t) {
    Params rp = Params::reading(cfg);
    t.visit(rp);
    return t;
  };
  {
    // Intel's "96 entries" for the 4K load DTLB: 24 sets of 4 ways, modulo-indexed.
    Config cfg(schema);
    cfg.set("tlb.dtlb_load.4k.entries", "96", "test");
    TlbParams t = read(cfg, presets::i7().l1[0]);
    Stats s;
    Tlb tlb(t, s);
    CHECK(tlb.capacity() == 96 + 32 + 8);
    for (uint64_t k = 0; k < 96; ++k) tlb.fill(k * K4, tr(k * K4, k * K4, PageSize::k4K));
    CHECK(count(s, "tlb.dtlb_load.evictions") == 0);
    tlb.fill(96 * K4, tr(96 * K4, 0, PageSize::k4K));  // set 0 again
    CHECK(count(s, "tlb.dtlb_load.evictions") == 1);
    CHECK_FALSE(tlb.probe(0, 1));
  }
  {
    Config cfg(schema);
    cfg.set("tlb.stlb.a.page_sizes", "4K+3M", "test");
    CHECK_THROWS_WITH(read(cfg, presets::i7().l2),
                      Catch::Contains("tlb.stlb.a.page_sizes") && Catch::Contains("3M") &&
                          Catch::Contains("allowed"));
  }
  {
    Config cfg(schema);
    cfg.set("tlb.l2_tlb.entries", "1281", "test");
    CHECK_THROWS_WITH(read(cfg, presets::n1().l2),
                      Catch::Contains("tlb.l2_tlb.entries") && Catch::Contains("multiple"));
  }
  {
    Config cfg(schema);
    cfg.set("tlb.l1_dtlb.page_sizes", "4K+2M", "test");  // contiguous_64k needs 64K entries
    CHECK_THROWS_AS(read(cfg, presets::n1().l1[0]), UserError);
  }
}

TEST_CASE("tlb: trace events for fills and invalidations", "[tlb][trace]") {
  Stats s;
  Trace trace;
  std::string out;
  trace.open_buffer(&out, make_ftrace_format());
  TraceContext ctx;
  ctx.trace = &trace;
  ctx.cpu = 2;
  ctx.time_ps = 1'500'000;
  ctx.task = {"fork-reuse", 7};
  Tlb t(presets::i7().l2, s, &ctx);
  TlbEntry e = tr(0x7000'5000, 0x9000, PageSize::k4K, false);
  e.speculative = true;
  t.fill(0x7000'5123, e);
  t.invalidate_page(0x7000'5000, 1, "pf");
  t.invalidate_all("cr3");
  trace.close();
  CHECK_THAT(out, Catch::Contains("tlb_fill: address=0x70005000 size=4K perm=ro spec=1 tlb=stlb"));
  CHECK_THAT(out, Catch::Contains("[002]"));
  CHECK_THAT(out, Catch::Contains("tlb_invalidate: address=0x70005000 reason=pf tlb=stlb removed=1"));
  CHECK_THAT(out, Catch::Contains("tlb_invalidate: address=all reason=cr3 tlb=stlb removed=0"));
  // Without a trace context nothing is written and nothing breaks.
  Tlb quiet(presets::named(presets::i7().l2, "quiet"), s);
  quiet.fill(0x1000, e);
  CHECK(trace.events() == 3);
}

TEST_CASE("tlb: for_each enumerates every cached translation", "[tlb]") {
  Stats s;
  Tlb t(presets::n1().l2, s);
  t.fill(0x1000, tr(0x1000, 0x11000, PageSize::k4K));
  t.fill(0x20'0000, tr(0x20'0000, 0x40'0000, PageSize::k2M, false));
  t.fill(0x50'0000, tr(0x50'0000, 0x60'0000, PageSize::k4K, false, 1, true));
  size_t n = 0, ro = 0, b64 = 0;
  t.for_each([&](const TlbEntry& e) {
    ++n;
    ro += !e.writable;
    b64 += e.size == PageSize::k64K;
  });
  CHECK(n == 3);
  CHECK(ro == 2);
  CHECK(b64 == 1);
}

TEST_CASE("tlb: overlapping entries of two sizes: the smallest wins, in FA and set-assoc TLBs",
          "[tlb]") {
  Stats s;
  for (TlbParams p : {presets::n1().l1[0], presets::i7().l2}) {
    Tlb t(p, s);
    const uint64_t va = 0x4020'5000;
    t.fill(va, tr(va, 0x8000'0000, PageSize::k2M));          // 2M: pa 0x8000'5000 for va
    t.fill(va, tr(va, 0x9000'0000, PageSize::k4K, false));   // a 4K entry inside it
    t.fill(0x4030'0000, tr(0x4030'0000, 0x7000'0000, PageSize::k4K));  // elsewhere in the 2M
    const TlbEntry* e = t.lookup(va + 8, 1);
    REQUIRE(e);
    CHECK(e->size == PageSize::k4K);
    CHECK(e->pa(va + 8) == 0x9000'0008);
    CHECK(t.lookup(0x4030'0000, 1)->size == PageSize::k4K);
    CHECK(t.lookup(0x4030'1000, 1)->size == PageSize::k2M);
    t.invalidate_page(0x4030'0000, 1, "test");  // drops the 2M entry and that 4K entry
    CHECK(t.lookup(va, 1)->size == PageSize::k4K);
    CHECK(t.lookup(0x4030'1000, 1) == nullptr);
    CHECK(t.lookup(va, 2) == nullptr);
  }
}

namespace {

// The reference: every slot scanned, as the TLB was first written (a set's ways in order: the
// same page's slot, else the first invalid slot, else the least recently used; lookups smallest
// size first). The Tlb under test indexes fully associative TLBs and keeps them in LRU order.
class RefTlb {
 public:
  explicit RefTlb(const TlbParams& p) : p_(p) {
    uint32_t first = 0;
    for (const TlbArrayParams& a : p.arrays) {
      arrays_.push_back({a.entries / a.ways, a.ways, first, a.mask});
      first += a.entries;
    }
    slots_.resize(first);
    for (const auto& a : arrays_) held_ |= a.mask;
  }
  const TlbEntry* lookup(uint64_t va, uint16_t asid, bool touch) {
    for (unsigned si = 0; si < kNumPageSizes; ++si) {
      if (!(held_ & (1u << si))) continue;
      uint32_t ways;
      Slot* set = set_for(PageSize(si), va, &ways);
      for (uint32_t w = 0; w < ways; ++w)
        if (set[w].valid && set[w].e.size == PageSize(si) && set[w].e.asid == asid &&
            set[w].e.vbase == (va & page_size_mask(PageSize(si)))) {
          if (touch) set[w].lru = ++clock_;
          return &set[w].e;
        }
    }
    return nullptr;
  }
  // `placed`: the entry as the Tlb under test stored it (placement is not what is compared here).
  bool fill(const TlbEntry& placed) {
    uint32_t ways;
    Slot* set = set_for(placed.size, placed.vbase, &ways);
    Slot* v = nullptr;
    bool evicted = false;
    for (uint32_t w = 0; w < ways; ++w) {
      Slot& s = set[w];
      if (s.valid && s.e.vbase == placed.vbase && s.e.size == placed.size && s.e.asid == placed.asid) {
        v = &s;
        break;
      }
      if (!v || (v->valid && (!s.valid || s.lru < v->lru))) v = &s;
    }
    evicted = v->valid && !(v->e.vbase == placed.vbase && v->e.size == placed.size && v->e.asid == placed.asid);
    v->e = placed;
    v->valid = true;
    v->lru = ++clock_;
    return evicted;
  }
  unsigned invalidate(const std::function<bool(const TlbEntry&)>& match) {
    unsigned n = 0;
    for (Slot& s : slots_)
      if (s.valid && match(s.e)) {
        s.valid = false;
        ++n;
      }
    return n;
  }
  std::vector<std::tuple<uint64_t, int, uint16_t, uint64_t, bool>> contents() const {
    std::vector<std::tuple<uint64_t, int, uint16_t, uint64_t, bool>> v;
    for (const Slot& s : slots_)
      if (s.valid) v.emplace_back(s.e.vbase, int(s.e.size), s.e.asid, s.e.pbase, s.e.writable);
    std::sort(v.begin(), v.end());
    return v;
  }

 private:
  struct Slot {
    TlbEntry e;
    uint64_t lru = 0;
    bool valid = false;
  };
  struct Arr {
    uint32_t sets, ways, first;
    PageSizeMask mask;
  };
  Slot* set_for(PageSize s, uint64_t va, uint32_t* ways) {
    std::vector<const Arr*> r;
    for (const Arr& a : arrays_)
      if (a.mask & (1u << unsigned(s))) r.push_back(&a);
    uint64_t vpn = va >> page_size_shift(s);
    const Arr* a = r[0];
    if (r.size() > 1) a = r[(vpn / a->sets) % r.size()];
    *ways = a->ways;
    return &slots_[a->first + (vpn % a->sets) * a->ways];
  }
  TlbParams p_;
  std::vector<Arr> arrays_;
  std::vector<Slot> slots_;
  PageSizeMask held_ = 0;
  uint64_t clock_ = 0;
};

void differential_tlb(const TlbParams& params, uint64_t seed, int ops) {
  Stats stats;
  Tlb tlb(params, stats);
  RefTlb ref(params);
  wl::Rng rng{seed};
  auto rnd = [&](uint64_t n) { return rng.below(n); };
  const PageSize sizes[] = {PageSize::k4K, PageSize::k64K, PageSize::k2M, PageSize::k1G};
  uint64_t evictions = 0, removed = 0;
  for (int op = 0; op < ops; ++op) {
    // A small address space (two 1G regions, a few 2M blocks, many 4K pages) so that sets
    // collide, sizes overlap and the same pages come back.
    const uint64_t va = (rnd(2) << 30) | (rnd(4) << 21) | (rnd(96) << 12) | rnd(4096);
    const uint16_t asid = uint16_t(1 + rnd(3));
    INFO("op " << op << " va " << std::hex << va << std::dec << " asid " << asid);
    switch (rnd(10)) {
      case 0: case 1: case 2: case 3: {  // fill
        TlbEntry t = tr(va, 0x40000000 + rnd(1 << 20) * 4096, sizes[rnd(4)], rnd(2), asid, rnd(4) == 0);
        const TlbEntry* placed = tlb.fill(va, t);
        if (!placed) break;
        evictions += ref.fill(*placed);
        break;
      }
      case 4: case 5: case 6: {  // lookup (with LRU update)
        const TlbEntry* a = tlb.lookup(va, asid);
        const TlbEntry* b = ref.lookup(va, asid, true);
        REQUIRE(bool(a) == bool(b));
        if (a) {
          REQUIRE(a->vbase == b->vbase);
          REQUIRE(a->size == b->size);
          REQUIRE(a->pbase == b->pbase);
          REQUIRE(a->writable == b->writable);
        }
        break;
      }
      case 7: {  // probe (no LRU update)
        const TlbEntry* a = tlb.probe(va, asid);
        const TlbEntry* b = ref.lookup(va, asid, false);
        REQUIRE(bool(a) == bool(b));
        if (a) REQUIRE(a->pbase == b->pbase);
        break;
      }
      case 8: {  // INVLPG / TLBI VAE1
        unsigned n = tlb.invalidate_page(va, asid, "test");
        REQUIRE(n == ref.invalidate([&](const TlbEntry& e) { return e.asid == asid && e.covers(va); }));
        removed += n;
        break;
      }
      default: {
        if (rnd(20) == 0) {
          unsigned n = tlb.invalidate_all("test");
          REQUIRE(n == ref.invalidate([](const TlbEntry&) { return true; }));
          removed += n;
        } else if (rnd(10) == 0) {
          unsigned n = tlb.invalidate_asid(asid, "test");
          REQUIRE(n == ref.invalidate([&](const TlbEntry& e) { return e.asid == asid; }));
          removed += n;
        }
        break;
      }
    }
    if (op % 64 == 0) {
      std::vector<std::tuple<uint64_t, int, uint16_t, uint64_t, bool>> got;
      tlb.for_each([&](const TlbEntry& e) { got.emplace_back(e.vbase, int(e.size), e.asid, e.pbase, e.writable); });
      std::sort(got.begin(), got.end());
      REQUIRE(got == ref.contents());
      REQUIRE(tlb.occupancy() == got.size());
    }
  }
  REQUIRE(count(stats, "tlb." + params.name + ".evictions") == evictions);
  REQUIRE(count(stats, "tlb." + params.name + ".invalidations") == removed);
}

}  // namespace

TEST_CASE("tlb: every geometry agrees with a plain scan of its slots over random fills, lookups and invalidations",
          "[tlb][differential]") {
  // Fully associative (indexed, LRU list) and set-associative ones, one or several arrays.
  TlbParams small_fa;
  small_fa.name = "small_fa";
  small_fa.arrays = {{"", 4, 4, "4K+2M", 0}};
  small_fa.validate();
  TlbParams odd_sets;
  odd_sets.name = "odd_sets";
  odd_sets.arrays = {{"", 24, 4, "4K", 0}, {"big", 12, 3, "2M+1G", 0}};
  odd_sets.validate();
  const TlbParams geometries[] = {
      presets::i7().l1[1], presets::i7().l1[0],
      presets::i7().l2,       presets::n1().l1[0],
      presets::n1().l2,     small_fa,
      odd_sets};
  for (const TlbParams& p : geometries) {
    for (uint64_t seed : {1, 2, 3}) {
      INFO("TLB " << p.name << " seed " << seed);
      differential_tlb(p, seed, 20000);
    }
  }
}

TEST_CASE("tlb: a fill sequence on a full fully associative TLB is the fills one by one", "[tlb][differential]") {
  // The run-ahead reuse makes an L2 TLB's hits and an L1's fills in one call each
  // (hit_slots, fill_sequence_evicting); afterwards both TLBs must behave as if each lookup and
  // fill had been made: same entries, same LRU order (checked by what later fills evict), same
  // counters.
  for (unsigned n : {1u, 5u, 15u, 16u, 17u, 40u}) {
    INFO("fills " << n);
    Stats sa, sb;
    const TlbParams l1p = presets::i7().l1[1];
    const TlbParams l2p = presets::i7().l2;
    Tlb l1a(l1p, sa), l1b(l1p, sb), l2a(l2p, sa), l2b(l2p, sb);
    // Fill the L1s full (and touch some entries so that the LRU order is not the fill order).
    for (unsigned i = 0; i < 16; ++i) {
      l1a.fill(0x100000 + i * 4096, tr(0x100000 + i * 4096, 0x9000000 + i * 4096, PageSize::k4K));
      l1b.fill(0x100000 + i * 4096, tr(0x100000 + i * 4096, 0x9000000 + i * 4096, PageSize::k4K));
    }
    for (unsigned i : {3u, 7u, 1u}) {
      REQUIRE(l1a.lookup(0x100000 + i * 4096, 1));
      REQUIRE(l1b.lookup(0x100000 + i * 4096, 1));
    }
    REQUIRE(TlbReplay(l1b).full_fully_associative());
    // The L2s hold the pages the sequence fills, read-only and writable.
    std::vector<uint64_t> vas;
    for (unsigned k = 0; k < n; ++k) {
      const uint64_t va = 0x200000 + k * 4096;
      vas.push_back(va);
      l2a.fill(va, tr(va, 0x7000000 + k * 4096, PageSize::k4K, k % 3 == 0));
      l2b.fill(va, tr(va, 0x7000000 + k * 4096, PageSize::k4K, k % 3 == 0));
    }
    // One by one: an L1 miss, an L2 hit, an L1 fill of a copy marked speculative.
    for (uint64_t va : vas) {
      REQUIRE(!l1a.lookup(va, 1));
      const TlbEntry* e = l2a.lookup(va, 1);
      REQUIRE(e);
      TlbEntry c = *e;
      c.speculative = true;
      l1a.fill(va, c);
    }
    // As a sequence.
    std::vector<uint32_t> slots;
    for (uint64_t va : vas) {
      const TlbEntry* e = l2b.probe(va, 1);
      REQUIRE(e);
      REQUIRE(TlbReplay(l2b).slot_holds_4k(l2b.slot_of(e), va, 1));
      slots.push_back(l2b.slot_of(e));
    }
    const size_t readonly = TlbReplay(l2b).count_readonly(slots.data(), slots.size());
    TlbReplay(l2b).hit_slots(slots.data(), slots.size());
    TlbReplay(l1b).count_misses(n);
    TlbReplay(l1b).fill_sequence_evicting(l2b, slots.data(), slots.size(), true, readonly);
    for (const char* c : {"hits", "misses", "fills", "fills_readonly", "evictions"}) {
      INFO(c);
      CHECK(count(sa, std::string("tlb.dtlb_store.") + c) == count(sb, std::string("tlb.dtlb_store.") + c));
      CHECK(count(sa, std::string("tlb.stlb.") + c) == count(sb, std::string("tlb.stlb.") + c));
    }
    auto contents = [](const Tlb& t) {
      std::vector<std::tuple<uint64_t, uint64_t, bool, bool>> v;
      t.for_each([&](const TlbEntry& e) { v.emplace_back(e.vbase, e.pbase, e.writable, e.speculative); });
      std::sort(v.begin(), v.end());
      return v;
    };
    CHECK(contents(l1a) == contents(l1b));
    // The LRU order: 16 more fills evict the entries in the same order in both.
    for (unsigned k = 0; k < 16; ++k) {
      const uint64_t va = 0x400000 + k * 4096;
      l1a.fill(va, tr(va, 0x5000000 + k * 4096, PageSize::k4K));
      l1b.fill(va, tr(va, 0x5000000 + k * 4096, PageSize::k4K));
      CHECK(contents(l1a) == contents(l1b));
    }
    // The L2s' entries (their LRU order is checked by whole runs: tests/platforms/test_runahead_reuse.cpp).
    CHECK(contents(l2a) == contents(l2b));
  }
}

TEST_CASE("tlb: after a whole refill of increasing 4K pages (the sequence state), any mix of operations does what the fills one by one would",
          "[tlb][differential]") {
  // fill_sequence_evicting keeps neither the index nor the LRU list after a whole refill of
  // strictly increasing 4K pages; lookups, probes, fills, invalidations, range checks and more
  // sequences must then do exactly what they do after the fills one by one. Two L1s: `a` filled
  // one by one, `b` by sequences; after every operation their answers, contents and counters
  // agree (the LRU order shows in what later fills evict).
  for (const TlbParams& l1p : {presets::i7().l1[1], presets::n1().l1[0]}) {
    for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
      INFO("TLB " << l1p.name << " seed " << seed);
      Stats sa, sb;
      const TlbParams l2p = presets::i7().l2;
      Tlb l1a(l1p, sa), l1b(l1p, sb), l2a(l2p, sa), l2b(l2p, sb);
      const size_t cap = l1a.capacity();
      wl::Rng rng{seed};
      auto rnd = [&](uint64_t n) { return rng.below(n); };
      // The L2s hold 4K pages 0x10000000 + [0, 256) * 4K, some read-only, ASIDs 1 and 2.
      for (unsigned k = 0; k < 256; ++k) {
        const uint64_t va = 0x10000000 + uint64_t(k) * 4096;
        l2a.fill(va, tr(va, 0x7000000 + k * 4096, PageSize::k4K, k % 3 != 0, uint16_t(1 + (k % 7 == 0))));
        l2b.fill(va, tr(va, 0x7000000 + k * 4096, PageSize::k4K, k % 3 != 0, uint16_t(1 + (k % 7 == 0))));
      }
      auto contents = [](const Tlb& t) {
        std::vector<std::tuple<uint64_t, uint64_t, uint16_t, bool, bool, int>> v;
        t.for_each([&](const TlbEntry& e) {
          v.emplace_back(e.vbase, e.pbase, e.asid, e.writable, e.speculative, int(e.size));
        });
        std::sort(v.begin(), v.end());
        return v;
      };
      // A sequence of n fills from the L2s, increasing pages from `first` (with gaps of up to
      // `gap` pages), or with one page out of order.
      auto sequence = [&](size_t n, unsigned first, unsigned gap, bool disorder) {
        std::vector<uint64_t> vas;
        unsigned k = first;
        for (size_t i = 0; i < n && k < 256; ++i, k += 1 + unsigned(rnd(gap + 1)))
          vas.push_back(0x10000000 + uint64_t(k) * 4096);
        if (disorder && vas.size() > 2) std::swap(vas[vas.size() - 1], vas[vas.size() - 2]);
        std::vector<uint32_t> slots;
        for (uint64_t va : vas) {
          const TlbEntry* e = l2b.probe(va, l2b.probe(va, 1) ? 1 : 2);
          REQUIRE(e);
          slots.push_back(l2b.slot_of(e));
        }
        // (The caller's conditions: every page misses the L1 and none of the sequence finds an
        // earlier one of it.)
        for (uint64_t va : vas) {
          const uint16_t asid = l2a.probe(va, 1) ? 1 : 2;
          if (l1a.probe(va, asid)) l1a.invalidate_page(va, asid, "test");
          if (l1b.probe(va, asid)) l1b.invalidate_page(va, asid, "test");
        }
        if (!TlbReplay(l1b).full_fully_associative()) return;  // (fill_sequence_evicting's precondition)
        for (uint64_t va : vas) {
          const uint16_t asid = l2a.probe(va, 1) ? 1 : 2;
          REQUIRE(!l1a.lookup(va, asid));
          TlbEntry c = *l2a.lookup(va, asid);
          c.speculative = true;
          l1a.fill(va, c);
        }
        const size_t readonly = TlbReplay(l2b).count_readonly(slots.data(), slots.size());
        TlbReplay(l2b).hit_slots(slots.data(), slots.size());
        TlbReplay(l1b).count_misses(slots.size());
        TlbReplay(l1b).fill_sequence_evicting(l2b, slots.data(), slots.size(), true, readonly);
      };
      // Full first (every slot valid).
      for (unsigned i = 0; i < cap; ++i) {
        const uint64_t va = 0x20000000 + uint64_t(i) * 4096;
        l1a.fill(va, tr(va, 0x9000000 + i * 4096, PageSize::k4K));
        l1b.fill(va, tr(va, 0x9000000 + i * 4096, PageSize::k4K));
      }
      bool entered = false;
      for (int op = 0; op < 3000; ++op) {
        const uint64_t page = 0x10000000 + rnd(256) * 4096;
        const uint16_t asid = uint16_t(1 + rnd(2));
        switch (rnd(12)) {
          case 0:
          case 1:  // a whole refill, increasing (the sequence state) or not
            sequence(cap + rnd(cap), unsigned(rnd(64)), unsigned(rnd(3)), rnd(6) == 0);
            break;
          case 2:  // a partial one
            sequence(1 + rnd(cap - 1), unsigned(rnd(200)), 1, false);
            break;
          case 3:
          case 4: {  // lookups: hits (the most recently used or not) and misses
            const TlbEntry* a = l1a.lookup(page, asid);
            const TlbEntry* b = l1b.lookup(page, asid);
            REQUIRE(bool(a) == bool(b));
            if (a) REQUIRE(a->pbase == b->pbase);
            break;
          }
          case 5: {  // a lookup of a page the L1 holds: the most recently used, or another
            std::vector<uint64_t> held;
            l1a.for_each([&](const TlbEntry& e) { held.push_back(e.vbase | e.asid); });
            if (held.empty()) break;
            std::sort(held.begin(), held.end());
            const uint64_t h = held[rnd(held.size())];
            REQUIRE(bool(l1a.lookup(h & ~uint64_t(0xfff), uint16_t(h & 0xfff))) ==
                    bool(l1b.lookup(h & ~uint64_t(0xfff), uint16_t(h & 0xfff))));
            break;
          }
          case 6:
          case 7: {  // fills: new pages, 2M pages, the same page again
            const PageSize s = rnd(8) == 0 ? PageSize::k2M : PageSize::k4K;
            const uint64_t va = rnd(4) == 0 ? page : 0x40000000 + rnd(1 << 12) * 4096;
            const TlbEntry t = tr(va, 0x50000000 + rnd(1 << 16) * 4096, s, rnd(2), asid);
            const TlbEntry* a = l1a.fill(va, t);
            const TlbEntry* b = l1b.fill(va, t);
            REQUIRE(bool(a) == bool(b));
            break;
          }
          case 8: {  // invalidations
            const uint64_t va = rnd(2) ? page : 0x40000000 + rnd(1 << 12) * 4096;
            REQUIRE(l1a.invalidate_page(va, asid, "test") == l1b.invalidate_page(va, asid, "test"));
            if (rnd(40) == 0) REQUIRE(l1a.invalidate_asid(asid, "test") == l1b.invalidate_asid(asid, "test"));
            break;
          }
          case 9:
          case 10: {  // the range check, against lookups of every page of the range
            const uint64_t lo = (page >> 12) - rnd(40), hi = lo + rnd(40);
            bool any = false;
            for (uint64_t p = lo; p <= hi; ++p) any = any || l1a.probe(p << 12, asid);
            REQUIRE(TlbReplay(l1b).covers_page_in(asid, lo, hi) == any);
            break;
          }
          default: {  // probes
            const TlbEntry* a = l1a.probe(page, asid);
            const TlbEntry* b = l1b.probe(page, asid);
            REQUIRE(bool(a) == bool(b));
            break;
          }
        }
        entered = entered || TlbReplay(l1b).sequence_state();
        REQUIRE(contents(l1a) == contents(l1b));
        REQUIRE(l1a.occupancy() == l1b.occupancy());
      }
      CHECK(entered);
      for (const char* c : {"hits", "misses", "fills", "fills_readonly", "evictions", "invalidations"}) {
        INFO(c);
        CHECK(count(sa, "tlb." + l1p.name + "." + c) == count(sb, "tlb." + l1p.name + "." + c));
        CHECK(count(sa, std::string("tlb.stlb.") + c) == count(sb, std::string("tlb.stlb.") + c));
      }
      CHECK(contents(l2a) == contents(l2b));
    }
  }
}
