"""Paths, the committed caption excerpts, synthetic images and tiny custom-dataset manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
EXCERPT = FIXTURES / "flickr30k_excerpt.jsonl"  # 12+ Flickr30k images' real captions (5 each)
CAPTIONS_EXCERPT = FIXTURES / "captions_excerpt.jsonl"  # 300 captions for the perturbation tests

#: data that is not part of the repository (real caption files, NLTK tokenizer/tagger copies); on the project's
#: machines it sits beside the checkout. Tests that need it skip with the path they looked at.
SHARED_DATA = Path(os.environ.get("VLBENCH_SHARED_DATA", ROOT.parent / "shared" / "data"))
SHARED_CAPTIONS = Path(os.environ.get("VLBENCH_SHARED_CAPTIONS", SHARED_DATA / "captions"))
SHARED_NLTK = SHARED_DATA / "nltk"


def write_images(folder: Path, n: int, seed: int = 0, fmt: str = "png") -> list[str]:
    """``n`` small noisy images of distinct sizes and mean colours: ``img000.png``, ``img001.png``, ..."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    names = []
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        base = rng.integers(0, 255, size=3)
        arr = np.clip(base + rng.normal(0, 40, size=(24 + i, 30, 3)), 0, 255).astype(np.uint8)
        name = f"img{i:03d}.{fmt}"
        Image.fromarray(arr).save(folder / name)
        names.append(name)
    return names


def excerpt_rows(n: int | None = None) -> list[dict]:
    """The first ``n`` rows (all when None) of the Flickr30k excerpt: ``{"image": ..., "captions": [5]}``."""
    rows = [json.loads(x) for x in EXCERPT.read_text().splitlines() if x.strip()]
    return rows[:n] if n else rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    """A JSON-lines manifest, one row per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_manifest(folder: Path, n: int = 12, *, name: str = "manifest.jsonl", images: str = "images",
                   seed: int = 0, fmt: str = "png", start: int = 0) -> Path:
    """A tiny custom dataset: ``n`` synthetic images (write_images) under ``folder/images`` (``images=""``:
    beside the manifest) with the real captions of excerpt rows ``start..start+n``. Returns the manifest path."""
    rows = excerpt_rows()[start:start + n]
    img_dir = folder / images if images else folder
    names = write_images(img_dir, len(rows), seed=seed, fmt=fmt)
    prefix = f"{images}/" if images else ""
    return write_rows(folder / name, [{"image": prefix + f, "captions": r["captions"]} for f, r in zip(names, rows)])


def read_counts(path: Path) -> dict:
    """Items a counting plug-in encoded, by kind, from its count log."""
    out = {"images": 0, "texts": 0}
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out[rec["kind"]] += rec["n"]
    return out


def pixels_bytes(image) -> bytes:
    """The raw pixels of a PIL image (to compare corrupted images byte for byte)."""
    import numpy as np

    return np.asarray(image).tobytes()


class InputOf32:
    """A stand-in adapter whose preprocessing makes 3 x 32 x 32 inputs (binds the corruption geometry)."""

    @staticmethod
    def preprocess(image):
        import numpy as np

        return np.zeros((3, 32, 32))


def corrupted_image_hashes(ds, transforms, workers: int) -> tuple[list, list[str]]:
    """(jobs, sha256 of each corrupted image) as the encoder makes them: image-major jobs (consecutive jobs share
    the decoded image) through vlbench's DataLoader dataset with ``workers`` worker processes."""
    import hashlib

    import torch

    from vlbench.encoding.encode import file_key
    from vlbench.encoding.variant_images import _VariantImages

    for t in transforms:
        t.bind(InputOf32())
    jobs = [(str(ds.image_path(i)), i, file_key(ds.image_path(i)), t) for i in range(ds.n_images) for t in transforms]
    loader = torch.utils.data.DataLoader(_VariantImages(jobs, pixels_bytes), batch_size=5, num_workers=workers,
                                         collate_fn=list)
    return jobs, [hashlib.sha256(b).hexdigest() for batch in loader for b in batch]
