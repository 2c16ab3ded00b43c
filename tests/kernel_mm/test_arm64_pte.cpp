// SPDX-License-Identifier: GPL-2.0-only
// arm64 PTE/PMD helpers bit for bit (arch/arm64/include/asm/pgtable.h, pgtable-prot.h), the TLB
// flush primitives (tlbflush.h) and the ESR decode (fault.c) against base/hwwalk.hpp.
#include <catch2/catch.hpp>

#include "arm64_env.hpp"
#include "base/hwwalk.hpp"
#include "base/pgformat.hpp"

using namespace kmm;
using namespace kmm::arm64b;
using arm64test::Env;
using arm64test::HwOp;
namespace pg = mmusim::pg;

TEST_CASE("arm64: protection_map gives the 6.12 PAGE_* values", "[arm64]") {
  Env e;
  auto& a = e.a();
  const uint64_t rw_private = a.vm_get_page_prot(VM_READ | VM_WRITE).val;
  // _PAGE_READONLY = PTE_TYPE_PAGE|PTE_AF|PTE_SHARED|ATTRINDX(NORMAL)|USER|RDONLY|NG|PXN|UXN
  CHECK(rw_private == (0x3ull | (1ull << 10) | (3ull << 8) | (1ull << 6) | (1ull << 7) | (1ull << 11) |
                       (1ull << 53) | (1ull << 54)));
  CHECK(a.vm_get_page_prot(VM_READ).val == rw_private);
  CHECK(a.vm_get_page_prot(VM_READ | VM_WRITE | VM_SHARED).val == (rw_private | PTE_DBM));  // PAGE_SHARED
  CHECK(a.vm_get_page_prot(VM_READ | VM_EXEC).val == (rw_private & ~PTE_UXN));              // READONLY_EXEC
  const pte_t none = pte_t{a.vm_get_page_prot(VM_NONE).val};
  CHECK_FALSE(a.pte_valid(none));
  CHECK(a.pte_present(none));
  CHECK(a.pte_protnone(none));
  CHECK_FALSE(a.pte_protnone(pte_t{rw_private}));
  // A private writable page is read-only until written (COW) and user-accessible to the hardware.
  pg::HwEntry h = pg::decode(pg::Isa::arm64, a.pfn_pte(0x1234, pgprot_t{rw_private}).val, 0);
  CHECK(h.valid);
  CHECK(h.leaf);
  CHECK(h.user);
  CHECK_FALSE(h.writable);
  CHECK_FALSE(h.dbm);
  CHECK(h.pa == 0x1234000);
}

TEST_CASE("arm64: write/dirty encoding with DBM (pgtable.h:208-246)", "[arm64]") {
  Env e;
  auto& a = e.a();
  const pte_t ro = a.pfn_pte(0x40, a.vm_get_page_prot(VM_READ | VM_WRITE));
  CHECK(a.pte_present(ro));
  CHECK_FALSE(a.pte_write(ro));
  CHECK_FALSE(a.pte_dirty(ro));
  CHECK(a.pte_young(ro));
  CHECK(a.pte_pfn(ro) == 0x40);

  // pte_mkwrite on a clean PTE: writable-clean (DBM set, RDONLY kept): hardware may dirty it.
  const pte_t wc = a.pte_mkwrite_novma(ro);
  CHECK(a.pte_write(wc));
  CHECK(a.pte_rdonly(wc));
  CHECK_FALSE(a.pte_dirty(wc));
  // pte_mkdirty on a writable PTE clears RDONLY: hardware-writable, dirty (hw and sw).
  const pte_t wd = a.pte_mkdirty(wc);
  CHECK_FALSE(a.pte_rdonly(wd));
  CHECK(a.pte_hw_dirty(wd));
  CHECK(a.pte_sw_dirty(wd));
  // mkwrite(mkdirty(ro)) == mkdirty(mkwrite(ro)): do_anonymous_page's entry.
  CHECK(a.pte_mkwrite_novma(a.pte_mkdirty(ro)).val == wd.val);
  // pte_mkdirty of a read-only PTE only sets the sw bit.
  const pte_t rd = a.pte_mkdirty(ro);
  CHECK(a.pte_rdonly(rd));
  CHECK(a.pte_dirty(rd));
  CHECK_FALSE(a.pte_write(rd));

  // Hardware dirtying (HAFDBS clears RDONLY of a writable-clean entry): pte_dirty via hw dirty only.
  const pte_t hwd = pte_t{wc.val & ~PTE_RDONLY};
  CHECK(a.pte_dirty(hwd));
  CHECK_FALSE(a.pte_sw_dirty(hwd));
  // pte_wrprotect moves the hardware dirtiness to PTE_DIRTY.
  const pte_t wp = a.pte_wrprotect(hwd);
  CHECK_FALSE(a.pte_write(wp));
  CHECK(a.pte_rdonly(wp));
  CHECK(a.pte_sw_dirty(wp));
  CHECK(a.pte_dirty(wp));
  // ... which pte_mkwrite turns back into hardware-writable.
  CHECK_FALSE(a.pte_rdonly(a.pte_mkwrite_novma(wp)));
  // pte_mkclean: clears sw dirty, sets RDONLY (writable-clean again).
  const pte_t cl = a.pte_mkclean(wd);
  CHECK_FALSE(a.pte_dirty(cl));
  CHECK(a.pte_write(cl));
  CHECK(a.pte_rdonly(cl));
  // Young/old, special, cont.
  CHECK_FALSE(a.pte_young(a.pte_mkold(wd)));
  CHECK(a.pte_young(a.pte_mkyoung(a.pte_mkold(wd))));
  CHECK(a.pte_special(a.pte_mkspecial(ro)));
  CHECK(a.pte_cont(a.pte_mkcont(ro)));
  CHECK_FALSE(a.pte_cont(a.pte_mknoncont(a.pte_mkcont(ro))));

  // pfn arithmetic keeps the prot bits.
  const pte_t adv = a.pte_advance_pfn(wd, 5);
  CHECK(a.pte_pfn(adv) == 0x45);
  CHECK(a.pte_pgprot(adv).val == a.pte_pgprot(wd).val);
  CHECK(a.pte_pgprot(wd).val == (wd.val & ~(0x40ull << PAGE_SHIFT)));
}

TEST_CASE("arm64: pte_modify keeps dirtiness, takes the new permissions", "[arm64]") {
  Env e;
  auto& a = e.a();
  const pgprot_t ro = a.vm_get_page_prot(VM_READ | VM_WRITE);
  const pgprot_t shared = a.vm_get_page_prot(VM_READ | VM_WRITE | VM_SHARED);
  // A hardware-dirty writable PTE made read-only by mprotect stays dirty (sw bit).
  pte_t hwd = pte_t{a.pte_mkwrite_novma(a.pfn_pte(0x99, ro)).val & ~PTE_RDONLY};
  pte_t m = a.pte_modify(hwd, ro);
  CHECK_FALSE(a.pte_write(m));
  CHECK(a.pte_dirty(m));
  CHECK(a.pte_pfn(m) == 0x99);
  // A sw-dirty PTE given a writable prot is hardware-writable again.
  pte_t m2 = a.pte_modify(m, shared);
  CHECK(a.pte_write(m2));
  CHECK_FALSE(a.pte_rdonly(m2));
  // AF is not in the mask: kept.
  CHECK(a.pte_young(a.pte_modify(a.pte_mkyoung(m), ro)));
  CHECK_FALSE(a.pte_young(a.pte_modify(a.pte_mkold(m), shared)));
}

TEST_CASE("arm64: PMD blocks and table entries decode as the hardware sees them", "[arm64]") {
  Env e;
  auto& a = e.a();
  const pgprot_t prot = a.vm_get_page_prot(VM_READ | VM_WRITE);
  pmd_t huge = a.mk_huge_pmd(0x200, prot);
  CHECK((huge.val & PMD_TYPE_MASK) == PMD_TYPE_SECT);
  CHECK(a.pmd_present(huge));
  CHECK(a.pmd_trans_huge(huge));
  CHECK(a.pmd_pfn(huge) == 0x200);
  CHECK_FALSE(a.table_present(huge.val));
  pg::HwEntry h = pg::decode(pg::Isa::arm64, huge.val, 1);
  CHECK(h.valid);
  CHECK(h.leaf);
  CHECK(h.pa == 0x200000);
  CHECK_FALSE(h.writable);
  pmd_t w = a.pmd_mkwrite_novma(a.pmd_mkdirty(huge));
  CHECK(a.pmd_write(w));
  CHECK(a.pmd_dirty(w));
  CHECK(pg::decode(pg::Isa::arm64, w.val, 1).writable);
  CHECK_FALSE(a.pmd_write(a.pmd_wrprotect(w)));
  CHECK(a.pmd_dirty(a.pmd_wrprotect(w)));
  // pmdp_invalidate's entry: not valid for the hardware, still present and huge for the kernel.
  pmd_t inv = a.pmd_mkinvalid(w);
  CHECK_FALSE(pg::decode(pg::Isa::arm64, inv.val, 1).valid);
  CHECK(a.pmd_present(inv));
  CHECK(a.pmd_trans_huge(inv));
  CHECK(a.pmd_pfn(inv) == 0x200);

  // pmd_modify (mprotect of a huge PMD): pte_modify on the block; stays a block, keeps dirtiness.
  pmd_t hwd = pmd_t{w.val & ~PTE_RDONLY};
  pmd_t ro = a.pmd_modify(hwd, a.vm_get_page_prot(VM_READ));
  CHECK(a.pmd_trans_huge(ro));
  CHECK((ro.val & PMD_TYPE_MASK) == PMD_TYPE_SECT);
  CHECK_FALSE(a.pmd_write(ro));
  CHECK(a.pmd_dirty(ro));
  CHECK(a.pmd_pfn(ro) == 0x200);
  pmd_t none = a.pmd_modify(ro, a.vm_get_page_prot(VM_NONE));
  CHECK_FALSE(pg::decode(pg::Isa::arm64, none.val, 1).valid);
  CHECK(a.pmd_present(none));
  CHECK(a.pmd_trans_huge(none));

  const uint64_t t = a.mk_table(0x777);
  CHECK(a.table_present(t));
  CHECK(a.table_pfn(t) == 0x777);
  CHECK_FALSE(a.pmd_trans_huge(pmd_t{t}));
  pg::HwEntry ht = pg::decode(pg::Isa::arm64, t, 1);
  CHECK(ht.valid);
  CHECK(ht.table);
  CHECK(ht.pa == 0x777000);
  CHECK(e.k->pte_offset_map(reinterpret_cast<pmd_t*>(&huge), Env::kBase) == nullptr);
}

TEST_CASE("arm64: TLB flush primitives issue the tlbflush.h sequences", "[arm64]") {
  Env e;
  auto& a = e.a();
  auto& hw = e.hw;

  SECTION("flush_tlb_page: DSB ISHST, TLBI VALE1IS by ASID, DSB ISH") {
    a.flush_tlb_page(&e.vma, e.addr(3) + 0x123);
    REQUIRE(hw.ops.size() == 3);
    CHECK(hw.ops[0].kind == HwOp::Dsb);
    CHECK(hw.ops[1].kind == HwOp::Tlbi);
    CHECK(hw.ops[1].op == TlbiOp::VALE1);
    CHECK(hw.ops[1].wide);
    CHECK(hw.ops[1].asid == 7);
    CHECK(hw.ops[1].va == e.addr(3));
    CHECK(hw.ops[2].kind == HwOp::Dsb);
    CHECK(hw.ops[2].wide);
    CHECK(e.count("kernel.tlb_flush_page") == 1);
    CostAccount c = e.k->take_cost();
    CHECK(c[Cost::tlbi_bcast] == 1);
    CHECK(c[Cost::dsb_local] == 1);
    CHECK(c[Cost::dsb_bcast] == 1);
  }
  SECTION("flush_tlb_mm: TLBI ASIDE1IS") {
    a.flush_tlb_mm(&e.mm);
    CHECK(hw.tlbis(TlbiOp::ASIDE1, true) == 1);
    CHECK(hw.all_tlbis() == 1);
    CHECK(hw.dsbs(true) == 2);
    CHECK(e.count("kernel.tlb_flush_mm") == 1);
    CHECK(e.k->take_cost()[Cost::tlbi_asid] == 1);
  }
  SECTION("flush_tlb_range: not leaf-only, one TLBI VAE1IS per page below MAX_DVM_OPS") {
    a.flush_tlb_range(&e.vma, e.addr(0), e.addr(511));
    CHECK(hw.tlbis(TlbiOp::VAE1, true) == 511);
    CHECK(hw.all_tlbis() == 511);
    hw.clear();
    a.flush_tlb_range(&e.vma, e.addr(0), e.addr(512));  // 512 pages: flush_tlb_mm
    CHECK(hw.tlbis(TlbiOp::ASIDE1, true) == 1);
    CHECK(hw.all_tlbis() == 1);
    CHECK(e.count("kernel.tlb_flush_mm") == 1);
  }
  SECTION("flush_pmd_tlb_range: stride PMD_SIZE") {
    a.flush_pmd_tlb_range(&e.vma, Env::kBase, Env::kBase + PMD_SIZE);
    CHECK(hw.tlbis(TlbiOp::VAE1, true) == 1);
    CHECK(hw.ops[1].va == Env::kBase);
  }
  SECTION("tlb_flush (mmu_gather): last level unless tables were freed; fullmm only flushes freed tables") {
    a.tlb_flush_mmu_range(&e.mm, e.addr(2), e.addr(6), PAGE_SHIFT, 3, false);
    CHECK(hw.tlbis(TlbiOp::VALE1, true) == 4);
    hw.clear();
    a.tlb_flush_mmu_range(&e.mm, e.addr(2), e.addr(6), PAGE_SHIFT, TLBI_TTL_UNKNOWN, true);
    CHECK(hw.tlbis(TlbiOp::VAE1, true) == 4);
    hw.clear();
    a.tlb_flush_mmu_range(&e.mm, ~0ull, ~0ull, PAGE_SHIFT, 3, false);
    CHECK(hw.ops.empty());
    a.tlb_flush_mmu_range(&e.mm, ~0ull, ~0ull, PAGE_SHIFT, TLBI_TTL_UNKNOWN, true);
    CHECK(hw.tlbis(TlbiOp::ASIDE1, true) == 1);
    hw.clear();
    // A gather of PMD leaves only (tlb_get_unmap_size() = PMD_SIZE): one TLBI per 2 MiB block,
    // where a 4K stride over the 2 MiB (512 >= MAX_DVM_OPS) would flush the whole ASID.
    a.tlb_flush_mmu_range(&e.mm, Env::kBase, Env::kBase + 2 * PMD_SIZE, PMD_SHIFT, 2, false);
    CHECK(hw.tlbis(TlbiOp::VALE1, true) == 2);
    CHECK(hw.tlbis(TlbiOp::ASIDE1, true) == 0);
    hw.clear();
    a.tlb_flush_mmu_range(&e.mm, Env::kBase, Env::kBase + PMD_SIZE, PAGE_SHIFT, TLBI_TTL_UNKNOWN, false);
    CHECK(hw.tlbis(TlbiOp::ASIDE1, true) == 1);
  }
  SECTION("flush_tlb_local: TLBI ASIDE1 of the loaded mm, this CPU only") {
    a.flush_tlb_local();
    CHECK(hw.ops.empty());  // nothing loaded
    a.switch_mm(0, &e.mm);
    a.flush_tlb_local();
    CHECK(hw.tlbis(TlbiOp::ASIDE1, false) == 1);
    CHECK(hw.dsbs(true) == 0);
    CHECK(hw.dsbs(false) == 2);
    CHECK(e.count("kernel.tlb_flush_local") == 2);
    CHECK(e.k->take_cost()[Cost::tlbi_local] == 1);
  }
}

TEST_CASE("arm64: flush_tlb_fix_spurious_fault is empty in 6.12, a local TLBI with the v6.19 variant", "[arm64]") {
  SECTION("none") {
    Env e(SpuriousFlush::none);
    e.a().flush_tlb_fix_spurious_fault(&e.vma, e.addr(9), e.ptep(9));
    CHECK(e.hw.ops.empty());
    CHECK(e.count("kernel.tlb_flush_spurious_fix") == 0);
  }
  SECTION("local") {
    Env e(SpuriousFlush::local);
    e.a().flush_tlb_fix_spurious_fault(&e.vma, e.addr(9) + 5, e.ptep(9));
    REQUIRE(e.hw.ops.size() == 3);
    CHECK(e.hw.ops[1].kind == HwOp::Tlbi);
    CHECK(e.hw.ops[1].op == TlbiOp::VALE1);
    CHECK_FALSE(e.hw.ops[1].wide);
    CHECK(e.hw.ops[1].va == e.addr(9));
    CHECK(e.hw.dsbs(true) == 0);
    CHECK(e.count("kernel.tlb_flush_spurious_fix") == 1);
    CostAccount c = e.k->take_cost();
    CHECK(c[Cost::tlbi_local] == 1);
    CHECK(c[Cost::tlbi_bcast] == 0);
  }
}

TEST_CASE("arm64: the ESR the hardware walk reports decodes back (hwwalk.hpp arm64_dabt_esr)", "[arm64]") {
  for (int res = 0; res < 2; ++res) {
    for (int perm = 0; perm < 2; ++perm) {
      for (unsigned level = 0; level < 4; ++level) {
        for (int write = 0; write < 2; ++write) {
          const auto r = res ? pg::Walk::AccessFlag : pg::Walk::NotPresent;
          const uint64_t esr_val = pg::arm64_dabt_esr(r, perm, level, write);
          Arm64Abort d = arm64_decode_esr(esr_val);
          INFO("esr " << std::hex << esr_val);
          CHECK(d.el0);
          CHECK_FALSE(d.instruction);
          CHECK(d.write == bool(write));
          CHECK(d.level == int(3 - level));
          CHECK(d.kind == (perm ? Arm64Abort::permission
                                : res ? Arm64Abort::access_flag : Arm64Abort::translation));
        }
      }
    }
  }
  // Cache maintenance (CM) with WnR is not a write; an instruction abort is never one.
  CHECK_FALSE(arm64_decode_esr(pg::arm64_dabt_esr(pg::Walk::Ok, true, 0, true) | esr::ESR_ELx_CM).write);
  CHECK(arm64_decode_esr((esr::ESR_ELx_EC_IABT_LOW << 26) | esr::ESR_ELx_FSC_PERM | 3).instruction);
  CHECK(arm64_decode_esr((esr::ESR_ELx_EC_DABT_LOW << 26) | 0x10).kind == Arm64Abort::other);
}

TEST_CASE("arm64: do_page_fault rejects what the hardware never reports for user accesses", "[arm64]") {
  Env e;
  task_struct t;
  t.mm = &e.mm;
  // A kernel-mode data abort (EC DABT_CUR) is not a user fault.
  const uint64_t cur = (esr::ESR_ELx_EC_DABT_CUR << 26) | esr::ESR_ELx_FSC_FAULT | 3;
  CHECK_THROWS_AS(e.a().handle_user_fault(&t, e.addr(0), cur, 0), mmusim::InternalError);
  // A synchronous external abort (FSC 0x10) goes to do_sea(), not modelled.
  CHECK_THROWS_AS(e.a().handle_user_fault(&t, e.addr(0), (esr::ESR_ELx_EC_DABT_LOW << 26) | 0x10, 0),
                  mmusim::InternalError);
  // A translation fault on a TTBR1 (kernel) address: do_bad_area(), SIGSEGV, no fault counted.
  FaultReturn r = e.a().handle_user_fault(&t, 0xffff000000001000ull,
                                          pg::arm64_dabt_esr(pg::Walk::NotPresent, false, 0, true), 0);
  CHECK(r.sigsegv);
  CHECK(r.attempts == 0);
  CHECK(e.count("faults.total") == 0);
}
