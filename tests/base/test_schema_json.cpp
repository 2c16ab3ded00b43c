// SPDX-License-Identifier: GPL-2.0-only
// The schema as JSON (base/schema_json.cpp): a schema of every type, with platform variants,
// written and read back; documents that are not such a schema are UserErrors naming the origin,
// the parameter and what is wrong. (The real schema: tests/platforms/test_schema_json.cpp.)
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/params.hpp"
#include "base/schema_json.hpp"

using namespace mmusim;
using Catch::Contains;

namespace {

enum class Mode { A, B };

Schema small_schema() {
  Schema sc;
  Params p = Params::declaring(sc);
  std::string name, str;
  int i = 0;
  double f = 0;
  bool b = false;
  uint64_t z = 0;
  Duration d;
  Mode m = Mode::A;
  p.enumeration("platform.name", name, std::string("x"), {{"x", std::string("x")}, {"y", std::string("y")}},
                "platform");
  p.integer("core.width", i, 4, 1, 8, "width");
  p.integer("sim.seed", i, 1, 0, int64_t(1) << 62, "seed");
  p.integer("sim.offset", i, -3, INT64_MIN, INT64_MAX, "unbounded");
  p.real("core.clock", f, 2.5, 0.1, 10, "clock", "GHz");
  p.boolean("core.smt", b, true, "smt");
  p.size("mem.size", z, "256M", 2 << 20, uint64_t(1) << 40, "size", 2 << 20);
  p.duration("cost.fault", d, "100ns", "latency");
  p.string("run.label", str, "plain", "label");
  p.enumeration("kernel.mode", m, Mode::B, {{"a", Mode::A}, {"b", Mode::B}}, "mode");
  Params::declaring(sc, "y").real("core.clock", f, 3.0, 0.1, 10, "clock", "GHz");
  Params::declaring(sc, "y").integer("core.rob", i, 128, 8, 4096, "rob only on y");
  sc.set_variant_key("platform.name");
  return sc;
}

std::string to_json(const Schema& s) {
  std::ostringstream os;
  write_schema_json(os, s);
  return os.str();
}

Schema from_json(const std::string& text) {
  Schema s;
  std::istringstream in(text);
  read_schema_json(in, "s.json", s);
  return s;
}

}  // namespace

TEST_CASE("schema JSON: every type, ranges, units and per-platform defaults", "[schema_json]") {
  const Schema sc = small_schema();
  const nlohmann::json j = nlohmann::json::parse(to_json(sc));
  CHECK(j["variant_key"] == "platform.name");
  CHECK(j["platforms"] == nlohmann::json({"x", "y"}));
  const auto& ps = j["parameters"];
  REQUIRE(ps.size() == sc.all().size());
  auto param = [&](const std::string& key) {
    for (const auto& p : ps)
      if (p["key"] == key) return p;
    FAIL("no " << key);
    return nlohmann::json();
  };
  CHECK(param("core.width")["min"] == 1);
  CHECK(param("core.width")["defaults"] == nlohmann::json({{"x", 4}, {"y", 4}}));
  CHECK(param("sim.seed")["max"] == int64_t(1) << 62);
  // The whole int64 range: bounds as doubles (2^63 is past int64), which read back the same.
  CHECK(param("sim.offset")["min"].get<double>() == double(INT64_MIN));
  CHECK(param("sim.offset")["max"].is_number_float());
  CHECK(param("core.clock")["unit"] == "GHz");
  CHECK(param("core.clock")["defaults"]["y"] == 3.0);
  CHECK(param("core.smt")["default"] == true);
  CHECK(param("mem.size")["default"] == 256u << 20);
  CHECK(param("mem.size")["align"] == 2u << 20);
  CHECK(param("cost.fault")["default"] == "100ns");
  CHECK(param("kernel.mode")["values"] == nlohmann::json({"a", "b"}));
  CHECK(param("kernel.mode")["default"] == "b");
  CHECK(param("core.rob")["defaults"] == nlohmann::json({{"y", 128}}));  // only y has it
  CHECK_FALSE(param("core.rob").contains("default"));

  const Schema back = from_json(to_json(sc));
  REQUIRE(back.all().size() == sc.all().size());
  CHECK(back.variant_key() == "platform.name");
  CHECK(back.find("core.rob")->variants == std::vector<std::string>{"y"});
  CHECK(back.find("core.clock")->variant_defaults.at("y") == "3");
  CHECK(back.find("mem.size")->default_text == "256M");
  CHECK(back.find("sim.offset")->min == sc.find("sim.offset")->min);
  CHECK(back.find("sim.offset")->max == sc.find("sim.offset")->max);
  CHECK(to_json(back) == to_json(sc));
}

TEST_CASE("schema JSON: what is not a schema is a UserError naming the parameter", "[schema_json]") {
  const std::string good = to_json(small_schema());
  auto fails = [&](const std::string& text, const std::string& what) {
    INFO(text.substr(0, 200));
    CHECK_THROWS_WITH(from_json(text), Contains("s.json") && Contains(what));
  };
  fails("", "not a schema");
  fails("[1, 2]", "not a schema");
  fails(R"({"parameters": [{"key": "a.b"}]})", "parameter 1 (a.b)");
  fails(R"({"parameters": [{"key": "a.b", "type": "complex", "default": 1}]})", "type 'complex'; allowed: int");
  fails(R"({"parameters": [{"key": "a.b", "type": "int"}]})", "no default");
  fails(R"({"parameters": [{"key": "a.b", "type": "int", "default": "x"}]})", "parameter 1 (a.b)");
  fails(R"({"parameters": [{"key": "a.b", "type": "int", "default": 9, "max": 8}]})", "out of range");
  fails(R"({"parameters": [{"key": "a.b", "type": "int", "default": 1}, {"key": "a.b", "type": "int", "default": 1}]})",
        "parameter 2 (a.b): the key is there twice");
  fails(R"({"parameters": [{"key": "a.b", "type": "enum", "values": ["p"], "defaults": {"x": "q"}}]})",
        "default on x");
  CHECK_THROWS_AS(from_json(good.substr(0, good.size() / 2)), UserError);
}
