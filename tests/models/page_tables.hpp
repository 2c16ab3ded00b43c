// SPDX-License-Identifier: GPL-2.0-only
// Builds page tables directly in a PhysMem with the mmusim::pg bits, for the walker and TLB tests
// (no kernel needed). Tables come from a bump allocator of frames.
#pragma once

#include <cstdint>

#include "base/pgformat.hpp"
#include "base/physmem.hpp"

namespace mmusim::hw::test {

struct Perm {
  bool writable = true;
  bool user = true;
  bool dirty = false;
  bool accessed = true;     // arm64 AF (x86: the walk sets A itself)
  bool contiguous = false;  // arm64 contiguous hint (level 0)
};

class PageTables {
 public:
  PageTables(pg::Isa isa, PhysMem& mem, uint64_t first_table_pfn = 0x100)
      : isa_(isa), g_(pg::geometry(isa)), mem_(mem), next_pfn_(first_table_pfn) {
    root_ = alloc();
  }

  uint64_t root() const { return root_; }
  pg::Isa isa() const { return isa_; }

  // Maps `va` to `pa` with a leaf at `level` (0: 4K page, 1: 2M block, 2: 1G block).
  void map(uint64_t va, uint64_t pa, unsigned level, Perm p = {}) {
    uint64_t table = root_;
    for (unsigned lvl = g_.levels - 1; lvl > level; --lvl) {
      uint64_t epa = entry_pa(table, va, lvl);
      uint64_t e = mem_.read64(epa);
      pg::HwEntry h = pg::decode(isa_, e, lvl);
      if (!h.valid) {
        uint64_t t = alloc();
        mem_.write64(epa, table_entry(t));
        table = t;
      } else {
        table = h.pa;
      }
    }
    mem_.write64(entry_pa(table, va, level), leaf_entry(pa, level, p));
  }

  // Where the entry of `level` for `va` lives (the tables must exist down to that level).
  uint64_t entry_pa_at(uint64_t va, unsigned level) const {
    uint64_t table = root_;
    for (unsigned lvl = g_.levels - 1; lvl > level; --lvl)
      table = pg::decode(isa_, mem_.read64(entry_pa(table, va, lvl)), lvl).pa;
    return entry_pa(table, va, level);
  }
  uint64_t entry_at(uint64_t va, unsigned level) const { return mem_.read64(entry_pa_at(va, level)); }
  void set_entry(uint64_t va, unsigned level, uint64_t e) { mem_.write64(entry_pa_at(va, level), e); }

  uint64_t table_entry(uint64_t table_pa) const {
    return isa_ == pg::Isa::x86_64 ? (table_pa | pg::x86::TABLE)
                                   : (table_pa | pg::arm64::TYPE_TABLE);
  }
  uint64_t leaf_entry(uint64_t pa, unsigned level, Perm p) const {
    if (isa_ == pg::Isa::x86_64) {
      using namespace pg::x86;
      uint64_t e = pa | PRESENT;
      if (p.writable) e |= RW;
      if (p.user) e |= USER;
      if (p.dirty) e |= DIRTY;
      if (level > 0) e |= PSE;
      return e;
    }
    using namespace pg::arm64;
    uint64_t e = pa | (level == 0 ? TYPE_PAGE : TYPE_SECT) | SHARED | NG;
    if (p.accessed) e |= AF;
    if (p.user) e |= USER;
    if (!p.writable) e |= RDONLY;
    if (p.writable || p.dirty) e |= DBM;
    if (p.dirty) e |= DIRTY;
    if (p.contiguous) e |= CONT;
    return e;
  }

 private:
  uint64_t entry_pa(uint64_t table, uint64_t va, unsigned lvl) const {
    return table + uint64_t(g_.index(va, lvl)) * g_.entry_bytes;
  }
  uint64_t alloc() {
    uint64_t pa = next_pfn_++ << PAGE_SHIFT;
    mem_.zero_frame(pa >> PAGE_SHIFT);
    return pa;
  }

  pg::Isa isa_;
  const pg::Geometry& g_;
  PhysMem& mem_;
  uint64_t next_pfn_;
  uint64_t root_;
};

}  // namespace mmusim::hw::test
