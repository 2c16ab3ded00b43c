/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The mmusim trace format, version 1: what `mmusim record` writes and `workload.name = trace`
 * replays. One definition for both sides: the recorder (a Valgrind tool, C without a libc) and
 * the simulator's reader (C++, workloads/trace_reader.*). docs/trace-format.md describes it.
 *
 * A recording is a directory:
 *   manifest.txt         text; written by the first process when the recording begins:
 *                          "mmusim-trace 1\n" "root-pid <pid>\n" "command <argv joined by ' '>\n"
 *                        and "detail all\n" or "detail region\n" (see below; no line: all)
 *   proc-<pid>.mtr       one per recorded process (the first, and every fork() child)
 *
 * Detail: with "detail region" (the recorder's --mmusim-detail=region), outside the measured
 * region only what the kernel must see is recorded: every SYSCALL, THREAD, NEWTHREAD, FORK, EXIT,
 * REGION, MAP and END; of the memory accesses only each page's first read, first write (a STORE
 * or ATOMIC) and first instruction fetch (an EXEC of 1 instruction at an address in the page) since
 * the process last changed its mappings: a successful or failed mmap, munmap, mprotect, madvise,
 * brk or mremap, a fork (in both processes) clears what the process has touched. Threads of a
 * process share it. REP records are written as their pages' first touches too. Inside the region
 * (and with "detail all") everything is recorded.
 *
 * A .mtr file is a 24-byte header, then records.
 *   header: magic "MMUSIMTR" (8 bytes), then little-endian u32: version (1), pid, parent pid
 *           (0 for the first process), reserved (0)
 *   record: one opcode byte, then its fields. u: unsigned LEB128 (7 bits a byte, low first, high
 *           bit = more); s: signed, zigzag-mapped ((v << 1) ^ (v >> 63)), then as u.
 *
 * Deltas: each file keeps two running values, both 0 at its start: `ip`, the guest instruction
 * address of the last EXEC/LOAD/STORE/ATOMIC/FENCE/REP record, and `addr`, the address of the
 * last LOAD/STORE/ATOMIC (or the destination of the last REP). A record's ip_delta and
 * addr_delta are relative to them and update them.
 *
 * Order: records are in the order the guest executed them (Valgrind runs one thread at a time);
 * THREAD says which thread the following records belong to. A thread's stream is its records in
 * file order.
 *
 * Clarifications (added with the recorder, recorder/mmusim_rec.c; they change no field or
 * opcode, they say what the recorder writes where the text above leaves room):
 *  - Thread numbers are reused: Valgrind gives a new thread the number of one that has ended,
 *    so after a thread's EXIT, a NEWTHREAD may name its tid again; that is a new thread.
 *  - Instructions are Valgrind's: each iteration of a REP-prefixed string instruction is one
 *    execution (glibc's memset and memcpy use REP STOSB/MOVSB for large sizes). The recorder
 *    writes a run of ascending iterations of REP STOS/MOVS as one REP record, followed by an
 *    EXEC of 1 at the same ip when the run ended normally (VEX's last execution, which finds
 *    RCX = 0). A descending run (DF = 1), a run of one iteration, other REP instructions (CMPS,
 *    SCAS, LODS) and recordings with --mmusim-rep=no stay one access record per iteration: an
 *    access record with ip_delta 0 right after another access record is therefore either a
 *    further access of the same instruction (the STORE after a LOAD, the lanes of a masked
 *    store) or the next iteration of such an instruction; the format does not tell them apart.
 *  - detail region: outside the region the recorder writes a first write of an ATOMIC as the
 *    ATOMIC record, the first touches of a REP's pages as LOAD/STORE records of its element
 *    size (the first address it accesses in each page), and judges instruction fetches by the
 *    instructions' start addresses.
 *  - The instructions of one EXEC are at consecutive addresses (the recorder ends a run where
 *    VEX followed a jump), so giving them all the first one's address is off only within a
 *    straight line of code.
 *  - SYSCALL a0..a5 are the six argument registers as they were, whatever the syscall uses.
 *  - MAP kind: Valgrind does not keep MAP_SHARED for file mappings; the recorder writes
 *    FILE_PRIVATE for every file mapping and FILE_SHARED for System V shared memory.
 *  - EXIT of a thread that ended without an exit syscall has code 0; after an exit_group no
 *    EXIT is written for the other threads (the exit_group's EXIT ends them all).
 */
#ifndef MMUSIM_TRACE_H
#define MMUSIM_TRACE_H

#define MTR_MAGIC "MMUSIMTR"
#define MTR_VERSION 1u
#define MTR_HEADER_BYTES 24u

enum mtr_opcode {
  /* s ip_delta, u n: n guest instructions (n >= 1) that accessed no memory, the first at the new
   * ip, the others following it (the replay gives them the same instruction address). */
  MTR_EXEC = 0x01,
  /* s ip_delta, s addr_delta, u size: one memory access of `size` bytes (1..64) by the guest
   * instruction at ip. An instruction that reads and writes gives a LOAD then a STORE with
   * ip_delta 0; a guarded access is recorded only when its guard held. */
  MTR_LOAD = 0x02,
  MTR_STORE = 0x03,
  /* s ip_delta, s addr_delta, u size: an atomic read-modify-write (LOCK-prefixed instruction,
   * XCHG with memory, CMPXCHG; VEX's CAS): a locked load and store, a full barrier on x86. */
  MTR_ATOMIC = 0x04,
  /* s ip_delta, u kind (enum mtr_fence): an ordering or serialising instruction. */
  MTR_FENCE = 0x05,
  /* u nr, u a0, u a1, u a2, u a3, u a4, u a5, s result: a system call of the current thread,
   * written when it has returned (the records before it happened before it). Every syscall is
   * recorded, with the x86-64 number (asm/unistd_64.h). A syscall that does not return
   * (exit, exit_group, a successful execve) is written before it runs, with result 0. */
  MTR_SYSCALL = 0x06,
  /* u tid: the following records belong to thread `tid` (Valgrind's thread number, 1 for the
   * process's first thread). The first record of every file after its MAPs is a THREAD. */
  MTR_THREAD = 0x07,
  /* u tid: the current thread created thread `tid` (a clone() with CLONE_THREAD); written before
   * the SYSCALL record of that clone. */
  MTR_NEWTHREAD = 0x08,
  /* u pid: the current thread's fork (fork, vfork, or clone without CLONE_VM) created process
   * `pid`, recorded in proc-<pid>.mtr; written after the SYSCALL record. */
  MTR_FORK = 0x09,
  /* s code: the current thread ends (exit; exit_group ends every thread of the process). */
  MTR_EXIT = 0x0a,
  /* u on, u start, u len: the measured region begins (on = 1) or ends (on = 0), by the client
   * requests of mmusim_region.h. start/len: the address range the program measures (faults in it
   * count as faults.region), 0/0 for none; both 0 on an end. (The recorder's
   * --mmusim-region-control=PATH writes them too, in the first process only: on 0/0 at the first
   * syscall it sees PATH exist, off when PATH is gone or, if still open, before the process's
   * exit.) */
  MTR_REGION = 0x0b,
  /* u start, u len, u prot, u kind (enum mtr_map_kind): a mapping the process had when its
   * recording began (the program, the dynamic loader, the stack; for a fork child, none: it
   * inherits its parent's). Only before the first THREAD. start and len are page-aligned. */
  MTR_MAP = 0x0c,
  /* no fields: the process's recording ended normally. A file without END is truncated. */
  MTR_END = 0x0d,
  /* s ip_delta, u kind (enum mtr_rep), s addr_delta, s src_delta, u count, u size: `count` (>= 1)
   * iterations of the REP-prefixed string instruction at ip, each moving `size` (1, 2, 4 or 8)
   * bytes, at ascending addresses: STOS stores [addr, addr + count * size); MOVS also loads
   * [src, src + count * size), src = addr + src_delta (src_delta 0 for STOS). The running `addr`
   * becomes the destination's start. One record for what VEX runs as `count` executions of the
   * instruction (it counts as `count` instructions); the recorder may also write the iterations
   * as LOAD/STORE records (a descending run, DF = 1, always is). */
  MTR_REP = 0x0e,
};

enum mtr_rep {
  MTR_REP_STOS = 1,
  MTR_REP_MOVS = 2,
  MTR_REP_MAX = 2,
};

enum mtr_fence {
  MTR_FENCE_LFENCE = 1,
  MTR_FENCE_MFENCE = 2,
  MTR_FENCE_SFENCE = 3,
  MTR_FENCE_CPUID = 4,
  MTR_FENCE_RDTSC = 5,
  MTR_FENCE_RDTSCP = 6,
  MTR_FENCE_MAX = 6,
};

enum mtr_map_kind {
  MTR_MAP_ANON = 0,          /* anonymous private (bss, heap, stack) */
  MTR_MAP_FILE_PRIVATE = 1,  /* a private mapping of a file (the program, libraries) */
  MTR_MAP_FILE_SHARED = 2,   /* a shared mapping (of a file or shared memory) */
  MTR_MAP_KIND_MAX = 2,
};

/* prot bits as mmap(2)'s PROT_READ/WRITE/EXEC */
#define MTR_PROT_READ 0x1u
#define MTR_PROT_WRITE 0x2u
#define MTR_PROT_EXEC 0x4u

/* The client requests of mmusim_region.h (Valgrind's VG_USERREQ_TOOL_BASE('M','S') + n). */
#define MTR_CLIENTREQ_BASE ((((unsigned)'M') << 24) | (((unsigned)'S') << 16))
#define MTR_CLIENTREQ_REGION_BEGIN (MTR_CLIENTREQ_BASE + 1) /* args: start, len */
#define MTR_CLIENTREQ_REGION_END (MTR_CLIENTREQ_BASE + 2)

#endif /* MMUSIM_TRACE_H */
