// SPDX-License-Identifier: GPL-2.0-only
// The System seen by a core model (models/core/os.hpp).
#pragma once

#include "models/core/os.hpp"
#include "os/system.hpp"

namespace mmusim {

class SystemOs : public hw::Os {
 public:
  explicit SystemOs(System& s) : s_(s) {}
  bool schedule(int cpu, uint64_t now_ps, hw::RunContext* ctx, double* cycles) override {
    SimTask* t = s_.schedule(cpu, now_ps, cycles);
    if (!t) return false;
    ctx->prog = t->resumable.get();
    ctx->asid = uint16_t(t->t->mm->id);
    ctx->root_pa = t->t->mm->pgd;
    ctx->task = TraceTask{t->t->comm, t->t->pid};
    ctx->killed = &t->killed;
    return true;
  }
  bool all_exited() const override { return s_.all_exited(); }
  uint64_t next_wake_ps(int cpu) const override { return s_.next_wake_ps(cpu); }
  uint64_t tick_ps() const override { return s_.tick_ps(); }
  bool resched_check(int cpu, uint64_t now_ps, double* cycles) override { return s_.resched_check(cpu, now_ps, cycles); }
  hw::OsCall syscall(int cpu, const wl::Uop& u, uint64_t now_ps) override {
    SyscallOutcome o = s_.syscall(cpu, *s_.current(cpu), u, now_ps);
    return hw::OsCall{o.cycles, o.blocked || o.exited || o.sleep_cycles > 0, o.sleep_cycles};
  }
  hw::OsFault page_fault(int cpu, uint64_t va, uint64_t syndrome, uint64_t ip, uint64_t now_ps,
                         double stores_drain) override {
    FaultOutcome o = s_.page_fault(cpu, *s_.current(cpu), va, syndrome, ip, now_ps, stores_drain);
    return hw::OsFault{o.cycles, int(o.record.kind), o.in_region, o.ret.sigsegv || o.ret.sigbus,
                       o.store_barrier_at, o.exit_drains_stores, o.store_wait, o.sleep_cycles};
  }
  void marker(int cpu, const wl::Uop& u, uint64_t now_ps) override { s_.marker(cpu, *s_.current(cpu), u, now_ps); }
  bool region_active() const override { return s_.region_active(); }
  void rdtscp_retired(int cpu, uint64_t cycle) override { s_.fault_meter().rdtscp_retired(cpu, cycle); }
  void fault_taken(int cpu, uint64_t head_cycle, bool repeat, const hw::OsFault& f) override {
    s_.fault_meter().fault_taken(cpu, head_cycle, repeat, f.kind, f.in_region);
  }
  void faulted_retired(int cpu, uint64_t cycle) override { s_.fault_meter().faulted_retired(cpu, cycle); }
  double ghz() const override { return s_.ghz(); }
  double ghz(int cpu) const override { return s_.ghz(cpu); }

 private:
  System& s_;
};

}  // namespace mmusim
