/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * mmusimrec: the mmusim recorder, an out-of-tree Valgrind tool.
 *
 * It runs an unmodified x86-64 Linux program and writes what the program did, in the order it
 * did it, as a trace in the format of mmusim_trace.h (that header is the contract; this file
 * only produces it): the guest instructions (as EXEC runs), every memory access (LOAD, STORE,
 * ATOMIC), fences and serialising instructions (FENCE), system calls, threads, forks and the
 * measured region of mmusim_region.h (or, for a program that cannot be changed, of a control
 * file: --mmusim-region-control=PATH, see ctl_poll()).
 *
 * Usage: VALGRIND_LIB=<build>/recorder/lib valgrind --tool=mmusimrec --mmusim-out=DIR prog args
 *
 * A Valgrind tool has no C library: everything here goes through VG_() functions.
 *
 * Design, in short:
 *  - One output buffer per process (a fork child starts its own file and buffer).
 *  - Instrumentation works per superblock. Instructions that touch no memory are not given a
 *    helper call each: the instrumenter counts them at translation time into a "run" (first
 *    address, count) and hands the run to the next helper call that happens anyway (the one of
 *    the next memory access or fence), so the common case costs no extra call. A run still
 *    pending when the superblock can leave (a side exit, whose flush is guarded by the exit's
 *    own condition, or the final jump) is written by a small flush call there, so the number
 *    of instructions recorded is exactly the number executed.
 *  - Valgrind runs one guest thread at a time, so plain globals need no locking; the tool
 *    learns which thread runs from the core's start_client_code event.
 *  - --mmusim-selfcheck=yes also counts every instruction in IR and compares at the end: the
 *    tests run with it, so an instrumentation path that loses or doubles instructions fails.
 *    With --mmusim-detail=region it compares the instructions inside the region only.
 *  - REP STOS/MOVS: VEX runs one iteration per execution of the instruction (and one more
 *    that finds RCX = 0 and leaves, recorded as an EXEC of 1). The instrumenter recognises the
 *    instruction from its bytes and gives each iteration one call with both addresses; the
 *    helper extends a pending run while the iterations ascend contiguously and writes it as one
 *    REP record when anything else is about to be recorded (settle()).
 *  - --mmusim-detail=region: outside the measured region the helpers consult a table of the
 *    pages touched per kind (read, write, fetch) and write only first touches; the table is
 *    forgotten at every mapping syscall and fork. The mode is one global (rec_mode) so that the
 *    full-detail path costs a single compare more than before.
 *
 * Not recorded: memory the kernel reads or writes for a syscall (read() into a buffer: only
 * the SYSCALL record), what Valgrind's core does on the client's behalf (a signal frame pushed
 * on delivery; the handler's own instructions are recorded), signal delivery as an event, and
 * the program an execve starts.
 */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_xarray.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "valgrind.h"

#include "mmusim_trace.h"

/* Two core functions that the public tool headers do not declare but libcoregrind exports
 * (pub_core_syscall.h, pub_core_libcfile.h). We need a raw syscall for mkdir and ftruncate,
 * and safe_fd to move our output file descriptor into Valgrind's reserved range, where the
 * client cannot close or dup2 over it (daemons such as Redis close every descriptor). */
extern SysRes VG_(do_syscall)(UWord sysno, RegWord a1, RegWord a2, RegWord a3, RegWord a4,
                              RegWord a5, RegWord a6, RegWord a7, RegWord a8);
extern Int VG_(safe_fd)(Int oldfd);

/* x86-64 syscall numbers we treat specially (asm/unistd_64.h; fixed ABI). */
#define NR_CLONE 56
#define NR_FORK 57
#define NR_VFORK 58
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_MMAP 9
#define NR_MPROTECT 10
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define NR_MADVISE 28
#define NR_EXECVEAT 322

/* ------------------------------------------------------------------------------------------ */
/* Options and process-wide state                                                              */

static const HChar *clo_out_dir = NULL; /* as given */
static const HChar *clo_detail_str = "all"; /* --mmusim-detail */
static HChar out_dir[4096];             /* made absolute: the program may chdir() later */

/* The output of this process. The buffer is static (a tool has no malloc worth using on the
 * hot path); a record is at most 1 + 8 * 10 bytes, so flushing when less than SLACK bytes
 * remain keeps every record whole without a bounds check per byte. */
#define BUF_BYTES (1u << 20)
#define SLACK 128u
static UChar buf[BUF_BYTES];
static UInt buf_pos = 0;
static Int out_fd = -1;
static ULong file_bytes = 0; /* bytes written to out_fd so far */
static Bool active = False;  /* a file is open and not yet ended */

/* Delta state of the file (mmusim_trace.h: both 0 at the start of a file). */
static Addr last_ip = 0;
static Addr last_addr = 0;

/* Threads: the one whose records follow in the file, and the one running client code. */
static ThreadId stream_tid = 0;
static ThreadId running_tid = 1;
static Bool process_exiting = False; /* exit_group seen: no per-thread EXITs after it */
static Bool *thread_live = NULL;     /* [VG_N_THREADS]: appeared in this file, no EXIT yet */

/* Statistics, printed at the end with -v. n_insn_recorded is the number of guest instructions
 * the records stand for (EXEC counts, one per fence, one per instruction with accesses);
 * with --mmusim-selfcheck=yes the instrumented code also counts every instruction it starts
 * (n_insn_executed) and the two must agree at the end. */
static ULong n_access_records = 0;
static ULong n_insn_recorded = 0;
static ULong n_insn_executed = 0;
static Bool clo_selfcheck = False;

/* Bit of size_op (below) saying "the first access of its instruction". */
#define FIRST_ACCESS 0x80u

/* --mmusim-detail=region: outside the measured region only first touches are recorded. */
static Bool clo_detail_region = False;
/* --mmusim-rep=no: record REP iterations one access each, as before REP records (for
 * comparisons: the tests check that a REP record stands for exactly those accesses). */
static Bool clo_rep = True;
static Bool in_region = False; /* this process is between its REGION on and off */
static Bool region_ended = False; /* this process has written a REGION off (one region a run) */

/* --mmusim-region-control=PATH: the region of a program that cannot be changed (Redis) begins
 * when PATH appears and ends when it is removed. Only the first process watches it (a fork child
 * is a different program phase: the BGSAVE child is not what is measured). The check is a stat()
 * at the root process's system calls, at most once a millisecond (the clock read it costs is a
 * raw clock_gettime, far cheaper than the client syscall under Valgrind that it rides on), so it
 * costs at most 1000 stats a second whatever the syscall rate, and the region begins at the first
 * syscall at least 1 ms after the previous check that finds the file. */
static const HChar *clo_region_control = NULL;
static HChar ctl_path[4096];
static Bool ctl_watch = False;  /* this is the root process and it still watches the file */
static Bool ctl_seen = False;   /* the file has been seen: its removal ends the region */
static Bool ctl_checked = False;
static UInt ctl_last_ms = 0;

/* What the helpers do, decided once per change instead of per call: nothing (no file open),
 * record everything, or record only first touches (region mode, outside the region). */
#define MODE_OFF 0u
#define MODE_FULL 1u
#define MODE_OUTSIDE 2u
static UInt rec_mode = MODE_OFF;

/* The self-check in region mode compares only the instructions inside the region: outside it
 * the records deliberately stand for far fewer instructions than ran. */
static ULong sc_exec_mark = 0, sc_rec_mark = 0; /* the counters when the region began */
static ULong sc_exec_in = 0, sc_rec_in = 0;     /* summed over the finished regions */

/* A run of memory-free instructions as the instrumented code hands it to a helper, one word:
 * the low 32 bits are the number of instructions, the high 32 bits the offset of the last one's
 * address from the first's (region mode needs the pages of both). 0: no run. */
#define RUN_N(w) ((UWord)(UInt)(w))
#define RUN_LAST(ip, w) ((ip) + ((w) >> 32))

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */

static void write_all(Int fd, const UChar *p, UInt n)
{
  while (n > 0) {
    Int w = VG_(write)(fd, p, (Int)n);
    if (w <= 0) {
      VG_(umsg)("mmusimrec: write to the trace failed (%d); the recording is incomplete\n", w);
      VG_(exit)(2);
    }
    p += w;
    n -= (UInt)w;
    file_bytes += (ULong)w;
  }
}

static void flush_buf(void)
{
  if (out_fd >= 0 && buf_pos > 0)
    write_all(out_fd, buf, buf_pos);
  buf_pos = 0;
}

static inline void reserve(void)
{
  if (UNLIKELY(buf_pos > BUF_BYTES - SLACK))
    flush_buf();
}

static inline void put_byte(UChar b) { buf[buf_pos++] = b; }

static inline void put_u(ULong v)
{
  while (v >= 0x80) {
    buf[buf_pos++] = (UChar)(v | 0x80);
    v >>= 7;
  }
  buf[buf_pos++] = (UChar)v;
}

static inline void put_s(Long v) { put_u(((ULong)v << 1) ^ (ULong)(v >> 63)); }

/* A REP STOS/MOVS being coalesced: VEX runs one iteration per execution of the instruction,
 * so the helper of each iteration extends this run while the iterations continue at ascending
 * contiguous addresses with nothing else recorded in between; the run is written as one REP
 * record (or, if it has one iteration, as the LOAD/STORE it was) just before any other record
 * is written and before the buffer goes out for a fork, an execve or the end. rep_n == 0: none.
 * The run belongs to stream_tid (it is only started after for_thread). */
static UWord rep_n = 0;
static Addr rep_ip, rep_dst, rep_src;       /* the instruction, the first iteration's addresses */
static Addr rep_next_dst, rep_next_src;     /* where the next iteration must access to extend */
static UWord rep_size, rep_kind, rep_max_n; /* element size, enum mtr_rep, cap on rep_n */
/* The cap keeps one record's bytes (count * size) within 2^32. */
#define REP_MAX_BYTES (1ull << 32)

static void put_access(UChar op, Addr ip, Addr addr, UWord size);

static void rep_write(void)
{
  reserve();
  if (rep_n == 1) {
    if (rep_kind == MTR_REP_MOVS)
      put_access(MTR_LOAD, rep_ip, rep_src, rep_size);
    put_access(MTR_STORE, rep_ip, rep_dst, rep_size);
  } else {
    put_byte(MTR_REP);
    put_s((Long)(rep_ip - last_ip));
    put_u(rep_kind);
    put_s((Long)(rep_dst - last_addr));
    put_s(rep_kind == MTR_REP_MOVS ? (Long)(rep_src - rep_dst) : 0);
    put_u(rep_n);
    put_u(rep_size);
    last_ip = rep_ip;
    last_addr = rep_dst;
    n_access_records++;
  }
  rep_n = 0;
}

/* Write the pending REP run, if any: before anything else goes into the file. */
static inline void settle(void)
{
  if (UNLIKELY(rep_n))
    rep_write();
}

/* Make `tid` the thread of the following records, writing THREAD if it changes. */
static void switch_stream(ThreadId tid)
{
  settle();
  reserve();
  put_byte(MTR_THREAD);
  put_u(tid);
  stream_tid = tid;
  if (thread_live && tid < VG_N_THREADS)
    thread_live[tid] = True;
}

/* Every record goes through here (or through settle() itself) first. */
static inline void for_thread(ThreadId tid)
{
  settle();
  if (UNLIKELY(tid != stream_tid))
    switch_stream(tid);
  reserve();
}

static inline void put_exec(Addr ip, UWord n)
{
  n = RUN_N(n);
  n_insn_recorded += n;
  put_byte(MTR_EXEC);
  put_s((Long)(ip - last_ip));
  put_u(n);
  last_ip = ip;
}

static void put_access(UChar op, Addr ip, Addr addr, UWord size)
{
  put_byte(op);
  put_s((Long)(ip - last_ip));
  put_s((Long)(addr - last_addr));
  put_u(size);
  last_ip = ip;
  last_addr = addr;
  n_access_records++;
}

static void set_mode(void)
{
  rec_mode = !active ? MODE_OFF : (!clo_detail_region || in_region) ? MODE_FULL : MODE_OUTSIDE;
}

/* Open proc-<pid>.mtr and write its header. */
static void open_trace(Int pid, Int ppid)
{
  HChar path[4200];
  VG_(snprintf)(path, sizeof path, "%s/proc-%d.mtr", out_dir, pid);
  SysRes r = VG_(open)(path, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_TRUNC, 0644);
  if (sr_isError(r)) {
    VG_(umsg)("mmusimrec: cannot create %s: %s\n", path, VG_(sr_as_string)(r));
    VG_(exit)(2);
  }
  Int fd = VG_(safe_fd)((Int)sr_Res(r));
  if (fd < 0) {
    VG_(umsg)("mmusimrec: cannot move the trace descriptor of %s out of the client's way\n",
              path);
    VG_(exit)(2);
  }
  out_fd = fd;
  file_bytes = 0;
  buf_pos = 0;
  last_ip = 0;
  last_addr = 0;
  stream_tid = 0;
  rep_n = 0;
  active = True;
  set_mode();

  UInt words[4] = {MTR_VERSION, (UInt)pid, (UInt)ppid, 0};
  VG_(memcpy)(buf, MTR_MAGIC, 8);
  buf_pos = 8;
  for (Int i = 0; i < 4; i++)
    for (Int b = 0; b < 4; b++)
      put_byte((UChar)(words[i] >> (8 * b))); /* little-endian whatever the host */
}

static void end_trace(void)
{
  if (!active)
    return;
  settle();
  reserve();
  put_byte(MTR_END);
  flush_buf();
  active = False;
  set_mode();
}

/* ------------------------------------------------------------------------------------------ */
/* Region mode: the pages the process has touched                                              */

/* Kinds of touch, as bits of an entry. */
#define T_READ 0u
#define T_WRITE 1u
#define T_FETCH 2u
#define PAGE_SHIFT 12

/* An open-addressing hash table of 4 KiB page numbers, linear probing, in the tool's own
 * memory. Clearing it (at every mmap, munmap, ... and fork) must be cheap even when it holds a
 * few hundred thousand pages, so entries carry the generation they were made in and a clear
 * only advances the generation: an entry of an older generation is an empty slot. That is
 * sound with linear probing because within a generation slots only ever go from empty to
 * used, so a lookup may stop at the first empty slot as usual. */
typedef struct {
  UWord page;
  UInt gen;
  UInt bits; /* 1 << T_READ | 1 << T_WRITE | 1 << T_FETCH */
} TouchEnt;
static TouchEnt *tt = NULL;
static UInt tt_shift = 0; /* 64 - log2(capacity) */
static UWord tt_cap = 0, tt_used = 0;
static UInt tt_gen = 1;

/* In front of the table, per kind, a small direct-mapped cache of pages known to be touched in
 * this generation: the common outside-region access is to such a page and costs one load and
 * compare. ~0 is no page (page numbers are below 2^52). */
#define TC_SLOTS 64u
static UWord tc[3][TC_SLOTS];

static void tc_clear(void)
{
  for (UInt k = 0; k < 3; k++)
    for (UInt j = 0; j < TC_SLOTS; j++)
      tc[k][j] = ~(UWord)0;
}

static inline Bool tc_hit(UInt k, UWord page) { return tc[k][page % TC_SLOTS] == page; }

static inline UWord tt_hash(UWord page) { return (UWord)((page * 0x9E3779B97F4A7C15ull) >> tt_shift); }

static void tt_alloc(UWord cap)
{
  tt_cap = cap;
  tt_shift = 64;
  for (UWord c = cap; c > 1; c >>= 1)
    tt_shift--;
  tt = VG_(calloc)("mmusimrec.touched", cap, sizeof(TouchEnt));
}

static void tt_init(void)
{
  tt_alloc(1u << 16);
  tt_used = 0;
  tt_gen = 1;
  tc_clear();
}

/* Forget every touch: the process changed its mappings, or forked. */
static void tt_clear(void)
{
  if (!tt)
    return;
  tt_used = 0;
  if (++tt_gen == 0) { /* after 2^32 clears: really empty it, once */
    VG_(memset)(tt, 0, tt_cap * sizeof(TouchEnt));
    tt_gen = 1;
  }
  tc_clear();
}

static void tt_grow(void)
{
  TouchEnt *old = tt;
  UWord old_cap = tt_cap;
  tt_alloc(old_cap * 2);
  for (UWord j = 0; j < old_cap; j++) {
    if (old[j].gen != tt_gen)
      continue;
    UWord h = tt_hash(old[j].page);
    while (tt[h].gen == tt_gen)
      h = (h + 1) & (tt_cap - 1);
    tt[h] = old[j];
  }
  VG_(free)(old);
}

/* Mark `page` touched by kind k; True if it was not before (a first touch). */
static Bool tt_touch(UWord page, UInt k)
{
  UInt bit = 1u << k;
  tc[k][page % TC_SLOTS] = page;
  for (UWord h = tt_hash(page);; h = (h + 1) & (tt_cap - 1)) {
    TouchEnt *e = &tt[h];
    if (e->gen != tt_gen) {
      e->page = page;
      e->gen = tt_gen;
      e->bits = bit;
      if (++tt_used * 2 > tt_cap)
        tt_grow();
      return True;
    }
    if (e->page == page) {
      if (e->bits & bit)
        return False;
      e->bits |= bit;
      return True;
    }
  }
}

/* Whether [addr, addr + size) (size 1..64: one or two pages) is a first touch of kind k of
 * either of its pages; marks both. */
static inline Bool touch_range(Addr addr, UWord size, UInt k)
{
  UWord p0 = addr >> PAGE_SHIFT, p1 = (addr + size - 1) >> PAGE_SHIFT;
  if (LIKELY(p0 == p1 && tc_hit(k, p0)))
    return False;
  Bool first = tt_touch(p0, k);
  if (p1 != p0)
    first |= tt_touch(p1, k);
  return first;
}

/* The instruction at ip is fetched: an EXEC of 1 there if that is its page's first fetch. */
static inline void out_fetch(Addr ip)
{
  UWord p = ip >> PAGE_SHIFT;
  if (LIKELY(tc_hit(T_FETCH, p)) || !tt_touch(p, T_FETCH))
    return;
  for_thread(running_tid);
  put_exec(ip, 1);
}

/* A run of memory-free instructions outside the region: its instructions lie in at most two
 * pages (a superblock is far shorter than a page), those of the first and the last one. */
static inline void out_run(Addr run_ip, UWord run)
{
  if (!run)
    return;
  out_fetch(run_ip);
  Addr last = RUN_LAST(run_ip, run);
  if ((last >> PAGE_SHIFT) != (run_ip >> PAGE_SHIFT))
    out_fetch(last);
}

/* One access (size 1..64) outside the region. If it is a first read or write of its page(s)
 * its record is written (it is the instruction's fetch too); otherwise, if it is its
 * instruction's first access and the instruction's page has not been fetched from yet, an
 * EXEC of 1. An ATOMIC counts as a write and is written as the ATOMIC it is. */
static inline void out_access(UChar op, Addr ip, Addr addr, UWord size, Bool first_of_insn)
{
  Bool data = touch_range(addr, size, op == MTR_LOAD ? T_READ : T_WRITE);
  if (first_of_insn) {
    UWord p = ip >> PAGE_SHIFT;
    Bool fetch = !tc_hit(T_FETCH, p) && tt_touch(p, T_FETCH);
    if (!data && fetch) {
      for_thread(running_tid);
      put_exec(ip, 1);
    }
  }
  if (data) {
    for_thread(running_tid);
    put_access(op, ip, addr, size);
  }
}

static void out_access_big(UChar op, Addr ip, Addr addr, UWord size, Bool first_of_insn)
{
  while (size > 64) {
    out_access(op, ip, addr, 64, first_of_insn);
    first_of_insn = False;
    addr += 64;
    size -= 64;
  }
  out_access(op, ip, addr, size, first_of_insn);
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers called from the instrumented code. On amd64 every argument travels in a register,  */
/* so five arguments cost no more than one. `run` is a run word (RUN_N, RUN_LAST).             */

/* size_op: (size << 8) | opcode */
static void h_access(Addr run_ip, UWord run, Addr ip, Addr addr, UWord size_op)
{
  UChar op = (UChar)(size_op & 0x7F);
  UWord size = size_op >> 8;
  if (UNLIKELY(rec_mode != MODE_FULL)) {
    if (rec_mode == MODE_OFF)
      return;
    out_run(run_ip, run);
    out_access_big(op, ip, addr, size, (size_op & FIRST_ACCESS) != 0);
    return;
  }
  for_thread(running_tid);
  if (run)
    put_exec(run_ip, run);
  if (size_op & FIRST_ACCESS)
    n_insn_recorded++;
  /* The format allows 1..64 bytes an access: split larger ones (dirty helpers' FXSAVE, XSAVE
   * effects) into 64-byte pieces of the same instruction. */
  while (size > 64) {
    put_access(op, ip, addr, 64);
    addr += 64;
    size -= 64;
    reserve();
  }
  put_access(op, ip, addr, size);
}

/* The common case of an access with no pending run (the next access of the same
 * instruction or of a run of memory instructions): three arguments. */
static void h_access0(Addr ip, Addr addr, UWord size_op)
{
  if (UNLIKELY(rec_mode != MODE_FULL)) {
    if (rec_mode == MODE_OFF)
      return;
    UWord size = size_op >> 8;
    if (LIKELY(size <= 64))
      out_access((UChar)(size_op & 0x7F), ip, addr, size, (size_op & FIRST_ACCESS) != 0);
    else
      out_access_big((UChar)(size_op & 0x7F), ip, addr, size, (size_op & FIRST_ACCESS) != 0);
    return;
  }
  if (UNLIKELY((size_op >> 8) > 64)) {
    h_access(0, 0, ip, addr, size_op);
    return;
  }
  for_thread(running_tid);
  if (size_op & FIRST_ACCESS)
    n_insn_recorded++;
  put_access((UChar)(size_op & 0x7F), ip, addr, size_op >> 8);
}

/* One iteration of a REP STOS (src 0) or REP MOVS at ip; kind_size: (size << 8) | kind. */
static void h_rep(Addr run_ip, UWord run, Addr ip, Addr dst, Addr src, UWord kind_size)
{
  UWord kind = kind_size & 0xFF, size = kind_size >> 8;
  if (UNLIKELY(rec_mode != MODE_FULL)) {
    /* Outside the region only its pages' first touches: the iterations as single accesses
     * through the touched table (which makes all but a page's first one cost nothing). */
    if (rec_mode == MODE_OFF)
      return;
    out_run(run_ip, run);
    if (kind == MTR_REP_MOVS)
      out_access(MTR_LOAD, ip, src, size, True);
    out_access(MTR_STORE, ip, dst, size, kind != MTR_REP_MOVS);
    return;
  }
  n_insn_recorded++;
  /* The common case: the next iteration of the pending run. (A pending run means nothing has
   * been recorded since its last iteration; running_tid tells whether the thread is the
   * same.) */
  if (LIKELY(rep_n && !run && ip == rep_ip && dst == rep_next_dst && src == rep_next_src &&
             running_tid == stream_tid && rep_n < rep_max_n)) {
    rep_n++;
    rep_next_dst += size;
    if (kind == MTR_REP_MOVS)
      rep_next_src += size;
    return;
  }
  for_thread(running_tid); /* writes the run this one does not continue */
  if (run)
    put_exec(run_ip, run);
  rep_ip = ip;
  rep_dst = dst;
  rep_src = src;
  rep_next_dst = dst + size;
  rep_next_src = kind == MTR_REP_MOVS ? src + size : src;
  rep_size = size;
  rep_kind = kind;
  rep_max_n = (UWord)(REP_MAX_BYTES / size);
  rep_n = 1;
}

/* Instructions with guarded accesses (LoadG, StoreG, a dirty helper with a guard: AVX masked
 * loads and stores, gathers) are recorded by their accesses whose guard held, or, when none
 * held, as an EXEC of 1 at the instruction's end; gi_done_ip says which it was. */
static Addr gi_done_ip = 0;

static void h_access_g(Addr ip, Addr addr, UWord size_op, UWord guard)
{
  if (UNLIKELY(rec_mode == MODE_OFF) || !guard)
    return;
  if (gi_done_ip != ip) {
    gi_done_ip = ip;
    size_op |= FIRST_ACCESS;
  } else {
    size_op &= ~(UWord)FIRST_ACCESS;
  }
  h_access(0, 0, ip, addr, size_op);
}

static void h_gi_end(Addr ip)
{
  if (UNLIKELY(rec_mode == MODE_OFF))
    return;
  if (gi_done_ip != ip) {
    if (rec_mode == MODE_OUTSIDE) {
      out_fetch(ip);
    } else {
      for_thread(running_tid);
      put_exec(ip, 1);
    }
  }
  gi_done_ip = 0;
}

static void h_exec(Addr run_ip, UWord run)
{
  if (UNLIKELY(rec_mode != MODE_FULL)) {
    if (rec_mode == MODE_OUTSIDE)
      out_run(run_ip, run);
    return;
  }
  for_thread(running_tid);
  put_exec(run_ip, run);
}

static void h_fence(Addr run_ip, UWord run, Addr ip, UWord kind)
{
  if (UNLIKELY(rec_mode != MODE_FULL)) {
    /* outside the region a fence is only an instruction fetch */
    if (rec_mode == MODE_OFF)
      return;
    out_run(run_ip, run);
    out_fetch(ip);
    return;
  }
  for_thread(running_tid);
  if (run)
    put_exec(run_ip, run);
  n_insn_recorded++;
  put_byte(MTR_FENCE);
  put_s((Long)(ip - last_ip));
  put_u(kind);
  last_ip = ip;
}

/* ------------------------------------------------------------------------------------------ */
/* Instrumentation                                                                             */

/* Which fence or serialising instruction starts at `ip`, 0 if none. VEX gives LFENCE, MFENCE
 * and SFENCE all as the same Ist_MBE(Imbe_Fence) and CPUID/RDTSC/RDTSCP as dirty helper
 * calls, so the kind can only be told from the instruction bytes, read here at translation
 * time (the bytes are mapped: VEX has just decoded them). */
static UWord fence_kind_at(Addr ip, UInt len)
{
  const UChar *p = (const UChar *)ip;
  UInt i = 0;
  /* legacy prefixes (operand/address size, rep, segment) and REX */
  while (i < len && i < 15 &&
         (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xF2 || p[i] == 0xF3 || p[i] == 0x2E ||
          p[i] == 0x3E || p[i] == 0x26 || p[i] == 0x36 || p[i] == 0x64 || p[i] == 0x65 ||
          (p[i] >= 0x40 && p[i] <= 0x4F)))
    i++;
  if (i + 2 > len || p[i] != 0x0F)
    return 0;
  UChar b1 = p[i + 1];
  if (b1 == 0xA2)
    return MTR_FENCE_CPUID;
  if (b1 == 0x31)
    return MTR_FENCE_RDTSC;
  if (i + 3 > len)
    return 0;
  UChar b2 = p[i + 2];
  if (b1 == 0xAE) { /* group 15 with a register operand (mod = 11) */
    if (b2 >= 0xE8 && b2 <= 0xEF)
      return MTR_FENCE_LFENCE;
    if (b2 >= 0xF0 && b2 <= 0xF7)
      return MTR_FENCE_MFENCE;
    if (b2 >= 0xF8)
      return MTR_FENCE_SFENCE;
  }
  if (b1 == 0x01 && b2 == 0xF9)
    return MTR_FENCE_RDTSCP;
  return 0;
}

/* Whether the instruction at `ip` is REP STOS or REP MOVS: (element size << 8) | enum mtr_rep,
 * 0 if not. Read from its bytes at translation time, as fence_kind_at: F3, possibly other
 * legacy prefixes (0x66 makes the word forms 2 bytes) and a REX just before the opcode (REX.W
 * makes them 8), then AA/AB (STOS) or A4/A5 (MOVS). */
static UWord rep_kind_at(Addr ip, UInt len)
{
  const UChar *p = (const UChar *)ip;
  Bool rep = False, opsize = False, rex_w = False;
  UInt i = 0;
  for (; i < len && i < 15; i++) {
    UChar b = p[i];
    if (b >= 0x40 && b <= 0x4F) {
      rex_w = (b & 0x08) != 0;
      continue;
    }
    if (b == 0xF3)
      rep = True;
    else if (b == 0xF2)
      return 0; /* REPNE: not what we coalesce (VEX may treat it differently) */
    else if (b == 0x66)
      opsize = True;
    else if (!(b == 0x67 || b == 0x2E || b == 0x3E || b == 0x26 || b == 0x36 || b == 0x64 ||
               b == 0x65))
      break;
    rex_w = False; /* a REX counts only right before the opcode */
  }
  if (!rep || i >= len)
    return 0;
  UWord wide = rex_w ? 8 : opsize ? 2 : 4;
  switch (p[i]) {
  case 0xAA: return (1u << 8) | MTR_REP_STOS;
  case 0xAB: return (wide << 8) | MTR_REP_STOS;
  case 0xA4: return (1u << 8) | MTR_REP_MOVS;
  case 0xA5: return (wide << 8) | MTR_REP_MOVS;
  default: return 0;
  }
}

/* The instrumenter's view of the superblock so far: the run of finished memory-free
 * instructions not yet handed to a helper, and the instruction being translated. */
typedef struct {
  IRSB *out;
  Addr run_ip;
  UWord run_n;
  Addr run_end;  /* the address after the run's last instruction */
  Addr run_last; /* the address of the run's last instruction */
  Addr cur_ip;
  UInt cur_len;
  Bool cur_valid;   /* an IMark has been seen */
  Bool cur_mem;     /* the current instruction has a memory access: not part of a run */
  Bool cur_special; /* a fence: recorded as FENCE, not counted in a run */
  Bool cur_cas;     /* contains a CAS: its plain loads are the CAS's own read */
  Bool cur_guarded; /* has a guarded access: recorded through h_access_g / h_gi_end */
  UWord cur_rep;    /* a REP STOS/MOVS recorded through h_rep: (size << 8) | kind; else 0 */
  IRExpr *rep_src;  /* its MOVS load's address (an atom: still valid at the store) */
} InstrState;

/* The run word (RUN_N, RUN_LAST) of n instructions from `ip` to `last`. */
static IRExpr *run_word(Addr ip, UWord n, Addr last)
{
  return mkIRExpr_HWord(n ? (HWord)(n | ((ULong)(last - ip) << 32)) : 0);
}

static IRExpr *run_arg(const InstrState *s)
{
  return run_word(s->run_ip, s->run_n, s->run_last);
}

static void add_call(InstrState *s, const HChar *name, void *fn, IRExpr **args, IRExpr *guard)
{
  IRDirty *d = unsafeIRDirty_0_N(0, name, VG_(fnptr_to_fnentry)(fn), args);
  if (guard)
    d->guard = guard;
  addStmtToIRSB(s->out, IRStmt_Dirty(d));
}

/* The current instruction is done: if it touched no memory it joins the run. */
static void finish_cur(InstrState *s)
{
  if (s->cur_valid && s->cur_guarded)
    add_call(s, "mmusim_gi_end", h_gi_end, mkIRExprVec_1(mkIRExpr_HWord(s->cur_ip)), NULL);
  else if (s->cur_valid && !s->cur_mem && !s->cur_special) {
    if (s->run_n == 0)
      s->run_ip = s->cur_ip;
    s->run_n++;
    s->run_end = s->cur_ip + s->cur_len;
    s->run_last = s->cur_ip;
  }
  s->cur_valid = False;
}

/* A memory access of the current instruction, recorded when `guard` (may be NULL) holds. */
static void add_access(InstrState *s, UChar op, IRExpr *addr, Int size, IRExpr *guard)
{
  if (s->cur_rep) {
    /* A REP STOS/MOVS iteration (its shape checked at the IMark): the MOVS load's address
     * waits for the store, which makes one call with both. */
    if (op == MTR_LOAD) {
      s->rep_src = addr;
      return;
    }
    IRExpr *src = (s->cur_rep & 0xFF) == MTR_REP_MOVS ? s->rep_src : mkIRExpr_HWord(0);
    IRDirty *d = unsafeIRDirty_0_N(
        0, "mmusim_rep", VG_(fnptr_to_fnentry)(h_rep),
        mkIRExprVec_6(mkIRExpr_HWord(s->run_ip), run_arg(s), mkIRExpr_HWord(s->cur_ip), addr,
                      src, mkIRExpr_HWord(s->cur_rep)));
    addStmtToIRSB(s->out, IRStmt_Dirty(d));
    s->run_n = 0;
    s->cur_mem = True;
    return;
  }
  UWord size_op = ((UWord)size << 8) | op | (s->cur_mem ? 0 : FIRST_ACCESS);
  if (s->cur_guarded) {
    /* The guard's value goes to the helper (as a word), which decides at run time. */
    IRExpr *g = mkIRExpr_HWord(1);
    if (guard) {
      IRTemp t = newIRTemp(s->out->tyenv, Ity_I64);
      addStmtToIRSB(s->out, IRStmt_WrTmp(t, IRExpr_Unop(Iop_1Uto64, guard)));
      g = IRExpr_RdTmp(t);
    }
    add_call(s, "mmusim_access_g", h_access_g,
             mkIRExprVec_4(mkIRExpr_HWord(s->cur_ip), addr, mkIRExpr_HWord(size_op), g), NULL);
    s->cur_mem = True;
    return;
  }
  if (s->run_n && !guard) {
    add_call(s, "mmusim_access", h_access,
             mkIRExprVec_5(mkIRExpr_HWord(s->run_ip), run_arg(s),
                           mkIRExpr_HWord(s->cur_ip), addr, mkIRExpr_HWord(size_op)),
             NULL);
    s->run_n = 0;
  } else {
    /* A guarded access must not take the run with it (the run has to be written whether or
     * not the guard holds), so it is flushed unconditionally first. */
    if (s->run_n) {
      add_call(s, "mmusim_exec", h_exec,
               mkIRExprVec_2(mkIRExpr_HWord(s->run_ip), run_arg(s)), NULL);
      s->run_n = 0;
    }
    add_call(s, "mmusim_access0", h_access0,
             mkIRExprVec_3(mkIRExpr_HWord(s->cur_ip), addr, mkIRExpr_HWord(size_op)), guard);
  }
  s->cur_mem = True;
}

static void add_fence(InstrState *s, UWord kind)
{
  add_call(s, "mmusim_fence", h_fence,
           mkIRExprVec_4(mkIRExpr_HWord(s->run_ip), run_arg(s),
                         mkIRExpr_HWord(s->cur_ip), mkIRExpr_HWord(kind)),
           NULL);
  s->run_n = 0;
  s->cur_special = True;
}

/* Before a side exit: if it is taken, the run and (when it has touched no memory so far) the
 * current instruction have executed; write them then, and only then. */
static void add_exit_flush(InstrState *s, IRExpr *guard)
{
  if (s->cur_valid && s->cur_guarded) {
    /* the run was flushed at the instruction's start */
    add_call(s, "mmusim_gi_end", h_gi_end, mkIRExprVec_1(mkIRExpr_HWord(s->cur_ip)), guard);
    return;
  }
  Addr ip = s->run_ip, last = s->run_last;
  UWord n = s->run_n;
  if (s->cur_valid && !s->cur_mem && !s->cur_special) {
    if (n == 0)
      ip = s->cur_ip;
    n++;
    last = s->cur_ip;
  }
  if (n)
    add_call(s, "mmusim_exec", h_exec, mkIRExprVec_2(mkIRExpr_HWord(ip), run_word(ip, n, last)),
             guard);
}

/* A dirty helper's guard, NULL when it always runs. */
static IRExpr *dirty_guard(const IRDirty *d)
{
  IRExpr *g = d->guard;
  if (g && g->tag == Iex_Const && g->Iex.Const.con->tag == Ico_U1 && g->Iex.Const.con->Ico.U1)
    return NULL;
  return g;
}

static IRSB *mr_instrument(VgCallbackClosure *closure, IRSB *sb_in, const VexGuestLayout *layout,
                           const VexGuestExtents *vge, const VexArchInfo *archinfo,
                           IRType gWordTy, IRType hWordTy)
{
  (void)closure;
  (void)layout;
  (void)vge;
  (void)archinfo;
  if (gWordTy != hWordTy)
    VG_(tool_panic)("mmusimrec: host and guest word sizes differ");

  InstrState s;
  VG_(memset)(&s, 0, sizeof s);
  s.out = deepCopyIRSBExceptStmts(sb_in);

  Int i = 0;
  /* The statements before the first IMark set up the superblock: copy them as they are. */
  for (; i < sb_in->stmts_used && sb_in->stmts[i]->tag != Ist_IMark; i++)
    addStmtToIRSB(s.out, sb_in->stmts[i]);

  for (; i < sb_in->stmts_used; i++) {
    IRStmt *st = sb_in->stmts[i];
    if (!st || st->tag == Ist_NoOp)
      continue;

    switch (st->tag) {
    case Ist_IMark: {
      finish_cur(&s);
      /* VEX follows direct jumps (and some conditional branches) within a superblock; a
       * run ends where the next instruction is not the one after it in memory, so that the
       * instructions of an EXEC record are always consecutive. */
      Addr next_ip = (Addr)(st->Ist.IMark.addr + st->Ist.IMark.delta);
      if (s.run_n && next_ip != s.run_end) {
        add_call(&s, "mmusim_exec", h_exec,
                 mkIRExprVec_2(mkIRExpr_HWord(s.run_ip), run_arg(&s)), NULL);
        s.run_n = 0;
      }
      s.cur_valid = True;
      s.cur_mem = False;
      s.cur_special = False;
      s.cur_ip = (Addr)(st->Ist.IMark.addr + st->Ist.IMark.delta);
      s.cur_len = st->Ist.IMark.len;
      /* Does this instruction contain a CAS? VEX gives a LOCK-prefixed read-modify-write as
       * a plain load of the old value then a CAS; the load is part of the atomic access. */
      s.cur_cas = False;
      s.cur_guarded = False;
      s.cur_rep = clo_rep ? rep_kind_at(s.cur_ip, s.cur_len) : 0;
      s.rep_src = NULL;
      /* For a REP instruction, VEX's IR must be what coalescing assumes: one store of the
       * element size (and for MOVS one load of it before it), no other memory access. */
      Int n_loads = 0, n_stores = 0, n_other = 0;
      Bool load_first = False;
      for (Int j = i + 1; j < sb_in->stmts_used && sb_in->stmts[j]->tag != Ist_IMark; j++) {
        IRStmt *sj = sb_in->stmts[j];
        if (sj->tag == Ist_CAS)
          s.cur_cas = True;
        if (sj->tag == Ist_LoadG || sj->tag == Ist_StoreG ||
            (sj->tag == Ist_Dirty && sj->Ist.Dirty.details->mFx != Ifx_None &&
             dirty_guard(sj->Ist.Dirty.details)))
          s.cur_guarded = True;
        if (!s.cur_rep)
          continue;
        UWord esize = s.cur_rep >> 8;
        if (sj->tag == Ist_WrTmp && sj->Ist.WrTmp.data->tag == Iex_Load) {
          n_loads++;
          if (n_stores == 0)
            load_first = True;
          if ((UWord)sizeofIRType(sj->Ist.WrTmp.data->Iex.Load.ty) != esize)
            n_other++;
        } else if (sj->tag == Ist_Store) {
          n_stores++;
          if ((UWord)sizeofIRType(typeOfIRExpr(sb_in->tyenv, sj->Ist.Store.data)) != esize)
            n_other++;
        } else if (sj->tag == Ist_CAS || sj->tag == Ist_LLSC || sj->tag == Ist_LoadG ||
                   sj->tag == Ist_StoreG ||
                   (sj->tag == Ist_Dirty && sj->Ist.Dirty.details->mFx != Ifx_None)) {
          n_other++;
        }
      }
      if (s.cur_rep) {
        Bool movs = (s.cur_rep & 0xFF) == MTR_REP_MOVS;
        Bool ok = n_other == 0 && n_stores == 1 &&
                  (movs ? (n_loads == 1 && load_first) : n_loads == 0);
        if (!ok)
          s.cur_rep = 0; /* recorded as plain accesses: correct, only not coalesced */
      }
      addStmtToIRSB(s.out, st);
      if (s.cur_guarded && s.run_n) {
        /* its accesses are decided at run time: the run before it goes out now */
        add_call(&s, "mmusim_exec", h_exec,
                 mkIRExprVec_2(mkIRExpr_HWord(s.run_ip), run_arg(&s)), NULL);
        s.run_n = 0;
      }
      if (clo_selfcheck) {
        /* n_insn_executed++ in IR: the reference the records are checked against */
        IRTemp t1 = newIRTemp(s.out->tyenv, Ity_I64);
        IRTemp t2 = newIRTemp(s.out->tyenv, Ity_I64);
        IRExpr *a = mkIRExpr_HWord((HWord)&n_insn_executed);
        addStmtToIRSB(s.out, IRStmt_WrTmp(t1, IRExpr_Load(Iend_LE, Ity_I64, a)));
        addStmtToIRSB(s.out, IRStmt_WrTmp(t2, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(t1),
                                                           IRExpr_Const(IRConst_U64(1)))));
        addStmtToIRSB(s.out, IRStmt_Store(Iend_LE, a, IRExpr_RdTmp(t2)));
      }
      UWord kind = fence_kind_at(s.cur_ip, s.cur_len);
      if (kind)
        add_fence(&s, kind);
      break;
    }

    case Ist_WrTmp: {
      IRExpr *e = st->Ist.WrTmp.data;
      if (e->tag == Iex_Load && !s.cur_cas)
        add_access(&s, MTR_LOAD, e->Iex.Load.addr, sizeofIRType(e->Iex.Load.ty), NULL);
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_Store: {
      IRType ty = typeOfIRExpr(sb_in->tyenv, st->Ist.Store.data);
      add_access(&s, MTR_STORE, st->Ist.Store.addr, sizeofIRType(ty), NULL);
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_LoadG: {
      IRLoadG *lg = st->Ist.LoadG.details;
      IRType ty_wide = Ity_INVALID, ty_mem = Ity_INVALID;
      typeOfIRLoadGOp(lg->cvt, &ty_wide, &ty_mem);
      if (!s.cur_cas)
        add_access(&s, MTR_LOAD, lg->addr, sizeofIRType(ty_mem), lg->guard);
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_StoreG: {
      IRStoreG *sg = st->Ist.StoreG.details;
      IRType ty = typeOfIRExpr(sb_in->tyenv, sg->data);
      add_access(&s, MTR_STORE, sg->addr, sizeofIRType(ty), sg->guard);
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_CAS: {
      IRCAS *cas = st->Ist.CAS.details;
      Int size = sizeofIRType(typeOfIRExpr(sb_in->tyenv, cas->dataLo));
      if (cas->dataHi)
        size *= 2; /* double CAS (CMPXCHG16B): one access of both halves */
      add_access(&s, MTR_ATOMIC, cas->addr, size, NULL);
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_LLSC: {
      /* not generated for amd64; handled as the plain load and store they are */
      IRType ty;
      if (st->Ist.LLSC.storedata == NULL) {
        ty = typeOfIRTemp(sb_in->tyenv, st->Ist.LLSC.result);
        add_access(&s, MTR_LOAD, st->Ist.LLSC.addr, sizeofIRType(ty), NULL);
      } else {
        ty = typeOfIRExpr(sb_in->tyenv, st->Ist.LLSC.storedata);
        add_access(&s, MTR_STORE, st->Ist.LLSC.addr, sizeofIRType(ty), NULL);
      }
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_Dirty: {
      IRDirty *d = st->Ist.Dirty.details;
      if (d->mFx != Ifx_None && d->mAddr && d->mSize > 0) {
        /* The helper's own guard decides whether its memory effect happens. */
        IRExpr *g = dirty_guard(d);
        if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
          add_access(&s, MTR_LOAD, d->mAddr, d->mSize, g);
        if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
          add_access(&s, MTR_STORE, d->mAddr, d->mSize, g);
      }
      addStmtToIRSB(s.out, st);
      break;
    }

    case Ist_MBE:
      /* A fence not recognised from its bytes (it should not happen on amd64) still is one. */
      if (st->Ist.MBE.event == Imbe_Fence && s.cur_valid && !s.cur_special)
        add_fence(&s, MTR_FENCE_MFENCE);
      addStmtToIRSB(s.out, st);
      break;

    case Ist_Exit:
      add_exit_flush(&s, st->Ist.Exit.guard);
      addStmtToIRSB(s.out, st);
      break;

    default: /* Put, PutI, AbiHint: no memory */
      addStmtToIRSB(s.out, st);
      break;
    }
  }

  /* The final jump: whatever is pending has executed. */
  finish_cur(&s);
  if (s.run_n)
    add_call(&s, "mmusim_exec", h_exec,
             mkIRExprVec_2(mkIRExpr_HWord(s.run_ip), run_arg(&s)), NULL);
  return s.out;
}

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                      */

static void mr_start_client_code(ThreadId tid, ULong blocks_dispatched)
{
  (void)blocks_dispatched;
  running_tid = tid;
}

static void ctl_poll(ThreadId tid);  /* the control file (below, with the region's requests) */
static void ctl_close(ThreadId tid);

static void put_syscall(ThreadId tid, UInt nr, const UWord *args, UInt nargs, Long result)
{
  for_thread(tid);
  put_byte(MTR_SYSCALL);
  put_u(nr);
  for (UInt k = 0; k < 6; k++)
    put_u(k < nargs ? args[k] : 0);
  put_s(result);
}

static void put_exit(ThreadId tid, Long code)
{
  for_thread(tid);
  put_byte(MTR_EXIT);
  put_s(code);
  if (tid < VG_N_THREADS)
    thread_live[tid] = False;
}

/* Where a failed execve has to take the file back to (see mr_pre_syscall). */
static ULong execve_mark = 0;
static Bool execve_pending = False;

static void mr_pre_syscall(ThreadId tid, UInt nr, UWord *args, UInt nargs)
{
  if (!active)
    return;
  switch (nr) {
  case NR_EXIT:
    if (ctl_watch) {
      /* The last live thread's exit ends the process like an exit_group. */
      UInt live = 0;
      for (UInt t = 0; t < VG_N_THREADS; t++)
        live += thread_live[t] ? 1 : 0;
      if (live <= 1)
        ctl_close(tid);
    }
    put_syscall(tid, nr, args, nargs, 0);
    put_exit(tid, (Long)(Int)args[0]);
    break;
  case NR_EXIT_GROUP:
    if (ctl_watch)
      ctl_close(tid);
    put_syscall(tid, nr, args, nargs, 0);
    put_exit(tid, (Long)(Int)args[0]);
    process_exiting = True;
    break;
  case NR_EXECVE:
  case NR_EXECVEAT:
    /* A successful execve does not return: write its record and END now. The new program is
     * not recorded (with Valgrind's default --trace-children=no it runs natively; with =yes
     * a new recorder would start over in the same directory). If the execve fails, the post
     * handler takes the file back to before these records and writes the real result. */
    settle();
    flush_buf();
    execve_mark = file_bytes;
    execve_pending = True;
    /* An open control-file region ends before the program does; only the bytes, not the
     * state: if the execve fails they are taken back and the region goes on. */
    if (ctl_watch && ctl_seen && in_region && !region_ended) {
      for_thread(tid);
      put_byte(MTR_REGION);
      put_u(0);
      put_u(0);
      put_u(0);
    }
    put_syscall(tid, nr, args, nargs, 0);
    end_trace();
    break;
  default:
    break;
  }
}

static Bool is_fork_like(UInt nr, const UWord *args, UInt nargs)
{
  if (nr == NR_FORK || nr == NR_VFORK)
    return True;
  /* Valgrind turns a vfork-like clone (CLONE_VM|CLONE_VFORK, as posix_spawn uses) into a
   * fork, so every clone without CLONE_THREAD makes a process. */
  if (nr == NR_CLONE && nargs > 0 && !(args[0] & VKI_CLONE_THREAD))
    return True;
  return False;
}

static void mr_post_syscall(ThreadId tid, UInt nr, UWord *args, UInt nargs, SysRes res)
{
  if (nr == NR_EXIT || nr == NR_EXIT_GROUP)
    return; /* written before they ran */
  Long result = sr_isError(res) ? -(Long)sr_Err(res) : (Long)sr_Res(res);
  if (nr == NR_EXECVE || nr == NR_EXECVEAT) {
    if (!execve_pending)
      return;
    /* Still here: the execve failed. Undo its records and END, continue the file. */
    execve_pending = False;
    SysRes t = VG_(do_syscall)(__NR_ftruncate, (RegWord)out_fd, (RegWord)execve_mark, 0, 0, 0,
                               0, 0, 0);
    (void)t;
    VG_(lseek)(out_fd, (Off64T)execve_mark, VKI_SEEK_SET);
    file_bytes = execve_mark;
    active = True;
    set_mode();
    put_syscall(tid, nr, args, nargs, result);
    return;
  }
  if (!active)
    return;
  if (is_fork_like(nr, args, nargs) && !sr_isError(res) && result == 0)
    return; /* the child's view of its own fork: not needed (its file starts after it) */
  put_syscall(tid, nr, args, nargs, result);
  /* Region mode: a change of the mappings (or an attempt: the header says successful or
   * not) may make any page fault again, so every page's next touch is a first one again. */
  if (nr == NR_MMAP || nr == NR_MUNMAP || nr == NR_MPROTECT || nr == NR_MADVISE ||
      nr == NR_BRK || nr == NR_MREMAP)
    tt_clear();
  if (is_fork_like(nr, args, nargs) && result > 0) {
    reserve();
    put_byte(MTR_FORK);
    put_u((ULong)result);
  }
  if (ctl_watch)
    ctl_poll(tid);
}

static void mr_pre_thread_ll_create(ThreadId parent, ThreadId child)
{
  /* The core announces the first thread too, with no parent: it is the THREAD 1 that
   * begins the file, not a creation by the program. */
  if (!active || parent == VG_INVALID_THREADID)
    return;
  for_thread(parent);
  put_byte(MTR_NEWTHREAD);
  put_u(child);
  if (child < VG_N_THREADS)
    thread_live[child] = True;
}

static void mr_pre_thread_ll_exit(ThreadId tid)
{
  /* A thread that ends without its own exit syscall (the exit syscall wrote EXIT already; an
   * exit_group ends all of them at once). The exit code is not known here. */
  if (!active || process_exiting || tid >= VG_N_THREADS || !thread_live[tid])
    return;
  put_exit(tid, 0);
}

/* The forking process's pid, for the child's header. Taken before the fork: in the child,
 * getppid() is already someone else's if the parent has exited (a daemon's double fork). */
static Int forking_pid = 0;

static void mr_atfork_pre(ThreadId tid)
{
  (void)tid;
  forking_pid = VG_(getpid)();
  /* Write out what the parent has, so that the child's copy of the buffer holds nothing the
   * child could write a second time. */
  settle();
  flush_buf();
  /* A fork makes the parent's pages copy-on-write and gives the child none of its own yet:
   * in both, every page's next touch is a first one (the child inherits the cleared table). */
  tt_clear();
}

static void mr_atfork_parent(ThreadId tid) { (void)tid; }

static void mr_atfork_child(ThreadId tid)
{
  if (!active)
    return;
  Int parent = forking_pid;
  /* The inherited descriptor is the parent's file: close it without writing to it. */
  VG_(close)(out_fd);
  out_fd = -1;
  buf_pos = 0;
  open_trace(VG_(getpid)(), parent);
  /* Only the forking thread exists in the child. */
  for (UInt t = 0; t < VG_N_THREADS; t++)
    thread_live[t] = False;
  process_exiting = False;
  execve_pending = False;
  /* The region is the process's own: the child is outside it until its own REGION begin. */
  in_region = False;
  region_ended = False;
  ctl_watch = False; /* only the root process follows the control file */
  set_mode();
  running_tid = tid;
  switch_stream(tid);
}

/* A REGION record in thread tid, and the region state (what region mode records, the
 * self-check's marks) changed with it. */
static void region_set(ThreadId tid, Bool on, UWord start, UWord len)
{
  for_thread(tid);
  put_byte(MTR_REGION);
  put_u(on ? 1 : 0);
  put_u(on ? start : 0);
  put_u(on ? len : 0);
  if (on && !in_region) {
    sc_exec_mark = n_insn_executed;
    sc_rec_mark = n_insn_recorded;
  } else if (!on && in_region) {
    sc_exec_in += n_insn_executed - sc_exec_mark;
    sc_rec_in += n_insn_recorded - sc_rec_mark;
  }
  if (!on)
    region_ended = True;
  in_region = on;
  set_mode();
}

static Bool mr_handle_client_request(ThreadId tid, UWord *arg, UWord *ret)
{
  if (arg[0] != MTR_CLIENTREQ_REGION_BEGIN && arg[0] != MTR_CLIENTREQ_REGION_END)
    return False;
  *ret = 0;
  if (!active)
    return True;
  Bool on = arg[0] == MTR_CLIENTREQ_REGION_BEGIN;
  if (on && in_region && ctl_seen) {
    /* The control file's region is open already: a second begin would make the recording
     * one the simulator refuses. The program's own end still ends it. */
    VG_(umsg)("mmusimrec: the program's region begin while the control file's region is open:"
              " ignored\n");
    return True;
  }
  region_set(tid, on, arg[1], arg[2]);
  return True;
}

/* The control file, at a system call of thread tid of the root process (after its SYSCALL
 * record: the region begins or ends between that syscall and the thread's next record). */
static void ctl_poll(ThreadId tid)
{
  UInt now = VG_(read_millisecond_timer)();
  if (ctl_checked && now - ctl_last_ms < 1)
    return;
  ctl_checked = True;
  ctl_last_ms = now;
  struct vg_stat st;
  Bool exists = !sr_isError(VG_(stat)(ctl_path, &st));
  if (region_ended) {
    /* One region per recording (the simulator refuses a second): after the first has ended,
     * by the file or by the program's client requests, the file means nothing any more. Say
     * so when it is there again, once, and stop looking. */
    if (exists) {
      VG_(umsg)("mmusimrec: %s exists again after the measured region ended: ignored (one "
                "region per recording)\n", ctl_path);
      ctl_watch = False;
    }
    return;
  }
  if (!ctl_seen) {
    if (exists) {
      ctl_seen = True;
      /* A region the program opened itself already is the region: the file's removal ends
       * it (or the program's own end request does, whichever comes first). */
      if (!in_region)
        region_set(tid, True, 0, 0);
    }
  } else if (!exists && in_region) {
    region_set(tid, False, 0, 0);
  }
}

/* The process ends (exit_group, the last thread's exit, the end of the recording) with the
 * control file's region still open: end it first. The replay stops a thread at its EXIT, so a
 * REGION after it would never be seen; hence before the exit's SYSCALL record. */
static void ctl_close(ThreadId tid)
{
  if (ctl_seen && in_region && !region_ended && active)
    region_set(tid, False, 0, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Start and end                                                                               */

static void write_manifest(Int pid)
{
  HChar path[4200];
  VG_(snprintf)(path, sizeof path, "%s/manifest.txt", out_dir);
  SysRes r = VG_(open)(path, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_TRUNC, 0644);
  if (sr_isError(r)) {
    VG_(umsg)("mmusimrec: cannot create %s: %s\n", path, VG_(sr_as_string)(r));
    VG_(exit)(2);
  }
  Int fd = (Int)sr_Res(r);
  HChar line[64];
  VG_(snprintf)(line, sizeof line, "mmusim-trace 1\nroot-pid %d\ncommand ", pid);
  VG_(write)(fd, line, (Int)VG_(strlen)(line));
  /* argv joined by ' '; a newline inside an argument would end the line early, so it is
   * written as a space (the manifest is for people, not for the replay). */
  Word nargs = VG_(args_for_client) ? VG_(sizeXA)(VG_(args_for_client)) : 0;
  for (Word k = -1; k < nargs; k++) {
    const HChar *a =
        k < 0 ? VG_(args_the_exename) : *(HChar **)VG_(indexXA)(VG_(args_for_client), k);
    if (!a)
      a = "";
    if (k >= 0)
      VG_(write)(fd, " ", 1);
    for (const HChar *c = a; *c; c++)
      VG_(write)(fd, *c == '\n' ? " " : c, 1);
  }
  VG_(write)(fd, "\n", 1);
  const HChar *detail = clo_detail_region ? "detail region\n" : "detail all\n";
  VG_(write)(fd, detail, (Int)VG_(strlen)(detail));
  VG_(close)(fd);
}

/* MAP records for the client's mappings when the recording begins. */
static void write_maps(void)
{
  UInt kinds = SkAnonC | SkFileC | SkShmC;
  /* The call wants a buffer of at least one entry and returns minus the number needed when
   * it is too small: grow until everything fits. */
  Int cap = 64, got;
  Addr *starts;
  for (;;) {
    starts = VG_(malloc)("mmusimrec.maps", (SizeT)cap * sizeof(Addr));
    got = VG_(am_get_segment_starts)(kinds, starts, cap);
    if (got >= 0)
      break;
    VG_(free)(starts);
    cap = -got + 16;
  }
  for (Int k = 0; k < got; k++) {
    NSegment const *seg = VG_(am_find_nsegment)(starts[k]);
    if (!seg || !(seg->kind & kinds))
      continue;
    UWord prot = (seg->hasR ? MTR_PROT_READ : 0) | (seg->hasW ? MTR_PROT_WRITE : 0) |
                 (seg->hasX ? MTR_PROT_EXEC : 0);
    /* Valgrind's segment table does not keep MAP_SHARED for file mappings; at startup (the
     * program, the loader, the stack) they are all private, and SkShmC is shared memory. */
    UWord kind = seg->kind == SkAnonC   ? MTR_MAP_ANON
                 : seg->kind == SkFileC ? MTR_MAP_FILE_PRIVATE
                                        : MTR_MAP_FILE_SHARED;
    reserve();
    put_byte(MTR_MAP);
    put_u(seg->start);
    put_u(seg->end - seg->start + 1);
    put_u(prot);
    put_u(kind);
  }
  VG_(free)(starts);
}

static void mr_post_clo_init(void)
{
  if (!clo_out_dir || !clo_out_dir[0]) {
    VG_(fmsg)("mmusimrec: --mmusim-out=DIR is required\n");
    VG_(exit)(2);
  }
  if (clo_out_dir[0] == '/') {
    VG_(snprintf)(out_dir, sizeof out_dir, "%s", clo_out_dir);
  } else {
    const HChar *wd = VG_(get_startup_wd)();
    VG_(snprintf)(out_dir, sizeof out_dir, "%s/%s", wd ? wd : ".", clo_out_dir);
  }
  /* Create the directory if it is not there (its parent must exist). */
  SysRes r = VG_(do_syscall)(__NR_mkdir, (RegWord)out_dir, 0777, 0, 0, 0, 0, 0, 0);
  if (sr_isError(r) && sr_Err(r) != VKI_EEXIST) {
    VG_(umsg)("mmusimrec: cannot create the directory %s: %s\n", out_dir,
              VG_(sr_as_string)(r));
    VG_(exit)(2);
  }

  if (clo_detail_str && VG_(strcmp)(clo_detail_str, "all") == 0) {
    clo_detail_region = False;
  } else if (clo_detail_str && VG_(strcmp)(clo_detail_str, "region") == 0) {
    clo_detail_region = True;
    tt_init();
  } else {
    VG_(fmsg)("mmusimrec: --mmusim-detail must be all or region, not '%s'\n", clo_detail_str);
    VG_(exit)(2);
  }

  thread_live = VG_(malloc)("mmusimrec.threads", VG_N_THREADS * sizeof(Bool));
  VG_(memset)(thread_live, 0, VG_N_THREADS * sizeof(Bool));

  if (clo_region_control) {
    if (!clo_region_control[0]) {
      VG_(fmsg)("mmusimrec: --mmusim-region-control needs a path\n");
      VG_(exit)(2);
    }
    /* absolute, as the output directory: the program may chdir() (Redis does, to its --dir) */
    if (clo_region_control[0] == '/') {
      VG_(snprintf)(ctl_path, sizeof ctl_path, "%s", clo_region_control);
    } else {
      const HChar *wd = VG_(get_startup_wd)();
      VG_(snprintf)(ctl_path, sizeof ctl_path, "%s/%s", wd ? wd : ".", clo_region_control);
    }
    ctl_watch = True;
  }

  Int pid = VG_(getpid)();
  write_manifest(pid);
  open_trace(pid, 0);
  write_maps();
  running_tid = 1;
  switch_stream(1);
}

static void mr_fini(Int exitcode)
{
  (void)exitcode;
  /* (a process killed by a signal: no exit syscall closed the region) */
  if (ctl_watch)
    ctl_close(stream_tid ? stream_tid : running_tid);
  end_trace();
  if (out_fd >= 0)
    VG_(close)(out_fd);
  out_fd = -1;
  if (VG_(clo_verbosity) > 1)
    VG_(umsg)("mmusimrec: %llu access records, %llu instructions, %llu trace bytes\n",
              n_access_records, n_insn_recorded, file_bytes);
  if (clo_selfcheck && !clo_detail_region) {
    VG_(umsg)("mmusimrec: selfcheck: %llu instructions executed, %llu recorded: %s\n",
              n_insn_executed, n_insn_recorded,
              n_insn_executed == n_insn_recorded ? "ok" : "MISMATCH");
  } else if (clo_selfcheck) {
    /* Region mode: only inside the region do the records stand for every instruction. */
    if (in_region) {
      sc_exec_in += n_insn_executed - sc_exec_mark;
      sc_rec_in += n_insn_recorded - sc_rec_mark;
    }
    VG_(umsg)("mmusimrec: selfcheck: %llu instructions executed, %llu recorded: %s"
              " (inside the region only)\n",
              sc_exec_in, sc_rec_in, sc_exec_in == sc_rec_in ? "ok" : "MISMATCH");
  }
}

static Bool mr_process_cmd_line_option(const HChar *arg)
{
  if VG_STR_CLO (arg, "--mmusim-out", clo_out_dir) {
  } else if VG_BOOL_CLO (arg, "--mmusim-selfcheck", clo_selfcheck) {
  } else if VG_STR_CLO (arg, "--mmusim-detail", clo_detail_str) {
  } else if VG_BOOL_CLO (arg, "--mmusim-rep", clo_rep) {
  } else if VG_STR_CLO (arg, "--mmusim-region-control", clo_region_control) {
  } else
    return False;
  return True;
}

static void mr_print_usage(void)
{
  VG_(printf)("    --mmusim-out=DIR          write the recording (manifest.txt, proc-<pid>.mtr)"
              " to DIR [required]\n"
              "    --mmusim-selfcheck=no|yes also count instructions directly and check the\n"
              "                              records account for exactly those [no]\n"
              "    --mmusim-detail=all|region  record everything, or outside the measured region\n"
              "                              only each page's first read, write and fetch (and\n"
              "                              every syscall and thread event) [all]\n"
              "    --mmusim-rep=yes|no       a REP STOS/MOVS as REP records, or as one access\n"
              "                              record per iteration [yes]\n"
              "    --mmusim-region-control=PATH  the measured region of the first process begins\n"
              "                              when PATH appears and ends when it is removed\n"
              "                              (checked at its syscalls, at most once a ms) [none]\n");
}

static void mr_print_debug_usage(void) { VG_(printf)("    (none)\n"); }

static void mr_pre_clo_init(void)
{
  VG_(details_name)("mmusimrec");
  VG_(details_version)("1");
  VG_(details_description)("the mmusim trace recorder");
  VG_(details_copyright_author)("mmusim authors; GPL-2.0-only");
  VG_(details_bug_reports_to)("the mmusim project");
  VG_(details_avg_translation_sizeB)(400);

  VG_(basic_tool_funcs)(mr_post_clo_init, mr_instrument, mr_fini);
  VG_(needs_command_line_options)(mr_process_cmd_line_option, mr_print_usage,
                                  mr_print_debug_usage);
  VG_(needs_client_requests)(mr_handle_client_request);
  VG_(needs_syscall_wrapper)(mr_pre_syscall, mr_post_syscall);
  VG_(track_start_client_code)(mr_start_client_code);
  VG_(track_pre_thread_ll_create)(mr_pre_thread_ll_create);
  VG_(track_pre_thread_ll_exit)(mr_pre_thread_ll_exit);
  VG_(atfork)(mr_atfork_pre, mr_atfork_parent, mr_atfork_child);
}

VG_DETERMINE_INTERFACE_VERSION(mr_pre_clo_init)
