"""Sweep benchmark: how close a robustness sweep (clean + 13 perturbations) gets to the model's own
forward passes, with a full-size CLIP ViT-B/32 architecture (random weights: the same compute as
openai/clip-vit-base-patch32) on a subset small enough for a few minutes on 2 CPU cores.

Prints and (with --write) records in BENCHMARKS.md:
  (a) vlbench cold wall time / pure forward time (1 image pass + text passes over the distinct
      captions of the 14 conditions, timed separately in the same script on the same inputs); and the
      same with `--validity off` (a', the work the figure measured before the sampled
      validity: the MiniLM drift of up to 2,000 applied captions per perturbation, an extra model's forward
      passes that a 500-caption subset weighs far more than a full test set does);
  (b) naive sweep (14 independent runs: each loads the model, encodes every image and its captions,
      no cache) / vlbench cold time;
  (c) cold / warm (fully cached) run time;
  (d) single-process vs `torchrun --nproc-per-node 2` wall time;
  and the peak memory (max RSS, incl. DataLoader workers) of each.

usage: python scripts/benchmarks/bench_sweep.py [--images 100] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def make_model(folder: Path) -> Path:
    """CLIPConfig() defaults are the ViT-B/32 architecture of openai/clip-vit-base-patch32."""
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    from support import tiny_models

    torch.manual_seed(0)
    CLIPModel(CLIPConfig()).save_pretrained(folder)
    v, m = tiny_models.clip_bpe_files(str(folder.parent / "bpe"))
    CLIPTokenizer(v, m, model_max_length=77).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(folder)
    return folder


def make_data(folder: Path, n: int) -> Path:
    import numpy as np
    from PIL import Image

    captions = None
    for cand in (ROOT.parent / "shared" / "data" / "captions" / "coco5k_test.jsonl",
                 ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl"):
        if cand.is_file():
            captions = [json.loads(x)["captions"] for x in cand.read_text().splitlines() if x.strip()]
            break
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        name = f"im{i:05d}.jpg"
        if not (folder / name).is_file():
            base = rng.integers(0, 255, size=3)
            arr = np.clip(base + rng.normal(0, 50, size=(480, 640, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(folder / name, quality=90)
        lines.append(json.dumps({"image": name, "captions": captions[i % len(captions)]}))
    man = folder / "manifest.jsonl"
    man.write_text("\n".join(lines) + "\n")
    return man


CHILD = r"""
import json, resource, sys, time
t = time.perf_counter()
mode = sys.argv[1]
if mode == "cli":
    from vlbench.cli import main
    rc = main(sys.argv[2:])
elif mode == "naive":
    from bench_sweep import naive
    naive(*sys.argv[2:])
    rc = 0
elif mode == "forward":
    from bench_sweep import forward
    print(json.dumps({"forward": forward(*sys.argv[2:])}), file=sys.stderr)
    rc = 0
wall = time.perf_counter() - t
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall": wall, "peak_mb": own, "child_peak_mb": kids, "rc": rc}), file=sys.stderr)
"""


def measure(args: list[str], env: dict, torchrun: int = 0) -> dict:
    cmd = [sys.executable, "-c", CHILD, *args]
    if torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(torchrun), "--master-port",
               "29533", "-m", "vlbench", *args[1:]]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr[-3000:]}")
    info = {"wall_outer": wall}
    for line in p.stderr.splitlines():
        if line.startswith("{"):
            try:
                info.update(json.loads(line))
            except json.JSONDecodeError:
                pass
    return info


def _conditions(man: str):
    from vlbench import perturbations as P
    from vlbench.datasets.core import load_dataset

    ds = load_dataset(f"custom:{man}")
    pert = P.perturb_captions(ds.captions, ds.caption_ids, P.resolve("all"), seed=0)
    return ds, {"clean": list(ds.captions), **{k: v.texts for k, v in pert.items()}}


def forward(model: str, man: str) -> dict:
    """Pure model forward time on exactly the inputs a sweep needs (inputs prepared untimed)."""
    import numpy as np
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    ds, conds = _conditions(man)
    m = load_model(f"clip:{model}", device="cpu")
    pix = torch.stack([m.preprocess(load_image(ds.image_path(i))) for i in range(ds.n_images)])
    texts = sorted({t for v in conds.values() for t in v}, key=len, reverse=True)
    toks = [m._tokenize(texts[i:i + 256]) for i in range(0, len(texts), 256)]
    with torch.inference_mode():
        t = time.perf_counter()
        for i in range(0, len(pix), 64):
            m.model.get_image_features(pixel_values=pix[i:i + 64])
        t_img = time.perf_counter() - t
        t = time.perf_counter()
        for tok in toks:
            m.model.get_text_features(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"])
        t_txt = time.perf_counter() - t
    return {"image_s": t_img, "text_s": t_txt, "distinct_texts": len(texts), "images": int(len(pix))}


def naive(model: str, man: str) -> None:
    """14 independent runs: each loads the model, encodes all images and its captions, scores."""
    from vlbench.metrics import compute as M
    from vlbench.encoding.encode import encode_images, encode_texts, stack
    from vlbench.models.adapter import load_model

    ds, conds = _conditions(man)
    for name, texts in conds.items():
        m = load_model(f"clip:{model}", device="cpu")
        img = stack(encode_images(m, [ds.image_path(i) for i in range(ds.n_images)], progress=False,
                                  num_workers=1), ds.n_images, "image")
        txt = stack(encode_texts(m, texts, progress=False), len(texts), "text")
        M.evaluate(M.EmbeddingSource(img, txt), ds.caption_to_image)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "vlbench-bench"))
    ap.add_argument("--write", action="store_true", help="append the figures to BENCHMARKS.md")
    ap.add_argument("--skip-naive", action="store_true")
    a = ap.parse_args()
    work = Path(a.workdir)
    model = make_model(work / "clip-vit-b32-random")
    man = make_data(work / f"data{a.images}", a.images)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=f"{ROOT / 'scripts'}{os.pathsep}{ROOT / 'tests'}"
               f"{os.pathsep}{ROOT}")
    cache = work / "cache"
    runs = work / "runs"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(runs, ignore_errors=True)
    base = ["run", "--model", f"clip:{model}", "--dataset", f"custom:{man}", "--perturb", "all", "--quiet",
            "--cache-dir", str(cache)]
    r = {}
    r["forward"] = measure(["forward", str(model), str(man)], env)
    fw = r["forward"]["forward"]
    r["cold"] = measure(["cli", *base, "--out", str(runs / "cold")], env)
    r["warm"] = measure(["cli", *base, "--out", str(runs / "warm")], env)
    shutil.rmtree(cache, ignore_errors=True)
    r["cold_novalidity"] = measure(["cli", *base, "--validity", "off", "--out", str(runs / "cold-nv")], env)
    shutil.rmtree(cache, ignore_errors=True)
    r["torchrun2"] = measure(["cli", *base, "--out", str(runs / "tr2")], env, torchrun=2)
    if not a.skip_naive:
        r["naive"] = measure(["naive", str(model), str(man)], env)
    res = json.loads((runs / "cold" / "results.json").read_text())
    enc = res["encoding"]
    pure = fw["image_s"] + fw["text_s"]
    lines = [
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
        f"{__import__('torch').get_num_threads()}, python {platform.python_version()}",
        f"subset: {a.images} images x 5 captions, clean + 13 perturbations = {enc['texts_total']} caption "
        f"slots, {enc['texts_distinct']} distinct model inputs; full-size CLIP ViT-B/32 (random weights), fp32, CPU",
        f"pure forward: images {fw['image_s']:.1f} s + texts {fw['text_s']:.1f} s ({fw['distinct_texts']} distinct) "
        f"= {pure:.1f} s",
        f"vlbench cold run: {r['cold']['wall']:.1f} s (peak {max(r['cold']['peak_mb'], r['cold']['child_peak_mb']):.0f} MB)"
        f"  -> (a) cold / pure forward = {r['cold']['wall'] / pure:.2f}",
        f"vlbench cold run, --validity off: {r['cold_novalidity']['wall']:.1f} s  -> (a') = "
        f"{r['cold_novalidity']['wall'] / pure:.2f}; the sampled validity took "
        f"{r['cold']['wall'] - r['cold_novalidity']['wall']:.1f} s of the cold run",
    ]
    if "naive" in r:
        lines.append(f"naive sweep (14 independent runs, no cache): {r['naive']['wall']:.1f} s (peak "
                     f"{max(r['naive']['peak_mb'], r['naive']['child_peak_mb']):.0f} MB)  -> (b) naive / vlbench = "
                     f"{r['naive']['wall'] / r['cold']['wall']:.2f}")
    lines += [
        f"warm run (everything cached): {r['warm']['wall']:.1f} s (peak "
        f"{max(r['warm']['peak_mb'], r['warm']['child_peak_mb']):.0f} MB)  -> (c) cold / warm = "
        f"{r['cold']['wall'] / r['warm']['wall']:.1f}",
        f"torchrun --nproc-per-node 2 (cold): {r['torchrun2']['wall_outer']:.1f} s vs 1 process "
        f"{r['cold']['wall_outer']:.1f} s  -> (d) 1-proc / 2-proc = "
        f"{r['cold']['wall_outer'] / r['torchrun2']['wall_outer']:.2f}",
    ]
    text = "\n".join(lines)
    print(text)
    print(json.dumps(r, indent=1), file=sys.stderr)
    if a.write:
        with open(ROOT / "BENCHMARKS.md", "a") as fh:
            fh.write(f"\n### bench_sweep.py, {time.strftime('%Y-%m-%d')}\n\n```text\n{text}\n```\n")


if __name__ == "__main__":
    main()
