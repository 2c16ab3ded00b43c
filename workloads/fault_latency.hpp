// SPDX-License-Identifier: GPL-2.0-only
// How the benchmarks measure a page fault's latency, from what a core reports (models/core/os.hpp:
// RDTSCP retirements, faults taken, the retirement of the micro-op that faulted). The core knows
// no benchmark; the platform feeds this meter and turns its samples into statistics
// (fault.latency_ns and fault.latency_ns.<kind>).
//
// - A workload that reads the TSC around its stores (fork-reuse's seq-byte-clock: a
//   clock_gettime() between the stores, EXPERIMENTS.md C2: "the time between the two
//   clock_gettime() around the store"): a region fault taken since the last RDTSCP is measured by
//   the next RDTSCP, as the difference of the two reads.
// - A workload without RDTSCPs: from the cycle the faulting micro-op first reached the head of the
//   ROB (its first fault) to the cycle it retired, the faults it took again on the way included.
// A CPU's first region fault since its last RDTSCP decides the sample's kind (reuse, copy, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace mmusim::wl {

class FaultLatencyMeter {
 public:
  using Sink = std::function<void(int kind, double ns)>;
  // `ghz`: the core clock (its cycles are the meter's time); `sink` takes each sample.
  FaultLatencyMeter(double ghz, Sink sink) : ghz_(ghz), sink_(std::move(sink)) {}
  // Each CPU's clock where they differ (E-cores): a CPU's samples are its cycles (empty: `ghz`).
  void set_cpu_clocks(std::vector<double> ghz_of_cpu) { cpu_ghz_ = std::move(ghz_of_cpu); }

  void rdtscp_retired(int cpu, uint64_t cycle) {
    Cpu& c = at(cpu);
    c.prev_tsc = c.tsc;
    c.tsc = cycle;
    if (c.pending_kind >= 0 && c.seen_rdtscp) sink_(c.pending_kind, double(c.tsc - c.prev_tsc) / ghz(cpu));
    c.pending_kind = -1;
    c.seen_rdtscp = true;
  }
  // `head_cycle`: when the faulting micro-op reached the head of the ROB this time; `repeat`: the
  // same micro-op faulted before (it has not retired since).
  void fault_taken(int cpu, uint64_t head_cycle, bool repeat, int kind, bool in_region) {
    Cpu& c = at(cpu);
    if (!repeat) c.first_head = head_cycle;
    if (in_region && c.pending_kind < 0) c.pending_kind = kind;
  }
  void faulted_retired(int cpu, uint64_t cycle) {
    Cpu& c = at(cpu);
    if (!c.seen_rdtscp && c.pending_kind >= 0) {
      sink_(c.pending_kind, double(cycle - c.first_head) / ghz(cpu));
      c.pending_kind = -1;
    }
  }

 private:
  struct Cpu {
    uint64_t tsc = 0, prev_tsc = 0;  // the last two RDTSCP reads
    bool seen_rdtscp = false;
    int pending_kind = -1;           // a region fault since the last RDTSCP: its kind
    uint64_t first_head = 0;         // no RDTSCPs: when the faulting micro-op first reached the head
  };
  Cpu& at(int cpu) {
    if (size_t(cpu) >= cpus_.size()) cpus_.resize(size_t(cpu) + 1);
    return cpus_[size_t(cpu)];
  }
  double ghz(int cpu) const { return size_t(cpu) < cpu_ghz_.size() ? cpu_ghz_[size_t(cpu)] : ghz_; }
  double ghz_;
  std::vector<double> cpu_ghz_;
  Sink sink_;
  std::vector<Cpu> cpus_;
};

}  // namespace mmusim::wl
