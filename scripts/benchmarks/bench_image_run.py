"""Cost of a `vlbench run --perturb-images all:3` sweep on a full-size ViT-B/32 (random weights).

Measures, on N synthetic 500x375 JPEG photos with 5 real Flickr30k captions each:

1. the model's pure forward time for 16 image passes (clean + 15 corruptions): N preprocessed images,
   already in memory, encoded 16 times in batches (no decoding, no corruption, no text);
2. one sweep: `run(perturb_images="all:3")` with an empty cache (clean + 15 conditions, both directions),
   wall time and where it goes (results.json "encoding");
3. 16 independent runs, each with its own empty cache: one clean run and one `--perturb-images <name>:3` run
   per corruption (each of those also evaluates clean, as a robustness run must).

Targets: (2) <= 1.3 x (1); (3) / (2) >= 1.8.

Usage: PYTHONPATH=. python scripts/benchmarks/bench_image_run.py [--images 24] [--workers 1] [--batch-size 32]
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openclip:ViT-B-32/random"


def make_data(folder: Path, n: int) -> Path:
    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl").read_text().splitlines()
            if x.strip()]
    (folder / "images").mkdir(parents=True)
    rs = np.random.RandomState(0)
    with open(folder / "m.jsonl", "w") as fh:
        for i in range(n):
            yy, xx = np.mgrid[0:375, 0:500]
            base = np.stack([xx / 500, yy / 375, (xx + yy) / 875], -1) * rs.uniform(100, 255, 3)
            img = np.uint8(np.clip(base + rs.normal(0, 20, base.shape), 0, 255))
            Image.fromarray(img).save(folder / "images" / f"{i}.jpg", quality=90)
            fh.write(json.dumps({"image": f"images/{i}.jpg", "captions": rows[i % len(rows)]["captions"]}) + "\n")
    return folder / "m.jsonl"


def pure_forward(manifest: Path, batch_size: int, passes: int = 16) -> float:
    import torch

    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    ds = load_dataset(f"custom:{manifest}")
    model = load_model(MODEL, device="cpu")
    x = torch.stack([model.preprocess(load_image(ds.image_path(i))) for i in range(ds.n_images)])
    model.encode_images(x[:2])  # warm-up
    t = time.perf_counter()
    for _ in range(passes):
        for s in range(0, len(x), batch_size):
            model.encode_images(x[s:s + batch_size])
    return time.perf_counter() - t


def one_run(manifest: Path, out: Path, cache: Path, spec: str | None, args) -> tuple[float, dict]:
    from vlbench.pipeline.runner import run

    t = time.perf_counter()
    res = run(model=MODEL, dataset=f"custom:{manifest}", perturb_images=spec, out=str(out), cache_dir=str(cache),
              quiet=True, num_workers=args.workers, batch_size=args.batch_size, n_boot=200, device="cpu")
    return time.perf_counter() - t, res.results["encoding"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=24)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    from vlbench.imageperturb import NAMES

    tmp = Path(tempfile.mkdtemp(prefix="vlbench-bench-"))
    try:
        manifest = make_data(tmp / "data", args.images)
        fwd = pure_forward(manifest, args.batch_size)
        sweep, enc = one_run(manifest, tmp / "sweep", tmp / "cache-sweep", "all:3", args)
        indep = [one_run(manifest, tmp / "clean", tmp / "cache-clean", None, args)[0]]
        for name in NAMES:
            indep.append(one_run(manifest, tmp / f"r-{name}", tmp / f"cache-{name}", f"{name}:3", args)[0])
        total = sum(indep)
        print(f"| N images | workers | pure forward, 16 passes (s) | sweep all:3 (s) | sweep / forward | "
              f"16 independent runs (s) | independent / sweep |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        print(f"| {args.images} | {args.workers} | {fwd:.1f} | {sweep:.1f} | {sweep / fwd:.2f} | {total:.1f} | "
              f"{total / sweep:.2f} |")
        print(f"\nsweep encoding: images {enc['image_seconds']:.1f} s (model forward {enc['image_forward_seconds']:.1f}"
              f" s, {enc['images_encoded']} images), texts {enc['text_seconds']:.1f} s "
              f"(forward {enc['text_forward_seconds']:.1f} s, {enc['texts_encoded']} texts); independent runs "
              f"(s): clean {indep[0]:.1f}, mean per corruption {np.mean(indep[1:]):.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
