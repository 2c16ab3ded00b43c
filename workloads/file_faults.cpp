// SPDX-License-Identifier: GPL-2.0-only
// file-faults: V10(a), concurrent page faults on a file mapping under memory-cgroup pressure with
// mmap()/munmap() in parallel (EXPERIMENTS.md V10; the patch
// patches/fault-retry-once-per-vma-lock.diff).
//
// The main thread maps a file of workload.size bytes (contents from sim.seed, none of it cached)
// MAP_SHARED, PROT_READ, clones workload.threads reader threads and workload.mmap_threads mapper
// threads and waits with them at a barrier; the measured region (the file mapping) begins when
// it opens and ends when the main thread has joined them all. The main thread sleeps
// workload.duration (nanosleep()) and then raises a flag the threads test every iteration, as a
// benchmark harness stops its workers (they finish the iteration they are in). Meanwhile:
// - a reader loads one byte of a page drawn at random from the whole file: a fault when the page
//   is not mapped, a major one (a disk read, VM_FAULT_RETRY) when a memory-cgroup limit
//   (memcg.max) below the file's size has evicted it;
// - a mapper maps kMapperBytes of private anonymous memory, writes one byte per page, unmaps it:
//   each mmap() and munmap() holds mmap_lock for writing, and its munmap() flushes the other CPUs'
//   TLBs. Readers whose fault fell back to mmap_lock (kernel.fault_retry = fallback) queue behind
//   them; with retry-once they retry under the per-VMA lock first.
// The fault throughput is region.faults_per_second (faults.region over region.time_ns), the
// contention kernel.lock.mmap_lock.contended.
//
// swap-readers: V10(b), faults that read anonymous memory back from swap (a swap partition,
// swap.size, under a memory-cgroup limit, memcg.max), with mmap()/munmap() in parallel. The main
// thread maps workload.size of private anonymous memory and writes one non-zero byte per page
// (zero-filled pages would never reach the disk: the zeromap), clones the threads and sleeps
// workload.duration as above. Meanwhile:
// - a reader (workload.threads of them) reads its share of the mapping (the i-th of `threads`
//   equal blocks), one byte per page in order, over and over; each pass over its share is a
//   round (Mark::Round: workload.rounds, region.rounds_per_second) [U: V10(b)'s description says
//   "reader rounds per second" without saying what a round covers];
// - the pressure thread (workload.pressure_size > 0) maps that much private anonymous memory,
//   writes a byte per page and unmaps it, over and over: each of its faults charges the memory
//   cgroup, whose reclaim swaps out the least recently used anonymous pages, the readers' too;
// - the mmap writers (workload.mmap_threads) are file-faults' mappers.
// A reader's fault that finds its page under read (its own swap readahead, or another thread's)
// drops its lock and returns VM_FAULT_RETRY; kernel.fault_retry decides what the retry takes.
#include "workloads/workload.hpp"

#include <algorithm>
#include <memory>

#include "base/error.hpp"
#include "workloads/image.hpp"
#include "workloads/rng.hpp"

namespace mmusim::wl {
namespace {

constexpr uint64_t kPage = 4096;
// What a mapper maps each round: 16 pages (one 64 KiB area, as the mmap/munmap loops of lock
// benchmarks map a small area and touch it) [U: V10's description gives no size].
constexpr uint64_t kMapperBytes = 64 * 1024;
// swap-readers: the byte the main thread writes at the start of every page (not zero: a zero-filled
// page would never reach the disk, the zeromap keeps it) and the readers check.
constexpr uint8_t kPopulateByte = 0x5a;
constexpr uint64_t kIpLoad = kTextStart + 0x300;
constexpr uint64_t kIpStore = kTextStart + 0x304;
constexpr uint64_t kIpLoop = kTextStart + 0x308;
constexpr uint64_t kIpSyscall = kTextStart + 0x320;

Uop sys(Sys s, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0) { return syscall_uop(kIpSyscall, s, a0, a1, a2); }

// The flag the main thread raises when the time is up (the threads' loop condition).
using StopFlag = std::shared_ptr<bool>;

// The threads besides the main one: readers, then mappers (mmap writers), then the pressure
// thread (swap-readers with workload.pressure_size).
unsigned loop_threads(const WorkloadParams& p) {
  return p.threads + p.mmap_threads + (p.name == WorkloadName::swap_readers && p.pressure_size ? 1 : 0);
}

// The main thread: map (swap-readers: and write every page), clone, barrier, sleep, stop, join.
class FileFaultsMain : public StepProgram {
 public:
  FileFaultsMain(const WorkloadParams& p, StopFlag stop) : p_(p), stop_(std::move(stop)) {}
  double progress() const override { return phase_ >= Phase::Join ? 1.0 : 0.0; }

 protected:
  enum class Phase { Map, Populate, Clone, Barrier, Sleep, Join, Done };
  bool step() override {
    const unsigned n = loop_threads(p_);
    const bool anon = p_.name == WorkloadName::swap_readers;
    switch (phase_) {
      case Phase::Map:
        if (anon) push(sys(Sys::Mmap, p_.size, kProtRead | kProtWrite, kMapPrivateAnon));
        else push(sys(Sys::Mmap, p_.size, kProtRead, mmap_file_extra(kMapShared, 1, 0)));
        phase_ = anon ? Phase::Populate : Phase::Clone;
        return true;
      case Phase::Populate:
        // One non-zero byte per page, 512 pages a step.
        if (!base_) base_ = uint64_t(last_ret_);
        for (unsigned k = 0; k < 512 && populated_ < p_.size; ++k, populated_ += kPage)
          push(access_uop(UopKind::Store, base_ + populated_, 1, kPopulateByte, kIpStore));
        if (populated_ >= p_.size) phase_ = Phase::Clone;
        return true;
      case Phase::Clone:
        if (!base_) base_ = uint64_t(last_ret_);
        else if (cloning_) tids_.push_back(last_ret_);
        cloning_ = true;
        if (tids_.size() < n) {
          push(sys(Sys::Clone, tids_.size() + 1, base_, 0));
          return true;
        }
        phase_ = Phase::Barrier;
        return step();
      case Phase::Barrier: {
        Uop m = marker_uop(Mark::RegionBegin, base_, p_.size);
        m.flags |= kUopAtBarrier;
        push(m);
        push(sys(Sys::Barrier, 1, n + 1));
        phase_ = Phase::Sleep;
        return true;
      }
      case Phase::Sleep:
        push(sys(Sys::Nanosleep, uint64_t(p_.duration.value + 0.5)));  // ns (a time, checked)
        phase_ = Phase::Join;
        return true;
      case Phase::Join:
        *stop_ = true;
        if (join_then_exit(kIpSyscall, tids_, joined_)) phase_ = Phase::Done;
        return true;
      case Phase::Done:
        return false;
    }
    return false;
  }

 private:
  WorkloadParams p_;
  StopFlag stop_;
  Phase phase_ = Phase::Map;
  uint64_t base_ = 0, populated_ = 0;
  bool cloning_ = false;
  std::vector<int64_t> tids_;
  size_t joined_ = 0;
};

// A reader (index 1..threads), a mapper (the indices after them) or the pressure thread (the last).
class FileFaultsThread : public StepProgram {
 public:
  FileFaultsThread(const WorkloadParams& p, unsigned index, uint64_t base, StopFlag stop)
      : p_(p), index_(index), base_(base), mapper_(index > p.threads), stop_(std::move(stop)),
        rng_{p.seed * 0x100000001b3ull + index} {
    if (index > p.threads + p.mmap_threads) area_bytes_ = p.pressure_size;  // the pressure thread
    if (!mapper_) {
      // A swap reader's share: the index-th of `threads` blocks of whole pages.
      const uint64_t pages = p.size / kPage;
      share_begin_ = pages * (index - 1) / p.threads;
      share_end_ = pages * index / p.threads;
      next_page_ = share_begin_;
    }
  }
  // What the core hands back when the thread sleeps in a fault is given again first; a reader's
  // iterations not yet begun are dropped once the flag is up (the loop's condition is tested
  // again when the core refetches them).
  bool next(Uop& u) override {
    if (back_head_ < back_.size()) {
      if (!mapper_ && *stop_ && back_[back_head_].ip == kIpLoad) {
        // The iterations are dropped, not a system call fetched after them (the exit the
        // program already gave: fetch stops at a system call, so it can only be the last).
        auto sys_uop = std::find_if(back_.begin() + std::ptrdiff_t(back_head_), back_.end(),
                                    [](const Uop& x) { return x.kind == UopKind::Syscall; });
        back_.erase(back_.begin(), sys_uop);
        back_head_ = 0;
        if (!back_.empty()) {
          u = back_[back_head_++];
          return true;
        }
      } else {
        u = back_[back_head_++];
        return true;
      }
    }
    return StepProgram::next(u);
  }
  bool take_back(std::vector<Uop>& uops) override {
    uops.insert(uops.end(), back_.begin() + std::ptrdiff_t(back_head_), back_.end());
    back_ = std::move(uops);
    back_head_ = 0;
    return true;
  }

 protected:
  bool step() override {
    if (done_) return false;
    if (!joined_barrier_) {
      push(sys(Sys::Barrier, 1, loop_threads(p_) + 1));
      joined_barrier_ = true;
      return true;
    }
    if (*stop_) {
      push(sys(Sys::Exit, 0));
      done_ = true;
      return true;
    }
    if (mapper_) {
      // mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS), a store per page
      // (the pressure thread's: 512 pages a step), munmap().
      if (!area_) {
        push(sys(Sys::Mmap, area_bytes_, kProtRead | kProtWrite, kMapPrivateAnon));
        area_ = true;
        written_ = 0;
        return true;
      }
      if (written_ == 0) area_base_ = uint64_t(last_ret_);
      for (unsigned n = 0; n < 512 && written_ < area_bytes_; ++n, written_ += kPage) {
        push(access_uop(UopKind::Store, area_base_ + written_, 1, 1, kIpStore));
        for (unsigned k = 0; k < p_.loop_uops; ++k) push(alu_uop(kIpLoop + k));
      }
      if (written_ >= area_bytes_) {
        push(sys(Sys::Munmap, area_base_, area_bytes_));
        area_ = false;
      }
      return true;
    }
    if (p_.name == WorkloadName::swap_readers) {
      // The next page of the reader's share; the end of the share ends a round.
      // (The byte the main thread wrote, checked: what comes back from swap is what went out.)
      Uop ld = access_uop(UopKind::Load, base_ + next_page_ * kPage, 1, kPopulateByte, kIpLoad);
      ld.flags |= kUopCheckValue;
      push(ld);
      for (unsigned k = 0; k < p_.loop_uops; ++k) push(alu_uop(kIpLoop + k));
      if (++next_page_ == share_end_) {
        push(marker_uop(Mark::Round));
        next_page_ = share_begin_;
      }
      return true;
    }
    // One byte of a random page of the file (each thread at its own offset in the page).
    const uint64_t page = rng_.below(p_.size / kPage);
    push(access_uop(UopKind::Load, base_ + page * kPage + (index_ * 64) % kPage, 1, 0, kIpLoad));
    for (unsigned k = 0; k < p_.loop_uops; ++k) push(alu_uop(kIpLoop + k));
    return true;
  }

 private:
  WorkloadParams p_;
  unsigned index_;
  uint64_t base_;
  bool mapper_;
  StopFlag stop_;
  Rng rng_;
  bool joined_barrier_ = false, done_ = false, area_ = false;
  uint64_t area_bytes_ = kMapperBytes, area_base_ = 0, written_ = 0;
  uint64_t share_begin_ = 0, share_end_ = 0, next_page_ = 0;
  std::vector<Uop> back_;  // handed back by the core, not yet given again
  size_t back_head_ = 0;
};

class FileFaultsWorkload : public Workload {
 public:
  explicit FileFaultsWorkload(const WorkloadParams& p) : p_(p), stop_(std::make_shared<bool>(false)) {}
  std::string name() const override { return p_.name == WorkloadName::swap_readers ? "swap-readers" : "file-faults"; }
  // swap-readers: the THP knobs of workload.folio (4K: never; make_workload() refuses others).
  ThpSetup thp_setup() const override {
    return p_.name == WorkloadName::swap_readers ? thp_setup_for(p_.folio) : ThpSetup{};
  }
  std::unique_ptr<Program> main_program() override { return std::make_unique<FileFaultsMain>(p_, stop_); }
  std::unique_ptr<Program> child_program(unsigned, uint64_t) override {
    panic("file-faults does not fork");
  }
  std::unique_ptr<Program> thread_program(unsigned index, uint64_t base, uint64_t) override {
    return std::make_unique<FileFaultsThread>(p_, index, base, stop_);
  }
  uint64_t region_bytes() const override { return p_.size; }
  std::vector<FileSpec> files() const override {
    if (p_.name == WorkloadName::swap_readers) return {};
    return {FileSpec{"data", p_.size, p_.seed, false}};
  }

 private:
  WorkloadParams p_;
  StopFlag stop_;
};

}  // namespace

std::unique_ptr<Workload> make_file_faults_workload(const WorkloadParams& p) {
  return std::make_unique<FileFaultsWorkload>(p);
}

}  // namespace mmusim::wl
