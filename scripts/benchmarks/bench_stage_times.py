"""Where a run's time goes: one clean run, an image-corruption run and a warm rerun of a
full-size CLIP ViT-B/32 architecture with random weights (the same compute as the real model; built through
transformers' classes and loaded from a folder as a hub id would be) on N synthetic 500 x 375 images with
real Flickr30k test captions; prints each run's `timings` stages and `hardware` from results.json.

    python scripts/benchmarks/bench_stage_times.py prepare DIR   # CLIP BPE files (needs open_clip) + captions (needs ../shared)
    python scripts/benchmarks/bench_stage_times.py run DIR [--images 1000] [--workers 4] [--batch-size 128] [--cases cold,img,warm]

`prepare` writes DIR/bpe and DIR/captions.jsonl so that `run` needs neither open_clip nor ../shared (a GPU
machine without them can run it). Numbers: BENCHMARKS.md, "Stage times".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def prepare(out: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.tiny_models import clip_bpe_files

    clip_bpe_files(str(out / "bpe"))
    rows = [json.loads(x) for x in (ROOT.parent / "shared" / "data" / "captions" / "flickr30k_test.jsonl")
            .read_text().splitlines() if x.strip()]
    (out / "captions.jsonl").write_text("".join(json.dumps({"captions": r["captions"]}) + "\n" for r in rows))
    print(f"wrote {out / 'bpe'} and {len(rows)} caption rows to {out / 'captions.jsonl'}")


def _model(out: Path) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    folder = out / "clip-vit-b32-random"
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        CLIPModel(CLIPConfig()).save_pretrained(folder)  # the default config is ViT-B/32
        CLIPTokenizer(str(out / "bpe" / "vocab.json"), str(out / "bpe" / "merges.txt"),
                      model_max_length=77).save_pretrained(folder)
        CLIPImageProcessor().save_pretrained(folder)
    return folder


def _data(out: Path, n: int) -> Path:
    import numpy as np
    from PIL import Image

    rows = [json.loads(x) for x in (out / "captions.jsonl").read_text().splitlines()][:n]
    img = out / "images"
    img.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(out / "manifest.jsonl", "w") as fh:
        for i, row in enumerate(rows):
            p = img / f"{i:05d}.jpg"
            if not p.is_file():
                base = rng.integers(0, 255, size=3)
                arr = np.clip(base + rng.normal(0, 40, size=(375, 500, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(arr).save(p, quality=90)
            fh.write(json.dumps({"image": f"images/{p.name}", "captions": row["captions"]}) + "\n")
    return out / "manifest.jsonl"


CASES = {"cold": ("clean, cold", {}), "img": ("gaussian_noise:3, cold", {"perturb_images": "gaussian_noise:3"}),
         "warm": ("clean, warm (every embedding cached)", {})}


def run(out: Path, n: int, workers: int, batch_size: int, cases: list[str]) -> None:
    import vlbench

    import shutil

    model, manifest = f"clip:{_model(out)}", _data(out, n)
    shutil.rmtree(out / "cache", ignore_errors=True)  # the cold runs start from an empty embedding cache
    for name in cases:  # "img" needs imagecorruptions; "warm" after "cold"
        label, kw = CASES[name]
        res = vlbench.run(model=model, dataset=f"custom:{manifest}", out=str(out / "runs" / name), quiet=True,
                          num_workers=workers, batch_size=batch_size, validity="off", cache_dir=str(out / "cache"),
                          overwrite=True, **kw)
        t, hw = res.results["timings"], res.results["hardware"]
        print(f"\n## {label}: wall {t['wall_seconds']:.2f} s on {hw['device']} ({hw.get('gpu_name')}), "
              f"{hw['cpu_count']} CPUs, torch {hw['torch']}, CUDA {hw['cuda']}, batch {hw['batch_size']}, "
              f"workers {hw['num_workers']}")
        for stage, v in t["stages"].items():
            ips = "" if v.get("items_per_s") is None else f"{v['items_per_s']:,.0f}/s"
            print(f"  {stage:26s} {v['seconds']:8.2f} s  {v.get('items') or '':>7}  {ips}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir", type=Path)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--images", type=int, default=1000)
    r.add_argument("--workers", type=int, default=4)
    r.add_argument("--batch-size", type=int, default=128)
    r.add_argument("--cases", default="cold,img,warm", help="comma list of cold, img, warm (in that order)")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    if a.cmd == "prepare":
        prepare(a.dir)
    else:
        run(a.dir, a.images, a.workers, a.batch_size, a.cases.split(","))


if __name__ == "__main__":
    main()
