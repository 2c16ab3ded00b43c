// SPDX-License-Identifier: GPL-2.0-only
// arm64 arch layer, part 2: arch/arm64/mm/contpte.c (6.12 subset, with its later fixes:
// contpte_all_subptes_match_access_flags()), and the contpte invariant of PORTMAP §3.3 item 10.
//
// A contpte block is 16 PTEs (128-byte aligned in the table) mapping 64K of one folio at a
// 64K-aligned PFN, all with PTE_CONT; the TLB may cache any one of them for the whole 64K. The
// only way to add or remove PTE_CONT on live entries is contpte_convert(), a break-before-make
// (16 clears, a 16-page broadcast TLBI, 16 stores).
#include "base/error.hpp"
#include "kernel_mm/arch/arm64/arm64.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

using namespace arm64b;

unsigned Arm64Arch::pte_slot(const pte_t* ptep) const {
  return unsigned((k_.phys().phys_of(ptep) & (PAGE_SIZE - 1)) / sizeof(pte_t));
}

// contpte_align_down() (contpte.c:24): PTR_ALIGN_DOWN(ptep, sizeof(*ptep) * CONT_PTES).
pte_t* Arm64Arch::contpte_align_down(pte_t* ptep) const { return ptep - (pte_slot(ptep) & (CONT_PTES - 1)); }

// contpte_try_unfold_partial() (contpte.c:29): unfold any partially covered contpte block at the
// beginning and end of the range.
void Arm64Arch::contpte_try_unfold_partial(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  if (ptep != contpte_align_down(ptep) || nr < CONT_PTES) contpte_try_unfold(mm, addr, ptep, __ptep_get(ptep));

  // ptep + nr != contpte_align_down(ptep + nr); ptep + nr may be one past the table (no frame
  // to look it up in), so the end's alignment is taken from the last PTE of the range.
  if ((pte_slot(ptep + nr - 1) + 1) % CONT_PTES != 0) {
    uint64_t last_addr = addr + PAGE_SIZE * (nr - 1);
    pte_t* last_ptep = ptep + nr - 1;
    contpte_try_unfold(mm, last_addr, last_ptep, __ptep_get(last_ptep));
  }
}

// contpte_convert() (contpte.c:49): repaint a whole block with `pte`'s PTE_CONT setting by
// break-before-make. __flush_tlb_range(&vma, start, start + 64K, PAGE_SIZE, true, 3) on N1 is
// DSB ISHST, 16 x TLBI VALE1IS, DSB ISH.
void Arm64Arch::contpte_convert(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) {
  pte_t* start_ptep = ptep = contpte_align_down(ptep);
  uint64_t start_addr = addr = ALIGN_DOWN(addr, CONT_PTE_SIZE);
  pte = pfn_pte(ALIGN_DOWN(pte_pfn(pte), CONT_PTES), pte_pgprot(pte));

  const bool fold = pte_cont(pte);
  k_.counters().contpte_convert.inc();
  (fold ? k_.counters().contpte_fold : k_.counters().contpte_unfold).inc();
  k_.trace_event("contpte_convert", {mmusim::TraceField::hex("address", start_addr),
                                     mmusim::TraceField::str("action", fold ? "fold" : "unfold")});

  for (unsigned i = 0; i < CONT_PTES; i++, ptep++, addr += PAGE_SIZE) {
    pte_t ptent = __ptep_get_and_clear(mm, addr, ptep);
    if (pte_dirty(ptent)) pte = pte_mkdirty(pte);
    if (pte_young(ptent)) pte = pte_mkyoung(pte);
  }

  __flush_tlb_range(mm, start_addr, addr, PAGE_SIZE, true, 3);

  __set_ptes(mm, start_addr, start_ptep, pte, CONT_PTES);
}

// __contpte_try_fold() (contpte.c:76): contpte_try_fold() checked the alignment of addr and pfn;
// here: a user mm, one folio covering the whole block, all 16 PTEs valid with consecutive PFNs
// and the same prot, ignoring access and dirty (the folded entry carries their OR).
void Arm64Arch::__contpte_try_fold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) {
  if (!mm_is_user(mm)) return;

  page* pg = k_.pfn_to_page(pte_pfn(pte));  // pte_page()
  folio* f = page_folio(pg);
  const uint64_t folio_start = addr - uint64_t(pg - f) * PAGE_SIZE;
  const uint64_t folio_end = folio_start + uint64_t(folio_nr_pages(f)) * PAGE_SIZE;
  const uint64_t cont_start = ALIGN_DOWN(addr, CONT_PTE_SIZE);
  const uint64_t cont_end = cont_start + CONT_PTE_SIZE;

  if (folio_start > cont_start || folio_end < cont_end) return;

  const pfn_t pfn = ALIGN_DOWN(pte_pfn(pte), CONT_PTES);
  const pgprot_t prot = pte_pgprot(pte_mkold(pte_mkclean(pte)));
  pte_t expected_pte = pfn_pte(pfn, prot);
  pte_t* orig_ptep = ptep;
  ptep = contpte_align_down(ptep);

  for (unsigned i = 0; i < CONT_PTES; i++) {
    k_.charge(Cost::pte_scan);
    pte_t subpte = pte_mkold(pte_mkclean(__ptep_get(ptep)));
    if (!pte_same(subpte, expected_pte)) return;
    expected_pte = pte_advance_pfn(expected_pte, 1);
    ptep++;
  }

  pte = pte_mkcont(pte);
  contpte_convert(mm, addr, orig_ptep, pte);
}

// __contpte_try_unfold() (contpte.c:140): contpte_try_unfold() checked valid+cont.
void Arm64Arch::__contpte_try_unfold(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) {
  if (!mm_is_user(mm)) return;
  pte = pte_mknoncont(pte);
  contpte_convert(mm, addr, ptep, pte);
}

// contpte_ptep_get() (contpte.c:155): gather access/dirty from all 16 (under the PTL, so the
// block cannot change under our feet).
pte_t Arm64Arch::contpte_ptep_get(pte_t* ptep, pte_t orig_pte) {
  ptep = contpte_align_down(ptep);
  for (unsigned i = 0; i < CONT_PTES; i++, ptep++) {
    k_.charge(Cost::pte_scan);
    pte_t pte = __ptep_get(ptep);
    if (pte_dirty(pte)) orig_pte = pte_mkdirty(orig_pte);
    if (pte_young(pte)) orig_pte = pte_mkyoung(orig_pte);
  }
  return orig_pte;
}

// contpte_ptep_get_lockless() (contpte.c:181): like contpte_ptep_get() without the PTL, so it
// checks that it read a consistent block and retries otherwise. Kernel code runs atomically in
// this port: an inconsistent block can only be a bug (it would retry forever).
pte_t Arm64Arch::contpte_ptep_get_lockless(pte_t* orig_ptep) {
  pte_t orig_pte = __ptep_get(orig_ptep);
  if (!pte_valid_cont(orig_pte)) return orig_pte;

  const pgprot_t orig_prot = pte_pgprot(pte_mkold(pte_mkclean(orig_pte)));
  pte_t* ptep = contpte_align_down(orig_ptep);
  pfn_t pfn = pte_pfn(orig_pte) - pfn_t(orig_ptep - ptep);

  for (unsigned i = 0; i < CONT_PTES; i++, ptep++, pfn++) {
    k_.charge(Cost::pte_scan);
    pte_t pte = __ptep_get(ptep);
    pgprot_t prot = pte_pgprot(pte_mkold(pte_mkclean(pte)));
    if (!pte_valid_cont(pte) || pte_pfn(pte) != pfn || pgprot_val(prot) != pgprot_val(orig_prot))
      mmusim::panic("contpte_ptep_get_lockless: inconsistent contpte block at PTE {} of {:#x}: entry {:#x} "
                    "(expected pfn {:#x}, prot {:#x}); with no concurrent writer the kernel would retry forever",
                    i, k_.phys().phys_of(ptep - i), pte.val, pfn, pgprot_val(orig_prot));
    if (pte_dirty(pte)) orig_pte = pte_mkdirty(orig_pte);
    if (pte_young(pte)) orig_pte = pte_mkyoung(orig_pte);
  }
  return orig_pte;
}

// contpte_set_ptes() (contpte.c:240): the set_ptes() contract says the nr > 1 targets are not
// present, so no unfold is needed: PTE_CONT goes on every 64K sub-range whose VA start, VA end and
// PFN are aligned. No contpte_convert().
void Arm64Arch::contpte_set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) {
  MMUSIM_CHECK(nr != 1, "contpte_set_ptes() with nr == 1");  // VM_WARN_ON(nr == 1)

  if (!mm_is_user(mm) || !pte_valid(pte)) {
    MMUSIM_CHECK(pte_valid(pte) || !pte_cont(pte), "contpte_set_ptes() of an invalid PTE_CONT entry");
    __set_ptes(mm, addr, ptep, pte, nr);
    return;
  }

  const uint64_t end = addr + (uint64_t(nr) << PAGE_SHIFT);
  pfn_t pfn = pte_pfn(pte);
  const pgprot_t prot = pte_pgprot(pte);

  do {
    // pte_cont_addr_end()
    const uint64_t boundary = (addr + CONT_PTE_SIZE) & CONT_PTE_MASK;
    const uint64_t next = (boundary - 1 < end - 1) ? boundary : end;
    nr = unsigned((next - addr) >> PAGE_SHIFT);
    pte = pfn_pte(pfn, prot);

    if (((addr | next | (pfn << PAGE_SHIFT)) & ~CONT_PTE_MASK) == 0)
      pte = pte_mkcont(pte);
    else
      pte = pte_mknoncont(pte);

    __set_ptes(mm, addr, ptep, pte, nr);

    addr = next;
    ptep += nr;
    pfn += nr;
  } while (addr != end);
}

// contpte_clear_full_ptes() (contpte.c:285)
void Arm64Arch::contpte_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full) {
  contpte_try_unfold_partial(mm, addr, ptep, nr);
  __clear_full_ptes(mm, addr, ptep, nr, full);
}

// contpte_get_and_clear_full_ptes() (contpte.c:293)
pte_t Arm64Arch::contpte_get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr,
                                                 int full) {
  contpte_try_unfold_partial(mm, addr, ptep, nr);
  return __get_and_clear_full_ptes(mm, addr, ptep, nr, full);
}

// contpte_ptep_test_and_clear_young() (contpte.c:303): core-mm tracks access per folio, and a
// block maps one folio, so clear young on the whole block rather than unfold.
int Arm64Arch::contpte_ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  int young = 0;
  ptep = contpte_align_down(ptep);
  addr = ALIGN_DOWN(addr, CONT_PTE_SIZE);
  for (unsigned i = 0; i < CONT_PTES; i++, ptep++, addr += PAGE_SIZE)
    young |= __ptep_test_and_clear_young(vma, addr, ptep);
  return young;
}

// contpte_wrprotect_ptes() (contpte.c:348): a whole block is write-protected in place, keeping
// PTE_CONT and without a TLBI ("wait for the later mmu_gather flush" — at fork, dup_mmap's
// flush_tlb_mm()); a partially covered block must be unfolded first, since PTE_CONT with
// different permissions within the block stays unpredictable after the flush.
void Arm64Arch::contpte_wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  contpte_try_unfold_partial(mm, addr, ptep, nr);
  __wrprotect_ptes(mm, addr, ptep, nr);
}

// contpte_all_subptes_match_access_flags() (contpte.c:395): PFNs differ per sub-PTE; match only
// the bits __ptep_set_access_flags() consumes: AF, DIRTY and write permission.
bool Arm64Arch::contpte_all_subptes_match_access_flags(pte_t* ptep, pte_t entry) {
  pte_t* cont_ptep = contpte_align_down(ptep);
  const uint64_t cmp_mask = PTE_RDONLY | PTE_AF | PTE_WRITE | PTE_DIRTY;
  const uint64_t entry_cmp = pte_val(entry) & cmp_mask;
  for (unsigned i = 0; i < CONT_PTES; i++) {
    k_.charge(Cost::pte_scan);
    uint64_t pte_cmp = pte_val(__ptep_get(cont_ptep + i)) & cmp_mask;
    if (pte_cmp != entry_cmp) return false;
  }
  return true;
}

// contpte_ptep_set_access_flags() (contpte.c:416)
int Arm64Arch::contpte_ptep_set_access_flags(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t entry,
                                             int dirty) {
  // Check whether all sub-PTEs in the CONT block already match the requested access
  // flags/write permission, using raw per-PTE values rather than the gathered ptep_get() view.
  if (contpte_all_subptes_match_access_flags(ptep, entry)) return 0;

  // Use raw target pte (not gathered) for write-bit unfold decision.
  pte_t orig_pte = pte_mknoncont(__ptep_get(ptep));

  // We can fix up access/dirty bits without having to unfold the contig range. But if the write
  // bit is changing, we must unfold.
  if (pte_write(orig_pte) == pte_write(entry)) {
    // For SW access management all 16 are updated; one range flush at the end instead of
    // per-page flushes in __ptep_set_access_flags().
    ptep = contpte_align_down(ptep);
    uint64_t start_addr = addr = ALIGN_DOWN(addr, CONT_PTE_SIZE);
    for (unsigned i = 0; i < CONT_PTES; i++, ptep++, addr += PAGE_SIZE)
      __ptep_set_access_flags(vma, addr, ptep, entry, 0);
    if (dirty) __flush_tlb_range(vma->vm_mm, start_addr, addr, PAGE_SIZE, true, 3);
  } else {
    __contpte_try_unfold(vma->vm_mm, addr, ptep, orig_pte);
    __ptep_set_access_flags(vma, addr, ptep, entry, dirty);
  }
  return 1;
}

// ------------------------------------------------------------------------------------------------
// PORTMAP §3.3 item 10

bool arm64_contpte_block_consistent(Kernel& k, const pte_t* block_start, std::string* why) {
  auto* a = dynamic_cast<Arm64Arch*>(&k.arch());
  MMUSIM_CHECK(a, "arm64_contpte_block_consistent() on a {} kernel", k.arch().name());
  auto fail = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return false;
  };
  const uint64_t pa = k.phys().phys_of(block_start);
  if ((pa / sizeof(pte_t)) % CONT_PTES != 0)
    return fail(fmt::format("block start {:#x} is not 128-byte aligned", pa));

  bool any_cont = false;
  for (unsigned i = 0; i < CONT_PTES; ++i) any_cont |= a->pte_cont(block_start[i]);
  if (!any_cont) return true;

  const pte_t first = block_start[0];
  const pfn_t pfn0 = a->pte_pfn(first);
  const pgprot_t prot0 = a->pte_pgprot(a->pte_mkold(a->pte_mkclean(first)));
  for (unsigned i = 0; i < CONT_PTES; ++i) {
    const pte_t p = block_start[i];
    if (!a->pte_valid(p))
      return fail(fmt::format("PTE_CONT block at {:#x}: entry {} = {:#x} is not valid", pa, i, p.val));
    if (!a->pte_cont(p))
      return fail(fmt::format("PTE_CONT block at {:#x}: entry {} = {:#x} lacks PTE_CONT", pa, i, p.val));
    if (a->pte_pfn(p) != pfn0 + i)
      return fail(fmt::format("PTE_CONT block at {:#x}: entry {} = {:#x} maps pfn {:#x}, expected {:#x}", pa, i,
                              p.val, a->pte_pfn(p), pfn0 + i));
    const pgprot_t prot = a->pte_pgprot(a->pte_mkold(a->pte_mkclean(p)));
    if (prot.val != prot0.val)
      return fail(fmt::format("PTE_CONT block at {:#x}: entry {} = {:#x} has prot {:#x}, entry 0 {:#x}", pa, i,
                              p.val, prot.val, prot0.val));
  }
  if (pfn0 % CONT_PTES != 0)
    return fail(fmt::format("PTE_CONT block at {:#x}: first pfn {:#x} is not 16-aligned", pa, pfn0));
  if (pfn0 + CONT_PTES > k.nr_frames())
    return fail(fmt::format("PTE_CONT block at {:#x}: pfns {:#x}.. beyond memory", pa, pfn0));
  const folio* f = page_folio(k.pfn_to_page(pfn0));
  const folio* l = page_folio(k.pfn_to_page(pfn0 + CONT_PTES - 1));
  if (f != l)
    return fail(fmt::format("PTE_CONT block at {:#x}: pfns {:#x}..{:#x} span folios {:#x} and {:#x}", pa, pfn0,
                            pfn0 + CONT_PTES - 1, k.page_to_pfn(f), k.page_to_pfn(l)));
  return true;
}

bool arm64_contpte_table_consistent(Kernel& k, const pte_t* table, std::string* why) {
  for (unsigned b = 0; b < PTRS_PER_PTE; b += CONT_PTES)
    if (!arm64_contpte_block_consistent(k, table + b, why)) return false;
  return true;
}

}  // namespace kmm
