#!/usr/bin/env python
"""Small runs stay small: time a default ``vlbench run --perturb all`` on 200 captions
(40 images x 5 COCO captions, a tiny CLIP built from the real classes) with and without ``--validity off``, and
``vlbench perturb --text`` on one sentence (first call, the same sentence again, another sentence).

Every timing runs a fresh process with a fresh cache folder (cold), except the repeated ``--text`` calls, which
share the first call's cache. Wall time and CPU time (user + sys of the child) are both printed: on a shared
machine the wall time depends on the load, the CPU time much less.

    python scripts/benchmarks/bench_perturb_small.py [--tree DIR] [--label after] [--json FILE]

``--tree DIR`` runs the vlbench source tree in DIR instead of this checkout (e.g. an exported older commit,
for before/after figures).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "captions" / "coco5k_test.jsonl"
RUNNER = """import sys
tree = sys.argv[1]
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
    sys.path.insert(0, tree)
sys.argv = ["vlbench", *sys.argv[2:]]
from vlbench.cli import main
sys.exit(main())
"""


def make_inputs(root: Path, n_images: int = 40) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    import numpy as np
    from PIL import Image

    from support import tiny_models

    model = tiny_models.save_clip(root / "tiny-clip")
    src = SHARED if SHARED.is_file() else ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl"
    rows = [json.loads(x) for x in src.read_text().splitlines() if x.strip()][:n_images]
    images = root / "data"
    images.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = []
    for i, r in enumerate(rows):
        name = f"im{i:03d}.jpg"
        Image.fromarray(rng.integers(0, 255, size=(96, 128, 3), dtype=np.uint8)).save(images / name)
        lines.append(json.dumps({"image": name, "captions": r["captions"][:5]}))
    manifest = images / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return model, manifest


def timed(args: list[str], tree: str, cache: Path) -> dict:
    env = {**os.environ, "VLBENCH_CACHE_DIR": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", RUNNER, tree, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"failed: vlbench {' '.join(args)}\n{out.stderr[-3000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default="", help="vlbench source tree to run (default: this checkout)")
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res: dict = {"label": args.label, "machine": f"{platform.node()} ({os.cpu_count()} CPUs, "
                 f"load {os.getloadavg()[0]:.1f})", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model, manifest = make_inputs(root)
        base = ["run", "--model", f"clip:{model}", "--dataset", f"custom:{manifest}", "--perturb", "all", "--quiet",
                "--num-workers", "0"]
        for label, extra in (("run --perturb all", []), ("run --perturb all --validity off", ["--validity", "off"])):
            res[label] = timed(base + ["--out", str(root / f"run-{len(extra)}")] + extra, args.tree,
                               root / f"cache-run-{len(extra)}")
            print(label, res[label], flush=True)
        s1, s2 = "A woman in a red coat walks a small dog past the shops.", "Two cats sleep on an old sofa by a window."
        for spec in ("all", "typos,distraction,word-order"):
            cache = root / f"cache-text-{spec[:3]}"
            for label, text in (("first call", s1), ("same sentence again", s1), ("another sentence", s2)):
                key = f"perturb --text --perturb {spec}: {label}"
                res[key] = timed(["perturb", "--text", text, "--perturb", spec], args.tree, cache)
                print(key, res[key], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
