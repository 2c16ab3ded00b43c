// SPDX-License-Identifier: GPL-2.0-only
// random-ops: random operation sequences over several processes, every load checked against a
// reference model of the process's memory (workloads/random_ops.hpp). The first process maps,
// unmaps, protects, advises, stores and loads at random; sometimes it forks, and the child runs its
// own random sub-sequence (it may fork too) and exits; the parent waits at once or later. Loads
// carry the bytes the reference expects (kUopCheckValue); the drivers compare what they read.
//
// Deterministic: every choice comes from sim.seed through splitmix64; a child's generator is
// seeded from its parent's at the fork. The total number of operations is workload.ops; a child's
// share is reserved from it when it is forked.
#include <deque>
#include <map>
#include <vector>

#include "base/error.hpp"
#include "base/stats.hpp"
#include "workloads/image.hpp"
#include "workloads/random_ops.hpp"
#include "workloads/workload.hpp"

namespace mmusim::wl {

namespace {

using namespace rops;

// In the program image's text (workloads/image.hpp), its second page.
constexpr uint64_t kIpStore = kTextStart + 0x1000;
constexpr uint64_t kIpLoad = kTextStart + 0x1100;
constexpr uint64_t kIpTouch = kTextStart + 0x1200;
constexpr uint64_t kIpSyscall = kTextStart + 0x1300;

class RopsProgram;

struct Shared {
  Limits lim;
  uint64_t ops_left = 0;      // not yet generated nor reserved for a child
  uint64_t next_index = 0;    // the number the next operation gets ("after op #N")
  uint64_t child_mean = 0;    // mean length of a child's sub-sequence
  unsigned live = 1;          // processes alive (forked and not yet exited)
  // Children waiting for child_program(), by the tag of the fork() that makes them (several cores:
  // parents generate their forks in one order, the kernel runs them in simulated-time order).
  std::map<uint64_t, std::unique_ptr<RopsProgram>> forked;
  uint64_t next_fork_tag = 1;
  Counter* ops = nullptr;
  Counter* procs = nullptr;
  Counter* loads = nullptr;
};

class RopsProgram : public StepProgram {
 public:
  RopsProgram(Shared& sh, RefProc ref, uint64_t seed, bool main, uint64_t budget)
      : sh_(sh), ref_(std::move(ref)), rng_{seed}, main_(main), budget_(budget) {}

  void syscall_return(int64_t ret) override {
    StepProgram::syscall_return(ret);
    if (pending_ == Pending::Mmap) {
      if (ret <= 0) panic("random-ops: mmap of {} bytes returned {}", mmap_.len, ret);
      apply(ref_, mmap_, uint64_t(ret));
    } else if (pending_ == Pending::Fork) {
      children_.push_back(ret);
      if (wait_after_fork_) {
        wait_after_fork_ = false;
        pending_ = Pending::None;
        push(syscall(Sys::Wait, uint64_t(ret)));
        children_.pop_back();
        return;
      }
    }
    pending_ = Pending::None;
  }

 private:
  enum class Pending { None, Mmap, Fork };

  static Uop syscall(Sys s, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0) {
    return syscall_uop(kIpSyscall + 4 * unsigned(s), s, a0, a1, a2);
  }
  static Uop access(UopKind k, uint64_t addr, uint8_t size, uint64_t value, uint64_t ip) {
    return access_uop(k, addr, size, value, ip);
  }

  bool have_budget() const { return main_ ? sh_.ops_left > 0 : budget_ > 0; }
  void spend() {
    if (main_) --sh_.ops_left;
    else --budget_;
    ++sh_.next_index;
    if (sh_.ops) sh_.ops->inc();
  }

  // Emit the micro-ops of the next operation; false once the program has ended.
  bool step() override {
    if (done_) return false;
    if (!have_budget()) {
      if (!children_.empty()) {  // reap what is left, then exit
        push(syscall(Sys::Wait, uint64_t(children_.back())));
        children_.pop_back();
        return true;
      }
      push(syscall(Sys::Exit, 0));
      --sh_.live;
      done_ = true;
      return true;
    }
    for (unsigned attempt = 0; attempt < 10000; ++attempt) {
      const Op op = draw(rng_);
      Action ac = resolve(op, ref_, sh_.lim);
      if (!ac.valid) continue;
      const uint64_t index = sh_.next_index;
      switch (op.kind) {
        case OpKind::Mmap:
          mmap_ = ac;
          pending_ = Pending::Mmap;
          push(syscall(Sys::Mmap, ac.len, kProtRead | kProtWrite,
                       ac.file < 0 ? uint64_t(kMapPrivateAnon)
                                   : mmap_file_extra(kMapPrivateAnon & ~0x20, unsigned(ac.file) + 1, ac.pgoff)));
          break;
        case OpKind::Munmap:
          apply(ref_, ac);
          push(syscall(Sys::Munmap, ac.addr, ac.len));
          break;
        case OpKind::Mprotect:
          apply(ref_, ac);
          push(syscall(Sys::Mprotect, ac.addr, ac.len, uint64_t(ac.arg)));
          break;
        case OpKind::Madvise:
          apply(ref_, ac);
          push(syscall(Sys::Madvise, ac.addr, ac.len, uint64_t(ac.arg)));
          break;
        case OpKind::Store:
          apply(ref_, ac);
          push(access(UopKind::Store, ac.addr, ac.size, ac.value, kIpStore));
          break;
        case OpKind::Load: {
          Uop u = access(UopKind::Load, ac.addr, ac.size, ac.value, kIpLoad);
          u.flags |= kUopCheckValue;
          u.extra = index;
          push(u);
          if (sh_.loads) sh_.loads->inc();
          break;
        }
        case OpKind::Msync:  // drawn only with Weights::with_msync(), which this program does not use
          push(syscall(Sys::Msync, ac.addr, ac.len, uint64_t(ac.arg)));
          break;
        case OpKind::Verify:
          for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += 64) {
            Uop u = access(UopKind::Load, v, 8, ref_u64(ref_, v), kIpLoad + 4);
            u.flags |= kUopCheckValue;
            u.extra = index;
            push(u);
            if (sh_.loads) sh_.loads->inc();
          }
          break;
        case OpKind::Touch:
          apply(ref_, ac);
          for (uint64_t v = ac.addr; v < ac.addr + ac.len; v += kPage)
            push(access(UopKind::Store, v + touch_offset(ac.value, v), 8, touch_value(ac.value, v), kIpTouch));
          break;
        case OpKind::Fork: {
          if (sh_.live >= sh_.lim.max_procs || sh_.ops_left < 2) continue;
          uint64_t n = 1 + rng_.below(std::min<uint64_t>(sh_.ops_left - 1, 2 * sh_.child_mean));
          sh_.ops_left -= n;
          ++sh_.live;
          if (sh_.procs) sh_.procs->inc();
          const uint64_t tag = sh_.next_fork_tag++;
          sh_.forked[tag] = std::make_unique<RopsProgram>(sh_, ref_.fork_child(), rng_.next(), false, n);
          wait_after_fork_ = rng_.below(2) == 0;
          pending_ = Pending::Fork;
          push(syscall(Sys::Fork, tag));
          break;
        }
        case OpKind::Wait:
          if (children_.empty()) continue;
          {
            size_t i = op.a % children_.size();
            push(syscall(Sys::Wait, uint64_t(children_[i])));
            children_.erase(children_.begin() + long(i));
          }
          break;
        case OpKind::Exit:
          if (main_) continue;
          // The child ends its sub-sequence early; the rest of its share goes back to the pool.
          sh_.ops_left += budget_ - 1;
          budget_ = 1;
          spend();
          return step();
      }
      spend();
      return true;
    }
    panic("random-ops: no applicable operation in 10000 draws (workload.max_mapped too small?)");
  }

  Shared& sh_;
  RefProc ref_;
  Rng rng_;
  bool main_;
  uint64_t budget_;
  bool done_ = false;
  Pending pending_ = Pending::None;
  Action mmap_;
  bool wait_after_fork_ = false;
  std::vector<int64_t> children_;  // pids not yet waited for
};

class RandomOpsWorkload : public Workload {
 public:
  RandomOpsWorkload(const WorkloadParams& p, Stats* stats) : p_(p) {
    sh_.lim.max_procs = p.processes;
    sh_.lim.max_mapped = p.max_mapped;
    sh_.lim.files = p.files;
    sh_.lim.file_seed = p.seed ^ 0x66696c6573ull;
    sh_.ops_left = p.ops;
    sh_.child_mean = std::clamp<uint64_t>(p.ops / 16, 20, 500);
    if (stats) {
      sh_.ops = &stats->counter("check.ops", "random-ops: operations executed (over every process)");
      sh_.procs = &stats->counter("check.forks", "random-ops: child processes forked");
      sh_.loads = &stats->counter("check.loads", "random-ops: loads whose bytes are checked against the reference model");
    }
  }
  std::string name() const override { return "random-ops"; }
  // 16K, 64K, 1M and 2M folios in madvise mode: MADV_HUGEPAGE ranges get the largest that fits.
  ThpSetup thp_setup() const override {
    ThpSetup s;
    s.madvise_region = false;
    for (unsigned o : {2u, 4u, 8u, 9u}) s.order_mode[o] = 1;
    return s;
  }
  std::unique_ptr<Program> main_program() override {
    RefProc ref;
    ref.lim = sh_.lim;
    return std::make_unique<RopsProgram>(sh_, std::move(ref), p_.seed ^ 0x72616e646f6d6f70ull, true, 0);
  }
  // Limits::files: file i is the kernel's (i + 1)-th, as the reference model assumes.
  std::vector<FileSpec> files() const override {
    std::vector<FileSpec> f;
    for (unsigned i = 0; i < sh_.lim.files; ++i)
      f.push_back(FileSpec{"file" + std::to_string(i), sh_.lim.file_size, sh_.lim.file_seed, false});
    return f;
  }
  std::unique_ptr<Program> child_program(unsigned, uint64_t tag) override {
    // The child the fork() with this tag made (its parent's reference model at that fork).
    auto it = sh_.forked.find(tag);
    if (it == sh_.forked.end()) panic("random-ops: a fork() (tag {}) without a child program", tag);
    std::unique_ptr<RopsProgram> c = std::move(it->second);
    sh_.forked.erase(it);
    return c;
  }
  uint64_t region_bytes() const override { return 0; }

 private:
  WorkloadParams p_;
  Shared sh_;
};

}  // namespace

std::unique_ptr<Workload> make_random_ops_workload(const WorkloadParams& p, Stats* stats) {
  if (p.max_mapped < (8ull << 20))
    fatal("workload.max_mapped = {} is too small for random-ops: at least 8M (its largest mmap is "
          "4M and a bit)", format_size(p.max_mapped));
  return std::make_unique<RandomOpsWorkload>(p, stats);
}

}  // namespace mmusim::wl
