// SPDX-License-Identifier: GPL-2.0-only
// Kernel locks as simulated resources (multi-core platforms). The kernel port runs one entry at a
// time, functionally; the platform delivers entries in simulated-time order (each core
// synchronises before it enters the kernel). During an entry the kernel reports every lock it
// takes and releases with its time so far; at the end, this class replays them against the
// locks' state left by the other CPUs' entries: an acquisition that finds the lock held (or, for
// a reader of mmap_lock or a VMA lock, a writer waiting or holding it: writer-preferring rwsems)
// waits until it is released, in simulated time, and the entry takes that much longer.
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
    evs_.clear();
  }
  // The cycles the entry waited for locks.
  double end();

  void acquire(const void* lock, kmm::LockClass cls, bool write, double cycles) override {
    evs_.push_back({lock, cls, write, true, cycles});
  }
  void release(const void* lock, kmm::LockClass cls, bool write, double cycles) override {
    evs_.push_back({lock, cls, write, false, cycles});
  }

 private:
  struct Ev {
    const void* lock;
    kmm::LockClass cls;
    bool write;
    bool acquire;
    double cycles;
  };
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
  std::vector<Ev> evs_;
  std::unordered_map<const void*, State> state_;
  std::array<ClassCounters, size_t(kmm::LockClass::COUNT)> ctr_{};
};

}  // namespace mmusim
