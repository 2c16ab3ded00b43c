// SPDX-License-Identifier: GPL-2.0-only
// arm64 arch layer, part 3: arch/arm64/mm/fault.c — __ptep_set_access_flags() (the write-fault
// upgrade and its broadcast TLBI), do_mem_abort()'s dispatch on the ESR, do_translation_fault()
// and do_page_fault() with the fault-retry-once variant (patches/fault-retry-once-per-vma-lock.diff)
// — and flush_tlb_fix_spurious_fault() (empty in 6.12, a local TLBI since v6.19).
//
// On arm64 a Permission fault does not invalidate the TLB entry that caused it (Arm ARM D8.15
// I_WJLXV); the hardware model keeps it, and only the TLBIs issued here remove it.
#include "base/error.hpp"
#include "base/hwwalk.hpp"
#include "kernel_mm/arch/arm64/arm64.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

using namespace arm64b;
using namespace esr;

// __ptep_set_access_flags() (arch/arm64/mm/fault.c:211): set AF, dirty and write permission, only
// to a more permissive setting; PTE_RDONLY becomes the most permissive (lowest) of *ptep and
// entry. "Invalidate a stale read-only entry": a dirty (write) upgrade broadcasts a TLBI of the
// page (6.12: flush_tlb_page()), which is what makes the arm64 write fault coherent without a
// spurious-fault hook.
int Arm64Arch::__ptep_set_access_flags(vm_area_struct* vma, uint64_t address, pte_t* ptep, pte_t entry,
                                       int dirty) {
  pte_t pte = __ptep_get(ptep);
  if (pte_same(pte, entry)) return 0;

  // only preserve the access flags and write permission
  entry.val &= PTE_RDONLY | PTE_AF | PTE_WRITE | PTE_DIRTY;

  // PTE_RDONLY = a & b, computed as ~(~a | ~b); the kernel's cmpxchg loop races only with the
  // hardware's AF/dirty updates, which cannot happen while kernel code runs here.
  entry.val ^= PTE_RDONLY;
  uint64_t pteval = pte.val;
  pteval ^= PTE_RDONLY;
  pteval |= entry.val;
  pteval ^= PTE_RDONLY;
  k_.pte_changing(ptep);
  *ptep = pte_t{pteval};
  k_.charge(Cost::pte_write);

  // Invalidate a stale read-only entry
  if (dirty) flush_tlb_page(vma, address);
  return 1;
}

// pmdp_set_access_flags() (pgtable.h:1172): the same on the PMD as a PTE.
int Arm64Arch::pmdp_set_access_flags(vm_area_struct* vma, uint64_t address, pmd_t* pmdp, pmd_t entry,
                                     int dirty) {
  return __ptep_set_access_flags(vma, address, reinterpret_cast<pte_t*>(pmdp), pte_t{entry.val}, dirty);
}

// flush_tlb_fix_spurious_fault() (arch/arm64/include/asm/pgtable.h:59). 6.12: empty — "we always
// use broadcast TLB invalidation instructions, therefore a spurious page fault on one CPU which
// has been handled concurrently by another CPU does not need to perform additional
// invalidation". v6.19 (commit cb1fa2e99955): local_flush_tlb_page_nonotify(vma, address), so a
// CPU faulting on its own stale read-only entry drops it (kernel.arm64_spurious_flush = local).
void Arm64Arch::flush_tlb_fix_spurious_fault(vm_area_struct* vma, uint64_t address, pte_t*) {
  if (k_.params().arm64_spurious_flush == SpuriousFlush::none) return;
  k_.counters().tlb_flush_spurious_fix.inc();
  local_flush_tlb_page_nonotify(vma->vm_mm, address);
}

// What do_mem_abort() and do_page_fault() read from the ESR (asm/esr.h, fault.c).
Arm64Abort arm64_decode_esr(uint64_t e) {
  Arm64Abort a;
  const uint64_t ec = ESR_ELx_EC(e);
  a.el0 = ec == ESR_ELx_EC_DABT_LOW || ec == ESR_ELx_EC_IABT_LOW;
  a.instruction = ec == ESR_ELx_EC_IABT_LOW || ec == ESR_ELx_EC_IABT_CUR;
  // is_write_abort() (fault.c:591): not valid for EL1 DC IVAC, which is never used to fault.
  a.write = !a.instruction && (e & ESR_ELx_WNR) && !(e & ESR_ELx_CM);
  const uint64_t fsc = e & ESR_ELx_FSC;
  if (esr_fsc_is_translation_fault(fsc)) a.kind = Arm64Abort::translation;
  else if (esr_fsc_is_access_flag_fault(fsc)) a.kind = Arm64Abort::access_flag;
  else if (esr_fsc_is_permission_fault(fsc)) a.kind = Arm64Abort::permission;
  else a.kind = Arm64Abort::other;
  a.level = fsc == ESR_ELx_FSC_FAULT_L_M1 ? -1 : int(fsc & ESR_ELx_FSC_LEVEL);
  return a;
}

namespace {
// is_ttbr0_addr() (asm/processor.h): a user (TTBR0) address, below TASK_SIZE (48-bit VA).
inline bool is_ttbr0_addr(uint64_t addr) { return addr < Arm64Arch::TASK_SIZE_64; }
}  // namespace

// arch_has_hw_pte_young() (asm/pgtable.h: cpu_has_hw_af()): the access flag is set by the
// hardware when the CPU has FEAT_HAFDBS (HA); otherwise an access-flag fault asks the kernel.
bool Arm64Arch::arch_has_hw_pte_young(bool cpu_has_hw_af) const { return cpu_has_hw_af; }

uint32_t Arm64Arch::store_barrier_items() const {
  return uint32_t(1) << unsigned(Cost::dsb_local) | uint32_t(1) << unsigned(Cost::dsb_bcast);
}

// do_mem_abort() (fault.c:885) -> fault_info[esr & ESR_ELx_FSC].fn: do_translation_fault() for
// translation faults (fault.c:746: do_page_fault() for a TTBR0 address, else do_bad_area() =
// SIGSEGV), do_page_fault() for access-flag and permission faults; anything else (address size,
// external aborts, ...) is a hardware model bug here. Then do_page_fault() (fault.c:596).
FaultReturn Arm64Arch::handle_user_fault(task_struct* tsk, uint64_t far, uint64_t esr_val, uint64_t ip) {
  (void)ip;
  FaultReturn r;
  const uint64_t ec = ESR_ELx_EC(esr_val);
  MMUSIM_CHECK(ec == ESR_ELx_EC_DABT_LOW || ec == ESR_ELx_EC_IABT_LOW,
               "user fault at {:#x} with ESR {:#x}: EC {:#x} is not a data/instruction abort from EL0", far,
               esr_val, ec);
  const Arm64Abort abort = arm64_decode_esr(esr_val);
  MMUSIM_CHECK(abort.kind != Arm64Abort::other, "user fault at {:#x}: ESR {:#x} has FSC {:#x}, which is not a "
               "translation, access flag or permission fault (do_bad)", far, esr_val, esr_val & ESR_ELx_FSC);
  k_.charge(Cost::fault_arch);

  const uint64_t addr = far;  // untagged_addr(): no tagged addresses here
  if (abort.kind == Arm64Abort::translation && !is_ttbr0_addr(addr)) {
    r.sigsegv = true;  // do_translation_fault() -> do_bad_area()
    return r;
  }

  // ---- do_page_fault() ----
  mm_struct* mm = tsk->mm;
  vm_fault_t fault = 0;
  vm_flags_t vm_flags;
  uint32_t mm_flags = FAULT_FLAG_DEFAULT;
  bool vma_lock_retried = false;  // fault-retry-once-per-vma-lock
  vm_area_struct* vma = nullptr;

  MMUSIM_CHECK(mm, "user fault at {:#x} of a task without an mm (no_context)", addr);
  mm_flags |= FAULT_FLAG_USER;  // user_mode(regs): EC *_LOW

  // vm_flags tells us what bits we must have in vma->vm_flags for the fault to be benign.
  if (abort.instruction) {  // is_el0_instruction_abort()
    vm_flags = VM_EXEC;
    mm_flags |= FAULT_FLAG_INSTRUCTION;
  } else if (abort.write) {  // is_write_abort()
    vm_flags = VM_WRITE;
    mm_flags |= FAULT_FLAG_WRITE;
  } else {
    // It was read fault. Write implies read; without EPAN (N1) exec implies read.
    vm_flags = VM_READ | VM_WRITE | VM_EXEC;
  }

  // perf_sw_event(PERF_COUNT_SW_PAGE_FAULTS)
  k_.counters().faults_total.inc();
  (mm_flags & FAULT_FLAG_WRITE ? k_.counters().faults_write : k_.counters().faults_read).inc();

  if (!(mm_flags & FAULT_FLAG_USER)) goto lock_mmap;

lock_vma:
  vma = k_.lock_vma_under_rcu(mm, addr);
  if (!vma) goto lock_mmap;

  if (!(vma->vm_flags & vm_flags)) {
    k_.vma_end_read(vma);
    k_.counters().vma_lock_success.inc();  // count_vm_vma_lock_event(VMA_LOCK_SUCCESS)
    r.sigsegv = true;                      // bad_area: SEGV_ACCERR
    return r;
  }
  // fault_from_pkey(): no POE on N1.

  fault = k_.handle_mm_fault(vma, addr, mm_flags | FAULT_FLAG_VMA_LOCK);
  ++r.attempts;
  if (!(fault & (VM_FAULT_RETRY | VM_FAULT_COMPLETED))) k_.vma_end_read(vma);

  if (!(fault & VM_FAULT_RETRY)) {
    k_.counters().vma_lock_success.inc();
    goto done;
  }
  k_.counters().vma_lock_retry.inc();
  if (fault & VM_FAULT_MAJOR) mm_flags |= FAULT_FLAG_TRIED;
  // fault_signal_pending(): no signals pending in this port.

  if (k_.params().fault_retry == FaultRetry::retry_once && !vma_lock_retried) {
    vma_lock_retried = true;
    goto lock_vma;
  }

lock_mmap:
  k_.counters().mmap_lock_fallback.inc();
  for (;;) {  // retry:
    vma = k_.lock_mm_and_find_vma(mm, addr);
    if (!vma) {
      r.sigsegv = true;  // bad_area: SEGV_MAPERR (mmap_lock already released)
      return r;
    }
    if (!(vma->vm_flags & vm_flags)) {
      k_.mmap_read_unlock(mm);
      r.sigsegv = true;  // SEGV_ACCERR
      return r;
    }
    fault = k_.handle_mm_fault(vma, addr, mm_flags);
    ++r.attempts;
    // The fault is fully completed (including releasing mmap lock)
    if (fault & VM_FAULT_COMPLETED) {
      r.fault = fault;
      return r;
    }
    if (fault & VM_FAULT_RETRY) {  // mmap_lock already released by the callee
      mm_flags |= FAULT_FLAG_TRIED;
      continue;
    }
    k_.mmap_read_unlock(mm);
    break;
  }

done:
  r.fault = fault;
  // Handle the "normal" (no error) case first.
  if (!(fault & VM_FAULT_ERROR)) return r;
  if (fault & VM_FAULT_OOM) {
    k_.pagefault_out_of_memory(addr);
    return r;
  }
  if (fault & VM_FAULT_SIGBUS) r.sigbus = true;
  else r.sigsegv = true;  // SIGSEGV (or a hwpoison SIGBUS, which cannot happen here)
  return r;
}

}  // namespace kmm
