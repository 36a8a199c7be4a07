"""A reranked run's pair stage against a bare loop of the pair model's own forward over the same pairs.

A full-size random-weight BLIP ITM (``BlipForImageTextRetrieval`` of ``BlipConfig()``'s defaults: ViT-B/16 at 384 px,
a BERT-base text tower; a BLIP processor whose tokenizer is a small WordPiece vocabulary written here, no download)
re-ranks the top K of a random-weight ViT-B/32 (``openclip:ViT-B-32/random``, the first stage, whose cost is not
measured) on ``--images`` synthetic 500x375 JPEG photos with 5 real Flickr30k captions each (tests/fixtures). In one
process, side by side:

1. ``vlbench.run(..., rerank="blip-itm:FOLDER", rerank_k=K, no_cache=True)``: the rerank stage's seconds (results.json
   ``timings.pairs.seconds``: the first-stage heads, the images decoded and encoded once, the pairs scored, the final
   ranking and its metrics, the paired bootstrap), the pairs it scored and the images it encoded;
2. the bare loop: the same pairs (recorded from the stage as it handed them to the model), the same images decoded
   and preprocessed, ``encode_images`` per chunk of ``--batch-size`` images and ``score_pairs`` in batches of
   ``--batch-size`` pairs, nothing else.

The model's weights are loaded once before both (the stage is handed that scorer; the load is printed apart).
Printed: both times, their ratio (goal <= 1.2), the pair throughput (pairs/s of the bare loop's pair forwards) and
the pair-forward cost of 1,000 queries at K = 16 and K = 128 (the image side apart: seconds per image), with the
torch threads and the load average.

usage: python scripts/benchmarks/bench_rerank.py [--images 4] [--k 4] [--batch-size 16] [--threads 1] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_STAGE = "openclip:ViT-B-32/random"


def _data(folder: Path, n: int) -> Path:
    import numpy as np
    from PIL import Image

    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl").read_text().splitlines()
            if x.strip()]
    (folder / "images").mkdir(parents=True)
    rs = np.random.RandomState(0)
    with open(folder / "m.jsonl", "w") as fh:
        for i in range(n):
            img = np.uint8(np.clip(rs.normal(128, 60, (375, 500, 3)), 0, 255))
            Image.fromarray(img).save(folder / "images" / f"{i}.jpg", quality=90)
            fh.write(json.dumps({"image": f"images/{i}.jpg", "captions": rows[i % len(rows)]["captions"]}) + "\n")
    return folder / "m.jsonl"


def _blip(folder: Path, manifest: Path) -> None:
    import torch
    import transformers as T

    words = sorted({w.strip(".,").lower() for line in manifest.read_text().splitlines()
                    for c in json.loads(line)["captions"] for w in c.split()} - {""})
    vocab = folder.parent / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + words) + "\n")
    torch.manual_seed(0)
    T.BlipForImageTextRetrieval(T.BlipConfig()).save_pretrained(folder)
    T.BlipProcessor(image_processor=T.BlipImageProcessor(size={"height": 384, "width": 384}),
                    tokenizer=T.BertTokenizer(str(vocab))).save_pretrained(folder)


def _bare(scorer, calls: list, batch_size: int) -> dict:
    """The recorded pairs through encode_images and score_pairs alone (images decoded and preprocessed here)."""
    import numpy as np

    from vlbench.encoding.images import load_image

    t0 = time.perf_counter()
    pair_s = image_s = 0.0
    n_pairs = n_images = 0
    for img, txt, texts, paths in calls:
        order = np.lexsort((txt, img))
        img, txt = img[order], txt[order]
        images = np.unique(img)
        for a in range(0, len(images), batch_size):
            chunk = images[a:a + batch_size]
            t = time.perf_counter()
            state = scorer.encode_images(scorer.collate([scorer.preprocess(load_image(paths[i])) for i in chunk]))
            image_s += time.perf_counter() - t
            lo, hi = np.searchsorted(img, chunk[0]), np.searchsorted(img, chunk[-1], side="right")
            row = np.searchsorted(chunk, img[lo:hi])
            t = time.perf_counter()
            for b in range(lo, hi, batch_size):
                scorer.score_pairs(state[row[b - lo:min(hi, b + batch_size) - lo]],
                                   [texts[j] for j in txt[b:min(hi, b + batch_size)]])
            pair_s += time.perf_counter() - t
            n_images += len(chunk)
        n_pairs += len(img)
    return {"seconds": time.perf_counter() - t0, "pair_seconds": pair_s, "image_seconds": image_s,
            "pairs": n_pairs, "images": n_images}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=4, help="synthetic photos, 5 captions each")
    ap.add_argument("--k", type=int, default=4, help="K of the rerank")
    ap.add_argument("--batch-size", type=int, default=16, help="images per encode, pairs per score_pairs call")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--rounds", type=int, default=2, help="stage + loop rounds; the last one's numbers are printed")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)

    import torch

    import vlbench
    from vlbench.datasets.core import load_dataset
    from vlbench.models.pairs import load_pair_scorer
    from vlbench.pipeline.rerank import pairs as pair_stage
    from vlbench.pipeline.rerank import stage as stage_module

    torch.set_num_threads(args.threads)
    calls: list = []
    threads_in_stage: list = []
    forward = pair_stage.PairWork._forward

    def recorded(self, img, txt, keys, texts, load):  # the pairs the stage hands to the model, as they are
        calls.append((img.copy(), txt.copy(), list(texts), paths))
        threads_in_stage.append(torch.get_num_threads())
        return forward(self, img, txt, keys, texts, load)

    with tempfile.TemporaryDirectory(prefix="vlbench-bench-rerank-") as tmp:
        manifest = _data(Path(tmp) / "data", args.images)
        folder = Path(tmp) / "blip-itm"
        _blip(folder, manifest)
        ds = load_dataset(f"custom:{manifest}")
        paths = [ds.image_path(i) for i in range(ds.n_images)]
        scorer = load_pair_scorer(f"blip-itm:{folder}", device="cpu")
        t = time.perf_counter()
        assert scorer.model is not None  # the weights, loaded once outside both timings: stage and loop share them
        load_s = time.perf_counter() - t
        given = stage_module.load_pair_scorer
        stage_module.load_pair_scorer = lambda *a, **k: scorer  # type: ignore[assignment]
        pair_stage.PairWork._forward = recorded  # type: ignore[method-assign]
        rounds = []
        try:
            for r in range(args.rounds):  # the stage, then the loop over the pairs it handed the model; again (warm)
                calls.clear()
                res = vlbench.run(model=FIRST_STAGE, dataset=f"custom:{manifest}", rerank=f"blip-itm:{folder}",
                                  rerank_k=args.k, out=str(Path(tmp) / f"run{r}"), no_cache=True, quiet=True,
                                  device="cpu", batch_size=args.batch_size, num_workers=0, threads=args.threads,
                                  n_boot=1000)
                rounds.append((res.results["timings"]["pairs"], _bare(scorer, list(calls), args.batch_size)))
        finally:
            pair_stage.PairWork._forward = forward  # type: ignore[method-assign]
            stage_module.load_pair_scorer = given  # type: ignore[assignment]
    stage, bare = rounds[-1]
    per_s = bare["pairs"] / bare["pair_seconds"]
    out = {"images": args.images, "captions": 5 * args.images, "k": args.k, "batch_size": args.batch_size,
           "threads": args.threads, "load_average_1min": os.getloadavg()[0], "weights_load_seconds": load_s,
           "stage_seconds": stage["seconds"], "stage_image_seconds": stage["image_seconds"],
           "stage_pair_seconds": stage["pair_seconds"], "stage_pairs_scored": stage["scored"],
           "stage_images_encoded": stage["images_encoded"], "bare_seconds": bare["seconds"],
           "bare_image_seconds": bare["image_seconds"], "bare_pair_seconds": bare["pair_seconds"],
           "bare_pairs": bare["pairs"], "rounds": [[round(a["seconds"], 3), round(b["seconds"], 3)] for a, b in rounds],
           "threads_in_stage": max(threads_in_stage or [0]), "threads_in_loop": torch.get_num_threads(),
           "ratio_stage_over_bare": stage["seconds"] / bare["seconds"],
           "pairs_per_s": per_s, "seconds_per_image": bare["image_seconds"] / max(1, bare["images"]),
           "pair_seconds_per_1000_queries_k16": 1000 * 16 / per_s,
           "pair_seconds_per_1000_queries_k128": 1000 * 128 / per_s}
    for key, value in out.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
