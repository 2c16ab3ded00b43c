"""Every config in configs/experiments/ runs to completion at a reduced size (8M; the threads of
C6 and V7 on as many cores as the config says), on the platform it names: exit status 0, the
measured region seen, faults counted, the configuration recorded in the stats JSON as the file
set it. The one config that shows a hazard (c4-hazard-spurious-none.cfg) must instead stop with
the watchdog's exit status 1. A new config in the folder is picked up by this test."""

import glob
import json
import os
import re
import subprocess
import tempfile
import sys
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
from mmusim_tools.refstats import SWAP_READERS_SCALED  # noqa: E402
MMUSIM = os.environ.get("MMUSIM_BINARY", "")
CONFIGS = sorted(glob.glob(os.path.join(SOURCE, "configs", "experiments", "*.cfg")))
# Stops by design: the patch on arm64 with 6.12's empty spurious-fault hook livelocks.
HAZARD = "c4-hazard-spurious-none.cfg"
# Under the sanitizers (.ci/sanitize), a simulation stopped by an error on a core's coroutine
# stack meets ASan's false positive described there: the hazard run is left to the normal build.
UNDER_ASAN = bool(os.environ.get("MMUSIM_UNDER_SANITIZER"))


def as_json(value):
    """A config file's value as the stats JSON records it: sizes in bytes, integers, booleans."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", value)
    if m:
        return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]
    if value in ("true", "false"):
        return value == "true"
    return value


def settings(path):
    """The section.key = value lines of one config file (not its includes)."""
    out, section = {}, ""
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^\[(.+)\]$", line)
            if m:
                section = m.group(1)
            elif "=" in line and section:
                k, v = (x.strip() for x in line.split("=", 1))
                out[f"{section}.{k}"] = v
    return out


@unittest.skipUnless(MMUSIM and os.path.exists(MMUSIM), "MMUSIM_BINARY (the built mmusim) is not set")
class ExperimentConfigsTest(unittest.TestCase):
    def test_there_is_a_config_per_experiment(self):
        names = {os.path.basename(c).split("-")[0] for c in CONFIGS}
        for e in ["c1", "c2", "c3", "c4", "c5", "c6", "v3", "v4", "v5", "v6", "v7", "v8", "v10a", "v10b", "v11"]:
            self.assertIn(e, names)

    def recording(self, tmp):
        """A replay config (V8's Redis) runs here on a small recording of forkbench (the recorder's
        test program) instead: what it checks is the config, not Redis. None without the recorder."""
        build = os.path.dirname(MMUSIM)
        forkbench = os.path.join(build, "recorder", "forkbench")
        if not (os.path.exists(os.path.join(build, "recorder", "lib", "mmusimrec-amd64-linux"))
                and os.path.exists(forkbench)):
            return None
        rec = os.path.join(tmp, "rec")
        p = subprocess.run([MMUSIM, "record", "--out", rec, "--", forkbench, "--size", "4M"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return rec

    def test_every_config_runs_at_a_reduced_size(self):
        self.assertGreaterEqual(len(CONFIGS), 25)
        with tempfile.TemporaryDirectory(prefix="mmusim-configs-") as tmp:
            rec = None
            for cfg in CONFIGS:
                name = os.path.basename(cfg)
                if name == HAZARD and UNDER_ASAN:
                    continue
                replay = settings(cfg).get("workload.name") == "trace"
                extra = []
                if replay:
                    rec = rec or self.recording(tmp)
                    if rec is None:
                        print(f"{name}: skipped (it replays a recording; the recorder is not built)")
                        continue
                    extra = ["--set", "workload.trace=" + rec]
                # V10(a)'s file must be larger than its memory cgroup: it runs at its own size
                own = settings(cfg).get("workload.name") == "file-faults"
                size = [] if own else ["--set", "workload.size=8M"]
                # V10(b)'s memory cgroup and pressure thread scale with its mapping (refstats.py)
                scaled = SWAP_READERS_SCALED if settings(cfg).get("workload.name") == "swap-readers" else []
                for s in scaled:
                    size += ["--set", s]
                overridden = {s.split("=", 1)[0] for s in scaled}
                with self.subTest(config=name):
                    js = os.path.join(tmp, name + ".json")
                    p = subprocess.run([MMUSIM, "run", cfg, "--quiet", "--stats", js] + size + extra,
                                       capture_output=True, text=True, timeout=300)
                    if name == HAZARD:
                        self.assertEqual(p.returncode, 1, p.stderr)
                        self.assertIn("watchdog", p.stderr)
                        continue
                    self.assertEqual(p.returncode, 0, p.stderr)
                    with open(js) as f:
                        stats = json.load(f)
                    self.assertGreater(stats["total.faults.total"], 0)
                    self.assertGreater(stats["sim.simulated_ns"], 0)
                    self.assertIn("region.time_ns", stats)
                    config = stats["config"]
                    if not own:
                        self.assertEqual(config["workload.size"], 8 << 20)
                    for key, value in settings(cfg).items():
                        if ((key == "workload.size" and not own) or (replay and key == "workload.trace")
                                or key in overridden):
                            continue
                        self.assertIn(key, config)
                        got = config[key]
                        if isinstance(got, str) and duration_ns(got) is not None:
                            # a duration is written back in ns ("20ms" -> "20000000ns")
                            self.assertEqual(duration_ns(got), duration_ns(value), key)
                            continue
                        self.assertEqual(got, value if isinstance(got, str) else as_json(value), key)


def duration_ns(text):
    """A duration with a time unit in ns (None: not one)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|ms|s)\s*", str(text))
    if not m:
        return None
    return float(m.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]


if __name__ == "__main__":
    unittest.main()
