// SPDX-License-Identifier: GPL-2.0-only
// The parameter schema as JSON: `mmusim list --format json` writes it, and tools that need the
// real schema without the models (the fuzzers, fuzz/schema_from_list.hpp) read it back.
//
//   {"variant_key": "platform.name",
//    "platforms": ["i7-12700kf", "neoverse-n1", "functional"],
//    "parameters": [
//      {"key": "core.rob_entries", "type": "int", "description": "...",
//       "platforms": ["i7-12700kf", "neoverse-n1"],           (only if not every platform has it)
//       "defaults": {"i7-12700kf": 512, "neoverse-n1": 128},  (the default on each platform)
//       "min": 8, "max": 4096, "allowed": "an integer in [8, 4096]"},
//      {"key": "workload.size", "type": "size", "description": "...", "unit": "bytes",
//       "default": 268435456, "defaults": {...}, "min": 2097152, "max": ..., "align": 2097152, ...},
//      {"key": "kernel.wp_reuse", "type": "enum", ..., "values": ["off", "block16", ...]}, ...]}
//
// Parameters in declaration order. Values are typed as in the stats JSON's `config`: int, float
// and bool as JSON numbers and booleans, sizes as numbers of bytes, enums, durations and strings
// as strings. "default" is there for a key every platform has (the default of the platforms
// without their own); "min" and "max" only where the range is bounded; "unit" only if there is
// one; "allowed" is the text `mmusim list` prints.
#pragma once

#include <iosfwd>
#include <string>

#include "base/params.hpp"

namespace mmusim {

void write_schema_json(std::ostream& os, const Schema& schema);

// Adds the parameters of such a document to `schema` (empty). A UserError naming `origin` and
// what is wrong if it is not one.
void read_schema_json(std::istream& in, const std::string& origin, Schema& schema);

}  // namespace mmusim
