"""Build the inputs behind the README's printed outputs, offline, in a folder of your choice:

    python scripts/dev/readme_demo.py DIR     # DIR/models/tiny-clip, DIR/models/tiny-clip-b, DIR/data/manifest.jsonl

The models are CLIPs built through transformers' real classes with random weights (tests/support/tiny_models.py; seeds 0
and 1, 16-d embeddings), saved with save_pretrained and loaded by vlbench as a local checkpoint. The data is 12
synthetic colour images (tests/conftest.py's write_images) with five real Flickr30k captions each
(tests/fixtures/flickr30k_excerpt.jsonl). Random weights score near chance. Then, inside DIR, the README's commands:

    vlbench run --model clip:models/tiny-clip --dataset custom:data/manifest.jsonl \\
        --perturb char-swap,shuffle-all-words --out runs/tiny-clip
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def build(folder: Path) -> None:
    from support import tiny_models
    from support.data import excerpt_rows, write_images

    for name, seed in (("tiny-clip", 0), ("tiny-clip-b", 1)):
        if not (folder / "models" / name).exists():
            tiny_models.SAVERS["clip"](folder / "models" / name, seed=seed)
    rows = excerpt_rows(12)
    names = write_images(folder / "data" / "images", len(rows))
    (folder / "data" / "manifest.jsonl").write_text(
        "".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n" for n, r in zip(names, rows)))
    print(f"wrote {folder}/models/tiny-clip, {folder}/models/tiny-clip-b and {folder}/data/manifest.jsonl")


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="the folder to build in (created if missing)")
    args = ap.parse_args(argv)
    build(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
