// SPDX-License-Identifier: GPL-2.0-only
// Reading a recording of `mmusim record` (format: recorder/mmusim_trace.h, docs/trace-format.md):
// the manifest, and per process its .mtr file, checked whole when it is opened (a truncated or
// corrupt file, or one of a newer format, is the user's error before the simulation starts), then
// read record by record by one cursor per simulated thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workloads/trace_zstd.hpp"

namespace mmusim::wl {

struct TraceRecord {
  uint8_t op = 0;        // enum mtr_opcode
  uint32_t tid = 0;      // the thread the record belongs to (0 before the first THREAD)
  uint64_t ip = 0;       // absolute, after the record's delta
  uint64_t addr = 0;     // absolute, after the record's delta (LOAD/STORE/ATOMIC)
  uint64_t n = 0;        // EXEC: instructions; LOAD/STORE/ATOMIC: size; FENCE: kind; THREAD,
                         // NEWTHREAD: tid; FORK: pid; REGION: on; SYSCALL: number; REP: kind
  uint64_t a[6] = {};    // SYSCALL: arguments; REGION: start, len; MAP: start, len, prot, kind;
                         // REP: source, count, element size (`addr` the destination)
  int64_t result = 0;    // SYSCALL: result; EXIT: code
  uint64_t order = 0;    // an ordered record (trace_record_ordered()): how many of the file's
                         // ordered records, of every thread, come before it
};

// A record the replay turns into one system call that keeps its place among the process's other
// threads' ones: NEWTHREAD, FORK, EXIT, and SYSCALL but for fork, clone and exit (which are their
// FORK, NEWTHREAD and EXIT records). Defined by the record alone, so every thread's cursor counts
// the same ones.
bool trace_record_ordered(const TraceRecord& r);
// A SYSCALL record of a call the vDSO makes natively (sysno::vdso_calls).
bool trace_record_vdso(const TraceRecord& r);

// One proc-<pid>.mtr, mapped read-only, checked whole at open(). A file that begins with zstd's
// magic number is a compressed one (proc-<pid>.mtr.zst, workloads/trace_zstd.hpp): its frames are
// decompressed as the cursors reach them.
class TraceFile {
 public:
  static std::shared_ptr<const TraceFile> open(const std::string& path);
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t pid() const { return pid_; }
  uint32_t parent_pid() const { return ppid_; }
  // What the check found.
  struct Summary {
    std::vector<uint32_t> threads;  // tids in order of first appearance (the first is the main one)
    std::vector<TraceRecord> maps;  // the MAP records
    uint64_t records = 0, instructions = 0, accesses = 0, syscalls = 0, regions = 0;
    std::vector<uint32_t> forks;    // child pids, in order
  };
  const Summary& summary() const { return summary_; }

  // The uncompressed file's bytes (null for a compressed file: see frames()).
  const uint8_t* data() const { return data_; }
  // The size of the trace, uncompressed.
  size_t size() const { return size_; }
  // The size of the file as stored (compressed or not).
  size_t stored_size() const { return map_size_; }
  bool compressed() const { return !frames_.empty(); }
  const std::vector<TraceFrame>& frames() const { return frames_; }
  // Decompresses frame `i` into `out` (frames()[i].dsize bytes).
  void decompress_frame(size_t i, uint8_t* out) const;

  // Where each THREAD record of the file ends, with the decoder's state there (found by check()),
  // and last the END record's start: a cursor of one thread goes from the end of its segment to
  // the next THREAD record of its thread without decoding the other threads' records between
  // (TraceCursor::next). The state is what decoding every record up to there gives.
  struct Segment {
    size_t pos = 0;          // the first byte after the THREAD record (END: its first byte)
    uint32_t tid = 0;        // the thread it switches to (0: the END record)
    uint64_t ip = 0, addr = 0;
    uint64_t ordered = 0;    // ordered records before it
  };
  const std::vector<Segment>& segments() const { return segments_; }

 private:
  TraceFile() = default;
  void check();
  std::string path_;
  const uint8_t* map_ = nullptr;  // the file as mapped
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<TraceFrame> frames_;  // a compressed file's
  uint32_t pid_ = 0, ppid_ = 0;
  Summary summary_;
  std::vector<Segment> segments_;
};

// Sequential decoding. With `tid` != 0, next() returns only that thread's records (and none of the
// THREAD records); the deltas are kept over every record. Such a cursor, at a THREAD record of
// another thread, moves to the next segment of its own (TraceFile::segments()) instead of
// decoding the records between (a host-speed shortcut: each thread's cursor would otherwise
// decode the whole file); `skip_segments = false` decodes them all (the self-check's reference).
class TraceCursor {
 public:
  TraceCursor(std::shared_ptr<const TraceFile> f, uint32_t tid, bool skip_segments = true);
  // The next record; false after END.
  bool next(TraceRecord& r);
  // Share of the file read, in [0, 1].
  double progress() const { return file_->size() ? double(pos_) / double(file_->size()) : 1; }
  // A cursor from here on for thread `tid` (a thread that a NEWTHREAD just read created: Valgrind
  // reuses a thread's number once it has exited, so its records start here, not at the top).
  TraceCursor for_thread(uint32_t tid) const {
    TraceCursor c = *this;
    c.want_ = tid;
    return c;
  }

 private:
  friend class TraceFile;
  // Decodes the record at pos_ (any thread's); throws a UserError naming the file and offset.
  void decode(TraceRecord& r);
  bool decode_checked(TraceRecord& r);
  bool decode_valid(uint8_t& op, uint64_t& n);
  // The bytes from pos_ on: at least min(kMaxRecordBytes, size - pos_) of them (a compressed
  // file: decompressed into win_ as the cursor reaches them).
  static constexpr size_t kMaxRecordBytes = 96;  // the longest record: 1 + 8 numbers of <= 10 bytes
  const uint8_t* bytes() {
    if (raw_->data()) return raw_->data() + pos_;
    if (pos_ + kMaxRecordBytes > win_start_ + win_.size() && win_start_ + win_.size() < raw_->size()) refill();
    return win_.data() + (pos_ - win_start_);
  }
  void refill();
  // At a THREAD record of another thread than want_: on to the next segment of want_ (or to END).
  void skip_to_own_segment();
  std::shared_ptr<const TraceFile> file_;
  const TraceFile* raw_ = nullptr;  // (the check's cursor, before the shared_ptr exists)
  uint32_t want_ = 0, cur_tid_ = 0;
  bool skip_ = true;
  size_t seg_ = 0;  // THREAD records passed (decoded or skipped): the index of the next segment
  size_t pos_ = 0;
  uint64_t ip_ = 0, addr_ = 0;
  uint64_t ordered_ = 0;  // ordered records decoded so far
  bool ended_ = false;
  // A compressed file: its bytes [win_start_, win_start_ + win_.size()), which end where frame
  // next_frame_ begins.
  // (An allocator that leaves new bytes uninitialised: each frame is decompressed over them, so
  // zeroing its 8 MiB first would be wasted.)
  template <typename T>
  struct UninitAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <typename U>
    UninitAllocator(const UninitAllocator<U>&) {}
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... A>
    void construct(U* p, A&&... a) {
      ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
  };
  std::vector<uint8_t, UninitAllocator<uint8_t>> win_;
  size_t win_start_ = 0, next_frame_ = 0;
};

// A recording directory: manifest.txt and the processes' files.
class Recording {
 public:
  explicit Recording(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const std::string& command() const { return command_; }
  uint32_t root_pid() const { return root_pid_; }
  // "detail region": outside the region only first touches were recorded (mmusim_trace.h).
  bool detail_region() const { return detail_region_; }
  // The file of a recorded process; a UserError if it is missing.
  std::shared_ptr<const TraceFile> process(uint32_t pid) const;

 private:
  std::string dir_, command_;
  uint32_t root_pid_ = 0;
  bool detail_region_ = false;
  mutable std::map<uint32_t, std::shared_ptr<const TraceFile>> files_;
};

// x86-64 system call numbers the replay interprets (arch/x86/entry/syscalls/syscall_64.tbl).
namespace sysno {
// The time calls that run in the vDSO natively, without entering the kernel (Valgrind gives its
// programs no vDSO: they appear as system calls): gettimeofday, time, clock_gettime, getcpu.
inline constexpr uint64_t vdso_calls[] = {96, 201, 228, 309};
inline constexpr uint64_t mmap = 9, mprotect = 10, munmap = 11, brk = 12, mremap = 25, madvise = 28,
                          clone = 56, fork = 57, vfork = 58, execve = 59, exit = 60, wait4 = 61,
                          exit_group = 231, waitid = 247, clone3 = 435;
}

}  // namespace mmusim::wl
