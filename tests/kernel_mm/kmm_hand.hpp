// SPDX-License-Identifier: GPL-2.0-only
// Hand-made kernel states for the invariant-checker tests: processes from create_process(), VMAs
// put in the tree directly, page tables from pud_alloc/pmd_alloc/__pte_alloc, entries written
// through the arch layer, folios from the allocator with their counts set as the kernel's paths
// leave them (do_anonymous_page, __do_huge_pmd_anonymous_page, copy_present_ptes, copy_huge_pmd,
// with CONFIG_MM_ID when kernel.large_folio_reuse is on). No fault, fork or teardown path runs.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <memory>

#include "kernel_mm/kernel.hpp"
#include "fixture.hpp"

namespace kmmtest {

struct Hand {
  Fixture fix;
  kmm::Kernel& k;
  kmm::Arch& a;

  explicit Hand(mmusim::pg::Isa isa = mmusim::pg::Isa::x86_64,
                const std::function<void(kmm::KernelParams&)>& tweak = {})
      : fix(isa, tweak), k(fix.kernel()), a(k.arch()) {}
  explicit Hand(const std::function<void(kmm::KernelParams&)>& tweak)
      : Hand(mmusim::pg::Isa::x86_64, tweak) {}

  void check() { k.check_invariants("hand-made state", true); }
  bool mm_ids() const { return k.params().large_folio_reuse; }

  kmm::task_struct* proc(const char* name) {
    kmm::task_struct* t = k.create_process(name);
    REQUIRE(t);
    REQUIRE(t->mm);
    return t;
  }

  // An anonymous private read/write VMA with an anon_vma (id, root).
  kmm::vm_area_struct* add_vma(kmm::mm_struct* mm, uint64_t start, uint64_t len, uint32_t av,
                               uint32_t root = 0) {
    using namespace kmm;
    auto v = std::make_unique<vm_area_struct>();
    v->vm_start = start;
    v->vm_end = start + len;
    v->vm_mm = mm;
    v->vm_flags = VM_READ | VM_WRITE | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC;
    v->vm_pgoff = start >> PAGE_SHIFT;
    v->anon = std::make_shared<anon_vma>();
    v->anon->id = av;
    v->anon->root_id = root ? root : av;
    v->anon->refcount = 1;
    vm_area_struct* raw = v.get();
    mm->mm_mt[v->vm_end] = std::move(v);
    return raw;
  }

  kmm::pmd_t* pmd_slot(kmm::mm_struct* mm, uint64_t va) {
    uint64_t* pgd = k.pgd_offset(mm, va);
    kmm::pud_t* pud = k.pud_alloc(mm, pgd, va);
    REQUIRE(pud);
    kmm::pmd_t* pmd = k.pmd_alloc(mm, pud, va);
    REQUIRE(pmd);
    return pmd;
  }
  kmm::pte_t* pte_slot(kmm::mm_struct* mm, uint64_t va) {
    kmm::pmd_t* pmd = pmd_slot(mm, va);
    if (kmm::pmd_none(*pmd)) REQUIRE(k.__pte_alloc(mm, pmd) == 0);
    kmm::pte_t* pte = k.find_pte(mm, va);
    REQUIRE(pte);
    return pte;
  }

  kmm::pte_t mkpte(kmm::pfn_t pfn, bool writable) {
    using namespace kmm;
    pte_t p = a.pfn_pte(pfn, a.vm_get_page_prot(VM_READ | VM_WRITE));
    p = a.pte_mkyoung(p);
    if (writable) p = a.pte_mkwrite_novma(a.pte_mkdirty(p));
    return p;
  }
  kmm::pmd_t mkpmd(kmm::pfn_t pfn, bool writable) {
    using namespace kmm;
    pmd_t p = a.mk_huge_pmd(pfn, a.vm_get_page_prot(VM_READ | VM_WRITE));
    p = a.pmd_mkyoung(p);
    if (writable) p = a.pmd_mkwrite_novma(a.pmd_mkdirty(p));
    return p;
  }
  static uint64_t linear(const kmm::vm_area_struct* v, uint64_t va) {
    return v->vm_pgoff + ((va - v->vm_start) >> kmm::PAGE_SHIFT);
  }

  // A new anon folio of `order`, mapped exclusively by PTEs at va (do_anonymous_page).
  kmm::folio* map_new(kmm::mm_struct* mm, kmm::vm_area_struct* v, uint64_t va, unsigned order,
                      bool writable = true) {
    using namespace kmm;
    folio* f = k.folio_alloc(order, true);
    REQUIRE(f);
    const unsigned nr = 1u << order;
    f->flags |= PG_anon;
    f->anon_vma = v->anon->id;
    f->index = linear(v, va);
    k.lruvec_add_folio(k.folio_lruvec(f), f);  // folio_add_lru_vma(), drained
    for (unsigned i = 0; i < nr; ++i) {
      *pte_slot(mm, va + i * PAGE_SIZE) = mkpte(k.page_to_pfn(f) + i, writable);
      f[i].mapcount = 1;
      SetPageAnonExclusive(f + i);
    }
    f->refcount = int(nr);
    if (order) {
      f->large_mapcount = int(nr);
      f->nr_pages_mapped = int(nr);
      if (mm_ids()) {
        f->mm_id[0] = mm->id;
        f->mm_id_mapcount[0] = int(nr) - 1;
      }
    }
    add_mm_counter(mm, MM_ANONPAGES, nr);
    return f;
  }

  // A new PMD-mapped THP at va (__do_huge_pmd_anonymous_page), with its deposited table.
  kmm::folio* map_new_pmd(kmm::mm_struct* mm, kmm::vm_area_struct* v, uint64_t va, bool writable = true) {
    using namespace kmm;
    folio* f = k.folio_alloc(HPAGE_PMD_ORDER, true);
    REQUIRE(f);
    f->flags |= PG_anon;
    f->anon_vma = v->anon->id;
    f->index = linear(v, va);
    k.lruvec_add_folio(k.folio_lruvec(f), f);  // folio_add_lru_vma(), drained
    pmd_t* pmd = pmd_slot(mm, va);
    REQUIRE(pmd_none(*pmd));
    *pmd = mkpmd(k.page_to_pfn(f), writable);
    deposit(mm, pmd);
    f->entire_mapcount = 1;
    f->large_mapcount = 1;
    f->nr_pages_mapped = ENTIRELY_MAPPED;
    SetPageAnonExclusive(f);
    if (mm_ids()) {
      f->mm_id[0] = mm->id;
      f->mm_id_mapcount[0] = 0;
    }
    add_mm_counter(mm, MM_ANONPAGES, HPAGE_PMD_NR);
    return f;
  }
  void deposit(kmm::mm_struct* mm, kmm::pmd_t* pmd) {
    kmm::pfn_t t = k.pte_alloc_one(mm);
    REQUIRE(t);
    k.pgtable_trans_huge_deposit(mm, pmd, t);
    mm->pgtables_bytes += kmm::PAGE_SIZE;  // mm_inc_nr_ptes()
  }

  // The zero page mapped read-only at va (do_anonymous_page, read fault).
  void map_zero(kmm::mm_struct* mm, uint64_t va) {
    *pte_slot(mm, va) = a.pte_mkspecial(mkpte(k.zero_pfn(), false));
  }

  // What fork leaves: the child maps the folio's pages read-only at the same va, the parent's PTEs
  // are write-protected, PAE cleared, refs and mapcounts bumped (copy_present_ptes batched).
  void share(kmm::folio* f, kmm::mm_struct* parent, kmm::mm_struct* child, kmm::vm_area_struct* cv,
             uint64_t va) {
    using namespace kmm;
    const unsigned nr = unsigned(folio_nr_pages(f));
    for (unsigned i = 0; i < nr; ++i) {
      pte_t* pp = k.find_pte(parent, va + i * PAGE_SIZE);
      REQUIRE(pp);
      *pp = a.pte_wrprotect(*pp);
      *pte_slot(child, va + i * PAGE_SIZE) = a.pte_mkold(*pp);
      ClearPageAnonExclusive(f + i);
      ++f[i].mapcount;
    }
    f->refcount += int(nr);
    if (folio_test_large(f)) {
      f->large_mapcount += int(nr);
      if (mm_ids()) {
        f->mm_id[1] = child->id;
        f->mm_id_mapcount[1] = int(nr) - 1;
        f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
      }
    }
    add_mm_counter(child, MM_ANONPAGES, nr);
  }

  // copy_huge_pmd(): both PMDs read-only, the head !PAE, the child deposits a table.
  void share_pmd(kmm::folio* f, kmm::mm_struct* parent, kmm::mm_struct* child, kmm::vm_area_struct* cv,
                 uint64_t va) {
    using namespace kmm;
    pmd_t* pp = k.mm_find_pmd(parent, va);
    REQUIRE(pp);
    *pp = a.pmd_wrprotect(*pp);
    pmd_t* cp = pmd_slot(child, va);
    *cp = a.pmd_mkold(*pp);
    deposit(child, cp);
    ClearPageAnonExclusive(f);
    ++f->entire_mapcount;
    ++f->large_mapcount;
    ++f->refcount;
    if (mm_ids()) {
      f->mm_id[1] = child->id;
      f->mm_id_mapcount[1] = 0;
      f->mm_ids |= FOLIO_MM_IDS_SHARED_BIT;
    }
    add_mm_counter(child, MM_ANONPAGES, HPAGE_PMD_NR);
  }
};

}  // namespace kmmtest
