// SPDX-License-Identifier: GPL-2.0-only
// The hardware's translation-table walk, functionally: read the tables the kernel wrote in
// simulated memory, set accessed/dirty bits the way the hardware does, and say what fault an
// access gets. Used directly by the functional driver (no timing) and step by step by the timed
// page walker (models/walker), which adds paging-structure caches and memory latency.
//
// x86 (SDM Vol 3A §4.8): the accessed flag is set in every entry used by the walk; the dirty flag
// is set in the leaf on a write the translation permits. R/W is the AND over the levels.
// arm64 (Arm ARM D8.5): with FEAT_HAFDBS (HA) the walk sets AF instead of an Access-flag fault;
// with HD a write to a writable-clean leaf (DBM=1, AP[2]=1) clears AP[2] instead of a Permission
// fault.
#pragma once

#include <cstdint>

#include "base/pgformat.hpp"
#include "base/entry_history.hpp"
#include "base/physmem.hpp"

namespace mmusim::pg {

struct WalkStep {
  unsigned level;
  uint64_t entry_pa;  // where the entry was read
  uint64_t entry;     // its value (after any A/D update)
};

struct Walk {
  enum Result : uint8_t { Ok, NotPresent, AccessFlag } result = NotPresent;
  unsigned level = 0;       // the leaf's level, or the level where the walk stopped
  uint64_t page_size = 0;   // the leaf's size
  uint64_t page_pa = 0;     // physical base of the leaf page/block
  bool writable = false;    // effective write permission (x86: AND of R/W over the levels)
  bool user = false;        // effective user permission
  bool executable = false;  // effective user execute permission (x86: no XD at any level; arm64:
                            // no UXN in the leaf, no UXNTable above it)
  bool dirty = false;       // x86 D / arm64 writable-dirty
  bool dbm = false;         // arm64 writable-clean: HD may make it writable
  bool contiguous = false;  // arm64 contiguous hint on the leaf
  // Several cores (WalkOptions::history): the highest level whose entry the walk read as it was
  // at its time, memory holding a later value (another CPU's write stamped after the walk, which
  // the kernel port has made already); -1: every entry read is memory's.
  int past_level = -1;
  unsigned nsteps = 0;
  WalkStep steps[4];

  uint64_t pa(uint64_t va) const { return page_pa | (va & (page_size - 1)); }
};

struct WalkOptions {
  bool set_accessed = true;  // x86 always; arm64 with HA
  // Several cores: the entries as they were at simulated time `at_ps` (base/entry_history.hpp);
  // an entry memory already holds a later value of is not written (no A/AF update).
  const EntryHistory* history = nullptr;
  uint64_t at_ps = 0;
};

// Walk the tables from `root_pa` for `va`. Reads and (for A/AF) writes `mem`. (One instance per
// ISA: the geometry and the decoding fold to constants.)
template <Isa isa>
inline Walk walk_isa(PhysMem& mem, uint64_t root_pa, uint64_t va, const WalkOptions& opt) {
  const Geometry& g = geometry(isa);
  Walk w;
  uint64_t table = root_pa;
  w.writable = true;
  w.user = true;
  w.executable = true;
  for (int lvl = int(g.levels) - 1; lvl >= 0; --lvl) {
    uint64_t epa = table + uint64_t(g.index(va, unsigned(lvl))) * g.entry_bytes;
    uint64_t e = mem.read64(epa);
    bool stale = false;
    if (opt.history) {
      const uint8_t* frame = mem.frame_data_if(epa >> PAGE_SHIFT);
      if (frame) {
        const uint64_t then = opt.history->value_at(
            reinterpret_cast<const uint64_t*>(frame + (epa & (PAGE_SIZE - 1))), e, opt.at_ps);
        stale = then != e;
        e = then;
        if (stale && w.past_level < 0) w.past_level = lvl;
      }
    }
    HwEntry h = decode(isa, e, unsigned(lvl));
    w.level = unsigned(lvl);
    if (!h.valid) {
      w.steps[w.nsteps++] = {unsigned(lvl), epa, e};
      w.result = Walk::NotPresent;
      return w;
    }
    if (isa == Isa::x86_64) {
      if (!h.accessed && opt.set_accessed) {
        e |= x86::ACCESSED;
        if (!stale) mem.write64(epa, e);
      }
      w.writable = w.writable && h.writable;
      w.user = w.user && h.user;
    } else if (h.leaf && !h.accessed) {
      if (!opt.set_accessed) {
        w.steps[w.nsteps++] = {unsigned(lvl), epa, e};
        w.result = Walk::AccessFlag;
        return w;
      }
      e |= arm64::AF;
      if (!stale) mem.write64(epa, e);
    }
    w.steps[w.nsteps++] = {unsigned(lvl), epa, e};
    w.executable = w.executable && h.executable;  // both ISAs: denied at any level, denied
    if (h.leaf) {
      w.result = Walk::Ok;
      w.page_size = g.level_size(unsigned(lvl));
      w.page_pa = h.pa;
      if (isa == Isa::arm64) {
        w.writable = h.writable;
        w.user = h.user;
        w.dbm = h.dbm;
        w.contiguous = h.contiguous;
      }
      w.dirty = h.dirty;
      return w;
    }
    table = h.pa;
  }
  w.result = Walk::NotPresent;
  return w;
}

inline Walk walk(Isa isa, PhysMem& mem, uint64_t root_pa, uint64_t va, const WalkOptions& opt = {}) {
  return isa == Isa::x86_64 ? walk_isa<Isa::x86_64>(mem, root_pa, va, opt)
                            : walk_isa<Isa::arm64>(mem, root_pa, va, opt);
}

// The access rules every translation path applies (the timed cores' TranslationPath in
// models/walker/translation.hpp and the functional UserAccess in kernel_mm/user_access.cpp), so
// that both raise the same faults with the same syndromes.
//
// A walk that gives a user access no translation at all: not present, an access-flag fault
// (arm64 without HA), or a supervisor-only page. Such a result is never cached in a TLB (SDM Vol
// 3A §4.10.2.3; Arm ARM D8.16).
inline bool walk_faults(const Walk& w) { return w.result != Walk::Ok || !w.user; }

// Whether the hardware completes a write through the translation `w` describes: x86 if the
// effective R/W permits it (SDM Vol 3A §4.6); arm64 if the leaf is writable, or writable-clean
// (DBM) with hardware dirty-state management on (FEAT_HAFDBS, TCR_EL1.HD; Arm ARM D8.5).
inline bool write_permitted(Isa isa, const Walk& w, bool hafdbs_dirty) {
  return w.writable || (isa == Isa::arm64 && w.dbm && hafdbs_dirty);
}

// The hardware dirty update of a write through a translation that permits it: x86 sets D in the
// leaf; arm64 with HD clears AP[2] of a writable-clean leaf. Returns false if the write is not
// permitted (a permission fault).
inline bool hw_mark_dirty(Isa isa, PhysMem& mem, Walk& w, bool hafdbs_dirty) {
  WalkStep& leaf = w.steps[w.nsteps - 1];
  if (isa == Isa::x86_64) {
    if (!w.writable) return false;
    if (!(leaf.entry & x86::DIRTY)) {
      leaf.entry |= x86::DIRTY;
      mem.write64(leaf.entry_pa, leaf.entry);
    }
    w.dirty = true;
    return true;
  }
  if (w.writable) {
    w.dirty = true;
    return true;
  }
  if (w.dbm && hafdbs_dirty) {
    leaf.entry &= ~arm64::RDONLY;
    mem.write64(leaf.entry_pa, leaf.entry);
    w.writable = true;
    w.dirty = true;
    return true;
  }
  return false;
}

// x86 #PF error code (arch/x86/include/asm/trap_pf.h): P (protection), W, U, I.
inline uint64_t x86_pf_error_code(bool present, bool write, bool user, bool exec) {
  return (present ? 1u : 0u) | (write ? 2u : 0u) | (user ? 4u : 0u) | (exec ? 16u : 0u);
}

// arm64 ESR_EL1 for a data abort from EL0 (Arm ARM D24.2.40): EC = 0x24, IL, WnR (bit 6),
// DFSC = translation fault level n (0b0001nn), access flag fault (0b0010nn), permission fault
// (0b0011nn). Level n is the architectural level (3 = the PTE level).
namespace esr {
inline constexpr uint64_t EC_SHIFT = 26;
inline constexpr uint64_t EC_IABT_LOW = 0x20;  // instruction abort from EL0
inline constexpr uint64_t EC_DABT_LOW = 0x24;
inline constexpr uint64_t IL = uint64_t(1) << 25;
inline constexpr uint64_t WNR = uint64_t(1) << 6;
inline constexpr uint64_t FSC_MASK = 0x3f;
inline constexpr uint64_t FSC_FAULT = 0x04;   // translation fault, + level
inline constexpr uint64_t FSC_ACCESS = 0x08;  // access flag fault, + level
inline constexpr uint64_t FSC_PERM = 0x0c;    // permission fault, + level
}  // namespace esr

inline uint64_t arm64_dabt_esr(Walk::Result r, bool permission, unsigned level, bool write) {
  unsigned arch_level = 3 - level;  // our level 0 is the architecture's level 3
  uint64_t fsc = permission ? esr::FSC_PERM
               : r == Walk::AccessFlag ? esr::FSC_ACCESS
                                       : esr::FSC_FAULT;
  return (esr::EC_DABT_LOW << esr::EC_SHIFT) | esr::IL | (write ? esr::WNR : 0) | fsc | arch_level;
}
// The same for an Instruction Abort from EL0 (EC = 0x20; IFSC as DFSC, no WnR).
inline uint64_t arm64_iabt_esr(Walk::Result r, bool permission, unsigned level) {
  const uint64_t dabt = arm64_dabt_esr(r, permission, level, false);
  return (dabt & ~(uint64_t(0x3f) << esr::EC_SHIFT)) | (esr::EC_IABT_LOW << esr::EC_SHIFT);
}

// The syndrome of a user data access that faults, as the kernel's fault handler receives it: x86
// the #PF error code (P set when a translation exists, i.e. `r` is Ok: a protection fault), arm64
// the ESR of a Data Abort from EL0 (a permission fault when `r` is Ok, else a translation or
// access-flag fault). `level` is the leaf's level (Ok) or where the walk stopped (our numbering,
// 0 = the PTE level).
inline uint64_t fault_syndrome(Isa isa, Walk::Result r, unsigned level, bool write) {
  const bool present = r == Walk::Ok;
  if (isa == Isa::x86_64) return x86_pf_error_code(present, write, true, false);
  return arm64_dabt_esr(r, present, level, write);
}

// The syndrome of a user instruction fetch that faults (the front end's translation through the
// instruction TLB): x86 #PF with I/D set (bit 4; P when a translation exists: XD, a protection
// fault), arm64 an Instruction Abort from EL0. `r` Ok: the translation does not permit execution.
inline uint64_t fetch_fault_syndrome(Isa isa, Walk::Result r, unsigned level) {
  const bool present = r == Walk::Ok;
  if (isa == Isa::x86_64) return x86_pf_error_code(present, false, true, true);
  return arm64_iabt_esr(r, present, level);
}

}  // namespace mmusim::pg
