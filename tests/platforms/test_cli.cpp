// SPDX-License-Identifier: GPL-2.0-only
// The `mmusim` command as a user meets it: help, list, describe, run, the exit codes and messages
// of every class of error, the stats JSON schema, and determinism of stats and traces.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "platforms/run_mmusim.hpp"

namespace {

using namespace mmusim_test;
Result mmusim(const std::string& args) { return run_mmusim(args); }

// A small, fast run on the functional platform.
const char* kSmall =
    "[platform]\nname = functional\n[workload]\nsize = 4M\nfolio = 64K\npattern = seq-byte\n"
    "[kernel]\nwp_reuse = pagetable\n[output]\nhost_stats = false\n";

}  // namespace

TEST_CASE("mmusim --help, --version and no arguments", "[cli]") {
  Result h = mmusim("--help");
  CHECK(h.status == 0);
  CHECK(h.out.find("mmusim run CONFIG") != std::string::npos);
  CHECK(h.out.find("mmusim describe") != std::string::npos);
  CHECK(h.out.find("mmusim list [--format text|ini|json]") != std::string::npos);
  Result rh = mmusim("run --help");
  CHECK(rh.status == 0);
  CHECK(rh.out.find("mmusim run CONFIG") != std::string::npos);
  CHECK(rh.out.find("page_walk_done") != std::string::npos);  // the trace events, from kTraceEvents
  Result v = mmusim("--version");
  CHECK(v.status == 0);
  CHECK(v.out.rfind("mmusim ", 0) == 0);
  Result none = mmusim("");
  CHECK(none.status == 2);
  Result bad = mmusim("frobnicate");
  CHECK(bad.status == 2);
  CHECK(bad.out.find("unknown command 'frobnicate'") != std::string::npos);
}

TEST_CASE("mmusim list shows the platforms, variants and every interface key", "[cli]") {
  Result r = mmusim("list");
  REQUIRE(r.status == 0);
  for (const char* k :
       {"i7-12700kf", "neoverse-n1", "functional", "fork-reuse", "platform.name", "platform.cores",
        "workload.name", "workload.size", "workload.folio", "workload.pattern", "workload.stride",
        "workload.threads", "kernel.wp_reuse", "kernel.fork_copy", "kernel.huge_copy_order",
        "kernel.fault_retry", "kernel.arm64_spurious_flush", "kernel.check_invariants",
        "pagetable+flush", "block16", "target-last", "retry-once"})
    CHECK(r.out.find(k) != std::string::npos);
  // Per-platform defaults are shown.
  CHECK(r.out.find("512 (i7-12700kf)") != std::string::npos);
}

TEST_CASE("mmusim list --format json: every key with type, per-platform defaults, range or values", "[cli]") {
  Result r = mmusim("list --format json");
  REQUIRE(r.status == 0);
  nlohmann::ordered_json doc;
  REQUIRE_NOTHROW(doc = nlohmann::ordered_json::parse(r.out));
  CHECK(doc["variant_key"] == "platform.name");
  CHECK(doc["platforms"] == nlohmann::ordered_json({"i7-12700kf", "neoverse-n1", "xeon-e5-2699v3", "functional"}));
  // Every key (tests/platforms/test_schema_json.cpp: read back, it is the whole schema).
  REQUIRE(doc["parameters"].size() > 100);
  std::map<std::string, nlohmann::ordered_json> by_key;
  for (const auto& p : doc["parameters"]) {
    const std::string key = p.at("key");
    INFO(key);
    CHECK(p.at("type").is_string());
    CHECK(p.at("description").is_string());
    CHECK_FALSE(p["description"].get<std::string>().empty());
    CHECK(p.at("allowed").is_string());
    REQUIRE(p.contains("defaults"));
    CHECK_FALSE(p["defaults"].empty());
    CHECK(by_key.count(key) == 0);
    by_key[key] = p;
  }
  // A platform-only key with a default of its own on each platform that has it.
  auto rob = by_key.at("core.rob_entries");
  CHECK(rob["type"] == "int");
  CHECK(rob["defaults"]["i7-12700kf"] == 512);
  CHECK(rob["defaults"]["neoverse-n1"] == 128);
  CHECK_FALSE(rob["defaults"].contains("functional"));
  CHECK_FALSE(rob.contains("default"));
  CHECK(rob["min"] == 8);  // a bounded integer has its range
  CHECK(rob["max"] == 4096);
  // A key every platform has, with a default of its own on one of them.
  auto clock = by_key.at("platform.clock_ghz");
  CHECK(clock["type"] == "float");
  CHECK(clock["unit"] == "GHz");
  CHECK(clock["default"] == 4.9);
  CHECK(clock["defaults"]["neoverse-n1"] == 3.0);
  CHECK(clock["defaults"]["functional"] == 4.9);
  // An enumeration lists its values.
  auto wp = by_key.at("kernel.wp_reuse");
  CHECK(wp["type"] == "enum");
  CHECK(wp["values"] == nlohmann::ordered_json({"off", "block16", "pagetable", "pagetable+flush"}));
  CHECK(wp["default"] == "off");
  CHECK_FALSE(wp.contains("min"));
  // Sizes in bytes, with the alignment.
  auto size = by_key.at("workload.size");
  CHECK(size["type"] == "size");
  CHECK(size["default"] == 256u << 20);
  CHECK(size["min"] == 2u << 20);
  CHECK(size["align"] == 2u << 20);
  CHECK(by_key.at("kernel.check_invariants")["default"].is_boolean());
  CHECK(by_key.at("platform.ipi_handler")["type"] == "duration");
  CHECK(by_key.at("platform.ipi_handler")["default"] == "1500cyc");

  // Another format is a user error that names the allowed ones.
  Result bad = mmusim("list --format xml");
  CHECK(bad.status == 2);
  CHECK(bad.out.find("--format 'xml': allowed: text, ini, json") != std::string::npos);
}

TEST_CASE("mmusim describe: effective values and where they come from", "[cli]") {
  TempDir t;
  std::string base = t.file("base.cfg", "[workload]\nsize = 8M\nfolio = 1M\n");
  std::string exp = t.file("sub/exp.cfg", "include = ../base.cfg\n[workload]\nfolio = 4K\n");
  Result r = mmusim("describe " + exp + " --set workload.pattern=memset");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("size = 8M") != std::string::npos);
  CHECK(r.out.find("base.cfg:2") != std::string::npos);
  CHECK(r.out.find("folio = 4K") != std::string::npos);
  CHECK(r.out.find("exp.cfg:3") != std::string::npos);
  CHECK(r.out.find("pattern = memset") != std::string::npos);
  CHECK(r.out.find("--set workload.pattern") != std::string::npos);
}

TEST_CASE("every class of configuration error exits 2 with file:line, key and what is allowed", "[cli]") {
  TempDir t;
  struct Case {
    const char* name;
    const char* text;
    std::vector<const char*> expect;
  };
  std::vector<Case> cases = {
      {"unknown_key.cfg", "[workload]\nsise = 8M\n", {"unknown_key.cfg:2", "workload.sise", "did you mean 'workload.size'"}},
      {"unknown_section.cfg", "[wrokload]\nsize = 8M\n", {"unknown_section.cfg:1", "[wrokload]", "did you mean [workload]"}},
      {"bad_type.cfg", "[platform]\ncores = many\n", {"bad_type.cfg:2", "platform.cores", "not an integer", "[1, 64]"}},
      {"range.cfg", "[platform]\ncores = 0\n", {"range.cfg:2", "out of range", "[1, 64]"}},
      {"enum.cfg", "[kernel]\nwp_reuse = pagetabel\n", {"enum.cfg:2", "kernel.wp_reuse", "did you mean 'pagetable'", "off, block16, pagetable, pagetable+flush"}},
      {"negsize.cfg", "[workload]\nsize = -4M\n", {"negsize.cfg:2", "workload.size", "negative"}},
      {"misaligned.cfg", "[workload]\nsize = 3M\n", {"misaligned.cfg:2", "not a multiple of 2M"}},
      {"syntax.cfg", "[workload]\nthis is not a setting\n", {"syntax.cfg:2", "expected key = value"}},
      {"missing_inc.cfg", "include = nowhere.cfg\n", {"missing_inc.cfg:1", "nowhere.cfg", "not found"}},
      {"empty.cfg", "", {"empty.cfg", "empty"}},
  };
  for (auto& c : cases) {
    INFO(c.name);
    Result r = mmusim("run " + t.file(c.name, c.text));
    CHECK(r.status == 2);
    for (const char* e : c.expect) {
      INFO(r.out);
      CHECK(r.out.find(e) != std::string::npos);
    }
  }
  // An include cycle.
  t.file("a.cfg", "include = b.cfg\n[workload]\nsize = 8M\n");
  t.file("b.cfg", "include = a.cfg\n");
  Result cyc = mmusim("run " + t.path("a.cfg"));
  CHECK(cyc.status == 2);
  CHECK(cyc.out.find("include cycle") != std::string::npos);
  // A missing file, a bad --set, binary garbage, an impossible combination.
  CHECK(mmusim("run " + t.path("absent.cfg")).status == 2);
  Result set = mmusim("run " + t.file("ok.cfg", kSmall) + " --set workload.size");
  CHECK(set.status == 2);
  CHECK(set.out.find("expected SECTION.KEY=VALUE") != std::string::npos);
  std::string garbage("\x7f" "ELF\x02\x01\x01\x00\x00\x00", 10);
  Result g = mmusim("run " + t.file("garbage.cfg", garbage));
  CHECK(g.status == 2);
  CHECK(g.out.find("not a text config file") != std::string::npos);
  Result combo = mmusim("run " + t.file("combo.cfg", kSmall) + " --set platform.name=i7-12700kf --set platform.isa=arm64");
  CHECK(combo.status == 2);
  CHECK(combo.out.find("impossible") != std::string::npos);
  Result thp = mmusim("run " + t.file("thp.cfg", kSmall) + " --set thp.hugepages_64kB=always");
  CHECK(thp.status == 2);
  CHECK(thp.out.find("workload.thp_setup") != std::string::npos);
}

TEST_CASE("run writes a table and the stats JSON with the interface keys and the config", "[cli]") {
  TempDir t;
  std::string cfg = t.file("small.cfg", kSmall);
  std::string json = t.path("s.json");
  Result r = mmusim("run " + cfg + " --stats " + json);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("faults.total") != std::string::npos);
  const nlohmann::ordered_json s = stats_json(slurp(json));
  for (const char* k :
       {"faults.total", "faults.write", "faults.read", "faults.spurious", "faults.region",
        "kernel.handle_mm_fault", "kernel.do_anonymous_page", "kernel.do_wp_page", "kernel.wp_reuse",
        "kernel.wp_copy", "kernel.wp_reuse_large_ptes", "kernel.contpte_convert", "kernel.contpte_fold",
        "kernel.contpte_unfold", "kernel.tlb_flush_page", "kernel.tlb_flush_range", "kernel.tlb_flush_mm",
        "kernel.tlb_flush_local", "core.uops", "core.cycles", "region.time_ns", "fault.latency_ns.median",
        "fault.latency_ns.p90", "sim.simulated_ns", "total.faults.total"}) {
    INFO(k);
    CHECK(s.contains(k));
    CHECK(s[k].is_number());
  }
  REQUIRE(s.contains("config"));
  CHECK(s["config"]["kernel.wp_reuse"] == "pagetable");
  // 4 MiB of 64K folios, patched: one fault per folio in the measured pass.
  CHECK(s["faults.region"] == 64);
}

TEST_CASE("run --stats - writes the JSON to stdout instead of the table", "[cli]") {
  TempDir t;
  std::string cfg = t.file("small.cfg", kSmall);
  Result r = mmusim("run " + cfg + " --stats -");
  REQUIRE(r.status == 0);
  // Only the JSON: the whole output is one JSON document (no table row before or after it).
  CHECK(r.out.rfind("{", 0) == 0);
  CHECK(stats_json(r.out)["faults.region"] == 64);
  // No file named "-" was written.
  CHECK_FALSE(std::ifstream("-").good());
  Result both = mmusim("run " + cfg + " --stats - --trace -");
  CHECK(both.status == 2);
  CHECK(both.out.find("only one of them can go to stdout") != std::string::npos);
}

TEST_CASE("the same config and seed give byte-identical stats and traces", "[cli][determinism]") {
  TempDir t;
  std::string cfg = t.file("small.cfg", kSmall);
  for (const char* platform : {"functional", "i7-12700kf"}) {
    INFO(platform);
    std::string set = std::string(" --set platform.name=") + platform + " --set workload.pattern=random-byte --seed 7";
    REQUIRE(mmusim("run " + cfg + set + " --stats " + t.path("a.json") + " --trace " + t.path("a.trace") + " --quiet").status == 0);
    REQUIRE(mmusim("run " + cfg + set + " --stats " + t.path("b.json") + " --trace " + t.path("b.trace") + " --quiet").status == 0);
    std::string ta = slurp(t.path("a.trace"));
    CHECK(ta.find("page_fault_user") != std::string::npos);
    CHECK(ta == slurp(t.path("b.trace")));
    CHECK(slurp(t.path("a.json")) == slurp(t.path("b.json")));
    // Another seed changes the random order, and so the trace.
    REQUIRE(mmusim("run " + cfg + " --set platform.name=" + platform +
                   " --set workload.pattern=random-byte --seed 8 --trace " + t.path("c.trace") + " --quiet").status == 0);
    CHECK(ta != slurp(t.path("c.trace")));
  }
}

TEST_CASE("mmusim run --trace-events writes only the named events", "[cli]") {
  TempDir t;
  std::string cfg = t.file("small.cfg", kSmall);
  REQUIRE(mmusim("run " + cfg + " --set platform.name=i7-12700kf --trace " + t.path("all.trace") + " --quiet").status == 0);
  REQUIRE(mmusim("run " + cfg + " --set platform.name=i7-12700kf --trace " + t.path("f.trace") +
                 " --trace-events page_fault_user,mm_fault_done --quiet").status == 0);
  const std::string all = slurp(t.path("all.trace")), f = slurp(t.path("f.trace"));
  CHECK(all.find("tlb_fill") != std::string::npos);
  CHECK(f.find("tlb_fill") == std::string::npos);
  CHECK(f.find("fork:") == std::string::npos);
  // The kept events are the same lines as in the full trace, in the same order.
  std::string kept;
  std::istringstream in(all);
  for (std::string line; std::getline(in, line);)
    if (line[0] == '#' || line.find(": page_fault_user:") != std::string::npos ||
        line.find(": mm_fault_done:") != std::string::npos)
      kept += line + "\n";
  CHECK(f == kept);
  Result bad = mmusim("run " + cfg + " --trace " + t.path("x") + " --trace-events page_fault");
  CHECK(bad.status == 2);
  CHECK(bad.out.find("unknown event 'page_fault'") != std::string::npos);
  Result nofile = mmusim("run " + cfg + " --trace-events fork");
  CHECK(nofile.status == 2);
}

TEST_CASE("page walks are traced as start/done pairs, a slice each in the Perfetto trace", "[cli]") {
  TempDir t;
  std::string cfg = t.file("small.cfg", kSmall);
  REQUIRE(mmusim("run " + cfg + " --set platform.name=i7-12700kf --trace " + t.path("w.trace") +
                 " --trace-events page_walk_start,page_walk_done --quiet").status == 0);
  std::istringstream in(slurp(t.path("w.trace")));
  std::regex start_re(R"(\s([0-9]+)\.([0-9]{9}): page_walk_start: address=(0x[0-9a-f]+) spec=[01] from=(root|pde|pdpte|pml4e)$)");
  std::regex done_re(R"(\s([0-9]+)\.([0-9]{9}): page_walk_done: address=(0x[0-9a-f]+) result=(ok|not_present|access_flag) reads=[0-4]$)");
  size_t pairs = 0, ok = 0, from_psc = 0;
  std::string line, open_addr;
  uint64_t open_ns = 0;
  while (std::getline(in, line)) {
    if (line[0] == '#') continue;
    std::smatch m;
    if (std::regex_search(line, m, start_re)) {
      REQUIRE(open_addr.empty());
      open_addr = m[3];
      open_ns = std::stoull(m[1]) * 1000000000ull + std::stoull(m[2]);
      if (m[4] != "root") ++from_psc;
    } else {
      INFO(line);
      REQUIRE(std::regex_search(line, m, done_re));
      CHECK(m[3] == open_addr);  // each start is followed by its own done
      CHECK(std::stoull(m[1]) * 1000000000ull + std::stoull(m[2]) > open_ns);  // a walk takes time
      if (m[4] == "ok") ++ok;
      open_addr.clear();
      ++pairs;
    }
  }
  CHECK(pairs >= 64);   // at least one walk per folio of the 4 MiB pass
  CHECK(ok > 0);
  CHECK(from_psc > 0);  // most walks start from a paging-structure-cache entry
  REQUIRE(mmusim("run " + cfg + " --set platform.name=i7-12700kf --trace " + t.path("w.json") +
                 " --trace-format perfetto --trace-events page_walk_start,page_walk_done --quiet").status == 0);
  const nlohmann::json js = nlohmann::json::parse(slurp(t.path("w.json")));
  size_t b = 0, e = 0;
  for (const auto& ev : js.at("traceEvents")) {
    if (ev["name"] != "page_walk") continue;
    b += ev["ph"] == "b";
    e += ev["ph"] == "e";
  }
  CHECK(b == pairs);
  CHECK(e == pairs);
}
