"""Choice sets scored by a multi-vector model (``vlbench run --task winoground --model colqwen2:...``): a tiny
random-weight ColQwen2ForRetrieval of the real class, loaded through vlbench's own path; every recorded pair score
equals MaxSim recomputed from the model card's loop (one forward per image and per caption, the processor's
score_retrieval for each pair), and the sets' rules applied here to those scores (a tie is a miss) give the
recorded text / image / group scores. Scores agree within 1e-5 (float32 in another order); every comparison the
fixture makes has a margin far above that, checked, so no flag can flip between the two paths."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.tiny_colmodels import save_colqwen2

from vlbench.encoding.images import file_key
from vlbench.errors import VlbenchError
from vlbench.imageperturb.apply import corrupt
from vlbench.tasks.maxsim_run import maxsim_pair
from vlbench.tasks.run import run_task

ATOL = 1e-5
MARGIN = 1e-4  # the smallest score difference a fixture's comparison may have (ten times ATOL)
WINO = [("a man riding horse on the beach", "a horse riding man on the beach"),
        ("a red car near a blue bus", "a blue car near a red bus"),
        ("two dogs play in the snow", "the snow play in two dogs"),
        ("a woman with an umbrella near a building", "a building with an umbrella near a woman"),
        ("a cat sits on the mat", "the mat sits on a cat"),
        ("a very long bus parked near a car", "a car parked near a very long bus")]


@pytest.fixture(scope="module")
def colqwen2(tmp_path_factory) -> Path:
    return save_colqwen2(tmp_path_factory.mktemp("maxsim-task") / "ckpt", seed=3)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Winoground in its released layout (examples.jsonl + images/), noise images that differ per key."""
    wino = tmp_path_factory.mktemp("maxsim-data") / "winoground"
    lines = []
    for k, (c0, c1) in enumerate(WINO):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": "Object"}))
        for j in (0, 1):
            (wino / "images").mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.random.default_rng(10 * k + j).integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(
                wino / "images" / f"ex_{k}_img_{j}.png")
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")
    return wino.parent


class CardLoop:
    """The model card's use of ColQwen2: one forward per image and per query, processor.score_retrieval."""

    def __init__(self, folder: Path):
        from transformers import ColQwen2ForRetrieval, ColQwen2Processor

        self.model = ColQwen2ForRetrieval.from_pretrained(folder).eval()
        self.proc = ColQwen2Processor.from_pretrained(folder)
        self._img: dict = {}

    def image(self, path: Path, corruption: tuple | None = None):
        import torch

        key = (path, corruption)
        if key not in self._img:
            image = Image.open(path).convert("RGB")
            if corruption is not None:  # the suite's own corruption function, at the image's own size
                image = corrupt(image, corruption[0], corruption[1], 0, file_key(path))
            with torch.no_grad():
                self._img[key] = self.model(**self.proc.process_images([image])).embeddings[0]
        return self._img[key]

    def __call__(self, path: Path, text: str, corruption: tuple | None = None) -> float:
        import torch

        with torch.no_grad():
            q = self.model(**self.proc.process_queries([text])).embeddings[0]
        return float(self.proc.score_retrieval([q], [self.image(path, corruption)])[0, 0])


def _per_item(out: Path) -> dict:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return {(r["condition"], r["item_id"]): r for r in csv.DictReader(fh)}


def _values(out: Path, condition: str) -> dict:
    doc = json.loads((out / "results.json").read_text())
    return {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == condition}


def _strict(a: float, b: float) -> bool:
    """``a > b`` (a tie is a miss), on a comparison whose margin no float32 summation order can cross."""
    assert a == b or abs(a - b) > MARGIN, f"the fixture has a near tie ({a} vs {b}): no test of the rule"
    return a > b


def _check_winoground(out: Path, card: CardLoop, data_dir: Path, condition: str, corruption=None) -> np.ndarray:
    rows = _per_item(out)
    flags = []
    for k, (c0, c1) in enumerate(WINO):
        imgs = [data_dir / "winoground" / "images" / f"ex_{k}_img_{j}.png" for j in (0, 1)]
        s = np.array([[card(i, c, corruption) for i in imgs] for c in (c0, c1)])  # s[i, j] = s(caption i, image j)
        got = json.loads(rows[(condition, str(k))]["scores"])
        np.testing.assert_allclose(got, [s[0, 0], s[1, 0], s[0, 1], s[1, 1]], rtol=0, atol=ATOL)
        text = _strict(s[0, 0], s[1, 0]) and _strict(s[1, 1], s[0, 1])  # Thrush et al. 2022
        image = _strict(s[0, 0], s[0, 1]) and _strict(s[1, 1], s[1, 0])
        flags.append((text, image, text and image))
    f = np.array(flags, dtype=float) * 100
    v = _values(out, condition)
    assert v["text_score"] == pytest.approx(f[:, 0].mean()) and v["image_score"] == pytest.approx(f[:, 1].mean())
    assert v["accuracy"] == pytest.approx(f[:, 2].mean())
    return f


def test_winoground_with_colqwen2_equals_maxsim_of_the_model_card_loop(colqwen2, data_dir, tmp_path):
    out = tmp_path / "run"
    run_task(task="winoground", model=f"colqwen2:{colqwen2}", data_dir=str(data_dir), out=str(out),
             cache_dir=str(tmp_path / "cache"), quiet=True, num_workers=0, batch_size=3)
    f = _check_winoground(out, CardLoop(colqwen2), data_dir, "task:winoground")
    assert np.ptp(f[:, :2]) > 0  # items differ: the scores are not all 0 or all 100
    doc = json.loads((out / "results.json").read_text())
    assert "MaxSim" in doc["task"]["rule"] and doc["model"]["identity"]["vectors"].startswith("multi")
    enc = doc["encoding"]
    assert (enc["images_encoded"], enc["texts_encoded"]) == (12, 12)  # each image and each caption once


def test_winoground_with_colqwen2_under_conditions_rescores_only_what_changed(colqwen2, data_dir, tmp_path):
    common = dict(task="winoground", model=f"colqwen2:{colqwen2}", data_dir=str(data_dir), quiet=True,
                  cache_dir=str(tmp_path / "cache"), num_workers=0)
    run_task(out=str(tmp_path / "clean"), **common)
    res = run_task(out=str(tmp_path / "cond"), perturb="shuffle-all-words", perturb_images="gaussian_noise:2",
                   **common)
    enc = res.results["encoding"]
    assert enc["images_cached"] == 12 and enc["images_encoded"] == 12  # the clean ones cached, the corrupted new
    assert enc["texts_cached"] == 12 and enc["texts_encoded"] == enc["texts_distinct"] - 12 > 0
    card = CardLoop(colqwen2)
    cond = "task:winoground@img:gaussian_noise:2"
    assert set(res.evaluations) == {"task:winoground", "task:winoground@shuffle-all-words", cond}
    _check_winoground(tmp_path / "cond", card, data_dir, cond, corruption=("gaussian_noise", 2))
    clean = _per_item(tmp_path / "clean")
    for (c, item), row in _per_item(tmp_path / "cond").items():  # the clean sets' scores: from the store, same bits
        if c == "task:winoground":
            assert row["scores"] == clean[(c, item)]["scores"]


def test_maxsim_pair_is_the_definition_and_a_tie_is_a_miss(colqwen2, data_dir, tmp_path):
    rng = np.random.default_rng(0)
    img, cap = rng.normal(size=(7, 5)).astype(np.float32), rng.normal(size=(3, 5)).astype(np.float32)
    want = sum(max(float(np.dot(q, d)) for d in img) for q in cap.astype(np.float64))
    assert maxsim_pair(img, cap) == pytest.approx(want, rel=1e-6)
    # a caption the model reads the same way as the right one scores the same bits: a tie, a miss
    data = tmp_path / "tie"
    (data / "winoground" / "images").mkdir(parents=True)
    row = {"id": 0, "image_0": "a", "image_1": "b", "caption_0": "a red car", "caption_1": "a red car",
           "tag": "Object", "secondary_tag": "", "num_main_preds": 1, "collapsed_tag": "Object"}
    (data / "winoground" / "examples.jsonl").write_text(json.dumps(row) + "\n")
    for j, name in enumerate("ab"):
        Image.fromarray(np.full((40, 40, 3), 60 * j, np.uint8)).save(data / "winoground" / "images" / f"{name}.png")
    res = run_task(task="winoground", model=f"colqwen2:{colqwen2}", data_dir=str(data), out=str(tmp_path / "o"),
                   no_cache=True, quiet=True, num_workers=0)
    assert _values(tmp_path / "o", "task:winoground")["text_score"] == 0.0
    assert res.evaluations["task:winoground"].records[0].text is False


def test_a_multivector_model_is_refused_where_the_set_needs_text_embeddings(colqwen2, data_dir, tmp_path):
    with pytest.raises(VlbenchError, match="cannot be scored by a multi-vector model") as err:
        run_task(task="sugarcrepe++", model=f"colqwen2:{colqwen2}", data_dir=str(data_dir),
                 out=str(tmp_path / "a"), quiet=True)
    assert "dual encoder" in err.value.hint
    assert not (tmp_path / "a").exists()  # refused before any output
