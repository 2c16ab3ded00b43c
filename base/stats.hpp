// SPDX-License-Identifier: GPL-2.0-only
// Statistics: named, described counters and distributions owned by the modules that count them.
//
// A module registers its counters once (at construction) and keeps references; counting is a plain
// increment on the hot path. Keys are dotted and flat ("faults.spurious", "tlb.stlb.hits").
//
// The measured region: the workload marks the start and end of its measured pass. A counter's plain
// key reports what happened inside the region; `total.<key>` reports the whole run. Without a
// region, both are the whole run. Printing (text table, JSON) is here, outside the models.
#pragma once

#include <cstdint>
#include <deque>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace mmusim {

class Config;

class Counter {
 public:
  void inc(uint64_t n = 1) { v_ += n; }
  Counter& operator++() {
    ++v_;
    return *this;
  }
  Counter& operator+=(uint64_t n) {
    v_ += n;
    return *this;
  }
  uint64_t value() const { return v_; }

 private:
  uint64_t v_ = 0;
};

// Samples of a latency or size; reports count, mean, min, median, p90, max over the region.
class Distribution {
 public:
  void sample(double x) { samples_.push_back(x); }
  size_t count() const { return samples_.size(); }
  const std::vector<double>& samples() const { return samples_; }

 private:
  std::vector<double> samples_;
};

struct DistributionSummary {
  size_t count = 0;
  double mean = 0, min = 0, median = 0, p90 = 0, max = 0;
};
DistributionSummary summarize(const std::vector<double>& samples);

class Stats {
 public:
  // Registering the same key twice returns the same counter (modules of one kind on different
  // cores that count into one aggregate key share it).
  Counter& counter(const std::string& key, const std::string& desc, const std::string& unit = "");
  Distribution& distribution(const std::string& key, const std::string& desc,
                             const std::string& unit = "");
  // A prefix put before every counter and distribution key registered from now on ("" : none),
  // except the keys of resources every core shares (memory.*, cache.llc.*): the E-cores' modules
  // count under "ecore." (their cycles are another clock's). See StatsScope.
  void set_scope(std::string prefix) { scope_ = std::move(prefix); }
  const std::string& scope() const { return scope_; }
  // A value computed at the end of the run (times, rates). Not region-relative.
  void set_scalar(const std::string& key, double value, const std::string& desc,
                  const std::string& unit = "");

  void region_begin();
  void region_end();
  bool region_seen() const { return region_state_ != RegionState::None; }

  // Region-relative value of a counter (the plain key's value in the output).
  uint64_t region_value(const std::string& key) const;
  uint64_t total_value(const std::string& key) const;
  const Counter* find_counter(const std::string& key) const;
  const Distribution* find_distribution(const std::string& key) const;
  // Samples recorded inside the region.
  std::vector<double> region_samples(const std::string& key) const;

  // Flat JSON: every key to a number, then "config": the effective configuration, and "meta".
  void write_json(std::ostream& os, const Config* config, const std::string& version) const;
  // A readable table, grouped by the first component of the key. By default only what is not
  // zero (the JSON has every key).
  void write_table(std::ostream& os, bool with_totals = false, bool skip_zero = true) const;

  // Key/value rows as the printers see them (region values, totals, distribution summaries,
  // scalars) in a stable order: the order of registration.
  struct Row {
    std::string key;
    double value;
    bool integral;
    std::string desc;
    std::string unit;
  };
  std::vector<Row> rows(bool with_totals) const;

 private:
  struct Entry {
    enum Kind { Count, Dist, Scalar } kind;
    std::string key, desc, unit;
    Counter* counter = nullptr;
    Distribution* dist = nullptr;
    double scalar = 0;
  };
  enum class RegionState { None, Open, Closed };

  std::deque<Counter> counters_;
  std::deque<Distribution> dists_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
  RegionState region_state_ = RegionState::None;
  std::vector<uint64_t> begin_, end_;           // counter values at the region marks
  std::vector<size_t> dist_begin_, dist_end_;   // sample indices at the region marks
  std::string scope_;
  std::string scoped(const std::string& key) const;
  Counter& add_counter(const std::string& key, const std::string& desc, const std::string& unit);
  Distribution& add_distribution(const std::string& key, const std::string& desc, const std::string& unit);
};

// Stats::set_scope() for the lifetime of this object (the previous scope restored after).
class StatsScope {
 public:
  StatsScope(Stats& s, std::string prefix) : s_(s), old_(s.scope()) { s_.set_scope(std::move(prefix)); }
  ~StatsScope() { s_.set_scope(old_); }
  StatsScope(const StatsScope&) = delete;
  StatsScope& operator=(const StatsScope&) = delete;

 private:
  Stats& s_;
  std::string old_;
};

// A prefix for a module's keys: StatGroup g(stats, "tlb.stlb"); g.counter("hits", ...).
class StatGroup {
 public:
  StatGroup(Stats& s, std::string prefix) : s_(&s), prefix_(std::move(prefix)) {}
  Counter& counter(const std::string& name, const std::string& desc, const std::string& unit = "") {
    return s_->counter(key(name), desc, unit);
  }
  Distribution& distribution(const std::string& name, const std::string& desc,
                             const std::string& unit = "") {
    return s_->distribution(key(name), desc, unit);
  }
  std::string key(const std::string& name) const {
    return prefix_.empty() ? name : prefix_ + "." + name;
  }
  Stats& stats() const { return *s_; }

 private:
  Stats* s_;
  std::string prefix_;
};

}  // namespace mmusim
