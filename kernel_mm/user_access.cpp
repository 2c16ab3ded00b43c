// SPDX-License-Identifier: GPL-2.0-only
#include "kernel_mm/user_access.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/hwwalk.hpp"

namespace kmm {

namespace pg = mmusim::pg;

// The fault rules are the hardware's (base/hwwalk.hpp), the same functions the timed cores'
// translation path applies (models/walker/translation.hpp): no TLB here, so every access walks.
uint64_t UserAccess::syndrome(const pg::Walk& w, bool write) const {
  return pg::fault_syndrome(k_.isa(), w.result, w.level, write);
}

uint64_t UserAccess::probe(task_struct* t, uint64_t va, bool write) const {
  pg::Walk w = pg::walk(k_.isa(), k_.phys(), t->mm->pgd, va,
                        pg::WalkOptions{k_.arch().arch_has_hw_pte_young(hafdbs_)});
  if (pg::walk_faults(w)) return ~uint64_t(0);
  if (write && !pg::write_permitted(k_.isa(), w, hafdbs_)) return ~uint64_t(0);
  return w.pa(va);
}

uint64_t UserAccess::translate(task_struct* t, uint64_t va, bool write) {
  const pg::Isa isa = k_.isa();
  pg::WalkOptions opt{k_.arch().arch_has_hw_pte_young(hafdbs_)};
  // A fault that changes nothing the walk sees would repeat forever: the kernel must make
  // progress within a few attempts. One exception: a fault that found its PTE changed under it
  // (FaultKind::race: the !pte_same() exits) may leave it as it was, as the walk sees it: the
  // reclaim its own charge ran cleared the accessed bit (folio_referenced()), and this access's
  // walk sets it again. The access then simply faults again, as on the hardware. The same when
  // the task slept in the fault and the flusher ran meanwhile (FaultRecord::others_ran): its
  // folio_mkclean() may have write-protected the entry the fault had just made writable.
  uint64_t last_syndrome = ~uint64_t(0), last_leaf = ~uint64_t(0);
  for (int attempt = 0; attempt < 16; ++attempt) {
    pg::Walk w = pg::walk(isa, k_.phys(), t->mm->pgd, va, opt);
    if (!pg::walk_faults(w)) {
      if (!write) return w.pa(va);
      if (pg::hw_mark_dirty(isa, k_.phys(), w, hafdbs_)) return w.pa(va);
    }
    uint64_t syn = syndrome(w, write);
    uint64_t leaf = w.nsteps ? w.steps[w.nsteps - 1].entry : 0;
    if (syn == last_syndrome && leaf == last_leaf)
      mmusim::panic("livelock: the fault at {:#x} (syndrome {:#x}, entry {:#x}) repeats with nothing "
                    "changed by the kernel",
                    va, syn, leaf);
    last_syndrome = syn;
    last_leaf = leaf;
    ++faults_;
    if (hook_) {
      if (!hook_(t, va, syn)) return ~uint64_t(0);
    } else {
      FaultReturn r = k_.handle_user_fault(t, va, syn, 0);
      // A signal, or VM_FAULT_OOM (the memcg's OOM killer chose the task: it dies on its way
      // out): it does not come back to the access.
      if (r.sigsegv || r.sigbus || (r.fault & VM_FAULT_OOM)) return ~uint64_t(0);
    }
    // (the hook's fault too)
    if (k_.last_fault().kind == FaultKind::race || k_.last_fault().others_ran) last_leaf = ~uint64_t(0);
  }
  mmusim::panic("the access at {:#x} still faults after 16 attempts", va);
}

namespace {
template <typename Fn>
bool for_each_page(uint64_t va, size_t n, Fn&& fn) {
  while (n) {
    size_t k = std::min<size_t>(n, PAGE_SIZE - (va & (PAGE_SIZE - 1)));
    if (!fn(va, k)) return false;
    va += k;
    n -= k;
  }
  return true;
}
}  // namespace

bool UserAccess::store(task_struct* t, uint64_t va, const void* buf, size_t n) {
  auto* p = static_cast<const uint8_t*>(buf);
  return for_each_page(va, n, [&](uint64_t a, size_t k) {
    uint64_t pa = translate(t, a, true);
    if (pa == ~uint64_t(0)) return false;
    k_.phys().write(pa, p, k);
    p += k;
    return true;
  });
}

bool UserAccess::fill(task_struct* t, uint64_t va, uint8_t byte, size_t n) {
  return for_each_page(va, n, [&](uint64_t a, size_t k) {
    uint64_t pa = translate(t, a, true);
    if (pa == ~uint64_t(0)) return false;
    k_.phys().fill(pa, byte, k);
    return true;
  });
}

bool UserAccess::load(task_struct* t, uint64_t va, void* buf, size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  return for_each_page(va, n, [&](uint64_t a, size_t k) {
    uint64_t pa = translate(t, a, false);
    if (pa == ~uint64_t(0)) return false;
    k_.phys().read(pa, p, k);
    p += k;
    return true;
  });
}

int UserAccess::load8(task_struct* t, uint64_t va) {
  uint8_t v;
  return load(t, va, &v, 1) ? v : -1;
}

}  // namespace kmm
