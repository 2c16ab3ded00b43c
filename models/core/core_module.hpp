// SPDX-License-Identifier: GPL-2.0-only
// One core as a SystemC module: its TLBs, page walker and caches (CoreMmu, models/core/core_mmu.hpp)
// and the out-of-order model, run by one SC_THREAD with temporal decoupling (the core runs
// core.quantum cycles ahead, then synchronises). No SystemC event per access.
#pragma once

#include <systemc>

#include <exception>
#include <memory>

#include "models/core/core_mmu.hpp"
#include "models/core/cpuidle_menu.hpp"
#include "models/core/ooo_core.hpp"

namespace mmusim::hw {

class CoreModule : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(CoreModule);
  // `shared_llc`: the last-level cache all cores share (null: this core has its own).
  // `sibling`: SMT: the CoreMmu (caches, TLBs, walkers) of the physical core this hardware thread
  // shares with another (null: its own); `asid_tag` is ORed into the ASIDs of its translations, so
  // that the shared TLBs keep each thread's entries apart. `shared_l2`: the L2 of this core's
  // cluster (null: its own; MemoryHierarchy::set_cluster).
  CoreModule(sc_core::sc_module_name n, int cpu, const CoreMmuParams& p, pg::Isa isa, Os& os,
             PhysMem& mem, Stats& stats, Trace* trace, Cache* shared_llc = nullptr,
             CoreMmu* sibling = nullptr, uint16_t asid_tag = 0, Cache* shared_l2 = nullptr);
  CoreMmu& mmu() { return *mmu_; }
  bool owns_mmu() const { return own_mmu_ != nullptr; }
  uint16_t asid_tag() const { return asid_tag_; }
  double ghz() const { return ghz_; }  // this CPU's clock: its cycles'
  int cpu() const { return cpu_; }

  Tlb& l1_load() { return mmu_->l1_load(); }
  Tlb& l1_store() { return mmu_->l1_store(); }
  Tlb* l2() { return mmu_->l2(); }
  PageWalker& walker() { return mmu_->walker(); }
  MemoryHierarchy& caches() { return mmu_->caches(); }
  OooCore& core() { return *core_; }
  // What each TLB-maintenance operation does to this core's TLBs and paging-structure caches.
  TranslationCaches& maintenance() { return mmu_->maintenance(); }
  bool done() const { return done_; }
  // Where this core's trace events go, and the task and time they are attributed to.
  TraceContext& trace_context() { return tctx_; }
  // A task became runnable on this core (it may be idle, waiting for one).
  void wake() {
    work_.notify(sc_core::SC_ZERO_TIME);
    core_->resched_soon();
  }
  // Idle states (several cores): a task woken onto this CPU while it idles starts `cycles` after
  // the wake-up, the exit latency of the idle state it is in (platform.idle_exit_latency), unless
  // its SMT sibling runs a task (the physical core is then awake: no core C-state). `wakeups`
  // counts those that paid it.
  void set_idle_exit(double cycles, Counter* wakeups) {
    idle_exit_cycles_ = uint64_t(cycles + 0.5);
    idle_wakeups_ = wakeups;
  }
  // The shallow state (C1E) the menu governor takes instead when this CPU's recent idle periods
  // predict one shorter than the deep state's target residency (cpuidle_menu.hpp): its exit in
  // cycles, the deep state's residency in us; `shallow`: counts the wake-ups from it.
  void set_idle_shallow(double exit_cycles, uint32_t deep_residency_us, Counter* shallow) {
    shallow_exit_cycles_ = uint64_t(exit_cycles + 0.5);
    deep_residency_us_ = deep_residency_us;
    shallow_wakeups_ = shallow;
  }
  // Called from this core's thread before it touches shared kernel state (multi-core): wait until
  // SystemC time reaches the core's time, so that other cores' earlier kernel entries come first.
  void sync_to(uint64_t now_ps);
  // An exception the core's thread stopped on (the simulation was stopped): SystemC would have
  // turned it into an sc_report and lost its type; the platform rethrows it after sc_start().
  std::exception_ptr error() const { return error_; }

 private:
  void run();

  int cpu_;
  double ghz_;
  uint64_t quantum_;
  TraceContext tctx_;
  std::unique_ptr<CoreMmu> own_mmu_;  // caches, TLBs, walker (built as the tests build them)
  CoreMmu* mmu_;                      // own_mmu_, or the SMT sibling's
  uint16_t asid_tag_;
  std::unique_ptr<OooCore> core_;
  Os* os_;
  bool done_ = false;
  sc_core::sc_event work_;
  uint64_t idle_exit_cycles_ = 0;
  Counter* idle_wakeups_ = nullptr;
  uint64_t shallow_exit_cycles_ = 0;
  uint32_t deep_residency_us_ = 0;  // 0: the deep state always
  Counter* shallow_wakeups_ = nullptr;
  MenuGovernor governor_;
  Counter* idle_cycles_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace mmusim::hw
