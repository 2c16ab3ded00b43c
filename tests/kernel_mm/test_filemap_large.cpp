// SPDX-License-Identifier: GPL-2.0-only
// Large page-cache folios (docs/research-large-pagecache-folios.md): a mapping that allows folio
// orders [0, MAX_PAGECACHE_ORDER] (mapping_set_large_folios(), as XFS in 6.12) against the
// default order-0 one (ext4 in 6.12). Readahead, the mmap fault paths, reclaim, munmap and
// writeback of such folios, with counts derived from the 6.12 sources, not from the port:
//   - mm/readahead.c: page_cache_ra_order() raises the order by 2 below the mapping's max,
//     clamps it to the max and to ilog2(ra->size), takes __ffs(index) for an unaligned index and
//     lowers the order while a folio would pass `limit` = min(last page of the file, the window's
//     last page); ra_alloc_folio() sets PG_readahead on the folio whose index is the mark
//     (start + size - async_size) rounded down to that folio's order; one read_pages() (one
//     request) per call. A mapping without large folios falls back to do_page_cache_ra() ->
//     page_cache_ra_unbounded() with order-0 folios (mark = the clipped nr - async_size).
//     page_cache_async_ra(): expected = round_down(start + size - async_size, 1 << marker
//     order); on a match start += size, size = max(size, get_next_ra_size()) (32 stays 32 with
//     ra_pages 32), async_size = size; then page_cache_ra_order(marker's order).
//   - mm/filemap.c: do_sync_mmap_readahead()'s read-around: start = max(0, pgoff - 16), size 32,
//     async 8, page_cache_ra_order(0) (order 2 with large folios); filemap_fault() returns
//     VM_FAULT_RETRY (| VM_FAULT_MAJOR on a miss) whenever it dropped the fault lock for the read
//     or for do_async_mmap_readahead() (a PG_readahead folio found, !FAULT_FLAG_TRIED);
//     filemap_map_pages() skips a PG_readahead folio whole (next_uptodate_folio()), maps a
//     large folio's none PTEs in the window in runs (filemap_map_folio_range()), the first folio
//     being the one that contains start_pgoff; end_pgoff is clamped to the last page in i_size.
//   - mm/memory.c: do_fault_around() maps the 16-PTE-aligned window (the VMAs here are 2 MiB
//     aligned at file offset 0, so the window is [p & ~15, (p & ~15) + 15] in file pages);
//     finish_fault() maps one PTE for a regular file.
//   - arch/x86/mm/fault.c do_user_addr_fault(): the first attempt runs under the per-VMA lock; a
//     VM_FAULT_RETRY falls back to mmap_lock for a second attempt (FAULT_FLAG_TRIED if the first
//     was VM_FAULT_MAJOR); VM_FAULT_COMPLETED ends the fault. So a fault that reads (sync or
//     async readahead) is 2 handle_mm_fault() calls and 1 retry; a fault that only maps is 1.
// No reads wait here: the disks below complete reads at submission (as no block device does).
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "faults_env.hpp"

using namespace kmm;
using kmmtest::Env;
using kmmtest::file_byte;
using kmmtest::file_rss;

namespace {

// Every mapping here is placed at this 2 MiB-aligned hint (free in a new process): the
// fault-around windows are then aligned in file pages too, and one page table maps the first
// 512 pages. (get_unmapped_area() returns a free hint as it is, with or without the THP
// alignment of thp_get_unmapped_area().)
constexpr uint64_t kVa = 0x7e0000000000ull;

uint64_t mmap_file(Env& e, task_struct* t, address_space* f, uint64_t len, int flags, uint64_t off = 0,
                   int prot = PROT_READ | PROT_WRITE) {
  const int64_t r = e.k.sys_mmap(t, kVa, len, prot, flags, f, off);
  REQUIRE(r > 0);
  REQUIRE(uint64_t(r) == kVa);
  return uint64_t(r);
}


uint64_t lru_pages(Env& e, lru_list l) { return e.k.lruvecs().at(0).lists[l].nr_pages; }

// The page cache as "index:order" per folio in index order, 'r' after a PG_readahead one.
std::string layout(const address_space* m) {
  std::string s;
  for (const auto& [index, f] : m->i_pages) {
    if (!s.empty()) s += ' ';
    s += std::to_string(index) + ':' + std::to_string(folio_order(f));
    if (folio_test_readahead(f)) s += 'r';
  }
  return s;
}

// `n` folios of order `order` from `index` on, as layout() prints them.
std::string run(uint64_t index, unsigned order, unsigned n) {
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    if (!s.empty()) s += ' ';
    s += std::to_string(index + (uint64_t(i) << order)) + ':' + std::to_string(order);
  }
  return s;
}

std::map<unsigned, unsigned> orders(const address_space* m) {
  std::map<unsigned, unsigned> n;
  for (const auto& [index, f] : m->i_pages) ++n[folio_order(f)];
  return n;
}

// The cache's shape (__filemap_add_folio(): naturally aligned multi-index entries that do not
// overlap; page_cache_delete(): the shadow over the whole range): each entry keyed by its head
// index, found from every page it covers, no shadow inside it, nrpages the sum of the sizes.
void check_cache(const address_space* m) {
  uint64_t sum = 0, next = 0, bad = 0;
  for (const auto& [index, f] : m->i_pages) {
    const uint64_t nr = uint64_t(folio_nr_pages(f));
    if (f->index != index || index % nr != 0 || index < next || f->mapping != m) ++bad;
    for (uint64_t i = 0; i < nr; ++i) {
      if (filemap_get_entry(m, index + i) != f) ++bad;
      if (m->shadows.count(index + i)) ++bad;
    }
    sum += nr;
    next = index + nr;
  }
  CHECK(bad == 0);
  CHECK(sum == m->nrpages);
}

// The pages of [from, to) whose PTE (mapping file page p at va + p pages) is not present or does
// not map the page of the cached folio that contains p (folio_file_page()).
uint64_t bad_ptes(Env& e, task_struct* t, const address_space* m, uint64_t va, uint64_t from, uint64_t to) {
  uint64_t bad = 0;
  for (uint64_t p = from; p < to; ++p) {
    const uint64_t addr = va + p * PAGE_SIZE;
    const pte_t pte = e.pte(t, addr);
    folio* f = filemap_get_entry(m, p);
    if (!f || !e.a.pte_present(pte)) {
      ++bad;
      continue;
    }
    if (e.a.pte_pfn(pte) != e.k.folio_pfn(f) + (p - f->index) || e.folio_at(t, addr) != f) ++bad;
  }
  return bad;
}

// Whether a huge PMD at `va` maps the order-9 folio `f` (do_set_pmd()).
bool pmd_maps(Env& e, task_struct* t, uint64_t va, const folio* f) {
  return f && e.pmd_huge(t, va) && e.a.pmd_pfn(e.pmd(t, va)) == e.k.folio_pfn(f) && (va & ~PMD_MASK) == 0;
}

// A disk that completes reads at once and keeps the size of every request; writes take
// `write_ps`.
struct Disk : BlockDev {
  uint64_t write_ps = 0;
  std::vector<uint64_t> reads, writes;  // bytes per request
  uint64_t submit_read(uint64_t submit_ps, uint64_t bytes) override {
    reads.push_back(bytes);
    return submit_ps;
  }
  uint64_t submit_write(uint64_t submit_ps, uint64_t bytes) override {
    writes.push_back(bytes);
    return submit_ps + write_ps;
  }
};

// Loads a byte of each page of [from, to) in order, each checked against the file.
void touch(Env& e, task_struct* t, const address_space* m, uint64_t va, uint64_t from, uint64_t to) {
  for (uint64_t p = from; p < to; ++p) {
    const uint64_t off = p * PAGE_SIZE + (p * 37) % PAGE_SIZE;
    INFO("page " << p);
    REQUIRE(e.load(t, va + off) == file_byte(m, off));
  }
}

// What a cold sequential read of a 512-page file costs on either filesystem (T1 and T1-ext4,
// derived below): 16 requests of 32 pages, one major fault, 33 faults handled in 50 attempts with
// 17 retries, every page mapped by fault-around, each PTE its own page's.
void check_sequential_read(Env& e, const Disk& disk, task_struct* t, const address_space* file, uint64_t va) {
  CHECK(file->nrpages == 512);
  check_cache(file);
  CHECK(e.count("kernel.io_requests") == 16);
  CHECK(disk.reads == std::vector<uint64_t>(16, 32 * PAGE_SIZE));
  CHECK(e.count("kernel.filemap_read_pages") == 512);
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("faults.total") == 33);
  CHECK(e.count("kernel.handle_mm_fault") == 50);
  CHECK(e.count("kernel.filemap_fault_retry") == 17);
  CHECK(e.count("kernel.fault_around_ptes") == 512);
  CHECK(file_rss(t) == 512);
  CHECK(bad_ptes(e, t, file, va, 0, 512) == 0);
  CHECK(lru_pages(e, LRU_INACTIVE_FILE) == 512);
}

// T1's layout: 8 x order 2, 2 x order 4, then order 5 up to `pages`.
std::string sequential_layout(uint64_t pages) {
  return run(0, 2, 8) + " " + run(32, 4, 2) + " " + run(64, 5, unsigned((pages - 64) / 32));
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// T1: a cold 2 MiB file read through a private mapping, a byte of each page in order.
//
// Derivation (the rules in the header), ra_pages 32, 512 pages:
//   page 0: miss: read-around [0, 32) (start max(0, 0 - 16) = 0), order 0 + 2 = 2: 0:2 ... 28:2,
//     PG_readahead on round_down(24, 4) = 24; request 1; VM_FAULT_RETRY|MAJOR; the retry's
//     fault-around [0, 15] maps folios 0, 4, 8, 12 (4 set_pte_range() of 4).
//   page 16: fault-around [16, 31] maps 16, 20, 28 (24 is PG_readahead): 1 attempt.
//   page 24: fault-around maps nothing; filemap_fault() finds 24:2 marked: page_cache_async_ra():
//     expected round_down(0 + 32 - 8, 4) = 24: the window [32, 64), order 2 + 2 = 4: 32:4 (marked:
//     mark 32) 48:4; request 2; RETRY; the retry maps 24-27.
//   page 32: expected round_down(32 + 32 - 32, 16) = 32: [64, 96), order min(4 + 2, ilog2(32)) =
//     5: 64:5 (marked); request 3; the retry maps 32-47 (one run of 16).
//   page 48: fault-around maps 48-63: 1 attempt.
//   page 64 + 32k (k = 0..13): async: [96 + 32k, 128 + 32k) as one order-5 folio, marked; the
//     retry maps 64 + 32k .. +15; page 80 + 32k: fault-around maps the folio's other half (the
//     first folio is the one containing start_pgoff). At page 480 the window [512, 544) is past
//     EOF (limit 511 < index 512): nothing is read, but the lock was dropped: RETRY.
//   So: folios {2: 8, 4: 2, 5: 14} = 24; requests 1 + 1 + 1 + 13 (64..448) = 16 of 32 pages;
//   faults 0, 16, 24, 32, 48 + 14 async + 14 minor = 33; attempts 2 + 1 + 2 + 2 + 1 + 14 * 2 +
//   14 = 50; retries 1 (major) + 1 (24) + 1 (32) + 14 = 17; every PTE by fault-around (512), in
//   8 runs of 4 and 30 of 16; no PG_readahead left (480's cleared by its own async call).
// The same file on an order-0 mapping (T1-ext4): the read-around [0, 32) marks 24; page 24's
// async read is [32, 64) marked at 32 (page_cache_ra_unbounded(): mark = 32 - 32 = 0); every
// later window is [32k, 32k + 32) marked at its first page, read from the fault on page 32k - 32:
// the same faults (0, 16, 24, then async at 32, 64, ..., 480 and minor at 48, 80, ..., 496) and
// the same 16 requests, 33 faults, 50 attempts and 17 retries; only the folios differ.
TEST_CASE("filemap large: a cold sequential read of a 2 MiB file makes folios of order 2, 4, then 5, each PTE mapping its page", "[filemap][large]") {
  Env e;
  Disk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("xfs", 512 * PAGE_SIZE, 42);
  mapping_set_large_folios(file);
  REQUIRE(mapping_large_folio_support(file));
  const uint64_t va = mmap_file(e, t, file, 512 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  touch(e, t, file, va, 0, 512);
  e.k.lru_add_drain();

  CHECK(layout(file) == sequential_layout(512));
  CHECK(orders(file) == std::map<unsigned, unsigned>{{2, 8}, {4, 2}, {5, 14}});
  CHECK(e.count("kernel.pagecache_large_folios") == 24);
  // 16 read requests of 32 pages each: one read_pages() per page_cache_ra_order() call, the
  // whole batch one request whatever its folios' sizes. Each PTE maps its own page of the folio
  // that contains it, read-only (a private read).
  check_sequential_read(e, disk, t, file, va);
  CHECK(e.rss(t) == 0);
  CHECK_FALSE(e.writable(t, va + 100 * PAGE_SIZE));
  // INV3: the cache's nr references and one per PTE (filemap_map_folio_range()'s
  // folio_ref_add(count)); every page mapped once (_large_mapcount, _nr_pages_mapped); large
  // folios are put on the LRU at once (no per-CPU batch), all inactive.
  for (const auto& [index, f] : file->i_pages) {
    INFO("folio " << index);
    const int nr = int(folio_nr_pages(f));
    CHECK(folio_ref_count(f) == 2 * nr);
    CHECK(folio_mapcount(f) == nr);
    CHECK(folio_nr_pages_mapped(f) == nr);
    CHECK_FALSE(folio_test_partially_mapped(f));
  }
  CHECK(lru_pages(e, LRU_ACTIVE_FILE) == 0);
}

TEST_CASE("filemap large: the same read on a mapping without large folios (ext4) makes 512 order-0 folios with the same requests, faults and retries", "[filemap][large]") {
  Env e;
  Disk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("ext4", 512 * PAGE_SIZE, 42);
  REQUIRE_FALSE(mapping_large_folio_support(file));
  const uint64_t va = mmap_file(e, t, file, 512 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  touch(e, t, file, va, 0, 512);
  e.k.lru_add_drain();

  CHECK(orders(file) == std::map<unsigned, unsigned>{{0, 512}});
  CHECK(file->i_pages.size() == 512);
  CHECK(e.count("kernel.pagecache_large_folios") == 0);
  check_sequential_read(e, disk, t, file, va);
  for (const auto& [index, f] : file->i_pages) {
    INFO("folio " << index);
    CHECK(folio_ref_count(f) == 2);
    CHECK(folio_mapcount(f) == 1);
    CHECK_FALSE(folio_test_readahead(f));
  }
}

// ------------------------------------------------------------------------------------------------
// T2: the "page 100" case of test_filemap.cpp's first test on a large-folio mapping.
//
// Read-around at 100: start 84, size 32, async 8, mark 108; order 2; limit min(255, 115) = 115;
// 84 is 4-aligned: 84:2 88:2 ... 112:2, PG_readahead on round_down(108, 4) = 108 (a 4-page
// folio). The retry's fault-around [96, 111] maps 96:2 100:2 104:2 and skips 108:2 whole: 12
// PTEs (the order-0 version maps 15: only page 108 is skipped there).
TEST_CASE("filemap large: read-around of page 100 reads 8 order-2 folios, fault-around skips the whole marked folio, and its access reads the next window", "[filemap][large]") {
  Env e;
  Disk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("data", 1 << 20, 42);  // 256 pages
  mapping_set_large_folios(file);
  const uint64_t va = mmap_file(e, t, file, 1 << 20, MAP_PRIVATE);
  auto page = [&](uint64_t p) { return va + p * PAGE_SIZE; };

  REQUIRE(e.load(t, page(100) + 5) == file_byte(file, 100 * PAGE_SIZE + 5));
  CHECK(layout(file) == "84:2 88:2 92:2 96:2 100:2 104:2 108:2r 112:2");
  CHECK(file->nrpages == 32);
  check_cache(file);
  CHECK(e.count("kernel.io_requests") == 1);
  CHECK(disk.reads == std::vector<uint64_t>{32 * PAGE_SIZE});
  CHECK(e.count("kernel.filemap_read_pages") == 32);
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("kernel.filemap_fault_retry") == 1);
  CHECK(e.count("faults.total") == 1);
  CHECK(e.count("kernel.handle_mm_fault") == 2);
  CHECK(e.count("kernel.fault_around_ptes") == 12);
  CHECK(file_rss(t) == 12);
  CHECK(bad_ptes(e, t, file, va, 96, 108) == 0);
  // The marked folio is found from any of its pages; none of its pages is mapped.
  folio* marked = filemap_get_entry(file, 110);
  REQUIRE(marked);
  CHECK(marked->index == 108);
  CHECK(folio_test_readahead(marked));
  for (uint64_t p = 108; p < 112; ++p) CHECK(pte_none(e.pte(t, page(p))));
  CHECK(pte_none(e.pte(t, page(95))));
  CHECK(pte_none(e.pte(t, page(112))));
  CHECK(filemap_get_entry(file, 83) == nullptr);
  CHECK(filemap_get_entry(file, 116) == nullptr);

  SECTION("a read of a cached page next to it is a minor fault: fault-around maps the cached folio 112 only") {
    REQUIRE(e.load(t, page(113)) == file_byte(file, 113 * PAGE_SIZE));
    CHECK(e.count("kernel.filemap_read_pages") == 32);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.count("kernel.handle_mm_fault") == 3);
    CHECK(e.k.last_fault().kind == FaultKind::file_map);
    // [112, 127]: only 112:2 is cached.
    CHECK(file_rss(t) == 16);
    CHECK(bad_ptes(e, t, file, va, 112, 116) == 0);
    CHECK(pte_none(e.pte(t, page(116))));
  }
  SECTION("the access to the marked folio reads the next window in folios of order 2, 3, 4 and 2 (page_cache_async_ra())") {
    REQUIRE(e.load(t, page(108)) == file_byte(file, 108 * PAGE_SIZE));
    // expected = round_down(84 + 32 - 8, 4) = 108 = the faulting index: the window moves to
    // [116, 148), all of it async (mark 116); page_cache_ra_order(order 2) -> order 4;
    // limit min(255, 147) = 147. 116: __ffs(116) = 2 -> 116:2, marked (round_down(116, 4));
    // 120: __ffs = 3 -> 120:3; 128: aligned -> 128:4 (ends at 143); 144: order 4 and 3 pass 147,
    // order 2 ends at 147 -> 144:2. 4 + 8 + 16 + 4 = 32 pages, one request.
    CHECK(layout(file) ==
          "84:2 88:2 92:2 96:2 100:2 104:2 108:2 112:2 116:2r 120:3 128:4 144:2");
    CHECK(file->nrpages == 64);
    check_cache(file);
    CHECK(e.count("kernel.io_requests") == 2);
    CHECK(disk.reads == std::vector<uint64_t>{32 * PAGE_SIZE, 32 * PAGE_SIZE});
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.count("kernel.filemap_fault_retry") == 2);  // not a major fault, but the lock was dropped
    CHECK(e.count("faults.total") == 2);
    CHECK(e.count("kernel.handle_mm_fault") == 4);
    // The retry (no FAULT_FLAG_TRIED: not major) maps the unmarked folio by fault-around.
    CHECK(file_rss(t) == 16);
    CHECK(bad_ptes(e, t, file, va, 96, 112) == 0);

    // The next mark (116:2): expected = round_down(116 + 32 - 32, 4) = 116: [148, 180) with the
    // same shape shifted by 32 (148:2 marked, 152:3, 160:4, 176:2 ending at the limit 179): the
    // order does not grow past 4 while the marker folio is order 2. Fault-around [112, 127]
    // maps 112:2 and 120:3 (one run of 8) on the first attempt, 116:2 on the retry.
    REQUIRE(e.load(t, page(116)) == file_byte(file, 116 * PAGE_SIZE));
    CHECK(layout(file) == "84:2 88:2 92:2 96:2 100:2 104:2 108:2 112:2 116:2 120:3 128:4 144:2 "
                          "148:2r 152:3 160:4 176:2");
    CHECK(file->nrpages == 96);
    CHECK(e.count("kernel.io_requests") == 3);
    CHECK(e.count("kernel.filemap_fault_retry") == 3);
    CHECK(e.count("kernel.handle_mm_fault") == 6);
    CHECK(file_rss(t) == 32);
    CHECK(bad_ptes(e, t, file, va, 96, 128) == 0);
  }
  SECTION("munmap unmaps, the page cache keeps the folios whole") {
    REQUIRE(e.k.sys_munmap(t, va, 1 << 20) == 0);
    CHECK(file_rss(t) == 0);
    CHECK(file->nrpages == 32);
    check_cache(file);
    for (const auto& [index, f] : file->i_pages) {
      CHECK(folio_mapcount(f) == 0);
      CHECK(folio_ref_count(f) == int(folio_nr_pages(f)));  // the cache's references only
    }
  }
}

// ------------------------------------------------------------------------------------------------
// T3: the end of the file. A 70-page file in a 72-page mapping, read in order.
//
// Large folios: [0, 32) 8 x o2 marked 24; page 24: [32, 64) = 32:4 (marked) 48:4; page 32:
// [64, 96) at order 5 with limit min(69, 95) = 69: 64: order 5, 4 and 3 pass 69 -> 64:2, marked
// (mark 64 = round_down(64, 4)); 68: __ffs(68) = 2, 68 + 3 passes 69 -> 68:1; 70 > 69 ends it:
// a request of 6 pages. Page 48: minor. Page 64: fault-around [64, 69] (end_pgoff clamped to
// the file's last page) maps 68:1 and skips 64:2 (marked): filemap_fault(): async: expected
// round_down(64, 4) = 64: the window [96, 128) is past the limit: nothing read; RETRY; the retry
// maps 64-67. So folios {2: 9, 4: 2, 1: 1}, 3 requests (32, 32, 6), faults 0, 16, 24, 32, 48,
// 64 = 6, attempts 2 + 1 + 2 + 2 + 1 + 2 = 10, retries 4.
// Order 0 (ext4): page 32's window is do_page_cache_ra() clipped to [64, 70): its mark
// (page_cache_ra_unbounded(): 6 - 32 < 0) is never reached: no PG_readahead, so page 64 is a
// minor fault: faults 6, attempts 9, retries 3, the same 3 requests.
TEST_CASE("filemap large: at the end of the file readahead lowers the order so that no folio passes it, and no PTE maps past it", "[filemap][large]") {
  for (const bool large : {true, false}) {
    INFO("large folios: " << large);
    Env e;
    Disk disk;
    e.k.set_block_device(&disk);
    task_struct* t = e.proc("p");
    address_space* file = e.k.file_create("short", 70 * PAGE_SIZE, 13);
    if (large) mapping_set_large_folios(file);
    const uint64_t va = mmap_file(e, t, file, 72 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    touch(e, t, file, va, 0, 70);

    if (large) {
      CHECK(layout(file) == run(0, 2, 8) + " 32:4 48:4 64:2 68:1");
      CHECK(orders(file) == std::map<unsigned, unsigned>{{1, 1}, {2, 9}, {4, 2}});
    } else {
      CHECK(orders(file) == std::map<unsigned, unsigned>{{0, 70}});
    }
    CHECK(file->nrpages == 70);
    check_cache(file);
    CHECK(e.count("kernel.io_requests") == 3);
    CHECK(disk.reads == std::vector<uint64_t>{32 * PAGE_SIZE, 32 * PAGE_SIZE, 6 * PAGE_SIZE});
    CHECK(e.count("kernel.filemap_read_pages") == 70);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.count("faults.total") == 6);
    CHECK(e.count("kernel.handle_mm_fault") == (large ? 10u : 9u));
    CHECK(e.count("kernel.filemap_fault_retry") == (large ? 4u : 3u));
    CHECK(file_rss(t) == 70);
    CHECK(bad_ptes(e, t, file, va, 0, 70) == 0);
    CHECK(filemap_get_entry(file, 70) == nullptr);
    for (const auto& [index, f] : file->i_pages) CHECK_FALSE(folio_test_readahead(f));
    // Nothing maps the mapping's pages past the end of the file...
    CHECK(pte_none(e.pte(t, va + 70 * PAGE_SIZE)));
    CHECK(pte_none(e.pte(t, va + 71 * PAGE_SIZE)));
    // ... and an access there is SIGBUS (filemap_fault(): index >= DIV_ROUND_UP(i_size)); its
    // fault-around ([64, 69] after the clamp) finds every PTE present.
    e.k.enter(t, 0);
    const FaultReturn r =
        e.k.handle_user_fault(t, va + 70 * PAGE_SIZE, mmusim::pg::x86_pf_error_code(false, false, true, false), 0);
    CHECK(r.sigbus);
    CHECK(e.count("faults.sigbus") == 1);
    CHECK(pte_none(e.pte(t, va + 70 * PAGE_SIZE)));
    CHECK(file_rss(t) == 70);
    // CACHE-L4 sees a PTE at or past the end: the file cut to 69 pages under the mapping (the
    // port has no truncation, which would unmap the pages first) leaves page 69 mapped beyond it.
    const uint64_t size = file->i_size;
    file->i_size = 69 * PAGE_SIZE;
    CHECK_THROWS_WITH(e.k.check_invariants("cut", true), Catch::Contains("page index 0x45 at or past the end of the file"));
    file->i_size = size;
    CHECK_NOTHROW(e.k.check_invariants("restored", true));
  }
}

// ------------------------------------------------------------------------------------------------
// T7: reclaim of clean, unmapped large folios (mm/vmscan.c).
//
// A 128-page file read in order through a mapping that is then unmapped: 0:2 ... 28:2 32:4 48:4
// 64:5 96:5 (T1's shape; the async read at page 96 is past the end), all clean and unmapped on
// the inactive file list, the oldest (the tail) folio 0. No swap: get_scan_count() scans the
// file lists only, `size >> priority` pages per priority, isolate_lru_folios() counting whole
// folios' pages (scan += folio_nr_pages()) until scan >= nr_to_scan. An unmapped clean folio
// is reclaimed on its first look (folio_check_references(): no referenced PTE ->
// FOLIOREF_RECLAIM_CLEAN or FOLIOREF_RECLAIM), whole: __remove_mapping() -> one
// workingset_eviction() (nonresident_age += nr, the shadow's eviction = the age before it) and
// __filemap_remove_folio() storing that one shadow over all its indices.
// try_to_free_pages(32): nr_to_reclaim 32. Priorities 12-8: 128 >> p = 0. 7: 1 -> folio 0 (4).
// 6: 124 >> 6 = 1 -> folio 4. 5: 120 >> 5 = 3 -> folio 8. 4: 116 >> 4 = 7 -> 12, 16 (8 pages).
// 3: 108 >> 3 = 13 -> 20, 24, 28, then 32:4 (scan 12 < 13): 28 pages. 4+4+4+8+28 = 48 >= 32:
// stop. Evicted in index order, so each shadow's eviction (from age 0) is its folio's head index.
// try_to_free_pages(128): then 2: 80 >> 2 = 20 -> 48:4, 64:5 (48 pages); 1: 32 >> 1 = 16 ->
// 96:5: 128.
TEST_CASE("reclaim: a clean large page-cache folio is reclaimed whole, one shadow over all its pages, and read back from its shadows", "[filemap][large][reclaim]") {
  Env e;
  Disk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("cache", 128 * PAGE_SIZE, 17);
  mapping_set_large_folios(file);
  const uint64_t va = mmap_file(e, t, file, 128 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  touch(e, t, file, va, 0, 128);
  REQUIRE(layout(file) == sequential_layout(128));
  REQUIRE(e.count("kernel.io_requests") == 4);
  REQUIRE(e.k.sys_munmap(t, va, 128 * PAGE_SIZE) == 0);
  e.k.lru_add_drain();
  REQUIRE(file_rss(t) == 0);
  REQUIRE(lru_pages(e, LRU_INACTIVE_FILE) == 128);
  REQUIRE(lru_pages(e, LRU_ACTIVE_FILE) == 0);
  std::map<uint64_t, uint64_t> head;  // page -> its folio's first page, before the reclaim
  for (const auto& [index, f] : file->i_pages) {
    REQUIRE(folio_mapcount(f) == 0);
    REQUIRE_FALSE(folio_test_dirty(f));
    REQUIRE(folio_ref_count(f) == int(folio_nr_pages(f)));
    for (uint64_t i = 0; i < uint64_t(folio_nr_pages(f)); ++i) head[index + i] = index;
  }
  const lruvec& lv = e.k.lruvecs().at(0);
  const uint64_t age0 = lv.nonresident_age;
  // Every evicted page's shadow is its folio's, and says when that folio went.
  auto check_shadows = [&](uint64_t from, uint64_t to) {
    uint64_t bad = 0;
    for (uint64_t p = from; p < to; ++p) {
      auto s = file->shadows.find(p);
      if (s == file->shadows.end() || s->second.eviction - age0 != head.at(p) || s->second.workingset) ++bad;
    }
    return bad;
  };
  e.k.enter(t, 0);

  SECTION("32 pages asked: the 8 order-2 folios and the order-4 one at 32 go, 48 pages, each whole") {
    CHECK(e.k.try_to_free_pages(0, 32) == 48);
    e.k.check_invariants("try_to_free_pages", true);
    CHECK(layout(file) == "48:4 64:5 96:5");
    CHECK(file->nrpages == 80);
    check_cache(file);
    CHECK(file->shadows.size() == 48);
    CHECK(check_shadows(0, 48) == 0);
    CHECK(lv.nonresident_age - age0 == 48);
    CHECK(e.count("kernel.allocstall") == 1);
    CHECK(e.count("kernel.pgsteal_direct") == 48);
    CHECK(e.count("kernel.pgscan_direct") == 48);  // PGSCAN_DIRECT counts pages (total_scan)
    CHECK(lru_pages(e, LRU_INACTIVE_FILE) == 80);

    // Read back: page 5 misses; read-around [0, 32) in order-2 folios (readahead decides the
    // orders, not the evicted folios'), each taking the shadows of its range:
    // workingset_refault() counts each folio's pages; the refault distances (48 - eviction >=
    // 20) are more than the active list (0): none is activated.
    const uint64_t vb = mmap_file(e, t, file, 128 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    REQUIRE(e.load(t, vb + 5 * PAGE_SIZE + 3) == file_byte(file, 5 * PAGE_SIZE + 3));
    CHECK(e.count("kernel.pgmajfault") == 2);
    CHECK(layout(file) == run(0, 2, 6) + " 24:2r 28:2 48:4 64:5 96:5");
    CHECK(e.count("kernel.workingset_refault_file") == 32);
    CHECK(file->shadows.size() == 16);
    CHECK(check_shadows(32, 48) == 0);
    check_cache(file);
    // The rest of the window: page 24's async readahead [32, 64) at order 4 adds 32:4 (marked),
    // then meets 48:4 (-EEXIST): what was added is read (16 pages), and do_page_cache_ra()
    // continues from the failing index 48 in order-0 pages, all cached: nothing more.
    touch(e, t, file, vb, 0, 32);
    CHECK(layout(file) == run(0, 2, 8) + " 32:4r 48:4 64:5 96:5");
    CHECK(file->nrpages == 128);
    CHECK(file->shadows.empty());
    check_cache(file);
    CHECK(e.count("kernel.workingset_refault_file") == 48);
    CHECK(e.count("kernel.workingset_activate_file") == 0);
    CHECK(e.count("kernel.io_requests") == 6);
    CHECK(disk.reads.back() == 16 * PAGE_SIZE);
    CHECK(bad_ptes(e, t, file, vb, 0, 32) == 0);
  }
  SECTION("everything asked: every folio goes whole, 128 pages, and a refault reads around it in order-2 folios") {
    CHECK(e.k.try_to_free_pages(0, 128) == 128);
    e.k.check_invariants("try_to_free_pages", true);
    CHECK(file->nrpages == 0);
    CHECK(file->i_pages.empty());
    CHECK(file->shadows.size() == 128);
    CHECK(check_shadows(0, 128) == 0);
    CHECK(lv.nonresident_age - age0 == 128);
    CHECK(e.count("kernel.pgsteal_direct") == 128);
    CHECK(lru_pages(e, LRU_INACTIVE_FILE) == 0);

    // Page 100 of the evicted 96:5 comes back in the read-around [84, 116): 8 x o2, marked 108.
    const uint64_t vb = mmap_file(e, t, file, 128 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    REQUIRE(e.load(t, vb + 100 * PAGE_SIZE + 7) == file_byte(file, 100 * PAGE_SIZE + 7));
    CHECK(layout(file) == "84:2 88:2 92:2 96:2 100:2 104:2 108:2r 112:2");
    CHECK(file->shadows.size() == 96);
    CHECK(check_shadows(0, 84) == 0);
    CHECK(check_shadows(116, 128) == 0);
    CHECK(e.count("kernel.workingset_refault_file") == 32);
    check_cache(file);
  }
}

// ------------------------------------------------------------------------------------------------
// T8: munmap of half of a mapped order-5 folio (mm/memory.c zap_present_ptes(), mm/rmap.c
// __folio_remove_rmap()). Pages 0-95 of T1's file read in order: 64:5 is mapped by 32 PTEs
// (64-79 by page 64's retry, 80-95 by page 80's fault-around). Unmapping [80, 96) zaps one batch
// of 16 (folio_pte_batch()), drops 16 mappings and 16 references; a file folio is never queued
// for deferred split (only anon: `partially_mapped && folio_test_anon()`), so it stays whole in
// the cache.
TEST_CASE("munmap: unmapping half of a large page-cache folio leaves it whole in the cache, mapped by the other half", "[filemap][large]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("xfs", 512 * PAGE_SIZE, 5);
  mapping_set_large_folios(file);
  const uint64_t va = mmap_file(e, t, file, 512 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  touch(e, t, file, va, 0, 96);
  REQUIRE(layout(file) == run(0, 2, 8) + " 32:4 48:4 64:5 96:5r");
  folio* f = filemap_get_entry(file, 80);
  REQUIRE(f);
  REQUIRE(f->index == 64);
  REQUIRE(folio_order(f) == 5);
  REQUIRE(file_rss(t) == 96);
  REQUIRE(folio_mapcount(f) == 32);
  REQUIRE(folio_ref_count(f) == 64);  // 32 for the cache, 32 for the PTEs
  const uint64_t zapped = e.count("kernel.ptes_zapped");

  REQUIRE(e.k.sys_munmap(t, va + 80 * PAGE_SIZE, 16 * PAGE_SIZE) == 0);
  CHECK(e.count("kernel.ptes_zapped") - zapped == 16);
  CHECK(file_rss(t) == 80);
  CHECK(filemap_get_entry(file, 80) == f);
  CHECK(filemap_get_entry(file, 95) == f);
  CHECK(folio_order(f) == 5);
  CHECK(f->mapping == file);
  CHECK(file->nrpages == 128);
  check_cache(file);
  CHECK(folio_mapcount(f) == 16);
  CHECK(folio_large_mapcount(f) == 16);
  CHECK(folio_nr_pages_mapped(f) == 16);
  CHECK_FALSE(folio_test_partially_mapped(f));
  CHECK(folio_ref_count(f) == 48);
  CHECK(bad_ptes(e, t, file, va, 64, 80) == 0);
  for (uint64_t p = 80; p < 96; ++p) CHECK(pte_none(e.pte(t, va + p * PAGE_SIZE)));

  // The rest of it goes with the rest of the mapping: mapped nowhere, still cached.
  REQUIRE(e.k.sys_munmap(t, va, 80 * PAGE_SIZE) == 0);
  CHECK(folio_mapcount(f) == 0);
  CHECK(folio_nr_pages_mapped(f) == 0);
  CHECK(folio_ref_count(f) == 32);
  CHECK_FALSE(folio_test_partially_mapped(f));
  CHECK(filemap_get_entry(file, 64) == f);
}

// ------------------------------------------------------------------------------------------------
// T9: shared writes to a large folio (mm/memory.c wp_page_shared(), do_shared_fault(),
// fault_dirty_shared_page(); folio_mark_dirty() -> folio_account_dirtied() accounts
// folio_nr_pages(); msync(MS_SYNC) -> vfs_fsync_range() -> writeback of the folio as one unit,
// folio_mkclean() over every PTE of it).
// Pages 0-95 of a 512-page file read through a shared mapping as in T1: 64:5 mapped by 32
// read-only PTEs (write notification), 96:5 read by page 64's async readahead and marked:
// faults 0, 16, 24, 32, 48, 64, 80 = 7, attempts 2 + 1 + 2 + 2 + 1 + 2 + 1 = 11, 4 requests.
TEST_CASE("filemap large: shared writes dirty a large folio once for all its pages, and msync writes it as one request", "[filemap][large][writeback][msync]") {
  Env e;
  Disk disk;
  disk.write_ps = 1000000000000ull;  // writes take 1 s
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("shared", 512 * PAGE_SIZE, 33);
  mapping_set_large_folios(file);
  const uint64_t va = mmap_file(e, t, file, 512 * PAGE_SIZE, MAP_SHARED);
  auto page = [&](uint64_t p) { return va + p * PAGE_SIZE; };
  touch(e, t, file, va, 0, 96);
  REQUIRE(layout(file) == run(0, 2, 8) + " 32:4 48:4 64:5 96:5r");
  REQUIRE(e.count("faults.total") == 7);
  REQUIRE(e.count("kernel.handle_mm_fault") == 11);
  REQUIRE(disk.reads.size() == 4);
  REQUIRE(file_rss(t) == 96);
  folio* f = filemap_get_entry(file, 64);
  REQUIRE(f);
  REQUIRE(folio_order(f) == 5);
  for (uint64_t p = 64; p < 96; ++p) REQUIRE_FALSE(e.writable(t, page(p)));
  REQUIRE(e.k.nr_file_dirty() == 0);

  SECTION("32 stores: 32 write-notify faults, the folio dirtied and accounted once, then written whole") {
    // The first store: wp_page_shared() -> ->page_mkwrite: folio_mark_dirty() accounts the
    // folio's 32 pages; the PTE becomes writable; the others stay read-only.
    REQUIRE(e.store(t, page(64) + 1, 0x80));
    CHECK(e.k.nr_file_dirty() == 32);
    CHECK(e.count("kernel.nr_dirtied") == 32);
    CHECK(folio_test_dirty(f));
    CHECK(e.writable(t, page(64)));
    CHECK_FALSE(e.writable(t, page(65)));
    // Each further page takes its own first-write fault (one per PTE: finish_mkwrite_fault()
    // -> wp_page_reuse() of that PTE); the folio is already dirty: nothing more is accounted.
    // Each fault completes in its first attempt (fault_dirty_shared_page(): VM_FAULT_COMPLETED).
    for (uint64_t p = 65; p < 96; ++p) REQUIRE(e.store(t, page(p) + 1, uint8_t(0x80 + (p - 64))));
    CHECK(e.count("faults.total") == 7 + 32);
    CHECK(e.count("kernel.handle_mm_fault") == 11 + 32);
    CHECK(e.count("kernel.do_wp_page") == 32);
    CHECK(e.count("kernel.wp_copy") == 0);
    CHECK(e.k.nr_file_dirty() == 32);
    CHECK(e.count("kernel.nr_dirtied") == 32);
    CHECK(e.k.memcgs()[0]->nr_file_dirty == 32);
    CHECK(file->dirty_tags == std::set<uint64_t>{64});  // the tag of the multi-index entry
    CHECK(file->inode_dirty);
    for (const auto& [index, g] : file->i_pages) CHECK(folio_test_dirty(g) == (g == f));
    for (uint64_t p = 64; p < 96; ++p) {
      INFO("page " << p);
      CHECK(e.writable(t, page(p)));
      CHECK(e.a.pte_dirty(e.pte(t, page(p))));
      CHECK(e.k.phys().frame_data(e.k.folio_pfn(f) + (p - 64))[1] == 0x80 + (p - 64));
    }
    CHECK(bad_ptes(e, t, file, va, 0, 96) == 0);
    CHECK(disk.reads.size() == 4);  // no read: the folio was cached

    // msync(MS_SYNC) of the mapping at time 0: the one dirty folio is one request of its 32
    // pages; folio_mkclean() write-protects and cleans each of its 32 PTEs; the call waits the
    // disk's second for the write.
    e.k.clear_cost();
    e.k.enter(t, 0, 0);
    REQUIRE(e.k.sys_msync(t, va, 512 * PAGE_SIZE, MS_SYNC) == 0);
    e.k.check_invariants("msync", true);
    CHECK(disk.writes == std::vector<uint64_t>{32 * PAGE_SIZE});
    CHECK(e.count("kernel.file_write_requests") == 1);
    CHECK(e.count("kernel.folio_mkclean_ptes") == 32);
    CHECK(e.count("kernel.fsyncs") == 1);
    CHECK(e.count("kernel.folio_writeback_waits") == 1);
    CHECK(e.count("kernel.io_wait_ns") == 1000000000);
    CHECK(e.count("kernel.nr_written") == 32);
    CHECK(e.k.nr_file_dirty() == 0);
    CHECK(e.k.nr_writeback() == 0);
    CHECK_FALSE(folio_test_dirty(f));
    CHECK_FALSE(folio_test_writeback(f));
    CHECK(file->dirty_tags.empty());
    CHECK_FALSE(file->inode_dirty);
    CHECK(file->written.size() == 32);
    for (uint64_t p = 64; p < 96; ++p) {
      INFO("page " << p);
      REQUIRE(file->written.count(p) == 1);
      CHECK(file->written.at(p)[1] == 0x80 + (p - 64));
      CHECK(file->written.at(p)[2] == file_byte(file, p * PAGE_SIZE + 2));
      CHECK_FALSE(e.writable(t, page(p)));
      CHECK_FALSE(e.a.pte_dirty(e.pte(t, page(p))));
    }

    // A store to any page of it faults again and dirties all of it again.
    const uint64_t faults = e.count("faults.total");
    REQUIRE(e.store(t, page(70) + 1, 0x11));
    CHECK(e.count("faults.total") == faults + 1);
    CHECK(e.k.nr_file_dirty() == 32);
    CHECK(e.count("kernel.nr_dirtied") == 64);
    CHECK(file->dirty_tags == std::set<uint64_t>{64});
  }
  SECTION("a store to an unmapped page of the marked folio: async readahead by the next miss, then one writable PTE and the whole folio dirty") {
    // Page 100 (in 96:5, PG_readahead, no PTE): do_shared_fault() -> filemap_fault(): the marked
    // folio starts page_cache_async_ra(): expected round_down(96 + 32 - 32, 32) = 96 != 100:
    // page_cache_next_miss(101) = 128 (96:5 covers up to 127), size = 28 + 32 -> 32
    // (get_next_ra_size()), page_cache_ra_order(order 5) at 128: 128:5 marked, one request;
    // RETRY (not major). The second attempt maps page 100 alone (finish_fault(): one PTE for a
    // regular file) after ->page_mkwrite dirtied the folio: 32 pages accounted.
    REQUIRE(e.store(t, page(100) + 1, 0x5a));
    CHECK(layout(file) == run(0, 2, 8) + " 32:4 48:4 64:5 96:5 128:5r");
    CHECK(disk.reads.size() == 5);
    CHECK(disk.reads.back() == 32 * PAGE_SIZE);
    CHECK(e.count("faults.total") == 8);
    CHECK(e.count("kernel.handle_mm_fault") == 13);
    CHECK(e.count("kernel.do_shared_fault") == 2);
    CHECK(e.count("kernel.filemap_fault_retry") == 5);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(file_rss(t) == 97);
    CHECK(e.writable(t, page(100)));
    CHECK(bad_ptes(e, t, file, va, 100, 101) == 0);
    for (uint64_t p = 96; p < 128; ++p) {
      if (p != 100) CHECK(pte_none(e.pte(t, page(p))));
    }
    folio* g = filemap_get_entry(file, 100);
    REQUIRE(g);
    CHECK(g->index == 96);
    CHECK(folio_test_dirty(g));
    CHECK(folio_mapcount(g) == 1);
    CHECK(e.k.nr_file_dirty() == 32);
    CHECK(e.count("kernel.nr_dirtied") == 32);
    CHECK(file->dirty_tags == std::set<uint64_t>{96});
    CHECK(e.load(t, page(100) + 1) == 0x5a);
    CHECK(e.load(t, page(100) + 2) == file_byte(file, 100 * PAGE_SIZE + 2));
  }
}

// filemap_map_order0_folio() / filemap_map_folio_range(): a page fault-around maps forgives one
// mmap_miss unless its folio is workingset ("if there are too many folios that are recently
// evicted in a file, they will probably continue to be evicted ... don't decrease mmap_miss").
TEST_CASE("filemap: fault-around forgives mmap_miss only for folios that are not workingset", "[filemap][large]") {
  for (const bool large : {false, true}) {
    INFO((large ? "xfs-like" : "ext4-like"));
    Env e;
    task_struct* t = e.proc("p");
    address_space* file = e.k.file_create("ws", 64 * PAGE_SIZE, 13);
    if (large) mapping_set_large_folios(file);
    e.k.file_fill_cache(file);
    // Pages 16-31 were evicted and read again after being active (PG_workingset).
    for (uint64_t i = 16; i < 32; ++i) filemap_get_entry(file, i)->flags |= PG_workingset;
    const uint64_t va = mmap_file(e, t, file, 64 * PAGE_SIZE, MAP_PRIVATE);
    file->mmap_miss = 40;
    REQUIRE(e.load(t, va + 20 * PAGE_SIZE) == file_byte(file, 20 * PAGE_SIZE));
    CHECK(file_rss(t) == 16);
    CHECK(e.count("kernel.filemap_read_pages") == 0);
    CHECK(file->mmap_miss == 40);  // the window [16, 32) is all workingset
    REQUIRE(e.load(t, va + 40 * PAGE_SIZE) == file_byte(file, 40 * PAGE_SIZE));
    CHECK(file_rss(t) == 32);
    CHECK(file->mmap_miss == 24);  // [32, 48): 16 pages forgiven
  }
}

// ------------------------------------------------------------------------------------------------
// MADV_HUGEPAGE on a file mapping: do_sync_mmap_readahead()'s VM_HUGEPAGE branch (mm/filemap.c:
// 3158, CONFIG_TRANSPARENT_HUGEPAGE, HPAGE_PMD_ORDER 9 <= MAX_PAGECACHE_ORDER 9), "even if
// readahead is disabled".
//
// A cold 2048-page file, mapped whole at kVa, a load of page 700. Derivation:
//   index = 700 & ~511 = 512; ra->size = 512 x 2 = 1024 (512 with VM_RAND_READ), async_size 512;
//   page_cache_ra_order(order 9): mark = 512 + size - 512.
//   - ext4 (no large folios): the fallback do_page_cache_ra(512, size, 512) ->
//     page_cache_ra_unbounded(): order-0 pages [512, 512 + size), PG_readahead at the page
//     nr - lookahead from the start: 1024 (size 1024) or 512 (size 512); one request.
//   - large folios: new_order 9 (already the max: no + 2), min(9, ilog2(size)) = 9; limit =
//     min(2047, 512 + size - 1); folios 512:9 and 1024:9 (size 1024) or 512:9 (size 512); the one
//     at round_down(mark, 512) gets PG_readahead: 1024 (size 1024), 512 (size 512); one request.
//   The fault: VM_FAULT_RETRY | VM_FAULT_MAJOR (the lock dropped for the read), the retry's
//   fault-around over [688, 703] maps the 16 PTEs, except that it skips a PG_readahead folio
//   whole (next_uptodate_folio()): with large folios and VM_RAND_READ that is folio 512 itself,
//   so finish_fault() maps the one PTE. 2 handle_mm_fault() calls, 1 retry, 1 major fault.
// Without MADV_HUGEPAGE the same load reads around: [684, 716), 32 pages.
TEST_CASE("filemap: MADV_HUGEPAGE reads two PMD-sized windows from the PMD-aligned index (one with MADV_RANDOM), in order 0 on ext4 and order 9 with large folios", "[filemap][large][thp]") {
  struct Case {
    bool large, random;
    std::string layout;
    uint64_t pages, ptes, rss;
  };
  const std::vector<Case> cases = {
      {false, false, "", 1024, 16, 16},
      {false, true, "", 512, 16, 16},
      // With large folios the fault maps folio 512 with one PMD (do_set_pmd()): by the retry's
      // fault-around (the window's first folio 512:9 ends before EOF: filemap_map_pmd()), or,
      // with MADV_RANDOM, by finish_fault() (fault-around skips the marked folio).
      {true, false, "512:9 1024:9r", 1024, 0, 512},
      {true, true, "512:9r", 512, 0, 512},
  };
  for (const Case& c : cases) {
    INFO((c.large ? "large folios" : "ext4") << (c.random ? " MADV_RANDOM" : ""));
    Env e;
    Disk disk;
    e.k.set_block_device(&disk);
    task_struct* t = e.proc("p");
    address_space* file = e.k.file_create("big", 2048 * PAGE_SIZE, 21);
    if (c.large) mapping_set_large_folios(file);
    const uint64_t va = mmap_file(e, t, file, 2048 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    e.k.enter(t, 0);
    REQUIRE(e.k.sys_madvise(t, va, 2048 * PAGE_SIZE, MADV_HUGEPAGE) == 0);
    if (c.random) REQUIRE(e.k.sys_madvise(t, va, 2048 * PAGE_SIZE, MADV_RANDOM) == 0);
    touch(e, t, file, va, 700, 701);
    CHECK(file->nrpages == c.pages);
    check_cache(file);
    if (c.large) {
      CHECK(layout(file) == c.layout);
    } else {
      CHECK(orders(file) == std::map<unsigned, unsigned>{{0, unsigned(c.pages)}});
      CHECK(file->i_pages.begin()->first == 512);
      CHECK(file->i_pages.rbegin()->first == 512 + c.pages - 1);
      std::vector<uint64_t> marked;
      for (const auto& [index, f] : file->i_pages)
        if (folio_test_readahead(f)) marked.push_back(index);
      CHECK(marked == std::vector<uint64_t>{c.random ? 512u : 1024u});
    }
    CHECK(disk.reads == std::vector<uint64_t>{c.pages * PAGE_SIZE});
    CHECK(e.count("kernel.io_requests") == 1);
    CHECK(e.count("kernel.filemap_read_pages") == c.pages);
    CHECK(e.count("kernel.pgmajfault") == 1);
    CHECK(e.count("faults.total") == 1);
    CHECK(e.count("kernel.handle_mm_fault") == 2);
    CHECK(e.count("kernel.filemap_fault_retry") == 1);
    CHECK(e.count("kernel.fault_around_ptes") == c.ptes);
    CHECK(file_rss(t) == int64_t(c.rss));
    if (c.large) {
      CHECK(pmd_maps(e, t, va + 512 * PAGE_SIZE, filemap_get_entry(file, 512)));
      CHECK(e.count("kernel.thp_file_mapped") == 1);
      CHECK(e.k.nr_file_pmdmapped() == 512);
      CHECK(e.k.nr_file_thps() == c.pages);
    } else {
      CHECK(bad_ptes(e, t, file, va, 688, 704) == 0);
      CHECK(e.count("kernel.thp_file_mapped") == 0);
      CHECK(e.k.nr_file_thps() == 0);
    }
  }
  // The control: no MADV_HUGEPAGE, the 32-page read-around.
  Env e;
  Disk disk;
  e.k.set_block_device(&disk);
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("big", 2048 * PAGE_SIZE, 21);
  const uint64_t va = mmap_file(e, t, file, 2048 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
  touch(e, t, file, va, 700, 701);
  CHECK(file->nrpages == 32);
  CHECK(file->i_pages.begin()->first == 684);
  CHECK(disk.reads == std::vector<uint64_t>{32 * PAGE_SIZE});
}

// ------------------------------------------------------------------------------------------------
// PMD mappings of order-9 page-cache folios (docs/plan-pmd-pagecache-folios.md §3-§6, §11).
// Derivation rules (mm/memory.c, mm/filemap.c, mm/huge_memory.c, mm/rmap.c, mm/vmscan.c):
//   - do_set_pmd() maps an order-9 folio with one PMD where the PMD is none, the VMA covers the
//     2 MiB block whose file offset is 2 MiB-aligned with it (thp_vma_suitable_order()), and the
//     VMA is not VM_NOHUGEPAGE; it takes no reference (the lookup's or ->fault's is the PMD's):
//     THP_FILE_MAPPED, MM_FILEPAGES += 512, NR_FILE_PMDMAPPED += 512 on the first PMD.
//   - filemap_map_pages(): can_map_large = file_end (last page) >= folio_next_index(first folio);
//     then filemap_map_pmd(): do_set_pmd(), else the PTE table; without can_map_large and with
//     the PMD none, nothing is mapped (pte_offset_map_lock() finds no table).
//   - finish_fault(): needs_fallback = DIV_ROUND_UP(i_size) < folio_next_index; a none PMD and
//     a large folio without it: do_set_pmd().
//   - a write to a PMD-mapped file folio: wp_huge_pmd() splits (file: the PMD is zapped, its
//     dirty bit to the folio, young to PG_referenced, the reference dropped; no PTE table), then
//     the fault is a PTE-level do_fault() on a none PMD.
//   - copy_huge_pmd() copies no file PMD (the child faults it in again).
// Setup: xfs-like file of 1024 pages, MADV_HUGEPAGE at kVa (2 MiB-aligned, file offset 0);
// VM_HUGEPAGE readahead from the first fault at 0: [0, 1024) as 0:9 512:9r (mark 0 + 1024 - 512),
// one request of 4 MiB, VM_FAULT_RETRY | MAJOR.
namespace {

struct PmdFile {
  Env e;
  Disk disk;
  task_struct* t;
  address_space* file;
  uint64_t va;
  int64_t pgtables0;
  PmdFile(int flags, int prot, bool large = true, uint64_t pages = 1024,
          mmusim::pg::Isa isa = mmusim::pg::Isa::x86_64)
      : e({}, isa) {
    e.k.set_block_device(&disk);
    t = e.proc("p");
    pgtables0 = t->mm->pgtables_bytes;
    file = e.k.file_create("huge", pages * PAGE_SIZE, 41);
    if (large) mapping_set_large_folios(file);
    va = mmap_file(e, t, file, pages * PAGE_SIZE, flags, 0, prot);
    e.k.enter(t, 0);
    REQUIRE(e.k.sys_madvise(t, va, pages * PAGE_SIZE, MADV_HUGEPAGE) == 0);
  }
  folio* at(uint64_t index) const { return filemap_get_entry(file, index); }
};

}  // namespace

// P1. Touch 0: the retry's fault-around finds 0:9 first (1023 >= 512): a PMD. Touch 512: the
// first attempt's fault-around skips the marked folio; filemap_fault() finds it marked: async
// readahead, expected round_down(0 + 1024 - 512, 512) = 512 matches, the window [1024, 2048) is
// past EOF: nothing read, but the lock was dropped: RETRY. The retry's fault-around: 512:9 is the
// first folio, 1023 >= 1024 is false and the PMD is none: nothing mapped; finish_fault():
// 1024 < 1024 is false: do_set_pmd(). So 2 faults in 4 attempts, 2 retries, 1 major fault.
TEST_CASE("filemap PMD: MADV_HUGEPAGE maps each order-9 folio with one PMD, by fault-around or by finish_fault() at the end of the file", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  CHECK(layout(s.file) == "0:9 512:9r");
  CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK(e.count("kernel.thp_file_mapped") == 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  CHECK(layout(s.file) == "0:9 512:9");
  CHECK(pmd_maps(e, s.t, s.va + HPAGE_PMD_SIZE, s.at(512)));
  CHECK(s.disk.reads == std::vector<uint64_t>{1024 * PAGE_SIZE});
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("faults.total") == 2);
  CHECK(e.count("kernel.handle_mm_fault") == 4);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);
  CHECK(e.count("kernel.thp_file_mapped") == 2);
  CHECK(e.count("kernel.fault_around_ptes") == 0);
  CHECK(file_rss(s.t) == 1024);
  CHECK(e.k.nr_file_pmdmapped() == 1024);
  CHECK(e.k.nr_file_thps() == 1024);
  for (uint64_t i : {0u, 512u}) {
    const folio* f = s.at(i);
    INFO("folio " << i);
    CHECK(folio_ref_count(f) == 513);  // the cache's 512 + the PMD's 1
    CHECK(folio_entire_mapcount(f) == 1);
    CHECK(folio_large_mapcount(f) == 1);
  }
  // No PTE table: the PUD and PMD tables of the mapping only (no deposit for a file PMD).
  CHECK(s.t->mm->pgtables_bytes - s.pgtables0 == int64_t(2 * PAGE_SIZE));
  // Every byte read through the PMDs is the file's.
  touch(e, s.t, s.file, s.va, 0, 1024);
  CHECK(e.count("faults.total") == 2);

  SECTION("munmap zaps the PMDs: one INVLPG-sized flush each, the folios stay cached whole") {
    REQUIRE(e.k.sys_munmap(s.t, s.va, 1024 * PAGE_SIZE) == 0);
    CHECK(file_rss(s.t) == 0);
    CHECK(e.k.nr_file_pmdmapped() == 0);
    CHECK(e.k.nr_file_thps() == 1024);
    CHECK(folio_ref_count(s.at(0)) == 512);
    CHECK(e.count("kernel.split_huge_pmd") == 0);
  }
  SECTION("reclaim: the first look finds the PMD young (PG_referenced, kept), the second splits it and frees the folio") {
    REQUIRE(e.k.sys_munmap(s.t, s.va + HPAGE_PMD_SIZE, HPAGE_PMD_SIZE) == 0);  // folio 512 unmapped
    e.k.lru_add_drain();
    CHECK(e.k.try_to_free_pages(0, 1024) == 1024);
    e.k.check_invariants("try_to_free_pages", true);
    CHECK(s.file->nrpages == 0);
    CHECK(s.file->shadows.size() == 1024);
    CHECK(e.count("kernel.split_huge_pmd") == 1);
    CHECK(e.count("kernel.reclaim_unmapped_ptes") == 0);
    CHECK(e.count("kernel.tlbbatch_flushes") == 0);
    CHECK(file_rss(s.t) == 0);
    CHECK(e.k.nr_file_thps() == 0);
    CHECK(e.k.nr_file_pmdmapped() == 0);
    CHECK_FALSE(e.pmd_huge(s.t, s.va));
    // Read back: VM_HUGEPAGE readahead again, and a PMD again.
    touch(e, s.t, s.file, s.va, 3, 4);
    CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
    CHECK(e.count("kernel.thp_file_mapped") == 3);
  }
}

// E1. The same on ext4 (order-0 folios): 1024 pages, PG_readahead on 512. Touch 0: the retry maps
// [0, 15] (16 PTEs). Touch 512: fault-around maps 513-527 (15), skipping the marked 512; async
// readahead reads nothing (past EOF): RETRY; the retry maps 512. No PMD.
TEST_CASE("filemap PMD: on ext4 MADV_HUGEPAGE reads the same 1024 pages as order-0 folios and maps them with PTEs", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, /*large=*/false);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  CHECK(s.file->nrpages == 1024);
  CHECK(orders(s.file) == std::map<unsigned, unsigned>{{0, 1024}});
  CHECK(s.disk.reads == std::vector<uint64_t>{1024 * PAGE_SIZE});
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("faults.total") == 2);
  CHECK(e.count("kernel.handle_mm_fault") == 4);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);
  CHECK(e.count("kernel.fault_around_ptes") == 32);
  CHECK(file_rss(s.t) == 32);
  CHECK(e.count("kernel.thp_file_mapped") == 0);
  CHECK(e.k.nr_file_thps() == 0);
  CHECK(bad_ptes(e, s.t, s.file, s.va, 0, 16) == 0);
  CHECK(bad_ptes(e, s.t, s.file, s.va, 512, 528) == 0);
}

// P4. A shared mapping: the read maps a read-only PMD (write notification). The write: split
// (the PMD zapped), do_shared_fault(): ->page_mkwrite dirties the folio (512 pages, once),
// finish_fault() maps a writable dirty PMD. msync: folio_mkclean() write-protects and cleans the
// PMD (one), one write of 2 MiB. The next write splits and re-maps again.
TEST_CASE("filemap PMD: a write to a shared PMD-mapped folio splits, dirties the folio and maps a writable PMD, and msync cleans it", "[filemap][large][thp][pmd][msync]") {
  PmdFile s(MAP_SHARED, PROT_READ | PROT_WRITE);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  REQUIRE(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK_FALSE(e.a.pmd_write(e.pmd(s.t, s.va)));
  const uint64_t attempts = e.count("kernel.handle_mm_fault");
  REQUIRE(e.store(s.t, s.va + 100, 0xa5));
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK(e.count("kernel.do_shared_fault") == 1);
  CHECK(e.count("kernel.handle_mm_fault") == attempts + 1);
  CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK(e.a.pmd_write(e.pmd(s.t, s.va)));
  CHECK(e.a.pmd_dirty(e.pmd(s.t, s.va)));
  CHECK(e.count("kernel.thp_file_mapped") == 2);
  CHECK(e.k.nr_file_dirty() == 512);
  CHECK(e.count("kernel.nr_dirtied") == 512);
  CHECK(file_rss(s.t) == 512);
  CHECK(e.load(s.t, s.va + 100) == 0xa5);

  e.k.enter(s.t, 0, 0);
  REQUIRE(e.k.sys_msync(s.t, s.va, 1024 * PAGE_SIZE, MS_SYNC) == 0);
  e.k.check_invariants("msync", true);
  CHECK(s.disk.writes == std::vector<uint64_t>{HPAGE_PMD_SIZE});
  CHECK(e.count("kernel.folio_mkclean_ptes") == 1);
  CHECK(e.count("kernel.nr_written") == 512);
  CHECK(e.k.nr_file_dirty() == 0);
  CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK_FALSE(e.a.pmd_write(e.pmd(s.t, s.va)));
  CHECK_FALSE(e.a.pmd_dirty(e.pmd(s.t, s.va)));
  REQUIRE(s.file->written.count(0) == 1);
  CHECK(s.file->written.at(0)[100] == 0xa5);

  REQUIRE(e.store(s.t, s.va + PAGE_SIZE, 0x5a));
  CHECK(e.count("kernel.split_huge_pmd") == 2);
  CHECK(e.count("kernel.thp_file_mapped") == 3);
  CHECK(e.k.nr_file_dirty() == 512);
  CHECK(e.count("kernel.nr_dirtied") == 1024);
  CHECK(e.a.pmd_write(e.pmd(s.t, s.va)));
}

// P5. A private mapping: the write at page 5 splits (the young PMD sets PG_referenced), then
// do_cow_fault() maps one anonymous PTE in a new table. The read at 6: fault-around [0, 15],
// the PMD is a table now: filemap_map_pmd() maps nothing, filemap_map_folio_range() maps 0-4
// and 6-15 (15 PTEs, 2 runs).
TEST_CASE("filemap PMD: a write to a private PMD-mapped folio splits it and copies one page, and the folio is PTE-mapped around it", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ | PROT_WRITE);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  REQUIRE(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK_FALSE(folio_test_referenced(s.at(0)));
  REQUIRE(e.store(s.t, s.va + 5 * PAGE_SIZE + 7, 0x77));
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK(e.count("kernel.do_cow_fault") == 1);
  CHECK(folio_test_referenced(s.at(0)));
  CHECK(get_mm_counter(s.t->mm, MM_ANONPAGES) == 1);
  CHECK(file_rss(s.t) == 0);
  touch(e, s.t, s.file, s.va, 6, 7);
  CHECK(e.count("kernel.fault_around_ptes") == 15);
  CHECK(file_rss(s.t) == 15);
  CHECK(folio_ref_count(s.at(0)) == 512 + 15);
  CHECK(folio_entire_mapcount(s.at(0)) == 0);
  CHECK(folio_large_mapcount(s.at(0)) == 15);
  CHECK(e.count("kernel.thp_file_mapped") == 1);
  CHECK(e.load(s.t, s.va + 5 * PAGE_SIZE + 7) == 0x77);
  CHECK(bad_ptes(e, s.t, s.file, s.va, 0, 5) == 0);
  CHECK(bad_ptes(e, s.t, s.file, s.va, 6, 16) == 0);
}

// P6, P7, P8: what unmaps part of a PMD, and what refuses one.
TEST_CASE("filemap PMD: DONTNEED of one page unmaps the 2 MiB, a partial munmap leaves PTEs only, VM_NOHUGEPAGE maps PTEs of the same folio", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  REQUIRE(e.count("kernel.thp_file_mapped") == 2);

  SECTION("MADV_DONTNEED of one page: the split zaps the PMD; the next touch maps it again by fault-around") {
    REQUIRE(e.k.sys_madvise(s.t, s.va + PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED) == 0);
    CHECK(e.count("kernel.split_huge_pmd") == 1);
    CHECK(file_rss(s.t) == 512);
    CHECK(e.k.nr_file_pmdmapped() == 512);
    CHECK_FALSE(e.pmd_huge(s.t, s.va));
    const uint64_t attempts = e.count("kernel.handle_mm_fault");
    touch(e, s.t, s.file, s.va, 1, 2);
    CHECK(e.count("kernel.handle_mm_fault") == attempts + 1);
    CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
    CHECK(e.count("kernel.thp_file_mapped") == 3);
    CHECK(file_rss(s.t) == 1024);
  }
  SECTION("munmap of the first page: split_vma's split; the VMA no longer covers the block: 16 PTEs of pages 1-16") {
    REQUIRE(e.k.sys_munmap(s.t, s.va, PAGE_SIZE) == 0);
    CHECK(e.count("kernel.split_huge_pmd") == 1);
    CHECK(file_rss(s.t) == 512);
    touch(e, s.t, s.file, s.va, 5, 6);
    CHECK(e.count("kernel.thp_file_mapped") == 2);
    CHECK(e.count("kernel.fault_around_ptes") == 16);
    CHECK(file_rss(s.t) == 528);
    CHECK(bad_ptes(e, s.t, s.file, s.va, 1, 17) == 0);
    CHECK(folio_large_mapcount(s.at(0)) == 16);
    CHECK(folio_entire_mapcount(s.at(0)) == 0);
    CHECK(pmd_maps(e, s.t, s.va + HPAGE_PMD_SIZE, s.at(512)));
  }
  SECTION("a second process maps the file with MADV_NOHUGEPAGE: do_set_pmd() refuses, fault-around maps 16 PTEs") {
    task_struct* b = e.proc("b");
    const uint64_t vb = mmap_file(e, b, s.file, 1024 * PAGE_SIZE, MAP_PRIVATE, 0, PROT_READ);
    e.k.enter(b, 0);
    REQUIRE(e.k.sys_madvise(b, vb, 1024 * PAGE_SIZE, MADV_NOHUGEPAGE) == 0);
    const uint64_t attempts = e.count("kernel.handle_mm_fault");
    touch(e, b, s.file, vb, 0, 1);
    CHECK(e.count("kernel.handle_mm_fault") == attempts + 1);
    CHECK(e.count("kernel.io_requests") == 1);
    CHECK(file_rss(b) == 16);
    CHECK(bad_ptes(e, b, s.file, vb, 0, 16) == 0);
    CHECK(folio_ref_count(s.at(0)) == 512 + 1 + 16);
    CHECK(folio_entire_mapcount(s.at(0)) == 1);
    CHECK(folio_large_mapcount(s.at(0)) == 17);
    CHECK(e.k.nr_file_pmdmapped() == 1024);
    CHECK(e.count("kernel.thp_file_mapped") == 2);
  }
}

// P10. fork of a private file VMA with an anon_vma (the COW at 600 made one): copy_huge_pmd()
// skips the file PMD of folio 0, copy_pte_range() copies the anonymous PTE; the child faults the
// PMD in again by fault-around.
TEST_CASE("filemap PMD: fork does not copy a file PMD, the child maps it again at its first touch", "[filemap][large][thp][pmd][fork]") {
  PmdFile s(MAP_PRIVATE, PROT_READ | PROT_WRITE);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  REQUIRE(e.store(s.t, s.va + 600 * PAGE_SIZE, 0x42));
  CHECK(e.count("kernel.split_huge_pmd") == 1);
  CHECK(file_rss(s.t) == 512);
  CHECK(get_mm_counter(s.t->mm, MM_ANONPAGES) == 1);
  e.k.enter(s.t, 0);
  task_struct* c = e.k.sys_fork(s.t);
  REQUIRE(c);
  CHECK(get_mm_counter(c->mm, MM_FILEPAGES) == 0);
  CHECK(get_mm_counter(c->mm, MM_ANONPAGES) == 1);
  CHECK_FALSE(e.pmd_huge(c, s.va));
  CHECK(e.load(c, s.va + 600 * PAGE_SIZE) == 0x42);
  touch(e, c, s.file, s.va, 0, 1);
  CHECK(pmd_maps(e, c, s.va, s.at(0)));
  CHECK(e.count("kernel.thp_file_mapped") == 3);
  CHECK(folio_entire_mapcount(s.at(0)) == 2);
  CHECK(folio_ref_count(s.at(0)) == 514);
  CHECK(e.load(s.t, s.va + 600 * PAGE_SIZE) == 0x42);
}

// P11. thp_get_unmapped_area() (ext4's and XFS's get_unmapped_area): a file mapping that spans a
// 2 MiB block of the file gets an address congruent to its offset modulo 2 MiB; one that does
// not is the plain search's.
TEST_CASE("mmap: a file mapping is placed 2 MiB-aligned with its file offset (thp_get_unmapped_area())", "[filemap][large][thp][pmd][mmap]") {
  Env e;
  task_struct* t = e.proc("p");
  address_space* file = e.k.file_create("f", 4096 * PAGE_SIZE, 5);
  const int64_t a = e.k.sys_mmap(t, 0, 4 << 20, PROT_READ, MAP_PRIVATE, file, 0);
  REQUIRE(a > 0);
  CHECK(uint64_t(a) % HPAGE_PMD_SIZE == 0);
  const int64_t b = e.k.sys_mmap(t, 0, 4 << 20, PROT_READ, MAP_PRIVATE, file, PAGE_SIZE);
  REQUIRE(b > 0);
  CHECK((uint64_t(b) - PAGE_SIZE) % HPAGE_PMD_SIZE == 0);
  CHECK(uint64_t(b) + (4 << 20) <= uint64_t(a));
  const int64_t c = e.k.sys_mmap(t, 0, 1 << 20, PROT_READ, MAP_PRIVATE, file, 0);
  REQUIRE(c > 0);
  REQUIRE(e.k.sys_munmap(t, uint64_t(c), 1 << 20) == 0);
  const int64_t d = e.k.sys_mmap(t, 0, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, nullptr, 0);
  CHECK(d == c);
}

// The same on arm64: do_set_pmd() makes a block descriptor; reclaim's first look clears its AF
// with one TLBI of the 2 MiB (pmdp_clear_flush_young() -> flush_pmd_tlb_range()), the second
// splits it (zapped, one more TLBI) and frees the folio.
TEST_CASE("filemap PMD: arm64 maps a page-cache folio with a block descriptor and reclaims it through the PMD", "[filemap][large][thp][pmd][arm64]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, true, 1024, mmusim::pg::Isa::arm64);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  CHECK(layout(s.file) == "0:9 512:9");
  CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK(pmd_maps(e, s.t, s.va + HPAGE_PMD_SIZE, s.at(512)));
  CHECK(e.count("kernel.thp_file_mapped") == 2);
  CHECK(file_rss(s.t) == 1024);
  touch(e, s.t, s.file, s.va, 0, 1024);
  CHECK(e.count("faults.total") == 2);
  e.k.lru_add_drain();
  e.k.enter(s.t, 0);
  CHECK(e.k.try_to_free_pages(0, 1024) == 1024);
  e.k.check_invariants("try_to_free_pages", true);
  CHECK(e.count("kernel.split_huge_pmd") == 2);
  CHECK(file_rss(s.t) == 0);
  CHECK(e.k.nr_file_thps() == 0);
  CHECK(s.file->nrpages == 0);
}

// P2. A 2048-page file read in order: faults at 0, 512, 1024 and 1536 only. 0: the sync window
// [0, 1024) (0:9 512:9r), RETRY | MAJOR, the retry's fault-around maps a PMD. 512: the marked
// folio: async readahead, expected round_down(0 + 1024 - 512, 512) = 512 matches: start 1024,
// size max(1024, get_next_ra_size()) = 1024, async 1024, order 9: [1024, 2048) as 1024:9r 1536:9;
// RETRY; the retry's fault-around maps a PMD (2047 >= 1024). 1024: marked, async: expected
// round_down(1024 + 1024 - 1024, 512) = 1024 matches, start 2048 is past EOF: nothing read;
// RETRY; fault-around maps a PMD (2047 >= 1536). 1536: fault-around cannot map large
// (2047 >= 2048 is false) and the PMD is none: nothing; finish_fault() maps the PMD. Attempts
// 2 + 2 + 2 + 1, retries 3.
TEST_CASE("filemap PMD: a sequential read of an MADV_HUGEPAGE file faults once per 2 MiB, with 4 MiB readahead windows", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, true, 2048);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 2048);
  CHECK(layout(s.file) == "0:9 512:9 1024:9 1536:9");
  CHECK(s.disk.reads == std::vector<uint64_t>(2, 1024 * PAGE_SIZE));
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("faults.total") == 4);
  CHECK(e.count("kernel.handle_mm_fault") == 7);
  CHECK(e.count("kernel.filemap_fault_retry") == 3);
  CHECK(e.count("kernel.thp_file_mapped") == 4);
  CHECK(e.count("kernel.fault_around_ptes") == 0);
  CHECK(file_rss(s.t) == 2048);
  for (uint64_t i = 0; i < 2048; i += 512) CHECK(pmd_maps(e, s.t, s.va + i * PAGE_SIZE, s.at(i)));
}

// P3. With MADV_RANDOM the VM_HUGEPAGE branch reads one PMD-sized window, marked (mark = 0 + 512 -
// 512), and no async readahead follows: each 2 MiB is its own major fault; fault-around skips
// the marked folio, finish_fault() maps the PMD.
TEST_CASE("filemap PMD: with MADV_RANDOM each 2 MiB is one major fault, mapped by finish_fault()", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ);
  Env& e = s.e;
  REQUIRE(e.k.sys_madvise(s.t, s.va, 1024 * PAGE_SIZE, MADV_RANDOM) == 0);
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  CHECK(layout(s.file) == "0:9r 512:9r");
  CHECK(s.disk.reads == std::vector<uint64_t>(2, 512 * PAGE_SIZE));
  CHECK(e.count("kernel.pgmajfault") == 2);
  CHECK(e.count("faults.total") == 2);
  CHECK(e.count("kernel.handle_mm_fault") == 4);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);
  CHECK(e.count("kernel.thp_file_mapped") == 2);
  CHECK(pmd_maps(e, s.t, s.va, s.at(0)));
  CHECK(pmd_maps(e, s.t, s.va + HPAGE_PMD_SIZE, s.at(512)));
}

// E2. ext4, 2048 pages read in order with MADV_HUGEPAGE: the sync window [0, 1024) marks 512
// (page_cache_ra_unbounded(): mark = 1024 - 512); the fault at 512 (fault-around maps 513-527,
// not the marked 512) starts the async window: expected round_down(0 + 1024 - 512, 1) = 512
// matches, start 1024, size max(1024, get_next_ra_size()) = 1024, async 1024, and the ext4
// fallback do_page_cache_ra(1024, 1024, 1024) marks 1024 (mark = 1024 - 1024 = 0 from the start);
// at 1024 the async call finds the window [2048, ...) past EOF. Every page is mapped by
// fault-around, one fault per 16 pages: 128 faults, 131 attempts (retries at 0, 512, 1024).
TEST_CASE("filemap PMD: on ext4 an MADV_HUGEPAGE sequential read uses 4 MiB windows of order-0 pages", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, /*large=*/false, 2048);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 0, 2048);
  CHECK(s.disk.reads == std::vector<uint64_t>(2, 1024 * PAGE_SIZE));
  CHECK(e.count("kernel.pgmajfault") == 1);
  CHECK(e.count("faults.total") == 128);
  CHECK(e.count("kernel.handle_mm_fault") == 131);
  CHECK(e.count("kernel.filemap_fault_retry") == 3);
  CHECK(e.count("kernel.fault_around_ptes") == 2048);
  CHECK(e.count("kernel.thp_file_mapped") == 0);
  CHECK(bad_ptes(e, s.t, s.file, s.va, 0, 2048) == 0);
}

// E3. ext4 with readahead off (ra_pages 0): the VM_HUGEPAGE branch runs before the ra_pages
// test, so the miss at 0 still reads 1024 pages; at 512 there is no async readahead
// (do_async_mmap_readahead() needs ra_pages): one attempt, fault-around maps 513-527 and
// finish_fault() maps 512; its PG_readahead stays.
TEST_CASE("filemap PMD: on ext4 with readahead off MADV_HUGEPAGE still reads 1024 pages, and no async readahead follows", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, /*large=*/false);
  Env& e = s.e;
  s.file->ra_pages = 0;
  touch(e, s.t, s.file, s.va, 0, 1);
  touch(e, s.t, s.file, s.va, 512, 513);
  CHECK(s.disk.reads == std::vector<uint64_t>{1024 * PAGE_SIZE});
  CHECK(e.count("faults.total") == 2);
  CHECK(e.count("kernel.handle_mm_fault") == 3);
  CHECK(e.count("kernel.filemap_fault_retry") == 1);
  CHECK(e.count("kernel.fault_around_ptes") == 31);
  CHECK(file_rss(s.t) == 32);
  CHECK(folio_test_readahead(s.at(512)));
  CHECK(bad_ptes(e, s.t, s.file, s.va, 512, 528) == 0);
}

// U5 of the plan (D): a first MADV_HUGEPAGE fault away from the start of a window. The fault at
// 700 reads [512, 1536) as 512:9 1024:9r and leaves ra->start stale (0). At 1024 the marked
// folio's async call expects round_down(0 + 1024 - 512, 512) = 512, not 1024: the
// page_cache_next_miss() path finds no gap in the 32 pages after 1024 (ra_pages: max_pages), so
// 33 > 32 and nothing is read; the fault lock was dropped: RETRY, and the retry's fault-around
// maps the PMD. The next window comes from a miss: 1536 reads [1536, 2560) synchronously, a
// second major fault.
TEST_CASE("filemap PMD: after a first MADV_HUGEPAGE fault inside a window the stale ra->start makes the marked folio read nothing, and the next window is a major fault", "[filemap][large][thp][pmd]") {
  PmdFile s(MAP_PRIVATE, PROT_READ, true, 4096);
  Env& e = s.e;
  touch(e, s.t, s.file, s.va, 700, 701);
  CHECK(layout(s.file) == "512:9 1024:9r");
  CHECK(pmd_maps(e, s.t, s.va + HPAGE_PMD_SIZE, s.at(512)));
  touch(e, s.t, s.file, s.va, 1024, 1025);
  CHECK(layout(s.file) == "512:9 1024:9");
  CHECK(e.count("kernel.io_requests") == 1);
  CHECK(e.count("kernel.filemap_fault_retry") == 2);
  CHECK(pmd_maps(e, s.t, s.va + 2 * HPAGE_PMD_SIZE, s.at(1024)));
  touch(e, s.t, s.file, s.va, 1536, 1537);
  CHECK(layout(s.file) == "512:9 1024:9 1536:9 2048:9r");
  CHECK(s.disk.reads == std::vector<uint64_t>(2, 1024 * PAGE_SIZE));
  CHECK(e.count("kernel.pgmajfault") == 2);
  CHECK(e.count("faults.total") == 3);
  CHECK(e.count("kernel.handle_mm_fault") == 6);
  CHECK(e.count("kernel.filemap_fault_retry") == 3);
  CHECK(e.count("kernel.thp_file_mapped") == 3);
}

// F1. The flusher is a kworker that runs after its wake-up (wb_start_background_writeback() ->
// wb_wakeup(): mod_delayed_work(..., 0)), not inside the fault that woke it. A shared
// MADV_HUGEPAGE mapping of an XFS-like file: each store dirties a whole 2 MiB folio (512 pages,
// over nr_dirtied_pause: balance_dirty_pages() each time), all within one kernel entry.
namespace {
struct DirtyPmds {
  Env e;
  Disk disk;
  task_struct* t = nullptr;
  address_space* file = nullptr;
  uint64_t va = 0;
  static constexpr uint64_t kPages = 8 * HPAGE_PMD_NR;
  explicit DirtyPmds(const std::function<void(KernelParams&)>& tweak) : e(tweak) {
    e.k.set_block_device(&disk);
    t = e.proc("p");
    file = e.k.file_create("huge", kPages * PAGE_SIZE, 43);
    mapping_set_large_folios(file);
    va = mmap_file(e, t, file, kPages * PAGE_SIZE, MAP_SHARED);
    e.k.enter(t, 0);
    REQUIRE(e.k.sys_madvise(t, va, kPages * PAGE_SIZE, MADV_HUGEPAGE) == 0);
  }
  bool writable(uint64_t n) {
    const folio* f = filemap_get_entry(file, n * HPAGE_PMD_NR);
    return pmd_maps(e, t, va + n * HPAGE_PMD_SIZE, f) && e.a.pmd_write(e.pmd(t, va + n * HPAGE_PMD_SIZE));
  }
  bool dirty(uint64_t n) const { return folio_test_dirty(filemap_get_entry(file, n * HPAGE_PMD_NR)); }
  // A store to folio n with no kernel entry of its own (the user access, not Env::store()); the
  // faults it took.
  uint64_t store(uint64_t n) {
    const uint64_t f0 = e.count("faults.total");
    REQUIRE(e.fix.ua->store8(t, va + n * HPAGE_PMD_SIZE + 8, uint8_t(0x50 + n)));
    return e.count("faults.total") - f0;
  }
};
}  // namespace

// 64 MiB of memory, no memory cgroup: the global domain's background threshold is 10% of about
// 60 MiB dirtyable (~1500 pages), its freerun ceiling 15% (~2300). The fourth store (2048 dirty)
// is over the first and under the second: balance_dirty_pages() wakes the flusher and returns
// without a pause; the store retires on its writable dirty PMD, nothing written. The next kernel
// entry runs the work: folios written, their PMDs write-protected (folio_mkclean()), until the
// dirty pages are under the threshold.
TEST_CASE("filemap PMD: the flusher a dirtier wakes runs at the next kernel entry, not inside its fault", "[filemap][large][thp][pmd][writeback]") {
  DirtyPmds s([](KernelParams& p) { p.phys_mem = 64ull << 20; });
  Env& e = s.e;
  e.k.enter(s.t, 0);
  for (uint64_t n = 0; n < 4; ++n) CHECK(s.store(n) == 1);  // do_shared_fault(): a writable dirty PMD
  CHECK(e.k.nr_file_dirty() == 4 * HPAGE_PMD_NR);
  CHECK(e.count("kernel.flusher_background") == 0);  // woken, not run
  CHECK(e.count("kernel.dirty_throttle_pauses") == 0);
  CHECK(s.disk.writes.empty());
  for (uint64_t n = 0; n < 4; ++n) CHECK((s.dirty(n) && s.writable(n)));
  e.k.enter(s.t, 0);
  // Background writeback stops once under the threshold: from the file's start, folios 0 and 1
  // (one bio of adjacent folios) leave 1024 dirty pages.
  CHECK(e.count("kernel.flusher_background") == 1);
  CHECK(e.k.nr_file_dirty() == 2 * HPAGE_PMD_NR);
  CHECK(s.disk.writes == std::vector<uint64_t>{4ull << 20});
  for (uint64_t n = 0; n < 2; ++n) CHECK((!s.dirty(n) && !s.writable(n)));
  for (uint64_t n = 2; n < 4; ++n) CHECK((s.dirty(n) && s.writable(n)));
  CHECK(s.store(1) == 1);  // write notification: dirty again
  CHECK((s.dirty(1) && s.writable(1)));
  e.k.check_invariants("flusher at the next entry", true);
}

// A 32 MiB memory cgroup: 1024 dirty pages are under the global background threshold (the only
// one balance_dirty_pages() looks at in freerun) and the cgroup's freerun ceiling. The third
// store (1536) is over that ceiling: it wakes the flusher and pauses; the flusher runs in the
// pause and cleans every folio, that one too (folio_mkclean() write-protects its PMD), so the
// store faults again, dirties it once more and retires (UserAccess sees FaultRecord::others_ran).
// 512 dirty pages are under every threshold: the next entry runs no work.
TEST_CASE("filemap PMD: the flusher a throttled dirtier wakes runs in its pause, and the store faults again", "[filemap][large][thp][pmd][writeback]") {
  DirtyPmds s([](KernelParams& p) { p.memcg_max = 32ull << 20; });
  Env& e = s.e;
  REQUIRE(s.t->mm->memcg == e.k.memcgs()[1].get());
  e.k.enter(s.t, 0);
  CHECK(s.store(0) == 1);
  CHECK(s.store(1) == 1);
  CHECK(e.count("kernel.flusher_background") == 0);
  CHECK(e.count("kernel.dirty_throttle_pauses") == 0);
  CHECK(s.store(2) == 2);
  CHECK(e.count("kernel.dirty_throttle_pauses") == 1);
  CHECK(e.count("kernel.flusher_background") == 1);
  CHECK(s.disk.writes == std::vector<uint64_t>{6ull << 20});
  CHECK((!s.dirty(0) && !s.dirty(1) && !s.writable(0) && !s.writable(1)));
  CHECK((s.dirty(2) && s.writable(2)));  // dirtied again after the flusher cleaned it
  CHECK(e.k.nr_file_dirty() == HPAGE_PMD_NR);
  CHECK(e.fix.ua->load8(s.t, s.va + 2 * HPAGE_PMD_SIZE + 8) == 0x52);
  e.k.enter(s.t, 0);
  CHECK(e.count("kernel.flusher_background") == 1);
  CHECK(s.dirty(2));
  e.k.check_invariants("flusher in the pause", true);
}
