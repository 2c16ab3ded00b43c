// SPDX-License-Identifier: GPL-2.0-only
#include "base/stats.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/params.hpp"

namespace mmusim {

DistributionSummary summarize(const std::vector<double>& in) {
  DistributionSummary s;
  s.count = in.size();
  if (in.empty()) return s;
  std::vector<double> v(in);
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  s.min = v.front();
  s.max = v.back();
  // Nearest-rank percentiles: reproducible and a value that occurred.
  auto rank = [&](double p) {
    size_t r = size_t(std::ceil(p * double(v.size())));
    return v[std::min(v.size() - 1, r == 0 ? 0 : r - 1)];
  };
  s.median = rank(0.5);
  s.p90 = rank(0.9);
  return s;
}

namespace {
// Keys are part of the interface (scripts parse them): lowercase dotted names, no collision with
// the names the printers derive (total.<key>, <distribution>.<summary>).
void check_key(const std::map<std::string, size_t, std::less<>>& index, const std::string& key) {
  bool ok = !key.empty() && key.front() != '.' && key.back() != '.';
  for (char c : key) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.');
  if (!ok) panic("stat key '{}' is not of the form [a-z0-9_.]+", key);
  if (key.rfind("total.", 0) == 0) panic("stat key '{}' would collide with the whole-run keys", key);
  for (const char* sfx : {".count", ".mean", ".min", ".median", ".p90", ".max"}) {
    std::string k(sfx);
    if (key.size() > k.size() && key.compare(key.size() - k.size(), k.size(), k) == 0 &&
        index.count(key.substr(0, key.size() - k.size())))
      panic("stat key '{}' collides with a distribution's summary", key);
  }
}
}  // namespace

std::string Stats::scoped(const std::string& key) const {
  if (scope_.empty() || key.rfind("memory.", 0) == 0 || key.rfind("cache.llc.", 0) == 0) return key;
  return scope_ + key;
}

Counter& Stats::counter(const std::string& key, const std::string& desc, const std::string& unit) {
  return scope_.empty() ? add_counter(key, desc, unit) : add_counter(scoped(key), desc, unit);
}

Distribution& Stats::distribution(const std::string& key, const std::string& desc, const std::string& unit) {
  return scope_.empty() ? add_distribution(key, desc, unit) : add_distribution(scoped(key), desc, unit);
}

Counter& Stats::add_counter(const std::string& key, const std::string& desc, const std::string& unit) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    Entry& e = entries_[it->second];
    if (e.kind != Entry::Count) panic("stat '{}' registered as a counter and as something else", key);
    return *e.counter;
  }
  if (region_state_ != RegionState::None)
    panic("stat '{}' registered after the measured region began", key);
  check_key(index_, key);
  counters_.emplace_back();
  Entry e{Entry::Count, key, desc, unit, &counters_.back(), nullptr, 0};
  index_.emplace(key, entries_.size());
  entries_.push_back(std::move(e));
  return counters_.back();
}

Distribution& Stats::add_distribution(const std::string& key, const std::string& desc,
                                      const std::string& unit) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    Entry& e = entries_[it->second];
    if (e.kind != Entry::Dist) panic("stat '{}' registered as a distribution and as something else", key);
    return *e.dist;
  }
  if (region_state_ != RegionState::None)
    panic("stat '{}' registered after the measured region began", key);
  check_key(index_, key);
  dists_.emplace_back();
  Entry e{Entry::Dist, key, desc, unit, nullptr, &dists_.back(), 0};
  index_.emplace(key, entries_.size());
  entries_.push_back(std::move(e));
  return dists_.back();
}

void Stats::set_scalar(const std::string& key, double value, const std::string& desc,
                       const std::string& unit) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    Entry& e = entries_[it->second];
    if (e.kind != Entry::Scalar) panic("stat '{}' set as a scalar and registered as something else", key);
    e.scalar = value;
    return;
  }
  check_key(index_, key);
  Entry e{Entry::Scalar, key, desc, unit, nullptr, nullptr, value};
  index_.emplace(key, entries_.size());
  entries_.push_back(std::move(e));
}

void Stats::region_begin() {
  if (region_state_ != RegionState::None) panic("the measured region began twice");
  region_state_ = RegionState::Open;
  for (auto& e : entries_) {
    if (e.kind == Entry::Count) begin_.push_back(e.counter->value());
    if (e.kind == Entry::Dist) dist_begin_.push_back(e.dist->count());
  }
}

void Stats::region_end() {
  if (region_state_ != RegionState::Open) panic("the measured region ended without having begun");
  region_state_ = RegionState::Closed;
  for (auto& e : entries_) {
    if (e.kind == Entry::Count) end_.push_back(e.counter->value());
    if (e.kind == Entry::Dist) dist_end_.push_back(e.dist->count());
  }
}

const Counter* Stats::find_counter(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end() || entries_[it->second].kind != Entry::Count) return nullptr;
  return entries_[it->second].counter;
}

const Distribution* Stats::find_distribution(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end() || entries_[it->second].kind != Entry::Dist) return nullptr;
  return entries_[it->second].dist;
}

uint64_t Stats::total_value(const std::string& key) const {
  const Counter* c = find_counter(key);
  if (!c) panic("no counter '{}'", key);
  return c->value();
}

uint64_t Stats::region_value(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end() || entries_[it->second].kind != Entry::Count) panic("no counter '{}'", key);
  if (region_state_ == RegionState::None) return entries_[it->second].counter->value();
  // Index among counters in registration order.
  size_t ci = 0;
  for (size_t i = 0; i < it->second; ++i) ci += entries_[i].kind == Entry::Count;
  uint64_t end = region_state_ == RegionState::Closed ? end_[ci] : entries_[it->second].counter->value();
  // Counters registered after the region began cannot exist (checked at registration).
  return end - begin_[ci];
}

std::vector<double> Stats::region_samples(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end() || entries_[it->second].kind != Entry::Dist) panic("no distribution '{}'", key);
  const auto& s = entries_[it->second].dist->samples();
  if (region_state_ == RegionState::None) return s;
  size_t di = 0;
  for (size_t i = 0; i < it->second; ++i) di += entries_[i].kind == Entry::Dist;
  size_t b = dist_begin_[di];
  size_t e = region_state_ == RegionState::Closed ? dist_end_[di] : s.size();
  return std::vector<double>(s.begin() + long(b), s.begin() + long(e));
}

std::vector<Stats::Row> Stats::rows(bool with_totals) const {
  std::vector<Row> out;
  size_t ci = 0, di = 0;
  const bool reg = region_state_ != RegionState::None;
  for (auto& e : entries_) {
    switch (e.kind) {
      case Entry::Count: {
        uint64_t total = e.counter->value();
        uint64_t v = total;
        if (reg) {
          uint64_t end = region_state_ == RegionState::Closed ? end_[ci] : total;
          v = end - begin_[ci];
        }
        ++ci;
        out.push_back({e.key, double(v), true, e.desc, e.unit});
        break;
      }
      case Entry::Dist: {
        const auto& s = e.dist->samples();
        size_t b = reg ? dist_begin_[di] : 0;
        size_t en = reg && region_state_ == RegionState::Closed ? dist_end_[di] : s.size();
        ++di;
        DistributionSummary sm =
            summarize(std::vector<double>(s.begin() + long(b), s.begin() + long(en)));
        out.push_back({e.key + ".count", double(sm.count), true, e.desc + " (samples)", ""});
        out.push_back({e.key + ".mean", sm.mean, false, e.desc + " (mean)", e.unit});
        out.push_back({e.key + ".min", sm.min, false, e.desc + " (min)", e.unit});
        out.push_back({e.key + ".median", sm.median, false, e.desc + " (median)", e.unit});
        out.push_back({e.key + ".p90", sm.p90, false, e.desc + " (90th percentile)", e.unit});
        out.push_back({e.key + ".max", sm.max, false, e.desc + " (max)", e.unit});
        break;
      }
      case Entry::Scalar: {
        bool integral = e.scalar == std::floor(e.scalar) && std::fabs(e.scalar) < 1e15;
        out.push_back({e.key, e.scalar, integral, e.desc, e.unit});
        break;
      }
    }
  }
  if (with_totals) {
    for (auto& e : entries_) {
      if (e.kind == Entry::Count)
        out.push_back({"total." + e.key, double(e.counter->value()), true, e.desc + " (whole run)", e.unit});
      if (e.kind == Entry::Dist)
        out.push_back({"total." + e.key + ".count", double(e.dist->count()), true,
                       e.desc + " (samples, whole run)", ""});
    }
  }
  return out;
}

namespace {
// A statistic's number: counts as integers; a double that happens to be whole (a mean of 128.0, a
// clock of 3 GHz) also as an integer, "128" (as the output always had it: a key's text does not
// depend on whether a run gives it a whole value); other doubles in the shortest form that reads
// back as the same double; what is not finite as null.
nlohmann::ordered_json json_number(double v, bool integral) {
  if (!std::isfinite(v)) return nullptr;
  if ((integral || (v == std::floor(v) && std::fabs(v) < 1e16)) && std::fabs(v) < 9.2e18)
    return static_cast<int64_t>(v);
  return v;
}
}  // namespace

void Stats::write_json(std::ostream& os, const Config* config, const std::string& version) const {
  // Key order is part of the format: the statistics in registration order, then meta, then config.
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  for (const Row& r : rows(true)) doc[r.key] = json_number(r.value, r.integral);
  nlohmann::ordered_json meta = {{"mmusim_version", version},
                                 {"region", region_state_ == RegionState::None ? "whole-run" : "measured-pass"}};
  if (config) meta["config_files"] = config->files();
  nlohmann::ordered_json conf = nlohmann::ordered_json::object();
  if (config) {
    for (auto& [spec, st] : config->effective()) {
      switch (spec->type) {
        case ParamType::Int: conf[spec->key] = st->value.i; break;
        case ParamType::Float: conf[spec->key] = json_number(st->value.f, false); break;
        case ParamType::Bool: conf[spec->key] = st->value.i != 0; break;
        case ParamType::Size: conf[spec->key] = st->value.u; break;
        default: conf[spec->key] = st->text; break;  // enums, durations, strings: as written
      }
    }
  }
  doc["meta"] = std::move(meta);
  doc["config"] = std::move(conf);
  // Two-space indentation; bytes that are not UTF-8 (a label from a config file) become U+FFFD
  // rather than an exception at the end of a run.
  os << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

void Stats::write_table(std::ostream& os, bool with_totals, bool skip_zero) const {
  auto rs = rows(with_totals);
  if (skip_zero) {
    std::vector<Row> kept;
    for (auto& r : rs)
      if (r.value != 0) kept.push_back(r);
    rs.swap(kept);
  }
  size_t kw = 10, vw = 8;
  std::vector<std::string> vals;
  for (auto& r : rs) {
    std::string v;
    if (r.integral) {
      // Thousands separators for readability.
      std::string d = fmt::format("{}", static_cast<int64_t>(r.value));
      std::string g;
      int n = 0;
      for (auto it = d.rbegin(); it != d.rend(); ++it) {
        if (n && n % 3 == 0 && *it != '-') g.insert(g.begin(), ',');
        g.insert(g.begin(), *it);
        ++n;
      }
      v = g;
    } else {
      v = fmt::format("{:.3f}", r.value);
    }
    kw = std::max(kw, r.key.size());
    vw = std::max(vw, v.size());
    vals.push_back(v);
  }
  std::string group;
  for (size_t i = 0; i < rs.size(); ++i) {
    const Row& r = rs[i];
    std::string g = r.key.substr(0, r.key.find('.'));
    if (g != group) {
      if (!group.empty()) os << "\n";
      group = g;
    }
    os << fmt::format("{:<{}}  {:>{}}  {}{}\n", r.key, kw, vals[i], vw,
                      r.unit.empty() ? "" : "[" + r.unit + "] ", r.desc);
  }
}

}  // namespace mmusim
