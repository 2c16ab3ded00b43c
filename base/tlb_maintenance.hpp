// SPDX-License-Identifier: GPL-2.0-only
// The seam between the kernel port and the hardware models: the TLB-maintenance instructions the
// kernel executes, by architecture, and the physical memory the kernel touches in bulk. It lives
// in base/ so that both sides see it without seeing each other: kernel_mm/ calls it (through
// its arch layer), models/walker/maintenance.hpp gives each operation its effect on one core's
// TLBs and paging-structure caches, and the platform implements it by forwarding there; the
// functional driver has no TLBs (NullMmuHw).
// The time of each instruction is charged to the cost account by the kernel; this interface only
// changes hardware state.
#pragma once

#include <cstdint>

namespace mmusim {

enum class TlbiOp : uint8_t {
  VALE1,   // by VA and ASID, last level only (leaf entries)
  VAE1,    // by VA and ASID, all levels (also walk-cache entries)
  ASIDE1,  // every entry of an ASID
  VMALLE1, // everything
};

inline const char* tlbi_op_name(TlbiOp op) {
  switch (op) {
    case TlbiOp::VALE1: return "vale1";
    case TlbiOp::VAE1: return "vae1";
    case TlbiOp::ASIDE1: return "aside1";
    case TlbiOp::VMALLE1: return "vmalle1";
  }
  return "?";
}

class MmuHw {
 public:
  virtual ~MmuHw() = default;
  // x86: INVLPG on `cpu`: the TLB entries for va's page number (current PCID) and all
  // paging-structure-cache entries of that PCID (SDM Vol 3A §4.10.4.1).
  virtual void x86_invlpg(int cpu, uint16_t pcid, uint64_t va) = 0;
  // x86: MOV CR3 without NOFLUSH (flush_tlb_local): every non-global entry of the PCID and its
  // paging-structure caches on `cpu`.
  virtual void x86_flush_pcid(int cpu, uint16_t pcid) = 0;
  // arm64: TLBI <op>; `broadcast` (the IS forms) reaches every core of the inner-shareable domain.
  // Returns the cycles it costs beyond its price (the broadcast's contention with other cores'
  // broadcasts); the caller adds them to the kernel's account.
  virtual double arm64_tlbi(int cpu, TlbiOp op, uint16_t asid, uint64_t va, bool broadcast) = 0;
  // x86: an IPI from `from` to `to` asking it to flush (flush_tlb_multi), its ICR write done at
  // `sent_at` cycles into the sender's kernel entry; the receiver spends the interrupt's entry and
  // exit and `work` cycles (its flush_tlb_func()). Returns when, on the same clock, the sender
  // sees the receiver's acknowledgement (csd_unlock() after flush_tlb_func()); 0: not timed.
  virtual double x86_ipi(int from, int to, double sent_at, double work) { return 0; }
  // arm64: DSB, completing earlier maintenance.
  virtual void arm64_dsb(int cpu, bool ish) = 0;
  // The kernel zeroed, copied, read or wrote `bytes` at `pa` (caches see it). Page-table entries
  // the kernel reads and writes come here too when wants_kernel_memory().
  virtual void kernel_memory(int cpu, uint64_t pa, uint64_t bytes, bool write) {}
  // The kernel's copy (copy_user_highpage(): REP MOVSB on x86) reads `bytes` at `pa`: returns the
  // cycles the copy waits for the source lines that are not in the CPU's L1D, beyond its price
  // (cost.copy_page, the copy from the L1D); 0 where the hardware has no caches.
  virtual double kernel_copy_source(int cpu, uint64_t pa, uint64_t bytes) {
    kernel_memory(cpu, pa, bytes, false);
    return 0;
  }
  virtual bool wants_kernel_memory() const { return false; }
};

// No TLBs, no caches: the functional driver.
class NullMmuHw : public MmuHw {
 public:
  void x86_invlpg(int, uint16_t, uint64_t) override {}
  void x86_flush_pcid(int, uint16_t) override {}
  double arm64_tlbi(int, TlbiOp, uint16_t, uint64_t, bool) override { return 0; }
  void arm64_dsb(int, bool) override {}
};

}  // namespace mmusim
