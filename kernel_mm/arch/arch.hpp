// SPDX-License-Identifier: GPL-2.0-only
// The arch layer: what include/asm and arch/*/mm give generic mm code. One interface, two
// implementations (arch/x86, arch/arm64), chosen when the kernel is built. Generic code calls
// `arch().pte_write(pte)` where the kernel calls `pte_write(pte)`.
//
// The pure PTE helpers (pte_write, pte_mkdirty, ...) follow the arch headers bit for bit. The
// hooks (set_ptes, ptep_set_access_flags, ...) follow the arch code, including what it asks of
// the TLBs and what that costs. Defaults here are the generic versions from
// include/linux/pgtable.h; an arch overrides what it overrides in the kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "base/pgformat.hpp"
#include "kernel_mm/mm_types.hpp"
#include "kernel_mm/types.hpp"

namespace kmm {

class Kernel;

// The TLBI TTL hint "level unknown" (arch/arm64/include/asm/tlbflush.h: INT_MAX), as
// tlb_get_level() returns it for an mmu_gather flush.
inline constexpr int TLBI_TTL_UNKNOWN = 0x7fffffff;

// Outcome of an arch fault handler (do_user_addr_fault / do_page_fault).
struct FaultReturn {
  vm_fault_t fault = 0;   // the last handle_mm_fault result
  bool sigsegv = false;   // access error or no VMA: the task would get SIGSEGV
  bool sigbus = false;
  int attempts = 0;       // handle_mm_fault calls (VMA lock, retry, mmap_lock)
};

class Arch {
 public:
  explicit Arch(Kernel& k) : k_(k) {}
  virtual ~Arch() = default;
  virtual mmusim::pg::Isa isa() const = 0;
  const char* name() const { return mmusim::pg::isa_name(isa()); }

  // ---- address space and configuration the arch gives generic code ---------------------------
  // TASK_SIZE (asm/processor.h): the end of the user address space.
  virtual uint64_t task_size() const = 0;
  // IS_ENABLED(CONFIG_MEM_SOFT_DIRTY): soft-dirty tracking needs CONFIG_HAVE_ARCH_SOFT_DIRTY,
  // which x86 selects and arm64 does not.
  virtual bool mem_soft_dirty() const { return false; }
  // The cost items that stand for instructions which wait until the CPU's older stores are
  // globally visible (a bit per kmm::Cost): the first one a kernel entry executes is where the
  // user's buffered stores must have drained (Kernel::cost_before_store_barrier).
  virtual uint32_t store_barrier_items() const = 0;
  // The exception return waits for the kernel's stores to drain (a serialising instruction).
  virtual bool exception_return_drains_stores() const = 0;

  // ---- the CPU's MMU, for user accesses without a hardware model (UserAccess) ----------------
  // The walk, the fault rules and the syndrome are the hardware's (base/hwwalk.hpp, shared with
  // the timed cores); what the kernel's view of the CPU adds:
  // arch_has_hw_pte_young() (include/linux/pgtable.h, overridden by arm64): whether the CPU sets
  // the accessed flag itself; `cpu_has_hw_af` is the CPU's feature (arm64 FEAT_HAFDBS).
  virtual bool arch_has_hw_pte_young(bool cpu_has_hw_af) const = 0;

  // ---- PTE helpers (pure) --------------------------------------------------------------------
  virtual bool pte_present(pte_t pte) const = 0;
  virtual bool pte_write(pte_t pte) const = 0;
  virtual bool pte_dirty(pte_t pte) const = 0;
  virtual bool pte_young(pte_t pte) const = 0;
  virtual bool pte_special(pte_t pte) const = 0;
  virtual bool pte_protnone(pte_t pte) const { return false; }
  virtual bool pte_soft_dirty(pte_t) const { return false; }
  virtual bool pte_uffd_wp(pte_t) const { return false; }
  virtual bool pte_cont(pte_t) const { return false; }
  virtual pfn_t pte_pfn(pte_t pte) const = 0;
  virtual pte_t pfn_pte(pfn_t pfn, pgprot_t prot) const = 0;
  virtual pgprot_t pte_pgprot(pte_t pte) const = 0;  // the non-PFN bits
  virtual pte_t pte_mkwrite_novma(pte_t pte) const = 0;
  // pte_mkwrite(pte, vma): the VMA-aware mkwrite (x86 also clears SavedDirty).
  virtual pte_t pte_mkwrite(pte_t pte, const vm_area_struct*) const { return pte_mkwrite_novma(pte); }
  virtual pte_t pte_wrprotect(pte_t pte) const = 0;
  virtual pte_t pte_mkdirty(pte_t pte) const = 0;
  virtual pte_t pte_mkclean(pte_t pte) const = 0;
  virtual pte_t pte_mkyoung(pte_t pte) const = 0;
  virtual pte_t pte_mkold(pte_t pte) const = 0;
  virtual pte_t pte_mkspecial(pte_t pte) const = 0;
  virtual pte_t pte_clear_soft_dirty(pte_t pte) const { return pte; }
  virtual pte_t pte_clear_uffd_wp(pte_t pte) const { return pte; }
  pte_t pte_sw_mkyoung(pte_t pte) const { return pte; }  // only MIPS/LoongArch do something
  pte_t pte_next_pfn(pte_t pte) const { return pte_advance_pfn(pte, 1); }
  virtual pte_t pte_advance_pfn(pte_t pte, unsigned long nr) const = 0;

  // ---- swap PTEs (arch pgtable headers; generic parts of include/linux/swapops.h) -------------
  // The arch encoding of a swap entry in a non-present PTE (__swp_entry(), __swp_type(),
  // __swp_offset()) and the software bit that remembers PG_anon_exclusive (_PAGE_SWP_EXCLUSIVE,
  // PTE_SWP_EXCLUSIVE).
  virtual pte_t __swp_entry_to_pte(unsigned type, uint64_t offset) const = 0;
  virtual unsigned __swp_type(pte_t pte) const = 0;
  virtual uint64_t __swp_offset(pte_t pte) const = 0;
  virtual uint64_t swp_exclusive_bit() const = 0;
  // is_swap_pte(): neither empty nor present.
  bool is_swap_pte(pte_t pte) const { return !pte_none(pte) && !pte_present(pte); }
  // swp_entry_to_pte() / pte_to_swp_entry() (include/linux/swapops.h; the latter clears the
  // software bits first, pte_swp_clear_flags()).
  pte_t swp_entry_to_pte(swp_entry_t e) const { return __swp_entry_to_pte(swp_type(e), swp_offset(e)); }
  swp_entry_t pte_to_swp_entry(pte_t pte) const {
    pte.val &= ~swp_exclusive_bit();
    return swp_entry(__swp_type(pte), __swp_offset(pte));
  }
  bool pte_swp_exclusive(pte_t pte) const { return pte.val & swp_exclusive_bit(); }
  pte_t pte_swp_mkexclusive(pte_t pte) const { return pte_t{pte.val | swp_exclusive_bit()}; }
  pte_t pte_swp_clear_exclusive(pte_t pte) const { return pte_t{pte.val & ~swp_exclusive_bit()}; }
  // maybe_mkwrite() (include/linux/mm.h)
  pte_t maybe_mkwrite(pte_t pte, const vm_area_struct* vma) const {
    return (vma->vm_flags & VM_WRITE) ? pte_mkwrite(pte, vma) : pte;
  }
  // vm_get_page_prot(): the protection bits a VMA's flags give (protection_map).
  virtual pgprot_t vm_get_page_prot(vm_flags_t flags) const = 0;
  virtual pte_t pte_modify(pte_t pte, pgprot_t newprot) const = 0;
  // pte_needs_flush()/huge_pmd_needs_flush(): whether a protection change (mprotect) must flush
  // the TLB. Generic (include/asm-generic/tlb.h): always; x86 overrides (asm/tlbflush.h:352).
  virtual bool pte_needs_flush(pte_t oldpte, pte_t newpte) const { return true; }
  virtual bool huge_pmd_needs_flush(pmd_t oldpmd, pmd_t newpmd) const { return true; }

  // ---- PMD / table helpers (pure) ------------------------------------------------------------
  virtual bool pmd_present(pmd_t pmd) const = 0;
  virtual bool pmd_trans_huge(pmd_t pmd) const = 0;  // a leaf (huge) PMD
  virtual bool pmd_write(pmd_t pmd) const = 0;
  virtual bool pmd_dirty(pmd_t pmd) const = 0;
  virtual bool pmd_young(pmd_t pmd) const = 0;
  virtual pfn_t pmd_pfn(pmd_t pmd) const = 0;   // leaf: the huge page's first pfn
  virtual pmd_t pmd_mkwrite_novma(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkwrite(pmd_t pmd, const vm_area_struct*) const { return pmd_mkwrite_novma(pmd); }
  virtual pmd_t pmd_wrprotect(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkdirty(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkclean(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkyoung(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkold(pmd_t pmd) const = 0;
  virtual pmd_t pmd_mkinvalid(pmd_t pmd) const = 0;
  // pmd_modify(): the arches define it as their pte_modify() on the PMD; this default rebuilds the
  // leaf from its pfn and the new protection, keeping young/dirty (what _HPAGE_CHG_MASK keeps).
  virtual pmd_t pmd_modify(pmd_t pmd, pgprot_t newprot) const {
    pmd_t r = mk_huge_pmd(pmd_pfn(pmd), newprot);
    r = pmd_young(pmd) ? pmd_mkyoung(r) : pmd_mkold(r);
    return pmd_dirty(pmd) ? pmd_mkdirty(r) : pmd_mkclean(r);
  }
  pmd_t maybe_pmd_mkwrite(pmd_t pmd, const vm_area_struct* vma) const {
    return (vma->vm_flags & VM_WRITE) ? pmd_mkwrite(pmd, vma) : pmd;
  }
  // mk_huge_pmd(): a leaf PMD mapping PMD_SIZE at `pfn`.
  virtual pmd_t mk_huge_pmd(pfn_t pfn, pgprot_t prot) const = 0;
  // A non-leaf entry at any level pointing to the table at `table_pfn` (pmd_populate, pud_populate).
  virtual uint64_t mk_table(pfn_t table_pfn) const = 0;
  virtual bool table_present(uint64_t entry) const = 0;  // a valid non-leaf entry
  virtual pfn_t table_pfn(uint64_t entry) const = 0;

  // ---- hooks with side effects (arch code) ---------------------------------------------------
  // Generic versions from include/linux/pgtable.h unless an arch overrides them.
  virtual pte_t ptep_get(pte_t* ptep) { return *ptep; }
  virtual pte_t ptep_get_lockless(pte_t* ptep) { return ptep_get(ptep); }  // arm64: contpte_ptep_get_lockless
  virtual void set_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr);
  void set_pte_at(mm_struct* mm, uint64_t addr, pte_t* ptep, pte_t pte) { set_ptes(mm, addr, ptep, pte, 1); }
  virtual pte_t ptep_get_and_clear(mm_struct* mm, uint64_t addr, pte_t* ptep);
  pte_t ptep_get_and_clear_full(mm_struct* mm, uint64_t addr, pte_t* ptep, int full) {
    return ptep_get_and_clear(mm, addr, ptep);
  }
  virtual pte_t get_and_clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  virtual void clear_full_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr, int full);
  virtual void ptep_set_wrprotect(mm_struct* mm, uint64_t addr, pte_t* ptep) = 0;
  virtual void wrprotect_ptes(mm_struct* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  // Returns whether the PTE changed.
  virtual int ptep_set_access_flags(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t entry, int dirty) = 0;
  // ptep_clear_flush() (mm/pgtable-generic.c): clear, then flush if it was accessible.
  virtual pte_t ptep_clear_flush(vm_area_struct* vma, uint64_t addr, pte_t* ptep);
  virtual unsigned pte_batch_hint(pte_t* ptep, pte_t pte) { return 1; }
  virtual pte_t ptep_modify_prot_start(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
    return ptep_get_and_clear(vma->vm_mm, addr, ptep);
  }
  virtual void ptep_modify_prot_commit(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t old_pte, pte_t pte) {
    set_pte_at(vma->vm_mm, addr, ptep, pte);
  }
  // modify_prot_start_ptes()/modify_prot_commit_ptes() (newer include/linux/pgtable.h): the
  // generic loops over ptep_modify_prot_*; arm64 overrides them (batched, keeps contpte blocks).
  virtual pte_t modify_prot_start_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, unsigned nr);
  virtual void modify_prot_commit_ptes(vm_area_struct* vma, uint64_t addr, pte_t* ptep, pte_t old_pte,
                                       pte_t pte, unsigned nr);
  virtual void flush_tlb_fix_spurious_fault(vm_area_struct* vma, uint64_t addr, pte_t* ptep) = 0;
  // ptep_clear_flush_young() (mm/pgtable-generic.c): clear the accessed bit; the generic version
  // flushes the page's TLB entries if it was set (arm64 flushes without waiting; x86 not at all).
  // Returns whether it was set.
  virtual int ptep_clear_flush_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep);
  // ptep_test_and_clear_young() (include/linux/pgtable.h): clear the accessed bit, no flush;
  // whether it was set.
  virtual int ptep_test_and_clear_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep);
  // arch_tlbbatch_should_defer() (ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH): may try_to_unmap() clear a
  // PTE of `mm` now and flush later, once for the whole batch (try_to_unmap_flush())? x86: when
  // a CPU other than this one may hold the mm's entries. The generic answer: no.
  virtual bool arch_tlbbatch_should_defer(const mm_struct* mm, int cpu) const { return false; }
  // arch_tlbbatch_add_pending() / arch_tlbbatch_flush(): record a deferred flush of `addr` in
  // `vma`'s mm in the batch (struct arch_tlbflush_unmap_batch: the mms here), and do every flush
  // the batch holds. Only called where arch_tlbbatch_should_defer() said yes.
  virtual void arch_tlbbatch_add_pending(std::vector<mm_struct*>& batch, vm_area_struct* vma, uint64_t addr);
  virtual void arch_tlbbatch_flush(std::vector<mm_struct*>& batch);
  virtual void update_mmu_cache_range(vm_area_struct*, uint64_t, pte_t*, unsigned) {}

  virtual int pmdp_set_access_flags(vm_area_struct* vma, uint64_t haddr, pmd_t* pmdp, pmd_t entry, int dirty) = 0;
  virtual void pmdp_set_wrprotect(mm_struct* mm, uint64_t addr, pmd_t* pmdp) = 0;
  virtual pmd_t pmdp_huge_get_and_clear(mm_struct* mm, uint64_t addr, pmd_t* pmdp);
  // pmdp_clear_flush_young() (mm/pgtable-generic.c:104; x86's arch/x86/mm/pgtable.c is the same
  // with flush_tlb_range(), which is x86's flush_pmd_tlb_range()): the huge PMD's accessed bit
  // cleared and, if it was set, its 2 MiB flushed. Unlike x86's PTE version it flushes.
  int pmdp_clear_flush_young(vm_area_struct* vma, uint64_t haddr, pmd_t* pmdp);
  virtual pmd_t pmdp_invalidate(vm_area_struct* vma, uint64_t addr, pmd_t* pmdp);
  // pmdp_invalidate_ad() (mm/pgtable-generic.c): generic = pmdp_invalidate(); x86 overrides it
  // without the flush (arch/x86/mm/pgtable.c).
  virtual pmd_t pmdp_invalidate_ad(vm_area_struct* vma, uint64_t addr, pmd_t* pmdp) {
    return pmdp_invalidate(vma, addr, pmdp);
  }
  virtual void set_pmd_at(mm_struct* mm, uint64_t addr, pmd_t* pmdp, pmd_t pmd);

  // ---- TLB flushing (asm/tlbflush.h) --------------------------------------------------------
  virtual void flush_tlb_page(vm_area_struct* vma, uint64_t addr) = 0;
  virtual void flush_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) = 0;
  // flush_pmd_tlb_range(): a range of PMD leaves (stride PMD_SIZE).
  virtual void flush_pmd_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) = 0;
  virtual void flush_tlb_mm(mm_struct* mm) = 0;
  // An mmu_gather's flush, tlb_flush() (asm/tlb.h): flush_tlb_mm_range() (x86) /
  // __flush_tlb_range() (arm64) of the gathered range with the stride tlb_get_unmap_shift() gives
  // (PMD_SHIFT for a gather that cleared only PMDs) and the level (arm64's TTL hint).
  virtual void tlb_flush_mmu_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift,
                                   int tlb_level, bool freed_tables) = 0;
  // This CPU only, the current mm (x86 flush_tlb_local; the `pagetable+flush` experiment).
  virtual void flush_tlb_local() = 0;

  // ---- context switch (switch_mm_irqs_off / check_and_switch_context) -------------------------
  // `cpu` now runs `next` (null: a kernel thread / idle). Sets mm_cpumask and the loaded mm.
  virtual void switch_mm(int cpu, mm_struct* next);
  mm_struct* loaded_mm(int cpu) const { return loaded_mm_[cpu]; }
  // `cpu` has nothing to run and idles (the scheduler's enter_lazy_tlb() hint): it keeps its
  // loaded mm. x86 stops taking that mm's flush IPIs until it runs a task again.
  virtual void enter_lazy_tlb(int cpu) {}
  // The invariant checker: may `cpu`'s TLB hold out-of-date entries of `mm` because the CPU will
  // flush them before it uses them (x86: it does not run mm now, or runs it lazily, and its
  // generation of mm is behind)? arm64 flushes by broadcast: never.
  virtual bool tlb_flush_deferred(int cpu, const mm_struct* mm) const { return false; }
  // The mm is going away (__mmdrop): x86 gives up its contexts on every CPU; the entries of a
  // context the kernel would reuse with a flush are flushed now, so that none of a dead mm stays.
  virtual void destroy_context(mm_struct* mm) {}

  // ---- fault entry -----------------------------------------------------------------------------
  // x86 do_user_addr_fault() (syndrome = the #PF error code) / arm64 do_page_fault() (syndrome =
  // ESR_EL1 with the data-abort ISS). The core delivers the exception; this is the handler.
  virtual FaultReturn handle_user_fault(task_struct* tsk, uint64_t addr, uint64_t syndrome, uint64_t ip) = 0;

 protected:
  Kernel& k_;
  mm_struct* loaded_mm_[kMaxCpus] = {};
};

}  // namespace kmm
