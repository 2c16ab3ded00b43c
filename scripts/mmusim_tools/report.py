"""reproduce's tables: simulated beside measured, deviation in %, as Markdown or CSV."""

import csv
import io
import math

# simulated and measured are in the shown unit; reference is what the deviation compares with
# (the measured value, scaled by size / experiment size for counts and times with --size).
CSV_COLUMNS = ["experiment", "kind", "case", "variant", "metric", "stat", "unit", "simulated",
               "measured", "measured_text", "reference", "deviation_pct", "status", "note"]


def deviation_pct(simulated, reference):
    """100 * (simulated - reference) / reference; None when it is undefined (no reference, a
    reference of 0, or no simulated value)."""
    if simulated is None or reference is None:
        return None
    if reference == 0:
        return None
    return 100.0 * (simulated - reference) / reference


class CaseOutcome:
    """What became of a case's run: stats (a dict), or status 'error' / 'unsupported' with a
    message."""

    def __init__(self, stats=None, status="ok", message=""):
        self.stats = stats
        self.status = status
        self.message = message


def evaluate(exp, outcomes, size=None):
    """Rows (dicts, CSV_COLUMNS) for the experiment's cases. outcomes[i] is the CaseOutcome of
    exp.cases[i]. With `size` (bytes) other than the experiment's own, the measured values of
    extensive metrics are scaled by size / experiment size before the deviation is computed."""
    scale = (size / exp.size) if size else 1.0
    rows = []
    for case, out in zip(exp.cases, outcomes):
        for m in exp.metrics:
            stat = case.stats.get(m.id)
            if stat is None:
                continue
            meas = case.measured.get(m.id)
            sim = None
            status = out.status
            note = out.message
            if out.status == "ok" and getattr(m, "compute", None):
                # A value of several stats (V9's user-mode micro-ops per cycle).
                sim = m.compute(out.stats)
                if sim is None:
                    status = "missing"
                    note = f"a stat of '{stat}' is not in the output"
            elif out.status == "ok":
                v = out.stats.get(stat)
                if isinstance(v, (int, float)):
                    sim = m.transform(v) if getattr(m, "transform", None) else v * m.factor
                else:
                    status = "missing"
                    note = f"no stat '{stat}' in the output"
            ref = None
            if meas is not None:
                ref = meas.ref * (scale if m.extensive else 1.0)
                if meas.derived:
                    note = (note + "; " if note else "") + f"measured derived: {meas.derived}"
            if case.note:
                note = (note + "; " if note else "") + case.note
            rows.append({
                "experiment": exp.id, "kind": exp.kind, "case": case.case,
                "variant": case.variant, "metric": m.label, "stat": stat, "unit": m.unit,
                "simulated": sim, "measured": meas.ref if meas else None,
                "measured_text": meas.text if meas else "", "reference": ref,
                "deviation_pct": deviation_pct(sim, ref), "status": status, "note": note,
                "_digits": m.digits, "_metric_id": m.id,
            })
    for ra in getattr(exp, "ratios", []):
        m = next(mm for mm in exp.metrics if mm.id == ra.metric)
        num, den = outcomes[ra.num], outcomes[ra.den]
        stat = exp.cases[ra.num].stats.get("time")
        sim, status, note = None, "ok", ""
        if num.status != "ok" or den.status != "ok":
            status = num.status if num.status != "ok" else den.status
            note = num.message or den.message
        else:
            a, b = num.stats.get(stat), den.stats.get(stat)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
                sim = a / b
            else:
                status, note = "missing", f"no stat '{stat}' in the output"
        meas = ra.measured
        rows.append({
            "experiment": exp.id, "kind": exp.kind, "case": ra.case, "variant": ra.variant,
            "metric": m.label, "stat": f"{stat} ratio", "unit": m.unit, "simulated": sim,
            "measured": meas.ref if meas else None, "measured_text": meas.text if meas else "",
            "reference": meas.ref if meas else None,
            "deviation_pct": deviation_pct(sim, meas.ref if meas else None), "status": status,
            "note": (note + "; " if note else "") + (f"measured derived: {meas.derived}"
                                                     if meas and meas.derived else ""),
            "_digits": m.digits, "_metric_id": m.id,
        })
    return rows


def fmt_value(v, digits=0):
    if v is None:
        return "\u2014"
    if isinstance(v, float) and math.isnan(v):
        return "\u2014"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def fmt_dev(d):
    if d is None:
        return "\u2014"
    return f"{d:+.1f}%"


def _md_escape(s):
    return str(s).replace("|", "\\|")


def markdown_table(exp, rows):
    """One Markdown table: a row per case (case, variant), per metric the simulated value and,
    for calibration experiments, the measured value and the deviation."""
    calib = exp.kind == "calibration"
    metrics = [m for m in exp.metrics if any(r["_metric_id"] == m.id for r in rows)]
    head = [exp.case_header, exp.variant_header]
    align = ["---", "---"]
    for m in metrics:
        unit = f" {m.unit}" if m.unit else ""
        if calib:
            head += [f"{m.label}{unit} sim", "measured", "dev."]
            align += ["--:", "--:", "--:"]
        else:
            head += [f"{m.label}{unit}"]
            align += ["--:"]
    lines = ["| " + " | ".join(_md_escape(h) for h in head) + " |",
             "|" + "|".join(align) + "|"]
    by_case = {}
    order = []
    for r in rows:
        k = (r["case"], r["variant"])
        if k not in by_case:
            by_case[k] = {}
            order.append(k)
        by_case[k][r["_metric_id"]] = r
    for k in order:
        cells = [_md_escape(k[0]), _md_escape(k[1])]
        for m in metrics:
            r = by_case[k].get(m.id)
            if r is None:
                cells += ["", "", ""] if calib else [""]
                continue
            if r["status"] != "ok":
                sim = "n/a (" + r["status"] + ")"
            else:
                sim = fmt_value(r["simulated"], r["_digits"])
            if calib:
                cells += [sim, _md_escape(r["measured_text"]) or "\u2014",
                          fmt_dev(r["deviation_pct"])]
            else:
                cells += [sim]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(experiments, rows_by_exp, header_notes=()):
    out = ["# mmusim: the reference experiments of EXPERIMENTS.md", ""]
    for n in header_notes:
        out.append(f"> {n}")
    if header_notes:
        out.append("")
    for exp in experiments:
        kind = {"calibration": "calibration: simulated, measured, deviation",
                "check": "a check of the simulator itself: two ways of running the same program"}.get(
            exp.kind, "validation: the model's prediction (the measured values are withheld)")
        out.append(f"## {exp.id}. {exp.title}")
        out.append("")
        out.append(f"*{kind}*")
        out.append("")
        if exp.skip:
            out.append(f"Skipped: {exp.skip}.")
            out.append("")
            continue
        rows = rows_by_exp.get(exp.id, [])
        out.append(markdown_table(exp, rows))
        out.append("")
        if exp.note:
            out.append(exp.note)
            out.append("")
        problems = []
        seen = set()
        for r in rows:
            if r["status"] != "ok" and (r["case"], r["variant"]) not in seen:
                seen.add((r["case"], r["variant"]))
                problems.append(f"- {r['case']} / {r['variant']}: {r['status']}: {r['note']}")
        if problems:
            out += problems
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def csv_text(experiments, rows_by_exp):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for exp in experiments:
        if exp.skip:
            row = {"experiment": exp.id, "kind": exp.kind, "status": "skipped", "note": exp.skip}
            w.writerow([row.get(c, "") for c in CSV_COLUMNS])
            continue
        for r in rows_by_exp.get(exp.id, []):
            vals = []
            for c in CSV_COLUMNS:
                v = r.get(c)
                if v is None:
                    vals.append("")
                elif isinstance(v, float):
                    vals.append(f"{v:.6g}" if c == "deviation_pct" else repr(round(v, 6)))
                else:
                    vals.append(str(v))
            w.writerow(vals)
    return buf.getvalue()
