// SPDX-License-Identifier: GPL-2.0-only
// libFuzzer harness: Config::load_file() on config files written from the input, with includes
// (harness.hpp: config_file_input), on the real schema (schema_from_list.hpp).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fuzz/harness.hpp"
#include "fuzz/schema_from_list.hpp"

namespace {
std::string dir;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/mmusim-fuzz-XXXXXX";
  dir = mkdtemp(tmpl);
  mmusim::fuzz::fuzz_schema();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string f = mmusim::fuzz::config_file_input(mmusim::fuzz::fuzz_schema(), dir,
                                                  std::string(reinterpret_cast<const char*>(data), size));
  if (!f.empty()) {
    std::fprintf(stderr, "finding: %s\n", f.c_str());
    std::abort();
  }
  return 0;
}
