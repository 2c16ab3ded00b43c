// SPDX-License-Identifier: GPL-2.0-only
// Data caches, tag only: where a line is, not what it holds (the bytes live in PhysMem). A Cache
// is one set-associative level with a replacement policy (LRU unless cache.<name>.replacement
// says otherwise: models/replacement); a MemoryHierarchy chains L1D -> L2 -> LLC ->
// DRAM for one core and answers "how many cycles until this load's data is usable".
//
// The model is deliberately small: no MSHRs, no bandwidth, no coherence, no write-back traffic.
// A miss fills every level it missed in (inclusive enough for walk and zeroing latencies); an
// eviction from an outer level does not back-invalidate the inner ones. Non-power-of-two set
// counts (the 25M, 10-way, 40960-set LLC of the i7-12700; CPUID leaf 4) use modulo indexing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "models/replacement/replacement.hpp"

namespace mmusim::hw {

inline constexpr unsigned kLineShift = 6;  // 64-byte lines on both cores
inline constexpr uint64_t kLineBytes = uint64_t(1) << kLineShift;

// cache.<name>.size, .ways, .latency, .replacement. The platforms' values are their config
// files' (platforms/platform.cpp build_schema).
struct CacheParams {
  std::string name;       // "l1d", "l2", "llc"
  uint64_t size = 0;      // bytes; a multiple of ways * 64
  uint32_t ways = 0;
  uint32_t latency = 0;   // load-to-use cycles of a hit at this level
  ReplacementKind replacement = ReplacementKind::lru;

  void visit(Params& p);
  void validate() const;  // throws UserError naming the keys
  uint32_t sets() const { return uint32_t(size / (uint64_t(ways) * kLineBytes)); }
};

class Cache {
 public:
  // Registers cache.<name>.hits / .misses (caches of one name on several cores share them).
  Cache(const CacheParams& p, Stats& stats);

  const std::string& name() const { return name_; }
  uint32_t latency() const { return latency_; }
  uint32_t sets() const { return sets_; }
  uint32_t ways() const { return ways_; }

  // Looks `pa`'s line up; a hit touches it in the replacement policy, a miss installs it (in the
  // first empty way, else in the policy's victim). Counts the hit or miss.
  bool access(uint64_t pa) {
    bool hit = lookup_fill(pa >> kLineShift);
    if (hit) hits_->inc(); else misses_->inc();
    return hit;
  }
  // The same without counting (bulk kernel traffic).
  bool install(uint64_t pa) { return lookup_fill(pa >> kLineShift); }
  // Is the line present? No stats, no replacement-state change.
  bool probe(uint64_t pa) const;
  void invalidate_all();
  size_t occupancy() const;
  // The policy's invariants over this cache's valid lines (tests).
  bool check_invariants(std::string* why) const;

 private:
  static constexpr uint64_t kInvalid = ~uint64_t(0);
  uint32_t set_of(uint64_t line) const {
    return set_mask_ ? uint32_t(line & set_mask_) : uint32_t(line % sets_);
  }
  // Under LRU each set's tags are kept in recency order (RecencyOrderLru, models/replacement).
  // Under another policy a line stays in its way until replaced; the policy chooses the way a
  // miss fills (Replacement::fill_way: invalidate_all() is the only way lines leave, and it
  // calls forget_all()).
  bool lookup_fill(uint64_t line) {
    const uint32_t first = set_of(line) * ways_;
    if (recency_order_) return RecencyOrderLru::access(&tags_[first], ways_, line);
    const uint64_t* __restrict t = &tags_[first];
    for (uint32_t w = 0; w < ways_; ++w)
      if (t[w] == line) {
        repl_.touch(first + w);
        return true;
      }
    const uint32_t v = repl_.fill_way(first, ways_, [&](uint32_t i) { return tags_[i] == kInvalid; });
    tags_[v] = line;
    repl_.touch(v);
    return false;
  }

  std::string name_;
  uint32_t latency_;
  uint32_t sets_;
  uint32_t ways_;
  uint64_t set_mask_;  // sets - 1 when a power of two (and > 1), else 0: modulo
  std::vector<uint64_t> tags_;  // line address, kInvalid when empty; set s is [s * ways, (s + 1) * ways)
  bool recency_order_;  // LRU: the tags' order is the policy's state (repl_ holds no slots)
  Replacement repl_;
  Counter* hits_;
  Counter* misses_;
};

// cache.l1d.*, cache.l2.*, cache.llc.*, memory.latency.
struct HierarchyParams {
  CacheParams l1d, l2, llc;
  Duration memory_latency;  // DRAM load-to-use; converted with the core clock

  void visit(Params& p);
};

class MemoryHierarchy {
 public:
  enum Level : uint8_t { L1D = 0, L2 = 1, LLC = 2, DRAM = 3 };

  // `core_ghz` converts memory.latency to cycles. `shared_llc`: an LLC owned elsewhere and shared
  // by several cores' hierarchies (then p.llc is ignored); null: this hierarchy owns one.
  MemoryHierarchy(const HierarchyParams& p, double core_ghz, Stats& stats,
                  Cache* shared_llc = nullptr);

  // The level that served `pa` (filling the levels above it).
  Level access_level(uint64_t pa, bool write) {
    if (l1d_.access(pa)) return L1D;
    if (l2_.access(pa)) return L2;
    if (llc_->access(pa)) return LLC;
    return DRAM;
  }
  // Load-to-use latency in core cycles of the level that hits.
  uint32_t access(uint64_t pa, bool write) { return latency_[access_level(pa, write)]; }
  uint32_t latency(Level l) const { return latency_[l]; }

  // The kernel's bulk zeroing/copying/reading of [pa, pa + bytes): installs every line in every
  // level (without counting hits/misses). Returns how many lines each level served, so the caller
  // can cost the traffic if it wants to.
  struct Touch {
    uint64_t lines[4] = {0, 0, 0, 0};  // indexed by Level
  };
  Touch touch(uint64_t pa, uint64_t bytes, bool write);

  void invalidate_all();  // this core's L1D and L2, and the LLC

  Cache& l1d() { return l1d_; }
  Cache& l2() { return l2_; }
  Cache& llc() { return *llc_; }

 private:
  Cache l1d_;
  Cache l2_;
  std::unique_ptr<Cache> own_llc_;
  Cache* llc_;
  uint32_t latency_[4];
};

}  // namespace mmusim::hw
