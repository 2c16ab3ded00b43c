// SPDX-License-Identifier: GPL-2.0-only
// A platform with hardware models: `platform.cores` cores (models/core CoreModule: out-of-order
// core, TLBs, page walker, caches) running the kernel port. The same assembly serves the
// i7-12700kf (x86-64) and the neoverse-n1 (arm64); their presets give the parameters.
#pragma once

#include <array>

#include <memory>
#include <optional>
#include <vector>

#include "models/cache/coherence.hpp"
#include "models/core/core_module.hpp"
#include "models/interconnect/tlbi_broadcast.hpp"
#include "os/system.hpp"
#include "platforms/common/system_os.hpp"
#include "platforms/platform.hpp"

namespace mmusim {

// SMT: the second hardware thread's tag in the ASIDs of the TLBs it shares (above the 12 PCID bits).
inline constexpr unsigned kSmtTagShift = 12;

// The kernel's TLB maintenance, routed to the cores' TLBs and walkers.
class PlatformMmuHw : public kmm::MmuHw {
 public:
  void x86_invlpg(int cpu, uint16_t pcid, uint64_t va) override;
  void x86_flush_pcid(int cpu, uint16_t pcid) override;
  double arm64_tlbi(int cpu, kmm::TlbiOp op, uint16_t asid, uint64_t va, bool broadcast) override;
  double x86_ipi(int from, int to, double sent_at, double work) override;
  void arm64_dsb(int cpu, bool ish) override {}
  void kernel_memory(int cpu, uint64_t pa, uint64_t bytes, bool write) override;
  double kernel_copy_source(int cpu, uint64_t pa, uint64_t bytes) override;
  bool wants_kernel_memory() const override { return true; }
  std::vector<hw::CoreModule*> cores;
  // Multi-core: what an IPI costs its receiver (platform.ipi_handler), the interconnect's
  // broadcast-TLBI timing (null: one core).
  // Per CPU, in its own cycles:
  std::vector<double> ipi_handler_cycles;  // the receiver's interrupt entry and exit
  std::vector<double> ipi_latency_cycles;  // platform.ipi_latency: ICR write to the handler's start
  std::vector<std::vector<double>> ack_cycles;  // [from][to]: the csd line back to the sender
                                               // (coherence.transfer_latency of the pair)
  hw::TlbiBroadcast* tlbi = nullptr;
  const kmm::Kernel* kernel = nullptr;  // for the current time of a kernel entry
  Counter* ipis = nullptr;
  // cache.kernel.<level>: where the kernel's bulk traffic found its lines (MemoryHierarchy::touch).
  std::array<Counter*, 4> kernel_lines{};
  void count_kernel_lines(const hw::MemoryHierarchy::Touch& t);
  // A page copy's source misses in flight at once (half the core's fill buffers: the copy's
  // destination lines take the other half), and the cycles copies waited for them.
  std::vector<double> copy_mlp;  // per CPU
  double ghz = 1;  // platform.clock_ghz: the kernel's time in the P-cores' cycles
  std::vector<double> cpu_ghz;  // each CPU's clock, where they differ (E-cores); empty: `ghz`
  double ghz_of(int cpu) const { return cpu_ghz.empty() ? ghz : cpu_ghz[size_t(cpu)]; }
  Counter* copy_wait = nullptr;
};

// The hardware of a platform: its structure (declared once per platform variant; the values are
// its config file's, see build_schema), and the structure with the built-in file's values read in
// (what `platform.name = ...` alone runs; for tests that build the hardware by hand).
hw::CoreMmuParams platform_preset(PlatformName name);
hw::CoreMmuParams platform_hw_params(PlatformName name);
void visit_hw_params(hw::CoreMmuParams& p, Params& v);
// The E-cores of a platform that has them (the i7-12700kf's Gracemont cores): their structure,
// whose keys are the `ecore.`-prefixed family (ecore.tlb.dtlb.entries, ecore.core.rob_entries,
// ...); nullopt for a platform without E-cores.
std::optional<hw::CoreMmuParams> ecore_preset(PlatformName name);
// The E-core's own hardware under `v` (already prefixed "ecore."): TLBs, walker, L1D, the
// cluster's L2, core, and the LLC hit latency in its cycles (cache.llc_latency). Not the LLC or
// memory: those are the platform's, shared with the P-cores.
void visit_ecore_params(hw::CoreMmuParams& e, Params& v);
// The E-core preset with platform `name`'s built-in config read in (its defaults).
hw::CoreMmuParams platform_ecore_params(PlatformName name);

class HwPlatform : public Platform {
 public:
  HwPlatform(sc_core::sc_module_name n, const Config& cfg, Stats& stats, Trace& trace);
  // The cores go last first: an SMT sibling uses the CoreMmu the core before it owns.
  ~HwPlatform() override {
    while (!cores_.empty()) cores_.pop_back();
  }
  void finish(double host_seconds) override;
  std::string killed_report() const override { return sys_.killed_report(); }
  double progress() const override;
  uint64_t uops() const override;
  System& system() { return sys_; }
  hw::CoreModule& core(int cpu) { return *cores_.at(size_t(cpu)); }

 private:
  void setup_sockets(const Config& cfg, const hw::CoreMmuParams& p, Stats& stats);
  PlatformMmuHw mmu_;
  System sys_;
  SystemOs os_;
  std::vector<std::unique_ptr<hw::Cache>> llcs_;  // one per socket, shared by its cores
  // E-cores: each cluster's L2 (4 cores share one) and the cores' hierarchies of each cluster.
  std::vector<std::unique_ptr<hw::Cache>> cluster_l2_;
  std::vector<std::vector<hw::MemoryHierarchy*>> cluster_mates_;
  std::vector<std::vector<hw::MemoryHierarchy*>> llc_sharers_;  // per socket: its cores' caches (one per core)
  std::unique_ptr<hw::TlbiBroadcast> tlbi_;
  std::unique_ptr<hw::KernelLineCoherence> lines_;
  std::vector<std::unique_ptr<hw::DramChannel>> fills_;  // several cores: each node's DRAM read path
  std::vector<std::unique_ptr<hw::DramChannel>> links_;  // several sockets: each one's reads from other nodes
  hw::MemoryHierarchy::Numa numa_;                       // several sockets
  hw::MemoryHierarchy::Peers peers_;         // several cores: MESI between their private caches  // several cores: the kernel data's transfers
  std::vector<std::unique_ptr<hw::CoreModule>> cores_;
};

}  // namespace mmusim
