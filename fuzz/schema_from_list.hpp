// SPDX-License-Identifier: GPL-2.0-only
// The fuzzers' schema: the real one, read back from `mmusim list --format ini` (the file named by
// MMUSIM_FUZZ_SCHEMA; .ci/sanitize writes it with the build's mmusim), so that the harnesses need
// neither SystemC nor the models: every key with its type, range, alignment, choices and
// per-platform defaults. Without the file, a small built-in schema of every type.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/params.hpp"

namespace mmusim::fuzz {

inline std::string trim_ws(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "an integer in [8, 4096]", "a size in [2M, 64G] (...), a multiple of 2M", "a number >= 0".
inline void parse_range(ParamSpec& s, const std::string& allowed) {
  auto num = [&](const std::string& t) -> double {
    if (s.type == ParamType::Size) {
      auto v = parse_size(t);
      return v ? double(*v) : 0;
    }
    return std::strtod(t.c_str(), nullptr);
  };
  auto lb = allowed.find(" in [");
  if (lb != std::string::npos) {
    auto comma = allowed.find(',', lb), rb = allowed.find(']', lb);
    if (comma != std::string::npos && rb != std::string::npos) {
      s.min = num(trim_ws(allowed.substr(lb + 5, comma - lb - 5)));
      s.max = num(trim_ws(allowed.substr(comma + 1, rb - comma - 1)));
    }
  } else if (auto ge = allowed.find(">= "); ge != std::string::npos) {
    s.min = num(trim_ws(allowed.substr(ge + 3)));
  } else if (auto le = allowed.find("<= "); le != std::string::npos) {
    s.max = num(trim_ws(allowed.substr(le + 3)));
  }
  if (auto m = allowed.find("a multiple of "); m != std::string::npos) {
    auto v = parse_size(trim_ws(allowed.substr(m + 14)));
    if (v) s.align = *v;
  }
}

inline bool schema_from_ini(Schema& schema, std::istream& in) {
  std::string line, section;
  ParamSpec cur;
  bool have_type = false;
  std::vector<std::pair<std::string, std::string>> variant_defaults;
  size_t keys = 0;
  static const std::pair<const char*, ParamType> kTypes[] = {
      {"int", ParamType::Int},   {"float", ParamType::Float},       {"bool", ParamType::Bool},
      {"size", ParamType::Size}, {"enum", ParamType::Enum},         {"duration", ParamType::Duration},
      {"string", ParamType::String}};
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    if (line.rfind("#   default on ", 0) == 0) {
      auto c = line.find(": ", 15);
      if (c != std::string::npos) variant_defaults.emplace_back(line.substr(15, c - 15), trim_ws(line.substr(c + 2)));
      continue;
    }
    if (line[0] == '#') {
      auto c = line.find(": ");
      std::string word = c == std::string::npos ? "" : line.substr(2, c - 2);
      for (auto& [name, t] : kTypes)
        if (word == name) {
          cur = ParamSpec{};
          cur.type = t;
          have_type = true;
          variant_defaults.clear();
          const std::string allowed = line.substr(c + 2);
          if (t == ParamType::Enum) {
            std::stringstream ch(allowed.substr(allowed.find("one of: ") + 8));
            std::string x;
            while (std::getline(ch, x, ',')) cur.choices.push_back(trim_ws(x));
          } else {
            parse_range(cur, allowed);
          }
        }
      continue;
    }
    auto eq = line.find(" = ");
    if (eq == std::string::npos || !have_type) continue;
    cur.key = section + "." + line.substr(0, eq);
    cur.default_text = trim_ws(line.substr(eq + 3));
    cur.desc = "from mmusim list";
    try {
      if (variant_defaults.empty()) {
        schema.add(cur);
      } else {
        for (auto& [variant, def] : variant_defaults) {
          ParamSpec v = cur;
          v.default_text = def;
          schema.add_variant(v, variant);
        }
      }
      ++keys;
    } catch (const std::exception&) {
      // a key the list shows in a way this reader does not understand: leave it out
    }
    have_type = false;
  }
  if (schema.find("platform.name")) schema.set_variant_key("platform.name");
  return keys > 0;
}

// A small schema of every type, with two platform variants.
inline void builtin_schema(Schema& s) {
  Params p = Params::declaring(s);
  int64_t i = 0;
  double f = 0;
  bool b = false;
  uint64_t z = 0;
  Duration d;
  std::string str;
  enum class E { a, b, c } e = E::a;
  p.enumeration("platform.name", str, std::string("functional"),
                {{"functional", std::string("functional")}, {"i7-12700kf", std::string("i7-12700kf")},
                 {"neoverse-n1", std::string("neoverse-n1")}},
                "platform");
  p.integer("platform.cores", i, 1, 1, 64, "cores");
  p.real("platform.clock_ghz", f, 4.9, 0.1, 10.0, "clock");
  p.boolean("kernel.check_invariants", b, false, "invariants");
  p.size("workload.size", z, "256M", 2ull << 20, 64ull << 30, "region", 2ull << 20);
  p.size("memory.size", z, "4G", 64ull << 20, 1ull << 40, "memory", 1ull << 21);
  p.enumeration("kernel.wp_reuse", e, E::a, {{"off", E::a}, {"pagetable", E::b}, {"pagetable+flush", E::c}}, "wp");
  p.duration("cost.fault_core", d, "715", "cost");
  p.string("tlb.stlb.page_sizes", str, "4K", "sizes");
  p.integer("sim.seed", i, 1, 0, int64_t(1) << 62, "seed");
  Params v1 = Params::declaring(s, "i7-12700kf");
  Params v2 = Params::declaring(s, "neoverse-n1");
  v1.integer("core.rob_entries", i, 512, 8, 4096, "rob");
  v2.integer("core.rob_entries", i, 128, 8, 4096, "rob");
  v2.boolean("core.hafdbs", b, true, "hafdbs");
  s.set_variant_key("platform.name");
}

inline const Schema& fuzz_schema() {
  static Schema s;
  static bool init = false;
  if (!init) {
    init = true;
    const char* path = std::getenv("MMUSIM_FUZZ_SCHEMA");
    std::ifstream in(path ? path : "");
    if (!path || !in || !schema_from_ini(s, in)) {
      s = Schema{};
      builtin_schema(s);
    }
  }
  return s;
}

}  // namespace mmusim::fuzz
