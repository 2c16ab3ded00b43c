// SPDX-License-Identifier: GPL-2.0-only
// Tests of the event trace: the ftrace text format, buffering, determinism and errors.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/trace.hpp"

using namespace mmusim;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("mmusim-test-trace-{}-{}", ::getpid(), n++);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::string kHeader =
    "# tracer: nop\n"
    "#\n"
    "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
    "#              | |         |   |||||     |         |\n";

// One event line: task-pid, [cpu], flags, seconds.nanoseconds (9 digits), event name, fields.
const std::regex kLineRe(
    R"(^ *([^ ]+)-([0-9]+) \[([0-9]{3,})\] \.{5} +([0-9]+)\.([0-9]{9}): ([a-z_]+):((?: [a-z_]+=[^ ]+)*)$)");

// A fixed, varied sequence of events (the same calls every time).
void emit_sequence(Trace& t, int n) {
  const TraceTask parent{"fork-reuse", 1}, child{"fork-reuse", 2};
  for (int i = 0; i < n; ++i) {
    uint64_t ps = 1000ull * 1000 * uint64_t(i) * 7919 + uint64_t(i) * 3;
    uint64_t addr = 0x7f0000000000ull + uint64_t(i) * 4096;
    t.event(ps, i % 4, i % 3 ? parent : child, "page_fault_user",
            {TraceField::hex("address", addr), TraceField::hex("ip", 0x401000),
             TraceField::hex("error_code", 7)});
    t.event(ps + 500000, i % 4, parent, "mm_fault_done",
            {TraceField::hex("address", addr), TraceField::str("result", i % 2 ? "reuse" : "copy"),
             TraceField::dec("ptes", uint64_t(i % 16 + 1))});
    if (i % 5 == 0)
      t.event(ps + 900000, i % 4, parent, "tlb_fill",
              {TraceField::hex("address", addr), TraceField::dec("page_size", 4096),
               TraceField::str("perm", "rw"), TraceField::dec("speculative", 0)});
  }
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("trace: ftrace header and event line, byte for byte", "[trace]") {
  std::string out;
  Trace t;
  t.open_buffer(&out, make_ftrace_format());
  // 4150208 ns = 0.004150208 s
  t.event(4150208000ull, 0, {"fork-reuse", 1}, "page_fault_user",
          {TraceField::hex("address", 0x7f0000010000ull), TraceField::hex("ip", 0x401000),
           TraceField::hex("error_code", 0x7)});
  t.event(1234000000001000ull, 12, {"kworker", 4321}, "mm_fault_done",
          {TraceField::hex("address", 0), TraceField::str("result", "reuse"),
           TraceField::dec("ptes", 16)});
  t.event(2000, 1, {"a", 0}, "fork", {});
  t.close();
  CHECK(out == kHeader +
                   "          fork-reuse-1 [000] .....     0.004150208: page_fault_user: "
                   "address=0x7f0000010000 ip=0x401000 error_code=0x7\n"
                   "          kworker-4321 [012] .....  1234.000000001: mm_fault_done: "
                   "address=0x0 result=reuse ptes=16\n"
                   "                   a-0 [001] .....     0.000000002: fork:\n");
  CHECK(t.events() == 3);
}

TEST_CASE("trace: every line matches the ftrace format", "[trace]") {
  std::string out;
  Trace t;
  t.open_buffer(&out, make_ftrace_format());
  emit_sequence(t, 40);
  // Timestamps past 99999 s widen the seconds column rather than being cut.
  t.event(12345678012345678000ull, 255, {"long-task-name-here", 99999}, "exit",
          {TraceField::dec("code", 0)});
  t.close();
  auto lines = lines_of(out);
  REQUIRE(lines.size() > 4);
  CHECK(lines[0] == "# tracer: nop");
  CHECK(lines[1] == "#");
  CHECK_THAT(lines[2], Contains("TASK-PID") && Contains("CPU#") && Contains("TIMESTAMP") &&
                           Contains("FUNCTION"));
  CHECK(lines[3].front() == '#');
  size_t events = 0;
  for (size_t i = 4; i < lines.size(); ++i) {
    INFO(lines[i]);
    std::smatch m;
    REQUIRE(std::regex_match(lines[i], m, kLineRe));
    ++events;
    // Hex fields are written with 0x; decimal ones without.
    std::string fields = m[7];
    if (m[6] == "page_fault_user") {
      CHECK_THAT(fields, Contains(" address=0x7f"));
      CHECK_THAT(fields, Contains(" error_code=0x7"));
    }
    if (m[6] == "tlb_fill") CHECK_THAT(fields, Contains(" page_size=4096 "));
  }
  CHECK(events == t.events());
  CHECK(lines.back() ==
        "long-task-name-here-99999 [255] ..... 12345678.012345678: exit: code=0");
}

TEST_CASE("trace: timestamps are simulated picoseconds shown as seconds.nanoseconds", "[trace]") {
  auto ts = [](uint64_t ps) {
    std::string out;
    Trace t;
    t.open_buffer(&out, make_ftrace_format());
    t.event(ps, 0, {"t", 1}, "x", {});
    t.close();
    std::smatch m;
    std::string line = lines_of(out).back();
    REQUIRE(std::regex_match(line, m, kLineRe));
    return m[4].str() + "." + m[5].str();
  };
  CHECK(ts(0) == "0.000000000");
  CHECK(ts(999) == "0.000000000");  // below a nanosecond: truncated
  CHECK(ts(1999) == "0.000000001");
  CHECK(ts(1000000000000ull) == "1.000000000");
  CHECK(ts(1500000000000ull) == "1.500000000");
  CHECK(ts(59999999999999000ull) == "59999.999999999");
}

TEST_CASE("trace: output is buffered and flushed on close", "[trace]") {
  TempDir dir;
  const std::string path = dir.file("run.trace");
  std::string expected;
  {
    Trace b;
    b.open_buffer(&expected, make_ftrace_format());
    emit_sequence(b, 10);
    b.close();
  }

  Trace t;
  t.open(path, make_ftrace_format());
  CHECK(t.on());
  emit_sequence(t, 10);
  CHECK(fs::exists(path));
  CHECK(fs::file_size(path) == 0);  // nothing written before close (or a 1 MiB buffer)
  t.close();
  CHECK_FALSE(t.on());
  CHECK(slurp(path) == expected);

  // A buffer sink also receives nothing until close.
  std::string sink;
  Trace s;
  s.open_buffer(&sink, make_ftrace_format());
  emit_sequence(s, 3);
  CHECK(sink.empty());
  s.close();
  CHECK(sink.rfind(kHeader, 0) == 0);

  // close() twice is harmless; events while closed are dropped.
  s.close();
  uint64_t n = s.events();
  s.event(1, 0, {"x", 1}, "dropped", {});
  CHECK(s.events() == n);
}

TEST_CASE("trace: a full buffer is flushed before close without losing or reordering events",
          "[trace]") {
  std::string sink, whole;
  Trace t;
  t.open_buffer(&sink, make_ftrace_format());
  emit_sequence(t, 6000);  // well over 1 MiB of text
  CHECK_FALSE(sink.empty());  // flushed at the threshold
  CHECK(sink.size() >= (size_t(1) << 20));
  t.close();
  {
    // The same sequence in one piece: the flushed and the final parts are byte-identical to it.
    std::string a;
    Trace one;
    one.open_buffer(&a, make_ftrace_format());
    emit_sequence(one, 6000);
    one.close();
    whole = a;
  }
  CHECK(sink == whole);
}

TEST_CASE("trace: the destructor closes and flushes", "[trace]") {
  TempDir dir;
  const std::string path = dir.file("dtor.trace");
  {
    Trace t;
    t.open(path, make_ftrace_format());
    emit_sequence(t, 2);
  }
  auto lines = lines_of(slurp(path));
  REQUIRE(lines.size() == 4 + 2 * 2 + 1);
  CHECK(std::regex_match(lines.back(), kLineRe));
}

TEST_CASE("trace: determinism: the same events give byte-identical traces", "[trace]") {
  TempDir dir;
  const std::string p1 = dir.file("a.trace"), p2 = dir.file("b.trace");
  std::string b1, b2;
  {
    Trace t1, t2, t3, t4;
    t1.open(p1, make_ftrace_format());
    t2.open(p2, make_ftrace_format());
    t3.open_buffer(&b1, make_ftrace_format());
    t4.open_buffer(&b2, make_ftrace_format());
    emit_sequence(t1, 200);
    emit_sequence(t3, 200);
    emit_sequence(t2, 200);
    emit_sequence(t4, 200);
    t1.close();
    t2.close();
    t3.close();
    t4.close();
  }
  const std::string f1 = slurp(p1), f2 = slurp(p2);
  CHECK_FALSE(f1.empty());
  CHECK(f1 == f2);
  CHECK(b1 == b2);
  CHECK(f1 == b1);
  // And a different sequence differs.
  std::string other;
  Trace t;
  t.open_buffer(&other, make_ftrace_format());
  emit_sequence(t, 199);
  t.close();
  CHECK(other != b1);
}

TEST_CASE("trace: reopening closes the previous output", "[trace]") {
  std::string first, second;
  Trace t;
  t.open_buffer(&first, make_ftrace_format());
  t.event(1000, 0, {"a", 1}, "fork", {});
  t.open_buffer(&second, make_ftrace_format());
  t.event(2000, 0, {"a", 1}, "exit", {});
  t.close();
  CHECK_THAT(first, Contains("fork:"));
  CHECK_FALSE(Contains("exit:").match(first));
  CHECK_THAT(second, Contains("exit:"));
  CHECK(second.rfind(kHeader, 0) == 0);
}

TEST_CASE("trace: off by default, events are ignored until opened", "[trace]") {
  Trace t;
  CHECK_FALSE(t.on());
  t.event(1, 0, {"a", 1}, "fork", {});
  CHECK(t.events() == 0);
  t.close();  // closing a trace never opened is harmless
}

TEST_CASE("trace: an unwritable path is a UserError naming it", "[trace]") {
  TempDir dir;
  const std::string missing_dir = dir.file("no/such/dir/t.trace");
  Trace t;
  REQUIRE_THROWS_AS(t.open(missing_dir, make_ftrace_format()), UserError);
  try {
    t.open(missing_dir, make_ftrace_format());
  } catch (const UserError& e) {
    CHECK_THAT(std::string(e.what()), Contains("cannot open trace file '" + missing_dir + "'"));
  }
  CHECK_FALSE(t.on());
  // A directory cannot be opened for writing either, even by root.
  REQUIRE_THROWS_AS(t.open(dir.path.string(), make_ftrace_format()), UserError);
  CHECK_FALSE(t.on());
}

TEST_CASE("trace: --trace-events keeps only the named events", "[trace]") {
  std::string out;
  Trace t;
  t.set_events("mm_fault_done, fork");
  t.open_buffer(&out, make_ftrace_format());
  t.event(1000, 0, {"a", 1}, "page_fault_user", {TraceField::hex("address", 0x1000)});
  t.event(2000, 0, {"a", 1}, "mm_fault_done", {TraceField::str("result", "reuse")});
  t.event(3000, 0, {"a", 1}, "tlb_fill", {});
  t.event(4000, 0, {"a", 1}, "fork", {});
  t.close();
  CHECK(t.events() == 2);
  CHECK(out.find("page_fault_user") == std::string::npos);
  CHECK(out.find("tlb_fill") == std::string::npos);
  CHECK(out.find("mm_fault_done: result=reuse") != std::string::npos);
  CHECK(out.find("fork:") != std::string::npos);

  Trace all;
  all.set_events("all");
  std::string out2;
  all.open_buffer(&out2, make_ftrace_format());
  all.event(3000, 0, {"a", 1}, "tlb_fill", {});
  all.close();
  CHECK(all.events() == 1);

  Trace bad;
  CHECK_THROWS_WITH(bad.set_events("mm_fault_done,page_fault"),
                    Catch::Contains("unknown event 'page_fault'") && Catch::Contains("page_fault_user"));
  CHECK_THROWS_AS(bad.set_events("fork,"), UserError);  // an empty name is not an event
  CHECK_THROWS_AS(bad.set_events(""), UserError);       // nor is an empty list
}
