// SPDX-License-Identifier: GPL-2.0-only
// The hardware presets for the model tests: the platform's structure with the values of its
// built-in config file read in (platforms/hw_platform.hpp platform_hw_params), what
// `platform.name = i7-12700kf` or `neoverse-n1` alone runs. The values live in
// configs/platforms/*.cfg only, so the model tests link mmusim_platforms (tests/CMakeLists.txt).
#pragma once

#include <string>

#include "platforms/hw_platform.hpp"

namespace mmusim::presets {

inline const hw::CoreMmuParams& i7() {
  static const hw::CoreMmuParams p = platform_hw_params(PlatformName::i7_12700kf);
  return p;
}
inline const hw::CoreMmuParams& n1() {
  static const hw::CoreMmuParams p = platform_hw_params(PlatformName::neoverse_n1);
  return p;
}
// The i7-12700kf's Gracemont E-core (the ecore.* keys of its built-in config file).
inline const hw::CoreMmuParams& i7_ecore() {
  static const hw::CoreMmuParams p = platform_ecore_params(PlatformName::i7_12700kf);
  return p;
}
// A TLB of a preset under another name (its statistics and keys are tlb.<name>.*).
inline hw::TlbParams named(hw::TlbParams t, const std::string& name) {
  t.name = name;
  return t;
}

}  // namespace mmusim::presets
