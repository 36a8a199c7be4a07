#!/usr/bin/env python
"""Draw the pairs of the synonym audit: 100 random applied outputs per synonym perturbation,
dataset (coco, flickr30k) and rule (before: the version-1.0 rule ``choice=first``; after: the default).

Writes docs/audit/<dataset>_<perturbation>_<before|after>.jsonl, one
``{"caption_id", "original", "perturbed", "judgment": null, "note": ""}`` per pair; a reviewer fills in
``judgment`` ("kept" / "changed" / "ungrammatical"). Existing judgments of identical pairs are kept, so the
script can be re-run. The sample: applied captions ordered by sha256("audit/<seed>/<perturbation>/<id>"),
first 100. ``--summary`` prints the error rates of the judged files instead (the table in
docs/perturbations.md).

    python scripts/dev/make_synonym_audit.py [--data-dir DIR] [--n 100] [--rules before,after] [--summary]
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
AUDIT = ROOT / "docs" / "audit"
NAMES = ("synonym-noun", "synonym-adjective")
RULES = {"before": {"choice": "first"}, "after": {}}


def draw(data_dir: str, n: int, seed: int = 0, rules=tuple(RULES)) -> None:
    import vlbench.perturbations as P
    from vlbench.datasets.core import load_dataset

    AUDIT.mkdir(parents=True, exist_ok=True)
    for dataset in ("coco", "flickr30k"):
        ds = load_dataset(dataset, data_dir=data_dir, require_images=False)
        for rule, params in ((r, RULES[r]) for r in rules):
            sets = P.perturb_captions(ds.captions, ds.caption_ids, list(NAMES), seed=seed,
                                      params={k: dict(params) for k in NAMES})
            for name, ps in sets.items():
                idx = [i for i, a in enumerate(ps.applicable) if a]
                idx.sort(key=lambda i: hashlib.sha256(f"audit/{seed}/{name}/{ps.caption_ids[i]}".encode()).digest())
                path = AUDIT / f"{dataset}_{name}_{rule}.jsonl"
                old = {}
                if path.exists():
                    for line in path.read_text().splitlines():
                        r = json.loads(line)
                        old[(r["original"], r["perturbed"])] = r
                rows = []
                for i in sorted(idx[:n]):
                    prev = old.get((ds.captions[i], ps.texts[i]), {})
                    rows.append({"caption_id": ps.caption_ids[i], "original": ds.captions[i], "perturbed": ps.texts[i],
                                 "judgment": prev.get("judgment"), "note": prev.get("note", "")})
                path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
                print(f"{path.name}: {len(rows)} pairs of {len(idx)} applied")


def summary() -> None:
    print(f"{'dataset':10s} {'perturbation':18s} {'rule':7s} {'n':>4s} {'kept':>5s} {'changed':>8s} "
          f"{'ungramm.':>8s} {'error rate':>10s}")
    for path in sorted(AUDIT.glob("*.jsonl")):
        dataset, name, rule = path.stem.split("_")
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        c = {k: sum(r["judgment"] == k for r in rows) for k in ("kept", "changed", "ungrammatical")}
        missing = len(rows) - sum(c.values())
        err = (c["changed"] + c["ungrammatical"]) / len(rows) if rows else 0.0
        print(f"{dataset:10s} {name:18s} {rule:7s} {len(rows):4d} {c['kept']:5d} {c['changed']:8d} "
              f"{c['ungrammatical']:8d} {100 * err:9.1f}%" + (f"  ({missing} not judged)" if missing else ""))


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__, dataset=False)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--rules", default="before,after", help="which rules to draw again (default both)")
    args = ap.parse_args()
    if args.summary:
        summary()
    else:
        draw(args.data_dir, args.n, rules=[r for r in args.rules.split(",") if r in RULES])
    return 0


if __name__ == "__main__":
    sys.exit(main())
