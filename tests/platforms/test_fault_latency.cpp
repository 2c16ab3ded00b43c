// SPDX-License-Identifier: GPL-2.0-only
// How the benchmark measures a fault's latency (workloads/fault_latency.hpp), from the events a
// core reports; and the program's registers for RDTSCP results and the data of a store it
// computes (workloads/program.hpp). The core knows neither.
#include <catch2/catch.hpp>

#include <cstring>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "workloads/fault_latency.hpp"
#include "workloads/program.hpp"

using namespace mmusim;

namespace {

struct Samples {
  std::vector<std::pair<int, double>> v;
  wl::FaultLatencyMeter meter(double ghz) {
    return wl::FaultLatencyMeter(ghz, [this](int kind, double ns) { v.emplace_back(kind, ns); });
  }
};

constexpr int kReuse = 2, kSpurious = 4;

}  // namespace

TEST_CASE("fault latency: a region fault between two RDTSCPs is their difference", "[latency]") {
  Samples s;
  auto m = s.meter(2.0);  // 2 GHz: 2 cycles per ns
  m.rdtscp_retired(0, 1000);
  m.fault_taken(0, 1100, false, kReuse, true);
  m.faulted_retired(0, 2500);  // an RDTSCP was seen: the retirement gives no sample
  CHECK(s.v.empty());
  m.rdtscp_retired(0, 3000);
  REQUIRE(s.v.size() == 1);
  CHECK(s.v[0].first == kReuse);
  CHECK(s.v[0].second == Approx(1000.0));  // (3000 - 1000) cycles at 2 GHz
  // The next pair without a fault between them: no sample.
  m.rdtscp_retired(0, 4000);
  CHECK(s.v.size() == 1);
}

TEST_CASE("fault latency: the first region fault since the RDTSCP decides the kind", "[latency]") {
  Samples s;
  auto m = s.meter(1.0);
  m.rdtscp_retired(0, 0);
  m.fault_taken(0, 10, false, kSpurious, false);  // outside the region: not measured
  m.fault_taken(0, 20, false, kReuse, true);
  m.fault_taken(0, 30, false, kSpurious, true);
  m.rdtscp_retired(0, 500);
  REQUIRE(s.v.size() == 1);
  CHECK(s.v[0] == std::make_pair(kReuse, 500.0));
}

TEST_CASE("fault latency: without RDTSCPs, from the first fault's head cycle to retirement",
          "[latency]") {
  Samples s;
  auto m = s.meter(4.0);
  m.fault_taken(0, 400, false, kReuse, true);
  m.fault_taken(0, 800, true, kSpurious, true);  // the same micro-op again: its first head stays
  m.faulted_retired(0, 1200);
  REQUIRE(s.v.size() == 1);
  CHECK(s.v[0] == std::make_pair(kReuse, 200.0));  // (1200 - 400) / 4
  m.faulted_retired(0, 1300);  // nothing pending
  CHECK(s.v.size() == 1);
}

TEST_CASE("fault latency: each CPU is measured on its own", "[latency]") {
  Samples s;
  auto m = s.meter(1.0);
  m.rdtscp_retired(1, 100);
  m.fault_taken(0, 150, false, kReuse, true);  // CPU 0 has read no TSC: measured at retirement
  m.fault_taken(1, 160, false, kSpurious, true);
  m.rdtscp_retired(1, 300);
  m.faulted_retired(0, 350);
  REQUIRE(s.v.size() == 2);
  CHECK(s.v[0] == std::make_pair(kSpurious, 200.0));
  CHECK(s.v[1] == std::make_pair(kReuse, 200.0));
}

TEST_CASE("program: a kUopValueFromProgram store writes the last two RDTSCP reads' difference",
          "[latency]") {
  class Empty : public wl::StepProgram {
    bool step() override { return false; }
  } p;
  wl::Uop u = wl::access_uop(wl::UopKind::Store, 0x1000, 8, 77, 0x401000);
  u.flags |= wl::kUopValueFromProgram;
  p.rdtscp_return(5'000'000);  // ps
  p.rdtscp_return(5'431'999);
  CHECK(p.store_value(u) == 431);  // ns, truncated
  // A plain Program writes the micro-op's own value.
  class Plain : public wl::Program {
    bool next(wl::Uop&) override { return false; }
  } q;
  CHECK(q.store_value(u) == 77);
}

TEST_CASE("program: push_last_n()'s copies come after the step's other micro-ops, then the next step",
          "[latency]") {
  class Steps : public wl::StepProgram {
    bool step() override {
      switch (n_++) {
        case 0:
          push(wl::access_uop(wl::UopKind::Load, 0x1000, 8, 0, 0x401000));
          {
            wl::Uop a;
            a.kind = wl::UopKind::Alu;
            a.ip = 0x401004;
            a.latency = 3;
            push_last_n(a, 3);
          }
          return true;
        case 1: push(wl::access_uop(wl::UopKind::Store, 0x2000, 4, 9, 0x401010)); return true;
        case 2: {
          wl::Uop a;
          push_last_n(a, 1);
          push(a);  // (after push_last_n: a bug of the program)
          return true;
        }
        default: return false;
      }
    }
    int n_ = 0;
  } p;
  wl::Uop u;
  REQUIRE(p.next(u));
  CHECK((u.kind == wl::UopKind::Load && u.addr == 0x1000 && u.size == 8 && u.ip == 0x401000));
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.next(u));
    CHECK((u.kind == wl::UopKind::Alu && u.ip == 0x401004 && u.latency == 3));
  }
  REQUIRE(p.next(u));
  CHECK((u.kind == wl::UopKind::Store && u.addr == 0x2000 && u.value == 9));
  CHECK_THROWS_AS(p.next(u), InternalError);
}

TEST_CASE("program: store_uop() writes the bytes an assignment writes", "[latency]") {
  wl::Uop u;
  u.kind = wl::UopKind::Store;
  u.size = 0xa5;
  u.latency = 0x1234;
  u.flags = 0xbeef;
  u.sys = wl::Sys::Exit;
  u.mark = wl::Mark::Round;
  u.ip = 0x0102030405060708;
  u.addr = 0x1112131415161718;
  u.value = 0x2122232425262728;
  u.extra = 0x3132333435363738;
  wl::Uop a, b;
  std::memset(static_cast<void*>(&a), 0, sizeof a);
  std::memset(static_cast<void*>(&b), 0xff, sizeof b);
  a = u;
  wl::store_uop(&b, u);
  CHECK(std::memcmp(&a, &b, sizeof a) == 0);
}

TEST_CASE("checked loads: the bytes a load read against the workload's reference", "[latency]") {
  wl::Uop u = wl::access_uop(wl::UopKind::Load, 0x1000, 2, 0xbeef, 0x401000);
  CHECK(wl::loaded_value_matches(u, 0xbeef));
  CHECK(wl::loaded_value_matches(u, 0x1234beef));  // beyond the load's 2 bytes: not compared
  CHECK_FALSE(wl::loaded_value_matches(u, 0xbeee));
  u.size = 8;
  u.value = ~uint64_t(0);
  CHECK(wl::loaded_value_matches(u, ~uint64_t(0)));
  CHECK_FALSE(wl::loaded_value_matches(u, ~uint64_t(0) >> 1));
}

TEST_CASE("fault latency: a CPU's samples are in its own clock's cycles", "[latency][clocks]") {
  Samples s;
  auto m = s.meter(4.0);
  m.set_cpu_clocks({4.0, 2.0});
  for (int cpu : {0, 1}) {
    m.rdtscp_retired(cpu, 0);
    m.fault_taken(cpu, 10, false, kReuse, true);
    m.rdtscp_retired(cpu, 1000);
  }
  REQUIRE(s.v.size() == 2);
  CHECK(s.v[0].second == Approx(250.0));  // 1000 cycles at 4 GHz
  CHECK(s.v[1].second == Approx(500.0));  // at 2 GHz
}
