// SPDX-License-Identifier: GPL-2.0-only
// Paging-structure caches: entries that let a walk skip the upper levels. An entry for level L
// (L >= 1, a table descriptor) is tagged by the ASID and the VA bits that select it (va >> the
// level's shift) and holds the physical address of the next table, so a hit at level L leaves
// the entries of levels L-1 .. leaf to read from memory.
//
// One class for both ISAs, made of arrays that each hold a set of levels (as the TLB's arrays
// hold a set of page sizes):
//  - x86 (SDM Vol 3A §4.10.3): a PML4E cache (level 3), a PDPTE cache (level 2) and a PDE cache
//    (level 1). Golden Cove's sizes are not published; 2/4/32 are placeholders (UARCH F.1 [U]).
//  - arm64: the N1's L2 TLB also "stores intermediate PAs obtained during a translation table
//    walk" (Cortex-A76 TRM §A5.2.3), in the L2 TLB's own capacity. We model that walk cache as ONE
//    separate array holding levels 1-3 with its own size parameter: it does not take entries
//    away from tlb.l2_tlb (its size is not published [U]).
//
// The PSC decides timing only: the functional result always comes from the tables in memory
// (base/hwwalk.hpp). That equals the architecture's as long as the kernel invalidates after
// changing a table entry, which is what the invariant checker can verify with for_each().
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/bytescan.hpp"
#include "base/params.hpp"
#include "base/pgformat.hpp"
#include "base/stats.hpp"
#include "models/replacement/replacement.hpp"

namespace mmusim::hw {

struct PscArrayParams {
  std::string name;     // "pde"; keys walker.psc.<name>.entries / .ways
  uint32_t entries = 0;
  uint32_t ways = 0;    // == entries: fully associative
  uint8_t levels = 0;   // bit L: holds level-L entries (fixed by the ISA, not a parameter)
  ReplacementKind replacement = ReplacementKind::lru;  // walker.psc.<name>.replacement
};

struct PscEntry {
  uint64_t tag = 0;       // va >> level_shift(level)
  uint64_t table_pa = 0;  // the next-level table the cached entry points to
  uint16_t asid = 0;
  uint8_t level = 0;
  // The cycle the walk that read it had the entry (0: there already). Before it a lookup does not
  // see it and an invalidation does not remove it: a walk fills the PSC as its reads complete.
  uint64_t ready = 0;
  uint64_t refill = 0;  // a later walk's read of it (0: none), as TlbEntry::refill

  uint64_t va_base(const pg::Geometry& g) const { return tag << g.level_shift(level); }
};

class PagingStructureCache {
 public:
  static constexpr unsigned kMaxLevels = 8;

  // `level_names[L]` names level L in the stats (walker.psc.<name>.hits), for L = 1..levels-1.
  PagingStructureCache(const pg::Geometry& g, const std::vector<PscArrayParams>& arrays,
                       const std::vector<std::string>& level_names, Stats& stats);

  // The deepest level (smallest L >= 1) with an entry for `va`, or 0 if none. Sets *table_pa to
  // the cached next-table address. Counts the hit at that level; refreshes its LRU.
  // At cycle `now`, entries that arrive later are not there (`*skipped`, if given: one was).
  static constexpr uint64_t kArrived = ~uint64_t(0);
  unsigned lookup(uint64_t va, uint16_t asid, uint64_t* table_pa, uint64_t now = kArrived,
                  bool* skipped = nullptr);
  // Without stats or replacement-state update.
  unsigned probe(uint64_t va, uint16_t asid, uint64_t* table_pa = nullptr) const;
  // `absent`: the caller knows there is no entry for it (a lookup just missed at that level).
  // `ready`: the cycle the entry arrives (PscEntry::ready); a refill of the same entry keeps the
  // earlier arrival.
  void fill(unsigned level, uint64_t va, uint16_t asid, uint64_t table_pa, bool absent = false,
            uint64_t ready = 0);

  // Entries that a walk for `va` could use, any level (x86 #PF "entries ... that would be used
  // for that linear address", SDM §4.10.4.1; arm64 TLBI VAE1 and its walk-cache entries).
  // `at`: the cycle of the invalidation (an entry arriving after it stays; default: every entry).
  unsigned invalidate_va(uint64_t va, uint16_t asid, uint64_t at = kArrived);
  // Every entry of `asid` (x86 INVLPG and MOV CR3, SDM §4.10.4.1; arm64 TLBI ASIDE1).
  unsigned invalidate_asid(uint16_t asid);
  unsigned invalidate_all();

  template <typename F>
  void for_each(F&& fn) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (keys_[i]) fn(slots_[i].e);
  }
  size_t occupancy() const;
  bool holds_level(unsigned level) const { return level < kMaxLevels && route_[level] >= 0; }
  const pg::Geometry& geometry() const { return g_; }
  // The policy of array `a` (in the order the arrays were given).
  const Replacement& replacement(size_t a) const { return repl_[a]; }
  // The policy's invariants over the valid slots (tests).
  bool check_invariants(std::string* why) const;

 private:
  struct Slot {
    PscEntry e;  // (valid: keys_ is non-zero)
  };
  struct Array {
    uint32_t sets = 1, ways = 1, first = 0;
    uint8_t levels = 0;
  };
  // The first slot of the set a level-`level` entry with tag `tag` lives in.
  uint32_t set_for(unsigned level, uint64_t tag, uint32_t* ways) const {
    const Array& a = arrays_[route_[level]];
    *ways = a.ways;
    return a.first + (a.sets == 1 ? 0 : uint32_t(tag % a.sets)) * a.ways;
  }
  // Each slot's key (0: invalid): the tag's low 40 bits, the ASID and the level; a key match is
  // a candidate, the full tag decides (a VA beyond 40 + shift bits could alias). The sets are
  // searched through one byte per slot (a hash of the key, never 0; 0: invalid), 16 at a time, so
  // a 32-way set costs a few word compares.
  static uint64_t key_of(uint64_t tag, uint16_t asid, unsigned level) {
    return tag << 24 | uint64_t(asid) << 8 | uint64_t(level) << 1 | 1;
  }
  static uint8_t byte_of(uint64_t key) {
    const uint8_t b = uint8_t((key * 0x9E3779B97F4A7C15ull) >> 56);
    return b ? b : 1;
  }
  // The slot of [first, first + ways) holding `key` for `tag`, or kNone. Entries are unique
  // (fill refreshes a matching one), so the first match is the match.
  uint32_t find(uint32_t first, uint32_t ways, uint64_t key, uint64_t tag) const {
    if (ways <= 8) {  // a few ways: compared directly
      const uint64_t* __restrict k = keys_.data() + first;
      for (uint32_t w = 0; w < ways; ++w)
        if (k[w] == key && slots_[first + w].e.tag == tag) return first + w;
      return kNone;
    }
    const uint8_t* const b0 = bytes_.data() + first;
    const uint8_t want = byte_of(key);
    for (size_t w = find_byte(b0, ways, want); w < ways;
         w += 1 + find_byte(b0 + w + 1, ways - w - 1, want)) {
      const uint32_t i = first + uint32_t(w);
      if (keys_[i] == key && slots_[i].e.tag == tag) return i;
    }
    return kNone;
  }
  static constexpr uint32_t kNone = ~uint32_t(0);
  void clear(uint32_t i);  // slot i holds nothing

  pg::Geometry g_;
  std::vector<Array> arrays_;
  std::vector<Slot> slots_;
  std::vector<uint64_t> keys_;  // per slot (key_of; 0 = invalid), apart from the entries
  std::vector<uint8_t> bytes_;  // per slot (byte_of its key; 0 = invalid)
  // Per level: the slot of its last hit or fill (a lookup checks it first; the result is the
  // scan's, entries being unique).
  uint32_t hint_[kMaxLevels];
  int route_[kMaxLevels];
  Counter* hits_[kMaxLevels] = {};
  Counter* misses_;
  Counter* fills_;
  Counter* invalidations_;
  std::vector<Replacement> repl_;  // per array (its slots: one group)
};

}  // namespace mmusim::hw
