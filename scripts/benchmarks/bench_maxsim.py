"""Exact MaxSim (multi-vector late interaction) streamed through the scan, beside the one-piece MaxSim, in one run.

Random float32 token vectors (unit rows, as ColQwen2 / ColPali give): ``--images`` documents of
``--image-tokens`` tokens and ``--queries`` caption queries of 1..``--query-tokens`` tokens (ragged), ``--dim``
floats each; caption ``j`` is a positive of image ``j % images``. Measured, each in this process after the
vectors exist:

* **scan**: ``evaluate(MaxSimSource(img, txt), c2i, score_block=--block)``: every metric of both directions, the
  tiles computed unit by unit in the scan's worker threads (metrics/scan/maxsim.py);
* **matrix**: :func:`maxsim_matrix`: the whole images x captions MaxSim matrix at once on the same unit grid (the
  reference the scan equals bit for bit; checked here on every per-query value and every matrix entry read);
* **naive**: one product of ALL image tokens x ALL caption tokens, then the max and the sum (what a one-piece
  einsum does); only when it fits ``--naive-max-gb``, else its size is printed, not run.

Working memory: tracemalloc's peak (NumPy's arrays are traced) while the step runs, the vectors excluded. Printed with
the unit and tile shapes, the threads and the load average.

usage: python scripts/benchmarks/bench_maxsim.py [--images 1000] [--image-tokens 750] [--queries 5000]
       [--query-tokens 20] [--dim 128] [--block 16x65536] [--naive-max-gb 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc


def _tokens(rng, n: int, lo: int, hi: int, dim: int):
    import numpy as np

    from vlbench.metrics.scan.maxsim import TokenVectors

    lengths = rng.integers(lo, hi + 1, size=n)
    flat = rng.standard_normal((int(lengths.sum()), dim), dtype=np.float32)
    flat /= np.linalg.norm(flat, axis=1, keepdims=True)
    return TokenVectors(flat, np.concatenate([[0], np.cumsum(lengths)]))


def _measured(fn):
    """(result, seconds, peak MB of NumPy allocations while ``fn`` ran)."""
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, seconds, peak


def _naive(img, txt):
    import numpy as np

    prod = img.flat @ txt.flat.T  # all image tokens x all caption tokens
    best = np.maximum.reduceat(prod, img.offsets[:-1], axis=0)
    return np.add.reduceat(best, txt.offsets[:-1], axis=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--image-tokens", type=int, default=750)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--query-tokens", type=int, default=20)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--block", default="16x65536", help="--score-block of the scan")
    ap.add_argument("--naive-max-gb", type=float, default=4.0, help="run the naive product only below this size")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)

    import numpy as np

    from vlbench.metrics import compute, tiles
    from vlbench.metrics.ranking import ArraySource
    from vlbench.metrics.scan.maxsim import MaxSimGrid, MaxSimSource, maxsim_matrix, plan_bytes

    rng = np.random.default_rng(0)
    img = _tokens(rng, args.images, args.image_tokens, args.image_tokens, args.dim)
    txt = _tokens(rng, args.queries, 1, args.query_tokens, args.dim)
    c2i = np.arange(args.queries) % args.images
    grid = MaxSimGrid(img, txt)
    out: dict = {"images": args.images, "image_tokens": args.image_tokens, "queries": args.queries,
                 "query_tokens_max": args.query_tokens, "dim": args.dim, "block": args.block,
                 "tile": [grid.ti, grid.tt], "unit": [grid.gd, grid.gq], "unit_mb": grid.unit_bytes() / 2**20,
                 "workers": tiles.WORKERS, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                 "image_vectors_mb": img.nbytes / 2**20, "caption_vectors_mb": txt.nbytes / 2**20,
                 "mb_per_image": 4 * args.image_tokens * args.dim / 2**20,
                 "planned_scan_mb": plan_bytes(args.images, args.image_tokens, args.queries, args.query_tokens,
                                               args.dim)["scan"] / 2**20}
    scan, out["scan_s"], out["scan_peak_mb"] = _measured(
        lambda: compute.evaluate(MaxSimSource(img, txt), c2i, score_block=args.block))
    whole, out["matrix_s"], out["matrix_peak_mb"] = _measured(lambda: maxsim_matrix(img, txt))
    ref = compute.evaluate(ArraySource(whole), c2i)
    out["same_values"] = scan.records() == ref.records() and all(
        np.array_equal(getattr(scan.direction(d), f), getattr(ref.direction(d), f))
        for d in ("t2i", "i2t") for f in ("best_rank", "top"))
    probe = rng.choice(args.images, min(64, args.images), replace=False), np.arange(min(512, args.queries))
    out["same_entries"] = bool(np.array_equal(MaxSimGrid(img, txt).scores(*probe), whole[probe[0]][:, probe[1]]))
    naive_gb = 4 * len(img.flat) * len(txt.flat) / 2**30
    out["naive_product_gb"] = naive_gb
    if naive_gb <= args.naive_max_gb:
        naive, out["naive_s"], out["naive_peak_mb"] = _measured(lambda: _naive(img, txt))
        out["naive_max_abs_diff"] = float(np.abs(naive - whole).max())
    for k, v in out.items():
        print(f"{k:>22}: {v:.3f}" if isinstance(v, float) else f"{k:>22}: {v}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if out["same_values"] and out["same_entries"] else 1


if __name__ == "__main__":
    sys.exit(main())
