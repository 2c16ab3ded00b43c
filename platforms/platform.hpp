// SPDX-License-Identifier: GPL-2.0-only
// A platform: a full system assembled from configuration as SystemC modules. platforms/ only
// instantiates and connects; timing and policy live in models/ and kernel_mm/.
#pragma once

#include <systemc>

#include <memory>
#include <string>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"

namespace mmusim {

class Platform : public sc_core::sc_module {
 public:
  explicit Platform(sc_core::sc_module_name n) : sc_core::sc_module(n) {}
  // After sc_start() returns: write the end-of-run statistics.
  virtual void finish(double host_seconds) = 0;
  // Progress of the measured pass in [0, 1] and simulated time, for --progress.
  virtual double progress() const = 0;
  virtual uint64_t uops() const = 0;
  // After finish(): empty if the workload ended by itself; otherwise how its tasks were killed
  // (System::killed_report()).
  virtual std::string killed_report() const = 0;
};

// Every parameter of every module, declared (the schema `mmusim list` prints).
Schema build_schema();
// The platform that `platform.name` names, elaborated.
std::unique_ptr<Platform> build_platform(const Config& cfg, Stats& stats, Trace& trace);

// sc_core::sc_start(), then tells AddressSanitizer (when the process has it) that the thread is on
// its own stack again. Debian's SystemC 2.3.4 announces a coroutine switch to ASan in
// sc_cor_pkg_qt::yield() but not in sc_cor_pkg_qt::abort(), the switch away from an SC_THREAD whose
// function returned: when the simulation ends that way, ASan keeps the finished coroutine's stack
// as the main thread's, that stack is freed with the process, and LeakSanitizer's scan at exit
// reads it (its tracer dies with SIGSEGV when the memory is unmapped). Without ASan: just sc_start().
void run_simulation();
void run_simulation(const sc_core::sc_time& duration, sc_core::sc_starvation_policy policy);

}  // namespace mmusim
