"""`vlbench run --task colorswap|bivlc` end to end on fixtures in the Hub's parquet layout: every recorded similarity
and score equals a computation that encodes each image and caption on its own and applies the papers' rules here;
the blind (text-only) value of every score is recorded beside it; a hand-worked colour case with ties."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from support.hub_datasets import parquet_bytes, png_bytes
from support.pair_sets import BIVLC_CAPTIONS, COLORSWAP_CAPTIONS, noise_png, write_bivlc, write_colorswap

from vlbench.cli import main


def _rows(out: Path) -> list[dict]:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def _encoder(spec, tmp: Path):
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device="cpu")

    def image(data: bytes):
        path = tmp / f"probe-{abs(hash(data))}.png"
        path.write_bytes(data)
        v = np.asarray(adapter.encode_images(torch.stack([adapter.preprocess(load_image(path))])).float())[0]
        return v / np.linalg.norm(v)

    def text(t):
        v = np.asarray(adapter.encode_texts([t]).float())[0]
        return v / np.linalg.norm(v)

    return image, text


@pytest.fixture
def data_dir(blind_data_dir):
    """A data folder with the blind baseline's COCO captions and BiVLC's test split in the Hub layout."""
    root = blind_data_dir
    write_bivlc(root)
    write_colorswap(root)
    return root


def test_bivlc_run_scores_both_directions_as_the_papers_rule_on_a_tiny_model(tiny_models, data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "bv"
    assert main(["run", "--task", "bivlc", "--model", spec, "--data-dir", str(data_dir), "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    image, text = _encoder(spec, tmp_path)
    rows = {r["item_id"]: r for r in _rows(out)}
    flags = []
    for k, (c0, c1, _) in enumerate(BIVLC_CAPTIONS):
        imgs = [image(noise_png(2 * k)), image(noise_png(2 * k + 1))]  # I0 = image, I1 = negative_image
        caps = [text(c0), text(c1)]
        s = np.array([[c @ v for v in imgs] for c in caps])  # s[i, j] = s(caption i, image j)
        assert json.loads(rows[str(k)]["scores"]) == pytest.approx([s[0, 0], s[1, 0], s[0, 1], s[1, 1]], abs=1e-5)
        ipos, ineg, tpos, tneg = s[0, 0] > s[1, 0], s[1, 1] > s[0, 1], s[0, 0] > s[0, 1], s[1, 1] > s[1, 0]
        flags.append((ipos, ineg, tpos, tneg, ipos and ineg, tpos and tneg, ipos and ineg and tpos and tneg))
    f = np.array(flags, dtype=float)
    # the tiny CLIP barely tells noise images apart, so its composite scores are 0 here; the single comparisons
    # vary, and the hand-worked colour runs below check non-zero composite scores through a whole run
    assert 0 < f[:, :4].mean() < 1
    got = {r["metric"]: r for r in doc["results"] if r["condition"] == "task:bivlc"}
    for j, m in enumerate(("ipos_2t", "ineg_2t", "tpos_2i", "tneg_2i", "i2t_score", "t2i_score", "accuracy")):
        assert got[m]["value"] == pytest.approx(100 * f[:, j].mean()), m
    assert got["accuracy"]["n"] == len(BIVLC_CAPTIONS) and got["chance"]["value"] == pytest.approx(100 / 6)
    assert got["i2t_score_chance"]["value"] == got["t2i_score_chance"]["value"] == 25.0
    # the blind baseline beside every score: 0 for I2T, T2I and group by design; Ipos_2T can be won by text alone
    assert got["blind_i2t_score"]["value"] == got["blind_t2i_score"]["value"] == got["blind_accuracy"]["value"] == 0
    assert got["blind_tpos_2i"]["value"] == 0 and got["blind_ipos_2t"]["value"] + got["blind_ineg_2t"]["value"] <= 100
    assert doc["task"]["blind_baseline"]["available"] and doc["dataset"]["n_images"] == 2 * len(BIVLC_CAPTIONS)
    assert doc["conditions"]["task:bivlc"]["by_kind"]["replace"]["n"] == 3
    table = (out / "table.md").read_text()
    assert "I2T %" in table and "T2I %" in table and table.index("I2T %") < table.index("T2I %")


def test_colorswap_run_scores_equal_the_papers_rule_on_a_tiny_model(tiny_models, data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "cs"
    assert main(["run", "--task", "colorswap", "--model", spec, "--data-dir", str(data_dir), "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    image, text = _encoder(spec, tmp_path)
    flags = []
    for k, (c1, c2, _) in enumerate(COLORSWAP_CAPTIONS):  # image_k / caption_k of id k (write_colorswap's seeds)
        imgs = [image(noise_png(100 + 2 * k)), image(noise_png(100 + 2 * k + 1))]
        s = np.array([[text(c) @ v for v in imgs] for c in (c1, c2)])
        t, i = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1], s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
        flags.append((t, i, t and i))
    f = np.array(flags, dtype=float)
    got = {r["metric"]: r for r in doc["results"] if r["condition"] == "task:colorswap:test"}
    assert [got[m]["value"] for m in ("text_score", "image_score", "accuracy")] == pytest.approx(100 * f.mean(axis=0))
    assert got["blind_text_score"]["value"] == got["blind_image_score"]["value"] == got["blind_accuracy"]["value"] == 0
    assert doc["dataset"]["n_items"] == len(COLORSWAP_CAPTIONS) and doc["dataset"]["split"] == "test"


RED, GREEN, BLUE, GREY = (255, 0, 0), (0, 255, 0), (0, 0, 255), (128, 128, 128)


CASES = [(RED, GREEN, "a red cup on a green table", "a green cup on a red table"),
         (RED, BLUE, "a red mug", "a plain mug"), (RED, GREY, "a red bowl", "a blue bowl"),
         (RED, BLUE, "a plain hat", "the plain hat")]


def _colour_split(task: str) -> bytes:
    """CASES in the set's Hub layout (ColorSwap: image_1 / caption_1 first; BiVLC: image / caption first)."""
    first, second = [(png_bytes(a), None) for a, _, _, _ in CASES], [(png_bytes(b), None) for _, b, _, _ in CASES]
    c0, c1 = [c for _, _, c, _ in CASES], [d for _, _, _, d in CASES]
    kinds = ["midjourney", "dalle3", "dalle3", "midjourney"]
    if task == "colorswap":
        return parquet_bytes({"id": list(range(4)), "image_1": first, "image_2": second, "caption_1": c0,
                              "caption_2": c1, "image_source": kinds, "caption_source": ["human"] * 4})
    return parquet_bytes({"image": first, "caption": c0, "negative_caption": c1, "negative_image": second,
                          "type": kinds, "subtype": ["att"] * 4})


@pytest.mark.parametrize("task", ["colorswap", "bivlc"])
def test_a_run_on_a_hand_worked_colour_case_with_ties(colour_models, tmp_path, task):
    """colour-vec (tests/support/colour_model.py): an image is its mean colour, a caption its first colour word
    (none: (1, 1, 1)); cosines, so every similarity is exact. Rows c0, c1; columns I0, I1:

    0. red / green images, "a red cup on a green table" / "a green cup on a red table": [[1, 0], [0, 1]]  all
    1. red / blue images, "a red mug" / "a plain mug":        [[1, 0], [.58, .58]]  I2T (text) only: a tie under I1
    2. red / grey images, "a red bowl" / "a blue bowl":       [[1, .58], [0, .58]]  T2I (image) only: a tie under c1
    3. red / blue images, "a plain hat" / "the plain hat":    [[.58, .58], [.58, .58]] none (every comparison ties)
    so I2T / text 50%, T2I / image 50%, group 25%; single comparisons 75 / 50 / 75 / 50."""
    path = tmp_path / task / "data" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(_colour_split(task))
    out = tmp_path / "out"
    assert main(["run", "--task", task, "--model", "colour-vec", "--data-dir", str(tmp_path), "--out",
                 str(out), "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    doc = json.loads((out / "results.json").read_text())
    got = {r["metric"]: r["value"] for r in doc["results"]}
    names = ("text_score", "image_score") if task == "colorswap" else ("i2t_score", "t2i_score")
    assert (got[names[0]], got[names[1]], got["accuracy"]) == (50.0, 50.0, 25.0)
    if task == "bivlc":
        assert [got[m] for m in ("ipos_2t", "ineg_2t", "tpos_2i", "tneg_2i")] == [75.0, 50.0, 75.0, 50.0]
    flags = [(int(r["text_correct"]), int(r["image_correct"]), int(r["group_correct"])) for r in _rows(out)]
    assert flags == [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 0)]
    assert doc["conditions"][next(iter(doc["conditions"]))]["by_kind"]["dalle3"] == {
        names[0]: 50.0, names[1]: 50.0, "accuracy": 0.0, **({} if task == "colorswap" else {
            "ipos_2t": 100.0, "ineg_2t": 50.0, "tpos_2i": 100.0, "tneg_2i": 50.0}), "n": 2}


def test_bivlc_missing_files_are_named_before_a_model_loads(tmp_path, capsys):
    rc = main(["run", "--task", "bivlc", "--model", "no-such-model", "--data-dir", str(tmp_path), "--out",
               str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and str(tmp_path / "bivlc") in err and "hf download imirandam/BiVLC" in err
