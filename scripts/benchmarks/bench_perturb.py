#!/usr/bin/env python
"""Time ``perturb_captions`` for the 13 built-in perturbations on the 25,000 MS-COCO 5k test captions.

Run from a fresh process so the timing includes loading spaCy and WordNet:

    python scripts/benchmarks/bench_perturb.py [--dataset coco] [--data-dir /work/shared/data/captions]

Prints the wall time (total, spaCy loading + tagging, WordNet loading, the perturbations themselves) and
the not-applicable rate of each perturbation; ``--json FILE`` also writes them as JSON. Target: under
90 s on 2 CPU cores.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("--perturb", default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--json", metavar="FILE", default=None)
    args = ap.parse_args()

    t0 = time.perf_counter()
    import vlbench.perturbations as P
    from vlbench.datasets.core import load_dataset
    from vlbench.perturbations import engine

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    names = P.resolve(args.perturb)
    t_data = time.perf_counter() - t0

    timings = {"parse": 0.0, "wordnet_load": 0.0}
    real_parse = engine.parse

    def timed_parse(*a, **kw):  # spaCy load + tagging
        t = time.perf_counter()
        try:
            return real_parse(*a, **kw)
        finally:
            timings["parse"] += time.perf_counter() - t

    engine.parse = timed_parse
    from vlbench import lang

    real_wordnet = lang.wordnet

    def timed_wordnet():
        t = time.perf_counter()
        try:
            return real_wordnet()
        finally:
            timings["wordnet_load"] += time.perf_counter() - t

    lang.wordnet = timed_wordnet  # first call loads (~5 s), later calls are cached
    t1, c1 = time.perf_counter(), time.process_time()
    sets = P.perturb_captions(ds.captions, ds.caption_ids, names, seed=args.seed, batch_size=args.batch_size)
    t_run, c_run = time.perf_counter() - t1, time.process_time() - c1
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = None
    engine.parse, lang.wordnet = real_parse, real_wordnet

    report = {
        "dataset": ds.name, "n_captions": ds.n_captions, "perturbations": len(names), "seed": args.seed,
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "load_average_1min": load,
        "seconds": {"load_dataset": round(t_data, 2), "perturb_captions_total": round(t_run, 2),
                    "perturb_captions_cpu": round(c_run, 2),
                    "spacy_load_and_tagging": round(timings["parse"], 2),
                    "wordnet_load": round(timings["wordnet_load"], 2),
                    "perturbations_only": round(t_run - timings["parse"] - timings["wordnet_load"], 2)},
        "not_applicable_rate": {n: ps.not_applicable_rate for n, ps in sets.items()},
        "n_not_applicable": {n: ps.n_not_applicable for n, ps in sets.items()},
    }
    s = report["seconds"]
    print(f"{ds.name}: {ds.n_captions} captions x {len(names)} perturbations on {os.cpu_count()} CPU core(s)")
    print(f"  perturb_captions total      {s['perturb_captions_total']:7.1f} s wall, {s['perturb_captions_cpu']:.1f} s CPU"
          f" (load average {load if load is None else round(load, 1)})")
    print(f"    spaCy load + tagging      {s['spacy_load_and_tagging']:7.1f} s")
    print(f"    WordNet load              {s['wordnet_load']:7.1f} s")
    print(f"    the perturbations         {s['perturbations_only']:7.1f} s")
    print(f"  (dataset loading            {s['load_dataset']:7.1f} s)")
    print(f"{'perturbation':34s} {'n/a':>6s} {'n/a rate':>9s}")
    for n, ps in sets.items():
        print(f"{n:34s} {ps.n_not_applicable:6d} {100 * ps.not_applicable_rate:8.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
