"""The reference experiments of EXPERIMENTS.md as runs of mmusim, with the measured values of the
calibration experiments.

Source of every measured value below: /work/shared/reference/EXPERIMENTS.md ("Reference
experiments", section "Calibration", tables C1, C2 and C5 and the text of C3 and C4), the measurements
published with the kernel patches in shared/reference/patches/. They are copied here verbatim
(C1 times are the medians of the two boots of each kernel, "29.7 / 30.1"; C2 ranges "5,400-5,700"
are kept as ranges). The validation experiments (V3-V11) have no values in the repository: the
script prints the model's predictions only.
"""

import glob
import os

from .runner import SOURCE_DIR

MB = 1 << 20
GB = 1 << 30

EXPERIMENTS_MD = "shared/reference/EXPERIMENTS.md"


class Measured:
    """A measured value as published (text) and the number a simulated value is compared with
    (the mean of two boots, the middle of a range, or the value itself)."""

    def __init__(self, text, ref, derived=None):
        self.text = text
        self.ref = ref
        self.derived = derived  # how it was derived from the published numbers, if it was

    @staticmethod
    def one(v, text=None):
        return Measured(text or f"{v:,}", float(v))

    @staticmethod
    def pair(a, b):
        """Two boots of one kernel: both shown, compared with their mean."""
        return Measured(f"{a} / {b}", (a + b) / 2.0)

    @staticmethod
    def range(a, b):
        return Measured(f"{a:,}\u2013{b:,}", (a + b) / 2.0)

    @staticmethod
    def about(v, text=None):
        return Measured("about " + (text or f"{v:,}"), float(v))


class Metric:
    """A column of a table: `key` is the stat (or per case, see Case.stats), `factor` converts the
    stat's unit to the shown one, `extensive` says the value scales with workload.size."""

    def __init__(self, mid, label, unit="", factor=1.0, extensive=True, digits=0):
        self.transform = None  # stat -> shown value, instead of the factor (V8's rate)
        self.compute = None    # all stats -> shown value (V9's IPC); the case's stat names them
        self.id = mid
        self.label = label
        self.unit = unit
        self.factor = factor
        self.extensive = extensive
        self.digits = digits


class Case:
    """A row: one run (config + settings) and, per metric, the stat key and the measured value."""

    def __init__(self, case, variant, config, sets, stats, measured=None, note=None):
        self.case = case
        self.variant = variant
        self.config = config
        self.sets = list(sets)
        self.stats = stats  # metric id -> stat key
        self.measured = measured or {}  # metric id -> Measured
        self.note = note


class Ratio:
    """A row computed from two cases' values of one metric: numerator / denominator (indices
    into the experiment's cases), shown as metric `metric` (not scaled by --size)."""

    def __init__(self, case, variant, metric, num, den, measured=None):
        self.case = case
        self.variant = variant
        self.metric = metric
        self.num = num
        self.den = den
        self.measured = measured


class Experiment:
    def __init__(self, eid, title, kind, size, metrics, cases, note=None, case_header="case",
                 variant_header="variant", skip=None, ratios=None):
        self.ratios = ratios or []  # Ratio rows, after the cases
        self.id = eid
        self.title = title
        self.kind = kind  # "calibration" | "validation"
        self.size = size  # the experiment's own workload.size in bytes
        self.metrics = metrics
        self.cases = cases
        self.note = note
        self.case_header = case_header
        self.variant_header = variant_header
        self.skip = skip  # a reason the experiment cannot run here (e.g. its config is missing)


def exp_config(name):
    return os.path.join(SOURCE_DIR, "configs", "experiments", name)


FOLIOS_C1 = [("4K", "4K pages"), ("64K", "64K mTHP"), ("1M", "1M mTHP"),
             ("2M-pte", "2M THP, PTE-mapped"), ("2M-pmd", "2M THP, PMD-mapped")]
VARIANTS = [("off", "baseline"), ("pagetable", "patched")]

# C1 (EXPERIMENTS.md, table C1): folio -> (faults baseline, faults patched, time ms baseline
# (boot 1, boot 2), time ms patched (boot 1, boot 2)).
C1_MEASURED = {
    "4K": (65601, 65601, (29.7, 30.1), (30.0, 31.1)),
    "64K": (65601, 4161, (29.4, 29.7), (5.5, 5.6)),
    "1M": (65601, 321, (29.3, 29.8), (3.9, 3.9)),
    "2M-pte": (65601, 193, (29.9, 29.2), (3.8, 3.9)),
    "2M-pmd": (193, 193, (2.5, 2.5), (2.5, 2.6)),
}
# "the 65 faults beyond the region's pages come from the benchmark's own bookkeeping"
C1_BOOKKEEPING_FAULTS = 65

# C2 (EXPERIMENTS.md, table C2 and the sentence below it), median latencies in ns.
C2_REUSE_4K_MAINLINE = 420
C2_REUSE_PATCHED = {"64K": Measured.one(730), "1M": Measured.range(5400, 5700),
                    "2M-pte": Measured.range(10000, 10500)}
C2_ALLOC = {"64K": Measured.one(4600), "1M": Measured.range(63000, 68000),
            "2M-pte": Measured.one(126000)}
C2_COPY = {"64K": Measured.one(1500), "1M": Measured.one(1500), "2M-pte": Measured.one(1500)}

# C3 (EXPERIMENTS.md, text of C3): 64K mTHP, patched. "about 65,400 faults and 29 ms"; with an
# LFENCE after every store "about 4,100 faults and 4 ms".
C3_NOBARRIER = (65400, 29.0)
C3_LFENCE = (4100, 4.0)

# C4 (EXPERIMENTS.md, text of C4): 512 contpte blocks; mainline calls contpte_convert() 512 times,
# the patched kernel none. "Fault counts are the same as in C1": one per page (mainline), one per
# folio (patched).
C4_CONVERT = {"off": 512, "pagetable": 0}

# C5 (EXPERIMENTS.md, table C5, was V1): the memset() pass, ms, two boots each:
# folio -> (baseline (boot 1, boot 2), patched (boot 1, boot 2)).
C5_MEASURED = {
    "4K": ((57.2, 56.5), (56.9, 57.1)),
    "64K": ((56.5, 56.3), (39.0, 38.7)),
    "2M-pte": ((58.6, 56.5), (36.8, 37.7)),
    "2M-pmd": ((37.5, 35.9), (35.9, 36.5)),
}

# C6 (EXPERIMENTS.md, table C6, was V2): 8 threads, random order, ms, two boots each.
C6_MEASURED = {
    "64K": ((6.1, 6.2), (0.9, 1.0)),
    "2M-pte": ((6.0, 6.7), (0.7, 0.7)),
}

ALL_IDS = ["C1", "C2", "C3", "C4", "C5", "C6", "V3", "V4", "V5", "V6", "V7", "V8", "V9", "V10", "V11"]

# V8 replays a recording of Redis (scripts/record-redis); reproduce --v8-recording sets it.
V8_RECORDING = os.environ.get("MMUSIM_V8_RECORDING") or os.path.join(SOURCE_DIR, "build", "v8-recording")

T_FAULTS = Metric("faults", "faults", "", 1.0, True)
T_REGION = Metric("region", "faults in region", "", 1.0, True)
T_SPUR = Metric("spurious", "spurious faults", "", 1.0, True)
T_TIME = Metric("time", "time", "ms", 1e-6, True, 2)
T_RACE = Metric("race", "pte_same races", "", 1.0, True)


def folio_sets(folio, wp):
    return [("workload.folio", folio), ("kernel.wp_reuse", wp)]


def c1():
    cases = []
    for folio, label in FOLIOS_C1:
        fb, fp, tb, tp = C1_MEASURED[folio]
        for wp, var in VARIANTS:
            faults = fb if wp == "off" else fp
            times = tb if wp == "off" else tp
            region = Measured(f"{faults - C1_BOOKKEEPING_FAULTS:,}",
                              float(faults - C1_BOOKKEEPING_FAULTS),
                              derived=f"{faults:,} - {C1_BOOKKEEPING_FAULTS}")
            cases.append(Case(label, var, exp_config("c1-fork-reuse-clock.cfg"),
                              folio_sets(folio, wp),
                              {"faults": "faults.total", "region": "faults.region",
                               "time": "region.time_ns"},
                              {"faults": Measured.one(faults), "region": region,
                               "time": Measured.pair(*times)}))
    return Experiment(
        "C1", "One byte per page, with a clock_gettime() between the stores", "calibration",
        256 * MB,
        [Metric("faults", "faults (whole process)"),
         Metric("region", "faults in region"),
         Metric("time", "time", "ms", 1e-6, True, 2)],
        cases,
        note=("faults = faults.total (whole process), faults in region = faults.region; the "
              "measured region count is derived as the published count minus the 65 faults of "
              "the benchmark's bookkeeping. Times: region.time_ns; measured \"a / b\" are the "
              "medians of two boots, compared with their mean."),
        case_header="folio size")


def c2():
    lat = Metric("latency", "median latency", "ns", 1.0, False)
    cases = [Case("reuse fault, mainline (one 4K PTE)", "4K pages",
                  exp_config("c2-fault-latency-reuse.cfg"), folio_sets("4K", "off"),
                  {"latency": "fault.latency_ns.reuse.median"},
                  {"latency": Measured.one(C2_REUSE_4K_MAINLINE)})]
    names = {"64K": "64K mTHP", "1M": "1M mTHP", "2M-pte": "2M THP, PTE-mapped"}
    for folio in ["64K", "1M", "2M-pte"]:
        cases.append(Case("reuse fault, patched (whole folio)", names[folio],
                          exp_config("c2-fault-latency-reuse.cfg"), folio_sets(folio, "pagetable"),
                          {"latency": "fault.latency_ns.reuse.median"},
                          {"latency": C2_REUSE_PATCHED[folio]}))
    for folio in ["64K", "1M", "2M-pte"]:
        key = "fault.latency_ns.huge_alloc.median" if folio.startswith("2M") else \
            "fault.latency_ns.alloc.median"
        cases.append(Case("fault that allocated the folio", names[folio],
                          exp_config("c2-fault-latency-alloc.cfg"), [("workload.folio", folio)],
                          {"latency": key}, {"latency": C2_ALLOC[folio]}))
    for folio in ["64K", "1M", "2M-pte"]:
        cases.append(Case("COW fault that copies 4K", names[folio],
                          exp_config("c2-fault-latency-copy.cfg"), [("workload.folio", folio)],
                          {"latency": "fault.latency_ns.copy.median"}, {"latency": C2_COPY[folio]}))
    return Experiment(
        "C2", "Latency of single faults (medians, ns)", "calibration", 256 * MB, [lat], cases,
        note=("fault.latency_ns.<kind>.median: reuse, alloc (mTHP) / huge_alloc (2M THP), copy. "
              "Ranges are compared with their middle."),
        case_header="fault", variant_header="folio size")


def c3():
    cases = []
    for cfg, var, (faults, ms) in [("c3-fork-reuse-nobarrier.cfg", "no barrier", C3_NOBARRIER),
                                   ("c3-fork-reuse-lfence.cfg", "LFENCE", C3_LFENCE)]:
        cases.append(Case("64K mTHP, patched", var, exp_config(cfg), [],
                          {"faults": "faults.total", "spurious": "faults.spurious",
                           "time": "region.time_ns"},
                          {"faults": Measured.about(faults), "time": Measured.about(ms, f"{ms:g}")}))
    return Experiment("C3", "The ascending store loop without a barrier, and LFENCE", "calibration",
                      256 * MB, [T_FAULTS, T_SPUR, T_TIME], cases,
                      note="faults.total, faults.spurious (not published: \"most of them\"), "
                           "region.time_ns.", variant_header="loop")


def c4():
    files = sorted(glob.glob(exp_config("c4-*.cfg")))
    preferred = exp_config("c4-contpte-qemu.cfg")
    cfg = preferred if preferred in files else next(
        (f for f in files if "hazard" not in os.path.basename(f)), None)
    metrics = [Metric("convert", "contpte_convert()", "", 1.0, True), T_REGION]
    if cfg is None:
        return Experiment("C4", "arm64 contpte (QEMU, counters only)", "calibration", 32 * MB,
                          metrics, [], skip="no configs/experiments/c4-*.cfg in this tree yet")
    size = 32 * MB
    cases = []
    pages = size // 4096
    for wp, var in VARIANTS:
        faults = pages if wp == "off" else size // (64 * 1024)
        cases.append(Case("64K mTHP, 512 contpte blocks", var, cfg, [("kernel.wp_reuse", wp)],
                          {"convert": "kernel.contpte_convert", "region": "faults.region"},
                          {"convert": Measured.one(C4_CONVERT[wp]),
                           "region": Measured(f"{faults:,}", float(faults),
                                              derived="as C1: one per page / one per folio")}))
    return Experiment("C4", "arm64 contpte (QEMU, counters only)", "calibration", size, metrics,
                      cases, note=(f"config {os.path.relpath(cfg, SOURCE_DIR)}; kernel.contpte_convert "
                                   "and faults.region (expected as C1: one fault per page "
                                   "mainline, one per 64K folio patched)."))


def v_cases(config, rows, variants=VARIANTS, stats=None, extra_sets=()):
    stats = stats or {"faults": "faults.total", "spurious": "faults.spurious",
                      "time": "region.time_ns"}
    cases = []
    for label, sets in rows:
        for wp, var in variants:
            cases.append(Case(label, var, exp_config(config),
                              list(extra_sets) + list(sets) + [("kernel.wp_reuse", wp)], stats))
    return cases


def timed_pairs(config, rows, measured, stats):
    """Cases baseline and patched for each (folio, label) of `rows`, each with its measured time
    (two boots, from `measured`[folio] = (baseline boots, patched boots)), and a Ratio row per
    folio: patched / baseline, against the ratio of the measured means."""
    cases, ratios = [], []
    for folio, label in rows:
        for wp, var in VARIANTS:
            boots = measured[folio][0 if wp == "off" else 1]
            cases.append(Case(label, var, exp_config(config), folio_sets(folio, wp), stats,
                              {"time": Measured.pair(*boots)}))
        b, p = measured[folio]
        ref = (sum(p) / 2.0) / (sum(b) / 2.0)
        ratios.append(Ratio(label, "patched / baseline", "ratio", len(cases) - 1, len(cases) - 2,
                            Measured(f"{ref:.3f}", ref, derived="mean patched / mean baseline")))
    return cases, ratios


T_RATIO = Metric("ratio", "time ratio", "", 1.0, False, 3)


def c5():
    rows = [(f, label) for f, label in FOLIOS_C1 if f in C5_MEASURED]
    cases, ratios = timed_pairs("c5-memset.cfg", rows, C5_MEASURED,
                                {"faults": "faults.total", "spurious": "faults.spurious",
                                 "time": "region.time_ns"})
    return Experiment("C5", "memset() pass (was V1)", "calibration", 256 * MB,
                      [T_FAULTS, T_SPUR, T_TIME, T_RATIO], cases,
                      note=("faults.total, faults.spurious, region.time_ns; the time ratio is "
                            "patched / baseline of the same folio size. Tolerances: times 15%, "
                            "ratios 10%. memory.write_bandwidth is calibrated on the 2M PMD-mapped row."),
                      case_header="folio size", ratios=ratios)


def c6():
    rows = [("64K", "64K mTHP"), ("2M-pte", "2M THP, PTE-mapped")]
    cases, ratios = timed_pairs("c6-threads8-random.cfg", rows, C6_MEASURED,
                                {"faults": "faults.total", "spurious": "faults.spurious",
                                 "race": "kernel.fault_race", "time": "region.time_ns"})
    return Experiment("C6", "8 threads, one byte per page, random order (8 cores; was V2)",
                      "calibration", 256 * MB, [T_FAULTS, T_SPUR, T_RACE, T_TIME, T_RATIO],
                      cases, case_header="folio size", ratios=ratios,
                      note=("faults.total, faults.spurious, kernel.fault_race, region.time_ns. Tolerance: times "
                            "25% (issue #18). platform.idle_exit_latency is calibrated on the patched rows "
                            "(docs/research-idle.md)."))


def v3():
    return Experiment("V3", "Read, then store (64K mTHP)", "validation", 256 * MB,
                      [T_FAULTS, T_SPUR, T_TIME],
                      v_cases("v3-read-then-store.cfg", [("64K mTHP", [])]),
                      case_header="folio size")


def v4():
    stats = {"faults": "faults.total", "spurious": "faults.spurious", "hmf": "kernel.handle_mm_fault",
             "wp": "kernel.do_wp_page", "time": "region.time_ns"}
    cases = []
    for cfg, mode in [("v4-reuse-byte-1g.cfg", "reuse-byte"), ("v4-reuse-memset-1g.cfg", "reuse")]:
        for folio, label in [("64K", "64K"), ("2M-pte", "2M")]:
            cases += v_cases(cfg, [(f"{mode}, {label}", [("workload.folio", folio)])], stats=stats)
    return Experiment("V4", "reuse-byte and reuse modes, 1 GiB", "validation", 1 * GB,
                      [T_FAULTS, T_SPUR, Metric("hmf", "handle_mm_fault()"),
                       Metric("wp", "do_wp_page()"), T_TIME], cases,
                      case_header="mode, folio")


def v5():
    cases = []
    for cfg, var in [("v5-pmd-nobarrier.cfg", "no barrier"), ("v5-pmd-lfence.cfg", "LFENCE")]:
        cases.append(Case("128 PMD-mapped 2M THPs", var, exp_config(cfg), [],
                          {"faults": "faults.total", "spurious": "faults.spurious",
                           "time": "region.time_ns"}))
    return Experiment("V5", "PMD-mapped THP, without and with LFENCE", "validation", 256 * MB,
                      [T_FAULTS, T_SPUR, T_TIME], cases, variant_header="loop")


def v6():
    lat = Metric("latency", "reuse latency (median)", "ns", 1.0, False)
    stats = {"faults": "faults.total", "spurious": "faults.spurious", "time": "region.time_ns",
             "latency": "fault.latency_ns.reuse.median"}
    variants = [("pagetable", "pagetable"), ("pagetable+flush", "pagetable+flush")]
    cases = []
    for cfg, label in [("v6-flush-seq-byte.cfg", "ascending loop"),
                       ("v6-flush-read-then-store.cfg", "read-then-store"),
                       ("v6-flush-memset.cfg", "memset"),
                       ("v6-flush-reuse-latency.cfg", "reuse fault latency (C2)"),
                       ("v6-flush-c1.cfg", "C1 pass")]:
        cases += v_cases(cfg, [(label, [])], variants=variants, stats=stats)
    return Experiment("V6", "Flush experiment (pagetable+flush), 64K mTHP", "validation", 256 * MB,
                      [T_FAULTS, T_SPUR, T_TIME, lat], cases, case_header="loop")


def v7():
    variants = [("block16", "block16"), ("pagetable", "pagetable")]
    cases = []
    for cfg, label in [("v7-block16-seq-1m.cfg", "in order, 1M"),
                       ("v7-block16-seq-2m.cfg", "in order, 2M"),
                       ("v7-block16-random-2m.cfg", "random order, 2M"),
                       ("v7-block16-memset-2m.cfg", "memset, 2M"),
                       ("v7-block16-threads8-random-2m.cfg", "8 threads random, 2M"),
                       ("v7-block16-stride64k-2m.cfg", "one store per 64K, 2M"),
                       ("v7-block16-stride2m-2m.cfg", "one store per 2M, 2M")]:
        cases += v_cases(cfg, [(label, [])], variants=variants)
    return Experiment("V7", "16 PTEs vs the whole folio (block16 vs pagetable)", "validation",
                      256 * MB, [T_FAULTS, T_SPUR, T_TIME], cases, case_header="pass")


def v8():
    """Redis SETs after BGSAVE, replayed from scripts/record-redis's recording (V8_RECORDING), whose
    v8.json says how many SETs the region holds."""
    import json
    rec = os.path.abspath(V8_RECORDING)
    skip, sets_n = None, None
    meta = os.path.join(rec, "v8.json")
    if not os.path.exists(os.path.join(rec, "manifest.txt")) or not os.path.exists(meta):
        skip = (f"V8 needs a recording of Redis with its v8.json: scripts/record-redis --out {rec} "
                f"(full scale: 1.3 M keys, 1 M SETs), then scripts/reproduce --only V8 --v8-recording {rec}")
    else:
        with open(meta) as f:
            m = json.load(f)
        sets_n = m["sets"]
    rate = Metric("rate", "SETs per simulated second", "", extensive=False, digits=0)
    rate.transform = (lambda ns: sets_n * 1e9 / ns if ns else None)
    metrics = [Metric("faults", "faults", "", 1.0, False),
               Metric("time", "CPU time", "ms", 1e-6, False, 1), rate]
    cases = []
    for thp, label in (("always", "64K mTHP"), ("never", "THP off")):
        for wp, variant in VARIANTS:
            cases.append(Case(label, variant, exp_config("v8-redis.cfg"),
                              [("workload.trace", rec), ("thp.hugepages_64kB", thp), ("kernel.wp_reuse", wp)],
                              {"faults": "faults.total", "time": "region.time_ns", "rate": "region.time_ns"}))
    note = ("faults.total (the region's: the server's, the BGSAVE child has exited), region.time_ns, and "
            "the SETs of the region (v8.json) per simulated second of it")
    if sets_n:
        note += f"; {sets_n:,} SETs in this recording"
    return Experiment("V8", "Redis: SETs after BGSAVE (a recording of redis-server)", "validation", 0,
                      metrics, cases, note=note, case_header="THP", skip=skip)


# The mmusim binary reproduce runs (it sets it): V8's companion table records the benchmark with it.
MMUSIM_BINARY = None
FORKBENCH_SIZE = "16M"


def v8_forkbench():
    """Issue #19's check of the replay beside V8: the fork-reuse benchmark as a real C program
    (recorder/tests/forkbench.c) recorded with `mmusim record` and replayed, beside the built-in
    pattern: the same faults, the time within 10% (tests/scripts/test_record_replay.py holds both).
    The recordings are made once into build/reproduce-forkbench/ (they are the program's, not the
    simulator's)."""
    import subprocess
    build = os.path.dirname(os.path.abspath(MMUSIM_BINARY)) if MMUSIM_BINARY else os.path.join(SOURCE_DIR, "build")
    forkbench = os.path.join(build, "recorder", "forkbench")
    tool = os.path.join(build, "recorder", "lib", "mmusimrec-amd64-linux")
    title = "the fork-reuse benchmark recorded as a C program and replayed, beside the built-in pattern"
    metrics = [Metric("faults", "faults in region", "", 1.0, False), Metric("time", "time", "ms", 1e-6, False, 3),
               Metric("ratio", "recorded / built-in", "", 1.0, False, 3)]
    skip = None
    recs = {}
    if not (MMUSIM_BINARY and os.path.exists(forkbench) and os.path.exists(tool)):
        skip = "the recorder is not built (it needs valgrind: scripts/install-deps, then scripts/build)"
    else:
        for pattern in ("seq-byte", "memset"):
            rec = os.path.join(build, "reproduce-forkbench", f"{pattern}-{FORKBENCH_SIZE}")
            if not os.path.exists(os.path.join(rec, "manifest.txt")):
                os.makedirs(os.path.dirname(rec), exist_ok=True)
                r = subprocess.run([MMUSIM_BINARY, "record", "--force", "--out", rec, "--", forkbench,
                                    "--size", FORKBENCH_SIZE, "--pattern", pattern],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    skip = f"mmusim record of forkbench failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
                    break
            recs[pattern] = rec
    cases, ratios = [], []
    default = os.path.join(SOURCE_DIR, "configs", "default.cfg")
    for pattern in ("seq-byte", "memset"):
        for plat in ("i7-12700kf", "functional"):
            if plat == "functional" and pattern == "memset":
                continue
            label = f"{pattern}, {FORKBENCH_SIZE}, 4K pages, {plat}"
            stats = {"faults": "faults.region", "time": "region.time_ns"}
            cases.append(Case(label, "built-in", default,
                              [("platform.name", plat), ("workload.size", FORKBENCH_SIZE), ("workload.folio", "4K"),
                               ("workload.pattern", pattern)], stats))
            cases.append(Case(label, "recorded", default,
                              [("platform.name", plat), ("workload.name", "trace"),
                               ("workload.trace", recs.get(pattern, "")), ("thp.enabled", "never")], stats))
            if plat != "functional":
                ratios.append(Ratio(label, "recorded / built-in", "ratio", len(cases) - 1, len(cases) - 2))
    e = Experiment("V8-replay", "V8's replay checked: " + title, "check", 0, metrics, cases,
                   note="faults.region, region.time_ns (the ratio row: of the time); the patched kernel with 4K "
                        "pages (configs/default.cfg), on the functional platform in program order. Aim (issue "
                        "#19): the same faults, times within 10%",
                   case_header="pass", variant_header="source", skip=skip, ratios=ratios)
    e.fixed_size = True  # (the recording's size is the program's: --size does not apply)
    return e


def v9():
    """vm-scalability anon-cow-seq on the 2-socket Haswell-EP (36 children, scaled: the config says how)."""
    cfg = exp_config("v9-anon-cow-seq.cfg")
    tput = Metric("tput", "throughput", "MB/s", extensive=False, digits=0)

    def throughput(s):
        c, ns = s.get("config", {}), s.get("region.time_ns")
        if not ns or "workload.processes" not in c or "workload.size" not in c:
            return None
        return c["workload.processes"] * c["workload.size"] / (ns * 1e-9) / 1e6
    tput.compute = throughput
    vms = Metric("vms", "vm-scalability throughput", "MB/s", extensive=False, digits=0)

    def summed(s):
        v = s.get("region.process_bytes_per_second")
        return v / 1e6 if v else None
    vms.compute = summed
    ipc = Metric("ipc", "user micro-ops per cycle", "", extensive=False, digits=3)

    def user_ipc(s):
        try:
            user = s["core.cycles"] - s["core.idle_cycles"] - s["kcost.cycles"]
            return s["core.uops"] / user if user > 0 else None
        except KeyError:
            return None
    ipc.compute = user_ipc
    copies = Metric("copies", "huge-page copies", "", extensive=False)
    l2 = Metric("l2", "L2 misses", "", extensive=False)
    hot = Metric("hot", "faulting stores served by the L1D", "", extensive=False)
    remote = Metric("remote", "kernel lines across the socket link", "", extensive=False)
    evicted = Metric("evicted", "LLC lines the kernel's copies evicted", "", extensive=False)
    taken = Metric("taken", "of them, taken from other cores' L1D/L2", "", extensive=False)
    metrics = [vms, tput, ipc, copies, hot, l2, remote, evicted, taken]
    cases = []
    for order in ["sequential", "target-last"]:
        cases.append(Case("the config (2 sockets, 36 children, scaled)", order, cfg,
                          [("kernel.huge_copy_order", order)],
                          {"vms": "region.process_bytes_per_second",
                           "tput": "processes x workload.size / region.time_ns", "ipc": "core.uops / user cycles",
                           "copies": "kernel.huge_pmd_copy", "hot": "core.fault_resume_store.l1d",
                           "l2": "cache.l2.misses", "remote": "memory.remote_lines_kernel",
                           "evicted": "cache.llc.kernel_evictions",
                           "taken": "cache.llc.kernel_back_invalidations_other"}))
    note = ("vm-scalability throughput = region.process_bytes_per_second: the sum over the children of the "
            "bytes usemem reports (area + area/8 with --prealloc) over the child's time from the first fork to its "
            "exit, as lkp-tests sums usemem's per-process KB/s (the measured metric); "
            "throughput = processes x area / region.time_ns (first fork to the last exit); user micro-ops per "
            "cycle = core.uops / (core.cycles - core.idle_cycles - kcost.cycles); kernel lines across the "
            "socket link = memory.remote_lines_kernel (the copies' lines from the other node or socket); "
            "LLC lines the kernel's copies evicted = cache.llc.kernel_evictions (copies, zeroing and struct "
            "pages), of them taken from other cores' L1D/L2 = cache.llc.kernel_back_invalidations_other (the "
            "inclusive LLC's back-invalidations); "
            "scaled: 16 MiB per child (configs/experiments/v9-anon-cow-seq.cfg)")
    return Experiment("V9", "Huge page copy order: anon-cow-seq (2-socket Xeon E5-2699 v3)", "validation",
                      0, metrics, cases, note=note, case_header="run", variant_header="huge_copy_order")


def v10():
    """V10(a): file-backed faults under memcg pressure with mmap/munmap in parallel, 40/60/80
    threads (4 of them mappers), fallback vs retry-once. V10(b): 12 readers faulting a 128 MiB
    anonymous mapping back in from swap under a pressure thread, 0/4/8 mmap writers."""
    cfg = exp_config("v10a-file-faults.cfg")
    cfg_b = exp_config("v10b-swap-readers.cfg")
    tput = Metric("tput", "fault throughput", "faults/s", extensive=False, digits=0)
    rounds = Metric("rounds", "reader rounds per second", "", extensive=False, digits=0)
    cont = Metric("cont", "mmap_lock contended", "", extensive=False)
    fb = Metric("fallback", "faults on mmap_lock", "", extensive=False)
    retry = Metric("retry", "VMA-lock retries", "", extensive=False)
    faults = Metric("faults", "faults", "", extensive=False)
    swapins = Metric("swapins", "swap-ins", "", extensive=False)
    common = {"tput": "region.faults_per_second", "cont": "kernel.lock.mmap_lock.contended",
              "fallback": "kernel.mmap_lock_fallback", "retry": "kernel.vma_lock.retry", "faults": "faults.region"}
    cases = []
    for n in [40, 60, 80]:
        for variant in ["fallback", "retry-once"]:
            cases.append(Case(f"(a) {n} threads", variant, cfg,
                              [("workload.threads", str(n - 4)), ("kernel.fault_retry", variant)], dict(common)))
    for writers in [0, 4, 8]:
        for variant in ["fallback", "retry-once"]:
            cases.append(Case(f"(b) {writers} writers", variant, cfg_b,
                              [("workload.mmap_threads", str(writers)), ("kernel.fault_retry", variant)],
                              dict(common, rounds="region.rounds_per_second", swapins="kernel.pswpin")))
    note = ("(a): workload.threads readers (n - 4) and 4 mapper threads on the 20 logical CPUs of the "
            "whole i7-12700 (8 P-cores with SMT, 4 E-cores), threads unpinned (sched.affinity = all: the "
            "kernel's wake-up placement and new-idle pulls move them), 20 ms of simulated time "
            "(configs/experiments/v10a-file-faults.cfg); fault throughput = region.faults_per_second, "
            "mmap_lock contended = kernel.lock.mmap_lock.contended (acquisitions that waited, the mappers' "
            "included). (b): 12 readers over their shares of a 128 MiB anonymous mapping in a 64 MiB memory "
            "cgroup with swap, a pressure thread and workload.mmap_threads writers, 20 ms "
            "(configs/experiments/v10b-swap-readers.cfg); reader rounds per second = region.rounds_per_second "
            "(a round: one reader's pass over its share), swap-ins = kernel.pswpin")
    return Experiment("V10", "Per-VMA lock retry: file faults under memcg pressure with munmap()",
                      "validation", 0, [tput, rounds, cont, fb, retry, faults, swapins], cases, note=note,
                      case_header="run", variant_header="fault_retry")


def v11():
    t = Metric("time", "fork() time", "ms", 1e-6, True, 3)
    cases = []
    for folio, label in [("4K", "order-0 pages"), ("2M-pte", "2M THP, PTE-mapped")]:
        for copy in ["per-pte", "batched"]:
            cases.append(Case(label, copy, exp_config("v11-fork-time.cfg"),
                              [("workload.folio", folio), ("kernel.fork_copy", copy)],
                              {"time": "region.time_ns"}))
    return Experiment("V11", "fork() time, 1 GiB", "validation", 1 * GB, [t], cases,
                      case_header="folio", variant_header="fork_copy")


BUILDERS = {"C1": c1, "C2": c2, "C3": c3, "C4": c4, "C5": c5, "C6": c6, "V3": v3, "V4": v4, "V5": v5,
            "V6": v6, "V7": v7, "V8": v8, "V9": v9, "V10": v10, "V11": v11}


def experiments(ids=None):
    ids = ids or ALL_IDS
    out = []
    for i in ids:
        out.append(BUILDERS[i]())
        if i == "V8":
            out.append(v8_forkbench())
    return out
