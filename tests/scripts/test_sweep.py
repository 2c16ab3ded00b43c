"""scripts/sweep: expansion (grid, list), ids, resume, failures, --emit slurm/parallel, --collect.

Most tests use a stand-in for mmusim (a small Python script that writes a stats JSON and logs its
invocations), so that they check the sweep's logic quickly; one runs the real binary at 8M.
"""

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = os.path.join(SOURCE, "scripts")
SWEEP = os.path.join(SCRIPTS, "sweep")
C1 = os.path.join(SOURCE, "configs", "experiments", "c1-fork-reuse-clock.cfg")
C3 = os.path.join(SOURCE, "configs", "experiments", "c3-fork-reuse-nobarrier.cfg")
sys.path.insert(0, SCRIPTS)

from mmusim_tools.runner import RunSpec  # noqa: E402

FAKE = textwrap.dedent('''\
    #!{python}
    # A stand-in for mmusim: "run CONFIG... [--set K=V]... [--stats F] [--quiet]".
    import json, os, sys
    args = sys.argv[1:]
    assert args[0] == "run", args
    configs, sets, stats = [], {{}}, None
    i = 1
    while i < len(args):
        a = args[i]
        if a == "--set":
            k, v = args[i + 1].split("=", 1); sets[k] = v; i += 2
        elif a == "--stats":
            stats = args[i + 1]; i += 2
        elif a.startswith("--"):
            i += 1
        else:
            configs.append(a); i += 1
    with open(os.environ["FAKE_MMUSIM_LOG"], "a") as f:
        f.write(json.dumps({{"configs": configs, "sets": sets}}) + "\\n")
    for k, v in sets.items():
        if v == "bogus":
            sys.stderr.write("mmusim: error: --set %s: '%s' is not a known value\\n" % (k, v))
            sys.exit(2)
    cfg = {{"workload.folio": "64K", "kernel.wp_reuse": "pagetable", "workload.size": 268435456,
           "workload.pattern": "seq-byte-clock", "platform.name": "i7-12700kf"}}
    cfg.update(sets)
    faults = {{"4K": 65601, "64K": 4161, "1M": 321}}.get(cfg["workload.folio"], 193)
    if cfg["kernel.wp_reuse"] == "off":
        faults = 65601
    out = {{"faults.total": faults, "region.time_ns": faults * 1000.5,
           "meta": {{"mmusim_version": "fake"}}, "config": cfg}}
    with open(stats, "w") as f:
        json.dump(out, f)
    ''')


def run(args, env=None, cwd=None):
    return subprocess.run([SWEEP] + args, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


class FakeMmusim(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sweep-test-")
        self.fake = os.path.join(self.tmp, "mmusim")
        with open(self.fake, "w") as f:
            f.write(FAKE.format(python=sys.executable))
        os.chmod(self.fake, os.stat(self.fake).st_mode | stat.S_IEXEC)
        self.log = os.path.join(self.tmp, "calls.jsonl")
        self.env = dict(os.environ, FAKE_MMUSIM_LOG=self.log, MMUSIM_BINARY=self.fake)
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def results(self):
        with open(os.path.join(self.out, "results.csv"), newline="") as f:
            return list(csv.DictReader(f))


class TestExpansion(FakeMmusim):
    def test_grid_is_a_cross_product(self):
        p = run([C1, "--grid", "kernel.wp_reuse=off,pagetable",
                 "--grid", "workload.folio=4K,64K,1M", "--dry-run"], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.strip().splitlines()
        self.assertEqual(len(lines), 6)
        pairs = set()
        for line in lines:
            self.assertIn(self.fake, line)
            self.assertIn(C1, line)
            wp = line.split("kernel.wp_reuse=")[1].split()[0]
            folio = line.split("workload.folio=")[1].split()[0]
            pairs.add((wp, folio))
        self.assertEqual(pairs, {(w, f) for w in ("off", "pagetable") for f in ("4K", "64K", "1M")})
        self.assertEqual(self.calls(), [], "--dry-run ran something")

    def test_list_gives_one_run_per_entry_and_crosses_grid_and_configs(self):
        p = run([C1, C3, "--list", "kernel.wp_reuse=off,workload.folio=4K",
                 "kernel.wp_reuse=pagetable,workload.folio=2M-pte",
                 "--grid", "workload.size=8M,16M", "--set", "log.level=error", "--dry-run"],
                self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.strip().splitlines()
        self.assertEqual(len(lines), 2 * 2 * 2)
        for line in lines:
            self.assertIn("--set log.level=error", line)
            self.assertTrue(("kernel.wp_reuse=off --set workload.folio=4K" in line) !=
                            ("kernel.wp_reuse=pagetable --set workload.folio=2M-pte" in line), line)
        self.assertEqual(sum(C3 in line for line in lines), 4)

    def test_layered_configs_with_plus(self):
        p = run([C1 + "+" + C3, "--dry-run"], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"run {C1} {C3}", p.stdout)

    def test_bad_arguments_are_user_errors(self):
        for args in (["--grid", "workload.folio"], ["--grid", "Workload=1"], ["--list", "a"]):
            p = run([C1] + args + ["--dry-run"], self.env)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("sweep: error:", p.stderr)
        p = run(["no-such.cfg", "--dry-run"], self.env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no-such.cfg", p.stderr)

    def test_ids_are_readable_unique_and_order_independent(self):
        a = RunSpec([C1], [("kernel.wp_reuse", "off"), ("workload.folio", "4K")])
        b = RunSpec([C1], [("workload.folio", "4K"), ("kernel.wp_reuse", "off")])
        c = RunSpec([C1], [("workload.folio", "4K"), ("kernel.wp_reuse", "pagetable")])
        self.assertEqual(a.run_id(), b.run_id())
        self.assertNotEqual(a.run_id(), c.run_id())
        self.assertTrue(a.run_id().startswith("c1-fork-reuse-clock--kernel.wp_reuse=off--"
                                              "workload.folio=4K--"), a.run_id())
        self.assertNotIn("/", RunSpec([C1], [("x.y", "a/b c")]).run_id())


class TestRunResumeCollect(FakeMmusim):
    def test_run_writes_rows_and_resume_skips_finished_runs(self):
        args = [C1, "--grid", "kernel.wp_reuse=off,pagetable", "--grid", "workload.folio=4K,64K",
                "--out", self.out, "-j", "2"]
        p = run(args, self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.calls()), 4)
        rows = self.results()
        self.assertEqual(len(rows), 4)
        by = {(r["config.kernel.wp_reuse"], r["config.workload.folio"]): r for r in rows}
        self.assertEqual(by[("off", "64K")]["faults.total"], "65601")
        self.assertEqual(by[("pagetable", "64K")]["faults.total"], "4161")
        self.assertEqual(by[("pagetable", "64K")]["status"], "ok")
        with open(os.path.join(self.out, "results.jsonl")) as f:
            jl = [json.loads(line) for line in f]
        self.assertEqual(len(jl), 4)
        self.assertEqual({r["id"] for r in jl}, {r["id"] for r in rows})
        self.assertTrue(all(isinstance(r["faults.total"], int) for r in jl))
        for r in rows:
            self.assertTrue(os.path.exists(os.path.join(self.out, "runs", r["id"] + ".json")))

        # Again, with one more folio: only the new runs run.
        p = run(args[:4] + ["workload.folio=4K,64K,1M"] + args[5:], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 to run", p.stderr)
        self.assertEqual(len(self.calls()), 6)
        self.assertEqual(len(self.results()), 6)
        new = [c["sets"]["workload.folio"] for c in self.calls()[4:]]
        self.assertEqual(new, ["1M", "1M"])

    def test_failed_run_is_reported_and_others_complete(self):
        p = run([C1, "--grid", "kernel.wp_reuse=off,bogus,pagetable", "--out", self.out, "-j", "2"],
                self.env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("failed", p.stderr)
        self.assertIn("--set kernel.wp_reuse=bogus", p.stderr)  # the command
        self.assertIn("'bogus' is not a known value", p.stderr)  # its stderr
        rows = self.results()
        self.assertEqual(sorted(r["status"] for r in rows), ["failed", "ok", "ok"])
        # A failed run is not "done": it runs again next time.
        n = len(self.calls())
        run([C1, "--grid", "kernel.wp_reuse=off,bogus,pagetable", "--out", self.out], self.env)
        self.assertEqual(len(self.calls()), n + 1)

    def test_emit_slurm_and_parallel_then_collect(self):
        args = [C1, "--grid", "workload.folio=4K,64K,1M", "--out", self.out]
        p = run(args + ["--emit", "slurm", "--slurm-option=--time=00:05:00"], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.calls(), [])
        with open(os.path.join(self.out, "sweep.slurm")) as f:
            script = f.read()
        self.assertTrue(script.startswith("#!/bin/bash\n"))
        self.assertIn("#SBATCH --array=0-2", script)
        self.assertIn("#SBATCH --time=00:05:00", script)
        self.assertIn("SLURM_ARRAY_TASK_ID", script)
        self.assertIn(os.path.join(self.out, "jobs.txt"), script)
        # every #SBATCH line comes before the first command
        body = [l for l in script.splitlines() if l and not l.startswith("#")]
        last_sbatch = max(i for i, l in enumerate(script.splitlines()) if l.startswith("#SBATCH"))
        self.assertLess(last_sbatch, script.splitlines().index(body[0]))
        with open(os.path.join(self.out, "jobs.txt")) as f:
            jobs = f.read().splitlines()
        self.assertEqual(len(jobs), 3)
        for j in jobs:
            self.assertTrue(j.startswith(self.fake + " run " + C1), j)
            self.assertIn("--stats", j)
            self.assertIn(os.path.join(self.out, "runs"), j)

        # Nothing collected yet: the rows say so, exit status 1.
        p = run(["--collect", self.out], self.env)
        self.assertEqual(p.returncode, 1)
        self.assertEqual([r["status"] for r in self.results()], ["missing"] * 3)

        # Run two of the jobs as Slurm would (task ids 0 and 2), then collect.
        for task in ("0", "2"):
            q = subprocess.run(["bash", os.path.join(self.out, "sweep.slurm")],
                               env=dict(self.env, SLURM_ARRAY_TASK_ID=task), capture_output=True,
                               text=True)
            self.assertEqual(q.returncode, 0, q.stderr)
        p = run(["--collect", self.out], self.env)
        self.assertEqual(p.returncode, 1)
        st = {r["config.workload.folio"]: r["status"] for r in self.results()}
        self.assertEqual(st, {"4K": "ok", "64K": "missing", "1M": "ok"})

        # --emit parallel lists only the unfinished run; run it like GNU parallel would.
        p = run(args + ["--emit", "parallel"], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("parallel", p.stderr)
        with open(os.path.join(self.out, "jobs.txt")) as f:
            jobs = f.read().splitlines()
        self.assertEqual(len(jobs), 1)
        self.assertIn("workload.folio=64K", jobs[0])
        q = subprocess.run(["bash", "-c", jobs[0]], env=self.env, capture_output=True, text=True)
        self.assertEqual(q.returncode, 0, q.stderr)
        p = run(["--collect", self.out], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = self.results()
        self.assertEqual([r["status"] for r in rows], ["ok"] * 3)
        self.assertEqual({r["config.workload.folio"]: r["faults.total"] for r in rows},
                         {"4K": "65601", "64K": "4161", "1M": "321"})

    def test_failed_emitted_job_leaves_an_err_file(self):
        run([C1, "--grid", "kernel.wp_reuse=bogus", "--out", self.out, "--emit", "parallel"],
            self.env)
        with open(os.path.join(self.out, "jobs.txt")) as f:
            job = f.read().strip()
        q = subprocess.run(["bash", "-c", job], env=self.env, capture_output=True, text=True)
        self.assertNotEqual(q.returncode, 0)
        p = run(["--collect", self.out], self.env)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(self.results()[0]["status"], "failed")

    def test_collect_of_a_directory_that_is_not_a_sweep(self):
        p = run(["--collect", self.tmp], self.env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("manifest.json", p.stderr)


@unittest.skipUnless(os.environ.get("MMUSIM_BINARY") and os.path.exists(os.environ["MMUSIM_BINARY"]),
                     "MMUSIM_BINARY (the built mmusim) is not set")
class TestRealMmusim(unittest.TestCase):
    def test_small_real_sweep(self):
        with tempfile.TemporaryDirectory(prefix="sweep-real-") as out:
            p = run([C1, "--grid", "kernel.wp_reuse=off,pagetable", "--set", "workload.size=8M",
                     "--set", "workload.folio=64K", "--out", out, "-j", "2"])
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(out, "results.csv"), newline="") as f:
                rows = {r["config.kernel.wp_reuse"]: r for r in csv.DictReader(f)}
            self.assertEqual(rows["off"]["config.workload.size"], "8M")
            self.assertGreater(int(rows["off"]["faults.region"]), int(rows["pagetable"]["faults.region"]))
            self.assertEqual(int(rows["off"]["faults.region"]), 8 * 256)  # one per 4K page


if __name__ == "__main__":
    unittest.main()
