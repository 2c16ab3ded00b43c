// SPDX-License-Identifier: GPL-2.0-only
// Replacement policies of the set-associative structures: TLBs (models/tlb), paging-structure
// caches (models/walker/psc) and data caches (models/cache). A structure keeps its entries in
// slots, each set being `ways` consecutive slots; it finds hits and the first invalid way itself
// and asks its policy only two things: a slot was used (touch: a hit or a fill), and which way of
// a full set to replace (victim). Invalidation does not concern the policy: an invalid way is
// always filled before any valid one is replaced, and its fill touches it.
//
//  - lru: true least-recently-used, what every structure did before the policies existed (and
//    the default everywhere, so the reference statistics keep their values). One stamp per slot
//    from a clock: the victim is the way with the lowest stamp (the first of equals).
//  - tree-plru: the binary-tree pseudo-LRU that Abel and Reineke measured on Intel caches
//    ("Reverse engineering of cache replacement policies in Intel microprocessors and their
//    evaluation", ISPASS 2014: the 8-way L2 of the Core 2 Duo E6300 is tree-PLRU; uops.info/
//    cache.html, from their nanoBench cache analyzer: the 8-way L1 data caches from Nehalem to
//    Cannon Lake are "PLRU"). ways - 1 bits per set, one per inner node of a binary tree over the
//    ways: a bit says in which half the victim is looked for. A touch sets the bits on the way's
//    path to point away from it; the victim is the leaf the bits lead to. The policies of Golden
//    Cove's and the Neoverse N1's TLBs and caches are not published [U] (Ice Lake's 12-way L1D is
//    three 4-way PLRU trees in LRU order, uops.info: not modelled). For ways that are not a power
//    of two the tree is built over the next power of two and the bits of a node whose one half
//    holds no way always point to the other half (our generalisation [U]).
//
// The per-access calls (touch, victim) are inline and dispatch on the kind with one predictable
// branch; nothing allocates after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/params.hpp"

namespace mmusim::hw {

enum class ReplacementKind : uint8_t { lru, tree_plru };

const char* replacement_name(ReplacementKind k);

// Declares `key` (tlb.<name>.replacement, cache.<level>.replacement, walker.psc.<level>.replacement)
// as an enumeration lru | tree-plru with the default `field` holds; `what` names the structure.
void replacement_param(Params& p, const std::string& key, ReplacementKind& field,
                       const std::string& what);

// Sets over a structure's slots: set s of the group is slots [first + s * ways, first + (s + 1) *
// ways). A structure has one group per array of its own geometry (a TLB up to four, a cache one).
struct ReplacementGroup {
  uint32_t first = 0;
  uint32_t sets = 1;
  uint32_t ways = 1;
};

// True LRU: a stamp per slot, the clock at its last touch.
class LruReplacement {
 public:
  explicit LruReplacement(uint32_t slots = 0) : stamp_(slots, 0) {}

  void touch(uint32_t slot) { stamp_[slot] = ++clock_; }
  // The least recently used of slots [first, first + ways) (the first of equals).
  uint32_t victim(uint32_t first, uint32_t ways) const {
    const uint64_t* __restrict st = stamp_.data() + first;
    uint32_t b = 0;
    for (uint32_t w = 1; w < ways; ++w)
      if (st[w] < st[b]) b = w;
    return first + b;
  }
  // touch(slots[k]) for k = 0 .. n-1, in that order.
  void touch_in_order(const uint32_t* slots, size_t n) {
    uint64_t* __restrict st = stamp_.data();
    const uint64_t c = clock_;
#pragma GCC unroll 4
    for (size_t k = 0; k < n; ++k) st[slots[k]] = c + k + 1;
    clock_ = c + n;
  }
  // As if `n` touches of slots that are touched again later happened now (they leave no trace).
  void skip(uint64_t n) { clock_ += n; }
  // touch(first), touch(first + 1), ..., touch(first + n - 1).
  void touch_range(uint32_t first, uint32_t n) {
    uint64_t* __restrict st = stamp_.data() + first;
    const uint64_t c = clock_;
    for (uint32_t k = 0; k < n; ++k) st[k] = c + k + 1;
    clock_ = c + n;
  }
  // The slots [first, first + ways) least recently used first (out gets `ways` slots).
  void order(uint32_t first, uint32_t ways, uint32_t* out) const;
  uint64_t stamp(uint32_t slot) const { return stamp_[slot]; }
  // Every slot as never touched (stamp 0: before every touched one).
  void forget_all() { std::fill(stamp_.begin(), stamp_.end(), 0); }

  // Within each set, the valid ways' stamps are distinct, non-zero and at most the clock: the
  // order is a permutation of the valid ways. On failure *why says which.
  bool check_invariants(const std::vector<ReplacementGroup>& groups,
                        const std::function<bool(uint32_t)>& valid, std::string* why) const;

 private:
  std::vector<uint64_t> stamp_;
  uint64_t clock_ = 0;
};

// Tree pseudo-LRU: per set, one bit per inner node of a binary tree over the ways (heap order:
// node 0 the root, node n's halves 2n + 1 and 2n + 2). Bit 0: the victim is in the lower half,
// 1: in the upper half.
class TreePlruReplacement {
 public:
  TreePlruReplacement() = default;
  explicit TreePlruReplacement(const std::vector<ReplacementGroup>& groups);

  void touch(uint32_t slot);
  uint32_t victim(uint32_t first, uint32_t ways) const;
  void forget_all() { std::fill(bits_.begin(), bits_.end(), 0); }

  // Every bit is 0 or 1, a node whose upper half holds no way points to the lower one, and the
  // bits of every set lead to one of its ways. On failure *why says which.
  bool check_invariants(std::string* why) const;

 private:
  struct Group {
    ReplacementGroup g;
    uint32_t leaves = 1;  // the next power of two >= ways
    size_t bits = 0;      // index of its first set's first node in bits_
  };
  const Group& group_of(uint32_t slot) const {
    const Group* g = &groups_[0];
    for (size_t i = 1; i < groups_.size() && slot >= groups_[i].g.first; ++i) g = &groups_[i];
    return *g;
  }
  std::vector<Group> groups_;  // by first slot
  std::vector<uint8_t> bits_;  // per set: leaves - 1 nodes
};

// The policy a structure holds: one of the above, chosen by the kind.
// LRU kept as the order of a set's entries, most recently used first, invalid entries at the end
// (the data caches): a hit moves its entry to the front, a miss drops the last entry (the least
// recently used, or an empty one) and puts the new one in front. The same victims as
// LruReplacement, without stamps: where the entries are as small as a cache's tags, one array
// touched instead of two (the kernel's bulk zeroing walks millions of lines through the caches).
struct RecencyOrderLru {
  // Looks `key` up in set[0, ways) and makes it the most recently used; whether it was there.
  template <typename T>
  static bool access(T* __restrict set, uint32_t ways, T key) {
    uint32_t w = 0;
    while (w < ways && set[w] != key) ++w;
    const bool hit = w < ways;
    if (!hit) w = ways - 1;
    for (; w > 0; --w) set[w] = set[w - 1];
    set[0] = key;
    return hit;
  }
  // The set's form: its valid entries first, distinct, then only `invalid` ones.
  template <typename T>
  static bool check(const T* set, uint32_t ways, T invalid, std::string* why) {
    uint32_t n = 0;
    while (n < ways && set[n] != invalid) ++n;
    for (uint32_t w = n; w < ways; ++w)
      if (set[w] != invalid) {
        if (why) *why = "a valid entry after an empty way";
        return false;
      }
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t b = a + 1; b < n; ++b)
        if (set[a] == set[b]) {
          if (why) *why = "an entry twice in one set";
          return false;
        }
    return true;
  }
};

class Replacement {
 public:
  Replacement(ReplacementKind kind, const std::vector<ReplacementGroup>& groups);

  ReplacementKind kind() const { return kind_; }
  void touch(uint32_t slot) {
    if (kind_ == ReplacementKind::lru) lru_.touch(slot); else plru_.touch(slot);
  }
  // The way of the full set [first, first + ways) to replace.
  uint32_t victim(uint32_t first, uint32_t ways) const {
    return kind_ == ReplacementKind::lru ? lru_.victim(first, ways) : plru_.victim(first, ways);
  }
  // The way to fill in the set [first, first + ways) on a miss: the first empty way (`empty(slot)`),
  // else victim(). For a structure that calls forget_all() whenever it empties slots and empties
  // no slot otherwise (the data caches): under LRU the empty ways are then exactly those with
  // stamp 0, which victim() returns first, so the empty ways need no scan of their own.
  template <typename Empty>
  uint32_t fill_way(uint32_t first, uint32_t ways, Empty&& empty) const {
    if (kind_ == ReplacementKind::lru) return lru_.victim(first, ways);
    for (uint32_t w = 0; w < ways; ++w)
      if (empty(first + w)) return first + w;
    return plru_.victim(first, ways);
  }
  void forget_all() {
    if (kind_ == ReplacementKind::lru) lru_.forget_all(); else plru_.forget_all();
  }
  // The LRU state, or null for another policy (the run-ahead replay's accelerator works on LRU
  // only: models/tlb/tlb_replay.hpp).
  LruReplacement* lru() { return kind_ == ReplacementKind::lru ? &lru_ : nullptr; }
  const LruReplacement* lru() const { return kind_ == ReplacementKind::lru ? &lru_ : nullptr; }
  // `valid(slot)`: whether the structure holds an entry in the slot.
  bool check_invariants(const std::function<bool(uint32_t)>& valid, std::string* why) const;
  const std::vector<ReplacementGroup>& groups() const { return groups_; }

 private:
  ReplacementKind kind_;
  std::vector<ReplacementGroup> groups_;
  LruReplacement lru_;
  TreePlruReplacement plru_;
};

}  // namespace mmusim::hw
