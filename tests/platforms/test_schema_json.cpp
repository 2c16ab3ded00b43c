// SPDX-License-Identifier: GPL-2.0-only
// The schema as JSON (base/schema_json.cpp, `mmusim list --format json`) on the real schema: read
// back, it is the schema mmusim runs with, key by key (what the fuzzers rely on:
// fuzz/schema_from_list.hpp builds their schema from it).
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "base/params.hpp"
#include "base/schema_json.hpp"
#include "platforms/platform.hpp"

using namespace mmusim;

TEST_CASE("schema JSON: the real schema reads back as itself", "[schema_json]") {
  const Schema schema = build_schema();
  std::ostringstream out;
  write_schema_json(out, schema);
  Schema back;
  std::istringstream in(out.str());
  read_schema_json(in, "list.json", back);
  CHECK(back.variant_key() == schema.variant_key());
  REQUIRE(back.all().size() == schema.all().size());
  for (size_t i = 0; i < schema.all().size(); ++i) {
    const ParamSpec& s = schema.all()[i];
    const ParamSpec& b = back.all()[i];  // in declaration order
    INFO(s.key);
    REQUIRE(b.key == s.key);
    CHECK(b.type == s.type);
    CHECK(b.desc == s.desc);
    CHECK(b.unit == s.unit);
    CHECK(b.min == s.min);
    CHECK(b.max == s.max);
    CHECK(b.align == s.align);
    CHECK(b.choices == s.choices);
    CHECK(b.variants.empty() == s.variants.empty());
    CHECK(b.allowed() == s.allowed());
    for (const std::string platform : {"i7-12700kf", "neoverse-n1", "functional"}) {
      INFO(platform);
      REQUIRE(b.applies_to(platform) == s.applies_to(platform));
      if (!s.applies_to(platform)) continue;
      // The default on this platform, as the value it parses to.
      auto def = [&](const ParamSpec& x) {
        auto own = x.variant_defaults.find(platform);
        const std::string& t = own == x.variant_defaults.end() ? x.default_text : own->second;
        return canonical_text(x, parse_value(x, t, "test"));
      };
      CHECK(def(b) == def(s));
    }
  }
  // And it writes the same document again.
  std::ostringstream again;
  write_schema_json(again, back);
  CHECK(again.str() == out.str());
}
