// SPDX-License-Identifier: GPL-2.0-only
// Typed, described parameters, declared once.
//
// A module describes its parameters in one `visit(Params&)` function that binds each key to a
// field, with its type, default, allowed range or values and a description:
//
//   struct StlbParams {
//     uint32_t entries;
//     void visit(Params& p) {
//       p.integer("tlb.stlb.entries", entries, 2048, 1, 1 << 20, "STLB entries [UARCH A.1, H]");
//     }
//   };
//
// The same function serves twice: with `Params::declaring(schema)` it adds the key to the schema
// (from which `mmusim list`, `--help` and the config checks are generated); with
// `Params::reading(config)` it fills the fields from the effective configuration.
//
// A Config holds the effective value of every key: defaults, then INI files in order (each with
// its `include`s), then `--set` overrides. Every value remembers where it came from.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace mmusim {

enum class ParamType { Int, Float, Bool, Size, Enum, Duration, String };
const char* param_type_name(ParamType t);

// A duration given in core cycles ("715", "715cyc") or in time ("100ns", "1.5us", "2ms").
// The platform converts it with its clock.
struct Duration {
  double value = 0;
  bool is_time = false;  // true: `value` is in ns
  double cycles(double ghz) const { return is_time ? value * ghz : value; }
  double ns(double ghz) const { return is_time ? value : value / ghz; }
  bool operator==(const Duration& o) const { return value == o.value && is_time == o.is_time; }
};

struct ParamSpec {
  std::string key;  // "section.name" or "section.sub.name"
  ParamType type = ParamType::Int;
  std::string default_text;
  std::string desc;
  std::string unit;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  uint64_t align = 0;                // Size: value must be a multiple of this (0: any)
  std::vector<std::string> choices;  // Enum
  // Platform variants: a key that only some platforms have lists them here (empty: every
  // platform); a platform may give its own default (e.g. core.rob_entries: 512 on the
  // i7-12700kf, 128 on the neoverse-n1).
  std::vector<std::string> variants;
  std::map<std::string, std::string> variant_defaults;
  // Where a default is stated when not in the declaration: a platform's config file built into
  // the binary ("configs/platforms/neoverse-n1.cfg:97"), for the generic default ("") or a
  // variant's. `mmusim describe` shows it.
  std::map<std::string, std::string> default_sources;

  std::string section() const;
  bool applies_to(const std::string& variant) const;  // everything before the last '.'
  std::string allowed() const;  // "an integer in [1, 4096]", "one of: off, block16, ..."
};

// Parsed value of one key.
struct Value {
  ParamType type = ParamType::String;
  int64_t i = 0;    // Int, Bool (0/1), Size (bytes, as uint64 in `u`)
  uint64_t u = 0;   // Size
  double f = 0;     // Float
  Duration d;       // Duration
  std::string s;    // Enum (the choice) and String
};

// Parse `text` as a value of `spec`. `origin` ("file.cfg:12", "--set") prefixes the error message,
// which names the key, what was given and what is allowed.
Value parse_value(const ParamSpec& spec, const std::string& text, const std::string& origin);
// The canonical text of a value ("256M" stays as given; enums and bools are normalised).
std::string canonical_text(const ParamSpec& spec, const Value& v);

// Size helpers shared by the parser and by printers: "4K" -> 4096, 65536 -> "64K".
std::optional<uint64_t> parse_size(std::string_view text, std::string* why = nullptr);
std::string format_size(uint64_t bytes);

class Schema {
 public:
  void add(ParamSpec spec);  // panics on a key declared twice: that is a bug, not a user error
  // Declares `spec` for platform `variant`: adds it if new, else checks it has the same type and
  // records the variant's default.
  void add_variant(ParamSpec spec, const std::string& variant);
  // The key whose value selects the variant (platform.name).
  void set_variant_key(const std::string& key) { variant_key_ = key; }
  const std::string& variant_key() const { return variant_key_; }
  const ParamSpec* find(std::string_view key) const;
  // Records where the default of `key` for `variant` ("" = the generic default) is stated.
  void set_default_source(std::string_view key, const std::string& variant, const std::string& source);
  // Makes `text` (validated) the default of `key` on `variant`, stated at `source`.
  void set_variant_default(std::string_view key, const std::string& variant, const std::string& text,
                           const std::string& source);
  // A schema only for reading the platform config files before their values are known
  // (platforms/platform.cpp build_schema): the declared defaults are placeholders, not checked.
  void set_placeholder_defaults() { placeholder_defaults_ = true; }
  bool placeholder_defaults() const { return placeholder_defaults_; }
  bool has_section(std::string_view section) const;
  // The closest known key (edit distance, weighted towards the same section or the same leaf).
  std::string closest_key(std::string_view key) const;
  std::string closest_section(std::string_view section) const;
  const std::vector<ParamSpec>& all() const { return specs_; }
  std::vector<std::string> sections() const;

 private:
  std::vector<ParamSpec> specs_;
  std::map<std::string, size_t, std::less<>> index_;
  std::string variant_key_;
  bool placeholder_defaults_ = false;
};

// Defaults stated outside the declarations (a platform's built-in config file): key -> the
// default's text and where it is stated ("configs/platforms/neoverse-n1.cfg:97").
struct StatedDefault {
  std::string text, source;
};
using StatedDefaults = std::map<std::string, StatedDefault, std::less<>>;

struct Setting {
  std::string text;    // canonical text
  std::string origin;  // "default", "path/file.cfg:12", "--set"
  Value value;
};

class Config {
 public:
  explicit Config(const Schema& schema);

  // Reads an INI file: `[section]` headers, `key = value` lines, `#` comments, and
  // `include = other.cfg` lines (before the first section; relative to this file). Later
  // settings override earlier ones. Errors name file:line.
  void load_file(const std::string& path);
  // The same for a file's text held in memory (a config file built into the binary); `path`
  // names it in origins and errors, and relative includes resolve from it.
  void load_text(const std::string& path, const std::string& text);
  // One `--set section.key=value` override.
  void set_override(const std::string& assignment);
  // Set `key` from `text`; validates. Used by the above and by tools that build configs in code.
  void set(const std::string& key, const std::string& text, const std::string& origin);

  const Setting& setting(std::string_view key) const;  // panics on an undeclared key (a bug)
  bool is_default(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  uint64_t get_size(std::string_view key) const;
  Duration get_duration(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;  // also the choice of an Enum

  const Schema& schema() const { return *schema_; }
  const std::vector<std::string>& files() const { return files_; }
  // Every key of the schema, in declaration order, with its effective setting.
  std::vector<std::pair<const ParamSpec*, const Setting*>> effective() const;
  // The selected platform variant ("" if the schema has none).
  const std::string& variant() const { return variant_; }
  // Keys set explicitly (not defaults) that the selected variant does not have: a UserError
  // naming the first one and where it was set. A key set by a file that also selected a platform
  // it belongs to (a platform's own description, overridden by a later platform.name) is not an
  // error: it goes with the platform that was replaced; `skipped` lists them.
  void check_variant_keys(std::vector<std::string>* skipped = nullptr) const;

 private:
  void load_file_inner(const std::string& path, std::vector<std::string>& stack);
  void load_text_inner(const std::string& path, const std::string& text, std::vector<std::string>& stack);
  void apply_default(const ParamSpec& spec);
  // `origin` is a line of a config file that selected another platform than the current one.
  bool from_other_platform_file(const std::string& origin) const;

  const Schema* schema_;
  std::map<std::string, Setting, std::less<>> settings_;
  std::vector<std::string> files_;
  std::string variant_;
  std::map<std::string, std::string> file_variant_;  // config file -> the platform it selected
};

// The binder each module's `visit(Params&)` is written against. See the top of this file.
class Params {
 public:
  static Params declaring(Schema& schema) { return Params(&schema, nullptr); }
  // Declares the keys of one platform variant (its presets are the defaults for that platform).
  // With `stated`, a key it holds takes its default (and the default's source) from there, not
  // from the declaration: the declaration gives the structure, the file the value.
  static Params declaring(Schema& schema, const std::string& variant,
                          const StatedDefaults* stated = nullptr) {
    Params p(&schema, nullptr);
    p.variant_ = variant;
    p.stated_ = stated;
    return p;
  }
  static Params reading(const Config& config) { return Params(nullptr, &config); }
  bool is_declaring() const { return schema_ != nullptr; }
  // The same binder under a key prefix: `visit()`s written for "tlb.dtlb.entries" then declare and
  // read "ecore.tlb.dtlb.entries" (a second parameter family of the same structure, e.g. the
  // i7-12700's E-cores). `desc_prefix` starts each description. Prefixes nest.
  Params prefixed(const std::string& key_prefix, const std::string& desc_prefix = "") const {
    Params p(*this);
    p.prefix_ += key_prefix;
    p.desc_prefix_ += desc_prefix;
    return p;
  }
  const std::string& key_prefix() const { return prefix_; }

  template <typename T>
  void integer(const std::string& key, T& field, int64_t def, int64_t lo, int64_t hi,
               const std::string& desc, const std::string& unit = "") {
    ParamSpec s = spec(key, ParamType::Int, std::to_string(def), desc, unit);
    s.min = double(lo);
    s.max = double(hi);
    if (bind(std::move(s))) field = static_cast<T>(config_->get_int(prefix_ + key));
  }
  void real(const std::string& key, double& field, double def, double lo, double hi,
            const std::string& desc, const std::string& unit = "");
  void boolean(const std::string& key, bool& field, bool def, const std::string& desc);
  // A size in bytes with K/M/G/T suffixes. `align` > 0 requires a multiple of it.
  void size(const std::string& key, uint64_t& field, const std::string& def, uint64_t lo,
            uint64_t hi, const std::string& desc, uint64_t align = 0);
  void duration(const std::string& key, Duration& field, const std::string& def,
                const std::string& desc);
  void string(const std::string& key, std::string& field, const std::string& def,
              const std::string& desc);
  template <typename E>
  void enumeration(const std::string& key, E& field, E def,
                   std::initializer_list<std::pair<const char*, E>> choices,
                   const std::string& desc) {
    ParamSpec s = spec(key, ParamType::Enum, "", desc, "");
    for (auto& c : choices) {
      s.choices.emplace_back(c.first);
      if (c.second == def) s.default_text = c.first;
    }
    if (!bind(std::move(s))) return;
    const std::string& v = config_->get_string(prefix_ + key);
    for (auto& c : choices)
      if (v == c.first) field = c.second;
  }

 private:
  Params(Schema* s, const Config* c) : schema_(s), config_(c) {}
  // The spec of `key` under this binder's prefix.
  ParamSpec spec(const std::string& key, ParamType t, std::string def, const std::string& desc,
                 const std::string& unit) const;
  // Declaring: adds the spec and returns false. Reading: returns true (the caller reads).
  bool bind(ParamSpec&& spec);

  Schema* schema_;
  const Config* config_;
  std::string variant_;
  const StatedDefaults* stated_ = nullptr;
  std::string prefix_;       // prepended to every key
  std::string desc_prefix_;  // prepended to every description
};

// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace mmusim
