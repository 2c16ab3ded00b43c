// SPDX-License-Identifier: GPL-2.0-only
// The kernel's cost account: what the port did, as named items, counted. It does not know how long
// anything takes; the platform turns the account into time with its `cost.*` parameters (one
// duration per item, in cycles or ns) and, for zeroing and copying, through its memory model.
//
// Items are charged where the kernel does the work they name (the exception entry/exit by whoever
// delivers the exception: the core model or the functional driver).
//
// Two kinds of item: S, the kernel's software paths, with their default price here (calibrated on
// the reference experiments or marked [U]); H, hardware instructions and exception delivery,
// whose prices belong to the machine: they have no default here, each platform's config file
// (configs/platforms/*.cfg, built into the binary: platforms/platform.cpp) states them with their
// sources.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "base/params.hpp"

namespace kmm {

#define KMM_COST_ITEMS(S, H)                                                                          \
  H(exc_entry, "exception delivery and kernel entry, user to kernel (#PF / data abort)")            \
  H(exc_exit, "return to user (IRET / ERET path)")                                                  \
  S(fault_arch, "150cyc", "arch fault handler fixed work up to handle_mm_fault: do_user_addr_fault / do_page_fault, lock_vma_under_rcu, access checks [U]") \
  S(fault_core, "450cyc", "handle_mm_fault to the PTE decision: __handle_mm_fault, page-table walk, handle_pte_fault, PTL; calibrated on C2 (a one-PTE reuse fault costs 420 ns) with wp_fixed") \
  S(wp_fixed, "50cyc", "do_wp_page decision work: vm_normal_page, the reuse checks of wp_can_reuse_anon_folio; small beside fault_core: the patch author found a spurious fault to cost about as much as the reuse fault it replaces (C3) [calibrated]") \
  S(pte_scan, "10cyc", "one PTE examined by a batch scan (folio_pte_batch*, pte_range_none); C2: about 2 ns of the 14-20 ns per PTE of the whole-folio reuse")        \
  S(pte_write, "33cyc", "one PTE written, cleared or exchanged (set_ptes, get_and_clear, wrprotect, modify_prot_*); calibrated on C2 (whole-folio reuse: 14-20 ns per PTE)") \
  S(page_op, "21cyc", "one struct page update (PageAnonExclusive, per-page mapcount): an atomic bit or count operation; calibrated on C2 with pte_write")              \
  S(folio_op, "20cyc", "one folio-level atomic (refcount, large mapcount, MM-id slots, folio lock) [U]") \
  S(folio_alloc, "400cyc", "allocating a folio: buddy allocator, memcg charge, LRU add [U]")            \
  S(folio_free, "200cyc", "freeing a folio back to the allocator [U]")                                   \
  S(clear_page, "245ns", "zeroing 4 KiB (clear_page / folio_zero_user, per subpage); calibrated on C2 (allocation faults: 4.6 us for 64K, 63-68 us for 1M, 126 us for 2M)")              \
  S(copy_page, "141ns", "copying 4 KiB (copy_user_highpage) with its source in the L1D: the copy's own work and its stores to a destination no cache holds; the wait for source lines beyond the L1D is the platform's (their latencies over half the fill buffers); calibrated on C2 (a COW fault that copies 4K from a cold source costs 1,500 ns; its 64 source lines from DRAM wait about 750 ns on the i7-12700kf: 8 rounds of 8 misses at memory.latency, each round held by the transfers of its 8 lines)")               \
  S(pt_alloc, "300cyc", "allocating and zeroing a page-table page [U]")                                  \
  S(lock_op, "20cyc", "one uncontended lock acquire and release (mmap_lock, VMA lock, PTL, folio lock) [U]") \
  H(invlpg, "x86 INVLPG of one page")                                                               \
  H(flush_full, "x86 full flush of the current PCID (CR3 write)")                                   \
  H(ipi, "x86 TLB-shootdown IPI to one remote CPU: queueing it and the ICR write (the wait is timed)")          \
  H(tlbi_local, "arm64 TLBI VALE1 / VAE1 (this CPU)")                                               \
  H(tlbi_bcast, "arm64 TLBI VALE1IS / VAE1IS (broadcast to the inner-shareable domain)")            \
  H(tlbi_asid, "arm64 TLBI ASIDE1IS")                                                               \
  H(dsb_local, "arm64 DSB NSH / ISHST after local maintenance")                                     \
  H(dsb_bcast, "arm64 DSB ISH completing broadcast TLB maintenance")                                \
  S(syscall, "100cyc", "system call entry and exit [U]")                                                 \
  S(fork_fixed, "20000cyc", "fork(): task and mm creation outside the page-table copy (copy_process, dup_mm) [U]") \
  S(exit_fixed, "10000cyc", "exit(): task teardown outside the page tables [U]")                      \
  S(thread_fixed, "8000cyc", "clone() of a thread (CLONE_VM): task creation without an mm copy [U]") \
  S(vma_op, "500cyc", "one VMA created, copied, split or freed [U]")                                     \
  S(ctx_switch, "2000cyc", "a context switch between tasks [U]")                                    \
  S(io_request, "5us", "the CPU work of one read request to the disk: the block layer and NVMe driver submitting it and completing it (readahead's read_pages to folio_end_read); about 5 us of the 45 us that a 4K random read at queue depth 1 takes end to end on an NVMe SSD (docs/research-filemap-swap-io.md section 7 [L]); the device's time is the disk's (disk.*), slept, not charged")

enum class Cost : uint8_t {
#define KMM_COST_ENUM_S(name, def, desc) name,
#define KMM_COST_ENUM_H(name, desc) name,
  KMM_COST_ITEMS(KMM_COST_ENUM_S, KMM_COST_ENUM_H)
#undef KMM_COST_ENUM_S
#undef KMM_COST_ENUM_H
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
  // Cycles the entry's task slept waiting for the disk (a folio under read): part of the entry's
  // time, not of the CPU's work (kernel.io_wait_ns, not kcost.cycles).
  double io_wait_cycles = 0;
  // Cycles the task slept on its way back to user mode, throttled for its memory cgroup's
  // memory.high (mem_cgroup_handle_over_high()): as io_wait_cycles, time but not work.
  double throttle_cycles = 0;
  // What of the entry's time the task slept (the disk, memory.high).
  double sleep_cycles() const { return io_wait_cycles + throttle_cycles; }
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
    io_wait_cycles = 0;
    throttle_cycles = 0;
  }
  void add(const CostAccount& o) {
    o.for_each_charged([&](size_t i, uint64_t k) { n[i] += k; });
    used |= o.used;
    extra_cycles += o.extra_cycles;
    io_wait_cycles += o.io_wait_cycles;
    throttle_cycles += o.throttle_cycles;
  }
};

// Whether an item is a hardware instruction (an H item above), priced by the platform.
bool cost_is_hardware(Cost c);

// The platform's price list: `cost.<item>` parameters.
struct CostModel {
  std::array<mmusim::Duration, kNumCosts> d{};
  // Declares or reads the cost.* keys. `hw_default` gives the generic default of each hardware
  // item when declaring (the platform layer takes it from the platform config files); without
  // it a hardware item is declared at 0 (a placeholder, for reading those files).
  void visit(mmusim::Params& p, const std::function<std::string(Cost)>& hw_default = {});
  const mmusim::Duration& operator[](Cost c) const { return d[static_cast<size_t>(c)]; }
  // Time of an account at `ghz`, in cycles (fractional cycles kept), extra cycles and I/O waits included;
  // `each(item, count)` is called for every charged item on the way (one pass).
  // `scale`: the CPU's cycles per calibrated cycle for the items priced in cycles (the kernel's
  // instruction work: an E-core's lower IPC, an SMT sibling's share of the pipeline; see
  // Kernel::set_cost_scale); items priced in ns (bulk zeroing and copying, memory-bound) and the
  // extra cycles (line transfers, waits) are time and are not scaled.
  template <typename F>
  double cycles(const CostAccount& a, double ghz, double scale, F&& each) const {
    double c = a.extra_cycles + a.sleep_cycles();
    a.for_each_charged([&](size_t i, uint64_t k) {
      each(i, k);
      c += double(k) * price_of(d[i], ghz, scale);
    });
    return c;
  }
  template <typename F, typename = std::enable_if_t<std::is_invocable_v<F&, size_t, uint64_t>>>
  double cycles(const CostAccount& a, double ghz, F&& each) const {
    return cycles(a, ghz, 1.0, each);
  }
  double cycles(const CostAccount& a, double ghz, double scale = 1.0) const {
    return cycles(a, ghz, scale, [](size_t, uint64_t) {});
  }
  double price(Cost c, double ghz, double scale = 1.0) const { return price_of(d[static_cast<size_t>(c)], ghz, scale); }
  static double price_of(const mmusim::Duration& x, double ghz, double scale) {
    return x.is_time ? x.cycles(ghz) : x.cycles(ghz) * scale;
  }
};

}  // namespace kmm
