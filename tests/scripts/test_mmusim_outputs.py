"""The outputs of `mmusim run` the scripts build on: --trace-format perfetto (valid Chrome
trace-event JSON with the expected slices) and --progress (a line on stderr; the stats identical
with and without it). Runs the real binary at 8M."""

import json
import os
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
MMUSIM = os.environ.get("MMUSIM_BINARY", "")
C1 = os.path.join(SOURCE, "configs", "experiments", "c1-fork-reuse-clock.cfg")
SMALL = ["--set", "workload.size=8M", "--set", "output.host_stats=false"]


def mmusim(*args):
    return subprocess.run([MMUSIM] + list(args), capture_output=True, text=True, timeout=120)


@unittest.skipUnless(MMUSIM and os.path.exists(MMUSIM), "MMUSIM_BINARY (the built mmusim) is not set")
class PerfettoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="perfetto-test-")
        cls.json_path = os.path.join(cls.dir.name, "trace.json")
        cls.ftrace_path = os.path.join(cls.dir.name, "trace.txt")
        p = mmusim("run", C1, *SMALL, "--quiet", "--trace", cls.json_path,
                   "--trace-format", "perfetto", "--stats", os.path.join(cls.dir.name, "s.json"))
        assert p.returncode == 0, p.stderr
        p = mmusim("run", C1, *SMALL, "--quiet", "--trace", cls.ftrace_path)
        assert p.returncode == 0, p.stderr
        with open(cls.json_path) as f:
            cls.text = f.read()
        cls.trace = json.loads(cls.text)
        with open(os.path.join(cls.dir.name, "s.json")) as f:
            cls.stats = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def events(self, ph=None, name=None):
        return [e for e in self.trace["traceEvents"]
                if (ph is None or e["ph"] == ph) and (name is None or e["name"] == name)]

    def test_valid_chrome_trace_json(self):
        self.assertIsInstance(self.trace["traceEvents"], list)
        self.assertEqual(self.trace["displayTimeUnit"], "ns")
        for e in self.trace["traceEvents"]:
            self.assertIn(e["ph"], ("X", "i", "M", "b", "e"), e)
            self.assertIn("pid", e)
            self.assertIn("tid", e)
            if e["ph"] != "M":
                self.assertIsInstance(e["ts"], (int, float))
            if e["ph"] == "X":
                self.assertGreaterEqual(e["dur"], 0)
        names = {(e["name"], e["args"].get("name")) for e in self.events("M")}
        self.assertIn(("thread_name", "cpu0"), names)
        self.assertIn(("process_name", "mmusim"), names)

    def test_faults_are_slices_matching_the_ftrace_trace(self):
        faults = [e for e in self.events("X") if e["cat"] == "fault"]
        with open(self.ftrace_path) as f:
            ftrace = f.read()
        self.assertEqual(len(faults), ftrace.count(": page_fault_user:"))
        self.assertEqual(len(faults), ftrace.count(": mm_fault_done:"))
        self.assertEqual(len(faults), self.stats["total.faults.total"])
        for e in faults:
            self.assertTrue(e["name"].startswith("fault "), e)
            self.assertEqual(e["name"], "fault " + e["args"]["result"])
            self.assertEqual(e["tid"], 1)  # cpu0's track
            self.assertTrue(e["args"]["address"].startswith("0x"))
            self.assertIn("error_code", e["args"])
            self.assertIn("ptes", e["args"])
            self.assertGreater(e["dur"], 0)
        self.assertIn("fault reuse", {e["name"] for e in faults})
        self.assertIn("fault alloc", {e["name"] for e in faults})

    def test_measured_pass_slice_contains_its_faults(self):
        region = self.events("X", "measured pass")
        self.assertEqual(len(region), 1)
        r = region[0]
        self.assertAlmostEqual(r["dur"] * 1000, self.stats["region.time_ns"], delta=1.0)
        inside = [e for e in self.events("X") if e["cat"] == "fault"
                  and r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"]]
        self.assertEqual(len(inside), self.stats["faults.total"])

    def test_instants_and_timestamps(self):
        inst = {e["name"] for e in self.events("i")}
        for n in ("tlb_fill", "tlb_invalidate", "fork", "exit", "sched_switch"):
            self.assertIn(n, inst)
        self.assertNotIn("page_fault_user", inst)
        self.assertNotIn("mm_fault_done", inst)
        # microseconds with ns precision: numbers (never integers) of at most three decimals,
        # whole ns, and some of them not whole microseconds
        self.assertRegex(self.text, r'"ts":\d+\.\d{3},')
        self.assertNotRegex(self.text, r'"(ts|dur)":(\d+,|\d+\.\d{4})')
        for e in self.events():
            for k in ("ts", "dur"):
                if k in e:
                    self.assertIsInstance(e[k], float, e)
                    self.assertEqual(round(e[k] * 1000) / 1000, e[k], e)

    def test_deterministic(self):
        again = os.path.join(self.dir.name, "again.json")
        p = mmusim("run", C1, *SMALL, "--quiet", "--trace", again, "--trace-format", "perfetto")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(again) as f:
            self.assertEqual(f.read(), self.text)

    def test_unknown_format_is_a_user_error(self):
        p = mmusim("run", C1, *SMALL, "--quiet", "--trace", os.path.join(self.dir.name, "x"),
                   "--trace-format", "chrome")
        self.assertEqual(p.returncode, 2)
        self.assertIn("perfetto", p.stderr)


@unittest.skipUnless(MMUSIM and os.path.exists(MMUSIM), "MMUSIM_BINARY (the built mmusim) is not set")
class ProgressTest(unittest.TestCase):
    def test_progress_on_stderr_and_identical_stats(self):
        with tempfile.TemporaryDirectory(prefix="progress-test-") as d:
            a, b = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            p = mmusim("run", C1, *SMALL, "--stats", a, "--progress")
            self.assertEqual(p.returncode, 0, p.stderr)
            q = mmusim("run", C1, *SMALL, "--stats", b)
            self.assertEqual(q.returncode, 0, q.stderr)
            self.assertIn("mmusim: ", p.stderr)
            last = p.stderr.strip().splitlines()[-1]
            self.assertIn("measured pass 100.0%", last)
            self.assertIn("simulated", last)
            self.assertIn("uops/s", last)
            self.assertNotIn("Warning", p.stderr)
            self.assertEqual(q.stderr, "")
            self.assertEqual(p.stdout, q.stdout)  # the table
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read())

    def test_progress_on_the_functional_platform(self):
        p = mmusim("run", C1, *SMALL, "--set", "platform.name=functional", "--quiet", "--progress")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("measured pass", p.stderr)


if __name__ == "__main__":
    unittest.main()
