// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/platform.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "kernel_mm/cost.hpp"
#include "kernel_mm/kernel.hpp"
#include "platforms/common/system.hpp"
#include "platforms/functional/functional.hpp"
#include "platforms/hw_platform.hpp"
#include "workloads/workload.hpp"

namespace mmusim {

Schema build_schema() {
  Schema s;
  Params p = Params::declaring(s);
  PlatformParams().visit(p);
  kmm::KernelParams().visit(p);
  wl::WorkloadParams().visit(p);
  kmm::CostModel().visit(p);
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
