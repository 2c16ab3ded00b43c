// SPDX-License-Identifier: GPL-2.0-only
// Random operation sequences over several processes with a reference model of every process's
// memory contents, for differential testing of the kernel port (and of the hardware models'
// translations): the `random-ops` workload (workloads/random_ops.cpp) and the kernel-level test
// (tests/kernel_mm/test_differential.cpp) use the same generator and model.
//
// An operation is drawn as a kind and three random numbers; it is *resolved* against the current
// state of a process (which areas it has mapped, with which protections) into a concrete action,
// or into nothing if it does not apply (a store to a region that is read-only, a fork beyond the
// process limit). So any subsequence of a sequence is a valid sequence: that is what lets the
// kernel-level harness shrink a failing sequence by deleting operations.
//
// The reference model (per process: page -> protection, fork flags, 4 KiB of bytes or "zero")
// follows the Linux semantics of private anonymous memory: fork copies the parent's contents
// (MADV_DONTFORK ranges are not in the child; MADV_WIPEONFORK ranges read as zero there and keep
// the flag), munmap and MADV_DONTNEED drop the contents (zero on the next touch), mprotect only
// changes the protection, MADV_[NO]HUGEPAGE change nothing visible. Processes share no memory, so
// each reference is independent of how the processes interleave.
// With Limits::files > 0, some mmaps are private mappings of one of those files (of file_size
// bytes, contents base/file_contents.hpp) at a page offset: a page reads the file until the
// process writes it (its own copy from then on); MADV_DONTNEED drops the copy, so the page reads
// the file again; MADV_WIPEONFORK is refused there (-EINVAL), so it is never drawn for them. No
// process writes a file, so the references stay independent of the interleaving.
// With Limits::shared_files as well, some of those mappings are MAP_SHARED: a store writes the
// file (RefFiles, one per run, shared by every process's reference), which every shared mapping
// of that page and every private page not yet written then reads; MADV_DONTNEED and munmap lose
// nothing; fork shares the page with the child; msync(MS_SYNC | MS_ASYNC) changes nothing
// visible (Msync, drawn only with Weights::with_msync()). The processes share memory then, so the
// reference holds only for a driver that runs one operation at a time (the kernel-level test);
// the random-ops workload, whose processes run concurrently, does not set it.
//
// Header-only (no link dependency) so that the kernel tests use it without the workloads library.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/file_contents.hpp"
#include "base/pgformat.hpp"
#include "workloads/rng.hpp"
#include "workloads/uop.hpp"

namespace mmusim::wl::rops {

using mmusim::wl::Rng;  // workloads/rng.hpp

// The program's page, the arm64 contiguous block (the 64K mTHP / contpte size) and the PMD block,
// from the paging geometry (base/pgformat.hpp).
inline constexpr uint64_t kPage = mmusim::pg::kBasePageSize;
inline constexpr uint64_t kCont = kPage * mmusim::pg::kArm64_4K.cont_entries;
inline constexpr uint64_t kPmd = mmusim::pg::kBaseGeometry.level_size(1);

// Verify: load and check every 64th 8 bytes of a few pages (the kernel-level harness compares
// them whole).
enum class OpKind : uint8_t { Mmap, Munmap, Mprotect, Madvise, Store, Load, Touch, Fork, Wait, Exit, Verify, Msync };
inline constexpr unsigned kOpKinds = 12;
inline const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Mmap: return "Mmap";
    case OpKind::Munmap: return "Munmap";
    case OpKind::Mprotect: return "Mprotect";
    case OpKind::Madvise: return "Madvise";
    case OpKind::Store: return "Store";
    case OpKind::Load: return "Load";
    case OpKind::Touch: return "Touch";
    case OpKind::Fork: return "Fork";
    case OpKind::Wait: return "Wait";
    case OpKind::Exit: return "Exit";
    case OpKind::Verify: return "Verify";
    case OpKind::Msync: return "Msync";
  }
  return "?";
}

// One drawn operation: which process (for drivers that interleave processes themselves; taken
// modulo the live processes), its kind, and three random numbers the resolution interprets.
struct Op {
  OpKind kind = OpKind::Load;
  uint32_t proc = 0;
  uint64_t a = 0, b = 0, c = 0;
};

struct Limits {
  unsigned max_procs = 4;               // live processes at most
  uint64_t max_mapped = 16ull << 20;    // bytes mapped per process at most
  unsigned max_areas = 12;              // mmap'ed areas per process at most
  // Files some mmaps map privately (0: anonymous memory only). File i is the kernel's (i + 1)-th
  // (inode i + 1), of file_size bytes made from file_seed.
  unsigned files = 0;
  uint64_t file_size = 8ull << 20;
  uint64_t file_seed = 0;
  bool large_folios = false;  // the files on a filesystem with large page-cache folios (XFS-like)
  bool shared_files = false;  // some file mappings MAP_SHARED (a one-at-a-time driver only, see above)
  // Every file mapping MADV_HUGEPAGE'd by the driver as soon as it is made (nothing visible
  // changes: the reference ignores it); with large folios its misses read order-9 folios, which
  // do_set_pmd() maps with PMDs.
  bool hugepage_files = false;
};

// Relative frequency of each kind (index = OpKind). Msync is 0 by default, so the sequences drawn
// for a seed are those drawn before it existed.
struct Weights {
  std::array<unsigned, kOpKinds> w{5, 3, 4, 6, 32, 30, 6, 3, 2, 2, 2, 0};
  static Weights with_msync() {
    Weights x;
    x.w[unsigned(OpKind::Msync)] = 4;
    return x;
  }
  unsigned total() const {
    unsigned t = 0;
    for (unsigned x : w) t += x;
    return t;
  }
};

inline Op draw(Rng& r, const Weights& wt = {}) {
  Op op;
  uint64_t x = r.below(wt.total());
  unsigned k = 0;
  while (x >= wt.w[k]) x -= wt.w[k++];
  op.kind = OpKind(k);
  op.proc = uint32_t(r.next() >> 40);
  op.a = r.next();
  op.b = r.next();
  op.c = r.next();
  return op;
}

// ---- the reference model ----------------------------------------------------------------------

using PageBytes = std::array<uint8_t, kPage>;

struct RefPage {
  int prot = kProtRead | kProtWrite;
  bool dontfork = false, wipeonfork = false;
  std::shared_ptr<PageBytes> data;  // null: reads as zero (or as the file); shared between
                                    // processes until written
  int file = -1;                    // a file mapping's page: Limits::files index
  uint64_t file_page = 0;           // and the page's index in the file
  bool shared = false;              // of a MAP_SHARED mapping: data stays null, bytes are the file's
};

// The byte at `off` of file `file` (Limits::files) as created (base/file_contents.hpp).
inline uint8_t file_byte(const Limits& lim, int file, uint64_t off) {
  const uint64_t w = mmusim::file_word(lim.file_seed, uint32_t(file + 1), lim.file_size, off & ~uint64_t(7));
  return uint8_t(w >> (8 * (off & 7)));
}

// The files' pages written through shared mappings, for the whole run (every process's reference
// holds the same one).
struct RefFiles {
  std::map<std::pair<int, uint64_t>, PageBytes> written;  // (file, page index) -> the page now
};

struct RefProc {
  Limits lim;                                        // the files' sizes and seeds
  std::shared_ptr<RefFiles> files = std::make_shared<RefFiles>();
  std::map<uint64_t, RefPage> pages;                 // by virtual page number
  std::vector<std::pair<uint64_t, uint64_t>> areas;  // [start, start + len) of each mmap, in order
  uint64_t mapped = 0;                               // bytes mapped

  // The byte at `off` of file `file` as it reads now (with what shared mappings wrote).
  uint8_t file_now(int file, uint64_t off) const {
    auto it = files->written.find({file, off / kPage});
    return it == files->written.end() ? file_byte(lim, file, off) : it->second[off % kPage];
  }
  uint8_t byte(uint64_t va) const {
    auto it = pages.find(va / kPage);
    if (it == pages.end()) return 0;
    if (!it->second.data)
      return it->second.file < 0 ? 0 : file_now(it->second.file, it->second.file_page * kPage + va % kPage);
    return (*it->second.data)[va % kPage];
  }
  // The page's bytes as they read now (the file's for a file page not yet written).
  PageBytes page_bytes(uint64_t vpn) const {
    PageBytes b{};
    for (uint64_t i = 0; i < kPage; ++i) b[i] = byte(vpn * kPage + i);
    return b;
  }
  void write(uint64_t va, uint8_t v) {
    RefPage& p = pages.at(va / kPage);
    if (p.shared) {  // the file's page
      auto it = files->written.find({p.file, p.file_page});
      if (it == files->written.end()) it = files->written.emplace(std::make_pair(p.file, p.file_page), page_bytes(va / kPage)).first;
      it->second[va % kPage] = v;
      return;
    }
    if (!p.data) p.data = std::make_shared<PageBytes>(p.file < 0 ? PageBytes{} : page_bytes(va / kPage));
    else if (p.data.use_count() > 1) p.data = std::make_shared<PageBytes>(*p.data);  // our own COW
    (*p.data)[va % kPage] = v;
  }
  const RefPage* page(uint64_t va) const {
    auto it = pages.find(va / kPage);
    return it == pages.end() ? nullptr : &it->second;
  }
  bool all_mapped(uint64_t start, uint64_t len) const {
    for (uint64_t v = start; v < start + len; v += kPage)
      if (!pages.count(v / kPage)) return false;
    return true;
  }
  void prune_areas() {
    areas.erase(std::remove_if(areas.begin(), areas.end(),
                               [&](const std::pair<uint64_t, uint64_t>& ar) {
                                 auto it = pages.lower_bound(ar.first / kPage);
                                 return it == pages.end() || it->first >= (ar.first + ar.second) / kPage;
                               }),
                areas.end());
  }
  // fork(): what the child sees.
  RefProc fork_child() const {
    RefProc c;
    c.lim = lim;
    c.files = files;
    for (auto& [vpn, p] : pages) {
      if (p.dontfork) continue;
      RefPage q = p;
      if (p.wipeonfork) q.data.reset();
      c.pages.emplace(vpn, q);
      c.mapped += kPage;
    }
    c.areas = areas;
    c.prune_areas();
    return c;
  }
};

// ---- resolution -------------------------------------------------------------------------------

// A concrete action on one process.
struct Action {
  OpKind kind = OpKind::Load;
  bool valid = false;
  uint64_t addr = 0, len = 0;  // memory ops: the range; Mmap: len
  int arg = 0;                 // prot, advice
  int file = -1;               // Mmap: a mapping of this file (Limits::files), or anonymous
  uint64_t pgoff = 0;          // Mmap of a file: the page offset
  bool shared = false;         // Mmap of a file: MAP_SHARED (else MAP_PRIVATE)
  uint8_t size = 0;            // Store/Load bytes
  uint64_t value = 0;          // Store: the value (size > 8: a repeated byte); Load: expected bytes (size <= 8)
  // Touch: one 8-byte store per page of [addr, addr + len), values from `value` (see touch_value).
};

inline uint64_t touch_value(uint64_t seed, uint64_t va) {
  Rng r{seed ^ (va * 0x9e3779b97f4a7c15ull)};
  return r.next();
}
// Touch writes 8 bytes at this offset of each page.
inline uint64_t touch_offset(uint64_t seed, uint64_t va) { return (touch_value(seed, va) >> 7) % (kPage / 8) * 8; }

// A sub-range of an area, page aligned; sometimes aligned to 64K or 2M or the whole area, so that
// large folios and PMD mappings are split at interesting places.
inline std::pair<uint64_t, uint64_t> pick_range(const std::pair<uint64_t, uint64_t>& ar, uint64_t a, uint64_t b) {
  const uint64_t npages = ar.second / kPage;
  switch (a % 5) {
    case 0: return ar;  // the whole area
    case 1: {           // 64K-aligned chunk(s)
      uint64_t s = (ar.first + kCont - 1) & ~(kCont - 1);
      uint64_t e = (ar.first + ar.second) & ~(kCont - 1);
      if (e > s) {
        uint64_t n = (e - s) / kCont;
        uint64_t i = b % n, k = 1 + (b >> 20) % std::min<uint64_t>(n - i, 4);
        return {s + i * kCont, k * kCont};
      }
      break;
    }
    case 2: {  // 2M-aligned block
      uint64_t s = (ar.first + kPmd - 1) & ~(kPmd - 1);
      uint64_t e = (ar.first + ar.second) & ~(kPmd - 1);
      if (e > s) {
        uint64_t n = (e - s) / kPmd;
        return {s + (b % n) * kPmd, kPmd};
      }
      break;
    }
    default: break;
  }
  // a few pages anywhere
  uint64_t i = b % npages;
  uint64_t k = 1 + (b >> 24) % std::min<uint64_t>(npages - i, (a >> 8) % 2 ? 3 : 40);
  return {ar.first + i * kPage, k * kPage};
}

inline uint64_t mmap_len(uint64_t a) {
  switch (a % 4) {
    case 0: return (1 + (a >> 8) % 16) * kPage;                    // a few pages
    case 1: return (16 + (a >> 8) % 240) * kPage;                  // 64K-1M
    case 2: return kPmd + ((a >> 8) % 32) * kCont;              // 2M plus a bit: one THP fits if aligned
    default: return 2 * kPmd + ((a >> 8) % 8) * kPage;         // 4M: at least one aligned 2M block
  }
}

// Resolve `op` against process `p`. Fork/Wait/Exit are resolved by the driver (it knows the
// processes); here they come back valid with their kind only.
inline Action resolve(const Op& op, const RefProc& p, const Limits& lim) {
  Action ac;
  ac.kind = op.kind;
  auto area = [&]() -> const std::pair<uint64_t, uint64_t>& { return p.areas[op.a % p.areas.size()]; };
  switch (op.kind) {
    case OpKind::Mmap:
      ac.len = mmap_len(op.b);
      if (lim.files && (op.c >> 40) % 3 == 0) {
        // A private mapping of a file, within it (no page beyond its end: that would be SIGBUS).
        ac.file = int((op.c >> 44) % lim.files);
        const uint64_t fpages = lim.file_size / kPage;
        ac.len = std::min(ac.len, fpages * kPage);
        ac.pgoff = (op.c >> 8) % (fpages - ac.len / kPage + 1);
        ac.shared = lim.shared_files && op.a % 2;
      }
      ac.valid = p.areas.size() < lim.max_areas && p.mapped + ac.len <= lim.max_mapped;
      return ac;
    case OpKind::Munmap:
      if (p.areas.empty()) return ac;
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.valid = true;
      return ac;
    case OpKind::Mprotect:
      if (p.areas.empty()) return ac;
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.arg = (op.b >> 32) % 2 ? kProtRead : (kProtRead | kProtWrite);
      ac.valid = p.all_mapped(ac.addr, ac.len);  // a hole is -ENOMEM
      return ac;
    case OpKind::Madvise: {
      if (p.areas.empty()) return ac;
      static constexpr int advice[] = {kMadvDontneed, kMadvDontneed, kMadvHugepage, kMadvHugepage,
                                       kMadvNohugepage, kMadvDontfork, kMadvDofork,
                                       kMadvWipeonfork, kMadvKeeponfork};
      ac.arg = advice[(op.b >> 32) % (sizeof(advice) / sizeof(advice[0]))];
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.valid = p.all_mapped(ac.addr, ac.len);
      // MADV_WIPEONFORK is only supported on anonymous memory (-EINVAL on a file mapping).
      if (ac.valid && ac.arg == kMadvWipeonfork)
        for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage)
          if (p.page(v)->file >= 0) ac.valid = false;
      return ac;
    }
    case OpKind::Store:
    case OpKind::Load: {
      if (p.areas.empty()) return ac;
      const auto& ar = area();
      static constexpr uint8_t st_sizes[] = {1, 2, 4, 8, 8, 16, 64};
      static constexpr uint8_t ld_sizes[] = {1, 2, 4, 8, 8, 8};
      const bool st = op.kind == OpKind::Store;
      ac.size = st ? st_sizes[op.b % sizeof(st_sizes)] : ld_sizes[op.b % sizeof(ld_sizes)];
      // Mostly the first pages of an area (where the folios are), sometimes anywhere.
      uint64_t npages = ar.second / kPage;
      uint64_t pg = (op.b >> 8) % 4 ? (op.c >> 20) % std::min<uint64_t>(npages, 64) : (op.c >> 20) % npages;
      uint64_t off = (op.c % (kPage - ac.size + 1));
      if ((op.b >> 16) % 2) off &= ~uint64_t(ac.size - 1);  // aligned, usually
      ac.addr = ar.first + pg * kPage + off;
      const RefPage* rp = p.page(ac.addr);
      if (!rp) return ac;
      if (st && !(rp->prot & kProtWrite)) return ac;
      if (st) {
        ac.value = op.a ^ op.c;
      } else {
        uint64_t v = 0;
        for (unsigned i = 0; i < ac.size; ++i) v |= uint64_t(p.byte(ac.addr + i)) << (8 * i);
        ac.value = v;
      }
      ac.valid = true;
      return ac;
    }
    case OpKind::Touch: {
      if (p.areas.empty()) return ac;
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.len = std::min<uint64_t>(ac.len, 64 * kPage);
      ac.value = op.a;
      for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage) {
        const RefPage* rp = p.page(v);
        if (!rp || !(rp->prot & kProtWrite)) return ac;
      }
      ac.valid = true;
      return ac;
    }
    case OpKind::Verify:
      if (p.areas.empty()) return ac;
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.len = std::min<uint64_t>(ac.len, 4 * kPage);
      ac.valid = p.all_mapped(ac.addr, ac.len);
      return ac;
    case OpKind::Msync:  // MS_SYNC mostly, sometimes MS_ASYNC; a hole in the range is -ENOMEM
      if (p.areas.empty()) return ac;
      std::tie(ac.addr, ac.len) = pick_range(area(), op.b, op.c);
      ac.arg = (op.b >> 40) % 4 ? kMsSync : kMsAsync;
      ac.valid = p.all_mapped(ac.addr, ac.len);
      return ac;
    case OpKind::Fork:
    case OpKind::Wait:
    case OpKind::Exit:
      ac.valid = true;
      return ac;
  }
  return ac;
}

// The 8 bytes at `va` as the reference has them (little-endian).
inline uint64_t ref_u64(const RefProc& p, uint64_t va) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 8; ++i) v |= uint64_t(p.byte(va + i)) << (8 * i);
  return v;
}

// The bytes a store of `size` bytes of `value` writes (size > 8: the low byte repeated).
inline void store_bytes(uint64_t value, uint8_t size, uint8_t* out) {
  if (size <= 8) std::memcpy(out, &value, size);  // little-endian hosts (x86-64, arm64)
  else std::memset(out, int(value & 0xff), size);
}

// Apply a valid memory action to the reference (Mmap: `mmap_ret` is the address the kernel gave).
inline void apply(RefProc& p, const Action& ac, uint64_t mmap_ret = 0) {
  switch (ac.kind) {
    case OpKind::Mmap:
      for (uint64_t v = mmap_ret; v < mmap_ret + ac.len; v += kPage) {
        RefPage rp;
        if (ac.file >= 0) {
          rp.file = ac.file;
          rp.file_page = ac.pgoff + (v - mmap_ret) / kPage;
          rp.shared = ac.shared;
        }
        auto [it, fresh] = p.pages.insert_or_assign(v / kPage, rp);
        (void)it;
        if (fresh) p.mapped += kPage;
      }
      p.areas.emplace_back(mmap_ret, ac.len);
      return;
    case OpKind::Munmap:
      for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage)
        if (p.pages.erase(v / kPage)) p.mapped -= kPage;
      p.prune_areas();
      return;
    case OpKind::Mprotect:
      for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage) p.pages.at(v / kPage).prot = ac.arg;
      return;
    case OpKind::Madvise:
      for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage) {
        RefPage& rp = p.pages.at(v / kPage);
        switch (ac.arg) {
          case kMadvDontneed: rp.data.reset(); break;
          case kMadvDontfork: rp.dontfork = true; break;
          case kMadvDofork: rp.dontfork = false; break;
          case kMadvWipeonfork: rp.wipeonfork = true; break;
          case kMadvKeeponfork: rp.wipeonfork = false; break;
          default: break;  // [NO]HUGEPAGE: nothing visible
        }
      }
      return;
    case OpKind::Store: {
      uint8_t b[64];
      store_bytes(ac.value, ac.size, b);
      for (unsigned i = 0; i < ac.size; ++i) p.write(ac.addr + i, b[i]);
      return;
    }
    case OpKind::Touch:
      for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage) {
        uint64_t x = touch_value(ac.value, v), off = touch_offset(ac.value, v);
        for (unsigned i = 0; i < 8; ++i) p.write(v + off + i, uint8_t(x >> (8 * i)));
      }
      return;
    default: return;
  }
}

// Printable form of an op list (a regression test's initialiser).
inline std::string ops_to_cpp(const std::vector<Op>& ops) {
  std::string s;
  char buf[160];
  for (const Op& o : ops) {
    std::snprintf(buf, sizeof buf, "      {OpKind::%s, %u, 0x%llxull, 0x%llxull, 0x%llxull},\n",
                  op_kind_name(o.kind), o.proc, (unsigned long long)o.a, (unsigned long long)o.b,
                  (unsigned long long)o.c);
    s += buf;
  }
  return s;
}

}  // namespace mmusim::wl::rops
