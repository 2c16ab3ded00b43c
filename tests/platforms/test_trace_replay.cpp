// SPDX-License-Identifier: GPL-2.0-only
// The trace workload (workloads/trace_*.cpp) on hand-made recordings (trace_writer.hpp): the reader
// decodes what was written, the replay recreates processes, threads and mappings in the kernel
// port and gives the built-in benchmark's faults for the same program, and bad recordings are
// the user's errors, with the file and the offset.
#include <catch2/catch.hpp>

#include <zstd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "platforms/run_mmusim.hpp"
#include "platforms/trace_writer.hpp"
#include "workloads/trace_reader.hpp"

using namespace mmusim_test;

namespace {

constexpr uint64_t kText = 0x108000;      // where Valgrind loads a PIE's text
constexpr uint64_t kStack = 0x1ffeff0000; // (a recorded stack)
constexpr uint64_t kBuf = 0x4a00000;      // the mmap of the measured buffer (2M aligned)
constexpr uint64_t kPage = 4096;

// The recording of the fork-reuse benchmark (recorder/tests/forkbench.c) as it would be: map
// `size` bytes, one store per page, fork (the child exits), wait, the region: one store per page,
// munmap, exit.
void write_forkbench(const std::string& dir, uint64_t size, bool threaded_region = false) {
  TraceWriter p(100, 0);
  p.map(kText, 0x2000, 5, MTR_MAP_FILE_PRIVATE).map(kStack, 0x10000, 3, MTR_MAP_ANON).thread(1);
  p.exec(kText + 0x10, 12);
  p.syscall(9, {0, size, 3, 0x22, uint64_t(-1), 0}, int64_t(kBuf));  // mmap anonymous
  for (uint64_t a = kBuf; a < kBuf + size; a += kPage) p.store(kText + 0x40, a, 1).exec(kText + 0x44, 2);
  p.syscall(57, {}, 101).fork(101);  // fork -> child 101
  p.syscall(61, {101, 0, 0, 0}, 101);  // wait4 -> 101
  if (threaded_region) {
    // A second thread makes the region's stores; the main thread joins it (a futex wait that
    // returns after the thread's exit), then unmaps.
    p.newthread(2).syscall(56, {0x3d0f00}, 102);
    p.thread(2).region(true, kBuf, size);
    for (uint64_t a = kBuf; a < kBuf + size; a += kPage) p.store(kText + 0x80, a, 1).exec(kText + 0x84, 2);
    p.region(false).exit(0);
    p.thread(1).syscall(202, {0, 0, 0}, 0);  // futex: the join
  } else {
    p.region(true, kBuf, size);
    for (uint64_t a = kBuf; a < kBuf + size; a += kPage) p.store(kText + 0x80, a, 1).exec(kText + 0x84, 2);
    p.region(false);
  }
  p.syscall(11, {kBuf, size}, 0);  // munmap
  p.syscall(231, {0}, 0).exit(0).end();
  p.write(dir + "/proc-100.mtr");
  TraceWriter c(101, 100);
  c.thread(1).exec(kText + 0x30, 3).syscall(60, {0}, 0).exit(0).end();
  c.write(dir + "/proc-101.mtr");
  write_manifest(dir, 100, "forkbench");
}

// The start of a one-process recording: its text mapped, thread 1, an anonymous buffer of `pages`
// at kBuf mapped and the measured region begun over it.
TraceWriter measured_buffer(uint64_t pages) {
  TraceWriter p(100, 0);
  p.map(kText, 0x2000, 5, MTR_MAP_FILE_PRIVATE).thread(1);
  p.syscall(9, {0, pages * kPage, 3, 0x22, uint64_t(-1), 0}, int64_t(kBuf));
  p.region(true, kBuf, pages * kPage);
  return p;
}

// Reads both cursors to their ends, checking that they give the same records; returns how many.
size_t same_records_to_the_end(mmusim::wl::TraceCursor& a, mmusim::wl::TraceCursor& b) {
  mmusim::wl::TraceRecord ra, rb;
  size_t n = 0;
  while (a.next(ra)) {
    REQUIRE(b.next(rb));
    CHECK((ra.op == rb.op && ra.tid == rb.tid && ra.ip == rb.ip && ra.addr == rb.addr && ra.n == rb.n));
    ++n;
  }
  CHECK_FALSE(b.next(rb));
  return n;
}

nlohmann::json run_stats(const TempDir& t, const std::string& sets) {
  const std::string stats = t.path("stats.json");
  Result r = run_mmusim("run " + std::string(MMUSIM_SOURCE_DIR) + "/configs/default.cfg " + sets +
                        " --stats " + stats + " --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(slurp(stats));
}

}  // namespace

TEST_CASE("trace reader: every record decodes to what was written, deltas and threads included") {
  TempDir t;
  TraceWriter w(7, 0);
  w.map(0x400000, 0x3000, 5, MTR_MAP_FILE_PRIVATE).thread(1);
  w.exec(0x401000, 5).load(0x401010, 0x7fff0008, 8).store(0x400ff0, 0x7ffe0000, 64);
  w.atomic(0x401020, 0x601000, 4).fence(0x401024, MTR_FENCE_RDTSCP);
  w.newthread(2).thread(2).store(0x401100, 0x601040, 2).exit(-3).thread(1);
  w.syscall(9, {0, 4096, 3, 0x22, uint64_t(-1), 0}, 0x7f0000000000).fork(8).region(true, 0x1000, 0x2000);
  w.region(false).exit(0).end();
  w.write(t.path("proc-7.mtr"));
  auto f = mmusim::wl::TraceFile::open(t.path("proc-7.mtr"));
  REQUIRE(f->pid() == 7);
  REQUIRE(f->summary().threads == std::vector<uint32_t>{1, 2});
  REQUIRE(f->summary().maps.size() == 1);
  REQUIRE(f->summary().forks == std::vector<uint32_t>{8});
  REQUIRE(f->summary().instructions == 5 + 5);
  REQUIRE(f->summary().accesses == 4);

  mmusim::wl::TraceCursor all(f, 0), main(f, 1), second(f, 2);
  mmusim::wl::TraceRecord r;
  std::vector<uint8_t> ops;
  while (all.next(r)) ops.push_back(r.op);
  REQUIRE(ops == std::vector<uint8_t>{MTR_MAP, MTR_THREAD, MTR_EXEC, MTR_LOAD, MTR_STORE, MTR_ATOMIC, MTR_FENCE,
                                      MTR_NEWTHREAD, MTR_THREAD, MTR_STORE, MTR_EXIT, MTR_THREAD, MTR_SYSCALL,
                                      MTR_FORK, MTR_REGION, MTR_REGION, MTR_EXIT});
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_EXEC && r.ip == 0x401000 && r.n == 5));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_LOAD && r.ip == 0x401010 && r.addr == 0x7fff0008 && r.n == 8));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_STORE && r.ip == 0x400ff0 && r.addr == 0x7ffe0000 && r.n == 64));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_ATOMIC && r.addr == 0x601000 && r.n == 4));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_FENCE && r.n == MTR_FENCE_RDTSCP));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_NEWTHREAD && r.n == 2 && r.order == 0));
  REQUIRE(main.next(r));  // thread 2's records are skipped, their deltas kept
  CHECK((r.op == MTR_SYSCALL && r.n == 9 && r.a[1] == 4096 && r.a[4] == uint64_t(-1) &&
         r.result == 0x7f0000000000 && r.order == 2));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_FORK && r.n == 8 && r.order == 3));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_REGION && r.n == 1 && r.a[0] == 0x1000 && r.a[1] == 0x2000));
  REQUIRE(main.next(r));
  REQUIRE(main.next(r));
  CHECK((r.op == MTR_EXIT && r.result == 0 && r.order == 4));
  REQUIRE(!main.next(r));
  REQUIRE(second.next(r));
  CHECK((r.op == MTR_STORE && r.tid == 2 && r.ip == 0x401100 && r.addr == 0x601040 && r.n == 2));
  REQUIRE(second.next(r));
  CHECK((r.op == MTR_EXIT && r.result == -3 && r.order == 1));
  REQUIRE(!second.next(r));
}

TEST_CASE("trace replay: a recorded fork-reuse gives the built-in benchmark's faults on the functional platform") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  const uint64_t size = 2 << 20;
  write_forkbench(t.path("rec"), size);
  const std::string common = "--set platform.name=functional --set kernel.wp_reuse=off ";
  nlohmann::json tr = run_stats(t, common + "--set thp.enabled=never --set workload.name=trace --set workload.trace=" + t.path("rec"));
  nlohmann::json bi = run_stats(t, common + "--set workload.size=2M --set workload.folio=4K --set workload.pattern=seq-byte");
  // The region: one write fault per page of the buffer, each a reuse of the page the child no
  // longer shares (6.12's do_wp_page() -> wp_can_reuse_anon_folio()).
  CHECK(tr["faults.region"] == size / kPage);
  CHECK(tr["faults.region"] == bi["faults.region"]);
  CHECK(tr["faults.total"] == bi["faults.total"]);
  CHECK(tr["kernel.do_wp_page"] == bi["kernel.do_wp_page"]);
  CHECK(tr["kernel.wp_reuse"] == bi["kernel.wp_reuse"]);
  CHECK(tr["total.trace.accesses"] == 2 * size / kPage);  // populate and pass
  CHECK(tr["total.trace.syscalls"] == 5 + 1);  // mmap fork wait4 munmap exit_group; the child's exit
  CHECK(tr["total.trace.syscalls_not_modelled"] == 0);
}

TEST_CASE("trace replay: the threads of a process keep the recorded order of their system calls") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  const uint64_t size = 2 << 20;
  write_forkbench(t.path("rec"), size, /*threaded_region=*/true);
  // Two cores: the second thread's stores run beside the main thread, which must not unmap the
  // buffer before the thread has exited (the join's futex is after the thread's exit).
  nlohmann::json s = run_stats(t, "--set platform.cores=2 --set thp.enabled=never --set workload.name=trace --set workload.trace=" + t.path("rec"));
  CHECK(s["faults.region"] == size / kPage);
  CHECK(s["faults.spurious"] == 0);
  CHECK(s["trace.syscalls_refused"] == 0);
}

TEST_CASE("trace replay: a thread number Valgrind reuses after an exit is a new thread, from its NEWTHREAD on") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  TraceWriter p = measured_buffer(64);
  for (int round = 0; round < 2; ++round) {
    p.newthread(2).syscall(56, {0x3d0f00}, 102 + round).thread(2);
    for (uint64_t i = 0; i < 16; ++i) p.store(kText + 0x80, kBuf + (round * 32 + i) * kPage, 1).exec(kText + 0x84, 1);
    p.exit(0).thread(1).syscall(202, {0, 0, 0}, 0);  // the join
  }
  p.region(false).syscall(231, {0}, 0).exit(0).end();
  p.write(t.path("rec/proc-100.mtr"));
  write_manifest(t.path("rec"), 100);
  for (const char* cores : {"1", "2"}) {
    nlohmann::json s = run_stats(t, std::string("--set platform.cores=") + cores +
                                        " --set thp.enabled=never --set workload.name=trace --set workload.trace=" +
                                        t.path("rec"));
    INFO("cores " << cores);
    CHECK(s["faults.region"] == 32);  // each thread's 16 pages once
    CHECK(s["total.trace.accesses"] == 32);
  }
}

TEST_CASE("trace replay: fast-forward outside the region leaves the kernel's work as in full detail") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  write_forkbench(t.path("rec"), 2 << 20);
  const std::string base = "--set thp.enabled=never --set workload.name=trace --set workload.trace=" + t.path("rec");
  nlohmann::json ff = run_stats(t, base);
  nlohmann::json all = run_stats(t, base + " --set workload.fast_forward=false");
  for (const char* k : {"faults.region", "faults.total", "total.faults.total", "total.kernel.do_anonymous_page",
                        "kernel.do_wp_page", "kernel.wp_reuse", "total.kernel.wp_reuse"})
    CHECK(ff[k] == all[k]);
  // The region's time: the caches and TLBs it starts with differ (fast-forward warms fewer lines).
  CHECK(double(ff["region.time_ns"]) == Approx(double(all["region.time_ns"])).epsilon(0.01));
  CHECK(ff["total.trace.fast_forwarded"] > 0);
  CHECK(all["total.trace.fast_forwarded"] == 0);
  CHECK(ff["total.core.uops"] < all["total.core.uops"]);
}

TEST_CASE("trace replay: a REP STOS/MOVS record moves whole lines within each page, its ends in elements") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  TraceWriter p = measured_buffer(16);
  // rep stosb over 8 pages from +3 (8 * 4096 - 3 bytes), then rep movsq of 4 pages into the rest.
  p.raw(MTR_REP).s(int64_t(kText + 0x90)).u(MTR_REP_STOS).s(int64_t(kBuf + 3)).s(0).u(8 * kPage - 3).u(1);
  p.raw(MTR_REP).s(8).u(MTR_REP_MOVS).s(int64_t(8 * kPage - 3)).s(-int64_t(8 * kPage)).u(4 * kPage / 8).u(8);
  p.region(false).syscall(231, {0}, 0).exit(0).end();
  p.write(t.path("rec/proc-100.mtr"));
  write_manifest(t.path("rec"), 100);
  nlohmann::json s = run_stats(t, "--set platform.name=functional --set thp.enabled=never --set workload.name=trace "
                                  "--set workload.trace=" + t.path("rec"));
  CHECK(s["faults.region"] == 8 + 4);  // every page stored to once (the loads find them present)
  CHECK(s["total.trace.accesses"] == (8 * kPage - 3) + 2 * (4 * kPage / 8));
  // stos: 61 single bytes up to the first line, 8 * 64 - 1 whole lines; movs: 4 * 64 lines each way
  // (and the region's end marker)
  CHECK(s["core.uops"] == 61 + (8 * 64 - 1) + 2 * 4 * 64 + 1);
}

TEST_CASE("trace replay: a system call the port does not model takes its class's workload.syscall_time") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  TraceWriter p(100, 0);
  p.map(kText, 0x2000, 5, MTR_MAP_FILE_PRIVATE).thread(1).exec(kText, 4);
  for (int i = 0; i < 3; ++i) p.syscall(1, {1, 0x1000, 10}, 10).exec(kText + 8, 2);  // write()
  p.syscall(202, {0, 0, 0}, 0);                                                      // futex()
  p.syscall(231, {0}, 0).exit(0).end();
  p.write(t.path("rec/proc-100.mtr"));
  write_manifest(t.path("rec"), 100);
  const std::string base = "--set workload.name=trace --set workload.trace=" + t.path("rec");
  nlohmann::json none = run_stats(t, base);
  nlohmann::json io = run_stats(t, base + " --set workload.syscall_time.io=1us --set workload.syscall_time.wait=5us");
  CHECK(io["trace.syscalls.io"] == 3);
  CHECK(io["trace.syscalls.wait"] == 1);
  CHECK(double(io["sim.simulated_ns"]) - double(none["sim.simulated_ns"]) == Approx(3 * 1000 + 5000).margin(1));
}

TEST_CASE("trace replay: recorded fences, atomics and RDTSCP reach the core as those instructions") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  TraceWriter p(100, 0);
  p.map(kText, 0x2000, 5, MTR_MAP_FILE_PRIVATE).map(kStack, 0x10000, 3, MTR_MAP_ANON).thread(1);
  p.exec(kText, 2).fence(kText + 4, MTR_FENCE_LFENCE).fence(kText + 8, MTR_FENCE_MFENCE);
  p.fence(kText + 12, MTR_FENCE_CPUID).atomic(kText + 16, kStack + 0x100, 8);
  p.fence(kText + 20, MTR_FENCE_SFENCE).fence(kText + 24, MTR_FENCE_RDTSC).fence(kText + 28, MTR_FENCE_RDTSCP);
  p.exec(kText + 32, 2).syscall(231, {0}, 0).exit(0).end();
  p.write(t.path("rec/proc-100.mtr"));
  write_manifest(t.path("rec"), 100);
  const std::string base = "--set workload.name=trace --set workload.trace=" + t.path("rec");
  nlohmann::json a = run_stats(t, base + " --set core.rdtscp_latency=0");
  nlohmann::json b = run_stats(t, base + " --set core.rdtscp_latency=5000");
  // LFENCE, MFENCE, CPUID and the atomic's fence: LFENCEs; SFENCE and RDTSC are not ordered.
  CHECK(a["total.core.lfences"] == 4);
  // The RDTSCP is one: its latency shows once in the run's time (cycles at 4.9 GHz).
  CHECK(double(b["sim.simulated_ns"]) - double(a["sim.simulated_ns"]) == Approx(5000 / 4.9).margin(2));
}

TEST_CASE("kernel.check_every runs the whole invariant check after every N-th kernel entry") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  write_forkbench(t.path("rec"), 2 << 20);
  const std::string base = "--set platform.name=functional --set thp.enabled=never --set kernel.check_invariants=true "
                           "--set workload.name=trace --set workload.trace=" + t.path("rec");
  nlohmann::json all = run_stats(t, base);
  nlohmann::json every4 = run_stats(t, base + " --set kernel.check_every=4");
  const uint64_t n = all["total.kernel.invariant_checks"];
  CHECK(n > 1000);  // (a fault, a syscall: each entry once)
  CHECK(every4["total.kernel.invariant_checks"] == n / 4);
  CHECK(every4["total.faults.total"] == all["total.faults.total"]);
}

TEST_CASE("trace replay: a truncated, corrupt or newer recording is the user's error, with file and offset") {
  TempDir t;
  std::filesystem::create_directories(t.path("rec"));
  write_forkbench(t.path("rec"), 2 << 20);
  const std::string run = "run " + std::string(MMUSIM_SOURCE_DIR) +
                          "/configs/default.cfg --set platform.name=functional --set workload.name=trace "
                          "--set workload.trace=" + t.path("rec");
  SECTION("truncated") {
    TraceWriter c(101, 100);
    c.thread(1).exec(0x108030, 3).syscall(60, {0}, 0).exit(0).end();
    c.write(t.path("rec/proc-101.mtr"), 3);
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("proc-101.mtr: offset") && Catch::Contains("corrupt or truncated"));
  }
  SECTION("unknown opcode") {
    TraceWriter c(101, 100);
    c.thread(1).raw(0x7e).end();
    c.write(t.path("rec/proc-101.mtr"));
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("proc-101.mtr: offset 26: unknown opcode 0x7e"));
  }
  SECTION("a newer format") {
    TraceWriter c(101, 100);
    std::vector<uint8_t> b = c.thread(1).exit(0).end().bytes();
    b[8] = 2;
    std::ofstream(t.path("rec/proc-101.mtr"), std::ios::binary).write(reinterpret_cast<const char*>(b.data()), long(b.size()));
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("trace format version 2 is newer than this mmusim reads (1)"));
  }
  SECTION("no recording there") {
    Result r = run_mmusim("run " + std::string(MMUSIM_SOURCE_DIR) +
                          "/configs/default.cfg --set workload.name=trace --set workload.trace=" + t.path("none"));
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("manifest.txt is missing") && Catch::Contains("mmusim record"));
  }
  SECTION("two measured regions") {
    TraceWriter c(101, 100);
    c.thread(1).region(true).region(false).region(true).region(false).exit(0).end();
    c.write(t.path("rec/proc-101.mtr"));
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("a second measured region begins"));
  }
}

TEST_CASE("compressed recordings: frames of any size read as the file itself, by every cursor") {
  // Two threads' records interleaved, compressed in frames of 7 to 200 bytes: records straddle
  // frames, and a cursor copied mid-file (for_thread) goes on from there.
  TempDir t;
  TraceWriter w(7, 0);
  w.map(0x400000, 0x3000, 5, MTR_MAP_FILE_PRIVATE).thread(1).newthread(2);
  for (uint64_t i = 0; i < 300; ++i) {
    w.thread(1 + (i % 2)).exec(0x401000 + 8 * i, 1 + i).store(0x401004 + 8 * i, 0x7f0000000000 + 4096 * i, 8);
    if (i % 37 == 0) w.syscall(9, {0, 4096 * i, 3, 0x22, uint64_t(-1), 0}, int64_t(0x7e0000000000 + i));
  }
  w.thread(2).exit(0).thread(1).exit(0).end();
  w.write(t.path("proc-7.mtr"));
  auto plain = mmusim::wl::TraceFile::open(t.path("proc-7.mtr"));
  auto records = [](std::shared_ptr<const mmusim::wl::TraceFile> f, uint32_t tid) {
    std::vector<std::array<uint64_t, 6>> out;
    mmusim::wl::TraceRecord r;
    for (mmusim::wl::TraceCursor c(f, tid); c.next(r);) out.push_back({r.op, r.tid, r.ip, r.addr, r.n, r.a[1]});
    return out;
  };
  for (size_t frame : {size_t(7), size_t(96), size_t(200), mmusim::wl::kTraceFrameBytes}) {
    INFO("frame bytes " << frame);
    const uint64_t stored = mmusim::wl::zstd_compress_trace(t.path("proc-7.mtr"), t.path("proc-7.mtr.zst"), 3, frame);
    auto z = mmusim::wl::TraceFile::open(t.path("proc-7.mtr.zst"));
    CHECK(z->compressed());
    CHECK(z->stored_size() == stored);
    CHECK(z->size() == plain->size());
    CHECK(z->frames().size() == (plain->size() + frame - 1) / frame);
    CHECK(z->pid() == 7);
    CHECK(z->summary().records == plain->summary().records);
    CHECK(z->summary().threads == plain->summary().threads);
    for (uint32_t tid : {0u, 1u, 2u}) CHECK(records(z, tid) == records(plain, tid));
    // A copy made half-way reads on exactly as the original does.
    mmusim::wl::TraceCursor a(z, 0), b(plain, 0);
    mmusim::wl::TraceRecord ra, rb;
    for (int i = 0; i < 450; ++i) REQUIRE((a.next(ra) && b.next(rb)));
    mmusim::wl::TraceCursor a2 = a.for_thread(2), b2 = b.for_thread(2);
    CHECK(same_records_to_the_end(a2, b2) > 100);
  }
}

// A thread's cursor skips the other threads' segments (TraceFile::segments(): the decoder's state
// at each THREAD record, found by the check): it must give exactly what decoding every record
// gives, the ordered records' numbers included, in plain and compressed files (a skip that lands
// in a frame not yet decompressed), and from a copy made mid-file.
TEST_CASE("trace reader: a thread's cursor that skips the other threads' segments reads what decoding everything reads") {
  TempDir t;
  TraceWriter w(7, 0);
  w.map(0x400000, 0x3000, 5, MTR_MAP_FILE_PRIVATE).thread(1).newthread(2).newthread(3);
  for (uint64_t i = 0; i < 400; ++i) {
    const uint32_t tid = uint32_t(1 + (i * 7 / 5) % 3);  // uneven runs of each thread
    w.thread(tid).exec(0x401000 + 16 * i, 1 + i % 9).load(0x401008 + 16 * i, 0x7f0000000000 + 64 * i * tid, 8);
    if (i % 11 == 0) w.syscall(39, {0, 0, 0, 0, 0, 0}, int64_t(100 + i));  // ordered: getpid()
    if (i % 13 == 0) w.store(0x40100c + 16 * i, 0x600000 + 8 * i, 4);
  }
  w.thread(3).exit(0).thread(2).exit(0).thread(1).exit(0).end();
  w.write(t.path("proc-7.mtr"));
  using Rec = std::array<uint64_t, 7>;
  auto records = [](std::shared_ptr<const mmusim::wl::TraceFile> f, uint32_t tid, bool skip) {
    std::vector<Rec> out;
    mmusim::wl::TraceRecord r;
    for (mmusim::wl::TraceCursor c(f, tid, skip); c.next(r);)
      out.push_back({r.op, r.tid, r.ip, r.addr, r.n, uint64_t(r.result), r.order});
    return out;
  };
  auto plain = mmusim::wl::TraceFile::open(t.path("proc-7.mtr"));
  CHECK(plain->segments().size() > 100);
  CHECK(plain->segments().back().tid == 0);  // the END record's
  for (size_t frame : {size_t(0), size_t(7), size_t(96), size_t(200)}) {
    INFO("frame bytes " << frame << " (0: not compressed)");
    std::shared_ptr<const mmusim::wl::TraceFile> f = plain;
    if (frame) {
      mmusim::wl::zstd_compress_trace(t.path("proc-7.mtr"), t.path("proc-7.mtr.zst"), 3, frame);
      f = mmusim::wl::TraceFile::open(t.path("proc-7.mtr.zst"));
    }
    for (uint32_t tid : {1u, 2u, 3u}) {
      INFO("thread " << tid);
      const std::vector<Rec> skipped = records(f, tid, true), decoded = records(f, tid, false);
      CHECK(skipped.size() > 100);
      CHECK(skipped == decoded);
      CHECK(skipped == records(plain, tid, false));
    }
    // A copy made mid-file, of a cursor of another thread (as a NEWTHREAD record's), and of one
    // of every record.
    for (uint32_t from : {0u, 1u}) {
      mmusim::wl::TraceCursor a(f, from), b(f, from, false);
      mmusim::wl::TraceRecord ra, rb;
      for (int i = 0; i < 150; ++i) REQUIRE((a.next(ra) && b.next(rb)));
      mmusim::wl::TraceCursor a3 = a.for_thread(3), b3 = b.for_thread(3);
      CHECK(same_records_to_the_end(a3, b3) > 50);
    }
  }
}

TEST_CASE("compressed recordings replay as the uncompressed, and damaged ones are the user's error") {
  TempDir t;
  std::filesystem::create_directories(t.path("plain"));
  std::filesystem::create_directories(t.path("z"));
  write_forkbench(t.path("plain"), 2 << 20);
  write_forkbench(t.path("z"), 2 << 20);
  for (const char* p : {"proc-100.mtr", "proc-101.mtr"}) {
    const std::string in = t.path(std::string("z/") + p);
    mmusim::wl::zstd_compress_trace(in, in + ".zst", 3, 4096);
    std::filesystem::remove(in);
  }
  const std::string base = "--set platform.name=functional --set output.host_stats=false --set workload.name=trace "
                           "--set workload.trace=";
  nlohmann::json a = run_stats(t, base + t.path("plain"));
  nlohmann::json b = run_stats(t, base + t.path("z"));
  a.erase("config"), b.erase("config");  // (workload.trace differs)
  a.erase("meta"), b.erase("meta");
  CHECK(a == b);
  CHECK(a["faults.region"] > 0);
  CHECK(a["trace.accesses"] == 512);  // (in the region)

  const std::string run = "run " + std::string(MMUSIM_SOURCE_DIR) + "/configs/default.cfg " + base + t.path("z");
  const std::string zf = t.path("z/proc-100.mtr.zst");
  std::string good = slurp(zf);
  auto put = [&](const std::string& bytes) { std::ofstream(zf, std::ios::binary | std::ios::trunc) << bytes; };
  SECTION("truncated") {
    put(good.substr(0, good.size() - 5));
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("proc-100.mtr.zst: compressed trace: frame") &&
                          Catch::Contains("corrupt or truncated"));
  }
  SECTION("a changed byte (the frame's checksum)") {
    good[good.size() / 2] = char(good[good.size() / 2] ^ 0x55);
    put(good);
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("proc-100.mtr.zst: compressed trace:") && Catch::Contains("corrupt"));
  }
  SECTION("a frame that does not state its size") {
    // (zstd's command compressing a pipe, for instance)
    const std::string raw = slurp(t.path("plain/proc-100.mtr"));
    ZSTD_CCtx* c = ZSTD_createCCtx();
    REQUIRE(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0) == 0);
    std::string out(ZSTD_compressBound(raw.size()) + 64, '\0');
    ZSTD_inBuffer in{raw.data(), raw.size(), 0};
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    REQUIRE(ZSTD_compressStream2(c, &o, &in, ZSTD_e_end) == 0);
    ZSTD_freeCCtx(c);
    out.resize(o.pos);
    put(out);
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("does not state its size") && Catch::Contains("zstd -d"));
  }
  SECTION("both the file and its compressed one") {
    std::filesystem::copy_file(t.path("plain/proc-100.mtr"), t.path("z/proc-100.mtr"));
    Result r = run_mmusim(run);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains("both") && Catch::Contains("remove one"));
  }
}

TEST_CASE("compressed recordings: a file compressed while it is written reads as the whole file") {
  // mmusim record's way: the tool appends, the compressor takes each whole frame as it is there
  // and frees that part of the .mtr (a hole), then the rest at the end.
  TempDir t;
  TraceWriter w(7, 0);
  w.map(0x400000, 0x3000, 5, MTR_MAP_FILE_PRIVATE).thread(1);
  for (uint64_t i = 0; i < 2000; ++i) w.exec(0x401000 + 8 * i, 1 + i % 5).store(0x401004, 0x7f0000000000 + 64 * i, 8);
  w.exit(0).end();
  const std::vector<uint8_t> all = w.bytes();
  const std::string in = t.path("proc-7.mtr"), out = in + ".zst";
  { std::ofstream(in, std::ios::binary | std::ios::trunc); }
  mmusim::wl::TraceCompressor c(in, out, 3, 1000, true);
  size_t frames = 0, at = 0;
  while (at < all.size()) {
    const size_t n = std::min<size_t>(777, all.size() - at);  // the tool's writes: not frame-sized
    std::ofstream(in, std::ios::binary | std::ios::app).write(reinterpret_cast<const char*>(all.data() + at), long(n));
    at += n;
    frames += c.pump();
    CHECK(c.in_bytes() == at / 1000 * 1000);  // whole frames only
  }
  c.finish();
  CHECK(frames == all.size() / 1000);
  CHECK(c.in_bytes() == all.size());
  // (where the file system punches holes, every compressed byte of the input was given back)
  CHECK((c.freed_bytes() == 0 || c.freed_bytes() == all.size()));
  std::filesystem::remove(in);
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(all.data()), long(all.size()));
  auto z = mmusim::wl::TraceFile::open(out);
  auto plain = mmusim::wl::TraceFile::open(in);
  CHECK(z->frames().size() == (all.size() + 999) / 1000);
  CHECK(z->summary().records == plain->summary().records);
  CHECK(z->summary().instructions == plain->summary().instructions);
  mmusim::wl::TraceCursor a(z, 1), b(plain, 1);
  CHECK(same_records_to_the_end(a, b) == 4000 + 1);  // (and the EXIT)
}
