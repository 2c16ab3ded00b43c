// SPDX-License-Identifier: GPL-2.0-only
// arm64 end to end, through the generic fault, fork and teardown paths (kmmtest::Fixture with
// Isa::arm64: user accesses walk the arm64 tables with HAFDBS, faults arrive as ESRs, every
// invariant including contpte (§3.3 item 10) is checked after every kernel entry).
//
// The C4 expectation (EXPERIMENTS.md): 64K folios, fork, the child exits, the parent stores one
// byte per page: mainline unfolds every contpte block once (contpte_convert == blocks, all
// unfolds) and faults once per page; the whole-folio reuse patch unfolds none and faults once per
// folio.
#include <catch2/catch.hpp>

#include "base/hwwalk.hpp"
#include "fixture.hpp"
#include "kernel_mm/arch/arm64/arm64.hpp"

using namespace kmm;
using mmusim::pg::Isa;

namespace {

struct Arm64Proc {
  kmmtest::Fixture fix;
  Kernel& k;
  Arm64Arch& a;
  explicit Arm64Proc(const std::function<void(KernelParams&)>& tweak)
      : fix(Isa::arm64,
            [&](KernelParams& p) {
              p.phys_mem = 512ull << 20;
              p.thp_enabled = ThpMode::never;
              for (auto& m : p.thp_order) m = ThpMode::never;
              p.thp_order[4] = ThpMode::always;  // 64K mTHP only
              if (tweak) tweak(p);
            }),
        k(fix.kernel()),
        a(static_cast<Arm64Arch&>(k.arch())) {}

  task_struct* proc(const char* name) {
    task_struct* t = k.create_process(name);
    REQUIRE(t);
    run(t);
    return t;
  }
  void run(task_struct* t) {
    k.enter(t, 0);
    k.arch().switch_mm(0, t->mm);
  }
  uint64_t mmap(task_struct* t, uint64_t len) {
    int64_t r = k.sys_mmap(t, 0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    REQUIRE(r > 0);
    return uint64_t(r);
  }
  bool store(task_struct* t, uint64_t va, uint8_t v) {
    run(t);
    return fix.ua->store8(t, va, v);
  }
  int load(task_struct* t, uint64_t va) {
    run(t);
    return fix.ua->load8(t, va);
  }
  pte_t pte(task_struct* t, uint64_t va) {
    pte_t* p = k.find_pte(t->mm, va);
    return p ? *p : pte_t{0};
  }
  uint64_t count(const std::string& key) const { return fix.count(key); }
  unsigned cont_ptes(task_struct* t, uint64_t va, uint64_t len) {
    unsigned n = 0;
    for (uint64_t o = 0; o < len; o += PAGE_SIZE) n += a.pte_cont(pte(t, va + o));
    return n;
  }
  // fork-reuse's setup: populate, fork, the child exits, the parent reaps it.
  void fork_child_exits(task_struct* parent) {
    run(parent);
    task_struct* child = k.sys_fork(parent);
    REQUIRE(child);
    run(child);
    k.sys_exit(child, 0);
    run(parent);
    k.sys_wait(parent, child);
  }
};

struct Counts {
  uint64_t faults, faults_write, converts, folds, unfolds, tlb_page, reuse, copy;
  static Counts of(const Arm64Proc& e) {
    return {e.count("faults.total"),          e.count("faults.write"),          e.count("kernel.contpte_convert"),
            e.count("kernel.contpte_fold"),   e.count("kernel.contpte_unfold"), e.count("kernel.tlb_flush_page"),
            e.count("kernel.wp_reuse"),       e.count("kernel.wp_copy")};
  }
  Counts operator-(const Counts& o) const {
    return {faults - o.faults,   faults_write - o.faults_write, converts - o.converts, folds - o.folds,
            unfolds - o.unfolds, tlb_page - o.tlb_page,         reuse - o.reuse,       copy - o.copy};
  }
};

}  // namespace

TEST_CASE("arm64 e2e: a 64K mTHP write fault maps a contpte block directly", "[arm64][e2e]") {
  Arm64Proc e({});
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  REQUIRE(e.store(t, va + 3 * PAGE_SIZE, 1));
  CHECK(e.count("faults.total") == 1);
  CHECK(e.cont_ptes(t, va, CONT_PTE_SIZE) == 16);
  CHECK(e.cont_ptes(t, va + CONT_PTE_SIZE, CONT_PTE_SIZE) == 0);
  CHECK(e.count("kernel.contpte_convert") == 0);
  // Every page of the block is writable-dirty at once: no more faults in it.
  for (unsigned i = 0; i < 16; ++i) REQUIRE(e.store(t, va + i * PAGE_SIZE, uint8_t(i)));
  CHECK(e.count("faults.total") == 1);
  CHECK(e.load(t, va + 7 * PAGE_SIZE) == 7);
}

TEST_CASE("arm64 e2e: fork keeps contpte blocks in parent and child (batched copy)", "[arm64][e2e]") {
  Arm64Proc e({});
  task_struct* p = e.proc("parent");
  const uint64_t len = 4 * CONT_PTE_SIZE;
  const uint64_t va = e.mmap(p, PMD_SIZE);
  for (uint64_t o = 0; o < len; o += CONT_PTE_SIZE) REQUIRE(e.store(p, va + o, 1));
  e.run(p);
  task_struct* c = e.k.sys_fork(p);
  REQUIRE(c);
  CHECK(e.cont_ptes(p, va, len) == 64);
  CHECK(e.cont_ptes(c, va, len) == 64);
  CHECK(e.count("kernel.contpte_convert") == 0);
  for (uint64_t o = 0; o < len; o += PAGE_SIZE) {
    CHECK_FALSE(e.a.pte_write(e.pte(p, va + o)));
    CHECK_FALSE(e.a.pte_write(e.pte(c, va + o)));
    CHECK(e.a.pte_pfn(e.pte(p, va + o)) == e.a.pte_pfn(e.pte(c, va + o)));
  }
  // dup_mmap ends with flush_tlb_mm(oldmm).
  CHECK(e.count("kernel.tlb_flush_mm") >= 1);
  // The child writes: COW copy of one 4K page from a contpte block -> its block unfolds (6.12).
  REQUIRE(e.store(c, va + 5 * PAGE_SIZE, 9));
  CHECK(e.count("kernel.contpte_unfold") == 1);
  CHECK(e.cont_ptes(c, va, CONT_PTE_SIZE) == 0);
  CHECK(e.cont_ptes(p, va, CONT_PTE_SIZE) == 16);
  CHECK(e.load(p, va + 5 * PAGE_SIZE) == 0);
  CHECK(e.load(c, va + 5 * PAGE_SIZE) == 9);
}

TEST_CASE("arm64 e2e: fork-reuse with 64K folios: contpte converts and faults (C4)", "[arm64][e2e][c4]") {
  const uint64_t size = 32ull << 20;  // 512 contpte blocks, 8192 pages
  const uint64_t blocks = size / CONT_PTE_SIZE, pages = size / PAGE_SIZE;

  auto run_c4 = [&](WpReuse reuse, bool large_folio_reuse) {
    Arm64Proc e([&](KernelParams& p) {
      p.wp_reuse = reuse;
      p.large_folio_reuse = large_folio_reuse;
      p.check_invariants = false;  // too slow at this size; the smaller cases below check them
    });
    task_struct* p = e.proc("parent");
    const uint64_t va = e.mmap(p, size);
    for (uint64_t o = 0; o < size; o += PAGE_SIZE) REQUIRE(e.store(p, va + o, 1));
    const Counts populated = Counts::of(e);
    CHECK(populated.faults == blocks);  // one do_anonymous_page per 64K folio
    CHECK(populated.converts == 0);
    e.fork_child_exits(p);
    CHECK(Counts::of(e).converts == 0);  // fork wrprotects / sets, exit clears whole blocks
    CHECK(e.cont_ptes(p, va, size) == pages);
    const Counts before = Counts::of(e);
    for (uint64_t o = 0; o < size; o += PAGE_SIZE) REQUIRE(e.store(p, va + o, 2));
    const Counts pass = Counts::of(e) - before;
    e.k.check_invariants("after the C4 pass", true);
    for (uint64_t o = 0; o < size; o += 97 * PAGE_SIZE) CHECK(e.load(p, va + o) == 2);
    return std::make_pair(pass, e.cont_ptes(p, va, size));
  };

  SECTION("wp_reuse=off (v6.15+ per-page reuse): every block unfolded once, a fault per page") {
    auto [pass, cont] = run_c4(WpReuse::off, true);
    CHECK(pass.faults == pages);
    CHECK(pass.faults_write == pages);
    CHECK(pass.converts == blocks);
    CHECK(pass.unfolds == blocks);
    CHECK(pass.folds == 0);
    CHECK(pass.reuse == pages);
    CHECK(pass.copy == 0);
    // __ptep_set_access_flags' broadcast flush_tlb_page on every upgrade.
    CHECK(pass.tlb_page == pages);
    CHECK(cont == 0);  // nothing refolds
  }
  SECTION("wp_reuse=off on 6.12 (large folios copied): also one unfold per block") {
    auto [pass, cont] = run_c4(WpReuse::off, false);
    CHECK(pass.faults == pages);
    CHECK(pass.converts == blocks);
    CHECK(pass.unfolds == blocks);
    CHECK(pass.copy == pages);
    CHECK(cont == 0);
  }
  SECTION("wp_reuse=pagetable (the patch): no convert, a fault per folio") {
    auto [pass, cont] = run_c4(WpReuse::pagetable, true);
    CHECK(pass.faults == blocks);
    CHECK(pass.converts == 0);
    CHECK(pass.reuse == blocks);
    CHECK(pass.tlb_page == 0);  // no TLBI at all on the reuse path
    CHECK(cont == pages);        // the blocks were written back whole
  }
  SECTION("wp_reuse=block16: the same for 64K folios") {
    auto [pass, cont] = run_c4(WpReuse::block16, true);
    CHECK(pass.faults == blocks);
    CHECK(pass.converts == 0);
    CHECK(cont == pages);
  }
}

TEST_CASE("arm64 e2e: fork-reuse on a small region with every invariant checked", "[arm64][e2e]") {
  const uint64_t size = 2 * PMD_SIZE;
  for (WpReuse reuse : {WpReuse::off, WpReuse::pagetable, WpReuse::pagetable_flush}) {
    Arm64Proc e([&](KernelParams& p) { p.wp_reuse = reuse; });
    task_struct* p = e.proc("parent");
    const uint64_t va = e.mmap(p, size);
    for (uint64_t o = 0; o < size; o += PAGE_SIZE) REQUIRE(e.store(p, va + o, 1));
    e.fork_child_exits(p);
    const Counts before = Counts::of(e);
    for (uint64_t o = 0; o < size; o += PAGE_SIZE) REQUIRE(e.store(p, va + o, 2));
    const Counts pass = Counts::of(e) - before;
    INFO("wp_reuse " << int(reuse));
    CHECK(pass.converts == (reuse == WpReuse::off ? size / CONT_PTE_SIZE : 0));
    CHECK(pass.faults == (reuse == WpReuse::off ? size / PAGE_SIZE : size / CONT_PTE_SIZE));
    if (reuse == WpReuse::pagetable_flush) CHECK(e.count("kernel.tlb_flush_local") == size / CONT_PTE_SIZE);
  }
}

TEST_CASE("arm64 e2e: access errors and read faults through do_page_fault", "[arm64][e2e]") {
  Arm64Proc e({});
  task_struct* t = e.proc("p");
  const uint64_t va = e.mmap(t, PMD_SIZE);
  // A read of an untouched page: translation fault, read, maps the zero page (no contpte).
  CHECK(e.load(t, va + PAGE_SIZE) == 0);
  CHECK(e.count("faults.read") == 1);
  CHECK(e.a.pte_pfn(e.pte(t, va + PAGE_SIZE)) == e.k.zero_pfn());
  CHECK_FALSE(e.a.pte_cont(e.pte(t, va + PAGE_SIZE)));
  // Outside any VMA: SIGSEGV.
  CHECK_FALSE(e.store(t, va - 16 * PMD_SIZE, 1));
  CHECK(e.count("faults.sigsegv") == 1);
  // A read-only VMA refuses writes (VM_WRITE check) but allows reads.
  int64_t ro = e.k.sys_mmap(t, 0, PMD_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  REQUIRE(ro > 0);
  CHECK(e.load(t, uint64_t(ro)) == 0);
  CHECK_FALSE(e.store(t, uint64_t(ro), 1));
  CHECK(e.count("faults.sigsegv") == 2);
}

TEST_CASE("arm64 e2e: a spurious write fault takes flush_tlb_fix_spurious_fault", "[arm64][e2e]") {
  for (SpuriousFlush sf : {SpuriousFlush::none, SpuriousFlush::local}) {
    Arm64Proc e([&](KernelParams& p) { p.arm64_spurious_flush = sf; });
    task_struct* t = e.proc("p");
    const uint64_t va = e.mmap(t, PMD_SIZE);
    REQUIRE(e.store(t, va, 1));
    // The PTE is writable; a CPU with a stale read-only TLB entry takes a permission fault.
    e.run(t);
    FaultReturn r = e.k.handle_user_fault(
        t, va + 2 * PAGE_SIZE, mmusim::pg::arm64_dabt_esr(mmusim::pg::Walk::Ok, true, 0, true), 0);
    CHECK_FALSE(r.sigsegv);
    CHECK(e.count("faults.spurious") == 1);
    CHECK(e.count("kernel.tlb_flush_spurious_fix") == (sf == SpuriousFlush::local ? 1 : 0));
    CHECK(e.count("kernel.contpte_convert") == 0);
  }
}
