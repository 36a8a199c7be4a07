#!/usr/bin/env python
"""Choose the semantic guard's threshold from data; the reasoning is in docs/perturbations.md.

On the 25,000 MS-COCO 5k test captions, computes the all-MiniLM-L6-v2 cosine between the original and
(1) the version-1.0 outputs (``choice=first``) that the automatic checks flag (capitalised name, new
repeat, inflection, number/degree change, a/an error) or that are replacements the first review of the synonym perturbations named: known
bad substitutions; (2) the version-2.0 outputs without guard (``guard=off``). Prints percentiles of both
and, for each candidate threshold, the share of known-bad pairs rejected and of 2.0 outputs rejected.

    python scripts/dev/guard_threshold.py [--dataset coco] [--data-dir DIR] [--json FILE]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("--json", metavar="FILE", default=None)
    args = ap.parse_args()
    import numpy as np

    import vlbench.perturbations as P
    from vlbench.datasets.core import load_dataset
    from vlbench.perturbations.guard import shared_cache
    from vlbench.perturbations.synonym_audit import classify

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    names = {"synonym-noun": "noun", "synonym-adjective": "adjective"}
    old = P.perturb_captions(ds.captions, ds.caption_ids, list(names), params={n: {"choice": "first"} for n in names})
    new = P.perturb_captions(ds.captions, ds.caption_ids, list(names), params={n: {"guard": "off"} for n in names})
    bad, good = [], []
    for n, kind in names.items():
        for o, t, ok in zip(ds.captions, old[n].texts, old[n].applicable):
            if ok and any(classify(o, t, kind).values()):
                bad.append((o, t))
        good += [(o, t) for o, t, ok in zip(ds.captions, new[n].texts, new[n].applicable) if ok]
    cache = shared_cache()
    cache.ensure([x for pair in bad + good for x in pair])
    cb = np.array([cache.cosine(o, t) for o, t in bad])
    cg = np.array([cache.cosine(o, t) for o, t in good])
    q = [1, 5, 10, 25, 50]
    print(f"known-bad 1.0 pairs: n={cb.size}, cosine percentiles {q}: {np.round(np.percentile(cb, q), 3).tolist()}")
    print(f"2.0 unguarded outputs: n={cg.size}, cosine percentiles {q}: {np.round(np.percentile(cg, q), 3).tolist()}")
    rows = []
    print(f"{'threshold':>9s} {'bad rejected':>13s} {'2.0 rejected':>13s}")
    for t in np.arange(0.70, 0.951, 0.025):
        rb, rg = float((cb < t).mean()), float((cg < t).mean())
        rows.append({"threshold": round(float(t), 3), "bad_rejected": rb, "new_rejected": rg})
        print(f"{t:9.3f} {100 * rb:12.1f}% {100 * rg:12.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"n_bad": int(cb.size), "n_new": int(cg.size), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
