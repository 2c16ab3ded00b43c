// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/platform.hpp"

#include <pthread.h>

#include <cstddef>
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

// AddressSanitizer's fiber interface (compiler-rt common_interface_defs.h), weak: null without ASan.
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size) __attribute__((weak));
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old)
    __attribute__((weak));
}

namespace mmusim {

namespace {

// See run_simulation(): a "switch" from wherever ASan thinks this thread is to the thread's own
// stack, which it is on. No fake stack is kept (mmusim runs with detect_stack_use_after_return=0).
void asan_back_on_thread_stack() {
  if (__sanitizer_start_switch_fiber == nullptr || __sanitizer_finish_switch_fiber == nullptr) return;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* bottom = nullptr;
  size_t size = 0;
  const bool ok = pthread_attr_getstack(&attr, &bottom, &size) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) return;
  __sanitizer_start_switch_fiber(nullptr, bottom, size);
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
}

}  // namespace

void run_simulation() {
  sc_core::sc_start();
  asan_back_on_thread_stack();
}

void run_simulation(const sc_core::sc_time& duration, sc_core::sc_starvation_policy policy) {
  sc_core::sc_start(duration, policy);
  asan_back_on_thread_stack();
}

namespace {

// Every key, with the generic default of each hardware price from `hw_default` and the hardware
// of each platform from `stated` (platform -> its defaults): the presets (platform_preset) give
// only the structure, which TLBs, arrays and paging-structure caches exist.
Schema declare_schema(const std::function<std::string(kmm::Cost)>& hw_default,
                      const std::map<std::string, StatedDefaults>& stated) {
  Schema s;
  if (stated.empty()) s.set_placeholder_defaults();
  Params p = Params::declaring(s);
  PlatformParams().visit(p);
  kmm::KernelParams().visit(p);
  wl::WorkloadParams().visit(p);
  kmm::CostModel().visit(p, hw_default);
  FunctionalParams().visit(p);
  for (PlatformName name : {PlatformName::i7_12700kf, PlatformName::neoverse_n1, PlatformName::xeon_e5_2699v3}) {
    const char* variant = platform_name(name);
    auto it = stated.find(variant);
    Params vp = Params::declaring(s, variant, it == stated.end() ? nullptr : &it->second);
    hw::CoreMmuParams hp = platform_preset(name);
    visit_hw_params(hp, vp);
    if (std::optional<hw::CoreMmuParams> ep = ecore_preset(name)) {
      Params ev = vp.prefixed("ecore.", "E-core: ");
      visit_ecore_params(*ep, ev);
    }
  }
  s.set_variant_key("platform.name");
  return s;
}

}  // namespace

// The platform config files (platform_files.hpp) are the home of every value they state. They are
// read with a schema whose defaults are placeholders; then the schema is declared again with what
// they state:
// - a hardware key (one the platform's models declare: core, TLBs, walker, caches, memory) has
//   the value its platform's file states as that platform's default; a key the file leaves out
//   (an x86-only rule on the N1, such as core.lfence_latency) takes the value of the first file
//   that states it, the i7-12700kf's before the neoverse-n1's. A hardware key no file states is
//   an error: the C++ presets hold no value.
// - a key every platform has (the clock, the prices, platform.cores, vdso.*) has the file's value
//   as that platform's default; the generic default of a hardware price (the functional platform,
//   and a platform whose ISA never charges it) is the first file's that states it.
// `mmusim describe` and `mmusim list` name the file and line of each such default.
Schema build_schema() {
  const Schema pre = declare_schema({}, {});
  std::vector<std::pair<std::string, StatedDefaults>> stated;  // per platform file, in order
  for (const PlatformFile& f : platform_files()) {
    Config c(pre);
    c.load_text(f.path, f.text);
    MMUSIM_CHECK(c.get_string("platform.name") == f.platform, "{} sets platform.name = {}", f.path,
                 c.get_string("platform.name"));
    StatedDefaults keys;
    for (auto& [spec, st] : c.effective())
      if (spec->key != pre.variant_key() && !c.is_default(spec->key)) keys[spec->key] = {st->text, st->origin};
    stated.emplace_back(f.platform, std::move(keys));
  }
  auto first_stated = [&](const std::string& key) -> const StatedDefault* {
    for (auto& [platform, keys] : stated) {
      auto it = keys.find(key);
      if (it != keys.end()) return &it->second;
    }
    return nullptr;
  };
  // Each platform's hardware: its own file's values, else the first file's.
  std::map<std::string, StatedDefaults> hw;
  for (auto& [platform, keys] : stated) {
    StatedDefaults& d = hw[platform];
    for (auto& [other, other_keys] : stated)
      for (auto& [key, st] : other_keys)
        if (!d.count(key)) d[key] = {st.text, "from " + st.source};
    for (auto& [key, st] : keys) d[key] = st;
    // An E-core's core.X the file leaves out is its P-core's (the pipeline rules and the
    // simulator's own knobs; the widths and buffers it states). Only core.*: a TLB, walker or
    // cache of the E-core taken from the P-core's would be a wrong value no one stated.
    bool has_ecores = false;
    for (PlatformName pn : {PlatformName::i7_12700kf, PlatformName::neoverse_n1, PlatformName::xeon_e5_2699v3})
      if (platform == platform_name(pn) && ecore_preset(pn)) has_ecores = true;
    if (has_ecores) {
      std::vector<std::pair<std::string, StatedDefault>> inherited;
      for (auto& [key, st] : d)
        if (key.rfind("core.", 0) == 0 && !keys.count("ecore." + key))
          inherited.push_back({"ecore." + key, {st.text, "as " + key + ": " + st.source}});
      for (auto& [key, st] : inherited) d[key] = st;
    }
  }
  Schema s = declare_schema(
      [&](kmm::Cost c) {
        const std::string key = std::string("cost.") + kmm::cost_name(c);
        const StatedDefault* st = first_stated(key);
        MMUSIM_CHECK(st, "no platform config file states {} (configs/platforms/*.cfg)", key);
        return st->text;
      },
      hw);
  for (size_t i = 0; i < kmm::kNumCosts; ++i) {
    if (!kmm::cost_is_hardware(kmm::Cost(i))) continue;
    const std::string key = std::string("cost.") + kmm::cost_name(kmm::Cost(i));
    s.set_default_source(key, "", "from " + first_stated(key)->source);
  }
  for (auto& [platform, keys] : stated)
    for (auto& [key, st] : keys) {
      const ParamSpec* spec = s.find(key);
      MMUSIM_CHECK(spec, "{} is not declared", key);
      if (spec->variants.empty()) s.set_variant_default(key, platform, st.text, st.source);
    }
  std::string missing;
  for (const ParamSpec& spec : s.all())
    for (const std::string& v : spec.variants)
      if (!spec.default_sources.count(v)) missing += " " + spec.key + " (" + v + ")";
  MMUSIM_CHECK(missing.empty(), "no platform config file (configs/platforms/*.cfg) states the default of{}",
               missing);
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
    case PlatformName::xeon_e5_2699v3:
      return std::make_unique<HwPlatform>(cfg.get_string("platform.name").c_str(), cfg, stats, trace);
  }
  panic("unknown platform");
}

}  // namespace mmusim
