// SPDX-License-Identifier: GPL-2.0-only
// Micro-ops: what a workload's program is made of, for every platform. A core model executes them
// with timing and speculation; the functional driver executes them in program order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mmusim::wl {

enum class UopKind : uint8_t {
  Alu,      // integer work, `latency` cycles
  Load,     // `size` bytes at `addr`
  Store,    // `size` bytes of `value` (repeated byte for size > 8) at `addr`
  Lfence,   // no younger uop issues until all older uops have retired (SDM LFENCE)
  Rdtscp,   // reads the TSC; its ordering rule is a core parameter
  Syscall,  // a system call: serialising; `sys` says which, `addr`/`value`/`extra` are arguments
  Marker,   // a workload event that costs nothing (measured region start/end)
};

// Clone: a thread (arguments: the thread's index, and two words for its program); Barrier: wait
// until `value` tasks have reached barrier `addr` (a futex-based pthread barrier's effect).
// Mmap: (len, prot, flags) at an address the kernel chooses. MmapFixed: private anonymous memory
// at `addr` (MAP_FIXED; `value` len, `extra` prot). MmapFile: a private file mapping at `addr`
// (`value` len, `extra` prot), its pages present at once (no page cache yet: kernel_mm/exec.cpp).
// Fork: `addr` a tag the workload gets back in child_program(). Gate: wait until the task's
// program's gate (Program::gate_key()) has let `addr` ordered system calls through (a trace's
// threads keep the recorded order of their system calls).
// Nanosleep: sleep `addr` ns (the cycle-level platforms; a timed sleep, hrtimer_nanosleep()).
// Msync: msync(addr, value, extra = flags); with MS_SYNC the task sleeps until the writes end.
// The mmap/mprotect/madvise arguments of those calls (include/uapi/asm-generic/mman*.h).
inline constexpr int kProtRead = 0x1, kProtWrite = 0x2;
inline constexpr int kMapShared = 0x01, kMapPrivate = 0x02, kMapAnonymous = 0x20;
inline constexpr int kMapPrivateAnon = kMapPrivate | kMapAnonymous;
inline constexpr int kMsAsync = 1, kMsSync = 4;  // msync() flags
inline constexpr int kMadvDontneed = 4, kMadvDontfork = 10, kMadvDofork = 11, kMadvHugepage = 14,
                     kMadvNohugepage = 15, kMadvWipeonfork = 18, kMadvKeeponfork = 19;
enum class Sys : uint8_t {
  None, Mmap, Munmap, Mprotect, Madvise, Fork, Exit, Wait, Yield, Clone, Barrier,
  MmapFixed, MmapFile, Gate, Nanosleep, Msync
};
// Round: a workload's unit of work is done (swap-readers: a reader's pass over its share).
// ProcessDone: a process of the measured region reports its work (`value`: bytes) as it ends
// (region.process_bytes_per_second).
enum class Mark : uint8_t { None, RegionBegin, RegionEnd, Progress, Round, ProcessDone };

// Flags
// A store whose bytes the program computes when it retires (Program::store_value): data from
// earlier results, such as the difference of the last two RDTSCP reads.
inline constexpr uint16_t kUopValueFromProgram = 1u << 0;
inline constexpr uint16_t kUopDependsOnPrev = 1u << 1; // needs the previous uop's result
inline constexpr uint16_t kUopAtBarrier = 1u << 2;     // a RegionBegin that takes effect when the
                                                        // next barrier opens (threads start together)
// A load whose bytes are checked (differential testing, workload random-ops): `value` holds the
// expected bytes (little-endian, `size` <= 8), `extra` the operation number for the message. The
// drivers throw InternalError("data integrity: ...") on a mismatch.
inline constexpr uint16_t kUopCheckValue = 1u << 3;
// A store that writes its whole 64-byte line (`size` 64, aligned) by the protocol of glibc's
// memset at large sizes, `rep stosb` with fast strings: the line is claimed without being read
// (SDM Vol 1 fast-string operation: full-line writes need no read-for-ownership;
// docs/x86-memory-path.md §2). The core's caches then take no fill from DRAM for it.
inline constexpr uint16_t kUopFullLine = 1u << 4;
// A system call that passes its program's gate when it has executed (Sys::Gate).
inline constexpr uint16_t kUopOrdered = 1u << 5;
// A system call replayed from a recording: the kernel port may refuse what the real kernel did
// (an madvise() advice it does not have): counted in trace.syscalls_refused, not an error.
inline constexpr uint16_t kUopReplayed = 1u << 6;

// The instruction address of a micro-op that has none (a Marker: a workload event, not an
// instruction; the hand-made micro-ops of the model tests): the core's front end translates no
// code page for it. Address 0 is never user code (mmap_min_addr is 64K).
inline constexpr uint64_t kNoIp = 0;

struct Uop;
// A checked load's verdict (kUopCheckValue): the bytes it read (`got`, little-endian, the first
// min(size, 8)) against the bytes the workload's reference expects. Both drivers call it; the
// error message, with what only they know (CPU, physical address), is theirs.
bool loaded_value_matches(const Uop& u, uint64_t got);
inline uint64_t loaded_value_mask(uint8_t size) {
  return size >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * size)) - 1;
}

struct Uop {
  UopKind kind = UopKind::Alu;
  uint8_t size = 0;       // bytes accessed
  uint16_t latency = 1;   // Alu: execution cycles
  uint16_t flags = 0;
  Sys sys = Sys::None;
  Mark mark = Mark::None;
  uint64_t ip = kNoIp;    // instruction address: the front end translates its page (ITLB);
                          // traces, fault reports
  uint64_t addr = 0;      // Load/Store address; syscall argument 0
  uint64_t value = 0;     // Store value; syscall argument 1
  uint64_t extra = 0;     // syscall argument 2
};

// (Host speed) `*dst = u`, written as two 16-byte stores and one 8-byte store: the widths a copy
// of a Uop reads it back with. A queued micro-op is read moments after it is written; a 16-byte
// load of bytes that narrower stores (field by field) wrote cannot take them from the host's store
// buffer and waits until they drain. Inlined, `u`'s fields come from registers.
inline void store_uop(Uop* dst, const Uop& u) {
#if defined(__SSE2__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  static_assert(sizeof(Uop) == 40 && offsetof(Uop, size) == 1 && offsetof(Uop, latency) == 2 &&
                    offsetof(Uop, flags) == 4 && offsetof(Uop, sys) == 6 && offsetof(Uop, mark) == 7 &&
                    offsetof(Uop, ip) == 8 && offsetof(Uop, addr) == 16 && offsetof(Uop, value) == 24 &&
                    offsetof(Uop, extra) == 32,
                "store_uop() writes Uop's layout");
  const uint64_t head = uint64_t(u.kind) | uint64_t(u.size) << 8 | uint64_t(u.latency) << 16 |
                        uint64_t(u.flags) << 32 | uint64_t(u.sys) << 48 | uint64_t(u.mark) << 56;
  char* p = reinterpret_cast<char*>(dst);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_set_epi64x(int64_t(u.ip), int64_t(head)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16), _mm_set_epi64x(int64_t(u.value), int64_t(u.addr)));
  std::memcpy(p + 32, &u.extra, sizeof u.extra);
#else
  *dst = u;
#endif
}

inline bool loaded_value_matches(const Uop& u, uint64_t got) {
  const uint64_t mask = loaded_value_mask(u.size);
  return (got & mask) == (u.value & mask);
}

}  // namespace mmusim::wl
