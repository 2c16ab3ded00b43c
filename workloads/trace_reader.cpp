// SPDX-License-Identifier: GPL-2.0-only
#include "workloads/trace_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "recorder/mmusim_trace.h"

namespace mmusim::wl {

namespace {

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

const char* op_name(uint8_t op) {
  switch (op) {
    case MTR_EXEC: return "EXEC";
    case MTR_LOAD: return "LOAD";
    case MTR_STORE: return "STORE";
    case MTR_ATOMIC: return "ATOMIC";
    case MTR_FENCE: return "FENCE";
    case MTR_SYSCALL: return "SYSCALL";
    case MTR_THREAD: return "THREAD";
    case MTR_NEWTHREAD: return "NEWTHREAD";
    case MTR_FORK: return "FORK";
    case MTR_EXIT: return "EXIT";
    case MTR_REGION: return "REGION";
    case MTR_MAP: return "MAP";
    case MTR_END: return "END";
    case MTR_REP: return "REP";
  }
  return "?";
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// TraceFile

std::shared_ptr<const TraceFile> TraceFile::open(const std::string& path) {
  std::shared_ptr<TraceFile> f(new TraceFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fatal("{}: cannot open the trace: {}", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fatal("{}: cannot read the trace: {}", path, std::strerror(e));
  }
  f->map_size_ = size_t(st.st_size);
  if (f->map_size_ == 0) {
    ::close(fd);
    fatal("{}: not an mmusim trace: the file is empty", path);
  }
  void* m = mmap(nullptr, f->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) fatal("{}: cannot map the trace: {}", path, std::strerror(errno));
  f->map_ = static_cast<const uint8_t*>(m);
  // The header: the file's first bytes, or a compressed file's first frame's.
  std::vector<uint8_t> first;
  const uint8_t* head = f->map_;
  if (is_zstd(f->map_, f->map_size_)) {
    f->frames_ = zstd_frames(path, f->map_, f->map_size_);
    f->size_ = f->frames_.back().doff + f->frames_.back().dsize;
    for (size_t i = 0; i < f->frames_.size() && first.size() < MTR_HEADER_BYTES; ++i) {
      const size_t at = first.size();
      first.resize(at + f->frames_[i].dsize);
      f->decompress_frame(i, first.data() + at);
    }
    head = first.data();
  } else {
    f->data_ = f->map_;
    f->size_ = f->map_size_;
  }
  if (f->size_ < MTR_HEADER_BYTES)
    fatal("{}: not an mmusim trace: {} bytes, shorter than the {}-byte header", path, f->size_,
          MTR_HEADER_BYTES);
  if (std::memcmp(head, MTR_MAGIC, 8) != 0)
    fatal("{}: not an mmusim trace (the first 8 bytes are not \"{}\")", path, MTR_MAGIC);
  const uint32_t version = le32(head + 8);
  if (version > MTR_VERSION)
    fatal("{}: trace format version {} is newer than this mmusim reads ({}): replay it with a "
          "newer mmusim, or record it again",
          path, version, MTR_VERSION);
  if (version != MTR_VERSION) fatal("{}: trace format version {} is not one this mmusim reads ({})", path, version, MTR_VERSION);
  f->pid_ = le32(head + 12);
  f->ppid_ = le32(head + 16);
  f->check();
  return f;
}

TraceFile::~TraceFile() {
  if (map_) munmap(const_cast<uint8_t*>(map_), map_size_);
}

void TraceFile::decompress_frame(size_t i, uint8_t* out) const {
  zstd_frame_decompress(path_, map_, frames_.at(i), out);
}

// The whole file decoded once: every record well-formed, END last, MAPs before the first THREAD,
// at most one measured region; what the replay needs to know up front.
void TraceFile::check() {
  TraceCursor c(nullptr, 0);
  c.raw_ = this;
  c.pos_ = MTR_HEADER_BYTES;
  TraceRecord r;
  bool seen_thread = false, region_open = false;
  std::vector<uint32_t>& th = summary_.threads;
  while (!c.ended_) {
    const size_t at = c.pos_;
    uint8_t op;
    uint64_t n;
    if (c.decode_valid(op, n)) {
      ++summary_.records;
      if (!seen_thread)
        fatal("{}: offset {}: a {} record before the first THREAD record", path_, at, op_name(op));
      summary_.instructions += op == MTR_EXEC ? n : 1;
      summary_.accesses += op != MTR_EXEC;
      continue;
    }
    c.decode(r);
    ++summary_.records;
    switch (r.op) {
      case MTR_MAP:
        if (seen_thread) fatal("{}: offset {}: a MAP record after the first THREAD", path_, at);
        summary_.maps.push_back(r);
        break;
      case MTR_THREAD:
        seen_thread = true;
        if (std::find(th.begin(), th.end(), uint32_t(r.n)) == th.end()) th.push_back(uint32_t(r.n));
        segments_.push_back({c.pos_, uint32_t(r.n), c.ip_, c.addr_, c.ordered_});
        break;
      case MTR_END: segments_.push_back({at, 0, c.ip_, c.addr_, c.ordered_}); break;
      default:
        if (!seen_thread)
          fatal("{}: offset {}: a {} record before the first THREAD record", path_, at, op_name(r.op));
        break;
    }
    switch (r.op) {
      case MTR_EXEC: summary_.instructions += r.n; break;
      case MTR_LOAD:
      case MTR_STORE:
      case MTR_ATOMIC:
      case MTR_FENCE: ++summary_.instructions; summary_.accesses += r.op != MTR_FENCE; break;
      case MTR_SYSCALL: ++summary_.syscalls; break;
      case MTR_REP:
        summary_.instructions += r.a[1];
        summary_.accesses += r.a[1] * (r.n == MTR_REP_MOVS ? 2 : 1);
        break;
      case MTR_FORK: summary_.forks.push_back(uint32_t(r.n)); break;
      case MTR_REGION:
        if (r.n == 1) {
          if (region_open || summary_.regions)
            fatal("{}: offset {}: a second measured region begins; mmusim measures one region per "
                  "run (mmusim_region_begin() once)",
                  path_, at);
          region_open = true;
          ++summary_.regions;
        } else {
          if (!region_open) fatal("{}: offset {}: the measured region ends before it began", path_, at);
          region_open = false;
        }
        break;
      default: break;
    }
  }
  if (th.empty()) fatal("{}: the trace has no THREAD record", path_);
  if (region_open) fatal("{}: the measured region begins but never ends (no mmusim_region_end())", path_);
}

// ------------------------------------------------------------------------------------------------
// TraceCursor

TraceCursor::TraceCursor(std::shared_ptr<const TraceFile> f, uint32_t tid, bool skip_segments)
    : file_(std::move(f)), raw_(file_.get()), want_(tid), skip_(skip_segments), pos_(MTR_HEADER_BYTES) {}

void TraceCursor::refill() {
  // Keep the bytes from pos_ on, then append frames until the longest record fits (or the file
  // ends).
  const TraceFile& f = *raw_;
  if (pos_ >= win_start_ + win_.size()) {
    // Nothing of the window is needed (a cursor that skipped other threads' segments): go on
    // from the frame that holds pos_, without decompressing the frames before it.
    win_.clear();
    while (next_frame_ + 1 < f.frames().size() && f.frames()[next_frame_ + 1].doff <= pos_) ++next_frame_;
    win_start_ = next_frame_ < f.frames().size() ? f.frames()[next_frame_].doff : f.size();
  }
  const size_t drop = std::min(pos_ - win_start_, win_.size());
  win_.erase(win_.begin(), win_.begin() + long(drop));
  win_start_ += drop;
  while (pos_ + kMaxRecordBytes > win_start_ + win_.size() && next_frame_ < f.frames().size()) {
    const TraceFrame& fr = f.frames()[next_frame_];
    const size_t at = win_.size();
    win_.resize(at + fr.dsize);
    f.decompress_frame(next_frame_++, win_.data() + at);
  }
}

void TraceCursor::decode(TraceRecord& r) {
  const TraceFile& f = *raw_;
  const size_t size = f.size();
  const size_t start = pos_;
  auto fail = [&](const char* what) {
    fatal("{}: offset {}: {} (reading byte {}); the trace is corrupt or truncated", f.path(), start,
          what, pos_);
  };
  if (pos_ >= size) fail("the file ends without an END record");
  // The record's bytes, all of them unless the file ends first: byte pos_ is b[pos_ - start].
  const uint8_t* const b = bytes();
  auto u = [&]() -> uint64_t {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (pos_ >= size) fail("the file ends inside a number");
      if (shift > 63) fail("a number longer than 64 bits");
      const uint8_t c = b[pos_++ - start];
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
  };
  auto s = [&]() -> int64_t {
    const uint64_t z = u();
    return int64_t(z >> 1) ^ -int64_t(z & 1);
  };
  r = TraceRecord{};
  r.op = b[pos_++ - start];
  switch (r.op) {
    case MTR_EXEC:
      ip_ += uint64_t(s());
      r.n = u();
      if (r.n == 0) fail("EXEC of 0 instructions");
      break;
    case MTR_LOAD:
    case MTR_STORE:
    case MTR_ATOMIC:
      ip_ += uint64_t(s());
      addr_ += uint64_t(s());
      r.n = u();
      if (r.n == 0 || r.n > 64) fail("an access size outside 1..64");
      break;
    case MTR_FENCE:
      ip_ += uint64_t(s());
      r.n = u();
      if (r.n == 0 || r.n > MTR_FENCE_MAX) fail("an unknown FENCE kind");
      break;
    case MTR_SYSCALL:
      r.n = u();
      for (uint64_t& a : r.a) a = u();
      r.result = s();
      break;
    case MTR_THREAD:
    case MTR_NEWTHREAD:
      r.n = u();
      if (r.n == 0 || r.n > 0xffffffffu) fail("a thread number outside 1..2^32-1");
      if (r.op == MTR_THREAD) cur_tid_ = uint32_t(r.n);
      break;
    case MTR_FORK:
      r.n = u();
      if (r.n == 0 || r.n > 0xffffffffu) fail("a pid outside 1..2^32-1");
      break;
    case MTR_EXIT: r.result = s(); break;
    case MTR_REGION:
      r.n = u();
      r.a[0] = u();
      r.a[1] = u();
      if (r.n > 1) fail("REGION with on outside 0..1");
      break;
    case MTR_MAP:
      for (int i = 0; i < 4; ++i) r.a[i] = u();
      if ((r.a[0] | r.a[1]) & 0xfff) fail("a MAP not page-aligned");
      if (r.a[2] > 7) fail("a MAP with prot outside 0..7");
      if (r.a[3] > MTR_MAP_KIND_MAX) fail("a MAP of an unknown kind");
      break;
    case MTR_REP: {
      ip_ += uint64_t(s());
      r.n = u();
      if (r.n == 0 || r.n > MTR_REP_MAX) fail("an unknown REP kind");
      addr_ += uint64_t(s());
      const int64_t src = s();
      r.a[0] = addr_ + uint64_t(src);
      r.a[1] = u();
      r.a[2] = u();
      if (r.a[1] == 0) fail("a REP of 0 iterations");
      if (r.a[2] != 1 && r.a[2] != 2 && r.a[2] != 4 && r.a[2] != 8) fail("a REP element size not 1, 2, 4 or 8");
      if (r.a[1] > (uint64_t(1) << 40) / r.a[2]) fail("a REP of more than 2^40 bytes");
      if (r.n == MTR_REP_STOS && src != 0) fail("a REP STOS with a source");
      break;
    }
    case MTR_END:
      ended_ = true;
      if (pos_ != size) fail("bytes after the END record");
      break;
    default: fail(fmt::format("unknown opcode {:#04x}", r.op).c_str());
  }
  r.tid = cur_tid_;
  r.ip = ip_;
  r.addr = addr_;
  if (trace_record_ordered(r)) r.order = ordered_++;
}

// The common records (EXEC, LOAD, STORE, ATOMIC) with every check decode() makes, but without a
// bound check per byte: only where the longest record fits before the end. Gives the opcode and
// the count or size, and keeps the deltas (check()'s pass needs nothing else of them). False
// (nothing read) where the record does not fit, for another record, or for one that fails a check:
// decode() then reads it, and names the fault.
bool TraceCursor::decode_valid(uint8_t& op_out, uint64_t& n_out) {
  const TraceFile& f = *raw_;
  if (pos_ + kMaxRecordBytes > f.size()) return false;
  const uint8_t* d = bytes();
  const uint8_t op = d[0];
  if (op < MTR_EXEC || op > MTR_ATOMIC) return false;
  const uint8_t* p = d + 1;
  bool ok = true;
  auto u = [&p, &ok]() {
    uint64_t v = 0;
    for (unsigned i = 0; i < 10; ++i) {
      const uint8_t c = *p++;
      v |= uint64_t(c & 0x7f) << (7 * i);
      if (!(c & 0x80)) {
        if (i == 9 && c > 1) ok = false;  // (beyond 64 bits)
        return v;
      }
    }
    ok = false;
    return v;
  };
  auto s = [&u]() {
    const uint64_t z = u();
    return uint64_t(int64_t(z >> 1) ^ -int64_t(z & 1));
  };
  const uint64_t ip = ip_ + s();
  const uint64_t addr = op == MTR_EXEC ? addr_ : addr_ + s();
  const uint64_t n = u();
  if (!ok || n == 0 || (op != MTR_EXEC && n > 64)) return false;
  ip_ = ip;
  addr_ = addr;
  op_out = op;
  n_out = n;
  pos_ += size_t(p - d);
  return true;
}

bool trace_record_vdso(const TraceRecord& r) {
  if (r.op != MTR_SYSCALL || r.result < 0) return false;
  for (uint64_t n : sysno::vdso_calls)
    if (r.n == n) return true;
  return false;
}

bool trace_record_ordered(const TraceRecord& r) {
  if (trace_record_vdso(r)) return false;  // (replayed as the vDSO's code, no system call)
  switch (r.op) {
    case MTR_NEWTHREAD:
    case MTR_FORK:
    case MTR_EXIT: return true;
    case MTR_SYSCALL:
      return !(r.n == sysno::fork || r.n == sysno::vfork || r.n == sysno::clone || r.n == sysno::clone3 ||
               r.n == sysno::exit || r.n == sysno::exit_group);
    default: return false;
  }
}

// The common records of a file check() has read whole: no bound or value to check again.
// Returns false for the others (decode() reads them).
inline bool TraceCursor::decode_checked(TraceRecord& r) {
  const uint8_t* d = bytes();
  const uint8_t op = d[0];
  if (op < MTR_EXEC || op > MTR_ATOMIC) return false;
  const uint8_t* p = d + 1;
  auto u = [&p]() {
    uint64_t v = *p & 0x7f;
    for (unsigned shift = 7; *p++ & 0x80; shift += 7) v |= uint64_t(*p & 0x7f) << shift;
    return v;
  };
  auto s = [&u]() {
    const uint64_t z = u();
    return uint64_t(int64_t(z >> 1) ^ -int64_t(z & 1));
  };
  ip_ += s();
  if (op != MTR_EXEC) addr_ += s();
  r.n = u();
  r.op = op;
  r.tid = cur_tid_;
  r.ip = ip_;
  r.addr = addr_;
  pos_ += size_t(p - d);
  return true;
}

void TraceCursor::skip_to_own_segment() {
  const std::vector<TraceFile::Segment>& segs = raw_->segments();
  size_t k = seg_;
  while (k < segs.size() && segs[k].tid != want_ && segs[k].tid != 0) ++k;
  if (k >= segs.size()) return;  // (a file check() has read always ends in its END segment)
  const TraceFile::Segment& g = segs[k];
  pos_ = g.pos;
  ip_ = g.ip;
  addr_ = g.addr;
  ordered_ = g.ordered;
  if (g.tid) {
    cur_tid_ = g.tid;
    seg_ = k + 1;  // (that THREAD record is passed)
  } else {
    seg_ = k;  // the END record comes next
  }
}

bool TraceCursor::next(TraceRecord& r) {
  while (!ended_) {
    if (!file_ || !decode_checked(r)) decode(r);
    if (r.op == MTR_END) return false;
    if (r.op == MTR_THREAD) ++seg_;
    if (want_ == 0) return true;
    if (r.op == MTR_THREAD) {
      if (skip_ && file_ && r.n != want_) skip_to_own_segment();
      continue;
    }
    if (r.op == MTR_MAP || r.tid != want_) continue;
    return true;
  }
  return false;
}

// ------------------------------------------------------------------------------------------------
// Recording

Recording::Recording(const std::string& dir) : dir_(dir) {
  const std::string path = dir + "/manifest.txt";
  std::ifstream in(path);
  if (!in)
    fatal("workload.trace = {}: no recording there ({} is missing; make one with `mmusim record "
          "--out {} -- PROGRAM`)",
          dir, path, dir);
  std::string line;
  int lineno = 0;
  bool have_version = false, have_root = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "mmusim-trace") {
      unsigned v = 0;
      if (!(ls >> v)) fatal("{}:{}: \"mmusim-trace\" needs the format version", path, lineno);
      if (v > MTR_VERSION)
        fatal("{}:{}: trace format version {} is newer than this mmusim reads ({})", path, lineno, v,
              MTR_VERSION);
      if (v != MTR_VERSION) fatal("{}:{}: trace format version {} is not one this mmusim reads ({})", path, lineno, v, MTR_VERSION);
      have_version = true;
    } else if (key == "root-pid") {
      int64_t p = 0;
      if (!(ls >> p) || p <= 0) fatal("{}:{}: root-pid needs a positive pid", path, lineno);
      root_pid_ = uint32_t(p);
      have_root = true;
    } else if (key == "detail") {
      std::string d;
      ls >> d;
      if (d != "all" && d != "region")
        fatal("{}:{}: detail \"{}\": allowed: all, region", path, lineno, d);
      detail_region_ = d == "region";
    } else if (key == "command") {
      std::getline(ls, command_);
      if (!command_.empty() && command_[0] == ' ') command_.erase(0, 1);
    } else {
      fatal("{}:{}: unknown manifest key \"{}\" (allowed: mmusim-trace, root-pid, command, detail)", path,
            lineno, key);
    }
  }
  if (!have_version) fatal("{}: not an mmusim recording manifest (no \"mmusim-trace\" line)", path);
  if (!have_root) fatal("{}: no root-pid line", path);
}

std::shared_ptr<const TraceFile> Recording::process(uint32_t pid) const {
  auto it = files_.find(pid);
  if (it != files_.end()) return it->second;
  // proc-<pid>.mtr, or compressed proc-<pid>.mtr.zst (mmusim record --compress zstd)
  std::string path = fmt::format("{}/proc-{}.mtr", dir_, pid);
  const bool plain = std::ifstream(path).good(), zst = std::ifstream(path + ".zst").good();
  if (plain && zst)
    fatal("{}: both {} and its compressed {}.zst are there: remove one", dir_, path, path);
  if (zst) path += ".zst";
  auto f = TraceFile::open(path);
  if (f->pid() != pid) fatal("{}: the header says pid {}, the file name {}", path, f->pid(), pid);
  files_[pid] = f;
  return f;
}

}  // namespace mmusim::wl
