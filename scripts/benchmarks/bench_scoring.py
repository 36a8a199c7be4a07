"""Exact scoring of a large gallery beside a bare matrix product + top-k on the same problem, in one run.

Caption queries (5 per image of the first images) against a gallery of random 64-d float32 unit vectors (the
captions random unit vectors too), all metrics of both directions, scored with
``evaluate(EmbeddingSource(img, txt), c2i, score_block=ROWSxCOLS)`` in a fresh process; beside it, in a fresh
process right after, the yardstick: a plain torch product + top-10 in query blocks of 256 over the same vectors
(no metric, no tie rule, no rank of the positive), and their ratio. ``--pairs N`` measures N such back-to-back
pairs (the machine may be shared: compare the ratios, not the seconds). ``--one-piece`` also times the default
pass and checks that both give the same per-query values.

Memory: the process's peak resident size (VmHWM, reset once the vectors exist) minus its resident size then
(VmRSS): the scoring's working memory beyond the vectors. The source's duplicate search (``EmbeddingSource``:
``first_copies`` of both galleries, before any scoring) is measured apart, against the gallery's bytes.
Printed with the precision, the threads (BLAS, torch, vlbench's tile workers), the tile and block shapes.

usage: python scripts/benchmarks/bench_scoring.py [--queries 25000] [--gallery 1000000] [--dim 64] [--block 16x65536]
       [--pairs 1] [--one-piece] [--no-bare] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _vectors(args):
    import numpy as np

    rng = np.random.default_rng(0)
    img = rng.standard_normal((args.gallery, args.dim), dtype=np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img, txt, np.repeat(np.arange(args.queries // 5), 5)


def _threads() -> dict:
    import torch
    from threadpoolctl import threadpool_info

    from vlbench.metrics.tiles import WORKERS

    blas = [f"{i['internal_api']} {i['version']}: {i['num_threads']}" for i in threadpool_info()
            if i["user_api"] == "blas"]
    return {"blas": "; ".join(blas), "torch": torch.get_num_threads(), "tile_workers": WORKERS}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _bare(img, txt) -> dict:
    import torch

    base = _reset_peak()
    t0, c0 = time.perf_counter(), _cpu()
    g = torch.from_numpy(img)
    for q0 in range(0, len(txt), 256):
        torch.topk(torch.from_numpy(txt[q0:q0 + 256]) @ g.T, 10, dim=1)
    wall = time.perf_counter() - t0
    return {"seconds": round(wall, 2), "cpu_seconds": round(_cpu() - c0, 1),
            "working_mb": round(_status_mb("VmHWM") - base), "rss_before_mb": round(base)}


def child(args) -> dict:
    import numpy as np
    import torch  # noqa: F401  -- loaded as in a run (the ranking head uses torch.topk when it is)

    from vlbench.metrics.compute import EmbeddingSource, evaluate

    img, txt, c2i = _vectors(args)
    if args.mode == "bare":  # the yardstick: a plain torch product + top-10 in query blocks of 256, no metric
        return dict(_bare(img, txt), mode="bare", threads=_threads())
    base = _reset_peak()
    t0 = time.perf_counter()
    src = EmbeddingSource(img, txt)  # finds bit-identical duplicate vectors (metrics/scan/duplicates.py first_copies)
    t_src, src_mb = time.perf_counter() - t0, _status_mb("VmHWM") - base
    base = _reset_peak()
    t0, c0 = time.perf_counter(), _cpu()
    ev = evaluate(src, c2i, score_block=None if args.mode == "one-piece" else args.block)
    wall = time.perf_counter() - t0
    out = {"mode": args.mode, "seconds": round(wall, 2), "cpu_seconds": round(_cpu() - c0, 1),
           "source_seconds": round(t_src, 2), "source_mb": round(src_mb, 1), "gallery_mb": round(img.nbytes / 1e6),
           "rss_before_mb": round(base),
           "peak_mb": round(_status_mb("VmHWM")), "tile": f"{src.grid.ti}x{src.grid.tt}",
           "tiles_computed": src.grid.products, "threads": _threads(), "precision": str(img.dtype),
           "t2i_recall@10": ev.as_dict()["t2i_recall@10"], "t2i_meanr": ev.as_dict()["t2i_meanr"]}
    out["working_mb"] = out["peak_mb"] - out["rss_before_mb"]
    if args.save:
        np.savez(args.save, **{f"{d}/{k}": np.asarray(v) for d in ("i2t", "t2i") for k, v in ev.per_query(d).items()})
    return out


def _run(args, mode: str) -> dict:
    cmd = [sys.executable, __file__, "--mode", mode, "--queries", str(args.queries), "--gallery",
           str(args.gallery), "--dim", str(args.dim), "--block", args.block]
    if args.one_piece and mode != "bare":
        cmd += ["--save", f"/tmp/bench_scoring_{os.getpid()}_{mode}.npz"]
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    return dict(r, load_before=float(load))


def _print(r: dict, block) -> None:
    if r["mode"] == "bare":
        print(f"  bare torch product + top-10, 256 queries x the gallery at a time: {r['seconds']:7.2f} s "
              f"({r['cpu_seconds']} CPU-s), working memory {r['working_mb']} MB (load {r['load_before']})", flush=True)
        return
    how = f"--score-block {block} ({block.bytes >> 20} MiB)" if r["mode"] == "blocks" else "one piece (32 MiB)"
    print(f"  vlbench {how}, tiles {r['tile']} ({r['tiles_computed']} computed): {r['seconds']:7.2f} s "
          f"({r['cpu_seconds']} CPU-s), working "
          f"memory {r['working_mb']} MB beyond {r['rss_before_mb']} MB of vectors, torch etc.; duplicate search "
          f"{r['source_seconds']} s, +{r['source_mb']} MB = {100 * r['source_mb'] / r['gallery_mb']:.1f}% of the "
          f"gallery's {r['gallery_mb']} MB (load {r['load_before']})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=25_000)
    ap.add_argument("--gallery", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--block", default="16x65536")
    ap.add_argument("--pairs", type=int, default=1, help="back-to-back (vlbench, bare) pairs to measure")
    ap.add_argument("--one-piece", action="store_true", help="also time the default pass and compare the values")
    ap.add_argument("--bare", action=argparse.BooleanOptionalAction, default=True,
                    help="time the yardstick (a bare torch product + top-10) after each vlbench run (default: on)")
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
    print(f"{args.queries:,} caption queries x {args.gallery:,} images, {args.dim}-d float32, every metric of both "
          "directions", flush=True)
    rows = []
    for i in range(args.pairs):
        pair = [_run(args, "blocks")] + ([_run(args, "bare")] if args.bare else [])
        for r in pair:
            _print(r, block)
        if args.bare:
            print(f"pair {i + 1}: vlbench / bare = {pair[0]['seconds'] / pair[1]['seconds']:.2f}", flush=True)
        rows += pair
    print(f"precision float32; threads {rows[0]['threads']}")
    if args.one_piece:
        rows.append(_run(args, "one-piece"))
        _print(rows[-1], block)
        a, b = (np.load(f"/tmp/bench_scoring_{os.getpid()}_{m}.npz") for m in ("blocks", "one-piece"))
        same = all(np.array_equal(a[k], b[k]) for k in a.files)
        print("same per-query values in blocks and in one piece:", same)
        rows.append({"same_values": same})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"queries": args.queries, "gallery": args.gallery, "dim": args.dim, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
