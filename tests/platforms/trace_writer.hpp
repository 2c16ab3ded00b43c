// SPDX-License-Identifier: GPL-2.0-only
// A writer of mmusim traces (recorder/mmusim_trace.h) for tests: recordings made by hand, so that
// the reader and the replay are tested without Valgrind, and bad files can be made on purpose.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "recorder/mmusim_trace.h"

namespace mmusim_test {

class TraceWriter {
 public:
  TraceWriter(uint32_t pid, uint32_t ppid) {
    for (const char* c = MTR_MAGIC; *c; ++c) b_.push_back(uint8_t(*c));
    u32(MTR_VERSION);
    u32(pid);
    u32(ppid);
    u32(0);
  }
  TraceWriter& map(uint64_t start, uint64_t len, unsigned prot, unsigned kind) {
    op(MTR_MAP);
    u(start);
    u(len);
    u(prot);
    u(kind);
    return *this;
  }
  TraceWriter& thread(uint32_t tid) { return op(MTR_THREAD).u(tid); }
  TraceWriter& exec(uint64_t ip, uint64_t n) {
    op(MTR_EXEC);
    ip_delta(ip);
    return u(n);
  }
  TraceWriter& access(uint8_t kind, uint64_t ip, uint64_t addr, uint64_t size) {
    op(kind);
    ip_delta(ip);
    s(int64_t(addr - addr_));
    addr_ = addr;
    return u(size);
  }
  TraceWriter& load(uint64_t ip, uint64_t addr, uint64_t size) { return access(MTR_LOAD, ip, addr, size); }
  TraceWriter& store(uint64_t ip, uint64_t addr, uint64_t size) { return access(MTR_STORE, ip, addr, size); }
  TraceWriter& atomic(uint64_t ip, uint64_t addr, uint64_t size) { return access(MTR_ATOMIC, ip, addr, size); }
  TraceWriter& fence(uint64_t ip, unsigned kind) {
    op(MTR_FENCE);
    ip_delta(ip);
    return u(kind);
  }
  TraceWriter& syscall(uint64_t nr, std::vector<uint64_t> args, int64_t result) {
    args.resize(6);
    op(MTR_SYSCALL).u(nr);
    for (uint64_t a : args) u(a);
    return s(result);
  }
  TraceWriter& newthread(uint32_t tid) { return op(MTR_NEWTHREAD).u(tid); }
  TraceWriter& fork(uint32_t pid) { return op(MTR_FORK).u(pid); }
  TraceWriter& exit(int64_t code) { return op(MTR_EXIT).s(code); }
  TraceWriter& region(bool on, uint64_t start = 0, uint64_t len = 0) { return op(MTR_REGION).u(on).u(start).u(len); }
  TraceWriter& end() { return op(MTR_END); }
  TraceWriter& raw(uint8_t byte) {
    b_.push_back(byte);
    return *this;
  }

  const std::vector<uint8_t>& bytes() const { return b_; }
  void write(const std::string& path, size_t cut = 0) const {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b_.data()), std::streamsize(b_.size() - cut));
  }

  TraceWriter& u(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      if (v) byte |= 0x80;
      b_.push_back(byte);
    } while (v);
    return *this;
  }
  TraceWriter& s(int64_t v) { return u((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }

 private:
  TraceWriter& op(uint8_t o) {
    b_.push_back(o);
    return *this;
  }
  void ip_delta(uint64_t ip) {
    s(int64_t(ip - ip_));
    ip_ = ip;
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b_.push_back(uint8_t(v >> (8 * i)));
  }
  std::vector<uint8_t> b_;
  uint64_t ip_ = 0, addr_ = 0;
};

inline void write_manifest(const std::string& dir, uint32_t root_pid, const std::string& command = "test") {
  std::ofstream(dir + "/manifest.txt") << "mmusim-trace 1\nroot-pid " << root_pid << "\ncommand " << command << "\n";
}

}  // namespace mmusim_test
