// SPDX-License-Identifier: GPL-2.0-only
// A TLB: one or more set-associative arrays, each holding a set of page sizes, with LRU
// replacement. One class serves every TLB of both cores; the shape comes from TlbParams, with
// presets for Golden Cove (UARCH A.1, F.1) and Neoverse N1 (UARCH C.6, F.2).
//
// An entry holds the translation AS CACHED: the permissions the walk saw when it was filled (x86:
// the AND of R/W and U/S over the levels and the leaf's D flag, SDM Vol 3A §4.10.2.2; arm64: the
// leaf's AP bits), read-only included, and whether the access that filled it had retired. Stale
// entries are the point: a read-only entry survives the kernel making the PTE writable until an
// invalidation (INVLPG, #PF on x86 §4.10.4.1, TLBI on arm64) removes it.
//
// Placement (fill): the size stored can differ from the leaf's:
//  - `contiguous_64k`: a level-0 leaf with the arm64 contiguous hint is held as ONE 64K entry
//    covering the 16 pages of the block (Arm ARM D8.7.1; Cortex-A76 TRM §A5.2.2 for the L1 DTLB);
//  - `splinter`: a large page is held as a 4K entry for the accessed page only (SDM §4.10.2.3,
//    "some processors may choose to cache multiple smaller-page TLB entries");
//  - a size no array holds is stored as the largest smaller size some array holds (a 1G page in a
//    TLB without 1G entries); if none, nothing is stored.
// Among the arrays that hold a size, an entry goes to one chosen by the VPN bits just above the
// set index (Golden Cove's STLB: a 4K entry goes to array A {4K,2M} or B {4K,1G}; the real hash is
// not published [U]). Lookups probe exactly the set an entry of each size would be in.
//
// The per-access path (lookup, probe, fill) does no allocation and no map lookups.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/hwwalk.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"
#include "models/tlb/page_size.hpp"

namespace mmusim::hw {

// Where a model's trace events go and who they are attributed to. The owner (the core) keeps
// `time_ps` and `task` current; a null TraceContext* or a closed trace means no events.
struct TraceContext {
  Trace* trace = nullptr;
  int cpu = 0;
  uint64_t time_ps = 0;
  TraceTask task;
  bool on() const { return trace && trace->on(); }
};
// A core's cycle in picoseconds at `ghz` (the time base of trace events and the Os).
inline uint64_t cycles_to_ps(uint64_t cycle, double ghz) {
  return uint64_t(double(cycle) * 1000.0 / ghz + 0.5);
}

struct TlbEntry {
  uint64_t vbase = 0;  // virtual base, aligned to the entry's size
  uint64_t pbase = 0;  // physical base
  uint16_t asid = 0;   // x86 PCID, arm64 ASID
  PageSize size = PageSize::k4K;
  bool writable = false;     // permissions as cached
  bool user = false;
  bool dirty = false;        // x86 D / arm64 writable-dirty
  bool speculative = false;  // filled by an access that had not retired
  bool contiguous = false;   // made from a leaf with the arm64 contiguous hint

  uint64_t bytes() const { return page_size_bytes(size); }
  bool covers(uint64_t va) const { return (va & page_size_mask(size)) == vbase; }
  uint64_t pa(uint64_t va) const { return pbase | (va & ~page_size_mask(size)); }
};

// The translation a successful walk describes, at the leaf's own size (what fill() is given).
// `w.result` must be Ok.
TlbEntry translation_from_walk(const pg::Walk& w, uint64_t va, uint16_t asid, bool speculative);

struct TlbArrayParams {
  std::string name;        // "" for a TLB with one array (keys tlb.<tlb>.entries, ...)
  uint32_t entries = 0;
  uint32_t ways = 0;       // == entries: fully associative
  std::string page_sizes;  // "4K+2M"
  PageSizeMask mask = 0;   // parsed from page_sizes by validate()
};

// tlb.<name>.latency, .splinter, .contiguous_64k, and per array [.<array>].entries, .ways,
// .page_sizes. Defaults are the values the object holds when visit() declares it, so one preset
// function per TLB gives the defaults and the platform may instantiate it under any name.
struct TlbParams {
  std::string name;
  uint32_t latency = 0;  // cycles added by a hit, on top of what the previous level cost
  bool splinter = false;
  bool contiguous_64k = false;
  std::vector<TlbArrayParams> arrays;

  void visit(Params& p);
  // Parses page_sizes and checks the geometry; throws UserError naming the key.
  void validate();
  std::string key(const TlbArrayParams& a, const char* leaf) const;

  // Golden Cove P-core (UARCH A.1; CPUID leaf 0x18 of the i7-12700K).
  static TlbParams golden_cove_dtlb_load(const std::string& name = "dtlb_load");
  static TlbParams golden_cove_dtlb_store(const std::string& name = "dtlb_store");
  static TlbParams golden_cove_stlb(const std::string& name = "stlb");
  // Neoverse N1 (UARCH C.6; Cortex-A76 TRM §A5.2).
  static TlbParams neoverse_n1_l1_dtlb(const std::string& name = "l1_dtlb");
  static TlbParams neoverse_n1_l2_tlb(const std::string& name = "l2_tlb");
};

class Tlb {
 public:
  static constexpr unsigned kMaxArrays = 4;

  // `params` must have been validated (visit() does it when reading). Registers
  // tlb.<name>.{hits,misses,fills,fills_readonly,invalidations,evictions}.
  Tlb(const TlbParams& params, Stats& stats, TraceContext* trace = nullptr);

  const std::string& name() const { return name_; }
  uint32_t latency() const { return latency_; }
  size_t capacity() const { return cap_; }
  size_t occupancy() const;
  PageSizeMask page_sizes() const { return held_; }
  void set_trace(TraceContext* t) { trace_ = t; }

  // The entry that translates `va` for `asid`, or null. Counts a hit or a miss; a hit becomes the
  // most recently used of its set. With several matching entries (overlapping sizes), the
  // smallest size wins.
  const TlbEntry* lookup(uint64_t va, uint16_t asid) {
    const TlbEntry* e = find(va, asid, true);
    if (e) hits_->inc(); else misses_->inc();
    return e;
  }
  // The same without stats or LRU update (the invariant checker, tests).
  const TlbEntry* probe(uint64_t va, uint16_t asid) const {
    return const_cast<Tlb*>(this)->find(va, asid, false);
  }

  // Caches translation `t` (at its own size, from a walk or another TLB) for an access to `va`,
  // after the placement rules above. Replaces an entry for the same page if there is one, else
  // the set's first invalid slot, else its LRU victim. Returns the entry stored, or null if no
  // array can hold it.
  const TlbEntry* fill(uint64_t va, const TlbEntry& t);
  // The size fill() would store `t` as, or nullopt.
  std::optional<PageSize> placement(const TlbEntry& t) const;

  // Every entry of any size of `asid` that covers `va` (x86 INVLPG and #PF, SDM §4.10.4.1; arm64
  // TLBI VAE1/VALE1). Returns the number removed. `reason` goes to the trace.
  unsigned invalidate_page(uint64_t va, uint16_t asid, const char* reason);
  // Every entry of `asid` (x86 MOV CR3 / INVPCID single context, arm64 TLBI ASIDE1).
  unsigned invalidate_asid(uint16_t asid, const char* reason);
  // Everything (arm64 TLBI VMALLE1, x86 full flush).
  unsigned invalidate_all(const char* reason);

  // For the core's run-ahead reuse (OooCore::reuse_run_ahead), which replays a verified sequence
  // of lookups and fills without searching:
  // The slot of an entry lookup() or probe() returned.
  uint32_t slot_of(const TlbEntry* e) const {
    return uint32_t(reinterpret_cast<const Slot*>(e) - slots_.data());
  }
  // Whether lookup(va, asid) would return slot i, for a 4K entry (no smaller size exists): slot i
  // holds the 4K page of `va` for `asid`.
  bool slot_holds_4k(uint32_t i, uint64_t va, uint16_t asid) const {
    return i < cap_ && tags_[i] == tag_of(va & page_size_mask(PageSize::k4K), PageSize::k4K) &&
           slots_[i].e.asid == asid;
  }
  static constexpr uint32_t kNoSlot = ~uint32_t(0);
  // Whether changes are logged (on by default; a TLB nobody asks can save the work, and then
  // for_each_change_since always returns false).
  void set_change_log(bool on) { log_changes_ = on; }
  // Changes of slot contents (fills, including a refresh of the same page, and invalidations)
  // so far. for_each_change_since(c, fn) calls fn(slot) for every change after the c-th (a slot
  // may come more than once) and returns true, or returns false if the log no longer holds them
  // all.
  uint64_t changes() const { return n_changes_; }
  template <typename F>
  bool for_each_change_since(uint64_t c, F&& fn) const {
    if (!log_changes_ || n_changes_ - c > kChangeLog) return false;
    for (; c < n_changes_; ++c) fn(change_log_[c & (kChangeLog - 1)]);
    return true;
  }
  bool contiguous_64k() const { return contiguous_64k_; }
  const TlbEntry& slot_entry(uint32_t i) const { return slots_[i].e; }
  // What lookup() does when it hits slot i, for slots[0..n) in order.
  void hit_slots(const uint32_t* slots, size_t n) {
    hits_->inc(n);
    uint64_t* __restrict st = stamp_.data();
    const uint64_t c = clock_;
#pragma GCC unroll 4
    for (size_t k = 0; k < n; ++k) st[slots[k]] = c + k + 1;
    clock_ = c + n;
    if (fully_associative_) {
      for (size_t k = 0; k < n; ++k) lru_to_mru(slots[k]);
      if (n) hint_ = slots[n - 1];
    }
  }
  // How many of slots[0..n) hold read-only entries.
  size_t count_readonly(const uint32_t* slots, size_t n) const {
    const Slot* __restrict s = slots_.data();
    size_t r = 0;
    for (size_t k = 0; k < n; ++k) r += !s[slots[k]].e.writable;
    return r;
  }
  // What lookup() counts when it finds nothing (n times).
  void count_misses(uint64_t n) { misses_->inc(n); }
  // fill() would store 4K translation `t` as a 4K entry (no contiguous 64K entry, 4K held).
  bool places_4k_as_is(const TlbEntry& t) const {
    return (held_ & page_size_bit(PageSize::k4K)) && !(contiguous_64k_ && t.contiguous);
  }
  // Whether some entry of `asid` covers a 4K page in [lo, hi] (lo <= hi): if not, a lookup of
  // any page there finds nothing.
  bool covers_page_in(uint16_t asid, uint64_t lo, uint64_t hi) const {
    if (reach_end_ <= lo << 12) return false;  // no entry reaches that far
    const uint64_t* __restrict t = tags_.data();
    const Slot* __restrict sl = slots_.data();
    const size_t n = cap_;
    if (seq_ && ((t[seq_rot_] >> 12) > hi || (t[n - 1] >> 12) < lo)) {
      // The sequence state's run of 4K pages lies outside the range: the extras only.
      for (size_t i = 0; i < seq_rot_; ++i) {
        const uint64_t first = t[i] >> 12;
        const uint64_t end = first + (page_size_bytes(PageSize((t[i] >> 1) & 3)) >> 12);
        if (first <= hi && end > lo && sl[i].e.asid == asid) return true;
      }
      return false;
    }
    if (n_of_size_[unsigned(PageSize::k4K)] == n_valid_) {
      // 4K entries only: the entry's own page in the range (an invalid slot's tag, 0, is
      // checked after the range, which holds page 0 only if lo is 0).
      const uint64_t span = hi - lo;
      for (size_t i = 0; i < n; ++i)
        if ((t[i] >> 12) - lo <= span && t[i] && sl[i].e.asid == asid) return true;
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!t[i]) continue;
      const uint64_t first = t[i] >> 12;  // the tag: the virtual base, the size, a valid bit
      const uint64_t end = first + (page_size_bytes(PageSize((t[i] >> 1) & 3)) >> 12);
      if (first <= hi && end > lo && sl[i].e.asid == asid) return true;
    }
    return false;
  }
  // Whether it is in the sequence state (a fully associative TLB after a whole refill of
  // strictly increasing 4K pages: see seq_ below). For tests; nothing observable depends on it.
  bool sequence_state() const { return seq_; }
  // A fully associative TLB with every slot valid.
  bool full_fully_associative() const { return fully_associative_ && n_valid_ == cap_; }
  // fill(va, t) for the entries of `from`'s slots `slots[0..n)` in order (each marked speculative
  // or not), on a full fully associative TLB, when none of them finds its page in the TLB and no
  // lookup in between hits (the caller has checked): each evicts the least recently used entry,
  // so fill k lands in the slot that was k-th least recently used (modulo the capacity) and only
  // the last `capacity` stay. Counters, LRU order and clock end as after the n fills. No trace
  // events (the caller does not use it when tracing). `readonly`: how many of the entries are
  // read-only (from.count_readonly(slots, n); the caller has usually counted them already).
  void fill_sequence_evicting(const Tlb& from, const uint32_t* slots, size_t n, bool speculative,
                              size_t readonly);

  // Every valid entry, in array/set/way order (the invariant checker).
  template <typename F>
  void for_each(F&& fn) const {
    for (size_t i = 0; i < cap_; ++i)
      if (tags_[i]) fn(slots_[i].e);
  }

 private:
  static constexpr uint32_t kNone = ~uint32_t(0);
  struct Slot {
    TlbEntry e;
  };
  struct Array {
    uint32_t sets = 1;
    uint32_t ways = 1;
    uint32_t set_mask = 0;  // sets - 1 if a power of two, else 0 (modulo indexing)
    int sets_shift = -1;    // log2(sets) if a power of two
    uint32_t first = 0;     // index of its first slot in slots_
    PageSizeMask mask = 0;
    uint32_t set_of(uint64_t vpn) const {
      // (No division for a power of two.)
      return set_mask || sets == 1 ? uint32_t(vpn & set_mask) : uint32_t(vpn % sets);
    }
  };
  // The arrays that hold one size; an entry of that size goes to one of them chosen by the VPN.
  struct Route {
    uint8_t n = 0;
    uint8_t arr[kMaxArrays] = {};
  };

  // A valid slot's key: the virtual base (aligned, so its low 12 bits are free), the size and a
  // valid bit; an invalid slot's tag is 0. The tags sit apart from the entries so that a set's
  // ways are compared within one or two cache lines.
  static uint64_t tag_of(uint64_t vbase, PageSize s) { return vbase | (uint64_t(s) << 1) | 1; }

  // The first slot of the set an entry of size `s` for `va` lives in (kNone if no array holds s).
  uint32_t set_for(PageSize s, uint64_t va, uint32_t* ways) const {
    const Route& r = route_[unsigned(s)];
    if (r.n == 0) return kNone;
    uint64_t vpn = va >> page_size_shift(s);
    const Array* a = &arrays_[r.arr[0]];
    if (r.n > 1) {
      const uint64_t above = a->sets_shift >= 0 ? vpn >> a->sets_shift : vpn / a->sets;
      a = &arrays_[r.arr[(r.n & (r.n - 1)) == 0 ? above & (r.n - 1) : above % r.n]];
    }
    *ways = a->ways;
    return a->first + a->set_of(vpn) * a->ways;
  }
  const TlbEntry* find(uint64_t va, uint16_t asid, bool touch) {
    // Sizes from the smallest up: the first match is the smallest covering entry.
    for (unsigned si = 0; si < kNumPageSizes; ++si) {
      if (!n_of_size_[si]) continue;  // no entry of this size (or a size not held)
      const PageSize s = PageSize(si);
      const uint64_t want = tag_of(va & page_size_mask(s), s);
      uint32_t i = kNone;
      if (fully_associative_) {
        i = fa_find(want, asid);
      } else {
        uint32_t ways = 0;
        const uint32_t set = set_for(s, va, &ways);
        for (uint32_t w = 0; w < ways; ++w)
          if (tags_[set + w] == want && slots_[set + w].e.asid == asid) {
            i = set + w;
            break;
          }
      }
      if (i == kNone) continue;
      if (touch) {
        stamp_[i] = ++clock_;
        if (fully_associative_) {
          hint_ = i;
          lru_to_mru(i);
        }
      }
      return &slots_[i].e;
    }
    return nullptr;
  }

  // Fully associative TLBs (one set: the 16-entry Golden Cove store DTLB, the 48-entry N1 L1
  // DTLB) check the slot of the last hit or fill first (hint_: consecutive accesses mostly use the
  // same page), then an index from (tag, ASID) to slot, open addressing with linear probing; their
  // valid slots are kept in a list in LRU order. A lookup, a fill and its victim cost the same
  // whatever the capacity, and the result is the scan's: the same page's slot (entries are
  // unique), else the first invalid slot, else the least recently used.
  uint32_t fa_home(uint64_t tag, uint16_t asid) const {
    return uint32_t(((tag ^ (uint64_t(asid) << 48)) * 0x9E3779B97F4A7C15ull) >> index_shift_);
  }
  uint32_t fa_find(uint64_t tag, uint16_t asid) const {
    const uint32_t h = hint_;
    if (h < cap_ && tags_[h] == tag && slots_[h].e.asid == asid) return h;
    if (seq_) return seq_find(tag, asid);
    for (uint32_t p = fa_home(tag, asid);; p = (p + 1) & index_mask_) {
      const uint32_t i = index_[p];
      if (i == kNone) return kNone;
      if (tags_[i] == tag && slots_[i].e.asid == asid) return i;
    }
  }
  void fa_index(uint32_t i) {  // slot i's tag is set: into the index
    uint32_t p = home_[i] = fa_home(tags_[i], slots_[i].e.asid);
    while (index_[p] != kNone) p = (p + 1) & index_mask_;
    index_[p] = i;
    pos_[i] = p;
  }
  // The sequence state (seq_), for fully associative TLBs after a whole refill of strictly
  // increasing 4K pages (fill_sequence_evicting, once per fault in the run-ahead replay): the
  // index and the LRU list are not kept. Every slot is valid; slots [seq_rot_, capacity) hold
  // the refill's last pages in increasing order (the run), slots [0, seq_rot_) the fills since,
  // in fill order (the extras); the LRU order is seq_rot_, ..., capacity - 1, 0, ..., seq_rot_ - 1
  // (lru_ and mru_ are kept), which each fill of a new page (evicting the LRU, slot seq_rot_)
  // keeps. A lookup scans the extras and binary-searches the run (a page outside the run's range
  // costs two comparisons). Whatever the state cannot express (a hit that reorders, an
  // invalidation that removes, a partial sequence, more than kSeqMaxExtras extras) first builds
  // the index and the list (seq_leave): the same state the fills one by one would have left.
  static constexpr uint32_t kSeqMaxExtras = 8;
  uint32_t seq_find(uint64_t tag, uint16_t asid) const {
    const uint64_t* __restrict t = tags_.data();
    for (uint32_t i = 0; i < seq_rot_; ++i)
      if (t[i] == tag && slots_[i].e.asid == asid) return i;
    const uint32_t cap = cap_;
    if (tag < t[seq_rot_] || tag > t[cap - 1]) return kNone;  // (seq_rot_ < cap)
    const uint32_t i = uint32_t(std::lower_bound(t + seq_rot_, t + cap, tag) - t);
    return t[i] == tag && slots_[i].e.asid == asid ? i : kNone;
  }
  void seq_leave();
  void fa_insert(uint32_t i);  // slot i's tag is set: index it, make it the most recently used
  void fa_remove(uint32_t i);  // before slot i's tag is cleared
  void fa_rebuild();           // after a bulk invalidation
  void lru_unlink(uint32_t i);
  void lru_push_mru(uint32_t i);
  void lru_to_mru(uint32_t i) {
    if (mru_ == i) return;
    if (seq_) seq_leave();
    lru_unlink(i);
    lru_push_mru(i);
  }
  // Slot `i` now holds nothing.
  void clear_slot(uint32_t i) {
    if (tags_[i]) {
      --n_of_size_[unsigned(slots_[i].e.size)];
      --n_valid_;
    }
    tags_[i] = 0;
    note_change(i);
  }
  void note_change(uint32_t i) {
    if (log_changes_) change_log_[n_changes_++ & (kChangeLog - 1)] = i;
  }

  // `all`: "all" for the whole-TLB/ASID forms, null for a page; `asid` < 0: every ASID.
  void trace_invalidate(const char* all, uint64_t va, int asid, const char* reason,
                        unsigned removed);

  std::string name_;
  uint32_t latency_;
  bool splinter_;
  bool contiguous_64k_;
  PageSizeMask held_ = 0;
  bool fully_associative_ = true;      // every array has one set
  std::vector<Array> arrays_;
  std::vector<Slot> slots_;
  uint32_t cap_ = 0;  // slots_.size()
  std::vector<uint64_t> tags_;  // per slot (tag_of, 0 = invalid)
  std::vector<uint64_t> stamp_;  // per slot: the clock at its last fill or hit (LRU order in a set)
  uint32_t n_of_size_[kNumPageSizes] = {};  // valid entries of each size (lookups skip the absent)
  Route route_[kNumPageSizes];
  uint32_t n_valid_ = 0;  // valid slots
  // Fully associative only: the hint, the index (kNone = empty bucket; per valid slot its home
  // bucket and the bucket it is in), the LRU list (prev/next by slot, lru_ the least and mru_ the
  // most recently used).
  uint32_t hint_ = kNone;
  std::vector<uint32_t> index_;
  uint32_t index_mask_ = 0;
  unsigned index_shift_ = 64;
  std::vector<uint32_t> home_, pos_;
  std::vector<uint32_t> prev_, next_;
  uint32_t lru_ = kNone, mru_ = kNone;
  bool seq_ = false;       // the sequence state (above)
  uint32_t seq_rot_ = 0;   // in it: the extras, the LRU slot
  std::vector<uint32_t> order_scratch_;  // scratch: fill_sequence_evicting, fa_rebuild
  uint64_t clock_ = 0;
  // At or above the end of every valid entry's range (raised by fills, zeroed when the TLB is
  // emptied, not lowered by other invalidations): covers_page_in's shortcut.
  uint64_t reach_end_ = 0;
  // Every change of a slot's content (a fill, an invalidation), counted; the last kChangeLog
  // slots changed, by count.
  static constexpr size_t kChangeLog = 64;
  bool log_changes_ = true;
  uint64_t n_changes_ = 0;
  std::array<uint32_t, kChangeLog> change_log_{};
  TraceContext* trace_;
  Counter* hits_;
  Counter* misses_;
  Counter* fills_;
  Counter* fills_readonly_;
  Counter* invalidations_;
  Counter* evictions_;
};

}  // namespace mmusim::hw
