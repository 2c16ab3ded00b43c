// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/platform.hpp"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/log.hpp"
#include "kernel_mm/cost.hpp"
#include "kernel_mm/kernel.hpp"
#include "os/system.hpp"
#include "platforms/functional/functional.hpp"
#include "platforms/hw_platform.hpp"
#include "platforms/platform_files.hpp"
#include "workloads/workload.hpp"

namespace mmusim {

namespace {

// What a platform's config file is the home of: its clock and the prices of the hardware
// instructions (the H items of kernel_mm/cost.hpp). The rest of the platform's presets are
// declared by the hardware models (visit_hw_params) and the files restate them.
bool from_platform_file(const std::string& key) {
  if (key == "platform.clock_ghz") return true;
  for (size_t i = 0; i < kmm::kNumCosts; ++i)
    if (kmm::cost_is_hardware(kmm::Cost(i)) && key == std::string("cost.") + kmm::cost_name(kmm::Cost(i)))
      return true;
  return false;
}

// Every key, with the generic default of each hardware price from `hw_default`.
Schema declare_schema(const std::function<std::string(kmm::Cost)>& hw_default) {
  Schema s;
  Params p = Params::declaring(s);
  PlatformParams().visit(p);
  kmm::KernelParams().visit(p);
  wl::WorkloadParams().visit(p);
  kmm::CostModel().visit(p, hw_default);
  FunctionalParams().visit(p);
  // The hardware of each platform, with that platform's presets as its defaults.
  for (auto [name, variant] : {std::pair{PlatformName::i7_12700kf, "i7-12700kf"},
                               std::pair{PlatformName::neoverse_n1, "neoverse-n1"}}) {
    Params vp = Params::declaring(s, variant);
    hw::CoreMmuParams hp = platform_preset(name);
    visit_hw_params(hp, vp);
  }
  s.set_variant_key("platform.name");
  return s;
}

}  // namespace

// The platform config files (platform_files.hpp) are read with a schema whose hardware prices are
// placeholders; then the schema is declared again with what they state: each file's values as
// its platform's defaults, and, as the generic default (the functional platform, and a platform
// whose file leaves an item out because its ISA never charges it), the value of the first file
// that states the item, the i7-12700kf's before the neoverse-n1's. `mmusim describe` names the
// file and line of each such default.
Schema build_schema() {
  const Schema pre = declare_schema({});
  struct Stated {
    std::string text, origin;
  };
  std::vector<std::pair<std::string, std::map<std::string, Stated>>> stated;  // per platform file
  for (const PlatformFile& f : platform_files()) {
    Config c(pre);
    c.load_text(f.path, f.text);
    MMUSIM_CHECK(c.get_string("platform.name") == f.platform, "{} sets platform.name = {}", f.path,
                 c.get_string("platform.name"));
    std::map<std::string, Stated> keys;
    for (auto& [spec, st] : c.effective())
      if (from_platform_file(spec->key) && !c.is_default(spec->key)) keys[spec->key] = {st->text, st->origin};
    stated.emplace_back(f.platform, std::move(keys));
  }
  auto first_stated = [&](const std::string& key) -> const Stated* {
    for (auto& [platform, keys] : stated) {
      auto it = keys.find(key);
      if (it != keys.end()) return &it->second;
    }
    return nullptr;
  };
  Schema s = declare_schema([&](kmm::Cost c) {
    const std::string key = std::string("cost.") + kmm::cost_name(c);
    const Stated* st = first_stated(key);
    MMUSIM_CHECK(st, "no platform config file states {} (configs/platforms/*.cfg)", key);
    return st->text;
  });
  for (size_t i = 0; i < kmm::kNumCosts; ++i) {
    if (!kmm::cost_is_hardware(kmm::Cost(i))) continue;
    const std::string key = std::string("cost.") + kmm::cost_name(kmm::Cost(i));
    s.set_default_source(key, "", "from " + first_stated(key)->origin);
  }
  for (auto& [platform, keys] : stated) {
    Params vp = Params::declaring(s, platform);
    for (auto& [key, st] : keys) {
      const ParamSpec* generic = s.find(key);
      MMUSIM_CHECK(generic, "{} is not declared", key);
      if (generic->type == ParamType::Duration) {
        Duration d;
        vp.duration(key, d, st.text, "");
      } else {
        double ghz = 0;
        vp.real(key, ghz, std::stod(st.text), generic->min, generic->max, "", generic->unit);
      }
      s.set_default_source(key, platform, st.origin);
    }
  }
  return s;
}

std::unique_ptr<Platform> build_platform(const Config& cfg, Stats& stats, Trace& trace) {
  std::vector<std::string> skipped;
  cfg.check_variant_keys(&skipped);
  for (auto& k : skipped)
    log::get("config")->info("not used by platform.name = {}: {}", cfg.get_string("platform.name"), k);
  PlatformParams pp;
  Params rd = Params::reading(cfg);
  pp.visit(rd);
  switch (pp.name) {
    case PlatformName::functional:
      return std::make_unique<FunctionalPlatform>("functional", cfg, stats, trace);
    case PlatformName::i7_12700kf:
    case PlatformName::neoverse_n1:
      return std::make_unique<HwPlatform>(cfg.get_string("platform.name").c_str(), cfg, stats, trace);
  }
  panic("unknown platform");
}

}  // namespace mmusim
