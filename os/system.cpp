// SPDX-License-Identifier: GPL-2.0-only
#include "os/system.hpp"

#include "os/lock_timing.hpp"
#include "workloads/image.hpp"

#include <algorithm>
#include <csignal>
#include <ctime>

#include "base/error.hpp"
#include "base/log.hpp"

namespace mmusim {

void PlatformParams::visit(Params& p) {
  p.enumeration("platform.name", name, PlatformName::functional,
                {{"i7-12700kf", PlatformName::i7_12700kf},
                 {"neoverse-n1", PlatformName::neoverse_n1},
                 {"xeon-e5-2699v3", PlatformName::xeon_e5_2699v3},
                 {"functional", PlatformName::functional}},
                "i7-12700kf: x86-64 Golden Cove P-core model; neoverse-n1: arm64 Neoverse N1 "
                "model; xeon-e5-2699v3: x86-64 Haswell-EP core model (platform.sockets = 2 for the two-socket machine); functional: no "
                "hardware timing, operations in program order, no "
                "speculation (for checking kernel logic fast)");
  p.enumeration("platform.isa", isa, pg::Isa::x86_64,
                {{"x86_64", pg::Isa::x86_64}, {"arm64", pg::Isa::arm64}},
                "the ISA of the functional platform (the other platforms have their own)");
  p.integer("platform.cores", cores, 1, 1, 64, "number of simulated cores");
  p.integer("platform.sockets", sockets, 1, 1, 8,
            "sockets (packages) the cores are split between, evenly: cores [n * cores/sockets, "
            "(n + 1) * cores/sockets) are on socket n. Each socket has its own LLC and memory "
            "(a NUMA node: memory.size split evenly, placed by memory.numa); another socket's "
            "memory takes memory.remote_latency, a line modified in another socket's caches "
            "coherence.remote_transfer_latency");
  p.boolean("platform.smt", smt, false,
            "two hardware threads per core (Hyper-Threading; the i7-12700kf's P-cores): logical "
            "CPUs 2n and 2n+1 share core n's caches, TLBs and walkers, each with half its ROB, "
            "load and store buffers and fill buffers (docs/research-smt-ecores.md)");
  p.real("platform.clock_ghz", clock_ghz, 4.9, 0.1, 10.0,
         "core clock; converts the kernel's cost account and memory latencies in ns to cycles",
         "GHz");
  p.integer("platform.ecores", ecores, 0, 0, 16,
            "i7-12700kf: Gracemont E-cores besides the platform.cores P-cores, in clusters of 4 "
            "sharing an L2 (the part has 4: platform.cores = 8, platform.smt = true, "
            "platform.ecores = 4 is the whole 20-thread part). They are the logical CPUs after "
            "every P-core thread, run at platform.ecore_clock_ghz, and their hardware is the "
            "ecore.* keys; their statistics are ecore.core.*, ecore.tlb.*, ecore.cache.l1d/l2.*, "
            "ecore.walker.* (docs/design-ecores.md)");
  p.real("platform.ecore_clock_ghz", ecore_clock_ghz, 3.8, 0.1, 10.0,
         "the E-cores' clock (platform.ecores): their cycles, and the kernel's on them", "GHz");
  p.enumeration("log.level", log_level, std::string("warn"),
                {{"off", std::string("off")},
                 {"error", std::string("error")},
                 {"warn", std::string("warn")},
                 {"info", std::string("info")},
                 {"debug", std::string("debug")},
                 {"trace", std::string("trace")}},
                "log level of every module (--quiet and --verbose override it)");
  p.boolean("output.host_stats", host_stats, true,
            "write sim.host_seconds, sim.uops_per_host_second and (with a measured region) "
            "sim.region_cpu_seconds and sim.region_uops_per_cpu_second (the only statistics that "
            "differ between two runs of the same config and seed)");
  p.integer("sim.max_uops", max_uops, 0, 0, int64_t(1) << 62,
            "stop with an error after this many micro-ops (0: no limit)");
  p.size("sim.host_memory_budget", host_memory_budget, "16G", 64ull << 20, 1ull << 50,
         "host memory a run may need: checked before the run starts against an estimate (8 bytes "
         "per frame of memory.size, plus per simulated frame the workload touches 4 KiB of "
         "contents and its struct page; random-ops also its reference model); a run that needs "
         "more is refused");
  p.duration("platform.ipi_handler", ipi_handler, "1500cyc",
             "x86 multi-core: time a CPU spends entering and leaving the interrupt of a "
             "TLB-shootdown IPI, besides its flush_tlb_func() (priced cost.invlpg / flush_full); "
             "the sender's wait sees the first half (docs/research-shootdown.md)");
  p.duration("platform.ipi_latency", ipi_latency, "300ns",
             "x86 multi-core: an IPI's delivery, from the sender's ICR write to the receiver's "
             "handler (docs/research-shootdown.md)");
  p.duration("platform.tlbi_contention", tlbi_contention, "200cyc",
             "arm64 multi-core: extra time of a broadcast TLBI per other CPU broadcasting at the "
             "same time (\"latency ... increases almost linearly with the number of CPUs trying to "
             "send tlbi broadcasts at the same time\", A. Arcangeli [UARCH C.4, M]; value [U])");
  p.duration("platform.tlbi_window", tlbi_window, "1us",
             "arm64 multi-core: broadcasts within this time of each other contend [U]");
  p.duration("platform.idle_exit_latency", idle_exit_latency, "0",
             "multi-core: a task woken onto an idle CPU (a new thread, a barrier's futex wake, a "
             "parent whose child exited) starts this long after the wake-up: the exit latency of "
             "the idle state the CPU is in (cpuidle's menu governor picks the deepest enabled one "
             "when no timer is pending); not paid when the CPU's SMT sibling runs a task; 0: "
             "idle CPUs wake at once");
  p.duration("platform.idle_shallow_exit_latency", idle_shallow_exit_latency, "0",
             "multi-core: the exit latency of the shallow idle state (C1E) that cpuidle's menu "
             "governor takes instead of the deep one when the CPU's recent idle periods predict a "
             "shorter idle than platform.idle_deep_residency (get_typical_interval(): the last 8 "
             "periods; a CPU starts with a long idle history)");
  p.duration("platform.idle_deep_residency", idle_deep_residency, "0",
             "multi-core: the target residency of the deep idle state: a predicted idle period "
             "shorter than this takes the shallow state (platform.idle_shallow_exit_latency); "
             "0: the deep state always");
  p.duration("coherence.transfer_latency", line_transfer, "35ns",
             "multi-core: a kernel access to a cache line another core holds in a state that "
             "forbids it (modified there, or wanted exclusive) waits this long for the line "
             "(core-to-core latency; models/cache/coherence.hpp)");
  p.duration("coherence.transfer_latency_pe", line_transfer_pe, "35ns",
             "E-cores (platform.ecores): coherence.transfer_latency between a P-core and an E-core");
  p.duration("coherence.transfer_latency_ee", line_transfer_ee, "35ns",
             "E-cores: coherence.transfer_latency between two E-cores of one cluster (sharing "
             "its L2)");
  p.duration("coherence.transfer_latency_ee_cross", line_transfer_ee_cross, "35ns",
             "E-cores: coherence.transfer_latency between E-cores of two clusters");
  p.duration("coherence.remote_transfer_latency", remote_line_transfer, "0ns",
             "several sockets: a line another socket's caches hold modified comes over the "
             "socket link in this long (the remote HitM latency); 0 = not set (required when "
             "platform.sockets > 1)");
  p.duration("coherence.line_occupancy", line_occupancy, "35ns",
             "multi-core: a line moving between cores serves one transfer at a time: a request "
             "that finds it moving waits until this long after that transfer began");
  disk.visit(p);
  p.duration("sched.base_slice", base_slice, "750us",
             "cycle-level platforms: EEVDF's base time slice, sysctl_sched_base_slice (0.75 ms "
             "normalised), scaled by 1 + ilog2(min(CPUs, 8)) as the kernel scales it "
             "(SCHED_TUNABLESCALING_LOG, sched_update_scaling()): 3 ms on 8 CPUs or more "
             "[H: kernel/sched/fair.c, docs/research-filemap-swap-io.md §7]. A task that has run "
             "its slice is preempted at the next tick if another task waits on its CPU");
  p.integer("sched.hz", hz, 250, 0, 1000,
            "cycle-level platforms: the scheduler tick (CONFIG_HZ), at which an expired slice is "
            "preempted; Kconfig.hz's default 250 [M; distributions differ: 250 or 1000]; 0: no "
            "preemption (a task runs until it blocks or exits)");
  p.enumeration("sched.placement", placement, Scheduler::Placement::spread,
                {{"spread", Scheduler::Placement::spread}, {"by-number", Scheduler::Placement::by_number}},
                "where the workload's thread i runs (pinned; there is no migration): spread = as "
                "Linux spreads busy threads, one per core first (the P-cores, then the E-cores), "
                "then the cores' second hardware threads [docs/research-smt-ecores.md §3.4]; "
                "by-number = CPU i mod the CPUs (taskset -c i)");
  p.enumeration("sched.affinity", affinity, Scheduler::Affinity::pinned,
                {{"pinned", Scheduler::Affinity::pinned}, {"all", Scheduler::Affinity::all}},
                "several CPUs: pinned = every task stays on the CPU it was placed on (the reference "
                "benchmarks pin their threads: taskset, sched_setaffinity); all = no affinity mask, "
                "as an unpinned program runs: a task woken while its CPU is busy goes to an idle CPU "
                "of its LLC (select_idle_sibling()), and a CPU about to idle pulls a queued task "
                "that has not run for 0.5 ms from the busiest CPU (sched_balance_newidle(); "
                "sched.migrations_*, trace event sched_migrate_task; os/scheduler.hpp)");
}

uint64_t PlatformParams::slice_ps() const {
  unsigned factor = 1;  // 1 + ilog2(min(cpus, 8))
  for (unsigned n = std::min(cpus(), 8u); n > 1; n >>= 1) ++factor;
  return uint64_t(base_slice.ns(clock_ghz) * 1000.0 * factor + 0.5);
}

pg::Isa PlatformParams::effective_isa() const {
  switch (name) {
    case PlatformName::i7_12700kf: return pg::Isa::x86_64;
    case PlatformName::neoverse_n1: return pg::Isa::arm64;
    case PlatformName::xeon_e5_2699v3: return pg::Isa::x86_64;
    case PlatformName::functional: return isa;
  }
  return isa;
}

System::System(const Config& cfg, Stats& stats, Trace& trace, kmm::MmuHw& hw)
    : stats_(stats),
      trace_(trace),
      faults_region_(stats.counter("faults.region", "faults whose address lies in the measured region")),
      rounds_(stats.counter("workload.rounds", "rounds the workload's threads finished in the measured region (swap-readers: a reader's pass over its share)")),
      ctx_switches_(stats.counter("sched.context_switches", "context switches")),
      io_sleeps_(stats.counter("sched.io_sleeps", "page faults and system calls (msync(MS_SYNC)) whose task slept waiting for the disk, its CPU free for others meanwhile (cycle-level platforms)")),
      lock_sleeps_(stats.counter("sched.lock_sleeps", "page faults and system calls whose task slept waiting for mmap_lock (an rwsem) or for another CPU's fault (kernel.pte_waits), its CPU free for others meanwhile (cycle-level platforms)")),
      tasks_killed_(stats.counter("sched.tasks_killed", "threads that died of a fatal signal: the memory cgroup's OOM killer (memcg.oom_kill), or a fault's SIGSEGV or SIGBUS (faults.sigsegv, kernel.faults_sigbus); mmusim run then exits with status 3")),
      preemptions_(stats.counter("sched.preemptions", "tasks preempted at a scheduler tick: their slice (sched.base_slice) was used and another task waited on the CPU (cycle-level platforms)")),

      fault_latency_(stats.distribution("fault.latency_ns",
                                        "latency of a faulting store, as the benchmark measures it "
                                        "(region faults)",
                                        "ns")) {
  Params rd = Params::reading(cfg);
  pp_.visit(rd);
  kp_.visit(rd);
  wp_.visit(rd);
  cost_.visit(rd);
  if (pp_.cores % pp_.sockets != 0)
    fatal("{}: platform.sockets = {} does not divide platform.cores = {} ({}): every socket has "
          "the same number of cores", cfg.setting("platform.sockets").origin, pp_.sockets, pp_.cores,
          cfg.setting("platform.cores").origin);
  kp_.nr_nodes = pp_.sockets;
  kp_.hz = pp_.hz ? pp_.hz : 250;  // CONFIG_HZ: sched.hz, or Kconfig's default without the tick
  kp_.cpus_per_node = pp_.cpus_per_socket();

  if (pp_.name != PlatformName::functional && !cfg.is_default("platform.isa") &&
      pp_.isa != pp_.effective_isa())
    fatal("{}: platform.isa = {} is impossible with platform.name = {} (its ISA is {})",
          cfg.setting("platform.isa").origin, pg::isa_name(pp_.isa), cfg.get_string("platform.name"),
          pg::isa_name(pp_.effective_isa()));
  // A recording runs with the THP knobs as configured (workload.folio is the built-in ones').
  if (wp_.name == wl::WorkloadName::trace) {
    wp_.thp_from = wl::WorkloadParams::ThpFrom::config;
    syscalls_refused_ = &stats.counter("trace.syscalls_refused",
                                       "replayed system calls the kernel port refused (an madvise() "
                                       "advice it does not have, ...): the recorded call succeeded");
  }
  if (wp_.thp_from == wl::WorkloadParams::ThpFrom::folio) {
    for (auto& [spec, st] : cfg.effective())
      if (spec->key.rfind("thp.", 0) == 0 && st->origin != "default")
        fatal("{}: {} is set, but workload.thp_setup = folio sets the THP knobs from "
              "workload.folio; remove it or set workload.thp_setup = config",
              st->origin, spec->key);
  }

  fault_meter_ = std::make_unique<wl::FaultLatencyMeter>(
      pp_.clock_ghz, [this](int kind, double ns) { record_fault_latency(kind, ns); });
  if (pp_.ecores) {
    std::vector<double> clocks(pp_.cpus());
    for (unsigned c = 0; c < pp_.cpus(); ++c) clocks[c] = ghz(int(c));
    fault_meter_->set_cpu_clocks(std::move(clocks));
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
  if (pp_.smt && pp_.name != PlatformName::i7_12700kf)
    fatal("{}: platform.smt = true is impossible with platform.name = {}: only the i7-12700kf's "
          "P-cores have two hardware threads",
          cfg.setting("platform.smt").origin, cfg.get_string("platform.name"));
  if (pp_.ecores && pp_.name != PlatformName::i7_12700kf)
    fatal("{}: platform.ecores = {} is impossible with platform.name = {}: only the i7-12700kf has "
          "E-cores",
          cfg.setting("platform.ecores").origin, pp_.ecores, cfg.get_string("platform.name"));
  if (pp_.ecores && pp_.sockets > 1)
    fatal("{}: platform.ecores = {} with platform.sockets = {}: the i7-12700kf is one socket",
          cfg.setting("platform.ecores").origin, pp_.ecores, pp_.sockets);
  // (The platform file, included by the experiment configs, states them all: a value other than
  // the platform's default is one the user set.)
  if (!pp_.ecores)
    for (auto& [spec, st] : cfg.effective())
      if (spec->key.rfind("ecore.", 0) == 0 && !cfg.is_default(spec->key) &&
          st->text != (spec->variant_defaults.count(cfg.variant())
                           ? spec->variant_defaults.at(cfg.variant()) : spec->default_text))
        fatal("{}: {} is set, but platform.ecores = 0: there is no E-core for it; set "
              "platform.ecores (1 to 16) or remove it",
              st->origin, spec->key);
  if (wl::is_timed_loop(wp_.name) && pp_.name == PlatformName::functional)
    fatal("{}: workload.name = {} runs for workload.duration of simulated time (its main thread "
          "sleeps that long): the functional platform has no timed sleeps; use a cycle-level platform "
          "(platform.name = i7-12700kf, neoverse-n1 or xeon-e5-2699v3)",
          cfg.setting("workload.name").origin, cfg.get_string("workload.name"));
  if (wl::is_timed_loop(wp_.name) && !pp_.hz)
    fatal("{}: workload.name = {} with sched.hz = 0: its mapper threads never sleep, and without "
          "preemption one on the main thread's CPU would keep it from ever stopping them; use a tick "
          "(sched.hz = 100 to 1000)",
          cfg.setting("sched.hz").origin, cfg.get_string("workload.name"));
  if (pp_.cpus() > 64)
    fatal("{}: platform.cores = {}{}{} makes {} logical CPUs; at most 64",
          cfg.setting("platform.cores").origin, pp_.cores, pp_.smt ? " with platform.smt = true" : "",
          pp_.ecores ? fmt::format(" and platform.ecores = {}", pp_.ecores) : "", pp_.cpus());
  sched_.set_cpus(pp_.cpus(), pp_.threads_per_core(), pp_.sockets, pp_.ecores);
  sched_.set_placement(pp_.placement);
  sched_.set_slice(pp_.slice_ps());
  sched_.set_affinity(pp_.affinity);
  if (pp_.cpus() > 1 && pp_.affinity == Scheduler::Affinity::all) {
    migrations_newidle_ = &stats.counter(
        "sched.migrations_newidle",
        "tasks a CPU about to idle pulled from the busiest CPU's queue (sched_balance_newidle(); "
        "sched.affinity = all)");
    migrations_wakeup_ = &stats.counter(
        "sched.migrations_wakeup",
        "tasks woken while their CPU was busy that went to an idle CPU of the same LLC instead "
        "(select_idle_sibling(); sched.affinity = all)");
    sched_.set_on_migrate([this](const SimTask& t, int from, int to, uint64_t now_ps, Scheduler::Migration why) {
      (why == Scheduler::Migration::newidle ? migrations_newidle_ : migrations_wakeup_)->inc();
      // The kernel's sched_migrate_task tracepoint (its comm, pid, orig_cpu, dest_cpu), on the CPU
      // that moved it, with why.
      if (trace_.on())
        trace_.event(now_ps, why == Scheduler::Migration::newidle ? to : from, TraceTask{t.t->comm, t.t->pid},
                     "sched_migrate_task",
                     {TraceField::dec("pid", uint64_t(t.t->pid)), TraceField::dec("orig_cpu", uint64_t(from)),
                      TraceField::dec("dest_cpu", uint64_t(to)),
                      TraceField::str("reason", why == Scheduler::Migration::newidle ? "newidle" : "wakeup")});
    });
  }
  if (pp_.cpus() > 1) {
    fork_start_waits_ = &stats.counter("sched.fork_start_waits",
                                       "fork children a CPU switched to before their parent's fork() had "
                                       "returned: the CPU waited for it (its wait counts as the task's time)");
    // Kernel locks become simulated resources that CPUs wait for.
    locks_ = std::make_unique<LockTiming>(stats, pp_.clock_ghz);
  }
  // The kernel's prices give its entries their time so far (lock events, disk requests).
  kernel_->set_lock_timing(&cost_, pp_.clock_ghz, locks_.get());
  if (pp_.ecores) {
    std::vector<double> clocks(pp_.cpus());
    for (unsigned c = 0; c < pp_.cpus(); ++c) clocks[c] = ghz(int(c));
    kernel_->set_cpu_clocks(std::move(clocks));
  }
  disk_ = std::make_unique<BlockDevice>(pp_.disk, pp_.clock_ghz, stats);
  kernel_->set_block_device(disk_.get());
  auto lg = log::get("system");
  lg->info("platform {} ({}, {} core{}{}, {} GHz{}), kernel wp_reuse={} fork_copy={} large_folio_reuse={}",
           cfg.get_string("platform.name"), pg::isa_name(pp_.effective_isa()), pp_.cores,
           pp_.cores > 1 ? "s" : "", pp_.smt ? " x 2 threads" : "", pp_.clock_ghz,
           pp_.ecores ? fmt::format("; {} E-cores at {} GHz", pp_.ecores, pp_.ecore_clock_ghz) : "",
           cfg.get_string("kernel.wp_reuse"),
           cfg.get_string("kernel.fork_copy"), kp_.large_folio_reuse);
  lg->info("workload {}: {} of {} folios, pattern {}, {} thread{}", workload_->name(),
           format_size(wp_.size), wl::folio_kind_name(wp_.folio), wl::pattern_name(wp_.pattern),
           wp_.threads, wp_.threads > 1 ? "s" : "");
  kmm::task_struct* t = kernel_->create_process(workload_->name());
  // What exec() and the dynamic loader leave mapped: the text the micro-ops' instruction
  // addresses lie in, the vDSO and its data (workloads/image.hpp, kernel_mm/exec.cpp).
  // A recording brings its own: what its process had mapped when the recording began.
  for (const wl::ImageMapping& m : workload_->image()) {
    using K = wl::ImageMapping::Kind;
    using E = kmm::Kernel::ExecMapping;
    const E kind = m.kind == K::text   ? E::text
                   : m.kind == K::vdso ? E::vdso
                   : m.kind == K::vvar ? E::vvar
                   : m.kind == K::file ? E::file
                                       : E::anon;
    if (int err = kernel_->map_exec_image(t, kind, m.start, m.len, m.populated, m.prot)) {
      if (wp_.name == wl::WorkloadName::trace)
        fatal("workload.trace = {}: the recording's {} at [{:#x}, {:#x}) cannot be mapped on this "
              "platform (error {}): outside its user address space, or overlapping another",
              wp_.trace, m.what, m.start, m.start + m.len, err);
      panic("mapping {} at [{:#x}, {:#x}) failed: {}", m.what, m.start, m.start + m.len, err);
    }
  }
  // The files the workload maps, on the simulated filesystem (kernel_mm/filemap.cpp).
  for (const wl::FileSpec& f : workload_->files()) {
    files_.push_back(kernel_->file_create(f.name, f.size, f.seed));
    // The filesystem's inode setup (xfs_setup_inode() -> mapping_set_folio_min_order(0)).
    if (pp_.disk.fs == DiskParams::Fs::xfs) kmm::mapping_set_large_folios(files_.back());
    if (f.cached) kernel_->file_fill_cache(files_.back());
  }
  sched_.make_runnable(sched_.add(t, workload_->main_program(), 0), 0);
}

System::~System() = default;

// The workload's "echo madvise > /sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/enabled".
void System::apply_thp_setup() {
  wl::ThpSetup s = workload_->thp_setup();
  kmm::KernelParams& kp = kernel_->mutable_params();
  for (unsigned order = 2; order <= kmm::HPAGE_PMD_ORDER; ++order)
    kp.thp_order[order] = s.order_mode[order] ? kmm::ThpMode::madvise : kmm::ThpMode::never;
}

void System::enter_kernel(int cpu, uint64_t now_ps) {
  if (sync_) sync_(cpu, now_ps);
  if (locks_) locks_->begin(cpu, now_ps, ghz(cpu));
}

double System::leave_kernel() {
  double c = account(kernel_->cost());
  kernel_->clear_cost();
  if (locks_) {
    c += locks_->end(c);
    // The entry's end in simulated time: what it unmapped is unmapped and flushed by then.
    kernel_->entry_end(kernel_->now_ps() + cycles_to_ps(c, kernel_->smp_processor_id()));
  }
  return c;
}

double System::account(const kmm::CostAccount& a) {
  double c = cost_.cycles(a, ghz(kernel_->smp_processor_id()), kernel_->cost_scale(), [&](size_t i, uint64_t k) { cost_counters_[i]->inc(k); });
  kernel_cycles_frac_ += c - a.sleep_cycles();  // (the task slept: not the kernel's work)
  uint64_t whole = uint64_t(kernel_cycles_frac_);
  kernel_cycles_->inc(whole);
  kernel_cycles_frac_ -= double(whole);
  return c;
}

void System::set_line_transfers(LineTransfers* l) {
  if (locks_) locks_->set_line_transfers(l);
}

const EntryHistory* System::entry_history() const { return locks_.get(); }

bool System::all_exited() const { return sched_.all_exited(); }

bool System::resched_check(int cpu, uint64_t now_ps, double* cycles) {
  *cycles = 0;
  SimTask* cur = sched_.current(cpu);
  // sched_tick() -> task_tick_fair(), or a wake-up's enqueue_entity(): update_curr() finds the
  // slice used and calls resched_curr(); the interrupt's return to user mode then schedules
  // (exit_to_user_mode_loop()).
  if (!pp_.hz || !sched_.resched_check(cpu, now_ps)) return false;
  preemptions_.inc();
  enter_kernel(cpu, now_ps);
  kernel_->enter(cur->t, cpu, now_ps);
  kernel_->charge(kmm::Cost::exc_entry);
  kernel_->charge(kmm::Cost::exc_exit);
  *cycles = leave_kernel();
  return true;
}

SimTask* System::schedule(int cpu, uint64_t now_ps, double* cycles) {
  *cycles = 0;
  SimTask* cur = sched_.current(cpu);
  if (sched_.keeps_running(cpu)) return cur;
  // (New-idle balancing only after the sync below, in simulated-time order with the others.)
  SimTask* next = sched_.switch_to_next(cpu, now_ps, !sync_);
  if (!next && sync_) {
    // The idle task: enter_lazy_tlb() (kernel/sched/core.c context_switch() to a task without an
    // mm), in simulated-time order with the other CPUs' kernel entries (their flushes read it).
    // While this CPU waited for them, one may have made a task runnable here (its wake-up found
    // the CPU not yet idle): look again, or the wake-up is lost.
    sync_(cpu, now_ps);
    next = sched_.switch_to_next(cpu, now_ps);
  }
  if (!next) {
    kernel_->arch().enter_lazy_tlb(cpu);
    return nullptr;
  }
  // A fork child switched to before its parent's fork() has returned, or a task taken from
  // another CPU (sched.affinity = all) before it became runnable there: the CPU waits for it.
  double wait = 0;
  if (const uint64_t from_ps = std::max(next->not_before_ps, next->runnable_from_ps); from_ps > now_ps) {
    wait = double(from_ps - now_ps) * ghz(cpu) / 1000.0;
    if (next->not_before_ps > now_ps && fork_start_waits_) fork_start_waits_->inc();
    now_ps = from_ps;
  }
  enter_kernel(cpu, now_ps);
  kernel_->enter(next->t, cpu, now_ps);
  kernel_->arch().switch_mm(cpu, next->t->mm);
  if (cur) {
    kernel_->charge(kmm::Cost::ctx_switch);
    ctx_switches_.inc();
  }
  *cycles = wait + leave_kernel();
  if (trace_.on())
    trace_.event(now_ps, cpu, TraceTask{next->t->comm, next->t->pid}, "sched_switch",
                 {TraceField::dec("prev_pid", cur ? uint64_t(cur->t->pid) : 0),
                  TraceField::dec("next_pid", uint64_t(next->t->pid))});
  return next;
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
      end_region_cpu_time();
      break;
    case wl::Mark::Round:
      if (region_open_) rounds_.inc();
      return;  // (not traced)
    case wl::Mark::ProcessDone:
      // The process's rate over its time from the region's start (usemem's start_time is taken
      // before the forks; the children are released together).
      if (region_open_ && now_ps > region_begin_ps_)
        process_rates_ += double(u.value) * 1e12 / double(now_ps - region_begin_ps_);
      return;  // (not traced)
    default: break;
  }
  if (trace_.on())
    trace_.event(now_ps, cpu, TraceTask{t.t->comm, t.t->pid},
                 u.mark == wl::Mark::RegionBegin ? "region_begin" : "region_end",
                 {TraceField::hex("start", region_start_), TraceField::hex("end", region_end_)});
}

namespace {
// The process's CPU time so far (host speed only).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
}  // namespace

void System::begin_region(uint64_t start, uint64_t size, uint64_t now_ps) {
  log::get("system")->info("measured region [{:#x}, {:#x}) begins at {:.3f} us", start, start + size,
                           double(now_ps) / 1e6);
  region_seen_ = region_open_ = true;
  region_at_barrier_ = false;
  region_start_ = start;
  region_end_ = start + size;
  region_begin_ps_ = now_ps;
  stats_.region_begin();
  region_cpu_begin_ = process_cpu_seconds();
}

void System::end_region_cpu_time() { region_cpu_seconds_ = process_cpu_seconds() - region_cpu_begin_; }

double System::region_time_ns() const {
  if (!region_seen_) return 0;
  return double(region_end_ps_ - region_begin_ps_) / 1000.0;
}

void System::finish(uint64_t end_ps, uint64_t uops, double host_seconds) {
  if (region_open_ && tasks_killed_.value()) {
    // The workload was killed before it ended its measured region: the region ends with the run.
    region_open_ = false;
    region_end_ps_ = end_ps;
    cut_short_ = true;
    stats_.region_end();
    end_region_cpu_time();
  }
  if (region_open_) panic("the run ended inside the measured region");
  stats_.set_scalar("region.time_ns", region_time_ns(), "simulated time of the measured pass", "ns");
  stats_.set_scalar("region.faults_per_second",
                    region_time_ns() > 0 ? double(faults_region_.value()) * 1e9 / region_time_ns() : 0,
                    "faults.region per simulated second of the measured pass (fault throughput)", "1/s");
  stats_.set_scalar("region.rounds_per_second",
                    region_time_ns() > 0 ? double(rounds_.value()) * 1e9 / region_time_ns() : 0,
                    "workload.rounds per simulated second of the measured region (swap-readers: reader "
                    "rounds per second)", "1/s");
  stats_.set_scalar("region.process_bytes_per_second", process_rates_,
                    "the sum over the region's processes of the bytes each reported over its time from the "
                    "region's start to its end (anon-cow-seq: vm-scalability's throughput, which lkp-tests "
                    "sums from usemem's per-process KB/s); 0: no process reported",
                    "B/s");
  stats_.set_scalar("sim.simulated_ns", double(end_ps) / 1000.0, "simulated time of the whole run", "ns");
  if (pp_.host_stats) {
    stats_.set_scalar("sim.host_seconds", host_seconds, "host time of the simulation", "s");
    stats_.set_scalar("sim.uops_per_host_second", host_seconds > 0 ? double(uops) / host_seconds : 0,
                      "simulated micro-ops per host second");
    if (region_seen_) {
      // The region's micro-ops: every P-core's (core.uops) and E-core's (ecore.core.uops).
      uint64_t region_uops = 0;
      for (const char* key : {"core.uops", "ecore.core.uops"})
        if (stats_.find_counter(key)) region_uops += stats_.region_value(key);
      stats_.set_scalar("sim.region_cpu_seconds", region_cpu_seconds_,
                        "host CPU time of the measured region (the process's, from the region's first "
                        "micro-op to its end; with workload.fast_forward, the time in detail)", "s");
      stats_.set_scalar("sim.region_uops_per_cpu_second",
                        region_cpu_seconds_ > 0 ? double(region_uops) / region_cpu_seconds_ : 0,
                        "simulated micro-ops of the measured region per host CPU second of it");
    }
  }
}

void System::deliver_fatal_signals(const SimTask* caller, uint64_t now_ps) {
  for (const auto& up : sched_.tasks()) {
    SimTask& t = *up;
    if (t.killed || t.exited || !t.t->fatal_signal) continue;
    t.killed = t.t->fatal_signal;
    tasks_killed_.inc();
    t.resumable->kill(t.killed);
    if (!t.blocked || t.sleep_until_ps) continue;  // running, queued, or asleep until a time
    MMUSIM_CHECK(&t != caller, "task {} blocked in the system call that killed it", t.t->pid);
    // Its wait ends (signal_wake_up(): TASK_INTERRUPTIBLE and TASK_KILLABLE sleeps).
    for (auto& [addr, waiters] : barriers_) waiters.erase(std::remove(waiters.begin(), waiters.end(), &t), waiters.end());
    for (auto& [key, g] : gates_)
      for (auto it = g.waiting.begin(); it != g.waiting.end();)
        it = it->second == &t ? g.waiting.erase(it) : std::next(it);
    t.waiting_for = nullptr;
    t.blocked = false;
    sched_.make_runnable(&t, now_ps);
  }
}

std::string System::killed_report() const {
  if (!tasks_killed_.value()) return {};
  const kmm::Kernel& k = *kernel_;
  std::string s;
  for (const auto& o : k.oom_kills())
    s += fmt::format("Memory cgroup out of memory: Killed process {} ({}) anon-rss:{}kB, file-rss:{}kB, "
                     "swapents:{}, pgtables:{}kB; the cgroup '{}' was charged {} of memcg.max = {} with "
                     "nothing left to reclaim (task {} was charging)\n",
                     o.pid, o.comm, o.anon_rss_kb, o.file_rss_kb, o.swapents, o.pgtables_kb, o.memcg,
                     format_size(o.usage_pages << kmm::PAGE_SHIFT), format_size(o.max_pages << kmm::PAGE_SHIFT),
                     o.invoked_by);
  for (const auto& f : k.fatal_faults())
    s += fmt::format("task {} ({}) was killed by {} at {:#x}\n", f.pid, f.comm,
                     f.sig == SIGBUS ? "SIGBUS" : f.sig == SIGSEGV ? "SIGSEGV" : "a signal", f.address);
  s += fmt::format("{} thread(s) died of a fatal signal (sched.tasks_killed){}", tasks_killed_.value(),
                   cut_short_ ? "; the measured region ended with them: region.* covers what ran" : "");
  return s;
}

}  // namespace mmusim
