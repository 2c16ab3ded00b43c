// SPDX-License-Identifier: GPL-2.0-only
// The idle-state choice of cpuidle's menu governor (drivers/cpuidle/governors/menu.c), reduced to
// what the model has: two states (a shallow one, C1E, and the deep one whose exit
// platform.idle_exit_latency prices) and no timers. menu_select() predicts the idle period as the
// time to the next timer event, or less when the CPU's recent idle periods show a typical
// interval (get_typical_interval()); it takes the deepest state whose target residency fits the
// prediction. With no timer pending (the model has none: the tick is stopped in idle, NOHZ), the
// prediction is the typical interval, or "long" when there is none. menu_update() records each
// idle period's measured length (menu_update(): the residency, in us) in a ring of 8.
// docs/research-idle.md §2.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

namespace mmusim::hw {

class MenuGovernor {
 public:
  static constexpr unsigned kIntervals = 8;  // INTERVALS
  // Before the run the CPU idled long, as a quiet machine's CPUs do between timer events (no
  // recent short sleeps; long periods of different lengths, so that get_typical_interval() drops
  // them as outliers one at a time): the idle periods are predicted long until 6 of the last 8
  // were short.
  MenuGovernor() {
    for (unsigned i = 0; i < kIntervals; ++i) intervals_[i] = kLongUs - i * 1000;
  }

  // The prediction of the next idle period in us (UINT32_MAX: long, no typical interval).
  uint32_t predicted_us() const { return typical_interval(); }
  // The deep state is taken if its target residency fits the prediction.
  bool deep(uint32_t deep_residency_us) const { return predicted_us() >= deep_residency_us; }
  // menu_update(): an idle period of `us` ended.
  void record(uint64_t us) {
    intervals_[idx_] = us > kLongUs ? kLongUs : uint32_t(us);
    idx_ = (idx_ + 1) % kIntervals;
  }

 private:
  static constexpr uint32_t kLongUs = 1'000'000;  // 1 s
  // get_typical_interval() (menu.c): the average of the recent intervals if their spread is small
  // (variance <= 400 us^2, or avg^2 > 36 variance with at least 3/4 of them counted); else the
  // largest are dropped as outliers, one value at a time, down to 3/4 of the samples.
  uint32_t typical_interval() const {
    uint64_t thresh = std::numeric_limits<uint32_t>::max();
    for (;;) {
      uint64_t sum = 0, max = 0;
      unsigned divisor = 0;
      for (uint32_t v : intervals_)
        if (v <= thresh) {
          sum += v;
          ++divisor;
          if (v > max) max = v;
        }
      if (!max) return std::numeric_limits<uint32_t>::max();
      const uint64_t avg = sum / divisor;
      uint64_t variance = 0;
      for (uint32_t v : intervals_)
        if (v <= thresh) {
          const int64_t d = int64_t(v) - int64_t(avg);
          variance += uint64_t(d * d);
        }
      variance /= divisor;
      if ((avg * avg > variance * 36 && divisor * 4 >= kIntervals * 3) || variance <= 400) return uint32_t(avg);
      if (divisor * 4 <= kIntervals * 3) return std::numeric_limits<uint32_t>::max();
      thresh = max - 1;
    }
  }
  std::array<uint32_t, kIntervals> intervals_{};
  unsigned idx_ = 0;
};

}  // namespace mmusim::hw
