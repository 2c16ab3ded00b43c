// SPDX-License-Identifier: GPL-2.0-only
// The `mmusim` command: run, list, describe, --help, --version (../shared/INTERFACE.md).
// Exit status: 0 success, 2 a user error (bad config or argument), 1 an internal error, 3 the
// run finished but the simulated kernel killed the workload (an OOM kill in its memory cgroup, a
// SIGSEGV or SIGBUS): its statistics are written, stderr says what was killed and why.
#include <systemc>

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/params.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"
#include "platforms/cli.hpp"

int sc_main(int argc, char* argv[]) {
  try {
    return mmusim::cli_main(argc, argv, std::cout, std::cerr);
  } catch (const mmusim::UserError& e) {
    std::cerr << "mmusim: error: " << e.what() << "\n";
    return 2;
  } catch (const mmusim::SimulatedSystemError& e) {
    std::cerr << "mmusim: the simulated system failed: " << e.what() << "\n";
    return 1;
  } catch (const mmusim::InternalError& e) {
    std::cerr << "mmusim: internal error (a bug in the simulator): " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mmusim: internal error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char* argv[]) {
  // SystemC prints a banner when it starts unless told not to; our output is the table and the
  // statistics, so it must be told before it starts.
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}
