// SPDX-License-Identifier: GPL-2.0-only
#include "models/walker/psc.hpp"

#include <algorithm>

#include "models/tlb/arrival.hpp"

#include "base/error.hpp"

namespace mmusim::hw {

PagingStructureCache::PagingStructureCache(const pg::Geometry& g,
                                           const std::vector<PscArrayParams>& arrays,
                                           const std::vector<std::string>& level_names,
                                           Stats& stats)
    : g_(g) {
  MMUSIM_CHECK(g.levels <= kMaxLevels, "{} paging levels", g.levels);
  for (int& r : route_) r = -1;
  uint32_t first = 0;
  for (const PscArrayParams& ap : arrays) {
    MMUSIM_CHECK(ap.ways > 0 && ap.entries % ap.ways == 0 && ap.levels != 0,
                 "PSC array {}: {} entries, {} ways, levels {:#x}", ap.name, ap.entries, ap.ways,
                 ap.levels);
    Array a;
    a.ways = ap.ways;
    a.sets = ap.entries / ap.ways;
    a.first = first;
    a.levels = ap.levels;
    repl_.emplace_back(ap.replacement, std::vector<ReplacementGroup>{{first, a.sets, a.ways}});
    first += ap.entries;
    for (unsigned l = 0; l < kMaxLevels; ++l) {
      if (!(ap.levels & (1u << l))) continue;
      MMUSIM_CHECK(l >= 1 && l < g.levels, "PSC array {} holds level {} (table levels are 1..{})",
                   ap.name, l, g.levels - 1);
      MMUSIM_CHECK(route_[l] < 0, "PSC level {} held by two arrays", l);
      route_[l] = int(arrays_.size());
    }
    arrays_.push_back(a);
  }
  slots_.resize(first);
  keys_.assign(first, 0);
  bytes_.assign(first, 0);
  for (uint32_t& h : hint_) h = kNone;
  StatGroup grp(stats, "walker.psc");
  for (unsigned l = 1; l < g.levels; ++l) {
    if (route_[l] < 0) continue;
    MMUSIM_CHECK(l < level_names.size() && !level_names[l].empty(), "no name for PSC level {}", l);
    hits_[l] = &grp.counter(level_names[l] + ".hits",
                            "Walks that started from a cached level-" + std::to_string(l) +
                                " (" + level_names[l] + ") entry (the deepest hit)",
                            "walks");
  }
  misses_ = &grp.counter("misses", "Walks that found no paging-structure-cache entry", "walks");
  fills_ = &grp.counter("fills", "Paging-structure-cache entries written", "entries");
  invalidations_ = &grp.counter("invalidations", "Paging-structure-cache entries removed by "
                                                 "invalidation operations", "entries");
}

unsigned PagingStructureCache::lookup(uint64_t va, uint16_t asid, uint64_t* table_pa,
                                      uint64_t now, bool* skipped) {
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    const uint64_t tag = va >> g_.level_shift(l);
    const uint64_t key = key_of(tag, asid, l);
    uint32_t i = hint_[l];
    if (i == kNone || keys_[i] != key || slots_[i].e.tag != tag) {
      uint32_t ways = 0;
      const uint32_t first = set_for(l, tag, &ways);
      i = find(first, ways, key, tag);
      if (i == kNone) continue;
      hint_[l] = i;
    }
    if (slots_[i].e.ready > now) {  // an older walk in flight has not read it yet
      if (skipped) *skipped = true;
      continue;
    }
    repl_[route_[l]].touch(i);
    hits_[l]->inc();
    if (table_pa) *table_pa = slots_[i].e.table_pa;
    return l;
  }
  misses_->inc();
  return 0;
}

unsigned PagingStructureCache::probe(uint64_t va, uint16_t asid, uint64_t* table_pa) const {
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    const uint64_t tag = va >> g_.level_shift(l);
    uint32_t ways = 0;
    const uint32_t first = set_for(l, tag, &ways);
    const uint32_t i = find(first, ways, key_of(tag, asid, l), tag);
    if (i == kNone) continue;
    if (table_pa) *table_pa = slots_[i].e.table_pa;
    return l;
  }
  return 0;
}

void PagingStructureCache::fill(unsigned level, uint64_t va, uint16_t asid, uint64_t table_pa,
                                bool absent, uint64_t ready) {
  if (level >= kMaxLevels || route_[level] < 0) return;
  const uint64_t tag = va >> g_.level_shift(level);
  const uint64_t key = key_of(tag, asid, level);
  uint32_t ways = 0;
  const uint32_t first = set_for(level, tag, &ways);
  // The entry for the same tag if there is one, else the first invalid slot, else the policy's
  // victim.
  uint32_t v = absent ? kNone : find(first, ways, key, tag);
  uint64_t refill = 0;
  if (v != kNone) {  // the same entry again: the earlier arrival, the later one as its refill
    const uint64_t r = ready;
    ready = slots_[v].e.ready;
    refill = slots_[v].e.refill;
    arrival_merge(ready, refill, r);
  }
  if (v == kNone) {
    const size_t z = find_byte(bytes_.data() + first, ways, 0);
    v = z < ways ? first + uint32_t(z) : repl_[route_[level]].victim(first, ways);
  }
  slots_[v].e = PscEntry{tag, table_pa, asid, uint8_t(level), ready, refill};
  repl_[route_[level]].touch(v);
  keys_[v] = key;
  bytes_[v] = byte_of(key);
  hint_[level] = v;
  fills_->inc();
}

void PagingStructureCache::clear(uint32_t i) {
  keys_[i] = 0;
  bytes_[i] = 0;
}

unsigned PagingStructureCache::invalidate_va(uint64_t va, uint16_t asid, uint64_t at) {
  unsigned removed = 0;
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    const uint64_t tag = va >> g_.level_shift(l);
    uint32_t ways = 0;
    const uint32_t first = set_for(l, tag, &ways);
    const uint32_t i = find(first, ways, key_of(tag, asid, l), tag);
    if (i != kNone && !arrival_survives_invalidation(slots_[i].e.ready, slots_[i].e.refill, at)) {
      clear(i);
      ++removed;
    }
  }
  invalidations_->inc(removed);
  return removed;
}

unsigned PagingStructureCache::invalidate_asid(uint16_t asid) {
  unsigned removed = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (keys_[i] && slots_[i].e.asid == asid) {
      clear(i);
      ++removed;
    }
  invalidations_->inc(removed);
  return removed;
}

unsigned PagingStructureCache::invalidate_all() {
  unsigned removed = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    removed += keys_[i] != 0;
    clear(i);
  }
  invalidations_->inc(removed);
  return removed;
}

bool PagingStructureCache::check_invariants(std::string* why) const {
  for (const Replacement& r : repl_)
    if (!r.check_invariants([&](uint32_t i) { return keys_[i] != 0; }, why)) return false;
  return true;
}

size_t PagingStructureCache::occupancy() const {
  size_t n = 0;
  for (uint64_t k : keys_) n += k != 0;
  return n;
}

}  // namespace mmusim::hw
