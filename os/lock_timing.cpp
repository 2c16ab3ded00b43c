// SPDX-License-Identifier: GPL-2.0-only
#include "os/lock_timing.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace mmusim {

LockTiming::LockTiming(Stats& stats, double ghz) : base_ghz_(ghz), ghz_(ghz) {
  for (size_t i = 0; i < ctr_.size(); ++i) {
    std::string n = kmm::lock_class_name(kmm::LockClass(i));
    ctr_[i].acquisitions = &stats.counter("kernel.lock." + n + ".acquisitions", n + " acquisitions (multi-core platforms)");
    ctr_[i].contended = &stats.counter("kernel.lock." + n + ".contended", n + " acquisitions that had to wait for another CPU");
    ctr_[i].wait_ns = &stats.counter("kernel.lock." + n + ".wait_ns", "time spent waiting for " + n, "ns");
  }
  pte_waits_ = &stats.counter("kernel.pte_waits",
                              "faults that found their PTE filled by another CPU's fault that overlaps them and "
                              "fills it later in simulated time (after a sleep on the disk): they sleep until then, "
                              "as on the folio lock (multi-core platforms)");
}

void LockTiming::wait_for_ptes(double entry_cycles) {
  for (const uint64_t* e : read_) {
    if (!*e) continue;  // none now: the walk finds what the port has
    auto it = pte_log_.find(e);
    if (it == pte_log_.end()) continue;
    const uint64_t end = start_ps_ + ps(entry_cycles + delay_);
    // The entry's value at `end` (value_at()), and when it changes: the earliest of the writes
    // after it.
    const std::vector<PteWrite>& w = it->second;
    const size_t i = writes_after(w, end);
    if (i == w.size() || w[i].old) continue;
    uint64_t filled = w[i].t_ps;
    for (size_t j = i; j < w.size(); ++j) filled = std::min(filled, w[j].t_ps);
    const double wait = double(filled - end + 1) * ghz_ / 1000.0;
    delay_ += wait;
    slept_ += wait;
    pte_waits_->inc();
  }
}

// The earliest time from `t` on at which no hold of `st` that `conflicts(hold, time)` is in the
// way: past each such hold's release, until none is (the writers' holds always count; the
// readers' only against a writer).
template <class F>
static uint64_t past_holds(const std::vector<LockTiming::Hold>& writers,
                           const std::vector<LockTiming::Hold>& readers, bool write, uint64_t t,
                           F conflicts) {
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto* holds : {&writers, &readers}) {
      if (holds == &readers && !write) break;
      for (const LockTiming::Hold& h : *holds)
        if (conflicts(h, t, holds == &writers)) {
          t = h.rel;
          moved = true;
        }
    }
  }
  return t;
}

void LockTiming::event(const void* lock, kmm::LockClass cls, bool write, bool acquire, double cycles,
                       uint64_t line_pa) {
  const uint64_t t = start_ps_ + ps(cycles + delay_);
  State& st = state_[lock];
  ClassCounters& c = ctr_[size_t(cls)];
  if (acquire) {
    c.acquisitions->inc();
    // Holds over before this entry started can hold up no later acquisition (entries come in
    // simulated-time order).
    auto over = [&](const Hold& h) { return h.rel <= start_ps_; };
    st.writers.erase(std::remove_if(st.writers.begin(), st.writers.end(), over), st.writers.end());
    st.readers.erase(std::remove_if(st.readers.begin(), st.readers.end(), over), st.readers.end());
    // A writer waits for every holder; a reader for a writer that arrived before it (a waiting
    // writer blocks new readers) until that writer has released. A hold replayed already that
    // begins after this acquisition (its entry started earlier but took the lock later) delays
    // it only if a hold as long as that one, taken now, would reach into it: otherwise this
    // acquisition goes first (and if its hold turns out longer, its release comes after that
    // hold, below).
    // A hold counts against others from a writer's arrival (a waiting writer queues ahead) or a
    // reader's acquisition.
    const uint64_t avail = past_holds(st.writers, st.readers, write, t, [](const Hold& h, uint64_t at, bool w) {
      const uint64_t from = w ? h.arrival : h.acq;
      return from <= at ? at < h.rel : at + (h.rel - h.acq) > h.acq;
    });
    if (avail > t) {
      c.contended->inc();
      c.wait_ns->inc((avail - t) / 1000);
      delay_ += double(avail - t) * ghz_ / 1000.0;
      if (cls == kmm::LockClass::mmap_lock) slept_ += double(avail - t) * ghz_ / 1000.0;
      // The holder's release wrote the lock word: the waiter takes its line again to get the
      // lock (the handover of a queued spinlock, the wake-up of an rwsem waiter).
      if (lines_) delay_ += lines_->access(cpu_, line_pa, true, avail, unsigned(cls));
    }
    pending_.push_back({lock, write, t, avail});
  } else {
    // The hold this release ends: the entry's latest acquisition of the lock.
    auto it = std::find_if(pending_.rbegin(), pending_.rend(),
                           [&](const Pending& p) { return p.lock == lock && p.write == write; });
    const uint64_t arrival = it != pending_.rend() ? it->arrival : t;
    uint64_t acq = it != pending_.rend() ? it->acq : t;
    if (it != pending_.rend()) pending_.erase(std::next(it).base());
    // This hold began before a hold already replayed (one taken late in an entry that started
    // earlier); if the two overlap, that one kept the lock (its entry's timing is done) and this
    // hold comes after it: the entry waits the difference from here on.
    const uint64_t len = t - acq;
    acq = past_holds(st.writers, st.readers, write, acq, [len](const Hold& h, uint64_t at, bool) {
      return h.acq >= at && h.acq < at + len && h.rel > at;
    });
    uint64_t rel = t;
    if (acq + len > t) {
      rel = acq + len;
      c.contended->inc();
      c.wait_ns->inc((rel - t) / 1000);
      delay_ += double(rel - t) * ghz_ / 1000.0;
    }
    (write ? st.writers : st.readers).push_back({arrival, acq, rel});
  }
}

void LockTiming::pte_write(const uint64_t* entry, unsigned n, double cycles) {
  const uint64_t t = start_ps_ + ps(cycles + delay_);
  for (unsigned i = 0; i < n; ++i) {
    auto [it, fresh] = pte_log_.try_emplace(entry + i);
    if (fresh) {
      uint16_t& f = filter_[bucket(entry + i)];
      MMUSIM_CHECK(f < UINT16_MAX, "PTE log filter bucket overflow");
      ++f;
    }
    std::vector<PteWrite>& w = it->second;
    pte_log_n_ -= forget(w, horizon());  // what no entry can see any more
    w.push_back({t, entry[i]});
    ++pte_log_n_;
  }
  if (pte_log_n_ >= prune_at_) prune();
}

void LockTiming::table_alloc(const uint64_t* entries, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    uint16_t& f = filter_[bucket(entries + i)];
    if (!f) continue;
    auto it = pte_log_.find(entries + i);
    if (it == pte_log_.end()) continue;
    pte_log_n_ -= it->second.size();
    pte_log_.erase(it);
    --f;
  }
}

uint64_t LockTiming::lockless_read(const uint64_t* entry, uint64_t value, double cycles) {
  // (The entry's own writes before this read are all earlier than its time.)
  if (filter_[bucket(entry)] && std::find(read_.begin(), read_.end(), entry) == read_.end()) read_.push_back(entry);
  return value_at(entry, value, start_ps_ + ps(cycles + delay_));
}

uint64_t LockTiming::value_at(const uint64_t* entry, uint64_t value, uint64_t t) const {
  if (!filter_[bucket(entry)]) return value;
  auto it = pte_log_.find(entry);
  if (it == pte_log_.end()) return value;
  // The value at time t: the one the last write at or before t left (the old value of the write
  // that followed it in the log), else the current one.
  const std::vector<PteWrite>& w = it->second;
  const size_t i = writes_after(w, t);
  return i < w.size() ? w[i].old : value;
}

// The log is in the order the port made the writes, each one's old value the value the one before
// left: the PTE lock orders them so on the real machine too (a write reads the entry under it, as
// ptep_get_and_clear() and ptep_test_and_clear_young() do). Their stamps need not rise in that
// order: a long entry (memcg reclaim, a millisecond of page_referenced() and try_to_unmap())
// stamps its writes later than those of entries that start after it but end sooner (a munmap()
// and the next fault at the same address), and the lock replay does not reorder two holds that do
// not overlap. A write seen at time t was made after every write before it in the log (it read
// their result), so the entry's value at t is the one the last write stamped at or before t left;
// the writes after that one in the log, all stamped after t, are not there yet. (Taking the
// earliest write stamped after t, wherever it is in the log, brings back a value that writes seen
// at t had replaced: the PTE as it was before reclaim unmapped it, although the page was since
// unmapped, its frame freed and reused; a walk then caches that frame, after the TLB shootdowns of
// the unmap.)
size_t LockTiming::writes_after(const std::vector<PteWrite>& w, uint64_t t) {
  size_t i = w.size();
  while (i > 0 && w[i - 1].t_ps > t) --i;
  return i;
}

// The writes no reader at a time after `h` can see: those up to the last one stamped at or
// before h (value_at() starts after it). Returns how many were forgotten.
size_t LockTiming::forget(std::vector<PteWrite>& w, uint64_t h) {
  size_t last = w.size();
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i].t_ps <= h) last = i;
  if (last == w.size()) return 0;
  w.erase(w.begin(), w.begin() + ptrdiff_t(last + 1));
  return last + 1;
}

void LockTiming::prune() {
  const uint64_t h = horizon();
  for (auto it = pte_log_.begin(); it != pte_log_.end();) {
    std::vector<PteWrite>& w = it->second;
    pte_log_n_ -= forget(w, h);
    if (w.empty()) {
      --filter_[bucket(it->first)];
      it = pte_log_.erase(it);
    }
    else ++it;
  }
  prune_at_ = std::max<size_t>(1u << 16, 2 * pte_log_n_);
}

}  // namespace mmusim
