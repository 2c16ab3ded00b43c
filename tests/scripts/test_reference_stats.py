"""The pinned results: every reference run (each experiment config as it is, each case that
scripts/reproduce runs, the variants in tests/reference-stats/VARIANTS) at 8M gives exactly the
statistics kept in tests/reference-stats/ (every key, the effective configuration included; the
host-dependent keys and the version string left out). A change that moves a result on purpose
rewrites the files with scripts/update-reference-stats and commits them with it."""

import concurrent.futures
import copy
import os
import sys
import tempfile
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))

from mmusim_tools import refstats  # noqa: E402
from mmusim_tools.runner import cpu_count  # noqa: E402

MMUSIM = os.environ.get("MMUSIM_BINARY", "")
# Under the sanitizers (.ci/sanitize) a run stopped by an error on a core's coroutine stack meets
# ASan's false positive described there: the hazard run is left to the normal build.
UNDER_ASAN = bool(os.environ.get("MMUSIM_UNDER_SANITIZER"))
STOPS_BY_DESIGN = {"c4-hazard-spurious-none"}
HOW_TO_UPDATE = ("if the change is meant to move results, run scripts/update-reference-stats "
                 "and commit the rewritten files with it (the diff shows what moved)")


class ComparisonTest(unittest.TestCase):
    """The comparison itself: it must see a 1% move of any number, a changed string, a key that
    appears or disappears, an int that became a float, and a different exit status."""

    def setUp(self):
        self.ref = refstats.load(os.path.join(refstats.REF_DIR, "c1-fork-reuse-clock.json"))

    def test_identical_records_do_not_differ(self):
        self.assertEqual(refstats.differences(self.ref, copy.deepcopy(self.ref)), [])

    def test_every_kind_of_change_is_seen(self):
        def moved(edit):
            new = copy.deepcopy(self.ref)
            edit(new)
            return [k for k, _, _ in refstats.differences(self.ref, new)]

        def scale(r):
            r["stats"]["region.time_ns"] *= 1.01
        self.assertEqual(moved(scale), ["region.time_ns"])

        def config(r):
            r["stats"]["config"]["kernel.wp_reuse"] = "off"
        self.assertEqual(moved(config), ["config.kernel.wp_reuse"])

        def drop(r):
            del r["stats"]["faults.spurious"]
        self.assertEqual(moved(drop), ["faults.spurious"])

        def add(r):
            r["stats"]["faults.new_kind"] = 0
        self.assertEqual(moved(add), ["faults.new_kind"])

        def as_float(r):
            r["stats"]["faults.total"] = float(r["stats"]["faults.total"])
        self.assertEqual(moved(as_float), ["faults.total"])

        def status(r):
            r["run"]["exit_status"] = 1
        self.assertEqual(moved(status), ["run.exit_status"])

    def test_the_reference_set_covers_every_experiment_config(self):
        runs = {r.name for r in refstats.all_runs()}
        configs = sorted(os.listdir(os.path.join(SOURCE, "configs", "experiments")))
        for c in configs:
            # (a replay of a recording, V8's, depends on the recording made on the machine)
            if c.endswith(".cfg") and not refstats.replays_a_recording(
                    os.path.join(SOURCE, "configs", "experiments", c)):
                self.assertIn(c[:-4], runs)
        files = {f[:-5] for f in os.listdir(refstats.REF_DIR) if f.endswith(".json")}
        self.assertEqual(sorted(runs - files), [], "runs without a reference file: " + HOW_TO_UPDATE)
        self.assertEqual(sorted(files - runs), [],
                         "reference files no run produces: scripts/update-reference-stats --prune")


@unittest.skipUnless(MMUSIM and os.path.exists(MMUSIM), "MMUSIM_BINARY (the built mmusim) is not set")
class ReferenceStatsTest(unittest.TestCase):
    def test_every_reference_run_gives_the_pinned_statistics(self):
        runs = [r for r in refstats.all_runs()
                if not (UNDER_ASAN and r.name in STOPS_BY_DESIGN)]
        self.assertGreaterEqual(len(runs), 100)
        with tempfile.TemporaryDirectory(prefix="mmusim-refstats-test-") as tmp:
            with concurrent.futures.ThreadPoolExecutor(max_workers=cpu_count()) as pool:
                records = list(pool.map(lambda r: refstats.run(r, MMUSIM, tmp), runs))
        for ref, rec in zip(runs, records):
            with self.subTest(run=ref.name):
                path = ref.path()
                self.assertTrue(os.path.exists(path), f"{path} is missing: " + HOW_TO_UPDATE)
                expected = refstats.load(path)
                if ref.name in STOPS_BY_DESIGN:
                    self.assertNotEqual(expected["run"]["exit_status"], 0)
                diffs = refstats.differences(expected, rec)
                if diffs:
                    self.fail(f"\n{ref.name}: {len(diffs)} keys differ from "
                              f"{os.path.relpath(path, SOURCE)}:\n{refstats.describe(diffs)}\n"
                              + HOW_TO_UPDATE)


if __name__ == "__main__":
    unittest.main()
