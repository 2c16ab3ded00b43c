// SPDX-License-Identifier: GPL-2.0-only
#include "models/core/core_module.hpp"

namespace mmusim::hw {

CoreModule::CoreModule(sc_core::sc_module_name n, int cpu, const CoreMmuParams& p, pg::Isa isa,
                       Os& os, PhysMem& mem, Stats& stats, Trace* trace, Cache* shared_llc,
                       CoreMmu* sibling, uint16_t asid_tag, Cache* shared_l2)
    : sc_core::sc_module(n), cpu_(cpu), ghz_(os.ghz(cpu)), quantum_(p.core.quantum), asid_tag_(asid_tag), os_(&os) {
  tctx_.trace = trace;
  tctx_.cpu = cpu;
  if (sibling) {
    mmu_ = sibling;
  } else {
    own_mmu_ = std::make_unique<CoreMmu>(p, isa, mem, ghz_, stats, &tctx_, shared_llc, shared_l2);
    mmu_ = own_mmu_.get();
  }
  core_ = std::make_unique<OooCore>(cpu, p.core, isa, os, mem, *mmu_, stats, &tctx_, asid_tag,
                                    sibling != nullptr || asid_tag != 0);
  idle_cycles_ = &stats.counter("core.idle_cycles",
                                "cycles a CPU had no task to run (idle, its idle state's exit included): "
                                "core.cycles less these and kcost.cycles are user-mode cycles",
                                "cycles");
  SC_THREAD(run);
}

void CoreModule::run() {
  // The core runs a quantum ahead of SystemC time, then waits for the kernel of SystemC to catch
  // up. A single-core platform synchronises only for the time base.
  //
  // Why not tlm_utils::tlm_quantumkeeper: the keeper holds a local time that an initiator
  // advances by the delay annotated on each transaction (inc()), and places its sync points on
  // the grid of one global quantum (tlm_global_quantum::compute_local_quantum(): the next
  // multiple of it after sc_time_stamp()). The core has no per-transaction delay to annotate:
  // OooCore computes each micro-op's cycle itself and runs to a cycle limit (run_until), in its
  // own clock's cycles. The quantum here is per core, in those cycles, from where the core is;
  // expressing that through the keeper would convert the limit to sc_time and back (100,000
  // cycles at 4.9 GHz is no whole number of picoseconds: the sync points would move by a cycle)
  // and need its local time to go negative for a core that resumes behind SystemC time. What
  // the keeper does, this loop does in three lines: the limit, run_until, sync_to. How much the
  // results depend on the quantum is measured by tests/scripts/test_quantum.py.
  try {
    for (;;) {
      const uint64_t base = uint64_t(sc_core::sc_time_stamp().to_seconds() * ghz_ * 1e9 + 0.5);
      OooCore::Run r = core_->run_until(std::max(base, core_->now()) + quantum_);
      sync_to(uint64_t(double(core_->now()) * 1000.0 / ghz_ + 0.5));
      if (r == OooCore::Run::Done) break;
      if (r == OooCore::Run::Idle) {
        // Nothing to run here until another core makes a task runnable (fork, clone, a barrier,
        // a wake-up) or every task has exited.
        // The CPU idles: cpuidle's menu governor, with no timer pending, puts it in the deepest
        // enabled idle state (drivers/cpuidle/governors/menu.c: the predicted sleep is the time
        // to the next timer event); Linux's power:cpu_idle event, with that state.
        // The menu governor's state: the deep one, or C1E when this CPU's recent idle periods
        // predict a short one (cpuidle_menu.hpp).
        const bool core_sleeps = idle_exit_cycles_ > 0 && !core_->sibling_busy();
        const bool deep = !deep_residency_us_ || governor_.deep(deep_residency_us_);
        if (core_sleeps && tctx_.on())
          tctx_.trace->event(cycles_to_ps(core_->now(), ghz_), cpu_, TraceTask{"<idle>", 0}, "cpu_idle",
                             {TraceField::dec("state", deep ? 1 : 0), TraceField::dec("cpu_id", uint64_t(cpu_))});
        const uint64_t idle_from = core_->now();
        // Until a task is made runnable here, or the earliest sleeper of this CPU wakes (the
        // disk's completion interrupt).
        const uint64_t wake_ps = os_->next_wake_ps(cpu_);
        const sc_core::sc_time at_wake(double(wake_ps), sc_core::SC_PS);
        if (!wake_ps) sc_core::wait(work_);
        else if (at_wake > sc_core::sc_time_stamp()) sc_core::wait(at_wake - sc_core::sc_time_stamp(), work_);
        uint64_t at = uint64_t(sc_core::sc_time_stamp().to_seconds() * ghz_ * 1e9 + 0.5);
        // Woken by the sleeper's time: the first cycle at which the scheduler sees it due.
        if (wake_ps && sc_core::sc_time_stamp() >= at_wake)
          while (cycles_to_ps(at, ghz_) < wake_ps) ++at;
        if (core_sleeps && !core_->sibling_busy()) {
          // Woken (the wake-up's store to the monitored flags, or its IPI): the task runs once the
          // core has left the idle state. An SMT sibling that has begun to run meanwhile has
          // woken the core already.
          if (at > idle_from) governor_.record(uint64_t(double(at - idle_from) / (ghz_ * 1000.0)));  // us
          at += deep ? idle_exit_cycles_ : shallow_exit_cycles_;
          if (Counter* c = deep ? idle_wakeups_ : shallow_wakeups_) c->inc();
          if (tctx_.on())
            tctx_.trace->event(cycles_to_ps(at, ghz_), cpu_, TraceTask{"<idle>", 0}, "cpu_idle",
                               {TraceField::dec("state", 4294967295u), TraceField::dec("cpu_id", uint64_t(cpu_))});
        }
        if (at > idle_from) idle_cycles_->inc(at - idle_from);
        core_->resume_at(at);
      }
    }
  } catch (const sc_core::sc_unwind_exception&) {
    throw;  // SystemC's own (process kill/reset)
  } catch (...) {
    // A UserError or InternalError (the watchdog, a failed check): keep it with its type (exit
    // status 2 or 1) and stop the simulation; HwPlatform::finish() rethrows it.
    error_ = std::current_exception();
    // The error is the message; not SystemC's "Info: Simulation stopped by user."
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_stop();
  }
  done_ = true;
}

void CoreModule::sync_to(uint64_t now_ps) {
  const sc_core::sc_time target(double(now_ps), sc_core::SC_PS);
  if (target > sc_core::sc_time_stamp()) sc_core::wait(target - sc_core::sc_time_stamp());
}

}  // namespace mmusim::hw
