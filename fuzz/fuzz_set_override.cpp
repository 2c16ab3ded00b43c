// SPDX-License-Identifier: GPL-2.0-only
// libFuzzer harness: `--set SECTION.KEY=VALUE` overrides, one per input line (harness.hpp:
// set_override_input), on the real schema.
#include <cstdio>
#include <cstdlib>

#include "fuzz/harness.hpp"
#include "fuzz/schema_from_list.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mmusim::fuzz::fuzz_schema();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string f = mmusim::fuzz::set_override_input(mmusim::fuzz::fuzz_schema(),
                                                   std::string(reinterpret_cast<const char*>(data), size));
  if (!f.empty()) {
    std::fprintf(stderr, "finding: %s\n", f.c_str());
    std::abort();
  }
  return 0;
}
