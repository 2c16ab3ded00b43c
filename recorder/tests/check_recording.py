#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The recorder's tests: record a test program with mmusimrec and check the trace through
scripts/mmusim-tracedump (so the dumper is tested along the way).

  check_recording.py TEST --build-dir <build>/recorder --dumper <src>/scripts/mmusim-tracedump
                          --work <dir>

TEST: forkbench, forkbench-patterns, threads, fences, atomics, exec, options,
tracedump-errors, strings, memset-size, detail-region, firsttouch, region-control,
region-control-open, record-redis (scripts/record-redis; needs Redis).
Exit 0: passed; 1: failed (the reason on stderr); 77: skipped (no valgrind or no tool).
"""
import argparse
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import time

SKIP = 77


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Env:
    def __init__(self, a):
        self.build = os.path.abspath(a.build_dir)
        self.dumper = os.path.abspath(a.dumper)
        self.work = os.path.abspath(a.work)
        self.libdir = os.path.join(self.build, "lib")

    def need_valgrind(self, prog):
        if not shutil.which("valgrind"):
            print("SKIP: valgrind is not installed", file=sys.stderr)
            sys.exit(SKIP)
        if not os.path.exists(os.path.join(self.libdir, "mmusimrec-amd64-linux")):
            print(f"SKIP: the tool was not built ({self.libdir}/mmusimrec-amd64-linux)",
                  file=sys.stderr)
            sys.exit(SKIP)
        if not os.path.exists(os.path.join(self.build, prog)):  # (an absolute prog: itself)
            print(f"SKIP: the test program {prog} was not built", file=sys.stderr)
            sys.exit(SKIP)

    def fresh(self, name):
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        return d

    def record(self, name, prog, args=(), extra=(), expect_rc=0):
        """Record build/<prog> args into a fresh directory; returns (dir, stdout, stderr)."""
        self.need_valgrind(prog)
        out = self.fresh(name)
        cmd = ["valgrind", "--tool=mmusimrec", f"--mmusim-out={out}", "--mmusim-selfcheck=yes",
               *extra, os.path.join(self.build, prog), *args]
        env = dict(os.environ, VALGRIND_LIB=self.libdir)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        if p.returncode != expect_rc:
            raise Failure(f"{' '.join(cmd)} exited {p.returncode}\nstdout:\n{p.stdout}\n"
                          f"stderr:\n{p.stderr}")
        # every process reports its selfcheck; none may disagree
        checks = re.findall(r"selfcheck: (\d+) instructions executed, (\d+) recorded: (\w+)",
                            p.stderr)
        check(checks, f"no selfcheck line in valgrind's output:\n{p.stderr}")
        for ex, rec, verdict in checks:
            check(verdict == "ok", f"instruction count mismatch: {ex} executed, {rec} recorded")
        return out, p.stdout, p.stderr

    def dump(self, target, *opts):
        p = subprocess.run([sys.executable, self.dumper, *opts, target], capture_output=True,
                           text=True)
        return p.returncode, p.stdout, p.stderr

    def files(self, recdir, *opts):
        """{pid: (ppid, [record lines])} of a recording, through the dumper (with opts)."""
        rc, out, err = self.dump(recdir, *opts)
        check(rc == 0, f"mmusim-tracedump {recdir} failed ({rc}): {err}")
        files = {}
        cur = None
        for line in out.splitlines():
            m = re.match(r"# file proc-(\d+)\.mtr(?:\.zst)? pid (\d+) parent (\d+)", line)
            if m:
                cur = int(m.group(2))
                check(int(m.group(1)) == cur, f"file name and header pid differ: {line}")
                files[cur] = (int(m.group(3)), [])
            else:
                files[cur][1].append(line)
        for pid, (_, recs) in files.items():
            check(recs and recs[-1] == "END", f"proc-{pid}.mtr does not end with END")
        return files


ACC = re.compile(r"t(\d+) (LOAD|STORE|ATOMIC) ip=0x([0-9a-f]+) addr=0x([0-9a-f]+) size=(\d+)")


def accesses(lines):
    for line in lines:
        m = ACC.match(line)
        if m:
            yield (int(m.group(1)), m.group(2), int(m.group(3), 16), int(m.group(4), 16),
                   int(m.group(5)))


def region_lines(lines):
    """The records between the first REGION on=1 and the next REGION on=0, and the begin."""
    start = next((i for i, l in enumerate(lines) if " REGION on=1 " in l), None)
    check(start is not None, "no REGION begin record")
    end = next((i for i in range(start + 1, len(lines)) if " REGION on=0 " in lines[i]), None)
    check(end is not None, "no REGION end record after the begin")
    m = re.search(r"start=0x([0-9a-f]+) len=(\d+)", lines[start])
    return lines[start + 1:end], int(m.group(1), 16), int(m.group(2))


def printed(stdout, key):
    m = re.search(rf"^{key} (0x[0-9a-f]+)(?: (\d+))?$", stdout, re.M)
    check(m, f"the program did not print '{key} ...': {stdout!r}")
    return int(m.group(1), 16), int(m.group(2)) if m.group(2) else None


def record_forkbench(env, name, pattern, size=1 << 20):
    rec, out, _ = env.record(name, "forkbench", ["--size", str(size), "--pattern", pattern])
    start, length = printed(out, "region")
    check(length == size, f"forkbench printed length {length}, want {size}")
    check(re.search(r"^region_minflt \d+$", out, re.M), f"no region_minflt line: {out!r}")
    files = env.files(rec)
    return rec, start, files


def test_forkbench(env):
    rec, start, files = record_forkbench(env, "forkbench", "seq-byte")
    with open(os.path.join(rec, "manifest.txt")) as f:
        man = f.read().splitlines()
    check(len(files) == 2, f"want 2 .mtr files (parent and child), got {sorted(files)}")
    roots = [p for p, (pp, _) in files.items() if pp == 0]
    check(len(roots) == 1, f"want one root process, got {roots}")
    parent = roots[0]
    child = next(p for p in files if p != parent)
    check(man[0] == "mmusim-trace 1" and man[1] == f"root-pid {parent}" and
          man[2].startswith("command ") and "forkbench --size" in man[2],
          f"bad manifest: {man}")
    check(files[child][0] == parent, f"child's parent pid {files[child][0]} != {parent}")
    plines, clines = files[parent][1], files[child][1]
    forks = [l for l in plines if " FORK " in l]
    check(forks == [f"t1 FORK pid={child}"], f"FORK records {forks}, want pid={child}")
    i = plines.index(forks[0])
    check(re.match(r"t1 SYSCALL nr=(56|57|58) .* result=" + str(child) + "$", plines[i - 1]),
          f"the record before FORK is not the fork's SYSCALL: {plines[i - 1]}")
    check(plines[0].startswith("MAP ") and any(l.startswith("THREAD") for l in plines),
          "the parent's file does not start with MAPs then THREAD")
    check(clines[0] == "THREAD tid=1", f"the child's first record is {clines[0]!r}")
    check(not any(l.startswith("MAP") for l in clines), "the child has MAP records")
    check(any(re.match(r"t1 SYSCALL nr=231 ", l) for l in clines), "no exit_group in child")
    check(clines[-2] == "t1 EXIT code=0", f"child: before END is {clines[-2]!r}")
    check(plines[-2] == "t1 EXIT code=0", f"parent: before END is {plines[-2]!r}")
    reg, rstart, rlen = region_lines(plines)
    check((rstart, rlen) == (start, 1 << 20),
          f"REGION start/len 0x{rstart:x}/{rlen}, the program printed 0x{start:x}/{1 << 20}")
    stores = [a for a in accesses(reg) if a[1] == "STORE" and start <= a[3] < start + rlen]
    check(len(stores) == 256, f"{len(stores)} stores to the region, want 256")
    want = [start + k * 4096 for k in range(256)]
    check([a[3] for a in stores] == want, "the stores are not one per 4K page ascending")
    check(all(a[4] == 1 for a in stores), "the region stores are not 1-byte stores")
    check(not any(start <= a[3] < start + rlen for a in accesses(reg) if a[1] != "STORE"),
          "loads/atomics in the region during seq-byte")
    rc, summ, err = env.dump(rec, "--summary")
    check(rc == 0 and "instructions:" in summ, f"--summary failed: {err}")


REP = re.compile(r"t(\d+) REP kind=(stos|movs) ip=0x([0-9a-f]+) addr=0x([0-9a-f]+) "
                 r"src=0x([0-9a-f]+) count=(\d+) size=(\d+)$")


def reps(lines):
    """(tid, kind, ip, addr, src, count, size) of the REP records."""
    for line in lines:
        m = REP.match(line)
        if m:
            yield (int(m.group(1)), m.group(2), int(m.group(3), 16), int(m.group(4), 16),
                   int(m.group(5), 16), int(m.group(6)), int(m.group(7)))


def expand_reps(lines):
    """The lines with each REP record replaced by the LOAD/STORE records of its iterations
    (what the recorder writes with --mmusim-rep=no)."""
    out = []
    for line in lines:
        m = REP.match(line)
        if not m:
            out.append(line)
            continue
        t, kind, ip = m.group(1), m.group(2), int(m.group(3), 16)
        addr, src, count, size = (int(m.group(4), 16), int(m.group(5), 16), int(m.group(6)),
                                  int(m.group(7)))
        for k in range(count):
            if kind == "movs":
                out.append(f"t{t} LOAD ip=0x{ip:x} addr=0x{src + k * size:x} size={size}")
            out.append(f"t{t} STORE ip=0x{ip:x} addr=0x{addr + k * size:x} size={size}")
    return out


def test_forkbench_patterns(env):
    # memset: the stores cover the region exactly once (256K: glibc's memset is REP STOSB
    # there, also under Valgrind's CPU: one REP record of the whole region, not 256K STOREs)
    rec, start, files = record_forkbench(env, "memset", "memset", size=256 << 10)
    parent = next(p for p, (pp, _) in files.items() if pp == 0)
    reg, rstart, rlen = region_lines(files[parent][1])
    covered = bytearray(rlen)
    pieces = [(addr, size) for _, op, _, addr, size in accesses(reg) if op == "STORE"]
    rep_recs = list(reps(reg))
    check(rep_recs, "no REP record in the region of a 256K memset")
    pieces += [(addr, count * size) for _, _, _, addr, _, count, size in rep_recs]
    for addr, size in pieces:
        if start <= addr < start + rlen:
            check(addr + size <= start + rlen, "a memset store runs past the region")
            for b in range(addr - start, addr - start + size):
                covered[b] += 1
    check(all(c == 1 for c in covered), "memset's stores do not cover the region exactly once")
    big = [r for r in rep_recs if r[1] == "stos" and r[5] * r[6] >= rlen // 2]
    check(big, f"no REP STOS covering most of the region: {rep_recs}")
    # read-then-store: per 64K group, 16 loads (one a page) then 16 stores
    rec, start, files = record_forkbench(env, "read-then-store", "read-then-store")
    parent = next(p for p, (pp, _) in files.items() if pp == 0)
    reg, rstart, rlen = region_lines(files[parent][1])
    acc = [(op, addr) for _, op, _, addr, _ in accesses(reg) if start <= addr < start + rlen]
    want = []
    for g in range(16):
        pages = [start + (g * 16 + p) * 4096 for p in range(16)]
        want += [("LOAD", a) for a in pages] + [("STORE", a) for a in pages]
    check(acc == want, "read-then-store accesses are not 16 loads then 16 stores per 64K")


def test_strings(env):
    # REP STOS/MOVS of every element size, a descending MOVSB, a zero-count STOSB: REP records
    # stand for exactly the accesses they replace (compared with --mmusim-rep=no)
    rec, out, rec_err = env.record("strings", "strings")
    a, _ = printed(out, "a")
    b, _ = printed(out, "b")
    n = 64 * 1024
    lines = next(iter(env.files(rec).values()))[1]
    reg, _, _ = region_lines(lines)
    got = [(k, addr, src, count, size) for _, k, _, addr, src, count, size in reps(reg)]
    want = [("stos", a, a, n, 1), ("stos", b, b, n // 8, 8), ("movs", a, b, n, 1),
            ("movs", b, a, n // 8, 8), ("movs", a, b, 10, 2), ("stos", b, b, 16, 4)]
    check(got == want, f"REP records {[(k, hex(x), hex(y), c, z) for k, x, y, c, z in got]}, want "
                       f"{[(k, hex(x), hex(y), c, z) for k, x, y, c, z in want]}")
    # the descending copy: 100 LOAD/STORE pairs, from the top down
    down = [(op, addr) for _, op, _, addr, size in accesses(reg)
            if size == 1 and (a + n - 100 <= addr < a + n or b + n - 100 <= addr < b + n)]
    wd = []
    for k in range(100):
        wd += [("LOAD", b + n - 1 - k), ("STORE", a + n - 1 - k)]
    check(down == wd, "the descending rep movsb is not 100 LOAD/STORE pairs from the top down")
    rec2, _, _ = env.record("strings-norep", "strings", extra=["--mmusim-rep=no"])
    lines2 = next(iter(env.files(rec2).values()))[1]
    reg2, _, _ = region_lines(lines2)
    check(not list(reps(lines2)), "REP records with --mmusim-rep=no")
    exp = expand_reps(reg)
    check(exp == reg2, "the region's REP records do not expand to the --mmusim-rep=no records"
                       f" ({len(exp)} vs {len(reg2)} lines)")
    # --summary counts a REP record as `count` instructions: all but the descending copy's
    # iterations, which as LOAD/STORE records at one ip it cannot tell apart (counted as 1)
    rc, summ, err = env.dump(rec, "--summary")
    ins = re.search(r"^instructions: (\d+)$", summ, re.M)
    check(rc == 0 and ins, f"--summary failed: {err}")
    executed = int(re.search(r"selfcheck: (\d+) instructions executed", rec_err).group(1))
    check(int(ins.group(1)) == executed - 99,
          f"--summary counts {ins.group(1)} instructions, {executed} executed (want 99 fewer)")


def test_memset_size(env):
    # a 16 MiB memset: the trace with REP records is at least 50 times smaller than without
    sizes = {}
    for name, extra in (("rep", []), ("norep", ["--mmusim-rep=no"])):
        rec, out, _ = env.record(f"memset16M-{name}", "forkbench",
                                 ["--size", "16M", "--pattern", "memset"], extra=extra)
        sizes[name] = sum(os.path.getsize(os.path.join(rec, f)) for f in os.listdir(rec)
                          if f.endswith(".mtr"))
    check(sizes["norep"] >= 50 * sizes["rep"],
          f"16M memset: {sizes['rep']} bytes with REP, {sizes['norep']} without: not 50x")
    print(f"16M memset: {sizes['rep']} bytes with REP records, {sizes['norep']} without")


REC = re.compile(r"t\d+ (EXEC|LOAD|STORE|ATOMIC|FENCE|REP|SYSCALL|FORK|REGION) (.*)$")
MAPPING_SYSCALLS = {9, 10, 11, 12, 25, 28}  # mmap mprotect munmap brk mremap madvise


def check_first_touches(lines, what):
    """Region mode: outside the region every access record is a first read or write of one
    of its pages, every EXEC a first fetch of 1 instruction, no FENCE or REP; the touched
    pages forgotten at a mapping syscall or fork (the file starts with none)."""
    touched = {"r": set(), "w": set(), "x": set()}
    inside = False
    for line in lines:
        m = REC.match(line)
        if not m:
            continue
        op, rest = m.groups()
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if op == "REGION":
            inside = f["on"] == "1"
            continue
        if op == "SYSCALL":
            if int(f["nr"]) in MAPPING_SYSCALLS:
                touched = {"r": set(), "w": set(), "x": set()}
            continue
        if op == "FORK":
            touched = {"r": set(), "w": set(), "x": set()}
            continue
        if inside:
            continue
        check(op not in ("FENCE", "REP"), f"{what}: {op} outside the region: {line}")
        ip = int(f["ip"], 16)
        if op == "EXEC":
            check(f["n"] == "1", f"{what}: an EXEC of more than 1 outside the region: {line}")
            check(ip >> 12 not in touched["x"], f"{what}: a second fetch from a page: {line}")
            touched["x"].add(ip >> 12)
            continue
        addr, size = int(f["addr"], 16), int(f["size"])
        kind = "r" if op == "LOAD" else "w"
        pages = set(range(addr >> 12, ((addr + size - 1) >> 12) + 1))
        check(pages - touched[kind], f"{what}: not a first {kind} of its page: {line}")
        touched[kind] |= pages
        touched["x"].add(ip >> 12)


def opcode_counts(lines):
    c = {}
    for line in lines:
        m = REC.match(line) or re.match(r"(THREAD|END|MAP|NEWTHREAD|EXIT) ", line)
        if m:
            c[m.group(1)] = c.get(m.group(1), 0) + 1
    return c


def test_detail_region(env):
    size = 16 << 20
    recs = {}
    for detail in ("all", "region"):
        rec, out, err = env.record(f"detail-{detail}", "forkbench",
                                   ["--size", "16M", "--pattern", "seq-byte"],
                                   extra=[f"--mmusim-detail={detail}"])
        if detail == "region":
            check("(inside the region only)" in err, "region mode: the selfcheck is not the region's")
        start, _ = printed(out, "region")
        with open(os.path.join(rec, "manifest.txt")) as f:
            man = f.read().splitlines()
        check(len(man) == 4 and man[3] == f"detail {detail}", f"manifest: {man}")
        recs[detail] = (rec, env.files(rec))
    files_all, files_reg = recs["all"][1], recs["region"][1]
    parent = next(p for p, (pp, _) in files_reg.items() if pp == 0)
    pall = next(p for p, (pp, _) in files_all.items() if pp == 0)
    plines = files_reg[parent][1]
    for pid, (_, lines) in files_reg.items():
        check_first_touches(lines, f"proc-{pid}")
    # inside the region: the same records as with detail all
    reg_r, start, _ = region_lines(plines)
    reg_a, start_a, _ = region_lines(files_all[pall][1])
    check(opcode_counts(reg_r) == opcode_counts(reg_a),
          f"inside the region: {opcode_counts(reg_r)} (region) vs {opcode_counts(reg_a)} (all)")
    # outside: the populate loop's one store per page, the rest a bounded number of touches
    begin = next(i for i, l in enumerate(plines) if " REGION on=1 " in l)
    end = next(i for i, l in enumerate(plines) if " REGION on=0 " in l)
    outside = plines[:begin] + plines[end + 1:]
    st = [a for a in accesses(outside) if a[1] == "STORE" and start <= a[3] < start + size]
    check(len(st) == size // 4096, f"{len(st)} stores to the buffer outside the region, want 4096")
    check(sorted(a[3] >> 12 for a in st) == [(start >> 12) + k for k in range(size // 4096)],
          "the outside stores to the buffer are not one per page")
    others = [l for l in outside if REC.match(l) and not l.startswith("t1 SYSCALL")]
    check(len(others) - len(st) < 3000, f"{len(others) - len(st)} other records outside")
    full_out = len(files_all[pall][1]) - len(reg_a)
    print(f"outside the region: {len(outside)} lines (detail all: {full_out}); inside: {len(reg_r)}")


def test_firsttouch(env):
    rec, out, _ = env.record("firsttouch", "firsttouch", extra=["--mmusim-detail=region"])
    b1, n1 = printed(out, "b1")
    b2, n2 = printed(out, "b2")
    b3, n3 = printed(out, "b3")
    files = env.files(rec)
    check(len(files) == 2, f"want 2 processes, got {sorted(files)}")
    parent = next(p for p, (pp, _) in files.items() if pp == 0)
    child = next(p for p in files if p != parent)
    plines, clines = files[parent][1], files[child][1]
    for pid, (_, lines) in files.items():
        check_first_touches(lines, f"proc-{pid}")

    def offsets(lines, op, base, pages):
        c = {}
        for _, o, _, addr, size in accesses(lines):
            if o == op and base <= addr < base + pages * 4096:
                c.setdefault(addr & 4095, []).append(addr >> 12)
        return {off: len(v) for off, v in c.items()}, c

    loads, _ = offsets(plines, "LOAD", b1, n1)
    check(loads == {8: n1}, f"b1 loads by offset {loads}: want one a page at 8 (phase A)")
    stores, per = offsets(plines, "STORE", b1, n1)
    want = {16: n1, 40: n1, 48: n1, 56: n1, 64: n1, 72: n1}
    check(stores == want, f"parent's b1 stores by offset {stores}, want {want}")
    for off in want:
        check(sorted(per[off]) == [(b1 >> 12) + k for k in range(n1)], f"offset {off}: not one a page")
    cst, _ = offsets(clines, "STORE", b1, n1)
    check(cst == {32: n1}, f"child's b1 stores by offset {cst}: want one a page at 32")
    # C and D (rep stosb, rep movsq outside the region): one touch a page, at its start
    s2 = [(addr, size) for _, o, _, addr, size in accesses(plines) if o == "STORE" and b2 <= addr < b2 + n2 * 4096]
    l2 = [(addr, size) for _, o, _, addr, size in accesses(plines) if o == "LOAD" and b2 <= addr < b2 + n2 * 4096]
    s3 = [(addr, size) for _, o, _, addr, size in accesses(plines) if o == "STORE" and b3 <= addr < b3 + n3 * 4096]
    check(s2[:n2] == [(b2 + k * 4096, 1) for k in range(n2)], f"rep stosb's first touches: {s2[:n2]}")
    check(l2 == [(b2 + k * 4096, 8) for k in range(n2)], f"rep movsq's first reads: {l2}")
    check(s3 == [(b3 + k * 4096, 8) for k in range(n3)], f"rep movsq's first writes: {s3}")
    # H: after the failed madvise one store to b2, the one across its first two pages
    check(s2[n2:] == [(b2 + 4092, 8)], f"b2 stores after the clears: {s2[n2:]}, want one at +4092")
    check(not list(reps(plines)), "REP records in the parent (its only REP ran outside the region)")


def test_threads(env):
    rec, out, _ = env.record("threads", "threads")
    start, length = printed(out, "buffer")
    files = env.files(rec)
    check(len(files) == 1, f"want one process, got {sorted(files)}")
    lines = next(iter(files.values()))[1]
    threads = sorted({int(m.group(1)) for l in lines for m in [re.match(r"THREAD tid=(\d+)", l)] if m})
    check(threads == [1, 2, 3], f"THREAD records for {threads}, want [1, 2, 3]")
    newt = [l for l in lines if " NEWTHREAD " in l]
    check(newt == ["t1 NEWTHREAD tid=2", "t1 NEWTHREAD tid=3"], f"NEWTHREAD records {newt}")
    for n in newt:
        i = lines.index(n)
        check(re.match(r"t1 SYSCALL nr=56 .* result=[1-9]", lines[i + 1]),
              f"NEWTHREAD not followed by the clone's SYSCALL: {lines[i + 1]}")
    for t in (2, 3):
        check(f"t{t} EXIT code=0" in lines, f"no EXIT for thread {t}")
    half = length // 2
    for t, lo in ((2, start), (3, start + half)):
        st = [a for a in accesses(lines) if a[0] == t and a[1] == "STORE" and start <= a[3] < start + length]
        check(len(st) == half // 64, f"thread {t}: {len(st)} stores to the buffer, want {half // 64}")
        check(all(lo <= a[3] < lo + half for a in st), f"thread {t} stored outside its half")
    main_st = [a for a in accesses(lines) if a[0] == 1 and start <= a[3] < start + length]
    check(not main_st, "the main thread accessed the buffer")


def host_rdtscp():
    """Whether the host CPU has RDTSCP (its flags in /proc/cpuinfo): Valgrind decodes it only then."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(l.startswith("flags") and " rdtscp" in l for l in f)
    except OSError:
        return True


def fences_args():
    return () if host_rdtscp() else ("no-rdtscp",)


def rdtscp_ran(stdout):
    """Whether the fences program ran RDTSCP (its "rdtscp 1|0" line)."""
    m = re.search(r"^rdtscp ([01])$", stdout, re.M)
    check(m, "the fences program did not say whether it ran rdtscp")
    return m.group(1) == "1"


def test_fences(env):
    rec, out, _ = env.record("fences", "fences", fences_args())
    files = env.files(rec)
    lines = next(iter(files.values()))[1]
    reg, _, _ = region_lines(lines)
    kinds = [re.search(r"kind=(\w+)", l).group(1) for l in reg if " FENCE " in l]
    # (rdtscp only where the host CPU has it: the program asks CPUID, and says)
    want = ["lfence", "mfence", "sfence", "cpuid", "rdtsc"] + (["rdtscp"] if rdtscp_ran(out) else [])
    check(kinds == want, f"FENCE kinds in the region: {kinds}, want {want}")
    ips = [int(re.search(r"ip=0x([0-9a-f]+)", l).group(1), 16) for l in reg if " FENCE " in l]
    check(ips == sorted(ips) and len(set(ips)) == len(want),
          f"fence ips not {len(want)} ascending addresses")
    # a fence is one FENCE record, not also an EXEC
    for l in reg:
        m = re.match(r"t1 EXEC ip=0x([0-9a-f]+) n=\d+", l)
        if m:
            check(int(m.group(1), 16) not in ips, f"an EXEC at a fence's address: {l}")


def test_atomics(env):
    rec, out, _ = env.record("atomics", "fences", fences_args())
    counter, _ = printed(out, "counter")
    pair, _ = printed(out, "pair")
    files = env.files(rec)
    lines = next(iter(files.values()))[1]
    reg, _, _ = region_lines(lines)
    acc = list(accesses(reg))
    atom = [a for a in acc if a[1] == "ATOMIC"]
    check([(a[3], a[4]) for a in atom] == [(counter, 8)] * 3 + [(pair, 16)],
          f"ATOMIC records {[(hex(a[3]), a[4]) for a in atom]}: want 3 x counter/8, pair/16")
    aips = {a[2] for a in atom}
    check(not any(a[2] in aips for a in acc if a[1] != "ATOMIC"),
          "a LOAD or STORE at an atomic instruction's address")


def test_options(env):
    env.need_valgrind("forkbench")
    envv = dict(os.environ, VALGRIND_LIB=env.libdir)
    prog = os.path.join(env.build, "forkbench")
    p = subprocess.run(["valgrind", "--tool=mmusimrec", prog, "--size", "64K"], env=envv,
                       capture_output=True, text=True, timeout=120)
    check(p.returncode != 0 and "--mmusim-out" in p.stderr,
          f"no --mmusim-out: exit {p.returncode}, stderr {p.stderr!r}")
    # a relative directory is created and made absolute (the fork child finds it too)
    base = env.fresh("relative")
    os.makedirs(base)
    p = subprocess.run(["valgrind", "--tool=mmusimrec", "--mmusim-out=rec", prog, "--size", "64K"],
                       env=envv, cwd=base, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"relative --mmusim-out failed: {p.stderr}")
    files = env.files(os.path.join(base, "rec"))
    check(len(files) == 2, f"relative --mmusim-out: files {sorted(files)}")


def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(v):
    return uleb(((v << 1) ^ (v >> 63)) & ((1 << 64) - 1))


def test_tracedump_errors(env):
    d = env.fresh("tracedump")
    os.makedirs(d)
    def rep(ipd, kind, addrd, srcd, count, size):
        return (bytes([0x0E]) + sleb(ipd) + uleb(kind) + sleb(addrd) + sleb(srcd) + uleb(count) +
                uleb(size))

    hdr = b"MMUSIMTR" + struct.pack("<4I", 1, 42, 0, 0)
    body = (bytes([0x0C]) + uleb(0x400000) + uleb(8192) + uleb(5) + uleb(1) +   # MAP
            bytes([0x07]) + uleb(1) +                                           # THREAD 1
            bytes([0x01]) + sleb(0x401000) + uleb(3) +                          # EXEC
            bytes([0x02]) + sleb(4) + sleb(0x7ff000) + uleb(8) +                # LOAD
            bytes([0x03]) + sleb(0) + sleb(-8) + uleb(8) +                      # STORE
            bytes([0x01]) + sleb(-0x10) + uleb(1) +                             # EXEC back
            bytes([0x05]) + sleb(2) + uleb(2) +                                 # FENCE mfence
            bytes([0x06]) + uleb(1) + b"".join(uleb(x) for x in (1, 2, 3, 0, 0, 0)) + sleb(-9) +
            rep(0x10, 2, 0x1000, -0x800, 100, 8) +                              # REP movs
            bytes([0x03]) + sleb(0) + sleb(8) + uleb(1))                        # STORE after it
    good = hdr + body + bytes([0x0D])

    def write(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    p_good = write("good.mtr", good)
    rc, out, err = env.dump(p_good)
    check(rc == 0, f"dumper rejects a good file: {err}")
    want = ["MAP start=0x400000 len=8192 prot=r-x kind=file-private", "THREAD tid=1",
            "t1 EXEC ip=0x401000 n=3", "t1 LOAD ip=0x401004 addr=0x7ff000 size=8",
            "t1 STORE ip=0x401004 addr=0x7feff8 size=8", "t1 EXEC ip=0x400ff4 n=1",
            "t1 FENCE ip=0x400ff6 kind=mfence",
            "t1 SYSCALL nr=1 args=0x1 0x2 0x3 0x0 0x0 0x0 result=-9",
            "t1 REP kind=movs ip=0x401006 addr=0x7ffff8 src=0x7ff7f8 count=100 size=8",
            "t1 STORE ip=0x401006 addr=0x800000 size=1", "END"]
    check(out.splitlines()[1:] == want, f"decoded:\n{out}\nwant:\n" + "\n".join(want))
    # instructions: EXEC 3 + LOAD/STORE 1 + EXEC 1 + FENCE 1 + REP 100 + the STORE after it 1
    rc, out, err = env.dump(p_good, "--summary")
    check(rc == 0 and "instructions: 107\n" in out, f"--summary of the good file: {out} {err}")
    bad = {
        "magic.mtr": (b"MMUSIMTX" + good[8:], "bad magic"),
        "version.mtr": (b"MMUSIMTR" + struct.pack("<I", 2) + good[12:], "version 2"),
        "short.mtr": (good[:20], "shorter than"),
        "leb.mtr": (hdr + body + bytes([0x07, 0x81]), "truncated LEB128"),
        "opcode.mtr": (hdr + body + bytes([0x7F, 0x0D]), "unknown opcode 0x7f"),
        "noend.mtr": (hdr + body, "no END"),
        "afterend.mtr": (good + bytes([0x07, 0x01]), "after END"),
        "repkind.mtr": (hdr + body + rep(0, 3, 0, 0, 1, 1) + bytes([0x0D]), "REP kind 3"),
        "repcount.mtr": (hdr + body + rep(0, 1, 0, 0, 0, 1) + bytes([0x0D]), "count = 0"),
        "repsize.mtr": (hdr + body + rep(0, 1, 0, 0, 5, 3) + bytes([0x0D]), "REP size 3"),
        "repsrc.mtr": (hdr + body + rep(0, 1, 0, 8, 5, 1) + bytes([0x0D]), "REP STOS with src_delta 8"),
        "reptrunc.mtr": (hdr + body + rep(0, 1, 0, 0, 5, 8)[:-1], "truncated LEB128"),
    }
    for name, (data, msg) in bad.items():
        p = write(name, data)
        rc, out, err = env.dump(p)
        check(rc == 2, f"{name}: dumper exit {rc}, want 2")
        check(p in err and "offset" in err and msg in err, f"{name}: message {err!r}")
        # --events checks the framing (not the memory records' fields) with the same messages
        if not name.startswith("rep") or name == "reptrunc.mtr":
            rc, out, err = env.dump(p, "--events")
            check(rc == 2 and p in err and "offset" in err and msg in err,
                  f"{name} --events: exit {rc}, message {err!r}")
    # --events: the records of the full dump that are not memory accesses
    rc, out, err = env.dump(p_good, "--events")
    ev = [l for l in want if not re.match(r"t\d+ (EXEC|LOAD|STORE|ATOMIC|FENCE|REP) ", l)]
    check(rc == 0 and out.splitlines()[1:] == ev, f"--events of the good file:\n{out}{err}")


def test_exec(env):
    # sh forks twice: a child whose execve fails (its records are kept, the result is the
    # error) and a child whose execve succeeds (its file ends with that SYSCALL and END).
    rec, out, _ = env.record("exec", "/bin/sh", ["-c", "/nonexistent-mmusim-test; /bin/true"])
    files = env.files(rec)
    check(len(files) == 3, f"want 3 processes (sh and two children), got {sorted(files)}")
    kids = [recs for pid, (pp, recs) in files.items() if pp != 0]
    failed = [r for r in kids if any(re.match(r"t\d+ SYSCALL nr=59 .* result=-2$", l) for l in r)]
    check(len(failed) == 1 and failed[0][-2] == "t1 EXIT code=127",
          "no child with a failed execve (ENOENT) that then exits 127")
    ok = [r for r in kids if re.match(r"t\d+ SYSCALL nr=59 .* result=0$", r[-2])]
    check(len(ok) == 1, "no child whose file ends with a successful execve, then END")


def run_with_control(env, name, steps, extra=(), fork=False):
    """Record regionctl while `steps` (a list of ("create"|"remove", seconds to sleep first))
    drive the control file; the program is stopped by its stop file after the last step.
    Returns (recording dir, stdout, stderr)."""
    env.need_valgrind("regionctl")
    out = env.fresh(name)
    ctl = out + ".control"
    stop = out + ".stop"
    for f in (ctl, stop):
        if os.path.exists(f):
            os.unlink(f)
    cmd = ["valgrind", "--tool=mmusimrec", f"--mmusim-out={out}", "--mmusim-selfcheck=yes",
           f"--mmusim-region-control={ctl}", *extra, os.path.join(env.build, "regionctl"), stop]
    if fork:
        cmd.append("--fork")
    venv = dict(os.environ, VALGRIND_LIB=env.libdir)
    p = subprocess.Popen(cmd, env=venv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        # (stdout is the program's own: "buffer ..." then "ready" once it is looping)
        for line in p.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        check(lines and lines[-1].strip() == "ready", f"regionctl did not get ready: {lines}")
        for what, wait in steps:
            time.sleep(wait)
            if what == "create":
                with open(ctl, "w"):
                    pass
            else:
                os.unlink(ctl)
        time.sleep(0.3)
        with open(stop, "w"):
            pass
        rest, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for f in (ctl, stop):
            if os.path.exists(f):
                os.unlink(f)
    stdout = "".join(lines) + rest
    check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\nstderr:\n{err}")
    for ex, rec, verdict in re.findall(
            r"selfcheck: (\d+) instructions executed, (\d+) recorded: (\w+)", err):
        check(verdict == "ok", f"instruction count mismatch: {ex} executed, {rec} recorded")
    return out, stdout, err


def one_region_pair(lines, what):
    on = [i for i, l in enumerate(lines) if " REGION on=1 " in l]
    off = [i for i, l in enumerate(lines) if " REGION on=0 " in l]
    check(len(on) == 1 and len(off) == 1 and on[0] < off[0],
          f"{what}: REGION on at {on}, off at {off}: want exactly one pair, on first")
    check(lines[on[0]].endswith(" start=0x0 len=0"), f"{what}: {lines[on[0]]}")
    return on[0], off[0]


def test_region_control(env):
    # created, removed, created again (ignored, said once), removed; a fork child alongside
    steps = [("create", 0.4), ("remove", 0.6), ("create", 0.4), ("remove", 0.4)]
    rec, out, err = run_with_control(env, "region-control", steps, fork=True)
    buf, size = printed(out, "buffer")
    files = env.files(rec)
    check(len(files) == 2, f"want 2 processes (the root and its fork child), got {sorted(files)}")
    root = next(p for p, (pp, _) in files.items() if pp == 0)
    child = next(p for p in files if p != root)
    lines = files[root][1]
    on, off = one_region_pair(lines, "root")
    check(not any(" REGION " in l for l in files[child][1]), "the fork child has REGION records")
    # each REGION is written at a syscall of its thread, right after that syscall's record
    for i in (on, off):
        tid = lines[i].split()[0]
        check(lines[i - 1].startswith(tid + " SYSCALL "),
              f"the record before {lines[i]!r} is {lines[i - 1]!r}, not its thread's SYSCALL")
    inside = lines[on + 1:off]
    n_access = sum(1 for l in inside if re.match(r"t1 SYSCALL nr=21 ", l))
    n_sleep = sum(1 for l in inside if re.match(r"t1 SYSCALL nr=230 ", l))
    n_store = sum(1 for a in accesses(inside) if a[1] == "STORE" and buf <= a[3] < buf + size)
    check(min(n_access, n_sleep, n_store) >= 10,
          f"inside the region: {n_access} access(), {n_sleep} clock_nanosleep(), {n_store} stores to "
          "the buffer: want at least 10 of each")
    before = sum(1 for l in lines[:on] if re.match(r"t1 SYSCALL nr=21 ", l))
    after = sum(1 for l in lines[off + 1:] if re.match(r"t1 SYSCALL nr=21 ", l))
    check(before >= 10 and after >= 10, f"the loop's syscalls: {before} before the region, "
                                        f"{after} after: the region is not in the middle")
    again = err.count("exists again after the measured region ended")
    check(again == 1, f"the message about the second creation appears {again} times:\n{err}")
    print(f"region-control: {len(inside)} records inside, {n_access} iterations")


def test_region_control_open(env):
    # created and never removed, in region mode: REGION off before the exit_group; outside the
    # region only first touches, the self-check of the region's instructions holds
    rec, out, err = run_with_control(env, "region-control-open", [("create", 0.4)],
                                     extra=["--mmusim-detail=region"])
    check("(inside the region only)" in err, f"no region-mode selfcheck: {err}")
    files = env.files(rec)
    check(len(files) == 1, f"want one process, got {sorted(files)}")
    lines = next(iter(files.values()))[1]
    on, off = one_region_pair(lines, "root")
    check(re.match(r"t1 SYSCALL nr=231 ", lines[off + 1]),
          f"after the REGION off: {lines[off + 1]!r}, want the exit_group")
    check(lines[-2] == "t1 EXIT code=0", f"before END: {lines[-2]!r}")
    check_first_touches(lines, "region-control-open")
    with open(os.path.join(rec, "manifest.txt")) as f:
        check("detail region" in f.read().splitlines(), "manifest does not say detail region")


def test_record_redis(env):
    # scripts/record-redis at a small scale: the server's recording has the load, a BGSAVE child,
    # then exactly one region holding the SETs' reads and writes
    src = os.path.dirname(os.path.dirname(env.dumper))
    script = os.path.join(src, "scripts", "record-redis")
    mmusim = os.path.join(os.path.dirname(env.build), "mmusim")
    missing = [p for p in ("redis-server", "redis-benchmark", "redis-cli", "valgrind")
               if not shutil.which(p)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (apt-get install redis-server "
              "redis-tools valgrind)", file=sys.stderr)
        sys.exit(SKIP)
    env.need_valgrind("regionctl")  # (the tool is built)
    if not os.path.exists(mmusim):
        print(f"SKIP: {mmusim} is not built", file=sys.stderr)
        sys.exit(SKIP)
    rec = env.fresh("redis")
    cmd = [sys.executable, script, "--out", rec, "--keys", "20000", "--sets", "20000",
           "--mmusim", mmusim]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\nstdout:\n{p.stdout}\n"
                             f"stderr:\n{p.stderr}")
    check(re.search(r"SET phase under the recorder: \d+ requests/s", p.stdout),
          f"no SET rate in the summary:\n{p.stdout}")
    files = env.files(rec, "--events")
    roots = [q for q, (pp, _) in files.items() if pp == 0]
    check(len(roots) == 1, f"want one root process, got {roots}")
    root = roots[0]
    lines = files[root][1]
    kids = [q for q, (pp, _) in files.items() if pp == root]
    check(len(kids) == 1 and len(files) == 2,
          f"want the server and one BGSAVE child, got {sorted(files)} (children {kids})")
    on, off = one_region_pair(lines, "the server")
    fork_at = lines.index(f"t1 FORK pid={kids[0]}")
    check(fork_at < on, "the BGSAVE fork is not before the region")
    check(not any(" REGION " in l for l in files[kids[0]][1]), "the BGSAVE child has a region")
    inside = lines[on + 1:off]
    nr = collections.Counter(int(m.group(1)) for l in inside
                             for m in [re.match(r"t\d+ SYSCALL nr=(\d+) ", l)] if m)
    check(nr[0] >= 2000 and nr[1] >= 2000,
          f"inside the region {nr[0]} read() and {nr[1]} write(): want thousands of each "
          f"(syscalls by number: {dict(nr.most_common(8))})")
    print(f"record-redis: {nr[0]} reads, {nr[1]} writes in the region; summary:\n{p.stdout}")
    shutil.rmtree(rec, ignore_errors=True)  # (hundreds of MB)


TESTS = {"region-control": test_region_control, "record-redis": test_record_redis, "region-control-open": test_region_control_open,
         "strings": test_strings, "memset-size": test_memset_size,
         "detail-region": test_detail_region, "firsttouch": test_firsttouch,
         "exec": test_exec, "forkbench": test_forkbench, "forkbench-patterns": test_forkbench_patterns,
         "threads": test_threads, "fences": test_fences, "atomics": test_atomics,
         "options": test_options, "tracedump-errors": test_tracedump_errors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--dumper", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    try:
        TESTS[a.test](Env(a))
    except Failure as e:
        print(f"FAIL {a.test}: {e}", file=sys.stderr)
        return 1
    print(f"PASS {a.test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
