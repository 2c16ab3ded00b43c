// SPDX-License-Identifier: GPL-2.0-only
// The event trace: one line per event, in the text format of the kernel's ftrace, so that two runs
// can be diffed and the kernel's tooling can read it. Off by default; buffered; deterministic
// (simulated time only, no host state).
//
//   <comm>-<pid> [<cpu>] ..... <seconds>.<ns>: <event>: <field>=<value> ...
//
// e.g.
//   fork-reuse-1     [000] .....     0.004150208: page_fault_user: address=0x7f0000010000 ip=0x401000 error_code=0x7
//
// Event names and their fields are documented in the README ("Event trace") and are a stable
// interface: add fields at the end, never rename.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <initializer_list>
#include <vector>

namespace mmusim {

struct TraceField {
  enum Kind : uint8_t { Hex, Dec, Str } kind;
  const char* name;
  uint64_t u = 0;
  std::string_view s;

  static TraceField hex(const char* n, uint64_t v) { return {Hex, n, v, {}}; }
  static TraceField dec(const char* n, uint64_t v) { return {Dec, n, v, {}}; }
  static TraceField str(const char* n, std::string_view v) { return {Str, n, 0, v}; }
};

struct TraceTask {
  std::string_view comm;
  int pid = 0;
};

// An output format. The ftrace text format is the reference; others (Perfetto JSON) render the
// same events.
class TraceFormat {
 public:
  virtual ~TraceFormat() = default;
  virtual void event(std::string& out, uint64_t time_ps, int cpu, const TraceTask& task,
                     std::string_view name, std::initializer_list<TraceField> fields) = 0;
  virtual void begin(std::string& out) {}
  virtual void end(std::string& out) {}
};

std::unique_ptr<TraceFormat> make_ftrace_format();
// Chrome trace-event JSON for ui.perfetto.dev (base/trace_perfetto.cpp): faults and the measured
// pass as slices, the other events as instants.
std::unique_ptr<TraceFormat> make_perfetto_format();

// Every event the simulator emits (the README's "Event trace" table), for --trace-events.
inline constexpr std::string_view kTraceEvents[] = {
    "page_fault_user", "mm_fault_done", "tlb_fill",     "tlb_invalidate", "page_walk_start",
    "page_walk_done",  "tlb_shootdown", "contpte_convert", "fork",        "clone",
    "exit",            "sched_switch",  "region_begin",    "region_end",  "mmap",
    "cpu_idle",        "block_rq_issue", "mm_vmscan_direct_reclaim_end",
    "mm_vmscan_memcg_reclaim_end", "mm_vmscan_throttled", "folio_wait_io", "memcg_high_throttle", "writeback_wake_background", "writeback_start",
    "writeback_written", "balance_dirty_pages", "bdi_dirty_ratelimit", "signal_generate",
    "mark_victim", "start_task_reaping", "finish_task_reaping", "sched_migrate_task"};

class Trace {
 public:
  Trace();
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // Opens `path` for writing ("-" is stdout). `format` is "ftrace" (or another registered format).
  void open(const std::string& path, std::unique_ptr<TraceFormat> format);
  // Writes into a string instead of a file (tests).
  void open_buffer(std::string* sink, std::unique_ptr<TraceFormat> format);
  void close();

  bool on() const { return on_; }

  // Only these events are written (like ftrace's set_event); "all": every event. A comma-
  // separated list of names of kTraceEvents; anything else is a UserError naming what is allowed.
  void set_events(const std::string& list);

  void event(uint64_t time_ps, int cpu, const TraceTask& task, std::string_view name,
             std::initializer_list<TraceField> fields) {
    if (!on_) return;
    if (!wanted_.empty() && !wanted(name)) return;
    format_->event(buf_, time_ps, cpu, task, name, fields);
    ++events_;
    if (buf_.size() >= kFlushBytes) flush();
  }
  uint64_t events() const { return events_; }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;
  void flush();
  bool wanted(std::string_view name) const {
    for (std::string_view w : wanted_)
      if (w == name) return true;
    return false;
  }

  std::vector<std::string_view> wanted_;  // views of kTraceEvents; empty: every event

  bool on_ = false;
  std::unique_ptr<TraceFormat> format_;
  std::string buf_;
  std::FILE* file_ = nullptr;
  bool owns_file_ = false;
  std::string* sink_ = nullptr;
  std::string path_;
  uint64_t events_ = 0;
};

}  // namespace mmusim
