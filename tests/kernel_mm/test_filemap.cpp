// SPDX-License-Identifier: GPL-2.0-only
// File-backed memory (kernel_mm/filemap.cpp): the page cache, read faults with read-around and
// fault-around, the first attempt's VM_FAULT_RETRY after a read, private COW of file pages,
// shared writes with write notification, fork and teardown of file mappings. The fixture checks
// every invariant (the CACHE ones included) after every kernel entry.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::file_byte;
using kmmtest::file_rss;

namespace {

uint64_t mmap_file(Env& e, task_struct* t, address_space* f, uint64_t len, int flags, uint64_t off = 0,
                   int prot = PROT_READ | PROT_WRITE) {
  const int64_t r = e.k.sys_mmap(t, 0, len, prot, flags, f, off);
  REQUIRE(r > 0);
  return uint64_t(r);
}

}  // namespace

TEST_CASE("filemap: a read fault reads around the page and maps the 16 around it but the marked one", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("data", 1 << 20, 42);  // 256 pages
  const uint64_t va = mmap_file(e, t, file, 1 << 20, MAP_PRIVATE);

  // Page 100: read-around reads [84, 116) in one request, its last quarter the async part (page
  // 108 marked PG_readahead); the first attempt drops the lock and returns VM_FAULT_RETRY; the
  // retry finds the page cached and fault-around maps [96, 112) but the marked page.
  REQUIRE(e.load(t, va + 100 * PAGE_SIZE + 5) == file_byte(file, 100 * PAGE_SIZE + 5));
  CHECK(file->nrpages == 32);
  CHECK(e.count("kernel.filemap_read_pages") == 32);
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("kernel.filemap_fault_retry") == 1);
  CHECK(e.count("faults.total") == 1);                 // one fault, handled twice
  CHECK(e.count("kernel.handle_mm_fault") == 2);
  CHECK(e.count("kernel.fault_around_ptes") == 15);
  CHECK(file_rss(t) == 15);
  CHECK(e.rss(t) == 0);
  CHECK(folio_test_readahead(file->i_pages.at(108)));
  CHECK(pte_none(e.pte(t, va + 108 * PAGE_SIZE)));
  for (uint64_t p = 96; p < 112; ++p) {
    if (p == 108) continue;
    const pte_t pte = e.pte(t, va + p * PAGE_SIZE);
    REQUIRE(e.a.pte_present(pte));
    CHECK_FALSE(e.a.pte_write(pte));
    folio* f = e.folio_at(t, va + p * PAGE_SIZE);
    CHECK(f->mapping == file);
    CHECK(f->index == p);
    CHECK_FALSE(folio_test_anon(f));
  }
  CHECK(pte_none(e.pte(t, va + 95 * PAGE_SIZE)));
  CHECK(pte_none(e.pte(t, va + 112 * PAGE_SIZE)));

  SECTION("a read of a cached page next to it is a minor fault: fault-around, no read") {
    REQUIRE(e.load(t, va + 113 * PAGE_SIZE) == file_byte(file, 113 * PAGE_SIZE));
    CHECK(e.count("kernel.filemap_read_pages") == 32);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.k.last_fault().kind == FaultKind::file_map);
    // [112, 128): the cached [112, 116) only.
    CHECK(file_rss(t) == 19);
  }
  SECTION("the access to the marked page reads the next window (asynchronous readahead)") {
    REQUIRE(e.load(t, va + 108 * PAGE_SIZE) == file_byte(file, 108 * PAGE_SIZE));
    // page_cache_async_ra(): the expected index (84 + 32 - 8): the window moves to [116, 148),
    // all of it async (its first page marked); not a major fault, but the lock was dropped.
    CHECK_FALSE(folio_test_readahead(file->i_pages.at(108)));
    CHECK(file->nrpages == 64);
    CHECK(folio_test_readahead(file->i_pages.at(116)));
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.count("kernel.filemap_fault_retry") == 2);
    CHECK(e.a.pte_present(e.pte(t, va + 108 * PAGE_SIZE)));
  }
  SECTION("a write copies the file page into an anonymous page: do_wp_page on a private mapping") {
    REQUIRE(e.store(t, va + 100 * PAGE_SIZE + 5, 0x5a));
    CHECK(e.load(t, va + 100 * PAGE_SIZE + 5) == 0x5a);
    CHECK(e.load(t, va + 100 * PAGE_SIZE + 6) == file_byte(file, 100 * PAGE_SIZE + 6));
    folio* f = e.folio_at(t, va + 100 * PAGE_SIZE);
    CHECK(folio_test_anon(f));
    CHECK(PageAnonExclusive(f));
    CHECK(e.count("kernel.wp_copy") == 1);
    CHECK(file_rss(t) == 14);
    CHECK(e.rss(t) == 1);
    // The page cache keeps the file's bytes.
    CHECK(e.k.phys().frame_data(e.k.folio_pfn(file->i_pages.at(100)))[5] == file_byte(file, 100 * PAGE_SIZE + 5));
  }
  SECTION("munmap unmaps; the page cache keeps the folios") {
    REQUIRE(e.k.sys_munmap(t, va, 1 << 20) == 0);
    CHECK(file_rss(t) == 0);
    CHECK(file->nrpages == 32);
    for (auto& [index, f] : file->i_pages) CHECK(folio_mapcount(f) == 0);
  }
}

TEST_CASE("filemap: a write to a missing PTE of a private mapping copies the file page (do_cow_fault)", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("data", 64 * PAGE_SIZE, 7);
  const uint64_t va = mmap_file(e, t, file, 64 * PAGE_SIZE, MAP_PRIVATE);
  REQUIRE(e.store(t, va + 3 * PAGE_SIZE + 9, 0xee));
  CHECK(e.count("kernel.do_cow_fault") == 2);  // the first attempt read and retried
  CHECK(e.count("kernel.filemap_fault_retry") == 1);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 9) == 0xee);
  CHECK(e.load(t, va + 3 * PAGE_SIZE + 10) == file_byte(file, 3 * PAGE_SIZE + 10));
  folio* f = e.folio_at(t, va + 3 * PAGE_SIZE);
  CHECK(folio_test_anon(f));
  CHECK(e.writable(t, va + 3 * PAGE_SIZE));
  CHECK(e.rss(t) == 1);
  CHECK_FALSE(folio_test_dirty(file->i_pages.at(3)));
}

TEST_CASE("filemap: shared writes go to the page cache, seen by every mapping", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("shared", 64 * PAGE_SIZE, 9);
  const uint64_t a = mmap_file(e, t, file, 64 * PAGE_SIZE, MAP_SHARED);
  const uint64_t b = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_SHARED, 16 * PAGE_SIZE);

  SECTION("a write to a missing PTE: do_shared_fault, page_mkwrite, VM_FAULT_COMPLETED") {
    REQUIRE(e.store(t, a + 20 * PAGE_SIZE + 1, 0x77));
    CHECK(e.count("kernel.do_shared_fault") == 2);  // read and retried, then completed
    CHECK(e.writable(t, a + 20 * PAGE_SIZE));
    CHECK(folio_test_dirty(file->i_pages.at(20)));
    // The other mapping of the same file page reads the write.
    CHECK(e.load(t, b + 4 * PAGE_SIZE + 1) == 0x77);
    CHECK(e.folio_at(t, b + 4 * PAGE_SIZE) == e.folio_at(t, a + 20 * PAGE_SIZE));
    CHECK(folio_mapcount(file->i_pages.at(20)) == 2);
    CHECK_FALSE(e.writable(t, b + 4 * PAGE_SIZE));  // mapped by a read: write notification
  }
  SECTION("the first write to a read-mapped page is a write-notify fault (wp_page_shared), no copy") {
    REQUIRE(e.load(t, a + 5 * PAGE_SIZE) == file_byte(file, 5 * PAGE_SIZE));
    CHECK_FALSE(e.writable(t, a + 5 * PAGE_SIZE));
    CHECK_FALSE(folio_test_dirty(file->i_pages.at(5)));
    const uint64_t faults = e.count("faults.total");
    REQUIRE(e.store(t, a + 5 * PAGE_SIZE, 0x11));
    CHECK(e.count("faults.total") == faults + 1);
    CHECK(e.count("kernel.do_wp_page") == 1);
    CHECK(e.count("kernel.wp_copy") == 0);
    CHECK(e.writable(t, a + 5 * PAGE_SIZE));
    CHECK(folio_test_dirty(file->i_pages.at(5)));
    CHECK(e.k.phys().frame_data(e.k.folio_pfn(file->i_pages.at(5)))[0] == 0x11);
  }
  SECTION("a shared mapping made writable by mprotect keeps clean pages read-only") {
    REQUIRE(e.load(t, a + 6 * PAGE_SIZE) == file_byte(file, 6 * PAGE_SIZE));
    REQUIRE(e.k.sys_mprotect(t, a, 64 * PAGE_SIZE, PROT_READ) == 0);
    REQUIRE(e.k.sys_mprotect(t, a, 64 * PAGE_SIZE, PROT_READ | PROT_WRITE) == 0);
    CHECK_FALSE(e.writable(t, a + 6 * PAGE_SIZE));
  }
  SECTION("fork: the child shares the file pages; its writes are the parent's") {
    REQUIRE(e.store(t, a + 2 * PAGE_SIZE, 0x42));
    task_struct* c = e.k.sys_fork(t);
    REQUIRE(c);
    // vma_needs_copy(): a shared file VMA has no anon_vma: the child faults its pages in.
    CHECK(pte_none(e.pte(c, a + 2 * PAGE_SIZE)));
    REQUIRE(e.load(c, a + 2 * PAGE_SIZE) == 0x42);
    REQUIRE(e.store(c, a + 2 * PAGE_SIZE + 1, 0x43));
    CHECK(e.load(t, a + 2 * PAGE_SIZE + 1) == 0x43);
    e.k.enter(c, 0);
    e.k.sys_exit(c, 0);
    CHECK(folio_mapcount(file->i_pages.at(2)) == 1);
  }
}

TEST_CASE("filemap: fork copies the file PTEs of a private mapping that has anon pages", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("lib", 32 * PAGE_SIZE, 3);
  const uint64_t va = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_PRIVATE);
  REQUIRE(e.load(t, va) == file_byte(file, 0));
  REQUIRE(e.store(t, va + PAGE_SIZE, 1));  // an anon page: the VMA gets an anon_vma
  task_struct* c = e.k.sys_fork(t);
  REQUIRE(c);
  CHECK(e.a.pte_present(e.pte(c, va)));
  CHECK(e.folio_at(c, va) == e.folio_at(t, va));
  CHECK(file_rss(c) == file_rss(t));
  CHECK(e.load(c, va + PAGE_SIZE) == 1);
  REQUIRE(e.store(c, va + 2, 9));  // the child's write copies the file page, for the child only
  CHECK(e.load(t, va + 2) == file_byte(file, 2));
  e.k.enter(c, 0);
  e.k.sys_exit(c, 0);
  e.k.enter(t, 0);
  e.k.sys_exit(t, 0);
  CHECK(file->nrpages > 0);
  for (auto& [index, f] : file->i_pages) CHECK(folio_mapcount(f) == 0);
}

TEST_CASE("filemap: beyond the end of the file is SIGBUS, and mmap refuses what it cannot map", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("short", 2 * PAGE_SIZE + 100, 5);
  const uint64_t va = mmap_file(e, t, file, 8 * PAGE_SIZE, MAP_SHARED);
  // The last page's tail reads zero.
  CHECK(e.load(t, va + 2 * PAGE_SIZE + 99) == file_byte(file, 2 * PAGE_SIZE + 99));
  CHECK(e.load(t, va + 2 * PAGE_SIZE + 100) == 0);
  CHECK(file->nrpages == 3);
  e.k.enter(t, 0);
  const FaultReturn r =
      e.k.handle_user_fault(t, va + 3 * PAGE_SIZE, mmusim::pg::x86_pf_error_code(false, false, true, false), 0);
  CHECK(r.sigbus);
  CHECK(e.count("faults.sigbus") == 1);
  CHECK(e.k.sys_mmap(t, 0, PAGE_SIZE, PROT_READ, MAP_PRIVATE, nullptr, 0) == -EBADF);
  CHECK(e.k.sys_mmap(t, 0, PAGE_SIZE, PROT_READ, MAP_PRIVATE, file, 100) == -EINVAL);
  CHECK(e.k.sys_mmap(t, 0, PAGE_SIZE, PROT_READ, MAP_SHARED | MAP_ANONYMOUS) == -EINVAL);
}

TEST_CASE("filemap: read-around stops when mmap misses pile up, and random access reads one page", "[filemap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("big", 4096 * PAGE_SIZE, 1);
  const uint64_t va = mmap_file(e, t, file, 4096 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  SECTION("MADV_RANDOM (VM_RAND_READ): one page per miss") {
    REQUIRE(e.k.sys_madvise(t, va, 4096 * PAGE_SIZE, MADV_RANDOM) == 0);
    REQUIRE(e.load(t, va + 1000 * PAGE_SIZE) == file_byte(file, 1000 * PAGE_SIZE));
    CHECK(file->nrpages == 1);
    CHECK(e.count("kernel.filemap_fault_retry") == 1);  // the read drops the lock too
  }
  SECTION("a miss every 64 pages: fault-around finds nothing cached, mmap_miss grows to the limit") {
    uint64_t reads = 0;
    for (uint64_t p = 0; p < 4096; p += 64) {
      REQUIRE(e.load(t, va + p * PAGE_SIZE) == file_byte(file, p * PAGE_SIZE));
      reads = e.count("kernel.filemap_read_pages");
    }
    // Each read-around maps 16 pages through fault-around, which forgives 16 misses: the count
    // never passes 100, so every miss reads 32 pages (the first from the start of the file).
    CHECK(reads == 64 * 32);
    CHECK(file->mmap_miss <= 100);
  }
}

namespace {

// A disk whose every read takes 100 us.
struct FixedDisk : BlockDev {
  unsigned requests = 0;
  uint64_t submit_read(uint64_t submit_ps, uint64_t) override {
    ++requests;
    return submit_ps + 100000000;
  }
  uint64_t submit_write(uint64_t submit_ps, uint64_t) override { return submit_ps + 20000000; }
};

// A disk that reads at once and takes a second for every write: what the flusher writes is still
// under writeback for the rest of a test that stays at time 0.
struct SlowWriteDisk : BlockDev {
  unsigned writes = 0;
  uint64_t submit_read(uint64_t submit_ps, uint64_t) override { return submit_ps; }
  uint64_t submit_write(uint64_t submit_ps, uint64_t) override {
    ++writes;
    return submit_ps + 1000000000000ull;
  }
};

// A load by `t` at simulated time `ps` (a kernel entry starting then, its account cleared).
int load_at(Env& e, task_struct* t, uint64_t va, uint64_t ps) {
  e.k.clear_cost();
  e.k.enter(t, 0, ps);
  return e.fix.ua->load8(t, va);
}

}  // namespace

TEST_CASE("filemap: a folio under read is locked until its read completes: faults wait for it and retry", "[filemap]") {
  Env e;
  FixedDisk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("data", 1 << 20, 7);
  const uint64_t va = mmap_file(e, t, file, 1 << 20, MAP_PRIVATE);
  auto page = [&](uint64_t p) { return va + p * PAGE_SIZE; };

  // At 0: the read-around of [84, 116) is submitted; the fault sleeps until it completes
  // (100 us), with the fault lock dropped, and retries: fault-around then maps [96, 112).
  REQUIRE(load_at(e, t, page(100), 0) == file_byte(file, 100 * PAGE_SIZE));
  CHECK(disk.requests == 1);
  CHECK(e.count("kernel.folio_io_waits") == 1);
  CHECK(e.count("kernel.io_wait_ns") == 100000);
  CHECK(e.count("kernel.filemap_fault_retry") == 1);
  CHECK(file_rss(t) == 15);

  // At 200 us: the marked page 108 starts the read of [116, 148) and does not wait for it: its
  // own folio is there. The fault still dropped its lock and retries (do_async_mmap_readahead).
  REQUIRE(load_at(e, t, page(108), 200000000) == file_byte(file, 108 * PAGE_SIZE));
  CHECK(disk.requests == 2);
  CHECK(e.count("kernel.folio_io_waits") == 1);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);

  // At 210 us: page 113 is cached and read; fault-around over [112, 128) maps [112, 116) and
  // leaves the folios still under read (until 300 us) unmapped.
  REQUIRE(load_at(e, t, page(113), 210000000) == file_byte(file, 113 * PAGE_SIZE));
  CHECK(e.count("kernel.folio_io_waits") == 1);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);
  CHECK(e.k.last_fault().kind == FaultKind::file_map);
  for (uint64_t p = 112; p < 116; ++p) CHECK(e.a.pte_present(e.pte(t, page(p))));
  for (uint64_t p = 117; p < 128; ++p) CHECK(pte_none(e.pte(t, page(p))));

  SECTION("a fault on a folio under read sleeps until it completes, then retries: a minor fault") {
    REQUIRE(load_at(e, t, page(120), 250000000) == file_byte(file, 120 * PAGE_SIZE));
    CHECK(e.count("kernel.folio_io_waits") == 2);
    CHECK(e.count("kernel.io_wait_ns") == 100000 + 50000);
    CHECK(e.count("kernel.filemap_fault_retry") == 3);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(disk.requests == 2);
    // After the wait, fault-around maps [112, 128) but the marked 116.
    for (uint64_t p = 117; p < 128; ++p) CHECK(e.a.pte_present(e.pte(t, page(p))));
    CHECK(pte_none(e.pte(t, page(116))));
  }
  SECTION("once the read has completed, the same fault neither waits nor retries") {
    REQUIRE(load_at(e, t, page(120), 300000000) == file_byte(file, 120 * PAGE_SIZE));
    CHECK(e.count("kernel.folio_io_waits") == 1);
    CHECK(e.count("kernel.filemap_fault_retry") == 2);
    CHECK(e.k.last_fault().kind == FaultKind::file_map);
  }
}

// ------------------------------------------------------------------------------------------------
// Direct reclaim of the page cache (kernel_mm/vmscan.cpp)

namespace {
uint64_t lru_pages(Env& e, lru_list l) { return e.k.lruvecs().at(0).lists[l].nr_pages; }
}  // namespace

TEST_CASE("reclaim: clean file folios are unmapped and dropped on their second look and a dirty shared one is activated", "[filemap][reclaim]") {
  const auto isa = GENERATE(mmusim::pg::Isa::x86_64, mmusim::pg::Isa::arm64);
  Env e({}, isa);
  task_struct* t = e.proc("p");
  address_space* mapped = e.k.file_create("mapped", 32 * PAGE_SIZE, 3);
  address_space* cached = e.k.file_create("cached", 32 * PAGE_SIZE, 4);
  const uint64_t va = mmap_file(e, t, mapped, 32 * PAGE_SIZE, MAP_SHARED);
  auto page = [&](uint64_t p) { return va + p * PAGE_SIZE; };
  for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.load(t, page(p)) == file_byte(mapped, p * PAGE_SIZE));
  REQUIRE(e.store(t, page(5), 0xab));  // a shared write: the folio is dirty
  // `cached` is read through a mapping that is then unmapped: in the page cache, mapped nowhere.
  const uint64_t va2 = mmap_file(e, t, cached, 32 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.load(t, va2 + p * PAGE_SIZE) == file_byte(cached, p * PAGE_SIZE));
  REQUIRE(e.k.sys_munmap(t, va2, 32 * PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  REQUIRE(mapped->nrpages == 32);
  REQUIRE(cached->nrpages == 32);
  REQUIRE(lru_pages(e, LRU_INACTIVE_FILE) == 64);
  REQUIRE(file_rss(t) == 32);
  folio* dirty = mapped->i_pages.at(5);
  REQUIRE(folio_test_dirty(dirty));

  // Asked for more than there is: every priority down to 0. The mapped folios' PTEs were young:
  // their first look clears the accessed bits and marks them referenced (kept); the second finds
  // them unused since and drops them. Only the dirty folio stays: unmapped (its dirty bit moved
  // to the folio) and activated, as direct reclaim does not write.
  e.k.enter(t, 0);
  const uint64_t flushes_before = e.count("kernel.tlb_flush_page");
  const uint64_t freed = e.k.try_to_free_pages(0, 128);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(freed == 63);
  CHECK(e.count("kernel.allocstall") == 1);
  CHECK(e.count("kernel.pgsteal_direct") == 63);
  CHECK(e.count("kernel.reclaim_unmapped_ptes") == 32);
  // The TLB: x86 clears accessed bits without a flush and, with no other CPU in the mm's mask,
  // flushes each unmapped page at once (ptep_clear_flush()); arm64 flushes a young page when it
  // clears its access flag, and each unmapped one as it batches it (arch_tlbbatch_add_pending()).
  CHECK(e.count("kernel.tlb_flush_page") - flushes_before == (isa == mmusim::pg::Isa::x86_64 ? 32u : 64u));
  CHECK(e.count("kernel.pgactivate") >= 1);
  CHECK(cached->nrpages == 0);
  CHECK(mapped->nrpages == 1);
  CHECK(mapped->i_pages.at(5) == dirty);
  CHECK(folio_test_dirty(dirty));
  CHECK(file_rss(t) == 0);
  for (uint64_t p = 0; p < 32; ++p) CHECK(pte_none(e.pte(t, page(p))));

  // Page 5 comes back from the cache with the stored byte (a minor fault); page 0 from the disk.
  const uint64_t majors = e.count("kernel.pgmajfault");
  CHECK(e.load(t, page(5)) == 0xab);
  CHECK(e.count("kernel.pgmajfault") == majors);
  CHECK(e.load(t, page(0)) == file_byte(mapped, 0));
  CHECK(e.count("kernel.pgmajfault") == majors + 1);
}

TEST_CASE("reclaim: reading a file twice the size of memory reclaims its page cache as it goes", "[filemap][reclaim]") {
  Env e([](KernelParams& p) { p.phys_mem = 64ull << 20; });
  task_struct* t = e.proc("p");
  const uint64_t size = 128ull << 20;
  address_space* file = e.k.file_create("big", size, 11);
  const uint64_t va = mmap_file(e, t, file, size, MAP_PRIVATE, 0, PROT_READ);
  uint64_t mismatches = 0;
  for (uint64_t off = 0; off < size; off += PAGE_SIZE)
    if (e.load(t, va + off + (off >> 12) % PAGE_SIZE) != file_byte(file, off + (off >> 12) % PAGE_SIZE)) ++mismatches;
  CHECK(mismatches == 0);
  CHECK(e.count("kernel.allocstall") > 0);
  CHECK(e.count("kernel.pgsteal_direct") >= (64ull << 20) / PAGE_SIZE);
  CHECK(e.count("kernel.reclaim_unmapped_ptes") > 0);
  CHECK(file->nrpages < (64ull << 20) / PAGE_SIZE);
  CHECK(uint64_t(file_rss(t)) <= file->nrpages);
  CHECK(lru_pages(e, LRU_INACTIVE_FILE) + lru_pages(e, LRU_ACTIVE_FILE) <= file->nrpages);
  // The start of the file was dropped: reading it again is a major fault that reads it back.
  const uint64_t majors = e.count("kernel.pgmajfault");
  CHECK(e.load(t, va + 3) == file_byte(file, 3));
  CHECK(e.count("kernel.pgmajfault") == majors + 1);
}

// ------------------------------------------------------------------------------------------------
// Memory cgroups (kernel_mm/memcontrol.cpp)

TEST_CASE("memcg: a file read under memory.max reclaims the cgroup's own page cache and the rest of memory stays free", "[filemap][reclaim][memcg]") {
  Env e([](KernelParams& p) { p.memcg_max = 1ull << 20; });  // 256 pages
  REQUIRE(e.k.memcgs().size() == 2);
  const mem_cgroup* cg = e.k.memcgs()[1].get();
  CHECK(cg->max == 256);
  task_struct* t = e.proc("p");
  REQUIRE(t->mm->memcg == cg);
  // Anonymous pages are charged to it.
  const uint64_t anon = e.mmap(t, 64 * PAGE_SIZE);
  for (uint64_t p = 0; p < 64; ++p) REQUIRE(e.store(t, anon + p * PAGE_SIZE, 1));
  e.k.lru_add_drain();
  CHECK(cg->usage == 64);
  // A 4 MiB file read a byte per page: the cache the cgroup may hold is what its anon pages leave.
  address_space* file = e.k.file_create("big", 4ull << 20, 5);
  const uint64_t va = mmap_file(e, t, file, 4ull << 20, MAP_PRIVATE, 0, PROT_READ);
  for (uint64_t p = 0; p < 1024; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE + 9) == file_byte(file, p * PAGE_SIZE + 9));
  CHECK(cg->usage <= 256);
  CHECK(cg->peak == 256);
  CHECK(e.count("memcg.max_events") > 0);
  CHECK(e.count("memcg.pgsteal") >= 1024 - 192);
  CHECK(e.count("memcg.pgscan") >= e.count("memcg.pgsteal"));
  CHECK(e.count("kernel.allocstall") == 0);        // memory itself never ran out
  CHECK(e.count("kernel.pgsteal_direct") == 0);
  CHECK(file->nrpages <= 192);
  // Every anonymous page is still there (no swap: reclaim took only page cache).
  CHECK(e.rss(t) == 64);
  for (uint64_t p = 0; p < 64; ++p) CHECK(e.load(t, anon + p * PAGE_SIZE) == 1);
  // Freeing returns the charge: unmapping the anon region leaves the cache's pages only.
  REQUIRE(e.k.sys_munmap(t, anon, 64 * PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  CHECK(cg->usage == file->nrpages);
}

TEST_CASE("memcg: anonymous memory over memory.max is the cgroup's OOM: the process is killed at exactly the limit", "[memcg]") {
  Env e([](KernelParams& p) { p.memcg_max = 1ull << 20; });
  task_struct* t = e.proc("p");
  const uint64_t anon = e.mmap(t, 512 * PAGE_SIZE);
  uint64_t p = 0;
  while (p < 512 && e.store(t, anon + p * PAGE_SIZE, 1)) ++p;
  CHECK(p == 256);  // exactly memory.max of anonymous pages fit (page tables are not charged)
  CHECK(t->fatal_signal == 9);  // SIGKILL from the OOM killer (tests/kernel_mm/test_oom_kill.cpp)
  CHECK(e.count("memcg.oom_kill") == 1);
}

TEST_CASE("workingset: an evicted page-cache folio leaves a shadow and its refault is activated when the refault distance fits in the active list", "[filemap][reclaim][workingset]") {
  Env e;
  SlowWriteDisk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* dirty = e.k.file_create("dirty", 64 * PAGE_SIZE, 8);
  address_space* clean = e.k.file_create("clean", 32 * PAGE_SIZE, 9);
  // 64 dirty shared pages (reclaim unmaps them and activates them: it does not write them; the
  // flusher it wakes does, and their writes take longer than the test) and 32 clean ones in the
  // cache only.
  const uint64_t vd = mmap_file(e, t, dirty, 64 * PAGE_SIZE, MAP_SHARED);
  for (uint64_t p = 0; p < 64; ++p) REQUIRE(e.store(t, vd + p * PAGE_SIZE, 7));
  auto read_clean = [&]() {
    const uint64_t vc = mmap_file(e, t, clean, 32 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.load(t, vc + p * PAGE_SIZE) == file_byte(clean, p * PAGE_SIZE));
    REQUIRE(e.k.sys_munmap(t, vc, 32 * PAGE_SIZE) == 0);
    e.k.lru_add_drain();
  };
  read_clean();
  const lruvec& lv = e.k.lruvecs().at(0);
  // Which of the clean pages will come back active: those evicted within `active` evictions and
  // activations of now (the refault distance), as workingset_test_recent() decides.
  auto expect_active = [&]() {
    const uint64_t active = lv.lists[LRU_ACTIVE_FILE].nr_pages;
    uint64_t n = 0;
    for (const auto& [index, s] : clean->shadows) {
      CHECK_FALSE(s.workingset);
      if (lv.nonresident_age - s.eviction <= active) ++n;
    }
    return n;
  };

  // Everything reclaimable goes: the clean pages at once (evictions 0-31). The dirty ones are
  // seen first (the tail): their first batch, all dirty and not queued for I/O, wakes the flusher,
  // which writes all 64 in one request (adjacent pages, index order); then each is under writeback
  // when reclaim looks at it: marked for reclaim and activated (64 activations after the clean
  // evictions), and aged back to the inactive list but one while the inactive list is low. Each
  // clean page's refault distance (65-96) is more than the active list (1): none will be
  // activated.
  e.k.enter(t, 0);
  e.k.try_to_free_pages(0, 128);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(clean->nrpages == 0);
  CHECK(clean->shadows.size() == 32);
  CHECK(dirty->nrpages == 64);
  CHECK(dirty->shadows.empty());
  CHECK(e.count("kernel.flusher_vmscan") == 1);
  CHECK(disk.writes == 1);
  CHECK(e.k.nr_writeback() == 64);
  CHECK(e.k.nr_file_dirty() == 0);
  CHECK(e.count("kernel.nr_vmscan_immediate_reclaim") == 0);  // none was dirty when activated
  CHECK(e.count("kernel.pgactivate") == 64);
  CHECK(lv.lists[LRU_ACTIVE_FILE].nr_pages + lv.lists[LRU_INACTIVE_FILE].nr_pages == 64);
  for (const auto& [index, f] : dirty->i_pages) CHECK((folio_test_writeback(f) && folio_test_reclaim(f)));
  CHECK(lv.nonresident_age == 96);
  CHECK(expect_active() == 0);
  read_clean();  // 32 refaults (the read-around brings all of it back), none activated
  CHECK(e.count("kernel.workingset_refault_file") == 32);
  CHECK(e.count("kernel.workingset_activate_file") == 0);
  CHECK(clean->shadows.empty());

  // Again, asking for 32 pages; then one shadow is made as recent as the last eviction (refault
  // distance 0, which fits any active list): it and those whose distance fits in the active
  // list come back active, the others inactive.
  e.k.enter(t, 0);
  e.k.try_to_free_pages(0, 32);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(clean->shadows.size() == 32);
  clean->shadows.begin()->second.eviction = lv.nonresident_age;
  const uint64_t expected = expect_active();
  INFO("active " << lv.lists[LRU_ACTIVE_FILE].nr_pages << " nonresident_age " << lv.nonresident_age);
  CHECK(expected > 0);
  CHECK(expected < 32);
  read_clean();
  CHECK(e.count("kernel.workingset_refault_file") == 64);
  CHECK(e.count("kernel.workingset_activate_file") == expected);
  CHECK(e.count("kernel.workingset_restore_file") == 0);
  uint64_t now_active = 0;
  for (const auto& [index, f] : clean->i_pages) now_active += folio_test_active(f);
  CHECK(now_active == expected);
}

TEST_CASE("reclaim: on x86 unmapping from an mm another CPU runs is one batched flush with one IPI", "[filemap][reclaim]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("f", 32 * PAGE_SIZE, 12);
  const uint64_t va = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.load(t, va + p * PAGE_SIZE) == file_byte(file, p * PAGE_SIZE));
  e.k.lru_add_drain();
  e.a.switch_mm(1, t->mm);  // CPU 1 runs the mm too: its TLB may hold the entries
  const uint64_t gen = t->mm->tlb_gen;
  const uint64_t flush_pages = e.count("kernel.tlb_flush_page");
  e.k.enter(t, 0);
  e.k.clear_cost();
  // Priorities 5 to 1 scan 1 + 2 + 4 + 8 + 16 = 31 folios (a first look each: accessed bits
  // cleared, kept); priority 0 scans 32: the 31 again (unmapped, dropped) and the last one's
  // first look.
  e.k.try_to_free_pages(0, 128);
  e.k.check_invariants("try_to_free_pages", true);
  REQUIRE(file->nrpages == 1);
  CHECK(folio_test_referenced(file->i_pages.begin()->second));
  CHECK(e.count("kernel.reclaim_unmapped_ptes") == 31);
  // should_defer_flush(): the 31 PTEs are cleared without a flush each (tlb_gen bumped each time)
  // and the batch is flushed once before the folios are freed: one IPI to CPU 1.
  CHECK(e.count("kernel.tlb_flush_page") == flush_pages);
  CHECK(e.count("kernel.tlbbatch_flushes") == 1);
  CHECK(e.k.cost()[Cost::ipi] == 1);
  CHECK(t->mm->tlb_gen == gen + 31);
}

TEST_CASE("writeback: reclaim wakes the flusher, the written pages are reclaimed after their write and read back with what was written", "[filemap][reclaim][writeback]") {
  Env e;
  SlowWriteDisk disk;  // writes take 1 s
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("shared", 32 * PAGE_SIZE, 21);
  const uint64_t va = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_SHARED);
  for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 3, int(0x40 + p)));
  e.k.lru_add_drain();
  // Dirty accounting: 32 pages dirtied, the inode on the dirty list.
  CHECK(e.k.nr_file_dirty() == 32);
  CHECK(e.count("kernel.nr_dirtied") == 32);
  CHECK(file->dirty_tags.size() == 32);
  CHECK(file->inode_dirty);
  CHECK(e.k.memcgs()[0]->nr_file_dirty == 32);

  // Reclaim at time 0: the batch is all dirty: the flusher writes the 32 pages (one request),
  // cleaning and write-protecting their PTEs; nothing can be freed before the writes end.
  e.k.enter(t, 0, 0);
  CHECK(e.k.try_to_free_pages(0, 32) == 0);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(disk.writes == 1);
  CHECK(e.count("kernel.flusher_vmscan") == 1);
  CHECK(e.count("kernel.file_write_requests") == 1);
  CHECK(e.count("kernel.folio_mkclean_ptes") == 32);
  CHECK(e.k.nr_file_dirty() == 0);
  CHECK(e.k.nr_writeback() == 32);
  CHECK(file->dirty_tags.empty());
  CHECK_FALSE(file->inode_dirty);
  CHECK(file->written.size() == 32);
  CHECK(file->nrpages == 32);

  // A store to page 5 now faults (write notification) and dirties it again while its write is in
  // flight (folio_mark_dirty() takes PG_reclaim away: it is not rotated when the write ends).
  const uint64_t faults = e.count("faults.total");
  REQUIRE(e.store(t, va + 5 * PAGE_SIZE + 3, 0x99));
  CHECK(e.count("faults.total") == faults + 1);
  folio* five = file->i_pages.at(5);
  CHECK(folio_test_dirty(five));
  CHECK(folio_test_writeback(five));
  CHECK_FALSE(folio_test_reclaim(five));
  CHECK(e.k.nr_file_dirty() == 1);

  // At 2 s the writes have ended (NR_WRITTEN, rotated to the inactive tail); reclaim frees the
  // 31 clean pages; page 5 is dirty again and stays, and a batch with clean pages in it does not
  // wake the flusher.
  e.k.enter(t, 0, 2000000000000ull);
  e.k.writeback_end_due();
  CHECK(e.count("kernel.nr_written") == 32);
  CHECK(e.count("kernel.pgrotated") == 31);
  CHECK(e.k.nr_writeback() == 0);
  e.k.try_to_free_pages(0, 64);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(file->nrpages == 1);
  CHECK(file->i_pages.count(5) == 1);
  CHECK(disk.writes == 1);
  CHECK(e.count("kernel.flusher_vmscan") == 1);
  REQUIRE(e.k.sys_munmap(t, va, 32 * PAGE_SIZE) == 0);

  // The checker holds the counts to the page cache: one page too many is caught.
  e.k.memcgs()[0]->nr_file_dirty += 1;
  CHECK_THROWS_AS(e.k.check_invariants("forced", true), mmusim::InternalError);
  e.k.memcgs()[0]->nr_file_dirty -= 1;
  e.k.check_invariants("restored", true);

  // Read back through a new mapping: every page as written, from the disk's copy.
  const uint64_t vb = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  for (uint64_t p = 0; p < 32; ++p) {
    INFO("page " << p);
    CHECK(e.load(t, vb + p * PAGE_SIZE + 3) == (p == 5 ? 0x99 : int(0x40 + p)));
    CHECK(e.load(t, vb + p * PAGE_SIZE + 4) == file_byte(file, p * PAGE_SIZE + 4));
  }
}

TEST_CASE("reclaim_throttle: memcg reclaim that meets only folios still under writeback and marked sleeps to the next tick, but not when the node has much else to reclaim", "[filemap][reclaim][writeback][memcg]") {
  for (const bool much_clean : {false, true}) {
    INFO("clean page cache besides: " << much_clean);
    Env e([](KernelParams& p) { p.memcg_max = 1ull << 20; });  // 256 pages
    SlowWriteDisk disk;  // writes take 1 s
    e.k.set_block_device(&disk);
    mem_cgroup* cg = e.k.memcgs()[1].get();
    task_struct* t = e.proc("p");
    REQUIRE(t->mm->memcg == cg);
    if (much_clean) {
      // 512 clean page-cache pages on the node besides, read by a process in the root cgroup:
      // the workload's reclaim does not take them, but the node's reclaimable pages are now
      // enough that the writes in flight are not half of them.
      task_struct* o = e.proc("other");
      o->mm->memcg = nullptr;  // the root
      address_space* big = e.k.file_create("big", 512 * PAGE_SIZE, 5);
      const uint64_t vb = mmap_file(e, o, big, 512 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
      for (uint64_t p = 0; p < 512; ++p) REQUIRE(e.load(o, vb + p * PAGE_SIZE) == file_byte(big, p * PAGE_SIZE));
      CHECK(cg->usage == 0);
    }
    address_space* file = e.k.file_create("shared", 32 * PAGE_SIZE, 21);
    const uint64_t va = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_SHARED);
    for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 3, int(0x40 + p)));
    e.k.lru_add_drain();
    e.k.clear_cost();
    e.k.enter(t, 0, 0);
    for (int round = 0; round < 4; ++round) {
      e.k.try_to_free_mem_cgroup_pages(cg, 32);
      e.k.check_invariants("try_to_free_mem_cgroup_pages", true);
    }
    INFO("throttles " << e.count("kernel.reclaim_throttles") << ", " << e.count("kernel.reclaim_throttle_ns") << " ns");
    CHECK(e.k.nr_writeback() == 32);
    for (const lruvec& lv : cg->nodeinfo) CHECK(lv.flags == 0);  // cleared when the reclaim ends
    // The first round writes the pages (a batch all dirty wakes the flusher) and marks them for
    // reclaim; from the second on, reclaim meets them at the inactive tail still under writeback
    // (nr_congested == nr_dirty) from priority 4 (round 2) and 2 (rounds 3 and 4) down to 0, and
    // every shrink_node() from the flag on sleeps: 5 + 3 + 3.
    if (!much_clean) {
      CHECK(e.count("kernel.reclaim_throttles") == 11);
      // Each sleep is schedule_timeout(1) from a tick: one tick at HZ 250 (no prices here: the
      // entry's time moves only by its sleeps).
      CHECK(e.count("kernel.reclaim_throttle_ns") == 11 * 4000000);
    } else {
      // The same congestion, but 2 x 32 pages in flight <= 544 reclaimable on the node:
      // skip_throttle_noprogress().
      CHECK(e.count("kernel.reclaim_throttles") == 0);
    }
  }
}

TEST_CASE("writeback: periodic (kupdate) writeback writes what has been dirty for dirty_expire_centisecs, every dirty_writeback_centisecs", "[filemap][writeback]") {
  for (const unsigned interval : {500u, 0u}) {
    INFO("dirty_writeback_centisecs " << interval);
    Env e([interval](KernelParams& p) { p.dirty_writeback_centisecs = interval; });
    constexpr uint64_t s = 1'000'000'000'000ull;  // ps
    task_struct* t = e.proc("p");
    address_space* file = e.k.file_create("shared", 16 * PAGE_SIZE, 3);
    const uint64_t va = mmap_file(e, t, file, 16 * PAGE_SIZE, MAP_SHARED);
    // 16 dirty pages at time 0: far below the background threshold, nothing else writes them.
    for (uint64_t p = 0; p < 16; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE, 7));
    CHECK(e.k.nr_file_dirty() == 16);
    // The first dirty inode queued the flusher's delayed work 5 s (1,250 jiffies) ahead.
    e.k.enter(t, 0, 5 * s - 1);
    CHECK(e.count("kernel.flusher_periodic") == 0);
    e.k.enter(t, 0, 5 * s);
    // At 5 s the work runs (with the interval): nothing has been dirty for 30 s yet.
    CHECK(e.count("kernel.flusher_periodic") == (interval ? 1 : 0));
    CHECK(e.k.nr_file_dirty() == 16);
    // The next entry is at 31 s: the work queued again for 10 s runs then, and the inode has been
    // dirty for 31 s: all 16 pages go out in one request.
    e.k.enter(t, 0, 31 * s);
    e.k.check_invariants("periodic writeback", true);
    if (interval) {
      CHECK(e.count("kernel.flusher_periodic") == 2);
      CHECK(e.count("kernel.file_write_requests") == 1);
      CHECK(e.k.nr_file_dirty() == 0);
      CHECK(e.k.nr_writeback() + e.count("kernel.nr_written") == 16);
      CHECK_FALSE(file->inode_dirty);
      // Clean: the work is not queued again.
      e.k.enter(t, 0, 100 * s);
      CHECK(e.count("kernel.flusher_periodic") == 2);
    } else {
      // vm.dirty_writeback_centisecs = 0: never.
      CHECK(e.count("kernel.flusher_periodic") == 0);
      CHECK(e.k.nr_file_dirty() == 16);
      CHECK(e.count("kernel.file_write_requests") == 0);
    }
  }
}

// msync() (mm/msync.c): MS_ASYNC does nothing; MS_SYNC writes the dirty pages of the shared file
// mappings in the range and waits for the writes (vfs_fsync_range() ->
// file_write_and_wait_range(): WB_SYNC_ALL waits for a folio already under writeback and writes
// it again); the PTEs are clean and write-protected after it, so the next store faults; a hole in
// the range is -ENOMEM after the rest was synced; bad flags and alignment are -EINVAL.
TEST_CASE("msync: MS_SYNC writes the range's dirty pages of shared file mappings and waits for them", "[filemap][writeback][msync]") {
  Env e;
  SlowWriteDisk disk;  // writes take 1 s
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("shared", 32 * PAGE_SIZE, 33);
  const uint64_t va = mmap_file(e, t, file, 32 * PAGE_SIZE, MAP_SHARED);
  for (uint64_t p = 0; p < 32; ++p) REQUIRE(e.store(t, va + p * PAGE_SIZE + 1, int(0x10 + p)));
  CHECK(e.k.nr_file_dirty() == 32);

  auto msync_at = [&](uint64_t start, uint64_t len, int flags, uint64_t ps) {
    e.k.clear_cost();
    e.k.enter(t, 0, ps);
    const int r = e.k.sys_msync(t, start, len, flags);
    e.k.check_invariants("msync", true);
    return r;
  };
  CHECK(msync_at(va, 32 * PAGE_SIZE, MS_ASYNC | MS_SYNC, 0) == -EINVAL);
  CHECK(msync_at(va + 1, PAGE_SIZE, MS_SYNC, 0) == -EINVAL);
  CHECK(msync_at(va, PAGE_SIZE, 8, 0) == -EINVAL);
  CHECK(msync_at(va, 32 * PAGE_SIZE, MS_ASYNC, 0) == 0);
  CHECK(disk.writes == 0);
  CHECK(e.k.nr_file_dirty() == 32);

  // Pages 8-15, at time 0: one request of 8 pages; the call waits the disk's second for it, and
  // returns with the pages written, clean and their PTEs write-protected.
  CHECK(msync_at(va + 8 * PAGE_SIZE, 8 * PAGE_SIZE, MS_SYNC, 0) == 0);
  CHECK(disk.writes == 1);
  CHECK(e.count("kernel.fsyncs") == 1);
  CHECK(e.count("kernel.io_wait_ns") == 1000000000);
  CHECK(e.k.cost().io_wait_cycles > 0);
  CHECK(e.k.nr_file_dirty() == 24);
  CHECK(e.k.nr_writeback() == 0);
  CHECK(file->written.size() == 8);
  for (uint64_t p = 8; p < 16; ++p) {
    INFO("page " << p);
    folio* f = file->i_pages.at(p);
    CHECK_FALSE(folio_test_dirty(f));
    CHECK_FALSE(folio_test_writeback(f));
    CHECK_FALSE(e.a.pte_write(e.pte(t, va + p * PAGE_SIZE)));
    CHECK(file->written.at(p)[1] == 0x10 + p);
  }
  CHECK(e.a.pte_write(e.pte(t, va + 7 * PAGE_SIZE)));  // outside the range: untouched
  // The next store to page 8 faults (write notification) and dirties it again.
  const uint64_t faults = e.count("faults.total");
  REQUIRE(e.store(t, va + 8 * PAGE_SIZE + 1, 0x77));
  CHECK(e.count("faults.total") == faults + 1);
  CHECK(e.k.nr_file_dirty() == 25);

  // Reclaim's flusher puts everything dirty under writeback at 2 s (ends at 3 s); page 8 is then
  // dirtied again. An msync of the whole mapping at 2 s waits for page 8's write in flight,
  // writes it again and waits for that and for the rest: until 4 s.
  e.k.clear_cost();
  e.k.enter(t, 0, 2000000000000ull);
  e.k.wakeup_flusher_threads_vmscan();
  CHECK(e.k.nr_writeback() == 25);
  REQUIRE(e.store(t, va + 8 * PAGE_SIZE + 1, 0x78));
  const uint64_t waited = e.count("kernel.io_wait_ns");
  const int writes = int(disk.writes);
  const uint64_t wbw = e.count("kernel.folio_writeback_waits");
  CHECK(msync_at(va, 32 * PAGE_SIZE, MS_SYNC, 2000000000000ull) == 0);
  CHECK(e.count("kernel.folio_writeback_waits") - wbw == 2);  // page 8's first write, then its second
  CHECK(e.k.time_now_ps() == 4000000000000ull);
  CHECK(int(disk.writes) == writes + 1);  // page 8 alone
  CHECK(e.count("kernel.io_wait_ns") - waited == 2000000000);
  CHECK(e.k.nr_file_dirty() == 0);
  CHECK(e.k.nr_writeback() == 0);
  CHECK(file->written.at(8)[1] == 0x78);

  // A range running past the mapping: what is mapped is synced, then -ENOMEM.
  REQUIRE(e.store(t, va + 3 * PAGE_SIZE + 1, 0x33));
  CHECK(msync_at(va, 64 * PAGE_SIZE, MS_SYNC, 5000000000000ull) == -ENOMEM);
  CHECK(e.k.nr_file_dirty() == 0);
  CHECK(file->written.at(3)[1] == 0x33);

  // A private mapping's copies are not the file's: nothing to write.
  const uint64_t vp = mmap_file(e, t, file, 4 * PAGE_SIZE, MAP_PRIVATE);
  REQUIRE(e.store(t, vp + 1, 0x55));
  const int before = int(disk.writes);
  CHECK(msync_at(vp, 4 * PAGE_SIZE, MS_SYNC, 6000000000000ull) == 0);
  CHECK(int(disk.writes) == before);
  CHECK(file->written.at(0)[1] == 0x10);
}
