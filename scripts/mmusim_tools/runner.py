"""Running mmusim: finding the binary, one run as a RunSpec, a parallel pool, run ids.

A RunSpec is a list of config files (layered, as `mmusim run A B` does) and a list of --set
assignments. Its id is readable (config stem and settings) and unique (a hash of the canonical
form), so that a sweep can store each run's stats under runs/<id>.json and skip it next time.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIR = os.path.dirname(SCRIPTS_DIR)


class ToolError(Exception):
    """A user error of a script: printed without a traceback, exit status 2."""


def cpu_count():
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def find_mmusim(explicit=None):
    """The mmusim binary: --mmusim PATH, else $MMUSIM_BINARY, else build/mmusim of the tree, else
    the newest build*/mmusim of the tree, else `mmusim` on PATH."""
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ToolError(f"--mmusim {explicit}: not an executable file")
        return os.path.abspath(explicit)
    env = os.environ.get("MMUSIM_BINARY")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise ToolError(f"MMUSIM_BINARY={env}: not an executable file")
        return os.path.abspath(env)
    default = os.path.join(SOURCE_DIR, "build", "mmusim")
    if os.path.isfile(default) and os.access(default, os.X_OK):
        return default
    found = []
    try:
        for d in os.listdir(SOURCE_DIR):
            p = os.path.join(SOURCE_DIR, d, "mmusim")
            if d.startswith("build") and os.path.isfile(p) and os.access(p, os.X_OK):
                found.append((os.path.getmtime(p), p))
    except OSError:
        pass
    if found:
        return max(found)[1]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, "mmusim")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise ToolError("cannot find the mmusim binary: build it (scripts/build), or pass --mmusim PATH "
                    "or set MMUSIM_BINARY")


def config_path(name):
    """A config given as a path (relative to the working directory) or relative to the source tree
    (configs/experiments/c1-fork-reuse-clock.cfg works from anywhere)."""
    if os.path.isfile(name):
        return os.path.abspath(name)
    alt = os.path.join(SOURCE_DIR, name)
    if os.path.isfile(alt):
        return alt
    alt = os.path.join(SOURCE_DIR, "configs", "experiments", name)
    if os.path.isfile(alt):
        return alt
    raise ToolError(f"config file '{name}' not found")


def canonical_config(path):
    """The config's name in ids and tables: relative to the source tree when inside it."""
    real = os.path.realpath(path)
    src = os.path.realpath(SOURCE_DIR)
    if real.startswith(src + os.sep):
        return os.path.relpath(real, src)
    return real


def parse_assignment(text, what="--set"):
    if "=" not in text:
        raise ToolError(f"{what} '{text}': expected SECTION.KEY=VALUE")
    key, value = text.split("=", 1)
    key, value = key.strip(), value.strip()
    if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", key):
        raise ToolError(f"{what} '{text}': the key must be SECTION.KEY (lowercase, dotted)")
    return key, value


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


class RunSpec:
    """One mmusim run: configs (layered) and ordered --set assignments."""

    def __init__(self, configs, sets, label=None):
        self.configs = [os.path.abspath(c) for c in configs]
        self.sets = list(sets)  # [(key, value)], later wins
        self.label = label

    def settings(self):
        d = {}
        for k, v in self.sets:
            d[k] = v
        return d

    def canonical(self):
        return {"configs": [canonical_config(c) for c in self.configs],
                "sets": sorted(self.settings().items())}

    def run_id(self, varying=None):
        """<config stems>--<k=v>...--<hash8>. `varying` (keys) limits the readable part to the keys
        that differ between the runs of a sweep; the hash always covers everything."""
        canon = self.canonical()
        digest = hashlib.sha1(json.dumps(canon, sort_keys=True).encode()).hexdigest()[:8]
        stems = "+".join(os.path.splitext(os.path.basename(c))[0] for c in self.configs)
        parts = [stems]
        for k, v in sorted(self.settings().items()):
            if varying is None or k in varying:
                parts.append(f"{k}={v}")
        readable = _ID_UNSAFE.sub("_", "--".join(parts))
        if len(readable) > 150:
            readable = readable[:150]
        return f"{readable}--{digest}"

    def command(self, mmusim, stats_path=None, extra=()):
        cmd = [mmusim, "run"] + list(self.configs)
        for k, v in self.sets:
            cmd += ["--set", f"{k}={v}"]
        if stats_path:
            cmd += ["--stats", stats_path]
        cmd += ["--quiet"]
        cmd += list(extra)
        return cmd


def shell_join(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


class RunResult:
    def __init__(self, spec, ok, stats=None, returncode=0, stderr="", command=None, cached=False):
        self.spec = spec
        self.ok = ok
        self.stats = stats
        self.returncode = returncode
        self.stderr = stderr
        self.command = command
        self.cached = cached

    def error_text(self):
        return (f"command: {shell_join(self.command or [])}\n"
                f"exit status {self.returncode}\n{self.stderr.rstrip()}")


def load_stats(path):
    with open(path) as f:
        return json.load(f)


def run_one(spec, mmusim, stats_path=None, timeout=None):
    """Runs mmusim for `spec`. With stats_path, the stats are written there (atomically: a run
    that fails leaves no file). Returns a RunResult."""
    tmpdir = None
    if stats_path is None:
        tmpdir = tempfile.TemporaryDirectory(prefix="mmusim-run-")
        target = os.path.join(tmpdir.name, "stats.json")
    else:
        target = stats_path
    tmp = target + ".tmp"
    cmd = spec.command(mmusim, tmp)
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            if os.path.exists(tmp):
                os.unlink(tmp)
            return RunResult(spec, False, returncode=p.returncode, stderr=p.stderr,
                             command=spec.command(mmusim, target))
        os.replace(tmp, target)
        try:
            stats = load_stats(target)
        except (OSError, ValueError) as e:
            return RunResult(spec, False, returncode=0, stderr=f"unreadable stats {target}: {e}",
                             command=spec.command(mmusim, target))
        return RunResult(spec, True, stats=stats, stderr=p.stderr,
                         command=spec.command(mmusim, target))
    except subprocess.TimeoutExpired:
        return RunResult(spec, False, returncode=-1, stderr=f"timed out after {timeout} s",
                         command=spec.command(mmusim, target))
    except OSError as e:
        return RunResult(spec, False, returncode=-1, stderr=str(e), command=cmd)
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()


def run_many(specs, mmusim, jobs, stats_path_of=None, on_done=None):
    """Runs the specs `jobs` at a time. stats_path_of(spec) -> path or None. on_done(result) is
    called as runs finish (in the calling thread). Returns the results in the order of specs."""
    results = [None] * len(specs)
    jobs = max(1, int(jobs))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(run_one, s, mmusim, stats_path_of(s) if stats_path_of else None): i
                for i, s in enumerate(specs)}
        for fut in concurrent.futures.as_completed(futs):
            i = futs[fut]
            results[i] = fut.result()
            if on_done:
                on_done(results[i])
    return results


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)
