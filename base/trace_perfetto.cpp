// SPDX-License-Identifier: GPL-2.0-only
// The event trace as Chrome trace-event JSON, the format ui.perfetto.dev (and chrome://tracing)
// loads: `mmusim run ... --trace out.json --trace-format perfetto`.
//
// What becomes what:
//   - page_fault_user ... mm_fault_done of one CPU: a complete slice ("X") named "fault <result>"
//     on that CPU's track (thread "cpuN" of the process "mmusim"), args: the fields of both events;
//   - region_begin ... region_end: a slice "measured pass" on its own track ("measured region");
//   - any other pair <stem>_begin/<stem>_end, <stem>_start/<stem>_end|_done (e.g. page walks, if
//     a model emits them): an async slice named <stem> (async slices may overlap, as walks of
//     several page walkers do);
//   - every other event (tlb_fill, tlb_invalidate, fork, exit, contpte_convert, sched_switch, ...):
//     an instant event ("i", thread scope) on the CPU's track with the fields as args.
// Timestamps are in microseconds with three decimals (ns precision, the precision of the ftrace
// text). The output depends only on the events (no host state), one JSON object per line.
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "base/stats.hpp"
#include "base/trace.hpp"

namespace mmusim {
namespace {

constexpr int kPid = 1;
constexpr int kRegionTid = 0;  // the measured region's track; CPU n is tid n + 1

// A copied field (the TraceField's string_view does not outlive the call).
struct Arg {
  TraceField::Kind kind;
  std::string name;
  uint64_t u = 0;
  std::string s;
};

struct Open {
  uint64_t time_ps = 0;
  std::string comm;
  int pid = 0;
  std::vector<Arg> args;
};

std::vector<Arg> copy_fields(std::initializer_list<TraceField> fields) {
  std::vector<Arg> v;
  v.reserve(fields.size());
  for (const TraceField& f : fields) v.push_back({f.kind, f.name, f.u, std::string(f.s)});
  return v;
}

const Arg* find(const std::vector<Arg>& args, std::string_view name) {
  for (const Arg& a : args)
    if (a.name == name) return &a;
  return nullptr;
}

// Microseconds with ns precision, from picoseconds: "12.345".
void put_us(std::string& out, uint64_t ps) {
  uint64_t ns = ps / 1000;
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void put_args(std::string& out, const std::vector<Arg>& args, std::string_view prefix = {}) {
  auto it = std::back_inserter(out);
  for (const Arg& a : args) {
    out += ",\"";
    out += prefix;
    out += json_escape(a.name);
    out += "\":";
    switch (a.kind) {
      case TraceField::Hex: fmt::format_to(it, "\"{:#x}\"", a.u); break;
      case TraceField::Dec: fmt::format_to(it, "{}", a.u); break;
      case TraceField::Str:
        out += '"';
        out += json_escape(a.s);
        out += '"';
        break;
    }
  }
}

bool ends_with(std::string_view s, std::string_view sfx) {
  return s.size() > sfx.size() && s.compare(s.size() - sfx.size(), sfx.size(), sfx) == 0;
}

class PerfettoFormat : public TraceFormat {
 public:
  void begin(std::string& out) override {
    out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"mmusim\",\"time_unit\":\"us\"},"
           "\"traceEvents\":[\n";
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"process_name\",\"args\":{{\"name\":\"mmusim\"}}}},\n"
                   "{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_name\",\"args\":{{\"name\":\"measured region\"}}}},\n"
                   "{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":-1}}}}",
                   kPid, kRegionTid);
  }

  void event(std::string& out, uint64_t time_ps, int cpu, const TraceTask& task,
             std::string_view name, std::initializer_list<TraceField> fields) override {
    ensure_cpu(out, cpu);
    if (name == "page_fault_user") {
      auto it = faults_.find(cpu);
      if (it != faults_.end())  // the previous fault never ended: keep it as an instant
        instant(out, it->second.time_ps, cpu, it->second.comm, it->second.pid, name, it->second.args);
      faults_[cpu] = Open{time_ps, std::string(task.comm), task.pid, copy_fields(fields)};
      return;
    }
    if (name == "mm_fault_done") {
      auto it = faults_.find(cpu);
      std::vector<Arg> done = copy_fields(fields);
      if (it == faults_.end()) {  // no matching start: an instant
        instant(out, time_ps, cpu, std::string(task.comm), task.pid, name, done);
        return;
      }
      const Arg* res = find(done, "result");
      std::string slice = "fault";
      if (res && res->kind == TraceField::Str) slice += " " + res->s;
      std::vector<Arg> args = it->second.args;
      for (Arg& a : done)
        if (!find(args, a.name)) args.push_back(std::move(a));
      complete(out, it->second.time_ps, time_ps, cpu + 1, slice, "fault", it->second.comm,
               it->second.pid, args);
      faults_.erase(it);
      return;
    }
    if (name == "region_begin") {
      region_ = Open{time_ps, std::string(task.comm), task.pid, copy_fields(fields)};
      region_open_ = true;
      return;
    }
    if (name == "region_end" && region_open_) {
      complete(out, region_.time_ps, time_ps, kRegionTid, "measured pass", "region", region_.comm,
               region_.pid, region_.args);
      region_open_ = false;
      return;
    }
    // Generic begin/end pairs (page walks, if a model traces them): async slices.
    std::vector<Arg> args = copy_fields(fields);
    for (const char* sfx : {"_begin", "_start"}) {
      if (!ends_with(name, sfx)) continue;
      std::string stem(name.substr(0, name.size() - std::string_view(sfx).size()));
      Key k{cpu, stem, address_of(args)};
      uint64_t id = ++async_ids_;
      async_[k].push_back(id);
      async_event(out, 'b', time_ps, cpu, stem, id, task, args);
      return;
    }
    for (const char* sfx : {"_end", "_done"}) {
      if (!ends_with(name, sfx)) continue;
      std::string stem(name.substr(0, name.size() - std::string_view(sfx).size()));
      auto it = async_.find(Key{cpu, stem, address_of(args)});
      if (it == async_.end() || it->second.empty()) break;
      uint64_t id = it->second.front();
      it->second.erase(it->second.begin());
      if (it->second.empty()) async_.erase(it);
      async_event(out, 'e', time_ps, cpu, stem, id, task, args);
      return;
    }
    instant(out, time_ps, cpu, std::string(task.comm), task.pid, name, args);
  }

  void end(std::string& out) override {
    // What never ended: a fault without its mm_fault_done, an unterminated region.
    for (auto& [cpu, o] : faults_) instant(out, o.time_ps, cpu, o.comm, o.pid, "page_fault_user", o.args);
    faults_.clear();
    if (region_open_) {
      instant(out, region_.time_ps, -1, region_.comm, region_.pid, "region_begin", region_.args);
      region_open_ = false;
    }
    out += "\n]}\n";
  }

 private:
  using Key = std::tuple<int, std::string, uint64_t>;

  static uint64_t address_of(const std::vector<Arg>& args) {
    const Arg* a = find(args, "address");
    return a && a->kind != TraceField::Str ? a->u : 0;
  }

  void ensure_cpu(std::string& out, int cpu) {
    if (!cpus_.insert(cpu).second) return;
    fmt::format_to(std::back_inserter(out),
                   ",\n{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_name\",\"args\":{{\"name\":\"cpu{2}\"}}}}"
                   ",\n{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{2}}}}}",
                   kPid, cpu + 1, cpu);
  }

  static void head(std::string& out, char ph, std::string_view name, std::string_view cat,
                   uint64_t time_ps, int tid) {
    out += ",\n{\"ph\":\"";
    out += ph;
    out += "\",\"name\":\"";
    out += json_escape(name);
    out += "\",\"cat\":\"";
    out += cat;
    fmt::format_to(std::back_inserter(out), "\",\"pid\":{},\"tid\":{},\"ts\":", kPid, tid);
    put_us(out, time_ps);
  }

  static void task_args(std::string& out, std::string_view comm, int pid) {
    out += ",\"args\":{\"task\":\"";
    out += json_escape(comm);
    fmt::format_to(std::back_inserter(out), "-{}\"", pid);
  }

  static void complete(std::string& out, uint64_t begin_ps, uint64_t end_ps, int tid,
                       std::string_view name, std::string_view cat, std::string_view comm, int pid,
                       const std::vector<Arg>& args) {
    head(out, 'X', name, cat, begin_ps, tid);
    out += ",\"dur\":";
    put_us(out, end_ps >= begin_ps ? end_ps - begin_ps : 0);
    task_args(out, comm, pid);
    put_args(out, args);
    out += "}}";
  }

  static void instant(std::string& out, uint64_t time_ps, int cpu, std::string_view comm, int pid,
                      std::string_view name, const std::vector<Arg>& args) {
    head(out, 'i', name, "event", time_ps, cpu + 1);
    out += ",\"s\":\"t\"";
    task_args(out, comm, pid);
    put_args(out, args);
    out += "}}";
  }

  static void async_event(std::string& out, char ph, uint64_t time_ps, int cpu, std::string_view stem,
                          uint64_t id, const TraceTask& task, const std::vector<Arg>& args) {
    head(out, ph, stem, stem, time_ps, cpu + 1);
    fmt::format_to(std::back_inserter(out), ",\"id\":\"{:#x}\"", id);
    task_args(out, task.comm, task.pid);
    fmt::format_to(std::back_inserter(out), ",\"cpu\":{}", cpu);
    put_args(out, args);
    out += "}}";
  }

  std::set<int> cpus_;
  std::map<int, Open> faults_;  // per CPU: the page_fault_user waiting for its mm_fault_done
  Open region_;
  bool region_open_ = false;
  std::map<Key, std::vector<uint64_t>> async_;
  uint64_t async_ids_ = 0;
};

}  // namespace

std::unique_ptr<TraceFormat> make_perfetto_format() { return std::make_unique<PerfettoFormat>(); }

}  // namespace mmusim
