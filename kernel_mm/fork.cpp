// SPDX-License-Identifier: GPL-2.0-only
// Processes and fork: create_process (what exec leaves: a task with an empty mm), mm_alloc,
// sys_fork (kernel_clone -> copy_process -> copy_mm -> dup_mm -> dup_mmap, kernel/fork.c) and the
// page-table copy (copy_page_range ... copy_present_ptes, mm/memory.c).
//
// fork_copy variants (patches/fork-batch-copy-ptes.diff): `batched` is 6.12 (copy_present_ptes()
// batches the PTEs of a large folio with folio_pte_batch()); `per-pte` is the code before the
// batching series: every PTE on its own (folio_get + folio_try_dup_anon_rmap_pte +
// ptep_set_wrprotect + set_pte_at).
//
// Not ported: signals, credentials, files, namespaces, threads (CLONE_VM), uprobes, khugepaged,
// KSM, userfaultfd, mempolicy, accounting (security_vm_enough_memory: overcommit always succeeds).
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {
inline bool is_cow_mapping(vm_flags_t flags) { return (flags & (VM_SHARED | VM_MAYWRITE)) == VM_MAYWRITE; }
// VM_LOCKED_MASK (include/linux/mm.h): VM_LOCKED | VM_LOCKONFAULT (the latter not modelled).
constexpr vm_flags_t VM_LOCKED_MASK = VM_LOCKED;
constexpr unsigned PGDIR_SHIFT_ = PGDIR_SHIFT;
constexpr uint64_t PGDIR_SIZE = uint64_t(1) << PGDIR_SHIFT_;
// {pgd,pud,pmd}_addr_end() (include/linux/pgtable.h)
inline uint64_t addr_end(uint64_t addr, uint64_t end, uint64_t size) {
  uint64_t boundary = (addr + size) & ~(size - 1);
  return (boundary - 1 < end - 1) ? boundary : end;
}
}  // namespace

// ------------------------------------------------------------------------------------------------
// mm and task creation

// mm_alloc() (kernel/fork.c) -> mm_init() -> mm_alloc_pgd(): an empty address space with its top
// level table. The mm id (CONFIG_MM_ID) doubles as the ASID/PCID.
mm_struct* Kernel::mm_alloc() {
  auto mm = std::make_unique<mm_struct>();
  mm->id = next_mm_id_++;
  pfn_t pgd = pte_alloc_one(mm.get());  // pgd_alloc(): the PGD is not counted in pgtables_bytes
  if (!pgd) mmusim::fatal("out of simulated physical memory allocating a page table: raise memory.size");
  mm->pgd = uint64_t(pgd) << PAGE_SHIFT;
  mm->mmap_lock.set_stats(&mmap_lock_stats_);
  mm->mm_users = 1;
  mm->memcg = workload_memcg_;  // mm_init_owner(): the creating task's cgroup
  mm_struct* raw = mm.get();
  mms_.push_back(std::move(mm));
  return raw;
}

task_struct* Kernel::create_process(const std::string& comm) {
  mm_struct* mm = mm_alloc();
  mm->owner_comm = comm;
  auto t = std::make_unique<task_struct>();
  t->pid = next_pid_++;
  t->tgid = t->pid;
  t->comm = comm;
  t->mm = mm;
  t->cpu = cpu_;
  t->state = TaskState::Runnable;
  task_struct* raw = t.get();
  tasks_.push_back(std::move(t));
  return raw;
}

// sys_fork() -> kernel_clone() -> copy_process() (kernel/fork.c): a new task and, through
// copy_mm() -> dup_mm(), a copy of the parent's address space.
// clone(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD) as pthread_create()
// does: copy_process() without copy_mm()'s dup_mm(): the new task shares the mm (mmget()).
task_struct* Kernel::sys_clone_thread(task_struct* parent) {
  charge(Cost::syscall);
  charge(Cost::thread_fixed);
  mm_struct* mm = parent->mm;
  MMUSIM_CHECK(mm, "clone of a task without an mm");
  ++mm->mm_users;  // mmget()
  auto t = std::make_unique<task_struct>();
  t->pid = next_pid_++;
  t->tgid = parent->tgid;
  t->comm = parent->comm;
  t->mm = mm;
  t->cpu = parent->cpu;
  t->state = TaskState::Runnable;
  t->parent = parent;  // so that the creator can reap it (pthread_join's role here)
  task_struct* child = t.get();
  tasks_.push_back(std::move(t));
  trace_event("clone", {mmusim::TraceField::dec("parent_pid", uint64_t(parent->pid)),
                        mmusim::TraceField::dec("child_pid", uint64_t(child->pid))});
  return child;
}

task_struct* Kernel::sys_fork(task_struct* parent) {
  charge(Cost::syscall);
  charge(Cost::fork_fixed);
  ctr_.forks.inc();
  mm_struct* oldmm = parent->mm;
  MMUSIM_CHECK(oldmm, "fork of a task without an mm");

  // dup_mm(): allocate_mm + memcpy(mm, oldmm) + mm_init, then dup_mmap.
  mm_struct* mm = mm_alloc();
  mm->mmap_base = oldmm->mmap_base;
  mm->owner_comm = oldmm->owner_comm;
  // MMF_HAS_PINNED is not inherited (not in MMF_INIT_MASK).
  int err = dup_mmap(mm, oldmm);
  if (err) {
    // dup_mm() failure: free_pt / mmput() the half-built mm.
    mmput(mm);
    return nullptr;
  }

  auto t = std::make_unique<task_struct>();
  t->pid = next_pid_++;
  t->tgid = t->pid;
  t->comm = parent->comm;
  t->mm = mm;
  t->cpu = parent->cpu;
  t->state = TaskState::Runnable;
  t->parent = parent;
  task_struct* child = t.get();
  tasks_.push_back(std::move(t));

  trace_event("fork", {mmusim::TraceField::dec("parent_pid", uint64_t(parent->pid)),
                       mmusim::TraceField::dec("child_pid", uint64_t(child->pid)),
                       mmusim::TraceField::str("child_comm", child->comm)});
  check_invariants("fork");
  return child;
}

// ------------------------------------------------------------------------------------------------
// dup_mmap() (kernel/fork.c:641)

// vm_area_dup() (kernel/fork.c): a copy of the VMA with a fresh per-VMA lock (fork, split_vma).
std::unique_ptr<vm_area_struct> vm_area_dup(const vm_area_struct* orig) {
  auto v = std::make_unique<vm_area_struct>();
  v->vm_start = orig->vm_start;
  v->vm_end = orig->vm_end;
  v->vm_mm = orig->vm_mm;
  v->vm_flags = orig->vm_flags;
  v->vm_pgoff = orig->vm_pgoff;
  v->anon = orig->anon;
  v->vm_file = orig->vm_file;  // get_file()
  return v;
}

// anon_vma_fork() (mm/rmap.c:340): the child VMA gets its own anon_vma whose root is the parent's
// root (anon_vma_clone() of the chain is not modelled).
static int anon_vma_fork(Kernel& k, vm_area_struct* vma, vm_area_struct* pvma, uint32_t id) {
  vma->anon = nullptr;
  // Don't bother if the parent process has no anon_vma here.
  if (!pvma->anon) return 0;
  auto av = std::make_shared<anon_vma>();
  av->id = id;
  av->root_id = pvma->anon->root_id;  // anon_vma->root = pvma->anon_vma->root
  av->refcount = 1;
  vma->anon = std::move(av);
  return 0;
}

int Kernel::dup_mmap(mm_struct* mm, mm_struct* oldmm) {
  int retval = 0;

  mmap_write_lock(oldmm);  // mmap_write_lock_killable()
  // flush_cache_dup_mm(): no-op. uprobe_dup_mmap(): none.
  // Not linked in yet - no deadlock potential:
  mmap_write_lock(mm);  // mmap_write_lock_nested(mm, SINGLE_DEPTH_NESTING)

  // __mt_dup() builds an identical tree; VM_DONTCOPY entries are then cleared. Here the VMAs are
  // inserted one by one.
  for (auto& [end, mp] : oldmm->mm_mt) {
    vm_area_struct* mpnt = mp.get();
    vma_start_write(mpnt);
    if (mpnt->vm_flags & VM_DONTCOPY) {
      // vma_iter_clear_gfp(); vm_stat_account()
      continue;
    }
    // (VM_ACCOUNT: security_vm_enough_memory_mm always succeeds.)
    std::unique_ptr<vm_area_struct> tmp = vm_area_dup(mpnt);
    charge(Cost::vma_op);
    tmp->vm_mm = mm;
    if (tmp->vm_flags & VM_WIPEONFORK) {
      // VM_WIPEONFORK gets a clean slate in the child. Don't prepare anon_vma until fault since
      // we don't copy page for current vma.
      tmp->anon = nullptr;
    } else if (anon_vma_fork(*this, tmp.get(), mpnt, next_anon_vma_id_++)) {
      retval = -ENOMEM;
      break;
    }
    tmp->vm_flags &= ~VM_LOCKED_MASK;  // vm_flags_clear(tmp, VM_LOCKED_MASK)
    // Link the vma into the MT.
    vm_area_struct* t = vma_insert(mm, std::move(tmp));
    // (no vm_ops->open; a file VMA's i_mmap link is not kept: no rmap walks of files)
    if (!(t->vm_flags & VM_WIPEONFORK)) retval = copy_page_range(t, mpnt);
    if (retval) break;
  }
  // arch_dup_mmap(): nothing. ksm_fork(), khugepaged_fork(): no.

  mmap_write_unlock(mm);
  arch_->flush_tlb_mm(oldmm);
  mmap_write_unlock(oldmm);
  return retval;
}

// ------------------------------------------------------------------------------------------------
// copy_page_range() (mm/memory.c:1357) and the levels below it

// vma_needs_copy() (mm/memory.c:1330)
bool Kernel::vma_needs_copy(vm_area_struct* dst_vma, vm_area_struct* src_vma) {
  // Always copy pgtables when dst_vma has uffd-wp enabled: no userfaultfd.
  if (src_vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP)) return true;
  if (src_vma->anon) return true;
  // Don't copy ptes where a page fault will fill them correctly.
  return false;
}

int Kernel::copy_page_range(vm_area_struct* dst_vma, vm_area_struct* src_vma) {
  uint64_t addr = src_vma->vm_start;
  const uint64_t end = src_vma->vm_end;
  mm_struct* dst_mm = dst_vma->vm_mm;
  mm_struct* src_mm = src_vma->vm_mm;
  int ret;

  if (!vma_needs_copy(dst_vma, src_vma)) return 0;
  // is_vm_hugetlb_page(), VM_PFNMAP track_pfn_copy(): none.

  // We need to invalidate the secondary MMU mappings only when there could be a permission
  // downgrade on the ptes of the parent mm (mmu notifiers: none).
  const bool is_cow = is_cow_mapping(src_vma->vm_flags);
  if (is_cow) {
    MMUSIM_CHECK(src_vma->vm_lock_seq == src_mm->mm_lock_seq, "copy_page_range of a VMA not write-locked");
    ++src_mm->write_protect_seq;  // raw_write_seqcount_begin(&src_mm->write_protect_seq)
  }

  ret = 0;
  do {
    const uint64_t next = addr_end(addr, end, PGDIR_SIZE);
    uint64_t* src_pgd = pgd_offset(src_mm, addr);
    uint64_t* dst_pgd = pgd_offset(dst_mm, addr);
    // pgd_none_or_clear_bad(src_pgd)
    if (!arch_->table_present(*src_pgd)) {
      addr = next;
      continue;
    }
    // copy_p4d_range(): p4d folded. copy_pud_range():
    pud_t* dst_pud = pud_alloc(dst_mm, dst_pgd, addr);
    if (!dst_pud) {
      ret = -ENOMEM;
      break;
    }
    pud_t* src_pud = pud_offset(src_pgd, addr);
    bool failed = false;
    uint64_t a = addr;
    do {
      const uint64_t pnext = addr_end(a, next, PUD_SIZE);
      // pud_trans_huge(): no huge PUDs. pud_none_or_clear_bad():
      if (arch_->table_present(src_pud->val) && copy_pmd_range(dst_vma, src_vma, dst_pud, src_pud, a, pnext)) {
        failed = true;
        break;
      }
      dst_pud++;
      src_pud++;
      a = pnext;
    } while (a != next);
    if (failed) {
      ret = -ENOMEM;
      break;
    }
    addr = next;
  } while (addr != end);

  if (is_cow) ++src_mm->write_protect_seq;  // raw_write_seqcount_end()
  return ret;
}

// copy_pmd_range() (mm/memory.c:1227)
int Kernel::copy_pmd_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pud_t* dst_pud, pud_t* src_pud,
                           uint64_t addr, uint64_t end) {
  mm_struct* dst_mm = dst_vma->vm_mm;
  mm_struct* src_mm = src_vma->vm_mm;
  pmd_t *src_pmd, *dst_pmd;
  uint64_t next;

  dst_pmd = pmd_alloc(dst_mm, dst_pud, addr);
  if (!dst_pmd) return -ENOMEM;
  src_pmd = pmd_offset(src_pud, addr);
  do {
    next = addr_end(addr, end, PMD_SIZE);
    if (arch_->pmd_trans_huge(*src_pmd)) {
      MMUSIM_CHECK(next - addr == HPAGE_PMD_SIZE, "huge PMD at {:#x} straddles the VMA", addr);
      int err = copy_huge_pmd(dst_mm, src_mm, dst_pmd, src_pmd, addr, dst_vma, src_vma);
      if (err == -ENOMEM) return -ENOMEM;
      if (!err) continue;
      // fall through
    }
    // pmd_none_or_clear_bad()
    if (pmd_none(*src_pmd) || !arch_->table_present(src_pmd->val)) continue;
    if (copy_pte_range(dst_vma, src_vma, dst_pmd, src_pmd, addr, next)) return -ENOMEM;
  } while (dst_pmd++, src_pmd++, addr = next, addr != end);
  return 0;
}

// copy_pte_range() (mm/memory.c:1081), with the -EAGAIN preallocation retry.
int Kernel::copy_pte_range(vm_area_struct* dst_vma, vm_area_struct* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd,
                           uint64_t addr, uint64_t end) {
  mm_struct* dst_mm = dst_vma->vm_mm;
  mm_struct* src_mm = src_vma->vm_mm;
  pte_t *orig_src_pte, *orig_dst_pte;
  pte_t *src_pte, *dst_pte;
  pte_t ptent;
  uint32_t *src_ptl, *dst_ptl;
  int progress, max_nr, ret = 0;
  int rss[NR_MM_COUNTERS];
  folio* prealloc = nullptr;
  int nr;

again:
  progress = 0;
  for (int& r : rss) r = 0;  // init_rss_vec()

  // pte_alloc_map_lock()
  dst_pte = pte_alloc(dst_mm, dst_pmd) ? nullptr : pte_offset_map_lock(dst_mm, dst_pmd, addr, &dst_ptl);
  if (!dst_pte) {
    ret = -ENOMEM;
    goto out;
  }
  src_pte = pte_offset_map_nolock(src_mm, src_pmd, addr, &src_ptl);
  if (!src_pte) {
    pte_unmap_unlock(dst_pte, dst_ptl);
    // ret == 0
    goto out;
  }
  spin_lock(src_ptl);  // spin_lock_nested(src_ptl, SINGLE_DEPTH_NESTING)
  orig_src_pte = src_pte;
  orig_dst_pte = dst_pte;
  // arch_enter_lazy_mmu_mode()

  do {
    nr = 1;
    // We are holding two locks at this point - either of them could generate latencies in
    // another task on another CPU. (need_resched()/spin_needbreak(): nobody waits here.)
    if (progress >= 32) progress = 0;
    ptent = arch_->ptep_get(src_pte);
    if (pte_none(ptent)) {
      progress++;
      continue;
    }
    if (!arch_->pte_present(ptent)) {
      // copy_nonpresent_pte() (mm/memory.c:793) of a swap entry (no migration or device entries
      // in this port): one more reference to the slot.
      MMUSIM_CHECK(arch_->is_swap_pte(ptent) && swap_enabled(), "non-present PTE {:#x} at {:#x}", ptent.val, addr);
      swap_duplicate(arch_->pte_to_swp_entry(ptent));
      // Mark the swap entry as shared.
      if (arch_->pte_swp_exclusive(ptent)) {
        ptent = arch_->pte_swp_clear_exclusive(ptent);
        arch_->set_pte_at(src_mm, addr, src_pte, ptent);
      }
      rss[MM_SWAPENTS]++;
      arch_->set_pte_at(dst_mm, addr, dst_pte, ptent);
      progress += 8;
      continue;
    }
    // copy_present_ptes() will clear `*prealloc' if consumed
    max_nr = int((end - addr) / PAGE_SIZE);
    ret = copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, ptent, addr, max_nr, rss, &prealloc);
    // If we need a pre-allocated page for this pte, drop the locks, allocate, and try again. If
    // copy failed due to hwpoison in source page, break out.
    if (ret == -EAGAIN || ret == -EHWPOISON) break;
    if (prealloc) {
      // pre-alloc page cannot be reused by next time so as to strictly follow mempolicy.
      folio_put(prealloc);
      prealloc = nullptr;
    }
    nr = ret;
    progress += 8 * nr;
  } while (dst_pte += nr, src_pte += nr, addr += PAGE_SIZE * uint64_t(nr), addr != end);

  // arch_leave_lazy_mmu_mode()
  pte_unmap_unlock(orig_src_pte, src_ptl);
  for (int i = 0; i < NR_MM_COUNTERS; i++)  // add_mm_rss_vec()
    if (rss[i]) add_mm_counter(dst_mm, i, rss[i]);
  pte_unmap_unlock(orig_dst_pte, dst_ptl);
  // cond_resched()

  if (ret == -EHWPOISON) {
    goto out;
  } else if (ret == -EAGAIN) {
    prealloc = folio_prealloc(src_mm, src_vma, addr, false);
    if (!prealloc) return -ENOMEM;
  } else if (ret < 0) {
    MMUSIM_CHECK(false, "copy_pte_range: unexpected error {}", ret);
  }

  // We've captured and resolved the error. Reset, try again.
  ret = 0;
  if (addr != end) goto again;
out:
  if (prealloc) folio_put(prealloc);
  return ret;
}

// copy_present_page() (mm/memory.c:915): the parent's page may be pinned; the child gets a copy.
int Kernel::copy_present_page(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte,
                              uint64_t addr, int* rss, folio** prealloc, page* pg) {
  folio* new_folio;
  pte_t pte;

  new_folio = *prealloc;
  if (!new_folio) return -EAGAIN;

  // We have a prealloc page, all good! Take it over and copy the page & arm it.
  copy_user_highpage(new_folio, pg, addr);  // copy_mc_user_highpage(): no hwpoison

  *prealloc = nullptr;
  // __folio_mark_uptodate()
  folio_add_new_anon_rmap(new_folio, dst_vma, addr, RMAP_EXCLUSIVE);
  folio_add_lru_vma(new_folio, dst_vma);
  rss[MM_ANONPAGES]++;

  // All done, just insert the new page copy in the child
  pte = arch_->pfn_pte(folio_pfn(new_folio), arch_->vm_get_page_prot(dst_vma->vm_flags));  // mk_pte()
  pte = arch_->maybe_mkwrite(arch_->pte_mkdirty(pte), dst_vma);
  // userfaultfd_pte_wp(): no.
  arch_->set_pte_at(dst_vma->vm_mm, addr, dst_pte, pte);
  return 0;
}

// __copy_present_ptes() (mm/memory.c:950)
void Kernel::__copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte,
                                 pte_t* src_pte, pte_t pte, uint64_t addr, int nr) {
  mm_struct* src_mm = src_vma->vm_mm;

  // If it's a COW mapping, write protect it both processes.
  if (is_cow_mapping(src_vma->vm_flags) && arch_->pte_write(pte)) {
    arch_->wrprotect_ptes(src_mm, addr, src_pte, unsigned(nr));
    pte = arch_->pte_wrprotect(pte);
  }
  // If it's a shared mapping, mark it clean in the child.
  if (src_vma->vm_flags & VM_SHARED) pte = arch_->pte_mkclean(pte);
  pte = arch_->pte_mkold(pte);
  // !userfaultfd_wp(dst_vma):
  pte = arch_->pte_clear_uffd_wp(pte);
  arch_->set_ptes(dst_vma->vm_mm, addr, dst_pte, pte, unsigned(nr));
}

// copy_present_pte() before the batching series (patches/fork-batch-copy-ptes.diff, the removed
// side): always one PTE, ptep_set_wrprotect() and set_pte_at(). Returns 0 or -EAGAIN.
static int copy_present_pte_per_pte(Kernel& k, vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte,
                                    pte_t* src_pte, pte_t pte, uint64_t addr, int* rss, folio** prealloc) {
  Arch& a = k.arch();
  mm_struct* src_mm = src_vma->vm_mm;
  const vm_flags_t vm_flags = src_vma->vm_flags;
  page* pg = k.vm_normal_page(src_vma, addr, pte);
  folio* f = pg ? page_folio(pg) : nullptr;

  if (pg && folio_test_anon(f)) {
    // If this page may have been pinned by the parent process, copy the page immediately for the
    // child so that we'll always guarantee the pinned page won't be randomly replaced in the
    // future.
    folio_get(f);
    k.charge(Cost::folio_op);
    if (k.folio_try_dup_anon_rmap_pte(f, pg, dst_vma, src_vma)) {
      // Page may be pinned, we have to copy.
      k.folio_put(f);
      return k.copy_present_page(dst_vma, src_vma, dst_pte, src_pte, addr, rss, prealloc, pg);
    }
    rss[MM_ANONPAGES]++;
  } else if (pg) {
    folio_get(f);
    k.charge(Cost::folio_op);
    k.folio_dup_file_rmap_pte(f, pg, dst_vma);
    rss[MM_FILEPAGES]++;                           // rss[mm_counter_file(folio)]++
  }

  // If it's a COW mapping, write protect it both in the parent and the child
  if (is_cow_mapping(vm_flags) && a.pte_write(pte)) {
    a.ptep_set_wrprotect(src_mm, addr, src_pte);
    pte = a.pte_wrprotect(pte);
  }
  MMUSIM_CHECK(!(pg && folio_test_anon(f) && PageAnonExclusive(pg)), "shared anon page still exclusive");

  // If it's a shared mapping, mark it clean in the child
  if (vm_flags & VM_SHARED) pte = a.pte_mkclean(pte);
  pte = a.pte_mkold(pte);
  // !userfaultfd_wp(dst_vma)
  pte = a.pte_clear_uffd_wp(pte);
  a.set_pte_at(dst_vma->vm_mm, addr, dst_pte, pte);
  return 0;
}

// copy_present_ptes() (mm/memory.c:981): copy one present PTE, trying to batch-process subsequent
// PTEs that map consecutive pages of the same folio by copying them as well. Returns -EAGAIN if
// one preallocated page is required to copy the next PTE. Otherwise, returns the number of copied
// PTEs (at least 1).
int Kernel::copy_present_ptes(vm_area_struct* dst_vma, vm_area_struct* src_vma, pte_t* dst_pte, pte_t* src_pte,
                              pte_t pte, uint64_t addr, int max_nr, int* rss, folio** prealloc) {
  page* pg;
  folio* f;
  bool any_writable;
  fpb_t flags = 0;
  int err, nr;

  if (params_.fork_copy == ForkCopy::per_pte) {
    err = copy_present_pte_per_pte(*this, dst_vma, src_vma, dst_pte, src_pte, pte, addr, rss, prealloc);
    if (err) return err;
    ctr_.ptes_copied_fork.inc();
    return 1;
  }

  pg = vm_normal_page(src_vma, addr, pte);
  if (!pg) goto copy_pte;

  f = page_folio(pg);

  // If we likely have to copy, just don't bother with batching. Make sure that the common "small
  // folio" case is as fast as possible by keeping the batching logic separate.
  if (!*prealloc && folio_test_large(f) && max_nr != 1) {
    if (src_vma->vm_flags & VM_SHARED) flags |= FPB_IGNORE_DIRTY;
    if (!vma_soft_dirty_enabled(src_vma)) flags |= FPB_IGNORE_SOFT_DIRTY;

    nr = folio_pte_batch(f, addr, src_pte, pte, max_nr, flags, &any_writable, nullptr, nullptr);
    folio_ref_add(f, nr);
    charge(Cost::folio_op);
    if (folio_test_anon(f)) {
      if (folio_try_dup_anon_rmap_ptes(f, pg, nr, dst_vma, src_vma)) {
        folio_ref_sub(f, nr);
        return -EAGAIN;
      }
      rss[MM_ANONPAGES] += nr;
      MMUSIM_CHECK(!PageAnonExclusive(pg), "shared anon page still exclusive");
    } else {
      folio_dup_file_rmap_ptes(f, pg, nr, dst_vma);
      rss[MM_FILEPAGES] += nr;  // rss[mm_counter_file(folio)]
    }
    if (any_writable) pte = arch_->pte_mkwrite(pte, src_vma);
    __copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, pte, addr, nr);
    ctr_.ptes_copied_fork.inc(uint64_t(nr));
    return nr;
  }

  folio_get(f);
  charge(Cost::folio_op);
  if (folio_test_anon(f)) {
    // If this page may have been pinned by the parent process, copy the page immediately for the
    // child so that we'll always guarantee the pinned page won't be randomly replaced in the
    // future.
    if (folio_try_dup_anon_rmap_pte(f, pg, dst_vma, src_vma)) {
      // Page may be pinned, we have to copy.
      folio_put(f);
      err = copy_present_page(dst_vma, src_vma, dst_pte, src_pte, addr, rss, prealloc, pg);
      if (!err) ctr_.ptes_copied_fork.inc();
      return err ? err : 1;
    }
    rss[MM_ANONPAGES]++;
    MMUSIM_CHECK(!PageAnonExclusive(pg), "shared anon page still exclusive");
  } else {
    folio_dup_file_rmap_pte(f, pg, dst_vma);
    rss[MM_FILEPAGES]++;  // rss[mm_counter_file(folio)]
  }

copy_pte:
  __copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, pte, addr, 1);
  ctr_.ptes_copied_fork.inc();
  return 1;
}

}  // namespace kmm
