"""Reference statistics: the statistics JSON of every experiment config (and a few variants) at a
small size, kept in tests/reference-stats/ so that a model change that moves any result fails the
suite (tests/scripts/test_reference_stats.py) until the files are rewritten on purpose
(scripts/update-reference-stats), whose diff the commit then shows.

One file per run, <name>.json:
    {"run": {"configs": [...], "set": ["k=v", ...], "exit_status": 0},
     "stats": { the --stats JSON, with meta.mmusim_version removed }}
A run that must fail (the hazard config's watchdog stop) records its exit status and its error
message instead of stats. Every key is compared exactly (the simulator is deterministic: the same
config and seed give byte-identical statistics); the host-dependent keys are left out by running
with output.host_stats=false, and the version string (it names the commit) is dropped.
"""

import glob
import json
import os
import re
import subprocess

from . import experiments
from .runner import SOURCE_DIR, ToolError

REF_DIR = os.path.join(SOURCE_DIR, "tests", "reference-stats")
VARIANTS = os.path.join(REF_DIR, "VARIANTS")
SIZE = "8M"
# Every run: the small size, no host-dependent keys.
COMMON_SETS = [f"workload.size={SIZE}", "output.host_stats=false"]
# meta keys that depend on the build, not on the model.
HOST_META = ("mmusim_version",)


class RefRun:
    """One reference run: a name (the file stem), the config file (relative to the source tree)
    and its extra --set assignments."""

    def __init__(self, name, config, sets=()):
        self.name = name
        self.config = config
        self.sets = own_size(config) + list(sets)

    def command(self, mmusim, stats_path):
        cmd = [mmusim, "run", self.config]
        for s in COMMON_SETS + self.sets:
            cmd += ["--set", s]
        return cmd + ["--quiet", "--stats", stats_path]

    def path(self, ref_dir=REF_DIR):
        return os.path.join(ref_dir, self.name + ".json")


def parse_variants(path=VARIANTS):
    """The VARIANTS file: `name: config [key=value ...]` per line, # comments."""
    runs = []
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                raise ToolError(f"{path}:{n}: expected 'name: config [key=value ...]'")
            name, rest = (x.strip() for x in line.split(":", 1))
            words = rest.split()
            if not name or not words:
                raise ToolError(f"{path}:{n}: expected 'name: config [key=value ...]'")
            if not os.path.isfile(os.path.join(SOURCE_DIR, words[0])):
                raise ToolError(f"{path}:{n}: config file '{words[0]}' not found in the source tree")
            for w in words[1:]:
                if "=" not in w:
                    raise ToolError(f"{path}:{n}: '{w}' is not a key=value assignment")
            runs.append(RefRun(name, words[0], words[1:]))
    return runs


def run_name(config, sets):
    """<config stem>--<key=value>--... (sets sorted), safe as a file name."""
    parts = [os.path.splitext(os.path.basename(config))[0]] + sorted(sets)
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", "--".join(parts))


# A swap-readers config (V10(b)) at 8M: its memory cgroup and pressure thread scaled with it (the
# config's 128M / 64M / 32M divided by 16), so that its readers still fault from swap; 2 ms.
SWAP_READERS_SCALED = ["memcg.max=4M", "workload.pressure_size=2M", "workload.duration=2ms"]


def own_size(config):
    """A file-faults config (V10) runs at its own workload.size (the file): its memory cgroup must
    be smaller than the file for the experiment to mean anything, and with the file cached whole
    its readers would run on cached pages for the whole workload.duration, minutes of host time. A
    swap-readers config (V10(b)) runs at the small size with its memory cgroup and pressure thread
    scaled alike (SWAP_READERS_SCALED). Returns the --set that follow COMMON_SETS, or nothing."""
    path = config if os.path.isabs(config) else os.path.join(SOURCE_DIR, config)
    with open(path) as f:
        text = f.read()
    if re.search(r"^\s*name\s*=\s*swap-readers\b", text, re.M):
        return list(SWAP_READERS_SCALED)
    if not re.search(r"^\s*name\s*=\s*file-faults\b", text, re.M):
        return []
    m = re.search(r"^\s*size\s*=\s*(\S+)", text, re.M)
    return [f"workload.size={m.group(1)}"] if m else []


def replays_a_recording(config):
    """A config of workload.name = trace (V8) needs a recording made on the machine: it is not
    pinned (its statistics depend on that recording)."""
    import re
    with open(config) as f:
        return re.search(r"^\s*name\s*=\s*trace\b", f.read(), re.M) is not None


def all_runs():
    """Every config in configs/experiments/ as it is; every case that scripts/reproduce runs
    (experiments.py: the configs with the settings of each table row); then the VARIANTS file.
    Not the replays of recordings (replays_a_recording), nor the check tables (kind "check")."""
    runs = [RefRun(os.path.splitext(os.path.basename(c))[0], os.path.relpath(c, SOURCE_DIR))
            for c in sorted(glob.glob(os.path.join(SOURCE_DIR, "configs", "experiments", "*.cfg")))
            if not replays_a_recording(c)]
    names = {r.name for r in runs}
    for e in experiments.experiments():
        if e.kind == "check":  # (V8's replay check: a recording made on the machine beside its built-in twin)
            continue
        for c in e.cases:
            if not os.path.isfile(c.config) or replays_a_recording(c.config):
                continue
            sets = sorted(f"{k}={v}" for k, v in c.sets)
            name = run_name(c.config, sets)
            if not sets or name in names:
                continue
            names.add(name)
            runs.append(RefRun(name, os.path.relpath(c.config, SOURCE_DIR), sets))
    for v in parse_variants():
        if v.name in names:
            raise ToolError(f"{VARIANTS}: the name '{v.name}' is used twice")
        names.add(v.name)
        runs.append(v)
    return runs


def run(ref, mmusim, tmpdir, timeout=600):
    """Runs one reference run (from the source tree, so the paths in meta are relative) and
    returns its record."""
    stats_path = os.path.join(tmpdir, ref.name + ".json")
    p = subprocess.run(ref.command(mmusim, stats_path), cwd=SOURCE_DIR, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    record = {"run": {"configs": [ref.config], "set": COMMON_SETS + ref.sets,
                      "exit_status": p.returncode}}
    if p.returncode == 0:
        with open(stats_path) as f:
            stats = json.load(f)
        for k in HOST_META:
            stats.get("meta", {}).pop(k, None)
        record["stats"] = stats
    else:
        record["error"] = p.stderr.strip()
    return record


def dumps(record):
    """The file's text: one key per line, in the order mmusim wrote them (diffs stay readable)."""
    return json.dumps(record, indent=1) + "\n"


def load(path):
    with open(path) as f:
        return json.load(f)


def _flat(record):
    """Record -> {dotted key: value}: stats keys as they are, config.<key>, meta.<key>, run.*"""
    out = {}
    for k, v in record.get("run", {}).items():
        out["run." + k] = v
    if "error" in record:
        out["error"] = record["error"]
    for k, v in record.get("stats", {}).items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        else:
            out[k] = v
    return out


def differences(expected, got):
    """[(key, expected value or None, got value or None)] for every key that differs, in the
    expected record's order, then keys only the new record has."""
    a, b = _flat(expected), _flat(got)
    diffs = []
    for k in a:
        if k not in b:
            diffs.append((k, a[k], None))
        elif a[k] != b[k] or type(a[k]) is not type(b[k]):
            diffs.append((k, a[k], b[k]))
    for k in b:
        if k not in a:
            diffs.append((k, None, b[k]))
    return diffs


def describe(diffs, limit=12):
    def fmt(v):
        return "(absent)" if v is None else json.dumps(v)

    lines = []
    for k, old, new in diffs[:limit]:
        rel = ""
        if isinstance(old, (int, float)) and isinstance(new, (int, float)) and old and \
                not isinstance(old, bool):
            rel = f" ({100.0 * (new - old) / abs(old):+.3g}%)"
        lines.append(f"  {k}: {fmt(old)} -> {fmt(new)}{rel}")
    if len(diffs) > limit:
        lines.append(f"  ... and {len(diffs) - limit} more keys")
    return "\n".join(lines)
