// SPDX-License-Identifier: GPL-2.0-only
// The platform config files (configs/platforms/*.cfg), built into the binary when it is built
// (platforms/CMakeLists.txt generates their table). They are the one home of each platform's
// clock and hardware instruction prices: build_schema() (platform.cpp) reads them with the
// INI reader every config goes through and declares what they state as that platform's defaults,
// so that `platform.name = neoverse-n1` alone, `mmusim list` and `mmusim describe` all give the
// file's values, and describe names the file and line.
#pragma once

#include <vector>

namespace mmusim {

struct PlatformFile {
  const char* platform;  // its platform.name
  const char* path;      // relative to the source tree: "configs/platforms/neoverse-n1.cfg"
  const char* text;
};

// In the order the generic defaults are taken in (the i7-12700kf first; see platform.cpp).
const std::vector<PlatformFile>& platform_files();

}  // namespace mmusim
