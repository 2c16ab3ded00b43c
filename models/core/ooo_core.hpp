// SPDX-License-Identifier: GPL-2.0-only
// The out-of-order core model, per micro-op, used by both platforms with their own parameters.
//
// Timing is computed in program order, one micro-op after the other (no event per access): each
// gets an allocation cycle (allocation width; a free ROB entry, store-buffer or load-buffer entry;
// fences), an execution cycle, a completion cycle (translation through the L1 TLB, L2 TLB and page
// walkers; loads through the caches) and a retirement cycle (in order, retirement width). Stores
// write memory at retirement and drain from the store buffer through the caches afterwards.
//
// Speculation lives at faults. A micro-op whose translation does not permit the access (or finds
// nothing) is flagged; the fault is taken when it would retire, `core.fault_to_nuke` cycles after
// it reached the head of the ROB. Until then the younger micro-ops are allocated and executed as
// the limits allow: their translations look up the TLBs, start walks on free walkers and FILL the
// TLBs, read-only translations included (SDM Vol 3A §4.10.2.3). Then they are squashed; their
// fills stay (walks still in flight complete or are dropped: core.walk_squash). On x86 the #PF
// invalidates the TLB and paging-structure-cache entries of the faulting page only (§4.10.4.1);
// on arm64 a fault invalidates nothing (Arm ARM D8.15). The kernel handles the fault through the
// Os interface, its TLB maintenance reaches the TLBs through the platform, and execution restarts
// at the faulting micro-op.
//
// LFENCE: no younger micro-op is allocated until the LFENCE has retired, and it executes only
// when every older one has completed (SDM; Cordes' measurement that it blocks issue). RDTSCP:
// executes when every older micro-op has executed; its effect on younger ones is a parameter.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "base/bytescan.hpp"
#include "base/error.hpp"
#include "base/hwwalk.hpp"
#include "base/log.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/core/os.hpp"
#include "models/tlb/tlb.hpp"
#include "models/walker/maintenance.hpp"
#include "models/walker/translation.hpp"
#include "models/walker/walker.hpp"
#include "workloads/uop.hpp"

namespace mmusim::hw {

enum class RdtscpRule : uint8_t {
  none,           // no ordering at all
  wait_older,     // waits until every older micro-op has executed (the SDM's guarantee only)
  block_younger,  // ... and no younger micro-op is allocated until it has executed
};

// Every value is stated in the platform config files (configs/platforms/*.cfg), which are the
// defaults of platform.name (platforms/platform.cpp build_schema); the zeros here are no
// default, only what a CoreParams holds before it is read.
struct CoreParams {
  unsigned rob = 0;
  unsigned alloc_width = 0;
  unsigned retire_width = 0;
  unsigned load_buffer = 0;
  unsigned store_buffer = 0;
  unsigned exec_delay = 0;
  unsigned fault_to_nuke = 0;
  unsigned restart_delay = 0;
  unsigned lfence_latency = 0;
  RdtscpRule rdtscp_rule = RdtscpRule::none;
  unsigned rdtscp_latency = 0;
  WalkSquash walk_squash = WalkSquash::complete;
  unsigned fill_buffers = 0;
  bool speculative_translation = false;
  bool cache_faulting_entries = false;
  bool fault_invalidates = false;
  unsigned dirty_assist = 0;
  bool hafdbs = false;
  unsigned fault_repeat_limit = 0;
  uint64_t watchdog_cycles = 0;  // no retirement for this long: an error
  uint64_t quantum = 0;
  bool runahead_reuse = false;  // a host-speed option: the results are the same either way
  bool runahead_check = false;  // a self-check of the reuse (tests)

  void visit(Params& p);  // the values held are the declared defaults (the files' replace them)
  // What the translation path applies of these (models/walker/translation.hpp).
  TranslationRules translation_rules(pg::Isa isa) const {
    return TranslationRules{isa, cache_faulting_entries, walk_squash, hafdbs};
  }
};

// The micro-ops fetched and not yet retired, oldest first (a ring: no allocation per micro-op).
class UopWindow {
 public:
  explicit UopWindow(size_t min_capacity) {
    size_t c = 16;
    while (c < min_capacity) c <<= 1;
    buf_.resize(c);
    mask_ = c - 1;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  wl::Uop& front() { return buf_[head_]; }
  wl::Uop& back() { return buf_[(head_ + n_ - 1) & mask_]; }
  wl::Uop& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  // For loops that index it many times: entry i is ring()[(head() + i) & mask()].
  const wl::Uop* ring() const { return buf_.data(); }
  size_t head() const { return head_; }
  size_t mask() const { return mask_; }
  void push_back(const wl::Uop& u) {
    MMUSIM_CHECK(n_ <= mask_, "micro-op window overflow ({} entries)", n_);
    buf_[(head_ + n_++) & mask_] = u;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --n_;
  }
  void clear() { n_ = 0; }

 private:
  std::vector<wl::Uop> buf_;
  size_t mask_ = 0, head_ = 0, n_ = 0;
};

class CoreMmu;  // models/core/core_mmu.hpp

class OooCore {
 public:
  // `mmu`: this core's caches, TLBs and walker; the core translates through
  // mmu.translation_path(p.translation_rules(isa)).
  OooCore(int cpu, const CoreParams& p, pg::Isa isa, Os& os, PhysMem& mem, CoreMmu& mmu,
          Stats& stats, TraceContext* trace);

  // Runs micro-ops until the core's time passes `cycle_limit`. Idle: no task is runnable here
  // (the caller waits until one is, then calls `resume_at`); Done: every task has exited.
  enum class Run : uint8_t { More, Idle, Done };
  Run run_until(uint64_t cycle_limit);
  // After an idle wait: the core's time jumps to `cycle` if it is behind.
  void resume_at(uint64_t cycle);
  // An interrupt (a TLB-shootdown IPI) costs this core `cycles` at its next instruction boundary.
  void interrupt(double cycles) { pending_interrupt_ += cycles; }
  uint64_t now() const { return now_; }
  uint64_t uops() const { return uops_->value(); }
  double progress() const { return ctx_.prog ? ctx_.prog->progress() : 0; }
  const CoreParams& params() const { return p_; }

 private:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max() / 4;

  struct Issue {
    bool issued = false;    // false: could not allocate/execute before the limit
    uint64_t alloc = 0, exec = 0, done = 0;
    uint64_t pa = 0;
    bool fault = false;
    uint64_t syndrome = 0;
    bool need_dirty = false;  // x86: a store through a writable entry with D = 0 (assist)
  };

  bool fetch(size_t n);  // make fetched_ hold at least n micro-ops (false: the program ended)
  // Inlined into its two callers (the run-ahead loop issues ~330 micro-ops per fault in C3); the
  // translation is a call (TranslationPath::translate).
  __attribute__((always_inline)) inline Issue issue(const wl::Uop& u, uint64_t seq, uint64_t limit, bool spec);
  // One access through the translation path, the path's replay hint kept in tr_hint_.
  __attribute__((always_inline)) inline TranslateResult translate(uint64_t va, bool write, uint64_t t,
                                                                  uint64_t limit, bool spec);
  void retire(const wl::Uop& u, uint64_t seq, const Issue& is);
  void do_syscall(const wl::Uop& u);
  void restart(uint64_t cycle);
  void write_store(const wl::Uop& u, uint64_t pa, uint64_t retire_cycle);
  // A fault puts the pipeline back as it was before the faulting micro-op issued: the scalars and
  // the ring slots the faulting micro-op wrote are in the Snapshot taken before it issued (the
  // run-ahead micro-ops write no ring slot).
  struct Snapshot {
    uint64_t alloc_cycle, prev_done, older_done_max, st_ord, ld_ord, no_issue_before;
    unsigned alloc_in_cycle;
    uint64_t rob_slot, sb_slot, lb_slot;  // the slots the head micro-op may overwrite
  };
  Snapshot snapshot(uint64_t seq) const {
    return {alloc_cycle_, prev_done_, older_done_max_, st_ord_, ld_ord_, no_issue_before_,
            alloc_in_cycle_, rob_free_[seq & rob_mask_], sb_free_[st_ord_ & sb_mask_],
            lb_free_[ld_ord_ & lb_mask_]};
  }
  static size_t ring_size(size_t n) {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  void restore(const Snapshot& s);
  // When every retired store has left the store buffer (stores drain in order).
  uint64_t stores_drained() const { return st_ord_ ? sb_free_upto_[(st_ord_ - 1) & sb_mask_] : 0; }
  void take_fault(const Issue& is, const Snapshot& before);
  __attribute__((noinline)) uint64_t run_ahead(uint64_t nuke);  // a call of its own: profiles show it

  // Run-ahead reuse. In a fault storm (C3: a fault per loop iteration, each with ~330 micro-ops of
  // run-ahead) consecutive run-aheads cover almost the same micro-ops at the same times relative
  // to their flush. The last run-ahead is recorded per position (the micro-op's shape, its
  // allocation cycle and the pipeline state before it, relative to the flush, and what its
  // translation did); the next one replays the part it shares with it without simulating each
  // micro-op, after checking everything the replayed part depends on, and simulates the rest.
  // The result is the same as simulating every micro-op (tests compare the two): a check that
  // fails means a normal run-ahead. Not used while tracing (the replay emits no events).
  enum : uint8_t { kPosAlu = 0, kPosStoreL2 /* L1 miss, L2 hit, L1 fill */, kPosStoreLate /* L1 miss, no L2 lookup before the flush */, kPosOther };
  // The pipeline before a position issued, relative to the flush.
  struct AheadState {
    int64_t alloc_cycle, prev_done, older_done_max, no_issue_before;
    uint32_t alloc_in_cycle;
    uint32_t stores, loads;  // issued before it in this run-ahead
    bool operator==(const AheadState& o) const {
      return alloc_cycle == o.alloc_cycle && prev_done == o.prev_done &&
             older_done_max == o.older_done_max && no_issue_before == o.no_issue_before &&
             alloc_in_cycle == o.alloc_in_cycle && stores == o.stores && loads == o.loads;
    }
  };
  // The last run-ahead, per position (arrays of the ROB's size, allocated once: the checks run
  // down them).
  struct AheadRecord {
    uint64_t head_seq = 0;          // the faulting micro-op it ran ahead of
    size_t n = 0;                   // positions recorded
    std::vector<uint64_t> shape;    // kind, flags, latency: what the micro-op's timing depends on
    std::vector<int64_t> alloc;     // its allocation cycle
    std::vector<uint8_t> cls;
    std::vector<uint32_t> others;  // the positions with cls kPosOther, ascending
    void set_cls(size_t i, uint8_t c) {  // position i < n (in place) or the next one (i == n)
      if (i < n && cls[i] != c && (cls[i] == kPosOther || c == kPosOther)) {
        auto it = std::lower_bound(others.begin(), others.end(), uint32_t(i));
        if (c == kPosOther) others.insert(it, uint32_t(i));
        else others.erase(it);
      } else if (i >= n && c == kPosOther) {
        others.push_back(uint32_t(i));
      }
      cls[i] = c;
      const uint64_t bit = uint64_t(1) << (i & 63);
      if (c == kPosStoreLate) late[i >> 6] |= bit;
      else late[i >> 6] &= ~bit;
    }
    std::vector<uint64_t> late;  // a bit per position: cls is kPosStoreLate
    // Some position of [from, to) has cls kPosStoreLate.
    bool any_late(size_t from, size_t to) const { return any_bit_in(late.data(), from, to); }
    std::vector<AheadState> state;  // before it issued
    std::vector<uint32_t> stores;   // the positions of stores, ascending
    size_t n_stores = 0;
    // Per store (indexed like `stores`), of the micro-op there: its 4K page number and the L2 TLB
    // slot that translated it (Tlb::kNoSlot: none known; verified before use). Unlike the rest,
    // these follow the micro-ops: a replay shifts them by the stores of its delta.
    // (Each in a buffer of twice the positions, store k at st0 + k: a shift moves st0, and the
    // buffers are compacted when the window would run past their end.)
    std::vector<uint64_t> st_page;
    std::vector<uint32_t> st_slot;
    std::vector<uint8_t> st_ro;  // the entry in st_slot was read-only
    std::vector<uint64_t> st_unknown;  // a bit per buffer index: st_slot is Tlb::kNoSlot
    size_t st0 = 0, positions = 0;
    uint64_t* page() { return st_page.data() + st0; }
    const uint64_t* page() const { return st_page.data() + st0; }
    const uint32_t* slot() const { return st_slot.data() + st0; }
    uint8_t* ro() { return st_ro.data() + st0; }
    const uint8_t* ro() const { return st_ro.data() + st0; }
    void set_slot(size_t k, uint32_t s) {
      const size_t b = st0 + k;
      st_slot[b] = s;
      const uint64_t bit = uint64_t(1) << (b & 63);
      if (s == Tlb::kNoSlot) st_unknown[b >> 6] |= bit;
      else st_unknown[b >> 6] &= ~bit;
    }
    // Some store of [k0, k1) has no known slot.
    bool any_unknown(size_t k0, size_t k1) const {
      return any_bit_in(st_unknown.data(), st0 + k0, st0 + k1);
    }
    // The per-store arrays follow the micro-ops: store k becomes store k - ds.
    void shift_stores(size_t ds) {
      st0 += ds;
      if (st0 + positions <= st_page.size()) return;
      const size_t live = st_page.size() - st0;
      std::memmove(st_page.data(), st_page.data() + st0, live * sizeof(uint64_t));
      std::memmove(st_slot.data(), st_slot.data() + st0, live * sizeof(uint32_t));
      std::memmove(st_ro.data(), st_ro.data() + st0, live);
      st0 = 0;
      std::fill(st_unknown.begin(), st_unknown.end(), 0);
      for (size_t b = 0; b < live; ++b)
        if (st_slot[b] == Tlb::kNoSlot) st_unknown[b >> 6] |= uint64_t(1) << (b & 63);
    }
    // Each st_slot held its page (for `asid`, with st_ro) at some time after the L2 TLB's
    // changes() was l2_mark (the start of the run-ahead that recorded or replayed it): only the
    // slots changed since need checking again.
    uint64_t l2_mark = 0;
    uint16_t asid = 0;
    // st_page[0..mono_end) strictly increases (kept as stores are recorded and shifted).
    size_t mono_end = 0;
    // shape[i] == shape[i + period] for every i < periodic_upto (what a replay with delta ==
    // period has already checked).
    uint64_t period = 0;
    size_t periodic_upto = 0;
    // The run-ahead ended because the micro-op at position end_at could not issue before the
    // flush, and state[end_at] is the pipeline before it (~0: ended otherwise). Valid when
    // end_at == n.
    size_t end_at = ~size_t(0);
    void allocate(size_t positions) {
      shape.resize(positions);
      alloc.resize(positions);
      cls.resize(positions);
      late.assign((positions + 63) / 64, 0);
      others.reserve(positions);
      state.resize(positions);
      stores.resize(positions);
      st_page.resize(2 * positions);
      st_slot.assign(2 * positions, Tlb::kNoSlot);
      st_ro.resize(2 * positions);
      st_unknown.assign((2 * positions + 63) / 64, ~uint64_t(0));
      this->positions = positions;
    }
    size_t size() const { return n; }
    void resize(size_t m) {  // m <= n
      n = m;
      if (end_at != m) end_at = ~size_t(0);
      while (!others.empty() && others.back() >= m) others.pop_back();
      while (n_stores && stores[n_stores - 1] >= m) --n_stores;
      if (periodic_upto > m) periodic_upto = m;
      if (mono_end > n_stores) mono_end = n_stores;
    }
  };
  static uint64_t uop_shape(const wl::Uop& u) {
    return uint64_t(u.kind) | uint64_t(u.flags) << 8 | uint64_t(u.latency) << 24;
  }
  // Relative to the flush; every time at or beyond kNever is "never" (only compared with the
  // flush in the run-ahead).
  static int64_t rel(uint64_t v, uint64_t nuke) {
    return v >= kNever ? std::numeric_limits<int64_t>::max() : int64_t(v - nuke);
  }
  static uint64_t unrel(int64_t r, uint64_t nuke) {
    return r == std::numeric_limits<int64_t>::max() ? kNever : uint64_t(int64_t(nuke) + r);
  }
  AheadState ahead_state(uint64_t nuke) const;
  struct Reused {
    size_t positions = 0;  // positions done (replayed or simulated); the record holds them
    size_t replayed = 0;   // of which replayed
    bool ended = false;    // a simulated position did not issue: the run-ahead is over
  };
  Reused reuse_run_ahead(uint64_t nuke, bool r_ended);
  static constexpr size_t kMaxSimulatedInReplay = 4;  // more positions to simulate: no replay
  // After this many run-aheads in a row replayed less than half, none is recorded for the next
  // kReplayBackoffFaults faults, then twice as many after each further failing series, up to
  // kReplayBackoffMax (host speed only: the results are the same).
  static constexpr unsigned kReplayFailuresBeforeBackoff = 8;
  static constexpr unsigned kReplayBackoffFaults = 16;
  static constexpr unsigned kReplayBackoffMax = 8192;
  unsigned ahead_failures_ = 0, ahead_backoff_ = 0, ahead_backoff_next_ = kReplayBackoffFaults;
  // `st` indexes the record's stores: the first at or after `from`; on success, the first at or
  // after `to`.
  bool replay_segment(size_t from, size_t to, size_t* st, uint64_t nuke);
  bool ahead_reuse_possible() const;
  // One position of the run-ahead simulated and recorded (the loop of run_ahead and
  // reuse_run_ahead's positions that did something else than an L1 miss and an L2 hit); false if
  // it did not issue.
  // st_hint: the index of the position's store in the record, if it is one and known.
  __attribute__((always_inline)) inline bool ahead_issue(size_t j, uint64_t nuke,
                                                         size_t st_hint = ~size_t(0));

  AheadRecord ahead_;                  // the last run-ahead
  // Scratch for a replayed segment with stores of both kinds: the L2 slots, pages and store
  // indices of the kPosStoreL2 ones, in order.
  std::vector<uint32_t> ahead_slots_;
  std::vector<uint64_t> ahead_pages_;
  std::vector<uint32_t> ahead_kidx_;
  // Per L2 TLB slot: the store ordinal of the record's store that last claimed it (its st_slot).
  std::vector<uint64_t> l2_owner_;
  void claim_l2_slot(size_t k, uint32_t slot);
  void check_replay(size_t k0, size_t k1, const uint32_t* slots, const uint64_t* pages,
                    size_t n_slots, const uint32_t* kidx) const;
  // What the last translate() did to the L2 TLB (the path's host-speed hint; ahead_issue makes
  // the position's class and the store's L2 slot of it).
  ReplayHint tr_hint_;
  bool ring_bound_ = false;          // the last speculative issue() waited for a ROB/buffer slot
  Counter* reused_uops_;
  uint64_t ps(uint64_t cycle) const { return cycles_to_ps(cycle, ghz_); }
  void advance_cycles(uint64_t to);
  [[noreturn]] void watchdog(const wl::Uop& u, uint64_t syndrome);
  void check_load(const wl::Uop& u, uint64_t pa);  // wl::kUopCheckValue
  [[noreturn]] void stall(const wl::Uop& u, const Issue& is);  // core.watchdog_cycles

  int cpu_;
  CoreParams p_;
  pg::Isa isa_;
  Os& os_;
  PhysMem& mem_;
  Tlb& l1_load_;
  Tlb& l1_store_;
  Tlb* l2_;
  TranslationCaches& maint_;
  MemoryHierarchy& caches_;
  TraceContext* trace_;
  double ghz_;
  TranslationPath path_;  // every load and store translates here

  bool have_task_ = false;
  RunContext ctx_;
  UopWindow fetched_;  // not yet retired, oldest first; fetched_[0] has sequence seq_
  uint64_t seq_ = 0;
  bool program_done_ = false;

  // Pipeline state (cycles).
  uint64_t now_ = 0;             // the core's time: the last retirement
  uint64_t alloc_cycle_ = 0;
  unsigned alloc_in_cycle_ = 0;
  uint64_t last_retire_ = 0;
  unsigned retire_in_cycle_ = 0;
  uint64_t no_issue_before_ = 0;  // fences: younger micro-ops wait for this cycle
  uint64_t prev_done_ = 0;        // completion of the previous micro-op (dependences)
  uint64_t older_done_max_ = 0;   // latest completion among older micro-ops (RDTSCP)
  uint64_t st_ord_ = 0, ld_ord_ = 0;
  uint64_t last_drain_ = 0;
  // Rings indexed by sequence / buffer ordinal, a power of two at least the capacity, so that the
  // entry of the micro-op `capacity` older is still there (no division on the per-uop path).
  std::vector<uint64_t> rob_free_, sb_free_;
  // Per retired store (by ordinal, a ring like sb_free_): the latest cycle it or any older store
  // frees its store-buffer slot (stores retire in order).
  std::vector<uint64_t> sb_free_upto_;
  std::vector<uint64_t> lb_free_, fb_free_;
  uint64_t rob_mask_, sb_mask_, lb_mask_, fb_mask_;
  uint64_t fb_next_ = 0;
  uint64_t spec_st_base_ = 0, spec_ld_base_ = 0;  // the first store/load ordinal of the run-ahead

  // Faults and measurement.
  uint64_t fault_seq_ = ~uint64_t(0);
  unsigned fault_repeats_ = 0;
  uint64_t counted_cycles_ = 0;
  double pending_interrupt_ = 0;

  std::shared_ptr<spdlog::logger> log_;
  Counter* uops_;
  Counter* cycles_;
  Counter* squashes_;
  Counter* squashed_uops_;
  Counter* spec_translations_;
  Counter* faults_taken_;
  Counter* dirty_assists_;
  Counter* store_drain_cycles_;
  Counter* lfences_;
  Counter* bytes_compared_;
};

}  // namespace mmusim::hw
