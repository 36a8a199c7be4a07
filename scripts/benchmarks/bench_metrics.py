"""Benchmark of the metric code on a COCO-5k-sized problem (5,000 images x 25,000 captions).

Prints wall time and peak memory (VmHWM of a fresh process) for all metrics, both directions:
  (1) vlbench.score on a precomputed 5,000 x 25,000 float32 similarity matrix (500 MB itself);
  (2) the runner's path: blocks computed from embeddings, the matrix never materialized;
  (3) a 31,244-image gallery (MS-COCO-FG enlarged pool size) x 25,000 captions from embeddings.
The similarities are realistic: each caption embedding is its image's embedding plus noise, so the
positives rank near the top as with a real model (and many fall outside the top 10).

usage: python scripts/benchmarks/bench_metrics.py [--dim 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _status_mb(field: str) -> float:
    from _memory import status_mb  # scripts/benchmarks/_memory.py (the scripts' folder is on the path when run)

    return status_mb(field)


def _hwm_mb() -> float:
    return _status_mb("VmHWM")


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _embeddings(n_images, n_captions_per, dim, n_gallery=None, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    n_gallery = n_gallery or n_images
    img = rng.standard_normal((n_gallery, dim), dtype=np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    c2i = np.repeat(np.arange(n_images), n_captions_per)
    txt = img[c2i] + 6.0 * rng.standard_normal((len(c2i), dim), dtype=np.float32) / np.sqrt(dim)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img, txt, c2i


def child(mode: str, dim: int, repeat: int) -> dict:
    import numpy as np

    from vlbench.metrics import compute as M

    if mode == "matrix":
        img, txt, c2i = _embeddings(5000, 5, dim)
        sim = np.empty((len(img), len(txt)), dtype=np.float32)
        for r in range(0, len(img), 250):  # fill in row blocks: no full-size temporaries
            np.matmul(img[r:r + 250], txt.T, out=sim[r:r + 250])
        del img, txt
        import torch  # noqa: F401  (the ranking uses torch.topk; count its import in the baseline too)
        base = _rss_mb()
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            out = M.score(sim, c2i)
            times.append(time.perf_counter() - t)
    else:
        n_gallery = 31244 if mode == "pool" else 5000
        img, txt, c2i = _embeddings(5000, 5, dim, n_gallery=n_gallery)
        import torch  # noqa: F401
        base = _rss_mb()
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            out = M.evaluate(M.EmbeddingSource(img, txt), c2i).as_dict()
            times.append(time.perf_counter() - t)
    return {"mode": mode, "best_s": min(times), "times_s": times, "rss_before_mb": base, "peak_mb": _hwm_mb(),
            "rsum": out["rsum"], "t2i_recall@1": out["t2i_recall@1"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.dim, a.repeat)))
        return
    print(f"cpu cores: {os.cpu_count()}  python: {sys.version.split()[0]}")
    labels = {"matrix": "score() on a 5,000 x 25,000 matrix", "embeddings": "evaluate() from embeddings 5k x 25k",
              "pool": "evaluate() 31,244-image gallery x 25,000"}
    for mode in ("matrix", "embeddings", "pool"):
        r = json.loads(subprocess.check_output([sys.executable, __file__, "--child", mode, "--dim", str(a.dim),
                                                "--repeat", str(a.repeat)]))
        print(f"{labels[mode]:<42} best {r['best_s']:.2f} s  (runs {', '.join(f'{t:.2f}' for t in r['times_s'])})  "
              f"peak {r['peak_mb']:.0f} MB (process, {r['rss_before_mb']:.0f} MB before metrics; "
              f"+{r['peak_mb'] - r['rss_before_mb']:.0f} MB)  rsum {r['rsum']:.1f}")


if __name__ == "__main__":
    main()
