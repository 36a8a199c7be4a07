"""What the ``lite`` suite costs: ``vlbench sweep --suite lite`` with a full-size CLIP ViT-B/32 architecture
(random weights: the compute of openai/clip-vit-base-patch32) on 100 images of 640x480 with real captions, on
this machine's CPU; then the same sweep again (finished: no run, no forward pass).

Prints the cold sweep's wall time, its run's stage times, the peak memory, and the finished sweep's wall time.
usage: python scripts/benchmarks/bench_lite.py [--images 100] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_sweep import make_data, make_model  # noqa: E402  (a sibling script)


def sweep(args: list[str], env: dict) -> tuple[float, int]:
    """(wall seconds, peak RSS in KB of the sweep and its workers) of one ``vlbench sweep`` command."""
    cmd = ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "vlbench", "sweep", *args]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return wall, int(p.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = make_model(root / "clip-b32")
        man = make_data(root / "data", a.images)
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLBENCH_CACHE_DIR=str(root / "cache"))
        args = ["--suite", "lite", "--model", f"b32=clip:{model}", "--dataset", f"d={man}",
                "--out", str(root / "study"), "--workers", str(a.workers)]
        cold, rss = sweep(args, env)
        warm, _ = sweep(args, env)
        res = json.loads(next((root / "study" / "runs").glob("*/results.json")).read_text())
        stages = {k: v["seconds"] for k, v in res["timings"]["stages"].items() if v["seconds"] >= 0.05}
    print(f"lite suite, {a.images} images, full-size ViT-B/32 (random weights), {os.cpu_count()} CPU cores, "
          f"--workers {a.workers}")
    print(f"  cold sweep: {cold:.1f} s wall (the run itself {res['timings']['wall_seconds']:.1f} s), "
          f"peak memory {rss / 1024:.0f} MB")
    print("  run stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()))
    print(f"  the same sweep again (finished): {warm:.1f} s wall")


if __name__ == "__main__":
    main()
