"""Wall time of the preflight refusal: ``HF_HUB_OFFLINE=1 vlbench run --model clip --dataset custom:<m>
--perturb all`` with nothing cached (an empty HF_HOME and cache), which must fail in seconds, before any
perturbing. Usage: python scripts/benchmarks/bench_preflight.py [REPEATS]  (figures in docs/robustness.md)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(repeats: int = 5) -> None:
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = []
        for i in range(3):
            Image.new("RGB", (30, 24), (40 * i, 0, 0)).save(tmp / f"img{i}.png")
            rows.append(json.dumps({"image": f"img{i}.png", "captions": ["a dog runs on the grass", "a red car"]}))
        (tmp / "m.jsonl").write_text("\n".join(rows))
        env = dict(os.environ, HF_HOME=str(tmp / "hf"), VLBENCH_CACHE_DIR=str(tmp / "cache"), HF_HUB_OFFLINE="1")
        env.pop("HF_HUB_CACHE", None)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", "clip", "--dataset",
                                   f"custom:{tmp / 'm.jsonl'}", "--perturb", "all", "--out", str(tmp / "o")],
                                  capture_output=True, text=True, env=env)
            times.append(time.perf_counter() - t0)
            assert proc.returncode == 2 and "not in the local Hugging Face cache" in proc.stderr, proc.stderr
        print(f"preflight refusal: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
              f"over {repeats} runs")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repeats", type=int, nargs="?", default=5, help="how many times to time the refusal (default 5)")
    main(ap.parse_args().repeats)
