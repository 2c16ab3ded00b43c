"""scripts/plot: PNGs from a small sweep CSV and from reproduce's CSV. Skipped, saying so, when
matplotlib is not installed (apt-get install python3-matplotlib)."""

import csv
import os
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
PLOT = os.path.join(SOURCE, "scripts", "plot")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_csv(path, rows):
    cols = list(rows[0].keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="plot-test-")
        self.d = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def plot(self, *args):
        p = subprocess.run([PLOT] + list(args), capture_output=True, text=True, timeout=120)
        if p.returncode != 0 and "matplotlib is not installed" in p.stderr:
            self.skipTest("matplotlib is not installed (apt-get install python3-matplotlib): "
                          + p.stderr.strip().splitlines()[0])
        return p

    def assertPng(self, path):
        self.assertTrue(os.path.exists(path), path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC)
        self.assertGreater(os.path.getsize(path), 2000)

    def test_order_of_the_x_axis(self):
        # Folio sizes in their order, numbers by value (not 1, 12, 18, 6), text last.
        import sys
        sys.path.insert(0, os.path.join(SOURCE, "scripts"))
        from mmusim_tools.stats import FOLIO_ORDER, order_key
        self.assertEqual(sorted(["18", "6", "1", "12"], key=lambda v: order_key(v, FOLIO_ORDER)),
                         ["1", "6", "12", "18"])
        self.assertEqual(sorted(["2M-pte", "x", "4K", "64K", "2"], key=lambda v: order_key(v, FOLIO_ORDER)),
                         ["4K", "64K", "2M-pte", "2", "x"])

    def test_sweep_csv(self):
        rows = []
        for folio, fb, fp in [("4K", 65601, 65601), ("64K", 65601, 4161), ("2M-pmd", 193, 193)]:
            for wp, faults in [("off", fb), ("pagetable", fp)]:
                rows.append({"id": f"{folio}-{wp}", "status": "ok",
                             "config.kernel.wp_reuse": wp, "config.workload.folio": folio,
                             "config.workload.size": "256M",
                             "config.workload.pattern": "seq-byte-clock",
                             "faults.total": faults, "region.time_ns": faults * 450.0})
        rows.append({"id": "broken", "status": "failed", "config.kernel.wp_reuse": "off",
                     "config.workload.folio": "1M"})
        src = os.path.join(self.d, "results.csv")
        write_csv(src, rows)
        out = os.path.join(self.d, "png")
        p = self.plot(src, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertPng(os.path.join(out, "faults-total.png"))
        self.assertPng(os.path.join(out, "region-time-ns.png"))
        self.assertEqual(sorted(p.stdout.split()), sorted([os.path.join(out, "faults-total.png"),
                                                           os.path.join(out, "region-time-ns.png")]))

    def test_reproduce_csv(self):
        rows = [{"experiment": "C1", "kind": "calibration", "case": c, "variant": v,
                 "metric": "time", "stat": "region.time_ns", "unit": "ms", "simulated": s,
                 "measured": m, "measured_text": "", "reference": m, "deviation_pct": "",
                 "status": "ok", "note": ""}
                for c, v, s, m in [("4K pages", "baseline", 29.0, 29.9),
                                   ("64K mTHP", "patched", 5.0, 5.55)]]
        src = os.path.join(self.d, "reproduce.csv")
        write_csv(src, rows)
        p = self.plot(src, "--out", self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertPng(os.path.join(self.d, "c1-time.png"))

    def test_errors(self):
        p = self.plot(os.path.join(self.d, "missing.csv"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing.csv", p.stderr)
        src = os.path.join(self.d, "x.csv")
        write_csv(src, [{"id": "a", "status": "ok", "other": 1}])
        p = self.plot(src, "--out", self.d)
        self.assertEqual(p.returncode, 2)
        self.assertIn("nothing to plot", p.stderr)


if __name__ == "__main__":
    unittest.main()
