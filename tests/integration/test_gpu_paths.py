"""What runs on a CUDA device, checked there (marked ``gpu``: skipped with the reason on a machine without one; on
CI with a GPU, VLBENCH_REQUIRE_TOOLS=cuda makes a missing device a failure instead).

* Scoring on the GPU (``EmbeddingSource(..., device="cuda")``) in one piece and in blocks (``score_block``,
  several shapes, some cutting inside a 256-column tile) gives the same per-query values and records bit for bit,
  on real-valued normalised embeddings with bit-identical duplicate vectors and near ties: blocks are another
  schedule of the same products on one device, never other numbers.
* ``--pixels device`` on the GPU (nvJPEG): every image encoded, the path in the identity, JPEGs decoded on the
  device and the PNG through PIL; the PNG's pixels equal PIL's exactly and the JPEGs' within a few grey levels,
  and every metric of the run is compared with the PIL run beside it within the stated one-query tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.data import write_manifest
from support.sharded_gallery import per_query

pytestmark = pytest.mark.gpu


def _real_valued_gallery(n_images: int, n_captions: int, dim: int, seed: int):
    """Normalised float32 vectors (no coarse grid: products round), every 97th image a bit-identical copy of
    image 3, a third of the captions their image's vector plus a 1e-7 nudge (near ties at the top)."""
    rng = np.random.default_rng(seed)
    img = rng.standard_normal((n_images, dim)).astype(np.float32)
    img[5::97] = img[3]
    c2i = rng.integers(0, n_images // 4, n_captions)
    txt = rng.standard_normal((n_captions, dim)).astype(np.float32)
    txt[::3] = img[c2i[::3]] + np.float32(1e-7) * rng.standard_normal((len(c2i[::3]), dim)).astype(np.float32)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img, txt, c2i


@pytest.mark.parametrize("dim", [64, 512])
def test_one_piece_and_blocks_give_the_same_numbers_bit_for_bit_on_cuda(dim):
    from vlbench.metrics.compute import EmbeddingSource, evaluate

    img, txt, c2i = _real_valued_gallery(3_000, 800, dim, seed=dim)
    kw = dict(k=(1, 5, 10), block_bytes=1 << 20)
    whole = evaluate(EmbeddingSource(img, txt, device="cuda"), c2i, **kw)
    for block in ("2x256", "7x300", "3x999", "64x1000"):
        cut = evaluate(EmbeddingSource(img, txt, device="cuda"), c2i, score_block=block, **kw)
        a, b = per_query(whole), per_query(cut)
        assert a.keys() == b.keys()
        for key in a:
            assert np.array_equal(a[key], b[key]), (block, key)
        assert whole.records() == cut.records(), block


def pixel_differences(model: str, paths: list[str], device: str):
    """|PIL pixels - device pixels| per image (grey levels, images x channels x H x W) as the model sees them."""
    import torch

    from vlbench.encoding.device_pixels import DeviceBatches
    from vlbench.encoding.encode import EncodeStats
    from vlbench.encoding.images import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(model, device=device)
    pil = torch.stack([adapter.to_pixels(load_image(p)) for p in paths]).to(device)
    on_device, _ = DeviceBatches(adapter, [], {}, EncodeStats()).pixels_of(paths)
    return (pil.int() - on_device.int()).abs().cpu()


def test_the_device_pixel_path_runs_on_cuda(tiny_models, tmp_path):
    from PIL import Image

    from vlbench.pipeline.runner import run

    man = write_manifest(tmp_path / "data", 12, fmt="jpg")
    rows = [json.loads(line) for line in man.read_text().splitlines()]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for i, r in enumerate(rows):
        name = f"{i:03d}." + ("png" if i == 3 else "jpg")
        Image.open(man.parent / r["image"]).save(mixed / name)
        r["image"] = name
    (mixed / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw = dict(model=f"clip:{tiny_models('clip', seed=0)}", dataset=f"custom:{mixed / 'm.jsonl'}", quiet=True,
              num_workers=0, n_boot=10, batch_size=5, device="cuda", cache_dir=str(tmp_path / "cache"))
    ref = run(out=str(tmp_path / "ref"), **kw).results
    dev = run(out=str(tmp_path / "dev"), pixels="device", **kw).results
    diff = pixel_differences(kw["model"], [str(mixed / r["image"]) for r in rows], "cuda")
    assert int(diff[3].max()) == 0, "the PNG goes through PIL on both paths: the same pixels"
    assert int(diff.max()) <= 8 and float(diff.float().mean()) <= 1.0, (int(diff.max()), float(diff.float().mean()))
    assert dev["model"]["hash"] != ref["model"]["hash"] and dev["model"]["identity"]["pixels"] == "device"
    assert dev["encoding"]["images_encoded"] == 12 and dev["encoding"]["images_device_decoded"] == 11
    assert [(r["condition"], r["direction"], r["metric"], r.get("k")) for r in dev["results"]] == \
        [(r["condition"], r["direction"], r["metric"], r.get("k")) for r in ref["results"]]
    # against the PIL run it was computed beside: the PNG is decoded by PIL on both paths (its pixels and vector
    # are the same bits); the JPEGs by nvJPEG, a few grey levels from libjpeg (docs/performance.md), which may move
    # a query across a near tie. Stated tolerance: every record within what one query per direction can move
    # (percent metrics: 100 / queries points; nDCG: 1 / queries; MeanR: candidates / queries; MedR: candidates;
    # RSUM: the sum of its six recalls' bounds; signed DCG_CM: finite); the record list and the counts exactly.
    n_queries = {"t2i": 60, "i2t": 12}  # 12 images, 60 captions
    n_candidates = {"t2i": 12, "i2t": 60}
    ref_values = {(r["condition"], r["direction"], r["metric"], r.get("k")): r["value"] for r in ref["results"]}
    moved = []
    for r in dev["results"]:
        key = (r["condition"], r["direction"], r["metric"], r.get("k"))
        v, m, d = r["value"], r["metric"], r["direction"]
        if m == "rsum":
            bound = 3 * 100 / n_queries["t2i"] + 3 * 100 / n_queries["i2t"]
        elif m in ("recall", "r_precision", "map_at_r", "mrr", "precision", "map"):  # percent
            bound = 100 / n_queries[d]
        elif m in ("ndcg", "ndcg_binary", "ndcg_cm"):  # 0..1
            bound = 1 / n_queries[d]
        elif m in ("medr", "meanr"):
            bound = n_candidates[d] if m == "medr" else n_candidates[d] / n_queries[d]
        else:  # signed DCG_CM and other unbounded sums: no per-query bound to state; finite
            bound = float("inf")
        assert np.isfinite(v) and abs(v - ref_values[key]) <= bound + 1e-9, (key, v, ref_values[key], bound)
        moved += [key] if v != ref_values[key] else []
    print(f"--pixels device on cuda: {len(moved)} of {len(dev['results'])} records moved against the PIL run: {moved}")
