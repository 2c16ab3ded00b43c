// SPDX-License-Identifier: GPL-2.0-only
// libFuzzer harness: the size/duration/int/float/bool/enum parsers and their round trips
// (harness.hpp: values_input).
#include <cstdio>
#include <cstdlib>

#include "fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string f = mmusim::fuzz::values_input(std::string(reinterpret_cast<const char*>(data), size));
  if (!f.empty()) {
    std::fprintf(stderr, "finding: %s\n", f.c_str());
    std::abort();
  }
  return 0;
}
