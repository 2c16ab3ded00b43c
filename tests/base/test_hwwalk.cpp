// SPDX-License-Identifier: GPL-2.0-only
// Tests of the functional hardware page walk (base/hwwalk.hpp) on x86-64 and arm64 tables built
// by hand in simulated memory from the entry bits of base/pgformat.hpp, and of the fault encoders.
#include <catch2/catch.hpp>

#include <cstdint>

#include "base/hwwalk.hpp"
#include "base/pgformat.hpp"
#include "base/physmem.hpp"

using namespace mmusim;
using namespace mmusim::pg;

namespace {

constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;

// Page tables in a PhysMem, built one entry at a time. Tables are allocated from frame 1 up;
// `epa[level]` remembers where the entry of each level of the last built path lies.
struct Tables {
  Isa isa;
  PhysMem mem{16 * MiB};
  uint64_t next_pfn = 1;
  uint64_t root;
  uint64_t epa[4] = {};

  explicit Tables(Isa i) : isa(i) { root = alloc(); }
  uint64_t alloc() { return (next_pfn++) << PAGE_SHIFT; }
  uint64_t addr_mask() const { return isa == Isa::x86_64 ? x86::PFN_MASK : arm64::ADDR_MASK; }
  // A table entry: x86 P|RW|U without A or D (so that the walk's updates show); arm64 a table
  // descriptor.
  uint64_t table_bits() const {
    return isa == Isa::x86_64 ? (x86::PRESENT | x86::RW | x86::USER) : arm64::TYPE_TABLE;
  }

  // Creates the tables above `level` for `va` (reusing existing ones) and writes `entry` at
  // `level`. Returns the physical address of that entry.
  uint64_t set(uint64_t va, unsigned level, uint64_t entry) {
    const Geometry& g = geometry(isa);
    uint64_t table = root;
    static_assert(kX86_64.levels == 4 && kArm64_4K.levels == 4, "epa[] has 4 levels");
    for (unsigned lvl = 3; lvl > level; --lvl) {
      uint64_t pa = table + uint64_t(g.index(va, lvl)) * g.entry_bytes;
      uint64_t e = mem.read64(pa);
      if (!e) {
        e = alloc() | table_bits();
        mem.write64(pa, e);
      }
      epa[lvl] = pa;
      table = e & addr_mask();
    }
    uint64_t pa = table + uint64_t(g.index(va, level)) * g.entry_bytes;
    mem.write64(pa, entry);
    epa[level] = pa;
    return pa;
  }
  uint64_t entry(unsigned level) const { return mem.read64(epa[level]); }
  void update(unsigned level, uint64_t set_bits, uint64_t clear_bits) {
    mem.write64(epa[level], (mem.read64(epa[level]) | set_bits) & ~clear_bits);
  }
  Walk walk(uint64_t va, bool set_accessed = true) {
    WalkOptions o;
    o.set_accessed = set_accessed;
    return pg::walk(isa, mem, root, va, o);
  }
};

constexpr uint64_t kVa = 0x00007f1234567000ull;  // indices 254, 72, 418, 359
constexpr uint64_t kPage = 0x0000000123456000ull;
constexpr uint64_t kX86Leaf = x86::PRESENT | x86::RW | x86::USER;
constexpr uint64_t kArmLeaf =
    arm64::TYPE_PAGE | arm64::AF | arm64::USER | arm64::SHARED | arm64::NG | arm64::PXN;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Geometry

TEST_CASE("hwwalk: 4-level geometry and indices", "[hwwalk]") {
  CHECK(kX86_64.page_size() == 4096);
  CHECK(kX86_64.ptrs_per_table() == 512);
  CHECK(kX86_64.level_size(1) == 2 * MiB);
  CHECK(kX86_64.level_size(2) == GiB);
  CHECK(kX86_64.va_bits() == 48);
  CHECK(kArm64_4K.cont_entries == 16);
  CHECK(kX86_64.index(kVa, 3) == 254);
  CHECK(kX86_64.index(kVa, 2) == 72);
  CHECK(kX86_64.index(kVa, 1) == 418);
  CHECK(kX86_64.index(kVa, 0) == 359);
  CHECK(genmask(51, 12) == 0x000ffffffffff000ull);
  CHECK(x86::PFN_MASK == 0x000ffffffffff000ull);
  CHECK(arm64::ADDR_MASK == 0x0000fffffffff000ull);
}

// ---------------------------------------------------------------------------------------------
// x86-64

TEST_CASE("hwwalk: x86 4K page: translation, steps, accessed bits at every level", "[hwwalk]") {
  Tables t(Isa::x86_64);
  t.set(kVa, 0, kPage | kX86Leaf | x86::NX);  // NX (bit 63) is not part of the address
  for (unsigned l = 0; l < 4; ++l) REQUIRE_FALSE(t.entry(l) & x86::ACCESSED);

  Walk w = t.walk(kVa + 0x8a0);
  REQUIRE(w.result == Walk::Ok);
  CHECK(w.level == 0);
  CHECK(w.page_size == 4 * KiB);
  CHECK(w.page_pa == kPage);
  CHECK(w.pa(kVa + 0x8a0) == kPage + 0x8a0);
  CHECK(w.writable);
  CHECK(w.user);
  CHECK_FALSE(w.dirty);
  REQUIRE(w.nsteps == 4);
  for (unsigned i = 0; i < 4; ++i) {
    INFO("step " << i);
    CHECK(w.steps[i].level == 3 - i);
    CHECK(w.steps[i].entry_pa == t.epa[3 - i]);
    // The accessed flag is set in every entry the walk used, in memory and in the step.
    CHECK(t.entry(3 - i) & x86::ACCESSED);
    CHECK(w.steps[i].entry == t.entry(3 - i));
    // ... and nothing else changed.
    CHECK((t.entry(3 - i) & ~x86::ACCESSED) ==
          (i == 3 ? (kPage | kX86Leaf | x86::NX) : (t.table_bits() | (t.entry(3 - i) & x86::PFN_MASK))));
  }
  CHECK(w.steps[0].entry_pa == t.root + 254 * 8);

  // A second walk finds the same and changes nothing more.
  uint64_t before = t.entry(0);
  Walk w2 = t.walk(kVa);
  CHECK(w2.result == Walk::Ok);
  CHECK(t.entry(0) == before);

  // A neighbouring page in the same page table is not mapped.
  Walk n = t.walk(kVa + 4 * KiB);
  CHECK(n.result == Walk::NotPresent);
  CHECK(n.level == 0);
  CHECK(n.nsteps == 4);
  CHECK(n.steps[3].entry_pa == t.epa[0] + 8);
}

TEST_CASE("hwwalk: x86 not present at each level", "[hwwalk]") {
  for (unsigned level = 0; level < 4; ++level) {
    INFO("level " << level);
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | kX86Leaf);
    // Clear only P: the rest of the entry (a swap entry, PROT_NONE) does not matter.
    t.update(level, 0, x86::PRESENT);
    const uint64_t stale = t.entry(level);
    Walk w = t.walk(kVa);
    CHECK(w.result == Walk::NotPresent);
    CHECK(w.level == level);
    REQUIRE(w.nsteps == 4 - level);
    CHECK(w.steps[w.nsteps - 1].level == level);
    CHECK(w.steps[w.nsteps - 1].entry_pa == t.epa[level]);
    CHECK(w.steps[w.nsteps - 1].entry == stale);
    CHECK(t.entry(level) == stale);  // a non-present entry is not touched
    for (unsigned l = level + 1; l < 4; ++l) CHECK(t.entry(l) & x86::ACCESSED);
    CHECK(x86_pf_error_code(false, false, true, false) == 0x4);
  }
  // An empty root.
  Tables e(Isa::x86_64);
  Walk w = e.walk(kVa);
  CHECK(w.result == Walk::NotPresent);
  CHECK(w.level == 3);
  CHECK(w.nsteps == 1);
}

TEST_CASE("hwwalk: x86 2M leaf via PSE and 1G leaf at the PUD", "[hwwalk]") {
  SECTION("2M") {
    Tables t(Isa::x86_64);
    // Inside the 16 MiB memory: without PSE it is read as a (zero) page table below.
    const uint64_t block = 8 * MiB;
    // PAT_LARGE (bit 12) is a flag in a large leaf, not an address bit.
    t.set(kVa, 1, block | kX86Leaf | x86::PSE | (uint64_t(1) << 12));
    Walk w = t.walk(kVa + 0x8a0);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.level == 1);
    CHECK(w.page_size == 2 * MiB);
    CHECK(w.page_pa == block);
    CHECK(w.pa(kVa + 0x8a0) == block + (kVa & (2 * MiB - 1)) + 0x8a0);
    CHECK(w.nsteps == 3);
    CHECK(w.steps[2].entry_pa == t.epa[1]);
    CHECK(t.entry(1) & x86::ACCESSED);
    // Without PSE the same entry points to a page table.
    t.update(1, 0, x86::PSE);
    Walk p = t.walk(kVa);
    CHECK(p.result == Walk::NotPresent);
    CHECK(p.level == 0);
    CHECK(p.nsteps == 4);
    // ... and bit 12 is an address bit again.
    CHECK(p.steps[3].entry_pa == (block | 0x1000) + kX86_64.index(kVa, 0) * 8);
  }
  SECTION("1G") {
    Tables t(Isa::x86_64);
    const uint64_t block = 5 * GiB;
    t.set(kVa, 2, block | kX86Leaf | x86::PSE);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.level == 2);
    CHECK(w.page_size == GiB);
    CHECK(w.page_pa == block);
    CHECK(w.pa(kVa + 123) == block + (kVa & (GiB - 1)) + 123);
    CHECK(w.nsteps == 2);
  }
}

TEST_CASE("hwwalk: x86 R/W and U/S are the AND over the levels", "[hwwalk]") {
  for (unsigned level = 0; level < 4; ++level) {
    INFO("R/W clear at level " << level);
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | kX86Leaf);
    t.update(level, 0, x86::RW);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK_FALSE(w.writable);
    CHECK(w.user);
  }
  for (unsigned level = 0; level < 4; ++level) {
    INFO("U/S clear at level " << level);
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | kX86Leaf);
    t.update(level, 0, x86::USER);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.writable);
    CHECK_FALSE(w.user);
  }
  // A large leaf: the AND covers the levels above it.
  Tables t(Isa::x86_64);
  t.set(kVa, 1, 0x40000000ull | kX86Leaf | x86::PSE);
  t.update(3, 0, x86::RW);
  CHECK_FALSE(t.walk(kVa).writable);
}

TEST_CASE("hwwalk: x86 hw_mark_dirty sets D in the leaf and refuses a read-only page",
          "[hwwalk]") {
  SECTION("writable 4K page") {
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | kX86Leaf);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK_FALSE(w.dirty);
    REQUIRE(hw_mark_dirty(Isa::x86_64, t.mem, w, false));
    CHECK(w.dirty);
    CHECK(t.entry(0) & x86::DIRTY);
    CHECK(t.entry(0) & x86::ACCESSED);
    CHECK(w.steps[3].entry == t.entry(0));
    for (unsigned l = 1; l < 4; ++l) CHECK_FALSE(t.entry(l) & x86::DIRTY);  // only the leaf
    Walk again = t.walk(kVa);
    CHECK(again.dirty);
  }
  SECTION("read-only leaf") {
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | x86::PRESENT | x86::USER);
    Walk w = t.walk(kVa);
    const uint64_t e = t.entry(0);
    CHECK_FALSE(hw_mark_dirty(Isa::x86_64, t.mem, w, true));
    CHECK_FALSE(w.dirty);
    CHECK(t.entry(0) == e);
    CHECK(x86_pf_error_code(true, true, true, false) == 0x7);
  }
  SECTION("read-only through an upper level") {
    Tables t(Isa::x86_64);
    t.set(kVa, 0, kPage | kX86Leaf);
    t.update(2, 0, x86::RW);
    Walk w = t.walk(kVa);
    CHECK_FALSE(hw_mark_dirty(Isa::x86_64, t.mem, w, true));
    CHECK_FALSE(t.entry(0) & x86::DIRTY);
  }
  SECTION("2M leaf: D in the PMD entry") {
    Tables t(Isa::x86_64);
    t.set(kVa, 1, 0x40000000ull | kX86Leaf | x86::PSE);
    Walk w = t.walk(kVa);
    REQUIRE(hw_mark_dirty(Isa::x86_64, t.mem, w, false));
    CHECK(t.entry(1) & x86::DIRTY);
    CHECK(t.entry(1) & x86::PSE);
  }
}

TEST_CASE("hwwalk: x86 decode", "[hwwalk]") {
  HwEntry h = decode(Isa::x86_64, kPage | kX86Leaf | x86::DIRTY | x86::ACCESSED, 0);
  CHECK(h.valid);
  CHECK(h.leaf);
  CHECK_FALSE(h.table);
  CHECK(h.pa == kPage);
  CHECK(h.writable);
  CHECK(h.user);
  CHECK(h.dirty);
  CHECK(h.accessed);
  HwEntry tbl = decode(Isa::x86_64, 0x5000 | x86::TABLE, 1);
  CHECK(tbl.table);
  CHECK_FALSE(tbl.leaf);
  CHECK(tbl.pa == 0x5000);
  CHECK_FALSE(decode(Isa::x86_64, kPage | x86::RW, 0).valid);
  // PSE at the PML4 is not a leaf.
  CHECK(decode(Isa::x86_64, 0x5000 | x86::TABLE | x86::PSE, 3).table);
}

// ---------------------------------------------------------------------------------------------
// arm64

TEST_CASE("hwwalk: arm64 4K page through table descriptors", "[hwwalk]") {
  Tables t(Isa::arm64);
  t.set(kVa, 0, kPage | kArmLeaf | arm64::UXN);
  Walk w = t.walk(kVa + 0x10);
  REQUIRE(w.result == Walk::Ok);
  CHECK(w.level == 0);
  CHECK(w.page_size == 4 * KiB);
  CHECK(w.page_pa == kPage);  // UXN/PXN/nG are not address bits
  CHECK(w.pa(kVa + 0x10) == kPage + 0x10);
  CHECK(w.writable);  // AP[2] clear
  CHECK(w.user);      // AP[1] set
  CHECK_FALSE(w.dbm);
  CHECK_FALSE(w.dirty);
  CHECK_FALSE(w.contiguous);
  REQUIRE(w.nsteps == 4);
  for (unsigned i = 0; i < 4; ++i) {
    CHECK(w.steps[i].level == 3 - i);
    CHECK(w.steps[i].entry_pa == t.epa[3 - i]);
    CHECK(w.steps[i].entry == t.entry(3 - i));
  }
  // arm64 tables have no access flag: the walk leaves table descriptors alone.
  for (unsigned l = 1; l < 4; ++l) CHECK(t.entry(l) == ((t.entry(l) & arm64::ADDR_MASK) | 3));

  SECTION("read-only, kernel-only page") {
    t.update(0, arm64::RDONLY, arm64::USER);
    Walk r = t.walk(kVa);
    CHECK_FALSE(r.writable);
    CHECK_FALSE(r.user);
  }
}

TEST_CASE("hwwalk: arm64 blocks at levels 1 and 2, invalid encodings", "[hwwalk]") {
  SECTION("2M block") {
    Tables t(Isa::arm64);
    const uint64_t block = 0x80000000ull + 2 * MiB;
    t.set(kVa, 1, block | arm64::TYPE_SECT | arm64::AF | arm64::USER);
    Walk w = t.walk(kVa + 0x1234);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.level == 1);
    CHECK(w.page_size == 2 * MiB);
    CHECK(w.page_pa == block);
    CHECK(w.pa(kVa + 0x1234) == block + (kVa & (2 * MiB - 1)) + 0x1234);
    CHECK(w.nsteps == 3);
  }
  SECTION("1G block") {
    Tables t(Isa::arm64);
    t.set(kVa, 2, 3 * GiB | arm64::TYPE_SECT | arm64::AF);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.level == 2);
    CHECK(w.page_size == GiB);
    CHECK(w.page_pa == 3 * GiB);
    CHECK_FALSE(w.user);
  }
  SECTION("no block at the root level with the 4K granule") {
    Tables t(Isa::arm64);
    t.set(kVa, 3, 0x8000000000ull | arm64::TYPE_SECT | arm64::AF);
    Walk w = t.walk(kVa);
    CHECK(w.result == Walk::NotPresent);
    CHECK(w.level == 3);
    CHECK(w.nsteps == 1);
  }
  SECTION("type 01 at the page level is reserved") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, kPage | arm64::TYPE_SECT | arm64::AF);
    Walk w = t.walk(kVa);
    CHECK(w.result == Walk::NotPresent);
    CHECK(w.level == 0);
    CHECK(w.nsteps == 4);
  }
  SECTION("invalid at each level") {
    for (unsigned level = 0; level < 4; ++level) {
      INFO("level " << level);
      Tables t(Isa::arm64);
      t.set(kVa, 0, kPage | kArmLeaf);
      t.update(level, 0, arm64::VALID);
      Walk w = t.walk(kVa);
      CHECK(w.result == Walk::NotPresent);
      CHECK(w.level == level);
      CHECK(w.nsteps == 4 - level);
      CHECK(w.steps[w.nsteps - 1].entry_pa == t.epa[level]);
      // Translation fault, level 3 - level in the architecture's numbering.
      CHECK(arm64_dabt_esr(w.result, false, w.level, false) == (0x92000004ull | (3 - level)));
    }
  }
}

TEST_CASE("hwwalk: arm64 access flag: fault without HA, set with HA", "[hwwalk]") {
  SECTION("page, no HA") {
    Tables t(Isa::arm64);
    const uint64_t e = kPage | (kArmLeaf & ~arm64::AF);
    t.set(kVa, 0, e);
    Walk w = t.walk(kVa, /*set_accessed=*/false);
    CHECK(w.result == Walk::AccessFlag);
    CHECK(w.level == 0);
    REQUIRE(w.nsteps == 4);
    CHECK(w.steps[3].entry == e);
    CHECK(t.entry(0) == e);  // untouched
    CHECK(arm64_dabt_esr(w.result, false, w.level, false) == 0x9200000bull);
    CHECK(arm64_dabt_esr(w.result, false, w.level, true) == 0x9200004bull);
  }
  SECTION("page, HA") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, kPage | (kArmLeaf & ~arm64::AF));
    Walk w = t.walk(kVa, /*set_accessed=*/true);
    REQUIRE(w.result == Walk::Ok);
    CHECK(t.entry(0) & arm64::AF);
    CHECK(w.steps[3].entry == t.entry(0));
    CHECK(t.entry(0) == (kPage | kArmLeaf));
  }
  SECTION("block, no HA") {
    Tables t(Isa::arm64);
    t.set(kVa, 1, 0x80000000ull | arm64::TYPE_SECT | arm64::USER);
    Walk w = t.walk(kVa, false);
    CHECK(w.result == Walk::AccessFlag);
    CHECK(w.level == 1);
    CHECK(w.nsteps == 3);
    CHECK((arm64_dabt_esr(w.result, false, w.level, false) & esr::FSC_MASK) == 0x0a);
  }
}

TEST_CASE("hwwalk: arm64 DBM writable-clean and the hardware dirty update", "[hwwalk]") {
  const uint64_t clean = kPage | kArmLeaf | arm64::DBM | arm64::RDONLY;
  SECTION("writable-clean decodes as not writable, DBM, not dirty") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, clean);
    Walk w = t.walk(kVa);
    REQUIRE(w.result == Walk::Ok);
    CHECK_FALSE(w.writable);
    CHECK(w.dbm);
    CHECK_FALSE(w.dirty);
  }
  SECTION("without HD: a permission fault, nothing written") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, clean);
    Walk w = t.walk(kVa);
    CHECK_FALSE(hw_mark_dirty(Isa::arm64, t.mem, w, /*hafdbs_dirty=*/false));
    CHECK_FALSE(w.writable);
    CHECK_FALSE(w.dirty);
    CHECK(t.entry(0) == clean);
    CHECK(arm64_dabt_esr(w.result, true, w.level, true) == 0x9200004full);
  }
  SECTION("with HD: AP[2] cleared, writable and dirty") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, clean);
    Walk w = t.walk(kVa);
    REQUIRE(hw_mark_dirty(Isa::arm64, t.mem, w, /*hafdbs_dirty=*/true));
    CHECK(w.writable);
    CHECK(w.dirty);
    CHECK(t.entry(0) == (clean & ~arm64::RDONLY));
    CHECK(w.steps[3].entry == t.entry(0));
    Walk again = t.walk(kVa);
    CHECK(again.writable);
    CHECK(again.dirty);
    CHECK(again.dbm);
  }
  SECTION("read-only without DBM: refused even with HD") {
    Tables t(Isa::arm64);
    const uint64_t ro = kPage | kArmLeaf | arm64::RDONLY;
    t.set(kVa, 0, ro);
    Walk w = t.walk(kVa);
    CHECK_FALSE(w.dbm);
    CHECK_FALSE(hw_mark_dirty(Isa::arm64, t.mem, w, true));
    CHECK(t.entry(0) == ro);
  }
  SECTION("writable-dirty: allowed, nothing to write") {
    Tables t(Isa::arm64);
    const uint64_t dirty = kPage | kArmLeaf | arm64::DBM;
    t.set(kVa, 0, dirty);
    Walk w = t.walk(kVa);
    CHECK(w.writable);
    CHECK(w.dirty);
    CHECK(hw_mark_dirty(Isa::arm64, t.mem, w, false));
    CHECK(t.entry(0) == dirty);
  }
  SECTION("software dirty bit on a read-only page") {
    Tables t(Isa::arm64);
    t.set(kVa, 0, kPage | kArmLeaf | arm64::RDONLY | arm64::DIRTY);
    Walk w = t.walk(kVa);
    CHECK(w.dirty);
    CHECK_FALSE(w.writable);
  }
  SECTION("writable-clean 2M block with HD") {
    Tables t(Isa::arm64);
    const uint64_t blk = 0x80000000ull | arm64::TYPE_SECT | arm64::AF | arm64::USER |
                         arm64::DBM | arm64::RDONLY;
    t.set(kVa, 1, blk);
    Walk w = t.walk(kVa);
    REQUIRE(hw_mark_dirty(Isa::arm64, t.mem, w, true));
    CHECK(t.entry(1) == (blk & ~arm64::RDONLY));
  }
}

TEST_CASE("hwwalk: arm64 contiguous bit is reported", "[hwwalk]") {
  Tables t(Isa::arm64);
  // A 64K contiguous run: 16 PTEs, each with PTE_CONT.
  const uint64_t va0 = kVa & ~(64 * KiB - 1), pa0 = 0x200000000ull;
  for (unsigned i = 0; i < kArm64_4K.cont_entries; ++i)
    t.set(va0 + i * 4 * KiB, 0, (pa0 + i * 4 * KiB) | kArmLeaf | arm64::CONT);
  for (unsigned i = 0; i < kArm64_4K.cont_entries; ++i) {
    Walk w = t.walk(va0 + i * 4 * KiB + 8);
    REQUIRE(w.result == Walk::Ok);
    CHECK(w.contiguous);
    CHECK(w.page_size == 4 * KiB);
    CHECK(w.pa(va0 + i * 4 * KiB + 8) == pa0 + i * 4 * KiB + 8);
  }
  t.set(va0 + 64 * KiB, 0, 0x300000000ull | kArmLeaf);
  CHECK_FALSE(t.walk(va0 + 64 * KiB).contiguous);
  CHECK(decode(Isa::arm64, kPage | kArmLeaf | arm64::CONT, 0).contiguous);
}

TEST_CASE("hwwalk: arm64 decode", "[hwwalk]") {
  HwEntry tbl = decode(Isa::arm64, 0x7000 | arm64::TYPE_TABLE, 2);
  CHECK(tbl.valid);
  CHECK(tbl.table);
  CHECK_FALSE(tbl.leaf);
  CHECK(tbl.pa == 0x7000);
  HwEntry blk = decode(Isa::arm64, (0x40000000ull | 0x3000) | arm64::TYPE_SECT | arm64::AF, 1);
  CHECK(blk.leaf);
  CHECK(blk.pa == 0x40000000ull);  // low bits below the block size are not address bits
  CHECK(decode(Isa::arm64, kPage | arm64::TYPE_PAGE, 0).leaf);
  CHECK_FALSE(decode(Isa::arm64, kPage | arm64::TYPE_SECT, 0).valid);
  CHECK_FALSE(decode(Isa::arm64, kPage | arm64::TYPE_SECT, 3).valid);
  CHECK_FALSE(decode(Isa::arm64, kPage | arm64::TABLE_BIT, 1).valid);
  HwEntry clean = decode(Isa::arm64, kPage | kArmLeaf | arm64::DBM | arm64::RDONLY, 0);
  CHECK(clean.dbm);
  CHECK_FALSE(clean.writable);
  CHECK_FALSE(clean.dirty);
}

// ---------------------------------------------------------------------------------------------
// Fault encoders

TEST_CASE("hwwalk: x86 page-fault error code", "[hwwalk]") {
  CHECK(x86_pf_error_code(false, false, false, false) == 0x0);
  CHECK(x86_pf_error_code(true, false, false, false) == 0x1);   // P
  CHECK(x86_pf_error_code(false, true, false, false) == 0x2);   // W
  CHECK(x86_pf_error_code(false, false, true, false) == 0x4);   // U
  CHECK(x86_pf_error_code(false, false, false, true) == 0x10);  // I
  CHECK(x86_pf_error_code(false, true, true, false) == 0x6);    // user write, not present
  CHECK(x86_pf_error_code(true, true, true, false) == 0x7);     // user write, protection (COW)
  CHECK(x86_pf_error_code(true, false, true, true) == 0x15);
}

TEST_CASE("hwwalk: arm64 ESR for data aborts from EL0", "[hwwalk]") {
  for (unsigned level = 0; level < 4; ++level) {
    for (bool write : {false, true}) {
      INFO("level " << level << " write " << write);
      uint64_t tr = arm64_dabt_esr(Walk::NotPresent, false, level, write);
      CHECK((tr >> esr::EC_SHIFT) == esr::EC_DABT_LOW);
      CHECK((tr & esr::IL) != 0);
      CHECK(((tr & esr::WNR) != 0) == write);
      CHECK((tr & esr::FSC_MASK) == (0x04u | (3 - level)));
      uint64_t af = arm64_dabt_esr(Walk::AccessFlag, false, level, write);
      CHECK((af & esr::FSC_MASK) == (0x08u | (3 - level)));
      uint64_t perm = arm64_dabt_esr(Walk::Ok, true, level, write);
      CHECK((perm & esr::FSC_MASK) == (0x0cu | (3 - level)));
      // Permission takes precedence over the walk result.
      CHECK(arm64_dabt_esr(Walk::AccessFlag, true, level, write) == perm);
    }
  }
  // Values as the Linux kernel logs them.
  CHECK(arm64_dabt_esr(Walk::NotPresent, false, 0, false) == 0x92000007ull);
  CHECK(arm64_dabt_esr(Walk::NotPresent, false, 0, true) == 0x92000047ull);
  CHECK(arm64_dabt_esr(Walk::Ok, true, 0, true) == 0x9200004full);
  CHECK(arm64_dabt_esr(Walk::NotPresent, false, 1, false) == 0x92000006ull);
}
