// SPDX-License-Identifier: GPL-2.0-only
// Cache-line transfers between cores for the kernel's shared data (several cores).
//
// The kernel port runs one entry at a time, functionally, in the order the entries start in
// simulated time; entries of different CPUs overlap in simulated time. Each access an entry makes
// to a line of kernel data (a lock word, a page-table entry, a struct page) is reported here with
// its simulated time. A core that writes a line (an atomic, a lock word, a PTE) needs it exclusive;
// one that reads it needs it not modified elsewhere. When the line is in another core's private
// caches in a state that forbids the access, the line moves: the access costs a core-to-core
// transfer (coherence.transfer_latency), and the line can serve one transfer at a time: a request
// that finds the line on its way to another core queues behind it (coherence.line_occupancy). So a
// line all cores update (the per-VMA lock of a VMA every thread faults in) becomes a serial
// resource, as on the machine.
//
// Which core holds the line at an access's time: the kernel accesses of the line in simulated-time
// order (a short history per line, the accesses of entries that may still overlap later ones),
// the latest before the access decides; when no other core's private caches (L1D, L2: their tags,
// MemoryHierarchy) hold the line any more, nothing forwards it, and the access is an ordinary
// miss that the kernel's price list covers. Alder Lake's L3 is non-inclusive, with a snoop filter tracking the
// cores' lines (docs/research-coherence.md): a line modified in a core is fetched from that core.
//
// Without several cores nothing here runs: one core's numbers do not change.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/line_transfers.hpp"
#include "base/stats.hpp"
#include "models/cache/cache.hpp"

namespace mmusim::hw {

class KernelLineCoherence : public LineTransfers {
 public:
  // The classes of kernel data, for the statistics (coherence.<class>.transfers, .cycles).
  // `caches[i]`: core i's hierarchy (its private L1D and L2 are probed). Latencies in cycles of
  // the core clock `ghz`.
  KernelLineCoherence(std::vector<MemoryHierarchy*> caches, double transfer_cycles,
                      double occupancy_cycles, double ghz, const std::vector<std::string>& classes,
                      Stats& stats);

  // Entries start in simulated-time order: an access at or after `start_ps` comes next. What is
  // older than the latest access before it can no longer matter and is forgotten.
  void begin(uint64_t start_ps) override { start_ps_ = start_ps; }

  // Core `cpu` accesses the line of `pa` at `t_ps` (`write`: it needs the line exclusive). Returns
  // the cycles the access waits for the line (0 when it is there or comes from the LLC / DRAM).
  double access(int cpu, uint64_t pa, bool write, uint64_t t_ps, unsigned cls) override;
  // Several sockets: the socket of each CPU, and what a transfer between two sockets takes
  // (coherence.remote_transfer_latency) instead of the transfer latency.
  void set_sockets(std::vector<unsigned> socket_of, double remote_transfer_cycles) {
    socket_of_ = std::move(socket_of);
    remote_transfer_cycles_ = remote_transfer_cycles;
  }
  // CPUs at different clocks (E-cores): each CPU's clock, and what a transfer from holder `from`
  // to requester `to` takes in ns (the pair's latency: P-core to P-core, to or from an E-core,
  // between E-cores); the requester waits in its own cycles. Not set: every CPU at the
  // constructor's clock and transfer. (The line's occupancy stays a time at that clock.)
  void set_cpu_timing(std::vector<double> ghz_of_cpu, std::function<double(int from, int to)> transfer_ns) {
    cpu_ghz_ = std::move(ghz_of_cpu);
    transfer_ns_ = std::move(transfer_ns);
  }


 private:
  struct Use {
    uint64_t t_ps;
    int16_t cpu;
    bool write;
  };
  struct Line {
    std::vector<Use> uses;        // by time
    std::vector<uint64_t> busy;   // start times of transfers, each [s, s + occupancy)
  };
  bool held_elsewhere(int cpu, uint64_t pa);
  static constexpr uint64_t kRecentPs = 20'000'000;  // 20 us: about one core.quantum at 4.9 GHz
  uint64_t ps(double cycles) const { return ps(cycles, ghz_); }
  static uint64_t ps(double cycles, double ghz) { return uint64_t(cycles * 1000.0 / ghz + 0.5); }

  std::vector<MemoryHierarchy*> caches_;
  double transfer_cycles_, occupancy_cycles_, ghz_;
  std::vector<unsigned> socket_of_;  // empty: one socket
  double remote_transfer_cycles_ = 0;
  std::vector<double> cpu_ghz_;                        // empty: ghz_ for every CPU
  std::function<double(int, int)> transfer_ns_;        // set with cpu_ghz_
  uint64_t start_ps_ = 0;
  std::unordered_map<uint64_t, Line> lines_;
  struct ClassCounters {
    Counter* transfers;
    Counter* queued;
    Counter* cycles;
  };
  std::vector<ClassCounters> ctr_;
  Counter* all_transfers_;
  std::vector<double> cycles_frac_;
};

}  // namespace mmusim::hw
