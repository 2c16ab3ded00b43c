// SPDX-License-Identifier: GPL-2.0-only
// The kernel's cost account: what the port did, as named items, counted. It does not know how long
// anything takes; the platform turns the account into time with its `cost.*` parameters (one
// duration per item, in cycles or ns) and, for zeroing and copying, through its memory model.
//
// Items are charged where the kernel does the work they name (the exception entry/exit by whoever
// delivers the exception: the core model or the functional driver).
#pragma once

#include <array>
#include <cstdint>

#include "base/params.hpp"

namespace kmm {

#define KMM_COST_ITEMS(X)                                                                          \
  X(exc_entry, "715cyc", "exception delivery and kernel entry, user to kernel (#PF / data abort); Haswell 715 cycles [UARCH B.vi, M]") \
  X(exc_exit, "330cyc", "return to user (IRET / ERET path); Haswell 330 cycles [UARCH B.vi, M]")     \
  X(fault_arch, "150cyc", "arch fault handler fixed work up to handle_mm_fault: do_user_addr_fault / do_page_fault, lock_vma_under_rcu, access checks") \
  X(fault_core, "450cyc", "handle_mm_fault to the PTE decision: __handle_mm_fault, page-table walk, handle_pte_fault, PTL; calibrated on C2 (a one-PTE reuse fault costs 420 ns) with wp_fixed") \
  X(wp_fixed, "50cyc", "do_wp_page decision work: vm_normal_page, the reuse checks of wp_can_reuse_anon_folio; small beside fault_core: the patch author found a spurious fault to cost about as much as the reuse fault it replaces (C3) [calibrated]") \
  X(pte_scan, "10cyc", "one PTE examined by a batch scan (folio_pte_batch*, pte_range_none); C2: about 2 ns of the 14-20 ns per PTE of the whole-folio reuse")        \
  X(pte_write, "33cyc", "one PTE written, cleared or exchanged (set_ptes, get_and_clear, wrprotect, modify_prot_*); calibrated on C2 (whole-folio reuse: 14-20 ns per PTE)") \
  X(page_op, "21cyc", "one struct page update (PageAnonExclusive, per-page mapcount): an atomic bit or count operation; calibrated on C2 with pte_write")              \
  X(folio_op, "20cyc", "one folio-level atomic (refcount, large mapcount, MM-id slots, folio lock)") \
  X(folio_alloc, "400cyc", "allocating a folio: buddy allocator, memcg charge, LRU add")            \
  X(folio_free, "200cyc", "freeing a folio back to the allocator")                                   \
  X(clear_page, "245ns", "zeroing 4 KiB (clear_page / folio_zero_user, per subpage); calibrated on C2 (allocation faults: 4.6 us for 64K, 63-68 us for 1M, 126 us for 2M)")              \
  X(copy_page, "890ns", "copying 4 KiB (copy_user_highpage) from a cold source; calibrated on C2 (a COW fault that copies 4K costs 1,500 ns)")               \
  X(pt_alloc, "300cyc", "allocating and zeroing a page-table page")                                  \
  X(lock_op, "20cyc", "one uncontended lock acquire and release (mmap_lock, VMA lock, PTL, folio lock)") \
  X(invlpg, "350cyc", "x86 INVLPG of one page (about 100 ns on ~2014 hardware) [UARCH B.vi, M-old]") \
  X(flush_full, "300cyc", "x86 full flush of the current PCID (CR3 write) [UARCH F.1, U]")          \
  X(ipi, "1500cyc", "x86 TLB-shootdown IPI to one remote CPU, send and wait for the acknowledgement [U]") \
  X(tlbi_local, "30cyc", "arm64 TLBI VALE1 / VAE1 (this CPU) [UARCH F.2, U]")                      \
  X(tlbi_bcast, "100cyc", "arm64 TLBI VALE1IS / VAE1IS (broadcast to the inner-shareable domain) [UARCH F.2, U]") \
  X(tlbi_asid, "100cyc", "arm64 TLBI ASIDE1IS [U]")                                                  \
  X(dsb_local, "20cyc", "arm64 DSB NSH / ISHST after local maintenance [UARCH F.2, U]")            \
  X(dsb_bcast, "500cyc", "arm64 DSB ISH completing broadcast TLB maintenance [UARCH F.2, U]")      \
  X(syscall, "100cyc", "system call entry and exit")                                                 \
  X(fork_fixed, "20000cyc", "fork(): task and mm creation outside the page-table copy (copy_process, dup_mm)") \
  X(exit_fixed, "10000cyc", "exit(): task teardown outside the page tables")                      \
  X(thread_fixed, "8000cyc", "clone() of a thread (CLONE_VM): task creation without an mm copy [U]") \
  X(vma_op, "500cyc", "one VMA created, copied, split or freed")                                     \
  X(ctx_switch, "2000cyc", "a context switch between tasks")

enum class Cost : uint8_t {
#define KMM_COST_ENUM(name, def, desc) name,
  KMM_COST_ITEMS(KMM_COST_ENUM)
#undef KMM_COST_ENUM
      COUNT
};
inline constexpr size_t kNumCosts = static_cast<size_t>(Cost::COUNT);

const char* cost_name(Cost c);

struct CostAccount {
  std::array<uint64_t, kNumCosts> n{};
  // Bit i set: item i has been charged (n[i] may be non-zero), so that a fault's account, a few
  // items out of all of them, is read and cleared item by item.
  uint32_t used = 0;
  static_assert(kNumCosts <= 32, "CostAccount::used holds a bit per item");
  // Cycles the hardware adds beyond the items' prices (broadcast TLBI contention, waits for
  // kernel locks held by other CPUs): the platform computes them, the account carries them.
  double extra_cycles = 0;
  void charge(Cost c, uint64_t k = 1) {
    n[static_cast<size_t>(c)] += k;
    used |= uint32_t(1) << static_cast<unsigned>(c);
  }
  uint64_t operator[](Cost c) const { return n[static_cast<size_t>(c)]; }
  // fn(i, n[i]) for each item charged, in item order.
  template <typename F>
  void for_each_charged(F&& fn) const {
    for (uint32_t u = used; u; u &= u - 1) {
      const size_t i = size_t(__builtin_ctz(u));
      if (n[i]) fn(i, n[i]);
    }
  }
  void clear() {
    for (uint32_t u = used; u; u &= u - 1) n[size_t(__builtin_ctz(u))] = 0;
    used = 0;
    extra_cycles = 0;
  }
  void add(const CostAccount& o) {
    o.for_each_charged([&](size_t i, uint64_t k) { n[i] += k; });
    used |= o.used;
    extra_cycles += o.extra_cycles;
  }
};

// The platform's price list: `cost.<item>` parameters.
struct CostModel {
  std::array<mmusim::Duration, kNumCosts> d{};
  void visit(mmusim::Params& p);
  const mmusim::Duration& operator[](Cost c) const { return d[static_cast<size_t>(c)]; }
  // Time of an account at `ghz`, in cycles (fractional cycles kept), extra cycles included;
  // `each(item, count)` is called for every charged item on the way (one pass).
  template <typename F>
  double cycles(const CostAccount& a, double ghz, F&& each) const {
    double c = a.extra_cycles;
    a.for_each_charged([&](size_t i, uint64_t k) {
      each(i, k);
      c += double(k) * d[i].cycles(ghz);
    });
    return c;
  }
  double cycles(const CostAccount& a, double ghz) const {
    return cycles(a, ghz, [](size_t, uint64_t) {});
  }
  double price(Cost c, double ghz) const { return d[static_cast<size_t>(c)].cycles(ghz); }
};

}  // namespace kmm
