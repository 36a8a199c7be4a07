#!/usr/bin/env python
"""Time ``vlbench perturb --dataset coco --perturb all`` end to end (fresh process each):

Each run gets an empty vlbench cache (cold: every MiniLM vector is computed).

* ``--validity off``: the perturbations alone, the synonyms' semantic guard included (target < 180 s);
* ``--validity sample`` (the default): plus applicability and the drift of a fixed-seed sample of up to
  2,000 applied captions per perturbation (the extra time is what sampled validity adds to a run; target
  < 60 s).

    python scripts/benchmarks/bench_perturb_cli.py [--dataset coco] [--data-dir DIR] [--modes off,sample]

Prints wall and CPU time (user + sys of the child) per mode, and the load average before each run.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("--modes", default="off,sample")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as cache:
            env["VLBENCH_CACHE_DIR"] = cache  # cold: no MiniLM vectors from earlier runs
            load = os.getloadavg()[0]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "vlbench", "perturb", "--dataset", args.dataset,
                                   "--data-dir", args.data_dir, "--perturb", "all", "--out", out,
                                   "--validity", mode], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return proc.returncode
            print(f"--validity {mode:6s}: wall {wall:6.1f} s, cpu {cpu:6.1f} s (load average before: {load:.1f})")
            if mode == "sample":
                print(proc.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
