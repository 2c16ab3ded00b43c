// SPDX-License-Identifier: GPL-2.0-only
// The functional platform: no hardware timing. Each core executes its task's micro-ops in program
// order through kmm::UserAccess (a walk per access, no TLB, so no stale entries and no spurious
// faults; the fault and syndrome rules are base/hwwalk.hpp's, the functions the timed cores'
// TranslationPath applies), delivering faults and system calls through the System. Time is one
// cycle per micro-op plus the kernel's cost account: useful to check kernel logic and count faults
// fast.
#pragma once

#include <exception>
#include <memory>

#include "base/tlb_maintenance.hpp"
#include "kernel_mm/user_access.hpp"
#include "os/system.hpp"
#include "platforms/platform.hpp"

namespace mmusim {

struct FunctionalParams {
  double uop_cycles = 1;
  void visit(Params& p);
};

class FunctionalPlatform : public Platform {
 public:
  SC_HAS_PROCESS(FunctionalPlatform);
  FunctionalPlatform(sc_core::sc_module_name n, const Config& cfg, Stats& stats, Trace& trace);
  void finish(double host_seconds) override;
  std::string killed_report() const override { return sys_.killed_report(); }
  double progress() const override;
  uint64_t uops() const override { return uops_.value(); }

 private:
  void run();
  void run_program();
  void execute(SimTask& t, const wl::Uop& u);
  std::exception_ptr error_;

  kmm::NullMmuHw hw_;
  FunctionalParams fp_;
  System sys_;
  std::unique_ptr<kmm::UserAccess> ua_;
  double now_cycles_ = 0;
  int cpu_ = 0;
  uint64_t counted_cycles_ = 0;
  Counter& uops_;
  Counter& cycles_;
  Counter& bytes_compared_;  // check.bytes_compared: loads checked (wl::kUopCheckValue)
};

}  // namespace mmusim
