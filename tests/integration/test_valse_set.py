"""VALSE, the set added as one file (vlbench/tasks/sets/valse.py) on the N-captions shape: its real released entries
(a committed excerpt, tests/fixtures/valse/SOURCES.md) read as the authors' README says (validated entries only,
caption against foil), a run whose accuracy equals a plain-NumPy recomputation from the model's own vectors, and
what the declaration gives without any other file naming the set (`vlbench ls tasks`, the leaderboard)."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from vlbench.cli import main
from vlbench.errors import DataError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "valse"


def _data(tmp_path: Path) -> tuple[Path, Path]:
    """<tmp>/data/valse/ with the two excerpt files, and a folder of one random image per image_file."""
    from PIL import Image

    root = tmp_path / "data" / "valse"
    root.mkdir(parents=True)
    images = tmp_path / "images"
    images.mkdir()
    for piece in ("existence", "relations"):
        shutil.copy(FIXTURE / f"{piece}.json", root / f"{piece}.json")
        for entry in json.loads((root / f"{piece}.json").read_text()).values():
            rng = np.random.default_rng(zlib.crc32(entry["image_file"].encode()))
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(images / entry["image_file"])
    return tmp_path / "data", images


def test_the_released_entries_are_read_validated_only_caption_first():
    from vlbench.tasks.shapes.captions import read_file
    from vlbench.tasks.sets.valse import VALSE_SET

    raw = json.loads((FIXTURE / "existence.json").read_text())
    items = read_file(VALSE_SET, FIXTURE / "existence.json", "existence")
    kept = [k for k, e in raw.items() if e["mturk"]["caption"] >= 2]
    assert len(raw) == 13 and len(kept) == len(items) == 11  # two entries the annotators did not validate
    assert [it.item_id for it in items] == [f"existence:{k}" for k in kept]
    first = raw[kept[0]]
    assert items[0].candidates == (first["caption"], first["foil"]) and items[0].correct == 0
    assert items[0].image == first["image_file"] and items[0].kinds == ("caption", "foil:existence")
    assert len(read_file(VALSE_SET, FIXTURE / "relations.json", "relations")) == 8


@pytest.mark.parametrize("change, said", [
    (lambda e: e.pop("foil"), "field 'foil' is missing"),
    (lambda e: e.update(mturk={"caption": "3"}), "field 'mturk.caption'"),
    (lambda e: e.update(image_file="../x.jpg"), "has a '..' component"),
])
def test_a_malformed_entry_names_the_file_the_entry_and_the_field(tmp_path, change, said):
    from vlbench.tasks.shapes.captions import read_file
    from vlbench.tasks.sets.valse import VALSE_SET

    raw = json.loads((FIXTURE / "existence.json").read_text())
    key = list(raw)[1]
    change(raw[key])
    path = tmp_path / "existence.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError) as err:
        read_file(VALSE_SET, path, "existence")
    assert err.value.message.startswith(f"VALSE file {path} entry {key!r}: ") and said in err.value.message


def test_the_pins_are_of_the_released_files_and_an_excerpt_is_noted(tmp_path, capsys, counting_plugin):
    from vlbench.tasks.sets.valse import PIECES

    assert len(PIECES) == 11 and all(len(sha) == 64 for sha, _ in PIECES.values())
    data, images = _data(tmp_path)
    assert main(["run", "--task", "valse", "--model", "counting", "--dataset", "valse:existence", "--data-dir",
                 str(data), "--images-dir", str(images), "--out", str(tmp_path / "r"), "--num-workers", "0"]) == 0
    err = capsys.readouterr().err
    assert "note: VALSE existence: 11 items, not the released 505 of github.com/Heidelberg-NLP/VALSE@2152d90" in err
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["dataset"]["source"]["files_match_release"] is False


def _encoder(spec):
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device="cpu")

    def unit(v):
        v = np.asarray(v.float())[0]
        return v / np.linalg.norm(v)

    return (lambda p: unit(adapter.encode_images(torch.stack([adapter.preprocess(load_image(p))]))),
            lambda t: unit(adapter.encode_texts([t])))


def test_a_run_equals_a_numpy_recomputation_and_the_leaderboard_shows_it(tiny_models, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    data, images = _data(tmp_path)
    out = tmp_path / "runs" / "valse"
    assert main(["run", "--task", "valse", "--model", spec, "--data-dir", str(data), "--dataset",
                 "valse:existence,relations", "--images-dir", str(images), "--out", str(out), "--quiet",
                 "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert list(doc["conditions"]) == ["task:valse:existence", "task:valse:relations"]
    assert doc["task"]["scores"] == [{"metric": "accuracy", "label": "acc_r (caption above foil)"}]
    image, text = _encoder(spec)
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        rows = {r["item_id"]: r for r in csv.DictReader(fh)}
    for piece in ("existence", "relations"):
        right = []
        for key, e in json.loads((FIXTURE / f"{piece}.json").read_text()).items():
            if e["mturk"]["caption"] < 2:
                assert f"{piece}:{key}" not in rows
                continue
            v = image(images / e["image_file"])
            s = [float(text(e["caption"]) @ v), float(text(e["foil"]) @ v)]
            assert json.loads(rows[f"{piece}:{key}"]["scores"]) == pytest.approx(s, abs=1e-5)
            right.append(s[0] > s[1])  # strict: a tie is a miss
        got = {r["metric"]: r for r in doc["results"] if r["condition"] == f"task:valse:{piece}"}
        assert got["accuracy"]["value"] == pytest.approx(100 * np.mean(right)) and got["accuracy"]["n"] == len(right)
        assert got["chance"]["value"] == 50.0
    assert main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    with open(tmp_path / "lb" / "choice_tasks.csv", newline="") as fh:
        board = [r for r in csv.DictReader(fh) if r["task"] == "valse"]
    assert sorted(r["set"] for r in board) == ["valse:existence", "valse:relations"]


def test_vlbench_ls_tasks_lists_valse_with_its_size_licence_and_citation(capsys):
    assert main(["ls", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "  valse " in out and "size: 7,702 validated items in 11 pieces (2 options each): existence 505" in out
    assert "licence: MIT (the repository's LICENSE)" in out and "citation: Parcalabescu, Cafagna" in out
