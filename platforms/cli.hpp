// SPDX-License-Identifier: GPL-2.0-only
// The command line of `mmusim` (Boost.Program_options), separate from sc_main so tests can call it.
#pragma once

#include <iosfwd>

namespace mmusim {
// Runs one mmusim command. Throws UserError / InternalError; sc_main maps them to exit codes.
int cli_main(int argc, char* argv[], std::ostream& out, std::ostream& err);
}  // namespace mmusim
