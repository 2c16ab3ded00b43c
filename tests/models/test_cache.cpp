// SPDX-License-Identifier: GPL-2.0-only
// Caches: geometry, LRU, exact load-to-use latency per level, bulk touch, shared LLC, parameters;
// MESI between cores, and a cluster of cores sharing one L2.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "models/presets.hpp"
#include "base/error.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"

using namespace mmusim;
using namespace mmusim::hw;

namespace {
// Accesses far apart in time (none waits for another's DRAM transfer: memory.read_bandwidth).
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

TEST_CASE("cache: a copy's source lines report their latencies, and from DRAM take the read path in rounds",
          "[cache]") {
  Stats s;
  MemoryHierarchy h(presets::i7().caches, kGhz, s);
  const uint64_t page = 0x456000, other = 0x789000;
  const Counter* reads = s.find_counter("memory.reads");
  REQUIRE(reads);
  // Untimed (the kernel's zeroing): latencies summed, no transfer taken.
  MemoryHierarchy::Touch t = h.touch(page, 4096, false);
  CHECK(t.lines[MemoryHierarchy::DRAM] == 64);
  CHECK(t.latency_cycles == 64u * kDram);
  CHECK(t.dram_done_cycles == 0);
  CHECK(reads->value() == 0);
  // In the L1D now: nothing to wait for.
  t = h.touch(page, 4096, false, next_t(), 8);
  CHECK(t.lines[MemoryHierarchy::L1D] == 64);
  CHECK(t.latency_cycles == 0);
  CHECK(t.dram_done_cycles == 0);
  CHECK(reads->value() == 0);
  // Cold, timed, 8 at a time: 8 rounds, each memory.latency plus its 8 transfers at most
  // (64 B at 76.8 GB/s: about 4.1 cycles each).
  const uint64_t t0 = next_t();
  t = h.touch(other, 4096, false, t0, 8);
  CHECK(t.lines[MemoryHierarchy::DRAM] == 64);
  CHECK(reads->value() == 64);
  CHECK(t.dram_done_cycles >= 8u * kDram);
  CHECK(t.dram_done_cycles <= 8u * (kDram + 8 * 5));
  // All 64 at once on an idle path: the last waits for 63 transfers; a second page asked for at
  // the same cycle waits behind the first's.
  h.invalidate_all();
  const uint64_t t1 = next_t() + 100000;
  const MemoryHierarchy::Touch a = h.touch(page, 4096, false, t1, 64);
  const MemoryHierarchy::Touch b = h.touch(other, 4096, false, t1, 64);
  // (63 transfers of about 4.1 cycles; the path's calendar keeps slots of several lines: a few
  // percent either way.)
  CHECK(a.dram_done_cycles >= kDram + 240);
  CHECK(a.dram_done_cycles <= kDram + 64 * 5);
  CHECK(b.dram_done_cycles >= a.dram_done_cycles + 64 * 4);
}

TEST_CASE("cache: a 2M copy leaves its last-copied lines in the L1D and L2 and its first ones evicted",
          "[cache]") {
  // copy_user_large_folio(): 512 sub-pages, each source read then destination written, through
  // a 48K L1D and a 1.25 MB L2 (4 MiB of traffic in all). The order decides which are left.
  const uint64_t src = 0x4000'0000, dst = 0x8000'0000, sub = 4096;
  auto copy = [&](MemoryHierarchy& h, bool descending) {
    for (uint64_t k = 0; k < 512; ++k) {
      const uint64_t i = descending ? 511 - k : k;
      h.touch(src + i * sub, sub, false);
      h.touch(dst + i * sub, sub, true);
    }
  };
  auto lines_in = [](Cache& c, uint64_t page) {
    unsigned n = 0;
    for (uint64_t off = 0; off < 4096; off += 64) n += c.probe(page + off);
    return n;
  };
  Stats s;
  SECTION("sequential: the last sub-page is hot, the first one (the faulting store's) is gone") {
    MemoryHierarchy h(presets::i7().caches, kGhz, s);
    copy(h, false);
    CHECK(lines_in(h.l1d(), dst + 511 * sub) == 64);
    CHECK(lines_in(h.l2(), dst + 511 * sub) == 64);
    CHECK(lines_in(h.l1d(), dst) == 0);
    CHECK(lines_in(h.l2(), dst) == 0);
    CHECK(lines_in(h.llc(), dst) == 64);  // (the 25 MB LLC still has it)
  }
  SECTION("target-last for sub-page 0 (process_huge_page(): from the end down to it)") {
    MemoryHierarchy h(presets::i7().caches, kGhz, s);
    copy(h, true);
    CHECK(lines_in(h.l1d(), dst) == 64);
    CHECK(lines_in(h.l2(), dst) == 64);
    CHECK(lines_in(h.l1d(), dst + 511 * sub) == 0);
    CHECK(lines_in(h.l2(), dst + 511 * sub) == 0);
  }
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

// ---------------------------------------------------------------------------------------------
// The path to DRAM (models/cache/dram.hpp) and write-backs.

TEST_CASE("dram: transfers at one time are served one line time apart, first come first served",
          "[cache][dram]") {
  Stats s;
  DramChannel d(10.0, s);  // 10 cycles per 64-byte line
  // Four requests at cycle 0: the path is free for the first, then one line time each.
  CHECK(d.read(0) == 0);
  CHECK(d.read(0) == 10);
  CHECK(d.read(0) == 20);
  CHECK(d.read(0) == 30);
  CHECK(d.read(0) == 40);  // (the next slot of four)
  // A write-back takes its transfer too: the next fill at 0 waits one more line.
  d.write_back(0);
  CHECK(d.read(0) == 60);
  // A request long after finds the path free.
  CHECK(d.read(10'000) == 0);
  // One simulated later but arriving earlier than requests already taken is not held back by
  // them: the fill at 10,000 is behind it in time.
  CHECK(d.read(9'990) == 0);
  // ... but one arriving after it is: the fill at 10,000 has the path until 10,010.
  CHECK(d.read(10'001) == 9);
  // In one slot of time too: a fill at 20,030 taken first does not hold back one at 20,005.
  CHECK(d.read(20'030) == 0);
  CHECK(d.read(20'005) == 0);
  CHECK(s.find_counter("memory.reads")->value() == 11);
  CHECK(s.find_counter("memory.writebacks")->value() == 1);
  CHECK(s.find_counter("memory.queue_cycles")->value() == 10 + 20 + 30 + 40 + 60 + 9);
}

TEST_CASE("dram: a stream of fills at the bandwidth's rate never waits, twice as fast, it queues",
          "[cache][dram]") {
  Stats s;
  DramChannel d(8.0, s);
  uint64_t waited = 0;
  for (uint64_t i = 0; i < 1000; ++i) waited += d.read(i * 8);
  CHECK(waited == 0);
  // 1000 fills, one every 4 cycles, from cycle 100,000: the n-th waits about n * 4 cycles (the
  // path serves one every 8); the last one about 4,000.
  uint64_t last = 0;
  for (uint64_t i = 0; i < 1000; ++i) last = d.read(100'000 + i * 4);
  CHECK(last >= 3990);
  CHECK(last <= 4000);
}

// The calendar's reach: a request older than reach_slots slots behind the newest one finds the
// path free. A kernel entry on one core takes its copy's source lines at its own times, up to
// about 1 ms ahead of the other cores' requests (HwPlatform: kSharedReach); within the reach they
// still queue behind each other.
TEST_CASE("dram: requests within the calendar's reach queue, older ones find the path free", "[cache][dram]") {
  Stats s;
  const size_t reach = 64;  // slots of 4 lines: 64 x 4 x 10 = 2,560 cycles
  DramChannel shortc(10.0, s, reach), longc(10.0, s, 1024);
  for (DramChannel* d : {&shortc, &longc}) {
    // Eight fills at cycle 1,000: the eighth waits 70 cycles.
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w = d->read(1'000);
    CHECK(w == 70);
    // One core's kernel entry takes a line 5,000 cycles later (simulated first).
    CHECK(d->read(6'000) == 0);
  }
  // Another core's fill at 1,000, simulated after it: 5,000 cycles back is beyond 64 slots
  // (2,560 cycles) but within 1,024 (40,960): only the long calendar still sees the eight.
  CHECK(shortc.read(1'000) == 0);
  CHECK(longc.read(1'000) == 80);
}

TEST_CASE("cache: a store dirties its line, dirty lines are written back level by level to DRAM",
          "[cache][dram]") {
  Stats s;
  HierarchyParams p = presets::i7().caches;
  MemoryHierarchy h(p, kGhz, s);
  const uint64_t a = 0x40000;
  CHECK(h.access(a, true, next_t()) == kDram);  // a store's read-for-ownership
  CHECK(h.l1d().probe_dirty(a));
  CHECK_FALSE(h.l2().probe_dirty(a));
  // 12 more lines of its L1D set (clean loads) evict it from the L1D into the L2, dirty there.
  for (int k = 1; k <= 12; ++k) h.access(a + uint64_t(k) * 4096, false, next_t());
  CHECK_FALSE(h.l1d().probe(a));
  CHECK(h.l2().probe_dirty(a));
  CHECK_FALSE(h.llc().probe_dirty(a));
  // Lines of its L2 set push it to the LLC (dirty), nothing reaches DRAM yet.
  for (int k = 1; k <= 12; ++k) h.access(a + uint64_t(k) * (128 << 10), false, next_t());
  CHECK_FALSE(h.l2().probe(a));
  CHECK(h.llc().probe_dirty(a));
  CHECK(s.find_counter("memory.writebacks")->value() == 0);
  // The LLC evicts it: 10 more lines of its LLC set (40960 sets: a stride of 40960 lines).
  const uint64_t llc_stride = uint64_t(40960) * 64;
  for (int k = 1; k <= 10; ++k) h.access(a + uint64_t(k) * llc_stride, false, next_t());
  CHECK_FALSE(h.llc().probe(a));
  CHECK(s.find_counter("memory.writebacks")->value() == 1);
  // Clean lines leave without a write-back: the loads above were all clean.
  for (int k = 11; k <= 30; ++k) h.access(a + uint64_t(k) * llc_stride, false, next_t());
  CHECK(s.find_counter("memory.writebacks")->value() == 1);
  // The kernel's bulk zeroing dirties what it touches; its evictions are counted, untimed.
  h.touch(0x8000'0000, 4096, true);
  CHECK(h.l1d().probe_dirty(0x8000'0000));
  for (int k = 1; k <= 12 + 12 + 10; ++k) h.touch(0x8000'0000 + uint64_t(k) * llc_stride, 64, false);
  CHECK(s.find_counter("memory.writebacks_untimed")->value() >= 1);
  std::string why;
  CHECK(h.llc().check_invariants(&why));
}

TEST_CASE("cache: memory.read_bandwidth and write_bandwidth are parameters with the platform's defaults",
          "[cache][dram][params]") {
  Schema schema;
  HierarchyParams decl = presets::i7().caches;
  Params dp = Params::declaring(schema);
  decl.visit(dp);
  REQUIRE(schema.find("memory.write_bandwidth"));
  CHECK(schema.find("memory.write_bandwidth")->default_text == "7.4");
  CHECK(schema.find("memory.read_bandwidth")->default_text == "76.8");
  Config cfg(schema);
  cfg.set("memory.read_bandwidth", "6.4", "test");
  HierarchyParams rd = presets::i7().caches;
  Params rp = Params::reading(cfg);
  rd.visit(rp);
  CHECK(rd.memory_read_bandwidth == 6.4);
  CHECK(rd.memory_write_bandwidth == 7.4);
  Stats s;
  MemoryHierarchy h(rd, kGhz, s);
  // 64 B at 6.4 GB/s = 10 ns = 49 cycles at 4.9 GHz.
  CHECK(h.dram().line_cycles() == Approx(49.0));
  CHECK(h.dram_writes().line_cycles() == Approx(64.0 / 7.4 * 4.9));
  CHECK_THROWS_AS(cfg.set("memory.write_bandwidth", "0", "test"), UserError);
}

// The fill buffers' merge (MemoryHierarchy::in_flight): a miss installs its line's tags at once,
// its data arrives `latency` cycles later; an access to the line before then waits for that
// arrival instead of hitting the L1D at 5 cycles (and does not fetch it again); after it, 5.
TEST_CASE("cache: an access to a line still on its way waits for it", "[cache][latency][in_flight]") {
  Stats s;
  MemoryHierarchy h(presets::i7().caches, kGhz, s);
  const uint64_t a = 0x40000, t0 = next_t();
  REQUIRE(h.access(a, false, t0) == kDram);
  CHECK(h.access(a + 8, false, t0 + 100) == kDram - 100);  // arrives at t0 + kDram
  CHECK(h.access(a + 16, false, t0 + kDram - 2) == 5);     // nearly there: the L1D latency
  CHECK(h.access(a + 24, false, t0 + kDram + 1) == 5);
  CHECK(s.find_counter("cache.llc.misses")->value() == 1);
  // An access timed before the miss was requested (the core times micro-ops in program order) is
  // not held back by it.
  const uint64_t b = 0x80000, t1 = next_t();
  REQUIRE(h.access(b, false, t1) == kDram);
  CHECK(h.access(b, false, t1 - 50) == 5);
  // An L2 hit on its way: 15 cycles, a younger access 5 cycles later waits 10.
  for (int k = 1; k <= 12; ++k) h.access(a + uint64_t(k) * 4096, false, next_t());
  REQUIRE_FALSE(h.l1d().probe(a));
  const uint64_t t2 = next_t();
  REQUIRE(h.access(a, false, t2) == 15);
  CHECK(h.access(a, false, t2 + 5) == 10);
}

TEST_CASE("dram: cores that share the fill path queue behind each other, their own paths do not", "[cache][dram]") {
  Stats s;
  HierarchyParams p = presets::i7().caches;
  p.memory_read_bandwidth = 6.4;  // 10 ns per line: 49 cycles at 4.9 GHz
  Cache llc(p.llc, s);
  MemoryHierarchy c0(p, kGhz, s, &llc), c1(p, kGhz, s, &llc);
  const uint64_t t = next_t();
  // Own paths: two cores' misses at the same cycle both start at once.
  CHECK(c0.access(0x100000, false, t) == kDram);
  CHECK(c1.access(0x200000, false, t) == kDram);
  // One path for both (several cores: HwPlatform): the second core's miss waits for the first's
  // transfer (up to one line's time: the calendar's slots hold 4 transfers, served first come,
  // first served within the slot's time, models/cache/dram.hpp).
  DramChannel shared(49.0, s);
  c0.share_fills(&shared);
  c1.share_fills(&shared);
  // (Just after the start of one of the calendar's slots, 4 x 49 cycles: where in a slot two
  // requests of one cycle fall decides whether the second waits; next_t() depends on the tests
  // run before.)
  const uint64_t u = (next_t() / 196 + 1) * 196 + 1;
  const uint32_t a = c0.access(0x300000, false, u);
  const uint32_t b = c1.access(0x400000, false, u);
  CHECK(a == kDram);
  CHECK(b > kDram);
  CHECK(b <= kDram + 49);
  // Eight more misses of each core at one cycle: 16 transfers on one path take 16 x 49 cycles;
  // the last waits for most of them (from just after a slot's start, as above).
  const uint64_t v = (next_t() / 196 + 1) * 196 + 1;
  uint32_t last = 0;
  for (unsigned i = 0; i < 8; ++i) {
    c0.access(0x500000 + i * 4096, false, v);
    last = c1.access(0x600000 + i * 4096, false, v);
  }
  CHECK(last >= kDram + 14 * 49);
  CHECK(&c0.dram() == &shared);
}

TEST_CASE("dram: a core at another clock shares the fill path in real time", "[cache][dram][clocks]") {
  // A 2.45 GHz core (half of 4.9) on a path timed in 4.9 GHz cycles, 49 of them a line (10 ns):
  // its requests and waits are converted, so a line takes it 24.5 of its own cycles.
  Stats s;
  HierarchyParams p = presets::i7().caches;
  p.memory_read_bandwidth = 6.4;
  Cache llc(p.llc, s);
  MemoryHierarchy fast(p, kGhz, s, &llc), slow(p, kGhz / 2, s, &llc);
  const uint32_t dram_slow = uint32_t(std::lround(p.memory_latency.cycles(kGhz / 2)));
  DramChannel shared(49.0, s);
  fast.share_fills(&shared);
  slow.share_fills(&shared, 2.0);
  // 8 misses of the slow core at one of its cycles (2 path cycles after a slot's start): they
  // queue 10 ns apart, the last waits for 7 lines less those 2 cycles, 341 path cycles = 170.5
  // of its own (in its own cycles the path would make it 341).
  const uint64_t v = (next_t() / 196 + 1) * 196 + 2;
  uint32_t last = 0;
  for (unsigned i = 0; i < 8; ++i) last = slow.access(0x700000 + i * 4096, false, v / 2);
  CHECK(last >= dram_slow + 170);
  CHECK(last <= dram_slow + 171);
  // The fast core asking at the same real time queues behind all 8: 390 of its cycles.
  CHECK(fast.access(0x800000, false, v) == kDram + 390);
}

TEST_CASE("cache: MESI between two cores' private caches", "[cache][coherence]") {
  Stats s;
  HierarchyParams p = presets::i7().caches;
  Cache llc(p.llc, s);
  MemoryHierarchy c0(p, kGhz, s, &llc), c1(p, kGhz, s, &llc);
  MemoryHierarchy::Peers peers;
  peers.all = {&c0, &c1};
  peers.transfer_cycles = 171;  // 35 ns at 4.9 GHz
  peers.transfers = &s.counter("t.transfers", "");
  peers.invalidations = &s.counter("t.invalidations", "");
  c0.set_peers(&peers);
  c1.set_peers(&peers);
  const uint64_t a = 0x70000;
  CHECK(c0.access(a, true, next_t()) == kDram);  // core 0 writes: Modified there
  // Core 1 reads: core 0 forwards it (a transfer, not the LLC's 60 cycles); both share it, clean.
  CHECK(c1.access(a, false, next_t()) == 171);
  CHECK_FALSE(c0.l1d().probe_dirty(a));
  CHECK(llc.probe_dirty(a));  // the modified data went to the LLC
  CHECK(c1.access(a, false, next_t()) == 5);
  CHECK(c0.access(a, false, next_t()) == 5);
  // Core 0 writes its shared copy: core 1's is invalidated (the upgrade takes a transfer).
  CHECK(c0.access(a, true, next_t()) == 5 + 171);
  CHECK_FALSE(c1.l1d().probe(a));
  CHECK_FALSE(c1.l2().probe(a));
  CHECK(c0.access(a, true, next_t()) == 5);  // Modified: no one to ask
  // Core 1 writes: it takes the modified line from core 0.
  CHECK(c1.access(a, true, next_t()) == 171);
  CHECK_FALSE(c0.l1d().probe(a));
  CHECK(s.find_counter("t.transfers")->value() == 2);
  CHECK(s.find_counter("t.invalidations")->value() == 1);
  // A line only one core ever had is Exclusive: its write asks no one.
  const uint64_t b = 0x90000;
  CHECK(c1.access(b, false, next_t()) == kDram);
  CHECK(c1.access(b, true, next_t()) == 5);
  // The kernel's bulk touch keeps the states too: core 0's write invalidates core 1's copy.
  c0.touch(b, 64, true);
  CHECK_FALSE(c1.l1d().probe(b));
  CHECK(c0.l1d().probe_dirty(b));
  // Without peers (one core) nothing of this happens.
  MemoryHierarchy solo(p, kGhz, s, &llc);
  CHECK(solo.access(b, false, next_t()) == 60);
  CHECK(solo.snoop_cycles() == 0);
}

TEST_CASE("cache: an inclusive LLC's eviction back-invalidates every core's copies", "[cache]") {
  // A tiny hierarchy: L1D 1 set x 2 ways, L2 1 set x 4 ways, LLC 1 set x 4 ways. Line a stays hot
  // in the L1D while four more lines pass through: L1D hits do not reach the LLC, whose LRU line
  // it becomes, and which evicts it at the fifth line.
  HierarchyParams p = presets::i7().caches;
  p.l1d = CacheParams{"l1d", 2 * 64, 2, 5};
  p.l2 = CacheParams{"l2", 4 * 64, 4, 15};
  p.llc = CacheParams{"llc", 4 * 64, 4, 60};
  const uint64_t a = 0x1000;
  SECTION("non-inclusive: the L1D keeps a line the LLC dropped") {
    Stats s;
    p.llc_inclusive = false;
    Cache llc(p.llc, s);
    MemoryHierarchy h(p, kGhz, s, &llc);
    // Keep a hot in the L1D: touch it between the others (the L1D's 2 ways keep it).
    h.access(a, false, next_t());
    for (uint64_t k = 1; k <= 4; ++k) {
      h.access(a + k * 64, false, next_t());
      h.access(a, false, next_t());  // L1D hit: the outer levels do not see it
    }
    CHECK_FALSE(h.llc().probe(a));
    CHECK(h.l1d().probe(a));
    CHECK(s.find_counter("cache.llc.back_invalidations") == nullptr);
  }
  SECTION("inclusive: the LLC's victim leaves the L1D and the L2; a modified copy goes to DRAM") {
    Stats s;
    p.llc_inclusive = true;
    Cache llc(p.llc, s);
    MemoryHierarchy h(p, kGhz, s, &llc);
    MemoryHierarchy other(p, kGhz, s, &llc);
    const std::vector<MemoryHierarchy*> sharers{&h, &other};
    h.set_llc_sharers(&sharers);
    other.set_llc_sharers(&sharers);
    // The other core reads a too: it holds a clean copy in its L1D and L2.
    h.access(a, true, next_t());  // dirty in h's L1D
    other.access(a, false, next_t());
    REQUIRE(other.l1d().probe(a));
    const uint64_t wb0 = s.find_counter("memory.writebacks")->value();
    for (uint64_t k = 1; k <= 4; ++k) {
      h.access(a + k * 64, false, next_t());
      if (k < 4) h.access(a, false, next_t());  // L1D hits only: the LLC's LRU does not see them
    }
    CHECK_FALSE(h.llc().probe(a));
    CHECK_FALSE(h.l1d().probe(a));
    CHECK_FALSE(h.l2().probe(a));
    CHECK_FALSE(other.l1d().probe(a));
    CHECK_FALSE(other.l2().probe(a));
    // h's L1D (its non-inclusive L2 had dropped a already, as its LRU line) and the other core's
    // L1D and L2: three copies; h's was modified and goes to DRAM.
    CHECK(s.find_counter("cache.llc.back_invalidations")->value() == 3);
    CHECK(s.find_counter("memory.writebacks")->value() == wb0 + 1);
    // The next access to a misses everywhere: DRAM.
    CHECK(h.access(a, false, next_t()) == kDram);
  }
}

TEST_CASE("cache: two sockets: remote memory, a line forwarded from the other socket, its copies invalidated",
          "[cache][numa]") {
  // Two sockets of one core each, each with its LLC; node 0's memory below 1 MiB, node 1's above.
  Stats s;
  HierarchyParams p = presets::i7().caches;
  Cache llc0(p.llc, s), llc1(p.llc, s);
  MemoryHierarchy c0(p, kGhz, s, &llc0), c1(p, kGhz, s, &llc1);
  MemoryHierarchy::Peers peers;
  peers.all = {&c0, &c1};
  peers.transfer_cycles = 171;
  c0.set_peers(&peers);
  c1.set_peers(&peers);
  DramChannel m0(1.0, s), m1(1.0, s), l0(1.0, s), l1(1.0, s);
  c0.share_fills(&m0);
  c1.share_fills(&m1);
  MemoryHierarchy::Numa numa;
  numa.node_bytes = 1 << 20;
  numa.llcs = {&llc0, &llc1};
  numa.fills = {&m0, &m1};
  numa.links = {&l0, &l1};
  numa.remote_memory_extra = 100;
  numa.remote_transfer = 500;
  numa.remote_fills = &s.counter("t.remote_fills", "");
  numa.remote_forwards = &s.counter("t.remote_forwards", "");
  c0.set_numa(&numa, 0);
  c1.set_numa(&numa, 1);
  const uint64_t node1 = 1 << 20;
  // Local and remote memory.
  CHECK(c0.access(0x1000, false, next_t()) == kDram);
  CHECK(c0.access(node1 + 0x1000, false, next_t()) == kDram + 100);
  CHECK(c1.access(node1 + 0x2000, false, next_t()) == kDram);
  CHECK(s.find_counter("t.remote_fills")->value() == 1);
  // A line the other socket's core holds modified comes over the link (remote HitM), and is
  // shared by both LLCs after; a write to it then invalidates the other socket's copies.
  const uint64_t r = node1 + 0x8000;
  CHECK(c1.access(r, true, next_t()) == kDram);
  CHECK(c0.access(r, false, next_t()) == 500);
  CHECK(llc0.probe_shared(r));
  CHECK(llc1.probe_shared(r));
  CHECK(c1.access(r, true, next_t()) == 5 + 500);
  CHECK_FALSE(llc0.probe(r));
  CHECK_FALSE(c0.l1d().probe(r));
  CHECK_FALSE(llc1.probe_shared(r));
  // A line modified in the other socket's LLC only: forwarded; the reader's later write takes it
  // exclusive and the other LLC's copy goes.
  const uint64_t q = 0x9000;
  llc1.install(q, true);
  CHECK(c0.access(q, false, next_t()) == 500);
  CHECK(s.find_counter("t.remote_forwards")->value() == 1);
  CHECK_FALSE(llc1.probe_dirty(q));
  CHECK(c0.access(q, true, next_t()) == 5 + 500);
  CHECK_FALSE(llc1.probe(q));
  CHECK(c0.access(q, true, next_t()) == 5);  // exclusive now: no one to ask
  // A clean copy in the other socket's LLC does not serve the miss: memory does (remote here).
  const uint64_t c = node1 + 0xa000;
  llc1.install(c, false);
  CHECK(c0.access(c, false, next_t()) == kDram + 100);
  CHECK(llc1.probe_shared(c));
  // A remote fill waits for the socket link as well as for the home node's memory: two misses
  // at one cycle on a link of 49 cycles per line.
  DramChannel slow_link(49.0, s);
  numa.links[0] = &slow_link;
  const uint64_t t = next_t();
  const uint32_t first = c0.access(node1 + 0x40000, false, t);
  const uint32_t second = c0.access(node1 + 0x80000, false, t);
  CHECK(first == kDram + 100);
  CHECK(second > first);
  CHECK(second <= first + 49);
}

namespace {
// Gracemont's cluster (docs/research-smt-ecores.md §2): four E-core hierarchies sharing one L2
// (mates[0] owns it), and one P-core hierarchy with its private L2, all on one LLC. Transfers in
// cycles at 4.9 GHz: an E-core takes a line from a P-core in 39 ns (191), from a mate in 50 ns
// (245: the request goes out to the ring); a P-core from a P-core in 35 ns (171), from an E-core
// in 39 ns. (200: from another cluster, of which there is none here.)
struct ClusterRig {
  static constexpr uint32_t kFromP = 191, kFromOther = 200, kFromMate = 245, kPP = 171;
  Stats s;
  HierarchyParams pp = presets::i7().caches;
  HierarchyParams ep = presets::i7_ecore().caches;
  std::unique_ptr<Cache> llc, l2;
  std::vector<std::unique_ptr<MemoryHierarchy>> h;  // E0-E3, then the P-core
  std::vector<MemoryHierarchy*> mates;
  MemoryHierarchy::Peers peers;
  uint64_t t = 1000000;
  // `small`: tiny caches (the differential test: conflicts, evictions, write-backs).
  explicit ClusterRig(bool small = false) {
    // The E-cores share the P-cores' LLC and memory (the ecore.* family has neither).
    ep.llc = pp.llc;
    ep.memory_latency = pp.memory_latency;
    ep.memory_read_bandwidth = pp.memory_read_bandwidth;
    ep.memory_write_bandwidth = pp.memory_write_bandwidth;
    if (small) {
      for (HierarchyParams* p : {&pp, &ep}) {
        p->l1d = CacheParams{"l1d", 4 * 64, 2, p->l1d.latency};
        p->l2 = CacheParams{"l2", 16 * 64, 4, p->l2.latency};
        p->llc = CacheParams{"llc", 64 * 64, 8, p->llc.latency};
      }
    }
    llc = std::make_unique<Cache>(pp.llc, s);
    l2 = std::make_unique<Cache>(ep.l2, s);
    for (int i = 0; i < 4; ++i) {
      h.push_back(std::make_unique<MemoryHierarchy>(ep, kGhz, s, llc.get(), l2.get()));
      mates.push_back(h.back().get());
    }
    h.push_back(std::make_unique<MemoryHierarchy>(pp, kGhz, s, llc.get()));
    for (MemoryHierarchy* m : mates) m->set_cluster(&mates);
    for (auto& x : h) peers.all.push_back(x.get());
    peers.transfer_cycles = kPP;
    peers.transfers = &s.counter("t.transfers", "");
    peers.invalidations = &s.counter("t.invalidations", "");
    for (auto& x : h) x->set_peers(&peers);
    for (MemoryHierarchy* m : mates) m->set_transfer_cycles(kFromP, kFromOther, kFromMate);
    h[4]->set_transfer_cycles(kPP, kFromP, 0);
  }
  MemoryHierarchy& e(int i) { return *h[size_t(i)]; }
  MemoryHierarchy& p() { return *h[4]; }
  uint32_t access(MemoryHierarchy& x, uint64_t pa, bool write) { return x.access(pa, write, t += 10000); }
  uint64_t stat(const char* k) { return s.find_counter(k)->value(); }
};

// Whether an agent outside `self`'s cluster (another core; a cluster's L2 not self's) holds pa.
bool held_outside(const std::vector<std::unique_ptr<MemoryHierarchy>>& all, MemoryHierarchy& self,
                  uint64_t pa) {
  for (auto& o : all)
    if (&o->l2() != &self.l2() && (o->l1d().probe(pa) || o->l2().probe(pa))) return true;
  return false;
}

// Random reads, writes and kernel touches by every hierarchy over `lines` lines (tiny caches: the
// lines conflict). After each, for the line and every hierarchy: others_may_hold() false means no
// agent outside its cluster holds the line (brute force), and a line modified in an L1D is in no
// other L1D and in no L2 but that core's own. Returns how often others_may_hold() said none.
uint64_t random_coherence_run(std::vector<std::unique_ptr<MemoryHierarchy>>& all, unsigned lines,
                              unsigned accesses) {
  std::mt19937_64 rng(12345);
  uint64_t t = 1000000, said_none = 0, checked = 0;
  auto check_line = [&](uint64_t pa) {
    for (auto& x : all) {
      ++checked;
      if (!x->others_may_hold(pa)) {
        ++said_none;
        if (held_outside(all, *x, pa)) return false;
      }
      if (x->l1d().probe_dirty(pa))
        for (auto& o : all)
          if (o != x && (o->l1d().probe(pa) || (&o->l2() != &x->l2() && o->l2().probe(pa)))) return false;
    }
    return true;
  };
  for (unsigned i = 0; i < accesses; ++i) {
    MemoryHierarchy& x = *all[rng() % all.size()];
    const uint64_t pa = 0x100000 + (rng() % lines) * 64 * 3;
    const unsigned kind = unsigned(rng() % 10);
    const bool write = rng() % 2;
    if (kind == 0) x.touch(pa, 64, write);
    else x.access(pa, write, t += 1000);
    if (!check_line(pa)) {
      FAIL("access " << i << " line " << std::hex << pa << ": a copy outside the presence counts, or two writers");
    }
  }
  CHECK(checked == uint64_t(accesses) * all.size());
  return said_none;
}
}  // namespace

TEST_CASE("cache: four cores sharing one L2: the mates' L1Ds are snooped, the L2 is one agent",
          "[cache][coherence][cluster]") {
  ClusterRig r;
  const uint32_t e_l2 = r.ep.l2.latency, p_llc = r.pp.llc.latency;
  // E0 reads a; E1 finds it in the cluster's L2 (no transfer: E0's copy is clean), and both
  // L1D copies are shared.
  const uint64_t a = 0x70000;
  r.access(r.e(0), a, false);
  CHECK(r.access(r.e(1), a, false) == e_l2);
  CHECK(r.e(0).l1d().probe_shared(a));
  CHECK(r.e(1).l1d().probe_shared(a));
  // E0 writes: E1's copy is invalidated (one invalidation, one in-cluster round trip); the
  // cluster's L2 keeps the line.
  CHECK(r.access(r.e(0), a, true) == r.ep.l1d.latency + ClusterRig::kFromMate);
  CHECK_FALSE(r.e(1).l1d().probe(a));
  CHECK(r.l2->probe(a));
  CHECK(r.stat("t.invalidations") == 1);
  CHECK(r.access(r.e(0), a, true) == r.ep.l1d.latency);  // Modified: no one to ask
  // E1 reads the line Modified in E0's L1D: an L2 hit that waits for the mate's transfer; the
  // data is written back into the L2 (dirty there), both copies are shared and clean.
  CHECK(r.access(r.e(1), a, false) == ClusterRig::kFromMate);
  CHECK(r.l2->probe_dirty(a));
  CHECK_FALSE(r.e(0).l1d().probe_dirty(a));
  CHECK(r.e(0).l1d().probe_shared(a));
  CHECK(r.e(1).l1d().probe_shared(a));
  CHECK(r.stat("t.transfers") == 1);
  // E2 writes it (an L2 hit): the mates' shared copies go, each counted once.
  CHECK(r.access(r.e(2), a, true) == ClusterRig::kFromMate);
  CHECK_FALSE(r.e(0).l1d().probe(a));
  CHECK_FALSE(r.e(1).l1d().probe(a));
  CHECK(r.stat("t.invalidations") == 3);

  // The P-core writes a line that E1's and E2's L1Ds and the cluster's L2 hold clean: all three
  // copies go, the L2 counted once (by its owner, E0, which holds nothing in its L1D), and the
  // LLC serves the miss (no copy was modified).
  const uint64_t b = 0x90000;
  r.access(r.e(1), b, false);
  CHECK(r.access(r.e(2), b, false) == e_l2);
  const uint64_t inv = r.stat("t.invalidations");
  CHECK(r.access(r.p(), b, true) == p_llc);
  CHECK_FALSE(r.l2->probe(b));
  CHECK_FALSE(r.e(1).l1d().probe(b));
  CHECK_FALSE(r.e(2).l1d().probe(b));
  CHECK(r.stat("t.invalidations") == inv + 3);
  // E3 reads it back from the P-core (modified there): the P-to-E transfer, and the line is shared
  // by the P-core's caches and the cluster's (L1D and L2). E3's write then invalidates the
  // P-core's copies: the P-to-E round trip.
  CHECK(r.access(r.e(3), b, false) == ClusterRig::kFromP);
  CHECK(r.p().l1d().probe_shared(b));
  CHECK(r.l2->probe_shared(b));
  CHECK(r.e(3).l1d().probe_shared(b));
  CHECK(r.access(r.e(3), b, true) == r.ep.l1d.latency + ClusterRig::kFromP);
  CHECK_FALSE(r.p().l1d().probe(b));
  CHECK_FALSE(r.p().l2().probe(b));
  CHECK_FALSE(r.l2->probe_shared(b));
  // E0 hits the L2 and finds E3's modified copy: the mate's transfer, as for a.
  CHECK(r.access(r.e(0), b, false) == ClusterRig::kFromMate);
  // The P-core reads a line modified in E2's L1D: the E-to-P transfer.
  const uint64_t c = 0xb0000;
  r.access(r.e(2), c, true);
  CHECK(r.access(r.p(), c, false) == ClusterRig::kFromP);
  CHECK_FALSE(r.e(2).l1d().probe_dirty(c));
  CHECK(r.llc->probe_dirty(c));
  // A line modified in E0's L1D that the cluster's L2 no longer holds (it is not inclusive): E1's
  // L2 miss finds it in the mate's L1D, and waits for the mate's transfer.
  const uint64_t d = 0xd0000;
  r.access(r.e(0), d, true);
  r.l2->invalidate(d);
  CHECK(r.access(r.e(1), d, false) == ClusterRig::kFromMate);
  CHECK(r.e(0).l1d().probe_shared(d));
  CHECK_FALSE(r.e(0).l1d().probe_dirty(d));
}

TEST_CASE("cache: presence counts stay exact when they say none, and one writer at a time (random)",
          "[cache][coherence][cluster]") {
  SECTION("four cores sharing one L2 and a P-core") {
    ClusterRig r(true);
    const uint64_t none = random_coherence_run(r.h, 24, 100000);
    CHECK(none > 10000);  // the check ran on both answers
    CHECK(r.stat("t.transfers") > 1000);
    CHECK(r.stat("t.invalidations") > 1000);
  }
  SECTION("two cores with private L2s") {
    Stats s;
    HierarchyParams p = presets::i7().caches;
    p.l1d = CacheParams{"l1d", 4 * 64, 2, 5};
    p.l2 = CacheParams{"l2", 16 * 64, 4, 15};
    p.llc = CacheParams{"llc", 64 * 64, 8, 60};
    Cache llc(p.llc, s);
    std::vector<std::unique_ptr<MemoryHierarchy>> h;
    for (int i = 0; i < 2; ++i) h.push_back(std::make_unique<MemoryHierarchy>(p, kGhz, s, &llc));
    MemoryHierarchy::Peers peers;
    for (auto& x : h) peers.all.push_back(x.get());
    peers.transfer_cycles = 171;
    peers.transfers = &s.counter("t.transfers", "");
    for (auto& x : h) x->set_peers(&peers);
    const uint64_t none = random_coherence_run(h, 24, 100000);
    CHECK(none > 10000);
    CHECK(s.find_counter("t.transfers")->value() > 1000);
  }
}
