// SPDX-License-Identifier: GPL-2.0-only
// x86-64 arch layer: arch/x86/include/asm/pgtable.h and pgtable_types.h (PTE helpers),
// arch/x86/mm/pgtable.c (ptep_set_access_flags, pmdp_set_access_flags), arch/x86/mm/tlb.c
// (flush_tlb_mm_range, flush_tlb_func, flush_tlb_local) and arch/x86/mm/fault.c
// (do_user_addr_fault, access_error).
//
// What matters for the experiments: a write fault that upgrades a PTE to writable does no TLB
// flush ("#PF is architecturally guaranteed to do that"), and flush_tlb_fix_spurious_fault() is
// empty. Shadow-stack safety (SavedDirty) is kept as in 6.12: pte_wrprotect() moves Dirty to
// SavedDirty, pte_mkwrite() moves it back.
#include <algorithm>

#include "kernel_mm/arch/x86/x86.hpp"

#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace x = mmusim::pg::x86;

namespace {
// mksaveddirty_shift()/clear_saveddirty_shift() (arch/x86/include/asm/pgtable.h:404)
inline uint64_t mksaveddirty_shift(uint64_t v) {
  uint64_t cond = (~v >> 1) & 1;  // !RW
  v |= ((v >> 6) & cond) << 58;   // DIRTY -> SAVED_DIRTY
  v &= ~(cond << 6);
  return v;
}
inline uint64_t clear_saveddirty_shift(uint64_t v) {
  uint64_t cond = (v >> 1) & 1;   // RW
  v |= ((v >> 58) & cond) << 6;   // SAVED_DIRTY -> DIRTY
  v &= ~(cond << 58);
  return v;
}
constexpr uint64_t DIRTY_BITS = x::DIRTY | x::SAVED_DIRTY;  // _PAGE_DIRTY_BITS
// X86_PF_* (arch/x86/include/asm/trap_pf.h)
constexpr uint64_t X86_PF_PROT = 1u << 0;
constexpr uint64_t X86_PF_WRITE = 1u << 1;
constexpr uint64_t X86_PF_USER = 1u << 2;
constexpr uint64_t X86_PF_RSVD = 1u << 3;
constexpr uint64_t X86_PF_INSTR = 1u << 4;
constexpr uint64_t X86_PF_PK = 1u << 5;
constexpr uint64_t X86_PF_SHSTK = 1u << 6;
// tlb_single_page_flush_ceiling (arch/x86/mm/tlb.c)
constexpr uint64_t kTlbSinglePageFlushCeiling = 33;
}  // namespace

bool X86Arch::pte_present(pte_t p) const { return p.val & (x::PRESENT | x::PROTNONE); }
bool X86Arch::pte_write(pte_t p) const { return p.val & x::RW; }
bool X86Arch::pte_dirty(pte_t p) const { return p.val & DIRTY_BITS; }
bool X86Arch::pte_young(pte_t p) const { return p.val & x::ACCESSED; }
bool X86Arch::pte_special(pte_t p) const { return p.val & x::SPECIAL; }
bool X86Arch::pte_protnone(pte_t p) const {
  return (p.val & (x::PROTNONE | x::PRESENT)) == x::PROTNONE;
}
bool X86Arch::pte_soft_dirty(pte_t p) const { return p.val & x::SOFT_DIRTY; }
bool X86Arch::pte_uffd_wp(pte_t p) const { return p.val & x::UFFD_WP; }
pfn_t X86Arch::pte_pfn(pte_t p) const { return (p.val & x::PFN_MASK) >> PAGE_SHIFT; }
pte_t X86Arch::pfn_pte(pfn_t pfn, pgprot_t prot) const {
  return pte_t{(pfn << PAGE_SHIFT) | (prot.val & ~x::PFN_MASK)};
}
pgprot_t X86Arch::pte_pgprot(pte_t p) const { return pgprot_t{p.val & ~x::PFN_MASK}; }
pte_t X86Arch::pte_mkwrite_novma(pte_t p) const { return pte_t{p.val | x::RW}; }
// pte_mkwrite() (arch/x86/mm/pgtable.c): no shadow-stack VMAs here.
pte_t X86Arch::pte_mkwrite(pte_t p, const vm_area_struct*) const {
  return pte_t{clear_saveddirty_shift(pte_mkwrite_novma(p).val)};
}
pte_t X86Arch::pte_wrprotect(pte_t p) const { return pte_t{mksaveddirty_shift(p.val & ~x::RW)}; }
pte_t X86Arch::pte_mkdirty(pte_t p) const {
  return pte_t{mksaveddirty_shift(p.val | x::DIRTY | x::SOFT_DIRTY)};
}
pte_t X86Arch::pte_mkclean(pte_t p) const { return pte_t{p.val & ~DIRTY_BITS}; }
pte_t X86Arch::pte_mkyoung(pte_t p) const { return pte_t{p.val | x::ACCESSED}; }
pte_t X86Arch::pte_mkold(pte_t p) const { return pte_t{p.val & ~x::ACCESSED}; }
pte_t X86Arch::pte_mkspecial(pte_t p) const { return pte_t{p.val | x::SPECIAL}; }
pte_t X86Arch::pte_clear_soft_dirty(pte_t p) const { return pte_t{p.val & ~x::SOFT_DIRTY}; }
pte_t X86Arch::pte_clear_uffd_wp(pte_t p) const { return pte_t{p.val & ~x::UFFD_WP}; }
pte_t X86Arch::pte_advance_pfn(pte_t p, unsigned long nr) const {
  return pte_t{p.val + (uint64_t(nr) << PAGE_SHIFT)};
}
// protection_map (arch/x86/mm/pgprot.c): private writable mappings are mapped read-only until
// written (COW); the write fault makes them writable. _PAGE_NX for non-exec.
pgprot_t X86Arch::vm_get_page_prot(vm_flags_t f) const {
  uint64_t v = 0;
  if (f & (VM_READ | VM_WRITE | VM_EXEC)) v = x::PRESENT | x::USER | x::ACCESSED;
  else v = x::PROTNONE | x::ACCESSED;  // PAGE_NONE
  if ((f & VM_WRITE) && (f & VM_SHARED)) v |= x::RW;
  if (!(f & VM_EXEC)) v |= x::NX;
  return pgprot_t{v};
}
// pte_modify() (arch/x86/include/asm/pgtable.h): keep _PAGE_CHG_MASK (PFN, A, D, special,
// soft-dirty, uffd-wp, SavedDirty), take the rest from newprot.
pte_t X86Arch::pte_modify(pte_t p, pgprot_t newprot) const {
  constexpr uint64_t CHG_MASK = x::PFN_MASK | x::PCD | x::PWT | x::SPECIAL | x::ACCESSED |
                                x::DIRTY | x::SOFT_DIRTY | x::DEVMAP | x::UFFD_WP | x::SAVED_DIRTY;
  uint64_t v = (p.val & CHG_MASK) | (newprot.val & ~CHG_MASK);
  return pte_t{clear_saveddirty_shift(v)};
}

bool X86Arch::pmd_present(pmd_t p) const { return p.val & (x::PRESENT | x::PROTNONE | x::PSE); }
bool X86Arch::pmd_trans_huge(pmd_t p) const { return (p.val & x::PSE) != 0; }
bool X86Arch::pmd_write(pmd_t p) const { return p.val & x::RW; }
bool X86Arch::pmd_dirty(pmd_t p) const { return p.val & DIRTY_BITS; }
bool X86Arch::pmd_young(pmd_t p) const { return p.val & x::ACCESSED; }
pfn_t X86Arch::pmd_pfn(pmd_t p) const { return (p.val & x::PFN_MASK & PMD_MASK) >> PAGE_SHIFT; }
pmd_t X86Arch::pmd_mkwrite_novma(pmd_t p) const { return pmd_t{p.val | x::RW}; }
pmd_t X86Arch::pmd_mkwrite(pmd_t p, const vm_area_struct*) const {
  return pmd_t{clear_saveddirty_shift(p.val | x::RW)};
}
pmd_t X86Arch::pmd_wrprotect(pmd_t p) const { return pmd_t{mksaveddirty_shift(p.val & ~x::RW)}; }
pmd_t X86Arch::pmd_mkdirty(pmd_t p) const {
  return pmd_t{mksaveddirty_shift(p.val | x::DIRTY | x::SOFT_DIRTY)};
}
pmd_t X86Arch::pmd_mkclean(pmd_t p) const { return pmd_t{p.val & ~DIRTY_BITS}; }
pmd_t X86Arch::pmd_mkyoung(pmd_t p) const { return pmd_t{p.val | x::ACCESSED}; }
pmd_t X86Arch::pmd_mkold(pmd_t p) const { return pmd_t{p.val & ~x::ACCESSED}; }
// pmd_mkinvalid(): clear PRESENT and PROTNONE; pmd_present() stays true through PSE.
pmd_t X86Arch::pmd_mkinvalid(pmd_t p) const { return pmd_t{p.val & ~(x::PRESENT | x::PROTNONE)}; }
pmd_t X86Arch::mk_huge_pmd(pfn_t pfn, pgprot_t prot) const {
  return pmd_t{(pfn << PAGE_SHIFT) | (prot.val & ~x::PFN_MASK) | x::PSE};
}
uint64_t X86Arch::mk_table(pfn_t t) const { return (t << PAGE_SHIFT) | x::TABLE; }
bool X86Arch::table_present(uint64_t e) const { return (e & x::PRESENT) && !(e & x::PSE); }
pfn_t X86Arch::table_pfn(uint64_t e) const { return (e & x::PFN_MASK) >> PAGE_SHIFT; }

// ptep_set_wrprotect() (asm/pgtable.h:1345): cmpxchg loop with pte_wrprotect().
void X86Arch::ptep_set_wrprotect(mm_struct*, uint64_t, pte_t* ptep) {
  k_.pt_touch(ptep, sizeof(pte_t), true);
  k_.pte_changing(ptep);
  *ptep = pte_wrprotect(*ptep);
  k_.charge(Cost::pte_write);
}

// ptep_set_access_flags() (arch/x86/mm/pgtable.c:502): write only if changed and dirty; never
// flush. The #PF already invalidated this CPU's entry for the address; other stale entries take
// (at most one) spurious fault each.
int X86Arch::ptep_set_access_flags(vm_area_struct*, uint64_t, pte_t* ptep, pte_t entry, int dirty) {
  int changed = !pte_same(*ptep, entry);
  if (changed && dirty) {
    k_.pt_touch(ptep, sizeof(pte_t), true);
    k_.pte_changing(ptep);
    *ptep = entry;  // set_pte()
    k_.charge(Cost::pte_write);
  }
  return changed;
}

// choose_new_asid() (tlb.c:217)
void X86Arch::choose_new_asid(int cpu, const mm_struct* next, unsigned* asid, bool* need_flush) {
  for (unsigned a = 0; a < kNrDynAsids; ++a) {
    if (ctxs_[cpu][a].mm_id != next->id) continue;
    *asid = a;
    *need_flush = ctxs_[cpu][a].tlb_gen < next->tlb_gen;
    return;
  }
  // No slot on this CPU: take the next one round robin. (The PCID the slot stood for is reused
  // with a flush in the kernel: the evicted mm's entries go.)
  *asid = next_asid_[cpu]++;
  if (*asid >= kNrDynAsids) {
    *asid = 0;
    next_asid_[cpu] = 1;
  }
  if (ctxs_[cpu][*asid].mm_id >= 0) k_.hw().x86_flush_pcid(cpu, uint16_t(ctxs_[cpu][*asid].mm_id));
  *need_flush = true;
}

// switch_mm_irqs_off() (tlb.c:499): back from lazy mode on the same mm, the TLB is used as it is
// if its generation is current, else flushed; to another mm, the CPU leaves the old mm's
// cpumask, joins the new one's, and flushes the new mm's context unless it is up to date. The
// flush is the CR3 write's (load_new_mm_cr3(..., need_flush)): the context switch's price.
void X86Arch::switch_mm(int cpu, mm_struct* next) {
  mm_struct* prev = loaded_mm_[cpu];
  const bool was_lazy = is_lazy_[cpu];
  is_lazy_[cpu] = false;
  if (!next) {
    if (prev) prev->cpumask.reset(size_t(cpu));
    loaded_mm_[cpu] = nullptr;
    return;
  }
  unsigned asid = loaded_asid_[cpu];
  bool need_flush = false;
  if (prev == next) {
    next->cpumask.set(size_t(cpu));
    if (!was_lazy || ctxs_[cpu][asid].tlb_gen == next->tlb_gen) return;
    need_flush = true;
  } else {
    if (prev) prev->cpumask.reset(size_t(cpu));
    next->cpumask.set(size_t(cpu));
    choose_new_asid(cpu, next, &asid, &need_flush);
  }
  if (need_flush) {
    ctxs_[cpu][asid].mm_id = next->id;
    ctxs_[cpu][asid].tlb_gen = next->tlb_gen;
    k_.hw().x86_flush_pcid(cpu, uint16_t(next->id));
  }
  loaded_mm_[cpu] = next;
  loaded_asid_[cpu] = asid;
}

// enter_lazy_tlb() (tlb.c:676)
void X86Arch::enter_lazy_tlb(int cpu) {
  if (!loaded_mm_[cpu]) return;
  is_lazy_[cpu] = true;
}

bool X86Arch::tlb_flush_deferred(int cpu, const mm_struct* mm) const {
  if (loaded_mm_[cpu] == mm && !is_lazy_[cpu]) return false;
  for (unsigned a = 0; a < kNrDynAsids; ++a)
    if (ctxs_[cpu][a].mm_id == mm->id) return ctxs_[cpu][a].tlb_gen < mm->tlb_gen;
  return true;  // no context: the next switch to mm flushes
}

void X86Arch::destroy_context(mm_struct* mm) {
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    for (TlbCtx& c : ctxs_[cpu])
      if (c.mm_id == mm->id) {
        k_.hw().x86_flush_pcid(cpu, uint16_t(mm->id));
        c = TlbCtx{};
      }
    if (loaded_mm_[cpu] == mm) {  // a lazy CPU: it keeps the mm only until it switches (mmgrab_lazy_tlb)
      loaded_mm_[cpu] = nullptr;
      is_lazy_[cpu] = false;
    }
  }
  mm->cpumask.reset();
}

// flush_tlb_fix_spurious_fault() (asm/pgtable.h:1361): nothing on x86.
void X86Arch::flush_tlb_fix_spurious_fault(vm_area_struct*, uint64_t, pte_t*) {}

// pmdp_set_access_flags() (arch/x86/mm/pgtable.c:524): "No need to flush the TLB as the #PF is
// architecturally guaranteed to do that and in the worst-case we'll generate a spurious fault."
int X86Arch::pmdp_set_access_flags(vm_area_struct*, uint64_t, pmd_t* pmdp, pmd_t entry, int dirty) {
  int changed = !pmd_same(*pmdp, entry);
  if (changed && dirty) {
    *pmdp = entry;
    k_.charge(Cost::pte_write);
  }
  return changed;
}

void X86Arch::pmdp_set_wrprotect(mm_struct*, uint64_t, pmd_t* pmdp) {
  *pmdp = pmd_wrprotect(*pmdp);
  k_.charge(Cost::pte_write);
}

// flush_tlb_mm_range() (arch/x86/mm/tlb.c:1043). Remote CPUs in mm_cpumask get an IPI each and
// run flush_tlb_func() there; the local CPU flushes if the mm is loaded. flush_tlb_multi() ->
// native_flush_tlb_multi() -> on_each_cpu_cond_mask(..., wait = 1) (kernel/smp.c
// smp_call_function_many_cond()): the sender queues a call for each target and sends the IPIs
// (cost.ipi each), runs its own flush while they are on their way, then spins until every target
// has acknowledged (csd_lock_wait()). Every CPU in mm_cpumask is reached: the port has no lazy-TLB
// state and no deferred flush at switch_mm(), so should_flush_tlb() is not applied.
void X86Arch::flush_tlb_mm_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift,
                                 bool freed_tables) {
  const bool full = end == kFlushAll || ((end - start) >> stride_shift) > kTlbSinglePageFlushCeiling;
  if (full) {
    start = 0;
    end = kFlushAll;
  }
  ++mm->tlb_gen;  // inc_mm_tlb_gen()
  const int self = k_.smp_processor_id();
  double last_ack = 0;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (!mm->cpumask.test(size_t(cpu)) || cpu == self) continue;
    // native_flush_tlb_multi(): with freed tables every CPU in the mask (on_each_cpu_mask), else
    // on_each_cpu_cond_mask(should_flush_tlb, ...).
    if (!freed_tables && !should_flush_tlb(cpu, mm)) continue;
    k_.charge(Cost::ipi);  // csd_lock(), llist_add() to its queue, the ICR write
    double work = 0;
    if (is_lazy_[cpu]) {
      // flush_tlb_func() on a lazy CPU: switch_mm_irqs_off(NULL, &init_mm) instead of a flush.
      // (Its entries of mm stay in the kernel until the PCID is reused with a flush, and cannot
      // be used before; they are dropped here, which changes no timing.)
      mm->cpumask.reset(size_t(cpu));
      loaded_mm_[cpu] = nullptr;
      is_lazy_[cpu] = false;
      k_.hw().x86_flush_pcid(cpu, uint16_t(mm->id));
      for (TlbCtx& c : ctxs_[cpu])
        if (c.mm_id == mm->id) c = TlbCtx{};
    } else {
      work = flush_tlb_func(cpu, mm, start, end, stride_shift, /*here=*/false);
    }
    last_ack = std::max(last_ack, k_.hw().x86_ipi(self, cpu, k_.cycles_now(), work));
  }
  if (loaded_mm_[self] == mm) flush_tlb_func(self, mm, start, end, stride_shift);
  wait_for_acks(last_ack);
}

// csd_lock_wait() on each target of a flush_tlb_multi(): the sender spins until the last
// acknowledgement (`last_ack`, in the entry's cycles).
void X86Arch::wait_for_acks(double last_ack) {
  const double now = k_.cycles_now();
  if (last_ack > now) k_.cost().extra_cycles += last_ack - now;
}

// flush_tlb_func() (arch/x86/mm/tlb.c): INVLPG per page (flush_tlb_one_user) or a full flush of
// the mm's ASID (flush_tlb_local).
double X86Arch::flush_tlb_func(int cpu, mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift,
                               bool here) {
  const uint16_t pcid = uint16_t(mm->id);
  // The CPU's context of mm catches up with the generation (local_tlb_gen = mm_tlb_gen).
  if (loaded_mm_[cpu] == mm) ctxs_[cpu][loaded_asid_[cpu]].tlb_gen = mm->tlb_gen;
  if (end == kFlushAll) {
    k_.hw().x86_flush_pcid(cpu, pcid);
    if (here) k_.charge(Cost::flush_full);
    return here ? 0 : k_.price_cycles_on(Cost::flush_full, cpu);
  }
  double work = 0;
  for (uint64_t addr = start; addr < end; addr += uint64_t(1) << stride_shift) {
    k_.hw().x86_invlpg(cpu, pcid, addr);
    if (here) k_.charge(Cost::invlpg);
    else work += k_.price_cycles_on(Cost::invlpg, cpu);
  }
  return work;
}

void X86Arch::flush_tlb_page(vm_area_struct* vma, uint64_t addr) {
  k_.counters().tlb_flush_page.inc();
  flush_tlb_mm_range(vma->vm_mm, addr, addr + PAGE_SIZE, PAGE_SHIFT, false);
}

// flush_tlb_range() (arch/x86/include/asm/tlbflush.h:241): stride PAGE_SHIFT (no hugetlb here)
// and freed_tables true, so every CPU in mm_cpumask is reached, lazy ones too; a range above
// tlb_single_page_flush_ceiling (33) pages is a full flush of the mm.
void X86Arch::flush_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) {
  k_.counters().tlb_flush_range.inc();
  flush_tlb_mm_range(vma->vm_mm, start, end, PAGE_SHIFT, true);
}

// flush_pmd_tlb_range(): x86 does not define __HAVE_ARCH_FLUSH_PMD_TLB_RANGE, so it is
// flush_tlb_range() (include/linux/pgtable.h:1785): a 2 MiB range is 512 pages, a full flush of
// the mm (as a THP split's pmdp_invalidate() does in 6.12).
void X86Arch::flush_pmd_tlb_range(vm_area_struct* vma, uint64_t start, uint64_t end) {
  flush_tlb_range(vma, start, end);
}

// ptep_clear_flush_young() (arch/x86/mm/pgtable.c:495): "On x86 CPUs, clearing the accessed bit
// without a TLB flush doesn't cause data corruption": no flush, so a page whose translation stays
// in a TLB looks unused to reclaim until the entry is evicted (the CPU sets A only on a walk).
int X86Arch::ptep_clear_flush_young(vm_area_struct* vma, uint64_t addr, pte_t* ptep) {
  k_.pt_touch(ptep, sizeof(pte_t), false);
  return ptep_test_and_clear_young(vma, addr, ptep);
}

// arch_tlbbatch_should_defer() (arch/x86/include/asm/tlbflush.h:258): if remote CPUs need to be
// flushed then defer batch the flush.
bool X86Arch::arch_tlbbatch_should_defer(const mm_struct* mm, int cpu) const {
  for (int c = 0; c < kMaxCpus; ++c)
    if (c != cpu && mm->cpumask.test(size_t(c))) return true;
  return false;
}

// arch_tlbbatch_add_pending() (arch/x86/include/asm/tlbflush.h:287): inc_mm_tlb_gen() and the
// mm's cpumask ORed into the batch's; here the batch keeps the mm, whose mask is read at the
// flush (it cannot change in between: the kernel runs one entry at a time).
void X86Arch::arch_tlbbatch_add_pending(std::vector<mm_struct*>& batch, vm_area_struct* vma, uint64_t) {
  mm_struct* mm = vma->vm_mm;
  ++mm->tlb_gen;  // inc_mm_tlb_gen()
  if (std::find(batch.begin(), batch.end(), mm) == batch.end()) batch.push_back(mm);
}

// arch_tlbbatch_flush() (arch/x86/mm/tlb.c:1292): one full flush, with no mm
// (get_flush_tlb_info(NULL, 0, TLB_FLUSH_ALL, ...)), on every CPU of the batch's cpumask:
// flush_tlb_multi() when a CPU other than this one is in it, else flush_tlb_func() here if this
// one is. A CPU flushes the context it has loaded (flush_tlb_func() with f->mm NULL); lazy CPUs
// are skipped (should_flush_tlb()), and every context of a batched mm that was not flushed now
// lags its tlb_gen and is flushed when the CPU next switches to it (switch_mm_irqs_off()).
void X86Arch::arch_tlbbatch_flush(std::vector<mm_struct*>& batch) {
  cpumask_t mask;
  for (const mm_struct* mm : batch) mask |= mm->cpumask;
  batch.clear();
  const int self = k_.smp_processor_id();
  const bool here = mask.test(size_t(self)) && loaded_mm_[self] && !is_lazy_[self];
  double last_ack = 0;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (!mask.test(size_t(cpu)) || cpu == self) continue;
    if (is_lazy_[cpu] || !loaded_mm_[cpu]) continue;  // should_flush_tlb(): not a lazy CPU
    k_.charge(Cost::ipi);
    const double work = flush_tlb_func(cpu, loaded_mm_[cpu], 0, kFlushAll, 0, /*here=*/false);
    last_ack = std::max(last_ack, k_.hw().x86_ipi(self, cpu, k_.cycles_now(), work));
  }
  if (here) flush_tlb_func(self, loaded_mm_[self], 0, kFlushAll, 0);
  wait_for_acks(last_ack);
}

// flush_tlb_mm() (arch/x86/include/asm/tlbflush.h:238): freed_tables true.
void X86Arch::flush_tlb_mm(mm_struct* mm) {
  k_.counters().tlb_flush_mm.inc();
  flush_tlb_mm_range(mm, 0, kFlushAll, 0, true);
}

// tlb_flush() for x86 (arch/x86/include/asm/tlb.h): flush_tlb_mm_range() over the gathered range
// with stride_shift = tlb_get_unmap_shift(tlb) (one INVLPG per 2 MiB for a gather that cleared
// only PMDs) and the gather's freed_tables.
void X86Arch::tlb_flush_mmu_range(mm_struct* mm, uint64_t start, uint64_t end, unsigned stride_shift, int,
                                  bool freed_tables) {
  k_.counters().tlb_flush_range.inc();
  flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables);
}

// flush_tlb_local() (arch/x86/mm/tlb.c:1265): this CPU, the loaded ASID, whole non-global TLB.
void X86Arch::flush_tlb_local() {
  k_.counters().tlb_flush_local.inc();
  int cpu = k_.smp_processor_id();
  mm_struct* mm = loaded_mm_[cpu];
  if (!mm) return;
  k_.hw().x86_flush_pcid(cpu, uint16_t(mm->id));
  k_.charge(Cost::flush_full);
}

// access_error() (arch/x86/mm/fault.c)
static bool access_error(uint64_t error_code, const vm_area_struct* vma) {
  if (error_code & X86_PF_PK) return true;
  if (error_code & X86_PF_SHSTK) return true;  // no shadow-stack VMAs here
  if (error_code & X86_PF_WRITE) return !(vma->vm_flags & VM_WRITE);  // write, present or not
  if (error_code & X86_PF_PROT) return true;                           // read, present
  return !(vma->vm_flags & (VM_READ | VM_WRITE | VM_EXEC));            // read, not present
}

// do_user_addr_fault() (arch/x86/mm/fault.c:1209), with the fault-retry-once variant.
// arch_has_hw_pte_young(): x86 selects CONFIG_ARCH_HAS_HW_PTE_YOUNG (arch/x86/Kconfig): the CPU
// always sets Accessed (and Dirty) itself (SDM Vol 3A §4.8).
bool X86Arch::arch_has_hw_pte_young(bool) const { return true; }

uint32_t X86Arch::store_barrier_items() const {
  auto bit = [](Cost c) { return uint32_t(1) << unsigned(c); };
  return bit(Cost::lock_op) | bit(Cost::page_op) | bit(Cost::folio_op) | bit(Cost::invlpg) |
         bit(Cost::flush_full);
}

FaultReturn X86Arch::handle_user_fault(task_struct* tsk, uint64_t address, uint64_t error_code, uint64_t ip) {
  FaultReturn r;
  mm_struct* mm = tsk->mm;
  uint32_t flags = FAULT_FLAG_DEFAULT;
  vm_fault_t fault = 0;
  bool vma_lock_retried = false;
  vm_area_struct* vma = nullptr;

  MMUSIM_CHECK(!(error_code & X86_PF_RSVD), "reserved bit set in a user PTE at {:#x} (pgtable_bad)", address);
  k_.charge(Cost::fault_arch);
  if (error_code & X86_PF_SHSTK) flags |= FAULT_FLAG_WRITE;
  if (error_code & X86_PF_WRITE) flags |= FAULT_FLAG_WRITE;
  if (error_code & X86_PF_INSTR) flags |= FAULT_FLAG_INSTRUCTION;
  if (error_code & X86_PF_USER) flags |= FAULT_FLAG_USER;
  // perf_sw_event(PERF_COUNT_SW_PAGE_FAULTS)
  k_.counters().faults_total.inc();
  (flags & FAULT_FLAG_WRITE ? k_.counters().faults_write : k_.counters().faults_read).inc();

  if (!(flags & FAULT_FLAG_USER)) goto lock_mmap;

lock_vma:
  vma = k_.lock_vma_under_rcu(mm, address);
  if (!vma) goto lock_mmap;
  if (access_error(error_code, vma)) {
    k_.vma_end_read(vma);
    k_.counters().vma_lock_success.inc();
    r.sigsegv = true;
    return r;
  }
  fault = k_.handle_mm_fault(vma, address, flags | FAULT_FLAG_VMA_LOCK);
  ++r.attempts;
  if (!(fault & (VM_FAULT_RETRY | VM_FAULT_COMPLETED))) k_.vma_end_read(vma);
  if (!(fault & VM_FAULT_RETRY)) {
    k_.counters().vma_lock_success.inc();
    goto done;
  }
  k_.counters().vma_lock_retry.inc();
  if (fault & VM_FAULT_MAJOR) flags |= FAULT_FLAG_TRIED;
  if (k_.params().fault_retry == FaultRetry::retry_once && !vma_lock_retried) {
    vma_lock_retried = true;
    goto lock_vma;
  }

lock_mmap:
  k_.counters().mmap_lock_fallback.inc();
  for (;;) {  // retry:
    vma = k_.lock_mm_and_find_vma(mm, address);
    if (!vma) {
      r.sigsegv = true;  // bad_area_nosemaphore()
      return r;
    }
    if (access_error(error_code, vma)) {
      k_.mmap_read_unlock(mm);
      r.sigsegv = true;
      return r;
    }
    fault = k_.handle_mm_fault(vma, address, flags);
    ++r.attempts;
    if (fault & VM_FAULT_COMPLETED) {
      r.fault = fault;
      return r;
    }
    if (fault & VM_FAULT_RETRY) {  // mmap_lock already released by the callee
      flags |= FAULT_FLAG_TRIED;
      continue;
    }
    k_.mmap_read_unlock(mm);
    break;
  }
done:
  r.fault = fault;
  if (fault & VM_FAULT_SIGBUS) r.sigbus = true;
  if (fault & VM_FAULT_SIGSEGV) r.sigsegv = true;
  if (fault & VM_FAULT_OOM) k_.pagefault_out_of_memory(address);
  return r;
}

std::unique_ptr<Arch> make_arch(mmusim::pg::Isa isa, Kernel& k) {
  if (isa == mmusim::pg::Isa::x86_64) return std::make_unique<X86Arch>(k);
  return make_arm64_arch(k);
}

}  // namespace kmm
