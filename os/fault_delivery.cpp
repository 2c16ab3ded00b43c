// SPDX-License-Identifier: GPL-2.0-only
#include "os/system.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/store_drain.hpp"
#include "os/lock_timing.hpp"

// Fault delivery: a user page fault enters the kernel with the exception entry's cost, runs the
// arch fault handler (do_user_addr_fault / do_page_fault) and leaves with the exception return's;
// the cost account becomes the fault's time. And the fault-latency samples of the benchmark.
namespace mmusim {

FaultOutcome System::page_fault(int cpu, SimTask& t, uint64_t va, uint64_t syndrome, uint64_t ip,
                                uint64_t now_ps, double stores_drain) {
  FaultOutcome out;
  kmm::Kernel& k = *kernel_;
  enter_kernel(cpu, now_ps);
  k.enter(t.t, cpu, now_ps);
  k.charge(kmm::Cost::exc_entry);
  out.ret = k.handle_user_fault(t.t, va, syndrome, ip);
  k.resume_user_mode_work();  // (irqentry_exit_to_user_mode(): memory.high's reclaim and throttling)
  k.charge(kmm::Cost::exc_exit);
  if (const kmm::CostAccount* b = k.cost_before_store_barrier()) out.store_barrier_at = cost_.cycles(*b, ghz(cpu), k.cost_scale());
  out.exit_drains_stores = k.arch().exception_return_drains_stores();
  out.record = k.last_fault();
  const double io_wait = k.cost().io_wait_cycles;
  const double throttle = k.cost().throttle_cycles;
  out.cycles = leave_kernel();
  // Asleep on mmap_lock or on another CPU's fault (LockTiming::slept()).
  const double lock_wait = locks_ ? locks_->slept() : 0.0;
  // The handler waits at its first store barrier (or the IRET) for the user's buffered stores:
  // what follows, mm_fault_done included, comes that much later. (With several cores the kernel
  // locks' timing does not include the wait.)
  out.store_wait = store_drain_wait(stores_drain, out.store_barrier_at, out.exit_drains_stores, out.cycles);
  out.cycles += out.store_wait;
  // It waited for the disk (folio_wait_bit_common(), TASK_UNINTERRUPTIBLE) or for mmap_lock, or
  // was throttled for memory.high: it slept and its CPU was free meanwhile. The entry ran whole,
  // its work before and after the wait done at once: the CPU is busy for the work, the task wakes
  // when the whole fault is over (io_schedule(), schedule(): the sleep's place in the entry is
  // not kept).
  if (io_sleep_ && io_wait + lock_wait + throttle > 0) {
    out.sleep_cycles = std::min(io_wait + lock_wait + throttle, out.cycles);
    sched_.sleep_until(cpu, now_ps + cycles_to_ps(out.cycles, cpu));
    if (io_wait > 0) io_sleeps_.inc();
    if (lock_wait > 0) lock_sleeps_.inc();
  }
  out.in_region = region_open_ && in_region(va);
  if (out.in_region) faults_region_.inc();
  // A SIGSEGV or SIGBUS (force_sig_fault(): fatal, no workload handles it), or the memcg's OOM
  // killer: the tasks it killed end.
  if (out.ret.sigsegv || out.ret.sigbus)
    log::get("system")->warn("task {} ({}) got {} at {:#x} (ip {:#x}, error code {:#x}): {}", t.t->pid,
                             t.t->comm, out.ret.sigbus ? "SIGBUS" : "SIGSEGV", va, ip, syndrome,
                             out.ret.sigbus ? "an access beyond the end of its file mapping's file"
                                            : "it touched memory it does not own (a built-in workload "
                                              "never does: that would be a bug of the kernel port)");
  deliver_fatal_signals(&t, now_ps);
  if (trace_.on()) {
    TraceTask tt{t.t->comm, t.t->pid};
    trace_.event(now_ps, cpu, tt, "page_fault_user",
                 {TraceField::hex("address", va), TraceField::hex("ip", ip),
                  TraceField::hex("error_code", syndrome)});
    trace_.event(now_ps + cycles_to_ps(out.cycles, cpu), cpu, tt, "mm_fault_done",
                 {TraceField::hex("address", va), TraceField::str("result", kmm::fault_kind_name(out.record.kind)),
                  TraceField::dec("ptes", out.record.ptes_changed)});
  }
  return out;
}

void System::record_fault_latency(int kind, double ns) {
  fault_latency_.sample(ns);
  unsigned k = unsigned(kind);
  if (k < 16 && kind_latency_[k]) kind_latency_[k]->sample(ns);
}

}  // namespace mmusim
