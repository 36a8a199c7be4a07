"""A comparison record as a Markdown table (printed), and comparison.json / .csv / .md written into a folder."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path

from ..errors import VlbenchError
from ..util.io import FolderLock, atomic_write_bytes
from ..util.markdown import md_escape, md_table
from .engine import ROW_KEYS

FILES = ("comparison.json", "comparison.csv", "comparison.md")


def _num(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}f}"


def _p(x) -> str:
    if x is None:
        return ""
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def separable_cell(row: dict, alpha: float) -> str:
    """The "separable" cell, with a word when it seems to disagree with the interval beside it: separable is the
    test's p-value adjusted over the whole family of comparisons (< alpha), the interval is one comparison's
    paired bootstrap, unadjusted, so an interval that excludes 0 can sit beside "no" (and, with another test, one
    that includes 0 beside "yes"). Issue 44: "no" beside an interval above 0 had no word on the line."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if lo is None or hi is None or any(isinstance(x, float) and math.isnan(x) for x in (lo, hi)):
        return "yes" if row["separable"] else "no"
    excludes_zero = lo > 0 or hi < 0
    adj = row.get("p_adj")
    if not row["separable"] and excludes_zero:
        return (f"no: the CI is this comparison's alone; p adjusted over the family is {_p(adj)} >= {alpha:g}"
                if adj is not None else "no: the CI is this comparison's alone; no adjusted p")
    if row["separable"] and not excludes_zero:
        return f"yes: p adjusted over the family {_p(adj)} < {alpha:g}; the CI (bootstrap, unadjusted) touches 0"
    return "yes" if row["separable"] else "no"


def to_markdown(rec: dict) -> str:
    runs = {r["run_id"]: md_escape(r.get("label") or r["model"]) for r in rec["runs"]}
    level = f"{100 * (1 - rec['alpha']):g}%"  # the interval's level is 1 - alpha, as its p-values' threshold
    head = ["A", "B", "condition", "dir.", "kind", "n", "A", "B", "A - B", f"{level} CI", "p", "p adj.", "separable"]
    rows = []
    for r in rec["rows"]:
        cond = md_escape(r["condition"]) + (f" (family of {len(r['conditions'])})" if "family" in r else "")
        rows.append([runs[r["run_a"]], runs[r["run_b"]], cond, r["direction"], r["kind"],
                     str(r["n_queries"]), _num(r["a"]), _num(r["b"]), _num(r["diff"]),
                     f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]", _p(r["p"]), _p(r["p_adj"]),
                     separable_cell(r, rec["alpha"])])
    test = {"randomization": "paired sign-flip randomization test (two-sided; exact where marked in the JSON, "
                             "else Monte Carlo with the +1 correction)",
            "bootstrap": "paired bootstrap test (two-sided)", "ttest": "paired two-tailed t-test"}[rec["test"]]
    lines = [f"Comparison of {len(rec['runs'])} runs on {rec['dataset']['name']} [{rec['dataset']['hash'][:12]}], "
             f"metric {rec['metric']} (per-query mean; A, B: the runs' means, for 'robustness' rows their change "
             f"against clean)", "", md_table(head, rows), "",
             f"Test: {test}; {rec['n_resamples']} resamples, seed {rec['seed']}; {level} CI: paired percentile "
             f"bootstrap. Correction: {rec['correction']} over the family of {rec['family_size']} comparisons" +
             (f" ({rec['family']})" if rec.get("family") else "") +
             f"; separable = the test's p adjusted over the family < {rec['alpha']} (the CI is each comparison's "
             f"own, unadjusted: it can exclude 0 while the row is not separable, said on the row). "
             f"robustness = per query (A_cond - A_clean) - (B_cond - B_clean); a family's row averages that over its "
             f"conditions per query. See docs/compare.md."]
    if rec.get("conditions") not in (None, "all"):
        lines.append("Per-condition detail: --conditions all (or condition names); fewer rows, a smaller family.")
    lines += [f"Note: {n}" for n in rec["notes"]]
    return "\n".join(lines) + "\n"


def to_csv(rec: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(ROW_KEYS) + ["metric", "test", "correction"])
    for r in rec["rows"]:
        w.writerow(["" if r[k] is None else (f"{r[k]:.6f}" if isinstance(r[k], float) else r[k]) for k in ROW_KEYS] +
                   [rec["metric"], rec["test"], rec["correction"]])
    return buf.getvalue()


def _clean(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def write(rec: dict, out) -> list[Path]:
    """Write a :func:`compare_runs` record as comparison.json, comparison.csv and comparison.md into ``out``.

    The folder is one comparison's: claimed while writing (a second compare writing to it at the same time is
    refused at once) and never written into again once it holds a comparison's files, so two comparisons
    never mix their files."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise VlbenchError(f"--out {out} is a file, not a folder", "pass a folder for the comparison's files")
    try:
        lock = FolderLock(out).acquire()
    except BlockingIOError as exc:
        raise VlbenchError(f"another vlbench compare ({exc}) is writing to {out}",
                           "pass another --out folder") from None
    except OSError as exc:
        raise VlbenchError(f"--out {out} cannot be made ({exc.strerror})", "pass a folder you can write") from None
    try:
        there = [n for n in FILES if os.path.lexists(out / n)]
        if there:
            raise VlbenchError(f"--out {out} already holds a comparison ({', '.join(there)}): comparisons are never "
                               "written over each other", "pass another --out folder (or remove those files first)")
        data = {"comparison.json": json.dumps(_clean(rec), indent=1, allow_nan=False) + "\n",
                "comparison.csv": to_csv(rec), "comparison.md": to_markdown(rec)}
        for name in FILES:
            atomic_write_bytes(out / name, data[name].encode("utf-8"), replace=False)
    finally:
        lock.release()
    return [out / n for n in FILES]
