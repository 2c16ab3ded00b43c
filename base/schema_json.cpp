// SPDX-License-Identifier: GPL-2.0-only
#include "base/schema_json.hpp"

#include <cmath>
#include <istream>
#include <ostream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mmusim {
namespace {

using Json = nlohmann::ordered_json;  // members in the order they are set

constexpr ParamType kTypes[] = {ParamType::Int,  ParamType::Float,    ParamType::Bool,  ParamType::Size,
                                ParamType::Enum, ParamType::Duration, ParamType::String};

// A value of `s` as JSON (typed as in the stats JSON's config).
Json typed(const ParamSpec& s, const std::string& text) {
  const Value v = parse_value(s, text, "default of " + s.key);
  switch (s.type) {
    case ParamType::Int: return v.i;
    case ParamType::Float: return v.f;
    case ParamType::Bool: return v.i != 0;
    case ParamType::Size: return v.u;
    default: return canonical_text(s, v);
  }
}

// A bound of a range: an integer for int and size keys (a bound past int64 stays a double).
Json bound(const ParamSpec& s, double b) {
  if (s.type == ParamType::Size && b >= 0 && b < 1.8e19) return uint64_t(b);
  if (s.type == ParamType::Int && std::fabs(b) < 9.2e18) return int64_t(b);
  return b;
}

// The text of a typed value, as a config file would give it (the inverse of typed()).
std::string text_of(const ParamSpec& s, const Json& j) {
  Value v;
  v.type = s.type;
  switch (s.type) {
    case ParamType::Int: v.i = j.get<int64_t>(); break;
    case ParamType::Float: v.f = j.get<double>(); break;
    case ParamType::Bool: v.i = j.get<bool>(); break;
    case ParamType::Size: v.u = j.get<uint64_t>(); break;
    default: return j.get<std::string>();
  }
  return canonical_text(s, v);
}

}  // namespace

void write_schema_json(std::ostream& os, const Schema& schema) {
  // The platforms: the choices of the key that selects one.
  std::vector<std::string> platforms;
  if (const ParamSpec* vk = schema.find(schema.variant_key()); vk && vk->type == ParamType::Enum)
    platforms = vk->choices;
  Json doc = Json::object();
  if (!schema.variant_key().empty()) doc["variant_key"] = schema.variant_key();
  doc["platforms"] = platforms;
  Json params = Json::array();
  for (const ParamSpec& s : schema.all()) {
    Json p = Json::object();
    p["key"] = s.key;
    p["type"] = param_type_name(s.type);
    p["description"] = s.desc;
    if (!s.unit.empty()) p["unit"] = s.unit;
    if (s.variants.empty()) p["default"] = typed(s, s.default_text);
    if (!platforms.empty()) {
      Json defaults = Json::object();
      for (const std::string& v : platforms) {
        if (!s.applies_to(v)) continue;
        auto own = s.variant_defaults.find(v);
        defaults[v] = typed(s, own == s.variant_defaults.end() ? s.default_text : own->second);
      }
      p["defaults"] = std::move(defaults);
    }
    if (std::isfinite(s.min)) p["min"] = bound(s, s.min);
    if (std::isfinite(s.max)) p["max"] = bound(s, s.max);
    if (s.align > 1) p["align"] = s.align;
    if (s.type == ParamType::Enum) p["values"] = s.choices;
    p["allowed"] = s.allowed();
    params.push_back(std::move(p));
  }
  doc["parameters"] = std::move(params);
  os << doc.dump(2) << "\n";
}

void read_schema_json(std::istream& in, const std::string& origin, Schema& schema) {
  std::string where = origin;
  try {
    const Json doc = Json::parse(in);
    size_t n = 0;
    for (const Json& p : doc.at("parameters")) {
      ParamSpec s;
      where = fmt::format("{}: parameter {}", origin, ++n);
      s.key = p.at("key").get<std::string>();
      where += " (" + s.key + ")";
      if (schema.find(s.key)) throw UserError(where + ": the key is there twice");
      const std::string type = p.at("type").get<std::string>();
      bool known = false;
      for (ParamType t : kTypes)
        if (type == param_type_name(t)) s.type = t, known = true;
      if (!known)
        throw UserError(where + ": type '" + type + "'; allowed: int, float, bool, size, enum, duration, string");
      s.desc = p.value("description", "");
      s.unit = p.value("unit", "");
      if (p.contains("min")) s.min = p["min"].get<double>();
      if (p.contains("max")) s.max = p["max"].get<double>();
      if (p.contains("align")) s.align = p["align"].get<uint64_t>();
      if (p.contains("values")) s.choices = p["values"].get<std::vector<std::string>>();
      const Json defaults = p.value("defaults", Json::object());
      if (!p.contains("default") && defaults.empty())
        throw UserError(where + ": no default (neither 'default' nor 'defaults')");
      // Declared as the models declare it: the key with its generic default, then each
      // platform's own; a key without a generic default only for the platforms that list one.
      auto check = [&](const ParamSpec& v, const std::string& what) {
        parse_value(v, v.default_text, where + ": " + what);  // a UserError if it is not valid
      };
      if (p.contains("default")) {
        s.default_text = text_of(s, p["default"]);
        check(s, "default");
        schema.add(s);
      }
      for (const auto& [platform, d] : defaults.items()) {
        ParamSpec v = s;
        v.default_text = text_of(s, d);
        check(v, "default on " + platform);
        schema.add_variant(v, platform);
      }
    }
    if (doc.contains("variant_key")) schema.set_variant_key(doc["variant_key"].get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not a schema as `mmusim list --format json` writes it: " + e.what());
  }
}

}  // namespace mmusim
