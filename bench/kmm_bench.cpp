// SPDX-License-Identifier: GPL-2.0-only
// Host-speed benchmark of the kernel port alone (no SystemC, no hardware model): each fault path
// and fork() over a 1 GiB region, driven through kmm::UserAccess as the kernel tests do
// (tests/kernel_mm/fixture.hpp). Prints host time per fault, per PTE and per fork. Not a test: it
// checks only that each measurement took the path it is named after (the kernel's counters), and
// exits 1 if one did not.
//
// usage: bench_kernel_mm [--size BYTES[K|M|G]] [--repeat N] [--only SUBSTRING] [--tsv]
//   --size    region size (default 1G; a multiple of 2M)
//   --repeat  runs of each measurement; the fastest is reported (default 1)
//   --only    run the measurements whose name contains SUBSTRING
//   --tsv     machine-readable rows: name <TAB> value <TAB> unit <TAB> count <TAB> wall value
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/stats.hpp"
#include "base/tlb_maintenance.hpp"
#include "kernel_mm/kernel.hpp"
#include "kernel_mm/user_access.hpp"

using namespace kmm;

namespace {

constexpr unsigned kOrder64K = 4, kOrder2M = 9;

struct Options {
  uint64_t size = 1ull << 30;
  unsigned repeat = 1;
  std::string only;
  bool tsv = false;
};

// Thread CPU time and wall time: the CPU time is what the figures use (the machine may be shared;
// wall time is printed beside it).
struct Clock {
  double cpu0, wall0;
  static double cpu() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }
  static double wall() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  Clock() : cpu0(cpu()), wall0(wall()) {}
  double cpu_s() const { return cpu() - cpu0; }
  double wall_s() const { return wall() - wall0; }
};

enum class Folio { k4K, k64K, k2M_pte, k2M_pmd };
const char* folio_name(Folio f) {
  switch (f) {
    case Folio::k4K: return "4K";
    case Folio::k64K: return "64K";
    case Folio::k2M_pte: return "2M-pte";
    case Folio::k2M_pmd: return "2M-pmd";
  }
  return "?";
}

void set_thp(KernelParams& p, Folio f) {
  for (auto& m : p.thp_order) m = ThpMode::never;
  switch (f) {
    case Folio::k4K: p.thp_enabled = ThpMode::never; break;
    case Folio::k64K:
      p.thp_enabled = ThpMode::never;
      p.thp_order[kOrder64K] = ThpMode::always;
      break;
    case Folio::k2M_pte:
    case Folio::k2M_pmd:
      p.thp_enabled = ThpMode::always;
      p.thp_order[kOrder2M] = ThpMode::inherit;
      break;
  }
}

// One kernel, one process, one region.
struct World {
  mmusim::Stats stats;
  NullMmuHw hw;
  std::unique_ptr<Kernel> k;
  std::unique_ptr<UserAccess> ua;
  task_struct* t = nullptr;
  uint64_t va = 0, size = 0;

  World(const Options& o, Folio f, const std::function<void(KernelParams&)>& tweak = {}) : size(o.size) {
    KernelParams p;
    p.phys_mem = 3 * o.size + (256ull << 20);  // the region, its copies, page tables
    p.check_invariants = false;
    set_thp(p, f);
    if (tweak) tweak(p);
    k = std::make_unique<Kernel>(p, mmusim::pg::Isa::x86_64, hw, stats);
    ua = std::make_unique<UserAccess>(*k);
    t = k->create_process("bench");
    k->enter(t, 0);
    k->arch().switch_mm(0, t->mm);
    int64_t r = k->sys_mmap(t, 0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (r <= 0) die("mmap failed");
    va = (uint64_t(r) + PMD_SIZE - 1) & ~(PMD_SIZE - 1);
  }
  [[noreturn]] static void die(const char* what) {
    std::fprintf(stderr, "bench_kernel_mm: %s\n", what);
    std::exit(1);
  }
  uint64_t count(const char* key) const { return stats.total_value(key); }
  // Touch `bytes` of host memory for simulated frames and give it back to PhysMem's free list
  // (mmap, one store per page, munmap), so that a timed pass recycles host buffers instead of
  // first-touching host memory (on this VM the host's first touch costs ~10 us per 4K page; see
  // README). Only for the passes that allocate frames.
  void warm_host(uint64_t bytes) {
    k->enter(t, 0);
    int64_t r = k->sys_mmap(t, 0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (r <= 0) die("mmap failed");
    for (uint64_t off = 0; off < bytes; off += PAGE_SIZE)
      if (!ua->store8(t, uint64_t(r) + off, 1)) die("store got a signal");
    if (k->sys_munmap(t, uint64_t(r), bytes) != 0) die("munmap failed");
    k->lru_add_drain();
  }
  uint64_t pages() const { return size / PAGE_SIZE; }

  // One store per 4K page (the C1 pass, without a TLB).
  void pass(uint8_t v) {
    k->enter(t, 0);
    for (uint64_t off = 0; off < size; off += PAGE_SIZE)
      if (!ua->store8(t, va + off, v)) die("store got a signal");
  }
  // 2M THPs mapped by PTEs, as the cow.c selftest makes them (and the workload, and the tests).
  void split_pmds() {
    for (uint64_t off = 0; off < size; off += PMD_SIZE) {
      if (k->sys_mprotect(t, va + off + PAGE_SIZE, PAGE_SIZE, PROT_READ) != 0 ||
          k->sys_mprotect(t, va + off + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE) != 0)
        die("mprotect failed");
    }
  }
  void populate(Folio f) {
    pass(1);
    if (f == Folio::k2M_pte) split_pmds();
    k->lru_add_drain();
  }
  task_struct* fork() {
    k->enter(t, 0);
    task_struct* c = k->sys_fork(t);
    if (!c) die("fork failed");
    return c;
  }
  void reap(task_struct* c) {
    k->enter(c, 0);
    k->sys_exit(c, 0);
    k->enter(t, 0);
    k->arch().switch_mm(0, t->mm);
    if (k->sys_wait(t, c) != c->pid) die("wait failed");
  }
};

struct Result {
  std::string name;
  double value;      // per-unit CPU time
  std::string unit;  // "ns/fault", ...
  uint64_t n;        // units measured
  double wall;       // per-unit wall time
  std::string path;  // counters that show the path taken
};

// The timed part of a measurement: by default the whole measure function; start()/stop() narrow
// it (fork without the child's exit).
struct Span {
  bool used = false;
  double cpu = 0, wall = 0;
  Clock c;
  void start() { c = Clock(); }
  void stop() {
    cpu += c.cpu_s();
    wall += c.wall_s();
    used = true;
  }
};

struct Measured {
  double cpu = 1e300, wall = 0;  // seconds
  uint64_t n = 0;
  std::string path;
};

class Bench {
 public:
  explicit Bench(const Options& o) : o_(o) {}

  bool want(const std::string& name) const {
    return o_.only.empty() || name.find(o_.only) != std::string::npos;
  }

  // Runs `setup` then times `measure` (which returns the number of units it did), `repeat`
  // times; keeps the fastest and prints it per unit (seconds * scale / n).
  Measured run(const std::string& name, const std::string& unit, double scale,
               const std::function<std::unique_ptr<World>()>& setup,
               const std::function<uint64_t(World&, std::string& path, Span& span)>& measure) {
    Measured best;
    if (!want(name)) return best;
    for (unsigned r = 0; r < std::max(1u, o_.repeat); ++r) {
      std::unique_ptr<World> w = setup();
      std::string path;
      Span span;
      Clock c;
      uint64_t n = measure(*w, path, span);
      double cpu = span.used ? span.cpu : c.cpu_s(), wall = span.used ? span.wall : c.wall_s();
      if (n == 0) World::die(("measurement " + name + " did nothing").c_str());
      if (cpu < best.cpu) best = Measured{cpu, wall, n, path};
    }
    emit(name, unit, scale, best, best.n);
    return best;
  }
  // A row from a measurement, per `n` units.
  void emit(const std::string& name, const std::string& unit, double scale, const Measured& m,
            uint64_t n) {
    if (!m.n) return;
    print(Result{name, m.cpu * scale / double(n), unit, n, m.wall * scale / double(n), m.path});
  }

  void print(const Result& r) const {
    if (o_.tsv) {
      std::printf("%s\t%.6g\t%s\t%llu\t%.6g\t%s\n", r.name.c_str(), r.value, r.unit.c_str(),
                  (unsigned long long)r.n, r.wall, r.path.c_str());
    } else {
      std::printf("%-44s %12.1f %-9s (wall %10.1f)  n = %-8llu %s\n", r.name.c_str(), r.value,
                  r.unit.c_str(), r.wall, (unsigned long long)r.n, r.path.c_str());
    }
    std::fflush(stdout);
  }

 private:
  Options o_;
};

// Checks that a measurement took its path: `key` moved by `want` during it.
struct Expect {
  World& w;
  const char* key;
  uint64_t before;
  Expect(World& w_, const char* k) : w(w_), key(k), before(w_.count(k)) {}
  uint64_t delta() const { return w.count(key) - before; }
  void require(uint64_t want, std::string& path) const {
    uint64_t d = delta();
    path += std::string(path.empty() ? "" : ", ") + key + "=" + std::to_string(d);
    if (d != want) {
      std::fprintf(stderr, "bench_kernel_mm: %s moved by %llu, expected %llu\n", key,
                   (unsigned long long)d, (unsigned long long)want);
      std::exit(1);
    }
  }
};

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  uint64_t mul = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': case 'k': mul = 1ull << 10; break;
      case 'M': case 'm': mul = 1ull << 20; break;
      case 'G': case 'g': mul = 1ull << 30; break;
      default: World::die("bad --size");
    }
  }
  uint64_t b = uint64_t(v * double(mul));
  if (b == 0 || b % PMD_SIZE) World::die("--size must be a positive multiple of 2M");
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  // PhysMem (base/physmem.cpp) used to take its 16 MiB chunks from std::aligned_alloc and assume
  // they read as zero, which fails once a freed block raises glibc's dynamic mmap threshold
  // (fixed in 6b97d6c: chunks are anonymous mappings). A fixed threshold keeps every large
  // allocation an mmap anyway, as in a one-kernel mmusim run. Every kernel here first-touches its
  // host memory again (setups are not timed; the passes that allocate frames warm them first,
  // see World::warm_host).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto arg = [&]() -> const char* {
      if (i + 1 >= argc) World::die(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--size") o.size = parse_size(arg());
    else if (a == "--repeat") o.repeat = unsigned(std::atoi(arg()));
    else if (a == "--only") o.only = arg();
    else if (a == "--tsv") o.tsv = true;
    else if (a == "--help" || a == "-h") {
      std::printf("usage: bench_kernel_mm [--size 1G] [--repeat N] [--only SUBSTRING] [--tsv]\n");
      return 0;
    } else {
      World::die(("unknown argument " + a).c_str());
    }
  }
  if (!o.tsv)
    std::printf("kernel_mm alone, region %llu MiB, host CPU time (thread), fastest of %u\n",
                (unsigned long long)(o.size >> 20), std::max(1u, o.repeat));
  Bench b(o);
  const uint64_t pages = o.size / PAGE_SIZE;

  // ---- allocation faults: the first touch of each page of a fresh mapping ----------------------
  struct Alloc {
    const char* name;
    Folio f;
    uint64_t per_fault;  // pages per fault
    const char* key;
  };
  for (const Alloc& a : {Alloc{"fault.alloc.4K (cold host memory)", Folio::k4K, 1, "kernel.do_anonymous_page"},
                         Alloc{"fault.alloc.4K", Folio::k4K, 1, "kernel.do_anonymous_page"},
                         Alloc{"fault.alloc.64K-mthp", Folio::k64K, 16, "kernel.do_anonymous_page"},
                         Alloc{"fault.alloc.2M-pmd-thp", Folio::k2M_pmd, 512, "kernel.do_huge_pmd_anonymous_page"}}) {
    const bool cold = std::strstr(a.name, "cold") != nullptr;
    Measured m = b.run(a.name, "ns/fault", 1e9,
                       [&] {
                         auto w = std::make_unique<World>(o, a.f);
                         if (!cold) w->warm_host(o.size);
                         return w;
                       },
                       [&](World& w, std::string& path, Span&) {
                         Expect faults(w, "faults.total"), path_key(w, a.key);
                         w.pass(1);
                         faults.require(pages / a.per_fault, path);
                         path_key.require(pages / a.per_fault, path);
                         return faults.delta();
                       });
    if (a.per_fault > 1) b.emit(std::string(a.name) + " per 4K page", "ns/page", 1e9, m, pages);
  }
  // The store itself without a fault (the UserAccess walk): what the figures above include.
  b.run("store.no-fault (UserAccess walk)", "ns/store", 1e9,
        [&] {
          auto w = std::make_unique<World>(o, Folio::k4K);
          w->pass(1);
          return w;
        },
        [&](World& w, std::string& path, Span&) {
          Expect faults(w, "faults.total");
          w.pass(2);
          faults.require(0, path);
          return w.pages();
        });

  // ---- write faults after fork(): the child has exited, the parent writes one byte per page ----
  struct Wp {
    const char* name;
    Folio f;
    WpReuse reuse;
    bool large_folio_reuse;
    uint64_t per_fault;  // PTEs made writable (or copied) per fault
    const char* key;
  };
  for (const Wp& c : {
           Wp{"fault.cow-copy.64K (6.12: no large reuse)", Folio::k64K, WpReuse::off, false, 1, "kernel.wp_copy"},
           Wp{"fault.reuse-1pte.4K", Folio::k4K, WpReuse::off, true, 1, "kernel.wp_reuse"},
           Wp{"fault.reuse-1pte.64K (wp_reuse=off)", Folio::k64K, WpReuse::off, true, 1, "kernel.wp_reuse"},
           Wp{"fault.reuse-folio.64K (pagetable)", Folio::k64K, WpReuse::pagetable, true, 16, "kernel.wp_reuse"},
           Wp{"fault.reuse-folio.2M-pte (pagetable)", Folio::k2M_pte, WpReuse::pagetable, true, 512, "kernel.wp_reuse"},
           Wp{"fault.reuse-folio.64K (pagetable_flush)", Folio::k64K, WpReuse::pagetable_flush, true, 16, "kernel.wp_reuse"},
           Wp{"fault.reuse-pmd.2M-pmd", Folio::k2M_pmd, WpReuse::off, true, 512, "kernel.do_huge_pmd_wp_page"},
       }) {
    Measured m = b.run(c.name, "ns/fault", 1e9,
                       [&] {
                         auto w = std::make_unique<World>(o, c.f, [&](KernelParams& p) {
                           p.wp_reuse = c.reuse;
                           p.large_folio_reuse = c.large_folio_reuse;
                         });
                         w->populate(c.f);
                         w->reap(w->fork());
                         if (c.key == std::string("kernel.wp_copy")) w->warm_host(o.size);  // the copies
                         return w;
                       },
                       [&](World& w, std::string& path, Span&) {
                         Expect faults(w, "faults.total"), key(w, c.key);
                         w.pass(3);
                         faults.require(pages / c.per_fault, path);
                         key.require(pages / c.per_fault, path);
                         return faults.delta();
                       });
    if (c.per_fault > 1) b.emit(std::string(c.name) + " per PTE", "ns/pte", 1e9, m, pages);
  }

  // ---- spurious faults: a write fault on a PTE that is already writable (a stale TLB entry) ----
  b.run("fault.spurious (PTE already writable)", "ns/fault", 1e9,
        [&] {
          auto w = std::make_unique<World>(o, Folio::k64K, [](KernelParams& p) { p.wp_reuse = WpReuse::pagetable; });
          w->populate(Folio::k64K);
          w->reap(w->fork());
          w->pass(3);
          return w;
        },
        [&](World& w, std::string& path, Span&) {
          Expect sp(w, "faults.spurious");
          w.k->enter(w.t, 0);
          const uint64_t syndrome = mmusim::pg::x86_pf_error_code(true, true, true, false);
          for (uint64_t off = 0; off < w.size; off += PAGE_SIZE)
            w.k->handle_user_fault(w.t, w.va + off, syndrome, 0x401100);
          sp.require(w.pages(), path);
          return w.pages();
        });

  // ---- fork() of the populated region (the child's exit is timed apart) ---------------------------
  struct Fk {
    Folio f;
    ForkCopy copy;
  };
  for (const Fk& c : {Fk{Folio::k4K, ForkCopy::per_pte}, Fk{Folio::k4K, ForkCopy::batched},
                      Fk{Folio::k64K, ForkCopy::per_pte}, Fk{Folio::k64K, ForkCopy::batched},
                      Fk{Folio::k2M_pte, ForkCopy::per_pte}, Fk{Folio::k2M_pte, ForkCopy::batched},
                      Fk{Folio::k2M_pmd, ForkCopy::per_pte}, Fk{Folio::k2M_pmd, ForkCopy::batched}}) {
    const std::string base = std::string("fork.") + folio_name(c.f) + "." +
                             (c.copy == ForkCopy::per_pte ? "per-pte" : "batched");
    auto setup = [&] {
      auto w = std::make_unique<World>(o, c.f, [&](KernelParams& p) { p.fork_copy = c.copy; });
      w->populate(c.f);
      return w;
    };
    Measured exit_time;
    Measured m = b.run(base, "ms/fork", 1e3, setup, [&](World& w, std::string& path, Span& span) {
      Expect forks(w, "kernel.fork"), ptes(w, "kernel.fork_ptes_copied");
      span.start();
      task_struct* child = w.fork();
      span.stop();
      forks.require(1, path);
      ptes.require(c.f == Folio::k2M_pmd ? w.pages() / 512 : w.pages(), path);  // PMD: one each
      Clock e;
      w.reap(child);
      const double ecpu = e.cpu_s();
      if (ecpu < exit_time.cpu) exit_time = Measured{ecpu, e.wall_s(), 1, "kernel.exit=1"};
      return uint64_t(1);
    });
    if (c.f != Folio::k2M_pmd) b.emit(base + " per PTE", "ns/pte", 1e9, m, pages);
    b.emit(base + " (child exit+wait)", "ms/exit", 1e3, exit_time, 1);
  }
  return 0;
}
