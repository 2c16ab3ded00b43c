// SPDX-License-Identifier: GPL-2.0-only
// Tests of the statistics: counters, distributions, the measured region, the JSON and table
// printers and the key schema.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"

using namespace mmusim;
using Catch::Contains;

namespace {

// ---------------------------------------------------------------------------------------------
// A small strict JSON parser (RFC 8259): enough to check that the output is valid JSON and to read
// it back. Throws std::runtime_error with the offset on any syntax error.
struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  std::string text;  // String: the value; Number: the literal as written
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;  // in document order

  const Json* get(const std::string& k) const {
    for (auto& [key, v] : obj)
      if (key == k) return &v;
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_) + ": '" +
                             s_.substr(i_, 20) + "'");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  Json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      v.type = Json::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, v;
      for (;;) {
        ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key");
        std::string k = string();
        for (auto& [key, x] : v.obj)
          if (key == k) fail("duplicate key '" + k + "'");
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
        ++i_;
        v.obj.emplace_back(k, value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, v;
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = Json::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, v;
      for (;;) {
        v.arr.push_back(value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, v;
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = Json::String;
      v.text = string();
      return v;
    }
    if (lit("true")) return v.type = Json::Bool, v.b = true, v;
    if (lit("false")) return v.type = Json::Bool, v.b = false, v;
    if (lit("null")) return v;
    return number();
  }
  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += char(c);
        ++i_;
        continue;
      }
      if (++i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\u escape");
            cp = cp * 16 + unsigned(std::isdigit(static_cast<unsigned char>(h))
                                        ? h - '0'
                                        : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          }
          if (cp >= 0x80) fail("non-ASCII \\u escape (not needed by these tests)");
          out += char(cp);
          break;
        }
        default: fail("bad escape");
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  Json number() {
    size_t b = i_;
    auto digits = [&] {
      size_t s = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      return i_ - s;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else if (digits() == 0) fail("expected a value");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("expected exponent digits");
    }
    Json v;
    v.type = Json::Number;
    v.text = s_.substr(b, i_ - b);
    v.num = std::stod(v.text);
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

Json parse_json(const std::string& s) { return JsonParser(s).parse(); }

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

TEST_CASE("stats: the test's JSON parser accepts JSON and rejects what is not", "[stats]") {
  Json v = parse_json(R"({"a": [1, -2.5e+3, 0.5, true, null], "b": {"c": "x\"\\\n\u0001"}})");
  REQUIRE(v.type == Json::Object);
  CHECK(v.get("a")->arr.size() == 5);
  CHECK(v.get("a")->arr[1].num == -2500);
  CHECK(v.get("b")->get("c")->text == "x\"\\\n\x01");
  for (const char* bad : {"{", "{\"a\": 1,}", "{\"a\" 1}", "[01]", "[1.]", "[.5]", "{\"a\": nan}",
                          "{\"a\": 1} x", "{\"a\": \"\t\"}", "{\"a\": 1, \"a\": 2}", "[inf]",
                          "{a: 1}", "[1e]"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_json(bad), std::runtime_error);
  }
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
  REQUIRE(j.type == Json::Object);

  // Every key other than meta and config: dotted, schema-conforming, to a number.
  std::map<std::string, double> flat;
  for (auto& [k, v] : j.obj) {
    if (k == "meta" || k == "config") continue;
    INFO(k);
    CHECK(std::regex_match(k, kKeyRe));
    CHECK(k.find('.') != std::string::npos);
    CHECK(v.type == Json::Number);
    flat[k] = v.num;
  }
  // The same rows as the printers see, in the same order.
  auto rows = f.s.rows(true);
  REQUIRE(flat.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i].key);
    CHECK(j.obj[i].first == rows[i].key);
    CHECK(j.obj[i].second.num == Approx(rows[i].value));
  }
  CHECK(flat.at("faults.total") == 10);
  CHECK(flat.at("total.faults.total") == 18);
  CHECK(flat.at("tlb.stlb.hits") == 7);
  CHECK(flat.at("total.tlb.stlb.hits") == 107);
  CHECK(flat.at("fault.latency_ns.count") == 10);
  CHECK(flat.at("fault.latency_ns.mean") == Approx(5.5));
  CHECK(flat.at("fault.latency_ns.median") == 5);
  CHECK(flat.at("fault.latency_ns.p90") == 9);
  CHECK(flat.at("total.fault.latency_ns.count") == 12);
  CHECK(flat.at("region.time_ns") == Approx(1234.5));
  CHECK(flat.at("sim.simulated_ns") == Approx(5e20));
  CHECK(flat.at("sim.tiny") == Approx(1.25e-9));
  // Counts are written as integers.
  CHECK(j.get("faults.total")->text == "10");
  CHECK(j.get("total.tlb.stlb.hits")->text == "107");

  const Json* meta = j.get("meta");
  REQUIRE(meta);
  REQUIRE(meta->type == Json::Object);
  CHECK(meta->get("mmusim_version")->text == "0.1.0-test");
  CHECK(meta->get("region")->text == "measured-pass");
  REQUIRE(meta->get("config_files"));
  CHECK(meta->get("config_files")->type == Json::Array);

  const Json* c = j.get("config");
  REQUIRE(c);
  REQUIRE(c->type == Json::Object);
  REQUIRE(c->obj.size() == sc.all().size());
  for (size_t i = 0; i < sc.all().size(); ++i) CHECK(c->obj[i].first == sc.all()[i].key);
  CHECK(c->get("core.rob_entries")->type == Json::Number);
  CHECK(c->get("core.rob_entries")->text == "256");
  CHECK(c->get("core.freq_ghz")->type == Json::Number);
  CHECK(c->get("core.freq_ghz")->num == Approx(3.6));
  CHECK(c->get("core.smt")->type == Json::Bool);
  CHECK_FALSE(c->get("core.smt")->b);
  CHECK(c->get("workload.size")->type == Json::Number);
  CHECK(c->get("workload.size")->text == "1572864");  // sizes in bytes
  CHECK(c->get("kernel.fault_latency")->type == Json::String);
  CHECK(c->get("kernel.fault_latency")->text == "100ns");
  CHECK(c->get("kernel.mode")->type == Json::String);
  CHECK(c->get("kernel.mode")->text == "b");
  CHECK(c->get("workload.label")->type == Json::String);
  CHECK(c->get("workload.label")->text == "q\"uo\\te\tand tab");  // escaped and read back
}

TEST_CASE("stats: JSON without a region or a config", "[stats]") {
  Fixture f;
  f.run(false);
  std::ostringstream os;
  f.s.write_json(os, nullptr, "v");
  Json j;
  REQUIRE_NOTHROW(j = parse_json(os.str()));
  CHECK(j.get("meta")->get("region")->text == "whole-run");
  CHECK(j.get("faults.total")->num == 18);
  CHECK(j.get("total.faults.total")->num == 18);
  REQUIRE(j.get("config"));
  CHECK(j.get("config")->type == Json::Object);
  CHECK(j.get("config")->obj.empty());

  // An empty Stats is still a valid document.
  Stats empty;
  std::ostringstream e;
  empty.write_json(e, nullptr, "v");
  REQUIRE_NOTHROW(parse_json(e.str()));
}

TEST_CASE("stats: JSON escapes strings", "[stats]") {
  CHECK(json_escape("plain") == "plain");
  CHECK(json_escape("a\"b") == "a\\\"b");
  CHECK(json_escape("a\\b") == "a\\\\b");
  CHECK(json_escape("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(json_escape(std::string("\x01\x1f", 2)) == "\\u0001\\u001f");
  CHECK(parse_json("\"" + json_escape("x\x02y\"\\") + "\"").text == "x\x02y\"\\");
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
