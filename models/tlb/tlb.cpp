// SPDX-License-Identifier: GPL-2.0-only
#include "models/tlb/tlb.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "base/error.hpp"

namespace mmusim::hw {

// ---------------------------------------------------------------------------------------------
// Page sizes

const char* page_size_name(PageSize s) {
  switch (s) {
    case PageSize::k4K: return "4K";
    case PageSize::k64K: return "64K";
    case PageSize::k2M: return "2M";
    case PageSize::k1G: return "1G";
  }
  return "?";
}

std::optional<PageSize> page_size_from_bytes(uint64_t bytes) {
  for (unsigned i = 0; i < kNumPageSizes; ++i)
    if (page_size_bytes(PageSize(i)) == bytes) return PageSize(i);
  return std::nullopt;
}

std::optional<PageSizeMask> parse_page_sizes(std::string_view text, std::string* why) {
  PageSizeMask m = 0;
  std::string tok;
  auto flush = [&]() -> bool {
    if (tok.empty()) {
      if (why) *why = "empty page size in the list";
      return false;
    }
    for (unsigned i = 0; i < kNumPageSizes; ++i) {
      std::string n = page_size_name(PageSize(i));
      bool eq = n.size() == tok.size();
      for (size_t k = 0; eq && k < n.size(); ++k)
        eq = std::toupper(static_cast<unsigned char>(tok[k])) == n[k];
      if (eq) {
        if (m & (1u << i)) {
          if (why) *why = fmt::format("page size {} given twice", n);
          return false;
        }
        m |= PageSizeMask(1u << i);
        tok.clear();
        return true;
      }
    }
    if (why) *why = fmt::format("unknown page size '{}'", tok);
    return false;
  };
  for (char c : text) {
    if (c == '+' || c == ',' || c == '|') {
      if (!flush()) return std::nullopt;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      tok += c;
    }
  }
  if (!flush()) return std::nullopt;
  return m;
}

std::string format_page_sizes(PageSizeMask m) {
  std::string s;
  for (unsigned i = 0; i < kNumPageSizes; ++i)
    if (m & (1u << i)) {
      if (!s.empty()) s += '+';
      s += page_size_name(PageSize(i));
    }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Entries from walks

TlbEntry translation_from_walk(const pg::Walk& w, uint64_t va, uint16_t asid, bool speculative) {
  MMUSIM_CHECK(w.result == pg::Walk::Ok, "TLB fill from a walk that faulted (va {:#x})", va);
  std::optional<PageSize> s = page_size_from_bytes(w.page_size);
  MMUSIM_CHECK(s.has_value(), "walk leaf of {} bytes has no TLB page size", w.page_size);
  TlbEntry e;
  e.vbase = va & page_size_mask(*s);
  e.pbase = w.page_pa;
  e.asid = asid;
  e.size = *s;
  e.writable = w.writable;
  e.user = w.user;
  e.exec = w.executable;
  e.dirty = w.dirty;
  e.speculative = speculative;
  e.contiguous = w.contiguous;
  e.origin_page = va >> Tlb::kPageShift;
  return e;
}

// ---------------------------------------------------------------------------------------------
// Parameters

std::string TlbParams::key(const TlbArrayParams& a, const char* leaf) const {
  return a.name.empty() ? fmt::format("tlb.{}.{}", name, leaf)
                        : fmt::format("tlb.{}.{}.{}", name, a.name, leaf);
}

void TlbParams::visit(Params& p) {
  const std::string pre = "tlb." + name + ".";
  p.integer(pre + "latency", latency, latency, 0, 1000,
            "Cycles a hit in this TLB adds to the translation, on top of the levels before it "
            "(0 for an L1 DTLB looked up in parallel with the L1D tags)",
            "cycles");
  p.boolean(pre + "splinter", splinter, splinter,
            "Cache a large page as a 4K entry for the accessed page only (SDM Vol 3A §4.10.2.3 "
            "allows it; whether Golden Cove does it is not published [U])");
  p.boolean(pre + "contiguous_64k", contiguous_64k, contiguous_64k,
            "Hold a PTE with the arm64 contiguous bit as one 64K entry for its 16-page block "
            "(needs an array holding 64K; Cortex-A76 TRM §A5.2.2)");
  replacement_param(p, pre + "replacement", replacement, "every array of TLB " + name);
  for (TlbArrayParams& a : arrays) {
    std::string what = a.name.empty() ? "" : " of array " + a.name;
    p.integer(key(a, "entries"), a.entries, a.entries, 1, 1 << 20, "Entries" + what);
    p.integer(key(a, "ways"), a.ways, a.ways, 1, 1 << 20,
              "Associativity" + what + " (= entries: fully associative); sets = entries / ways");
    p.string(key(a, "page_sizes"), a.page_sizes, a.page_sizes,
             "Page sizes held" + what + ": 4K, 64K, 2M, 1G joined by '+' (e.g. 4K+2M)");
  }
  if (!p.is_declaring()) validate();
}

void TlbParams::validate() {
  if (arrays.empty() || arrays.size() > Tlb::kMaxArrays)
    panic("TLB {} declared with {} arrays (1 to {} allowed)", name, arrays.size(), Tlb::kMaxArrays);
  PageSizeMask all = 0;
  for (TlbArrayParams& a : arrays) {
    std::string why;
    std::optional<PageSizeMask> m = parse_page_sizes(a.page_sizes, &why);
    if (!m)
      fatal("{} = '{}': {}; allowed: page sizes 4K, 64K, 2M, 1G joined by '+' (e.g. 4K+2M)",
            key(a, "page_sizes"), a.page_sizes, why);
    a.mask = *m;
    all |= a.mask;
    if (a.ways == 0 || a.entries == 0 || a.ways > a.entries || a.entries % a.ways != 0)
      fatal("{} = {} and {} = {}: the entries must be a multiple of the ways (ways = entries for "
            "a fully associative array)",
            key(a, "entries"), a.entries, key(a, "ways"), a.ways);
  }
  if (contiguous_64k && !(all & page_size_bit(PageSize::k64K)))
    fatal("tlb.{}.contiguous_64k = true needs an array that holds 64K entries (add 64K to a "
          "page_sizes key of tlb.{})",
          name, name);
  if (splinter && !(all & page_size_bit(PageSize::k4K)))
    fatal("tlb.{}.splinter = true needs an array that holds 4K entries", name);
}

// ---------------------------------------------------------------------------------------------
// Tlb

// A replacement group per array: its sets of `ways` slots.
static std::vector<ReplacementGroup> replacement_groups(const TlbParams& p) {
  std::vector<ReplacementGroup> g;
  uint32_t first = 0;
  for (const TlbArrayParams& a : p.arrays) {
    const uint32_t ways = a.ways ? a.ways : 1;
    g.push_back({first, a.entries / ways, ways});
    first += a.entries;
  }
  return g;
}

Tlb::Tlb(const TlbParams& p, Stats& stats, TraceContext* trace)
    : name_(p.name),
      latency_(p.latency),
      splinter_(p.splinter),
      contiguous_64k_(p.contiguous_64k),
      repl_(p.replacement, replacement_groups(p)),
      trace_(trace) {
  MMUSIM_CHECK(!p.arrays.empty() && p.arrays.size() <= kMaxArrays, "TLB {}: {} arrays", p.name,
               p.arrays.size());
  uint32_t first = 0;
  for (const TlbArrayParams& ap : p.arrays) {
    MMUSIM_CHECK(ap.mask != 0 && ap.ways > 0 && ap.entries % ap.ways == 0,
                 "TLB {} array '{}' not validated (page_sizes '{}', {} entries, {} ways)", p.name,
                 ap.name, ap.page_sizes, ap.entries, ap.ways);
    Array a;
    a.ways = ap.ways;
    a.sets = ap.entries / ap.ways;
    a.set_mask = (a.sets & (a.sets - 1)) == 0 ? a.sets - 1 : 0;
    if (a.sets == 1) a.set_mask = 0;  // vpn % 1 == 0 either way; keep the modulo path exact
    if ((a.sets & (a.sets - 1)) == 0) a.sets_shift = __builtin_ctz(a.sets);
    a.first = first;
    a.mask = ap.mask;
    first += ap.entries;
    for (unsigned s = 0; s < kNumPageSizes; ++s)
      if (a.mask & (1u << s)) {
        Route& r = route_[s];
        r.arr[r.n++] = uint8_t(arrays_.size());
      }
    held_ |= a.mask;
    arrays_.push_back(a);
  }
  // (Several arrays of one set each are searched set by set, each its own.)
  fully_associative_ = arrays_.size() == 1 && arrays_[0].sets == 1;
  slots_.resize(first);
  cap_ = first;
  tags_.assign(first, 0);
  if (fully_associative_) {
    size_t buckets = 16;
    while (buckets < 4 * size_t(first)) buckets <<= 1;  // a load of at most 1/4
    index_.assign(buckets, kNone);
    index_mask_ = uint32_t(buckets - 1);
    index_shift_ = 64 - unsigned(__builtin_ctzll(buckets));
    home_.assign(first, 0);
    pos_.assign(first, 0);
  }
  StatGroup g(stats, "tlb." + name_);
  hits_ = &g.counter("hits", "Lookups that found a translation", "lookups");
  misses_ = &g.counter("misses", "Lookups that found none", "lookups");
  fills_ = &g.counter("fills", "Translations cached", "entries");
  fills_readonly_ = &g.counter("fills_readonly",
                               "Translations cached without write permission (a store through "
                               "one faults even if memory now allows it)",
                               "entries");
  invalidations_ = &g.counter("invalidations", "Entries removed by invalidation operations",
                              "entries");
  evictions_ = &g.counter("evictions", "Valid entries replaced by a fill (the replacement policy's "
                          "victims)", "entries");
}

size_t Tlb::occupancy() const {
  size_t n = 0;
  for (uint64_t t : tags_) n += t != 0;
  return n;
}

void Tlb::fa_remove(uint32_t i) {
  if (rs_.seq) seq_leave();  // sequence state: it cannot express a removal
  uint32_t p = pos_[i];
  // Backward-shift deletion: move up every later entry of the cluster whose home does not lie
  // cyclically in (p, j].
  for (uint32_t j = (p + 1) & index_mask_; index_[j] != kNone; j = (j + 1) & index_mask_) {
    const uint32_t k = index_[j];
    const uint32_t home = home_[k];
    const bool home_in_p_j = p <= j ? (home > p && home <= j) : (home > p || home <= j);
    if (!home_in_p_j) {
      index_[p] = k;
      pos_[k] = p;
      p = j;
    }
  }
  index_[p] = kNone;
}

void Tlb::seq_leave() {
  // The index the fills one by one would have built (which bucket holds which slot does not
  // change what a lookup finds).
  rs_.seq = false;
  std::fill(index_.begin(), index_.end(), kNone);
  for (uint32_t i = 0; i < cap_; ++i) fa_index(i);
}

void Tlb::fa_rebuild() {
  rs_.seq = false;
  std::fill(index_.begin(), index_.end(), kNone);
  for (uint32_t i = 0; i < cap_; ++i)
    if (tags_[i]) fa_index(i);
}

std::optional<PageSize> Tlb::placement(const TlbEntry& t) const {
  PageSize s = t.size;
  if (contiguous_64k_ && s == PageSize::k4K && t.contiguous) s = PageSize::k64K;
  if (splinter_ && s > PageSize::k4K) s = PageSize::k4K;
  // The largest size no larger than s that some array holds.
  for (int i = int(s); i >= 0; --i)
    if (held_ & (1u << i)) return PageSize(i);
  return std::nullopt;
}

const TlbEntry* Tlb::fill(uint64_t va, const TlbEntry& t) {
  std::optional<PageSize> ps = placement(t);
  if (!ps) return nullptr;
  const PageSize s = *ps;
  TlbEntry e = t;
  e.size = s;
  e.vbase = va & page_size_mask(s);
  // Same offset into the translation whether the entry shrinks (splinter) or grows (the
  // contiguous block: the block's output address is aligned to its size, Arm ARM D8.7.1).
  e.pbase = (t.pbase + (e.vbase - t.vbase)) & page_size_mask(s);

  const uint64_t tag = tag_of(e.vbase, s);
  uint32_t v = kNone;
  bool same_page = false;
  if (fully_associative_) {
    v = fa_find(tag, e.asid);
    same_page = v != kNone;
    if (same_page) {
      fa_hit(v);  // refreshed in place
    } else {
      if (n_valid_ < cap_) {
        v = 0;
        while (tags_[v]) ++v;  // the first invalid slot
      } else {
        v = fa_evict();
      }
      hint_ = v;
    }
  } else {
    uint32_t ways = 0;
    const uint32_t set = set_for(s, va, &ways);
    const uint64_t* __restrict t = tags_.data() + set;
    for (uint32_t w = 0; w < ways; ++w)
      if (t[w] == tag && slots_[set + w].e.asid == e.asid) {
        v = set + w;  // same page: refresh in place, no duplicate
        same_page = true;
        break;
      }
    if (!same_page) {
      // The first invalid way, else the policy's victim.
      uint32_t b = 0;
      while (b < ways && t[b]) ++b;
      v = b < ways ? set + b : repl_.victim(set, ways);
    }
  }
  if (!same_page) {
    if (tags_[v]) {
      evictions_->inc();
      ++removals_;
      --n_of_size_[unsigned(slots_[v].e.size)];
    } else {
      ++n_valid_;
    }
    ++n_of_size_[unsigned(s)];
  }
  Slot* victim = &slots_[v];
  // The same page again: it has been there since the earlier of the two arrivals; a later one
  // is kept as a refill (an invalidation in between removes only the first).
  if (same_page) {
    const uint64_t r = e.ready;
    e.ready = victim->e.ready;
    e.refill = victim->e.refill;
    arrival_merge(e.ready, e.refill, r);
  }
  victim->e = e;
  rs_.note_change(v);
  rs_.note_reach(e.vbase + page_size_bytes(s));
  repl_.touch(v);
  tags_[v] = tag;
  if (fully_associative_ && !same_page) fa_insert(v);
  fills_->inc();
  if (!e.writable) fills_readonly_->inc();
  if (trace_ && trace_->on())
    trace_->trace->event(trace_->time_ps, trace_->cpu, trace_->task, "tlb_fill",
                         {TraceField::hex("address", e.vbase),
                          TraceField::str("size", page_size_name(s)),
                          TraceField::str("perm", e.writable ? "rw" : "ro"),
                          TraceField::dec("spec", e.speculative), TraceField::str("tlb", name_),
                          TraceField::dec("asid", e.asid), TraceField::hex("pa", e.pbase)});
  return &victim->e;
}

unsigned Tlb::invalidate_page(uint64_t va, uint16_t asid, const char* reason, uint64_t at) {
  unsigned removed = 0;
  for (unsigned si = 0; si < kNumPageSizes; ++si) {
    if (!n_of_size_[si]) continue;
    PageSize s = PageSize(si);
    const uint64_t tag = tag_of(va & page_size_mask(s), s);
    if (fully_associative_) {
      if (uint32_t i = fa_find(tag, asid); i != kNone) {
        if (survives_invalidation(slots_[i].e, at)) continue;
        fa_remove(i);
        clear_slot(i);
        ++removed;
      }
      continue;
    }
    uint32_t ways = 0;
    const uint32_t set = set_for(s, va, &ways);
    for (uint32_t w = 0; w < ways; ++w)
      if (tags_[set + w] == tag && slots_[set + w].e.asid == asid) {
        if (survives_invalidation(slots_[set + w].e, at)) continue;
        clear_slot(set + w);
        ++removed;
      }
  }
  invalidations_->inc(removed);
  if (trace_ && trace_->on()) trace_invalidate(nullptr, va, asid, reason, removed);
  return removed;
}

unsigned Tlb::invalidate_asid(uint16_t asid, const char* reason) {
  unsigned removed = 0;
  for (uint32_t i = 0; i < cap_; ++i)
    if (tags_[i] && slots_[i].e.asid == asid) {
      clear_slot(i);
      ++removed;
    }
  if (fully_associative_ && removed) fa_rebuild();
  invalidations_->inc(removed);
  if (trace_ && trace_->on()) trace_invalidate("all", 0, asid, reason, removed);
  return removed;
}

unsigned Tlb::invalidate_all(const char* reason) {
  unsigned removed = 0;
  for (uint32_t i = 0; i < cap_; ++i) {
    removed += tags_[i] != 0;
    clear_slot(i);
  }
  rs_.reach_end = 0;
  if (fully_associative_ && removed) fa_rebuild();
  invalidations_->inc(removed);
  if (trace_ && trace_->on()) trace_invalidate("all", 0, -1, reason, removed);
  return removed;
}

void Tlb::trace_invalidate(const char* all, uint64_t va, int asid, const char* reason,
                           unsigned removed) {
  if (!trace_ || !trace_->on()) return;
  TraceField addr = all ? TraceField::str("address", all) : TraceField::hex("address", va);
  TraceField why = TraceField::str("reason", reason ? reason : "unspecified");
  if (asid < 0)
    trace_->trace->event(trace_->time_ps, trace_->cpu, trace_->task, "tlb_invalidate",
                         {addr, why, TraceField::str("tlb", name_),
                          TraceField::dec("removed", removed)});
  else
    trace_->trace->event(trace_->time_ps, trace_->cpu, trace_->task, "tlb_invalidate",
                         {addr, why, TraceField::str("tlb", name_),
                          TraceField::dec("removed", removed), TraceField::dec("asid", unsigned(asid))});
}

}  // namespace mmusim::hw
