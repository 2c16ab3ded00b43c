// SPDX-License-Identifier: GPL-2.0-only
// `mmusim record [--out DIR] [--force] [--valgrind PATH] -- PROGRAM [ARGS...]`: runs a real program
// under the project's Valgrind tool (recorder/mmusim_rec.c), which writes the recording that
// `workload.name = trace` replays (docs/trace-format.md), then checks what it wrote.
#include "platforms/record.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "workloads/trace_reader.hpp"
#include "workloads/trace_zstd.hpp"

namespace mmusim {

namespace {

const char* kRecordUsage =
    "usage: mmusim record [--out DIR] [--force] [--detail all|region] [--region-control FILE]\n"
    "                     [--compress zstd|none] [--zstd-level N] [--valgrind PATH] [--] PROGRAM [ARGS...]\n"
    "  --out DIR        where the recording goes (default: mmusim-recording); created if absent\n"
    "  --detail region  outside the measured region record only what the kernel must see (each\n"
    "                   page's first read, write and fetch, every system call): far smaller\n"
    "  --region-control FILE\n"
    "                   the measured region of a program that cannot be changed: it begins in the\n"
    "                   first process when FILE appears and ends when FILE is removed\n"
    "  --compress zstd  compress each process's file as it is written (the default:\n"
    "                   proc-<pid>.mtr.zst, about a tenth of the size); none: keep proc-<pid>.mtr\n"
    "  --zstd-level N   zstd's compression level, 1 (fastest) to 19 (smallest); default 3\n"
    "  --force          replace a recording already in DIR\n"
    "  --valgrind PATH  the valgrind to run (default: valgrind on PATH)\n"
    "The program runs under Valgrind with mmusim's recorder; replay it with\n"
    "  mmusim run CONFIG --set workload.name=trace --set workload.trace=DIR\n";

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool ends_with(const std::string& n, const char* s) {
  const size_t k = std::strlen(s);
  return n.size() > k && n.compare(n.size() - k, k, s) == 0;
}
// A process's file of a recording, as the tool writes it (proc-<pid>.mtr).
bool is_trace_file(const std::string& n) { return n.rfind("proc-", 0) == 0 && ends_with(n, ".mtr"); }
bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Where the tool was built (or installed beside mmusim): MMUSIM_RECORDER_LIB, the build tree's
// recorder/lib, or recorder/lib next to the executable.
std::string find_tool_dir() {
  std::vector<std::string> tried;
  auto ok = [](const std::string& d) { return is_file(d + "/mmusimrec-amd64-linux"); };
  if (const char* env = std::getenv("MMUSIM_RECORDER_LIB")) {
    if (ok(env)) return env;
    throw UserError(fmt::format("MMUSIM_RECORDER_LIB = {}: no mmusimrec-amd64-linux there", env));
  }
#ifdef MMUSIM_RECORDER_LIB_DIR
  if (ok(MMUSIM_RECORDER_LIB_DIR)) return MMUSIM_RECORDER_LIB_DIR;
  tried.push_back(MMUSIM_RECORDER_LIB_DIR);
#endif
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    std::string d(exe);
    d = d.substr(0, d.rfind('/')) + "/recorder/lib";
    if (ok(d)) return d;
    tried.push_back(d);
  }
  std::string where;
  for (const std::string& t : tried) where += (where.empty() ? "" : ", ") + t;
  throw UserError(fmt::format(
      "mmusim record: the recorder is not built (looked in {}): it needs Valgrind's tool headers "
      "and libraries (apt-get install valgrind), then a rebuild (bash scripts/build)",
      where.empty() ? "nowhere" : where));
}

}  // namespace

int cmd_record(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string dir = "mmusim-recording", valgrind = "valgrind", detail = "all", control, compress = "zstd",
              level_arg = "3";
  bool force = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= args.size()) throw UserError(fmt::format("mmusim record: {} needs a value", opt));
      return args[++i];
    };
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      out << kRecordUsage;
      return 0;
    }
    if (a == "--out") dir = value("--out");
    else if (a.rfind("--out=", 0) == 0) dir = a.substr(6);
    else if (a == "--valgrind") valgrind = value("--valgrind");
    else if (a.rfind("--valgrind=", 0) == 0) valgrind = a.substr(11);
    else if (a == "--force") force = true;
    else if (a == "--region-control") control = value("--region-control");
    else if (a.rfind("--region-control=", 0) == 0) control = a.substr(17);
    else if (a == "--compress") compress = value("--compress");
    else if (a.rfind("--compress=", 0) == 0) compress = a.substr(11);
    else if (a == "--zstd-level") level_arg = value("--zstd-level");
    else if (a.rfind("--zstd-level=", 0) == 0) level_arg = a.substr(13);
    else if (a == "--detail") detail = value("--detail");
    else if (a.rfind("--detail=", 0) == 0) detail = a.substr(9);
    else if (a.rfind("--", 0) == 0)
      throw UserError(fmt::format("mmusim record: unknown option '{}' (allowed: --out, --force, "
                                  "--detail, --region-control, --compress, --zstd-level, --valgrind; the program's own options "
                                  "go after --)",
                                  a));
    else break;
  }
  if (i >= args.size()) throw UserError(fmt::format("mmusim record: no program to record\n{}", kRecordUsage));
  std::vector<std::string> prog(args.begin() + long(i), args.end());
  if (dir.empty()) throw UserError("mmusim record: --out needs a directory");
  if (detail != "all" && detail != "region")
    throw UserError(fmt::format("mmusim record: --detail '{}': allowed: all, region", detail));
  if (compress != "zstd" && compress != "none")
    throw UserError(fmt::format("mmusim record: --compress '{}': allowed: zstd, none", compress));
  int level = 0;
  {
    size_t used = 0;
    try {
      level = std::stoi(level_arg, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != level_arg.size() || level < 1 || level > 19)
      throw UserError(fmt::format("mmusim record: --zstd-level '{}': allowed: an integer in [1, 19]", level_arg));
  }

  const std::string tool = find_tool_dir();
  // The output directory: new, empty, or (with --force) an old recording replaced.
  if (!is_dir(dir)) {
    if (mkdir(dir.c_str(), 0777) != 0)
      throw UserError(fmt::format("mmusim record: cannot create --out {}: {}", dir, std::strerror(errno)));
  } else {
    DIR* d = opendir(dir.c_str());
    if (!d) throw UserError(fmt::format("mmusim record: cannot read --out {}: {}", dir, std::strerror(errno)));
    std::vector<std::string> old, other;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      const bool ours = n == "manifest.txt" || is_trace_file(n) ||
                        (ends_with(n, ".mtr.zst") && is_trace_file(n.substr(0, n.size() - 4)));
      (ours ? old : other).push_back(n);
    }
    closedir(d);
    if (!other.empty())
      throw UserError(fmt::format("mmusim record: --out {} holds other files ({}...): choose a new "
                                  "or empty directory",
                                  dir, other.front()));
    if (!old.empty() && !force)
      throw UserError(fmt::format("mmusim record: --out {} holds a recording already: add --force "
                                  "to replace it",
                                  dir));
    for (const std::string& n : old) unlink((dir + "/" + n).c_str());
  }

  std::vector<std::string> argv = {valgrind, "--tool=mmusimrec", "--quiet", "--mmusim-out=" + dir};
  if (detail != "all") argv.push_back("--mmusim-detail=" + detail);
  if (!control.empty()) {
    // (absolute: the program may change its directory)
    char cwd[PATH_MAX];
    if (control[0] != '/' && getcwd(cwd, sizeof cwd)) control = std::string(cwd) + "/" + control;
    argv.push_back("--mmusim-region-control=" + control);
  }
  argv.insert(argv.end(), prog.begin(), prog.end());
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  out << std::flush;
  err << std::flush;
  const pid_t pid = fork();
  if (pid < 0) throw UserError(fmt::format("mmusim record: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    setenv("VALGRIND_LIB", tool.c_str(), 1);
    execvp(cargv[0], cargv.data());
    fprintf(stderr, "mmusim record: cannot run %s: %s (apt-get install valgrind, or --valgrind PATH)\n",
            cargv[0], std::strerror(errno));
    _exit(127);
  }
  // While the program runs, each process's file is compressed as it grows (--compress zstd): whole
  // frames as soon as the tool has written them, their part of the .mtr freed, so that the disk
  // holds about the compressed recording, not the whole one. The rest when the program has ended.
  std::map<std::string, std::unique_ptr<wl::TraceCompressor>> compressing;
  auto pump = [&]() {
    size_t frames = 0;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (!is_trace_file(n)) continue;
        auto& c = compressing[n];
        if (!c) c = std::make_unique<wl::TraceCompressor>(dir + "/" + n, dir + "/" + n + ".zst", level,
                                                          wl::kTraceFrameBytes, true);
        frames += c->pump();
      }
      closedir(d);
    }
    return frames;
  };
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, compress == "zstd" ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR)
      throw UserError(fmt::format("mmusim record: waiting for {}: {}", valgrind, std::strerror(errno)));
    if (r != 0) continue;
    try {
      if (!pump()) usleep(100000);
    } catch (...) {
      // (a full disk, say: stop the recording, then say why)
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      throw;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !is_file(dir + "/manifest.txt"))
    throw UserError(fmt::format("mmusim record: {} did not start", valgrind));
  if (!is_file(dir + "/manifest.txt"))
    throw UserError(fmt::format("mmusim record: `{}` did not start under the recorder (nothing "
                                "was recorded; Valgrind's message is above)",
                                prog.front()));

  // The rest of each process's file compressed (frames a reader can start at:
  // workloads/trace_zstd.hpp), then the .mtr removed.
  uint64_t stored_bytes = 0;
  if (compress == "zstd") {
    pump();
    for (auto& [n, c] : compressing) {
      c->finish();
      const std::string in = dir + "/" + n;
      if (unlink(in.c_str()) != 0)
        throw UserError(fmt::format("mmusim record: cannot remove {} after compressing it: {}", in,
                                    std::strerror(errno)));
    }
  }

  // What was written: every process's file whole (a truncated one is an error here, not later).
  wl::Recording rec(dir);
  std::vector<uint32_t> todo = {rec.root_pid()};
  uint64_t procs = 0, threads = 0, insns = 0, accesses = 0, syscalls = 0, bytes = 0;
  while (!todo.empty()) {
    const uint32_t p = todo.back();
    todo.pop_back();
    auto f = rec.process(p);
    const auto& s = f->summary();
    ++procs;
    threads += s.threads.size();
    insns += s.instructions;
    accesses += s.accesses;
    syscalls += s.syscalls;
    bytes += f->size();
    stored_bytes += f->stored_size();
    todo.insert(todo.end(), s.forks.begin(), s.forks.end());
  }
  out << fmt::format("mmusim record: {}: {} process(es), {} thread(s), {} instructions, {} memory "
                     "accesses, {} system calls, {:.1f} MiB ({:.2f} bytes per access)",
                     dir, procs, threads, insns, accesses, syscalls, double(bytes) / (1 << 20),
                     accesses ? double(bytes) / double(accesses) : 0.0);
  if (compress == "zstd")
    out << fmt::format(", compressed {:.1f} MiB ({:.3f} bytes per access)", double(stored_bytes) / (1 << 20),
                       accesses ? double(stored_bytes) / double(accesses) : 0.0);
  out << "\n";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    err << fmt::format("mmusim record: note: the program exited with status {} (its own error); the "
                       "recording is complete up to there\n",
                       WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    err << fmt::format("mmusim record: note: the program was killed by signal {}\n", WTERMSIG(status));
  return 0;
}

}  // namespace mmusim
