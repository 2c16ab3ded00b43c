// SPDX-License-Identifier: GPL-2.0-only
// Kernel locks as simulated resources (multi-core platforms). The kernel port runs one entry at a
// time, functionally; the platform delivers entries in simulated-time order (each core
// synchronises before it enters the kernel). During an entry the kernel reports every lock it
// takes and releases with its time so far; at the end, this class replays them against the
// locks' state left by the other CPUs' entries: an acquisition that finds the lock held (or, for
// a reader of mmap_lock or a VMA lock, a writer waiting or holding it: writer-preferring rwsems)
// waits until it is released, in simulated time, and the entry takes that much longer.
//
// Lockless reads (several cores): the kernel reads a PTE without the PTE lock at the start of a
// fault (handle_pte_fault's ptep_get_lockless). This class logs every PTE write with its time in
// simulated time (the entry's start + its time so far + its waits so far); a lockless read sees
// the value the PTE had at the reader's time, the old value of the first write after it. Another
// CPU's fault that upgraded the PTE later in simulated time (but ran earlier in the port) is then
// invisible to the read, and pte_same() under the lock fails: the kernel's race path.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/stats.hpp"
#include "kernel_mm/kernel.hpp"

namespace mmusim {

class LockTiming : public kmm::LockObserver {
 public:
  LockTiming(Stats& stats, double ghz);

  void begin(uint64_t start_ps) {
    start_ps_ = start_ps;
    delay_ = 0;
  }
  // The cycles the entry waited for locks.
  double end() {
    const double d = delay_;
    delay_ = 0;
    return d;
  }

  void acquire(const void* lock, kmm::LockClass cls, bool write, double cycles) override {
    event(lock, cls, write, true, cycles);
  }
  void release(const void* lock, kmm::LockClass cls, bool write, double cycles) override {
    event(lock, cls, write, false, cycles);
  }
  void pte_write(const uint64_t* entry, unsigned n, double cycles) override;
  uint64_t lockless_read(const uint64_t* entry, uint64_t value, double cycles) override;
  // PTE writes logged and not yet forgotten (tests).
  size_t pte_log_size() const { return pte_log_n_; }

 private:
  struct PteWrite {
    uint64_t t_ps;  // when, in simulated time
    uint64_t old;   // the value before
  };
  void event(const void* lock, kmm::LockClass cls, bool write, bool acquire, double cycles);
  // Forgets the writes no later entry can see (at or before the current entry's start: entries
  // start in simulated-time order).
  void prune();
  struct State {
    uint64_t write_free = 0;      // when the last writer (or exclusive holder) releases
    uint64_t writer_arrival = 0;  // when that writer arrived (readers after it wait for it)
    uint64_t readers_free = 0;    // when the last reader releases
  };
  struct ClassCounters {
    Counter* acquisitions;
    Counter* contended;
    Counter* wait_ns;
  };
  uint64_t ps(double cycles) const { return uint64_t(cycles * 1000.0 / ghz_ + 0.5); }

  double ghz_;
  uint64_t start_ps_ = 0;
  double delay_ = 0;  // cycles the current entry has waited so far
  std::unordered_map<const uint64_t*, std::vector<PteWrite>> pte_log_;
  size_t pte_log_n_ = 0, prune_at_ = 1u << 16;
  std::unordered_map<const void*, State> state_;
  std::array<ClassCounters, size_t(kmm::LockClass::COUNT)> ctr_{};
};

}  // namespace mmusim
