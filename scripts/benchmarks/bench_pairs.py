"""Pair-scoring throughput of a full-size random-weight BLIP ITM on this machine, beside a bare loop of the
model's own forward over the same pairs.

A ``BlipForImageTextRetrieval`` of the library's default (full-size) configuration -- ViT-B/16 at 384 px, a
BERT-base text tower -- with random weights, saved with a BLIP processor whose tokenizer is a small WordPiece
vocabulary written here (no download), loaded through vlbench (``blip-itm:FOLDER``). Measured, in one process:

* ``encode_images``: the vision tower once per image (what a rerank does once per image and condition);
* ``score_pairs``: ``--pairs`` pairs (``--images`` images, each with its share of one caption) in batches of
  ``--batch-size``, from those image embeddings;
* the yardstick: the model card's call, ``model(**processor(images=, text=), use_itm_head=True)``, over the same
  pairs in the same batch size (it runs the vision tower for every pair), and the largest score difference.

Printed: seconds, pairs per second, and the pair-forward cost of 1,000 queries at K = 16 and K = 128 (K pair
scores per query; the image side's cost is once per image and is given apart). The machine may be shared:
the threads and the load average are printed with the numbers.

usage: python scripts/benchmarks/bench_pairs.py [--pairs 32] [--images 4] [--batch-size 16] [--threads 1]
       [--precision fp32|bf16] [--device cpu] [--no-bare] [--options score=itm-logit+itc] [--json out.json]

``--options``: the pair scorer's options (docs/models.md, "BLIP's and BLIP-2's protocols"), e.g.
``score=itm-logit+itc`` (BLIP's own score: one more text-encoder pass per pair for the ITC cosine); the
model-card yardstick computes p(match), so it runs only without options. ``--vs-options OPTS --repeats R``: the
default scorer and one with OPTS (the same weights) score the same pairs alternately R times, in one process, and
the smallest time of each and their ratio are printed (alternating cancels much of a shared machine's drift).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

CAPTION = "a man in a red shirt rides a brown horse along the beach near two dogs"


def _build(folder: Path, image_size: int) -> None:
    import torch
    import transformers as T

    words = sorted(set(CAPTION.split()))
    vocab = folder.parent / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + words) + "\n")
    torch.manual_seed(0)
    cfg = T.BlipConfig()
    cfg.vision_config.image_size = image_size
    T.BlipForImageTextRetrieval(cfg).save_pretrained(folder)
    processor = T.BlipProcessor(image_processor=T.BlipImageProcessor(size={"height": image_size,
                                                                           "width": image_size}),
                                tokenizer=T.BertTokenizer(str(vocab)))
    processor.save_pretrained(folder)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=384)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-bare", action="store_true", help="skip the model-card yardstick")
    ap.add_argument("--options", default="", help="the pair scorer's options, e.g. score=itm-logit+itc")
    ap.add_argument("--vs-options", default="", help="time the default scorer against one with these options")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    import transformers as T
    from PIL import Image

    from vlbench.models.pairs import load_pair_scorer

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)) for _ in range(args.images)]
    idx = np.arange(args.pairs) % args.images
    texts = [CAPTION] * args.pairs
    out: dict = {"pairs": args.pairs, "images": args.images, "batch_size": args.batch_size, "threads":
                 args.threads, "precision": args.precision, "device": args.device,
                 "load_average": os.getloadavg()[0], "options": args.options}
    with tempfile.TemporaryDirectory(prefix="vlbench-bench-pairs-") as tmp:
        folder = Path(tmp) / "blip-itm"
        _build(folder, args.image_size)
        spec = f"blip-itm:{folder}" + (f"?{args.options}" if args.options else "")
        scorer = load_pair_scorer(spec, device=args.device, precision=args.precision)
        model = scorer.model
        out["parameters_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)
        pixels = scorer.collate([scorer.preprocess(im) for im in images])
        t = time.perf_counter()
        state = scorer.encode_images(pixels)
        out["encode_s_per_image"] = (time.perf_counter() - t) / args.images
        t = time.perf_counter()
        scores = np.concatenate([scorer.score_pairs(state[idx[a:a + args.batch_size]], texts[a:a + args.batch_size])
                                 for a in range(0, args.pairs, args.batch_size)])
        out["pairs_s"] = time.perf_counter() - t
        out["pairs_per_s"] = args.pairs / out["pairs_s"]
        if args.vs_options:
            _versus(out, scorer, load_pair_scorer(f"blip-itm:{folder}?{args.vs_options}", device=args.device,
                                                  precision=args.precision), state, idx, texts, args)
        for k in (16, 128):
            out[f"pair_seconds_per_1000_queries_k{k}"] = 1000 * k / out["pairs_per_s"]
        if not args.no_bare and not args.options:
            processor = T.AutoProcessor.from_pretrained(folder)
            ref = []
            t = time.perf_counter()
            for a in range(0, args.pairs, args.batch_size):
                part = idx[a:a + args.batch_size]
                inputs = processor(images=[images[i] for i in part], text=texts[a:a + len(part)],
                                   return_tensors="pt", padding=True).to(args.device)
                inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
                with torch.inference_mode():
                    logits = model(**inputs, use_itm_head=True).itm_score
                ref.append(torch.softmax(logits.float(), dim=1)[:, 1].cpu().numpy())
            out["bare_s"] = time.perf_counter() - t
            out["bare_over_vlbench"] = out["bare_s"] / out["pairs_s"]
            out["max_score_difference"] = float(np.abs(np.concatenate(ref) - scores).max())
    for key, value in out.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def _versus(out: dict, plain, other, state, idx, texts, args) -> None:
    """The default scorer and ``other`` (its options) over the same pairs, alternately, the best time of each."""
    import numpy as np

    other._model = plain.model  # the same weights: only the score's computation differs
    best = {"default": float("inf"), "options": float("inf")}
    for _ in range(args.repeats):
        for name, sc in (("default", plain), ("options", other)):
            t = time.perf_counter()
            np.concatenate([sc.score_pairs(state[idx[a:a + args.batch_size]], texts[a:a + args.batch_size])
                            for a in range(0, args.pairs, args.batch_size)])
            best[name] = min(best[name], time.perf_counter() - t)
    out["vs_options"] = args.vs_options
    out["best_default_s"], out["best_options_s"] = best["default"], best["options"]
    out["options_over_default"] = best["options"] / best["default"]


if __name__ == "__main__":
    raise SystemExit(main())
