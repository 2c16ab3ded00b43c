// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/platform.hpp"

#include <string>

#include "base/error.hpp"
#include "base/log.hpp"
#include "kernel_mm/cost.hpp"
#include "kernel_mm/kernel.hpp"
#include "os/system.hpp"
#include "platforms/functional/functional.hpp"
#include "platforms/hw_platform.hpp"
#include "workloads/workload.hpp"

namespace mmusim {

namespace {

// Keys every platform has (the clock, the kernel's cost.* price list) whose generic defaults are
// x86 values: the neoverse-n1 gets its own (configs/platforms/neoverse-n1.cfg gives the sources),
// and the i7-12700kf restates the generic one so that `mmusim list` shows both.
void declare_arm64_defaults(Schema& s) {
  struct Def {
    const char* key;
    const char* n1;
  };
  static const Def kCosts[] = {
      // Exception entry + return: a 500-cycle placeholder in all [UARCH F.2, U]; the split is [U].
      {"cost.exc_entry", "300cyc"},
      {"cost.exc_exit", "200cyc"},
      // TLBI VALE1 + DSB NSH: 30 + 20 [UARCH F.2, U].
      {"cost.tlbi_local", "30cyc"},
      {"cost.dsb_local", "20cyc"},
      // TLBI VALE1IS 100 per TLBI, DSB ISH 500-2000 (grows with busy cores; one core: the low
      // end) [UARCH F.2 and C.4, U]; ASIDE1IS priced as one broadcast TLBI [U].
      {"cost.tlbi_bcast", "100cyc"},
      {"cost.tlbi_asid", "100cyc"},
      {"cost.dsb_bcast", "500cyc"},
  };
  for (auto [variant, n1] : {std::pair{"i7-12700kf", false}, std::pair{"neoverse-n1", true}}) {
    Params vp = Params::declaring(s, variant);
    double ghz = 0;
    const ParamSpec* clock = s.find("platform.clock_ghz");
    MMUSIM_CHECK(clock, "platform.clock_ghz is not declared");
    // N1: the Altra Q80-30's 3.0 GHz [UARCH C.6, U].
    vp.real("platform.clock_ghz", ghz, n1 ? 3.0 : std::stod(clock->default_text), clock->min, clock->max, "", "GHz");
    for (const Def& d : kCosts) {
      Duration dur;
      const ParamSpec* generic = s.find(d.key);
      MMUSIM_CHECK(generic, "{} is not declared", d.key);
      vp.duration(d.key, dur, n1 ? d.n1 : generic->default_text, "");
    }
  }
}

}  // namespace

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
  declare_arm64_defaults(s);
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
