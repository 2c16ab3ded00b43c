// SPDX-License-Identifier: GPL-2.0-only
#include "os/system.hpp"

#include "base/error.hpp"
#include "base/log.hpp"

// The resource check before a run (System::check_resources).
namespace mmusim {

// Resource limits, checked before any work: the simulated physical memory must hold what the
// workload maps (with its page tables and the copies the kernel makes), and the host must hold
// the simulated memory the run touches. Estimates, on the safe side; UserError (exit 2) naming the
// keys and the numbers.
void System::check_resources(const Config& cfg) {
  constexpr uint64_t kFrame = kmm::PAGE_SIZE, kSlack = 16ull << 20;  // zero page, LRU batches, stacks
  uint64_t mapped = 0;     // bytes of simulated memory the workload's data needs at most
  std::string what;        // which keys that comes from
  uint64_t reclaimable = 0;  // bytes mapped from clean page cache: reclaim frees them, not their tables
  if (wp_.name == wl::WorkloadName::trace) {
    // A recording's footprint is known only as it runs (its mappings reserve far more than it
    // touches): the kernel port stops with "out of simulated physical memory" when memory.size
    // is too small.
    mapped = 0;
    what = "workload.name = trace";
  } else if (wp_.name == wl::WorkloadName::random_ops) {
    mapped = uint64_t(wp_.processes) * wp_.max_mapped;
    what = fmt::format("workload.processes = {} x workload.max_mapped = {}", wp_.processes,
                       format_size(wp_.max_mapped));
  } else if (wp_.name == wl::WorkloadName::anon_cow_seq) {
    // Every child writes all of the area: each ends up with a copy of its own.
    mapped = uint64_t(wp_.processes + 1) * wp_.size;
    what = fmt::format("(workload.processes = {} + 1) x workload.size = {}", wp_.processes,
                       format_size(wp_.size));
  } else if (wp_.name == wl::WorkloadName::file_faults) {
    // A shared read-only file mapping (clean page cache, reclaimable) and the mappers' areas.
    reclaimable = wp_.size;
    mapped = uint64_t(wp_.mmap_threads) * (64 << 10);
    what = fmt::format("workload.size = {} of page cache (reclaimable) and its page tables, "
                       "workload.mmap_threads = {} x 64K",
                       format_size(wp_.size), wp_.mmap_threads);
  } else if (wp_.name == wl::WorkloadName::swap_readers) {
    // The readers' anonymous memory, the pressure thread's and the mappers' areas.
    mapped = wp_.size + wp_.pressure_size + uint64_t(wp_.mmap_threads) * (64 << 10);
    what = fmt::format("workload.size = {} + workload.pressure_size = {} + workload.mmap_threads = {} x 64K",
                       format_size(wp_.size), format_size(wp_.pressure_size), wp_.mmap_threads);
  } else if (wp_.backing != wl::Backing::anon && wp_.pattern == wl::Pattern::seq_read &&
             wp_.measure == wl::WorkloadParams::Measure::populate && !wp_.file_cached) {
    // A cold file mapping that is only read: its data is clean page cache, which reclaim drops
    // when memory runs out (kernel_mm/vmscan.cpp); only its page tables stay. (A file cached
    // before the run, workload.file_cached, must fit: the setup fills the cache whole.)
    reclaimable = wp_.size;
    what = fmt::format("workload.size = {} of page cache (reclaimable) and its page tables",
                       format_size(wp_.size));
  } else if (wp_.backing == wl::Backing::file_shared && wp_.folio == wl::FolioKind::k4K) {
    // A shared file mapping holds page cache only: what it writes is dirty until the flusher
    // writes it back (kernel_mm/page_writeback.cpp, woken by reclaim), then reclaimable.
    reclaimable = wp_.size;
    what = fmt::format("workload.size = {} of page cache (written back, then reclaimable) and its page tables",
                       format_size(wp_.size));
  } else {
    // 6.12's wp_can_reuse_anon_folio (kernel.large_folio_reuse = false) copies every page of a
    // once-shared large folio: the region twice.
    const bool copies = !kp_.large_folio_reuse && wp_.folio != wl::FolioKind::k4K;
    mapped = wp_.size * (copies ? 2 : 1);
    what = fmt::format("workload.size = {}{}", format_size(wp_.size),
                       copies ? " twice (kernel.large_folio_reuse = false copies it)" : "");
  }
  // Page tables: a PTE table (one page) per PMD_SIZE, for the parent and a fork child.
  const uint64_t tables_for = mapped + reclaimable;
  const uint64_t sim_need = mapped + 2 * (tables_for / kmm::PTRS_PER_PTE) + kSlack;
  const std::string& origin =
      cfg.setting(wp_.name == wl::WorkloadName::random_ops ? "workload.max_mapped"
                  : wp_.name == wl::WorkloadName::trace    ? "workload.trace"
                                                            : "workload.size")
          .origin;
  // The workload's memory cgroup must hold what it maps and cannot reclaim (no swap): a built-in
  // pattern touches all of its region, so a smaller memcg.max is an OOM kill certain to come
  // (a simulated outcome: warned about, then run).
  // (random-ops' and a trace's footprints are bounds, not needs: the run finds out.)
  // With swap (swap.size), order-0 anonymous pages can go there (large anonymous folios are not
  // split for swap-out: kernel_mm/vmscan.cpp).
  const std::string& memcg_origin = cfg.setting("memcg.max").origin;
  // (memcg.swap_max bounds the cgroup's share of swap.size.)
  const uint64_t swappable = (kp_.swap_size && wp_.backing == wl::Backing::anon && wp_.folio == wl::FolioKind::k4K)
                                 ? std::min(kp_.swap_size, kp_.memcg_swap_max)
                                 : 0;
  if (kp_.memcg_max && mapped > kp_.memcg_max + swappable && wp_.name != wl::WorkloadName::random_ops &&
      wp_.name != wl::WorkloadName::trace)
    log::get("system")->warn(
        "{}: {} needs about {} that reclaim cannot free ({}), more than memcg.max = {} ({}): the "
        "cgroup will run out of memory and its OOM killer kill the workload (memcg.oom_kill; mmusim "
        "run exits with status 3); raise memcg.max or map less",
          origin, what, format_size((mapped + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)),
          kp_.swap_size && kp_.memcg_swap_max < kp_.swap_size
              ? fmt::format("anonymous beyond memcg.swap_max = {} ({})", format_size(kp_.memcg_swap_max),
                            cfg.setting("memcg.swap_max").origin)
          : swappable ? fmt::format("anonymous beyond swap.size = {}", format_size(kp_.swap_size))
                      : std::string("anonymous: there is no swap"),
          format_size(kp_.memcg_max), memcg_origin);
  // memory.high is not a wall: over it the tasks reclaim and, where nothing more can be freed,
  // sleep up to 2 s per return to user mode. A pattern that must hold more than it crawls.
  if (kp_.memcg_high && mapped > kp_.memcg_high + swappable && wp_.name != wl::WorkloadName::random_ops &&
      wp_.name != wl::WorkloadName::trace && (!kp_.memcg_max || kp_.memcg_high < kp_.memcg_max))
    log::get("system")->warn(
        "{}: {} needs about {} that reclaim cannot free, more than memcg.high = {} ({}): past it "
        "its tasks will be throttled on their way back to user mode, every 64 pages charged (up to "
        "2 s of simulated sleep each, memcg.high_throttles)",
        origin, what, format_size((mapped + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)),
        format_size(kp_.memcg_high), cfg.setting("memcg.high").origin);
  if (kp_.memcg_high && kp_.memcg_max && kp_.memcg_high >= kp_.memcg_max)
    log::get("system")->warn("{}: memcg.high = {} is at or above memcg.max = {}: memory.max is met "
                             "first, memory.high never acts",
                             cfg.setting("memcg.high").origin, format_size(kp_.memcg_high),
                             format_size(kp_.memcg_max));
  if (sim_need > kp_.phys_mem)
    fatal("{}: {} needs about {} of simulated physical memory (with page tables and the kernel's "
          "own pages), more than memory.size = {}; raise memory.size or map less",
          origin, what, format_size((sim_need + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)), format_size(kp_.phys_mem));

  const uint64_t frames = kp_.phys_mem / kFrame;
  const uint64_t per_frame = sizeof(kmm::page) + sizeof(void*);  // memmap entry + frame pointer
  const uint64_t frame_table = frames * sizeof(void*);           // allocated up front
  const uint64_t touched = sim_need / kFrame * (kFrame + per_frame);
  const uint64_t reference = wp_.name == wl::WorkloadName::random_ops ? mapped : 0;
  const uint64_t host = frame_table + touched + reference;
  if (host > pp_.host_memory_budget) {
    auto mib = [](uint64_t b) { return format_size((b + (1 << 20) - 1) & ~uint64_t((1 << 20) - 1)); };
    fatal("{}: the run needs about {} of host memory, more than sim.host_memory_budget = {}: "
          "{} ({} of simulated memory touched, {} bytes per 4K frame), the frame table of "
          "memory.size = {} ({}){}; lower them, or raise sim.host_memory_budget if the host has "
          "the memory",
          origin, mib(host), format_size(pp_.host_memory_budget),
          what, mib(sim_need), kFrame + per_frame, format_size(kp_.phys_mem), mib(frame_table),
          reference ? fmt::format(", the reference model ({})", mib(reference)) : "");
  }
}

}  // namespace mmusim
