#!/usr/bin/env python
"""Compare a measured granularity table with a published Table 5.1 (cells within a tolerance, and the
"fine-grained above original" orderings).

    cd vlbench/studies/hendriksen2024/scripts
    python table51_check.py --published table51.csv --measured runs/granularity/granularity.csv
    python table51_check.py --published table51.csv --data-dir /work/shared/data/captions  # measure first

Both CSVs have the layout ``vlbench granularity`` writes (granularity.csv): a first column ``feature``
(adjectives, complement_phrases, articles, quantifiers, concept_depth, caption_length,
words_per_caption, concept_diversity) and one column per dataset (coco, coco-fg, flickr30k,
flickr30k-fg). A published cell left empty is skipped. Without --measured the four test sets are
measured under ``--profile paper`` (a few minutes).
"""

from __future__ import annotations

import argparse
import csv
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
PAIRS = (("coco", "coco-fg"), ("flickr30k", "flickr30k-fg"))


def read_table(path) -> dict:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for r in rows:
        feat = r.pop("feature")
        out[feat] = {k: (float(v) if v not in ("", None) else math.nan) for k, v in r.items()}
    return out


def compare(published: dict, measured: dict, tol: float) -> tuple[list, list]:
    cells, orders = [], []
    for feat, cols in published.items():
        for ds, pub in cols.items():
            if math.isnan(pub):
                continue
            got = measured.get(feat, {}).get(ds, math.nan)
            rel = (got - pub) / abs(pub) if pub else math.nan
            cells.append((feat, ds, pub, got, rel, abs(rel) <= tol))
        for orig, fine in PAIRS:
            p0, p1 = cols.get(orig, math.nan), cols.get(fine, math.nan)
            if not (math.isnan(p0) or math.isnan(p1)) and p1 > p0:
                m0, m1 = measured.get(feat, {}).get(orig, math.nan), measured.get(feat, {}).get(fine, math.nan)
                orders.append((feat, f"{fine} > {orig}", m1 > m0))
    return cells, orders


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", required=True, help="the published table (CSV, granularity.csv layout)")
    ap.add_argument("--measured", default=None, help="a granularity.csv; default: measure the four sets now")
    ap.add_argument("--data-dir", default="/work/shared/data/captions")
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative tolerance per cell (default 0.10)")
    a = ap.parse_args()
    measured_csv = a.measured
    if measured_csv is None:
        out = tempfile.mkdtemp(prefix="table51-")
        cmd = [sys.executable, "-m", "vlbench.granularity.cli", "--dataset", "coco", "coco-fg", "flickr30k",
               "flickr30k-fg", "--data-dir", a.data_dir, "--out", out, "--profile", "paper", "--bootstrap", "0",
               "--quiet"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return proc.returncode
        measured_csv = Path(out) / "granularity.csv"
    cells, orders = compare(read_table(a.published), read_table(measured_csv), a.tolerance)
    print("| feature | dataset | published | measured | off % | within |")
    print("|---|---|---:|---:|---:|:-:|")
    for feat, ds, pub, got, rel, ok in cells:
        print(f"| {feat} | {ds} | {pub:.3f} | {got:.3f} | {100 * rel:+.1f} | {'yes' if ok else 'NO'} |")
    print(f"\n{sum(c[-1] for c in cells)} of {len(cells)} cells within {100 * a.tolerance:.0f}%")
    print(f"{sum(o[-1] for o in orders)} of {len(orders)} published 'fine-grained above original' orderings kept"
          + "".join(f"\n  lost: {f} {what}" for f, what, ok in orders if not ok))
    return 0


if __name__ == "__main__":
    sys.exit(main())
