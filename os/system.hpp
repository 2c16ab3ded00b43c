// SPDX-License-Identifier: GPL-2.0-only
// The simulated operating system around the kernel port, what every platform has besides its
// cores: the kernel, the workload's tasks and their programs (os/scheduler.*: run queues,
// placement), system calls (os/syscalls.cpp: the sys_* entries, fork/clone/exit/wait, the futex
// barrier), fault delivery with the exception entry and exit (os/fault_delivery.cpp), the
// measured region, the kernel's cost turned into time, the resource check before a run
// (os/resources.cpp) and the end-of-run statistics. The core models (the functional in-order
// driver, the out-of-order models) call into it; it has no timing policy of its own beyond
// converting the kernel's cost account with the `cost.*` parameters.
#pragma once

#include <cstdint>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/entry_history.hpp"
#include "base/line_transfers.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"
#include "kernel_mm/cost.hpp"
#include "kernel_mm/kernel.hpp"
#include "os/block_device.hpp"
#include "os/scheduler.hpp"
#include "workloads/fault_latency.hpp"
#include "workloads/workload.hpp"

namespace mmusim {

enum class PlatformName : uint8_t { i7_12700kf, neoverse_n1, xeon_e5_2699v3, functional };
// Its platform.name.
inline const char* platform_name(PlatformName n) {
  switch (n) {
    case PlatformName::i7_12700kf: return "i7-12700kf";
    case PlatformName::neoverse_n1: return "neoverse-n1";
    case PlatformName::xeon_e5_2699v3: return "xeon-e5-2699v3";
    case PlatformName::functional: return "functional";
  }
  return "?";
}

struct PlatformParams {
  PlatformName name = PlatformName::functional;
  pg::Isa isa = pg::Isa::x86_64;  // the functional platform's ISA
  unsigned cores = 1;
  unsigned sockets = 1;  // platform.sockets: the cores split evenly, one NUMA node each
  bool smt = false;  // platform.smt: two hardware threads per core (the i7-12700kf's P-cores)
  unsigned threads_per_core() const { return smt ? 2 : 1; }
  // E-cores (the i7-12700's Gracemont cores): single-threaded, numbered after every P-core thread,
  // at their own clock.
  unsigned ecores = 0;
  double ecore_clock_ghz = 0;
  unsigned pcpus() const { return cores * threads_per_core(); }  // the P-cores' logical CPUs
  unsigned cpus() const { return pcpus() + ecores; }            // logical CPUs
  bool is_ecore(int cpu) const { return cpu >= 0 && unsigned(cpu) >= pcpus(); }
  // The clock of the CPU that spends a cycle: every conversion between a CPU's cycles and time
  // uses it (the P-cores': clock_ghz).
  double ghz_of(int cpu) const { return is_ecore(cpu) ? ecore_clock_ghz : clock_ghz; }
  unsigned cpus_per_socket() const { return cpus() / sockets; }
  unsigned socket_of(unsigned cpu) const { return cpu / cpus_per_socket(); }
  double clock_ghz = 0;
  std::string log_level;
  bool host_stats = true;
  uint64_t max_uops = 0;  // safety stop (0: none)
  uint64_t host_memory_budget = 0;  // bytes of host memory a run may need (checked before it starts)
  // Multi-core: what a TLB shootdown costs the CPUs it reaches.
  Duration ipi_handler;        // x86: the receiver's interrupt entry and return
  Duration ipi_latency;        // x86: the IPI's delivery, ICR write to the handler
  Duration tlbi_contention;    // arm64: extra per other CPU broadcasting TLBIs at the same time
  Duration tlbi_window;        // ... "at the same time": within this much of each other
  // Multi-core: a task woken onto an idle CPU starts this much later (the idle state's exit).
  Duration idle_exit_latency;
  // ... or, when the CPU's recent idle periods predict a short one (the menu governor), the shallow
  // state's exit; the deep state's target residency decides (0: the deep state always).
  Duration idle_shallow_exit_latency;
  Duration idle_deep_residency;
  // Multi-core: a modified cache line of kernel data moving to another core.
  Duration line_transfer;      // coherence.transfer_latency
  Duration remote_line_transfer;  // coherence.remote_transfer_latency (several sockets)
  Duration line_transfer_pe, line_transfer_ee, line_transfer_ee_cross;  // E-cores' pairs
  static constexpr unsigned kEcoresPerCluster = 4;  // Gracemont: 4 cores share an L2
  int ecore_cluster(int cpu) const { return is_ecore(cpu) ? int((unsigned(cpu) - pcpus()) / kEcoresPerCluster) : -1; }
  // A modified line moving from `from`'s caches to `to`'s: the pair's latency.
  const Duration& line_transfer_between(int from, int to) const {
    if (is_ecore(from) != is_ecore(to)) return line_transfer_pe;
    if (!is_ecore(from)) return line_transfer;
    return ecore_cluster(from) == ecore_cluster(to) ? line_transfer_ee : line_transfer_ee_cross;
  }
  Duration line_occupancy;     // coherence.line_occupancy
  DiskParams disk;             // disk.*: the disk the page cache reads from
  // The scheduler's time slice (cycle-level platforms): sched.base_slice scaled as the kernel
  // scales it for the number of CPUs, expiring at the tick (sched.hz; 0: no preemption).
  Duration base_slice;
  unsigned hz = 0;
  Scheduler::Placement placement = Scheduler::Placement::spread;  // sched.placement
  Scheduler::Affinity affinity = Scheduler::Affinity::pinned;     // sched.affinity
  uint64_t slice_ps() const;
  void visit(Params& p);
  pg::Isa effective_isa() const;
};

struct SyscallOutcome {
  int64_t ret = 0;
  bool blocked = false;  // the task sleeps (wait for a live child)
  bool exited = false;   // the task is gone
  double cycles = 0;     // kernel time of the call
  // Of `cycles`: how long the task slept in the call (waiting for mmap_lock); it leaves its CPU
  // and wakes at the call's end (cycle-level platforms).
  double sleep_cycles = 0;
};

struct FaultOutcome {
  kmm::FaultReturn ret;
  kmm::FaultRecord record;
  double cycles = 0;     // exception entry + kernel + exit
  // Cycles from the start of the exception entry to the handler's first instruction that waits
  // for the CPU's older stores (Arch::store_barrier_items); < 0: none.
  double store_barrier_at = -1;
  bool exit_drains_stores = false;  // the exception return does (x86 IRET)
  double store_wait = 0;  // of `cycles`: the handler's wait there for the user's stores
  bool in_region = false;
  // Of `cycles`: how long the task slept waiting for the disk (set_io_sleep(true)): off its
  // CPU, which may run another task meanwhile; the task is queued again when it wakes.
  double sleep_cycles = 0;
};

class System {
 public:
  System(const Config& cfg, Stats& stats, Trace& trace, kmm::MmuHw& hw);
  ~System();

  const PlatformParams& platform() const { return pp_; }
  kmm::Kernel& kernel() { return *kernel_; }
  wl::Workload& workload() { return *workload_; }
  Stats& stats() { return stats_; }
  Trace& trace() { return trace_; }
  // The P-cores' clock (platform.clock_ghz); a CPU's own: ghz(cpu).
  double ghz() const { return pp_.clock_ghz; }
  double ghz(int cpu) const { return pp_.ghz_of(cpu); }
  uint64_t cycles_to_ps(double cycles) const { return uint64_t(cycles * 1000.0 / pp_.clock_ghz + 0.5); }
  // `cycles` of CPU `cpu` in ps.
  uint64_t cycles_to_ps(double cycles, int cpu) const { return uint64_t(cycles * 1000.0 / pp_.ghz_of(cpu) + 0.5); }

  // The task `cpu` runs now (null: idle), after a context switch if the previous one blocked or
  // exited. `now_ps` stamps the switch; the switch's cost is returned through `cycles`.
  SimTask* current(int cpu) const { return sched_.current(cpu); }
  SimTask* schedule(int cpu, uint64_t now_ps, double* cycles);
  bool all_exited() const;

  SyscallOutcome syscall(int cpu, SimTask& t, const wl::Uop& u, uint64_t now_ps);
  // `stores_drain`: cycles from now_ps until the CPU's buffered user stores have drained.
  FaultOutcome page_fault(int cpu, SimTask& t, uint64_t va, uint64_t syndrome, uint64_t ip, uint64_t now_ps,
                          double stores_drain = 0);
  void marker(int cpu, SimTask& t, const wl::Uop& u, uint64_t now_ps);

  // A task that waits for the disk in a page fault sleeps and leaves its CPU to others (the
  // cycle-level platforms; the functional one finishes each access in one go, the wait part of
  // the fault's time).
  void set_io_sleep(bool on) { io_sleep_ = on; }
  // When the earliest task sleeping on `cpu` wakes (0: none).
  uint64_t next_wake_ps(int cpu) const { return sched_.next_wake_ps(cpu); }
  // Preemption (the cycle-level platforms): the tick's period in ps (0: no ticks, no
  // preemption), and update_curr() on `cpu` at `now_ps`, at a tick or a wake-up there
  // (Scheduler::resched_check): true if the CPU's task is preempted (sched.preemptions), `cycles`
  // the interrupt's entry and return around it; the core then switches (schedule()).
  uint64_t tick_ps() const { return pp_.hz ? 1'000'000'000'000ull / pp_.hz : 0; }
  bool resched_check(int cpu, uint64_t now_ps, double* cycles);
  bool region_active() const { return region_open_; }
  bool in_region(uint64_t va) const { return va >= region_start_ && va < region_end_; }
  // A region fault's latency as the benchmark would see it (fault.latency_ns and .<kind>).
  void record_fault_latency(int kind, double ns);
  // What the out-of-order cores report (RDTSCPs, faults, retirement of a faulted micro-op) goes
  // here, and its samples to record_fault_latency().
  wl::FaultLatencyMeter& fault_meter() { return *fault_meter_; }

  // Called once when the run has ended: sim.* and region.* statistics.
  void finish(uint64_t end_ps, uint64_t uops, double host_seconds);
  // Empty if every task ended by its own exit(); otherwise what killed which (the OOM killer of
  // the memory cgroup, a fault's SIGSEGV or SIGBUS), as the kernel's log would say it: the run
  // is a simulated outcome, reported (mmusim run exits with status 3).
  std::string killed_report() const;
  double region_time_ns() const;

  kmm::CostModel& cost_model() { return cost_; }
  // Multi-core platforms: make `cpu`'s SystemC thread wait until simulated time `now_ps` before
  // it touches shared kernel state, so that kernel entries happen in simulated-time order.
  void set_sync(std::function<void(int cpu, uint64_t now_ps)> f) { sync_ = std::move(f); }
  // Multi-core platforms with caches: the cache-line transfers of the kernel's data between cores.
  void set_line_transfers(LineTransfers* l);
  // Several cores: the PTE stores of kernel entries with their simulated times (null: one core).
  const EntryHistory* entry_history() const;
  // A task became runnable on `cpu` (the platform wakes that core if it idles).
  void set_wake(std::function<void(int cpu)> f) { sched_.set_wake(std::move(f)); }

 private:
  void apply_thp_setup();
  void check_resources(const Config& cfg);  // memory.size and sim.host_memory_budget
  void trace_task_event(int cpu, const SimTask& t, uint64_t now_ps, const char* ev,
                        std::initializer_list<TraceField> f);

  Stats& stats_;
  Trace& trace_;
  PlatformParams pp_;
  kmm::KernelParams kp_;
  wl::WorkloadParams wp_;
  kmm::CostModel cost_;
  std::unique_ptr<kmm::Kernel> kernel_;
  std::unique_ptr<BlockDevice> disk_;
  std::unique_ptr<wl::Workload> workload_;
  std::vector<kmm::address_space*> files_;  // the workload's files (Workload::files()), by number - 1
  bool io_sleep_ = false;
  Scheduler sched_;
  std::map<uint64_t, std::vector<SimTask*>> barriers_;  // futex barriers: address -> waiters
  // Gates (Sys::Gate, kUopOrdered): per key, the ordered system calls passed, and who waits for
  // which count.
  struct Gate {
    uint64_t passed = 0;
    std::map<uint64_t, SimTask*> waiting;
  };
  std::map<uint64_t, Gate> gates_;
  std::function<void(int, uint64_t)> sync_;
  std::unique_ptr<class LockTiming> locks_;
  void enter_kernel(int cpu, uint64_t now_ps);
  // After a kernel entry: every task the kernel gave a fatal signal (task_struct::fatal_signal)
  // and that has not died yet ends its program with an exit; one blocked in a barrier, a wait()
  // or a gate is woken for it (an interruptible sleep); one asleep on the disk or a timer dies
  // when it wakes.
  void deliver_fatal_signals(const SimTask* caller, uint64_t now_ps);
  bool cut_short_ = false;  // the measured region was open when the last task died
  double leave_kernel();  // the kernel's cycles, lock waits included
  unsigned forks_ = 0;

  bool region_open_ = false, region_seen_ = false;
  bool region_at_barrier_ = false;  // a RegionBegin waiting for the next barrier to open
  void begin_region(uint64_t start, uint64_t size, uint64_t now_ps);
  uint64_t region_start_ = 0, region_end_ = 0;
  uint64_t region_begin_ps_ = 0, region_end_ps_ = 0;
  // Host speed (output.host_stats, not the model's): the process's CPU time the measured region
  // took (CPU time, not wall time: a shared machine's other work does not count).
  double region_cpu_begin_ = 0, region_cpu_seconds_ = 0;
  void end_region_cpu_time();

  Counter& faults_region_;
  Counter& rounds_;
  double process_rates_ = 0;  // region.process_bytes_per_second: Mark::ProcessDone's rates, summed
  Counter& ctx_switches_;
  Counter& io_sleeps_;
  Counter& lock_sleeps_;
  Counter& tasks_killed_;
  Counter& preemptions_;
  Counter* fork_start_waits_ = nullptr;  // several CPUs
  // sched.affinity = all, several CPUs: tasks moved, by why (Scheduler::Migration).
  Counter* migrations_newidle_ = nullptr;
  Counter* migrations_wakeup_ = nullptr;
  Counter* syscalls_refused_ = nullptr;  // (a trace workload's)
  Distribution& fault_latency_;
  Distribution* kind_latency_[16] = {};
  std::unique_ptr<wl::FaultLatencyMeter> fault_meter_;
  std::array<Counter*, kmm::kNumCosts> cost_counters_{};
  Counter* kernel_cycles_ = nullptr;
  double kernel_cycles_frac_ = 0;
  // The kernel's cost account of the last entry: counted (kcost.*), then converted to cycles.
  double account(const kmm::CostAccount& a);
};

}  // namespace mmusim
