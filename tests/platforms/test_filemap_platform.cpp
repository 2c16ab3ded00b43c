// SPDX-License-Identifier: GPL-2.0-only
// File-backed memory on the platforms (kernel_mm/filemap.cpp, workload.backing): what a pass over
// a mapped file does, counted exactly, on the functional platform and the i7-12700kf.
#include <catch2/catch.hpp>

#include <string>

#include "run_mmusim.hpp"

using mmusim_test::Result;
using mmusim_test::slurp;
using mmusim_test::TempDir;
static constexpr auto mmusim = mmusim_test::run_mmusim;
static constexpr auto stat = mmusim_test::json_number;

// A pass over a file mapping (workload.backing): the page cache's read-around and fault-around,
// the first attempt's VM_FAULT_RETRY after the read (6.12: mmap_lock on the retry; the patch:
// the per-VMA lock again), private COW and shared writes. Exact counts, the same on the
// functional platform and the i7-12700kf.
TEST_CASE("file-backed region: fault counts of a read pass and of write passes", "[filemap]") {
  TempDir t;
  const std::string cfg = t.file("file.cfg",
                                 "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file\n"
                                 "folio = 4K\npattern = seq-read\nsize = 16M\n[output]\nhost_stats = false\n");
  for (const char* plat : {"functional", "i7-12700kf"}) {
    INFO(plat);
    const std::string base = "run " + cfg + " --set platform.name=" + plat + " --quiet --stats " + t.path("s.json");
    // Cold: the first fault reads around (32 pages, the last 8 the async part) and retries; then
    // every window's marked page starts the read of the next 32 (asynchronous readahead: a
    // minor fault that drops the lock and retries), and a fault between two marks maps the
    // 16 pages fault-around can. 4096 pages: 128 reads, 257 faults, one of them major.
    REQUIRE(mmusim(base).status == 0);
    std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "faults.region") == 257);
    CHECK(stat(js, "kernel.pgmajfault") == 1);
    CHECK(stat(js, "kernel.filemap_read_pages") == 4096);
    CHECK(stat(js, "kernel.filemap_fault_retry") == 129);
    CHECK(stat(js, "kernel.vma_lock.retry") == 129);
    CHECK(stat(js, "kernel.mmap_lock_fallback") == 129);
    CHECK(stat(js, "kcost.io_request") == 128);
    // The patch retries under the per-VMA lock instead of taking mmap_lock.
    REQUIRE(mmusim(base + " --set kernel.fault_retry=retry-once").status == 0);
    js = slurp(t.path("s.json"));
    CHECK(stat(js, "kernel.vma_lock.retry") == 129);
    CHECK(stat(js, "kernel.mmap_lock_fallback") == 0);
    // Cached: minor faults only, 16 pages each.
    REQUIRE(mmusim(base + " --set workload.file_cached=true").status == 0);
    js = slurp(t.path("s.json"));
    CHECK(stat(js, "faults.region") == 256);
    CHECK(stat(js, "kernel.pgmajfault") == 0);
    CHECK(stat(js, "kernel.filemap_read_pages") == 0);
    // Writes: no fault-around on write faults: one fault per page; private ones copy.
    REQUIRE(mmusim(base + " --set workload.file_cached=true --set workload.pattern=seq-byte").status == 0);
    js = slurp(t.path("s.json"));
    CHECK(stat(js, "faults.region") == 4096);
    CHECK(stat(js, "kernel.do_cow_fault") == 4096);
    CHECK(stat(js, "kernel.pages_copied") == 4096);
    REQUIRE(mmusim(base + " --set workload.file_cached=true --set workload.pattern=seq-byte "
                          "--set workload.backing=file-shared").status == 0);
    js = slurp(t.path("s.json"));
    CHECK(stat(js, "faults.region") == 4096);
    CHECK(stat(js, "kernel.do_shared_fault") == 4096);
    CHECK(stat(js, "kernel.pages_copied") == 0);
  }
  // Impossible combinations are refused with the key and what is allowed.
  Result r = mmusim("run " + cfg + " --set workload.folio=64K");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.backing = file needs workload.folio = 4K") != std::string::npos);
  r = mmusim("run " + cfg + " --set workload.backing=anon --set workload.file_cached=true");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.file_cached") != std::string::npos);
  r = mmusim("run " + cfg + " --set workload.name=random-ops");
  CHECK(r.status == 2);
  r = mmusim("run " + cfg + " --set workload.files=2");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.files = 2: only random-ops") != std::string::npos);
}

// A cold read pass over a file of `size` (one byte per page), with `extra` config sections.
static std::string cold_read_cfg(const std::string& size, const std::string& extra) {
  return "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file\nfolio = 4K\n"
         "pattern = seq-read\nsize = " + size + "\n" + extra + "[output]\nhost_stats = false\n";
}

// A file twice the size of memory read once, cold: direct reclaim drops the page cache behind the
// reader (its PTEs unmapped) and the read completes. A writable private pass over the same file
// needs the memory for its copies and is refused.
TEST_CASE("file-backed region: a cold read of a file larger than memory reclaims the page cache behind it", "[filemap][reclaim]") {
  TempDir t;
  const std::string cfg = t.file("file.cfg", cold_read_cfg("128M", "[memory]\nsize = 64M\n"));
  for (const char* plat : {"functional", "i7-12700kf"}) {
    INFO(plat);
    const std::string base = "run " + cfg + " --set platform.name=" + plat + " --quiet --stats " + t.path("s.json");
    REQUIRE(mmusim(base).status == 0);
    const std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "kernel.allocstall") > 0);
    CHECK(stat(js, "kernel.pgsteal_direct") >= 16384);  // at least the first 64 MiB went
    CHECK(stat(js, "kernel.pgscan_direct") >= stat(js, "kernel.pgsteal_direct"));
    CHECK(stat(js, "kernel.reclaim_unmapped_ptes") > 0);
    CHECK(stat(js, "kernel.filemap_read_pages") >= 32768);
  }
  Result r = mmusim("run " + cfg + " --set workload.pattern=seq-byte");
  CHECK(r.status == 2);
  CHECK(r.out.find("more than memory.size = 64M") != std::string::npos);
}

// The same read in a memory cgroup (memcg.max): the cgroup's charges reclaim its own page cache,
// memory itself never runs out; byte-identical statistics from run to run. Anonymous memory
// beyond the limit is the cgroup's OOM: warned about naming memcg.max, then killed (status 3).
TEST_CASE("file-backed region: a cold read in a memory cgroup reclaims within memcg.max", "[filemap][reclaim][memcg]") {
  TempDir t;
  const std::string cfg = t.file("file.cfg", cold_read_cfg("64M", "[memcg]\nmax = 16M\n"));
  const std::string base = "run " + cfg + " --set platform.name=i7-12700kf --quiet --stats ";
  REQUIRE(mmusim(base + t.path("a.json")).status == 0);
  REQUIRE(mmusim(base + t.path("b.json")).status == 0);
  const std::string js = slurp(t.path("a.json"));
  CHECK(js == slurp(t.path("b.json")));
  CHECK(stat(js, "memcg.max_events") > 0);
  CHECK(stat(js, "memcg.pgsteal") >= (64 - 16) * 256);
  CHECK(stat(js, "kernel.allocstall") == 0);
  CHECK(stat(js, "kernel.filemap_read_pages") >= 16384);
  // An anonymous region (or private copies of the file) larger than the cgroup is warned about
  // before the run, which then ends in the cgroup's OOM kill: status 3, statistics written.
  for (const char* what : {" --set workload.backing=anon --set workload.pattern=seq-byte",
                           " --set workload.pattern=seq-byte"}) {
    Result r = mmusim("run " + cfg + what + " --set platform.name=functional --quiet --stats " + t.path("oom.json"));
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(stat(slurp(t.path("oom.json")), "memcg.oom_kill") == 1);
    CHECK(r.out.find("Memory cgroup out of memory: Killed process") != std::string::npos);
    r = mmusim("run " + cfg + what + " --set platform.name=functional --stats " + t.path("oom.json"));
    CHECK(r.out.find("workload.size = 64M needs about 64M that reclaim cannot free") != std::string::npos);
    CHECK(r.out.find("more than memcg.max = 16M") != std::string::npos);
    CHECK(r.out.find("its OOM killer kill the workload") != std::string::npos);
  }
}

// A shared file mapping written whole under a memory cgroup half its size: reclaim finds dirty
// page cache, the flusher writes it (kernel_mm/page_writeback.cpp), and the written folios are
// reclaimed once their writes end. Before writeback existed this was an OOM kill.
TEST_CASE("file-backed region: shared writes under memcg.max are written back and reclaimed, not OOM-killed", "[filemap][writeback]") {
  TempDir t;
  const std::string cfg = t.file("shared.cfg",
                                 "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file-shared\n"
                                 "folio = 4K\npattern = seq-byte\nsize = 64M\n[memcg]\nmax = 32M\n"
                                 "[output]\nhost_stats = false\n");
  for (const char* plat : {"functional", "i7-12700kf"}) {
    INFO(plat);
    const Result r = mmusim("run " + cfg + " --set platform.name=" + plat + " --quiet --stats " + t.path("s.json"));
    REQUIRE(r.status == 0);
    const std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "memcg.oom_kill") == 0);
    CHECK(stat(js, "kernel.nr_dirtied") >= 16384);
    CHECK(stat(js, "kernel.nr_written") > 8192);
    CHECK(stat(js, "kernel.file_write_requests") > 0);
    CHECK(stat(js, "kernel.folio_mkclean_ptes") > 8192);
    CHECK(stat(js, "memcg.pgsteal") > 8192);
    CHECK(stat(js, "kernel.flusher_background") + stat(js, "kernel.flusher_vmscan") > 0);
  }
  // Nothing to warn about before the run: the page cache is reclaimable once written back.
  const Result r = mmusim("run " + cfg + " --set platform.name=functional --stats " + t.path("s.json"));
  CHECK(r.status == 0);
  CHECK(r.out.find("reclaim cannot free") == std::string::npos);
}

// balance_dirty_pages(): a task that dirties a shared mapping faster than the disk writes sleeps
// in its faults so that it dirties at about the disk's rate. 64 MiB at 0.1 GB/s is 0.67 s; the
// dirtier runs at several GB/s, so nearly all of that is spent in the pauses.
TEST_CASE("file-backed region: a dirtier faster than the disk is paused to the disk's write rate", "[filemap][writeback]") {
  TempDir t;
  const std::string cfg = t.file("shared.cfg",
                                 "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file-shared\n"
                                 "folio = 4K\npattern = seq-byte\nsize = 64M\n[memcg]\nmax = 32M\n"
                                 "[disk]\nwrite_bandwidth = 0.1\n[output]\nhost_stats = false\n");
  const double disk_ns = 64.0 * (1 << 20) / 0.1;  // bytes / (0.1 bytes per ns)
  for (const char* plat : {"functional", "i7-12700kf"}) {
    INFO(plat);
    const Result r = mmusim("run " + cfg + " --set platform.name=" + plat + " --quiet --stats " + t.path("s.json") +
                            " --trace " + t.path("t.txt") + " --trace-events balance_dirty_pages,bdi_dirty_ratelimit");
    REQUIRE(r.status == 0);
    const std::string js = slurp(t.path("s.json"));
    const double region_ns = double(stat(js, "region.time_ns"));
    INFO("region " << region_ns << " ns, disk alone " << disk_ns << " ns");
    CHECK(stat(js, "memcg.oom_kill") == 0);
    CHECK(stat(js, "kernel.dirty_throttle_pauses") > 10);
    // The data goes out at the disk's rate: what is written by the end takes that long, and the
    // run is not much longer (the last dirty pages are left for the flusher).
    CHECK(region_ns > 0.8 * disk_ns);
    CHECK(region_ns < 1.3 * disk_ns);
    CHECK(double(stat(js, "kernel.dirty_throttle_ns")) > 0.7 * region_ns);
    const std::string tr = slurp(t.path("t.txt"));
    CHECK(tr.find("balance_dirty_pages: limit=") != std::string::npos);
    // The 200 ms estimate of the write bandwidth ran (the run is longer than BANDWIDTH_INTERVAL).
    CHECK(tr.find("bdi_dirty_ratelimit: write_bw=") != std::string::npos);
  }
}

// workload.msync (usemem -S / -A): msync(MS_SYNC) of a shared file mapping after the pass writes
// its dirty pages to the disk and waits for them inside the measured region; MS_ASYNC does
// nothing; only fork-reuse has it.
TEST_CASE("file-backed region: msync(MS_SYNC) after the pass writes every dirty page and waits for the disk", "[filemap][writeback][msync]") {
  TempDir t;
  const std::string cfg = t.file("ms.cfg",
                                 "[platform]\nname = i7-12700kf\n"
                                 "[workload]\nname = fork-reuse\nbacking = file-shared\nfile_cached = true\n"
                                 "folio = 4K\npattern = seq-byte\nsize = 8M\n[output]\nhost_stats = false\n");
  auto run = [&](const std::string& msync) {
    Result r = mmusim("run " + cfg + " --set workload.msync=" + msync + " --quiet --stats " + t.path(msync + ".json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    return slurp(t.path(msync + ".json"));
  };
  const std::string none = run("none"), sync = run("sync"), async = run("async");
  CHECK(stat(none, "kernel.fsyncs") == 0);
  CHECK(stat(none, "kernel.file_write_requests") == 0);
  // 2,048 dirty pages: 8 requests of 256 pages (a bio's BIO_MAX_VECS), every PTE cleaned and
  // write-protected, the task asleep until the last write ends.
  CHECK(stat(sync, "kernel.fsyncs") == 1);
  CHECK(stat(sync, "kernel.file_write_requests") == 8);
  CHECK(stat(sync, "kernel.folio_mkclean_ptes") == 2048);
  CHECK(stat(sync, "kernel.nr_written") == 2048);
  CHECK(stat(sync, "sched.io_sleeps") == 1);
  CHECK(stat(sync, "kernel.io_wait_ns") > 0);
  // The region now includes the writes: at least the disk's time for 8 MiB beyond the pass.
  CHECK(stat(sync, "region.time_ns") - stat(none, "region.time_ns") > 0.9 * stat(sync, "kernel.io_wait_ns"));
  CHECK(stat(sync, "region.time_ns") > 10 * stat(none, "region.time_ns"));
  // MS_ASYNC: one system call, nothing written.
  CHECK(stat(async, "kernel.fsyncs") == 0);
  CHECK(stat(async, "kernel.file_write_requests") == 0);
  CHECK(stat(async, "region.time_ns") > stat(none, "region.time_ns"));
  CHECK(stat(async, "region.time_ns") < stat(none, "region.time_ns") + 1000);  // a system call's price

  Result r = mmusim("run " + cfg + " --set workload.msync=sync --set workload.name=fork-time");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.msync = sync: only workload.name = fork-reuse") != std::string::npos);
  r = mmusim("run " + cfg + " --set workload.msync=always");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.msync") != std::string::npos);
}

// workload.file_advice = hugepage on an XFS-like file (disk.fs = xfs): MADV_HUGEPAGE readahead
// and PMD-mapped page cache (kernel_mm/filemap.cpp do_set_pmd()). A cold read of 16 MiB, one byte
// per page, derived from 6.12: the miss at 0 reads [0, 1024) as two order-9 folios (the second
// marked), RETRY | MAJOR, and the retry maps a PMD; each marked folio (512, 1024, 2048, 3072)
// starts the next 4 MiB window (the last one past EOF: nothing) and RETRYs, its retry mapping a
// PMD; 1536 and 2560 are minor faults that fault-around maps with a PMD; 3584, whose folio ends
// at EOF, is mapped by finish_fault(). 8 faults, 1 major, 5 retries, 4 reads of 4 MiB, 8 PMDs.
// On ext4 the same advice reads 1024 order-0 pages per window and maps PTEs.
TEST_CASE("file-backed region: MADV_HUGEPAGE on an XFS-like file maps the page cache with PMDs", "[filemap][thp]") {
  TempDir t;
  const std::string cfg = t.file("file.cfg",
                                 "[workload]\nname = fork-reuse\nmeasure = populate\nbacking = file\n"
                                 "folio = 4K\npattern = seq-read\nsize = 16M\nfile_advice = hugepage\n"
                                 "[disk]\nfs = xfs\n[output]\nhost_stats = false\n");
  for (const char* plat : {"functional", "i7-12700kf"}) {
    INFO(plat);
    const std::string base = "run " + cfg + " --set platform.name=" + plat + " --quiet --stats " + t.path("s.json");
    REQUIRE(mmusim(base).status == 0);
    std::string js = slurp(t.path("s.json"));
    CHECK(stat(js, "faults.region") == 8);
    CHECK(stat(js, "kernel.pgmajfault") == 1);
    CHECK(stat(js, "kernel.filemap_read_pages") == 4096);
    CHECK(stat(js, "kernel.filemap_fault_retry") == 5);
    CHECK(stat(js, "kcost.io_request") == 4);
    CHECK(stat(js, "kernel.thp_file_mapped") == 8);
    CHECK(stat(js, "kernel.fault_around_ptes") == 0);
    // ext4: the same windows in order-0 pages, mapped 16 PTEs per fault-around.
    REQUIRE(mmusim(base + " --set disk.fs=ext4").status == 0);
    js = slurp(t.path("s.json"));
    CHECK(stat(js, "kernel.thp_file_mapped") == 0);
    CHECK(stat(js, "kernel.filemap_read_pages") == 4096);
    CHECK(stat(js, "kcost.io_request") == 4);
    CHECK(stat(js, "kernel.fault_around_ptes") == 4096);
  }
  Result r = mmusim("run " + cfg + " --set workload.backing=anon");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.file_advice = hugepage needs workload.backing = file or file-shared") != std::string::npos);
  r = mmusim("run " + cfg + " --set workload.file_advice=random");
  CHECK(r.status == 2);
  CHECK(r.out.find("workload.file_advice") != std::string::npos);
}
