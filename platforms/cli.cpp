// SPDX-License-Identifier: GPL-2.0-only
#include "platforms/cli.hpp"

#include <systemc>

#include <boost/program_options.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "base/error.hpp"
#include "git_rev.hpp"  // generated at build time: MMUSIM_GIT_REV
#include "base/log.hpp"
#include "base/schema_json.hpp"
#include "platforms/platform.hpp"
#include "platforms/record.hpp"

namespace mmusim {
namespace po = boost::program_options;

namespace {

const char* kUsage =
    "mmusim: a cycle-approximate MMU/TLB simulator running a port of the Linux MM\n"
    "\n"
    "usage:\n"
    "  mmusim run CONFIG [CONFIG...] [--set SECTION.KEY=VALUE]... [--stats FILE.json]\n"
    "             [--trace FILE] [--trace-format ftrace|perfetto] [--trace-events E1,E2,...]\n"
    "             [--seed N] [--progress] [--quiet | --verbose]\n"
    "  mmusim list [--format text|ini|json]\n"
    "                                    platforms, workloads, kernel variants, every parameter\n"
    "                                    (ini: a commented config file; json: every key with its\n"
    "                                    type, default per platform, range or values, unit)\n"
    "  mmusim describe CONFIG... [--set SECTION.KEY=VALUE]...\n"
    "                                    the effective configuration after includes and --set\n"
    "  mmusim record [--out DIR] [--force] [--detail all|region] [--region-control FILE]\n"
    "                [--valgrind PATH] -- PROGRAM [ARGS...]\n"
    "                                    run a real program under the recorder (Valgrind); replay\n"
    "                                    it with --set workload.name=trace --set workload.trace=DIR\n"
    "  mmusim --help | --version\n"
    "\n"
    "--stats - and --trace - write to stdout (the JSON replaces the table).\n"
    "Later CONFIG files and then --set override earlier values. Exit status: 0 success,\n"
    "2 a user error (the message names file:line, key and what is allowed), 1 an internal error,\n"
    "3 the simulated kernel killed the workload (OOM kill, SIGSEGV, SIGBUS; statistics written).\n";

// The usage, with the trace events of kTraceEvents (the one list).
void print_usage(std::ostream& os) {
  std::string text, line = "--trace-events keeps only the named events:";
  for (const std::string_view& e : kTraceEvents) {
    const bool first = &e == &kTraceEvents[0];
    if (line.size() + e.size() + 2 > 96) {
      text += line + (first ? "\n" : ",\n");
      line = std::string(e);
    } else {
      line += (first ? " " : ", ") + std::string(e);
    }
  }
  os << kUsage << text << line << ".\n";
}

std::string version_string() {
  return fmt::format("mmusim {} ({})", MMUSIM_VERSION, MMUSIM_GIT_REV);
}

struct ConfigArgs {
  std::vector<std::string> configs;
  std::vector<std::string> sets;
};

// Parse the options of a subcommand; unknown options are user errors with the usage.
po::variables_map parse(const std::vector<std::string>& args, const po::options_description& desc,
                        const char* cmd) {
  po::positional_options_description pos;
  pos.add("config", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(fmt::format("mmusim {}: {} (see mmusim --help)", cmd, e.what()));
  }
  return vm;
}

Config load_config(const Schema& schema, const ConfigArgs& a, const char* cmd) {
  if (a.configs.empty())
    throw UserError(fmt::format("mmusim {}: no CONFIG file given (see mmusim --help)", cmd));
  Config cfg(schema);
  for (auto& f : a.configs) cfg.load_file(f);
  for (auto& s : a.sets) cfg.set_override(s);
  return cfg;
}

void print_list(const Schema& schema, std::ostream& out, bool ini) {
  if (!ini) {
    out << "Platforms (platform.name):\n"
           "  i7-12700kf   x86-64, Intel Golden Cove P-core (Alder Lake): out-of-order core, L1 load/store\n"
           "               DTLBs, STLB, page-miss handler with paging-structure caches, caches\n"
           "  neoverse-n1  arm64, Neoverse N1 (Ampere Altra): contiguous-bit TLB, contpte costs\n"
           "  xeon-e5-2699v3  x86-64, Intel Haswell-EP core (Xeon E5-2699 v3): one L1 DTLB for loads and\n"
           "               stores, an STLB shared by 4K and 2M pages, an inclusive LLC\n"
           "  functional   no hardware timing: micro-ops in program order, no speculation, no TLB\n"
           "\nWorkloads (workload.name): fork-reuse, fork-time, random-ops, trace, anon-cow-seq\n"
           "\nKernel variants:\n"
           "  kernel.wp_reuse            off | block16 | pagetable | pagetable+flush\n"
           "  kernel.fork_copy           per-pte | batched\n"
           "  kernel.huge_copy_order     sequential | target-last\n"
           "  kernel.thp_cow             split | copy\n"
           "  kernel.fault_retry         fallback | retry-once\n"
           "  kernel.arm64_spurious_flush none | local\n"
           "\nParameters (section.key  type  default  allowed):\n";
  }
  std::string section;
  for (const ParamSpec& s : schema.all()) {
    std::string sec = s.section();
    if (sec != section) {
      out << "\n[" << sec << "]\n";
      section = sec;
    }
    std::string leaf = s.key.substr(sec.size() + 1);
    if (ini) {
      out << "# " << s.desc << "\n# " << param_type_name(s.type) << ": " << s.allowed() << "\n";
      for (auto& [v, d] : s.variant_defaults) {
        auto src = s.default_sources.find(v);
        out << "#   default on " << v << ": " << d
            << (src == s.default_sources.end() ? "" : " (" + src->second + ")") << "\n";
      }
      out << leaf << " = " << s.default_text << "\n";
    } else {
      std::string def = s.default_text.empty() ? "\"\"" : s.default_text;
      if (!s.variant_defaults.empty()) {
        // The generic default applies to the platforms without their own (when the key is not
        // platform-only).
        std::string per;
        for (auto& [v, d] : s.variant_defaults) per += (per.empty() ? "" : ", ") + d + " (" + v + ")";
        def = s.variants.empty() ? def + ", " + per : per;
      }
      out << fmt::format("  {:<28} {:<8} {:<12} {}\n", s.key, param_type_name(s.type), def, s.allowed());
      out << fmt::format("      {}{}\n", s.desc, s.unit.empty() ? "" : " [" + s.unit + "]");
      // Where each default is stated when not in the declaration (a platform's config file).
      std::string from;
      for (auto& [v, src] : s.default_sources)
        from += (from.empty() ? "" : "; ") + (v.empty() ? std::string("generic") : v) + ": " + src;
      if (!from.empty()) out << "      default from " << from << "\n";
    }
  }
}

void print_describe(const Config& cfg, std::ostream& out) {
  out << "# effective configuration";
  for (auto& f : cfg.files()) out << "\n#   from " << f;
  out << "\n";
  std::string section;
  for (auto& [spec, st] : cfg.effective()) {
    std::string sec = spec->section();
    if (sec != section) {
      out << "\n[" << sec << "]\n";
      section = sec;
    }
    std::string line = spec->key.substr(sec.size() + 1) + " = " + st->text;
    out << fmt::format("{:<44} # {}\n", line, st->origin);
  }
}

// --progress: run the simulation in slices of simulated time and print, at most every 0.5 s of host
// time, the share of the measured pass done, the simulated time and the host speed. Slicing only
// pauses the scheduler between time steps (SC_EXIT_ON_STARVATION: the clock never runs past the last
// activity), so the run's results are those of one sc_start().
void run_with_progress(Platform& platform, const std::string& what, std::chrono::steady_clock::time_point t0,
                       std::ostream& err) {
  using clock = std::chrono::steady_clock;
  const bool tty = isatty(STDERR_FILENO) && &err == &std::cerr;
  auto line = [&](double host) {
    double sim_us = sc_core::sc_time_stamp().to_seconds() * 1e6;
    uint64_t uops = platform.uops();
    std::string s = fmt::format("mmusim: {}: measured pass {:5.1f}%, simulated {:.1f} us, {:.2f} M uops in "
                                "{:.1f} s host ({:.2f} M uops/s)",
                                what, 100.0 * platform.progress(), sim_us, double(uops) / 1e6, host,
                                host > 0 ? double(uops) / 1e6 / host : 0.0);
    if (tty) err << "\r" << s << "\033[K" << std::flush;
    else err << s << "\n" << std::flush;
  };
  sc_core::sc_time slice(10, sc_core::SC_US);
  auto last = clock::now();
  for (;;) {
    auto s0 = clock::now();
    // At least up to the next activity (a core may wait for longer than a slice).
    sc_core::sc_time step = slice;
    if (sc_core::sc_start_of_simulation_invoked() && !sc_core::sc_pending_activity_at_current_time() &&
        sc_core::sc_pending_activity_at_future_time())
      step = std::max(step, sc_core::sc_time_to_pending_activity());
    run_simulation(step, sc_core::SC_EXIT_ON_STARVATION);
    auto now = clock::now();
    if (sc_core::sc_get_status() == sc_core::SC_STOPPED || !sc_core::sc_pending_activity()) break;
    // Aim at about 0.1 s of host time per slice.
    double took = std::chrono::duration<double>(now - s0).count();
    if (took < 0.05 && slice < sc_core::sc_time(1, sc_core::SC_SEC)) slice = slice * 2;
    else if (took > 0.2 && slice > sc_core::sc_time(10, sc_core::SC_NS)) slice = slice / 2;
    if (now - last >= std::chrono::milliseconds(500)) {
      line(std::chrono::duration<double>(now - t0).count());
      last = now;
    }
  }
  line(std::chrono::duration<double>(clock::now() - t0).count());
  if (tty) err << "\n" << std::flush;
}

int cmd_run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ConfigArgs a;
  std::string stats_path, trace_path, trace_format = "ftrace", trace_events = "all";
  long long seed = -1;
  bool progress = false, quiet = false, verbose = false;
  po::options_description desc("mmusim run options");
  desc.add_options()("config", po::value(&a.configs), "config files")
      ("set", po::value(&a.sets), "SECTION.KEY=VALUE override")
      ("stats", po::value(&stats_path), "write the statistics as JSON to FILE (- for stdout, instead of the table)")
      ("trace", po::value(&trace_path), "write the event trace to FILE (- for stdout)")
      ("trace-format", po::value(&trace_format), "ftrace (default) or perfetto")
      ("trace-events", po::value(&trace_events), "only these events (comma-separated; default all)")
      ("seed", po::value(&seed), "seed for every random choice (sets sim.seed)")
      ("progress", po::bool_switch(&progress), "a progress line on stderr")
      ("quiet", po::bool_switch(&quiet), "no table, errors only")
      ("verbose", po::bool_switch(&verbose), "info-level logs");
  parse(args, desc, "run");
  if (quiet && verbose) throw UserError("mmusim run: --quiet and --verbose exclude each other");
  if (trace_format != "ftrace" && trace_format != "perfetto")
    throw UserError(
        fmt::format("mmusim run: --trace-format '{}': allowed: ftrace, perfetto", trace_format));
  if (seed < -1) throw UserError(fmt::format("mmusim run: --seed {}: must be >= 0", seed));

  Schema schema = build_schema();
  Config cfg = load_config(schema, a, "run");
  if (seed >= 0) cfg.set("sim.seed", std::to_string(seed), "--seed");
  log::set_level(quiet ? "error" : verbose ? "info" : cfg.get_string("log.level"));

  // Open the outputs first: a bad path is an error before any work.
  const bool stats_stdout = stats_path == "-";
  if (stats_stdout && trace_path == "-")
    throw UserError("mmusim run: --stats - and --trace -: only one of them can go to stdout");
  std::ofstream stats_file;
  if (!stats_path.empty() && !stats_stdout) {
    stats_file.open(stats_path);
    if (!stats_file) throw UserError(fmt::format("cannot open --stats file '{}' for writing", stats_path));
  }
  Stats stats;
  Trace trace;
  trace.set_events(trace_events);
  if (trace_events != "all" && trace_path.empty())
    throw UserError("mmusim run: --trace-events without --trace: there is no trace to filter");
  if (!trace_path.empty())
    trace.open(trace_path, trace_format == "perfetto" ? make_perfetto_format() : make_ftrace_format());

  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Platform> platform = build_platform(cfg, stats, trace);
  if (progress) run_with_progress(*platform, a.configs.back(), t0, err);
  else run_simulation();
  double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  platform->finish(host);
  trace.close();

  if (stats_stdout) {
    stats.write_json(out, &cfg, version_string());
    out << std::flush;
  } else if (!quiet) {
    stats.write_table(out);
  }
  if (stats_file.is_open()) {
    stats.write_json(stats_file, &cfg, version_string());
    stats_file.close();
    if (!stats_file) throw UserError(fmt::format("writing --stats file '{}' failed", stats_path));
  }
  // The workload did not end by itself: the kernel killed it (a simulated outcome, its statistics
  // written as usual). Status 3, so that no sweep takes it for a finished run.
  if (const std::string k = platform->killed_report(); !k.empty()) {
    err << "mmusim: the workload was killed:\n" << k << "\n" << std::flush;
    return 3;
  }
  return 0;
}

}  // namespace

int cli_main(int argc, char* argv[], std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(err);
    return 2;
  }
  const std::string cmd = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    print_usage(out);
    return 0;
  }
  if (cmd == "--version") {
    out << version_string() << "\n";
    return 0;
  }
  // (Its arguments after the program's name are the program's.)
  if (cmd == "record") return cmd_record(rest, out, err);
  // `mmusim run --help` and the like: the usage, not an "unrecognised option" error.
  for (const std::string& a : rest)
    if (a == "--help" || a == "-h") {
      print_usage(out);
      return 0;
    }
  if (cmd == "run") return cmd_run(rest, out, err);
  if (cmd == "list") {
    std::string format = "text";
    po::options_description desc("mmusim list options");
    desc.add_options()("format", po::value(&format), "text, ini or json");
    po::variables_map vm;
    try {
      po::store(po::command_line_parser(rest).options(desc).run(), vm);
      po::notify(vm);
    } catch (const po::error& e) {
      throw UserError(fmt::format("mmusim list: {}", e.what()));
    }
    if (format != "text" && format != "ini" && format != "json")
      throw UserError(fmt::format("mmusim list: --format '{}': allowed: text, ini, json", format));
    if (format == "json") write_schema_json(out, build_schema());
    else print_list(build_schema(), out, format == "ini");
    return 0;
  }
  if (cmd == "describe") {
    ConfigArgs a;
    po::options_description desc("mmusim describe options");
    desc.add_options()("config", po::value(&a.configs), "config files")("set", po::value(&a.sets), "override");
    parse(rest, desc, "describe");
    Schema schema = build_schema();
    print_describe(load_config(schema, a, "describe"), out);
    return 0;
  }
  throw UserError(fmt::format("unknown command '{}'; commands: run, record, list, describe (see mmusim --help)", cmd));
}

}  // namespace mmusim
