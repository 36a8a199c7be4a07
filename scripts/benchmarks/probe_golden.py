#!/usr/bin/env python
"""Write every probe of a caption set (all 11, seed 0) to a JSON-lines file, or check one written before.

    python scripts/benchmarks/probe_golden.py write FILE [--dataset coco] [--parse-cache FILE.pkl]
    python scripts/benchmarks/probe_golden.py check FILE [--dataset coco] [--parse-cache FILE.pkl]

One line per (probe, caption): the probe name, the caption id, the probe's text, applicable, verified and meta
(keys sorted). ``check`` makes the probes again and says whether the output is byte-identical (exit 1 and the
first differing line when not): the guard that a speed change moved no probe. ``--parse-cache`` keeps the spaCy
tagging in a pickle, so repeated checks skip it (the tagging is not what is checked).
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))


def probe_lines(captions, ids, images, parsed=None) -> list[str]:
    """Every probe of every caption, one JSON line each (probe order, then caption order)."""
    from vlbench.perturbations.probes import PROBES, make_probes

    sets = make_probes(captions, ids, images, tuple(PROBES), seed=0, parsed=parsed)
    out = []
    for name, ps in sets.items():
        for cid, text, ok, ver, meta in zip(ps.caption_ids, ps.texts, ps.applicable, ps.verified, ps.meta):
            out.append(json.dumps({"probe": name, "id": cid, "text": text, "applicable": ok, "verified": ver,
                                   "meta": meta}, sort_keys=True, ensure_ascii=False))
    return out


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("mode", choices=("write", "check"))
    ap.add_argument("file")
    ap.add_argument("--parse-cache", default=None)
    args = ap.parse_args()

    from vlbench.datasets.core import load_dataset
    from vlbench.perturbations import engine
    from vlbench.perturbations.base import usable_text

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    captions, ids = list(ds.captions), [str(i) for i in ds.caption_ids]
    images = [str(ds.images[int(i)]) for i in ds.caption_to_image]
    cache = Path(args.parse_cache) if args.parse_cache else None
    if cache is not None and cache.exists():
        parsed = pickle.loads(cache.read_bytes())
    else:
        parsed = engine.parse([c for c in captions if usable_text(c)])
        if cache is not None:
            cache.write_bytes(pickle.dumps(parsed))
    text = "\n".join(probe_lines(captions, ids, images, parsed)) + "\n"
    path = Path(args.file)
    if args.mode == "write":
        path.write_text(text, encoding="utf-8")
        print(f"{args.dataset}: {text.count(chr(10))} probe lines written to {path}")
        return 0
    old = path.read_text(encoding="utf-8")
    if old == text:
        print(f"{args.dataset}: {text.count(chr(10))} probe lines byte-identical to {path}")
        return 0
    for k, (a, b) in enumerate(zip(old.splitlines(), text.splitlines())):
        if a != b:
            print(f"{args.dataset}: line {k + 1} differs\n  was: {a}\n  now: {b}")
            break
    else:
        print(f"{args.dataset}: {old.count(chr(10))} lines before, {text.count(chr(10))} now")
    return 1


if __name__ == "__main__":
    sys.exit(main())
