"""Cost of scoring meaning-changing probes in a run (vlbench/pipeline/sensitivity), on the real COCO 5k test captions
(25,000 captions x 5,000 images) with random unit vectors (dimension 512) in place of a model's: the scoring does
not depend on the model, only on the sizes.

Measures: the pairwise scores of one probe over every caption with its bootstrap (1,000 resamples); the mention
index of the gallery's captions; the denial shares of one negated-query probe (every caption a query, top 1/5/10);
the blind bigram scorer's training and its scores of 2 x 25,000 texts (one probe's originals and probes).

usage: python scripts/benchmarks/bench_probe_scoring.py [--data-dir ../shared/data] [--dim 512]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from vlbench.datasets.captionlm import coco_caption_lm, normalized
from vlbench.pipeline.sensitivity import scores as S


def _timed(label: str, fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    print(f"{label}: {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.environ.get("VLBENCH_SHARED_DATA", "data"))
    ap.add_argument("--dim", type=int, default=512)
    a = ap.parse_args()
    rows = [json.loads(x) for x in (Path(a.data_dir) / "captions" / "coco5k_test.jsonl").read_text().splitlines()]
    caps = [c for r in rows for c in r["captions"]]
    c2i = np.repeat(np.arange(len(rows)), [len(r["captions"]) for r in rows])
    rng = np.random.default_rng(0)
    img = rng.standard_normal((len(rows), a.dim)).astype(np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt = rng.standard_normal((2 * len(caps), a.dim)).astype(np.float32)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    print(f"{len(caps):,} captions, {len(rows):,} images, dimension {a.dim}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    _timed("pairwise (one probe, 1,000 resamples)", lambda: S.pairwise(
        *S.pair_scores(img, txt, c2i, len(caps)), [True] * len(caps), n_boot=1000, seed=0))
    mentions = _timed("mention index", lambda: S.MentionIndex(caps, c2i, len(rows)))
    words = (["dog", "cat", "pizza", "teddy bear", "bus", "giraffe", "umbrella", "horse"] * len(caps))[:len(caps)]
    _timed("denial shares (one probe, K 1/5/10)", lambda: S.denial_shares(
        txt[:len(caps)], img, np.arange(len(rows)), words, mentions, [1, 5, 10]))
    lm, _ = _timed("blind scorer training", lambda: coco_caption_lm(a.data_dir, set(),
                                                                    {normalized(c) for c in caps[:5000]}))
    _timed("blind scores of 50,000 texts", lambda: [lm.score(c) for c in caps + caps])


if __name__ == "__main__":
    main()
