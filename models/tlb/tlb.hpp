// SPDX-License-Identifier: GPL-2.0-only
// A TLB: one or more set-associative arrays, each holding a set of page sizes, with a
// replacement policy (tlb.<name>.replacement: LRU by default; models/replacement). One class serves every TLB of both cores; the shape comes from TlbParams, with
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
// The per-access path (lookup, probe, fill) does no allocation and no map lookups. What exists
// only for the core's run-ahead replay (host speed) is reached through TlbReplay
// (models/tlb/tlb_replay.hpp); its state is TlbReplayState (tlb_replay_state.hpp).
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
#include "models/replacement/replacement.hpp"
#include "models/tlb/arrival.hpp"
#include "models/tlb/page_size.hpp"
#include "models/tlb/tlb_replay_state.hpp"

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
  bool exec = false;         // user instruction fetch permitted (x86 no XD, arm64 no UXN)
  bool dirty = false;        // x86 D / arm64 writable-dirty
  bool speculative = false;  // filled by an access that had not retired
  bool contiguous = false;   // made from a leaf with the arm64 contiguous hint
  // When the fill arrives: the cycle the walk that made it completes (0: already there). A walk
  // fills the TLBs when its reads are done, not when it starts: before that cycle a lookup of the
  // same 4K page waits for it (the miss joins the walk in flight), a lookup of another page it
  // covers misses (nothing tells the hardware a walk in flight will bring a large page), and an
  // invalidation at an earlier cycle does not remove it (it was not there yet).
  uint64_t ready = 0;
  // A later walk's fill of the same entry (0: none): if an invalidation comes between the two
  // arrivals, the entry is gone until this one (ready becomes it).
  uint64_t refill = 0;
  uint64_t origin_page = 0;  // the 4K page number of the access whose walk made it

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

// tlb.<name>.latency, .splinter, .contiguous_64k, .replacement, and per array [.<array>].entries, .ways,
// .page_sizes. visit() declares the values the object holds as the defaults; the platforms'
// values come from their config files instead (platforms/platform.cpp build_schema), the preset
// (CoreMmuParams::*_structure) gives only the TLB's name and arrays.
struct TlbParams {
  std::string name;
  uint32_t latency = 0;  // cycles added by a hit, on top of what the previous level cost
  bool splinter = false;
  bool contiguous_64k = false;
  ReplacementKind replacement = ReplacementKind::lru;  // every array's
  std::vector<TlbArrayParams> arrays;

  void visit(Params& p);
  // Parses page_sizes and checks the geometry; throws UserError naming the key.
  void validate();
  std::string key(const TlbArrayParams& a, const char* leaf) const;
};

class Tlb {
 public:
  static constexpr unsigned kMaxArrays = 4;
  // Page numbers (covers_page_in, the run-ahead replay's pages) count base pages
  // (base/pgformat.hpp); a tag shifted by it gives its entry's first page.
  static constexpr unsigned kPageShift = pg::kBasePageShift;

  // `params` must have been validated (visit() does it when reading). Registers
  // tlb.<name>.{hits,misses,fills,fills_readonly,invalidations,evictions}.
  Tlb(const TlbParams& params, Stats& stats, TraceContext* trace = nullptr);

  const std::string& name() const { return name_; }
  uint32_t latency() const { return latency_; }
  size_t capacity() const { return cap_; }
  size_t occupancy() const;
  PageSizeMask page_sizes() const { return held_; }
  // Counts every event after which an entry a lookup found may no longer be found as it was: an
  // entry removed (an invalidation, an eviction) or made pending again (a refill still in
  // flight at an invalidation). While it is unchanged, a page found stays found with the same
  // entry: the core's front end looks the instruction TLB up only on a page change or after
  // this moved (OooCore::issue), not per micro-op.
  uint64_t removals() const { return removals_; }
  void set_trace(TraceContext* t) { trace_ = t; }

  // The entry that translates `va` for `asid` at cycle `now`, or null. Counts a hit or a miss; a
  // hit touches its slot in the replacement policy. With several matching entries (overlapping
  // sizes), the smallest size wins. An entry whose fill arrives after `now` is found only by the
  // page whose walk brings it (the caller then waits for e->ready); for another page it covers,
  // the lookup misses. (The default `now`: every fill has arrived.)
  static constexpr uint64_t kArrived = ~uint64_t(0);
  const TlbEntry* lookup(uint64_t va, uint16_t asid, uint64_t now = kArrived) {
    const TlbEntry* e = find(va, asid, true, now);
    if (e) hits_->inc(); else misses_->inc();
    return e;
  }
  // The same without stats or replacement update (the invariant checker, tests).
  const TlbEntry* probe(uint64_t va, uint16_t asid) const {
    return const_cast<Tlb*>(this)->find(va, asid, false);
  }

  // Caches translation `t` (at its own size, from a walk or another TLB) for an access to `va`,
  // after the placement rules above. Replaces an entry for the same page if there is one, else
  // the set's first invalid slot, else the policy's victim. Returns the entry stored, or null if no
  // array can hold it.
  const TlbEntry* fill(uint64_t va, const TlbEntry& t);
  // The size fill() would store `t` as, or nullopt.
  std::optional<PageSize> placement(const TlbEntry& t) const;

  // Every entry of any size of `asid` that covers `va` (x86 INVLPG and #PF, SDM §4.10.4.1; arm64
  // TLBI VAE1/VALE1). Returns the number removed. `reason` goes to the trace. `at`: the cycle of
  // the invalidation; an entry whose fill arrives after it stays (the #PF at its flush and a walk
  // still in flight then, core.walk_squash = complete). The kernel's operations come long after
  // any walk of the run-ahead has completed and remove every entry (the default).
  unsigned invalidate_page(uint64_t va, uint16_t asid, const char* reason, uint64_t at = kArrived);
  // Every entry of `asid` (x86 MOV CR3 / INVPCID single context, arm64 TLBI ASIDE1).
  unsigned invalidate_asid(uint16_t asid, const char* reason);
  // Everything (arm64 TLBI VMALLE1, x86 full flush).
  unsigned invalidate_all(const char* reason);

  // The slot of an entry lookup(), probe() or fill() returned (slots are numbered array by
  // array, set by set); kNoSlot: none.
  uint32_t slot_of(const TlbEntry* e) const {
    return uint32_t(reinterpret_cast<const Slot*>(e) - slots_.data());
  }
  static constexpr uint32_t kNoSlot = ~uint32_t(0);
  // The policy's invariants over the valid slots (tests).
  bool check_invariants(std::string* why) const {
    return repl_.check_invariants([&](uint32_t i) { return tags_[i] != 0; }, why);
  }

  // Every valid entry, in array/set/way order (the invariant checker).
  template <typename F>
  void for_each(F&& fn) const {
    for (size_t i = 0; i < cap_; ++i)
      if (tags_[i]) fn(slots_[i].e);
  }

 private:
  friend class TlbReplay;
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

  // A valid slot's key: the virtual base (aligned, so its page-offset bits are free), the size and
  // a valid bit; an invalid slot's tag is 0. The tags sit apart from the entries so that a set's
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
  const TlbEntry* find(uint64_t va, uint16_t asid, bool touch, uint64_t now = kArrived) {
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
      // A fill still on its way is there only for the page its walk is for.
      if (slots_[i].e.ready > now && slots_[i].e.origin_page != va >> kPageShift) continue;
      if (touch) {
        repl_.touch(i);
        if (fully_associative_) fa_hit(i);
      }
      return &slots_[i].e;
    }
    return nullptr;
  }

  // Fully associative TLBs (one array of one set: the 16-entry Golden Cove store DTLB, the
  // 48-entry N1 L1 DTLB) check the slot of the last hit or fill first (hint_: consecutive
  // accesses mostly use the same page), then an index from (tag, ASID) to slot, open addressing
  // with linear probing. A lookup costs the same whatever the capacity, and the result is the
  // scan's: the same page's slot (entries are unique), else the first invalid slot, else the
  // policy's victim. After a refill by the run-ahead replay the index may be replaced by the
  // replay's sequence state (TlbReplayState::seq, tlb_replay_state.hpp: host speed, the same
  // slots found); each operation of the index below checks for it once, marked "sequence state".
  uint32_t fa_home(uint64_t tag, uint16_t asid) const {
    return uint32_t(((tag ^ (uint64_t(asid) << 48)) * 0x9E3779B97F4A7C15ull) >> index_shift_);
  }
  uint32_t fa_find(uint64_t tag, uint16_t asid) const {
    const uint32_t h = hint_;
    if (h < cap_ && tags_[h] == tag && slots_[h].e.asid == asid) return h;
    if (rs_.seq)  // sequence state: no index to probe
      return rs_.seq_find(tags_, slots_, tag, asid, kNone);
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
  // Slot i was hit, or refreshed in place by a fill: the hint.
  void fa_hit(uint32_t i) {
    hint_ = i;
    if (rs_.seq && i != rs_.seq_mru(cap_)) seq_leave();  // sequence state: a hit that reorders
  }
  // The slot a fill of a new page into the full TLB evicts (the policy's victim), out of the
  // index.
  uint32_t fa_evict() {
    if (rs_.seq) {  // sequence state: LRU's victim is slot seq_rot, unless too many extras
      if (rs_.seq_rot < TlbReplayState::kSeqMaxExtras) return rs_.seq_rot;
      seq_leave();
    }
    const uint32_t v = repl_.victim(0, cap_);
    fa_remove(v);
    return v;
  }
  // Slot i now holds a new page (its tag set): into the index.
  void fa_insert(uint32_t i) {
    if (rs_.seq) ++rs_.seq_rot;  // sequence state: slot seq_rot, the LRU, is now the MRU extra
    else fa_index(i);
  }
  void seq_leave();  // from the sequence state to the index, as the fills one by one had built it
  void fa_remove(uint32_t i);  // before slot i's tag is cleared
  void fa_rebuild();           // after a bulk invalidation
  // An invalidation at cycle `at` leaves an entry not there yet, or one whose refill arrives
  // after it (arrival_survives_invalidation); the latter is pending again until the refill (a
  // removal for removals(); no change the replay tracks: the slot keeps its page).
  bool survives_invalidation(TlbEntry& e, uint64_t at) {
    const uint64_t was = e.ready;
    if (!arrival_survives_invalidation(e.ready, e.refill, at)) return false;
    if (e.ready != was) ++removals_;
    return true;
  }
  // Slot `i` now holds nothing.
  void clear_slot(uint32_t i) {
    if (tags_[i]) {
      --n_of_size_[unsigned(slots_[i].e.size)];
      --n_valid_;
      ++removals_;
    }
    tags_[i] = 0;
    rs_.note_change(i);
  }

  // `all`: "all" for the whole-TLB/ASID forms, null for a page; `asid` < 0: every ASID.
  void trace_invalidate(const char* all, uint64_t va, int asid, const char* reason,
                        unsigned removed);

  std::string name_;
  uint32_t latency_;
  bool splinter_;
  bool contiguous_64k_;
  PageSizeMask held_ = 0;
  bool fully_associative_ = true;      // one array of one set
  std::vector<Array> arrays_;
  std::vector<Slot> slots_;
  uint32_t cap_ = 0;  // slots_.size()
  std::vector<uint64_t> tags_;  // per slot (tag_of, 0 = invalid)
  Replacement repl_;  // a group per array
  uint32_t n_of_size_[kNumPageSizes] = {};  // valid entries of each size (lookups skip the absent)
  Route route_[kNumPageSizes];
  uint32_t n_valid_ = 0;  // valid slots
  uint64_t removals_ = 0;  // removals()
  // Fully associative only: the hint, the index (kNone = empty bucket; per valid slot its home
  // bucket and the bucket it is in).
  uint32_t hint_ = kNone;
  std::vector<uint32_t> index_;
  uint32_t index_mask_ = 0;
  unsigned index_shift_ = 64;
  std::vector<uint32_t> home_, pos_;
  // The run-ahead replay's state (host speed only: the sequence state, the change log, the
  // reach of the entries), kept up to date by fill and the invalidations.
  TlbReplayState rs_;
  TraceContext* trace_;
  Counter* hits_;
  Counter* misses_;
  Counter* fills_;
  Counter* fills_readonly_;
  Counter* invalidations_;
  Counter* evictions_;
};

}  // namespace mmusim::hw
