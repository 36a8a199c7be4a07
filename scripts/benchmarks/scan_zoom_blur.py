"""Scan zoom_blur's fast path against the reference code path (imagecorruptions 1.1.2's ``zoom_blur`` through
``vlbench.imageperturb.backend.run_reference``) at every side length and severity, and report mismatches.

zoom_blur works on rows and columns independently (a separable enlargement, then the top-left H x W kept), so
whether a side length can disagree depends only on that side length and the severity's zoom factors. The
default scan therefore covers every side length L in [--min, --max] on both axes at little cost: an L x 32
image (L on the row axis) and a 32 x L image (L on the column axis), all 5 severities; 32 is itself a side
length of the scan. ``--square`` also runs full L x L images (slow: hours over 32..1024; use --step).

Usage: nice -n 19 .venv/bin/python scripts/benchmarks/scan_zoom_blur.py [--min 32] [--max 1024] [--square] [--step 1]
Prints one line per mismatch and a summary; exit status 1 when any mismatch is found.
"""

import argparse
import sys
import time

import numpy as np

from vlbench.imageperturb.backend import run_reference
from vlbench.imageperturb.zoom import zoom_blur


def image(h, w, seed=0):
    return np.random.RandomState(seed + 7919 * h + w).randint(0, 256, (h, w, 3)).astype(np.uint8)


def compare(h, w, severity):
    """(rows that differ, columns that differ, largest difference in grey levels) of fast vs reference."""
    x = image(h, w)
    fast = np.uint8(np.clip(np.asarray(zoom_blur(x, severity), dtype=np.float64), 0, 255))
    ref = run_reference("zoom_blur", x, severity, 0)
    diff = np.abs(fast.astype(np.int16) - ref.astype(np.int16))
    rows, cols = np.nonzero(diff.max(axis=2))
    return sorted(set(rows.tolist())), sorted(set(cols.tolist())), int(diff.max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min", type=int, default=32)
    ap.add_argument("--max", type=int, default=1024)
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--square", action="store_true", help="also compare full L x L images (slow)")
    args = ap.parse_args()
    start = time.perf_counter()
    shapes = []
    for side in range(args.min, args.max + 1, args.step):
        shapes += [(side, 32), (32, side)] + ([(side, side)] if args.square else [])
    checked, bad, per_severity, sides = 0, 0, {s: set() for s in range(1, 6)}, set()
    for h, w in shapes:
        for severity in range(1, 6):
            rows, cols, worst = compare(h, w, severity)
            checked += 1
            if rows:
                bad += 1
                side = h if len(rows) < h else w  # the axis whose edge differs
                per_severity[severity].add(side)
                sides.add(side)
                print(f"MISMATCH {h}x{w} severity {severity}: rows {rows[:4]}{'...' if len(rows) > 4 else ''} "
                      f"columns {cols[:4]}{'...' if len(cols) > 4 else ''}, up to {worst} grey levels", flush=True)
    took = time.perf_counter() - start
    print(f"checked {checked} (shape, severity) pairs over side lengths {args.min}..{args.max} "
          f"(step {args.step}{', square too' if args.square else ''}) in {took:.0f} s: {bad} mismatches")
    print("affected side lengths per severity: " + ", ".join(
        f"{s}: {len(v)}" for s, v in per_severity.items()) + f"; distinct side lengths: {len(sides)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
