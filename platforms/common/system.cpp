// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/common/system.hpp"

#include "platforms/common/lock_timing.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/log.hpp"

namespace mmusim {

void PlatformParams::visit(Params& p) {
  p.enumeration("platform.name", name, PlatformName::functional,
                {{"i7-12700kf", PlatformName::i7_12700kf},
                 {"neoverse-n1", PlatformName::neoverse_n1},
                 {"functional", PlatformName::functional}},
                "i7-12700kf: x86-64 Golden Cove P-core model; neoverse-n1: arm64 Neoverse N1 "
                "model; functional: no hardware timing, operations in program order, no "
                "speculation (for checking kernel logic fast)");
  p.enumeration("platform.isa", isa, pg::Isa::x86_64,
                {{"x86_64", pg::Isa::x86_64}, {"arm64", pg::Isa::arm64}},
                "the ISA of the functional platform (the other platforms have their own)");
  p.integer("platform.cores", cores, 1, 1, 64, "number of simulated cores");
  p.real("platform.clock_ghz", clock_ghz, 4.9, 0.1, 10.0,
         "core clock; converts the kernel's cost account and memory latencies in ns to cycles",
         "GHz");
  p.enumeration("log.level", log_level, std::string("warn"),
                {{"off", std::string("off")},
                 {"error", std::string("error")},
                 {"warn", std::string("warn")},
                 {"info", std::string("info")},
                 {"debug", std::string("debug")},
                 {"trace", std::string("trace")}},
                "log level of every module (--quiet and --verbose override it)");
  p.boolean("output.host_stats", host_stats, true,
            "write sim.host_seconds and sim.uops_per_host_second (the only statistics that "
            "differ between two runs of the same config and seed)");
  p.integer("sim.max_uops", max_uops, 0, 0, int64_t(1) << 62,
            "stop with an error after this many micro-ops (0: no limit)");
  p.size("sim.host_memory_budget", host_memory_budget, "16G", 64ull << 20, 1ull << 50,
         "host memory a run may need: checked before the run starts against an estimate (8 bytes "
         "per frame of memory.size, plus per simulated frame the workload touches 4 KiB of "
         "contents and its struct page; random-ops also its reference model); a run that needs "
         "more is refused");
  p.duration("platform.ipi_handler", ipi_handler, "1500cyc",
             "x86 multi-core: time a CPU spends on a TLB-shootdown IPI (interrupt entry, "
             "flush_tlb_func, return) [U]");
  p.duration("platform.tlbi_contention", tlbi_contention, "200cyc",
             "arm64 multi-core: extra time of a broadcast TLBI per other CPU broadcasting at the "
             "same time (\"latency ... increases almost linearly with the number of CPUs trying to "
             "send tlbi broadcasts at the same time\", A. Arcangeli [UARCH C.4, M]; value [U])");
  p.duration("platform.tlbi_window", tlbi_window, "1us",
             "arm64 multi-core: broadcasts within this time of each other contend [U]");
}

pg::Isa PlatformParams::effective_isa() const {
  switch (name) {
    case PlatformName::i7_12700kf: return pg::Isa::x86_64;
    case PlatformName::neoverse_n1: return pg::Isa::arm64;
    case PlatformName::functional: return isa;
  }
  return isa;
}

System::System(const Config& cfg, Stats& stats, Trace& trace, kmm::MmuHw& hw)
    : stats_(stats),
      trace_(trace),
      faults_region_(stats.counter("faults.region", "faults whose address lies in the measured region")),
      ctx_switches_(stats.counter("sched.context_switches", "context switches")),
      fault_latency_(stats.distribution("fault.latency_ns",
                                        "latency of a faulting store, as the benchmark measures it "
                                        "(region faults)",
                                        "ns")) {
  Params rd = Params::reading(cfg);
  pp_.visit(rd);
  kp_.visit(rd);
  wp_.visit(rd);
  cost_.visit(rd);

  if (pp_.name != PlatformName::functional && !cfg.is_default("platform.isa") &&
      pp_.isa != pp_.effective_isa())
    fatal("{}: platform.isa = {} is impossible with platform.name = {} (its ISA is {})",
          cfg.setting("platform.isa").origin, pg::isa_name(pp_.isa), cfg.get_string("platform.name"),
          pg::isa_name(pp_.effective_isa()));
  if (wp_.thp_from == wl::WorkloadParams::ThpFrom::folio) {
    for (auto& [spec, st] : cfg.effective())
      if (spec->key.rfind("thp.", 0) == 0 && st->origin != "default")
        fatal("{}: {} is set, but workload.thp_setup = folio sets the THP knobs from "
              "workload.folio; remove it or set workload.thp_setup = config",
              st->origin, spec->key);
  }

  check_resources(cfg);
  kernel_ = std::make_unique<kmm::Kernel>(kp_, pp_.effective_isa(), hw, stats, &trace);
  workload_ = wl::make_workload(wp_, &stats);
  if (wp_.thp_from == wl::WorkloadParams::ThpFrom::folio) apply_thp_setup();

  static const char* kinds[] = {"none", "alloc", "reuse", "copy", "spurious", "race", "huge_alloc",
                                "huge_reuse", "huge_split", "zero_page", "sigsegv"};
  for (unsigned k = 1; k < 11; ++k)
    kind_latency_[k] = &stats.distribution(std::string("fault.latency_ns.") + kinds[k],
                                           std::string("latency of region faults that ended as ") + kinds[k], "ns");

  for (size_t i = 0; i < kmm::kNumCosts; ++i) {
    const char* n = kmm::cost_name(kmm::Cost(i));
    cost_counters_[i] = &stats.counter(std::string("kcost.") + n,
                                       std::string("kernel cost items charged: ") + n + " (see cost." + n + ")");
  }
  kernel_cycles_ = &stats.counter("kcost.cycles", "cycles the kernel's cost account came to (exception entry/exit included)");
  running_.assign(pp_.cores, nullptr);
  runq_.resize(pp_.cores);
  if (pp_.cores > 1) {
    // Kernel locks become simulated resources that CPUs wait for.
    locks_ = std::make_unique<LockTiming>(stats, pp_.clock_ghz);
    kernel_->set_lock_timing(&cost_, pp_.clock_ghz, locks_.get());
  }
  auto lg = log::get("system");
  lg->info("platform {} ({}, {} core{}, {} GHz), kernel wp_reuse={} fork_copy={} large_folio_reuse={}",
           cfg.get_string("platform.name"), pg::isa_name(pp_.effective_isa()), pp_.cores,
           pp_.cores > 1 ? "s" : "", pp_.clock_ghz, cfg.get_string("kernel.wp_reuse"),
           cfg.get_string("kernel.fork_copy"), kp_.large_folio_reuse);
  lg->info("workload {}: {} of {} folios, pattern {}, {} thread{}", workload_->name(),
           format_size(wp_.size), wl::folio_kind_name(wp_.folio), wl::pattern_name(wp_.pattern),
           wp_.threads, wp_.threads > 1 ? "s" : "");
  kmm::task_struct* t = kernel_->create_process(workload_->name());
  SimTask* st = add_task(t, workload_->main_program(), 0);
  runq_[0].push_back(st);
}

System::~System() = default;

// Resource limits, checked before any work: the simulated physical memory must hold what the
// workload maps (with its page tables and the copies the kernel makes), and the host must hold
// the simulated memory the run touches. Estimates, on the safe side; UserError (exit 2) naming the
// keys and the numbers.
void System::check_resources(const Config& cfg) {
  constexpr uint64_t kFrame = kmm::PAGE_SIZE, kSlack = 16ull << 20;  // zero page, LRU batches, stacks
  uint64_t mapped = 0;     // bytes of simulated memory the workload's data needs at most
  std::string what;        // which keys that comes from
  if (wp_.name == wl::WorkloadName::random_ops) {
    mapped = uint64_t(wp_.processes) * wp_.max_mapped;
    what = fmt::format("workload.processes = {} x workload.max_mapped = {}", wp_.processes,
                       format_size(wp_.max_mapped));
  } else {
    // 6.12's wp_can_reuse_anon_folio (kernel.large_folio_reuse = false) copies every page of a
    // once-shared large folio: the region twice.
    const bool copies = !kp_.large_folio_reuse && wp_.folio != wl::FolioKind::k4K;
    mapped = wp_.size * (copies ? 2 : 1);
    what = fmt::format("workload.size = {}{}", format_size(wp_.size),
                       copies ? " twice (kernel.large_folio_reuse = false copies it)" : "");
  }
  // Page tables: a PTE table (one page) per PMD_SIZE, for the parent and a fork child.
  const uint64_t sim_need = mapped + 2 * (mapped / kmm::PTRS_PER_PTE) + kSlack;
  const std::string& origin =
      cfg.setting(wp_.name == wl::WorkloadName::random_ops ? "workload.max_mapped" : "workload.size").origin;
  if (sim_need > kp_.phys_mem)
    fatal("{}: {} needs about {} of simulated physical memory (with page tables and the kernel's "
          "own pages), more than memory.size = {}; raise memory.size or map less",
          origin, what, format_size((sim_need + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)), format_size(kp_.phys_mem));

  const uint64_t frames = kp_.phys_mem / kFrame;
  const uint64_t per_frame = sizeof(kmm::page) + sizeof(void*);  // memmap entry + frame pointer
  const uint64_t frame_table = frames * sizeof(void*);           // allocated up front
  const uint64_t touched = sim_need / kFrame * (kFrame + per_frame);
  const uint64_t reference = wp_.name == wl::WorkloadName::random_ops ? mapped : 0;
  const uint64_t host = frame_table + touched + reference;
  if (host > pp_.host_memory_budget) {
    auto mib = [](uint64_t b) { return format_size((b + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)); };
    fatal("{}: the run needs about {} of host memory, more than sim.host_memory_budget = {}: "
          "{} ({} of simulated memory touched, {} bytes per 4K frame), the frame table of "
          "memory.size = {} ({}){}; lower them, or raise sim.host_memory_budget if the host has "
          "the memory",
          origin, mib(host), format_size(pp_.host_memory_budget),
          what, mib(sim_need), kFrame + per_frame, format_size(kp_.phys_mem), mib(frame_table),
          reference ? fmt::format(", the reference model ({})", mib(reference)) : "");
  }
}

// The workload's "echo madvise > /sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/enabled".
void System::apply_thp_setup() {
  wl::ThpSetup s = workload_->thp_setup();
  kmm::KernelParams& kp = kernel_->mutable_params();
  for (unsigned order = 2; order <= kmm::HPAGE_PMD_ORDER; ++order)
    kp.thp_order[order] = s.order_mode[order] ? kmm::ThpMode::madvise : kmm::ThpMode::never;
}

void System::enter_kernel(int cpu, uint64_t now_ps) {
  if (sync_) sync_(cpu, now_ps);
  if (locks_) locks_->begin(now_ps);
}

double System::leave_kernel() {
  double c = account(kernel_->cost());
  kernel_->clear_cost();
  if (locks_) c += locks_->end();
  return c;
}

double System::account(const kmm::CostAccount& a) {
  double c = cost_.cycles(a, pp_.clock_ghz, [&](size_t i, uint64_t k) { cost_counters_[i]->inc(k); });
  kernel_cycles_frac_ += c;
  uint64_t whole = uint64_t(kernel_cycles_frac_);
  kernel_cycles_->inc(whole);
  kernel_cycles_frac_ -= double(whole);
  return c;
}

void System::make_runnable(SimTask* t) {
  runq_[size_t(t->cpu)].push_back(t);
  if (wake_) wake_(t->cpu);
}

SimTask* System::add_task(kmm::task_struct* t, std::unique_ptr<wl::Program> prog, int cpu) {
  auto st = std::make_unique<SimTask>();
  st->t = t;
  st->prog = std::move(prog);
  st->cpu = cpu;
  tasks_.push_back(std::move(st));
  return tasks_.back().get();
}

bool System::all_exited() const {
  return std::all_of(tasks_.begin(), tasks_.end(), [](auto& t) { return t->exited; });
}

SimTask* System::schedule(int cpu, uint64_t now_ps, double* cycles) {
  *cycles = 0;
  SimTask* cur = running_[size_t(cpu)];
  if (cur && !cur->blocked && !cur->exited) return cur;
  auto& q = runq_[size_t(cpu)];
  while (!q.empty() && (q.front()->blocked || q.front()->exited)) q.pop_front();
  if (q.empty()) {
    running_[size_t(cpu)] = nullptr;
    return nullptr;
  }
  SimTask* next = q.front();
  q.pop_front();
  running_[size_t(cpu)] = next;
  enter_kernel(cpu, now_ps);
  kernel_->enter(next->t, cpu, now_ps);
  kernel_->arch().switch_mm(cpu, next->t->mm);
  if (cur) {
    kernel_->charge(kmm::Cost::ctx_switch);
    ctx_switches_.inc();
  }
  *cycles = leave_kernel();
  if (trace_.on())
    trace_.event(now_ps, cpu, TraceTask{next->t->comm, next->t->pid}, "sched_switch",
                 {TraceField::dec("prev_pid", cur ? uint64_t(cur->t->pid) : 0),
                  TraceField::dec("next_pid", uint64_t(next->t->pid))});
  return next;
}

SyscallOutcome System::syscall(int cpu, SimTask& t, const wl::Uop& u, uint64_t now_ps) {
  SyscallOutcome out;
  kmm::Kernel& k = *kernel_;
  enter_kernel(cpu, now_ps);
  k.enter(t.t, cpu, now_ps);  // the sys_* functions charge Cost::syscall themselves
  switch (u.sys) {
    case wl::Sys::Mmap:
      out.ret = k.sys_mmap(t.t, 0, u.addr, int(u.value), int(u.extra));
      break;
    case wl::Sys::Munmap: out.ret = k.sys_munmap(t.t, u.addr, u.value); break;
    case wl::Sys::Mprotect: out.ret = k.sys_mprotect(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Madvise: out.ret = k.sys_madvise(t.t, u.addr, u.value, int(u.extra)); break;
    case wl::Sys::Fork: {
      kmm::task_struct* child = k.sys_fork(t.t);
      SimTask* c = add_task(child, workload_->child_program(forks_++), t.cpu);
      make_runnable(c);
      out.ret = child->pid;
      break;
    }
    case wl::Sys::Clone: {
      kmm::task_struct* th = k.sys_clone_thread(t.t);
      const int cpu_of = int(u.addr % pp_.cores);  // thread i pinned to CPU i mod cores
      th->cpu = cpu_of;
      auto prog = workload_->thread_program(unsigned(u.addr), u.value, u.extra);
      MMUSIM_CHECK(prog, "the workload cloned a thread it has no program for");
      SimTask* c = add_task(th, std::move(prog), cpu_of);
      make_runnable(c);
      out.ret = th->pid;
      break;
    }
    case wl::Sys::Barrier: {
      // A futex-based barrier: the last arrival wakes the others; their wait returns now.
      k.charge(kmm::Cost::syscall);
      auto& b = barriers_[u.addr];
      b.push_back(&t);
      if (b.size() < u.value) {
        t.blocked = true;
        out.blocked = true;
      } else {
        if (region_at_barrier_) {
          begin_region(region_start_, region_end_ - region_start_, now_ps);
          if (trace_.on())
            trace_.event(now_ps, cpu, TraceTask{t.t->comm, t.t->pid}, "region_begin",
                         {TraceField::hex("start", region_start_), TraceField::hex("end", region_end_)});
        }
        for (SimTask* w : b) {
          if (w == &t) continue;
          w->blocked = false;
          w->prog->syscall_return(0);
          make_runnable(w);
        }
        b.clear();
      }
      break;
    }
    case wl::Sys::Exit: {
      k.sys_exit(t.t, int(u.addr));
      t.exited = true;
      out.exited = true;
      for (auto& p : tasks_) {
        if (p->waiting_for == &t) {  // wake the parent; its wait() returns now
          p->waiting_for = nullptr;
          p->blocked = false;
          out.ret = k.sys_wait(p->t, t.t);
          p->prog->syscall_return(t.t->pid);
          make_runnable(p.get());
        }
      }
      break;
    }
    case wl::Sys::Wait: {
      SimTask* child = nullptr;
      for (auto& c : tasks_)
        if (c->t->pid == int(u.addr)) child = c.get();
      MMUSIM_CHECK(child, "wait() for pid {} that does not exist", u.addr);
      if (child->exited) {
        out.ret = k.sys_wait(t.t, child->t);
      } else {
        t.blocked = true;
        t.waiting_for = child;
        out.blocked = true;
      }
      break;
    }
    case wl::Sys::Yield:
    case wl::Sys::None: k.charge(kmm::Cost::syscall); break;
  }
  if (out.ret < 0 && u.sys != wl::Sys::Wait)
    panic("the workload's {} system call failed with {} (task {})", int(u.sys), out.ret, t.t->pid);
  out.cycles = leave_kernel();
  if (!out.blocked && !out.exited) t.prog->syscall_return(out.ret);
  return out;
}

FaultOutcome System::page_fault(int cpu, SimTask& t, uint64_t va, uint64_t syndrome, uint64_t ip,
                                uint64_t now_ps) {
  FaultOutcome out;
  kmm::Kernel& k = *kernel_;
  enter_kernel(cpu, now_ps);
  k.enter(t.t, cpu, now_ps);
  k.charge(kmm::Cost::exc_entry);
  out.ret = k.handle_user_fault(t.t, va, syndrome, ip);
  k.charge(kmm::Cost::exc_exit);
  out.record = k.last_fault();
  out.cycles = leave_kernel();
  out.in_region = region_open_ && in_region(va);
  if (out.in_region) faults_region_.inc();
  if (out.ret.sigsegv || out.ret.sigbus)
    panic("task {} ({}) got {} at {:#x} (ip {:#x}, syndrome {:#x}): the workload touched memory it "
          "does not own, or the kernel port failed to map it",
          t.t->pid, t.t->comm, out.ret.sigsegv ? "SIGSEGV" : "SIGBUS", va, ip, syndrome);
  if (trace_.on()) {
    TraceTask tt{t.t->comm, t.t->pid};
    trace_.event(now_ps, cpu, tt, "page_fault_user",
                 {TraceField::hex("address", va), TraceField::hex("ip", ip),
                  TraceField::hex("error_code", syndrome)});
    trace_.event(now_ps + cycles_to_ps(out.cycles), cpu, tt, "mm_fault_done",
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

void System::marker(int cpu, SimTask& t, const wl::Uop& u, uint64_t now_ps) {
  switch (u.mark) {
    case wl::Mark::RegionBegin:
      if (region_seen_ || region_at_barrier_) panic("the workload began its measured region twice");
      if (u.flags & wl::kUopAtBarrier) {
        region_at_barrier_ = true;
        region_start_ = u.addr;
        region_end_ = u.addr + u.value;
        return;  // traced when the barrier opens
      }
      begin_region(u.addr, u.value, now_ps);
      break;
    case wl::Mark::RegionEnd:
      if (!region_open_) panic("the workload ended a measured region it had not begun");
      log::get("system")->info("measured region ends at {:.3f} us", double(now_ps) / 1e6);
      region_open_ = false;
      region_end_ps_ = now_ps;
      stats_.region_end();
      break;
    default: break;
  }
  if (trace_.on())
    trace_.event(now_ps, cpu, TraceTask{t.t->comm, t.t->pid},
                 u.mark == wl::Mark::RegionBegin ? "region_begin" : "region_end",
                 {TraceField::hex("start", region_start_), TraceField::hex("end", region_end_)});
}

void System::begin_region(uint64_t start, uint64_t size, uint64_t now_ps) {
  log::get("system")->info("measured region [{:#x}, {:#x}) begins at {:.3f} us", start, start + size,
                           double(now_ps) / 1e6);
  region_seen_ = region_open_ = true;
  region_at_barrier_ = false;
  region_start_ = start;
  region_end_ = start + size;
  region_begin_ps_ = now_ps;
  stats_.region_begin();
}

double System::region_time_ns() const {
  if (!region_seen_) return 0;
  return double(region_end_ps_ - region_begin_ps_) / 1000.0;
}

void System::finish(uint64_t end_ps, uint64_t uops, double host_seconds) {
  if (region_open_) panic("the run ended inside the measured region");
  stats_.set_scalar("region.time_ns", region_time_ns(), "simulated time of the measured pass", "ns");
  stats_.set_scalar("sim.simulated_ns", double(end_ps) / 1000.0, "simulated time of the whole run", "ns");
  if (pp_.host_stats) {
    stats_.set_scalar("sim.host_seconds", host_seconds, "host time of the simulation", "s");
    stats_.set_scalar("sim.uops_per_host_second", host_seconds > 0 ? double(uops) / host_seconds : 0,
                      "simulated micro-ops per host second");
  }
}

}  // namespace mmusim
