// SPDX-License-Identifier: GPL-2.0-only
// Replacement policies (models/replacement): exact victim sequences of LRU and tree-PLRU on a
// 4-way and an 8-way set, worked out by hand; invariants after random operations; and a TLB, a
// paging-structure cache and a data cache configured with tree-plru evicting what the policy
// says (each test fails under LRU, which evicts another entry).
#include <catch2/catch.hpp>

#include <list>
#include <string>
#include <vector>

#include "models/presets.hpp"
#include "base/params.hpp"
#include "base/pgformat.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/replacement/replacement.hpp"
#include "models/tlb/tlb.hpp"
#include "models/tlb/tlb_replay.hpp"
#include "models/walker/psc.hpp"
#include "workloads/rng.hpp"

using namespace mmusim;
using namespace mmusim::hw;

namespace {

// One set of `ways` slots run the way the structures run it: a hit touches, a miss fills the
// first empty way, else the policy's victim, and touches it. Returns the tags evicted, in order.
struct SetSim {
  Replacement r;
  std::vector<char> tag;  // 0: empty
  explicit SetSim(ReplacementKind k, uint32_t ways) : r(k, {{0, 1, ways}}), tag(ways, 0) {}

  std::string run(const std::string& stream) {
    std::string evicted;
    for (char c : stream) {
      if (c == ' ') continue;
      uint32_t w = 0;
      while (w < tag.size() && tag[w] != c) ++w;
      if (w == tag.size()) {  // a miss
        w = 0;
        while (w < tag.size() && tag[w]) ++w;
        if (w == tag.size()) {
          w = r.victim(0, uint32_t(tag.size()));
          evicted += tag[w];
        }
        tag[w] = c;
      }
      r.touch(w);
      std::string why;
      REQUIRE(r.check_invariants([&](uint32_t i) { return tag[i] != 0; }, &why));
    }
    return evicted;
  }
};

}  // namespace

TEST_CASE("replacement: LRU and tree-PLRU victims on a 4-way set, by hand", "[replacement]") {
  // A B C D fill ways 0-3; A hits; then E B F C miss (B is evicted first under LRU, so it misses).
  //
  // LRU, least recently used first: after A: B C D A. E evicts B (C D A E); B evicts C (D A E B);
  // F evicts D (A E B F); C evicts A.
  CHECK(SetSim(ReplacementKind::lru, 4).run("ABCD A E B F C") == "BCDA");
  // Tree-PLRU: bits root (ways 0-1 | 2-3), n1 (0 | 1), n2 (2 | 3); 1 = the victim is in the upper
  // half; a touch points its path away. Filling ways 0, 1, 2, 3 in order leaves root = n1 = n2 =
  // 0. A (way 0) hits: root 1, n1 1. E: root 1 -> upper, n2 0 -> way 2: C is evicted (LRU would
  // evict B); E's touch: root 0, n2 1. B (way 1) hits: root 1, n1 0. F: root 1 -> upper, n2 1 ->
  // way 3: D; touch: root 0, n2 0. C: root 0 -> lower, n1 0 -> way 0: A.
  CHECK(SetSim(ReplacementKind::tree_plru, 4).run("ABCD A E B F C") == "CDA");
}

TEST_CASE("replacement: LRU and tree-PLRU victims on an 8-way set, by hand", "[replacement]") {
  // A..H fill ways 0-7; A, C, E hit; I J K L miss.
  //
  // LRU order after the hits: B D F G H A C E: the misses evict B, D, F, G.
  CHECK(SetSim(ReplacementKind::lru, 8).run("ABCDEFGH ACE IJKL") == "BDFG");
  // Tree-PLRU, nodes in heap order: 0 (0-3 | 4-7), 1 (0-1 | 2-3), 2 (4-5 | 6-7), 3 (0 | 1),
  // 4 (2 | 3), 5 (4 | 5), 6 (6 | 7). After the fills in way order every bit is 0 (each node was
  // last touched from its upper half). A (way 0): b0 1, b1 1, b3 1. C (way 2): b0 1, b1 0, b4 1.
  // E (way 4): b0 0, b2 1, b5 1.
  // I: b0 0 -> 0-3, b1 0 -> 0-1, b3 1 -> way 1: B; touch: b0 1, b1 1, b3 0.
  // J: b0 1 -> 4-7, b2 1 -> 6-7, b6 0 -> way 6: G; touch: b0 0, b2 0, b6 1.
  // K: b0 0 -> 0-3, b1 1 -> 2-3, b4 1 -> way 3: D; touch: b0 1, b1 0, b4 0.
  // L: b0 1 -> 4-7, b2 0 -> 4-5, b5 1 -> way 5: F.
  CHECK(SetSim(ReplacementKind::tree_plru, 8).run("ABCDEFGH ACE IJKL") == "BGDF");
}

TEST_CASE("replacement: tree-PLRU over ways that are not a power of two", "[replacement]") {
  // 5 ways: a tree over 8 leaves, whose nodes with an empty upper half always point down.
  // Filling A..E in ways 0-4: the root (0-3 | 4-7) was last touched by way 4, from above: 0;
  // node 1 (0-1 | 2-3) by way 3: 0; node 3 (0 | 1) by way 1: 0; node 2 (4-5 | 6-7) and node 5
  // (4 | 5) have empty upper halves: 0. F evicts way 0 (A); F's touch: root 1 (its upper half
  // holds way 4), node 1 1, node 3 1. G: root 1 -> 4-7, node 2 0 -> 4-5, node 5 0 -> way 4: E.
  CHECK(SetSim(ReplacementKind::tree_plru, 5).run("ABCDE FG") == "AE");
  Replacement r(ReplacementKind::tree_plru, {{0, 1, 5}});
  for (uint32_t w = 0; w < 5; ++w) {
    r.touch(w);
    CHECK(r.victim(0, 5) < 5);
  }
}

TEST_CASE("replacement: invariants hold after random operations, LRU matches a reference list, "
          "tree-PLRU never evicts the way touched last",
          "[replacement]") {
  struct Shape {
    uint32_t sets, ways;
  };
  for (ReplacementKind k : {ReplacementKind::lru, ReplacementKind::tree_plru})
    for (Shape sh : {Shape{16, 4}, Shape{8, 8}, Shape{4, 5}, Shape{2, 12}, Shape{1, 48}}) {
      INFO(replacement_name(k) << " " << sh.sets << " x " << sh.ways);
      // Two groups, as a TLB with two arrays has.
      const std::vector<ReplacementGroup> groups = {{0, sh.sets, sh.ways},
                                                    {sh.sets * sh.ways, 2, 4}};
      const uint32_t slots = sh.sets * sh.ways + 8;
      Replacement r(k, groups);
      std::vector<bool> valid(slots, false);
      std::vector<std::list<uint32_t>> ref(sh.sets + 2);  // per set, least recently used first
      auto set_of = [&](uint32_t slot, uint32_t* first, uint32_t* ways) {
        const bool second = slot >= sh.sets * sh.ways;
        const ReplacementGroup& g = groups[second];
        const uint32_t s = (slot - g.first) / g.ways;
        *first = g.first + s * g.ways;
        *ways = g.ways;
        return second ? sh.sets + s : s;
      };
      wl::Rng rng{7};
      for (int op = 0; op < 4000; ++op) {
        const uint32_t slot = uint32_t(rng.below(slots));
        uint32_t first = 0, ways = 0;
        const uint32_t s = set_of(slot, &first, &ways);
        switch (rng.below(4)) {
          case 0: {  // a miss in a full set: the victim is filled
            for (uint32_t i = first; i < first + ways; ++i)
              if (!valid[i]) {
                valid[i] = true;
                r.touch(i);
                ref[s].remove(i);
                ref[s].push_back(i);
              }
            const uint32_t v = r.victim(first, ways);
            REQUIRE(v >= first);
            REQUIRE(v < first + ways);
            if (k == ReplacementKind::lru) REQUIRE(v == ref[s].front());
            const uint32_t last = ref[s].back();
            if (k == ReplacementKind::tree_plru && ways > 1) REQUIRE(v != last);
            r.touch(v);
            ref[s].remove(v);
            ref[s].push_back(v);
            break;
          }
          case 1:  // an invalidation: nothing for the policy
            valid[slot] = false;
            break;
          default:  // a hit or a fill of this slot
            valid[slot] = true;
            r.touch(slot);
            ref[s].remove(slot);
            ref[s].push_back(slot);
        }
        std::string why;
        INFO(why);
        REQUIRE(r.check_invariants([&](uint32_t i) { return bool(valid[i]); }, &why));
      }
    }
}

TEST_CASE("replacement: check_invariants finds a broken LRU order", "[replacement]") {
  // Two valid ways never touched (stamp 0) are not ordered.
  Replacement r(ReplacementKind::lru, {{0, 1, 4}});
  std::string why;
  CHECK_FALSE(r.check_invariants([](uint32_t) { return true; }, &why));
  CHECK(why.find("LRU") != std::string::npos);
  for (uint32_t w = 0; w < 4; ++w) r.touch(w);
  CHECK(r.check_invariants([](uint32_t) { return true; }, &why));
}

namespace {

TlbEntry entry4k(uint64_t va) {
  TlbEntry e;
  e.vbase = va;
  e.pbase = 0x80000000 + va;
  e.asid = 1;
  e.size = PageSize::k4K;
  e.writable = true;
  e.user = true;
  return e;
}

}  // namespace

TEST_CASE("replacement: a TLB with tree-plru evicts what tree-PLRU says", "[replacement][tlb]") {
  // The 4-way stream of the test above, on a set-associative TLB (2 sets of 4 ways: even pages
  // in set 0) and on a fully associative one (4 entries): under tree-PLRU E evicts C, under LRU
  // it would evict B.
  for (uint32_t entries : {8u, 4u}) {
    for (ReplacementKind k : {ReplacementKind::tree_plru, ReplacementKind::lru}) {
      INFO(entries << " entries, " << replacement_name(k));
      TlbParams p;
      p.name = "t";
      p.replacement = k;
      p.arrays = {{"", entries, 4, "4K", 0}};
      p.validate();
      Stats stats;
      Tlb t(p, stats);
      CHECK(TlbReplay(t).usable() == (k == ReplacementKind::lru));
      auto va = [](char c) { return uint64_t(c - 'A' + 1) * 2 * 4096; };  // even pages: set 0
      for (char c : std::string("ABCD")) t.fill(va(c), entry4k(va(c)));
      REQUIRE(t.lookup(va('A'), 1));
      t.fill(va('E'), entry4k(va('E')));
      std::string why;
      CHECK(t.check_invariants(&why));
      const char evicted = k == ReplacementKind::tree_plru ? 'C' : 'B';
      for (char c : std::string("ABCDE"))
        CHECK(bool(t.probe(va(c), 1)) == (c != evicted));
    }
  }
}

TEST_CASE("replacement: a data cache with tree-plru evicts what tree-PLRU says", "[replacement][cache]") {
  for (ReplacementKind k : {ReplacementKind::tree_plru, ReplacementKind::lru}) {
    INFO(replacement_name(k));
    CacheParams p{"t", 2 * 4 * kLineBytes, 4, 1, k};  // 2 sets of 4 ways
    Stats stats;
    Cache c(p, stats);
    auto pa = [](char ch) { return uint64_t(ch - 'A' + 1) * 2 * kLineBytes; };  // set 0
    for (char ch : std::string("ABCD")) CHECK_FALSE(c.access(pa(ch)));
    CHECK(c.access(pa('A')));
    CHECK_FALSE(c.access(pa('E')));
    std::string why;
    CHECK(c.check_invariants(&why));
    const char evicted = k == ReplacementKind::tree_plru ? 'C' : 'B';
    for (char ch : std::string("ABCDE")) CHECK(c.probe(pa(ch)) == (ch != evicted));
  }
}

TEST_CASE("replacement: a paging-structure cache with tree-plru evicts what tree-PLRU says",
          "[replacement][walker]") {
  for (ReplacementKind k : {ReplacementKind::tree_plru, ReplacementKind::lru}) {
    INFO(replacement_name(k));
    PscArrayParams a{"pde", 4, 4, uint8_t(1u << 1), k};  // PDE entries, fully associative
    Stats stats;
    PagingStructureCache psc(pg::kX86_64, {a}, {"", "pde", "pdpte", "pml4e"}, stats);
    auto va = [](char c) { return uint64_t(c - 'A' + 1) << 21; };  // one PDE entry each
    for (char c : std::string("ABCD")) psc.fill(1, va(c), 1, 0x1000 * uint64_t(c));
    uint64_t table = 0;
    CHECK(psc.lookup(va('A'), 1, &table) == 1);
    psc.fill(1, va('E'), 1, 0x1000 * uint64_t('E'));
    std::string why;
    CHECK(psc.check_invariants(&why));
    const char evicted = k == ReplacementKind::tree_plru ? 'C' : 'B';
    for (char c : std::string("ABCDE")) CHECK((psc.probe(va(c), 1) == 1) == (c != evicted));
  }
}

TEST_CASE("replacement: the keys are declared per structure, lru by default", "[replacement]") {
  Schema schema;
  Params d = Params::declaring(schema);
  TlbParams t = presets::i7().l2;
  t.visit(d);
  HierarchyParams h = presets::i7().caches;
  h.visit(d);
  for (const char* key : {"tlb.stlb.replacement", "cache.l1d.replacement", "cache.llc.replacement"}) {
    INFO(key);
    const ParamSpec* s = schema.find(key);
    REQUIRE(s);
    CHECK(s->type == ParamType::Enum);
    CHECK(s->default_text == "lru");
    CHECK(s->choices == std::vector<std::string>{"lru", "tree-plru"});
  }
}
