"""The calibration experiments at their own size hold within the tolerances the project states
(README, "The reference experiments"): C5, the memset() pass, times within 15% and patched /
baseline ratios within 10% of EXPERIMENTS.md's measurements. C1-C4 are pinned exactly at 8M by
test_reference_stats; C5 is checked here at 256 MiB because its store stream and its faults only
add up as measured when the region is far larger than the LLC."""

import csv
import io
import os
import subprocess
import sys
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
MMUSIM = os.environ.get("MMUSIM_BINARY", "")
REPRODUCE = os.path.join(SOURCE, "scripts", "reproduce")

TOLERANCE_PCT = {"time": 15.0, "time ratio": 10.0}


@unittest.skipUnless(MMUSIM and os.path.exists(MMUSIM), "MMUSIM_BINARY (the built mmusim) is not set")
class CalibrationTest(unittest.TestCase):
    def test_c5_memset_within_tolerance(self):
        p = subprocess.run([sys.executable, REPRODUCE, "--only", "C5", "-j", "2", "--format", "csv",
                            "--mmusim", MMUSIM, "-q"], capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        checked = 0
        for r in rows:
            tol = TOLERANCE_PCT.get(r["metric"])
            if tol is None or not r["measured"]:
                continue
            self.assertEqual(r["status"], "ok", r)
            dev = float(r["deviation_pct"])
            self.assertLessEqual(abs(dev), tol,
                                 f"C5 {r['case']} / {r['variant']} {r['metric']}: simulated "
                                 f"{r['simulated']}, measured {r['measured_text']}, "
                                 f"deviation {dev:+.1f}% (tolerance {tol}%)")
            checked += 1
        self.assertEqual(checked, 8 + 4)  # 4 folio sizes x 2 kernels, and 4 ratios


if __name__ == "__main__":
    unittest.main()
