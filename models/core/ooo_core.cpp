// SPDX-License-Identifier: GPL-2.0-only
#include "models/core/ooo_core.hpp"

#include "models/core/core_mmu.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"
#include "models/tlb/tlb_replay.hpp"

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
  p.boolean("core.runahead_reuse", runahead_reuse, runahead_reuse, "simulator speed, not hardware: a fault's run-ahead replays the part it shares with the previous fault's (same micro-ops at the same times relative to the flush, every dependence checked) instead of simulating each micro-op again; the results are identical either way (tested), so this only exists to compare. Off while tracing");
  p.boolean("core.runahead_check", runahead_check, runahead_check, "simulator self-check, not hardware: every replayed run-ahead segment is also checked the slow way (each store's page against its micro-op, its L2 TLB slot and permissions looked up again); a mismatch is an internal error. For tests; slows the replay down");
}

// ------------------------------------------------------------------------------------------------

OooCore::OooCore(int cpu, const CoreParams& p, pg::Isa isa, Os& os, PhysMem& mem, CoreMmu& mmu,
                 Stats& stats, TraceContext* trace)
    : cpu_(cpu),
      p_(p),
      isa_(isa),
      os_(os),
      mem_(mem),
      l1_load_(mmu.l1_load()),
      l1_store_(mmu.l1_store()),
      l2_(mmu.l2()),
      maint_(mmu.maintenance()),
      caches_(mmu.caches()),
      trace_(trace),
      ghz_(os.ghz()),
      path_(mmu.translation_path(p.translation_rules(isa))),
      fetched_(p.rob + 2),
      rob_free_(ring_size(p.rob), 0),
      sb_free_(ring_size(p.store_buffer), 0),
      sb_free_upto_(ring_size(p.store_buffer), 0),
      lb_free_(ring_size(p.load_buffer), 0),
      fb_free_(p.fill_buffers, 0),
      rob_mask_(rob_free_.size() - 1),
      sb_mask_(sb_free_.size() - 1),
      lb_mask_(lb_free_.size() - 1),
      fb_mask_(0) {
  log_ = log::get("core");
  MMUSIM_CHECK(mmu.isa() == isa && mmu.ghz() == ghz_,
               "core {}: its CoreMmu was built for another ISA or clock", cpu);
  ahead_.allocate(p_.rob);
  if (l2_) l2_owner_.assign(l2_->capacity(), ~uint64_t(0));
  // Only the L2 TLB's changes are asked for (replay_segment).
  if (&l1_load_ != l2_) TlbReplay(l1_load_).set_change_log(false);
  if (&l1_store_ != l2_) TlbReplay(l1_store_).set_change_log(false);
  uops_ = &stats.counter("core.uops", "micro-ops retired");
  cycles_ = &stats.counter("core.cycles", "core cycles");
  squashes_ = &stats.counter("core.squashes", "pipeline flushes at faults (younger micro-ops squashed)");
  squashed_uops_ = &stats.counter("core.squashed_uops", "micro-ops executed speculatively and squashed");
  spec_translations_ = &stats.counter("core.spec_translations", "translations done by squashed micro-ops (their TLB fills stay)");
  faults_taken_ = &stats.counter("core.faults_taken", "page faults taken at retirement");
  dirty_assists_ = &stats.counter("core.dirty_assists", "x86 D-flag assists");
  store_drain_cycles_ = &stats.counter("core.fault_store_drain_cycles", "cycles fault handlers waited at their first store barrier (x86: LOCK-prefixed instruction) for the user's buffered stores to drain");
  lfences_ = &stats.counter("core.lfences", "LFENCEs retired");
  bytes_compared_ = &stats.counter("check.bytes_compared", "bytes loaded and compared with the expected value (random-ops)");
  reused_uops_ = &stats.counter("core.replayed_uops", "squashed micro-ops replayed from the previous fault's run-ahead instead of simulated again (core.runahead_reuse; host speed only, included in core.squashed_uops)");
}

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

OooCore::Issue OooCore::issue(const wl::Uop& u, uint64_t seq, uint64_t limit, bool spec) {
  Issue is;
  // Allocation: width, fences, a free ROB entry, a store- or load-buffer entry.
  uint64_t a = alloc_in_cycle_ >= p_.alloc_width ? alloc_cycle_ + 1 : alloc_cycle_;
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
  if (a >= limit) return is;
  ring_bound_ = a != a_unbound;
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
    if (++retire_in_cycle_ > p_.retire_width) {
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
      uint32_t lat = caches_.latency(lvl);
      if (lvl != MemoryHierarchy::L1D) {
        uint64_t& fb = fb_free_[fb_next_];
        if (++fb_next_ == fb_free_.size()) fb_next_ = 0;
        ds = std::max(ds, fb);
        if (lvl == MemoryHierarchy::DRAM) {
          if (u.flags & wl::kUopFullLine) {
            // Claimed without its data (fast strings): no read takes the path to DRAM, but the
            // claim of a line no cache holds goes to the memory controller and back, taken as
            // memory.latency [U: not published; granted at the LLC, C5's 4K row would be about 50 ms
            // instead of 56.7], and the line's place in the LLC is free once the dirty line it
            // evicts has its transfer to DRAM.
            lat += uint32_t(caches_.victim_wait());
          } else {
            lat += uint32_t(caches_.dram().read(ds));
          }
        }
        fb = ds + lat;
      }
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

[[noreturn]] void OooCore::watchdog(const wl::Uop& u, uint64_t syndrome) {
  pg::Walk w = pg::walk(isa_, mem_, ctx_.root_pa, u.addr);
  uint64_t pte = w.nsteps ? w.steps[w.nsteps - 1].entry : 0;
  const bool pte_permits = w.result == pg::Walk::Ok && w.user &&
                           (u.kind != wl::UopKind::Store || w.writable);
  std::string tlb;
  bool stale = false;
  const bool one_l1 = &l1_store_ == &l1_load_;  // arm64: one L1 DTLB for loads and stores
  for (Tlb* t : {&l1_load_, one_l1 ? nullptr : &l1_store_, l2_}) {
    if (!t) continue;
    if (const TlbEntry* e = t->probe(u.addr, ctx_.asid)) {
      tlb += fmt::format("{}{}: va {:#x} pa {:#x} size {} {}{}", tlb.empty() ? "" : "; ", t->name(),
                         e->vbase, e->pbase, page_size_name(e->size), e->writable ? "rw" : "ro",
                         e->dirty ? " dirty" : "");
      stale = stale || (u.kind == wl::UopKind::Store && !e->writable && pte_permits);
    }
  }
  throw SimulatedSystemError(fmt::format("watchdog: cpu {} task {}: the {} at address {:#x} (ip {:#x}) faulted {} times in a row "
        "(syndrome {:#x}) without progress. The PTE is {:#x} ({}); the TLB holds {}.{} The kernel's "
        "fault handling does not remove what makes the access fault: a livelock of the simulated "
        "system (core.fault_repeat_limit = {})",
        cpu_, ctx_.task.pid, u.kind == wl::UopKind::Store ? "store" : "access", u.addr, u.ip,
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

// Window position j (run-ahead position j - 1) simulated, and recorded.
bool OooCore::ahead_issue(size_t j, uint64_t nuke, size_t st_hint) {
  const wl::Uop& y = fetched_[j];
  const AheadState st = ahead_state(nuke);
  Issue yi = issue(y, seq_ + j, nuke, true);
  if (!yi.issued) {
    ahead_.state[j - 1] = st;  // (the arrays hold the ROB's size: j - 1 < rob)
    ahead_.end_at = j - 1;
    return false;
  }
  // The class of a store follows from what its translation did to the L2 TLB (the path's hint).
  const uint8_t tr_cls = tr_hint_.kind == ReplayHint::L2Refill ? uint8_t(kPosStoreL2)
                       : tr_hint_.kind == ReplayHint::LateL2   ? uint8_t(kPosStoreLate)
                                                               : uint8_t(kPosOther);
  const uint32_t tr_slot = tr_hint_.l2_slot;
  const uint8_t cls = ring_bound_ ? uint8_t(kPosOther)
                    : y.kind == wl::UopKind::Alu ? uint8_t(kPosAlu)
                    : y.kind == wl::UopKind::Store ? tr_cls : uint8_t(kPosOther);
  AheadRecord& r = ahead_;
  const size_t i = j - 1;  // < rob - 1: within the arrays
  r.set_cls(i, cls);
  if (i >= r.n) r.n = i + 1;
  if (y.kind == wl::UopKind::Store) {
    size_t k = r.n_stores;
    if (k == 0 || r.stores[k - 1] < i) {
      r.stores[r.n_stores++] = uint32_t(i);
      if (r.mono_end == k && (k == 0 || (y.addr >> Tlb::kPageShift) > r.page()[k - 1]))
        r.mono_end = k + 1;
    } else if (st_hint < r.n_stores && r.stores[st_hint] == i) {
      k = st_hint;  // a position reuse_run_ahead simulates in place (the same micro-op: the same page)
    } else {
      k = size_t(std::lower_bound(r.stores.data(), r.stores.data() + r.n_stores, uint32_t(i)) -
                 r.stores.data());
    }
    r.page()[k] = y.addr >> Tlb::kPageShift;
    r.set_slot(k, Tlb::kNoSlot);
    if (tr_slot != Tlb::kNoSlot) claim_l2_slot(k, tr_slot);
    r.ro()[k] = tr_slot != Tlb::kNoSlot && !TlbReplay(*l2_).slot_entry(tr_slot).writable;
  }
  r.shape[i] = uop_shape(y);
  r.alloc[i] = rel(yi.alloc, nuke);
  r.state[i] = st;
  return true;
}

// core.runahead_check: what replay_segment's incremental checks concluded for the stores [k0, k1)
// of the record, checked the slow way.
void OooCore::check_replay(size_t k0, size_t k1, const uint32_t* slots, const uint64_t* pages,
                           size_t n_slots, const uint32_t* kidx) const {
  const AheadRecord& r = ahead_;
  const uint16_t asid = ctx_.asid;
  for (size_t k = k0; k < k1; ++k) {
    MMUSIM_CHECK(k == k0 || r.page()[k] > r.page()[k - 1],
                 "run-ahead replay: the pages of stores {} and {} do not increase", k - 1, k);
    const wl::Uop& u = fetched_.ring()[(fetched_.head() + 1 + r.stores[k]) & fetched_.mask()];
    const uint64_t addr = u.addr;
    MMUSIM_CHECK(u.kind == wl::UopKind::Store && r.page()[k] == addr >> Tlb::kPageShift,
                 "run-ahead replay: store {} of the record has page {:#x}, its micro-op {:#x}", k,
                 r.page()[k], addr);
  }
  for (size_t m = 0; m < n_slots; ++m) {
    const size_t k = kidx ? kidx[m] : k0 + m;
    MMUSIM_CHECK(pages[m] == r.page()[k], "run-ahead replay: slot list out of step at {}", k);
    const TlbEntry* e = l2_->probe(pages[m] << Tlb::kPageShift, asid);
    MMUSIM_CHECK(e && e->size == PageSize::k4K && l2_->slot_of(e) == slots[m] &&
                     r.slot()[k] == slots[m] && r.ro()[k] == !e->writable,
                 "run-ahead replay: store {} (page {:#x}) replays L2 slot {} (read-only {}), the L2 "
                 "has it in slot {}",
                 k, pages[m], slots[m], int(r.ro()[k]), e ? int64_t(l2_->slot_of(e)) : int64_t(-1));
  }
}

// Store k of the record (ordinal spec_st_base_ + k) has its page in L2 slot `slot` now; a store
// that claimed the slot before no longer has its page there.
void OooCore::claim_l2_slot(size_t k, uint32_t slot) {
  AheadRecord& r = ahead_;
  const uint64_t prev = l2_owner_[slot] - spec_st_base_;  // wraps if older: out of range
  if (prev != k && prev < r.n_stores && r.slot()[prev] == slot) r.set_slot(prev, Tlb::kNoSlot);
  l2_owner_[slot] = spec_st_base_ + k;
  r.set_slot(k, slot);
}

// The faulting micro-op keeps its ROB and buffer entries until the flush at `nuke`; the younger
// ones run meanwhile: allocated and executed as the limits allow, their translations filling the
// TLBs. Returns how many issued. Their pipeline state is put back by the caller (restore); their
// TLB fills stay.
uint64_t OooCore::run_ahead(uint64_t nuke) {
  spec_st_base_ = st_ord_;
  spec_ld_base_ = ld_ord_;
  // Recording costs a little per micro-op: where replays keep failing (the N1's short run-aheads,
  // C1's RDTSCP-bounded ones) it stops for a while.
  bool record = ahead_reuse_possible();
  const uint64_t l2_mark = l2_ ? TlbReplay(*l2_).changes() : 0;
  if (record && ahead_backoff_ > 0) {
    --ahead_backoff_;
    record = false;
  }
  size_t j = 1;
  uint64_t n = 0, replayed = 0;
  bool ended = false;
  const bool attempt = record && ahead_.size() > 0;
  if (record) {
    // The record keeps the positions done (replayed ones as they were, relative to the flush).
    // R ended at a micro-op that could not issue before the flush (its state there recorded).
    const bool r_ended = ahead_.end_at == ahead_.size();
    ahead_.end_at = ~size_t(0);
    const Reused ru = reuse_run_ahead(nuke, r_ended);
    ahead_.resize(ru.positions);
    ahead_.head_seq = seq_;
    j += ru.positions;
    n += ru.positions;
    ended = ru.ended;
    replayed = ru.replayed;
    reused_uops_->inc(ru.replayed);
  } else {
    ahead_.resize(0);
    ahead_.periodic_upto = 0;
    ahead_.end_at = ~size_t(0);
  }
  for (; !ended && j < p_.rob; ++j) {
    // Fetched a few at a time (a call per micro-op costs more than the micro-op's generation).
    if (j >= fetched_.size() && (fetch(std::min<size_t>(j + 8, p_.rob + 1)), j >= fetched_.size())) break;
    const wl::Uop& y = fetched_[j];
    if (y.kind == wl::UopKind::Syscall || y.kind == wl::UopKind::Marker) break;
    if (record ? !ahead_issue(j, nuke) : !issue(y, seq_ + j, nuke, true).issued) break;
    ++n;
  }
  if (record) {
    ahead_.l2_mark = l2_mark;
    ahead_.asid = ctx_.asid;
  }
  if (attempt) {
    if (2 * replayed >= n) {
      ahead_failures_ = 0;
      ahead_backoff_next_ = kReplayBackoffFaults;
    } else if (++ahead_failures_ >= kReplayFailuresBeforeBackoff) {
      // Each back-off in a row twice as long as the last.
      ahead_failures_ = 0;
      ahead_backoff_ = ahead_backoff_next_;
      ahead_backoff_next_ = std::min(2 * ahead_backoff_next_, kReplayBackoffMax);
    }
  }
  if (n) {
    squashes_->inc();
    squashed_uops_->inc(n);
  }
  return n;
}

bool OooCore::ahead_reuse_possible() const {
  // The replay reproduces LRU's order only (TlbReplay::usable): under another policy of the store
  // TLBs every position is simulated.
  return p_.runahead_reuse && l2_ && path_.rules().cache_faulting_entries && !(trace_ && trace_->on()) &&
         TlbReplay(*l2_).usable() && TlbReplay(l1_store_).usable();
}

OooCore::AheadState OooCore::ahead_state(uint64_t nuke) const {
  return {rel(alloc_cycle_, nuke), rel(prev_done_, nuke), rel(older_done_max_, nuke),
          rel(no_issue_before_, nuke), alloc_in_cycle_, uint32_t(st_ord_ - spec_st_base_),
          uint32_t(ld_ord_ - spec_ld_base_)};
}

// The previous run-ahead R (head at R.head_seq) and this one (head at seq_, delta micro-ops
// later) share micro-ops: this one's positions [0, P), P = |R| - delta, hold the micro-ops R ran
// at [delta, |R|) (the window keeps them; a new task's window drops the record). If the pipeline
// before a position is as R had it before the same position, relative to the flush, the
// micro-op there has R's shape (kind, flags, latency), nothing holds it back that did not in R,
// and its translation does what R's did at that position, then it issues at R's time and does the
// same. Positions where R's micro-op did an L1 miss and an L2 hit (or an L1 miss too late for the
// L2), and ALU positions, are replayed a segment at a time (replay_segment); a position where R's
// did anything else (the walk at the frontier of what the L2 TLB holds, a wait for a ROB or buffer
// slot) is simulated, and the replay goes on after it if the pipeline is then again as R had it.
OooCore::Reused OooCore::reuse_run_ahead(uint64_t nuke, bool r_ended) {
  Reused ru;
  AheadRecord& r = ahead_;
  if (r.size() == 0 || seq_ <= r.head_seq) return ru;
  const uint64_t delta = seq_ - r.head_seq;
  if (delta >= r.size()) return ru;
  size_t P = r.size() - delta;
  if (fetched_.size() < P + 1 || !(ahead_state(nuke) == r.state[0])) return ru;
  // The micro-op at position i is the one R had at i + delta: R recorded its shape. (What an
  // earlier replay with the same delta checked still holds: see AheadRecord::periodic_upto.)
  for (size_t i = r.period == delta ? r.periodic_upto : 0; i < P; ++i)
    if (r.shape[i] != r.shape[i + delta]) {
      P = i;
      break;
    }
  // Worth it only where most positions replay: each position R simulated is simulated again,
  // and each ends a segment.
  if (P == 0) return ru;
  // Positions [P, |R|) hold micro-ops R never ran. Where they have the shapes of R's at the same
  // positions, they are replayed like the others (their pages read from the micro-ops), up to
  // the position where R ended (its state there is recorded): Q.
  size_t Q = P;
  if (r_ended && P == r.size() - delta) {
    fetch(r.size() + 1);
    const size_t lim = std::min(r.size(), fetched_.size() - 1);
    while (Q < lim) {
      const wl::Uop& y = fetched_[Q + 1];
      if (uop_shape(y) != r.shape[Q] || y.kind == wl::UopKind::Syscall ||
          y.kind == wl::UopKind::Marker)
        break;
      ++Q;
    }
    if (Q < r.size()) Q = P;  // (a replay ends at a recorded state: state[|R|] or a position's)
  }
  // Each position R simulated is simulated again, and each ends a segment.
  const size_t n_others =
      size_t(std::lower_bound(r.others.begin(), r.others.end(), uint32_t(Q)) - r.others.begin());
  if (n_others > kMaxSimulatedInReplay) return ru;
  // Positions [0, P) keep R's record (the same shapes; the same times and outcomes if replayed);
  // so shape[i] == shape[i + delta] holds below P - delta for this run-ahead's record too.
  r.period = delta;
  r.periodic_upto = P - std::min<size_t>(P, delta);
  // The per-store arrays follow the micro-ops: store k now is the one R had at k + ds.
  {
    // (A few stores are counted one by one; a longer shift searches.)
    size_t ds = 0;
    while (ds < 8 && ds < r.n_stores && r.stores[ds] < delta) ++ds;
    if (ds == 8)
      ds = size_t(std::lower_bound(r.stores.data() + 8, r.stores.data() + r.n_stores,
                                   uint32_t(delta)) - r.stores.data());
    if (ds) {
      r.shift_stores(ds);
      r.mono_end = r.mono_end > ds ? r.mono_end - ds : 0;
    }
    // The stores of positions [P, Q), R's last ds ones by position: their micro-ops' pages, no
    // known L2 slot.
    if (Q > P) {
      uint64_t* page = r.page();
      for (size_t k = r.n_stores - ds; k < r.n_stores; ++k) {
        page[k] = fetched_[r.stores[k] + 1].addr >> Tlb::kPageShift;
        r.set_slot(k, Tlb::kNoSlot);
        r.ro()[k] = 0;
        if (r.mono_end == k && (k == 0 || page[k] > page[k - 1])) r.mono_end = k + 1;
      }
    }
  }
  size_t i = 0, st = 0, oi = 0;
  while (i < Q) {
    // (The list changes only at positions simulated in place, which are at or before i.)
    while (oi < r.others.size() && r.others[oi] < i) ++oi;
    const size_t e = oi < r.others.size() ? std::min<size_t>(r.others[oi], Q) : Q;
    if (e > i) {
      if (!replay_segment(i, e, &st, nuke)) return ru;  // the pipeline is as before position i
      ru.replayed += e - i;
      ru.positions = i = e;
      if (i >= Q) break;
    }
    // Position i: simulated (and recorded in place).
    if (!ahead_issue(i + 1, nuke, st)) {
      ru.ended = true;
      return ru;
    }
    ru.positions = ++i;
    while (st < r.n_stores && r.stores[st] < i) ++st;
    if (i >= Q || !(ahead_state(nuke) == r.state[i])) return ru;
  }
  return ru;
}

// Positions [from, to) of the record, ALU micro-ops and stores that missed the L1 and hit the L2
// (or missed the L1 too late for the L2), with the pipeline as the record had it before `from`
// and the shapes checked. Checks that each does the same now; if so makes their TLB lookups and
// fills, leaves the pipeline as the record had it before `to` and returns true; else changes
// nothing but the record's slot hints (st_slot, st_ro: still true of the TLB). The L1 misses are proved, not assumed: the L1 is full and fully associative, the
// stores' pages strictly increase and the fills are 4K entries (no store can find an earlier fill
// of the segment), and no store before the capacity-th fill finds an entry the L1 holds now (those
// after it cannot: every such entry has been evicted by then).
bool OooCore::replay_segment(size_t from, size_t to, size_t* stp, uint64_t nuke) {
  const AheadRecord& r = ahead_;
  Tlb& l1 = l1_store_;
  TlbReplay l1r(l1);
  if (!l1r.full_fully_associative() || !(l1.page_sizes() & page_size_bit(PageSize::k4K))) return false;
  // The ROB slots the positions wait for: those of micro-ops older than the head (the run-ahead
  // is shorter than the ROB), retired, free at their retirement cycles, which grow with the
  // sequence number, as allocation cycles do. If the youngest of them is free before the first
  // position allocates, none holds any position back; else each is checked.
  {
    const uint64_t last = seq_ + to;  // the sequence number of position to - 1
    const uint64_t a0 = unrel(r.alloc[from], nuke);
    if (last >= p_.rob && rob_free_[(last - p_.rob) & rob_mask_] + 1 > a0) {
      for (size_t i = from; i < to; ++i) {
        const uint64_t seq = seq_ + 1 + i;
        if (seq >= p_.rob && rob_free_[(seq - p_.rob) & rob_mask_] + 1 > unrel(r.alloc[i], nuke))
          return false;
      }
    }
  }
  const uint16_t asid = ctx_.asid;
  // The record's stores in [from, to): [k0, k1).
  const uint32_t* __restrict stores = r.stores.data();
  const size_t k0 = *stp;
  const size_t k1 = size_t(std::lower_bound(stores + k0, stores + r.n_stores, uint32_t(to)) - stores);
  const int64_t* __restrict alloc_of = r.alloc.data();
  // The store-buffer slots: store k (ordinal st_ord_ + k - k0) allocates once the store
  // store_buffer ordinals older has freed its slot. One of this run-ahead's never does (it is
  // squashed first). The older ones: if they are all retired stores (not the faulting micro-op,
  // whose slot reads as never free), they are checked from the youngest down until the latest
  // slot-free cycle of all older ones (sb_free_upto_) is before the first store allocates (the
  // allocations grow with the position); else each is checked.
  const uint64_t sb_size = p_.store_buffer, sb_mask = sb_mask_;
  if (k1 > k0 && st_ord_ + (k1 - k0) > sb_size) {
    const uint64_t q_last = st_ord_ + (k1 - k0) - 1 - sb_size;
    if (q_last >= spec_st_base_) return false;
    const uint64_t q_first = st_ord_ >= sb_size ? st_ord_ - sb_size : 0;
    const size_t k_first = k0 + size_t(q_first + sb_size - st_ord_);
    const uint64_t* __restrict sb_free = sb_free_.data();
    if (q_last + 1 >= spec_st_base_) {
      for (uint64_t q = q_first, k = k_first; q <= q_last; ++q, ++k)
        if (sb_free[q & sb_mask] > unrel(alloc_of[stores[k]], nuke)) return false;
    } else {
      // Retired stores: from the youngest down, until the latest of the older ones' slots is
      // free before the first store allocates.
      const uint64_t first_alloc = unrel(alloc_of[stores[k_first]], nuke);
      const uint64_t* __restrict upto = sb_free_upto_.data();
      for (uint64_t d = q_last - q_first + 1; d-- > 0;) {
        const uint64_t q = q_first + d;
        if (upto[q & sb_mask] <= first_alloc) break;
        if (sb_free[q & sb_mask] > unrel(alloc_of[stores[k_first + d]], nuke)) return false;
      }
    }
  }
  // Each store's translation: an L1 miss (proved), and for kPosStoreL2 an L2 hit in the slot
  // that translated the same micro-op at the previous fault, if it still holds its page.
  const size_t cap = l1.capacity();
  const uint8_t* __restrict cls_of = r.cls.data();
  const uint64_t* __restrict st_page = r.page();
  const uint32_t* st_slot = r.slot();
  // The pages strictly increase: no store finds the fill of an earlier one of the segment.
  if (k1 > r.mono_end) {  // the record does not know: each checked
    uint64_t descents = 0;  // the sign bit: some page at or below the one before (pages < 2^52)
    for (size_t k = k0 + 1; k < k1; ++k) descents |= st_page[k] - st_page[k - 1] - 1;
    if (descents >> 63) return false;
  }
  // The stores up to the capacity-th fill: none may find an entry the L1 holds now (after it, every
  // such entry has been evicted). If the L1 holds no page in the range of their pages, none can;
  // else each is probed.
  const bool any_late = k1 > k0 && r.any_late(from, to);
  if (k1 > k0) {
    // Without kPosStoreLate stores the capacity-th fill is the capacity-th store; with them, the
    // segment's last store at most.
    const size_t last = any_late ? k1 - 1 : std::min(k1, k0 + cap) - 1;
    if (l1r.covers_page_in(asid, st_page[k0], st_page[last])) {
      for (size_t k = k0, fills = 0; k < k1 && fills < cap; ++k) {
        if (l1.probe(st_page[k] << Tlb::kPageShift, asid)) return false;
        fills += cls_of[stores[k]] != kPosStoreLate;
      }
    }
  }
  // The stores that look the L2 up (kPosStoreL2): all of them, none, or (rarely) some, gathered.
  const uint32_t* slots = st_slot + k0;
  const uint64_t* pages = st_page + k0;
  size_t n_slots = k1 - k0;
  const uint32_t* kidx = nullptr;  // store index of slots[m] when gathered
  uint32_t* gathered = nullptr;    // slots, when gathered
  if (any_late) {
    if (ahead_slots_.size() < r.n_stores) {  // never shrunk
      ahead_slots_.resize(r.n_stores);
      ahead_pages_.resize(r.n_stores);
      ahead_kidx_.resize(r.n_stores);
    }
    n_slots = 0;
    for (size_t k = k0; k < k1; ++k) {
      if (cls_of[stores[k]] == kPosStoreLate) continue;
      ahead_slots_[n_slots] = st_slot[k];
      ahead_pages_[n_slots] = st_page[k];
      ahead_kidx_[n_slots++] = uint32_t(k);
    }
    slots = gathered = ahead_slots_.data();
    pages = ahead_pages_.data();
    kidx = ahead_kidx_.data();
  }
  // Each L2 slot still holds its page; else the page's slot now, found and remembered for the next
  // fault (the slot was refilled, or the micro-op's translation left none). Only the slots changed
  // since the record's mark (each claimed by at most one store: l2_owner_), and the unknown ones,
  // need looking at; all of them if the TLB's log of changes no longer reaches back that far.
  Tlb& l2 = *l2_;
  TlbReplay l2r(l2);
  uint8_t* __restrict st_ro = ahead_.ro();
  bool failed = false;
  auto check = [&](size_t m) {  // slots[m] for pages[m]: held, or found
    if (slots[m] != Tlb::kNoSlot && l2r.slot_holds_4k(slots[m], pages[m] << Tlb::kPageShift, asid)) {
      if (!kidx) st_ro[k0 + m] = !l2r.slot_entry(slots[m]).writable;
      return;
    }
    // 4K entries only: a larger one would cover later stores' pages (hits the replay cannot see).
    const TlbEntry* e = l2.probe(pages[m] << Tlb::kPageShift, asid);
    if (!e || e->size != PageSize::k4K) {
      failed = true;
      return;
    }
    if (!kidx) {
      claim_l2_slot(k0 + m, l2.slot_of(e));
      st_ro[k0 + m] = !e->writable;
    } else {
      gathered[m] = l2.slot_of(e);
    }
  };
  if (!kidx && r.asid == asid &&
      l2r.for_each_change_since(r.l2_mark, [&](uint32_t c) {
        const uint64_t k = l2_owner_[c] - spec_st_base_;  // wraps if older: out of range
        if (k >= k0 && k < k1 && st_slot[k] == c) check(k - k0);
      })) {
    if (r.any_unknown(k0, k1))
      for (size_t m = 0; m < n_slots && !failed; ++m)
        if (slots[m] == Tlb::kNoSlot) check(m);
  } else {
    for (size_t m = 0; m < n_slots && !failed; ++m) check(m);
  }
  if (failed) return false;
  if (kidx)
    for (size_t m = 0; m < n_slots; ++m) {
      claim_l2_slot(kidx[m], slots[m]);
      st_ro[kidx[m]] = !l2r.slot_entry(slots[m]).writable;
    }
  if (p_.runahead_check) check_replay(k0, k1, slots, pages, n_slots, kidx);
  if (l1r.contiguous_64k())
    for (size_t m = 0; m < n_slots; ++m)
      if (!l1r.places_4k_as_is(l2r.slot_entry(slots[m]))) return false;
  size_t readonly = 0;
  if (kidx) {
    readonly = l2r.count_readonly(slots, n_slots);
  } else {
    readonly = sum_bytes(st_ro + k0, n_slots);
  }
  l2r.hit_slots(slots, n_slots);
  l1r.count_misses(k1 - k0);
  l1r.fill_sequence_evicting(l2, slots, n_slots, true, readonly);
  const AheadState& at = r.state[to];
  alloc_cycle_ = unrel(at.alloc_cycle, nuke);
  prev_done_ = unrel(at.prev_done, nuke);
  older_done_max_ = unrel(at.older_done_max, nuke);
  no_issue_before_ = unrel(at.no_issue_before, nuke);
  alloc_in_cycle_ = at.alloc_in_cycle;
  st_ord_ = spec_st_base_ + at.stores;
  ld_ord_ = spec_ld_base_ + at.loads;
  *stp = k1;
  return true;
}

void OooCore::take_fault(const Issue& fis, const Snapshot& before) {
  const wl::Uop f = fetched_.front();
  const uint64_t head = std::max(fis.done + 1, last_retire_);
  const uint64_t nuke = head + p_.fault_to_nuke;

  [[maybe_unused]] const uint64_t n_ahead = p_.speculative_translation ? run_ahead(nuke) : 0;
  restore(before);

  faults_taken_->inc();
  MMUSIM_LOG_DEBUG(log_, "cpu {} fault at {:#x} (ip {:#x}, syndrome {:#x}) at cycle {}; {} younger micro-ops ran ahead",
                   cpu_, f.addr, f.ip, fis.syndrome, nuke, n_ahead);
  if (p_.fault_invalidates) {
    // SDM Vol 3A §4.10.4.1: the TLB entries for the faulting page number (current PCID) and the
    // paging-structure-cache entries that would be used for the address.
    maint_.x86_page_fault(ctx_.asid, f.addr);
  }
  if (trace_) trace_->time_ps = ps(nuke);
  OsFault of = os_.page_fault(cpu_, f.addr, fis.syndrome, f.ip, ps(nuke));
  uint64_t resume = nuke + uint64_t(of.cycles + 0.5);
  // The user's stores still in the store buffer drain while the exception is delivered and the
  // handler runs, up to the handler's first instruction that waits for them (x86: a LOCK-prefixed
  // one, SDM Vol 3A §9.2.2; or, if it has none, the serialising IRET, §9.3): there the handler
  // waits until the last of them has drained.
  const uint64_t drained = stores_drained();
  uint64_t wait = 0;
  if (of.store_barrier_at >= 0) {
    const uint64_t at = nuke + uint64_t(of.store_barrier_at + 0.5);
    if (drained > at) wait = drained - at;
  } else if (of.exit_drains_stores && drained > resume) {
    wait = drained - resume;
  }
  resume += wait;
  store_drain_cycles_->inc(wait);

  // Watchdog: the same micro-op faulting again and again.
  const bool repeat = fault_seq_ == seq_;
  if (repeat) {
    if (++fault_repeats_ >= p_.fault_repeat_limit) watchdog(f, fis.syndrome);
  } else {
    fault_seq_ = seq_;
    fault_repeats_ = 1;
  }
  os_.fault_taken(cpu_, head, repeat, of);

  restart(resume);  // at the faulting micro-op
}

// The pipeline is empty at `cycle` (back from the kernel): allocation resumes after the front end
// has refilled.
void OooCore::restart(uint64_t cycle) {
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
  uint64_t end = t + uint64_t(c.cycles + 0.5);
  rob_free_[seq_ & rob_mask_] = end;
  restart(end);
  uops_->inc();
  fetched_.pop_front();
  ++seq_;
  if (c.reschedule) {
    have_task_ = false;
    fetched_.clear();
    ahead_.resize(0);  // the record's micro-ops are gone
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
  while (now_ < cycle_limit) {
    if (!have_task_) {
      double sw = 0;
      if (!os_.schedule(cpu_, ps(now_), &ctx_, &sw)) return os_.all_exited() ? Run::Done : Run::Idle;
      have_task_ = true;
      program_done_ = false;
      fetched_.clear();
      ahead_.resize(0);  // the record's micro-ops are gone
      if (trace_) trace_->task = ctx_.task;
      uint64_t t = now_ + uint64_t(sw + 0.5);
      advance_cycles(t);
      last_retire_ = std::max(last_retire_, t);
      alloc_cycle_ = std::max(alloc_cycle_, t);
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
