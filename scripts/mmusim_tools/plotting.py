"""PNG charts of sweep results and of reproduce's tables (matplotlib, Agg backend).

Importing this module requires matplotlib; scripts/plot checks for it first.
"""

import math
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import experiments as X  # noqa: E402
from .sizes import parse_size  # noqa: E402
from .stats import FOLIO_ORDER, VARIANT_ORDER, order_key  # noqa: E402

FULL_C1_SIZE = 256 << 20


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower() or "chart"


def _num(v):
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def metric_display(key):
    """(label, factor) for a stat key: times of the pass in ms, latencies in ns."""
    if key == "region.time_ns" or key.endswith(".time_ns"):
        return f"{key} [ms]", 1e-6
    if "latency_ns" in key:
        return f"{key} [ns]", 1.0
    return key, 1.0


def grouped_bars(path, title, xlabels, series, ylabel, log=None):
    """series: list of (label, values by x (None: no bar), measured: bool). Writes a PNG."""
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(xlabels) * max(1, len(series)) ** 0.5 + 2), 4.5))
    n = max(1, len(series))
    width = 0.8 / n
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    base_color = {}
    allv = []
    for i, (label, values, measured) in enumerate(series):
        group = label[:-len(" (measured)")] if measured else label
        if group not in base_color:
            base_color[group] = colors[len(base_color) % len(colors)]
        xs, ys = [], []
        for xi, v in enumerate(values):
            if v is not None:
                xs.append(xi - 0.4 + width * (i + 0.5))
                ys.append(v)
                allv.append(v)
        if not xs:
            continue
        kw = dict(color=base_color[group], edgecolor="black", linewidth=0.5)
        if measured:
            kw.update(alpha=0.45, hatch="//")
        ax.bar(xs, ys, width * 0.95, label=label, **kw)
    ax.set_xticks(range(len(xlabels)))
    ax.set_xticklabels([str(x) for x in xlabels], rotation=20 if max(len(str(x)) for x in xlabels) > 8 else 0,
                       ha="right" if max(len(str(x)) for x in xlabels) > 8 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    pos = [v for v in allv if v > 0]
    if log is None:
        log = bool(pos) and min(pos) > 0 and max(pos) / min(pos) > 100
    if log and pos:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- sweep results -------------------------------------------------------------------------

def c1_measured(row, key):
    """The measured C1 value for a sweep row that is a C1 run at full size (fork-reuse,
    seq-byte-clock, 256 MiB, i7-12700kf, baseline or patched), else None."""
    if row.get("config.workload.pattern") != "seq-byte-clock":
        return None
    if row.get("config.workload.name") not in (None, "fork-reuse"):
        return None
    if row.get("config.platform.name") not in (None, "i7-12700kf"):
        return None
    size = row.get("config.workload.size")
    try:
        if size is None or parse_size(size) != FULL_C1_SIZE:
            return None
    except ValueError:
        return None
    folio = row.get("config.workload.folio")
    wp = row.get("config.kernel.wp_reuse")
    if folio not in X.C1_MEASURED or wp not in ("off", "pagetable"):
        return None
    fb, fp, tb, tp = X.C1_MEASURED[folio]
    if key == "faults.total":
        return float(fb if wp == "off" else fp)
    if key == "faults.region":
        return float((fb if wp == "off" else fp) - X.C1_BOOKKEEPING_FAULTS)
    if key == "region.time_ns":
        t = tb if wp == "off" else tp
        return (t[0] + t[1]) / 2.0 * 1e6
    return None


def plot_sweep(rows, out_dir, metrics, x="config.workload.folio", group="config.kernel.wp_reuse",
               log=None, title=None):
    rows = [r for r in rows if r.get("status", "ok") == "ok"]
    if not rows:
        raise ValueError("no finished runs in the input")
    if not any(x in r for r in rows):
        x = "id"
    # Other configuration columns that vary go into the group label.
    cfg_cols = sorted({k for r in rows for k in r if k.startswith("config.")} - {x, group})
    varying = [c for c in cfg_cols if len({str(r.get(c)) for r in rows}) > 1]

    def group_of(r):
        parts = []
        if group in r:
            parts.append(str(r.get(group)))
        parts += [f"{c[7:]}={r.get(c)}" for c in varying]
        return ", ".join(parts) or "all"

    xs = sorted({str(r.get(x)) for r in rows}, key=lambda v: order_key(v, FOLIO_ORDER))
    groups = sorted({group_of(r) for r in rows},
                    key=lambda g: order_key(g.split(",")[0], VARIANT_ORDER) + (g,))
    written = []
    for key in metrics:
        if not any(_num(r.get(key)) is not None for r in rows):
            continue
        label, factor = metric_display(key)
        series = []
        for g in groups:
            sim = [None] * len(xs)
            meas = [None] * len(xs)
            for r in rows:
                if group_of(r) != g:
                    continue
                i = xs.index(str(r.get(x)))
                v = _num(r.get(key))
                if v is not None:
                    sim[i] = v * factor
                m = c1_measured(r, key)
                if m is not None:
                    meas[i] = m * factor
            series.append((g, sim, False))
            if any(v is not None for v in meas):
                series.append((g + " (measured)", meas, True))
        path = os.path.join(out_dir, slug(key) + ".png")
        t = title or f"{key} by {x.replace('config.', '')}"
        grouped_bars(path, t, xs, series, label, log)
        written.append(path)
    return written


# ---- reproduce's CSV -----------------------------------------------------------------------

def plot_reproduce(rows, out_dir, log=None):
    written = []
    exps = []
    for r in rows:
        if r.get("experiment") and r["experiment"] not in exps:
            exps.append(r["experiment"])
    for e in exps:
        er = [r for r in rows if r.get("experiment") == e and r.get("metric")]
        metrics = []
        for r in er:
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
        for m in metrics:
            mr = [r for r in er if r["metric"] == m]
            if not any(_num(r.get("simulated")) is not None for r in mr):
                continue
            cases = []
            variants = []
            for r in mr:
                if r["case"] not in cases:
                    cases.append(r["case"])
                if r["variant"] not in variants:
                    variants.append(r["variant"])
            series = []
            for v in variants:
                sim = [None] * len(cases)
                meas = [None] * len(cases)
                for r in mr:
                    if r["variant"] != v:
                        continue
                    i = cases.index(r["case"])
                    sim[i] = _num(r.get("simulated"))
                    ref = _num(r.get("reference"))
                    meas[i] = ref if ref is not None else _num(r.get("measured"))
                series.append((str(v), sim, False))
                if any(x is not None for x in meas):
                    series.append((f"{v} (measured)", meas, True))
            scaled = any(_num(r.get("reference")) is not None and _num(r.get("measured")) is not None
                         and abs(_num(r["reference"]) - _num(r["measured"])) > 1e-9 * abs(_num(r["measured"]))
                         for r in mr)
            unit = mr[0].get("unit") or ""
            ylabel = f"{m} [{unit}]" if unit else str(m)
            path = os.path.join(out_dir, f"{slug(e)}-{slug(m)}.png")
            title = f"{e}: {m}" + (" (measured scaled to the run's size)" if scaled else "")
            grouped_bars(path, title, cases, series, ylabel, log)
            written.append(path)
    return written
