"""Encoding cost of an MLLM embedder (``gme``/``vlm2vec`` on Qwen2-VL) through vlbench, beside a bare loop of the
model's own forward over the same inputs in the same batch size, in one process.

The model is a random-weight ``Qwen2VLForConditionalGeneration`` of a realistic shape that the CPU can still run:
by default the language model of Qwen2-0.5B (hidden 896, 24 layers, 14 heads, 2 key-value heads, MLP 4864) and
an 8-layer, 640-wide vision tower (Qwen2-VL-2B: a 1536 x 28 language model and a 1280 x 32 vision tower, about
2.2 B parameters, too slow for this machine's two shared cores), saved with a processor whose tokenizer is a small
byte-level BPE trained here (tests/support/tiny_qwen2vl.py; no download), loaded through vlbench (``FAMILY:FOLDER``).
Images are bounded by ``--max-pixels`` (default 64 x 28 x 28: 64 visual tokens each).

Measured:

* vlbench: ``encode_images`` / ``encode_texts`` of vlbench's encoding path (DataLoader preprocessing in this
  process, no cache) on ``--n`` images and ``--n`` captions, batches of ``--batch-size``;
* the yardstick: the model card's call, ``processor(text=prompts, images=batch, padding=True)`` then the model's
  forward and the last token of each row, over the same inputs in the same batches; the largest difference of the
  vectors is printed too.

usage: python scripts/benchmarks/bench_mllm.py [--family gme] [--n 16] [--batch-size 8] [--threads 2]
       [--hidden 896] [--layers 24] [--max-pixels 50176] [--json out.json]
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

CAPTIONS = ("a man in a red shirt rides a brown horse along the beach near two dogs",
            "two dogs play in the snow", "a woman with an umbrella waits for a blue bus on a long street",
            "a red car parked near a building")


def _bare(model, processor, fmt, images, captions, batch_size):
    """The model card's way, batched: the processor on prompts and images, the forward, the last real token."""
    import torch

    def pool(inputs):
        with torch.inference_mode():
            hidden = model(**inputs, output_hidden_states=True).hidden_states[-1].float()
        mask = inputs["attention_mask"]
        last = (mask.long() * torch.arange(1, mask.shape[1] + 1)).argmax(1)
        return torch.nn.functional.normalize(hidden[torch.arange(len(hidden)), last], dim=-1)

    out_img, out_txt = [], []
    for a in range(0, len(images), batch_size):
        part = images[a:a + batch_size]
        prompt = fmt.image_prompt(fmt.image_instruction)
        out_img.append(pool(processor(text=[prompt] * len(part), images=part, padding=True, return_tensors="pt")))
    for a in range(0, len(captions), batch_size):
        prompts = [fmt.text_prompt(c, fmt.text_instruction) for c in captions[a:a + batch_size]]
        out_txt.append(pool(processor(text=prompts, padding=True, return_tensors="pt")))
    return torch.cat(out_img).numpy(), torch.cat(out_txt).numpy()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="gme", choices=["gme", "vlm2vec"])
    ap.add_argument("--n", type=int, default=16, help="images and captions each")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--intermediate", type=int, default=4864)
    ap.add_argument("--vision-depth", type=int, default=8)
    ap.add_argument("--vision-dim", type=int, default=640)
    ap.add_argument("--max-pixels", type=int, default=64 * 28 * 28)
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    import transformers as T
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from support.tiny_qwen2vl import save_tiny_qwen2vl

    from vlbench.encoding.encode import encode_images, encode_texts
    from vlbench.models.adapter import load_model

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    out: dict = {"family": args.family, "n": args.n, "batch_size": args.batch_size, "threads": args.threads,
                 "max_pixels": args.max_pixels, "uptime_before": subprocess.run(["uptime"], capture_output=True,
                                                                                 text=True).stdout.strip()}
    captions = [f"{CAPTIONS[i % len(CAPTIONS)]} {'and more' * (i % 3)}".strip() for i in range(args.n)]
    with tempfile.TemporaryDirectory(prefix="vlbench-bench-mllm-") as tmp:
        folder = save_tiny_qwen2vl(Path(tmp) / "model", hidden=args.hidden, layers=args.layers, heads=args.heads,
                                   intermediate=args.intermediate, vision_depth=args.vision_depth,
                                   vision_dim=args.vision_dim, min_pixels=28 * 28, max_pixels=args.max_pixels)
        paths = []
        for i in range(args.n):
            p = Path(tmp) / f"img{i:03d}.png"
            Image.fromarray(rng.integers(0, 256, (300 + 7 * i, 400, 3), dtype=np.uint8)).save(p)
            paths.append(p)
        spec = f"{args.family}:{folder}?min_pixels=784&max_pixels={args.max_pixels}"
        adapter = load_model(spec, device="cpu")
        model = adapter.model
        out["parameters_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)
        with Image.open(paths[0]) as first:  # warm-up (first-call allocations), outside both timings
            adapter.encode_images(adapter.collate([adapter.preprocess(first.convert("RGB"))]))
        adapter.encode_texts(captions[:1])
        t = time.perf_counter()
        vec_img = encode_images(adapter, paths, batch_size=args.batch_size, num_workers=0, progress=False)
        out["vlbench_images_s"] = time.perf_counter() - t
        t = time.perf_counter()
        vec_txt = encode_texts(adapter, captions, batch_size=args.batch_size, progress=False)
        out["vlbench_texts_s"] = time.perf_counter() - t
        processor = T.AutoProcessor.from_pretrained(folder)
        processor.image_processor.size = {"shortest_edge": 28 * 28, "longest_edge": args.max_pixels}
        processor.tokenizer.padding_side = adapter.format.padding
        images = [Image.open(p).convert("RGB") for p in paths]
        t = time.perf_counter()
        ref_img, ref_txt = _bare(model, processor, adapter.format, images, captions, args.batch_size)
        out["bare_s"] = time.perf_counter() - t
        ours_img = np.stack([vec_img[i] for i in range(args.n)])
        ours_txt = np.stack([vec_txt[i] for i in range(args.n)])
        out["max_vector_difference"] = float(max(np.abs(ours_img - ref_img).max(), np.abs(ours_txt - ref_txt).max()))
    out["vlbench_s"] = out["vlbench_images_s"] + out["vlbench_texts_s"]
    out["vlbench_over_bare"] = out["vlbench_s"] / out["bare_s"]
    out["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out["load_average"] = os.getloadavg()[0]
    for key, value in out.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
