// SPDX-License-Identifier: GPL-2.0-only
#include "models/replacement/replacement.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.hpp"

namespace mmusim::hw {

const char* replacement_name(ReplacementKind k) {
  return k == ReplacementKind::lru ? "lru" : "tree-plru";
}

void replacement_param(Params& p, const std::string& key, ReplacementKind& field,
                       const std::string& what) {
  p.enumeration(key, field, field,
                {{"lru", ReplacementKind::lru}, {"tree-plru", ReplacementKind::tree_plru}},
                "Replacement policy of " + what +
                    ": lru (true least-recently-used) or tree-plru (binary-tree pseudo-LRU, as "
                    "Abel & Reineke measured on Intel caches, ISPASS 2014 and uops.info/"
                    "cache.html; over the next power of two for other associativities). The "
                    "policy of this structure on the modelled core is not published [U]");
}

// ---------------------------------------------------------------------------------------------
// LRU

void LruReplacement::order(uint32_t first, uint32_t ways, uint32_t* out) const {
  for (uint32_t w = 0; w < ways; ++w) out[w] = first + w;
  // Equal stamps (never-touched slots) in slot order, as victim() takes the first.
  std::sort(out, out + ways, [&](uint32_t a, uint32_t b) {
    return stamp_[a] != stamp_[b] ? stamp_[a] < stamp_[b] : a < b;
  });
}

bool LruReplacement::check_invariants(const std::vector<ReplacementGroup>& groups,
                                      const std::function<bool(uint32_t)>& valid,
                                      std::string* why) const {
  std::vector<uint64_t> seen;
  for (const ReplacementGroup& g : groups)
    for (uint32_t s = 0; s < g.sets; ++s) {
      seen.clear();
      const uint32_t first = g.first + s * g.ways;
      for (uint32_t i = first; i < first + g.ways; ++i) {
        if (!valid(i)) continue;
        if (stamp_[i] == 0 || stamp_[i] > clock_) {
          if (why) *why = fmt::format("LRU: valid slot {} has stamp {} (clock {})", i, stamp_[i], clock_);
          return false;
        }
        seen.push_back(stamp_[i]);
      }
      std::sort(seen.begin(), seen.end());
      if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) {
        if (why) *why = fmt::format("LRU: two valid ways of the set at slot {} have one stamp", first);
        return false;
      }
    }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Tree pseudo-LRU

TreePlruReplacement::TreePlruReplacement(const std::vector<ReplacementGroup>& groups) {
  size_t bits = 0;
  for (const ReplacementGroup& g : groups) {
    MMUSIM_CHECK(g.ways > 0 && g.sets > 0, "tree-PLRU group of {} sets of {} ways", g.sets, g.ways);
    MMUSIM_CHECK(groups_.empty() || g.first >= groups_.back().g.first, "tree-PLRU groups out of order");
    Group x;
    x.g = g;
    while (x.leaves < g.ways) x.leaves <<= 1;
    x.bits = bits;
    bits += size_t(g.sets) * (x.leaves - 1);
    groups_.push_back(x);
  }
  bits_.assign(bits, 0);  // every bit to the lower half: a node's lower half always holds a way
}

void TreePlruReplacement::touch(uint32_t slot) {
  const Group& g = group_of(slot);
  const uint32_t rel = slot - g.g.first, set = rel / g.g.ways, way = rel % g.g.ways;
  uint8_t* b = bits_.data() + g.bits + size_t(set) * (g.leaves - 1);
  uint32_t node = 0, lo = 0;
  for (uint32_t half = g.leaves / 2; half >= 1; half /= 2) {
    const bool upper = way >= lo + half;
    // Away from the way touched, unless the other half holds no way (the upper half, beyond
    // `ways`): then it stays on the lower.
    if (upper) b[node] = 0;
    else if (lo + half < g.g.ways) b[node] = 1;
    node = 2 * node + 1 + upper;
    if (upper) lo += half;
  }
}

uint32_t TreePlruReplacement::victim(uint32_t first, uint32_t ways) const {
  const Group& g = group_of(first);
  MMUSIM_CHECK(ways == g.g.ways, "tree-PLRU victim of {} ways in a group of {}", ways, g.g.ways);
  const uint32_t set = (first - g.g.first) / g.g.ways;
  const uint8_t* b = bits_.data() + g.bits + size_t(set) * (g.leaves - 1);
  uint32_t node = 0, lo = 0;
  for (uint32_t half = g.leaves / 2; half >= 1; half /= 2) {
    const bool upper = b[node] != 0;
    node = 2 * node + 1 + upper;
    if (upper) lo += half;
  }
  return first + lo;
}

bool TreePlruReplacement::check_invariants(std::string* why) const {
  for (const Group& g : groups_)
    for (uint32_t s = 0; s < g.g.sets; ++s) {
      const uint8_t* b = bits_.data() + g.bits + size_t(s) * (g.leaves - 1);
      // Every node, by the range of ways below it.
      for (uint32_t node = 0; node + 1 < g.leaves; ++node) {
        uint32_t depth = 0;
        while ((2u << depth) - 1 <= node) ++depth;  // nodes of depth d: [2^d - 1, 2^(d+1) - 1)
        const uint32_t span = g.leaves >> depth;
        const uint32_t lo = (node - ((1u << depth) - 1)) * span;
        if (b[node] > 1 || (b[node] && lo + span / 2 >= g.g.ways)) {
          if (why)
            *why = fmt::format("tree-PLRU: set {} of the group at slot {}: node {} (ways {}..{}) "
                               "has bit {} but the upper half holds no way",
                               s, g.g.first, node, lo, lo + span - 1, int(b[node]));
          return false;
        }
      }
      const uint32_t first = g.g.first + s * g.g.ways;
      const uint32_t v = victim(first, g.g.ways);
      if (v < first || v >= first + g.g.ways) {
        if (why) *why = fmt::format("tree-PLRU: set at slot {} leads to slot {}", first, v);
        return false;
      }
    }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The policy a structure holds

static uint32_t slots_of(const std::vector<ReplacementGroup>& groups) {
  uint32_t n = 0;
  for (const ReplacementGroup& g : groups) n = std::max(n, g.first + g.sets * g.ways);
  return n;
}

Replacement::Replacement(ReplacementKind kind, const std::vector<ReplacementGroup>& groups)
    : kind_(kind), groups_(groups) {
  if (kind_ == ReplacementKind::lru) lru_ = LruReplacement(slots_of(groups));
  else plru_ = TreePlruReplacement(groups);
}

bool Replacement::check_invariants(const std::function<bool(uint32_t)>& valid,
                                   std::string* why) const {
  return kind_ == ReplacementKind::lru ? lru_.check_invariants(groups_, valid, why)
                                       : plru_.check_invariants(why);
}

}  // namespace mmusim::hw
