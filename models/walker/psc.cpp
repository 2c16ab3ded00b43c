// SPDX-License-Identifier: GPL-2.0-only
#include "models/walker/psc.hpp"

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

unsigned PagingStructureCache::lookup(uint64_t va, uint16_t asid, uint64_t* table_pa) {
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    uint64_t tag = va >> g_.level_shift(l);
    uint32_t ways = 0;
    Slot* set = set_for(l, tag, &ways);
    for (uint32_t w = 0; w < ways; ++w) {
      Slot& s = set[w];
      if (s.valid && s.e.tag == tag && s.e.level == l && s.e.asid == asid) {
        s.lru = ++clock_;
        hits_[l]->inc();
        if (table_pa) *table_pa = s.e.table_pa;
        return l;
      }
    }
  }
  misses_->inc();
  return 0;
}

unsigned PagingStructureCache::probe(uint64_t va, uint16_t asid, uint64_t* table_pa) const {
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    uint64_t tag = va >> g_.level_shift(l);
    const Array& a = arrays_[route_[l]];
    const Slot* set = &slots_[a.first + size_t(tag % a.sets) * a.ways];
    for (uint32_t w = 0; w < a.ways; ++w) {
      const Slot& s = set[w];
      if (s.valid && s.e.tag == tag && s.e.level == l && s.e.asid == asid) {
        if (table_pa) *table_pa = s.e.table_pa;
        return l;
      }
    }
  }
  return 0;
}

void PagingStructureCache::fill(unsigned level, uint64_t va, uint16_t asid, uint64_t table_pa) {
  if (level >= kMaxLevels || route_[level] < 0) return;
  uint64_t tag = va >> g_.level_shift(level);
  uint32_t ways = 0;
  Slot* set = set_for(level, tag, &ways);
  Slot* victim = nullptr;
  for (uint32_t w = 0; w < ways; ++w) {
    Slot& s = set[w];
    if (s.valid && s.e.tag == tag && s.e.level == level && s.e.asid == asid) {
      victim = &s;
      break;
    }
    if (!victim || (victim->valid && (!s.valid || s.lru < victim->lru))) victim = &s;
  }
  victim->e = PscEntry{tag, table_pa, asid, uint8_t(level)};
  victim->valid = true;
  victim->lru = ++clock_;
  fills_->inc();
}

unsigned PagingStructureCache::invalidate_va(uint64_t va, uint16_t asid) {
  unsigned removed = 0;
  for (unsigned l = 1; l < g_.levels; ++l) {
    if (route_[l] < 0) continue;
    uint64_t tag = va >> g_.level_shift(l);
    uint32_t ways = 0;
    Slot* set = set_for(l, tag, &ways);
    for (uint32_t w = 0; w < ways; ++w) {
      Slot& s = set[w];
      if (s.valid && s.e.tag == tag && s.e.level == l && s.e.asid == asid) {
        s.valid = false;
        ++removed;
      }
    }
  }
  invalidations_->inc(removed);
  return removed;
}

unsigned PagingStructureCache::invalidate_asid(uint16_t asid) {
  unsigned removed = 0;
  for (Slot& s : slots_)
    if (s.valid && s.e.asid == asid) {
      s.valid = false;
      ++removed;
    }
  invalidations_->inc(removed);
  return removed;
}

unsigned PagingStructureCache::invalidate_all() {
  unsigned removed = 0;
  for (Slot& s : slots_) {
    removed += s.valid;
    s.valid = false;
  }
  invalidations_->inc(removed);
  return removed;
}

size_t PagingStructureCache::occupancy() const {
  size_t n = 0;
  for (const Slot& s : slots_) n += s.valid;
  return n;
}

}  // namespace mmusim::hw
