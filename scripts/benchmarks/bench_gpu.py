"""The GPU benchmark in one call: one table and one JSON file.

    python scripts/benchmarks/bench_gpu.py [--out DIR] [--sizes 1000,5000] [--workers 8] [--batch-size 256]
    python scripts/benchmarks/bench_gpu.py --quick          # a few seconds on the CPU: every case at a tiny size

Model: a full-size CLIP ViT-B/32 with random weights (the same compute as the real one), built through
transformers' classes and loaded from a folder as a hub id would be (``--quick``: the tests' tiny CLIP). Data:
N synthetic Flickr30k-sized JPEGs (500 x 375) with five synthetic captions each. Cases, per image count:

* pure forward: images and captions preprocessed and staged on the device first, then only the model's forward
  passes (images, then captions), timed to the last result; fp32 and bf16;
* cold runs (an empty cache): the reference pixel path at fp32 and bf16 with no pixel cache; bf16 again with the
  pixel cache filled by the fp32 run (the same preprocessing: no image decoded); ``--pixels device`` at fp32 and
  bf16; a warm rerun (every vector cached);
* the 15 x 5 image-corruption sweep (``--perturb-images all:1-5``; ``--quick``: two corruptions) with the
  reference corruption code and, where this vlbench has ``--corrupt-backend``, the torch one (both in the
  DataLoader workers, on the CPU);
* the full Flickr30k suite in one run (the target: under 60 s for 1,000 images): the 13 caption perturbations
  (``--perturb all``; ``--quick``: char-swap) and the corruption sweep, ``--pixels device --corrupt-backend torch``
  (the corruptions on the device, batched); its row gives the device corruption stage and whether a CPU
  corruption stage appeared (it should not);
* exact scoring of 25,000 queries against 1,000,000 gallery vectors (``--quick``: 250 x 10,000), where this
  vlbench has the scoring block option (``score_block``); skipped otherwise.

Every row names its precision, batch size, DataLoader workers and pixel path. The full set is sized for about
8 minutes on one H100-class GPU (not measured yet: no GPU was lent when it was written).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny-model and BPE builders (tests/support)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

WORDS = (("a", "the", "one", "two"), ("man", "woman", "dog", "child", "cyclist", "group of people", "cat"),
         ("runs", "sits", "stands", "jumps", "walks", "plays"),
         ("on the grass", "in the street", "near the water", "on a bench", "in a park", "at the beach"))


@dataclasses.dataclass
class Setup:
    quick: bool
    out: Path
    device: str
    sizes: list
    workers: int
    batch_size: int
    corruptions: str
    scoring: tuple  # (queries, gallery, dim)
    captions: str = "all"  # the caption perturbations of the full suite


def build_model(out: Path, quick: bool) -> str:
    """The model's folder spec: the full ViT-B/32 architecture with random weights, or the tests' tiny CLIP."""
    import torch
    from support import tiny_models
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    if quick:
        return f"clip:{tiny_models.save_clip(out / 'tiny-clip')}"
    folder = out / "clip-vit-b32-random"
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        CLIPModel(CLIPConfig()).save_pretrained(folder)  # the default configuration is ViT-B/32
        vocab, merges = tiny_models.clip_bpe_files(str(out / "bpe"))
        CLIPTokenizer(vocab, merges, model_max_length=77).save_pretrained(folder)
        CLIPImageProcessor().save_pretrained(folder)  # 224 px, bicubic, centre crop: CLIP's
    return f"clip:{folder}"


def write_data(out: Path, n: int) -> Path:
    """N synthetic 500 x 375 JPEGs (quality 90) with five synthetic captions each; returns the manifest."""
    from PIL import Image

    folder = out / "images"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        p = folder / f"{i:05d}.jpg"
        if not p.is_file():
            base = rng.integers(0, 255, size=3)
            arr = np.clip(base + rng.normal(0, 40, size=(375, 500, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(p, quality=90)
        caps = [" ".join(str(rng.choice(w)) for w in WORDS) + f" {i}" for _ in range(5)]
        rows.append({"image": f"images/{p.name}", "captions": caps})
    manifest = out / f"manifest-{n}.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def pure_forward(spec: str, manifest: Path, s: Setup, precision: str) -> dict:
    """Forward passes only, on inputs staged on the device beforehand (the lower bound of a cold run)."""
    import torch

    from vlbench.encoding.images import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device=s.device, precision=precision)
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    images = torch.stack([adapter.preprocess(load_image(manifest.parent / r["image"])) for r in rows]).to(s.device)
    texts = [c for r in rows for c in r["captions"]]
    tb = max(s.batch_size, 256)
    tokens = [{k: v.to(s.device) for k, v in adapter._tokenize(texts[i:i + tb]).items()
               if k in ("input_ids", "attention_mask")} for i in range(0, len(texts), tb)]
    model = adapter.model
    images = images.to(model.dtype)
    with torch.inference_mode():
        model.get_image_features(pixel_values=images[:s.batch_size])  # warm-up
        _sync(s.device)
        t0 = time.perf_counter()
        for i in range(0, len(images), s.batch_size):
            model.get_image_features(pixel_values=images[i:i + s.batch_size])
        _sync(s.device)
        t_img = time.perf_counter() - t0
        for tok in tokens:
            model.get_text_features(**tok)
        _sync(s.device)
        t_all = time.perf_counter() - t0
    return {"seconds": t_all, "image_seconds": t_img, "images_per_s": len(images) / t_img}


def vlbench_run(spec: str, manifest: Path, s: Setup, name: str, cache: Path | None, **kw) -> dict:
    """One ``vlbench.run``; its wall time, image stages and what it decoded, from its results.json."""
    import vlbench

    opts = dict(cache_dir=str(cache)) if cache is not None else dict(no_cache=True)
    t0 = time.perf_counter()
    res = vlbench.run(model=spec, dataset=f"custom:{manifest}", out=str(s.out / "runs" / name), quiet=True,
                      overwrite=True, validity="off", n_boot=100, num_workers=s.workers, batch_size=s.batch_size,
                      device=s.device, **opts, **kw).results
    wall = time.perf_counter() - t0
    st, enc = res["timings"]["stages"], res["encoding"]
    fwd = st.get("image_forward", {})
    return {"seconds": wall, "image_forward_s": fwd.get("seconds"), "images_per_s": fwd.get("items_per_s"),
            "image_decode_preprocess_s": st.get("image_decode_preprocess", {}).get("seconds"),
            "image_corrupt_cpu_s": st.get("image_corrupt_cpu", {}).get("seconds"),
            "image_corrupt_device_s": st.get("image_corrupt_device", {}).get("seconds"),
            "images_decoded": enc.get("images_decoded"), "images_encoded": enc.get("images_encoded"),
            "pixels_from_cache": enc.get("pixels_cached"), "hardware": res["hardware"]}


def _row(case: str, n: int, precision: str, s: Setup, pixels: str, fig: dict, note: str = "") -> dict:
    return {"case": case, "images": n, "precision": precision, "batch_size": s.batch_size,
            "workers": s.workers, "pixels": pixels, "note": note, **{k: v for k, v in fig.items() if k != "hardware"}}


def image_cases(spec: str, s: Setup) -> list[dict]:
    rows = []
    for n in s.sizes:
        man = write_data(s.out / "data", n)
        for prec in ("fp32", "bf16"):
            fig = pure_forward(spec, man, s, prec)
            rows.append(_row("pure forward (staged tensors)", n, prec, s, "reference", fig))
        cache = s.out / f"cache-{n}"
        shutil.rmtree(cache, ignore_errors=True)
        runs = [("cold run", "fp32", cache, "reference", "empty cache"),
                ("cold run, pixel cache", "bf16", cache, "reference", "pixels from the fp32 run: nothing decoded"),
                ("warm run", "bf16", cache, "reference", "every vector cached"),
                ("cold run", "bf16", None, "reference", "no cache"),
                ("cold run", "fp32", None, "device", "no cache"), ("cold run", "bf16", None, "device", "no cache")]
        for case, prec, where, pixels, note in runs:
            fig = vlbench_run(spec, man, s, f"{n}-{case}-{prec}-{pixels}".replace(" ", "_").replace(",", ""),
                              where, precision=prec, pixels=pixels)
            rows.append(_row(case, n, prec, s, pixels, fig, note))
    return rows


def corruption_cases(spec: str, s: Setup) -> list[dict]:
    from vlbench.pipeline.run_config import RunConfig

    n = s.sizes[0]
    man = write_data(s.out / "data", n)
    backends = ["reference"]
    if "corrupt_backend" in {f.name for f in dataclasses.fields(RunConfig)}:
        backends.append("torch")
    rows = []
    for backend in backends:
        kw = {"corrupt_backend": backend} if backend != "reference" else {}
        fig = vlbench_run(spec, man, s, f"corrupt-{backend}", None, precision="bf16", perturb_images=s.corruptions,
                          **kw)
        rows.append(_row(f"corruption sweep ({s.corruptions}), {backend} backend", n, "bf16", s, "reference", fig))
    if len(backends) == 1:
        rows.append({"case": "corruption sweep, torch backend", "skipped": "this vlbench has no --corrupt-backend"})
    return rows


def suite_case(spec: str, s: Setup) -> list[dict]:
    """The full suite in one run, corruptions on the device (where this vlbench has --corrupt-backend)."""
    from vlbench.pipeline.run_config import RunConfig

    case = f"full suite ({s.captions} captions, {s.corruptions} images), torch backend on the device"
    if "corrupt_backend" not in {f.name for f in dataclasses.fields(RunConfig)}:
        return [{"case": case, "skipped": "this vlbench has no --corrupt-backend"}]
    n = s.sizes[0]
    man = write_data(s.out / "data", n)
    fig = vlbench_run(spec, man, s, "suite-device", None, precision="bf16", pixels="device", perturb=s.captions,
                      perturb_images=s.corruptions, corrupt_backend="torch")
    return [_row(case, n, "bf16", s, "device", fig, "target: under 60 s for 1,000 images on one H100-class GPU")]


def scoring_case(s: Setup) -> list[dict]:
    """Exact t2i/i2t scoring of Q caption queries against a G-vector gallery, in blocks (where supported)."""
    from vlbench.metrics import compute

    q, g, d = s.scoring
    params = inspect.signature(compute.evaluate).parameters
    if "score_block" not in params:
        return [{"case": f"scoring {q:,} x {g:,}", "skipped": "this vlbench has no scoring block option"}]
    rng = np.random.default_rng(0)
    img = rng.standard_normal((g, d)).astype(np.float32)
    txt = rng.standard_normal((q, d)).astype(np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    c2i = np.arange(q) // 5
    block = "64x2048" if s.quick else "4096x65536"  # ROWS x COLS similarities at a time (1 GiB of float32 on a GPU)
    t0 = time.perf_counter()
    compute.evaluate(compute.EmbeddingSource(img, txt, device=s.device), c2i, k=(1, 5, 10), p=10, score_block=block)
    return [{"case": f"scoring {q:,} x {g:,} ({d}-d, exact, blocks {block})", "seconds": time.perf_counter() - t0,
             "device": s.device, "gallery": g, "precision": "fp32", "batch_size": None, "workers": 0,
             "pixels": "n/a (vectors)", "score_block": block}]


def _corrupt_stage(r: dict) -> str:
    """Where a row's corruptions took time: ``device 1.2`` / ``cpu 3.4`` (seconds of the stage), or empty."""
    parts = [f"{where} {r[f'image_corrupt_{where}_s']:.2f}" for where in ("cpu", "device")
             if r.get(f"image_corrupt_{where}_s") is not None]
    return " / ".join(parts)


def table(rows: list[dict]) -> str:
    out = ["| case | images | precision | batch | workers | pixels | seconds | image fwd/s | decoded | corruption "
           "stage s | note |", "|---|---:|---|---:|---:|---|---:|---:|---:|---|---|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['case']} | | | | | | skipped | | | | {r['skipped']} |")
            continue
        ips = r.get("images_per_s")
        out.append(f"| {r['case']} | {r.get('images', '')} | {r.get('precision', '')} | {r.get('batch_size', '')} | "
                   f"{r.get('workers', '')} | {r.get('pixels', '')} | {r['seconds']:.2f} | "
                   f"{'' if ips is None else f'{ips:,.0f}'} | {r.get('images_decoded', '')} | {_corrupt_stage(r)} | "
                   f"{r.get('note', '')} |")
    return "\n".join(out)


def setup(argv: list[str] | None) -> Setup:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes on the CPU (what the test runs)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--sizes", default="1000,5000")
    ap.add_argument("--workers", type=int, default=min(8, max(0, (os.cpu_count() or 1) - 1)))
    ap.add_argument("--batch-size", type=int, default=256)
    a = ap.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="vlbench-bench-gpu-"))
    if a.quick:
        return Setup(True, out, a.device or "cpu", [8, 12], 0, 4, "gaussian_noise:1,contrast:2", (250, 10_000, 64),
                     "char-swap")
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return Setup(False, out, device, [int(x) for x in a.sizes.split(",")], a.workers, a.batch_size, "all:1-5",
                 (25_000, 1_000_000, 512))


def main(argv: list[str] | None = None) -> dict:
    s = setup(argv)
    t0 = time.perf_counter()
    spec = build_model(s.out, s.quick)
    rows = image_cases(spec, s) + corruption_cases(spec, s) + suite_case(spec, s) + scoring_case(s)
    report = {"device": s.device, "quick": s.quick, "seconds": time.perf_counter() - t0, "rows": rows,
              "hardware": _hardware(s)}
    (s.out / "bench_gpu.json").write_text(json.dumps(report, indent=2, default=str))
    print(table(rows))
    print(f"\n{report['hardware']}; {report['seconds']:.0f} s in all; wrote {s.out / 'bench_gpu.json'}")
    return report


def _hardware(s: Setup) -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if s.device.startswith("cuda") else None
    return {"device": s.device, "gpu": gpu, "torch": torch.__version__, "cpus": os.cpu_count()}


if __name__ == "__main__":
    main()
