// SPDX-License-Identifier: GPL-2.0-only
// Differential testing of memory contents, kernel level: random operation sequences (the generator
// and reference model of the random-ops workload, workloads/random_ops.hpp) over several
// processes, run on the kernel port through kmmtest::Fixture (UserAccess, no TLB, the invariant
// checker after every kernel entry), every load compared with the reference. Processes are
// interleaved by the sequence itself (each op names a live process), so a child's and its
// parent's operations mix between the fork and the child's exit.
//
// Every variant of the kernel runs: x86-64 and arm64 x kernel.wp_reuse (off, block16, pagetable,
// pagetable-flush) x kernel.fork_copy (per-pte, batched), with fixed seeds; at least 100,000
// operations per CI run over the variants. MMUSIM_DIFF_OPS=N sets the total (e.g. 1000000 for a
// longer run), MMUSIM_DIFF_SEED=S another base seed.
//
// With files (Limits::files), private and, with Limits::shared_files, shared mappings of them:
// the reference's one copy of each file (RefFiles) is what every mapping of a page reads until a
// private one copies it; at the end each file is fsync'ed and its disk compared with it.
//
// A failing sequence is shrunk (delta debugging over the op list: any subsequence is a valid
// sequence, see random_ops.hpp) and printed as a test case to paste below as a regression test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "fixture.hpp"
#include "kernel_mm/kernel.hpp"
#include "kernel_mm/user_access.hpp"
#include "workloads/random_ops.hpp"

using namespace mmusim::wl::rops;
using mmusim::wl::kProtRead;
using mmusim::wl::kProtWrite;
using mmusim::wl::kMapPrivateAnon;
using mmusim::wl::kMapShared;
using mmusim::wl::kMadvDontneed;
using mmusim::wl::kMadvHugepage;
using kmm::ForkCopy;
using kmm::WpReuse;
using kmm::ThpCow;
using mmusim::pg::Isa;

namespace {

struct Variant {
  Isa isa = Isa::x86_64;
  WpReuse wp = WpReuse::off;
  ForkCopy fc = ForkCopy::batched;
  ThpCow thp = ThpCow::split;
};

const char* isa_cpp(Isa i) { return i == Isa::x86_64 ? "Isa::x86_64" : "Isa::arm64"; }
const char* wp_cpp(WpReuse w) {
  switch (w) {
    case WpReuse::off: return "WpReuse::off";
    case WpReuse::block16: return "WpReuse::block16";
    case WpReuse::pagetable: return "WpReuse::pagetable";
    case WpReuse::pagetable_flush: return "WpReuse::pagetable_flush";
  }
  return "?";
}
const char* fc_cpp(ForkCopy f) { return f == ForkCopy::per_pte ? "ForkCopy::per_pte" : "ForkCopy::batched"; }
// "WpReuse::off" -> "off".
std::string enumerator(const char* cpp) {
  std::string s = cpp;
  const size_t c = s.find("::");
  return c == std::string::npos ? s : s.substr(c + 2);
}
std::string variant_name(const Variant& v) {
  return std::string(v.isa == Isa::x86_64 ? "x86_64" : "arm64") + " " + enumerator(wp_cpp(v.wp)) +
         " " + enumerator(fc_cpp(v.fc)) + (v.thp == ThpCow::copy ? " thp_cow=copy" : "");
}

// Deliberate bugs in the reference model, to test the harness itself (the shrinker).
enum class Mutant { none, dontneed_keeps_data, shared_store_private };

struct Outcome {
  bool failed = false;
  size_t op = 0;            // index of the failing op
  std::string message;
  uint64_t ops_applied = 0;  // ops that resolved to an action
  uint64_t bytes_compared = 0;
  uint64_t invariant_checks = 0;
  std::array<uint64_t, kOpKinds> per_kind{};  // applied, by OpKind
  uint64_t file_read_faults = 0, file_cow_faults = 0, file_pages_read = 0;  // kernel.* counters
  uint64_t memcg_pgsteal = 0, refaults = 0;  // memcg.pgsteal, kernel.workingset_refault_file
  uint64_t large_folios = 0;                 // kernel.pagecache_large_folios
  uint64_t pswpout = 0, high_events = 0, swap_fail = 0;  // kernel.pswpout, memcg.high_events, .swap_fail
  uint64_t shared_faults = 0, pages_written = 0, fsyncs = 0;  // kernel.do_shared_fault, .nr_written, .fsyncs
  uint64_t file_pmds = 0, pmd_splits = 0;  // kernel.thp_file_mapped, .split_huge_pmd
  uint64_t file_pages_checked = 0;  // pages of the files compared with the reference at the end
};

struct Proc {
  kmm::task_struct* t = nullptr;
  RefProc ref;
  bool alive = true;
  std::vector<size_t> children;  // not yet waited for
};

// Every page a process has mapped, compared whole with the reference, without faulting anything
// in: a page the hardware would fault on must be one the reference has no data for (the contents
// were dropped) and reads as zero when touched; a mapped page must hold the reference's bytes.
constexpr uint64_t kVerifyEvery = 400;
template <typename Fail>
void verify_all(kmm::Kernel& k, kmm::UserAccess& ua, Proc& p, size_t op, Outcome& out, Fail& fail) {
  PageBytes buf;
  for (auto& [vpn, rp] : p.ref.pages) {
    const uint64_t va = vpn * kPage;
    const uint64_t pa = ua.probe(p.t, va, false);
    // Where the page's bytes are, for the message: its frame, or its swap slot.
    std::function<std::string(unsigned)> where;
    if (pa != ~uint64_t(0)) {
      k.phys().read(pa & ~(kPage - 1), buf.data(), kPage);
      where = [&](unsigned j) { return fmt::format("PA {:#x}", (pa & ~(kPage - 1)) + j); };
    } else if (const kmm::pte_t* pte = k.find_pte(p.t->mm, va); pte && k.arch().is_swap_pte(*pte)) {
      // Swapped out: the bytes are the swap cache's folio's, else the slot's on the disk (a
      // zero-filled page kept in the zeromap reads as zeros).
      const kmm::swp_entry_t e = k.arch().pte_to_swp_entry(*pte);
      const auto* si = k.swap_info();
      const uint64_t off = kmm::swp_offset(e);
      if (const kmm::folio* f = k.swap_cache_peek(e)) {
        k.phys().read(uint64_t(k.page_to_pfn(f)) << kmm::PAGE_SHIFT, buf.data(), kPage);
      } else if (si->zeromap[off]) {
        buf.fill(0);
      } else {
        auto it = si->data.find(off);
        if (it == si->data.end() || it->second.size() != kPage) {
          fail(fmt::format("data integrity: task {} page at VA {:#x} is swapped out to slot {}, which "
                           "holds no data, after op #{}", p.t->pid, va, off, op));
          return;
        }
        std::copy(it->second.begin(), it->second.end(), buf.begin());
      }
      where = [off](unsigned) { return fmt::format("swapped out, slot {}", off); };
    } else {
      // Touched, the page will read zero (anonymous) or the file.
      if (rp.data)
        for (unsigned j = 0; j < kPage; ++j) {
          const uint8_t fresh = rp.file < 0 ? 0 : p.ref.file_now(rp.file, rp.file_page * kPage + j);
          if ((*rp.data)[j] != fresh) {
            fail(fmt::format("data integrity: task {} page at VA {:#x} is not mapped, but the "
                             "reference holds data there (byte {:#x} at +{:#x}), after op #{}",
                             p.t->pid, va, (*rp.data)[j], j, op));
            return;
          }
        }
      continue;
    }
    for (unsigned j = 0; j < kPage; ++j) {
      const uint8_t want = p.ref.byte(va + j);
      if (buf[j] != want) {
        fail(fmt::format("data integrity: task {} VA {:#x} ({}) holds {:#x}, expected {:#x}, after op #{}",
                         p.t->pid, va + j, where(j), buf[j], want, op));
        return;
      }
    }
    out.bytes_compared += kPage;
  }
}

// Runs `ops` on a fresh kernel of variant `v`; stops at the first failure (an exception from the
// kernel, e.g. a broken invariant, a syscall that fails, an access that gets a signal, or a load
// that reads other bytes than the reference has). At the end every process exits (teardown
// invariants, no leaks).
Outcome run_ops(const Variant& v, const std::vector<Op>& ops, const Limits& lim = {},
                Mutant mutant = Mutant::none, uint64_t memcg_max = 0,
                const std::function<void(kmm::KernelParams&)>& tweak = {}) {
  Outcome out;
  kmmtest::Fixture fix(v.isa, [&](kmm::KernelParams& p) {
    p.memcg_max = memcg_max;  // every process in a memory cgroup of that memory.max (0: none)
    if (tweak) tweak(p);
    p.wp_reuse = v.wp;
    p.fork_copy = v.fc;
    p.thp_cow = v.thp;
    p.phys_mem = 1ull << 30;
    // As the random-ops workload sets them: 16K, 64K, 1M, 2M in madvise mode.
    for (unsigned o = 2; o <= kmm::HPAGE_PMD_ORDER; ++o) p.thp_order[o] = kmm::ThpMode::never;
    for (unsigned o : {2u, 4u, 8u, 9u}) p.thp_order[o] = kmm::ThpMode::madvise;
  });
  kmm::Kernel& k = fix.kernel();
  kmm::UserAccess& ua = *fix.ua;
  std::vector<Proc> procs;
  procs.push_back({k.create_process("rops"), {}, true, {}});
  procs[0].ref.lim = lim;
  std::vector<kmm::address_space*> files;  // inodes 1..lim.files, as the reference has them
  for (unsigned f = 0; f < lim.files; ++f)
    files.push_back(k.file_create("file" + std::to_string(f), lim.file_size, lim.file_seed));
  if (lim.large_folios)
    for (kmm::address_space* m : files) kmm::mapping_set_large_folios(m);
  size_t i = 0;
  auto fail = [&](std::string m) {
    out.failed = true;
    out.op = i;
    out.message = std::move(m);
  };
  try {
    for (; i < ops.size() && !out.failed; ++i) {
      const Op& op = ops[i];
      std::vector<size_t> live;
      for (size_t p = 0; p < procs.size(); ++p)
        if (procs[p].alive) live.push_back(p);
      const size_t pi = live[op.proc % live.size()];
      Action ac = resolve(op, procs[pi].ref, lim);
      if (!ac.valid) continue;
      Proc& p = procs[pi];
      k.enter(p.t, 0);
      switch (op.kind) {
        case OpKind::Mmap: {
          int64_t r = ac.file < 0 ? k.sys_mmap(p.t, 0, ac.len, kProtRead | kProtWrite, kMapPrivateAnon)
                                  : k.sys_mmap(p.t, 0, ac.len, kProtRead | kProtWrite,
                                               ac.shared ? kMapShared : kMapPrivateAnon & ~0x20,
                                               files[size_t(ac.file)], ac.pgoff * kPage);
          if (r <= 0) {
            fail(fmt::format("mmap({:#x}) returned {}", ac.len, r));
            continue;
          }
          if (ac.file >= 0 && lim.hugepage_files) {
            if (int m = k.sys_madvise(p.t, uint64_t(r), ac.len, kMadvHugepage); m != 0) {
              fail(fmt::format("madvise({:#x}, {:#x}, MADV_HUGEPAGE) of a file mapping returned {}", r, ac.len, m));
              continue;
            }
          }
          apply(p.ref, ac, uint64_t(r));
          break;
        }
        case OpKind::Munmap:
        case OpKind::Mprotect:
        case OpKind::Madvise:
        case OpKind::Msync: {
          int r = op.kind == OpKind::Munmap     ? k.sys_munmap(p.t, ac.addr, ac.len)
                  : op.kind == OpKind::Mprotect ? k.sys_mprotect(p.t, ac.addr, ac.len, ac.arg)
                  : op.kind == OpKind::Msync    ? k.sys_msync(p.t, ac.addr, ac.len, ac.arg)
                                                : k.sys_madvise(p.t, ac.addr, ac.len, ac.arg);
          if (r != 0) {
            fail(fmt::format("{}({:#x}, {:#x}, {}) returned {}", op_kind_name(op.kind), ac.addr, ac.len, ac.arg, r));
            continue;
          }
          if (!(mutant == Mutant::dontneed_keeps_data && op.kind == OpKind::Madvise && ac.arg == kMadvDontneed))
            apply(p.ref, ac);
          break;
        }
        case OpKind::Store: {
          uint8_t b[64];
          store_bytes(ac.value, ac.size, b);
          if (!ua.store(p.t, ac.addr, b, ac.size)) {
            fail(fmt::format("store to {:#x} by task {} got a signal", ac.addr, p.t->pid));
            continue;
          }
          if (mutant == Mutant::shared_store_private)  // the mutant: a shared page written is a private copy
            for (unsigned j = 0; j < ac.size; ++j)
              if (auto it = p.ref.pages.find((ac.addr + j) / kPage); it != p.ref.pages.end() && it->second.shared) {
                const PageBytes now = p.ref.page_bytes(it->first);
                it->second.shared = false;
                it->second.data = std::make_shared<PageBytes>(now);
              }
          apply(p.ref, ac);
          break;
        }
        case OpKind::Touch:
          for (uint64_t va = ac.addr; va < ac.addr + ac.len; va += kPage) {
            uint64_t x = touch_value(ac.value, va);
            if (!ua.store(p.t, va + touch_offset(ac.value, va), &x, 8)) {
              fail(fmt::format("store to {:#x} by task {} got a signal", va, p.t->pid));
              break;
            }
          }
          if (!out.failed) apply(p.ref, ac);
          break;
        case OpKind::Load: {
          uint64_t got = 0;
          if (!ua.load(p.t, ac.addr, &got, ac.size)) {
            fail(fmt::format("load from {:#x} by task {} got a signal", ac.addr, p.t->pid));
            continue;
          }
          if (got != ac.value) {
            fail(fmt::format("data integrity: task {} load at VA {:#x} ({} bytes) read {:#x}, "
                             "expected {:#x}, after op #{}",
                             p.t->pid, ac.addr, ac.size, got, ac.value, i));
            continue;
          }
          out.bytes_compared += ac.size;
          break;
        }
        case OpKind::Fork: {
          if (live.size() >= lim.max_procs) continue;
          kmm::task_struct* c = k.sys_fork(p.t);
          if (!c) {
            fail("fork failed");
            continue;
          }
          Proc child{c, p.ref.fork_child(), true, {}};
          procs.push_back(std::move(child));
          procs[pi].children.push_back(procs.size() - 1);
          break;
        }
        case OpKind::Wait: {
          if (p.children.empty()) continue;
          const size_t ci = op.a % p.children.size();
          Proc& c = procs[p.children[ci]];
          int r = k.sys_wait(p.t, c.t);
          if (r != (c.alive ? 0 : c.t->pid)) {
            fail(fmt::format("wait for task {} ({}) returned {}", c.t->pid, c.alive ? "alive" : "zombie", r));
            continue;
          }
          if (!c.alive) p.children.erase(p.children.begin() + long(ci));
          break;
        }
        case OpKind::Verify: {
          std::vector<uint8_t> buf(ac.len);
          if (!ua.load(p.t, ac.addr, buf.data(), ac.len)) {
            fail(fmt::format("load from {:#x} by task {} got a signal", ac.addr, p.t->pid));
            continue;
          }
          for (uint64_t j = 0; j < ac.len; ++j)
            if (buf[j] != p.ref.byte(ac.addr + j)) {
              fail(fmt::format("data integrity: task {} load at VA {:#x} (1 byte) read {:#x}, "
                               "expected {:#x}, after op #{}",
                               p.t->pid, ac.addr + j, buf[j], p.ref.byte(ac.addr + j), i));
              break;
            }
          out.bytes_compared += ac.len;
          break;
        }
        case OpKind::Exit:
          if (pi == 0) continue;  // the first process lives to the end
          k.sys_exit(p.t, 0);
          p.alive = false;
          p.children.clear();  // handed to init, which reaps them
          p.ref = RefProc{};
          break;
      }
      ++out.ops_applied;
      ++out.per_kind[unsigned(op.kind)];
      if (out.ops_applied % kVerifyEvery == 0)
        for (Proc& q : procs)
          if (q.alive && !out.failed) verify_all(k, ua, q, i, out, fail);
    }
    if (!out.failed)
      for (Proc& q : procs)
        if (q.alive && !out.failed) verify_all(k, ua, q, i, out, fail);
    // The files: fsync'ed (every dirty page written and waited for), the disk must hold what the
    // shared mappings wrote, every other byte as created.
    if (!out.failed && lim.shared_files) {
      k.enter(procs[0].t, 0);
      for (unsigned f = 0; f < lim.files && !out.failed; ++f) {
        if (int r = k.vfs_fsync_range(files[f], 0, lim.file_size - 1, 0); r != 0) {
          fail(fmt::format("fsync of file {} returned {}", f, r));
          break;
        }
        for (uint64_t off = 0; off < lim.file_size && !out.failed; off += 8) {
          const uint64_t got = kmm::Kernel::disk_word(files[f], off);
          uint64_t want = 0;
          for (unsigned b = 0; b < 8; ++b) want |= uint64_t(procs[0].ref.file_now(int(f), off + b)) << (8 * b);
          if (got != want)
            fail(fmt::format("data integrity: file {} on the disk after fsync holds {:#x} at {:#x}, expected {:#x}",
                             f, got, off, want));
          if (off % kPage == 0) ++out.file_pages_checked;
        }
      }
    }
    if (!out.failed) {
      // Teardown: the children first, then the first process.
      for (size_t p = procs.size(); p-- > 0;)
        if (procs[p].alive) {
          k.enter(procs[p].t, 0);
          k.sys_exit(procs[p].t, 0);
          procs[p].alive = false;
        }
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  out.invariant_checks = fix.count("kernel.invariant_checks");
  out.file_read_faults = fix.count("kernel.do_read_fault");
  out.file_cow_faults = fix.count("kernel.do_cow_fault");
  out.file_pages_read = fix.count("kernel.filemap_read_pages");
  out.memcg_pgsteal = fix.count("memcg.pgsteal");
  out.pswpout = fix.count("kernel.pswpout");
  out.high_events = fix.count("memcg.high_events");
  out.swap_fail = fix.count("memcg.swap_fail");
  out.refaults = fix.count("kernel.workingset_refault_file");
  out.large_folios = fix.count("kernel.pagecache_large_folios");
  out.shared_faults = fix.count("kernel.do_shared_fault");
  out.file_pmds = fix.count("kernel.thp_file_mapped");
  out.pmd_splits = fix.count("kernel.split_huge_pmd");
  out.pages_written = fix.count("kernel.nr_written");
  out.fsyncs = fix.count("kernel.fsyncs");
  return out;
}

std::vector<Op> random_sequence(uint64_t seed, size_t n, const Weights& wt = {}) {
  Rng r{seed};
  std::vector<Op> ops;
  ops.reserve(n);
  for (size_t i = 0; i < n; ++i) ops.push_back(draw(r, wt));
  return ops;
}

// Delta debugging (Zeller's ddmin) over the op list: the smallest subsequence that still fails,
// 1-minimal (removing any single op makes it pass).
std::vector<Op> shrink(std::vector<Op> ops, const std::function<Outcome(const std::vector<Op>&)>& run) {
  auto fails = [&](std::vector<Op>& cand) {
    Outcome o = run(cand);
    if (!o.failed) return false;
    if (o.op + 1 < cand.size()) cand.resize(o.op + 1);  // nothing after the failure matters
    return true;
  };
  if (!fails(ops)) return ops;
  size_t n = 2;
  while (ops.size() >= 2) {
    const size_t chunk = (ops.size() + n - 1) / n;
    bool reduced = false;
    for (size_t start = 0; start < ops.size(); start += chunk) {
      std::vector<Op> cand(ops.begin(), ops.begin() + long(start));
      cand.insert(cand.end(), ops.begin() + long(std::min(ops.size(), start + chunk)), ops.end());
      if (!cand.empty() && fails(cand)) {
        ops = std::move(cand);
        n = std::max<size_t>(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (n >= ops.size()) break;
      n = std::min(ops.size(), 2 * n);
    }
  }
  return ops;
}

// The Limits a reproducer needs to run as the failing case did ("" for the defaults).
std::string limits_cpp(const Limits& lim) {
  const Limits d;
  std::string s;
  if (lim.max_procs != d.max_procs) s += fmt::format("  lim.max_procs = {};\n", lim.max_procs);
  if (lim.max_mapped != d.max_mapped) s += fmt::format("  lim.max_mapped = {:#x};\n", lim.max_mapped);
  if (lim.max_areas != d.max_areas) s += fmt::format("  lim.max_areas = {};\n", lim.max_areas);
  if (lim.files != d.files) s += fmt::format("  lim.files = {};\n", lim.files);
  if (lim.file_size != d.file_size) s += fmt::format("  lim.file_size = {:#x};\n", lim.file_size);
  if (lim.file_seed != d.file_seed) s += fmt::format("  lim.file_seed = {:#x};\n", lim.file_seed);
  if (lim.large_folios) s += "  lim.large_folios = true;\n";
  if (lim.shared_files) s += "  lim.shared_files = true;\n";
  if (lim.hugepage_files) s += "  lim.hugepage_files = true;\n";
  return s.empty() ? s : "  Limits lim;\n" + s;
}

// A failing case as a test to paste below: its ops, its variant, and the Limits and memory.max
// it ran with.
std::string reproducer(const Variant& v, const std::vector<Op>& ops, const std::string& message,
                       const Limits& lim = {}, uint64_t memcg_max = 0) {
  const std::string lims = limits_cpp(lim);
  const std::string extra = memcg_max ? fmt::format(", {}, Mutant::none, {:#x}", lims.empty() ? "Limits{}" : "lim", memcg_max)
                            : lims.empty() ? std::string() : ", lim";
  return fmt::format(
      "// {}\n"
      "TEST_CASE(\"differential regression: {} #{:04x}\", \"[differential][regression]\") {{\n"
      "  const std::vector<Op> ops = {{\n{}  }};\n"
      "{}"
      "  Outcome o = run_ops({{{}, {}, {}{}}}, ops{});\n"
      "  INFO(o.message);\n"
      "  CHECK_FALSE(o.failed);\n"
      "}}\n",
      message, variant_name(v), ops.empty() ? 0u : unsigned(ops[0].a & 0xffff), ops_to_cpp(ops), lims, isa_cpp(v.isa),
      wp_cpp(v.wp), fc_cpp(v.fc), v.thp == ThpCow::copy ? ", ThpCow::copy" : "", extra);
}

// After a failing run of `seq`: the sequence shrunk and printed as a regression test (the caller
// then fails the test case).
void report_if_failed(const Variant& v, const std::vector<Op>& seq, const Outcome& o, const Limits& lim,
                      uint64_t memcg_max = 0) {
  if (!o.failed) return;
  auto run = [&](const std::vector<Op>& c) { return run_ops(v, c, lim, Mutant::none, memcg_max); };
  const std::vector<Op> small = shrink(seq, run);
  const Outcome so = run(small);
  std::printf("FAILED: %s, op #%zu of %zu: %s\nshrunk to %zu ops: %s\n%s\n", variant_name(v).c_str(), o.op,
              seq.size(), o.message.c_str(), small.size(), so.message.c_str(),
              reproducer(v, small, so.message, lim, memcg_max).c_str());
}

uint64_t env_u64(const char* name, uint64_t def) {
  const char* s = std::getenv(name);
  return s && *s ? std::strtoull(s, nullptr, 0) : def;
}

// The CI budget: 100,000 operations over the 16 variants (MMUSIM_DIFF_OPS overrides).
constexpr uint64_t kDefaultTotalOps = 102400;
constexpr unsigned kVariants = 16;
constexpr size_t kSequenceLength = 1600;  // ops per sequence (state builds up within one)

// The sequence of `seed` run; a failure is shrunk and printed (report_if_failed()) and fails the
// test case.
Outcome run_seed(const Variant& v, uint64_t seed, const Limits& lim, uint64_t memcg_max, const Weights& wt = {}) {
  const std::vector<Op> seq = random_sequence(seed, kSequenceLength, wt);
  Outcome o = run_ops(v, seq, lim, Mutant::none, memcg_max);
  INFO(variant_name(v) << (lim.large_folios ? " large folios" : "") << " seed " << seed << " memcg " << memcg_max
                       << ": " << o.message);
  report_if_failed(v, seq, o, lim, memcg_max);
  REQUIRE_FALSE(o.failed);
  return o;
}

void run_variant(Isa isa, WpReuse wp, ThpCow thp = ThpCow::split, const Limits& lim = {}) {
  const uint64_t total = env_u64("MMUSIM_DIFF_OPS", kDefaultTotalOps);
  const uint64_t base_seed = env_u64("MMUSIM_DIFF_SEED", 0x646966660000ull) + (thp == ThpCow::copy ? 0x7000 : 0);
  const uint64_t per_variant = std::max<uint64_t>(1, total / kVariants);
  for (ForkCopy fc : {ForkCopy::per_pte, ForkCopy::batched}) {
    const Variant v{isa, wp, fc, thp};
    uint64_t ops = 0, applied = 0, bytes = 0, checks = 0;
    for (uint64_t s = 0; ops < per_variant; ++s) {
      const size_t n = size_t(std::min<uint64_t>(kSequenceLength, per_variant - ops));
      const uint64_t seed = base_seed + s * 0x10001 + unsigned(wp) * 0x100 + unsigned(fc) * 0x10 + unsigned(isa);
      const std::vector<Op> seq = random_sequence(seed, n);
      Outcome o = run_ops(v, seq, lim);
      ops += n;
      applied += o.ops_applied;
      bytes += o.bytes_compared;
      checks += o.invariant_checks;
      if (o.failed) {
        report_if_failed(v, seq, o, lim);
        FAIL(variant_name(v) << " seed " << seed << ": " << o.message);
      }
    }
    std::printf("differential %-28s ops %llu (applied %llu), bytes compared %llu, invariant checks %llu\n",
                variant_name(v).c_str(), (unsigned long long)ops, (unsigned long long)applied,
                (unsigned long long)bytes, (unsigned long long)checks);
    CHECK(applied > ops / 2);
    CHECK(bytes > 0);
    CHECK(checks >= applied / 4);
  }
}

}  // namespace

#define DIFF_CASE(ISA, WP)                                                                          \
  TEST_CASE("differential: random ops against a reference model, " #ISA " wp_reuse=" #WP,          \
            "[differential]") {                                                                     \
    run_variant(Isa::ISA, WpReuse::WP);                                                             \
  }
DIFF_CASE(x86_64, off)
DIFF_CASE(x86_64, block16)
DIFF_CASE(x86_64, pagetable)
DIFF_CASE(x86_64, pagetable_flush)
DIFF_CASE(arm64, off)
DIFF_CASE(arm64, block16)
DIFF_CASE(arm64, pagetable)
DIFF_CASE(arm64, pagetable_flush)

// The pre-5.8 THP COW (kernel.thp_cow = copy): a shared PMD-mapped THP is copied whole.
TEST_CASE("differential: random ops against a reference model, thp_cow=copy", "[differential]") {
  run_variant(Isa::x86_64, WpReuse::off, ThpCow::copy);
  run_variant(Isa::arm64, WpReuse::pagetable, ThpCow::copy);
}

// Private file mappings among the anonymous ones (Limits::files): read faults from the page
// cache with read-around and fault-around, COW of file pages, MADV_DONTNEED back to the file, fork
// of VMAs with file and anonymous pages; the CACHE invariants after every entry.
TEST_CASE("differential: random ops with private file mappings against a reference model", "[differential]") {
  Limits lim;
  lim.files = 2;
  lim.file_seed = 0x66696c65;
  run_variant(Isa::x86_64, WpReuse::off, ThpCow::split, lim);
  run_variant(Isa::arm64, WpReuse::pagetable, ThpCow::split, lim);
}

TEST_CASE("differential: file mappings occur and are read and copied", "[differential]") {
  Limits lim;
  lim.files = 2;
  const Variant v{Isa::x86_64, WpReuse::off, ForkCopy::batched};
  Outcome o = run_ops(v, random_sequence(7, 3000), lim);
  INFO(o.message);
  REQUIRE_FALSE(o.failed);
  CHECK(o.bytes_compared > 1000);
  CHECK(o.file_read_faults > 0);
  CHECK(o.file_cow_faults > 0);
  CHECK(o.file_pages_read > 0);
  // Without files the same sequence maps no file.
  Outcome a = run_ops(v, random_sequence(7, 3000));
  REQUIRE_FALSE(a.failed);
  CHECK(a.file_read_faults == 0);
}

// The same on a filesystem with large page-cache folios (disk.fs = xfs): readahead adds folios
// of orders 2-5, fault-around maps runs of them, COW copies one page of one, reclaim unmaps and
// drops them whole (a shadow at every index) in a memory cgroup far smaller than the files;
// every byte still the reference's, the CACHE-L invariants after every entry.
TEST_CASE("differential: random ops with private mappings of files with large folios, in and out of a memory cgroup", "[differential][memcg][large]") {
  Limits lim;
  lim.files = 2;
  lim.file_seed = 0x78667321;
  lim.large_folios = true;
  for (const Variant& v : {Variant{Isa::x86_64, WpReuse::off, ForkCopy::batched},
                           Variant{Isa::arm64, WpReuse::pagetable, ForkCopy::per_pte}}) {
    uint64_t large = 0, stolen = 0, refaults = 0, reads = 0, cows = 0;
    for (uint64_t seed : {41, 42}) {
      for (uint64_t memcg : {uint64_t(0), uint64_t(6) << 20}) {
        const Outcome o = run_seed(v, seed, lim, memcg);
        large += o.large_folios;
        stolen += o.memcg_pgsteal;
        refaults += o.refaults;
        reads += o.file_read_faults;
        cows += o.file_cow_faults;
      }
    }
    INFO(variant_name(v));
    CHECK(large > 100);
    CHECK(stolen > 1000);
    CHECK(refaults > 0);
    CHECK(reads > 0);
    CHECK(cows > 0);
  }
  // The same sequence on ext4-like files adds none.
  lim.large_folios = false;
  Outcome o = run_ops(Variant{Isa::x86_64, WpReuse::off, ForkCopy::batched}, random_sequence(41, 2000), lim);
  REQUIRE_FALSE(o.failed);
  CHECK(o.large_folios == 0);
  CHECK(o.file_pages_read > 0);
}

// The same in a memory cgroup far smaller than the files (memcg.max = 6M): the page cache is
// reclaimed under the processes' feet (unmapped from every one, dropped, read again through
// shadow entries) while they fork, COW, unmap and exit; every byte still the reference's, the
// LRU and memcg invariants after every entry.
TEST_CASE("differential: random ops with file mappings in a memory cgroup that keeps reclaiming them", "[differential][memcg]") {
  Limits lim;
  lim.files = 2;
  lim.file_seed = 0x6d656d63;
  for (const Variant& v : {Variant{Isa::x86_64, WpReuse::off, ForkCopy::batched},
                           Variant{Isa::arm64, WpReuse::pagetable, ForkCopy::per_pte}}) {
    uint64_t stolen = 0, refaults = 0, bytes = 0;
    for (uint64_t seed : {31, 32, 33}) {
      const Outcome o = run_seed(v, seed, lim, 6ull << 20);
      stolen += o.memcg_pgsteal;
      refaults += o.refaults;
      bytes += o.bytes_compared;
    }
    INFO(variant_name(v));
    CHECK(stolen > 1000);
    CHECK(refaults > 0);
    CHECK(bytes > 100000);
  }
}

// Anonymous memory under memory.high (2M) with swap bounded by memory.swap.max (1M): every batch
// charge over it reclaims (the synchronous path in the charge: the harness has no return to user
// mode), order-0 pages go to swap until the cgroup's share is used (then swap-outs are refused),
// large folios stay; every byte still the reference's (swapped-out pages compared with their
// slots), the LRU, memcg and swap invariants (swap counted per memcg) after
// every entry.
TEST_CASE("differential: random ops under memory.high with swap bounded by memory.swap.max", "[differential][memcg][swap]") {
  for (const Variant& v : {Variant{Isa::x86_64, WpReuse::pagetable, ForkCopy::batched},
                           Variant{Isa::arm64, WpReuse::off, ForkCopy::per_pte}}) {
    uint64_t stolen = 0, swapped = 0, events = 0, bytes = 0, refused = 0;
    for (uint64_t seed : {41, 42}) {
      Outcome o = run_ops(v, random_sequence(seed, kSequenceLength), {}, Mutant::none, 0, [](kmm::KernelParams& p) {
        p.memcg_high = 2ull << 20;
        p.swap_size = 64ull << 20;
        p.memcg_swap_max = 1ull << 20;
      });
      INFO(variant_name(v) << " seed " << seed << ": " << o.message);
      REQUIRE_FALSE(o.failed);
      stolen += o.memcg_pgsteal;
      swapped += o.pswpout;
      events += o.high_events;
      refused += o.swap_fail;
      bytes += o.bytes_compared;
    }
    INFO(variant_name(v));
    CHECK(events > 0);
    CHECK(stolen > 0);
    CHECK(swapped > 0);
    CHECK(refused > 0);  // the cgroup's swap share was used up: swap-outs refused
    CHECK(bytes > 100000);
  }
}

// Two 8 MiB files, mapped private or shared.
Limits shared_file_limits() {
  Limits lim;
  lim.files = 2;
  lim.file_seed = 0x73686172;
  lim.shared_files = true;
  return lim;
}

// Shared file mappings among the private and anonymous ones (Limits::shared_files), with msync:
// write faults on the page cache (do_shared_fault(), wp_page_shared() after msync cleaned the
// PTEs), dirty accounting and writeback, fork sharing the pages, private mappings of the same
// file reading what the shared ones wrote until they copy; at the end every file fsync'ed and its
// disk compared with the reference. Out of and in a memory cgroup far smaller than the files
// (reclaim writes dirty folios back: the flusher, then drops them; a refault reads the written
// bytes back), on ext4-like and XFS-like (large folio) files.
TEST_CASE("differential: random ops with shared and private file mappings, msync, in and out of a memory cgroup", "[differential][memcg][shared]") {
  Limits lim = shared_file_limits();
  for (bool large : {false, true}) {
    lim.large_folios = large;
    for (const Variant& v : {Variant{Isa::x86_64, WpReuse::off, ForkCopy::batched},
                             Variant{Isa::arm64, WpReuse::pagetable, ForkCopy::per_pte}}) {
      uint64_t shared = 0, written = 0, fsyncs = 0, stolen = 0, refaults = 0, checked = 0, bytes = 0, cows = 0;
      uint64_t pmds = 0, splits = 0;
      for (uint64_t seed : {51, 52}) {
        for (uint64_t memcg : {uint64_t(0), uint64_t(6) << 20}) {
          const Outcome o = run_seed(v, seed, lim, memcg, Weights::with_msync());
          shared += o.shared_faults;
          written += o.pages_written;
          fsyncs += o.fsyncs;
          stolen += o.memcg_pgsteal;
          refaults += o.refaults;
          checked += o.file_pages_checked;
          bytes += o.bytes_compared;
          cows += o.file_cow_faults;
          pmds += o.file_pmds;
          splits += o.pmd_splits;
        }
      }
      INFO(variant_name(v) << (large ? " large folios" : ""));
      std::printf("differential shared files %-22s%s: shared faults %llu, pages written %llu, fsyncs %llu, "
                  "pgsteal %llu, refaults %llu, bytes compared %llu, file PMDs mapped %llu, PMD splits %llu\n",
                  variant_name(v).c_str(), large ? " large" : "", (unsigned long long)shared,
                  (unsigned long long)written, (unsigned long long)fsyncs, (unsigned long long)stolen,
                  (unsigned long long)refaults, (unsigned long long)bytes, (unsigned long long)pmds,
                  (unsigned long long)splits);
      // No order-9 folio forms here (the VM_HUGEPAGE readaheads meet cached folios or failed
      // charges): the next case makes PMD-mapped page cache.
      CHECK(pmds == 0);
      CHECK(shared > 0);
      CHECK(written > 0);
      CHECK(fsyncs > 0);
      CHECK(stolen > 1000);
      CHECK(refaults > 0);
      CHECK(cows > 0);
      CHECK(checked == 2 * 2 * 2 * (lim.file_size / kPage));  // every page of both files, every run
      CHECK(bytes > 100000);
    }
  }
}

// The same with every file mapping MADV_HUGEPAGE'd (Limits::hugepage_files) on XFS-like files:
// a miss reads order-9 folios (VM_HUGEPAGE readahead, where the range is free), and do_set_pmd()
// maps them with one PMD where a VMA covers a 2 MiB block of the file at an aligned offset (the
// mappings are placed by thp_get_unmapped_area()). PMD-mapped page cache then meets private and
// shared writes (split), msync and writeback (folio_mkclean() of a PMD), DONTNEED, munmap,
// mprotect and fork; every byte and the disk are compared as above. Out of a memory cgroup and in
// one of 32M: there a shared write that dirties a 2 MiB folio over the cgroup's background dirty
// threshold wakes the flusher, which runs later (at the next entry, or in the dirtier's
// balance_dirty_pages() pause, after which the store may fault again and dirty it again). Not in
// 8M: one folio (512 pages) is over that cgroup's hard dirty limit, every write fault pauses, the
// flusher cleans the folio in the pause and the store never retires; whether Linux gets out of
// that is not known (docs/plan-flusher-kworker.md §2). Reclaim of PMD-mapped folios is tested in
// test_filemap_large.cpp.
TEST_CASE("differential: random ops with PMD-mapped page cache (MADV_HUGEPAGE file mappings)", "[differential][shared][pmd]") {
  Limits lim = shared_file_limits();
  lim.large_folios = true;
  lim.hugepage_files = true;
  for (const Variant& v : {Variant{Isa::x86_64, WpReuse::off, ForkCopy::batched},
                           Variant{Isa::arm64, WpReuse::pagetable, ForkCopy::per_pte}}) {
    uint64_t pmds = 0, splits = 0, stolen = 0, written = 0, bytes = 0, checked = 0;
    for (uint64_t seed = 61; seed <= 68; ++seed) {
      for (uint64_t memcg : {uint64_t(0), uint64_t(32) << 20}) {
        const Outcome o = run_seed(v, seed, lim, memcg, Weights::with_msync());
        pmds += o.file_pmds;
        splits += o.pmd_splits;
        stolen += o.memcg_pgsteal;
        written += o.pages_written;
        bytes += o.bytes_compared;
        checked += o.file_pages_checked;
      }
    }
    INFO(variant_name(v));
    std::printf("differential PMD page cache %-22s: file PMDs mapped %llu, PMD splits %llu, pgsteal %llu, pages "
                "written %llu, bytes compared %llu\n",
                variant_name(v).c_str(), (unsigned long long)pmds, (unsigned long long)splits,
                (unsigned long long)stolen, (unsigned long long)written, (unsigned long long)bytes);
    CHECK(pmds > 20);
    CHECK(splits > 2);
    CHECK(stolen == 0);
    CHECK(written > 0);
    CHECK(checked == 8 * 2 * 2 * (lim.file_size / kPage));  // seeds x files x memcg settings
    CHECK(bytes > 100000);
  }
}

// The harness sees a reference that gets shared mappings wrong: one that keeps a shared page's
// writes to itself (a private copy) is caught, by another mapping's load or by the disk at the end.
TEST_CASE("differential: a reference that makes shared stores private is caught", "[differential][shared]") {
  Limits lim = shared_file_limits();
  const Variant v{Isa::x86_64, WpReuse::off, ForkCopy::batched};
  const std::vector<Op> seq = random_sequence(51, kSequenceLength, Weights::with_msync());
  REQUIRE_FALSE(run_ops(v, seq, lim).failed);
  Outcome o = run_ops(v, seq, lim, Mutant::shared_store_private);
  CHECK(o.failed);
  CHECK(o.message.find("data integrity") != std::string::npos);
  // Its reproducer carries the Limits and memory.max the run had.
  const std::string code = reproducer(v, {seq.front()}, o.message, lim, 6ull << 20);
  CHECK(code.find("  lim.files = 2;\n  lim.file_seed = 0x73686172;\n  lim.shared_files = true;\n") != std::string::npos);
  CHECK(code.find("ops, lim, Mutant::none, 0x600000);") != std::string::npos);
  CHECK(reproducer(v, {seq.front()}, o.message).find("}, ops);") != std::string::npos);
}

TEST_CASE("differential: the generator covers every operation", "[differential]") {
  const Variant v{Isa::x86_64, WpReuse::pagetable, ForkCopy::batched};
  Limits lim;
  lim.files = 2;
  lim.shared_files = true;
  Outcome o = run_ops(v, random_sequence(42, 3000, Weights::with_msync()), lim);
  INFO(o.message);
  REQUIRE_FALSE(o.failed);
  for (unsigned k = 0; k < kOpKinds; ++k) {
    INFO(op_kind_name(OpKind(k)));
    CHECK(o.per_kind[k] > 0);
  }
  CHECK(o.bytes_compared > 1000);
}

TEST_CASE("differential: large folios of every enabled size occur", "[differential]") {
  const Variant v{Isa::x86_64, WpReuse::pagetable, ForkCopy::batched};
  kmmtest::Fixture fix(v.isa, [&](kmm::KernelParams& p) {
    for (unsigned o = 2; o <= kmm::HPAGE_PMD_ORDER; ++o) p.thp_order[o] = kmm::ThpMode::never;
    for (unsigned o : {2u, 4u, 8u, 9u}) p.thp_order[o] = kmm::ThpMode::madvise;
  });
  // What the generator's Touch of a MADV_HUGEPAGE'd 4M area does: a PMD THP; a 1M-aligned range
  // after NOHUGEPAGE of the 2M block around it falls back to smaller orders.
  kmm::Kernel& k = fix.kernel();
  kmm::task_struct* t = k.create_process("rops");
  k.enter(t, 0);
  int64_t a = k.sys_mmap(t, 0, 4ull << 20, kProtRead | kProtWrite, kMapPrivateAnon);
  REQUIRE(a > 0);
  REQUIRE(k.sys_madvise(t, uint64_t(a), 4ull << 20, kMadvHugepage) == 0);
  const uint64_t blk = (uint64_t(a) + (2ull << 20) - 1) & ~((2ull << 20) - 1);
  REQUIRE(fix.ua->store8(t, blk, 1));
  CHECK(fix.count("kernel.do_huge_pmd_anonymous_page") >= 1);
}

// ---- the harness itself ----------------------------------------------------------------------

TEST_CASE("differential: a reference-model bug is found and shrunk to a short reproducer", "[differential]") {
  // The mutant reference forgets that MADV_DONTNEED drops the contents: the kernel (correctly)
  // reads zeroes. The harness must find it, and ddmin must cut the sequence down to the few
  // operations that matter (mmap, a store, the DONTNEED over it, a load of it).
  const Variant v{Isa::x86_64, WpReuse::off, ForkCopy::batched};
  std::vector<Op> seq;
  Outcome o;
  for (uint64_t seed = 1; seed < 50 && !o.failed; ++seed) {
    seq = random_sequence(seed * 0x51, 1500);
    o = run_ops(v, seq, {}, Mutant::dontneed_keeps_data);
  }
  REQUIRE(o.failed);
  CHECK(o.message.find("data integrity") != std::string::npos);
  std::vector<Op> small =
      shrink(seq, [&](const std::vector<Op>& c) { return run_ops(v, c, {}, Mutant::dontneed_keeps_data); });
  INFO(reproducer(v, small, "mutant"));
  CHECK(small.size() <= 6);
  Outcome so = run_ops(v, small, {}, Mutant::dontneed_keeps_data);
  CHECK(so.failed);
  CHECK(so.message.find("data integrity") != std::string::npos);
  // The real model passes the same sequence.
  CHECK_FALSE(run_ops(v, small).failed);
  std::string code = reproducer(v, small, so.message);
  CHECK(code.find("TEST_CASE(\"differential regression") != std::string::npos);
  CHECK(code.find("OpKind::Madvise") != std::string::npos);
}

// ---- regression tests (shrunk reproducers, pasted as printed) -------------------------------

// The shrinker's output for the MADV_DONTNEED mutant above (shrunk from 1,500 ops): the real
// kernel and reference agree that DONTNEED over a touched range drops its contents (the end-of-
// sequence comparison of every mapped page sees zeroes).
TEST_CASE("differential regression: x86_64 off batched #78db", "[differential][regression]") {
  const std::vector<Op> ops = {
      {OpKind::Mmap, 7197115, 0x874615e9e83e78dbull, 0xc0d31944d08a725cull, 0x9585381284805f76ull},
      {OpKind::Touch, 8231397, 0xb0ff89e406bb953full, 0x231bde4a09fed705ull, 0x8e87baa5cbf6484eull},
      {OpKind::Madvise, 8263731, 0x56a79d3e0de4c109ull, 0x546bcc346b8f9d69ull, 0xd84fbfd5d877fc0aull},
  };
  Outcome o = run_ops({Isa::x86_64, WpReuse::off, ForkCopy::batched}, ops);
  INFO(o.message);
  CHECK_FALSE(o.failed);
  CHECK(o.per_kind[unsigned(OpKind::Madvise)] == 1);
  CHECK(run_ops({Isa::x86_64, WpReuse::off, ForkCopy::batched}, ops, {}, Mutant::dontneed_keeps_data).failed);
}
