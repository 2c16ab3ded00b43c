// SPDX-License-Identifier: GPL-2.0-only
// The arm64 platform (platform.name = neoverse-n1) end to end: the kernel port's arm64 layer on
// the N1 core, TLB and walker models, through build_platform() and sc_start() like `mmusim run`.
//
//  - C4 (EXPERIMENTS.md) at 32 MiB (512 contpte blocks of 64K folios), fork-reuse, one byte per
//    page: in QEMU mode (nothing runs ahead, nothing that faults is cached) mainline unfolds every
//    block once and faults once per page, the patch unfolds none and faults once per folio; in N1
//    mode the counts the mechanism implies;
//  - the hazard: the patch on a kernel with an empty flush_tlb_fix_spurious_fault() and a core that
//    keeps the read-only entry it faulted on livelocks, and the watchdog says where; the v6.19
//    local TLBI resolves it;
//  - the L1 DTLB holds a contpte block as one 64K entry, and the unfold's TLBIs remove it;
//  - TLBI *IS from the kernel reach every core's TLBs; break-before-make is charged;
//  - the N1 defaults (clock, core rules, cost.* prices), and determinism of stats and trace.
//
// Each TEST_CASE runs in its own process under CTest (one SystemC elaboration per process): a
// case with one in-process run elaborates once; cases that compare runs use the mmusim binary.
#include <catch2/catch.hpp>

#include "platforms/run_mmusim.hpp"

#include <systemc>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/params.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "base/trace.hpp"
#include "kernel_mm/cost.hpp"
#include "base/tlb_maintenance.hpp"
#include "models/core/core_module.hpp"
#include "models/core/os.hpp"
#include "platforms/hw_platform.hpp"
#include "platforms/platform.hpp"

namespace fs = std::filesystem;
using namespace mmusim;

// libsystemc refers to sc_main; Catch2 provides main() and the tests call sc_start() themselves.
// (One definition per test executable: the platforms suite's only one is here.)
int sc_main(int, char*[]) { return 0; }

namespace {

constexpr uint64_t kPages = 32ull << 20 >> 12;  // 8,192 pages of 4K in 32 MiB
constexpr uint64_t kBlocks = kPages / 16;        // 512 contpte blocks (= 64K folios)

std::string config_path(const std::string& name) {
  return std::string(MMUSIM_SOURCE_DIR) + "/configs/" + name;
}

// One simulation in this process: a config file, --set style overrides, optionally a trace.
struct Run {
  Schema schema = build_schema();
  Config cfg{schema};
  Stats stats;
  Trace trace;
  std::string trace_text;
  std::unique_ptr<Platform> platform;

  Run(const std::string& file, const std::vector<std::string>& sets) {
    cfg.load_file(config_path(file));
    cfg.set_override("output.host_stats=false");
    for (auto& s : sets) cfg.set_override(s);
  }
  void with_trace() { trace.open_buffer(&trace_text, make_ftrace_format()); }
  // Elaborates and runs; rethrows an error a core stopped on (HwPlatform::finish()).
  void go() {
    platform = build_platform(cfg, stats, trace);
    run_simulation();
    platform->finish(0.0);
    trace.close();
  }
  uint64_t n(const std::string& key) const { return stats.region_value(key); }
};

using mmusim_test::json_number;
using mmusim_test::Result;
using mmusim_test::run_mmusim;
using mmusim_test::slurp;
using mmusim_test::TempDir;

// The region's start address, from the workload's region_begin trace event. (Without std::regex:
// its recursion runs deep on the main stack, which under ASan still carries the shadow a
// watchdog error thrown on a SystemC coroutine stack left behind: a false stack-buffer-overflow.)
uint64_t region_start(const std::string& trace) {
  const std::string key = "region_begin: start=0x";
  const size_t at = trace.find(key);
  REQUIRE(at != std::string::npos);
  return std::stoull(trace.substr(at + key.size(), 16), nullptr, 16);
}

std::string hex(uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

// The break-before-make of contpte_convert() and the 6.12 write-fault upgrade, as charged:
// per unfold DSB ISHST + 16 TLBI VALE1IS + DSB ISH; per reuse fault __ptep_set_access_flags()'s
// flush_tlb_page(): DSB ISHST + TLBI VALE1IS + DSB ISH.
void check_mainline_maintenance(const Run& r) {
  CHECK(r.n("kcost.tlbi_bcast") == 16 * kBlocks + kPages);
  CHECK(r.n("kcost.dsb_local") == kBlocks + kPages);
  CHECK(r.n("kcost.dsb_bcast") == kBlocks + kPages);
  CHECK(r.n("kcost.tlbi_local") == 0);
  CHECK(r.n("kernel.tlb_flush_page") == kPages);
  CHECK(r.n("kernel.tlb_flush_range") == kBlocks);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Configuration: the N1 defaults and the shipped configs.

TEST_CASE("n1: platform.name = neoverse-n1 takes the N1 clock, core rules and cost prices", "[n1][config]") {
  Schema schema = build_schema();
  Config n1(schema);
  n1.set("platform.name", "neoverse-n1", "test");
  CHECK(n1.get_float("platform.clock_ghz") == 3.0);
  CHECK_FALSE(n1.get_bool("core.fault_invalidates"));  // Arm ARM D8.15
  CHECK(n1.get_bool("core.cache_faulting_entries"));     // D8.16 allows it
  CHECK(n1.get_bool("core.speculative_translation"));
  CHECK(n1.get_bool("tlb.l1_dtlb.contiguous_64k"));
  CHECK(n1.get_int("tlb.l1_dtlb.entries") == 48);
  CHECK(n1.get_int("core.rob_entries") == 128);
  // Exception entry + return: 500 cycles [UARCH F.2]; the TLBI/DSB placeholders of F.2.
  CHECK(n1.get_duration("cost.exc_entry").cycles(3.0) + n1.get_duration("cost.exc_exit").cycles(3.0) == 500);
  CHECK(n1.get_duration("cost.tlbi_local").cycles(3.0) == 30);
  CHECK(n1.get_duration("cost.dsb_local").cycles(3.0) == 20);
  CHECK(n1.get_duration("cost.tlbi_bcast").cycles(3.0) == 100);
  CHECK(n1.get_duration("cost.dsb_bcast").cycles(3.0) == 500);
  // The defaults come from the platform's config file, built in, and say so.
  CHECK(n1.setting("cost.exc_entry").origin.rfind("default (neoverse-n1: configs/platforms/neoverse-n1.cfg:", 0) == 0);
  CHECK(n1.setting("platform.clock_ghz").origin.rfind("default (neoverse-n1: configs/platforms/neoverse-n1.cfg:", 0) == 0);

  // The x86 platform keeps its own values.
  Config x86(schema);
  x86.set("platform.name", "i7-12700kf", "test");
  CHECK(x86.get_float("platform.clock_ghz") == 4.9);
  CHECK(x86.get_duration("cost.exc_entry").cycles(4.9) == 715);
  CHECK(x86.get_duration("cost.exc_exit").cycles(4.9) == 330);
  CHECK(x86.get_bool("core.fault_invalidates"));

  // Switching platform in a later file re-applies the other platform's defaults.
  n1.set("platform.name", "i7-12700kf", "test");
  CHECK(n1.get_duration("cost.exc_entry").cycles(4.9) == 715);
}

TEST_CASE("n1: the platform and C4 configs load and state the QEMU mode as parameters", "[n1][config]") {
  Schema schema = build_schema();
  for (const char* f : {"platforms/neoverse-n1.cfg", "experiments/c4-contpte-qemu.cfg",
                        "experiments/c4-contpte-n1.cfg", "experiments/c4-hazard-spurious-none.cfg"}) {
    INFO(f);
    Config c(schema);
    c.load_file(config_path(f));
    CHECK_NOTHROW(c.check_variant_keys());
    CHECK(c.get_string("platform.name") == "neoverse-n1");
    CHECK(c.get_float("platform.clock_ghz") == 3.0);
    CHECK_FALSE(c.get_bool("core.fault_invalidates"));
  }
  Config q(schema);
  q.load_file(config_path("experiments/c4-contpte-qemu.cfg"));
  CHECK_FALSE(q.get_bool("core.speculative_translation"));
  CHECK_FALSE(q.get_bool("core.cache_faulting_entries"));
  CHECK(q.get_size("workload.size") == 32ull << 20);
  CHECK(q.get_string("workload.folio") == "64K");
  CHECK(q.get_string("workload.pattern") == "seq-byte");
  Config h(schema);
  h.load_file(config_path("experiments/c4-hazard-spurious-none.cfg"));
  CHECK(h.get_string("kernel.wp_reuse") == "pagetable");
  CHECK(h.get_string("kernel.arm64_spurious_flush") == "none");
  CHECK(h.get_bool("core.cache_faulting_entries"));
}

// ---------------------------------------------------------------------------------------------
// C4 in QEMU mode: the reference counts.

TEST_CASE("n1: C4 in QEMU mode, mainline: every block unfolded once, one fault per page", "[n1][c4]") {
  Run r("experiments/c4-contpte-qemu.cfg", {"kernel.wp_reuse=off"});
  r.go();
  CHECK(r.n("kernel.contpte_convert") == kBlocks);
  CHECK(r.n("kernel.contpte_unfold") == kBlocks);
  CHECK(r.n("kernel.contpte_fold") == 0);
  CHECK(r.n("faults.total") == kPages);
  CHECK(r.n("faults.region") == kPages);
  CHECK(r.n("faults.spurious") == 0);
  CHECK(r.n("kernel.wp_reuse") == kPages);
  // QEMU's TLB: nothing ran ahead, nothing read-only was cached for the data; the L2 TLB's one
  // read-only entry is the loop's code page, which the instruction fetch walked (R+X).
  CHECK(r.n("core.squashed_uops") == 0);
  CHECK(r.n("tlb.l1_dtlb.fills_readonly") == 0);
  CHECK(r.n("tlb.l1_itlb.fills") == 1);
  CHECK(r.n("tlb.l2_tlb.fills_readonly") == r.n("tlb.l1_itlb.fills"));
  check_mainline_maintenance(r);

  // The account is priced with the N1 list: kcost.cycles = sum of items x cost.* at 3.0 GHz.
  double expect = 0;
  for (size_t i = 0; i < kmm::kNumCosts; ++i) {
    const std::string name = kmm::cost_name(kmm::Cost(i));
    expect += double(r.n("kcost." + name)) * r.cfg.get_duration("cost." + name).cycles(3.0);
  }
  CHECK(double(r.n("kcost.cycles")) == Approx(expect).margin(2));
  CHECK(r.n("kcost.exc_entry") == kPages);
}

TEST_CASE("n1: C4 in QEMU mode, the patch: no unfold, one fault per folio, even with 6.12's empty "
          "spurious-fault hook", "[n1][c4]") {
  // arm64_spurious_flush = none: QEMU refills on a permission miss, so it cannot show the hazard.
  Run r("experiments/c4-contpte-qemu.cfg", {"kernel.wp_reuse=pagetable", "kernel.arm64_spurious_flush=none"});
  r.go();
  CHECK(r.n("kernel.contpte_convert") == 0);
  CHECK(r.n("faults.total") == kBlocks);
  CHECK(r.n("faults.spurious") == 0);
  CHECK(r.n("kernel.wp_reuse") == kBlocks);
  // No TLB maintenance at all in the pass: the whole-folio reuse is a permission upgrade.
  CHECK(r.n("kcost.tlbi_bcast") == 0);
  CHECK(r.n("kcost.tlbi_local") == 0);
  CHECK(r.n("tlb.l1_dtlb.fills_readonly") == 0);
}

TEST_CASE("n1: QEMU mode: a store finding a read-only entry a load cached walks again", "[n1][qemu]") {
  // read-then-store: the loads cache each block's read-only 64K entry (a read may use it). The
  // patch upgrades the folio without a TLBI; with core.cache_faulting_entries = false the stores
  // do not fault on the stale entry (QEMU's tlb_fill on a permission miss), so even the empty
  // 6.12 hook completes with one fault per folio.
  Run r("experiments/c4-contpte-qemu.cfg",
        {"workload.pattern=read-then-store", "workload.size=4M", "kernel.arm64_spurious_flush=none"});
  r.go();
  const uint64_t blocks = (4ull << 20) / (64 << 10);
  // The loads' entries: one per block at least; the loads of a block's other pages that issue
  // while its first walk is in flight walk themselves (nothing tells them that walk brings a 64K
  // entry) and fill the same entry again.
  CHECK(r.n("tlb.l1_dtlb.fills_readonly") >= blocks);
  CHECK(r.n("tlb.l1_dtlb.fills_readonly") <= 16 * blocks);
  CHECK(r.n("faults.total") == blocks);
  CHECK(r.n("faults.spurious") == 0);
}

// ---------------------------------------------------------------------------------------------
// C4 on the N1's own behaviour: what the mechanism implies.

TEST_CASE("n1: C4 in N1 mode, mainline: as under QEMU (every upgrade is broadcast-flushed)", "[n1][c4]") {
  Run r("experiments/c4-contpte-n1.cfg", {"kernel.wp_reuse=off"});
  r.go();
  // The core ran ahead and cached read-only entries, but each fault's broadcast TLBI removes the
  // faulting page's entry and the unfold's 16 TLBIs the block's: no spurious fault.
  CHECK(r.n("core.squashed_uops") > 0);
  CHECK(r.n("tlb.l1_dtlb.fills_readonly") > 0);
  CHECK(r.n("kernel.contpte_convert") == kBlocks);
  CHECK(r.n("kernel.contpte_unfold") == kBlocks);
  CHECK(r.n("faults.total") == kPages);
  CHECK(r.n("faults.spurious") == 0);
  check_mainline_maintenance(r);
}

TEST_CASE("n1: C4 in N1 mode, the patch with the v6.19 hook: no unfold, one real and one spurious "
          "fault per block", "[n1][c4]") {
  // Per block: the first store caches the block's read-only 64K entry and faults (the Permission
  // fault keeps it); the whole-folio reuse makes the 16 PTEs writable with no TLBI; the retried
  // store hits the stale entry: a spurious fault, whose local TLBI VALE1 drops the 64K entry.
  Run r("experiments/c4-hazard-spurious-none.cfg", {"kernel.arm64_spurious_flush=local"});
  r.go();
  CHECK(r.n("kernel.contpte_convert") == 0);
  CHECK(r.n("kernel.wp_reuse") == kBlocks);
  CHECK(r.n("faults.spurious") == kBlocks);
  CHECK(r.n("faults.total") == 2 * kBlocks);
  CHECK(r.n("kernel.tlb_flush_spurious_fix") == kBlocks);
  CHECK(r.n("kcost.tlbi_local") == kBlocks);
  CHECK(r.n("kcost.tlbi_bcast") == 0);
}

// ---------------------------------------------------------------------------------------------
// The hazard.

TEST_CASE("n1: hazard: the patch with an empty spurious-fault hook livelocks, and the watchdog "
          "names the address, the PTE and the stale entry", "[n1][hazard]") {
  Run r("experiments/c4-hazard-spurious-none.cfg", {});
  r.with_trace();
  std::string msg;
  try {
    r.go();
  } catch (const InternalError& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE_FALSE(msg.empty());
  r.trace.close();
  // The first store of the region: its block's read-only 64K entry is never removed.
  const uint64_t a = region_start(r.trace_text);
  CHECK(msg.find("watchdog") != std::string::npos);
  CHECK(msg.find("address " + hex(a)) != std::string::npos);
  CHECK(msg.find("(writable)") != std::string::npos);  // the PTE
  CHECK(msg.find("l1_dtlb: va " + hex(a)) != std::string::npos);
  CHECK(msg.find("size 64K ro") != std::string::npos);
  CHECK(msg.find("stale") != std::string::npos);
  const uint64_t limit = uint64_t(r.cfg.get_int("core.fault_repeat_limit"));
  CHECK(r.n("faults.total") == limit);
  CHECK(r.n("faults.spurious") == limit - 1);
  CHECK(r.n("kernel.tlb_flush_spurious_fix") == 0);
}

TEST_CASE("n1: hazard through mmusim: exit status 1 with none, 0 with local", "[n1][hazard][cli]") {
  const std::string cfg = config_path("experiments/c4-hazard-spurious-none.cfg");
  Result none = run_mmusim("run " + cfg + " --quiet");
  INFO(none.out);
  CHECK(none.status == 1);
  CHECK(none.out.find("watchdog") != std::string::npos);
  CHECK(none.out.find("size 64K ro") != std::string::npos);
  CHECK(none.out.find("(writable)") != std::string::npos);
  Result local = run_mmusim("run " + cfg + " --quiet --set kernel.arm64_spurious_flush=local");
  INFO(local.out);
  CHECK(local.status == 0);
}

// ---------------------------------------------------------------------------------------------
// TLB and walker rules through the platform.

TEST_CASE("n1: one 64K L1 DTLB entry serves the 16 pages of a contpte block", "[n1][tlb]") {
  // QEMU mode, the patch: per block, the store to page 0 faults (nothing cached), the retry walks
  // the writable contpte block and fills ONE 64K entry; a store to pages 1-15 hits it once it has
  // arrived. A store that issues while that walk is in flight walks itself (nothing tells the
  // hardware the walk in flight brings a 64K entry) and fills the same entry again: every page
  // of the 16 either hits or walks, and every walk but the faulting one fills.
  Run r("experiments/c4-contpte-qemu.cfg", {"kernel.wp_reuse=pagetable"});
  r.go();
  const uint64_t fills = r.n("tlb.l1_dtlb.fills"), hits = r.n("tlb.l1_dtlb.hits");
  // (The walks of the data: the loop's code page walked once, its fetch's L1 ITLB miss.)
  REQUIRE(r.n("tlb.l1_itlb.misses") == 1);
  CHECK(fills == r.n("walker.walks") - r.n("tlb.l1_itlb.misses") - kBlocks);
  CHECK(hits + fills == 16 * kBlocks);
  CHECK(r.n("tlb.l1_dtlb.misses") == fills + kBlocks);
}

TEST_CASE("n1: with a clock_gettime() between the stores, pages 1-15 of a block hit its 64K entry",
          "[n1][tlb]") {
  // C1's pattern: the vDSO's ISB keeps each store from issuing before the walk before it is done,
  // so at least 2 walks per block (the vDSO's own pages' walks come on top) and each block's pages
  // 1-15 hit its 64K entry (the vDSO's loads add hits of their own).
  Run c("experiments/c4-contpte-qemu.cfg", {"kernel.wp_reuse=pagetable", "workload.pattern=seq-byte-clock"});
  c.go();
  CHECK(c.n("walker.walks") >= 2 * kBlocks);
  CHECK(c.n("walker.walks") < 4 * kBlocks);  // without the barrier: 17 per block
  CHECK(c.n("tlb.l1_dtlb.hits") >= 15 * kBlocks);
}

TEST_CASE("n1: without contiguous_64k the L1 DTLB needs one entry per page", "[n1][tlb]") {
  Run r("experiments/c4-contpte-qemu.cfg",
        {"kernel.wp_reuse=pagetable", "tlb.l1_dtlb.contiguous_64k=false", "tlb.l2_tlb.contiguous_64k=false"});
  r.go();
  CHECK(r.n("tlb.l1_dtlb.fills") == kPages);
  CHECK(r.n("tlb.l1_dtlb.hits") == 0);
}

TEST_CASE("n1: the unfold's TLBI VALE1IS of the block's first page removes its 64K entry", "[n1][tlb]") {
  // N1 mode, mainline, 2 MiB: the first store of each block caches the read-only 64K entry and
  // faults; contpte_convert() then issues 16 TLBI VALE1IS: the first removes the one entry (from
  // the L1 DTLB and the L2 TLB), the other 15 find nothing.
  Run r("experiments/c4-contpte-n1.cfg", {"kernel.wp_reuse=off", "workload.size=2M"});
  r.with_trace();
  r.go();
  const uint64_t start = region_start(r.trace_text);
  std::istringstream in(r.trace_text);
  std::string line;
  const std::regex conv(R"(contpte_convert: address=(0x[0-9a-f]+) action=unfold)");
  const std::regex inval(R"(tlb_invalidate: address=(0x[0-9a-f]+) reason=tlbi_vale1 tlb=l1_dtlb removed=(\d+))");
  bool in_region = false;
  int unfolds = 0, checked = 0;
  uint64_t block = 0;
  int seen = -1;  // TLBIs seen of the current unfold (-1: not in one)
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find("region_begin") != std::string::npos) in_region = true;
    if (!in_region) continue;
    if (std::regex_search(line, m, conv)) {
      block = std::stoull(m[1].str(), nullptr, 16);
      ++unfolds;
      seen = 0;
    } else if (seen >= 0 && seen < 16 && std::regex_search(line, m, inval)) {
      const uint64_t va = std::stoull(m[1].str(), nullptr, 16);
      CHECK(va == block + uint64_t(seen) * 4096);
      CHECK(m[2].str() == (seen == 0 ? "1" : "0"));
      if (++seen == 16) ++checked;
    }
  }
  CHECK(start % (64 << 10) == 0);
  CHECK(unfolds == 32);
  CHECK(checked == 32);
}

namespace {
// A core model with nothing to run, for the maintenance routing test.
class IdleOs : public hw::Os {
 public:
  bool schedule(int, uint64_t, hw::RunContext*, double*) override { return false; }
  bool all_exited() const override { return true; }
  hw::OsCall syscall(int, const wl::Uop&, uint64_t) override { return {}; }
  hw::OsFault page_fault(int, uint64_t, uint64_t, uint64_t, uint64_t, double) override { return {}; }
  void marker(int, const wl::Uop&, uint64_t) override {}
  bool region_active() const override { return false; }
  void rdtscp_retired(int, uint64_t) override {}
  void fault_taken(int, uint64_t, bool, const hw::OsFault&) override {}
  void faulted_retired(int, uint64_t) override {}
  double ghz() const override { return 3.0; }
};
}  // namespace

TEST_CASE("n1: TLBI VALE1IS / VAE1IS / ASIDE1IS from the kernel reach every core's TLBs, the "
          "local forms only the issuing core's", "[n1][tlbi]") {
  PhysMem mem(64ull << 20);
  IdleOs os;
  Stats stats;
  const hw::CoreMmuParams p = platform_hw_params(PlatformName::neoverse_n1);
  hw::CoreModule c0("cpu0", 0, p, pg::Isa::arm64, os, mem, stats, nullptr);
  hw::CoreModule c1("cpu1", 1, p, pg::Isa::arm64, os, mem, stats, nullptr);
  PlatformMmuHw mmu;
  mmu.cores = {&c0, &c1};

  const uint16_t asid = 7;
  const uint64_t block = 0x7f0000010000ull;  // a contpte block
  auto fill = [&](hw::CoreModule& c) {
    hw::TlbEntry e;
    e.vbase = block + 0x3000;
    e.pbase = 0x10003000;
    e.asid = asid;
    e.size = hw::PageSize::k4K;
    e.user = true;
    e.contiguous = true;  // held as one 64K entry
    c.l1_load().fill(block + 0x3000, e);
    c.l2()->fill(block + 0x3000, e);
    REQUIRE(c.l1_load().probe(block + 0xf000, asid));
    REQUIRE(c.l1_load().probe(block, asid)->size == hw::PageSize::k64K);
  };
  auto held = [&](hw::CoreModule& c) {
    return c.l1_load().probe(block, asid) != nullptr || c.l2()->probe(block, asid) != nullptr;
  };

  // A local TLBI VALE1 (the v6.19 spurious-fault fix) reaches only the issuing core.
  fill(c0), fill(c1);
  mmu.arm64_tlbi(1, kmm::TlbiOp::VALE1, asid, block + 0x5000, false);
  CHECK(held(c0));
  CHECK_FALSE(held(c1));
  // TLBI VALE1IS of any page of the block, from either core, removes the entry on both.
  for (int from : {0, 1}) {
    fill(c0), fill(c1);
    mmu.arm64_tlbi(from, kmm::TlbiOp::VALE1, asid, block + 0x9000, true);
    CHECK_FALSE(held(c0));
    CHECK_FALSE(held(c1));
  }
  // VAE1IS (all levels) and ASIDE1IS too; another ASID's TLBI does nothing.
  fill(c0), fill(c1);
  mmu.arm64_tlbi(0, kmm::TlbiOp::ASIDE1, asid + 1, 0, true);
  CHECK(held(c0));
  CHECK(held(c1));
  mmu.arm64_tlbi(0, kmm::TlbiOp::VAE1, asid, block, true);
  CHECK_FALSE(held(c0));
  CHECK_FALSE(held(c1));
  fill(c0), fill(c1);
  mmu.arm64_tlbi(1, kmm::TlbiOp::ASIDE1, asid, 0, true);
  CHECK_FALSE(held(c0));
  CHECK_FALSE(held(c1));
}

// ---------------------------------------------------------------------------------------------
// Determinism and the cost of the maintenance.

TEST_CASE("n1: two runs give identical stats JSON and trace bytes", "[n1][determinism][cli]") {
  TempDir t;
  const std::string cfg = config_path("experiments/c4-contpte-n1.cfg");
  const std::string common = " --quiet --set workload.size=4M --set output.host_stats=false --set kernel.wp_reuse=off";
  for (const char* n : {"a", "b"}) {
    Result r = run_mmusim("run " + cfg + common + " --stats " + t.path(std::string(n) + ".json") + " --trace " +
                      t.path(std::string(n) + ".trace"));
    INFO(r.out);
    REQUIRE(r.status == 0);
  }
  const std::string ja = slurp(t.path("a.json")), ta = slurp(t.path("a.trace"));
  CHECK(ja.size() > 1000);
  CHECK(ta.find("contpte_convert") != std::string::npos);
  CHECK(ja == slurp(t.path("b.json")));
  CHECK(ta == slurp(t.path("b.trace")));
  CHECK(ja.find("sim.host_seconds") == std::string::npos);
  CHECK(ja.find("sim.region_cpu_seconds") == std::string::npos);
}

TEST_CASE("n1: the broadcast TLBIs and DSBs of the unfold are priced into the kernel's time", "[n1][cost][cli]") {
  // Raising cost.tlbi_bcast by 1000 cycles adds 1000 x (16 per unfold + 1 per fault) cycles to
  // the kernel's account; cost.dsb_bcast likewise per DSB ISH.
  TempDir t;
  const std::string cfg = config_path("experiments/c4-contpte-qemu.cfg") +
                          " --quiet --set kernel.wp_reuse=off --set workload.size=4M --set output.host_stats=false";
  const uint64_t pages = 1024, blocks = 64;
  std::vector<std::string> sets = {"", " --set cost.tlbi_bcast=1100cyc", " --set cost.dsb_bcast=1500cyc"};
  std::vector<std::string> json;
  for (size_t i = 0; i < sets.size(); ++i) {
    const std::string out = t.path(std::to_string(i) + ".json");
    Result r = run_mmusim("run " + cfg + sets[i] + " --stats " + out);
    INFO(r.out);
    REQUIRE(r.status == 0);
    json.push_back(slurp(out));
  }
  CHECK(json_number(json[0], "kcost.tlbi_bcast") == double(16 * blocks + pages));
  CHECK(json_number(json[0], "kcost.dsb_bcast") == double(blocks + pages));
  const double base = json_number(json[0], "kcost.cycles");
  CHECK(json_number(json[1], "kcost.cycles") - base == Approx(1000.0 * (16 * blocks + pages)).margin(2));
  CHECK(json_number(json[2], "kcost.cycles") - base == Approx(1000.0 * (blocks + pages)).margin(2));
  CHECK(json_number(json[1], "region.time_ns") > json_number(json[0], "region.time_ns"));
}
