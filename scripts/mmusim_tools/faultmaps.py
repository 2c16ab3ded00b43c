# SPDX-License-Identifier: GPL-2.0-only
"""The page faults of a run, by the mapping they fell in: from the real kernel's
`perf script -F comm,pid,ip,addr --show-mmap-events` (after `perf record -e page-faults -c 1 -d`)
or from an mmusim ftrace trace (`mmusim run ... --trace F`, its mmap and page_fault_user events).

A native run and a recorded replay place mappings at different addresses, so two runs are put side
by side mapping by mapping: the processes in the order they first appear, and in each process
the k-th mapping of a given size, kind (anon or file) and protection on one side with the k-th
of the same on the other. Each fault counts against the newest mapping that contains its address,
by its page offset in that mapping.
"""

import re
from collections import Counter, OrderedDict

from mmusim_tools.ftrace import TraceParseError, read_trace

PAGE = 4096

# comm pid PERF_RECORD_MMAP2 pid/tid: [0xSTART(0xLEN) @ OFF maj:min ino gen]: prot path
_MMAP2 = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)\s+PERF_RECORD_MMAP2\s+\d+/\d+:\s+"
                    r"\[0x(?P<start>[0-9a-f]+)\(0x(?P<len>[0-9a-f]+)\)\s+@\s+\S+.*\]:\s+(?P<prot>[-rwxps]{4})\s*(?P<path>.*)$")
# comm pid ADDR IP (perf script -F comm,pid,ip,addr prints the data address, then the ip)
_FAULT = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)\s+(?P<addr>[0-9a-f]+)\s+(?P<ip>[0-9a-f]+)\s*$")


class Mapping:
    def __init__(self, start, length, prot, kind, name):
        self.start, self.length, self.prot, self.kind, self.name = start, length, prot, kind, name
        self.faults = Counter()  # page offset -> faults

    def key(self):
        return (self.length, self.kind, self.prot)

    def describe(self):
        return f"{self.kind} {self.prot} {self.length:#x} bytes ({self.name})"


class Process:
    def __init__(self, pid):
        self.pid = pid
        self.mappings = []      # in order of creation
        self.unmapped = Counter()  # faults in no known mapping, by page address

    def add_fault(self, addr):
        for m in reversed(self.mappings):
            if m.start <= addr < m.start + m.length:
                m.faults[(addr - m.start) // PAGE] += 1
                return
        self.unmapped[addr // PAGE * PAGE] += 1


def _anon_kind(path):
    return "anon" if (not path or path.startswith("//anon") or path in ("[heap]", "[stack]")
                      or path.startswith("[anon")) else "file"


def is_perf_script(path):
    with open(path, errors="replace") as f:
        for i, line in enumerate(f):
            if "PERF_RECORD_" in line:
                return True
            if i > 200:
                break
    return False


def read_perf(path):
    """Processes (in order of first appearance) of a `perf script --show-mmap-events` text."""
    procs = OrderedDict()
    with open(path, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or "PERF_RECORD_MMAP " in line or "PERF_RECORD_" in line and "MMAP2" not in line:
                continue
            m = _MMAP2.match(line)
            if m:
                pid = int(m.group("pid"))
                p = procs.setdefault(pid, Process(pid))
                path_ = m.group("path").strip()
                p.mappings.append(Mapping(int(m.group("start"), 16), int(m.group("len"), 16),
                                          m.group("prot")[:3], _anon_kind(path_), path_ or "//anon"))
                continue
            m = _FAULT.match(line)
            if m:
                pid = int(m.group("pid"))
                procs.setdefault(pid, Process(pid)).add_fault(int(m.group("addr"), 16))
                continue
            raise TraceParseError(path, lineno, line, "neither a PERF_RECORD_MMAP2 line nor 'comm pid addr ip' "
                                                      "(make it with perf script -F comm,pid,ip,addr --show-mmap-events)")
    return procs


def read_mmusim(path):
    """Processes of an mmusim ftrace trace: its mmap and page_fault_user events."""
    procs = OrderedDict()
    for e in read_trace(path):
        if e.name == "mmap":
            p = procs.setdefault(e.pid, Process(e.pid))
            kind = e.field("kind", "anon")
            p.mappings.append(Mapping(int(e.field("start"), 0), int(e.field("len"), 0), e.field("prot", "---"),
                                      "anon" if kind == "anon" else "file", kind))
        elif e.name == "fork":
            # The child inherits its parent's mappings (perf shows none for it either).
            child = int(e.field("child_pid", "0"))
            parent = procs.setdefault(e.pid, Process(e.pid))
            c = procs.setdefault(child, Process(child))
            c.mappings = [Mapping(m.start, m.length, m.prot, m.kind, m.name) for m in parent.mappings]
        elif e.name == "page_fault_user":
            procs.setdefault(e.pid, Process(e.pid)).add_fault(int(e.field("address"), 0))
    return procs


def read_faults(path):
    return read_perf(path) if is_perf_script(path) else read_mmusim(path)


def _best_shift(fa, fb, max_shift):
    """The shift s (pages) that makes the most of B's fault offsets + s equal A's, and that many."""
    best = (0, sum((fa & fb).values()))
    for s in range(-max_shift, max_shift + 1):
        if s == 0:
            continue
        n = sum((fa & Counter({k + s: v for k, v in fb.items()})).values())
        if n > best[1]:
            best = (s, n)
    return best


def pair_mappings(pa, pb):
    """[(mapping of A or None, mapping of B or None, page shift)] for two processes: matched by key
    and order; then, of what is left with faults on both sides, mappings of the same kind and
    protection whose sizes differ by at most a quarter (a kernel that merges a new VMA with its
    neighbour reports the merged one: the real kernel does, the port does not), with the page
    shift that aligns the most faults."""
    def by_key(p):
        d = OrderedDict()
        for m in p.mappings:
            d.setdefault(m.key(), []).append(m)
        return d
    ka, kb = by_key(pa), by_key(pb)
    pairs, left_a, left_b = [], [], []
    for key in list(ka) + [k for k in kb if k not in ka]:
        la, lb = ka.get(key, []), kb.get(key, [])
        for i in range(max(len(la), len(lb))):
            x = la[i] if i < len(la) else None
            y = lb[i] if i < len(lb) else None
            if x and y:
                pairs.append((x, y, 0))
            elif x:
                left_a.append(x)
            else:
                left_b.append(y)
    for x in [m for m in left_a if m.faults]:
        cands = [y for y in left_b if y.faults and y.kind == x.kind and y.prot == x.prot
                 and abs(y.length - x.length) <= max(x.length, y.length) // 4]
        if not cands:
            continue
        scored = []
        for y in cands:
            d = abs(y.length - x.length) // PAGE
            shift, n = _best_shift(x.faults, y.faults, min(d, 4096))
            scored.append((n, -d, shift, y))
        n, _, shift, y = max(scored, key=lambda t: (t[0], t[1]))
        if n == 0:
            continue
        pairs.append((x, y, shift))
        left_a.remove(x)
        left_b.remove(y)
    pairs += [(x, None, 0) for x in left_a] + [(None, y, 0) for y in left_b]
    return pairs


def compare(a, b, show=8):
    """Lines of the report, and whether the faults agree mapping by mapping (their page offsets)."""
    out, agree = [], True
    pa, pb = list(a.values()), list(b.values())
    # Processes without faults or mappings (a perf idle record) are left out.
    pa = [p for p in pa if p.mappings or p.unmapped]
    pb = [p for p in pb if p.mappings or p.unmapped]
    for i in range(max(len(pa), len(pb))):
        x = pa[i] if i < len(pa) else None
        y = pb[i] if i < len(pb) else None
        out.append(f"== process {i + 1}: A pid {x.pid if x else '-'}, B pid {y.pid if y else '-'}")
        if not x or not y:
            agree = False
            out.append("  only on one side")
            continue
        for ma, mb, shift in pair_mappings(x, y):
            fa = ma.faults if ma else Counter()
            fb = Counter({k + shift: v for k, v in mb.faults.items()}) if mb else Counter()
            if not fa and not fb:
                continue
            m = ma or mb
            same = fa == fb
            agree &= same
            approx = ""
            if ma and mb and ma.key() != mb.key():
                approx = f" ~ B {mb.length:#x} bytes" + (f", B's offsets {shift:+} pages" if shift else "")
            out.append(f"  {'  ' if same else '* '}{m.describe() if ma else '(B only) ' + m.describe()}{approx}: "
                       f"faults A {sum(fa.values()):,}, B {sum(fb.values()):,}")
            if not same:
                only_a = sorted((fa - fb).elements())
                only_b = sorted((fb - fa).elements())
                if only_a:
                    out.append(f"      page offsets only in A ({len(only_a)}): {only_a[:show]}{' ...' if len(only_a) > show else ''}")
                if only_b:
                    out.append(f"      page offsets only in B ({len(only_b)}): {only_b[:show]}{' ...' if len(only_b) > show else ''}")
        for side, p in (("A", x), ("B", y)):
            if p.unmapped:
                out.append(f"  faults of {side} in no mapping it recorded: {sum(p.unmapped.values()):,}")
    return out, agree
