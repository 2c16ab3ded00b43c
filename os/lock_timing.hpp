// SPDX-License-Identifier: GPL-2.0-only
// Kernel locks as simulated resources (multi-core platforms). The kernel port runs one entry at a
// time, functionally; the platform delivers entries in simulated-time order (each core
// synchronises before it enters the kernel). During an entry the kernel reports every lock it
// takes and releases with its time so far; at the end, this class replays them against the
// locks' state left by the other CPUs' entries: an acquisition that finds the lock held (or, for
// a reader of mmap_lock or a VMA lock, a writer waiting or holding it: writer-preferring rwsems)
// waits until it is released, in simulated time, and the entry takes that much longer.
// Each lock keeps the holds of the entries replayed so far as intervals in simulated time, not
// only the last release: an entry that started earlier may take a lock late (a fault that copies
// a huge page for half a millisecond and only then takes the folio's rmap lock), and a later
// entry that wants the lock before that hold begins takes it first instead of waiting for the
// earlier entry's release. (That earlier entry, replayed already, is not made to wait for it in
// turn: when the two holds would overlap, the later-replayed one comes after the other, and its
// entry waits the difference from its release on.)
//
// Lockless reads (several cores): the kernel reads a PTE without the PTE lock at the start of a
// fault (handle_pte_fault's ptep_get_lockless). This class logs every PTE write with its time in
// simulated time (the entry's start + its time so far + its waits so far); a lockless read sees
// the value the PTE had at the reader's time, the one the last write stamped by then left (the
// writes are logged in the order they were made, their stamps need not rise: value_at()). Another
// CPU's fault that upgraded the PTE later in simulated time (but ran earlier in the port) is then
// invisible to the read, and pte_same() under the lock fails: the kernel's race path.
//
// Kernel data in cache lines (several cores with hardware models): each access of an entry to a
// lock word, a PTE or a struct page goes, with its simulated time, to the hardware's line
// transfers (base/line_transfers.hpp, models/cache/coherence.hpp); the wait for a line coming from
// another core delays the rest of the entry like a lock wait.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/entry_history.hpp"
#include "base/line_transfers.hpp"
#include "base/stats.hpp"
#include "kernel_mm/kernel.hpp"

namespace mmusim {

class LockTiming : public kmm::LockObserver, public EntryHistory {
 public:
  double wait_cycles() const override { return delay_; }
  // A hold of the lock, in simulated time: it was asked for at `arrival`, taken at `acq`,
  // released at `rel`.
  struct Hold {
    uint64_t arrival, acq, rel;
  };
  LockTiming(Stats& stats, double ghz);

  // `ghz`: the entry's CPU's clock, its cycles' (0: the constructor's).
  void begin(int cpu, uint64_t start_ps, double ghz = 0) {
    cpu_ = cpu;
    ghz_ = ghz > 0 ? ghz : base_ghz_;
    start_ps_ = start_ps;
    delay_ = 0;
    slept_ = 0;
    pending_.clear();
    read_.clear();
    if (lines_) lines_->begin(start_ps);
  }
  // The hardware's cache-line transfers between cores (null: kernel data is not timed).
  void set_line_transfers(LineTransfers* l) { lines_ = l; }
  // The cycles the entry waited for locks (and for PTEs, see wait_for_ptes()); `entry_cycles`:
  // its own time.
  double end(double entry_cycles) {
    wait_for_ptes(entry_cycles);
    const double d = delay_;
    delay_ = 0;
    return d;
  }
  // Of end()'s cycles, those the entry slept: waiting for mmap_lock (an rwsem: its waiters sleep,
  // rwsem_down_read_slowpath() / rwsem_down_write_slowpath(); the other locks spin or are taken
  // with trylocks) and for another CPU's fault (wait_for_ptes()).
  double slept() const { return slept_; }

  void acquire(const void* lock, kmm::LockClass cls, bool write, double cycles, uint64_t line_pa) override {
    event(lock, cls, write, true, cycles, line_pa);
  }
  void release(const void* lock, kmm::LockClass cls, bool write, double cycles, uint64_t line_pa) override {
    event(lock, cls, write, false, cycles, line_pa);
  }
  void pte_write(const uint64_t* entry, unsigned n, double cycles) override;
  uint64_t lockless_read(const uint64_t* entry, uint64_t value, double cycles) override;
  // A new table's entries have no past: the writes logged for its frame's earlier life are
  // forgotten. (Several CPUs: an entry that frees a table runs at its start, so a table it frees
  // can be reused by an entry that starts later but before the frees' stamps; without this, a
  // walk of the new table at a time before them would read the old table's values.)
  void table_alloc(const uint64_t* entries, unsigned n) override;
  // The line's transfer from another core, if it needs one, delays what follows in the entry.
  void line_access(uint64_t pa, kmm::LineClass cls, bool write, double cycles) override {
    if (lines_) delay_ += lines_->access(cpu_, pa, write, start_ps_ + ps(cycles + delay_), unsigned(cls));
  }
  uint64_t value_at(const uint64_t* entry, uint64_t current, uint64_t t_ps) const override;
  // How long a PTE write stays logged after the entry that made it starts (see prune()).
  static constexpr uint64_t kKeepPs = 1'000'000'000;  // 1 ms
  // PTE writes logged and not yet forgotten (tests).
  size_t pte_log_size() const { return pte_log_n_; }

 private:
  struct PteWrite {
    uint64_t t_ps;  // when, in simulated time
    uint64_t old;   // the value before
  };
  void event(const void* lock, kmm::LockClass cls, bool write, bool acquire, double cycles, uint64_t line_pa);
  // An entry's logged writes (in the port's order), from the first that a reader at time `t` does
  // not see yet: those after the last one stamped at or before t (see value_at()).
  static size_t writes_after(const std::vector<PteWrite>& w, uint64_t t);
  // Drops the writes no reader after `h` sees; returns how many.
  static size_t forget(std::vector<PteWrite>& w, uint64_t h);
  // A PTE the entry read locklessly that is still none at the entry's end in simulated time, but
  // which another CPU's fault, overlapping this one, fills later (its entry ran first in the port:
  // entries run whole, in the order they start, and a fault that sleeps on the disk spans the
  // sleep). This fault found it filled (the port's page tables are the latest), so it did nothing
  // and returns; at its end the access would fault again, seeing none, until that time. The real
  // fault would have found the PTE none and the folio locked by the other fault (under read), and
  // slept on it until the other mapped it (folio_lock() -> unlocked after finish_fault()): the
  // entry ends then (counted in kernel.pte_waits; part of the time its task sleeps).
  void wait_for_ptes(double entry_cycles);
  // Forgets the writes no later reader can see: those more than kKeepPs before the current
  // entry's start (entries start in simulated-time order; a core's page walks run ahead of or
  // behind the kernel entries by up to its quantum, core.quantum: 20 us at 4.9 GHz).
  void prune();
  uint64_t horizon() const { return start_ps_ > kKeepPs ? start_ps_ - kKeepPs : 0; }
  struct State {
    std::vector<Hold> writers;  // exclusive holds (a writer of an rwsem, a spinlock)
    std::vector<Hold> readers;  // shared holds
  };
  // The current entry's acquisitions not yet released.
  struct Pending {
    const void* lock;
    bool write;
    uint64_t arrival, acq;
  };
  std::vector<Pending> pending_;
  std::vector<const uint64_t*> read_;  // PTEs the entry read locklessly that have a logged past
  double slept_ = 0;
  Counter* pte_waits_ = nullptr;
  struct ClassCounters {
    Counter* acquisitions;
    Counter* contended;
    Counter* wait_ns;
  };
  uint64_t ps(double cycles) const { return uint64_t(cycles * 1000.0 / ghz_ + 0.5); }

  double base_ghz_;
  double ghz_;  // the current entry's CPU's
  int cpu_ = 0;
  LineTransfers* lines_ = nullptr;
  uint64_t start_ps_ = 0;
  double delay_ = 0;  // cycles the current entry has waited so far
  std::unordered_map<const uint64_t*, std::vector<PteWrite>> pte_log_;
  // Host speed: how many logged entries hash to each bucket (a counting filter), so that the
  // walkers' reads of entries never written (most of them) skip the map. Exact: a bucket of 0
  // means no entry of it is logged.
  static constexpr unsigned kFilterBits = 20;
  std::vector<uint16_t> filter_ = std::vector<uint16_t>(size_t(1) << kFilterBits, 0);
  static size_t bucket(const uint64_t* e) {
    return size_t((reinterpret_cast<uintptr_t>(e) >> 3) * 0x9E3779B97F4A7C15ull >> (64 - kFilterBits));
  }
  size_t pte_log_n_ = 0, prune_at_ = 1u << 16;
  std::unordered_map<const void*, State> state_;
  std::array<ClassCounters, size_t(kmm::LockClass::COUNT)> ctr_{};
};

}  // namespace mmusim
