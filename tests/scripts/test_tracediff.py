"""scripts/tracediff on crafted traces: equal, differing counts, differing fault history, the
divergence point, timestamps, and unreadable input (truncated line, garbage: exit 2 naming the
file and the line)."""

import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
TRACEDIFF = os.path.join(SOURCE, "scripts", "tracediff")
sys.path.insert(0, os.path.join(SOURCE, "scripts"))

from mmusim_tools.ftrace import parse_line  # noqa: E402

HEADER = ("# tracer: nop\n#\n"
          "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
          "#              | |         |   |||||     |         |\n")


def ev(t_ns, name, fields, task="fork-reuse-1", cpu=0):
    return f"{task:>22} [{cpu:03d}] ..... {t_ns // 10**9:>5}.{t_ns % 10**9:09d}: {name}: {fields}\n"


def fault(t, addr, result, ptes, ec="0x7"):
    return [ev(t, "page_fault_user", f"address={addr} ip=0x401100 error_code={ec}"),
            ev(t + 400, "mm_fault_done", f"address={addr} result={result} ptes={ptes}")]


def base_trace(results=("reuse", "reuse", "reuse"), ptes=(1, 1, 1), shift=0):
    lines = [ev(0, "sched_switch", "prev_pid=0 next_pid=1"),
             ev(100, "fork", 'parent_pid=1 child_pid=2 child_comm=fork-reuse'),
             ev(200, "region_begin", "start=0x7f0000000000 end=0x7f0000003000")]
    t = 1000 + shift
    for i, (r, p) in enumerate(zip(results, ptes)):
        addr = f"0x7f000000{i}000"
        lines.append(ev(t, "tlb_fill", f"address={addr} size=4K perm=ro spec=1 tlb=stlb asid=1 pa=0x1{i}000"))
        lines += fault(t + 10, addr, r, p)
        t += 1000
    lines.append(ev(t, "region_end", "start=0x7f0000000000 end=0x7f0000003000"))
    lines.append(ev(t + 10, "exit", "pid=1 code=0"))
    return HEADER + "".join(lines)


class TraceDiffTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="tracediff-test-")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text, mode="w"):
        p = os.path.join(self.dir.name, name)
        with open(p, mode) as f:
            f.write(text)
        return p

    def diff(self, a, b, *args):
        return subprocess.run([TRACEDIFF, a, b] + list(args), capture_output=True, text=True,
                              timeout=60)

    def test_parse_line_quoted_values_and_fields(self):
        e = parse_line('          fork-reuse-12 [003] .....     1.000000005: exit: pid=12 code=0 '
                       'why="a b"')
        self.assertEqual((e.comm, e.pid, e.cpu, e.time_ns, e.name), ("fork-reuse", 12, 3,
                                                                     1_000_000_005, "exit"))
        self.assertEqual(e.fields, (("pid", "12"), ("code", "0"), ("why", "a b")))
        self.assertIsNone(parse_line("fork-reuse-1 [000] ..... 0.1: exit: pid=1 junk"))

    def test_equal_traces(self):
        a = self.write("a.txt", base_trace())
        b = self.write("b.txt", base_trace())
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("equivalent", p.stdout)
        self.assertIn("histories that differ: 0", p.stdout)
        self.assertEqual(self.diff(a, b, "-q").stdout, "")

    def test_timestamps_ignored_by_default_compared_with_time(self):
        a = self.write("a.txt", base_trace())
        b = self.write("b.txt", base_trace(shift=7))
        self.assertEqual(self.diff(a, b).returncode, 0)
        self.assertEqual(self.diff(a, b, "--ignore-time").returncode, 0)
        p = self.diff(a, b, "--time")
        self.assertEqual(p.returncode, 1)
        self.assertIn("timestamps compared", p.stdout)
        # first divergence: the first shifted event, the 4th event line (tlb_fill)
        self.assertIn("at event #4 ", p.stdout)

    def test_differing_counts(self):
        a = self.write("a.txt", base_trace())
        b_lines = base_trace().splitlines(keepends=True)
        b_lines.insert(-2, ev(5000, "tlb_invalidate", "address=all reason=flush_mm tlb=stlb removed=3"))
        b = self.write("b.txt", "".join(b_lines))
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 1)
        row = [l for l in p.stdout.splitlines() if l.strip().startswith("tlb_invalidate")]
        self.assertEqual(len(row), 1, p.stdout)
        self.assertEqual(row[0].split()[1:4], ["0", "1", "+1"])
        self.assertTrue(row[0].rstrip().endswith("*"))
        # histories are the same: only the count differs
        self.assertIn("histories that differ: 0", p.stdout)

    def test_differing_fault_history(self):
        a = self.write("a.txt", base_trace(("reuse", "reuse", "reuse"), (1, 1, 1)))
        b = self.write("b.txt", base_trace(("reuse", "spurious", "reuse"), (1, 0, 1)))
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 1)
        self.assertIn("histories that differ: 1", p.stdout)
        out = p.stdout.split("== fault histories by address ==")[1].split("==")[0]
        self.assertIn("0x7f0000001000 (fork-reuse-1)", out)
        self.assertIn("A: 0x7->reuse/1", out)
        self.assertIn("B: 0x7->spurious/0", out)
        self.assertNotIn("0x7f0000000000 (", out)

    def test_missing_faults_and_divergence_point_with_context(self):
        a = self.write("a.txt", base_trace(("reuse", "reuse", "reuse"), (1, 1, 1)))
        # B: the first fault reuses 16 PTEs and the second and third pages never fault
        lines = base_trace(("reuse",), (16,)).splitlines(keepends=True)
        b = self.write("b.txt", "".join(lines))
        p = self.diff(a, b, "-C", "2")
        self.assertEqual(p.returncode, 1)
        self.assertIn("histories that differ: 3", p.stdout)
        self.assertIn("B: (no fault)", p.stdout)
        div = p.stdout.split("== first divergence ==")[1]
        # events: sched_switch, fork, region_begin, tlb_fill, page_fault_user, mm_fault_done (#6)
        self.assertIn("at event #6 (A line 10, B line 10)", div)
        self.assertIn("- A      10", div)
        self.assertIn("result=reuse ptes=1", div)
        self.assertIn("+ B      10", div)
        self.assertIn("result=reuse ptes=16", div)
        # two events of context before it, common to both
        ctx = [l for l in div.splitlines() if l.startswith("    A")]
        self.assertEqual(len(ctx), 2)
        self.assertIn("page_fault_user", ctx[-1])

    def test_event_filter_and_region(self):
        a = self.write("a.txt", base_trace())
        lines = base_trace().splitlines(keepends=True)
        lines = [l for l in lines if "tlb_fill" not in l]
        b = self.write("b.txt", "".join(lines))
        self.assertEqual(self.diff(a, b).returncode, 1)
        self.assertEqual(self.diff(a, b, "--exclude", "tlb_fill").returncode, 0)
        self.assertEqual(self.diff(a, b, "--events", "page_fault_user,mm_fault_done").returncode, 0)
        # outside the region only: fork differs
        c = self.write("c.txt", base_trace().replace("child_pid=2", "child_pid=3"))
        self.assertEqual(self.diff(a, c).returncode, 1)
        self.assertEqual(self.diff(a, c, "--region").returncode, 0)

    def test_ignore_field(self):
        a = self.write("a.txt", base_trace())
        b = self.write("b.txt", base_trace().replace("pa=0x1", "pa=0x9"))
        self.assertEqual(self.diff(a, b).returncode, 1)
        self.assertEqual(self.diff(a, b, "--ignore-field", "pa").returncode, 0)

    # The real kernel's fault trace (perf script -F comm,pid,ip,addr --show-mmap-events) beside an
    # mmusim trace: mappings at other addresses, one merged with its neighbour by the real kernel.
    PERF = ("            bench  4242 PERF_RECORD_MMAP2 4242/4242: [0x55aa00000000(0x1000) @ 0 fe:00 1 2]: r-xp /usr/bin/bench\n"
            "            bench  4242 PERF_RECORD_MMAP2 4242/4242: [0x7f1000000000(0x103000) @ 0 00:00 0 0]: rw-p //anon\n"
            "            bench  4242     55aa00000010     55aa00000010\n"
            "            bench  4242     7f1000000000     55aa00000020\n"
            "            bench  4242     7f1000001008     55aa00000020\n"
            "            bench  4242     7f1000002000     55aa00000020\n"
            "            bench  4242     7f1000102000     55aa00000024\n")

    def mmusim_side(self, pages):
        lines = [ev(0, "mmap", "start=0x108000 len=0x1000 prot=r-x kind=file", task="trace-1"),
                 ev(10, "mmap", "start=0x4a00000 len=0x100000 prot=rw- kind=anon", task="trace-1"),
                 ev(20, "page_fault_user", "address=0x108010 ip=0x108010 error_code=0x14", task="trace-1")]
        for i, pg in enumerate(pages):
            lines.append(ev(30 + i, "page_fault_user", f"address={0x4a00000 + pg * 4096:#x} ip=0x108020 error_code=0x6",
                            task="trace-1"))
        return HEADER + "".join(lines)

    def test_perf_fault_trace_beside_mmusim_by_mapping(self):
        a = self.write("perf.txt", self.PERF)
        b = self.write("b.txt", self.mmusim_side([0, 1, 2]))
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # the merged neighbour's page
        self.assertIn("A: " + a + " (perf script)", p.stdout)
        self.assertIn("anon rw- 0x103000 bytes (//anon) ~ B 0x100000 bytes: faults A 4, B 3", p.stdout)
        self.assertIn("page offsets only in A (1): [258]", p.stdout)
        self.assertIn("  file r-x 0x1000 bytes (/usr/bin/bench): faults A 1, B 1", p.stdout)
        c = self.write("c.txt", self.mmusim_side([0, 1, 2, 258 - 256 + 256]))
        # (B's buffer is only 0x100000: page 258 is outside it, in no mapping)
        p = self.diff(a, c)
        self.assertIn("faults of B in no mapping it recorded: 1", p.stdout)

    def test_perf_fault_trace_equal(self):
        perf = self.PERF.replace("            bench  4242     7f1000102000     55aa00000024\n", "")
        p = self.diff(self.write("perf.txt", perf), self.write("b.txt", self.mmusim_side([0, 1, 2])))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("the faults agree mapping by mapping", p.stdout)

    def test_perf_fault_trace_garbage_exit_2(self):
        p = self.diff(self.write("perf.txt", self.PERF + "this is not perf\n"), self.write("b.txt", self.mmusim_side([0])))
        self.assertEqual(p.returncode, 2)
        self.assertIn("perf.txt:8", p.stderr)

    def test_truncated_line_exit_2_naming_the_line(self):
        a = self.write("a.txt", base_trace())
        text = base_trace()
        cut = text[:text.index("mm_fault_done") + 20]  # the file ends inside an event line
        b = self.write("b.txt", cut)
        n = cut.count("\n") + 1
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{b}:{n}:", p.stderr)
        self.assertIn("truncated", p.stderr)
        # cut inside the timestamp: not an event line at all
        c = self.write("c.txt", HEADER + "          fork-reuse-1 [000] .....     0.0001\n")
        p = self.diff(c, a)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{c}:5:", p.stderr)

    def test_garbage_exit_2_naming_the_file_and_line(self):
        a = self.write("a.txt", base_trace())
        lines = base_trace().splitlines(keepends=True)
        lines[6] = "this is not a trace line\n"
        b = self.write("b.txt", "".join(lines))
        p = self.diff(a, b)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{b}:7:", p.stderr)
        self.assertIn("this is not a trace line", p.stderr)
        self.assertEqual(p.stdout, "")
        g = self.write("g.bin", b"\x00\xff\xfe garbage\n", "wb")
        p = self.diff(g, a)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{g}:1:", p.stderr)
        j = self.write("j.json", '{"traceEvents": []}\n')
        p = self.diff(a, j)
        self.assertEqual(p.returncode, 2)
        self.assertIn("perfetto", p.stderr)
        p = self.diff(a, os.path.join(self.dir.name, "missing.txt"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing.txt", p.stderr)


if __name__ == "__main__":
    unittest.main()
