// SPDX-License-Identifier: GPL-2.0-only
// `mmusim record`: a real program run under the recorder (platforms/record.cpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mmusim {

// `args`: what follows "record". Returns the exit status; a UserError for bad arguments, a program
// that did not start under the recorder, or a recording that is not whole.
int cmd_record(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mmusim
