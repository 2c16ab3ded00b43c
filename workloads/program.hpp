// SPDX-License-Identifier: GPL-2.0-only
// A program: the micro-ops of one simulated thread, generated on demand (a 256 MiB pass is never
// materialised). A system call's result arrives through syscall_return() before next() is called
// again; a core never fetches past a system call before it has executed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"

#include "workloads/uop.hpp"

namespace mmusim::wl {

class Program {
 public:
  virtual ~Program() = default;
  // The next micro-op; false once the thread has exited.
  virtual bool next(Uop& u) = 0;
  virtual void syscall_return(int64_t ret) {}
  // An RDTSCP's result, when it retires: the program's register, as syscall_return() is. The
  // model's TSC reads the CPU's simulated time in picoseconds (an invariant TSC; a program turns
  // differences into ns as the vDSO's clock_gettime() would).
  virtual void rdtscp_return(uint64_t tsc_ps) {}
  // The bytes a store flagged kUopValueFromProgram writes, asked when it retires (after every
  // older micro-op's result has come back).
  virtual uint64_t store_value(const Uop& u) const { return u.value; }
  // Share of the measured pass done, in [0, 1] (for --progress).
  virtual double progress() const { return 0; }
  // The gate its Sys::Gate and kUopOrdered system calls use (the threads of one traced process
  // share one); 0: none.
  virtual uint64_t gate_key() const { return 0; }
  // Micro-ops a core fetched but did not retire, oldest first, handed back when the thread leaves
  // the CPU in the middle of them (it sleeps in a page fault): next() gives them again, before
  // anything it had not given yet.
  virtual void put_back(std::vector<Uop> uops) { mmusim::panic("this program cannot take micro-ops back"); }
  // The same, for a program that keeps them itself so as to look at them again before it gives
  // them (a loop whose condition another thread changes meanwhile: the core refetches after the
  // sleep, and the loop's branch sees the new value); false: it does not (ResumableProgram keeps
  // them).
  virtual bool take_back(std::vector<Uop>& uops) { return false; }
};

// A thread's program as the scheduler hands it to a CPU: what a core handed back first
// (put_back()), then the program's own micro-ops; everything else is the program's.
class ResumableProgram : public Program {
 public:
  explicit ResumableProgram(Program* p) : p_(p) {}
  bool next(Uop& u) override {
    if (killed_) {
      // The thread dies of a fatal signal: what it had left is never run; the kernel's do_exit()
      // (an Exit system call of no instruction, exit code the signal) is all that comes.
      if (exit_given_) return false;
      exit_given_ = true;
      u = Uop{};
      u.kind = UopKind::Syscall;
      u.sys = Sys::Exit;
      u.addr = uint64_t(killed_);
      return true;
    }
    if (back_head_ < back_.size()) {
      u = back_[back_head_++];
      if (back_head_ == back_.size()) {
        back_.clear();
        back_head_ = 0;
      }
      return true;
    }
    return p_->next(u);
  }
  void put_back(std::vector<Uop> uops) override {
    if (killed_) return;
    if (back_head_ == back_.size() && p_->take_back(uops)) return;
    uops.insert(uops.end(), back_.begin() + std::ptrdiff_t(back_head_), back_.end());
    back_ = std::move(uops);
    back_head_ = 0;
  }
  void syscall_return(int64_t ret) override { p_->syscall_return(ret); }
  void rdtscp_return(uint64_t tsc_ps) override { p_->rdtscp_return(tsc_ps); }
  uint64_t store_value(const Uop& u) const override { return p_->store_value(u); }
  double progress() const override { return p_->progress(); }
  uint64_t gate_key() const override { return p_->gate_key(); }
  // A fatal signal (its number): from now on next() gives only the thread's exit.
  void kill(int sig) {
    killed_ = sig;
    back_.clear();
    back_head_ = 0;
  }
  int killed() const { return killed_; }

 private:
  Program* p_;
  int killed_ = 0;
  bool exit_given_ = false;
  std::vector<Uop> back_;
  size_t back_head_ = 0;
};

// A program built from steps; each step emits micro-ops into a queue when the queue is empty.
// A system call holds the program until its result arrives (syscall_return()).
class StepProgram : public Program {
 public:
  StepProgram() { q_.reserve(256); }
  bool next(Uop& u) override {
    while (q_head_ == q_.size()) {
      if (repeat_left_) {  // (push_last_n()'s copies, after the queue)
        --repeat_left_;
        u = repeat_;
        return true;
      }
      if (waiting_) mmusim::panic("workload program asked for a uop while waiting for a syscall");
      q_.clear();
      q_head_ = 0;
      if (!step()) return false;
    }
    u = q_[q_head_++];
    if (u.kind == UopKind::Syscall) waiting_ = true;
    return true;
  }
  void syscall_return(int64_t ret) override {
    waiting_ = false;
    last_ret_ = ret;
  }
  void rdtscp_return(uint64_t tsc_ps) override {
    tsc_before_ps_ = tsc_now_ps_;
    tsc_now_ps_ = tsc_ps;
  }
  // A benchmark's `results[i] = now - before`: the last two RDTSCP reads' difference in ns.
  uint64_t store_value(const Uop&) const override { return (tsc_now_ps_ - tsc_before_ps_) / 1000; }

 protected:
  // Emits the next micro-ops (push()); false when the program has finished.
  virtual bool step() = 0;
  // (Host speed: store_uop(), as next() reads the micro-op back soon after.)
  void push(const Uop& u) {
    check_no_repeat();
    store_uop(&q_.emplace_back(), u);
  }
  // n copies of `u` after what the step pushed: the step's last micro-ops (a Syscall, which ends a
  // step, is never one of them). (Host speed: one Uop handed out n times, not n stored.)
  void push_last_n(const Uop& u, uint64_t n) {
    check_no_repeat();
    if (u.kind == UopKind::Syscall) mmusim::panic("push_last_n() of a system call");
    store_uop(&repeat_, u);
    repeat_left_ = n;
  }
  // A main thread's end, one step at a time: a wait for each of `ids` in turn (threads joined,
  // children reaped; `waited` counts them), then the measured region's end and exit(0), system
  // calls at `ip`. True once the exit is pushed.
  bool join_then_exit(uint64_t ip, const std::vector<int64_t>& ids, size_t& waited);
  int64_t last_ret_ = 0;

 private:
  void check_no_repeat() const {
    if (repeat_left_) mmusim::panic("a workload step pushed a micro-op after push_last_n()");
  }
  std::vector<Uop> q_;
  size_t q_head_ = 0;
  Uop repeat_;
  uint64_t repeat_left_ = 0;
  bool waiting_ = false;
  uint64_t tsc_now_ps_ = 0, tsc_before_ps_ = 0;
};

// Micro-op builders.
inline Uop syscall_uop(uint64_t ip, Sys s, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0) {
  Uop u;
  u.kind = UopKind::Syscall;
  u.sys = s;
  u.addr = a0;
  u.value = a1;
  u.extra = a2;
  u.ip = ip;
  return u;
}
// A workload event at no cost (`Mark`: the measured region's start and end, progress).
inline Uop marker_uop(Mark m, uint64_t a0 = 0, uint64_t a1 = 0) {
  Uop u;
  u.kind = UopKind::Marker;
  u.mark = m;
  u.addr = a0;
  u.value = a1;
  return u;
}
// Integer work of `latency` cycles.
inline Uop alu_uop(uint64_t ip, uint16_t latency = 1) {
  Uop u;
  u.kind = UopKind::Alu;
  u.latency = latency;
  u.ip = ip;
  return u;
}
// A load or a store (`value`: what a store writes, or what a checked load expects).
inline Uop access_uop(UopKind k, uint64_t addr, uint8_t size, uint64_t value, uint64_t ip) {
  Uop u;
  u.kind = k;
  u.addr = addr;
  u.size = size;
  u.value = value;
  u.ip = ip;
  return u;
}

inline bool StepProgram::join_then_exit(uint64_t ip, const std::vector<int64_t>& ids, size_t& waited) {
  if (waited < ids.size()) {
    push(syscall_uop(ip, Sys::Wait, uint64_t(ids[waited++])));
    return false;
  }
  push(marker_uop(Mark::RegionEnd));
  push(syscall_uop(ip, Sys::Exit, 0));
  return true;
}

}  // namespace mmusim::wl
