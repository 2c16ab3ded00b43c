// SPDX-License-Identifier: GPL-2.0-only
// Paging formats, defined once as data, used by both the hardware walker (models/) and the kernel
// port (kernel_mm/). Every shift and mask derives from the geometry descriptor; nothing assumes
// 4 KiB or 512 entries by literal (VCML's IOMMU and gem5's per-ISA bit unions are the models).
//
// Levels are numbered from the leaf: level 0 is the PTE level (4K pages), 1 the PMD (2M), 2 the
// PUD (1G), 3 the PGD/PML4 (the root with 4 levels).
#pragma once

#include <cstdint>

namespace mmusim::pg {

enum class Isa : uint8_t { x86_64, arm64 };
inline const char* isa_name(Isa i) { return i == Isa::x86_64 ? "x86_64" : "arm64"; }

struct Geometry {
  unsigned page_shift;      // 12: 4 KiB pages / granule
  unsigned levels;          // 4
  unsigned bits_per_level;  // 9: 512 entries of 8 bytes per table
  unsigned entry_bytes;     // 8
  unsigned cont_entries;    // arm64 contiguous hint at level 0: 16 (0: no such hint)

  constexpr uint64_t page_size() const { return uint64_t(1) << page_shift; }
  constexpr uint64_t page_mask() const { return ~(page_size() - 1); }  // Linux PAGE_MASK
  constexpr unsigned ptrs_per_table() const { return 1u << bits_per_level; }
  constexpr unsigned level_shift(unsigned lvl) const { return page_shift + lvl * bits_per_level; }
  constexpr uint64_t level_size(unsigned lvl) const { return uint64_t(1) << level_shift(lvl); }
  constexpr uint64_t level_mask(unsigned lvl) const { return ~(level_size(lvl) - 1); }
  constexpr unsigned index(uint64_t va, unsigned lvl) const {
    return unsigned((va >> level_shift(lvl)) & (ptrs_per_table() - 1));
  }
  constexpr unsigned va_bits() const { return level_shift(levels); }
};

// x86-64 4-level paging (Intel SDM Vol 3A §4.5) and arm64 stage 1, 4K granule, 48-bit VA
// (Arm ARM D8). Same geometry; different entry formats.
inline constexpr Geometry kX86_64{12, 4, 9, 8, 0};
inline constexpr Geometry kArm64_4K{12, 4, 9, 8, 16};

inline constexpr const Geometry& geometry(Isa isa) { return isa == Isa::x86_64 ? kX86_64 : kArm64_4K; }

// The base page both formats share (4 KiB). Code that does not know the ISA counts pages in it:
// the TLB models' tags and run-ahead replay, the kernel port's PAGE_SHIFT, the workloads. A
// format with another base page (a 16K or 64K granule) would have to be threaded through that
// code explicitly; the static_assert is where that starts.
inline constexpr const Geometry& kBaseGeometry = kX86_64;
inline constexpr unsigned kBasePageShift = kBaseGeometry.page_shift;
inline constexpr uint64_t kBasePageSize = kBaseGeometry.page_size();
inline constexpr uint64_t kBasePageMask = kBaseGeometry.page_mask();
static_assert(kArm64_4K.page_shift == kBasePageShift && kArm64_4K.bits_per_level == kX86_64.bits_per_level &&
                  kArm64_4K.levels == kX86_64.levels,
              "the ISA-independent code assumes one base page and one table geometry");

inline constexpr uint64_t bit(unsigned n) { return uint64_t(1) << n; }
inline constexpr uint64_t genmask(unsigned hi, unsigned lo) {
  return (~uint64_t(0) >> (63 - hi)) & ~(bit(lo) - 1);
}

// x86-64 entry bits (arch/x86/include/asm/pgtable_types.h).
namespace x86 {
inline constexpr uint64_t PRESENT = bit(0);
inline constexpr uint64_t RW = bit(1);
inline constexpr uint64_t USER = bit(2);
inline constexpr uint64_t PWT = bit(3);
inline constexpr uint64_t PCD = bit(4);
inline constexpr uint64_t ACCESSED = bit(5);
inline constexpr uint64_t DIRTY = bit(6);
inline constexpr uint64_t PSE = bit(7);  // leaf at the PMD/PUD level
inline constexpr uint64_t GLOBAL = bit(8);
inline constexpr uint64_t SPECIAL = bit(9);      // _PAGE_SPECIAL (SOFTW1)
inline constexpr uint64_t UFFD_WP = bit(10);     // SOFTW2
inline constexpr uint64_t SOFT_DIRTY = bit(11);  // SOFTW3
inline constexpr uint64_t DEVMAP = bit(57);      // SOFTW4
inline constexpr uint64_t SAVED_DIRTY = bit(58); // SOFTW5
inline constexpr uint64_t PROTNONE = GLOBAL;     // only when !PRESENT
inline constexpr uint64_t NX = bit(63);
inline constexpr uint64_t PFN_MASK = genmask(51, kX86_64.page_shift);
// _PAGE_TABLE: what a non-leaf entry carries.
inline constexpr uint64_t TABLE = PRESENT | RW | USER | ACCESSED | DIRTY;
}  // namespace x86

// arm64 entry bits (arch/arm64/include/asm/pgtable-hwdef.h, pgtable-prot.h).
namespace arm64 {
inline constexpr uint64_t VALID = bit(0);
inline constexpr uint64_t TABLE_BIT = bit(1);  // level 0: page (with VALID); levels 1,2: table
inline constexpr uint64_t TYPE_MASK = 3;
inline constexpr uint64_t TYPE_PAGE = 3;   // PTE_TYPE_PAGE
inline constexpr uint64_t TYPE_TABLE = 3;  // PMD_TYPE_TABLE
inline constexpr uint64_t TYPE_SECT = 1;   // PMD_TYPE_SECT (block)
inline constexpr uint64_t ATTRINDX_NORMAL = uint64_t(0) << 2;  // MT_NORMAL = 0
inline constexpr uint64_t USER = bit(6);    // AP[1]
inline constexpr uint64_t RDONLY = bit(7);  // AP[2]
inline constexpr uint64_t SHARED = uint64_t(3) << 8;
inline constexpr uint64_t AF = bit(10);
inline constexpr uint64_t NG = bit(11);
inline constexpr uint64_t DBM = bit(51);
inline constexpr uint64_t CONT = bit(52);
inline constexpr uint64_t PXN = bit(53);
inline constexpr uint64_t UXN = bit(54);
inline constexpr uint64_t UXN_TABLE = bit(60);  // UXNTable of a table descriptor (levels 1-3)
// Software bits.
inline constexpr uint64_t WRITE = DBM;  // PTE_WRITE == PTE_DBM
inline constexpr uint64_t DIRTY = bit(55);
inline constexpr uint64_t SPECIAL = bit(56);
inline constexpr uint64_t DEVMAP = bit(57);
inline constexpr uint64_t PRESENT_INVALID = NG;  // only when !VALID (PROT_NONE)
inline constexpr uint64_t ADDR_MASK = genmask(47, kArm64_4K.page_shift);
}  // namespace arm64

// What the hardware makes of one entry at one level. The walker decodes with this; the kernel's
// arch layer writes the same bits.
struct HwEntry {
  bool valid = false;
  bool table = false;       // points to the next-level table
  bool leaf = false;        // maps a page/block
  uint64_t pa = 0;          // next table's or the page's physical address
  bool writable = false;    // effective write permission right now (x86 R/W; arm64 !AP[2])
  bool user = false;
  bool executable = false;  // user instruction fetch permitted by this entry (x86 !XD; arm64
                            // leaf !UXN, table !UXNTable)
  bool accessed = false;    // x86 A, arm64 AF
  bool dirty = false;       // x86 D; arm64: writable-dirty (DBM && !RDONLY) or sw DIRTY
  bool dbm = false;         // arm64: hardware dirty management may make it writable
  bool contiguous = false;  // arm64 contiguous hint
};

inline HwEntry decode(Isa isa, uint64_t e, unsigned level) {
  HwEntry h;
  if (isa == Isa::x86_64) {
    h.valid = e & x86::PRESENT;
    if (!h.valid) return h;
    h.leaf = level == 0 || ((level == 1 || level == 2) && (e & x86::PSE));
    h.table = !h.leaf;
    h.pa = e & x86::PFN_MASK;
    if (h.leaf && level > 0) h.pa &= ~(kX86_64.level_size(level) - 1);  // PAT_LARGE is bit 12
    h.writable = e & x86::RW;
    h.user = e & x86::USER;
    // XD (bit 63) with IA32_EFER.NXE = 1, which Linux sets on every 64-bit CPU (SDM Vol 3A §4.6).
    h.executable = !(e & x86::NX);
    h.accessed = e & x86::ACCESSED;
    h.dirty = e & x86::DIRTY;
    return h;
  }
  h.valid = e & arm64::VALID;
  if (!h.valid) return h;
  if (level == 0) {
    if ((e & arm64::TYPE_MASK) != arm64::TYPE_PAGE) {  // reserved encoding at level 3
      h.valid = false;
      return h;
    }
    h.leaf = true;
  } else {
    h.table = (e & arm64::TYPE_MASK) == arm64::TYPE_TABLE;
    h.leaf = !h.table;
    if (h.leaf && level == 3) {  // no blocks at level 0 with the 4K granule
      h.valid = false;
      return h;
    }
  }
  h.pa = e & arm64::ADDR_MASK;
  if (h.leaf && level > 0) h.pa &= ~(kArm64_4K.level_size(level) - 1);
  h.writable = !(e & arm64::RDONLY);
  h.user = e & arm64::USER;
  // EL0 execution: UXN in a leaf, UXNTable in a table descriptor (Arm ARM D8.4.2, D8.5).
  h.executable = !(e & (h.leaf ? arm64::UXN : arm64::UXN_TABLE));
  h.accessed = e & arm64::AF;
  h.dbm = e & arm64::DBM;
  h.dirty = (h.dbm && !(e & arm64::RDONLY)) || (e & arm64::DIRTY);
  h.contiguous = e & arm64::CONT;
  return h;
}

}  // namespace mmusim::pg
