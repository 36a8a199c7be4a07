#!/usr/bin/env python
"""Time ``vlbench granularity`` on the four test sets (60,000 captions) and print the table.

    python scripts/benchmarks/bench_granularity.py --data-dir /work/shared/data/captions [--n-process 1 2] [--out DIR]

Each configuration runs in a fresh process, so model loading (spaCy, WordNet) and the WordNet
caches are counted as a user would see them. Reports wall time, CPU time and peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("VLBENCH_DATA_DIR", "/work/shared/data/captions"))
    ap.add_argument("--datasets", nargs="+", default=["coco", "coco-fg", "flickr30k", "flickr30k-fg"])
    ap.add_argument("--n-process", type=int, nargs="+", default=[1])
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1000])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None, help="keep the outputs of the last configuration here")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="more 'vlbench granularity' flags after --")
    a = ap.parse_args()
    results = []
    for npr in a.n_process:
        for bs in a.batch_size:
            out = a.out or tempfile.mkdtemp(prefix="granularity-bench-")
            cmd = [sys.executable, "-m", "vlbench.granularity.cli", "--dataset", *a.datasets, "--data-dir",
                   a.data_dir, "--out", out, "--n-process", str(npr), "--batch-size", str(bs)]
            if a.limit:
                cmd += ["--limit", str(a.limit)]
            cmd += [x for x in a.extra if x != "--"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, file=sys.stderr)
                return proc.returncode
            summary = json.loads((Path(out) / "granularity_summary.json").read_text())
            n = sum(v["n_captions"] for v in summary["captions"].values())
            rec = {"n_process": npr, "batch_size": bs, "captions": n, "wall_s": round(wall, 1),
                   "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
                   "peak_rss_mb": round(after.ru_maxrss / 1024), "inside_s": summary["seconds"],
                   "cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2)}
            results.append(rec)
            print(json.dumps(rec), flush=True)
            print(proc.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
