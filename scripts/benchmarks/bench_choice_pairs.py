"""A choice set scored by a pair scorer (``vlbench run --task winoground --model blip-itm:FOLDER``), side by side with
bare loops over the same pairs, in one process on this machine.

A random-weight ``BlipForImageTextRetrieval`` (``--size small``: 6-layer, 384-wide towers at 224 px; ``full``: the
library's default configuration, ViT-B/16 at 384 px and a BERT-base text tower), saved with a BLIP processor whose
tokenizer is a small WordPiece vocabulary written here (no download), and a Winoground fixture of ``--items``
items in the released layout (noise images, captions of that vocabulary). Timed, alternately, ``--repeats`` times:

* ``vlbench``: the whole run (``run_task``, ``--no-cache``: load, hash the images, encode each image once, score the
  4 pairs of each item, the set's scores, results.json), and its two stages (encode_images, score_pairs);
* ``bare batched``: the same scorer's ``encode_images`` on every image in one batch and ``score_pairs`` on the pairs
  in batches of ``--batch-size`` (no files written, no hashing);
* ``model card``: ``model(**processor(images=, text=), use_itm_head=True)`` per pair (the vision tower runs for
  every pair), unless ``--no-card``.

The machine may be shared: the threads and the load average are printed with the numbers.

usage: python scripts/benchmarks/bench_choice_pairs.py [--items 20] [--size small|full] [--repeats 2]
       [--batch-size 64] [--threads 2] [--no-card]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

WORDS = "a man riding horse on beach two dogs play in the snow red car parked near building woman with".split()


def _build(folder: Path, size: str) -> None:
    import torch
    import transformers as T

    vocab = folder.parent / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + sorted(set(WORDS))) + "\n")
    tok = T.BertTokenizer(str(vocab))
    torch.manual_seed(0)
    if size == "full":
        cfg, image_size = T.BlipConfig(), 384
    else:
        tower = dict(hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=6)
        cfg = T.BlipConfig(text_config=dict(vocab_size=len(tok), max_position_embeddings=64, encoder_hidden_size=384,
                                            bos_token_id=2, sep_token_id=3, pad_token_id=0, **tower),
                           vision_config=dict(image_size=224, patch_size=16, **tower), projection_dim=256)
        image_size = 224
    T.BlipForImageTextRetrieval(cfg).save_pretrained(folder)
    T.BlipProcessor(image_processor=T.BlipImageProcessor(size={"height": image_size, "width": image_size}),
                    tokenizer=tok).save_pretrained(folder)


def _winoground(root: Path, n: int) -> list[tuple[Path, str]]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    lines, pairs = [], []
    for k in range(n):
        w = list(rng.choice(WORDS, 6))
        caps = (" ".join(w), " ".join(w[::-1]))
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": caps[0],
                                 "caption_1": caps[1], "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": "Object"}))
        for j in (0, 1):
            path = root / "images" / f"ex_{k}_img_{j}.png"
            Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(path)
            pairs += [(path, c) for c in caps]
    (root / "examples.jsonl").write_text("\n".join(lines) + "\n")
    return pairs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--size", default="small", choices=["small", "full"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-card", action="store_true", help="skip the model card's per-pair loop")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    import transformers as T
    from PIL import Image

    from vlbench.models.pairs import load_pair_scorer
    from vlbench.tasks.run import run_task

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "blip"
        _build(folder, args.size)
        pairs = _winoground(root / "data" / "winoground", args.items)
        images = list(dict.fromkeys(p for p, _ in pairs))
        scorer = load_pair_scorer(f"blip-itm:{folder}")
        model = T.BlipForImageTextRetrieval.from_pretrained(folder).eval()
        processor = T.AutoProcessor.from_pretrained(folder)

        def bare_batched():
            state = scorer.encode_images(scorer.collate([scorer.preprocess(Image.open(p).convert("RGB"))
                                                         for p in images]))
            row = np.array([images.index(p) for p, _ in pairs])
            texts = [t for _, t in pairs]
            return np.concatenate([scorer.score_pairs(state[row[a:a + args.batch_size]], texts[a:a + args.batch_size])
                                   for a in range(0, len(texts), args.batch_size)])

        def card():
            with torch.no_grad():
                return [float(torch.softmax(model(**processor(images=Image.open(p).convert("RGB"), text=t,
                                                              return_tensors="pt"), use_itm_head=True).itm_score,
                                            dim=1)[0, 1]) for p, t in pairs]

        got: dict[str, list[float]] = {"vlbench": [], "vlbench encode_images": [], "vlbench score_pairs": [],
                                       "bare batched": [], **({} if args.no_card else {"model card": []})}
        for k in range(args.repeats):
            t = time.perf_counter()
            res = run_task(task="winoground", model=f"blip-itm:{folder}", data_dir=str(root / "data"),
                           out=str(root / f"run{k}"), no_cache=True, quiet=True, num_workers=0,
                           batch_size=args.batch_size)
            got["vlbench"].append(time.perf_counter() - t)
            for stage, s in res.results["encoding"]["seconds"].items():
                got[f"vlbench {stage}"].append(s)
            t = time.perf_counter()
            bare_batched()
            got["bare batched"].append(time.perf_counter() - t)
            if not args.no_card:
                t = time.perf_counter()
                card()
                got["model card"].append(time.perf_counter() - t)
    print(f"{args.items} items, {len(images)} images, {len(pairs)} pairs; BLIP ITM {args.size}; {args.threads} "
          f"threads; load average {os.getloadavg()[0]:.1f}")
    print("| path | seconds (each repeat) | best |\n|---|---|---:|")
    for name, v in got.items():
        print(f"| {name} | {', '.join(f'{x:.2f}' for x in v)} | {min(v):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
