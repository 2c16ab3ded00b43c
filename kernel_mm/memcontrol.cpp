// SPDX-License-Identifier: GPL-2.0-only
// Memory cgroups: mm/memcontrol.c of Linux 6.12 (cgroup v2), the charge of a new folio against
// memory.max and the reclaim a charge over the limit does (try_charge_memcg()); the reclaim itself
// is vmscan.cpp's (try_to_free_mem_cgroup_pages()). docs/research-filemap-swap-io.md §5 has the
// map with line numbers.
//
// What is here: one level under the root (the workload's cgroup, memcg.max); charges of anonymous
// folios (alloc_anon_folio(), folio_prealloc(), the THP fault) and of page-cache folios
// (filemap_add_folio()); the uncharge when a folio is freed; per memcg and node LRU lists.
// memory.high: a batch charge that leaves the cgroup over it makes the task reclaim on its way
// back to user mode, and sleep if reclaim cannot keep up (mem_cgroup_handle_over_high()).
// memory.swap.max: swap slots charged to the swapped folio's memcg, uncharged when freed.
// memory.swap.high: the swap overage adds its penalty to memory.high's on the return to user mode.
// Not here: the per-CPU charge stock's precharge (consume_stock(): every charge goes to the
// counter; the stock's fill only decides which charges are batch charges: stock_batch_charge()),
// memory.min/low protection, kernel memory (page tables and slab
// are __GFP_ACCOUNT in the kernel, not charged here), cgroup v1's memsw, the OOM killer (a memcg
// OOM stops the run), moving tasks between cgroups, nested cgroups.
#include "base/error.hpp"
#include "base/params.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

constexpr int MAX_RECLAIM_RETRIES = 16;  // mm/memcontrol.c: rounds of reclaim before giving up

mem_cgroup* Kernel::mem_cgroup_create(const std::string& name, uint64_t max_bytes, uint64_t high_bytes,
                                      uint64_t swap_max_bytes, uint64_t swap_high_bytes) {
  auto m = std::make_unique<mem_cgroup>();
  m->id = uint16_t(memcgs_.size());
  m->name = name;
  m->max = max_bytes ? max_bytes >> PAGE_SHIFT : UINT64_MAX;
  m->high = high_bytes ? high_bytes >> PAGE_SHIFT : UINT64_MAX;
  m->swap_max = swap_max_bytes >= KernelParams::kMemcgSwapUnlimited ? UINT64_MAX : swap_max_bytes >> PAGE_SHIFT;
  m->swap_high = swap_high_bytes >= KernelParams::kMemcgSwapUnlimited ? UINT64_MAX : swap_high_bytes >> PAGE_SHIFT;
  m->nodeinfo.resize(std::max(1u, params_.nr_nodes));
  for (size_t n = 0; n < m->nodeinfo.size(); ++n) {
    m->nodeinfo[n].nid = int(n);
    m->nodeinfo[n].memcg_id = m->id;
  }
  memcgs_.push_back(std::move(m));
  return memcgs_.back().get();
}

// try_charge_memcg() (mm/memcontrol.c:2169) without the per-CPU stock: page_counter_try_charge();
// over the limit, a MEMCG_MAX event and try_to_free_mem_cgroup_pages(); retry while the margin
// is short, up to MAX_RECLAIM_RETRIES (16) rounds (a round that made progress for a charge of
// at most 8 pages does not count); __GFP_NORETRY gives up after the first round, a gfp that may
// not reclaim before it; then mem_cgroup_oom() (for at most 8 pages; a larger charge fails): the
// OOM killer kills a process of the memcg and the rounds start again; a dying task's charge fails.
int Kernel::try_charge_memcg(mem_cgroup* memcg, uint64_t nr_pages, bool may_retry, bool may_reclaim) {
  constexpr uint64_t COSTLY_PAGES = 1u << 3;  // 1 << PAGE_ALLOC_COSTLY_ORDER (include/linux/mmzone.h)
  int nr_retries = MAX_RECLAIM_RETRIES;
  bool passed_oom = false;
  for (;;) {
    if (memcg->usage + nr_pages <= memcg->max) {  // page_counter_try_charge()
      memcg->usage += nr_pages;
      memcg->peak = std::max(memcg->peak, memcg->usage);
      // done_restock: a batch charge over memory.high schedules reclaim on the return to user
      // mode (set_notify_resume()); a charge the CPU's stock covered checks nothing. (One level
      // under the root: the loop over the parents is this memcg.)
      const uint64_t batch = stock_batch_charge(nr_pages);
      // The allocating tasks will need to reclaim or be throttled to prevent further growth of
      // the memory or swap footprints (mem_high || swap_high).
      if (batch && current_ && (memcg->usage > memcg->high || memcg->swap_usage > memcg->swap_high)) {
        current_->memcg_nr_pages_over_high += unsigned(batch);
        // Reclaim is set up above to be called from the userland return path. But also attempt
        // synchronous reclaim to avoid excessive overrun while the task is still inside the kernel.
        if (current_->memcg_nr_pages_over_high > MEMCG_CHARGE_BATCH && may_reclaim) mem_cgroup_handle_over_high();
      }
      return 0;
    }
    if (!may_reclaim) break;  // if (!gfpflags_allow_blocking(gfp_mask)) goto nomem;
    // OOM victim still needs to charge memory to exit: once the reaper has been, fail at once.
    if (current_ && current_->oom_victim && current_->mm && current_->mm->oom_skip) break;
    ctr_.memcg_max_events.inc();  // memcg_memory_event(mem_over_limit, MEMCG_MAX)
    const uint64_t nr_reclaimed = try_to_free_mem_cgroup_pages(memcg, nr_pages);
    if (memcg->usage + nr_pages <= memcg->max) continue;  // mem_cgroup_margin() >= nr_pages: retry
    if (!may_retry) break;  // if (gfp_mask & __GFP_NORETRY) goto nomem;
    // Even though the limit is exceeded at this point, reclaim may have been able to free some
    // pages. Retry the charge before killing the task.
    if (nr_reclaimed && nr_pages <= COSTLY_PAGES) continue;
    if (nr_retries--) continue;
    // Avoid endless loop for tasks bypassed by the oom killer
    if (passed_oom && task_is_dying()) break;
    // keep retrying as long as the memcg oom killer is able to make a forward progress
    if (mem_cgroup_oom(memcg, nr_pages)) {
      passed_oom = true;
      nr_retries = MAX_RECLAIM_RETRIES;
      continue;
    }
    break;  // mem_cgroup_oom(): OOM_SKIPPED above the costly order
  }
  ctr_.memcg_charge_failed.inc();
  return -ENOMEM;
}

// consume_stock() / refill_stock() (mm/memcontrol.c:1736, 1811) for one memcg, by their fill only:
// a charge the CPU's stock holds enough pages for takes them (0: not a batch charge); otherwise
// the counter is charged a batch of max(MEMCG_CHARGE_BATCH, nr_pages), the rest goes to the stock,
// which is drained when it would hold more than a batch. Returns the batch (0: from the stock).
uint64_t Kernel::stock_batch_charge(uint64_t nr_pages) {
  uint32_t& stock = memcg_stock_[size_t(cpu_) % memcg_stock_.size()];
  if (nr_pages <= MEMCG_CHARGE_BATCH && stock >= nr_pages) {
    stock -= uint32_t(nr_pages);
    return 0;
  }
  const uint64_t batch = std::max<uint64_t>(MEMCG_CHARGE_BATCH, nr_pages);
  const uint64_t kept = stock + batch - nr_pages;
  stock = kept > MEMCG_CHARGE_BATCH ? 0 : uint32_t(kept);  // refill_stock(): drain_stock() past a batch
  return batch;
}

// reclaim_high() (mm/memcontrol.c:1899), one level under the root.
uint64_t Kernel::reclaim_high(mem_cgroup* memcg, uint64_t nr_pages) {
  if (memcg->usage <= memcg->high) return 0;
  ctr_.memcg_high_events.inc();  // memcg_memory_event(memcg, MEMCG_HIGH)
  return try_to_free_mem_cgroup_pages(memcg, nr_pages);  // MEMCG_RECLAIM_MAY_SWAP
}

void Kernel::mem_cgroup_handle_over_high() {
  task_struct* t = current_;
  if (!t || !t->memcg_nr_pages_over_high) return;
  const uint64_t nr_pages = t->memcg_nr_pages_over_high;
  mem_cgroup* memcg = t->mm ? t->mm->memcg : nullptr;  // get_mem_cgroup_from_mm()
  t->memcg_nr_pages_over_high = 0;
  if (!memcg) return;
  int nr_retries = MAX_RECLAIM_RETRIES;
  bool in_retry = false;
  uint64_t penalty_jiffies = 0;
  for (;;) {  // retry_reclaim: (task_is_dying(): no signals here)
    // The allocating task reclaims at least its batch; retries only what prevents breaching.
    const uint64_t nr_reclaimed = reclaim_high(memcg, in_retry ? SWAP_CLUSTER_MAX : nr_pages);
    // memory.high is breached and reclaim is unable to keep up: throttle the allocator.
    penalty_jiffies = calculate_high_delay(nr_pages, calculate_overage(memcg->usage, memcg->high), params_.hz);
    // swap_find_max_overage(): memory.swap.high's overage, a MEMCG_SWAP_HIGH event when there is one.
    const uint64_t swap_overage = calculate_overage(memcg->swap_usage, memcg->swap_high);
    if (swap_overage) ctr_.memcg_swap_high_events.inc();
    penalty_jiffies += calculate_high_delay(nr_pages, swap_overage, params_.hz);
    // Clamp the delay per return to user mode (MEMCG_MAX_HIGH_DELAY_JIFFIES, 2 s).
    penalty_jiffies = std::min<uint64_t>(penalty_jiffies, 2ull * params_.hz);
    // Not worth a sleep: a small overage that reclaim may yet catch up with.
    if (penalty_jiffies <= params_.hz / 100) return;
    // Reclaim is making progress but the cgroup is still over memory.high: more reclaim first.
    if (nr_reclaimed || nr_retries--) {
      in_retry = true;
      continue;
    }
    break;
  }
  // schedule_timeout_killable(penalty_jiffies): the task sleeps that many ticks.
  const uint64_t sleep_ns = penalty_jiffies * (1'000'000'000ull / params_.hz);
  cost_.throttle_cycles += double(sleep_ns) * ghz_;
  ctr_.memcg_high_throttles.inc();
  ctr_.memcg_high_throttle_ns.inc(sleep_ns);
  trace_event("memcg_high_throttle", {mmusim::TraceField::dec("pages", nr_pages),
                                      mmusim::TraceField::dec("usage", memcg->usage),
                                      mmusim::TraceField::dec("jiffies", penalty_jiffies)});
}

void Kernel::resume_user_mode_work() { mem_cgroup_handle_over_high(); }

// __mem_cgroup_try_charge_swap() (mm/memcontrol.c:5060), cgroup v2 (no memsw): the slot is charged
// to the folio's memcg (the root's is not counted); over memory.swap.max, MEMCG_SWAP_MAX and
// MEMCG_SWAP_FAIL events and -ENOMEM. swap_cgroup_record(): which memcg the slot belongs to.
int Kernel::mem_cgroup_try_charge_swap(const folio* f, uint64_t offset) {
  mem_cgroup* memcg = memcgs_[f->memcg_id].get();
  if (f->memcg_id != 0) {
    if (memcg->swap_usage + 1 > memcg->swap_max) {  // page_counter_try_charge(&memcg->swap)
      ctr_.memcg_swap_max_events.inc();
      ctr_.memcg_swap_fail.inc();
      return -ENOMEM;
    }
    ++memcg->swap_usage;
  }
  si_->swap_cgroup[offset] = f->memcg_id;
  return 0;
}

// __mem_cgroup_uncharge_swap() (mm/memcontrol.c:5106): the freed slot's charge dropped.
void Kernel::mem_cgroup_uncharge_swap(uint64_t offset) {
  const uint16_t id = si_->swap_cgroup[offset];
  si_->swap_cgroup[offset] = 0;
  if (id == 0) return;
  mem_cgroup* memcg = memcgs_[id].get();
  MMUSIM_CHECK(memcg->swap_usage > 0, "memcg {}: a swap slot uncharged with none charged", memcg->name);
  --memcg->swap_usage;
}

// mem_cgroup_get_nr_swap_pages() (mm/memcontrol.c:5127), one level under the root.
uint64_t Kernel::mem_cgroup_get_nr_swap_pages(const mem_cgroup* memcg) const {
  uint64_t nr_swap_pages = get_nr_swap_pages();
  if (memcg && memcg->id != 0)
    nr_swap_pages = std::min(nr_swap_pages, memcg->swap_max > memcg->swap_usage ? memcg->swap_max - memcg->swap_usage : 0);
  return nr_swap_pages;
}

// mem_cgroup_swap_full() (mm/memcontrol.c:5140): vm_swap_full(), or the memcg's swap usage at half
// its memory.swap.high or memory.swap.max.
bool Kernel::mem_cgroup_swap_full(const folio* f) const {
  if (vm_swap_full()) return true;
  if (f->memcg_id == 0) return false;
  const mem_cgroup* memcg = memcgs_[f->memcg_id].get();
  return (memcg->swap_high != UINT64_MAX && memcg->swap_usage * 2 >= memcg->swap_high) ||
         (memcg->swap_max != UINT64_MAX && memcg->swap_usage * 2 >= memcg->swap_max);
}

int Kernel::mem_cgroup_charge(folio* f, mm_struct* mm, bool may_retry, bool may_reclaim) {
  MMUSIM_CHECK(f->memcg_id == 0, "mem_cgroup_charge: pfn {:#x} is charged already", page_to_pfn(f));
  if (!mm && current_) mm = current_->mm;
  mem_cgroup* memcg = mm ? mm->memcg : nullptr;  // get_mem_cgroup_from_mm()
  if (!memcg) return 0;  // the root: mem_cgroup_is_root() does not count
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  if (const int ret = try_charge_memcg(memcg, nr, may_retry, may_reclaim)) return ret;
  f->memcg_id = memcg->id;  // commit_charge()
  return 0;
}

// mem_cgroup_uncharge() (__mem_cgroup_uncharge() -> uncharge_folio(), uncharge_batch()).
void Kernel::mem_cgroup_uncharge(folio* f) {
  if (!f->memcg_id) return;
  mem_cgroup* memcg = memcgs_[f->memcg_id].get();
  const uint64_t nr = uint64_t(folio_nr_pages(f));
  MMUSIM_CHECK(memcg->usage >= nr, "memcg {}: uncharging {} pages of {}", memcg->name, nr, memcg->usage);
  memcg->usage -= nr;
  f->memcg_id = 0;
}

}  // namespace kmm
