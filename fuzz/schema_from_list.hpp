// SPDX-License-Identifier: GPL-2.0-only
// The fuzzers' schema: the real one, read from `mmusim list --format json` (the file named by
// MMUSIM_FUZZ_SCHEMA; .ci/sanitize writes it with the build's mmusim) by base/schema_json.cpp, so
// that the harnesses need neither SystemC nor the models: every key with its type, range,
// alignment, choices and per-platform defaults. Without the variable, a small built-in schema of
// every type; a file that cannot be read as a schema stops the fuzzer (it would otherwise fuzz
// the wrong schema without saying so).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "base/params.hpp"
#include "base/schema_json.hpp"

namespace mmusim::fuzz {

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
    if (!path) {
      builtin_schema(s);
      return s;
    }
    std::ifstream in(path);
    try {
      if (!in) throw UserError(std::string("cannot open ") + path);
      read_schema_json(in, path, s);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "MMUSIM_FUZZ_SCHEMA: %s\n", e.what());
      std::exit(1);
    }
  }
  return s;
}

}  // namespace mmusim::fuzz
