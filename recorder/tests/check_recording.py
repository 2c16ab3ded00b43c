#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The recorder's tests: record a test program with mmusimrec and check the trace through
scripts/mmusim-tracedump (so the dumper is tested along the way).

  check_recording.py TEST --build-dir <build>/recorder --dumper <src>/scripts/mmusim-tracedump
                          --work <dir>

TEST: forkbench, forkbench-patterns, threads, fences, atomics, exec, options,
tracedump-errors.
Exit 0: passed; 1: failed (the reason on stderr); 77: skipped (no valgrind or no tool).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys

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

    def files(self, recdir):
        """{pid: (ppid, [record lines])} of a recording, through the dumper."""
        rc, out, err = self.dump(recdir)
        check(rc == 0, f"mmusim-tracedump {recdir} failed ({rc}): {err}")
        files = {}
        cur = None
        for line in out.splitlines():
            m = re.match(r"# file proc-(\d+)\.mtr pid (\d+) parent (\d+)", line)
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


def test_forkbench_patterns(env):
    # memset: the stores cover the region exactly once
    # (256K: glibc's memset is REP STOSB there, one 1-byte STORE per byte under Valgrind)
    rec, start, files = record_forkbench(env, "memset", "memset", size=256 << 10)
    parent = next(p for p, (pp, _) in files.items() if pp == 0)
    reg, rstart, rlen = region_lines(files[parent][1])
    covered = bytearray(rlen)
    for _, op, _, addr, size in accesses(reg):
        if op == "STORE" and start <= addr < start + rlen:
            check(addr + size <= start + rlen, "a memset store runs past the region")
            for b in range(addr - start, addr - start + size):
                covered[b] += 1
    check(all(c == 1 for c in covered), "memset's stores do not cover the region exactly once")
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


def test_fences(env):
    rec, out, _ = env.record("fences", "fences")
    files = env.files(rec)
    lines = next(iter(files.values()))[1]
    reg, _, _ = region_lines(lines)
    kinds = [re.search(r"kind=(\w+)", l).group(1) for l in reg if " FENCE " in l]
    check(kinds == ["lfence", "mfence", "sfence", "cpuid", "rdtsc", "rdtscp"],
          f"FENCE kinds in the region: {kinds}")
    ips = [int(re.search(r"ip=0x([0-9a-f]+)", l).group(1), 16) for l in reg if " FENCE " in l]
    check(ips == sorted(ips) and len(set(ips)) == 6, "fence ips not six ascending addresses")
    # a fence is one FENCE record, not also an EXEC
    for l in reg:
        m = re.match(r"t1 EXEC ip=0x([0-9a-f]+) n=\d+", l)
        if m:
            check(int(m.group(1), 16) not in ips, f"an EXEC at a fence's address: {l}")


def test_atomics(env):
    rec, out, _ = env.record("atomics", "fences")
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
    hdr = b"MMUSIMTR" + struct.pack("<4I", 1, 42, 0, 0)
    body = (bytes([0x0C]) + uleb(0x400000) + uleb(8192) + uleb(5) + uleb(1) +   # MAP
            bytes([0x07]) + uleb(1) +                                           # THREAD 1
            bytes([0x01]) + sleb(0x401000) + uleb(3) +                          # EXEC
            bytes([0x02]) + sleb(4) + sleb(0x7ff000) + uleb(8) +                # LOAD
            bytes([0x03]) + sleb(0) + sleb(-8) + uleb(8) +                      # STORE
            bytes([0x01]) + sleb(-0x10) + uleb(1) +                             # EXEC back
            bytes([0x05]) + sleb(2) + uleb(2) +                                 # FENCE mfence
            bytes([0x06]) + uleb(1) + b"".join(uleb(x) for x in (1, 2, 3, 0, 0, 0)) + sleb(-9))
    good = hdr + body + bytes([0x0D])

    def write(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    rc, out, err = env.dump(write("good.mtr", good))
    check(rc == 0, f"dumper rejects a good file: {err}")
    want = ["MAP start=0x400000 len=8192 prot=r-x kind=file-private", "THREAD tid=1",
            "t1 EXEC ip=0x401000 n=3", "t1 LOAD ip=0x401004 addr=0x7ff000 size=8",
            "t1 STORE ip=0x401004 addr=0x7feff8 size=8", "t1 EXEC ip=0x400ff4 n=1",
            "t1 FENCE ip=0x400ff6 kind=mfence",
            "t1 SYSCALL nr=1 args=0x1 0x2 0x3 0x0 0x0 0x0 result=-9", "END"]
    check(out.splitlines()[1:] == want, f"decoded:\n{out}\nwant:\n" + "\n".join(want))
    bad = {
        "magic.mtr": (b"MMUSIMTX" + good[8:], "bad magic"),
        "version.mtr": (b"MMUSIMTR" + struct.pack("<I", 2) + good[12:], "version 2"),
        "short.mtr": (good[:20], "shorter than"),
        "leb.mtr": (hdr + body + bytes([0x07, 0x81]), "truncated LEB128"),
        "opcode.mtr": (hdr + body + bytes([0x7F, 0x0D]), "unknown opcode 0x7f"),
        "noend.mtr": (hdr + body, "no END"),
        "afterend.mtr": (good + bytes([0x07, 0x01]), "after END"),
    }
    for name, (data, msg) in bad.items():
        p = write(name, data)
        rc, out, err = env.dump(p)
        check(rc == 2, f"{name}: dumper exit {rc}, want 2")
        check(p in err and "offset" in err and msg in err, f"{name}: message {err!r}")


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


TESTS = {"exec": test_exec, "forkbench": test_forkbench, "forkbench-patterns": test_forkbench_patterns,
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
