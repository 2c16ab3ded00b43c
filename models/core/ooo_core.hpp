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
// Instruction fetch: the front end translates the code page of each micro-op through the ITLB
// (misses go to the shared L2 TLB and walkers, TranslationPath::fetch) when it reaches a micro-op
// on another page than the last one it translated, when an invalidation took an ITLB entry
// (TranslationCaches::watch_itlb: the kernel's INVLPG or MOV CR3, a #PF, another core's TLBI)
// and when it runs another task: never a lookup per micro-op. Otherwise the lookup would hit at
// no cost (the ITLB's latency is hidden in the fetch pipeline; only the front end's own fetches
// fill it, so no eviction takes the page it translated last), and is not made: tlb.itlb.hits
// counts the lookups made, not fetches. The request is made at the
// cycle allocation reaches the micro-op by its width (fences and full buffers block allocation,
// not fetch); that micro-op and every younger one allocate no earlier than the translation is
// ready (core.itlb_stall_cycles). A fetch that faults (no translation, or execute-disable) is
// taken as the micro-op's fault when everything older has retired, with nothing run ahead of
// it. In the run-ahead the code pages translate under the same limit as the data accesses.
//
// LFENCE: no younger micro-op is allocated until the LFENCE has retired, and it executes only
// when every older one has completed (SDM; Cordes' measurement that it blocks issue). RDTSCP:
// executes when every older micro-op has executed; its effect on younger ones is a parameter.
//
// Not hardware: in a fault storm consecutive run-aheads repeat each other, and the run-ahead
// reuse (core.runahead_reuse, runahead_reuse.hpp) replays what it can prove the same instead of
// simulating it again, with identical results. It is a unit of its own; run_ahead and ahead_issue
// are where it plugs in.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/hwwalk.hpp"
#include "base/log.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"
#include "models/core/os.hpp"
#include "models/core/pipeline_state.hpp"
#include "models/core/runahead_reuse.hpp"
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
  // The kernel's prices in cycles (cost.*, calibrated on a Golden Cove P-core running alone) on
  // this core: cycles per calibrated cycle, alone (kernel_cycle_scale) and multiplied by
  // smt_kernel_scale while the SMT sibling has a task (HwPlatform: Kernel::set_cost_scale).
  double kernel_cycle_scale = 0;
  double smt_kernel_scale = 0;

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
  const wl::Uop& operator[](size_t i) const { return buf_[(head_ + i) & mask_]; }
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

// The pipeline's allocation state is a base (PipelineState, pipeline_state.hpp): the core's code
// names its fields as members, and the run-ahead reuse is given it and nothing else of the core.
class OooCore : private PipelineState {
 public:
  // `mmu`: this core's caches, TLBs and walker; the core translates through
  // mmu.translation_path(p.translation_rules(isa)).
  // `asid_tag`: ORed into the task's ASID (SMT: the hardware thread's tag in the shared TLBs);
  // `shared_mmu`: the CoreMmu is shared with an SMT sibling.
  OooCore(int cpu, const CoreParams& p, pg::Isa isa, Os& os, PhysMem& mem, CoreMmu& mmu,
          Stats& stats, TraceContext* trace, uint16_t asid_tag = 0, bool shared_mmu = false);
  // SMT: the other hardware thread of this core. While it has a task, allocation and retirement
  // alternate between the two: each gets half the width.
  void set_sibling(const OooCore* s) { sibling_ = s; }
  // SMT: the other hardware thread of this core runs a task (the physical core is awake).
  bool sibling_busy() const { return sibling_ && sibling_->have_task_; }
  ~OooCore();

  // Runs micro-ops until the core's time passes `cycle_limit`. Idle: no task is runnable here
  // (the caller waits until one is, then calls `resume_at`); Done: every task has exited.
  enum class Run : uint8_t { More, Idle, Done };
  Run run_until(uint64_t cycle_limit);
  // After an idle wait: the core's time jumps to `cycle` if it is behind.
  void resume_at(uint64_t cycle);
  // An interrupt (a TLB-shootdown IPI) costs this core `cycles` at its next instruction boundary.
  void interrupt(double cycles) { pending_interrupt_ += cycles; }
  // A task was queued on this CPU: the scheduler looks at the next instruction boundary whether
  // it preempts the running one.
  void resched_soon() { next_check_cycle_ = 0; }
  uint64_t now() const { return now_; }
  uint64_t uops() const { return uops_->value(); }
  double progress() const { return ctx_.prog ? ctx_.prog->progress() : 0; }
  const CoreParams& params() const { return p_; }

 private:
  struct Issue {
    bool issued = false;    // false: could not allocate/execute before the limit
    uint64_t alloc = 0, exec = 0, done = 0;
    uint64_t pa = 0;
    bool fault = false;
    uint64_t syndrome = 0;
    bool need_dirty = false;  // x86: a store through a writable entry with D = 0 (assist)
    bool fetch_fault = false;  // the fault is the instruction fetch's (at u.ip), not the access's
  };

  // Make fetched_ hold at least n micro-ops (false: the program ended). `kAhead`: for the
  // run-ahead (every micro-op after the window's head comes this way), keeping the fetched
  // micro-ops' page run (PipelineState::fetched_page_) for the run-ahead reuse.
  template <bool kAhead = false>
  bool fetch(size_t n);
  // Inlined into its two callers (the run-ahead loop issues ~330 micro-ops per fault in C3); the
  // translation is a call (TranslationPath::translate).
  __attribute__((always_inline)) inline Issue issue(const wl::Uop& u, uint64_t seq, uint64_t limit, bool spec);
  // The code page of `u` through the ITLB (a call: only at a page change), see the .cpp.
  static constexpr uint64_t kFetchFault = kNever + 1;
  __attribute__((noinline)) uint64_t fetch_translate(const wl::Uop& u, uint64_t t, uint64_t limit,
                                                     bool spec);
  uint64_t fetch_fault_syndrome_ = 0, fetch_fault_ready_ = 0;  // fetch_translate's kFetchFault
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
  void restore(const Snapshot& s);
  // When every retired store has left the store buffer (stores drain in order).
  uint64_t stores_drained() const { return st_ord_ ? sb_free_upto_[(st_ord_ - 1) & sb_mask_] : 0; }
  void take_fault(const Issue& is, const Snapshot& before);
  // The task leaves the CPU (it sleeps in a fault, or a tick preempted it).
  void leave_cpu();
  __attribute__((noinline)) uint64_t run_ahead(uint64_t nuke);  // a call of its own: profiles show it

  // Window position j (run-ahead position j - 1) simulated and recorded by the run-ahead reuse
  // (runahead_reuse.hpp); false if it did not issue. Inlined into the run-ahead loop (each
  // position is a micro-op's issue, ~330 per fault in C3). st_hint: for the reuse.
  __attribute__((always_inline)) inline bool ahead_issue(size_t j, uint64_t nuke,
                                                         size_t st_hint = ~size_t(0));
  struct ReuseCallbacks;  // what the reuse calls back while it replays (RunaheadCore)

  // What the last translate() did to the L2 TLB (the path's host-speed hint; the reuse makes the
  // position's class and the store's L2 slot of it).
  ReplayHint tr_hint_;
  bool ring_bound_ = false;          // the last speculative issue() waited for a ROB/buffer slot
  bool fetch_translated_ = false;    // the last speculative issue() translated its code page
  uint64_t ps(uint64_t cycle) const { return cycles_to_ps(cycle, ghz_); }
  void advance_cycles(uint64_t to);
  [[noreturn]] void watchdog(const wl::Uop& u, uint64_t syndrome, bool fetch);
  void check_load(const wl::Uop& u, uint64_t pa);  // wl::kUopCheckValue
  [[noreturn]] void stall(const wl::Uop& u, const Issue& is);  // core.watchdog_cycles

  int cpu_;
  CoreParams p_;
  pg::Isa isa_;
  Os& os_;
  PhysMem& mem_;
  Tlb& l1_load_;
  Tlb& l1_store_;
  Tlb* itlb_;  // null: the core's MMU translates no instruction fetches
  Tlb* l2_;
  TranslationCaches& maint_;
  MemoryHierarchy& caches_;
  TraceContext* trace_;
  double ghz_;
  TranslationPath path_;  // every load and store translates here
  uint16_t asid_tag_;     // SMT: this hardware thread's tag, ORed into the task's ASID
  CoreMmu* shared_mmu_;   // SMT: the CoreMmu this thread shares with its sibling (null: its own)
  const OooCore* sibling_ = nullptr;
  unsigned width(unsigned w) const { return sibling_ && sibling_->have_task_ ? std::max(1u, w / 2) : w; }

  bool have_task_ = false;
  RunContext ctx_;
  UopWindow fetched_;  // not yet retired, oldest first; fetched_[0] has sequence seq_
  uint64_t seq_ = 0;
  bool program_done_ = false;
  bool kill_flushed_ = false;  // the running task's fatal signal has emptied the front end
  // The run-ahead reuse (host speed only): run_ahead and ahead_issue call it. Of this core it
  // reads and writes the PipelineState this core derives from, reads fetched_, and calls back
  // through ReuseCallbacks.
  RunaheadReuse reuse_;

  // Pipeline state (cycles); allocation and execution are the PipelineState's.
  uint64_t now_ = 0;             // the core's time: the last retirement
  uint64_t last_retire_ = 0;
  unsigned retire_in_cycle_ = 0;
  uint64_t last_drain_ = 0;
  std::vector<uint64_t> fb_free_;
  uint64_t fb_mask_;
  uint64_t fb_next_ = 0;

  // Faults and measurement.
  uint64_t fault_seq_ = ~uint64_t(0);
  unsigned fault_repeats_ = 0;
  uint64_t counted_cycles_ = 0;
  double pending_interrupt_ = 0;
  // Scheduler ticks (Os::tick_ps(); 0: none) and wake-ups: the cycle of the next scheduler check
  // (the next tick, or the wake-up of a task asleep on this CPU, whichever comes first).
  uint64_t tick_ps_ = 0;
  uint64_t next_check_cycle_ = 0;
  bool recompute_check_ = false;  // a task left the CPU: when is the next check

  std::shared_ptr<spdlog::logger> log_;
  Counter* uops_;
  Counter* cycles_;
  Counter* squashes_;
  Counter* squashed_uops_;
  Counter* spec_translations_;
  Counter* faults_taken_;
  Counter* dirty_assists_;
  Counter* store_drain_cycles_;
  // The level that served the line of a store that took a fault, when it retired after it
  // (core.fault_resume_store.<l1d|l2|llc|dram>): after a huge-page COW copy, whether the copy
  // left the faulting line hot (V9's copy order).
  std::array<Counter*, 4> resume_store_{};
  bool resume_pending_ = false;
  // A task that slept in a fault whose resume the meter waits for, and faults_taken_ then.
  int64_t asleep_resume_pid_ = -1;
  uint64_t asleep_resume_faults_ = 0;
  Counter* itlb_stall_cycles_;
  Counter* lfences_;
  Counter* bytes_compared_;
};

}  // namespace mmusim::hw
