"""scripts/reproduce: the tables (Markdown, CSV) from canned stats, the deviation, the measured
values copied from EXPERIMENTS.md, and one real reduced-size run of C1 4K/64K at 8M."""

import csv
import io
import os
import subprocess
import sys
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
REPRODUCE = os.path.join(SOURCE, "scripts", "reproduce")
sys.path.insert(0, os.path.join(SOURCE, "scripts"))

from mmusim_tools import experiments as X  # noqa: E402
from mmusim_tools import report  # noqa: E402


def canned_c1_stats(folio, wp):
    """Stats as mmusim writes them (only the keys reproduce reads), with made-up values."""
    faults = 65601 if wp == "off" or folio == "4K" else {"64K": 4161, "1M": 321}.get(folio, 193)
    if folio == "2M-pmd":
        faults = 193
    return {"faults.total": faults, "faults.region": faults - 65,
            "region.time_ns": 30.0e6 if faults > 60000 else 5.0e6,
            "meta": {"mmusim_version": "mmusim test"}, "config": {}}


class TestDeviation(unittest.TestCase):
    def test_deviation(self):
        self.assertAlmostEqual(report.deviation_pct(110, 100), 10.0)
        self.assertAlmostEqual(report.deviation_pct(29.0, 29.9), -3.0100334, places=5)
        self.assertIsNone(report.deviation_pct(5, 0))
        self.assertIsNone(report.deviation_pct(None, 10))
        self.assertIsNone(report.deviation_pct(10, None))

    def test_measured_values_are_those_of_experiments_md(self):
        c1 = X.c1()
        self.assertEqual(len(c1.cases), 10)  # 5 folio kinds x baseline/patched
        by = {(c.case, c.variant): c for c in c1.cases}
        m = by[("4K pages", "baseline")].measured
        self.assertEqual(m["faults"].ref, 65601)
        self.assertEqual(m["time"].text, "29.7 / 30.1")  # both boots shown
        self.assertAlmostEqual(m["time"].ref, 29.9)  # compared with the mean
        self.assertEqual(by[("64K mTHP", "patched")].measured["faults"].ref, 4161)
        self.assertEqual(by[("2M THP, PMD-mapped", "patched")].measured["time"].text, "2.5 / 2.6")
        self.assertEqual(by[("1M mTHP", "patched")].measured["region"].ref, 321 - 65)
        c2 = {(c.case, c.variant): c for c in X.c2().cases}
        r = c2[("reuse fault, patched (whole folio)", "1M mTHP")].measured["latency"]
        self.assertEqual(r.ref, 5550)
        self.assertIn("5,400", r.text)
        self.assertEqual(c2[("reuse fault, mainline (one 4K PTE)", "4K pages")].measured["latency"].ref, 420)
        self.assertEqual(c2[("fault that allocated the folio", "2M THP, PTE-mapped")].stats["latency"],
                         "fault.latency_ns.huge_alloc.median")
        self.assertEqual(c2[("fault that allocated the folio", "64K mTHP")].stats["latency"],
                         "fault.latency_ns.alloc.median")
        # validation experiments carry no measured values (nor does V8's replay check, which sets
        # a recorded program beside its built-in twin)
        for e in X.experiments([i for i in X.ALL_IDS if i.startswith("V")]):
            self.assertEqual(e.kind, "check" if e.id == "V8-replay" else "validation")
            for c in e.cases:
                self.assertEqual(c.measured, {}, (e.id, c.case))
                self.assertTrue(os.path.exists(c.config), c.config)


class TestFormatting(unittest.TestCase):
    def setUp(self):
        self.exp = X.c1()
        outcomes = []
        for c in self.exp.cases:
            sets = dict(c.sets)
            outcomes.append(report.CaseOutcome(canned_c1_stats(sets["workload.folio"],
                                                               sets["kernel.wp_reuse"])))
        # one failed run
        outcomes[-1] = report.CaseOutcome(None, "error", "mmusim: error: boom")
        self.rows = report.evaluate(self.exp, outcomes)

    def test_rows(self):
        r = [x for x in self.rows if x["case"] == "4K pages" and x["variant"] == "baseline"]
        t = [x for x in r if x["stat"] == "region.time_ns"][0]
        self.assertAlmostEqual(t["simulated"], 30.0)  # ns -> ms
        self.assertAlmostEqual(t["deviation_pct"], 100 * (30.0 - 29.9) / 29.9)
        f = [x for x in r if x["stat"] == "faults.total"][0]
        self.assertEqual(f["deviation_pct"], 0.0)

    def test_markdown(self):
        md = report.markdown([self.exp], {"C1": self.rows}, ["a note"])
        self.assertIn("## C1. One byte per page", md)
        self.assertIn("> a note", md)
        lines = md.splitlines()
        head = [l for l in lines if l.startswith("| folio size")][0]
        self.assertEqual(head.count("|") - 1, 2 + 3 * 3)
        row = [l for l in lines if l.startswith("| 4K pages | baseline |")][0]
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[2:5], ["65,601", "65,601", "+0.0%"])
        self.assertEqual(cells[8:11], ["30.00", "29.7 / 30.1", "+0.3%"])
        failed = [l for l in lines if l.startswith("| 2M THP, PMD-mapped | patched |")][0]
        self.assertIn("n/a (error)", failed)
        self.assertIn("- 2M THP, PMD-mapped / patched: error: mmusim: error: boom", md)

    def test_csv(self):
        text = report.csv_text([self.exp], {"C1": self.rows})
        rows = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(list(rows[0].keys()), report.CSV_COLUMNS)
        self.assertEqual(len(rows), 10 * 3)
        t = [r for r in rows if r["case"] == "64K mTHP" and r["variant"] == "patched"
             and r["stat"] == "region.time_ns"][0]
        self.assertEqual(t["measured_text"], "5.5 / 5.6")
        self.assertAlmostEqual(float(t["measured"]), 5.55)
        self.assertAlmostEqual(float(t["simulated"]), 5.0)
        self.assertAlmostEqual(float(t["deviation_pct"]), 100 * (5.0 - 5.55) / 5.55, places=3)
        self.assertEqual(t["kind"], "calibration")
        region = [r for r in rows if r["stat"] == "faults.region"][0]
        self.assertIn("derived", region["note"])

    def test_reduced_size_scales_the_reference_of_counts_and_times_only(self):
        out = [report.CaseOutcome(canned_c1_stats("4K", "off"))] * len(self.exp.cases)
        rows = report.evaluate(self.exp, out, size=8 << 20)
        f = [x for x in rows if x["stat"] == "faults.total"][0]
        self.assertAlmostEqual(f["reference"], 65601 / 32)
        c2 = X.c2()
        rows = report.evaluate(c2, [report.CaseOutcome({"fault.latency_ns.reuse.median": 430.0,
                                                        "fault.latency_ns.alloc.median": 1.0,
                                                        "fault.latency_ns.huge_alloc.median": 1.0,
                                                        "fault.latency_ns.copy.median": 1.0})]
                               * len(c2.cases), size=8 << 20)
        self.assertAlmostEqual(rows[0]["reference"], 420)  # latencies do not scale
        self.assertAlmostEqual(rows[0]["deviation_pct"], 100 * 10 / 420)

    def test_validation_table_has_no_measured_columns(self):
        v = X.v11()
        rows = report.evaluate(v, [report.CaseOutcome({"region.time_ns": 1.5e6})] * len(v.cases))
        md = report.markdown([v], {"V11": rows})
        self.assertIn("| folio | fork_copy | fork() time ms |", md)
        self.assertNotIn("measured |", md)
        self.assertIn("| order-0 pages | per-pte | 1.500 |", md)


@unittest.skipUnless(os.environ.get("MMUSIM_BINARY") and os.path.exists(os.environ["MMUSIM_BINARY"]),
                     "MMUSIM_BINARY (the built mmusim) is not set")
class TestRealReproduce(unittest.TestCase):
    def run_reproduce(self, *args):
        return subprocess.run([REPRODUCE, "--only", "C1", "--filter", "workload.folio=4K,64K",
                               "--size", "8M", "-j", "2"] + list(args),
                              capture_output=True, text=True, timeout=300)

    def test_c1_4k_64k_at_8m(self):
        p = self.run_reproduce()
        self.assertEqual(p.returncode, 0, p.stderr)
        md = p.stdout
        self.assertIn("## C1.", md)
        self.assertIn("Reduced size", md)
        self.assertIn("scale", md)
        rows = {}
        for line in md.splitlines():
            if line.startswith("| 4K pages") or line.startswith("| 64K mTHP"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                rows[(cells[0], cells[1])] = cells
        self.assertEqual(len(rows), 4, md)
        self.assertNotIn("1M mTHP", md)
        # 8M = 2,048 pages; baseline faults once per page, patched 64K once per folio
        self.assertEqual(rows[("4K pages", "baseline")][5], "2,048")
        self.assertEqual(rows[("64K mTHP", "patched")][5], "128")
        self.assertEqual(rows[("64K mTHP", "patched")][6], "4,096")  # measured, as published

    def test_c1_csv(self):
        p = self.run_reproduce("--format", "csv", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        self.assertEqual(len(rows), 4 * 3)
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        self.assertEqual(p.stderr, "")


class TestArguments(unittest.TestCase):
    def test_unknown_experiment(self):
        p = subprocess.run([REPRODUCE, "--only", "C9"], capture_output=True, text=True,
                           env=dict(os.environ, MMUSIM_BINARY=sys.executable))
        self.assertEqual(p.returncode, 2)
        self.assertIn("C9", p.stderr)

    def test_bad_size(self):
        p = subprocess.run([REPRODUCE, "--size", "3M"], capture_output=True, text=True,
                           env=dict(os.environ, MMUSIM_BINARY=sys.executable))
        self.assertEqual(p.returncode, 2)
        self.assertIn("multiple of 2M", p.stderr)


if __name__ == "__main__":
    unittest.main()
