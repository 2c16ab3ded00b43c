// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/common/lock_timing.hpp"

#include <algorithm>

namespace mmusim {

LockTiming::LockTiming(Stats& stats, double ghz) : ghz_(ghz) {
  for (size_t i = 0; i < ctr_.size(); ++i) {
    std::string n = kmm::lock_class_name(kmm::LockClass(i));
    ctr_[i].acquisitions = &stats.counter("kernel.lock." + n + ".acquisitions", n + " acquisitions (multi-core platforms)");
    ctr_[i].contended = &stats.counter("kernel.lock." + n + ".contended", n + " acquisitions that had to wait for another CPU");
    ctr_[i].wait_ns = &stats.counter("kernel.lock." + n + ".wait_ns", "time spent waiting for " + n, "ns");
  }
}

double LockTiming::end() {
  double delay = 0;  // cycles this entry has waited so far
  for (const Ev& e : evs_) {
    const uint64_t t = start_ps_ + ps(e.cycles + delay);
    State& st = state_[e.lock];
    ClassCounters& c = ctr_[size_t(e.cls)];
    if (e.acquire) {
      c.acquisitions->inc();
      // A writer waits for every holder; a reader for a writer that arrived before it (a waiting
      // writer blocks new readers) until that writer has released.
      uint64_t avail = e.write ? std::max(st.write_free, st.readers_free)
                               : (st.writer_arrival <= t ? st.write_free : 0);
      if (avail > t) {
        c.contended->inc();
        c.wait_ns->inc((avail - t) / 1000);
        delay += double(avail - t) * ghz_ / 1000.0;
      }
      if (e.write) st.writer_arrival = t;
    } else {
      if (e.write) st.write_free = t;
      else st.readers_free = std::max(st.readers_free, t);
    }
  }
  evs_.clear();
  return delay;
}

}  // namespace mmusim
