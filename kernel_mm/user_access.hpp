// SPDX-License-Identifier: GPL-2.0-only
// User memory accesses without a hardware model: each access walks the page tables the way the
// hardware does (base/hwwalk.hpp: accessed/dirty updates, HAFDBS on arm64), takes the fault the
// hardware would take into the kernel's arch fault handler, and retries. No TLB, so no stale
// entries and no spurious faults: the kernel's logic in program order. The functional platform
// and the kernel tests run workloads through it. What differs by ISA (whether the CPU sets the
// accessed flag, the fault syndrome) comes from the arch layer (arch/arch.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/hwwalk.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

class UserAccess {
 public:
  explicit UserAccess(Kernel& k, bool hafdbs = true) : k_(k), hafdbs_(hafdbs) {}

  // Who takes the fault: by default the kernel's arch fault handler directly; a platform routes
  // it through its own delivery (costs, statistics, trace). Returns false if the task would get
  // a signal.
  using FaultHook = std::function<bool(task_struct* t, uint64_t va, uint64_t syndrome)>;
  void set_fault_hook(FaultHook h) { hook_ = std::move(h); }

  // Store/load `n` bytes at `va` of `t`'s address space (may cross pages). False if the access
  // gets a signal (no VMA, no permission): nothing is written beyond the failing page.
  bool store(task_struct* t, uint64_t va, const void* buf, size_t n);
  bool load(task_struct* t, uint64_t va, void* buf, size_t n);
  bool fill(task_struct* t, uint64_t va, uint8_t byte, size_t n);
  bool store8(task_struct* t, uint64_t va, uint8_t v) { return store(t, va, &v, 1); }
  // -1 if the load faults with a signal.
  int load8(task_struct* t, uint64_t va);

  // Translate for an access, faulting as needed. Returns the physical address, or ~0 on a signal.
  uint64_t translate(task_struct* t, uint64_t va, bool write);
  // Translate without faulting: ~0 if the hardware would fault.
  uint64_t probe(task_struct* t, uint64_t va, bool write) const;

  uint64_t faults() const { return faults_; }
  // The syndrome the hardware reports for a failed access (x86 #PF error code / arm64 ESR).
  uint64_t syndrome(const mmusim::pg::Walk& w, bool write) const;

 private:
  Kernel& k_;
  bool hafdbs_;
  uint64_t faults_ = 0;
  FaultHook hook_;
};

}  // namespace kmm
