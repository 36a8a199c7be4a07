#!/usr/bin/env python
"""How far the sampled drift (``--validity sample``) is from the drift over every applied caption.

Encodes every applied caption of every perturbation of one test set with all-MiniLM-L6-v2 (so the population
values are known), then draws ``--orders`` random caption orders and applies the sampling rule of
vlbench.perturbations.validity (MIN_SAMPLE, then STEP more until the mean drift's 95 % half width is at most
PRECISION, at most --cap) to each. Prints, per perturbation: the mean sample size, how often the interval
covers the population mean, the 95th percentile of the absolute error of mean/p05/p50/p95, and the same
errors for a fixed sample of --cap captions.

    python scripts/dev/drift_sample_error.py [--dataset flickr30k] [--data-dir DIR] [--cache-dir DIR]

On Flickr30k (5,000 captions) the encoding takes about 5 minutes on 2 cores; --cache-dir keeps the vectors
for a second run. The table in docs/perturbations.md ("The drift sample") comes from this script.
"""

from __future__ import annotations

import sys
from pathlib import Path
import tempfile
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py


def population_drifts(dataset: str, data_dir: str, cache_dir: str) -> dict:
    from vlbench.datasets.core import load_dataset
    from vlbench.perturbations import perturb_captions, resolve
    from vlbench.perturbations.validity import pair_drifts
    from vlbench.perturbations.guard import shared_cache

    ds = load_dataset(dataset, data_dir=data_dir, require_images=False)
    cache = shared_cache()
    cache.configure(cache_dir, disk=True)
    sets = perturb_captions(ds.captions, ds.caption_ids, resolve("all"), seed=0)
    caps, out = list(ds.captions), {}
    for name, ps in sets.items():
        applied = [i for i, a in enumerate(ps.applicable) if a]
        out[name] = pair_drifts([caps[i] for i in applied], [ps.texts[i] for i in applied], cache)
        print(f"  encoded {name}: {len(applied)} applied captions", file=sys.stderr, flush=True)
    return out


def main() -> int:
    import numpy as np

    from _captions import caption_parser
    from vlbench.perturbations.validity import MIN_SAMPLE, PRECISION, sequential_prefix

    ap = caption_parser(__doc__)
    ap.set_defaults(dataset="flickr30k")
    ap.add_argument("--cache-dir", default=None, help="keep the MiniLM vectors here (default: a temporary folder)")
    ap.add_argument("--orders", type=int, default=300)
    ap.add_argument("--cap", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        drifts = population_drifts(args.dataset, args.data_dir, args.cache_dir or tmp)
    rng = np.random.default_rng(0)

    def stats(x):
        return np.array([x.mean(), *np.percentile(x, [5, 50, 95])])

    print(f"{args.dataset}: 95th percentile of |sample - population| over {args.orders} caption orders")
    print(f"{'perturbation':34s} {'N':>6s} {'sd':>6s} {'n':>6s} {'cover':>6s} | {'mean':>6s} {'p05':>6s} {'p50':>6s} "
          f"{'p95':>6s} | fixed {args.cap}: {'mean':>6s} {'p95':>6s}")
    for name, x in drifts.items():
        N = len(x)
        if N < 2 * MIN_SAMPLE:
            print(f"{name:34s} {N:6d} {x.std():6.3f}  (fewer than 1,000 applied captions: not sampled much)")
            continue
        pop, sizes, cover, err, err_fixed = stats(x), [], [], [], []
        for _ in range(args.orders):
            perm = rng.permutation(x)
            n, _, half = sequential_prefix(lambda k: perm[:k], min(args.cap, N), N, PRECISION)
            s = stats(perm[:n])
            sizes.append(n)
            cover.append(abs(s[0] - pop[0]) <= half)
            err.append(np.abs(s - pop))
            err_fixed.append(np.abs(stats(perm[:args.cap]) - pop))
        e, f = np.percentile(err, 95, axis=0), np.percentile(err_fixed, 95, axis=0)
        print(f"{name:34s} {N:6d} {x.std():6.3f} {np.mean(sizes):6.0f} {100 * np.mean(cover):5.0f}% | "
              + " ".join(f"{v:6.4f}" for v in e) + f" | {'':>{6 + len(str(args.cap))}s}{f[0]:6.4f} {f[3]:6.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
