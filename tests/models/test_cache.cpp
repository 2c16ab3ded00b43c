// SPDX-License-Identifier: GPL-2.0-only
// Caches: geometry, LRU, exact load-to-use latency per level, bulk touch, shared LLC, parameters.
#include <catch2/catch.hpp>

#include "models/presets.hpp"
#include "base/error.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"

using namespace mmusim;
using namespace mmusim::hw;

namespace {
// Accesses far apart in time (none waits for another's DRAM transfer: memory.bandwidth).
uint64_t next_t() {
  static uint64_t t = 1000000;
  return t += 10000;
}
}  // namespace

namespace {
constexpr double kGhz = 4.9;
// 90 ns at 4.9 GHz.
constexpr uint32_t kDram = 441;
}  // namespace

TEST_CASE("cache: Golden Cove geometry from CPUID sizes, including the 40960-set LLC",
          "[cache]") {
  HierarchyParams p = presets::i7().caches;
  CHECK(p.l1d.sets() == 64);
  CHECK(p.l2.sets() == 2048);
  CHECK(p.llc.sets() == 40960);
  Stats s;
  MemoryHierarchy h(p, kGhz, s);
  CHECK(h.llc().sets() == 40960);
  CHECK(h.latency(MemoryHierarchy::DRAM) == kDram);
}

TEST_CASE("cache: load-to-use latency is exactly that of the level that hits", "[cache]") {
  Stats s;
  MemoryHierarchy h(presets::i7().caches, kGhz, s);
  const uint64_t a = 0x40000;

  // Cold: DRAM, and the line is installed everywhere.
  CHECK(h.access(a, false, next_t()) == kDram);
  CHECK(h.l1d().probe(a));
  CHECK(h.l2().probe(a));
  CHECK(h.llc().probe(a));
  // Another byte of the same line: L1D, 5 cycles (not 4, not 15).
  uint32_t l1 = h.access(a + 63, false, next_t());
  CHECK(l1 == 5);
  CHECK_FALSE(l1 == 4);

  // Evict it from the L1D only: 12 more lines of the same L1D set (stride 4K = 64 sets x 64 B),
  // which fall in different L2 sets (2048 sets).
  for (int k = 1; k <= 12; ++k) h.access(a + uint64_t(k) * 4096, false, next_t());
  CHECK_FALSE(h.l1d().probe(a));
  CHECK(h.l2().probe(a));
  CHECK(h.access(a, false, next_t()) == 15);
  CHECK(h.l1d().probe(a));  // the L2 hit refilled the L1D

  // Evict it from L1D and L2: 12 lines of the same L1D and L2 set (stride 128K); they land in
  // other LLC sets (40960 sets is not a divisor of 2048-line strides), so the LLC keeps it.
  for (int k = 1; k <= 12; ++k) h.access(a + uint64_t(k) * (128 << 10), false, next_t());
  CHECK_FALSE(h.l1d().probe(a));
  CHECK_FALSE(h.l2().probe(a));
  CHECK(h.llc().probe(a));
  CHECK(h.access(a, false, next_t()) == 60);
  CHECK(h.l1d().probe(a));
  CHECK(h.l2().probe(a));

  CHECK(s.find_counter("cache.l1d.hits")->value() == 1);
  CHECK(s.find_counter("cache.l2.hits")->value() == 1);
  CHECK(s.find_counter("cache.llc.hits")->value() == 1);
  CHECK(s.find_counter("cache.l1d.misses")->value() == 1 + 1 + 12 + 1 + 12);
}

TEST_CASE("cache: LRU replacement within a set", "[cache]") {
  Stats s;
  CacheParams p{"t", 4 * 64 * 2, 4, 3};  // 2 sets x 4 ways
  Cache c(p, s);
  const uint64_t stride = 2 * 64;  // same set
  for (uint64_t k = 0; k < 4; ++k) CHECK_FALSE(c.access(k * stride));
  CHECK(c.access(0));               // line 0 most recent; line 1 is now the LRU
  CHECK_FALSE(c.access(4 * stride));  // evicts line 1
  CHECK(c.probe(0));
  CHECK_FALSE(c.probe(1 * stride));
  CHECK(c.probe(2 * stride));
  CHECK(c.probe(3 * stride));
  CHECK(c.probe(4 * stride));
  CHECK_FALSE(c.probe(64));  // the other set is untouched
}

TEST_CASE("cache: non-power-of-two set counts index by modulo", "[cache]") {
  Stats s;
  CacheParams p{"t", 3 * 2 * 64, 2, 1};  // 3 sets x 2 ways
  Cache c(p, s);
  REQUIRE(c.sets() == 3);
  // Lines 0, 3 and 6 share set 0; line 4 is in set 1.
  c.access(0 * 64);
  c.access(3 * 64);
  c.access(4 * 64);
  CHECK(c.probe(0));
  c.access(6 * 64);  // evicts line 0 (LRU of set 0)
  CHECK_FALSE(c.probe(0));
  CHECK(c.probe(3 * 64));
  CHECK(c.probe(4 * 64));
  // A power-of-two mask would have put line 4 (100b) with line 0 in a 2-set view; and line 2
  // must go to set 2, not collide with anything above.
  c.access(2 * 64);
  CHECK(c.probe(3 * 64));
  CHECK(c.probe(6 * 64));
  CHECK(c.occupancy() == 4);

  // The real LLC: lines L and L + 40960 conflict, L and L + 32768 (a power-of-two mask's
  // alias) do not.
  HierarchyParams g = presets::i7().caches;
  Cache llc(g.llc, s);
  const uint64_t base = 5 * 64;
  for (uint64_t k = 0; k < 10; ++k) llc.access(base + k * 40960 * 64);
  for (uint64_t k = 1; k <= 4; ++k) llc.access(base + k * 32768 * 64);
  CHECK(llc.probe(base));  // the set is full but nothing of set 5 was added
  llc.access(base + 10 * 40960ull * 64);
  CHECK_FALSE(llc.probe(base));
  CHECK(llc.probe(base + 1 * 40960ull * 64));
}

TEST_CASE("cache: touch installs lines without counting, and reports where they came from",
          "[cache]") {
  Stats s;
  MemoryHierarchy h(presets::i7().caches, kGhz, s);
  const uint64_t page = 0x123000;
  MemoryHierarchy::Touch t = h.touch(page, 4096, true);
  CHECK(t.lines[MemoryHierarchy::DRAM] == 64);
  CHECK(s.find_counter("cache.l1d.misses")->value() == 0);
  CHECK(s.find_counter("cache.l1d.hits")->value() == 0);
  t = h.touch(page + 32, 64, false);  // straddles two lines
  CHECK(t.lines[MemoryHierarchy::L1D] == 2);
  CHECK(h.touch(page, 0, true).lines[MemoryHierarchy::L1D] == 0);
  // A 4K page fits the 48K L1D: every line hits afterwards.
  for (uint64_t off = 0; off < 4096; off += 64) REQUIRE(h.access(page + off, false, next_t()) == 5);

  h.invalidate_all();
  CHECK(h.access(page, false, next_t()) == kDram);
}

TEST_CASE("cache: an LLC shared by two cores' hierarchies", "[cache]") {
  Stats s;
  HierarchyParams p = presets::i7().caches;
  Cache llc(p.llc, s);
  MemoryHierarchy c0(p, kGhz, s, &llc);
  MemoryHierarchy c1(p, kGhz, s, &llc);
  CHECK(c0.access(0x9000, false, next_t()) == kDram);
  CHECK(c1.access(0x9000, false, next_t()) == 60);  // the other core brought it into the shared LLC
  CHECK(c1.access(0x9000, false, next_t()) == 5);
  CHECK(s.find_counter("cache.llc.hits")->value() == 1);
  CHECK(s.find_counter("cache.l1d.misses")->value() == 2);  // both cores count into one key
}

TEST_CASE("cache: parameters declare with preset defaults, read overrides, reject bad sizes",
          "[cache][params]") {
  Schema schema;
  HierarchyParams decl = presets::i7().caches;
  Params dp = Params::declaring(schema);
  decl.visit(dp);
  REQUIRE(schema.find("cache.l1d.size"));
  CHECK(schema.find("cache.l1d.size")->default_text == "48K");
  CHECK(schema.find("cache.l2.size")->default_text == "1280K");
  CHECK(schema.find("cache.llc.ways")->default_text == "10");
  CHECK(schema.find("cache.llc.latency")->default_text == "60");
  CHECK(schema.find("memory.latency")->default_text == "90ns");

  Config cfg(schema);
  cfg.set("cache.l1d.size", "64K", "test");
  cfg.set("cache.l1d.ways", "4", "test");
  cfg.set("memory.latency", "100ns", "test");
  HierarchyParams rd = presets::i7().caches;
  Params rp = Params::reading(cfg);
  rd.visit(rp);
  CHECK(rd.l1d.size == 64 * 1024);
  CHECK(rd.l1d.sets() == 256);
  CHECK(rd.l2.size == 1280 * 1024);
  Stats s;
  MemoryHierarchy h(rd, 3.0, s);
  CHECK(h.latency(MemoryHierarchy::DRAM) == 300);

  Config bad(schema);
  bad.set("cache.l1d.size", "47K", "test");  // 47K / (12 x 64) is not whole
  HierarchyParams rb = presets::i7().caches;
  Params bp = Params::reading(bad);
  CHECK_THROWS_AS(rb.visit(bp), UserError);
  try {
    HierarchyParams rb2 = presets::i7().caches;
    Params bp2 = Params::reading(bad);
    rb2.visit(bp2);
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cache.l1d.size") && Catch::Contains("cache.l1d.ways"));
  }
}
