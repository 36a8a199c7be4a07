"""What the numerical precision does to the numbers: the same run at fp32, TF32, bf16 and
fp16, every metric's change against fp32 and the embeddings' cosine to the fp32 ones.

    python scripts/benchmarks/precision_effects.py [--model clip:openai/clip-vit-base-patch32] [--device cuda] [--out DIR]

TF32 is fp32 with torch's float32 matmul precision "high" (TensorFloat-32 matmuls on GPUs that have them; the
run records it in results' hardware as ``float32_matmul``); fp16 and TF32 need a GPU and are skipped on the CPU,
where fp32 and bf16 run. The data are scikit-image's photographs with a caption each (scripts/
pixel_equivalence.py); without --model a random CLIP with ViT-B/32's preprocessing is built. Prints one table;
writes ``precision_effects.json`` under --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("pixel_equivalence", ROOT / "scripts" / "benchmarks" / "pixel_equivalence.py")
equivalence = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(equivalence)  # type: ignore[union-attr]  # a file next to this one

#: name -> (vlbench precision, torch float32 matmul precision)
PRECISIONS = {"fp32": ("fp32", "highest"), "tf32": ("fp32", "high"), "bf16": ("bf16", "highest"),
              "fp16": ("fp16", "highest")}


def one_run(spec: str, manifest: Path, device: str, name: str, out: Path) -> dict:
    """Every metric value of one run at precision ``name``."""
    import torch

    import vlbench

    precision, matmul = PRECISIONS[name]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)
    try:
        res = vlbench.run(model=spec, dataset=f"custom:{manifest}", out=str(out / f"run-{name}"), no_cache=True,
                          quiet=True, num_workers=0, n_boot=20, device=device, precision=precision)
    finally:
        torch.set_float32_matmul_precision(before)
    return {f"{v.key.direction} {v.key.metric}" + (f"@{v.key.k}" if v.key.k is not None else ""): v.value
            for v in res.record.values}


def image_vectors(spec: str, manifest: Path, device: str, name: str) -> np.ndarray:
    """The photographs' normalised image embeddings at precision ``name`` (the reference pixel path)."""
    import torch

    from vlbench.encoding.images import load_image
    from vlbench.models.adapter import load_model

    precision, matmul = PRECISIONS[name]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)
    try:
        adapter = load_model(spec, device=device, precision=precision)
        paths = [manifest.parent / json.loads(x)["image"] for x in manifest.read_text().splitlines()]
        batch = torch.stack([adapter.preprocess(load_image(p)) for p in paths])
        with torch.inference_mode():
            out = adapter.encode_images(batch).float()
    finally:
        torch.set_float32_matmul_precision(before)
    return torch.nn.functional.normalize(out, dim=1).cpu().numpy()


def main(argv: list[str] | None = None) -> dict:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="vlbench-precision-"))
    manifest = equivalence.write_photos(out / "photos")
    spec = args.model or equivalence.build_clip224(out / "clip224")
    names = list(PRECISIONS) if str(args.device).startswith("cuda") else ["fp32", "bf16"]
    runs = {n: one_run(spec, manifest, args.device, n, out) for n in names}
    vecs = {n: image_vectors(spec, manifest, args.device, n) for n in names}
    rows = []
    for n in names:
        changes = {m: runs[n][m] - runs["fp32"][m] for m in runs["fp32"]}
        worst = max(changes, key=lambda m: abs(changes[m]))
        cos = (vecs[n] * vecs["fp32"]).sum(axis=1)
        rows.append({"precision": n, "metrics_changed": sum(c != 0 for c in changes.values()),
                     "metrics": len(changes), "largest_change": changes[worst], "largest_change_metric": worst,
                     "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()), "values": runs[n]})
    skipped = [n for n in PRECISIONS if n not in names]
    report = {"model": spec if args.model else "random CLIP, ViT-B/32 preprocessing", "device": args.device,
              "rows": rows, "skipped": skipped}
    (out / "precision_effects.json").write_text(json.dumps(report, indent=2))
    print(f"precision effects on {args.device} ({len(manifest.read_text().splitlines())} photographs)\n")
    print("| precision | metrics changed | largest change | image embedding cosine to fp32 (min / mean) |")
    print("|---|---:|---|---|")
    for r in rows:
        print(f"| {r['precision']} | {r['metrics_changed']} of {r['metrics']} | {r['largest_change']:+.4f} "
              f"({r['largest_change_metric']}) | {r['cosine_min']:.6f} / {r['cosine_mean']:.6f} |")
    if skipped:
        print(f"\nskipped on {args.device}: {', '.join(skipped)} (GPU only)")
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
