// SPDX-License-Identifier: GPL-2.0-only
// Tests of the configuration: the Params binder, INI files with includes, --set overrides, value
// parsing and every user error with its message. The schema is a fixture declared here, so these
// tests depend on nothing but base/.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/params.hpp"

using namespace mmusim;
using Catch::Contains;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

enum class WpReuse { Off, Block16, Pagetable, PagetableFlush };

// The fixture schema: one key of every parameter type.
struct Fixture {
  uint32_t rob_entries = 0;
  int width = 0;
  int64_t offset = 0;
  double freq_ghz = 0;
  bool smt = true;
  std::string name;
  uint64_t mem_size = 0;
  uint64_t stride = 0;
  WpReuse wp_reuse = WpReuse::Pagetable;
  Duration fault_latency;
  uint32_t stlb_entries = 0;

  void visit(Params& p) {
    p.integer("core.rob_entries", rob_entries, 512, 1, 4096, "reorder buffer entries");
    p.integer("core.width", width, 6, 1, 16, "rename width", "uops");
    p.integer("core.offset", offset, 0, -1000, 1000, "a signed integer");
    p.real("core.freq_ghz", freq_ghz, 3.6, 0.5, 10.0, "core clock", "GHz");
    p.boolean("core.smt", smt, false, "simultaneous multithreading");
    p.string("core.name", name, "golden-cove", "core name");
    p.size("mem.size", mem_size, "1G", 4096, uint64_t(1) << 40, "physical memory", 4096);
    p.size("mem.stride", stride, "64", 0, uint64_t(1) << 30, "a size with no alignment");
    p.enumeration("kernel.wp_reuse", wp_reuse, WpReuse::Off,
                  {{"off", WpReuse::Off},
                   {"block16", WpReuse::Block16},
                   {"pagetable", WpReuse::Pagetable},
                   {"pagetable+flush", WpReuse::PagetableFlush}},
                  "write-fault reuse policy");
    p.duration("kernel.fault_latency", fault_latency, "715", "fault entry latency");
    p.integer("tlb.stlb.entries", stlb_entries, 2048, 1, 1 << 20, "STLB entries");
  }
};

const Schema& schema() {
  static const Schema s = [] {
    Schema sc;
    Fixture f;
    Params p = Params::declaring(sc);
    f.visit(p);
    return sc;
  }();
  return s;
}

std::string data(const std::string& rel) {
  return std::string(MMUSIM_SOURCE_DIR) + "/tests/base/data/" + rel;
}

// A private directory for files a test writes (removed at the end of the test).
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("mmusim-test-config-{}-{}", ::getpid(), n++);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << content;
    return p.string();
  }
};

// Requires `f` to throw a UserError and returns its message.
template <typename F>
std::string user_error(F&& f) {
  REQUIRE_THROWS_AS(f(), UserError);
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return {};
}

// Loads `content` as a config file and returns the UserError it must cause; `path` receives the
// file's path.
std::string load_error(const std::string& content, std::string* path = nullptr) {
  TempDir dir;
  std::string p = dir.write("exp.cfg", content);
  if (path) *path = p;
  return user_error([&] {
    Config c(schema());
    c.load_file(p);
  });
}

// The error of `--set key=value` on a default configuration.
std::string set_error(const std::string& assignment) {
  return user_error([&] {
    Config c(schema());
    c.set_override(assignment);
  });
}

Value parse(const std::string& key, const std::string& text) {
  const ParamSpec* s = schema().find(key);
  REQUIRE(s != nullptr);
  return parse_value(*s, text, "test");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The binder and defaults

TEST_CASE("config: defaults of every type, read back through the binder", "[config]") {
  Config c(schema());
  for (auto& [spec, st] : c.effective()) {
    CHECK(st->origin == "default");
    CHECK(c.is_default(spec->key));
  }
  CHECK(c.get_int("core.rob_entries") == 512);
  CHECK(c.get_float("core.freq_ghz") == Approx(3.6));
  CHECK_FALSE(c.get_bool("core.smt"));
  CHECK(c.get_string("core.name") == "golden-cove");
  CHECK(c.get_size("mem.size") == (uint64_t(1) << 30));
  CHECK(c.get_string("kernel.wp_reuse") == "off");
  CHECK(c.get_duration("kernel.fault_latency") == Duration{715, false});

  Fixture f;
  Params p = Params::reading(c);
  f.visit(p);
  CHECK(f.rob_entries == 512);
  CHECK(f.width == 6);
  CHECK(f.freq_ghz == Approx(3.6));
  CHECK_FALSE(f.smt);
  CHECK(f.name == "golden-cove");
  CHECK(f.mem_size == (uint64_t(1) << 30));
  CHECK(f.stride == 64);
  CHECK(f.wp_reuse == WpReuse::Off);
  CHECK(f.fault_latency == Duration{715, false});
  CHECK(f.stlb_entries == 2048);

  // effective() is in declaration order.
  auto eff = c.effective();
  REQUIRE(eff.size() == schema().all().size());
  CHECK(eff.front().first->key == "core.rob_entries");
  CHECK(eff.back().first->key == "tlb.stlb.entries");
}

TEST_CASE("config: the binder fills fields from set values, enums mapped to their constant",
          "[config]") {
  Config c(schema());
  c.set_override("kernel.wp_reuse=pagetable+flush");
  c.set_override("core.smt=on");
  c.set_override("mem.size=2M");
  c.set_override("kernel.fault_latency=1.5us");
  c.set_override("core.offset=-12");
  Fixture f;
  Params p = Params::reading(c);
  f.visit(p);
  CHECK(f.wp_reuse == WpReuse::PagetableFlush);
  CHECK(f.smt);
  CHECK(f.mem_size == 2 * 1024 * 1024);
  CHECK(f.fault_latency.is_time);
  CHECK(f.fault_latency.value == Approx(1500));
  CHECK(f.offset == -12);
}

TEST_CASE("config: a prefixed binder declares and reads a second family of the same keys", "[config]") {
  Schema sc;
  StatedDefaults stated;
  stated["x.core.rob_entries"] = {"256", "file.cfg:7"};
  Fixture plain, pre;
  Params d = Params::declaring(sc, "v", &stated);
  plain.visit(d);
  Params dp = d.prefixed("x.", "X: ");
  CHECK(dp.key_prefix() == "x.");
  pre.visit(dp);
  const ParamSpec* rob = sc.find("x.core.rob_entries");
  REQUIRE(rob);
  CHECK(rob->default_text == "256");  // the stated default, under the prefixed key
  CHECK(rob->default_sources.at("v") == "file.cfg:7");
  CHECK(rob->desc == "X: reorder buffer entries");
  CHECK(sc.find("core.rob_entries")->default_text == "512");
  REQUIRE(sc.find("x.tlb.stlb.entries"));
  CHECK(sc.find("x.tlb.stlb.entries")->desc == "X: STLB entries");
  CHECK(dp.prefixed("y.").key_prefix() == "x.y.");

  Config c(sc);
  c.set("x.core.width", "3", "test");
  c.set("core.width", "5", "test");
  c.set("x.kernel.wp_reuse", "block16", "test");
  Fixture a, b;
  Params r = Params::reading(c);
  a.visit(r);
  Params rp = r.prefixed("x.");
  b.visit(rp);
  CHECK(a.width == 5);
  CHECK(b.width == 3);
  CHECK(a.rob_entries == 512);
  CHECK(b.rob_entries == 256);
  CHECK(a.wp_reuse == WpReuse::Off);
  CHECK(b.wp_reuse == WpReuse::Block16);
}

TEST_CASE("config: schema declarations that are bugs are InternalErrors", "[config]") {
  Schema s;
  int x = 0;
  Params p = Params::declaring(s);
  p.integer("a.x", x, 1, 0, 10, "x");
  CHECK_THROWS_AS(p.integer("a.x", x, 1, 0, 10, "x again"), InternalError);
  CHECK_THROWS_AS(p.integer("nosection", x, 1, 0, 10, "no section"), InternalError);
  // A default outside its own range is a declaration bug, not the user's mistake.
  CHECK_THROWS_AS(p.integer("a.y", x, 50, 0, 10, "bad default"), InternalError);

  Config c(schema());
  CHECK_THROWS_AS(c.setting("core.nope"), InternalError);
  CHECK_THROWS_AS(c.get_int("core.freq_ghz"), InternalError);  // a float read as an int
  CHECK_THROWS_AS(c.get_string("core.width"), InternalError);
  CHECK_THROWS_AS(c.get_bool("no.such_key"), InternalError);
}

// ---------------------------------------------------------------------------------------------
// 1. Override order and origins

TEST_CASE("config: file, later file, then --set override, origins recorded", "[config]") {
  Config c(schema());
  const std::string base = data("base.cfg"), over = data("override.cfg");

  c.load_file(base);
  CHECK(c.get_int("core.rob_entries") == 256);
  CHECK(c.setting("core.rob_entries").origin == base + ":3");
  CHECK(c.setting("core.width").origin == base + ":4");
  CHECK(c.setting("kernel.wp_reuse").origin == base + ":7");
  CHECK(c.get_string("kernel.wp_reuse") == "block16");

  c.load_file(over);
  CHECK(c.get_int("core.rob_entries") == 384);
  CHECK(c.setting("core.rob_entries").origin == over + ":3");
  CHECK(c.get_int("core.width") == 4);  // untouched by the later file
  CHECK(c.setting("core.width").origin == base + ":4");
  CHECK(c.get_size("mem.size") == 256ull << 20);
  CHECK(c.setting("mem.size").origin == over + ":6");
  CHECK(c.setting("mem.size").text == "256M");

  c.set_override("core.rob_entries=500");
  c.set_override(" core.width = 8 ");  // spaces around key and value
  CHECK(c.get_int("core.rob_entries") == 500);
  CHECK(c.setting("core.rob_entries").origin == "--set core.rob_entries");
  CHECK(c.get_int("core.width") == 8);
  CHECK(c.setting("core.width").origin == "--set core.width");

  CHECK(c.setting("core.freq_ghz").origin == "default");
  CHECK(c.is_default("core.freq_ghz"));
  CHECK_FALSE(c.is_default("core.rob_entries"));
  CHECK(c.files() == std::vector<std::string>{base, over});

  // The reverse file order gives the other value: later files win.
  Config r(schema());
  r.load_file(over);
  r.load_file(base);
  CHECK(r.get_int("core.rob_entries") == 256);
  CHECK(r.setting("core.rob_entries").origin == base + ":3");
}

TEST_CASE("config: the last of repeated keys in one file wins, set() records any origin",
          "[config]") {
  TempDir dir;
  std::string p = dir.write("rep.cfg", "[core]\nwidth = 2\nwidth = 3\n[core]\nwidth = 5\n");
  Config c(schema());
  c.load_file(p);
  CHECK(c.get_int("core.width") == 5);
  CHECK(c.setting("core.width").origin == p + ":5");

  c.set("core.width", "7", "sweep.py");
  CHECK(c.get_int("core.width") == 7);
  CHECK(c.setting("core.width").origin == "sweep.py");
}

TEST_CASE("config: top-level dotted keys, comments, blank lines, tabs and CRLF", "[config]") {
  TempDir dir;
  std::string p = dir.write("style.cfg",
                            "# comment\r\n"
                            "core.width = 3   # trailing comment\r\n"
                            "\r\n"
                            "\t[tlb.stlb]\t\r\n"
                            "\tentries\t=\t1024\r\n"
                            "[core]\r\n"
                            "name = my core\r\n");
  Config c(schema());
  c.load_file(p);
  CHECK(c.get_int("core.width") == 3);
  CHECK(c.setting("core.width").origin == p + ":2");
  CHECK(c.get_int("tlb.stlb.entries") == 1024);
  CHECK(c.setting("tlb.stlb.entries").origin == p + ":5");
  CHECK(c.get_string("core.name") == "my core");
}

TEST_CASE("config: the INI reader: '=' inside a value, an empty value, every key with its line",
          "[config]") {
  TempDir dir;
  std::string p = dir.write("reader.cfg",
                            "[core]\n"
                            "name = a=b = c   # the first '=' ends the key\n"
                            "\n"
                            "width=4\n"
                            "[tlb.stlb]\n"
                            "  # only a comment\n"
                            "entries = 512\n");
  Config c(schema());
  c.load_file(p);
  CHECK(c.get_string("core.name") == "a=b = c");
  CHECK(c.setting("core.name").origin == p + ":2");
  CHECK(c.get_int("core.width") == 4);
  CHECK(c.setting("core.width").origin == p + ":4");
  CHECK(c.setting("tlb.stlb.entries").origin == p + ":7");
  // An empty value reaches the type check with its line (an int cannot be empty).
  std::string path;
  std::string m = load_error("[core]\n\nwidth =\n", &path);
  CHECK_THAT(m, Contains(path + ":3"));
  CHECK_THAT(m, Contains("core.width"));
}

// ---------------------------------------------------------------------------------------------
// 2. Includes

TEST_CASE("config: includes resolve relative to the including file, nested and through '..'",
          "[config]") {
  const std::string top = data("inc/top.cfg");
  Config c(schema());
  c.load_file(top);
  // top.cfg includes common/defaults.cfg, which includes ../shared.cfg; each including file
  // overrides what it included.
  CHECK(c.get_int("core.rob_entries") == 300);
  CHECK(c.setting("core.rob_entries").origin == top + ":5");
  CHECK(c.get_int("core.width") == 8);
  CHECK_THAT(c.setting("core.width").origin, Contains("defaults.cfg:6"));
  CHECK(c.get_bool("core.smt"));
  CHECK_THAT(c.setting("core.smt").origin, Contains("shared.cfg:4"));
  CHECK(c.get_int("tlb.stlb.entries") == 1536);
  CHECK_THAT(c.setting("tlb.stlb.entries").origin, Contains("shared.cfg:7"));
  REQUIRE(c.files().size() == 3);
  CHECK(c.files()[0] == top);
  CHECK(fs::equivalent(c.files()[1], data("inc/common/defaults.cfg")));
  CHECK(fs::equivalent(c.files()[2], data("inc/shared.cfg")));
}

TEST_CASE("config: an include from a subdirectory reaches a sibling through '..'", "[config]") {
  Config c(schema());
  c.load_file(data("inc/sub/from_sub.cfg"));
  CHECK(c.get_string("core.name") == "from-sub");
  CHECK(c.get_int("core.rob_entries") == 200);  // from ../common/defaults.cfg
  CHECK(c.get_int("core.width") == 8);
  CHECK(c.get_bool("core.smt"));  // from ../shared.cfg, included by defaults.cfg
}

TEST_CASE("config: includes do not depend on the working directory", "[config]") {
  const fs::path old = fs::current_path();
  fs::current_path(data(""));
  Config c(schema());
  try {
    c.load_file("inc/top.cfg");  // a relative path: includes are relative to it, not to the cwd
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
  CHECK(c.get_int("core.rob_entries") == 300);
  CHECK(c.get_int("tlb.stlb.entries") == 1536);
  CHECK(c.setting("core.rob_entries").origin == "inc/top.cfg:5");
}

TEST_CASE("config: a file included twice (diamond) is not a cycle, absolute include paths",
          "[config]") {
  Config c(schema());
  c.load_file(data("inc/diamond.cfg"));
  CHECK(c.get_string("core.name") == "from-sub");
  CHECK(c.get_size("mem.size") == 2ull << 30);

  TempDir dir;
  std::string p =
      dir.write("abs.cfg", "include = " + data("inc/shared.cfg") + "\n[core]\nwidth = 9\n");
  Config a(schema());
  a.load_file(p);
  CHECK(a.get_int("core.width") == 9);
  CHECK(a.get_int("tlb.stlb.entries") == 1536);
}

TEST_CASE("config: include cycles are UserErrors naming the chain", "[config]") {
  SECTION("a includes b includes a") {
    std::string m = user_error([] {
      Config c(schema());
      c.load_file(data("cycle/a.cfg"));
    });
    CHECK_THAT(m, Contains("include cycle"));
    auto a1 = m.find("a.cfg -> ");
    auto b = m.find("b.cfg -> ");
    REQUIRE(a1 != std::string::npos);
    REQUIRE(b != std::string::npos);
    CHECK(a1 < b);
    CHECK(m.size() >= 5);
    CHECK(m.substr(m.size() - 5) == "a.cfg");  // ... -> a.cfg -> b.cfg -> a.cfg
  }
  SECTION("a file that includes itself") {
    std::string m = user_error([] {
      Config c(schema());
      c.load_file(data("cycle/self.cfg"));
    });
    CHECK_THAT(m, Contains("include cycle"));
    CHECK_THAT(m, Contains("self.cfg -> "));
    CHECK(m.substr(m.size() - 8) == "self.cfg");
  }
}

TEST_CASE("config: a missing include names file:line and the resolved path", "[config]") {
  const std::string f = data("errors/missing_include.cfg");
  std::string m = user_error([&] {
    Config c(schema());
    c.load_file(f);
  });
  CHECK_THAT(m, Contains(f + ":3"));
  CHECK_THAT(m, Contains("'no_such_dir/nothere.cfg'"));
  CHECK_THAT(m, Contains("not found"));
  CHECK_THAT(m, Contains((fs::path(f).parent_path() / "no_such_dir/nothere.cfg").string()));
}

TEST_CASE("config: include after a section or after a setting is an error", "[config]") {
  SECTION("inside a [section]") {
    const std::string f = data("errors/include_after_section.cfg");
    std::string m = user_error([&] {
      Config c(schema());
      c.load_file(f);
    });
    CHECK_THAT(m, Contains(f + ":4"));
    CHECK_THAT(m, Contains("include"));
    CHECK_THAT(m, Contains("before any [section]"));
  }
  SECTION("after a top-level setting") {
    const std::string f = data("errors/include_after_setting.cfg");
    std::string m = user_error([&] {
      Config c(schema());
      c.load_file(f);
    });
    CHECK_THAT(m, Contains(f + ":2"));
    CHECK_THAT(m, Contains("include must come before"));
  }
  SECTION("an empty include") {
    std::string path;
    std::string m = load_error("include =\n[core]\nwidth = 2\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("expected a file"));
  }
}

TEST_CASE("config: an error in an included file names that file and line", "[config]") {
  std::string m = user_error([] {
    Config c(schema());
    c.load_file(data("errors/includes_bad.cfg"));
  });
  CHECK_THAT(m, Contains("bad_value.cfg:3"));
  CHECK_THAT(m, Contains("core.rob_entries"));
  CHECK_THAT(m, Contains("not an integer"));
}

// ---------------------------------------------------------------------------------------------
// 3. Every user error with its message

TEST_CASE("config: unknown key names file:line and suggests the closest key", "[config]") {
  SECTION("a typo in the leaf") {
    std::string path;
    std::string m = load_error("# line 1\n[core]\nwidth = 4\nrob_entires = 128\n", &path);
    CHECK_THAT(m, Contains(path + ":4"));
    CHECK_THAT(m, Contains("unknown key 'core.rob_entires'"));
    CHECK_THAT(m, Contains("did you mean 'core.rob_entries'?"));
  }
  SECTION("the right leaf in the wrong section") {
    std::string path;
    std::string m = load_error("[tlb]\nrob_entries = 128\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("unknown key 'tlb.rob_entries'"));
    CHECK_THAT(m, Contains("did you mean 'core.rob_entries'?"));
  }
  SECTION("nothing close: no suggestion") {
    std::string m = load_error("[core]\nfrobnicator_depth = 1\n");
    CHECK_THAT(m, Contains("unknown key 'core.frobnicator_depth'"));
    CHECK_FALSE(Contains("did you mean").match(m));
  }
  SECTION("a key with no section") {
    std::string path;
    std::string m = load_error("width = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("'width' is not a key"));
  }
  SECTION("--set of an unknown key") {
    std::string m = set_error("core.rob_entires=5");
    CHECK_THAT(m, Contains("--set core.rob_entires"));
    CHECK_THAT(m, Contains("did you mean 'core.rob_entries'?"));
  }
}

TEST_CASE("config: unknown section names the section's line and suggests", "[config]") {
  SECTION("close to a known section") {
    std::string path;
    std::string m = load_error("# comment\n\n[kernal]\nwp_reuse = off\n", &path);
    CHECK_THAT(m, Contains(path + ":3"));  // the header, not the key's line
    CHECK_THAT(m, Contains("unknown section [kernal]"));
    CHECK_THAT(m, Contains("did you mean [kernel]?"));
  }
  SECTION("a subsection") {
    std::string path;
    std::string m = load_error("[tlb.stlbb]\nentries = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("did you mean [tlb.stlb]?"));
  }
  SECTION("--set with an unknown section") {
    std::string m = set_error("kernal.wp_reuse=off");
    CHECK_THAT(m, Contains("--set kernal.wp_reuse"));
    CHECK_THAT(m, Contains("unknown section [kernal]"));
    CHECK_THAT(m, Contains("did you mean [kernel]?"));
  }
}

TEST_CASE("config: bad types name file:line, key, value and what is allowed", "[config]") {
  std::string path;
  SECTION("not an integer") {
    std::string m = load_error("[core]\n\nrob_entries = lots\n", &path);
    CHECK_THAT(m, Contains(path + ":3"));
    CHECK_THAT(m, Contains("core.rob_entries = 'lots'"));
    CHECK_THAT(m, Contains("not an integer"));
    CHECK_THAT(m, Contains("allowed: an integer in [1, 4096]"));
  }
  SECTION("a fraction is not an integer") {
    std::string m = load_error("[core]\nwidth = 2.5\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("not an integer"));
  }
  SECTION("not a number") {
    std::string m = load_error("[core]\nfreq_ghz = fast\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("core.freq_ghz = 'fast'"));
    CHECK_THAT(m, Contains("not a number"));
    CHECK_THAT(m, Contains("allowed: a number in [0.5, 10]"));
  }
  SECTION("nan and inf are not numbers") {
    CHECK_THAT(set_error("core.freq_ghz=nan"), Contains("not a number"));
    CHECK_THAT(set_error("core.freq_ghz=inf"), Contains("not a number"));
  }
  SECTION("not a boolean") {
    std::string m = load_error("[core]\nsmt = maybe\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("core.smt = 'maybe'"));
    CHECK_THAT(m, Contains("not a boolean"));
    CHECK_THAT(m, Contains("allowed: true or false"));
  }
  SECTION("an empty value") {
    std::string m = load_error("[core]\nwidth =\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("not an integer"));
  }
}

TEST_CASE("config: out of range names the range", "[config]") {
  std::string path;
  SECTION("integer above") {
    std::string m = load_error("[core]\nrob_entries = 5000\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("core.rob_entries"));
    CHECK_THAT(m, Contains("5000 is out of range"));
    CHECK_THAT(m, Contains("[1, 4096]"));
  }
  SECTION("integer below, through --set") {
    std::string m = set_error("core.rob_entries=0");
    CHECK_THAT(m, Contains("--set core.rob_entries"));
    CHECK_THAT(m, Contains("0 is out of range"));
    CHECK_THAT(m, Contains("[1, 4096]"));
  }
  SECTION("integer overflowing int64") {
    CHECK_THAT(set_error("core.offset=99999999999999999999"), Contains("not an integer"));
  }
  SECTION("float") {
    std::string m = load_error("[core]\nfreq_ghz = 10.5\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("out of range"));
    CHECK_THAT(m, Contains("a number in [0.5, 10]"));
  }
  SECTION("size") {
    std::string m = load_error("[mem]\nsize = 2T\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("mem.size = '2T'"));
    CHECK_THAT(m, Contains("out of range"));
    CHECK_THAT(m, Contains("a size in [4K, 1T]"));
  }
}

TEST_CASE("config: a bad enum value lists the allowed values and suggests the closest",
          "[config]") {
  std::string path;
  std::string m = load_error("[kernel]\nwp_reuse = pagetabel\n", &path);
  CHECK_THAT(m, Contains(path + ":2"));
  CHECK_THAT(m, Contains("kernel.wp_reuse = 'pagetabel'"));
  CHECK_THAT(m, Contains("did you mean 'pagetable'?"));
  CHECK_THAT(m, Contains("one of: off, block16, pagetable, pagetable+flush"));

  std::string far = set_error("kernel.wp_reuse=sometimes");
  CHECK_THAT(far, Contains("not a known value"));
  CHECK_FALSE(Contains("did you mean").match(far));
  CHECK_THAT(far, Contains("one of: off, block16, pagetable, pagetable+flush"));
}

TEST_CASE("config: size errors: negative, misaligned, bad suffix, fractional bytes", "[config]") {
  std::string path;
  SECTION("negative") {
    std::string m = load_error("[mem]\nsize = -4K\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("mem.size = '-4K'"));
    CHECK_THAT(m, Contains("negative"));
  }
  SECTION("misaligned") {
    std::string m = load_error("[mem]\nsize = 6000\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("not a multiple of 4K"));
    CHECK_THAT(m, Contains("a multiple of 4K"));
  }
  SECTION("bad suffix") {
    std::string m = load_error("[mem]\nsize = 4Q\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("unknown suffix 'q'"));
    CHECK_THAT(m, Contains("K, M, G or T"));
    CHECK_THAT(set_error("mem.size=4Kx"), Contains("unknown suffix"));
    CHECK_THAT(set_error("mem.size=4 bytes"), Contains("unknown suffix"));
  }
  SECTION("not a number") {
    CHECK_THAT(set_error("mem.size=K"), Contains("not a number"));
    CHECK_THAT(set_error("mem.size="), Contains("empty"));
  }
  SECTION("fractional bytes") {
    CHECK_THAT(set_error("mem.stride=1.5"), Contains("not a whole number of bytes"));
  }
}

TEST_CASE("config: duration errors: bad unit, negative, no number", "[config]") {
  std::string path;
  std::string m = load_error("[kernel]\nfault_latency = 100 fortnights\n", &path);
  CHECK_THAT(m, Contains(path + ":2"));
  CHECK_THAT(m, Contains("kernel.fault_latency"));
  CHECK_THAT(m, Contains("unknown unit 'fortnights'"));
  CHECK_THAT(m, Contains("cycles, ps, ns, us, ms or s"));
  CHECK_THAT(set_error("kernel.fault_latency=5e"), Contains("unknown unit"));
  CHECK_THAT(set_error("kernel.fault_latency=-5ns"), Contains("negative"));
  CHECK_THAT(set_error("kernel.fault_latency=ns"), Contains("not a number"));
  CHECK_THAT(set_error("kernel.fault_latency=1-2ns"), Contains("not a number"));
}

TEST_CASE("config: malformed lines name file:line", "[config]") {
  std::string path;
  SECTION("no '='") {
    std::string m = load_error("[core]\nwidth 4\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("'width 4' is not a setting; expected key = value"));
  }
  SECTION("no key before '='") {
    std::string m = load_error("[core]\n = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("no key before '='"));
  }
  SECTION("a key with a space") {
    std::string m = load_error("[core]\nrob entries = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("malformed key 'rob entries'"));
  }
  SECTION("unterminated section header") {
    std::string m = load_error("# x\n[core\nwidth = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("malformed section header '[core'"));
  }
  SECTION("empty section header") {
    std::string m = load_error("[]\nwidth = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("malformed section header"));
  }
  SECTION("bad characters in a section name") {
    std::string m = load_error("[co=re]\nwidth = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("malformed section name"));
  }
  SECTION("spaces inside the brackets") {
    // Rejected (Boost.Program_options would keep the spaces in the key): a UserError, not a
    // broken internal invariant.
    std::string m = load_error("[ core ]\nwidth = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("malformed section name"));
  }
  SECTION("a section name ending in '.'") {
    std::string m = load_error("[core.]\nwidth = 4\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("malformed section name"));
  }
}

TEST_CASE("config: binary garbage and NUL bytes are rejected with the line", "[config]") {
  std::string path;
  SECTION("NUL byte") {
    std::string m = load_error("[core]\nwidth = 4\nrob_entries = 1\0\0\n"s, &path);
    CHECK_THAT(m, Contains(path + ":3"));
    CHECK_THAT(m, Contains("not a text config file (byte 0x00)"));
  }
  SECTION("an image header") {
    std::string m = load_error("\x89PNG\r\n\x1a\n\0\0\0\rIHDR"s, &path);
    CHECK_THAT(m, Contains(path + ":2"));
    CHECK_THAT(m, Contains("not a text config file (byte 0x1a)"));
  }
  SECTION("high bytes with no control characters") {
    std::string m = load_error("\xff\xfe\xc3\xa9=\x80\n", &path);
    CHECK_THAT(m, Contains(path + ":1"));
    CHECK_THAT(m, Contains("malformed key"));
  }
}

TEST_CASE("config: empty and missing files, a directory, --set without '='", "[config]") {
  std::string path;
  SECTION("empty") {
    std::string m = load_error("", &path);
    CHECK_THAT(m, Contains(path));
    CHECK_THAT(m, Contains("empty"));
  }
  SECTION("only comments and blank lines") {
    std::string m = load_error("# nothing\n\n   # here\n", &path);
    CHECK_THAT(m, Contains(path));
    CHECK_THAT(m, Contains("empty"));
  }
  SECTION("missing") {
    std::string m = user_error([] {
      Config c(schema());
      c.load_file(data("no_such_file.cfg"));
    });
    CHECK_THAT(m, Contains("cannot open config file"));
    CHECK_THAT(m, Contains(data("no_such_file.cfg")));
  }
  SECTION("a directory") {
    std::string m = user_error([] {
      Config c(schema());
      c.load_file(data("inc"));
    });
    CHECK_THAT(m, Contains("cannot open config file"));
  }
  SECTION("--set without '='") {
    std::string m = set_error("core.rob_entries");
    CHECK_THAT(m, Contains("--set 'core.rob_entries'"));
    CHECK_THAT(m, Contains("expected SECTION.KEY=VALUE"));
  }
  SECTION("--set with an empty key") {
    std::string m = set_error("=5");
    CHECK_THAT(m, Contains("is not a key"));
  }
}

TEST_CASE("config: a failed load leaves earlier values", "[config]") {
  Config c(schema());
  c.load_file(data("base.cfg"));
  TempDir dir;
  std::string p = dir.write("bad.cfg", "[core]\nrob_entries = 99999\n");
  CHECK_THROWS_AS(c.load_file(p), UserError);
  CHECK(c.get_int("core.rob_entries") == 256);
  CHECK_THROWS_AS(c.set_override("core.rob_entries=abc"), UserError);
  CHECK(c.get_int("core.rob_entries") == 256);
}

// ---------------------------------------------------------------------------------------------
// Values parse right

TEST_CASE("config: sizes with suffixes", "[config]") {
  CHECK(parse_size("4K") == 4096u);
  CHECK(parse_size("4k") == 4096u);
  CHECK(parse_size("4KB") == 4096u);
  CHECK(parse_size("4KiB") == 4096u);
  CHECK(parse_size("1.5M") == 1572864u);
  CHECK(parse_size("2MiB") == 2097152u);
  CHECK(parse_size("1G") == (uint64_t(1) << 30));
  CHECK(parse_size("3T") == (uint64_t(3) << 40));
  CHECK(parse_size("512") == 512u);
  CHECK(parse_size("512B") == 512u);
  CHECK(parse_size(" 64 K ") == 65536u);
  CHECK(parse_size("0") == 0u);
  std::string why;
  CHECK_FALSE(parse_size("-1", &why));
  CHECK(why == "negative");
  CHECK_FALSE(parse_size("0.3", &why));
  CHECK(why == "not a whole number of bytes");
  CHECK_FALSE(parse_size("99999999T", &why));
  CHECK(why == "too large");
  CHECK_FALSE(parse_size("4Ki", &why));
  CHECK_THAT(why, Contains("unknown suffix"));

  CHECK(format_size(4096) == "4K");
  CHECK(format_size(65536) == "64K");
  CHECK(format_size(1572864) == "1536K");
  CHECK(format_size(uint64_t(2) << 30) == "2G");
  CHECK(format_size(4097) == "4097");
  CHECK(format_size(0) == "0");

  Value v = parse("mem.size", "1.5M");
  CHECK(v.u == 1572864u);
  CHECK(canonical_text(*schema().find("mem.size"), v) == "1536K");
}

TEST_CASE("config: integers: decimal, hex, leading zeros are decimal, signs", "[config]") {
  CHECK(parse("core.rob_entries", "128").i == 128);
  CHECK(parse("core.rob_entries", "0x100").i == 256);
  CHECK(parse("core.rob_entries", "0X1f").i == 31);
  CHECK(parse("core.rob_entries", "010").i == 10);  // not octal
  CHECK(parse("core.offset", "-7").i == -7);
  CHECK(parse("core.offset", "-0x10").i == -16);
  CHECK(parse("core.offset", "-010").i == -10);  // not octal either with a sign
  CHECK(parse("core.offset", "+010").i == 10);
  CHECK(parse("core.offset", " 42 ").i == 42);
  CHECK_THROWS_AS(parse("core.offset", "0x"), UserError);
  CHECK_THROWS_AS(parse("core.offset", "1_000"), UserError);
  CHECK_THROWS_AS(parse("core.offset", "08x"), UserError);
}

TEST_CASE("config: floats, strings", "[config]") {
  CHECK(parse("core.freq_ghz", "2.5").f == Approx(2.5));
  CHECK(parse("core.freq_ghz", "3").f == Approx(3.0));
  CHECK(parse("core.freq_ghz", "5e0").f == Approx(5.0));
  CHECK(parse("core.name", "  a b  ").s == "a b");
  Config c(schema());
  c.set_override("core.name=x=y");  // the first '=' separates key and value
  CHECK(c.get_string("core.name") == "x=y");
}

TEST_CASE("config: durations in cycles and in time", "[config]") {
  auto d = [](const std::string& t) { return parse("kernel.fault_latency", t).d; };
  CHECK(d("715") == Duration{715, false});
  CHECK(d("715cyc") == Duration{715, false});
  CHECK(d("715 cycles") == Duration{715, false});
  CHECK(d("715c") == Duration{715, false});
  CHECK(d("100ns") == Duration{100, true});
  CHECK(d("1.5us").is_time);
  CHECK(d("1.5us").value == Approx(1500));
  CHECK(d("2ms").value == Approx(2e6));
  CHECK(d("1s").value == Approx(1e9));
  CHECK(d("500ps").value == Approx(0.5));
  CHECK(d("1e3ns") == Duration{1000, true});
  CHECK(d("100 NS") == Duration{100, true});

  Duration c{715, false}, t{100, true};
  CHECK(c.cycles(3.0) == Approx(715));
  CHECK(c.ns(2.5) == Approx(286));
  CHECK(t.cycles(3.0) == Approx(300));
  CHECK(t.ns(3.0) == Approx(100));

  const ParamSpec& spec = *schema().find("kernel.fault_latency");
  CHECK(canonical_text(spec, parse("kernel.fault_latency", "1.5us")) == "1500ns");
  CHECK(canonical_text(spec, parse("kernel.fault_latency", "715")) == "715cyc");
}

TEST_CASE("config: booleans yes/no/on/off/1/0/true/false, any case", "[config]") {
  for (const char* t : {"yes", "on", "1", "true", "TRUE", "Yes", "ON"}) {
    INFO(t);
    CHECK(parse("core.smt", t).i == 1);
  }
  for (const char* t : {"no", "off", "0", "false", "False", "NO", "Off"}) {
    INFO(t);
    CHECK(parse("core.smt", t).i == 0);
  }
  CHECK_THROWS_AS(parse("core.smt", "2"), UserError);
  CHECK_THROWS_AS(parse("core.smt", "y"), UserError);
  Config c(schema());
  c.set_override("core.smt=yes");
  CHECK(c.get_bool("core.smt"));
  CHECK(c.setting("core.smt").text == "true");  // normalised
}

TEST_CASE("config: enums match exactly or ignoring case, normalised to the declared choice",
          "[config]") {
  CHECK(parse("kernel.wp_reuse", "block16").s == "block16");
  CHECK(parse("kernel.wp_reuse", "BLOCK16").s == "block16");
  CHECK(parse("kernel.wp_reuse", "PageTable+Flush").s == "pagetable+flush");
}

TEST_CASE("config: allowed() describes each type", "[config]") {
  auto allowed = [](const char* k) { return schema().find(k)->allowed(); };
  CHECK(allowed("core.rob_entries") == "an integer in [1, 4096]");
  CHECK(allowed("core.freq_ghz") == "a number in [0.5, 10]");
  CHECK(allowed("core.smt") == "true or false");
  CHECK(allowed("kernel.wp_reuse") == "one of: off, block16, pagetable, pagetable+flush");
  CHECK_THAT(allowed("mem.size"), Contains("a size in [4K, 1T]"));
  CHECK_THAT(allowed("mem.size"), Contains("a multiple of 4K"));
  CHECK_THAT(allowed("kernel.fault_latency"), Contains("715cyc"));
  CHECK(allowed("core.name") == "a string");
}

TEST_CASE("config: closest key and section, edit distance", "[config]") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("same", "same") == 0);
  CHECK(schema().closest_key("core.rob_entires") == "core.rob_entries");
  CHECK(schema().closest_key("mem.rob_entries") == "core.rob_entries");
  CHECK(schema().closest_key("zzz.qqqqqqqq") == "");
  CHECK(schema().closest_section("kernal") == "kernel");
  CHECK(schema().closest_section("xyzzy") == "");
  CHECK(schema().has_section("tlb"));
  CHECK(schema().has_section("tlb.stlb"));
  CHECK_FALSE(schema().has_section("tl"));
  CHECK(schema().sections() == std::vector<std::string>{"core", "mem", "kernel", "tlb.stlb"});
}
