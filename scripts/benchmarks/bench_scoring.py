"""Scoring a large gallery in blocks (``--score-block``): peak memory and time.

25,000 caption queries (5 per image of the first 5,000 images) against a gallery of 1,000,000 random
64-d unit vectors (the captions are random unit vectors too), all metrics of both directions, scored with
``evaluate(..., score_block=ROWSxCOLS)`` in a fresh process. Memory: the process's peak resident size
(VmHWM, reset once the embeddings exist) minus its resident size then (VmRSS), against the bound's bytes
(rows x cols x 4). With a 1,000,000-image gallery the one-piece pass's query blocks hold 8 captions, so
16x65536 (4 MiB) scores 8 captions x 131,072 images at a time (metrics/sharded.py, shard_width). The
source's duplicate search (EmbeddingSource, before any scoring) is measured apart. ``--one-piece`` also
times the default pass (query blocks of 32 MiB of whole rows) and checks that both give the same values.

usage: python scripts/benchmarks/bench_scoring.py [--queries 25000] [--gallery 1000000] [--dim 64] [--block 16x65536]
       [--one-piece] [--bare] [--json out.json]
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


def _reset_peak() -> float:
    """Reset VmHWM to the current resident size (Linux >= 4.0) and return that size in MB."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status_mb("VmRSS")


def child(args) -> dict:
    import numpy as np
    import torch  # noqa: F401  -- loaded as in a run (the ranking head uses torch.topk when it is)

    from vlbench.metrics.compute import EmbeddingSource, evaluate

    rng = np.random.default_rng(0)
    img = rng.standard_normal((args.gallery, args.dim), dtype=np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    c2i = np.repeat(np.arange(args.queries // 5), 5)
    if args.mode == "bare":  # the yardstick: a plain torch product + top-10 in query blocks of 256, no metric
        import torch

        base = _reset_peak()
        t0 = time.perf_counter()
        g = torch.from_numpy(img)
        for q0 in range(0, len(txt), 256):
            torch.topk(torch.from_numpy(txt[q0:q0 + 256]) @ g.T, 10, dim=1)
        wall = time.perf_counter() - t0
        return {"mode": "bare", "seconds": round(wall, 1), "source_seconds": 0.0, "source_mb": 0,
                "rss_before_mb": round(base), "peak_mb": round(_status_mb("VmHWM")),
                "working_mb": round(_status_mb("VmHWM") - base)}
    base = _reset_peak()
    t0 = time.perf_counter()
    src = EmbeddingSource(img, txt)  # finds bit-identical duplicate vectors (np.unique over the rows)
    t_src, src_mb = time.perf_counter() - t0, _status_mb("VmHWM") - base
    base = _reset_peak()
    t0 = time.perf_counter()
    ev = evaluate(src, c2i, score_block=None if args.mode == "one-piece" else args.block)
    wall = time.perf_counter() - t0
    out = {"mode": args.mode, "seconds": round(wall, 1), "source_seconds": round(t_src, 1),
           "source_mb": round(src_mb), "rss_before_mb": round(base), "peak_mb": round(_status_mb("VmHWM")),
           "t2i_recall@10": ev.as_dict()["t2i_recall@10"], "t2i_meanr": ev.as_dict()["t2i_meanr"]}
    out["working_mb"] = out["peak_mb"] - out["rss_before_mb"]
    if args.save:
        np.savez(args.save, **{f"{d}/{k}": np.asarray(v) for d in ("i2t", "t2i") for k, v in ev.per_query(d).items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=25_000)
    ap.add_argument("--gallery", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--block", default="16x65536")
    ap.add_argument("--one-piece", action="store_true", help="also time the default pass and compare the values")
    ap.add_argument("--bare", action="store_true", help="also time a bare torch product + top-10 in query blocks of "
                    "256 over the same vectors (no metric): the yardstick, and vlbench's ratio to it")
    ap.add_argument("--json")
    ap.add_argument("--mode", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(child(args)))
        return
    import numpy as np

    from vlbench.metrics.sharded import parse_score_block

    block = parse_score_block(args.block)
    rows = []
    modes = ("blocks",) + (("one-piece",) if args.one_piece else ()) + (("bare",) if args.bare else ())
    for mode in modes:
        cmd = [sys.executable, __file__, "--mode", mode, "--queries", str(args.queries), "--gallery",
               str(args.gallery), "--dim", str(args.dim), "--block", args.block]
        if args.one_piece and mode != "bare":
            cmd += ["--save", f"/tmp/bench_scoring_{os.getpid()}_{mode}.npz"]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        r["block"] = {"blocks": str(block), "one-piece": "32 MiB of whole rows (default)",
                      "bare": "256 queries x the gallery"}[mode]
        r["block_mb"] = {"blocks": round(block.bytes / 2**20), "one-piece": 32,
                         "bare": round(256 * args.gallery * 4 / 2**20)}[mode]
        rows.append(r)
        print(f"{mode:9s} block {r['block']:>30s} ({r['block_mb']} MiB): scoring {r['seconds']:8.1f} s, working "
              f"memory {r['working_mb']} MB (peak {r['peak_mb']} MB over {r['rss_before_mb']} MB of vectors, torch "
              f"etc.); the source's duplicate search before it: {r['source_seconds']} s, +{r['source_mb']} MB",
              flush=True)
    if args.bare:
        bare = next(r for r in rows if r.get("mode") == "bare")["seconds"]
        for r in rows:
            if r.get("mode") in ("blocks", "one-piece") and bare:
                print(f"{r['mode']}: {r['seconds'] / bare:.2f} x the bare product + top-10")
    if args.one_piece:
        a, b = (np.load(f"/tmp/bench_scoring_{os.getpid()}_{m}.npz") for m in ("blocks", "one-piece"))
        same = all(np.array_equal(a[k], b[k]) for k in a.files)
        print("same per-query values:", same)
        rows.append({"same_values": same})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"queries": args.queries, "gallery": args.gallery, "dim": args.dim, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
