// SPDX-License-Identifier: GPL-2.0-only
// Instruction-side translation on the i7-12700kf platform end to end (models/core/ooo_core.hpp,
// workloads/image.hpp, kernel_mm/exec.cpp): V6's C1 pass (configs/experiments/v6-flush-c1.cfg,
// kernel.wp_reuse = pagetable+flush: flush_tlb_local() after each whole-folio reuse) walks the
// code pages again after every flush; without the flush they stay in the ITLB. Each run is a
// process of its own (the mmusim binary).
#include <catch2/catch.hpp>

#include "platforms/run_mmusim.hpp"

#include <string>

using namespace mmusim_test;

namespace {

struct C1Run {
  double flushes, itlb_misses, itlb_stall, dtlb_load_misses, faults, region_faults, time_ns;
};

C1Run run_v6_c1(const std::string& wp_reuse) {
  TempDir d;
  const std::string stats = d.path("s.json");
  const Result r = run_mmusim(std::string("run ") + MMUSIM_SOURCE_DIR +
                              "/configs/experiments/v6-flush-c1.cfg --set workload.size=8M "
                              "--set kernel.wp_reuse=" + wp_reuse +
                              " --set output.host_stats=false --quiet --stats " + stats);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const std::string j = slurp(stats);
  return {json_number(j, "kernel.tlb_flush_local"), json_number(j, "tlb.itlb.misses"),
          json_number(j, "core.itlb_stall_cycles"), json_number(j, "tlb.dtlb_load.misses"),
          json_number(j, "faults.total"), json_number(j, "faults.region"), json_number(j, "region.time_ns")};
}

}  // namespace

TEST_CASE("itlb: V6's C1 pass walks its three code pages again after every flush_tlb_local()",
          "[itlb][v6]") {
  // 8 MiB of 64K folios: 128 reuse faults in the pass, each with a flush. The loop runs on three
  // code pages (the benchmark's text, glibc's __clock_gettime, the vDSO): after each flush each is
  // missed in the ITLB once (and walked: the STLB lost it too); and the vDSO's load of the vvar
  // page misses the load DTLB once per flush.
  const C1Run flush = run_v6_c1("pagetable+flush");
  const C1Run plain = run_v6_c1("pagetable");
  CHECK(flush.flushes == 128);
  CHECK(plain.flushes == 0);
  CHECK(flush.region_faults == plain.region_faults);  // the same faults: the flush adds none
  CHECK(flush.faults == plain.faults);
  // About one miss per flush per code page (and each page's first miss of the pass).
  CHECK(flush.itlb_misses >= 3 * flush.flushes);
  CHECK(flush.itlb_misses <= 3 * flush.flushes + 3);
  CHECK(plain.itlb_misses <= 3);
  CHECK(flush.itlb_stall > plain.itlb_stall + 100 * flush.flushes);  // walks, not STLB hits
  CHECK(flush.dtlb_load_misses >= flush.flushes);  // (the first flush comes before the first read)
  CHECK(plain.dtlb_load_misses <= 1);
  CHECK(flush.time_ns > plain.time_ns);
}
