// SPDX-License-Identifier: GPL-2.0-only
// workload.name = trace: a recording of a real program (`mmusim record`, recorder/) replayed on the
// simulated machine. Each recorded thread becomes a program of micro-ops:
//   - a guest instruction without memory access: one ALU micro-op (latency 1, no dependences: the
//     recording has no register data flow) at the instruction's address;
//   - a load or store: one micro-op at its address and size, split where it crosses a 4K page (an
//     x86 split access translates both pages); the iterations of a string instruction (REP STOS,
//     REP MOVS: the same instruction address, the next bytes, nothing between them) as the
//     fast-string microcode moves them, a whole line at a time within each page (StringRun);
//     an atomic read-modify-write: a load, the store that
//     depends on it, then an LFENCE (a locked instruction orders every later load after it, SDM Vol.
//     3A §9.2.3.8 (8.2.3.8 before 2023); its store-buffer drain is not modelled);
//   - LFENCE and RDTSCP: those micro-ops; MFENCE and CPUID: an LFENCE (both wait for every older
//     instruction; their store-buffer drain and CPUID's own latency are not modelled); SFENCE and
//     RDTSC: an ALU micro-op (write-back stores are already ordered; RDTSC is not ordered);
//   - the system calls that change memory as the kernel port's: mmap (anonymous at the recorded
//     address with MAP_FIXED; of a file, kernel_mm's stand-in with every page present), munmap,
//     mprotect, madvise, brk (growth mapped as anonymous memory, shrinking unmapped), mremap
//     (approximated: the old range unmapped and the new one mapped, so its pages fault again);
//     fork (the child runs its own recording), clone of a thread, exit, wait4/waitid (for the
//     recorded child's simulated pid), execve (the process ends: the new program is not recorded);
//     every other system call a kernel entry that changes nothing (Sys::None: its cost).
//   - the measured region: mmusim_region_begin_range()/_end() (include/mmusim_region.h).
// The threads of one process run side by side as the platform schedules them; their system calls
// keep the recorded order (a Gate before each), so that a mapping exists before another thread
// uses it and a join happens after the thread's exit. Synchronisation through memory alone
// (spinning on a flag) is not replayed. What is approximated is counted (trace.*).
#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/pgformat.hpp"
#include "base/stats.hpp"
#include "recorder/mmusim_trace.h"
#include "workloads/trace_reader.hpp"
#include "workloads/workload.hpp"

namespace mmusim::wl {

namespace {

constexpr uint64_t kPage = pg::kBasePageSize;
constexpr uint64_t kCloneThread = 0x00010000;
// The measured region of a recording that names no range: every user address.
constexpr uint64_t kWholeUserSpace = uint64_t(1) << 47;

uint64_t page_up(uint64_t a) { return (a + kPage - 1) & ~(kPage - 1); }
bool is_err(int64_t r) { return r < 0 && r >= -4095; }

// Sys::None's argument: 1 + the SyscallClass whose workload.syscall_time it takes, or 0: none.
constexpr uint64_t kNoClass = 0;

struct TraceCounters {
  Counter *instructions, *accesses, *syscalls, *not_modelled, *approximated, *file_maps, *vdso, *skipped;
  std::array<Counter*, 5> by_class{};
  explicit TraceCounters(Stats& s)
      : instructions(&s.counter("trace.instructions", "recorded guest instructions replayed")),
        accesses(&s.counter("trace.accesses", "recorded loads, stores and atomics replayed")),
        syscalls(&s.counter("trace.syscalls", "recorded system calls replayed")),
        not_modelled(&s.counter("trace.syscalls_not_modelled",
                                "recorded system calls replayed as a kernel entry that changes "
                                "nothing (their effect is not modelled)")),
        approximated(&s.counter("trace.approximated",
                                "recorded operations replayed approximately: mremap as munmap + "
                                "mmap, shared mappings as private ones, execve as exit")),
        file_maps(&s.counter("trace.file_mappings",
                             "file mappings replayed as private memory with every page present")),
        vdso(&s.counter("trace.vdso_calls",
                        "recorded gettimeofday/time/clock_gettime/getcpu system calls replayed as "
                        "the vDSO's code (natively they enter no kernel; Valgrind has no vDSO)")),
        skipped(&s.counter("trace.fast_forwarded",
                           "recorded instructions fast-forwarded outside the measured region "
                           "(workload.fast_forward): not given to the core")) {
    for (size_t c = 0; c < by_class.size(); ++c)
      by_class[c] = &s.counter(std::string("trace.syscalls.") + kSyscallClassNames[c],
                               std::string("recorded system calls of class ") + kSyscallClassNames[c] +
                                   " (not modelled; each takes workload.syscall_time." +
                                   kSyscallClassNames[c] + ")");
  }
};

// What the threads of one recorded process share.
struct TraceProcess {
  std::shared_ptr<const TraceFile> file;
  // Fast-forward: the pages whose first read (bit 0), first write (bit 1) and first instruction
  // fetch (bit 2) have reached the core since the process last changed its mappings.
  std::unordered_map<uint64_t, uint8_t> touched;
  uint64_t touched_gen = 0;  // changes when `touched` is cleared
  bool gated = false;        // several threads: their system calls pass a gate in recorded order
  uint64_t gate_key = 0;
  uint64_t brk = 0;          // the program break after the last brk() (0: not yet known)
  std::map<uint32_t, int64_t> sim_pid;  // recorded child pid -> the simulated child's pid
  // Threads a NEWTHREAD created, until the Clone's thread_program() takes them: by the record's
  // order number, the cursor where the thread's records begin.
  std::map<uint64_t, TraceCursor> new_threads;
  unsigned threads_created = 0;
};

// What every program of the recording shares: whether it runs in detail now.
struct TraceRun {
  VdsoParams vdso;            // the vDSO's time calls, as the built-in benchmark's clock_gettime()
  bool fast_forward = false;  // workload.fast_forward, and the recording has a region
  bool in_region = false;     // (as the programs emit the region's markers)
  bool detail() const { return !fast_forward || in_region; }
};

class TraceProgram : public StepProgram {
 public:
  TraceProgram(std::shared_ptr<TraceProcess> proc, TraceCursor cur, TraceCounters* ctr, TraceRun* run)
      : proc_(std::move(proc)), cur_(std::move(cur)), ctr_(ctr), mode_(run) {}

  void syscall_return(int64_t ret) override {
    StepProgram::syscall_return(ret);
    if (pending_fork_) {
      proc_->sim_pid[pending_fork_] = ret;
      pending_fork_ = 0;
    }
  }
  double progress() const override { return cur_.progress(); }
  uint64_t gate_key() const override { return proc_->gated ? proc_->gate_key : 0; }

 protected:
  bool step() override;

 private:
  void emit_access(UopKind k, uint64_t ip, uint64_t addr, uint64_t size, uint16_t flags = 0);
  // One access micro-op (access_uop()).
  void push_access(UopKind k, uint64_t addr, uint8_t size, uint64_t ip, uint16_t flags = 0) {
    Uop u = access_uop(k, addr, size, 0, ip);
    u.flags = flags;
    push(u);
  }
  void emit_ordered(const TraceRecord& r);
  void sys(Sys s, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0);
  void syscall_record(const TraceRecord& r);

  // A string instruction's iterations (REP STOS/MOVS: VEX runs them one at a time, each an access
  // record at the same instruction address, nothing between them), gathered within one page.
  struct StringRun {
    uint64_t ip = kNoIp;
    uint64_t start[2] = {}, len[2] = {};  // [0] loads, [1] stores
    uint64_t count[2] = {};
    uint8_t size[2] = {};
    bool active() const { return count[0] || count[1]; }
  };
  bool extend_run(UopKind k, const TraceRecord& r);
  void flush_run();
  void emit_run_part(UopKind k, uint64_t ip, uint64_t start, uint64_t len, uint64_t count, uint8_t size);
  // A REP record's iterations, a page of them a step (rep_.left bytes still to move).
  struct Rep {
    uint64_t ip = 0, dst = 0, src = 0, left = 0;
    uint8_t size = 1;
    bool movs = false;
  };
  Rep rep_;
  void rep_step();
  StringRun run_;

  std::shared_ptr<TraceProcess> proc_;
  TraceCursor cur_;
  TraceCounters* ctr_;
  TraceRun* mode_;
  // Fast-forward: whether an access is a page's first of its kind, which the kernel must see.
  enum class Touch : uint8_t { read = 1, write = 2, fetch = 4 };
  bool first_touch(uint64_t addr, uint64_t size, Touch kind);
  struct Memo {
    uint64_t gen = ~uint64_t(0), page = 0;
    uint8_t bits = 0;
  };
  Memo memo_[2];  // [0] data, [1] code
  uint64_t ip_ = kNoIp;
  bool have_pending_ = false;      // an ordered record whose gate has been asked for
  TraceRecord rec_;                // (host speed: the record read, not zeroed for each one)
  TraceRecord pending_;
  uint32_t pending_fork_ = 0;      // a Fork's recorded child pid, until its result arrives
  bool exited_ = false;
};

void TraceProgram::sys(Sys s, uint64_t a0, uint64_t a1, uint64_t a2) {
  // What the process has touched may fault again after a change of its mappings or a fork.
  if (s != Sys::None && s != Sys::Wait && s != Sys::Clone) {
    proc_->touched.clear();
    ++proc_->touched_gen;
  }
  Uop u = syscall_uop(ip_, s, a0, a1, a2);
  u.flags |= kUopReplayed;
  if (proc_->gated) u.flags |= kUopOrdered;
  push(u);
}

void TraceProgram::emit_access(UopKind k, uint64_t ip, uint64_t addr, uint64_t size, uint16_t flags) {
  // An access that crosses a page is two: the core translates each part's page.
  const uint64_t first = std::min(size, kPage - (addr & (kPage - 1)));
  push_access(k, addr, uint8_t(first), ip, flags);
  if (first < size) push_access(k, addr + first, uint8_t(size - first), ip, flags);
}

bool TraceProgram::first_touch(uint64_t addr, uint64_t size, Touch kind) {
  const uint8_t bit = uint8_t(kind);
  // (Host speed: the last data page and the last code page asked about, while `touched` holds.)
  const bool code = kind == Touch::fetch;
  const uint64_t first_page = addr & ~(kPage - 1);
  Memo& m = memo_[code];
  if (m.gen == proc_->touched_gen && m.page == first_page && (m.bits & bit) &&
      ((addr + size - 1) & ~(kPage - 1)) == first_page)
    return false;
  bool first = false;
  for (uint64_t pg = addr & ~(kPage - 1); pg < addr + size; pg += kPage) {
    uint8_t& t = proc_->touched[pg];
    first |= !(t & bit);
    t |= bit;
    m = Memo{proc_->touched_gen, pg, t};
  }
  return first;
}

// Whether `r` continues the run (same instruction, the next bytes, the same page), or starts one.
bool TraceProgram::extend_run(UopKind k, const TraceRecord& r) {
  const int i = k == UopKind::Store;
  const uint64_t page = ~(kPage - 1);
  if (r.n > 8) return false;
  if (!run_.active()) {
    run_.ip = r.ip;
  } else if (r.ip != run_.ip) {
    return false;
  }
  if (run_.count[i]) {
    const uint64_t next = run_.start[i] + run_.len[i];
    if (r.addr != next || r.n != run_.size[i] || (run_.start[i] & page) != ((r.addr + r.n - 1) & page)) return false;
    run_.len[i] += r.n;
  } else {
    if ((r.addr & page) != ((r.addr + r.n - 1) & page)) return false;
    run_.start[i] = r.addr;
    run_.len[i] = r.n;
    run_.size[i] = uint8_t(r.n);
  }
  ++run_.count[i];
  return true;
}

// One access as it is; a string instruction's bytes as the fast-string microcode moves them
// (SDM Vol. 1 §7.3.9.3, docs/x86-memory-path.md §2): the unaligned head and tail in pieces of the
// instruction's element size, every whole 64-byte line in one access, the stores claiming their
// lines without reading them (kUopFullLine, as the built-in memset pattern's `rep stosb`).
void TraceProgram::emit_run_part(UopKind k, uint64_t ip, uint64_t start, uint64_t len, uint64_t count,
                                 uint8_t size) {
  if (count == 1) {
    emit_access(k, ip, start, len);
    return;
  }
  const uint64_t end = start + len;
  uint64_t a = start;
  auto piece = [&](uint64_t upto) {
    while (a < upto) {
      const uint64_t n = std::min<uint64_t>(size, upto - a);
      push_access(k, a, uint8_t(n), ip);
      a += n;
    }
  };
  const uint64_t first_line = (start + 63) & ~uint64_t(63), last_line = end & ~uint64_t(63);
  if (first_line >= last_line) {
    piece(end);
    return;
  }
  piece(first_line);
  for (; a < last_line; a += 64) {
    push_access(k, a, 64, ip, k == UopKind::Store ? kUopFullLine : 0);
  }
  piece(end);
}

void TraceProgram::flush_run() {
  if (!run_.active()) return;
  if (run_.count[0]) emit_run_part(UopKind::Load, run_.ip, run_.start[0], run_.len[0], run_.count[0], run_.size[0]);
  if (run_.count[1]) emit_run_part(UopKind::Store, run_.ip, run_.start[1], run_.len[1], run_.count[1], run_.size[1]);
  run_ = StringRun{};
}

// The next piece of a REP record: up to the next page boundary of the destination and the
// source, the loads (MOVS) then the stores, as the fast-string microcode moves them; in
// fast-forward only the first touches of those pages.
void TraceProgram::rep_step() {
  Rep& p = rep_;
  uint64_t n = std::min(p.left, kPage - (p.dst & (kPage - 1)));
  if (p.movs) n = std::min(n, kPage - (p.src & (kPage - 1)));
  if (!mode_->detail()) {
    if (p.movs && first_touch(p.src, 1, Touch::read)) push_access(UopKind::Load, p.src, p.size, p.ip);
    if (first_touch(p.dst, 1, Touch::write)) push_access(UopKind::Store, p.dst, p.size, p.ip);
  } else {
    const uint64_t count = n / p.size ? n / p.size : 1;
    if (p.movs) emit_run_part(UopKind::Load, p.ip, p.src, n, count, p.size);
    emit_run_part(UopKind::Store, p.ip, p.dst, n, count, p.size);
  }
  p.dst += n;
  p.src += n;
  p.left -= n;
}

void TraceProgram::syscall_record(const TraceRecord& r) {
  ctr_->syscalls->inc();
  const uint64_t* a = r.a;
  const int64_t res = r.result;
  TraceProcess& p = *proc_;
  switch (r.n) {
    case sysno::mmap: {
      if (is_err(res)) break;
      const int prot = int(a[2] & 7);
      if (a[3] & kMapShared) ctr_->approximated->inc();
      if (a[3] & kMapAnonymous) {
        sys(Sys::MmapFixed, uint64_t(res), a[1], uint64_t(prot));
      } else {
        ctr_->file_maps->inc();
        sys(Sys::MmapFile, uint64_t(res), a[1], uint64_t(prot));
      }
      return;
    }
    case sysno::munmap:
      if (is_err(res)) break;
      sys(Sys::Munmap, a[0], a[1]);
      return;
    case sysno::mprotect:
      if (is_err(res)) break;
      sys(Sys::Mprotect, a[0], a[1], a[2] & 7);
      return;
    case sysno::madvise:
      if (is_err(res)) break;
      sys(Sys::Madvise, a[0], a[1], a[2]);
      return;
    case sysno::brk: {
      const uint64_t now = uint64_t(res), before = p.brk;
      p.brk = now;
      if (!before || page_up(now) == page_up(before)) break;  // learnt, or within the same page
      if (now > before) {
        sys(Sys::MmapFixed, page_up(before), page_up(now) - page_up(before), 3 /* rw */);
      } else {
        sys(Sys::Munmap, page_up(now), page_up(before) - page_up(now));
      }
      return;
    }
    case sysno::mremap: {
      // mremap(old, old_len, new_len, flags, new_addr) -> where it is now
      if (is_err(res)) break;
      ctr_->approximated->inc();
      const uint64_t old = a[0], old_len = page_up(a[1]), new_len = page_up(a[2]), at = uint64_t(res);
      if (at == old && new_len > old_len) {
        sys(Sys::MmapFixed, old + old_len, new_len - old_len, 3);
      } else if (at == old && new_len < old_len) {
        sys(Sys::Munmap, old + new_len, old_len - new_len);
      } else if (at != old) {
        // Two system calls for one: the first is unordered (only the last one passes the gate).
        Uop u = syscall_uop(ip_, Sys::Munmap, old, old_len);
        u.flags |= kUopReplayed;
        push(u);
        sys(Sys::MmapFixed, at, new_len, 3);
      } else {
        break;
      }
      return;
    }
    case sysno::execve:
      ctr_->approximated->inc();
      exited_ = true;
      sys(Sys::Exit, 0);
      return;
    case sysno::wait4:
    case sysno::waitid: {
      if (res <= 0) break;
      auto it = p.sim_pid.find(uint32_t(res));
      if (it == p.sim_pid.end()) break;
      sys(Sys::Wait, uint64_t(it->second));
      return;
    }
    default: break;
  }
  const bool memory = r.n == sysno::mmap || r.n == sysno::munmap || r.n == sysno::mprotect ||
                      r.n == sysno::madvise || r.n == sysno::brk || r.n == sysno::mremap ||
                      r.n == sysno::wait4 || r.n == sysno::waitid;
  if (memory) {  // (failed, or changed nothing, when recorded): entry and exit only
    sys(Sys::None, kNoClass);
    return;
  }
  ctr_->not_modelled->inc();
  const SyscallClass c = syscall_class(r.n);
  ctr_->by_class[size_t(c)]->inc();
  sys(Sys::None, uint64_t(c) + 1);
}

// The ordered record `r` as its system call (its gate, if any, has opened).
void TraceProgram::emit_ordered(const TraceRecord& r) {
  switch (r.op) {
    case MTR_SYSCALL: syscall_record(r); break;
    case MTR_NEWTHREAD: {
      const unsigned index = ++proc_->threads_created;
      proc_->new_threads.emplace(r.order, cur_.for_thread(uint32_t(r.n)));
      sys(Sys::Clone, index, proc_->file->pid(), r.order);
      break;
    }
    case MTR_FORK:
      pending_fork_ = uint32_t(r.n);
      sys(Sys::Fork, r.n);
      break;
    case MTR_EXIT:
      exited_ = true;
      sys(Sys::Exit, uint64_t(r.result));
      break;
    default: panic("trace replay: record {:#x} is not an ordered one", r.op);
  }
}

bool TraceProgram::step() {
  if (rep_.left) {
    rep_step();
    return true;
  }
  if (have_pending_) {  // the gate has opened
    have_pending_ = false;
    emit_ordered(pending_);
    return true;
  }
  if (exited_) return false;
  // Up to a few dozen micro-ops a step; a system call ends the step (its result comes first).
  for (unsigned budget = 0; budget < 32; ++budget) {
    TraceRecord& r = rec_;
    const bool more = cur_.next(r);
    // A string instruction's run ends at any other record (its micro-ops come first).
    if (!more || (r.op != MTR_LOAD && r.op != MTR_STORE)) flush_run();
    if (!more) {
      // The thread's records end without its exit: another thread's exit_group() ended it.
      exited_ = true;
      Uop u = syscall_uop(ip_, Sys::Exit, 0);
      u.flags |= kUopReplayed;
      push(u);
      return true;
    }
    if (r.op == MTR_REP) {
      ip_ = r.ip;
      ctr_->instructions->inc(r.a[1]);
      ctr_->accesses->inc(r.a[1]);
      if (mode_->detail()) {
        if (r.n == MTR_REP_MOVS) ctr_->accesses->inc(r.a[1]);
      } else {
        ctr_->skipped->inc(r.a[1]);
      }
      if (first_touch(r.ip, 1, Touch::fetch) && !mode_->detail()) {
        Uop u;
        u.kind = UopKind::Alu;
        u.ip = r.ip;
        push(u);
      }
      rep_ = Rep{r.ip, r.addr, r.a[0], r.a[1] * r.a[2], uint8_t(r.a[2]), r.n == MTR_REP_MOVS};
      rep_step();
      return true;
    }
    if (!mode_->detail()) {
      // Fast-forward: only what the kernel must see reaches the core, each page's first read
      // and first write (and the system calls, regions and thread events, below).
      switch (r.op) {
        case MTR_EXEC:
        case MTR_FENCE:
        case MTR_LOAD:
        case MTR_STORE:
        case MTR_ATOMIC: {
          ip_ = r.ip;
          const uint64_t n = r.op == MTR_EXEC ? r.n : 1;
          ctr_->instructions->inc(n);
          // The first fetch from a code page (one micro-op there: the front end translates it).
          const bool fetch = first_touch(r.ip, 1, Touch::fetch);
          const bool access = r.op != MTR_EXEC && r.op != MTR_FENCE;
          if (access) ctr_->accesses->inc();
          const bool write = r.op != MTR_LOAD;
          if (access && first_touch(r.addr, r.n, write ? Touch::write : Touch::read)) {
            emit_access(write ? UopKind::Store : UopKind::Load, r.ip, r.addr, r.n);
            ctr_->skipped->inc(n - 1);
          } else if (fetch) {
            Uop u;
            u.kind = UopKind::Alu;
            u.ip = r.ip;
            push(u);
            ctr_->skipped->inc(n - 1);
          } else {
            ctr_->skipped->inc(n);
          }
          continue;
        }
        default: break;
      }
    }
    switch (r.op) {
      case MTR_EXEC: {
        ip_ = r.ip;
        ctr_->instructions->inc(r.n);
        // Its ALU micro-ops end the step.
        Uop u;
        u.kind = UopKind::Alu;
        u.ip = ip_;
        push_last_n(u, r.n);
        return true;
      }
      case MTR_LOAD:
      case MTR_STORE: {
        ip_ = r.ip;
        ctr_->instructions->inc();
        ctr_->accesses->inc();
        const UopKind k = r.op == MTR_LOAD ? UopKind::Load : UopKind::Store;
        if (extend_run(k, r)) break;
        flush_run();
        if (!extend_run(k, r)) emit_access(k, r.ip, r.addr, r.n);
        break;
      }
      case MTR_ATOMIC: {
        ip_ = r.ip;
        ctr_->instructions->inc();
        ctr_->accesses->inc();
        emit_access(UopKind::Load, r.ip, r.addr, r.n);
        emit_access(UopKind::Store, r.ip, r.addr, r.n, kUopDependsOnPrev);
        Uop f;
        f.kind = UopKind::Lfence;
        f.ip = r.ip;
        push(f);
        break;
      }
      case MTR_FENCE: {
        ip_ = r.ip;
        ctr_->instructions->inc();
        Uop f;
        f.ip = r.ip;
        switch (r.n) {
          case MTR_FENCE_LFENCE:
          case MTR_FENCE_MFENCE:
          case MTR_FENCE_CPUID: f.kind = UopKind::Lfence; break;
          case MTR_FENCE_RDTSCP: f.kind = UopKind::Rdtscp; break;
          default: f.kind = UopKind::Alu; break;  // SFENCE, RDTSC
        }
        push(f);
        break;
      }
      case MTR_REGION: {
        mode_->in_region = r.n != 0;
        Uop m;
        m.kind = UopKind::Marker;
        m.mark = r.n ? Mark::RegionBegin : Mark::RegionEnd;
        if (r.n) {
          m.addr = r.a[1] ? r.a[0] : 0;
          m.value = r.a[1] ? r.a[1] : kWholeUserSpace;
        }
        push(m);
        return true;  // (what follows is counted after it)
      }
      default:
        if (trace_record_vdso(r)) {
          // gettimeofday()/clock_gettime() under Valgrind: natively the vDSO's code, no kernel
          // entry. Its micro-ops as the built-in benchmark's clock_gettime() (workload.cpp): the
          // call, a chain of vdso.uops_before, RDTSCP, vdso.uops_after, at the call's address (the
          // recording has no vDSO text, nor vvar page to load from).
          ctr_->syscalls->inc();
          ctr_->vdso->inc();
          if (!mode_->detail()) break;
          const VdsoParams& v = mode_->vdso;
          auto alu = [&](uint16_t lat) {
            Uop u;
            u.kind = UopKind::Alu;
            u.latency = lat;
            u.ip = ip_;
            u.flags |= kUopDependsOnPrev;
            push(u);
          };
          if (v.call_cycles) alu(uint16_t(v.call_cycles));
          for (unsigned k = 0; k < v.uops_before; ++k) alu(1);
          Uop t;
          t.kind = UopKind::Rdtscp;
          t.ip = ip_;
          push(t);
          for (unsigned k = 0; k < v.uops_after; ++k) alu(1);
          break;
        }
        if (!trace_record_ordered(r)) {
          // fork/clone/exit's SYSCALL records (their FORK/NEWTHREAD/EXIT follow), a failed fork
          ctr_->syscalls->inc();
          break;
        }
        if (proc_->gated) {
          // Wait for every earlier ordered system call of the process (r.order of them), then
          // emit this one with what they left (the next step).
          Uop g = syscall_uop(ip_, Sys::Gate, r.order);
          push(g);
          pending_ = r;
          have_pending_ = true;
        } else {
          emit_ordered(r);
        }
        return true;
    }
  }
  return true;
}

class TraceWorkload : public Workload {
 public:
  TraceWorkload(const WorkloadParams& p, Stats* stats) : p_(p), rec_(p.trace) {
    if (!stats) panic("the trace workload needs the statistics");
    ctr_ = std::make_unique<TraceCounters>(*stats);
    root_ = rec_.process(rec_.root_pid());
    if (root_->parent_pid() != 0)
      fatal("{}: the first process's file names a parent (pid {})", root_->path(), root_->parent_pid());
    // Every process's file is checked now, before the simulation starts.
    uint64_t regions = root_->summary().regions;
    for (std::vector<uint32_t> todo = root_->summary().forks; !todo.empty();) {
      auto f = rec_.process(todo.back());
      todo.pop_back();
      todo.insert(todo.end(), f->summary().forks.begin(), f->summary().forks.end());
      regions += f->summary().regions;
    }
    if (regions > 1)
      fatal("workload.trace = {}: {} processes each mark a measured region; mmusim measures one per run",
            rec_.dir(), regions);
    if (rec_.detail_region() && !p.fast_forward)
      fatal("workload.fast_forward = false is impossible with workload.trace = {}: it was recorded "
            "with --detail region (only first touches outside the measured region); record it with "
            "--detail all",
            rec_.dir());
    // Without a region there is nothing to fast-forward to: the whole run is in detail.
    run_.fast_forward = p.fast_forward && regions == 1;
    run_.vdso = p.vdso;
    auto lg = log::get("workload");
    const auto& s = root_->summary();
    lg->info("trace {}: `{}`, pid {}, {} thread(s), {} instructions, {} accesses, {} syscalls, {} fork(s)",
             rec_.dir(), rec_.command(), root_->pid(), s.threads.size(), s.instructions, s.accesses,
             s.syscalls, s.forks.size());
  }
  std::string name() const override { return "trace"; }
  ThpSetup thp_setup() const override { return ThpSetup{}; }  // (workload.thp_setup = config)
  std::vector<ImageMapping> image() const override {
    std::vector<ImageMapping> v;
    for (const TraceRecord& m : root_->summary().maps) {
      ImageMapping im{};
      im.start = m.a[0];
      im.len = m.a[1];
      im.prot = int(m.a[2]);
      if (m.a[3] == MTR_MAP_ANON) {
        im.kind = ImageMapping::Kind::anon;
        im.populated = 0;
        im.what = "recorded anonymous mapping";
      } else {
        im.kind = ImageMapping::Kind::file;
        im.populated = m.a[1];
        im.what = m.a[3] == MTR_MAP_FILE_SHARED ? "recorded shared mapping (replayed private)"
                                                 : "recorded file mapping";
      }
      if (im.len) v.push_back(im);
    }
    // The main thread's stack (the highest anonymous mapping) grows down as the program uses it
    // (VM_GROWSDOWN, expand_stack(); Valgrind's own stack extension under the recorder): it is
    // mapped down to the stack limit (8 MiB, RLIMIT_STACK's default and Valgrind's
    // --main-stacksize), or to the mapping below it.
    constexpr uint64_t kStackLimit = 8ull << 20;
    ImageMapping* stack = nullptr;
    for (ImageMapping& m : v)
      if (m.kind == ImageMapping::Kind::anon && (!stack || m.start > stack->start)) stack = &m;
    if (stack && stack->len < kStackLimit) {
      const uint64_t top = stack->start + stack->len;
      uint64_t floor = top - kStackLimit;
      for (const ImageMapping& m : v)
        if (&m != stack && m.start + m.len <= stack->start) floor = std::max(floor, m.start + m.len);
      stack->start = floor;
      stack->len = top - floor;
      stack->what = "recorded main-thread stack (to the stack limit)";
    }
    return v;
  }
  std::unique_ptr<Program> main_program() override { return program_of(root_); }
  std::unique_ptr<Program> child_program(unsigned, uint64_t tag) override {
    return program_of(rec_.process(uint32_t(tag)));
  }
  // `order`: the NEWTHREAD record's order number in its process's file.
  std::unique_ptr<Program> thread_program(unsigned, uint64_t pid, uint64_t order) override {
    auto it = procs_.find(uint32_t(pid));
    MMUSIM_CHECK(it != procs_.end(), "trace: a thread of process {} that is not running", pid);
    auto& pending = it->second->new_threads;
    auto c = pending.find(order);
    MMUSIM_CHECK(c != pending.end(), "trace: process {} created no thread at record {}", pid, order);
    TraceCursor cur = c->second;
    pending.erase(c);
    return std::make_unique<TraceProgram>(it->second, std::move(cur), ctr_.get(), &run_);
  }
  uint64_t region_bytes() const override { return 0; }

 private:
  std::unique_ptr<Program> program_of(std::shared_ptr<const TraceFile> f) {
    auto proc = std::make_shared<TraceProcess>();
    proc->file = f;
    proc->gated = f->summary().threads.size() > 1;
    proc->gate_key = uint64_t(f->pid()) + 1;  // (nonzero, one per process)
    procs_[f->pid()] = proc;
    return std::make_unique<TraceProgram>(proc, TraceCursor(f, f->summary().threads[0]), ctr_.get(), &run_);
  }
  WorkloadParams p_;
  Recording rec_;
  std::shared_ptr<const TraceFile> root_;
  std::map<uint32_t, std::shared_ptr<TraceProcess>> procs_;
  std::unique_ptr<TraceCounters> ctr_;
  TraceRun run_;
};

}  // namespace

std::unique_ptr<Workload> make_trace_workload(const WorkloadParams& p, Stats* stats) {
  if (p.trace.empty())
    fatal("workload.name = trace needs workload.trace = DIR (a recording of `mmusim record --out DIR`)");
  return std::make_unique<TraceWorkload>(p, stats);
}

}  // namespace mmusim::wl
