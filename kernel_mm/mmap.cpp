// SPDX-License-Identifier: GPL-2.0-only
// Address space: mmap of private anonymous memory, the VMA tree, get_unmapped_area, split_vma and
// anon_vma_prepare (mm/mmap.c, mm/vma.c, mm/rmap.c). munmap, mprotect and madvise live in
// munmap.cpp.
//
// Simplifications (PORTMAP §8.3): private anonymous memory and file mappings (filemap.cpp).
// MAP_SHARED|MAP_ANONYMOUS would need shmem and is refused with -EINVAL. No VMA merging (vma_merge_new_range() /
// vma_expand()): every mmap makes its own VMA, which only changes how many VMAs there are, not what
// the fault and fork paths do inside one. No stack guard gaps (no VM_GROWSDOWN mappings). The maple
// tree is an ordered map keyed by vm_end.
#include "base/error.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

namespace {

// mmap_min_addr (CONFIG_DEFAULT_MMAP_MIN_ADDR=65536 on x86 and arm64 distribution kernels).
constexpr uint64_t kMmapMinAddr = 65536;

inline bool IS_ERR_VALUE(uint64_t x) { return x >= uint64_t(-4095); }
inline uint64_t ERR_VALUE(int err) { return uint64_t(int64_t(err)); }  // -errno as unsigned long
inline uint64_t PAGE_ALIGN(uint64_t x) { return ALIGN(x, PAGE_SIZE); }

// accountable_mapping() (mm/mmap.c:594)
bool accountable_mapping(vm_flags_t vm_flags) {
  return (vm_flags & (VM_NORESERVE | VM_SHARED | VM_WRITE)) == VM_WRITE;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The VMA tree (include/linux/mm.h, mm/mmap.c; the maple tree is a map keyed by vm_end).

// find_vma() (mm/mmap.c): the first VMA with vm_end > addr.
vm_area_struct* Kernel::find_vma(mm_struct* mm, uint64_t addr) {
  auto it = mm->mm_mt.upper_bound(addr);
  return it == mm->mm_mt.end() ? nullptr : it->second.get();
}

// vma_lookup() (include/linux/mm.h): the VMA containing addr.
vm_area_struct* Kernel::vma_lookup(mm_struct* mm, uint64_t addr) {
  vm_area_struct* vma = find_vma(mm, addr);
  if (vma && addr < vma->vm_start) vma = nullptr;
  return vma;
}

// vma_iter_store() / vma_link(): insert a VMA that overlaps none.
vm_area_struct* Kernel::vma_insert(mm_struct* mm, std::unique_ptr<vm_area_struct> vma) {
  MMUSIM_CHECK(vma->vm_start < vma->vm_end && IS_ALIGNED(vma->vm_start, PAGE_SIZE) &&
                   IS_ALIGNED(vma->vm_end, PAGE_SIZE),
               "bad VMA range [{:#x},{:#x})", vma->vm_start, vma->vm_end);
  vm_area_struct* next = find_vma(mm, vma->vm_start);
  MMUSIM_CHECK(!next || next->vm_start >= vma->vm_end,
               "VMA [{:#x},{:#x}) overlaps [{:#x},{:#x})", vma->vm_start, vma->vm_end,
               next->vm_start, next->vm_end);
  vma->vm_mm = mm;
  vma->vm_lock.set_stats(&vma_lock_stats_);
  vm_area_struct* raw = vma.get();
  mm->mm_mt.emplace(vma->vm_end, std::move(vma));
  return raw;
}

// vma_iter_clear() / vma_mark_detached(): take a VMA out of the tree; the caller owns it.
std::unique_ptr<vm_area_struct> Kernel::vma_remove(mm_struct* mm, vm_area_struct* vma) {
  auto it = mm->mm_mt.find(vma->vm_end);
  MMUSIM_CHECK(it != mm->mm_mt.end() && it->second.get() == vma,
               "vma_remove of VMA [{:#x},{:#x}) not in the tree", vma->vm_start, vma->vm_end);
  std::unique_ptr<vm_area_struct> v = std::move(it->second);
  mm->mm_mt.erase(it);
  return v;
}

// ------------------------------------------------------------------------------------------------
// anon_vma_prepare() (include/linux/rmap.h -> __anon_vma_prepare, mm/rmap.c:186). The kernel first
// tries find_mergeable_anon_vma() (a neighbour's anon_vma); without VMA merging there is nothing
// to share, so a VMA always gets its own.
int Kernel::anon_vma_prepare(vm_area_struct* vma) {
  if (vma->anon) return 0;
  auto av = std::make_shared<anon_vma>();
  av->id = next_anon_vma_id_++;
  av->root_id = av->id;  // anon_vma->root = anon_vma
  av->refcount = 1;
  vma->anon = std::move(av);
  return 0;
}

// ------------------------------------------------------------------------------------------------
// get_unmapped_area

namespace {
// unmapped_area_topdown() (mm/mmap.c:673) with no gaps, align_mask 0: the highest free range of
// `length` within [low_limit, high_limit). -ENOMEM if none.
uint64_t unmapped_area_topdown(mm_struct* mm, uint64_t length, uint64_t low_limit, uint64_t high_limit) {
  if (low_limit < kMmapMinAddr) low_limit = kMmapMinAddr;
  uint64_t hi = high_limit;
  for (auto it = mm->mm_mt.rbegin(); it != mm->mm_mt.rend(); ++it) {
    const vm_area_struct* v = it->second.get();
    if (v->vm_start >= hi) continue;
    if (v->vm_end <= hi && hi >= low_limit + length && hi - std::max(v->vm_end, low_limit) >= length)
      return hi - length;
    hi = v->vm_start;
    if (hi <= low_limit) return ERR_VALUE(-ENOMEM);
  }
  if (hi >= low_limit + length) return hi - length;
  return ERR_VALUE(-ENOMEM);
}

// unmapped_area() (mm/mmap.c:616): the lowest free range of `length` within [low, high).
uint64_t unmapped_area(mm_struct* mm, uint64_t length, uint64_t low_limit, uint64_t high_limit) {
  if (low_limit < kMmapMinAddr) low_limit = kMmapMinAddr;
  uint64_t lo = low_limit;
  for (auto& [end, v] : mm->mm_mt) {
    if (v->vm_end <= lo) continue;
    if (v->vm_start >= lo + length) break;
    lo = v->vm_end;
  }
  if (lo + length <= high_limit) return lo;
  return ERR_VALUE(-ENOMEM);
}

// generic_get_unmapped_area_topdown() (mm/mmap.c:808), with `mm_get_unmapped_area_vmflags()` on
// an MMF_TOPDOWN mm.
uint64_t arch_get_unmapped_area_topdown(Kernel& k, mm_struct* mm, uint64_t addr, uint64_t len) {
  const uint64_t mmap_end = k.arch().task_size();  // arch_get_mmap_end(): TASK_SIZE
  // requested length too big for entire address space
  if (len > mmap_end - kMmapMinAddr) return ERR_VALUE(-ENOMEM);
  // requesting a specific address
  if (addr) {
    addr = PAGE_ALIGN(addr);
    vm_area_struct* vma = k.find_vma(mm, addr);
    // (find_vma_prev: the previous VMA ends at or below addr since vma is the first ending above)
    if (mmap_end - len >= addr && addr >= kMmapMinAddr && (!vma || addr + len <= vma->vm_start))
      return addr;
  }
  addr = unmapped_area_topdown(mm, len, PAGE_SIZE, mm->mmap_base);
  // A failed mmap() very likely causes application failure, so fall back to the bottom-up
  // function here.
  if (IS_ERR_VALUE(addr)) addr = unmapped_area(mm, len, mm->mmap_base, mmap_end);
  return addr;
}
}  // namespace

// __get_unmapped_area() (mm/mmap.c:881), after the MAP_FIXED and hint handling. `align` =
// PMD_SIZE asks for thp_get_unmapped_area_vmflags() (mm/huge_memory.c:1175; a file's
// f_op->get_unmapped_area, thp_get_unmapped_area(), is the same): __thp_get_unmapped_area() pads
// the length by PMD_SIZE, takes the top-down result and moves it to the address inside whose
// distance from the file offset `pgoff` (0 for anonymous memory) is a multiple of PMD_SIZE; on
// failure the plain search. align = 0: the plain search.
uint64_t Kernel::get_unmapped_area(mm_struct* mm, uint64_t addr, uint64_t len, uint64_t align, uint64_t pgoff) {
  if (align) {
    MMUSIM_CHECK(align == PMD_SIZE, "get_unmapped_area: alignment {:#x} (only PMD_SIZE)", align);
    // __thp_get_unmapped_area(filp, addr, len, off = pgoff << PAGE_SHIFT, flags, size = PMD_SIZE)
    const uint64_t size = align, off = pgoff << PAGE_SHIFT;
    const uint64_t off_end = off + len, off_align = ALIGN(off, size);
    if (!(off_end <= off_align || (off_end - off_align) < size)) {
      uint64_t len_pad = len + size;
      uint64_t ret = arch_get_unmapped_area_topdown(*this, mm, addr, len_pad);
      // The failure might be due to length padding. The caller will retry without the padding.
      if (!IS_ERR_VALUE(ret)) {
        // Do not try to align to THP boundary if allocation at the address hint succeeds.
        if (ret == addr) return addr;
        uint64_t off_sub = (off - ret) & (size - 1);
        if (/* MMF_TOPDOWN */ !off_sub) return ret + size;
        return ret + off_sub;
      }
    }
  }
  return arch_get_unmapped_area_topdown(*this, mm, addr, len);
}

// ------------------------------------------------------------------------------------------------
// mmap: ksys_mmap_pgoff() -> vm_mmap_pgoff() -> do_mmap() -> mmap_region() (mm/mmap.c, mm/util.c)

int64_t Kernel::sys_mmap(task_struct* t, uint64_t addr, uint64_t len, int prot, int flags, address_space* file,
                         uint64_t offset) {
  mm_struct* mm = t->mm;
  charge(Cost::syscall);

  // MAP_SHARED|MAP_ANONYMOUS needs shmem (shmem_zero_setup()), which is not ported: refused.
  // A file mapping takes the file (the fd's struct file) and a page-aligned offset (the x86 and
  // arm64 sys_mmap(): "if (off & ~PAGE_MASK) return -EINVAL").
  if (flags & MAP_ANONYMOUS) {
    if ((flags & (MAP_SHARED | MAP_PRIVATE)) != MAP_PRIVATE) return -EINVAL;
    file = nullptr;  // ksys_mmap_pgoff() ignores the fd of an anonymous mapping
    offset = 0;
  } else {
    if (!file) return -EBADF;
    if ((flags & (MAP_SHARED | MAP_PRIVATE)) != MAP_SHARED && (flags & (MAP_SHARED | MAP_PRIVATE)) != MAP_PRIVATE)
      return -EINVAL;
    if (offset & ~PAGE_MASK) return -EINVAL;
  }
  // do_mmap()
  if (!len) return -EINVAL;
  // Careful about overflows..
  len = PAGE_ALIGN(len);
  if (!len) return -ENOMEM;
  // offset overflow?
  if ((offset >> PAGE_SHIFT) + (len >> PAGE_SHIFT) < (offset >> PAGE_SHIFT)) return -EOVERFLOW;
  if (flags & MAP_FIXED) {
    if (!IS_ALIGNED(addr, PAGE_SIZE)) return -EINVAL;
    if (addr > arch_->task_size() - len || addr < kMmapMinAddr) return -ENOMEM;
  } else if (addr) {
    // round_hint_to_min()
    addr &= PAGE_MASK;
    if (addr < kMmapMinAddr) addr = kMmapMinAddr;
  }

  mmap_write_lock(mm);  // vm_mmap_pgoff(): mmap_write_lock_killable()

  vm_flags_t vm_flags = calc_vm_prot_bits(prot) | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC;
  // A file opened for reading and writing (every file here is): MAP_SHARED adds VM_SHARED |
  // VM_MAYSHARE, MAP_PRIVATE nothing (do_mmap()'s switch on flags & MAP_TYPE).
  if (file && (flags & MAP_SHARED)) vm_flags |= VM_SHARED | VM_MAYSHARE;

  // __get_unmapped_area()
  if (!(flags & MAP_FIXED)) {
    // A file's f_op->get_unmapped_area decides for it: ext4's and XFS's are
    // thp_get_unmapped_area(), whatever the folio sizes or the THP knobs (a mapping that spans a
    // 2 MiB block of the file gets an address congruent to its offset modulo 2 MiB). Otherwise
    // "Ensures that larger anonymous mappings are THP aligned" (IS_ENABLED(THP), no hint, length
    // a multiple of PMD_SIZE).
    const uint64_t align = (file || (!addr && IS_ALIGNED(len, PMD_SIZE))) ? PMD_SIZE : 0;
    addr = get_unmapped_area(mm, addr, len, align, file ? offset >> PAGE_SHIFT : 0);
    if (IS_ERR_VALUE(addr)) {
      mmap_write_unlock(mm);
      return int64_t(addr);
    }
    if (addr > arch_->task_size() - len) {
      mmap_write_unlock(mm);
      return -ENOMEM;
    }
  }

  // Anonymous MAP_PRIVATE: "Set pgoff according to addr for anon_vma."; a file: the offset.
  const uint64_t pgoff = file ? offset >> PAGE_SHIFT : addr >> PAGE_SHIFT;

  // mmap_region() -> __mmap_region()
  // Find the first overlapping VMA; prepare to unmap any existing mapping in the area (the kernel
  // gathers them first and completes the munmap once the new VMA is ready; unmapping first is the
  // same sequence of changes with one CPU in the kernel).
  if (vm_area_struct* old = find_vma(mm, addr); old && old->vm_start < addr + len) {
    int err = do_vmi_munmap(mm, addr, len, /*unlock=*/false);
    if (err) {
      mmap_write_unlock(mm);
      return err;
    }
  }
  // Private writable mapping: check memory availability (security_vm_enough_memory_mm: overcommit
  // always succeeds here).
  if (accountable_mapping(vm_flags)) vm_flags |= VM_ACCOUNT;
  // (vma_merge_new_range(): no merging in this port.)
  auto vma = std::make_unique<vm_area_struct>();
  vma->vm_start = addr;
  vma->vm_end = addr + len;
  vma->vm_pgoff = pgoff;
  vma->vm_flags = vm_flags;
  // vma_set_anonymous(), or the file's ->mmap() (generic_file_mmap(): file_accessed(), vm_ops =
  // generic_file_vm_ops); vma_set_page_prot() is vma_page_prot(); vma_link
  vma->vm_file = file;
  vm_area_struct* v = vma_insert(mm, std::move(vma));
  charge(Cost::vma_op);
  // "New (or expanded) vma always get soft dirty status. Otherwise user-space soft-dirty page
  // tracker won't be able to distinguish situation when vma area unmapped, then new mapped in-place
  // (which must be aimed as a completely new data area)."
  v->vm_flags |= VM_SOFTDIRTY;

  mmap_write_unlock(mm);
  trace_mmap(t, addr, len, vm_flags, !file ? "anon" : (vm_flags & VM_SHARED) ? "file-shared" : "file");
  check_invariants("mmap");
  return int64_t(addr);
}

// ------------------------------------------------------------------------------------------------
// split_vma() (mm/vma.c:463 -> __split_vma 370) with new_below = 0: `vma` keeps [vm_start, addr),
// a new VMA gets [addr, vm_end). The caller holds mmap_lock for writing.
int Kernel::split_vma(mm_struct* mm, vm_area_struct* vma, uint64_t addr) {
  MMUSIM_CHECK(vma->vm_start < addr && addr < vma->vm_end && IS_ALIGNED(addr, PAGE_SIZE),
               "split_vma of [{:#x},{:#x}) at {:#x}", vma->vm_start, vma->vm_end, addr);
  MMUSIM_CHECK(mm->mmap_lock.write_locked(), "split_vma without mmap_lock held for writing");

  std::unique_ptr<vm_area_struct> nv = vm_area_dup(vma);  // new
  nv->vm_start = addr;
  nv->vm_pgoff += (addr - vma->vm_start) >> PAGE_SHIFT;
  // anon_vma_clone(new, vma): the same anon_vma (the shared_ptr copy in vm_area_dup).

  vma_start_write(vma);

  // Get rid of huge pages and shared page tables straddling the split boundary.
  // vma_adjust_trans_huge(vma, vma->vm_start, addr, 0) -> split_huge_pmd_if_needed(vma, start) and
  // (vma, end) (mm/huge_memory.c).
  for (uint64_t a : {vma->vm_start, addr}) {
    if (!IS_ALIGNED(a, HPAGE_PMD_SIZE) && ALIGN_DOWN(a, HPAGE_PMD_SIZE) >= vma->vm_start &&
        ALIGN(a, HPAGE_PMD_SIZE) <= vma->vm_end) {
      // split_huge_pmd_address()
      pmd_t* pmd = mm_find_pmd(mm, a);
      if (pmd) __split_huge_pmd(vma, pmd, a);
    }
  }

  // vma->vm_end = addr, re-keyed in the tree (vma_complete stores the new vma)
  auto node = mm->mm_mt.extract(vma->vm_end);
  MMUSIM_CHECK(!node.empty() && node.mapped().get() == vma, "split_vma of a VMA not in the tree");
  vma->vm_end = addr;
  node.key() = addr;
  mm->mm_mt.insert(std::move(node));
  vm_area_struct* n = vma_insert(mm, std::move(nv));
  vma_start_write(n);
  charge(Cost::vma_op);
  return 0;
}

}  // namespace kmm
