// SPDX-License-Identifier: GPL-2.0-only
#include "base/trace.hpp"

#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "base/error.hpp"

namespace mmusim {
namespace {

class FtraceFormat : public TraceFormat {
 public:
  void begin(std::string& out) override {
    // The header ftrace prints, so that tools that expect it find it.
    out += "# tracer: nop\n#\n";
    out += "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n";
    out += "#              | |         |   |||||     |         |\n";
  }
  void event(std::string& out, uint64_t time_ps, int cpu, const TraceTask& task,
             std::string_view name, std::initializer_list<TraceField> fields) override {
    uint64_t ns = time_ps / 1000;
    auto it = std::back_inserter(out);
    std::string comm_pid = fmt::format("{}-{}", task.comm, task.pid);
    fmt::format_to(it, "{:>22} [{:03}] ..... {:>5}.{:09}: {}:", comm_pid, cpu, ns / 1000000000,
                   ns % 1000000000, name);
    for (const TraceField& f : fields) {
      switch (f.kind) {
        case TraceField::Hex: fmt::format_to(it, " {}={:#x}", f.name, f.u); break;
        case TraceField::Dec: fmt::format_to(it, " {}={}", f.name, f.u); break;
        case TraceField::Str:
          // Values are single tokens; an empty one or one with blanks would break key=value.
          if (f.s.empty() || f.s.find_first_of(" \t\n\"=") != std::string_view::npos) {
            out += ' ';
            out += f.name;
            out += "=\"";
            for (char c : f.s) out += (c == '"' || c == '\n') ? '_' : c;
            out += '"';
          } else {
            fmt::format_to(it, " {}={}", f.name, f.s);
          }
          break;
      }
    }
    out += '\n';
  }
};

}  // namespace

std::unique_ptr<TraceFormat> make_ftrace_format() { return std::make_unique<FtraceFormat>(); }

Trace::Trace() = default;
Trace::~Trace() {
  try {
    close();
  } catch (...) {
  }
}

void Trace::open(const std::string& path, std::unique_ptr<TraceFormat> format) {
  close();
  if (path == "-") {
    file_ = stdout;
    owns_file_ = false;
  } else {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) fatal("cannot open trace file '{}' for writing: {}", path, std::strerror(errno));
    owns_file_ = true;
  }
  path_ = path;
  format_ = std::move(format);
  on_ = true;
  format_->begin(buf_);
}

void Trace::open_buffer(std::string* sink, std::unique_ptr<TraceFormat> format) {
  close();
  sink_ = sink;
  format_ = std::move(format);
  on_ = true;
  format_->begin(buf_);
}

void Trace::flush() {
  if (sink_) {
    sink_->append(buf_);
  } else if (file_) {
    if (std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size())
      fatal("writing trace file '{}' failed: {}", path_, std::strerror(errno));
  }
  buf_.clear();
}

void Trace::set_events(const std::string& list) {
  wanted_.clear();
  if (list == "all") return;
  std::string allowed;
  for (std::string_view e : kTraceEvents) allowed += (allowed.empty() ? "" : ", ") + std::string(e);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(pos, comma - pos);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    const std::string_view* hit = nullptr;
    for (const std::string_view& e : kTraceEvents)
      if (e == name) hit = &e;
    if (!hit)
      throw UserError(fmt::format("--trace-events: unknown event '{}'; allowed: all, or a comma-separated list of: {}",
                                  name, allowed));
    wanted_.push_back(*hit);
    pos = comma + 1;
  }
}

void Trace::close() {
  if (!on_) return;
  format_->end(buf_);
  flush();
  if (file_) {
    if (owns_file_) {
      if (std::fclose(file_) != 0) fatal("closing trace file '{}' failed: {}", path_, std::strerror(errno));
    } else {
      std::fflush(file_);
    }
  }
  file_ = nullptr;
  sink_ = nullptr;
  on_ = false;
}

}  // namespace mmusim
