// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/functional/functional.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"

namespace mmusim {

void FunctionalParams::visit(Params& p) {
  p.real("functional.uop_cycles", uop_cycles, 1.0, 0.0, 1000.0,
         "functional platform: cycles charged per micro-op (no pipeline model)", "cycles");
}

FunctionalPlatform::FunctionalPlatform(sc_core::sc_module_name n, const Config& cfg, Stats& stats,
                                       Trace& trace)
    : Platform(n),
      sys_(cfg, stats, trace, hw_),
      uops_(stats.counter("core.uops", "micro-ops executed")),
      cycles_(stats.counter("core.cycles", "core cycles (functional: micro-ops plus kernel time)")),
      bytes_compared_(stats.counter("check.bytes_compared", "bytes loaded and compared with the expected value (random-ops)")) {
  Params rd = Params::reading(cfg);
  fp_.visit(rd);
  ua_ = std::make_unique<kmm::UserAccess>(sys_.kernel());
  ua_->set_fault_hook([this](kmm::task_struct* t, uint64_t va, uint64_t syndrome) {
    SimTask* st = sys_.current(cpu_);
    uint64_t now = sys_.cycles_to_ps(now_cycles_);
    FaultOutcome o = sys_.page_fault(cpu_, *st, va, syndrome, 0, now);
    now_cycles_ += o.cycles;
    if (o.in_region) sys_.record_fault_latency(int(o.record.kind), o.cycles / sys_.ghz());
    // A fatal signal (the fault's own SIGSEGV/SIGBUS, or the memcg's OOM killer chose this
    // task): the access is not retried; the task's next micro-op is its exit.
    return !(o.ret.sigsegv || o.ret.sigbus || st->killed);
  });
  SC_THREAD(run);
}

void FunctionalPlatform::execute(SimTask& t, const wl::Uop& u) {
  switch (u.kind) {
    case wl::UopKind::Store: {
      uint8_t buf[64];
      const uint64_t v = u.flags & wl::kUopValueFromProgram ? t.prog->store_value(u) : u.value;
      if (u.size <= 8) std::memcpy(buf, &v, u.size);
      else std::memset(buf, int(v & 0xff), u.size);
      if (!ua_->store(t.t, u.addr, buf, u.size) && !t.killed)
        panic("store to {:#x} by task {} failed with a signal", u.addr, t.t->pid);
      break;
    }
    case wl::UopKind::Load: {
      uint8_t buf[64];
      if (!ua_->load(t.t, u.addr, buf, u.size)) {
        if (t.killed) break;
        panic("load from {:#x} by task {} failed with a signal", u.addr, t.t->pid);
      }
      if (u.flags & wl::kUopCheckValue) {
        uint64_t got = 0;
        std::memcpy(&got, buf, std::min<size_t>(u.size, 8));
        const uint64_t mask = wl::loaded_value_mask(u.size);
        if (!wl::loaded_value_matches(u, got))
          panic("data integrity: task {} load at VA {:#x} ({} bytes) read {:#x}, expected {:#x}, "
                "after op #{}", t.t->pid, u.addr, u.size, got & mask, u.value & mask, u.extra);
        bytes_compared_.inc(u.size);
      }
      break;
    }
    case wl::UopKind::Rdtscp:
      t.prog->rdtscp_return(sys_.cycles_to_ps(now_cycles_));
      break;
    case wl::UopKind::Syscall: {
      SyscallOutcome o = sys_.syscall(cpu_, t, u, sys_.cycles_to_ps(now_cycles_));
      now_cycles_ += o.cycles;
      break;
    }
    case wl::UopKind::Marker:
      sys_.marker(cpu_, t, u, sys_.cycles_to_ps(now_cycles_));
      break;
    case wl::UopKind::Alu:
    case wl::UopKind::Lfence: break;
  }
}

void FunctionalPlatform::run() {
  // An error inside the SC_THREAD would reach SystemC's report handler and lose its type (and so
  // its exit status): keep it, stop the simulation, and rethrow it from finish().
  try {
    run_program();
  } catch (const sc_core::sc_unwind_exception&) {
    throw;
  } catch (...) {
    error_ = std::current_exception();
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_stop();
  }
}

// With several CPUs the functional platform interleaves them, a slice of micro-ops each, on one
// clock: program order per task, no parallel timing.
void FunctionalPlatform::run_program() {
  const uint64_t max_uops = sys_.platform().max_uops;
  const int ncpu = int(sys_.platform().cores);
  constexpr unsigned kSlice = 256;
  while (!sys_.all_exited()) {
    bool ran = false;
    for (cpu_ = 0; cpu_ < ncpu; ++cpu_) {
      for (unsigned n = 0; n < kSlice; ++n) {
        double sw = 0;
        SimTask* t = sys_.schedule(cpu_, sys_.cycles_to_ps(now_cycles_), &sw);
        now_cycles_ += sw;
        if (!t) break;
        ran = true;
        wl::Uop u;
        // (resumable: its program, or only its exit once a fatal signal has killed it)
        if (!t->resumable->next(u)) panic("task {} ended its program without exit()", t->t->pid);
        execute(*t, u);
        now_cycles_ += fp_.uop_cycles;
        uops_.inc();
        const uint64_t c = uint64_t(now_cycles_);
        cycles_.inc(c - counted_cycles_);
        counted_cycles_ = c;
        if (max_uops && uops_.value() >= max_uops)
          fatal("sim.max_uops = {} reached before the workload finished", max_uops);
      }
    }
    if (!ran && !sys_.all_exited()) panic("every task is blocked: the workload deadlocked");
  }
  cpu_ = 0;
  sc_core::wait(sc_core::sc_time(double(sys_.cycles_to_ps(now_cycles_)), sc_core::SC_PS));
}

void FunctionalPlatform::finish(double host_seconds) {
  if (error_) std::rethrow_exception(error_);
  sys_.finish(sys_.cycles_to_ps(now_cycles_), uops_.value(), host_seconds);
}

double FunctionalPlatform::progress() const {
  SimTask* t = sys_.current(0);
  return t && t->prog ? t->prog->progress() : 0;
}

}  // namespace mmusim
