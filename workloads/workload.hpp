// SPDX-License-Identifier: GPL-2.0-only
// Built-in workloads, parameterised from the configuration (workload.*), so new experiments need no
// recompilation. A workload sets up the "sysfs" THP knobs it needs (as a benchmark's setup script
// does) and gives the program of the first task; fork() children run the program it gives for them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/params.hpp"
#include "base/stats.hpp"
#include "workloads/image.hpp"
#include "workloads/program.hpp"

namespace mmusim::wl {

enum class FolioKind : uint8_t { k4K, k64K, k1M, k2M_pte, k2M_pmd };
enum class Pattern : uint8_t {
  seq_byte, seq_byte_clock, seq_byte_lfence, memset, random_byte, read_then_store, stride, seq_read
};
// What the measured region is: private anonymous memory, or a file of the simulated filesystem
// mapped private or shared (kernel_mm/filemap.cpp).
enum class Backing : uint8_t { anon, file, file_shared };
enum class WorkloadName : uint8_t { fork_reuse, fork_time, random_ops, trace, anon_cow_seq, file_faults, swap_readers };
// The classes of the system calls a recording makes that the kernel port does not model.
enum class SyscallClass : uint8_t { io, net, wait, file, other };
inline constexpr const char* kSyscallClassNames[] = {"io", "net", "wait", "file", "other"};
SyscallClass syscall_class(uint64_t x86_64_nr);
const char* folio_kind_name(FolioKind k);
const char* pattern_name(Pattern p);
unsigned folio_order(FolioKind k);  // 0, 4, 8, 9, 9

// The x86 vDSO clock_gettime() as micro-ops: the seqcount read and the call around RDTSCP, then
// the mult/shift (lib/vdso/gettimeofday.c, arch/x86/include/asm/vdso/gettimeofday.h).
struct VdsoParams {
  unsigned call_cycles = 0;
  unsigned uops_before = 0;
  unsigned uops_after = 0;
  void visit(Params& p);
};

struct WorkloadParams {
  WorkloadName name = WorkloadName::fork_reuse;
  uint64_t size = 0;
  FolioKind folio = FolioKind::k64K;
  Pattern pattern = Pattern::seq_byte_clock;
  uint64_t stride = 0;
  unsigned threads = 1;
  enum class ThreadSplit : uint8_t { block, interleave } thread_split = ThreadSplit::block;
  unsigned loop_uops = 0;          // ALU uops of the loop around each store (add, cmp+jcc)
  unsigned result_entry_bytes = 0; // seq-byte-clock: bytes per recorded latency
  uint64_t result_offset = 0;      // malloc's chunk header before the result array
  uint64_t seed = 0;
  uint64_t ops = 0;                // random-ops: operations over all processes
  unsigned processes = 0;          // random-ops: live processes at most
  uint64_t max_mapped = 0;         // random-ops: bytes mapped per process at most
  unsigned files = 0;              // random-ops: files some mmaps map privately
  unsigned mmap_threads = 0;       // file-faults, swap-readers: threads that mmap/munmap in a loop
  Duration duration;               // file-faults, swap-readers: simulated time of the measured loop
  uint64_t pressure_size = 0;      // swap-readers: what the pressure thread maps and writes a round
  enum class ThpFrom : uint8_t { folio, config } thp_from = ThpFrom::folio;
  enum class Measure : uint8_t { pass, populate } measure = Measure::pass;
  Backing backing = Backing::anon;
  bool file_cached = false;         // backing = file*: the file's pages cached before the run
  // backing = file*: madvise() of the file mapping after the mmap (workload.file_advice).
  enum class FileAdvice : uint8_t { none, hugepage } file_advice = FileAdvice::none;
  // msync() of the region after the measured pass, inside the region (usemem -S / -A).
  enum class Msync : uint8_t { none, async, sync };
  Msync msync = Msync::none;
  uint64_t file_size = 0;           // backing = file*: the file's bytes (0: workload.size)
  std::string trace;                // trace: the recording's directory (mmusim record --out)
  bool fast_forward = true;         // trace: outside the region, only first touches
  // trace: the kernel time of a system call the port does not model, by class, beyond
  // cost.syscall's entry and exit (index: SyscallClass).
  std::array<Duration, 5> syscall_time{};
  VdsoParams vdso;
  void visit(Params& p);
};

// A file the workload maps: created on the simulated filesystem before the run, its contents from
// `seed`; `cached`: all its pages in the page cache from the start, as after a read of the whole
// file (uncharged), else none.
struct FileSpec {
  std::string name;
  uint64_t size = 0;
  uint64_t seed = 0;
  bool cached = false;
};
// An Mmap micro-op of a file: `extra` holds the flags (bits 0-15), the page offset in the file
// (bits 16-47) and the file's number, 1-based in Workload::files() (bits 48-63).
inline constexpr unsigned kMmapPgoffShift = 16, kMmapFileShift = 48;
inline uint64_t mmap_file_extra(uint64_t flags, unsigned file_nr, uint64_t pgoff) {
  return flags | (pgoff << kMmapPgoffShift) | (uint64_t(file_nr) << kMmapFileShift);
}

// THP sysfs settings the workload needs for its folio kind: index = order 2..9.
struct ThpSetup {
  bool madvise_region = false;           // MADV_HUGEPAGE on the measured region
  std::array<uint8_t, 10> order_mode{};  // 0 never, 1 madvise
};
ThpSetup thp_setup_for(FolioKind k);

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  virtual ThpSetup thp_setup() const = 0;
  virtual std::unique_ptr<Program> main_program() = 0;
  // The program the child of the `fork_index`-th fork runs; `tag`: the Fork micro-op's `addr`.
  virtual std::unique_ptr<Program> child_program(unsigned fork_index, uint64_t tag) = 0;
  // What the first process has mapped when its program starts (workloads/image.hpp).
  virtual std::vector<ImageMapping> image() const { return program_image(); }
  // The program of thread `index` (>= 1) that the main program's Clone(index, a, b) creates.
  virtual std::unique_ptr<Program> thread_program(unsigned index, uint64_t a, uint64_t b) {
    return nullptr;
  }
  // The threads the workload runs (each pinned to a CPU: Scheduler::cpu_for_thread()).
  virtual unsigned threads() const { return 1; }
  // Bytes of the measured region (for progress and faults.region).
  virtual uint64_t region_bytes() const = 0;
  // The files its programs map (Sys::Mmap with a file number above kMmapFileShift).
  virtual std::vector<FileSpec> files() const { return {}; }
};

// `stats` (optional): where a workload registers its own counters (random-ops: check.*).
std::unique_ptr<Workload> make_workload(const WorkloadParams& p, Stats* stats = nullptr);
std::unique_ptr<Workload> make_random_ops_workload(const WorkloadParams& p, Stats* stats);
// workloads/file_faults.cpp (file-faults and swap-readers)
std::unique_ptr<Workload> make_file_faults_workload(const WorkloadParams& p);
// Workloads that loop for workload.duration with reader and mapper threads.
inline bool is_timed_loop(WorkloadName n) { return n == WorkloadName::file_faults || n == WorkloadName::swap_readers; }
// workloads/trace_workload.cpp
std::unique_ptr<Workload> make_trace_workload(const WorkloadParams& p, Stats* stats);

}  // namespace mmusim::wl
