// SPDX-License-Identifier: GPL-2.0-only
#include "models/core/ooo_core.hpp"

#include "models/core/core_mmu.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"

namespace mmusim::hw {

// ------------------------------------------------------------------------------------------------
// Parameters

void CoreParams::visit(Params& p) {
  p.integer("core.rob_entries", rob, rob, 8, 4096, "reorder-buffer entries");
  p.integer("core.alloc_width", alloc_width, alloc_width, 1, 16, "micro-ops allocated (renamed) per cycle");
  p.integer("core.retire_width", retire_width, retire_width, 1, 16, "micro-ops retired per cycle");
  p.integer("core.load_buffer", load_buffer, load_buffer, 1, 1024, "load-buffer entries");
  p.integer("core.store_buffer", store_buffer, store_buffer, 1, 1024, "store-buffer entries, held from allocation until the store has drained");
  p.integer("core.exec_delay", exec_delay, exec_delay, 0, 64, "cycles from allocation to execution for a micro-op whose inputs are ready (rename, scheduler, dispatch) [U]");
  p.integer("core.fault_to_nuke", fault_to_nuke, fault_to_nuke, 0, 1000, "cycles from a faulting micro-op reaching retirement to the pipeline flush; the younger micro-ops keep executing meanwhile [UARCH F.1, U]");
  p.integer("core.restart_delay", restart_delay, restart_delay, 0, 1000, "cycles from the return to user mode to the first micro-op allocated (front-end refill) [U]");
  p.integer("core.lfence_latency", lfence_latency, lfence_latency, 0, 1000, "LFENCE execution latency once older micro-ops completed");
  p.enumeration("core.rdtscp_rule", rdtscp_rule, rdtscp_rule,
                {{"none", RdtscpRule::none}, {"wait-older", RdtscpRule::wait_older}, {"block-younger", RdtscpRule::block_younger}},
                "ordering of RDTSCP: wait-older = executes when all older micro-ops have executed (the SDM's guarantee); block-younger = also no younger micro-op is allocated until it has executed (microcoded, [U]); none. Calibrated on C1 (see README)");
  p.integer("core.rdtscp_latency", rdtscp_latency, rdtscp_latency, 0, 10000, "RDTSCP latency in cycles (with the vDSO around it the cost of clock_gettime is calibrated on C1)");
  p.enumeration("core.walk_squash", walk_squash, walk_squash,
                {{"complete", WalkSquash::complete}, {"cancel", WalkSquash::cancel}},
                "page walks in flight when the pipeline is flushed: complete (and fill the TLBs) or cancel (their fills are dropped) [U]");
  p.integer("core.fill_buffers", fill_buffers, fill_buffers, 1, 256, "cache misses the store buffer can have in flight while draining");
  p.boolean("core.speculative_translation", speculative_translation, speculative_translation, "younger micro-ops translate (and fill TLBs) before an older faulting one is taken; false: nothing runs ahead (QEMU's TLB)");
  p.boolean("core.cache_faulting_entries", cache_faulting_entries, cache_faulting_entries, "translations that do not permit the access (read-only for a store) are cached (x86 SDM §4.10.2.3; Arm ARM D8.16 allows it); false: never cached, and a store finding a read-only entry walks again instead of faulting (QEMU's TLB: a permission miss refills)");
  p.boolean("core.fault_invalidates", fault_invalidates, fault_invalidates, "a page fault invalidates the TLB entries and paging-structure-cache entries of the faulting page (x86: SDM §4.10.4.1; arm64: no, D8.15)");
  p.integer("core.dirty_assist", dirty_assist, dirty_assist, 0, 10000, "x86: cycles of the microcode assist that sets the D flag for a store through a clean writable entry");
  p.boolean("core.hafdbs", hafdbs, hafdbs, "arm64: hardware access-flag and dirty-state management (FEAT_HAFDBS, TCR_EL1.HA/HD)");
  p.integer("core.watchdog_cycles", watchdog_cycles, watchdog_cycles, 1000, int64_t(1) << 50, "watchdog: no micro-op retired for this many cycles (outside the kernel: a fence, a full buffer or a latency that never clears) is an error, with a dump of the core's state");
  p.integer("core.fault_repeat_limit", fault_repeat_limit, fault_repeat_limit, 2, 1000000, "watchdog: a micro-op that faults this many times in a row without the PTE or TLB entry changing is an error (livelock)");
  p.integer("core.quantum", quantum, quantum, 100, 100000000, "cycles a core runs ahead of SystemC time before it synchronises (temporal decoupling)");
  p.real("core.kernel_cycle_scale", kernel_cycle_scale, kernel_cycle_scale, 0.1, 10.0,
         "the kernel's work on this core: its cycles per cycle of the kernel's prices in cycles (cost.* items in cyc, "
         "calibrated on a Golden Cove P-core alone; items in ns and line transfers are time and are not scaled)");
  p.real("core.smt_kernel_scale", smt_kernel_scale, smt_kernel_scale, 1.0, 4.0,
         "SMT: the kernel's prices in cycles are multiplied by this while the other hardware thread of the core has a "
         "task (the two threads share the core's front end and execution ports); 1: no slowdown");
  p.boolean("core.runahead_reuse", runahead_reuse, runahead_reuse, "simulator speed, not hardware: a fault's run-ahead replays the part it shares with the previous fault's (same micro-ops at the same times relative to the flush, every dependence checked) instead of simulating each micro-op again; the results are identical either way (tested), so this only exists to compare. Off while tracing");
  p.boolean("core.runahead_check", runahead_check, runahead_check, "simulator self-check, not hardware: every replayed run-ahead segment is also checked the slow way (each store's page against its micro-op, its L2 TLB slot and permissions looked up again); a mismatch is an internal error. For tests; slows the replay down");
}

// ------------------------------------------------------------------------------------------------

OooCore::OooCore(int cpu, const CoreParams& p, pg::Isa isa, Os& os, PhysMem& mem, CoreMmu& mmu,
                 Stats& stats, TraceContext* trace, uint16_t asid_tag, bool shared_mmu)
    : PipelineState(p.rob, p.store_buffer, p.load_buffer),
      cpu_(cpu),
      p_(p),
      isa_(isa),
      os_(os),
      mem_(mem),
      l1_load_(mmu.l1_load()),
      l1_store_(mmu.l1_store()),
      itlb_(mmu.itlb()),
      l2_(mmu.l2()),
      maint_(mmu.maintenance()),
      caches_(mmu.caches()),
      trace_(trace),
      ghz_(os.ghz(cpu)),
      path_(mmu.translation_path(p.translation_rules(isa), trace)),
      asid_tag_(asid_tag),
      shared_mmu_(shared_mmu ? &mmu : nullptr),
      fetched_(p.rob + 2),
      reuse_(p, path_.rules().cache_faulting_entries, l1_load_, l1_store_, l2_, itlb_, *this,
             fetched_),
      fb_free_(p.fill_buffers, 0),
      fb_mask_(0) {
  log_ = log::get("core");
  tick_ps_ = os.tick_ps();
  MMUSIM_CHECK(mmu.isa() == isa && mmu.ghz() == ghz_,
               "core {}: its CoreMmu was built for another ISA or clock", cpu);
  uops_ = &stats.counter("core.uops", "micro-ops retired");
  cycles_ = &stats.counter("core.cycles", "core cycles");
  squashes_ = &stats.counter("core.squashes", "pipeline flushes at faults (younger micro-ops squashed)");
  squashed_uops_ = &stats.counter("core.squashed_uops", "micro-ops executed speculatively and squashed");
  spec_translations_ = &stats.counter("core.spec_translations", "translations done by squashed micro-ops (their TLB fills stay)");
  faults_taken_ = &stats.counter("core.faults_taken", "page faults taken at retirement");
  dirty_assists_ = &stats.counter("core.dirty_assists", "x86 D-flag assists");
  static const char* const kLevelNames[] = {"l1d", "l2", "llc", "dram"};
  for (unsigned l = 0; l < 4; ++l)
    resume_store_[l] = &stats.counter(std::string("core.fault_resume_store.") + kLevelNames[l],
                                      std::string("stores that took a fault whose line, when they retired after "
                                                  "it, came from the ") + kLevelNames[l]);
  store_drain_cycles_ = &stats.counter("core.fault_store_drain_cycles", "cycles fault handlers waited at their first store barrier (x86: LOCK-prefixed instruction) for the user's buffered stores to drain");
  itlb_stall_cycles_ = &stats.counter("core.itlb_stall_cycles", "cycles allocation waited for the translation of an instruction page (an ITLB miss: the L2 TLB, a walk), of micro-ops that were not squashed");
  lfences_ = &stats.counter("core.lfences", "LFENCEs retired");
  bytes_compared_ = &stats.counter("check.bytes_compared", "bytes loaded and compared with the expected value (random-ops)");
  reuse_.register_stats(stats);
  // An invalidation that takes an ITLB entry: the next micro-op's code page is looked up again.
  maint_.watch_itlb(itlb_, [this] { fetch_page_ = kNoFetchPage; }, this);
}

OooCore::~OooCore() { maint_.watch_itlb(nullptr, nullptr, this); }

template <bool kAhead>
bool OooCore::fetch(size_t n) {
  while (fetched_.size() < n) {
    if (program_done_) return false;
    // Never fetch past a system call: its result decides what comes next.
    if (!fetched_.empty() && fetched_.back().kind == wl::UopKind::Syscall) return false;
    wl::Uop u;
    if (!ctx_.prog->next(u)) {
      program_done_ = true;
      return false;
    }
    fetched_.push_back(u);
    // (The head, the only micro-op fetched otherwise, is never in a replayed segment.)
    if (kAhead && u.ip != wl::kNoIp && (u.ip & pg::kBasePageMask) != fetched_page_) {
      fetched_page_ = u.ip & pg::kBasePageMask;
      fetched_page_since_ = seq_ + fetched_.size() - 1;
    }
  }
  return true;
}

// Translation of one access at cycle `t`: L1 TLB, L2 TLB, page walk, by the rules of the path the
// tests drive too (models/walker/translation.hpp). With `spec`, nothing that happens at or after
// `limit` (the flush) takes effect.
TranslateResult OooCore::translate(uint64_t va, bool write, uint64_t t, uint64_t limit, bool spec) {
  TranslateResult r = path_.translate(va, write, ctx_.asid, ctx_.root_pa, t, limit, spec, &tr_hint_);
  if (spec && r.source == TranslateResult::Walked) spec_translations_->inc();
  return r;
}

// The front end translates the code page of `u` (an ITLB lookup; on a miss the L2 TLB, a walk),
// requested at cycle `t`. Returns when it is ready; kNever: not translated before the flush (a
// run-ahead ends there); kFetchFault: the fetch faults, known at fetch_fault_ready_ with
// fetch_fault_syndrome_ (the front end delivers nothing from there on: a run-ahead ends, a
// retiring micro-op takes the fault).
uint64_t OooCore::fetch_translate(const wl::Uop& u, uint64_t t, uint64_t limit, bool spec) {
  fetch_translated_ = true;
  const TranslateResult r = path_.fetch(u.ip, ctx_.asid, ctx_.root_pa, t, limit, spec);
  if (spec && r.source == TranslateResult::Walked) spec_translations_->inc();
  if (!r.ok || (r.fault && spec)) return kNever;
  if (r.fault) {
    fetch_fault_syndrome_ = r.syndrome;
    fetch_fault_ready_ = r.ready;
    return kFetchFault;
  }
  fetch_page_ = u.ip & pg::kBasePageMask;
  return r.ready;
}

OooCore::Issue OooCore::issue(const wl::Uop& u, uint64_t seq, uint64_t limit, bool spec) {
  Issue is;
  // Allocation: width, fences, a free ROB entry, a store- or load-buffer entry.
  uint64_t a = alloc_in_cycle_ >= width(p_.alloc_width) ? alloc_cycle_ + 1 : alloc_cycle_;
  // Instruction fetch: the micro-op's code page, translated when the front end reaches another
  // page or the ITLB lost an entry since (see the header), requested when allocation reaches the
  // micro-op by its width (fences and full buffers hold allocation, not fetch).
  uint64_t fetched = 0;  // the cycle the code page's translation is ready
  if ((u.ip & pg::kBasePageMask) != fetch_page_ && u.ip != wl::kNoIp && itlb_) {
    fetched = fetch_translate(u, a, limit, spec);
    if (fetched >= kNever) {
      if (fetched == kFetchFault) {  // (a retiring micro-op's)
        is.issued = true;
        is.fault = is.fetch_fault = true;
        is.syndrome = fetch_fault_syndrome_;
        is.alloc = a;
        is.exec = is.done = fetch_fault_ready_;
      }
      return is;
    }
  }
  a = std::max(a, no_issue_before_);
  const uint64_t a_unbound = a;
  if (seq >= p_.rob) a = std::max(a, rob_free_[(seq - p_.rob) & rob_mask_] + 1);
  const bool is_store = u.kind == wl::UopKind::Store;
  const bool is_load = u.kind == wl::UopKind::Load;
  // A run-ahead micro-op writes no ring slot: a slot of a younger speculative store or load (an
  // ordinal at or after spec_st_base_ / spec_ld_base_) reads as never free; the older slots are
  // untouched (the rings are at least the buffer's size, so no speculative ordinal aliases them).
  if (is_store && st_ord_ >= p_.store_buffer) {
    const uint64_t i = st_ord_ - p_.store_buffer;
    a = std::max(a, spec && i >= spec_st_base_ ? kNever : sb_free_[i & sb_mask_]);
  }
  if (is_load && ld_ord_ >= p_.load_buffer) {
    const uint64_t i = ld_ord_ - p_.load_buffer;
    a = std::max(a, spec && i >= spec_ld_base_ ? kNever : lb_free_[i & lb_mask_] + 1);
  }
  const bool ring_bound = a != a_unbound;
  // The front end delivers the micro-op once its code page is translated.
  if (fetched > a) {
    if (!spec) itlb_stall_cycles_->inc(fetched - a);
    a = fetched;
  }
  if (a >= limit) return is;
  ring_bound_ = ring_bound;
  if (a > alloc_cycle_) {
    alloc_cycle_ = a;
    alloc_in_cycle_ = 1;
  } else {
    ++alloc_in_cycle_;
  }
  is.alloc = a;
  uint64_t e = a + p_.exec_delay;
  if (u.flags & wl::kUopDependsOnPrev) e = std::max(e, prev_done_);
  switch (u.kind) {
    case wl::UopKind::Alu:
    case wl::UopKind::Marker:
      is.done = e + u.latency;
      break;
    case wl::UopKind::Lfence:
      // Does not execute until all prior instructions have completed locally.
      is.done = std::max(e, older_done_max_) + p_.lfence_latency;
      no_issue_before_ = kNever;  // lifted at retirement
      break;
    case wl::UopKind::Rdtscp:
      if (p_.rdtscp_rule != RdtscpRule::none) e = std::max(e, older_done_max_);
      is.done = e + p_.rdtscp_latency;
      if (p_.rdtscp_rule == RdtscpRule::block_younger)
        no_issue_before_ = std::max(no_issue_before_, is.done);
      break;
    case wl::UopKind::Load:
    case wl::UopKind::Store: {
      if (spec && e >= limit) return Issue{};
      const TranslateResult t = translate(u.addr, is_store, e, limit, spec);
      if (!t.ok) {
        // Still translating (or waiting for a walker) when the flush comes: it keeps its entries
        // in flight, and the younger micro-ops go on executing and starting their own walks.
        is.done = kNever;
        break;
      }
      is.pa = t.pa;
      is.fault = t.fault;
      is.syndrome = t.syndrome;
      is.need_dirty = t.need_dirty;
      is.done = t.ready;
      if (is_load && !t.fault) is.done += caches_.access(t.pa, false, t.ready);
      break;
    }
    case wl::UopKind::Syscall:
      panic("a system call reached issue()");
  }
  is.exec = e;
  is.issued = true;
  prev_done_ = is.done;
  older_done_max_ = std::max(older_done_max_, is.done);
  // The micro-op holds its entries until it retires (stores: until they drain). A run-ahead micro-op
  // is squashed before any younger one could read its ROB slot (the run-ahead is shorter than the
  // ROB) and its buffer slots read as never free (above): it writes none, so a squash restores
  // only the scalars of the Snapshot.
  if (is_store) {
    if (!spec) sb_free_[st_ord_ & sb_mask_] = kNever;
    ++st_ord_;
  }
  if (is_load) {
    if (!spec) lb_free_[ld_ord_ & lb_mask_] = kNever;
    ++ld_ord_;
  }
  if (!spec) rob_free_[seq & rob_mask_] = kNever;
  return is;
}

void OooCore::advance_cycles(uint64_t to) {
  if (to > now_) now_ = to;
  if (now_ > counted_cycles_) {
    cycles_->inc(now_ - counted_cycles_);
    counted_cycles_ = now_;
  }
}

void OooCore::write_store(const wl::Uop& u, uint64_t pa, uint64_t retire_cycle) {
  uint8_t buf[64];
  const uint64_t v = u.flags & wl::kUopValueFromProgram ? ctx_.prog->store_value(u) : u.value;
  if (u.size <= 8) std::memcpy(buf, &v, u.size);
  else std::memset(buf, int(v & 0xff), u.size);
  // A store within one page (the workloads never split a store across pages).
  mem_.write(pa, buf, u.size);
}

// In-order retirement of a micro-op that issued without a fault.
void OooCore::retire(const wl::Uop& u, uint64_t seq, const Issue& is) {
  uint64_t r = std::max(is.done + 1, last_retire_);
  if (r == last_retire_) {
    if (++retire_in_cycle_ > width(p_.retire_width)) {
      ++r;
      retire_in_cycle_ = 1;
    }
  } else {
    retire_in_cycle_ = 1;
  }
  switch (u.kind) {
    case wl::UopKind::Store: {
      uint64_t pa = is.pa;
      if (is.need_dirty) {
        // The D-flag assist: the walk that sets D, then the TLBs hold the dirty translation.
        r += p_.dirty_assist;
        dirty_assists_->inc();
        pa = path_.assist_dirty(u.addr, ctx_.asid, ctx_.root_pa, pa);
      }
      write_store(u, pa, r);
      // Drain from the store buffer in order, one per cycle at most, through the caches.
      // A miss holds a fill buffer until its line arrives (the read-for-ownership, which waits
      // for the path to DRAM when it is busy).
      uint64_t ds = std::max(r + 1, last_drain_ + 1);
      const MemoryHierarchy::Level lvl = caches_.access_level(pa, true, ds);
      if (resume_pending_ && seq == fault_seq_) {
        resume_store_[lvl]->inc();
        resume_pending_ = false;
      }
      // (Several cores: a line another core holds comes from it, or its copies are invalidated
      // first: the read-for-ownership takes a fill buffer even when this core had the line.)
      const uint32_t snoop = caches_.snoop_cycles();
      uint32_t lat = caches_.latency(lvl) + snoop;
      if (lvl != MemoryHierarchy::L1D || snoop) {
        uint64_t& fb = fb_free_[fb_next_];
        if (++fb_next_ == fb_free_.size()) fb_next_ = 0;
        ds = std::max(ds, fb);
        // A full-line store (fast strings) is claimed without its data: no read takes the path
        // to DRAM, but the claim of a line no cache holds goes to the memory controller and back,
        // taken as memory.latency [U: not published; granted at the LLC, C5's 4K row would be
        // about 50 ms instead of 56.7].
        if (lvl == MemoryHierarchy::DRAM) lat += caches_.dram_fill_wait(ds, u.flags & wl::kUopFullLine);
        fb = ds + lat;
      }
      // A line an older miss is still bringing: the store waits for it (the fill buffer's merge).
      lat = caches_.in_flight(pa, ds, lvl, lat);
      last_drain_ = ds;
      sb_free_[(st_ord_ - 1) & sb_mask_] = ds + lat;
      sb_free_upto_[(st_ord_ - 1) & sb_mask_] =
          std::max(ds + lat, st_ord_ >= 2 ? sb_free_upto_[(st_ord_ - 2) & sb_mask_] : uint64_t(0));
      break;
    }
    case wl::UopKind::Load:
      lb_free_[(ld_ord_ - 1) & lb_mask_] = r;
      if (u.flags & wl::kUopCheckValue) check_load(u, is.pa);
      break;
    case wl::UopKind::Lfence:
      no_issue_before_ = r + 1;
      lfences_->inc();
      break;
    case wl::UopKind::Rdtscp:
      // The TSC was read when it executed (is.done); its result reaches the program's register.
      ctx_.prog->rdtscp_return(ps(is.done));
      os_.rdtscp_retired(cpu_, is.done);
      break;
    case wl::UopKind::Marker:
      os_.marker(cpu_, u, ps(r));
      break;
    default:
      break;
  }
  if (fault_seq_ == seq) {
    os_.faulted_retired(cpu_, r);
    fault_seq_ = ~uint64_t(0);
    fault_repeats_ = 0;
  }
  rob_free_[seq & rob_mask_] = r;
  last_retire_ = r;
  advance_cycles(r);
  uops_->inc();
}

// Differential testing: the bytes at the load's physical address (through the translation it
// used, stale or not) against the bytes the workload's reference model expects.
void OooCore::check_load(const wl::Uop& u, uint64_t pa) {
  uint64_t got = 0;
  mem_.read(pa, &got, std::min<size_t>(u.size, 8));
  const uint64_t mask = wl::loaded_value_mask(u.size);
  if (!wl::loaded_value_matches(u, got))
    panic("data integrity: cpu {} task {} load at VA {:#x} ({} bytes, PA {:#x}) read {:#x}, "
          "expected {:#x}, after op #{}",
          cpu_, ctx_.task.pid, u.addr, u.size, pa, got & mask, u.value & mask, u.extra);
  bytes_compared_->inc(u.size);
}

[[noreturn]] void OooCore::watchdog(const wl::Uop& u, uint64_t syndrome, bool fetch) {
  const uint64_t va = fetch ? u.ip : u.addr;
  pg::Walk w = pg::walk(isa_, mem_, ctx_.root_pa, va);
  uint64_t pte = w.nsteps ? w.steps[w.nsteps - 1].entry : 0;
  const bool pte_permits = w.result == pg::Walk::Ok && w.user &&
                           (fetch ? w.executable : u.kind != wl::UopKind::Store || w.writable);
  std::string tlb;
  bool stale = false;
  const bool one_l1 = &l1_store_ == &l1_load_;  // arm64: one L1 DTLB for loads and stores
  for (Tlb* t : {&l1_load_, one_l1 ? nullptr : &l1_store_, itlb_, l2_}) {
    if (!t) continue;
    if (const TlbEntry* e = t->probe(va, ctx_.asid)) {
      tlb += fmt::format("{}{}: va {:#x} pa {:#x} size {} {}{}", tlb.empty() ? "" : "; ", t->name(),
                         e->vbase, e->pbase, page_size_name(e->size), e->writable ? "rw" : "ro",
                         e->dirty ? " dirty" : "");
      stale = stale || (!fetch && u.kind == wl::UopKind::Store && !e->writable && pte_permits);
    }
  }
  throw SimulatedSystemError(fmt::format("watchdog: cpu {} task {}: the {} at address {:#x} (ip {:#x}) faulted {} times in a row "
        "(syndrome {:#x}) without progress. The PTE is {:#x} ({}); the TLB holds {}.{} The kernel's "
        "fault handling does not remove what makes the access fault: a livelock of the simulated "
        "system (core.fault_repeat_limit = {})",
        cpu_, ctx_.task.pid,
        fetch ? "instruction fetch" : u.kind == wl::UopKind::Store ? "store" : "access", va, u.ip,
        fault_repeats_, syndrome, pte,
        w.result == pg::Walk::Ok ? (w.writable ? "writable" : "read-only") : "not present",
        tlb.empty() ? "nothing for it" : tlb,
        stale ? " The PTE permits the store but a cached read-only entry does not: a stale TLB "
                "entry that no TLBI removed (a fault does not invalidate it when "
                "core.fault_invalidates = false; arm64 relies on the kernel's TLBI)."
              : "",
        p_.fault_repeat_limit));
}

// The forward-progress watchdog: the head micro-op would not retire within core.watchdog_cycles.
// The dump: the micro-op, how far it got and what holds it (fences, ROB, buffers), its pending
// fault, the TLB entries and the PTE for its address.
[[noreturn]] void OooCore::stall(const wl::Uop& u, const Issue& is) {
  auto cyc = [&](uint64_t c) { return c >= kNever ? std::string("never") : fmt::format("{}", c); };
  static const char* kinds[] = {"alu", "load", "store", "lfence", "rdtscp", "syscall", "marker"};
  std::string state = is.issued
      ? fmt::format("allocated at cycle {}, executes at {}, completes at {}", is.alloc, is.exec, cyc(is.done))
      : std::string("cannot be allocated");
  // (Once the micro-op has issued, its own ROB/buffer slots read `never`: shown only before.)
  std::string held = is.issued
      ? fmt::format("fences hold younger micro-ops until cycle {}; the last allocation was at {}",
                    cyc(no_issue_before_), alloc_cycle_)
      : fmt::format(
      "what allocation waits for: fences (no issue before {}), allocation cycle {}, the ROB entry "
      "{} older free at {}, store buffer free at {}, load buffer free at {}",
      cyc(no_issue_before_), alloc_cycle_, p_.rob,
      seq_ >= p_.rob ? cyc(rob_free_[(seq_ - p_.rob) & rob_mask_]) : std::string("0"),
      st_ord_ >= p_.store_buffer ? cyc(sb_free_[(st_ord_ - p_.store_buffer) & sb_mask_]) : std::string("0"),
      ld_ord_ >= p_.load_buffer ? cyc(lb_free_[(ld_ord_ - p_.load_buffer) & lb_mask_]) : std::string("0"));
  std::string mem;
  if (u.kind == wl::UopKind::Load || u.kind == wl::UopKind::Store) {
    pg::Walk w = pg::walk(isa_, mem_, ctx_.root_pa, u.addr);
    std::string tlb;
    const bool one_l1 = &l1_store_ == &l1_load_;
    for (Tlb* t : {&l1_load_, one_l1 ? nullptr : &l1_store_, l2_})
      if (t)
        if (const TlbEntry* e = t->probe(u.addr, ctx_.asid))
          tlb += fmt::format("{}{}: va {:#x} pa {:#x} size {} {}", tlb.empty() ? "" : "; ", t->name(),
                             e->vbase, e->pbase, page_size_name(e->size), e->writable ? "rw" : "ro");
    mem = fmt::format(" Pending fault: {}. The PTE is {:#x} ({}); the TLB holds {}.",
                      is.fault ? fmt::format("yes (syndrome {:#x})", is.syndrome) : std::string("none"),
                      w.nsteps ? w.steps[w.nsteps - 1].entry : 0,
                      w.result == pg::Walk::Ok ? (w.writable ? "writable" : "read-only") : "not present",
                      tlb.empty() ? "nothing for it" : tlb);
  }
  throw SimulatedSystemError(fmt::format(
      "watchdog: cpu {} task {}: no micro-op retired for more than {} cycles (core.watchdog_cycles) "
      "since cycle {}. The head micro-op #{} is a {} at address {:#x} (ip {:#x}, {} bytes): {}; "
      "{}.{}",
      cpu_, ctx_.task.pid, p_.watchdog_cycles, last_retire_, seq_,
      unsigned(u.kind) < 7 ? kinds[unsigned(u.kind)] : "?", u.addr, u.ip, unsigned(u.size), state,
      held, mem));
}

// The micro-op at the head faulted: let the younger ones run until the flush, squash them, take
// the exception into the kernel, restart at the faulting micro-op.
void OooCore::restore(const Snapshot& b) {
  rob_free_[seq_ & rob_mask_] = b.rob_slot;
  sb_free_[b.st_ord & sb_mask_] = b.sb_slot;
  lb_free_[b.ld_ord & lb_mask_] = b.lb_slot;
  alloc_cycle_ = b.alloc_cycle;
  alloc_in_cycle_ = b.alloc_in_cycle;
  prev_done_ = b.prev_done;
  older_done_max_ = b.older_done_max;
  st_ord_ = b.st_ord;
  ld_ord_ = b.ld_ord;
  no_issue_before_ = b.no_issue_before;
}

// Window position j (run-ahead position j - 1) simulated, and recorded by the reuse.
bool OooCore::ahead_issue(size_t j, uint64_t nuke, size_t st_hint) {
  const wl::Uop& y = fetched_[j];
  const RunaheadReuse::AheadState before = reuse_.before();
  fetch_translated_ = false;
  const Issue yi = issue(y, seq_ + j, nuke, true);
  return reuse_.record_position(j, y, before, yi.issued, yi.alloc, ring_bound_, fetch_translated_,
                                tr_hint_, st_hint);
}

// What the reuse asks of the core while it replays: the positions it does not replay are
// simulated as the run-ahead loop simulates them.
struct OooCore::ReuseCallbacks final : RunaheadCore {
  ReuseCallbacks(OooCore& c, uint64_t nuke) : c(c), nuke(nuke) {}
  bool fetch(size_t n) override { return c.fetch<true>(n); }
  bool simulate(size_t j, size_t st_hint) override { return c.ahead_issue(j, nuke, st_hint); }
  OooCore& c;
  const uint64_t nuke;
};

// The faulting micro-op keeps its ROB and buffer entries until the flush at `nuke`; the younger
// ones run meanwhile: allocated and executed as the limits allow, their translations filling the
// TLBs. Returns how many issued. Their pipeline state is put back by the caller (restore); their
// TLB fills stay.
uint64_t OooCore::run_ahead(uint64_t nuke) {
  spec_st_base_ = st_ord_;
  spec_ld_base_ = ld_ord_;
  // The run-ahead reuse replays what this run-ahead shares with the last one, if it can prove it
  // the same (host speed only: models/core/runahead_reuse.hpp); the rest is simulated here.
  ReuseCallbacks cb(*this, nuke);
  const RunaheadReuse::Start rs = reuse_.begin(nuke, seq_, ctx_.asid, trace_ && trace_->on(), cb);
  const bool record = rs.record;
  size_t j = 1 + rs.positions;
  uint64_t n = rs.positions;
  for (bool ended = rs.ended; !ended && j < p_.rob; ++j) {
    // Fetched a few at a time (a call per micro-op costs more than the micro-op's generation).
    if (j >= fetched_.size() && (fetch<true>(std::min<size_t>(j + 8, p_.rob + 1)), j >= fetched_.size())) break;
    const wl::Uop& y = fetched_[j];
    if (y.kind == wl::UopKind::Syscall || y.kind == wl::UopKind::Marker) break;
    if (record ? !ahead_issue(j, nuke) : !issue(y, seq_ + j, nuke, true).issued) break;
    ++n;
  }
  if (record) reuse_.end(n);
  if (n) {
    squashes_->inc();
    squashed_uops_->inc(n);
  }
  return n;
}

void OooCore::take_fault(const Issue& fis, const Snapshot& before) {
  const wl::Uop f = fetched_.front();
  const uint64_t head = std::max(fis.done + 1, last_retire_);
  const uint64_t nuke = head + p_.fault_to_nuke;
  // The faulting address: the access's, or for a fetch the instruction's (CR2 / FAR_EL1).
  const uint64_t va = fis.fetch_fault ? f.ip : f.addr;

  // (Nothing younger than a fetch that faults was fetched: no run-ahead.)
  [[maybe_unused]] const uint64_t n_ahead =
      p_.speculative_translation && !fis.fetch_fault ? run_ahead(nuke) : 0;
  restore(before);

  faults_taken_->inc();
  MMUSIM_LOG_DEBUG(log_, "cpu {} fault at {:#x} (ip {:#x}, syndrome {:#x}) at cycle {}; {} younger micro-ops ran ahead",
                   cpu_, va, f.ip, fis.syndrome, nuke, n_ahead);
  if (trace_) trace_->time_ps = ps(nuke);
  if (p_.fault_invalidates) {
    // SDM Vol 3A §4.10.4.1: the TLB entries for the faulting page number (current PCID) and the
    // paging-structure-cache entries that would be used for the address, at the flush: what a
    // walk still in flight then brings (walk_squash = complete) comes after it and stays.
    maint_.x86_page_fault(ctx_.asid, va, nuke);
  }
  // The user's stores still in the store buffer drain while the exception is delivered and the
  // handler runs, up to the handler's first instruction that waits for them (x86: a LOCK-prefixed
  // one, SDM Vol 3A §9.2.2; or, if it has none, the serialising IRET, §9.3): there the handler
  // waits until the last of them has drained (hw::store_drain_wait; the fault's cycles include it).
  const uint64_t drained = stores_drained();
  OsFault of = os_.page_fault(cpu_, va, fis.syndrome, f.ip, ps(nuke),
                              drained > nuke ? double(drained - nuke) : 0.0);
  // (A task that slept in the fault leaves the CPU once the kernel's work is done.)
  const uint64_t resume = nuke + uint64_t(of.cycles - of.sleep_cycles + 0.5);
  store_drain_cycles_->inc(uint64_t(of.store_wait + 0.5));

  // Watchdog: the same micro-op faulting again and again.
  const bool repeat = fault_seq_ == seq_;
  if (repeat) {
    if (++fault_repeats_ >= p_.fault_repeat_limit) watchdog(f, fis.syndrome, fis.fetch_fault);
  } else {
    fault_seq_ = seq_;
    fault_repeats_ = 1;
  }
  os_.fault_taken(cpu_, head, repeat, of);
  resume_pending_ = f.kind == wl::UopKind::Store;
  if (of.sleep_cycles > 0) leave_cpu();

  restart(resume);  // at the faulting micro-op
}

// The task slept in its fault (or was preempted at a tick): it leaves the CPU, handing back the
// micro-ops fetched for it, the faulting one first, which it fetches again when it next runs. The fault-latency meter's
// pending resume waits for it (re-armed in run_until() when it is back, if this CPU took no other
// fault meanwhile; else that fault's sample replaced it).
void OooCore::leave_cpu() {
  std::vector<wl::Uop> back;
  back.reserve(fetched_.size());
  for (size_t i = 0; i < fetched_.size(); ++i) back.push_back(fetched_[i]);
  ctx_.prog->put_back(std::move(back));
  asleep_resume_pid_ = resume_pending_ ? int64_t(ctx_.task.pid) : -1;
  asleep_resume_faults_ = faults_taken_->value();
  resume_pending_ = false;
  have_task_ = false;
  fetched_.clear();
  reuse_.forget();
  recompute_check_ = true;  // this CPU's sleepers' wake-ups
}

// The pipeline is empty at `cycle` (back from the kernel): allocation resumes after the front end
// has refilled.
void OooCore::restart(uint64_t cycle) {
  // (The front end refetches from the micro-op it restarts at; its ITLB lookup is made only if
  // its page is not the one translated last or the kernel's invalidations took an ITLB entry,
  // watch_itlb: otherwise it is a hit of no latency, which changes nothing.)
  last_retire_ = cycle;
  retire_in_cycle_ = 0;
  alloc_cycle_ = cycle + p_.restart_delay;
  alloc_in_cycle_ = 0;
  no_issue_before_ = alloc_cycle_;
  prev_done_ = older_done_max_ = alloc_cycle_;
  advance_cycles(cycle);
}

void OooCore::do_syscall(const wl::Uop& u) {
  // Serialising: every older micro-op has retired (they all have: program order) and the store
  // buffer has drained.
  uint64_t t = std::max({last_retire_, alloc_cycle_, last_drain_}) + 1;
  for (uint64_t v : sb_free_) t = std::max(t, v == kNever ? t : v);
  if (trace_) trace_->time_ps = ps(t);
  OsCall c = os_.syscall(cpu_, u, ps(t));
  // (A task that slept in the call leaves the CPU once the kernel's work is done.)
  uint64_t end = t + uint64_t(c.cycles - c.sleep_cycles + 0.5);
  rob_free_[seq_ & rob_mask_] = end;
  restart(end);
  uops_->inc();
  fetched_.pop_front();
  ++seq_;
  if (c.reschedule) {
    have_task_ = false;
    fetched_.clear();
    reuse_.forget();  // the record's micro-ops are gone
    recompute_check_ = true;  // this CPU's sleepers' wake-ups
  }
}

void OooCore::resume_at(uint64_t cycle) {
  if (cycle > now_) {
    advance_cycles(cycle);
    last_retire_ = std::max(last_retire_, cycle);
    alloc_cycle_ = std::max(alloc_cycle_, cycle);
  }
}

OooCore::Run OooCore::run_until(uint64_t cycle_limit) {
  if (shared_mmu_) shared_mmu_->set_tlb_trace(trace_);  // SMT: the shared TLBs' events are this thread's now
  while (now_ < cycle_limit) {
    if (!have_task_) {
      double sw = 0;
      if (!os_.schedule(cpu_, ps(now_), &ctx_, &sw)) return os_.all_exited() ? Run::Done : Run::Idle;
      ctx_.asid |= asid_tag_;
      have_task_ = true;
      program_done_ = false;
      kill_flushed_ = false;
      fetched_.clear();
      fetch_page_ = kNoFetchPage;  // another task, perhaps another address space
      reuse_.forget();  // the record's micro-ops are gone
      if (trace_) trace_->task = ctx_.task;
      if (asleep_resume_pid_ == int64_t(ctx_.task.pid)) {
        // Back from its sleep: its faulting micro-op is the first it fetches.
        if (faults_taken_->value() == asleep_resume_faults_) {
          resume_pending_ = true;
          fault_seq_ = seq_;
        }
        asleep_resume_pid_ = -1;
      }
      uint64_t t = now_ + uint64_t(sw + 0.5);
      advance_cycles(t);
      last_retire_ = std::max(last_retire_, t);
      alloc_cycle_ = std::max(alloc_cycle_, t);
    }
    if (ctx_.killed && *ctx_.killed && !kill_flushed_) {
      // The task got a fatal signal (in its own fault or system call, or from another CPU's
      // OOM kill): what the front end holds is never run; its program gives the exit next.
      kill_flushed_ = true;
      fetched_.clear();
      reuse_.forget();
      resume_pending_ = false;
    }
    if (pending_interrupt_ > 0) {
      // Taken between instructions: the pipeline drains, the handler runs, then fetch resumes.
      uint64_t t = std::max(last_retire_, alloc_cycle_) + uint64_t(pending_interrupt_ + 0.5);
      pending_interrupt_ = 0;
      last_retire_ = t;
      alloc_cycle_ = t + p_.restart_delay;
      no_issue_before_ = std::max(no_issue_before_, alloc_cycle_);
      advance_cycles(t);
    }
    if (tick_ps_ && (now_ >= next_check_cycle_ || recompute_check_)) {
      // A scheduler tick (the local APIC timer) or a wake-up on this CPU at this instruction
      // boundary: the running task may have used its slice, or a woken one may come first. (The
      // tick's own interrupt is counted only when it preempts.) After a switch only the time of
      // the next check is found again: the scheduler looks only at ticks and wake-ups.
      const uint64_t at_ps = ps(now_);
      double irq = 0;
      const bool preempt = now_ >= next_check_cycle_ && os_.resched_check(cpu_, at_ps, &irq);
      recompute_check_ = false;
      // The next check: the next tick, or the next wake-up of a task asleep here (those due by
      // now the check has queued).
      uint64_t next_ps = (at_ps / tick_ps_ + 1) * tick_ps_;
      if (const uint64_t w = os_.next_wake_ps(cpu_); w > at_ps && w < next_ps) next_ps = w;
      next_check_cycle_ = uint64_t(std::ceil(double(next_ps) * ghz_ / 1000.0));
      if (preempt) {
        leave_cpu();
        restart(now_ + uint64_t(irq + 0.5));
        continue;
      }
    }
    if (!fetch(1)) panic("task {} ended its program without exit()", ctx_.task.pid);
    const wl::Uop& u = fetched_.front();
    if (trace_ && trace_->on()) trace_->time_ps = ps(now_);
    if (u.kind == wl::UopKind::Syscall) {
      do_syscall(u);
      continue;
    }
    const Snapshot before = snapshot(seq_);
    Issue is = issue(u, seq_, kNever, false);
    // Forward progress: the head micro-op can never allocate, or completes (and so retires, or
    // takes its fault) core.watchdog_cycles after the last retirement.
    if (!is.issued || is.done > last_retire_ + p_.watchdog_cycles) stall(u, is);
    if (is.fault) {
      take_fault(is, before);
      continue;
    }
    retire(u, seq_, is);
    fetched_.pop_front();
    ++seq_;
  }
  return Run::More;
}

}  // namespace mmusim::hw
