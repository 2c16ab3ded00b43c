// SPDX-License-Identifier: GPL-2.0-only
#include "base/params.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mmusim {
namespace fs = std::filesystem;

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::Bool: return "bool";
    case ParamType::Size: return "size";
    case ParamType::Enum: return "enum";
    case ParamType::Duration: return "duration";
    case ParamType::String: return "string";
  }
  return "?";
}

namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string fmt_num(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == std::floor(v) && std::fabs(v) < 9.2e18) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

bool parse_int(std::string_view text, int64_t& out) {
  std::string t(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 0);
  if (errno != 0 || end != t.c_str() + t.size()) return false;
  // strtoll with base 0 reads "010" (and "-010") as octal; nobody writes octal in a config.
  size_t d = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (t.size() > d + 1 && t[d] == '0' && std::isdigit(static_cast<unsigned char>(t[d + 1]))) {
    v = std::strtoll(t.c_str(), &end, 10);
    if (end != t.c_str() + t.size()) return false;
  }
  out = v;
  return true;
}

bool parse_double(std::string_view text, double& out) {
  std::string t(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes and durations

std::optional<uint64_t> parse_size(std::string_view text, std::string* why) {
  std::string t = trim(text);
  if (t.empty()) {
    if (why) *why = "empty";
    return std::nullopt;
  }
  if (t[0] == '-') {
    if (why) *why = "negative";
    return std::nullopt;
  }
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  std::string num = t.substr(0, i);
  std::string suffix = lower(trim(t.substr(i)));
  double n = 0;
  if (!parse_double(num, n)) {
    if (why) *why = "not a number";
    return std::nullopt;
  }
  uint64_t mult = 1;
  if (!suffix.empty()) {
    char c = suffix[0];
    std::string rest = suffix.substr(1);
    if (c == 'b' && rest.empty()) mult = 1;
    else if (c == 'k') mult = 1ull << 10;
    else if (c == 'm') mult = 1ull << 20;
    else if (c == 'g') mult = 1ull << 30;
    else if (c == 't') mult = 1ull << 40;
    else {
      if (why) *why = "unknown suffix '" + suffix + "' (use K, M, G or T)";
      return std::nullopt;
    }
    if (c != 'b' && !(rest.empty() || rest == "b" || rest == "ib")) {
      if (why) *why = "unknown suffix '" + suffix + "' (use K, M, G or T)";
      return std::nullopt;
    }
  }
  double bytes = n * double(mult);
  if (bytes > 9.2e18) {
    if (why) *why = "too large";
    return std::nullopt;
  }
  if (bytes != std::floor(bytes)) {
    if (why) *why = "not a whole number of bytes";
    return std::nullopt;
  }
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t b) {
  static const char* suf[] = {"", "K", "M", "G", "T"};
  int k = 0;
  while (k < 4 && b != 0 && b % 1024 == 0) {
    b /= 1024;
    ++k;
  }
  return fmt::format("{}{}", b, suf[k]);
}

namespace {

bool parse_duration(std::string_view text, Duration& out, std::string* why) {
  std::string t = trim(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.' ||
                          t[i] == '-' || t[i] == '+' || t[i] == 'e' || t[i] == 'E')) {
    // 'e' only as an exponent: stop if a unit starts here.
    if ((t[i] == 'e' || t[i] == 'E') && (i == 0 || i + 1 >= t.size() ||
                                         !(std::isdigit(static_cast<unsigned char>(t[i + 1])) ||
                                           t[i + 1] == '-' || t[i + 1] == '+')))
      break;
    ++i;
  }
  double v = 0;
  if (!parse_double(t.substr(0, i), v)) {
    *why = "not a number";
    return false;
  }
  if (v < 0) {
    *why = "negative";
    return false;
  }
  std::string unit = lower(trim(t.substr(i)));
  if (unit.empty() || unit == "c" || unit == "cyc" || unit == "cycle" || unit == "cycles") {
    out = Duration{v, false};
  } else if (unit == "ps") {
    out = Duration{v / 1000.0, true};
  } else if (unit == "ns") {
    out = Duration{v, true};
  } else if (unit == "us") {
    out = Duration{v * 1e3, true};
  } else if (unit == "ms") {
    out = Duration{v * 1e6, true};
  } else if (unit == "s") {
    out = Duration{v * 1e9, true};
  } else {
    *why = "unknown unit '" + unit + "' (use cycles, ps, ns, us, ms or s)";
    return false;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ParamSpec / values

std::string ParamSpec::section() const {
  auto p = key.rfind('.');
  return p == std::string::npos ? std::string() : key.substr(0, p);
}

bool ParamSpec::applies_to(const std::string& variant) const {
  return variants.empty() || variant.empty() ||
         std::find(variants.begin(), variants.end(), variant) != variants.end();
}

std::string ParamSpec::allowed() const {
  auto range = [&](const char* what) {
    bool lo = std::isfinite(min), hi = std::isfinite(max);
    if (lo && hi) return fmt::format("{} in [{}, {}]", what, fmt_num(min), fmt_num(max));
    if (lo) return fmt::format("{} >= {}", what, fmt_num(min));
    if (hi) return fmt::format("{} <= {}", what, fmt_num(max));
    return std::string(what);
  };
  switch (type) {
    case ParamType::Int: return range("an integer");
    case ParamType::Float: return range("a number");
    case ParamType::Bool: return "true or false";
    case ParamType::Size: {
      std::string s;
      bool lo = std::isfinite(min), hi = std::isfinite(max);
      if (lo && hi)
        s = fmt::format("a size in [{}, {}]", format_size(uint64_t(min)), format_size(uint64_t(max)));
      else
        s = "a size";
      s += " (bytes, or with a K/M/G/T suffix)";
      if (align > 1) s += fmt::format(", a multiple of {}", format_size(align));
      return s;
    }
    case ParamType::Enum: {
      std::string s = "one of: ";
      for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : "") + choices[i];
      return s;
    }
    case ParamType::Duration: return "a duration in cycles (\"715\", \"715cyc\") or time (\"100ns\", \"1.5us\")";
    case ParamType::String: return "a string";
  }
  return "?";
}

Value parse_value(const ParamSpec& spec, const std::string& raw, const std::string& origin) {
  const std::string text = trim(raw);
  Value v;
  v.type = spec.type;
  auto bad = [&](const std::string& why) -> UserError {
    return UserError(fmt::format("{}: {} = '{}': {}; allowed: {}", origin, spec.key, text, why,
                                 spec.allowed()));
  };
  auto check_range = [&](double x, const std::string& shown) {
    if (x < spec.min || x > spec.max)
      throw bad(fmt::format("{} is out of range", shown));
  };
  switch (spec.type) {
    case ParamType::Int: {
      if (!parse_int(text, v.i)) throw bad("not an integer");
      check_range(double(v.i), text);
      break;
    }
    case ParamType::Float: {
      if (!parse_double(text, v.f)) throw bad("not a number");
      check_range(v.f, text);
      break;
    }
    case ParamType::Bool: {
      std::string t = lower(text);
      if (t == "true" || t == "yes" || t == "on" || t == "1") v.i = 1;
      else if (t == "false" || t == "no" || t == "off" || t == "0") v.i = 0;
      else throw bad("not a boolean");
      break;
    }
    case ParamType::Size: {
      std::string why;
      auto s = parse_size(text, &why);
      if (!s) throw bad(why);
      v.u = *s;
      check_range(double(v.u), text);
      if (spec.align > 1 && v.u % spec.align != 0)
        throw bad(fmt::format("not a multiple of {}", format_size(spec.align)));
      break;
    }
    case ParamType::Enum: {
      for (auto& c : spec.choices)
        if (c == text) v.s = c;
      if (v.s.empty()) {
        for (auto& c : spec.choices)  // be lenient about case only
          if (lower(c) == lower(text)) v.s = c;
      }
      if (v.s.empty()) {
        std::string best;
        size_t bd = 1000;
        for (auto& c : spec.choices) {
          size_t d = edit_distance(lower(c), lower(text));
          if (d < bd) bd = d, best = c;
        }
        std::string hint = (bd <= std::max<size_t>(2, text.size() / 3)) ? fmt::format(" (did you mean '{}'?)", best) : "";
        throw bad("not a known value" + hint);
      }
      break;
    }
    case ParamType::Duration: {
      std::string why;
      if (!parse_duration(text, v.d, &why)) throw bad(why);
      break;
    }
    case ParamType::String: v.s = text; break;
  }
  return v;
}

std::string canonical_text(const ParamSpec& spec, const Value& v) {
  switch (spec.type) {
    case ParamType::Int: return std::to_string(v.i);
    case ParamType::Float: return fmt::format("{}", v.f);
    case ParamType::Bool: return v.i ? "true" : "false";
    case ParamType::Size: return format_size(v.u);
    case ParamType::Enum:
    case ParamType::String: return v.s;
    case ParamType::Duration:
      return v.d.is_time ? fmt::format("{}ns", v.d.value) : fmt::format("{}cyc", v.d.value);
  }
  return "";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// ---------------------------------------------------------------------------------------------
// Schema

void Schema::add(ParamSpec spec) {
  if (index_.count(spec.key)) panic("parameter '{}' declared twice", spec.key);
  if (spec.key.find('.') == std::string::npos)
    panic("parameter '{}' has no section (keys are section.name)", spec.key);
  // The default must itself be valid: a declaration bug otherwise.
  if (!placeholder_defaults_) try {
    parse_value(spec, spec.default_text, "default of " + spec.key);
  } catch (const UserError& e) {
    panic("invalid default: {}", e.what());
  }
  index_.emplace(spec.key, specs_.size());
  specs_.push_back(std::move(spec));
}

void Schema::add_variant(ParamSpec spec, const std::string& variant) {
  auto it = index_.find(spec.key);
  if (it == index_.end()) {
    std::string def = spec.default_text;
    spec.variants = {variant};
    spec.variant_defaults[variant] = def;
    add(std::move(spec));
    return;
  }
  ParamSpec& s = specs_[it->second];
  if (s.type != spec.type || s.choices != spec.choices)
    panic("parameter '{}' declared with different types for two platforms", spec.key);
  if (!placeholder_defaults_) parse_value(s, spec.default_text, "default of " + spec.key + " on " + variant);
  // A key every platform has stays so; a platform-only key gains this platform.
  if (!s.variants.empty() && std::find(s.variants.begin(), s.variants.end(), variant) == s.variants.end())
    s.variants.push_back(variant);
  s.variant_defaults[variant] = spec.default_text;
}

void Schema::set_default_source(std::string_view key, const std::string& variant, const std::string& source) {
  auto it = index_.find(key);
  if (it == index_.end()) panic("default source for undeclared key '{}'", key);
  specs_[it->second].default_sources[variant] = source;
}

void Schema::set_variant_default(std::string_view key, const std::string& variant, const std::string& text,
                                 const std::string& source) {
  auto it = index_.find(key);
  if (it == index_.end()) panic("default for undeclared key '{}'", key);
  ParamSpec& s = specs_[it->second];
  s.variant_defaults[variant] = canonical_text(s, parse_value(s, text, source));
  s.default_sources[variant] = source;
}

const ParamSpec* Schema::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &specs_[it->second];
}

bool Schema::has_section(std::string_view section) const {
  std::string prefix = std::string(section) + ".";
  auto it = index_.lower_bound(prefix);
  return it != index_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> Schema::sections() const {
  std::vector<std::string> out;
  for (auto& s : specs_) {
    auto sec = s.section();
    if (std::find(out.begin(), out.end(), sec) == out.end()) out.push_back(sec);
  }
  return out;
}

std::string Schema::closest_key(std::string_view key) const {
  std::string k(key);
  auto leaf = [](std::string_view s) {
    auto p = s.rfind('.');
    return p == std::string_view::npos ? s : s.substr(p + 1);
  };
  std::string best;
  size_t bd = SIZE_MAX;
  for (auto& s : specs_) {
    size_t d = edit_distance(lower(s.key), lower(k));
    // The same leaf in another section is a likely mix-up of sections.
    if (leaf(s.key) == leaf(k)) d = std::min<size_t>(d, 2);
    if (d < bd) bd = d, best = s.key;
  }
  if (bd > std::max<size_t>(3, k.size() / 3)) return "";
  return best;
}

std::string Schema::closest_section(std::string_view section) const {
  std::string best;
  size_t bd = SIZE_MAX;
  for (auto& s : sections()) {
    size_t d = edit_distance(lower(s), lower(std::string(section)));
    if (d < bd) bd = d, best = s;
  }
  if (bd > std::max<size_t>(2, section.size() / 3)) return "";
  return best;
}

// ---------------------------------------------------------------------------------------------
// Config

Config::Config(const Schema& schema) : schema_(&schema) {
  if (!schema.variant_key().empty()) {
    const ParamSpec* vk = schema.find(schema.variant_key());
    if (vk) variant_ = vk->default_text;
  }
  for (auto& s : schema.all()) apply_default(s);
}

// The default of `spec` for the selected variant.
void Config::apply_default(const ParamSpec& spec) {
  std::string text = spec.default_text;
  std::string origin = "default";
  auto src = spec.default_sources.find("");
  if (src != spec.default_sources.end()) origin = "default (" + src->second + ")";
  auto it = spec.variant_defaults.find(variant_);
  if (it != spec.variant_defaults.end()) {
    text = it->second;
    src = spec.default_sources.find(variant_);
    origin = "default (" + variant_ + (src == spec.default_sources.end() ? "" : ": " + src->second) + ")";
  }
  Setting st;
  if (schema_->placeholder_defaults()) {  // read only to find what a platform file sets
    st.text = text;
    st.origin = origin;
    settings_[spec.key] = std::move(st);
    return;
  }
  st.value = parse_value(spec, text, origin);
  st.text = canonical_text(spec, st.value);
  st.origin = origin;
  settings_[spec.key] = std::move(st);
}

bool Config::from_other_platform_file(const std::string& origin) const {
  auto colon = origin.rfind(':');
  if (colon == std::string::npos) return false;
  auto fv = file_variant_.find(origin.substr(0, colon));
  return fv != file_variant_.end() && fv->second != variant_;
}

void Config::check_variant_keys(std::vector<std::string>* skipped) const {
  for (auto& s : schema_->all()) {
    if (s.applies_to(variant_) || is_default(s.key)) continue;
    const std::string& origin = setting(s.key).origin;
    auto colon = origin.rfind(':');
    if (colon != std::string::npos) {
      auto fv = file_variant_.find(origin.substr(0, colon));
      if (fv != file_variant_.end() && fv->second != variant_ && s.applies_to(fv->second)) {
        if (skipped) skipped->push_back(s.key + " (" + origin + ", for " + fv->second + ")");
        continue;
      }
    }
    std::string has;
    for (size_t i = 0; i < s.variants.size(); ++i) has += (i ? ", " : "") + s.variants[i];
    throw UserError(fmt::format("{}: {} does not apply to {} = {} (only to: {})",
                                setting(s.key).origin, s.key, schema_->variant_key(), variant_, has));
  }
}

void Config::set(const std::string& key, const std::string& text, const std::string& origin) {
  const ParamSpec* spec = schema_->find(key);
  if (!spec) {
    auto dot = key.rfind('.');
    std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
    if (section.empty()) {
      std::string hint = schema_->closest_key(key);
      throw UserError(fmt::format("{}: '{}' is not a key: keys are written section.name, or as "
                                  "name under a [section] header{}",
                                  origin, key, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
    }
    if (!schema_->has_section(section)) {
      std::string hint = schema_->closest_section(section);
      throw UserError(fmt::format("{}: unknown section [{}] (key '{}'){}; `mmusim list` shows every key",
                                  origin, section, key,
                                  hint.empty() ? "" : fmt::format("; did you mean [{}]?", hint)));
    }
    std::string hint = schema_->closest_key(key);
    throw UserError(fmt::format("{}: unknown key '{}'{}; `mmusim list` shows every key", origin, key,
                                hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
  }
  Setting st;
  st.value = parse_value(*spec, text, origin);
  st.text = canonical_text(*spec, st.value);
  st.origin = origin;
  settings_[key] = std::move(st);
  if (key == schema_->variant_key()) {
    auto colon = origin.rfind(':');
    if (colon != std::string::npos && origin.compare(0, 5, "--set") != 0)
      file_variant_[origin.substr(0, colon)] = settings_[key].text;
  }
  if (key == schema_->variant_key() && settings_[key].text != variant_) {
    // A new platform: every key still at its default takes that platform's default, and so does
    // every platform-dependent key set by another platform's own file (a platform config
    // describes that platform's hardware; its other settings stay).
    variant_ = settings_[key].text;
    for (auto& s : schema_->all()) {
      if (s.key == key) continue;
      const bool platform_dependent = !s.variants.empty() || !s.variant_defaults.empty();
      if (is_default(s.key) ||
          (platform_dependent && from_other_platform_file(settings_[s.key].origin)))
        apply_default(s);
    }
  }
}

void Config::set_override(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos)
    throw UserError(fmt::format("--set '{}': expected SECTION.KEY=VALUE", assignment));
  std::string key = trim(assignment.substr(0, eq));
  set(key, assignment.substr(eq + 1), "--set " + key);
}

void Config::load_file(const std::string& path) {
  std::vector<std::string> stack;
  load_file_inner(path, stack);
}

void Config::load_text(const std::string& path, const std::string& text) {
  std::vector<std::string> stack;
  load_text_inner(path, text, stack);
}

namespace {

// One setting of an INI file, with the line it is on.
struct IniSetting {
  int line;
  std::string key;    // section-prefixed: "core.rob_entries" for rob_entries under [core]
  std::string value;  // trimmed; may be empty
};

struct IniFile {
  std::vector<IniSetting> settings;          // in file order (a repeated key: the later wins)
  std::map<std::string, int> section_lines;  // section -> line of its header
};

// The INI reader (the only one: Boost.Program_options reads the command line, not the files).
// `[section]` headers, `key = value` lines, `#` starts a comment anywhere on a line, blank lines;
// keys and values are trimmed, a value may contain '=' (the first '=' ends the key). Anything
// else is an error naming file:line and what was expected.
IniFile read_ini(const std::string& path, const std::string& text) {
  IniFile sc;
  std::string section;
  int lineno = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ++lineno;
    auto hash = line.find('#');
    std::string t = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (t.empty()) continue;
    if (t.front() == '[') {
      if (t.back() != ']' || t.size() < 3)
        throw UserError(fmt::format("{}:{}: malformed section header '{}'; expected [name]", path,
                                    lineno, t));
      section = t.substr(1, t.size() - 2);
      for (char c : section)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
          throw UserError(fmt::format("{}:{}: malformed section name '{}'", path, lineno, section));
      if (section.front() == '.' || section.back() == '.')
        throw UserError(fmt::format("{}:{}: malformed section name '{}'", path, lineno, section));
      sc.section_lines.emplace(section, lineno);
      continue;
    }
    auto eq = t.find('=');
    if (eq == std::string::npos)
      throw UserError(fmt::format("{}:{}: '{}' is not a setting; expected key = value", path,
                                  lineno, t));
    std::string key = trim(t.substr(0, eq));
    if (key.empty())
      throw UserError(fmt::format("{}:{}: '{}' has no key before '='", path, lineno, t));
    for (char c : key)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
        throw UserError(fmt::format("{}:{}: malformed key '{}'", path, lineno, key));
    sc.settings.push_back(
        {lineno, section.empty() ? key : section + "." + key, trim(t.substr(eq + 1))});
  }
  return sc;
}

}  // namespace

void Config::load_file_inner(const std::string& path, std::vector<std::string>& stack) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path, ec))
    throw UserError(fmt::format("cannot open config file '{}'", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  load_text_inner(path, text, stack);
}

void Config::load_text_inner(const std::string& path, const std::string& text, std::vector<std::string>& stack) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(fs::path(path), ec);
  std::string id = ec ? path : canon.string();
  if (std::find(stack.begin(), stack.end(), id) != stack.end()) {
    std::string chain;
    for (auto& s : stack) chain += s + " -> ";
    throw UserError(fmt::format("{}: include cycle: {}{}", stack.back(), chain, id));
  }
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t')) {
      int line = 1 + int(std::count(text.begin(), text.begin() + long(i), '\n'));
      throw UserError(fmt::format("{}:{}: not a text config file (byte 0x{:02x}); expected INI "
                                  "text: [section] headers and key = value lines",
                                  path, line, c));
    }
  }

  IniFile sc = read_ini(path, text);
  if (sc.settings.empty() && sc.section_lines.empty())
    throw UserError(fmt::format("{}: the config file is empty (no sections, no settings)", path));

  stack.push_back(id);
  files_.push_back(path);
  bool seen_setting = false;
  for (const IniSetting& sl : sc.settings) {
    std::string origin = fmt::format("{}:{}", path, sl.line);
    const std::string& value = sl.value;
    if (sl.key == "include") {
      if (seen_setting)
        throw UserError(fmt::format("{}: include must come before the settings it is overridden by "
                                    "(put it first, before any [section])",
                                    origin));
      if (trim(value).empty()) throw UserError(fmt::format("{}: include = (empty): expected a file", origin));
      fs::path inc = fs::path(trim(value));
      if (inc.is_relative()) inc = fs::path(path).parent_path() / inc;
      if (!fs::exists(inc, ec))
        throw UserError(fmt::format("{}: included file '{}' not found (resolved to '{}')", origin,
                                    trim(value), inc.string()));
      load_file_inner(inc.string(), stack);
      continue;
    }
    seen_setting = true;
    auto dot = sl.key.rfind('.');
    std::string section = dot == std::string::npos ? "" : sl.key.substr(0, dot);
    if (!section.empty() && sl.key.compare(dot + 1, std::string::npos, "include") == 0 &&
        !schema_->find(sl.key))
      throw UserError(fmt::format("{}: include inside [{}]: include lines must come first, before "
                                  "any [section]",
                                  origin, section));
    if (!section.empty() && !schema_->has_section(section) && sc.section_lines.count(section)) {
      std::string hint = schema_->closest_section(section);
      throw UserError(fmt::format("{}:{}: unknown section [{}]{}; `mmusim list` shows every key",
                                  path, sc.section_lines[section], section,
                                  hint.empty() ? "" : fmt::format("; did you mean [{}]?", hint)));
    }
    set(sl.key, value, origin);
  }
  stack.pop_back();
}

const Setting& Config::setting(std::string_view key) const {
  auto it = settings_.find(key);
  if (it == settings_.end()) panic("configuration key '{}' was never declared", key);
  return it->second;
}

bool Config::is_default(std::string_view key) const {
  return setting(key).origin.compare(0, 7, "default") == 0;
}

namespace {
void expect(const Schema& s, std::string_view key, ParamType t) {
  const ParamSpec* sp = s.find(key);
  if (!sp) panic("configuration key '{}' was never declared", key);
  if (sp->type != t)
    panic("configuration key '{}' is a {}, read as a {}", key, param_type_name(sp->type),
          param_type_name(t));
}
}  // namespace

int64_t Config::get_int(std::string_view key) const {
  expect(*schema_, key, ParamType::Int);
  return setting(key).value.i;
}
double Config::get_float(std::string_view key) const {
  expect(*schema_, key, ParamType::Float);
  return setting(key).value.f;
}
bool Config::get_bool(std::string_view key) const {
  expect(*schema_, key, ParamType::Bool);
  return setting(key).value.i != 0;
}
uint64_t Config::get_size(std::string_view key) const {
  expect(*schema_, key, ParamType::Size);
  return setting(key).value.u;
}
Duration Config::get_duration(std::string_view key) const {
  expect(*schema_, key, ParamType::Duration);
  return setting(key).value.d;
}
const std::string& Config::get_string(std::string_view key) const {
  const ParamSpec* sp = schema_->find(key);
  if (!sp) panic("configuration key '{}' was never declared", key);
  if (sp->type != ParamType::Enum && sp->type != ParamType::String)
    panic("configuration key '{}' is a {}, read as a string", key, param_type_name(sp->type));
  return setting(key).value.s;
}

std::vector<std::pair<const ParamSpec*, const Setting*>> Config::effective() const {
  std::vector<std::pair<const ParamSpec*, const Setting*>> out;
  for (auto& s : schema_->all()) out.emplace_back(&s, &setting(s.key));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Params binder

ParamSpec Params::spec(const std::string& key, ParamType t, std::string def, const std::string& desc,
                       const std::string& unit) const {
  ParamSpec s;
  s.key = prefix_ + key;
  s.type = t;
  s.default_text = std::move(def);
  s.desc = desc_prefix_ + desc;
  s.unit = unit;
  return s;
}

bool Params::bind(ParamSpec&& s) {
  if (schema_) {
    const StatedDefault* stated = nullptr;
    if (stated_) {
      auto it = stated_->find(s.key);
      if (it != stated_->end()) stated = &it->second;
    }
    if (stated) s.default_text = stated->text;
    const std::string key = s.key;
    if (variant_.empty()) schema_->add(std::move(s));
    else schema_->add_variant(std::move(s), variant_);
    if (stated) schema_->set_default_source(key, variant_, stated->source);
    return false;
  }
  return true;
}

void Params::real(const std::string& key, double& field, double def, double lo, double hi,
                  const std::string& desc, const std::string& unit) {
  ParamSpec s = spec(key, ParamType::Float, fmt::format("{}", def), desc, unit);
  s.min = lo;
  s.max = hi;
  if (bind(std::move(s))) field = config_->get_float(prefix_ + key);
}

void Params::boolean(const std::string& key, bool& field, bool def, const std::string& desc) {
  if (bind(spec(key, ParamType::Bool, def ? "true" : "false", desc, ""))) field = config_->get_bool(prefix_ + key);
}

void Params::size(const std::string& key, uint64_t& field, const std::string& def, uint64_t lo,
                  uint64_t hi, const std::string& desc, uint64_t align) {
  ParamSpec s = spec(key, ParamType::Size, def, desc, "bytes");
  s.min = double(lo);
  s.max = double(hi);
  s.align = align;
  if (bind(std::move(s))) field = config_->get_size(prefix_ + key);
}

void Params::duration(const std::string& key, Duration& field, const std::string& def,
                      const std::string& desc) {
  if (bind(spec(key, ParamType::Duration, def, desc, ""))) field = config_->get_duration(prefix_ + key);
}

void Params::string(const std::string& key, std::string& field, const std::string& def,
                    const std::string& desc) {
  if (bind(spec(key, ParamType::String, def, desc, ""))) field = config_->get_string(prefix_ + key);
}

}  // namespace mmusim
