// SPDX-License-Identifier: GPL-2.0-only
// The run-ahead replay's view of a Tlb (RunaheadReuse, models/core/runahead_reuse.hpp: host-speed
// memoisation of a fault's run-ahead). It replays a verified sequence of lookups and fills
// without searching: hits by slot, a whole refill of a fully associative TLB in one step, and
// the questions the replay's checks ask (does a slot still hold its page, which slots changed,
// does any entry cover a range of pages). Nothing else uses it; core.runahead_check compares
// every replayed segment with what the TLB holds (RunaheadReuse::check_replay).
//
// The replay reproduces LRU's order only: for a TLB with another policy usable() is false and
// the core simulates every position instead (correct results first).
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/tlb/tlb.hpp"

namespace mmusim::hw {

class TlbReplay {
 public:
  explicit TlbReplay(Tlb& t) : t_(t) {}

  // Whether the replay may use this TLB (its replacement is LRU).
  bool usable() const { return t_.repl_.kind() == ReplacementKind::lru; }
  // A fully associative TLB with every slot valid.
  bool full_fully_associative() const { return t_.fully_associative_ && t_.n_valid_ == t_.cap_; }
  // Whether it is in the sequence state (TlbReplayState::seq). For tests; nothing observable
  // depends on it.
  bool sequence_state() const { return t_.rs_.seq; }

  // Whether lookup(va, asid) would return slot i, for a 4K entry (no smaller size exists): slot i
  // holds the 4K page of `va` for `asid`.
  bool slot_holds_4k(uint32_t i, uint64_t va, uint16_t asid) const {
    return i < t_.cap_ &&
           t_.tags_[i] == Tlb::tag_of(va & page_size_mask(PageSize::k4K), PageSize::k4K) &&
           t_.slots_[i].e.asid == asid;
  }
  const TlbEntry& slot_entry(uint32_t i) const { return t_.slots_[i].e; }
  bool contiguous_64k() const { return t_.contiguous_64k_; }
  // fill() would store 4K translation `t` as a 4K entry (no contiguous 64K entry, 4K held).
  bool places_4k_as_is(const TlbEntry& t) const {
    return (t_.held_ & page_size_bit(PageSize::k4K)) && !(t_.contiguous_64k_ && t.contiguous);
  }

  // Whether changes are logged (on by default; a TLB nobody asks can save the work, and then
  // for_each_change_since always returns false).
  void set_change_log(bool on) { t_.rs_.log_changes = on; }
  // Changes of slot contents (fills, including a refresh of the same page, and invalidations)
  // so far. for_each_change_since(c, fn) calls fn(slot) for every change after the c-th (a slot
  // may come more than once) and returns true, or returns false if the log no longer holds them
  // all.
  uint64_t changes() const { return t_.rs_.n_changes; }
  template <typename F>
  bool for_each_change_since(uint64_t c, F&& fn) const {
    const TlbReplayState& rs = t_.rs_;
    if (!rs.log_changes || rs.n_changes - c > TlbReplayState::kChangeLog) return false;
    for (; c < rs.n_changes; ++c) fn(rs.change_log[c & (TlbReplayState::kChangeLog - 1)]);
    return true;
  }

  // What lookup() does when it hits slot i, for slots[0..n) in order (LRU only).
  void hit_slots(const uint32_t* slots, size_t n);
  // How many of slots[0..n) hold read-only entries.
  size_t count_readonly(const uint32_t* slots, size_t n) const {
    const Tlb::Slot* __restrict s = t_.slots_.data();
    size_t r = 0;
    for (size_t k = 0; k < n; ++k) r += !s[slots[k]].e.writable;
    return r;
  }
  // What lookup() counts when it finds nothing (n times).
  void count_misses(uint64_t n) { t_.misses_->inc(n); }
  // Whether some entry of `asid` covers a 4K page in [lo, hi] (lo <= hi): if not, a lookup of
  // any page there finds nothing.
  bool covers_page_in(uint16_t asid, uint64_t lo, uint64_t hi) const;
  // fill(va, t) for the entries of `from`'s slots `slots[0..n)` in order (each marked speculative
  // or not), on a full fully associative TLB under LRU, when none of them finds its page in the
  // TLB and no lookup in between hits (the caller has checked): each evicts the least recently
  // used entry, so fill k lands in the slot that was k-th least recently used (modulo the
  // capacity) and only the last `capacity` stay. Counters, LRU order and the sequence state end
  // as after the n fills. No trace events (the caller does not use it when tracing). `readonly`:
  // how many of the entries are read-only (count_readonly(slots, n) on `from`; the caller has
  // usually counted them already).
  void fill_sequence_evicting(const Tlb& from, const uint32_t* slots, size_t n, bool speculative,
                              size_t readonly);

 private:
  Tlb& t_;
};

}  // namespace mmusim::hw
