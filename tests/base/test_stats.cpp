// SPDX-License-Identifier: GPL-2.0-only
// Tests of the statistics: counters, distributions, the measured region, the JSON and table
// printers and the key schema.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"

using namespace mmusim;
using Catch::Contains;

namespace {

// The JSON the writer made, read by nlohmann-json, in the document's key order; a key twice in one
// object (which the library would accept, keeping one) is an error here.
using Json = nlohmann::ordered_json;
Json parse_json(const std::string& s) {
  std::vector<std::set<std::string>> keys;  // per open object
  return Json::parse(s, [&](int, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::object_start) keys.emplace_back();
    if (ev == Json::parse_event_t::object_end) keys.pop_back();
    if (ev == Json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      throw std::runtime_error("JSON: key '" + parsed.get<std::string>() + "' twice in one object");
    return true;
  });
}

const std::regex kKeyRe("[a-z0-9_.]+");

// A stats fixture: counters before, inside and after the region, and a distribution.
struct Fixture {
  Stats s;
  Counter& faults = s.counter("faults.total", "faults", "faults");
  Counter& hits = s.counter("tlb.stlb.hits", "STLB hits", "lookups");
  Distribution& lat = s.distribution("fault.latency_ns", "fault latency", "ns");

  void run(bool with_region) {
    faults += 3;  // before the region
    hits.inc(100);
    lat.sample(1000);
    if (with_region) s.region_begin();
    for (int i = 1; i <= 10; ++i) {
      ++faults;
      lat.sample(double(i));
    }
    hits += 7;
    if (with_region) s.region_end();
    faults.inc(5);  // after the region
    lat.sample(2000);
  }
};

std::map<std::string, double> rows_by_key(const Stats& s, bool totals) {
  std::map<std::string, double> m;
  for (auto& r : s.rows(totals)) {
    CHECK(m.count(r.key) == 0);
    m[r.key] = r.value;
  }
  return m;
}

enum class Mode { A, B };

Schema make_schema() {
  Schema sc;
  Params p = Params::declaring(sc);
  int i = 0;
  double f = 0;
  bool b = false;
  uint64_t z = 0;
  Duration d;
  std::string str;
  Mode m = Mode::A;
  p.integer("core.rob_entries", i, 512, 1, 4096, "rob");
  p.real("core.freq_ghz", f, 3.6, 0.1, 10, "freq", "GHz");
  p.boolean("core.smt", b, true, "smt");
  p.size("workload.size", z, "256M", 0, uint64_t(1) << 40, "size");
  p.duration("kernel.fault_latency", d, "100ns", "latency");
  p.string("workload.label", str, "plain", "label");
  p.enumeration("kernel.mode", m, Mode::B, {{"a", Mode::A}, {"b", Mode::B}}, "mode");
  return sc;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("stats: the test's JSON reader rejects a key twice in one object", "[stats]") {
  CHECK(parse_json(R"({"a": {"b": 1}, "b": [{"b": 2}]})")["b"][0]["b"] == 2);
  CHECK_THROWS_AS(parse_json(R"({"a": 1, "a": 2})"), std::runtime_error);
  CHECK_THROWS_AS(parse_json(R"({"a": {"b": 1, "b": 2}})"), std::runtime_error);
  CHECK_THROWS_AS(parse_json(R"({"a": 1,})"), Json::parse_error);
}

TEST_CASE("stats: counters count, registering a key twice returns the same counter", "[stats]") {
  Stats s;
  Counter& a = s.counter("kernel.wp_reuse", "reuses");
  ++a;
  a += 4;
  a.inc();
  a.inc(10);
  CHECK(a.value() == 16);
  Counter& again = s.counter("kernel.wp_reuse", "another description");
  CHECK(&again == &a);
  CHECK(s.find_counter("kernel.wp_reuse") == &a);
  CHECK(s.find_counter("kernel.nope") == nullptr);
  CHECK(s.find_distribution("kernel.wp_reuse") == nullptr);

  // StatGroup prefixes keys.
  StatGroup g(s, "tlb.dtlb");
  Counter& h = g.counter("hits", "hits");
  ++h;
  CHECK(s.find_counter("tlb.dtlb.hits") == &h);
  CHECK(g.key("misses") == "tlb.dtlb.misses");
  CHECK(StatGroup(s, "").key("x") == "x");

  // References stay valid as more stats are registered.
  for (int i = 0; i < 1000; ++i) s.counter("many.c" + std::to_string(i), "filler");
  CHECK(a.value() == 16);
  ++a;
  CHECK(s.total_value("kernel.wp_reuse") == 17);
}

TEST_CASE("stats: one key as two kinds, unknown keys and region misuse are InternalErrors",
          "[stats]") {
  Stats s;
  s.counter("a.x", "x");
  s.distribution("a.d", "d");
  CHECK_THROWS_AS(s.distribution("a.x", "x"), InternalError);
  CHECK_THROWS_AS(s.counter("a.d", "d"), InternalError);
  CHECK_THROWS_AS(s.set_scalar("a.x", 1, "x"), InternalError);
  CHECK_THROWS_AS(s.total_value("a.nope"), InternalError);
  CHECK_THROWS_AS(s.region_value("a.d"), InternalError);
  CHECK_THROWS_AS(s.region_samples("a.x"), InternalError);
  CHECK_THROWS_AS(s.region_end(), InternalError);  // never began
  s.region_begin();
  CHECK_THROWS_AS(s.region_begin(), InternalError);  // twice
  s.region_end();
  CHECK_THROWS_AS(s.region_end(), InternalError);
  CHECK_THROWS_AS(s.region_begin(), InternalError);
}

TEST_CASE("stats: registering after the region began panics", "[stats]") {
  Stats s;
  Counter& c = s.counter("faults.total", "faults");
  s.distribution("fault.latency_ns", "latency");
  s.region_begin();
  CHECK_THROWS_AS(s.counter("faults.late", "too late"), InternalError);
  CHECK_THROWS_AS(s.distribution("fault.late_ns", "too late"), InternalError);
  try {
    s.counter("faults.late", "too late");
  } catch (const InternalError& e) {
    CHECK_THAT(std::string(e.what()), Contains("faults.late"));
    CHECK_THAT(std::string(e.what()), Contains("after the measured region began"));
  }
  // Looking up an existing key is still fine, and so are end-of-run scalars.
  CHECK(&s.counter("faults.total", "faults") == &c);
  s.set_scalar("region.time_ns", 12.5, "time", "ns");
  s.region_end();
  CHECK_THROWS_AS(s.counter("faults.later", "after the end"), InternalError);
}

TEST_CASE("stats: without a region, plain keys and total. keys are the whole run", "[stats]") {
  Fixture f;
  f.run(false);
  CHECK_FALSE(f.s.region_seen());
  CHECK(f.s.region_value("faults.total") == 18);
  CHECK(f.s.total_value("faults.total") == 18);
  CHECK(f.s.region_samples("fault.latency_ns").size() == 12);
  auto m = rows_by_key(f.s, true);
  CHECK(m.at("faults.total") == 18);
  CHECK(m.at("total.faults.total") == 18);
  CHECK(m.at("tlb.stlb.hits") == 107);
  CHECK(m.at("total.tlb.stlb.hits") == 107);
  CHECK(m.at("fault.latency_ns.count") == 12);
  CHECK(m.at("total.fault.latency_ns.count") == 12);
  CHECK(m.at("fault.latency_ns.max") == 2000);
}

TEST_CASE("stats: with a region, plain keys are the region and total. keys the whole run",
          "[stats]") {
  Fixture f;
  f.run(true);
  CHECK(f.s.region_seen());
  CHECK(f.s.region_value("faults.total") == 10);
  CHECK(f.s.total_value("faults.total") == 18);
  CHECK(f.s.region_value("tlb.stlb.hits") == 7);
  CHECK(f.s.total_value("tlb.stlb.hits") == 107);
  auto in = f.s.region_samples("fault.latency_ns");
  REQUIRE(in.size() == 10);
  CHECK(in.front() == 1);
  CHECK(in.back() == 10);

  auto m = rows_by_key(f.s, true);
  CHECK(m.at("faults.total") == 10);
  CHECK(m.at("total.faults.total") == 18);
  CHECK(m.at("tlb.stlb.hits") == 7);
  CHECK(m.at("total.tlb.stlb.hits") == 107);
  // The distribution summary covers the region's samples only (1..10), not 1000 or 2000.
  CHECK(m.at("fault.latency_ns.count") == 10);
  CHECK(m.at("fault.latency_ns.mean") == Approx(5.5));
  CHECK(m.at("fault.latency_ns.min") == 1);
  CHECK(m.at("fault.latency_ns.median") == 5);
  CHECK(m.at("fault.latency_ns.p90") == 9);
  CHECK(m.at("fault.latency_ns.max") == 10);
  CHECK(m.at("total.fault.latency_ns.count") == 12);

  // Without totals, no total. rows.
  for (auto& r : f.s.rows(false)) CHECK(r.key.rfind("total.", 0) != 0);
}

TEST_CASE("stats: an open region reports what has happened in it so far", "[stats]") {
  Stats s;
  Counter& c = s.counter("core.uops", "uops");
  Distribution& d = s.distribution("fault.latency_ns", "latency");
  c += 5;
  d.sample(1);
  s.region_begin();
  c += 2;
  d.sample(7);
  CHECK(s.region_value("core.uops") == 2);
  CHECK(s.region_samples("fault.latency_ns") == std::vector<double>{7});
  c += 1;
  d.sample(8);
  CHECK(s.region_value("core.uops") == 3);
  CHECK(s.region_samples("fault.latency_ns") == std::vector<double>{7, 8});
  auto m = rows_by_key(s, false);
  CHECK(m.at("core.uops") == 3);
  CHECK(m.at("fault.latency_ns.count") == 2);
}

TEST_CASE("stats: counters and distributions interleaved keep their own region marks",
          "[stats]") {
  // Region bookkeeping indexes counters and distributions separately; interleaving them in
  // registration order must not mix them up.
  Stats s;
  Distribution& d1 = s.distribution("a.d1", "d1");
  Counter& c1 = s.counter("a.c1", "c1");
  s.set_scalar("a.s", 4, "scalar");
  Distribution& d2 = s.distribution("a.d2", "d2");
  Counter& c2 = s.counter("a.c2", "c2");
  c1 += 1;
  c2 += 100;
  d1.sample(1);
  d2.sample(1);
  d2.sample(1);
  s.region_begin();
  c1 += 2;
  c2 += 20;
  d1.sample(5);
  d2.sample(6);
  d2.sample(7);
  d2.sample(8);
  s.region_end();
  c1 += 1000;
  d2.sample(9);
  CHECK(s.region_value("a.c1") == 2);
  CHECK(s.region_value("a.c2") == 20);
  CHECK(s.region_samples("a.d1") == std::vector<double>{5});
  CHECK(s.region_samples("a.d2") == std::vector<double>{6, 7, 8});
  auto m = rows_by_key(s, true);
  CHECK(m.at("a.c1") == 2);
  CHECK(m.at("a.c2") == 20);
  CHECK(m.at("a.d1.count") == 1);
  CHECK(m.at("a.d2.count") == 3);
  CHECK(m.at("a.d2.median") == 7);
  CHECK(m.at("a.s") == 4);
  CHECK(m.at("total.a.c1") == 1003);
  CHECK(m.at("total.a.d2.count") == 6);
  CHECK(m.count("total.a.s") == 0);  // scalars are not region-relative
}

TEST_CASE("stats: distribution summaries with nearest-rank percentiles", "[stats]") {
  SECTION("empty") {
    auto s = summarize({});
    CHECK(s.count == 0);
    CHECK(s.mean == 0);
    CHECK(s.min == 0);
    CHECK(s.median == 0);
    CHECK(s.p90 == 0);
    CHECK(s.max == 0);
  }
  SECTION("one sample") {
    auto s = summarize({7});
    CHECK(s.count == 1);
    CHECK(s.mean == 7);
    CHECK(s.min == 7);
    CHECK(s.median == 7);
    CHECK(s.p90 == 7);
    CHECK(s.max == 7);
  }
  SECTION("1..10 unsorted") {
    auto s = summarize({10, 3, 1, 9, 2, 8, 4, 7, 5, 6});
    CHECK(s.count == 10);
    CHECK(s.mean == Approx(5.5));
    CHECK(s.min == 1);
    CHECK(s.median == 5);  // rank ceil(0.5 * 10) = 5
    CHECK(s.p90 == 9);     // rank ceil(0.9 * 10) = 9
    CHECK(s.max == 10);
  }
  SECTION("four samples: the median is a sample, not an interpolation") {
    auto s = summarize({4, 1, 3, 2});
    CHECK(s.median == 2);  // rank 2
    CHECK(s.p90 == 4);     // rank ceil(3.6) = 4
    CHECK(s.mean == Approx(2.5));
  }
  SECTION("eleven samples") {
    auto s = summarize({11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
    CHECK(s.median == 6);  // rank ceil(5.5) = 6
    CHECK(s.p90 == 10);    // rank ceil(9.9) = 10
  }
  SECTION("twenty samples with a heavy tail") {
    std::vector<double> v;
    for (int i = 1; i <= 18; ++i) v.push_back(100);
    v.push_back(5000);
    v.push_back(90000);
    auto s = summarize(v);
    CHECK(s.median == 100);
    CHECK(s.p90 == 100);  // rank 18
    CHECK(s.max == 90000);
    CHECK(s.mean == Approx((1800.0 + 5000 + 90000) / 20));
  }
  SECTION("negative and fractional values") {
    auto s = summarize({-1.5, 0.25, 2});
    CHECK(s.min == -1.5);
    CHECK(s.median == 0.25);
    CHECK(s.max == 2);
    CHECK(s.mean == Approx(0.25));
  }
}

TEST_CASE("stats: JSON is valid, flat dotted keys to numbers, with meta and typed config",
          "[stats]") {
  Fixture f;
  f.run(true);
  f.s.set_scalar("region.time_ns", 1234.5, "time", "ns");
  f.s.set_scalar("sim.simulated_ns", 5e20, "a big number", "ns");
  f.s.set_scalar("sim.tiny", 1.25e-9, "a small number");

  Schema sc = make_schema();
  Config cfg(sc);
  cfg.set_override("core.rob_entries=0x100");
  cfg.set_override("core.smt=off");
  cfg.set_override("workload.size=1.5M");
  cfg.set("workload.label", "q\"uo\\te\tand tab", "test");

  std::ostringstream os;
  f.s.write_json(os, &cfg, "0.1.0-test");
  const std::string out = os.str();
  INFO(out);
  Json j;
  REQUIRE_NOTHROW(j = parse_json(out));
  REQUIRE(j.is_object());

  // Every key other than meta and config: dotted, schema-conforming, to a number.
  std::map<std::string, double> flat;
  for (auto& [k, v] : j.items()) {
    if (k == "meta" || k == "config") continue;
    INFO(k);
    CHECK(std::regex_match(k, kKeyRe));
    CHECK(k.find('.') != std::string::npos);
    CHECK(v.is_number());
    flat[k] = v.get<double>();
  }
  // The same rows as the printers see, in the same order, then meta and config.
  auto rows = f.s.rows(true);
  REQUIRE(flat.size() == rows.size());
  REQUIRE(j.size() == rows.size() + 2);
  auto it = j.begin();
  for (size_t i = 0; i < rows.size(); ++i, ++it) {
    INFO(rows[i].key);
    CHECK(it.key() == rows[i].key);
    CHECK(it.value().get<double>() == Approx(rows[i].value));
  }
  CHECK(it.key() == "meta");
  CHECK((++it).key() == "config");
  CHECK(flat.at("faults.total") == 10);
  CHECK(flat.at("total.faults.total") == 18);
  CHECK(flat.at("tlb.stlb.hits") == 7);
  CHECK(flat.at("total.tlb.stlb.hits") == 107);
  CHECK(flat.at("fault.latency_ns.count") == 10);
  CHECK(flat.at("fault.latency_ns.mean") == Approx(5.5));
  CHECK(flat.at("fault.latency_ns.median") == 5);
  CHECK(flat.at("fault.latency_ns.p90") == 9);
  CHECK(flat.at("total.fault.latency_ns.count") == 12);
  CHECK(flat.at("region.time_ns") == 1234.5);
  CHECK(flat.at("sim.simulated_ns") == 5e20);
  CHECK(flat.at("sim.tiny") == 1.25e-9);  // doubles read back exactly
  // Counts are written as integers, and so is a double that is whole (the median of 1..10 is 5);
  // a double that is not whole, or too big for an integer, as a double.
  CHECK(j["faults.total"].is_number_integer());
  CHECK(j["total.tlb.stlb.hits"].dump() == "107");
  CHECK(j["fault.latency_ns.median"].dump() == "5");
  CHECK(j["fault.latency_ns.mean"].is_number_float());
  CHECK(j["sim.simulated_ns"].is_number_float());

  const Json& meta = j["meta"];
  REQUIRE(meta.is_object());
  CHECK(meta["mmusim_version"] == "0.1.0-test");
  CHECK(meta["region"] == "measured-pass");
  REQUIRE(meta.contains("config_files"));
  CHECK(meta["config_files"].is_array());

  const Json& c = j["config"];
  REQUIRE(c.is_object());
  REQUIRE(c.size() == sc.all().size());
  size_t i = 0;
  for (auto& [k, v] : c.items()) CHECK(k == sc.all()[i++].key);
  CHECK(c["core.rob_entries"].is_number_integer());
  CHECK(c["core.rob_entries"] == 256);
  CHECK(c["core.freq_ghz"].is_number_float());
  CHECK(c["core.freq_ghz"] == 3.6);
  CHECK(c["core.smt"].is_boolean());
  CHECK(c["core.smt"] == false);
  CHECK(c["workload.size"].is_number_unsigned());
  CHECK(c["workload.size"] == 1572864);  // sizes in bytes
  CHECK(c["kernel.fault_latency"] == "100ns");
  CHECK(c["kernel.mode"] == "b");
  CHECK(c["workload.label"] == "q\"uo\\te\tand tab");  // escaped and read back
}

TEST_CASE("stats: JSON without a region or a config", "[stats]") {
  Fixture f;
  f.run(false);
  std::ostringstream os;
  f.s.write_json(os, nullptr, "v");
  Json j;
  REQUIRE_NOTHROW(j = parse_json(os.str()));
  CHECK(j["meta"]["region"] == "whole-run");
  CHECK_FALSE(j["meta"].contains("config_files"));
  CHECK(j["faults.total"] == 18);
  CHECK(j["total.faults.total"] == 18);
  REQUIRE(j.contains("config"));
  CHECK(j["config"].is_object());
  CHECK(j["config"].empty());

  // An empty Stats is still a valid document.
  Stats empty;
  std::ostringstream e;
  empty.write_json(e, nullptr, "v");
  REQUIRE_NOTHROW(parse_json(e.str()));
}

TEST_CASE("stats: JSON strings are escaped, bytes that are not UTF-8 replaced", "[stats]") {
  Schema sc = make_schema();
  Config cfg(sc);
  const std::string label = std::string("a\"b\\c\nd\x01\x1f") + "\xc3\xa9";  // ... and an e-acute
  cfg.set("workload.label", label, "test");
  std::ostringstream os;
  Stats().write_json(os, &cfg, "v");
  CHECK(parse_json(os.str())["config"]["workload.label"] == label);
  cfg.set("workload.label", "x\xffy", "test");  // not UTF-8
  std::ostringstream bad;
  Stats().write_json(bad, &cfg, "v");
  CHECK(parse_json(bad.str())["config"]["workload.label"] == "x\xef\xbf\xbdy");  // U+FFFD
}

namespace {
std::vector<std::string> nonempty_lines(const std::string& t) {
  std::vector<std::string> lines;
  std::istringstream in(t);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}
}  // namespace

TEST_CASE("stats: the table printer prints every key", "[stats]") {
  Fixture f;
  Counter& big = f.s.counter("core.uops", "micro-ops executed", "uops");
  f.s.counter("core.squashes", "squashes (never counted: zero)");
  f.run(true);
  big += 1234567;  // outside the region: only in the total
  f.s.set_scalar("region.time_ns", 2.5, "simulated time of the pass", "ns");

  for (bool totals : {false, true}) {
    INFO("with_totals=" << totals);
    std::ostringstream os;
    f.s.write_table(os, totals, /*skip_zero=*/false);
    const std::string t = os.str();
    auto rows = f.s.rows(totals);
    // One line per row, each starting with its key, in the rows' order.
    auto lines = nonempty_lines(t);
    REQUIRE(lines.size() == rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      INFO(rows[i].key);
      CHECK(lines[i].rfind(rows[i].key + " ", 0) == 0);
      CHECK_THAT(lines[i], Contains(rows[i].desc));
    }
    if (!totals) CHECK(t.find("total.") == std::string::npos);
    if (totals) {
      CHECK_THAT(t, Contains("total.core.uops"));
      CHECK_THAT(t, Contains("1,234,567"));  // thousands separators
    }
  }
  std::ostringstream os;
  f.s.write_table(os, false, false);
  const std::string t = os.str();
  CHECK_THAT(t, Contains("[ns] simulated time of the pass"));
  CHECK_THAT(t, Contains("2.500"));  // non-integral values with three decimals
  CHECK_THAT(t, Contains("[lookups] STLB hits"));
  CHECK_THAT(t, Contains("core.squashes"));
  // Groups (the key's first component) are separated by a blank line.
  CHECK_THAT(t, Contains("\n\n"));
}

TEST_CASE("stats: the default table leaves out zero rows, and only those", "[stats]") {
  Fixture f;
  f.s.counter("core.squashes", "squashes (never counted: zero)");
  f.run(true);
  std::ostringstream os;
  f.s.write_table(os, true);
  auto lines = nonempty_lines(os.str());
  size_t nonzero = 0;
  for (auto& r : f.s.rows(true)) {
    INFO(r.key);
    bool printed = false;
    for (auto& l : lines) printed = printed || l.rfind(r.key + " ", 0) == 0;
    CHECK(printed == (r.value != 0));
    nonzero += r.value != 0;
  }
  CHECK(lines.size() == nonzero);
  CHECK(os.str().find("core.squashes") == std::string::npos);
}

TEST_CASE("stats: keys follow the schema [a-z0-9_.]+ in every printed row", "[stats]") {
  Fixture f;
  f.run(true);
  f.s.set_scalar("sim.host_seconds", 0.01, "host time", "s");
  for (auto& r : f.s.rows(true)) {
    INFO(r.key);
    CHECK(std::regex_match(r.key, kKeyRe));
    CHECK(r.key.front() != '.');
    CHECK(r.key.back() != '.');
    CHECK(r.key.find("..") == std::string::npos);
  }
}

TEST_CASE("stats: a scope prefixes the keys registered in it, not the shared resources'", "[stats]") {
  Stats s;
  Counter& p = s.counter("core.uops", "P-core micro-ops");
  {
    StatsScope scope(s, "ecore.");
    Counter& e = s.counter("core.uops", "E-core micro-ops");
    CHECK(&e != &p);
    CHECK(s.find_counter("ecore.core.uops") == &e);
    s.distribution("walker.latency", "walks");
    CHECK(s.find_distribution("ecore.walker.latency"));
    // Memory and the LLC are every core's: the same counters.
    CHECK(&s.counter("memory.fills", "fills") == &s.counter("memory.fills", "fills"));
    s.counter("cache.llc.hits", "LLC hits");
    CHECK(s.find_counter("cache.llc.hits"));
    CHECK_FALSE(s.find_counter("ecore.memory.fills"));
    CHECK_FALSE(s.find_counter("ecore.cache.llc.hits"));
  }
  CHECK(s.scope().empty());
  CHECK(&s.counter("core.uops", "again") == &p);
}
