"""How far the deterministic corruptions move a run's numbers between --corrupt-backend reference and torch: the
table "Same pixels, same numbers?" of docs/image_perturbations.md.

    python scripts/benchmarks/corruption_records.py [--images 24] [--severity 3] [--geometry input,original]

A tiny CLIP (random weights, 16-d, 32 px input; tests/support/tiny_models.py, seed 0) on synthetic images with real
captions, the six deterministic corruptions (no random numbers: the same pixels go in under both backends) at one
severity, one run per backend and geometry (CPU, one thread, no loader workers). Prints, per corruption and
geometry, how many of the condition's metric records differ at all between the backends, which metrics, the
largest difference and both RSUMs, as the doc's table rows. tests/integration/test_corruption_backend_records.py
checks the doc's rows against the same function (tests/support/corruption_agreement.py: record_changes).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=24, help="synthetic images in the test set (default 24)")
    ap.add_argument("--severity", type=int, default=3, choices=range(1, 6), help="corruption severity (default 3)")
    ap.add_argument("--geometry", default="input,original", help="--corrupt-at values, comma-separated")
    ap.add_argument("--json", metavar="FILE", help="also write the figures here")
    args = ap.parse_args()

    from support.corruption_agreement import DETERMINISTIC, record_changes

    geometries = [g.strip() for g in args.geometry.split(",") if g.strip()]
    found = {}
    for geometry in geometries:
        with tempfile.TemporaryDirectory() as tmp:
            found[geometry] = record_changes(tmp, n_images=args.images, severity=args.severity, corrupt_at=geometry)
    head = " | ".join(f"records that differ, `--corrupt-at {g}` | RSUM reference / torch" for g in geometries)
    print(f"| corruption (severity {args.severity}) | {head} |")
    print("|---|" + "---:|---:|" * len(geometries))
    for name in DETERMINISTIC:
        cells = []
        for g in geometries:
            r = found[g][name]
            cells += [f"{r['differ']} of {r['records']}", f"{r['rsum_reference']:.2f} / {r['rsum_torch']:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for g in geometries:
        for name, r in found[g].items():
            if r["differ"]:
                print(f"{g} {name}: {', '.join(r['metrics_that_differ'])}; largest difference "
                      f"{r['largest_difference']:.2g}")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
