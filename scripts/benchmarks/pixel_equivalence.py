"""How far ``--pixels device`` is from the reference path, on real photographs.

    python scripts/benchmarks/pixel_equivalence.py [--model clip:openai/clip-vit-base-patch32] [--device cuda] [--out DIR]

The photographs are scikit-image's (skimage.data: astronaut, chelsea, coffee, rocket, the Hubble deep field,
immunohistochemistry, retina, colorwheel; camera and moon in grey), saved as JPEG (quality 90), plus its
RGBA logo as a PNG (which the device path hands to PIL). For each image the script compares:

* the pixels: the uint8 model input before normalisation from the reference path (PIL decoding, the model's
  processor on the CPU) and from the device path (torchvision's JPEG decoder and the processor's resize on
  --device): maximum and mean absolute difference in grey levels;
* the embeddings of the two: cosine similarity;
* a run: ``vlbench run`` on the photographs with a caption each, once per path: the change of every metric.

Without --model it builds a random-weight CLIP with the real ViT-B/32 preprocessing (224 px bicubic resize,
centre crop; tiny layers) through the real classes: pixel differences depend on the preprocessing, not the
weights. Prints one table; writes ``pixel_equivalence.json`` under --out. tests/integration/test_pixel_cache.py
runs it on the CPU; docs/performance.md holds the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny-model builders (tests/support)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: skimage.data name -> a caption; grey ones are saved as grey JPEGs (the decoder makes them RGB)
PHOTOS = {"astronaut": "an astronaut in a white space suit in front of a flag",
          "chelsea": "a tabby cat looking to the side", "coffee": "a cup of coffee on a saucer",
          "rocket": "a rocket on a launch pad", "hubble_deep_field": "galaxies in the dark of deep space",
          "immunohistochemistry": "stained tissue under a microscope", "retina": "the back of a human eye",
          "colorwheel": "a wheel of colours", "camera": "a man with a camera on a tripod",
          "moon": "the surface of the moon"}
PNG = ("logo", "the scikit-image logo")


def write_photos(folder: Path, quality: int = 90) -> Path:
    """The photographs as files (JPEG, one PNG) and a manifest with a caption each; returns the manifest."""
    import skimage.data as skdata
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, caption in PHOTOS.items():
        Image.fromarray(getattr(skdata, name)()).save(folder / f"{name}.jpg", quality=quality)
        rows.append({"image": f"{name}.jpg", "captions": [caption]})
    Image.fromarray(getattr(skdata, PNG[0])()).save(folder / f"{PNG[0]}.png")
    rows.append({"image": f"{PNG[0]}.png", "captions": [PNG[1]]})
    (folder / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "manifest.jsonl"


def build_clip224(folder: Path) -> str:
    """A random-weight CLIP with ViT-B/32's preprocessing (224, bicubic, centre crop) and tiny layers."""
    import torch
    from support.tiny_models import _clip_tokenizer, _text_kw
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    cfg = CLIPConfig(text_config=_text_kw(49408), projection_dim=16,
                     vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                        num_attention_heads=4, image_size=224, patch_size=32))
    CLIPModel(cfg).save_pretrained(folder)
    _clip_tokenizer(folder.parent).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(folder)
    return f"clip:{folder}"


def compare_pixels(spec: str, manifest: Path, device: str) -> list[dict]:
    """Per image: pixel max / mean absolute difference (grey levels) and the embeddings' cosine."""
    import torch

    from vlbench.encoding.device_pixels import DeviceBatches
    from vlbench.encoding.encode import EncodeStats
    from vlbench.encoding.images import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device=device)
    paths = [str(manifest.parent / json.loads(line)["image"]) for line in manifest.read_text().splitlines()]
    ref = torch.stack([adapter.to_pixels(load_image(p)) for p in paths]).to(device)
    dev, _ = DeviceBatches(adapter, [], {}, EncodeStats()).pixels_of(paths)
    diff = (ref.int() - dev.int()).abs().cpu()
    with torch.inference_mode():
        a = torch.nn.functional.normalize(adapter.encode_images(adapter.from_pixels(ref)).float(), dim=1)
        b = torch.nn.functional.normalize(adapter.encode_images(adapter.from_pixels(dev)).float(), dim=1)
    cos = (a * b).sum(dim=1).cpu()
    return [{"image": Path(p).name, "max_abs": int(diff[i].max()), "mean_abs": round(float(diff[i].float().mean()), 4),
             "cosine": round(float(cos[i]), 6)} for i, p in enumerate(paths)]


def compare_runs(spec: str, manifest: Path, device: str, out: Path) -> list[dict]:
    """Every metric of a run on the photographs, per path, and its change (device - reference)."""
    import vlbench

    vals = {}
    for path in ("reference", "device"):
        res = vlbench.run(model=spec, dataset=f"custom:{manifest}", out=str(out / f"run-{path}"), no_cache=True,
                          quiet=True, num_workers=0, n_boot=20, device=device, pixels=path)
        vals[path] = {(v.condition, v.key.direction, v.key.metric, v.key.k): v.value for v in res.record.values}
    return [{"metric": f"{d} {m}" + (f"@{k}" if k is not None else ""), "reference": vals["reference"][key],
             "device": vals["device"][key], "change": vals["device"][key] - vals["reference"][key]}
            for key in vals["reference"] for _, d, m, k in [key]]


def table(pixels: list[dict], metrics: list[dict], device: str) -> str:
    lines = [f"pixel path: device ({device}) vs reference; {len(pixels)} images", "",
             "| image | max abs (grey levels) | mean abs | embedding cosine |", "|---|---:|---:|---:|"]
    lines += [f"| {r['image']} | {r['max_abs']} | {r['mean_abs']:.4f} | {r['cosine']:.6f} |" for r in pixels]
    worst = max(metrics, key=lambda r: abs(r["change"]))
    lines += ["", f"metrics of a run: {len(metrics)} values, {sum(r['change'] != 0 for r in metrics)} changed; "
                  f"largest change {worst['change']:+.4f} ({worst['metric']})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model spec (default: a random CLIP with ViT-B/32's preprocessing)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="folder for the photographs, runs and JSON (default: a temp folder)")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="vlbench-pixels-"))
    manifest = write_photos(out / "photos")
    spec = args.model or build_clip224(out / "clip224")
    pixels = compare_pixels(spec, manifest, args.device)
    metrics = compare_runs(spec, manifest, args.device, out)
    report = {"model": spec if args.model else "random CLIP, ViT-B/32 preprocessing", "device": args.device,
              "pixels": pixels, "metrics": metrics}
    (out / "pixel_equivalence.json").write_text(json.dumps(report, indent=2))
    print(table(pixels, metrics, args.device))
    print(f"wrote {out / 'pixel_equivalence.json'}")
    return report


if __name__ == "__main__":
    main()
