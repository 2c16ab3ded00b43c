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
// Timestamps are in microseconds, numbers with ns precision (the precision of the ftrace text),
// in the shortest form that reads back as the same number ("0.539", "12.34", "3.0"). The output
// depends only on the events (no host state), one JSON object per line. nlohmann-json writes
// every object; the document is streamed (a trace has millions of events): one event is made and
// written at a time, between the head (up to the '[' of traceEvents) and the closing "]}".
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

using Json = nlohmann::ordered_json;  // keys in the order they are set

// Microseconds with ns precision, from picoseconds: 12.345 (the ns, divided once: the double
// nearest to the decimal number, which is what a reader of "12.345" gets).
double us(uint64_t ps) { return double(ps / 1000) / 1000.0; }

// The event's fields as args (after those already in `args`).
void put_args(Json& args, const std::vector<Arg>& fields) {
  for (const Arg& a : fields) {
    switch (a.kind) {
      case TraceField::Hex: args[a.name] = fmt::format("{:#x}", a.u); break;
      case TraceField::Dec: args[a.name] = a.u; break;
      case TraceField::Str: args[a.name] = a.s; break;
    }
  }
}

bool ends_with(std::string_view s, std::string_view sfx) {
  return s.size() > sfx.size() && s.compare(s.size() - sfx.size(), sfx.size(), sfx) == 0;
}

class PerfettoFormat : public TraceFormat {
 public:
  void begin(std::string& out) override {
    // The head: the document with an empty traceEvents (its last member), without the "]}".
    const Json doc = {{"displayTimeUnit", "ns"},
                      {"otherData", {{"generator", "mmusim"}, {"time_unit", "us"}}},
                      {"traceEvents", Json::array()}};
    std::string head = doc.dump();
    head.resize(head.size() - 2);
    out += head;
    out += '\n';
    metadata(out, kRegionTid, "process_name", {{"name", "mmusim"}});
    metadata(out, kRegionTid, "thread_name", {{"name", "measured region"}});
    metadata(out, kRegionTid, "thread_sort_index", {{"sort_index", -1}});
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
    out += "\n]}\n";  // closes traceEvents and the document (see begin())
  }

 private:
  using Key = std::tuple<int, std::string, uint64_t>;

  static uint64_t address_of(const std::vector<Arg>& args) {
    const Arg* a = find(args, "address");
    return a && a->kind != TraceField::Str ? a->u : 0;
  }

  // One event: a line of the traceEvents array.
  void write(std::string& out, const Json& e) {
    if (written_++) out += ",\n";
    out += e.dump(-1, ' ', false, Json::error_handler_t::replace);  // not UTF-8: U+FFFD
  }

  void metadata(std::string& out, int tid, const char* name, Json args) {
    write(out, {{"ph", "M"}, {"pid", kPid}, {"tid", tid}, {"name", name}, {"args", std::move(args)}});
  }

  void ensure_cpu(std::string& out, int cpu) {
    if (!cpus_.insert(cpu).second) return;
    metadata(out, cpu + 1, "thread_name", {{"name", fmt::format("cpu{}", cpu)}});
    metadata(out, cpu + 1, "thread_sort_index", {{"sort_index", cpu}});
  }

  // The members every event has, in an object with room for the rest (filling it member by
  // member, not from an initializer list, which nlohmann-json copies: twice as fast).
  static Json head(char ph, std::string_view name, std::string_view cat, uint64_t time_ps, int tid) {
    Json e(Json::value_t::object);
    e.get_ref<Json::object_t&>().reserve(9);
    e["ph"] = std::string(1, ph);
    e["name"] = name;
    e["cat"] = cat;
    e["pid"] = kPid;
    e["tid"] = tid;
    e["ts"] = us(time_ps);
    return e;
  }

  static Json task_args(std::string_view comm, int pid, size_t fields) {
    Json args(Json::value_t::object);
    args.get_ref<Json::object_t&>().reserve(fields + 2);
    args["task"] = fmt::format("{}-{}", comm, pid);
    return args;
  }

  void complete(std::string& out, uint64_t begin_ps, uint64_t end_ps, int tid, std::string_view name,
                std::string_view cat, std::string_view comm, int pid, const std::vector<Arg>& fields) {
    Json e = head('X', name, cat, begin_ps, tid);
    e["dur"] = us(end_ps >= begin_ps ? end_ps - begin_ps : 0);
    Json args = task_args(comm, pid, fields.size());
    put_args(args, fields);
    e["args"] = std::move(args);
    write(out, e);
  }

  void instant(std::string& out, uint64_t time_ps, int cpu, std::string_view comm, int pid,
               std::string_view name, const std::vector<Arg>& fields) {
    Json e = head('i', name, "event", time_ps, cpu + 1);
    e["s"] = "t";
    Json args = task_args(comm, pid, fields.size());
    put_args(args, fields);
    e["args"] = std::move(args);
    write(out, e);
  }

  void async_event(std::string& out, char ph, uint64_t time_ps, int cpu, std::string_view stem,
                   uint64_t id, const TraceTask& task, const std::vector<Arg>& fields) {
    Json e = head(ph, stem, stem, time_ps, cpu + 1);
    e["id"] = fmt::format("{:#x}", id);
    Json args = task_args(task.comm, task.pid, fields.size());
    args["cpu"] = cpu;
    put_args(args, fields);
    e["args"] = std::move(args);
    write(out, e);
  }

  std::set<int> cpus_;
  std::map<int, Open> faults_;  // per CPU: the page_fault_user waiting for its mm_fault_done
  Open region_;
  bool region_open_ = false;
  std::map<Key, std::vector<uint64_t>> async_;
  uint64_t async_ids_ = 0;
  uint64_t written_ = 0;  // events written (the first has no separator before it)
};

}  // namespace

std::unique_ptr<TraceFormat> make_perfetto_format() { return std::make_unique<PerfettoFormat>(); }

}  // namespace mmusim
