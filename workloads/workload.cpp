// SPDX-License-Identifier: GPL-2.0-only
// The built-in workloads: fork-reuse (the reference experiments' common setup) and fork-time.
#include "workloads/workload.hpp"

#include <vector>

#include "base/error.hpp"
#include "base/pgformat.hpp"
#include "workloads/image.hpp"
#include "workloads/rng.hpp"

namespace mmusim::wl {

namespace {
// The base page and the PMD block (base/pgformat.hpp).
constexpr uint64_t kPage = pg::kBasePageSize;
constexpr uint64_t kPmd = pg::kBaseGeometry.level_size(1);

// Instruction addresses of the benchmark's loop (in the program image's text, workloads/image.hpp:
// the core's front end translates their pages), for traces and fault reports too.
constexpr uint64_t kIpPopulate = kTextStart;
constexpr uint64_t kIpStore = kTextStart + 0x100;
constexpr uint64_t kIpLoop = kTextStart + 0x104;
constexpr uint64_t kIpLfence = kTextStart + 0x108;
constexpr uint64_t kIpLoad = kTextStart + 0x10c;
constexpr uint64_t kIpResult = kTextStart + 0x110;
constexpr uint64_t kIpClockGettime = kLibcClockPage + 0xe40;  // glibc's __clock_gettime
constexpr uint64_t kIpVdso = kVdsoText + 0x900;               // the vDSO's __vdso_clock_gettime
constexpr uint64_t kIpSyscall = kTextStart + 0x200;

Uop syscall(Sys s, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0) {
  return syscall_uop(kIpSyscall, s, a0, a1, a2);
}
Uop store(uint64_t addr, uint8_t size, uint64_t value, uint64_t ip) {
  return access_uop(UopKind::Store, addr, size, value, ip);
}
Uop load(uint64_t addr, uint8_t size, uint64_t ip) { return access_uop(UopKind::Load, addr, size, 0, ip); }
Uop alu(uint64_t ip, uint16_t lat = 1) { return alu_uop(ip, lat); }
Uop chained(Uop u) {
  u.flags |= kUopDependsOnPrev;
  return u;
}
Uop marker(Mark m, uint64_t a0 = 0, uint64_t a1 = 0) { return marker_uop(m, a0, a1); }

// The benchmark's aligned allocation of the region, one system call a step: an mmap with room to
// align it to 2 MiB, then the MADV_HUGEPAGE its folio kind wants (none for 4K pages) on the
// 2 MiB-aligned base. step() gives the next call (false when there is none left: `base` is set).
struct RegionAlloc {
  unsigned stage = 0;
  uint64_t base = 0;
  bool step(const WorkloadParams& p, int64_t last_ret, Uop* u) {
    if (p.backing != Backing::anon) {
      // mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE or MAP_SHARED, fd, 0) of the file
      // (Workload::files(), number 1): the kernel places it (thp_get_unmapped_area(): 2 MiB-aligned
      // for offset 0), the page cache decides the folio sizes (disk.fs). Then, with
      // workload.file_advice = hugepage, madvise(MADV_HUGEPAGE) of the whole mapping.
      if (stage == 0) {
        stage = 1;
        const uint64_t flags = mmap_file_extra(p.backing == Backing::file_shared ? kMapShared : kMapPrivate, 1, 0);
        *u = syscall(Sys::Mmap, p.size, kProtRead | kProtWrite, flags);
        return true;
      }
      if (stage == 1) {
        stage = 2;
        base = uint64_t(last_ret);
        if (p.file_advice == WorkloadParams::FileAdvice::hugepage) {
          *u = syscall(Sys::Madvise, base, p.size, kMadvHugepage);
          return true;
        }
      }
      return false;
    }
    if (stage == 0) {
      stage = 1;
      *u = syscall(Sys::Mmap, p.size + kPmd, kProtRead | kProtWrite, kMapPrivateAnon);
      return true;
    }
    if (stage == 1) {
      stage = 2;
      base = (uint64_t(last_ret) + kPmd - 1) & ~(kPmd - 1);
      if (thp_setup_for(p.folio).madvise_region) {
        *u = syscall(Sys::Madvise, base, p.size, kMadvHugepage);
        return true;
      }
    }
    return false;
  }
};

// A program that allocates its region first (RegionAlloc): alloc_step() pushes the next call and
// is false once the region is there, at base_.
class RegionProgram : public StepProgram {
 protected:
  bool alloc_step(const WorkloadParams& p) {
    Uop u;
    if (alloc_.step(p, last_ret_, &u)) {
      push(u);
      return true;
    }
    base_ = alloc_.base;
    return false;
  }
  uint64_t base_ = 0;

 private:
  RegionAlloc alloc_;
};

class ExitProgram : public StepProgram {
 protected:
  bool step() override {
    if (done_) return false;
    done_ = true;
    push(syscall(Sys::Exit, 0));
    return true;
  }

 private:
  bool done_ = false;
};

// fork-reuse: map the region, populate it with writes (folios of the configured size), fork, the
// child exits at once, the parent waits, then runs the measured pass.
class ForkReuseProgram : public RegionProgram {
 public:
  explicit ForkReuseProgram(const WorkloadParams& p, bool fork_time)
      : p_(p), fork_time_(fork_time), npages_(p.size / kPage) {}
  // Worker thread `index` of the measured pass: waits at the start barrier, does its share, exits.
  ForkReuseProgram(const WorkloadParams& p, unsigned index, uint64_t base, uint64_t results)
      : p_(p), fork_time_(false), npages_(p.size / kPage), thread_(index) {
    base_ = base;
    results_ = results;
    phase_ = Phase::Barrier;
  }
  double progress() const override {
    if (phase_ < Phase::Measure && p_.measure == WorkloadParams::Measure::pass) return 0;
    if (phase_ < Phase::Populate) return 0;
    if (phase_ > Phase::Measure) return 1;
    if (i_end_ == 0) return 0;
    return double(std::min(i_, i_end_)) / double(i_end_);
  }

 protected:
  enum class Phase {
    MapRegion, MapResults, Populate, SplitPmd, Fork, Wait, Threads, Barrier, RegionBegin,
    Measure, Join, Msync, RegionEnd, ForkTimeWait, Exit, Done
  };

  bool step() override {
    switch (phase_) {
      case Phase::MapRegion:
        if (alloc_step(p_)) return true;
        phase_ = Phase::MapResults;
        return step();
      case Phase::MapResults:
        phase_ = Phase::Populate;
        if (p_.pattern == Pattern::seq_byte_clock && !fork_time_) {
          // malloc() of the latency array: an mmap'd chunk whose data starts after the header.
          uint64_t bytes = p_.result_offset + npages_ * p_.result_entry_bytes;
          push(syscall(Sys::Mmap, (bytes + kPage - 1) & ~(kPage - 1), kProtRead | kProtWrite, kMapPrivateAnon));
          results_pending_ = true;
          return true;
        }
        return step();
      case Phase::Populate:
        if (results_pending_) {
          results_ = uint64_t(last_ret_) + p_.result_offset;
          results_pending_ = false;
        }
        if (p_.measure == WorkloadParams::Measure::populate) {
          // The measured region is the population itself (first-touch faults that allocate the
          // folios), with the pattern's instructions; no fork follows.
          begin_measure();
          i_ = 0;
          i_end_ = iterations_;  // the population is one thread's
          push(marker(Mark::RegionBegin, base_, p_.size));
          phase_ = Phase::Measure;
          return true;
        }
        if (i_ < npages_) {
          push(store(base_ + i_ * kPage, 1, 0x5a, kIpPopulate));
          push(alu(kIpPopulate + 4));
          ++i_;
          return true;
        }
        i_ = 0;
        phase_ = p_.folio == FolioKind::k2M_pte ? Phase::SplitPmd : Phase::Fork;
        return step();
      case Phase::SplitPmd:
        // Map the 2 MiB THPs by PTEs as the kernel's cow.c does: write-protect one page of each
        // THP and give the permission back; the PMD is split, the folio stays whole.
        if (i_ < 2 * (p_.size / kPmd)) {
          uint64_t blk = base_ + (i_ / 2) * kPmd + kPage;
          push(syscall(Sys::Mprotect, blk, kPage, (i_ & 1) ? (kProtRead | kProtWrite) : kProtRead));
          ++i_;
          return true;
        }
        i_ = 0;
        phase_ = Phase::Fork;
        return step();
      case Phase::Fork:
        if (fork_time_) {
          push(marker(Mark::RegionBegin, base_, p_.size));
          phase_ = Phase::ForkTimeWait;
          push(syscall(Sys::Fork));
          return true;
        }
        phase_ = Phase::Wait;
        push(syscall(Sys::Fork));
        return true;
      case Phase::ForkTimeWait:
        push(marker(Mark::RegionEnd));
        push(syscall(Sys::Wait, uint64_t(last_ret_)));
        phase_ = Phase::Exit;
        return true;
      case Phase::Wait:
        push(syscall(Sys::Wait, uint64_t(last_ret_)));
        phase_ = Phase::Threads;
        return true;
      case Phase::Threads:
        // The threads of the measured pass, each pinned to its CPU, all started behind a barrier.
        if (tids_.size() + 1 < p_.threads) {
          if (clone_pending_) tids_.push_back(last_ret_);
          if (tids_.size() + 1 < p_.threads) {
            push(syscall(Sys::Clone, tids_.size() + 1, base_, results_));
            clone_pending_ = true;
            return true;
          }
        }
        phase_ = p_.threads > 1 ? Phase::Barrier : Phase::RegionBegin;
        return step();
      case Phase::Barrier:
        // All threads start the pass together; the measured region begins when the barrier opens.
        if (!thread_) {
          Uop m = marker(Mark::RegionBegin, base_, p_.size);
          m.flags |= kUopAtBarrier;
          push(m);
        }
        push(syscall(Sys::Barrier, 1, p_.threads));
        phase_ = Phase::Measure;
        begin_measure();
        return true;
      case Phase::RegionBegin:
        begin_measure();
        push(marker(Mark::RegionBegin, base_, p_.size));
        phase_ = Phase::Measure;
        return true;
      case Phase::Measure:
        if (i_ < i_end_) {
          emit_iteration(i_);
          i_ += step_;
          return true;
        }
        phase_ = thread_ ? Phase::Exit : Phase::Join;
        return step();
      case Phase::Join:
        if (joined_ < tids_.size()) {
          push(syscall(Sys::Wait, uint64_t(tids_[joined_++])));
          return true;
        }
        phase_ = Phase::Msync;
        return step();
      case Phase::Msync:
        phase_ = Phase::RegionEnd;
        if (p_.msync != WorkloadParams::Msync::none) {
          push(syscall(Sys::Msync, base_, p_.size, p_.msync == WorkloadParams::Msync::sync ? kMsSync : kMsAsync));
          return true;
        }
        return step();
      case Phase::RegionEnd:
        push(marker(Mark::RegionEnd));
        phase_ = Phase::Exit;
        return true;
      case Phase::Exit:
        push(syscall(Sys::Exit, 0));
        phase_ = Phase::Done;
        return true;
      case Phase::Done:
        return false;
    }
    return false;
  }

 private:
  void begin_measure() {
    switch (p_.pattern) {
      case Pattern::memset: iterations_ = p_.size / 64; break;
      case Pattern::stride: iterations_ = p_.size / p_.stride; break;
      case Pattern::read_then_store: iterations_ = p_.size / (16 * kPage); break;
      default: iterations_ = npages_; break;
    }
    // Each thread takes its share of the iterations (of the random order, for random-byte): a
    // block of them, or every n-th (interleave: the threads walk the region side by side).
    const unsigned n = fork_time_ ? 1 : p_.threads;
    step_ = 1;
    if (p_.thread_split == WorkloadParams::ThreadSplit::interleave && n > 1) {
      i_ = thread_;
      i_end_ = iterations_;
      step_ = n;
    } else {
      i_ = iterations_ * thread_ / n;
      i_end_ = iterations_ * (thread_ + 1) / n;
    }
    if (p_.pattern == Pattern::random_byte) {
      order_.resize(npages_);
      for (uint64_t k = 0; k < npages_; ++k) order_[k] = uint32_t(k);
      Rng rng{p_.seed ^ 0x6d6d7573696dull};
      for (uint64_t k = npages_; k > 1; --k) std::swap(order_[k - 1], order_[rng.below(k)]);
    }
  }

  void loop_overhead() {
    for (unsigned k = 0; k < p_.loop_uops; ++k) push(alu(kIpLoop + 4 * k));
  }

  void emit_iteration(uint64_t i) {
    const uint8_t v = uint8_t(i) | 1;
    switch (p_.pattern) {
      case Pattern::seq_byte:
        push(store(base_ + i * kPage, 1, v, kIpStore));
        loop_overhead();
        break;
      case Pattern::seq_byte_lfence: {
        push(store(base_ + i * kPage, 1, v, kIpStore));
        Uop f;
        f.kind = UopKind::Lfence;
        f.ip = kIpLfence;
        push(f);
        loop_overhead();
        break;
      }
      case Pattern::seq_byte_clock: {
        push(store(base_ + i * kPage, 1, v, kIpStore));
        // clock_gettime(CLOCK_MONOTONIC): glibc's wrapper calls the vDSO through a pointer.
        // The vDSO's body is one dependency chain: the seqcount and vvar loads, RDTSCP, then
        // (cycles - last) * mult >> shift and the timespec (lib/vdso/gettimeofday.c do_hres()).
        // The call (glibc's wrapper, the indirect call, the return) is one link of it, on glibc's
        // text page.
        if (p_.vdso.call_cycles) push(chained(alu(kIpClockGettime, uint16_t(p_.vdso.call_cycles))));
        for (unsigned k = 0; k < p_.vdso.uops_before; ++k) {
          if (k == 0) {
            // The first: do_hres()'s READ_ONCE(vd->seq), a load from the vvar page (its address
            // is RIP-relative, but the model's chain has one predecessor per micro-op: it stays
            // a link, of its load latency instead of an ALU's cycle).
            push(chained(load(kVdsoData, 4, kIpVdso)));
            continue;
          }
          push(chained(alu(kIpVdso + 4 * k)));
        }
        Uop r;
        r.kind = UopKind::Rdtscp;
        r.ip = kIpVdso + 0x80;
        push(r);
        for (unsigned k = 0; k < p_.vdso.uops_after; ++k) push(chained(alu(kIpVdso + 0x84 + 4 * k)));
        // results[i] = now - before
        Uop s = store(results_ + i * p_.result_entry_bytes, uint8_t(p_.result_entry_bytes), 0, kIpResult);
        s.flags |= kUopValueFromProgram;  // StepProgram::store_value: now - before
        push(s);
        loop_overhead();
        break;
      }
      case Pattern::memset: {
        // glibc's memset() of a buffer this size on Alder Lake (2.35-2.39): one `rep stosb`, its
        // fast-string stores a line at a time, in order, each claiming its line without reading
        // it (docs/x86-memory-path.md §1-2).
        Uop s = store(base_ + i * 64, 64, 0, kIpStore);
        s.flags |= kUopFullLine;
        push(s);
        break;
      }
      case Pattern::random_byte:
        push(store(base_ + uint64_t(order_[i]) * kPage, 1, v, kIpStore));
        loop_overhead();
        break;
      case Pattern::read_then_store: {
        uint64_t chunk = base_ + i * 16 * kPage;
        for (unsigned k = 0; k < 16; ++k) {
          push(load(chunk + k * kPage, 1, kIpLoad));
          loop_overhead();
        }
        for (unsigned k = 0; k < 16; ++k) {
          push(store(chunk + k * kPage, 1, v, kIpStore));
          loop_overhead();
        }
        break;
      }
      case Pattern::stride:
        push(store(base_ + i * p_.stride, 1, v, kIpStore));
        loop_overhead();
        break;
      case Pattern::seq_read:
        push(load(base_ + i * kPage, 1, kIpLoad));
        loop_overhead();
        break;
    }
  }

  WorkloadParams p_;
  bool fork_time_;
  uint64_t npages_;
  Phase phase_ = Phase::MapRegion;
  uint64_t results_ = 0;
  bool results_pending_ = false;
  uint64_t i_ = 0, i_end_ = 0, iterations_ = 0, step_ = 1;
  std::vector<uint32_t> order_;
  unsigned thread_ = 0;              // 0: the main thread
  std::vector<int64_t> tids_;        // the main thread's worker threads
  bool clone_pending_ = false;
  size_t joined_ = 0;
};

class ForkReuseWorkload : public Workload {
 public:
  ForkReuseWorkload(const WorkloadParams& p, bool fork_time) : p_(p), fork_time_(fork_time) {}
  std::string name() const override { return fork_time_ ? "fork-time" : "fork-reuse"; }
  ThpSetup thp_setup() const override { return thp_setup_for(p_.folio); }
  std::unique_ptr<Program> main_program() override {
    return std::make_unique<ForkReuseProgram>(p_, fork_time_);
  }
  std::unique_ptr<Program> child_program(unsigned, uint64_t) override { return std::make_unique<ExitProgram>(); }
  std::unique_ptr<Program> thread_program(unsigned index, uint64_t base, uint64_t results) override {
    return std::make_unique<ForkReuseProgram>(p_, index, base, results);
  }
  unsigned threads() const override { return p_.threads; }
  uint64_t region_bytes() const override { return p_.size; }
  std::vector<FileSpec> files() const override {
    if (p_.backing == Backing::anon) return {};
    return {FileSpec{"region", p_.file_size ? p_.file_size : p_.size, p_.seed, p_.file_cached}};
  }

 private:
  WorkloadParams p_;
  bool fork_time_;
};

// anon-cow-seq: vm-scalability's case-anon-cow-seq, `usemem -n N --prealloc --prefault SIZE`
// (usemem.c: main -> allocate -> do_tasks; docs/research-haswell-ep.md §8). The parent maps SIZE
// of private anonymous memory and populates it (MAP_POPULATE with FOLL_WRITE: the THPs are
// allocated and zeroed up front), forks workload.processes children and waits for them; each
// child writes the whole area from start to end, one 8-byte word at a time (do_rw_once():
// p[i] = i), so its first store into each huge page is at the page's first byte and takes the
// COW fault there. The measured region runs from before the first fork to the last child's exit
// (usemem times each child from before the forks); bytes written: processes x SIZE. Each child
// reports, as it ends, what usemem prints: SIZE + SIZE / 8 bytes (--prealloc adds an eighth,
// docs/research-haswell-ep.md §8) over its time, and vm-scalability's throughput is their sum
// (lkp-tests stats/vm-scalability adds the processes' KB/s): region.process_bytes_per_second.
class AnonCowSeqParent : public RegionProgram {
 public:
  explicit AnonCowSeqParent(const WorkloadParams& p) : p_(p) {}
  double progress() const override { return phase_ >= Phase::Wait ? 1.0 : 0.0; }

 protected:
  enum class Phase { Map, Populate, Fork, Wait, Done };
  bool step() override {
    switch (phase_) {
      case Phase::Map:
        if (alloc_step(p_)) return true;
        phase_ = Phase::Populate;
        return step();
      case Phase::Populate:
        if (i_ < p_.size / kPage) {
          push(store(base_ + i_ * kPage, 1, 0, kIpPopulate));
          push(alu(kIpPopulate + 4));
          ++i_;
          return true;
        }
        push(marker(Mark::RegionBegin, base_, p_.size));
        phase_ = Phase::Fork;
        return step();
      case Phase::Fork:
        if (forked_) pids_.push_back(last_ret_);
        if (forked_ < p_.processes) {
          push(syscall(Sys::Fork, base_));
          ++forked_;
          return true;
        }
        phase_ = Phase::Wait;
        return step();
      case Phase::Wait:
        // Every child waited for: the region ends, the parent exits.
        if (join_then_exit(kIpSyscall, pids_, waited_)) phase_ = Phase::Done;
        return true;
      case Phase::Done:
        return false;
    }
    return false;
  }

 private:
  WorkloadParams p_;
  Phase phase_ = Phase::Map;
  uint64_t i_ = 0;
  unsigned forked_ = 0;
  size_t waited_ = 0;
  std::vector<int64_t> pids_;
};

// A child of anon-cow-seq: p[i] = i over the area, then exit.
class AnonCowSeqChild : public StepProgram {
 public:
  AnonCowSeqChild(const WorkloadParams& p, uint64_t base) : p_(p), base_(base) {}
  double progress() const override { return double(i_) / double(p_.size / 8); }

 protected:
  bool step() override {
    if (i_ < p_.size / 8) {
      push(store(base_ + i_ * 8, 8, i_, kIpStore));
      for (unsigned k = 0; k < p_.loop_uops; ++k) push(alu(kIpLoop + 4 * k));
      ++i_;
      return true;
    }
    if (exited_) return false;
    exited_ = true;
    push(marker(Mark::ProcessDone, 0, p_.size + p_.size / 8));
    push(syscall(Sys::Exit, 0));
    return true;
  }

 private:
  WorkloadParams p_;
  uint64_t base_;
  uint64_t i_ = 0;
  bool exited_ = false;
};

class AnonCowSeqWorkload : public Workload {
 public:
  explicit AnonCowSeqWorkload(const WorkloadParams& p) : p_(p) {}
  std::string name() const override { return "anon-cow-seq"; }
  ThpSetup thp_setup() const override { return thp_setup_for(p_.folio); }
  std::unique_ptr<Program> main_program() override { return std::make_unique<AnonCowSeqParent>(p_); }
  std::unique_ptr<Program> child_program(unsigned, uint64_t base) override {
    return std::make_unique<AnonCowSeqChild>(p_, base);
  }
  uint64_t region_bytes() const override { return p_.size; }

 private:
  WorkloadParams p_;
};

}  // namespace

const char* folio_kind_name(FolioKind k) {
  switch (k) {
    case FolioKind::k4K: return "4K";
    case FolioKind::k64K: return "64K";
    case FolioKind::k1M: return "1M";
    case FolioKind::k2M_pte: return "2M-pte";
    case FolioKind::k2M_pmd: return "2M-pmd";
  }
  return "?";
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::seq_byte: return "seq-byte";
    case Pattern::seq_byte_clock: return "seq-byte-clock";
    case Pattern::seq_byte_lfence: return "seq-byte-lfence";
    case Pattern::memset: return "memset";
    case Pattern::random_byte: return "random-byte";
    case Pattern::read_then_store: return "read-then-store";
    case Pattern::stride: return "stride";
    case Pattern::seq_read: return "seq-read";
  }
  return "?";
}

unsigned folio_order(FolioKind k) {
  switch (k) {
    case FolioKind::k4K: return 0;
    case FolioKind::k64K: return 4;
    case FolioKind::k1M: return 8;
    case FolioKind::k2M_pte:
    case FolioKind::k2M_pmd: return 9;
  }
  return 0;
}

// The benchmark enables the one folio size it tests in "madvise" mode and madvises the measured
// region only, so that its own bookkeeping (the result array, the stack) stays on 4 KiB pages.
ThpSetup thp_setup_for(FolioKind k) {
  ThpSetup s;
  unsigned order = folio_order(k);
  if (order == 0) return s;
  s.madvise_region = true;
  s.order_mode[order] = 1;
  return s;
}

void VdsoParams::visit(Params& p) {
  p.integer("vdso.call_cycles", call_cycles, 125, 0, 100000,
            "latency of the call into clock_gettime() besides the micro-ops below (glibc's "
            "wrapper, the indirect call into the vDSO, the return): one link of the dependency "
            "chain. Calibrated on C1 (the PMD row's time per store; see README)");
  p.integer("vdso.uops_before", uops_before, 20, 0, 1000,
            "dependent micro-ops of clock_gettime() before the RDTSCP: call, vvar seqcount and "
            "clock-mode loads, checks (lib/vdso/gettimeofday.c; about 100 uops in all [UARCH "
            "F.1, L]); the first of them is the load of vd->seq from the vvar page, the others "
            "ALU micro-ops; with vdso.uops_after calibrated on C1 (see README)");
  p.integer("vdso.uops_after", uops_after, 30, 0, 1000,
            "dependent micro-ops after the RDTSCP: seqcount recheck, (cycles - last) * mult >> "
            "shift, timespec stores, return");
}

void WorkloadParams::visit(Params& p) {
  p.enumeration("workload.name", name, WorkloadName::fork_reuse,
                {{"fork-reuse", WorkloadName::fork_reuse}, {"fork-time", WorkloadName::fork_time},
                 {"random-ops", WorkloadName::random_ops}, {"trace", WorkloadName::trace},
                 {"anon-cow-seq", WorkloadName::anon_cow_seq}, {"file-faults", WorkloadName::file_faults},
                 {"swap-readers", WorkloadName::swap_readers}},
                "fork-reuse: populate, fork, the child exits, the parent waits, then the measured "
                "pass; fork-time: populate, then the measured region is the fork() itself (V11); "
                "random-ops: random mmap/munmap/mprotect/madvise/fork/exit/stores/loads over "
                "several processes, every load checked against a reference model of memory "
                "(differential testing; workload.ops, workload.processes, workload.max_mapped); "
                "trace: replay a recording of a real program (workload.trace; `mmusim record`); "
                "its THP knobs are the thp.* keys; anon-cow-seq: vm-scalability's case (V9): "
                "populate workload.size, fork workload.processes children that each write all of "
                "it with 8-byte stores; file-faults: V10(a): workload.threads readers load bytes "
                "of random pages of a shared file mapping of workload.size (uncached; under a "
                "memcg.max below it the page cache keeps being evicted) while "
                "workload.mmap_threads threads mmap, touch and munmap 64 KiB in a loop, for "
                "workload.duration; swap-readers: V10(b): workload.threads readers read their "
                "shares of workload.size of anonymous memory (written before, swapped out under "
                "memcg.max with swap.size) a byte per page, round after round, while a pressure "
                "thread maps, writes and unmaps workload.pressure_size and workload.mmap_threads "
                "threads mmap and munmap 64 KiB, for workload.duration (region.rounds_per_second)");
  p.string("workload.trace", trace, "",
           "trace: the directory `mmusim record --out DIR` wrote (relative to the working "
           "directory); docs/trace-format.md");
  {
    static const char* what[] = {
        "read/write and their vector and positioned forms, sendfile, splice",
        "sockets: socket, bind, listen, accept, connect, send*/recv*, shutdown, *sockopt",
        "waiting: futex, epoll_wait, poll, select, nanosleep and their variants",
        "files and descriptors: open, close, stat, lseek, fcntl, ioctl, dup, pipe, getdents",
        "every other one the port does not model"};
    for (size_t c = 0; c < syscall_time.size(); ++c)
      p.duration(std::string("workload.syscall_time.") + kSyscallClassNames[c], syscall_time[c], "0ns",
                 std::string("trace: kernel time of a recorded system call of this class (") + what[c] +
                     "), beyond cost.syscall's entry and exit; the port does not model what they do. [U]: "
                     "0 unless set, e.g. from `perf trace -s` of the program");
  }
  p.boolean("workload.fast_forward", fast_forward, true,
            "trace: outside the measured region only each page's first read and first write "
            "reach the core (the kernel sees every fault and system call in order; the cores do "
            "not run the rest); false: everything in detail. A recording without a region runs "
            "in detail");
  p.size("workload.size", size, "256M", kPmd, 64ull << 30,
         "bytes of the measured region (a multiple of 2M)", kPmd);
  p.enumeration("workload.folio", folio, FolioKind::k64K,
                {{"4K", FolioKind::k4K},
                 {"64K", FolioKind::k64K},
                 {"1M", FolioKind::k1M},
                 {"2M-pte", FolioKind::k2M_pte},
                 {"2M-pmd", FolioKind::k2M_pmd}},
                "folio size the region is populated with; for 2M whether it is mapped by PTEs or "
                "by a PMD (the workload sets the matching THP sysfs knobs and madvises the region)");
  p.enumeration("workload.pattern", pattern, Pattern::seq_byte_clock,
                {{"seq-byte", Pattern::seq_byte},
                 {"seq-byte-clock", Pattern::seq_byte_clock},
                 {"seq-byte-lfence", Pattern::seq_byte_lfence},
                 {"memset", Pattern::memset},
                 {"random-byte", Pattern::random_byte},
                 {"read-then-store", Pattern::read_then_store},
                 {"stride", Pattern::stride},
                 {"seq-read", Pattern::seq_read}},
                "the measured pass: one byte per 4K page ascending (seq-byte), with a "
                "clock_gettime() and its recorded latency between stores (seq-byte-clock), with an "
                "LFENCE after every store (seq-byte-lfence), memset of the region, one byte per "
                "page in random order, read the 16 pages of each 64K then store to them, one "
                "store every workload.stride bytes, or a one-byte load per page ascending "
                "(seq-read)");
  p.size("workload.stride", stride, "4K", 1, 1ull << 30, "bytes between stores, for pattern = stride");
  p.integer("workload.threads", threads, 1, 1, 256,
            "threads of the parent sharing the measured pass: thread i is pinned to a CPU "
            "(sched.placement: one per core first, then SMT siblings) and takes the i-th share of "
            "the pass (of the random order for random-byte); they start together behind a barrier after the child has exited. "
            "file-faults, swap-readers: the reader threads");
  p.integer("workload.mmap_threads", mmap_threads, 0, 0, 64,
            "file-faults, swap-readers: threads that map 64 KiB of anonymous memory, write a byte "
            "per page and unmap it, in a loop (mmap_lock taken for writing twice a round)");
  p.duration("workload.duration", duration, "10ms",
             "file-faults, swap-readers: simulated time the threads loop for: the main thread "
             "sleeps this long after the start barrier, then stops them (they finish the "
             "iteration they are in); rates are per simulated second (region.faults_per_second, "
             "region.rounds_per_second)");
  p.size("workload.pressure_size", pressure_size, "0", 0, 64ull << 30,
         "swap-readers: bytes of anonymous memory the pressure thread maps, writes a byte per "
         "page of and unmaps, over and over (its charges make the memory cgroup reclaim); 0: no "
         "pressure thread", kPage);
  p.enumeration("workload.thread_split", thread_split, ThreadSplit::block,
                {{"block", ThreadSplit::block}, {"interleave", ThreadSplit::interleave}},
                "how the threads share the pass: thread i takes the i-th block of it, or every "
                "n-th iteration from i (interleave: the threads walk the region side by side, "
                "meeting in the same folios)");
  p.integer("workload.loop_uops", loop_uops, 2, 0, 64,
            "loop micro-ops per store besides the store (address add, fused cmp+jcc)");
  p.integer("workload.result_entry_bytes", result_entry_bytes, 4, 1, 8,
            "seq-byte-clock: bytes per recorded store latency in the benchmark's result array");
  p.size("workload.result_offset", result_offset, "16", 0, kPage,
         "seq-byte-clock: offset of the result array in its mapping (malloc's chunk header); an "
         "array of 64K 4-byte entries at offset 16 spans 65 pages");
  p.enumeration("workload.measure", measure, Measure::pass,
                {{"pass", Measure::pass}, {"populate", Measure::populate}},
                "what the measured region is: the pass after fork (pass), or the population of the "
                "region with the pattern's stores (populate: first-touch faults that allocate "
                "folios, as C2's allocation latencies; no fork)");
  p.enumeration("workload.backing", backing, Backing::anon,
                {{"anon", Backing::anon}, {"file", Backing::file}, {"file-shared", Backing::file_shared}},
                "fork-reuse and fork-time: what the region is: private anonymous memory, or a file of "
                "workload.size bytes (its contents from sim.seed) mapped MAP_PRIVATE (file: reads map "
                "the page cache, writes copy) or MAP_SHARED (file-shared: writes go to the page "
                "cache); page-cache folios are 4K, so workload.folio must be 4K");
  p.boolean("workload.file_cached", file_cached, false,
            "backing = file or file-shared: the file's pages are in the page cache when the run "
            "starts (as after reading the whole file), or none are (every first access reads "
            "the disk: read-around, cost.io_request and cost.io_page)");
  p.enumeration("workload.file_advice", file_advice, FileAdvice::none,
                {{"none", FileAdvice::none}, {"hugepage", FileAdvice::hugepage}},
                "backing = file or file-shared: madvise() the file mapping after the mmap: none, or "
                "hugepage (MADV_HUGEPAGE: a page-cache miss reads 2 MiB from the PMD-aligned index "
                "plus 2 MiB ahead, in order-9 folios with disk.fs = xfs, which a PMD maps where the "
                "mapping covers a 2 MiB block: kernel.thp_file_mapped; 1024 order-0 pages on ext4)");
  p.enumeration("workload.msync", msync, Msync::none,
                {{"none", Msync::none}, {"async", Msync::async}, {"sync", Msync::sync}},
                "fork-reuse: msync() the region after the measured pass, inside the measured region, "
                "as vm-scalability's usemem -S (sync) and -A (async) do after each pass: with "
                "backing = file-shared, sync writes the dirty pages to the disk and waits for them "
                "(vfs_fsync_range(): kernel.fsyncs, kernel.io_wait_ns; the PTEs are write-protected "
                "and clean again: the next pass's first store to each page faults); async does "
                "nothing (as since Linux 2.6.19); on private or anonymous memory both do nothing");
  p.size("workload.file_size", file_size, "0", 0, 64ull << 30,
         "backing = file or file-shared: the file's size in bytes (0: workload.size). A smaller file "
         "than the mapping is legal, as mmap() allows it: the pattern's first access past the page "
         "that holds the file's end gets SIGBUS and the process dies (a simulated outcome: "
         "kernel.faults_sigbus, sched.tasks_killed, mmusim run exits with status 3)");
  p.enumeration("workload.thp_setup", thp_from, ThpFrom::folio,
                {{"folio", ThpFrom::folio}, {"config", ThpFrom::config}},
                "folio: the workload sets the THP sysfs knobs for workload.folio (that size in "
                "madvise mode, every other size never) and madvises the measured region, as the "
                "reference benchmark did; config: the thp.* keys stay as configured");
  p.integer("workload.ops", ops, 2000, 1, int64_t(1) << 40,
            "random-ops: operations over all processes (mmap, munmap, mprotect, madvise, fork, "
            "wait, exit, stores, loads); each child's share is taken from it when it is forked");
  p.integer("workload.processes", processes, 4, 1, 64,
            "random-ops: processes alive at once at most (the first one included); "
            "anon-cow-seq: the children forked (usemem -n)");
  p.size("workload.max_mapped", max_mapped, "16M", 8ull << 20, 1ull << 40,
         "random-ops: bytes one process has mapped at most (areas of 4K to 4M)", kPage);
  p.integer("workload.files", files, 0, 0, 8,
            "random-ops: files of 8M (contents from sim.seed) that a third of the mmaps map "
            "privately, at a random page offset, instead of anonymous memory (0: anonymous "
            "memory only); their loads are checked against the file's bytes");
  p.integer("sim.seed", seed, 1, 0, int64_t(1) << 62,
            "seed of every random choice (random-byte order); --seed sets it");
  vdso.visit(p);
}

// x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl).
SyscallClass syscall_class(uint64_t nr) {
  switch (nr) {
    case 0: case 1: case 17: case 18: case 19: case 20: case 40: case 275: case 276: case 295: case 296:
    case 326: case 327: case 328:
      return SyscallClass::io;  // read write pread64 pwrite64 readv writev sendfile splice tee
                                // preadv pwritev copy_file_range preadv2 pwritev2
    case 41: case 42: case 43: case 44: case 45: case 46: case 47: case 48: case 49: case 50: case 51:
    case 52: case 53: case 54: case 55: case 288: case 299: case 307:
      return SyscallClass::net;  // socket connect accept sendto recvfrom sendmsg recvmsg shutdown
                                 // bind listen getsockname getpeername socketpair setsockopt
                                 // getsockopt accept4 recvmmsg sendmmsg
    case 7: case 23: case 35: case 202: case 232: case 230: case 270: case 271: case 281: case 441:
      return SyscallClass::wait;  // poll select nanosleep futex epoll_wait clock_nanosleep pselect6
                                  // ppoll epoll_pwait epoll_pwait2
    case 2: case 3: case 4: case 5: case 6: case 8: case 16: case 22: case 32: case 33: case 72: case 78:
    case 217: case 257: case 262: case 292: case 293: case 332:
      return SyscallClass::file;  // open close stat fstat lstat lseek ioctl pipe dup dup2 fcntl
                                  // getdents getdents64 openat newfstatat dup3 pipe2 statx
    default: return SyscallClass::other;
  }
}

std::unique_ptr<Workload> make_workload(const WorkloadParams& p, Stats* stats) {
  if (p.pattern == Pattern::stride && (p.stride == 0 || p.stride > p.size))
    fatal("workload.stride = {} must be in [1, workload.size]", p.stride);
  if (is_timed_loop(p.name)) {
    const char* n = p.name == WorkloadName::file_faults ? "file-faults" : "swap-readers";
    if (!p.duration.is_time || p.duration.value <= 0)
      fatal("workload.duration must be a time (e.g. 10ms) above 0 for workload.name = {}", n);
    if (p.threads + p.mmap_threads + 1 > 256)
      fatal("workload.threads + workload.mmap_threads = {}: {} runs at most 256 threads, the main one and "
            "the pressure thread included",
            p.threads + p.mmap_threads, n);
  } else if (p.mmap_threads) {
    fatal("workload.mmap_threads = {}: only workload.name = file-faults and swap-readers have mapper threads",
          p.mmap_threads);
  }
  if (p.name == WorkloadName::swap_readers && p.folio != FolioKind::k4K)
    fatal("workload.folio must be 4K for workload.name = swap-readers: large anonymous folios are not "
          "split for swap-out in this port (reclaim keeps them), so its memory would never reach swap");
  if (p.pressure_size && p.name != WorkloadName::swap_readers)
    fatal("workload.pressure_size = {}: only workload.name = swap-readers has a pressure thread", p.pressure_size);
  if (p.threads > 1 && p.name == WorkloadName::anon_cow_seq)
    fatal("workload.threads = {}: anon-cow-seq runs one thread per process (its children are "
          "workload.processes); use 1",
          p.threads);
  if (p.threads > 1 && !is_timed_loop(p.name) &&
      (p.name == WorkloadName::fork_time || p.measure == WorkloadParams::Measure::populate))
    fatal("workload.threads = {}: the threads share the measured pass of fork-reuse; with "
          "workload.name = fork-time or workload.measure = populate use 1",
          p.threads);
  if (p.backing != Backing::anon && p.name != WorkloadName::fork_reuse && p.name != WorkloadName::fork_time)
    fatal("workload.backing = {}: only fork-reuse and fork-time map their region from a file",
          p.backing == Backing::file ? "file" : "file-shared");
  if (p.backing != Backing::anon && p.folio != FolioKind::k4K)
    fatal("workload.backing = {} needs workload.folio = 4K (is {}): page-cache folios and their private "
          "copies are 4K pages here", p.backing == Backing::file ? "file" : "file-shared", folio_kind_name(p.folio));
  if (p.files && p.name != WorkloadName::random_ops)
    fatal("workload.files = {}: only random-ops maps files of its own (fork-reuse and fork-time: "
          "workload.backing)", p.files);
  if (p.msync != WorkloadParams::Msync::none && p.name != WorkloadName::fork_reuse)
    fatal("workload.msync = {}: only workload.name = fork-reuse msyncs its region after the pass",
          p.msync == WorkloadParams::Msync::sync ? "sync" : "async");
  if (p.file_size && p.backing == Backing::anon)
    fatal("workload.file_size = {} needs workload.backing = file or file-shared (is anon)", format_size(p.file_size));
  if (p.file_size > p.size)
    fatal("workload.file_size = {} is larger than workload.size = {}: the mapping is workload.size, "
          "the part of the file beyond it would never be touched; allowed: 0 to workload.size",
          format_size(p.file_size), format_size(p.size));
  if (p.file_cached && p.backing == Backing::anon)
    fatal("workload.file_cached = true needs workload.backing = file or file-shared (is anon)");
  if (p.file_advice != WorkloadParams::FileAdvice::none && p.backing == Backing::anon)
    fatal("workload.file_advice = hugepage needs workload.backing = file or file-shared (is anon; an anonymous "
          "region's MADV_HUGEPAGE follows workload.folio)");
  switch (p.name) {
    case WorkloadName::fork_reuse: return std::make_unique<ForkReuseWorkload>(p, false);
    case WorkloadName::fork_time: return std::make_unique<ForkReuseWorkload>(p, true);
    case WorkloadName::random_ops: return make_random_ops_workload(p, stats);
    case WorkloadName::trace: return make_trace_workload(p, stats);
    case WorkloadName::anon_cow_seq: return std::make_unique<AnonCowSeqWorkload>(p);
    case WorkloadName::file_faults:
    case WorkloadName::swap_readers: return make_file_faults_workload(p);
  }
  panic("unknown workload");
}

}  // namespace mmusim::wl
