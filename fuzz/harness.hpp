// SPDX-License-Identifier: GPL-2.0-only
// What each fuzzer does with one input, shared with the regression tests
// (tests/base/test_fuzz_regressions.cpp replays saved inputs through the same functions).
// Each returns "" or a description of a finding (a failed round trip). A UserError is the
// expected answer to bad input and is caught here; any other exception propagates: for the
// fuzzer it is a crash (a finding), for the test a failure.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/params.hpp"

namespace mmusim::fuzz {

// A fresh Config of `schema` (defaults applied once, then copied: much faster per input).
inline Config fresh_config(const Schema& schema) {
  static const Schema* cached_for = nullptr;
  static std::unique_ptr<Config> base;
  if (cached_for != &schema) {
    base = std::make_unique<Config>(schema);
    cached_for = &schema;
  }
  return *base;
}

// The input split at "\n#@@\n" into a.cfg, b.cfg, c.cfg in `dir`; a.cfg loaded (it may include
// the others, or itself); then the platform-key check; then every value must read back as itself.
inline std::string config_file_input(const Schema& schema, const std::string& dir, const std::string& in) {
  const std::string sep = "\n#@@\n";
  size_t start = 0;
  for (const char* name : {"a.cfg", "b.cfg", "c.cfg"}) {
    std::string part;
    if (start <= in.size()) {
      size_t end = in.find(sep, start);
      part = in.substr(start, end == std::string::npos ? std::string::npos : end - start);
      start = end == std::string::npos ? in.size() + 1 : end + sep.size();
    }
    std::ofstream(dir + "/" + name, std::ios::binary | std::ios::trunc) << part;
  }
  Config cfg = fresh_config(schema);
  try {
    cfg.load_file(dir + "/a.cfg");
    std::vector<std::string> skipped;
    cfg.check_variant_keys(&skipped);
    for (auto& [spec, st] : cfg.effective()) {
      Value v = parse_value(*spec, st->text, "reparse");
      if (canonical_text(*spec, v) != st->text)
        return spec->key + ": '" + st->text + "' reads back as '" + canonical_text(*spec, v) + "'";
    }
  } catch (const UserError&) {
  }
  return "";
}

// One `--set` assignment per line; what was set reads back as itself; then the platform keys.
inline std::string set_override_input(const Schema& schema, const std::string& in) {
  Config cfg = fresh_config(schema);
  std::istringstream lines(in);
  std::string line;
  unsigned ok = 0;
  while (std::getline(lines, line)) {
    try {
      cfg.set_override(line);
      ++ok;
      std::string k = line.substr(0, line.find('='));
      k.erase(0, k.find_first_not_of(" \t\r\n\v\f"));
      k.erase(k.find_last_not_of(" \t\r\n\v\f") + 1);
      const Setting& st = cfg.setting(k);
      const ParamSpec* spec = schema.find(k);
      if (canonical_text(*spec, parse_value(*spec, st.text, "reparse")) != st.text)
        return k + ": '" + st.text + "' does not read back";
    } catch (const UserError&) {
    }
  }
  try {
    if (ok) cfg.check_variant_keys();
  } catch (const UserError&) {
  }
  return "";
}

// Parameter specs of every type, for the value parsers.
inline std::vector<ParamSpec> value_specs() {
  std::vector<ParamSpec> v;
  auto add = [&](const char* key, ParamType t, double lo, double hi, uint64_t align = 0) {
    ParamSpec s;
    s.key = key;
    s.type = t;
    s.min = lo;
    s.max = hi;
    s.align = align;
    v.push_back(s);
  };
  const double inf = INFINITY;
  add("t.int", ParamType::Int, -inf, inf);
  add("t.int_range", ParamType::Int, 0, double(int64_t(1) << 62));
  add("t.float", ParamType::Float, 0.1, 10.0);
  add("t.float_any", ParamType::Float, -inf, inf);
  add("t.bool", ParamType::Bool, -inf, inf);
  add("t.size", ParamType::Size, 0, double(uint64_t(1) << 50));
  add("t.size_aligned", ParamType::Size, 2 << 20, 64.0 * (1 << 30), 2 << 20);
  add("t.duration", ParamType::Duration, -inf, inf);
  add("t.string", ParamType::String, -inf, inf);
  ParamSpec e;
  e.key = "t.enum";
  e.type = ParamType::Enum;
  e.choices = {"off", "block16", "pagetable", "pagetable+flush"};
  v.push_back(e);
  return v;
}

// The size, duration, integer, float, boolean and enum parsers and their round trips.
inline std::string values_input(const std::string& text) {
  static const std::vector<ParamSpec> all = value_specs();
  if (auto z = parse_size(text)) {
    auto back = parse_size(format_size(*z));
    if (!back || *back != *z) return "size '" + text + "' formats as '" + format_size(*z) + "', which does not read back";
  }
  for (const auto& spec : all) {
    try {
      Value v = parse_value(spec, text, "fuzz");
      const std::string canon = canonical_text(spec, v);
      Value w = parse_value(spec, canon, "canonical");
      bool same = canonical_text(spec, w) == canon;
      switch (spec.type) {
        case ParamType::Int: same = same && v.i == w.i; break;
        case ParamType::Size: same = same && v.u == w.u; break;
        case ParamType::Float: same = same && v.f == w.f; break;
        case ParamType::Duration: same = same && v.d == w.d; break;
        default: break;
      }
      if (!same) return spec.key + ": '" + text + "' -> '" + canon + "' does not read back the same";
    } catch (const UserError&) {
    }
  }
  (void)edit_distance(text.substr(0, 64), "workload.size");
  return "";
}

}  // namespace mmusim::fuzz
