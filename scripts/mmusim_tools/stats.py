"""Flattening mmusim's stats JSON into one row (for CSV / JSON Lines / plots)."""

import csv
import json
import math

# Configuration keys every row carries (besides the swept ones): what the plots group by.
ROW_CONFIG_KEYS = ["platform.name", "workload.name", "workload.size", "workload.folio",
                   "workload.pattern", "kernel.wp_reuse", "kernel.fork_copy"]

FOLIO_ORDER = ["4K", "64K", "1M", "2M-pte", "2M-pmd"]
VARIANT_ORDER = ["off", "block16", "pagetable", "pagetable+flush", "baseline", "patched"]


def flatten(stats, config_keys=()):
    """Stats JSON -> flat dict: 'config.<key>' for the config keys asked for (and ROW_CONFIG_KEYS),
    'meta.<key>' for the scalar meta entries, and every numeric stat under its own key."""
    row = {}
    cfg = stats.get("config", {}) if isinstance(stats, dict) else {}
    for k in list(ROW_CONFIG_KEYS) + [k for k in config_keys if k not in ROW_CONFIG_KEYS]:
        if k in cfg:
            row["config." + k] = cfg[k]
    meta = stats.get("meta", {})
    if isinstance(meta, dict):
        for k, v in meta.items():
            if isinstance(v, (str, int, float)):
                row["meta." + k] = v
    for k, v in stats.items():
        if k in ("config", "meta"):
            continue
        if isinstance(v, (int, float)) or v is None:
            row[k] = v
    return row


def union_columns(rows, first=()):
    cols = list(first)
    seen = set(cols)
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    return cols


def fmt_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return repr(v)
    return str(v)


def write_csv(path, rows, first=()):
    cols = union_columns(rows, first)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([fmt_cell(r.get(c)) for c in cols])


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=False) + "\n")


def _number(text):
    if text == "":
        return None
    try:
        v = int(text)
        return v
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_rows(path):
    """Rows from a CSV (numbers converted) or a JSON Lines file."""
    if path.endswith(".jsonl") or path.endswith(".json"):
        rows = []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not JSON: {e}")
        return rows
    with open(path, newline="") as f:
        return [{k: _number(v) for k, v in r.items()} for r in csv.DictReader(f)]


def order_key(value, order):
    """Sort key: the values `order` names first, in its order; then numbers by value (1, 6, 12,
    18, not as text); then the rest as text."""
    s = str(value)
    if s in order:
        return (order.index(s), 0, 0.0, s)
    try:
        return (len(order), 0, float(s), s)
    except ValueError:
        return (len(order), 1, 0.0, s)
