"""ColorSwap and BiVLC: their released layouts (Hub parquet files; ColorSwap's archive JSON), malformed files, and
every score recomputed here from the papers' definitions with plain NumPy (never vlbench's scoring code)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from support.hub_datasets import parquet_bytes
from support.pair_sets import (
    BIVLC_CAPTIONS,
    COLORSWAP_CAPTIONS,
    bivlc_parquet,
    colorswap_parquet,
    noise_png,
    write_bivlc,
    write_colorswap,
    write_colorswap_archive,
)

from vlbench.errors import DataError, VlbenchError
from vlbench.tasks import distinct_images
from vlbench.tasks.sets import bivlc, colorswap
from vlbench.tasks.shapes.pairs import PairItem, evaluate_pairs, pairs_text_only

E = np.eye(4)
H = np.full(4, 0.5)  # a unit vector with exact dot products (1/2) with every axis


def _paper(s: np.ndarray) -> dict:
    """BiVLC's evaluate_BiVLC (Miranda et al. 2024) from s[i, j] = s(caption i, image j), C0/I0 the positive pair;
    ColorSwap's text / image / group are Winoground's, the same I2T / T2I / group."""
    ipos, ineg = s[0, 0] > s[1, 0], s[1, 1] > s[0, 1]
    tpos, tneg = s[0, 0] > s[0, 1], s[1, 1] > s[1, 0]
    i2t, t2i = ipos and ineg, tpos and tneg
    return {"ipos_2t": ipos, "ineg_2t": ineg, "tpos_2i": tpos, "tneg_2i": tneg, "i2t_score": i2t, "t2i_score": t2i,
            "accuracy": i2t and t2i}


def _cos(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _hand_worked():
    """Four items with exact similarity matrices (rows c0, c1; columns I0, I1):

    1. [[1, 0], [0, 1]]     every comparison won
    2. [[1, 0], [.5, .5]]   I2T yes; T2I no: s(c1,I1) = s(c1,I0) is a tie (Tneg_2I lost)
    3. [[1, .5], [0, .5]]   T2I yes; I2T no: s(c1,I1) = s(c0,I1) is a tie (Ineg_2T lost)
    4. [[0, 1], [1, 0]]     every comparison lost (the pairs swapped)
    """
    vecs = [(E[0], E[1], E[0], E[1]), (E[0], E[1], E[0], H), (E[0], H, E[0], E[1]), (E[1], E[0], E[0], E[1])]
    items, img, txt = [], {}, {}
    for k, (i0, i1, c0, c1) in enumerate(vecs):
        it = PairItem(str(k), (f"i{k}_0.png", f"i{k}_1.png"), (f"caption {k} a", f"caption {k} b"),
                      ("add", "swap")[k % 2])
        img.update({it.images[0]: i0, it.images[1]: i1})
        txt.update({it.candidates[0]: c0, it.candidates[1]: c1})
        items.append(it)
    return items, img, txt


def _matrix(it, img, txt) -> np.ndarray:
    return np.array([[_cos(txt[c], img[i]) for i in it.images] for c in it.candidates])


def test_bivlc_scores_equal_the_papers_rule_on_a_hand_worked_case_with_ties():
    items, img, txt = _hand_worked()
    res = evaluate_pairs(items, img, txt, scoring=bivlc.SCORING)
    oracle = [_paper(_matrix(it, img, txt)) for it in items]
    assert [o["i2t_score"] for o in oracle] == [True, True, False, False]
    assert [o["t2i_score"] for o in oracle] == [True, False, True, False]
    got = {m: v for m, v, _ in res.more_values()}
    want = {"i2t_score": 50.0, "t2i_score": 50.0, "ipos_2t": 75.0, "ineg_2t": 50.0, "tpos_2i": 75.0, "tneg_2i": 50.0}
    for m, v in want.items():
        assert got[m] == v == 100 * np.mean([o[m] for o in oracle])
    assert res.accuracy == 25.0 and res.n_items == 4 and res.chance == pytest.approx(100 / 6)
    assert got["i2t_score_chance"] == got["t2i_score_chance"] == 25.0 and got["ipos_2t_chance"] == 50.0
    # a tie is a miss: item 2's s(c1,I1) = s(c1,I0) would pass an argmax (first on ties) reading of T2I
    assert res.records[1].scores == [1.0, 0.5, 0.0, 0.5] and not res.records[1].flags["image"]
    assert res.by_kind["swap"] == {**{m: 100 * float(np.mean([oracle[1][m], oracle[3][m]])) for m in oracle[0]},
                                   "n": 2}


@pytest.mark.parametrize("task", [colorswap, bivlc], ids=["colorswap", "bivlc"])
def test_scores_equal_an_independent_computation_on_random_embeddings(task):
    rng = np.random.default_rng(5)
    items, img, txt = [], {}, {}
    for k in range(80):
        it = PairItem(str(k), (f"i{k}a.png", f"i{k}b.png"), (f"c{k} x", f"c{k} y"), ("midjourney", "dalle3")[k % 2])
        for key in it.images:
            img[key] = rng.normal(size=8)
        for key in it.candidates:
            txt[key] = rng.normal(size=8)
        items.append(it)
    res = evaluate_pairs(items, img, txt, scoring=task.SCORING, seed=2)
    oracle = [_paper(_matrix(it, img, txt)) for it in items]
    names = {"i2t_score": task.SCORING.metrics["text"], "t2i_score": task.SCORING.metrics["image"]}
    got = {m: (v, x) for m, v, x in res.more_values()}
    assert 0 < sum(o["accuracy"] for o in oracle) < len(items)  # not degenerate
    for m, name in names.items():
        assert got[name][0] == pytest.approx(100 * np.mean([o[m] for o in oracle]))
        assert got[name][1]["ci_low"] <= got[name][0] <= got[name][1]["ci_high"]
    assert res.accuracy == pytest.approx(100 * np.mean([o["accuracy"] for o in oracle]))
    odd = oracle[1::2]
    assert res.by_kind["dalle3"]["accuracy"] == pytest.approx(100 * np.mean([o["accuracy"] for o in odd]))
    assert [r.correct for r in res.records] == [o["accuracy"] for o in oracle]


def test_colorswap_reports_the_three_winoground_scores_only():
    items, img, txt = _hand_worked()
    res = evaluate_pairs(items, img, txt, scoring=colorswap.SCORING)
    assert {m for m, _, _ in res.more_values()} == {"text_score", "image_score", "text_score_chance",
                                                    "image_score_chance"}
    assert (res.scores["text"][0], res.scores["image"][0], res.accuracy) == (50.0, 50.0, 25.0)


def test_blind_ceiling_is_zero_on_both_directions_and_only_the_single_comparisons_carry_text_signal():
    items, _, _ = _hand_worked()

    def plausibility(texts):
        return [float(len(t)) + (0.5 if t.endswith("a") else 0.0) for t in texts]

    res = pairs_text_only(items, plausibility, scoring=bivlc.SCORING)
    got = {m: v for m, v, _ in res.more_values()}
    assert got["i2t_score"] == got["t2i_score"] == res.accuracy == 0.0
    assert got["tpos_2i"] == got["tneg_2i"] == 0.0  # a caption ties with itself under both images
    f = {t: v for t, v in zip([c for it in items for c in it.candidates],
                              plausibility([c for it in items for c in it.candidates]))}
    assert got["ipos_2t"] == 100 * np.mean([f[it.candidates[0]] > f[it.candidates[1]] for it in items]) == 100.0
    assert got["ineg_2t"] == 0.0
    assert res.as_dict()["more_values"][0][0] == "ipos_2t"  # what a run records as blind_ipos_2t


def test_items_map_generically_with_dataclasses_replace():
    it = PairItem("0", ("a.png", "b.png"), ("a red cup", "a green cup"))
    moved = dataclasses.replace(it, candidates=("A RED CUP", "a green cup"), images=("a2.png", "b.png"))
    assert moved.captions == ("A RED CUP", "a green cup") and moved.image == "a2.png"
    assert distinct_images([it, moved]) == ["a.png", "b.png", "a2.png"]


# ---------------------------------------------------------------------------------------------------------------
# released layouts


def test_bivlc_fixture_in_the_hub_layout_loads_and_its_images_are_written_once(tmp_path):
    write_bivlc(tmp_path)
    items, images, source = bivlc.bivlc_items(tmp_path)
    assert [it.candidates for it in items] == [(a, b) for a, b, _ in BIVLC_CAPTIONS]
    assert [it.tag for it in items] == [t for _, _, t in BIVLC_CAPTIONS] and items[0].item_id == "0"
    first = images[items[1].images[1]]
    assert first.read_bytes() == noise_png(3)  # item 1's negative image, by content
    assert first.name == hashlib.sha256(noise_png(3)).hexdigest() + ".png"
    assert source["files"] == {"data/test-00000-of-00001.parquet":
                               hashlib.sha256((tmp_path / "bivlc/data/test-00000-of-00001.parquet").read_bytes())
                               .hexdigest()}
    before = first.stat().st_mtime_ns
    bivlc.bivlc_items(tmp_path)
    assert first.stat().st_mtime_ns == before  # checked by content, not written again


def test_colorswap_fixture_loads_from_the_hub_layout_and_from_the_authors_archive(tmp_path):
    write_colorswap(tmp_path / "hub")
    items, images, src = colorswap.colorswap_items(tmp_path / "hub", "test")
    assert [it.candidates for it in items] == [(a, b) for a, b, _ in COLORSWAP_CAPTIONS]
    assert [it.item_id for it in items] == ["0", "1", "2", "3"] and items[1].tag == "dalle3"
    assert src["layout"] == "hub parquet" and images[items[0].images[0]].read_bytes() == noise_png(100)
    train, _, _ = colorswap.colorswap_items(tmp_path / "hub", "train")
    assert [it.item_id for it in train] == ["900"]
    write_colorswap_archive(tmp_path / "drive")
    items, images, src = colorswap.colorswap_items(tmp_path / "drive", "test")
    assert src["layout"] == "archive json" and items[2].images == ("images/img_2_1.png", "images/img_2_2.png")
    assert images["images/img_2_1.png"] == tmp_path / "drive/colorswap/data/images/img_2_1.png"
    assert items[0].candidates == COLORSWAP_CAPTIONS[0][:2]


def test_files_only_in_the_hugging_face_cache_are_read_from_there(tmp_path, hub):
    put, _ = hub
    snapshot = put(bivlc.HUB_REPO, {"data/test-00000-of-00001.parquet": bivlc_parquet(), "README.md": b"card"})
    items, images, source = bivlc.bivlc_items(tmp_path / "data")
    assert len(items) == len(BIVLC_CAPTIONS) and source["revision"] == snapshot.name
    assert images[items[0].images[0]].parent == tmp_path / "data" / "bivlc" / "images"


def test_missing_files_name_the_folder_and_the_download(tmp_path):
    with pytest.raises(DataError) as err:
        bivlc.bivlc_items(tmp_path)
    assert str(tmp_path / "bivlc") in err.value.message and "hf download imirandam/BiVLC" in err.value.hint


@pytest.mark.parametrize("column, value, field", [
    ("caption", None, "'caption'"), ("negative_caption", "", "'negative_caption'"),
    ("negative_image", "nobytes", "'negative_image'")])
def test_malformed_bivlc_row_names_the_file_the_row_and_the_field(tmp_path, column, value, field):
    cols = {"image": [(noise_png(k), None) for k in range(3)], "caption": ["a", "b", "c"],
            "negative_caption": ["x", "y", "z"], "negative_image": [(noise_png(10 + k), None) for k in range(3)],
            "type": ["add"] * 3, "subtype": ["obj"] * 3}
    if value == "nobytes":
        cols[column][1] = (b"", "lost.jpg")
    else:
        cols[column][1] = value
    path = write_bivlc(tmp_path, parquet_bytes(cols))
    with pytest.raises(DataError) as err:
        bivlc.bivlc_items(tmp_path)
    assert str(path) in err.value.message and "row 2" in err.value.message and field in err.value.message


def test_a_file_without_a_released_column_is_refused_naming_it(tmp_path):
    path = write_bivlc(tmp_path, parquet_bytes({"image": [(noise_png(1), None)], "caption": ["a"],
                                                "negative_image": [(noise_png(2), None)]}))
    with pytest.raises(DataError) as err:
        bivlc.bivlc_items(tmp_path)
    assert str(path) in err.value.message and "'negative_caption'" in err.value.message


@pytest.mark.parametrize("change, field", [(lambda r: r.pop("caption_2"), "caption_2"),
                                           (lambda r: r.update(image_1="../../etc/passwd"), "image_1"),
                                           (lambda r: r.update(id=0), "id")])
def test_malformed_colorswap_archive_names_the_file_the_item_and_the_field(tmp_path, change, field):
    rows = [{"id": k, "caption_1": a, "caption_2": b, "image_1": f"images/img_{k}_1.png",
             "image_2": f"images/img_{k}_2.png", "image_source": s} for k, (a, b, s) in enumerate(COLORSWAP_CAPTIONS)]
    change(rows[1])
    path = write_colorswap_archive(tmp_path, rows)
    with pytest.raises(DataError) as err:
        colorswap.colorswap_items(tmp_path, "test")
    assert str(path) in err.value.message and "item 1" in err.value.message and repr(field) in err.value.message


def test_colorswap_parquet_ids_must_be_unique(tmp_path):
    folder = tmp_path / "colorswap" / "data"
    folder.mkdir(parents=True)
    data = colorswap_parquet(COLORSWAP_CAPTIONS[:2])
    (folder / "test-00000-of-00002.parquet").write_bytes(data)
    (folder / "test-00001-of-00002.parquet").write_bytes(data)
    with pytest.raises(DataError, match="'id' repeats '0'"):
        colorswap.colorswap_items(tmp_path, "test")


@pytest.mark.parametrize("parse, spec", [(colorswap.parse_colorswap_spec, "colorswap:validation"),
                                         (colorswap.parse_colorswap_spec, "winoground"),
                                         (bivlc.parse_bivlc_spec, "bivlc:train")])
def test_an_unknown_split_is_refused_with_the_choices(parse, spec):
    with pytest.raises(VlbenchError):
        parse(spec)
    assert colorswap.parse_colorswap_spec(None) == "test"
    assert colorswap.parse_colorswap_spec("colorswap:train") == "train"


def test_both_sets_are_registered_with_size_licence_and_citation():
    from vlbench.tasks.registry import tasks

    known = tasks()
    for name in ("colorswap", "bivlc"):
        t = known[name]
        assert t.size and "MIT" in t.licence and "2024" in t.citation
    assert known["bivlc"].blind_excluded_images and json.dumps(sorted(known["bivlc"].blind_excluded_images))


def _digest(rows) -> str:
    return hashlib.sha256(json.dumps(sorted(rows), ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def test_the_texts_are_checked_against_the_authors_published_lists(tmp_path):
    """The release pins (from the authors' per-item files) are sha256 of the sorted text rows; a fixture's differ,
    and the run says so (a note, recorded as texts_match_release=False)."""
    from types import SimpleNamespace

    write_bivlc(tmp_path)
    write_colorswap(tmp_path)
    notes: list[str] = []
    cfg = SimpleNamespace(dataset=None, data_dir=tmp_path, dataset_name=None)
    got = bivlc.bivlc_sets(cfg, notes.append).dataset["source"]
    assert got["texts_sha256"] == _digest([[a, b, t, "obj"] for a, b, t in BIVLC_CAPTIONS])
    assert got["texts_match_release"] is False and "results/BiVLC_ViT-B-32.csv" in notes[-1]
    got = colorswap.colorswap_sets(cfg, notes.append).dataset["source"]
    assert got["texts_sha256"] == _digest([[k, a, b] for k, (a, b, _) in enumerate(COLORSWAP_CAPTIONS)])
    assert got["texts_match_release"] is False and "vlm_results" in notes[-1]


RELEASE_TEXTS = Path(__file__).parents[2] / "fixtures" / "release_texts"


def test_the_release_text_pins_equal_a_recomputation_from_the_authors_files():
    """The pins are recomputed through vlbench's own digest code from the authors' per-item rows (committed
    excerpts, tests/fixtures/release_texts/SOURCES.md); they were once checked for their length only."""
    rows = json.loads((RELEASE_TEXTS / "colorswap_test_texts.json").read_text(encoding="utf-8"))
    items = [PairItem(str(k), (f"img_{k}_1.png", f"img_{k}_2.png"), (a, b)) for k, a, b in rows]
    assert len(items) == colorswap.SPLITS["test"] == 300
    assert colorswap.texts_digest(items) == colorswap.TEST_TEXTS_SHA256
    with gzip.open(RELEASE_TEXTS / "bivlc_test_texts.json.gz", "rt", encoding="utf-8") as f:
        rows = json.load(f)
    named = [dict(zip(("caption", "negative_caption", "type", "subtype"), r)) for r in rows]
    assert len(named) == bivlc.N_ITEMS == 2933
    assert bivlc.texts_digest(named) == bivlc.RELEASE_TEXTS_SHA256
    # one changed caption, or one item left out, no longer matches
    assert bivlc.texts_digest(named[1:]) != bivlc.RELEASE_TEXTS_SHA256
    assert colorswap.texts_digest([dataclasses.replace(items[0], candidates=("x", "y")), *items[1:]]) != \
        colorswap.TEST_TEXTS_SHA256


def test_an_image_cell_over_the_decoder_bound_is_refused_before_it_is_written(tmp_path, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)  # the bound becomes 40 bytes + 64 KiB of headers
    big = b"\x89PNG" + bytes(np.random.default_rng(0).integers(0, 256, 80_000, dtype=np.uint8))
    cols = {"image": [(noise_png(1), None), (big, None)], "caption": ["a", "b"], "negative_caption": ["x", "y"],
            "negative_image": [(noise_png(2), None), (noise_png(3), None)], "type": ["add"] * 2, "subtype": ["obj"] * 2}
    path = write_bivlc(tmp_path, parquet_bytes(cols))
    with pytest.raises(DataError) as err:
        bivlc.bivlc_items(tmp_path)
    assert str(path) in err.value.message and "limit" in err.value.message
    assert not (tmp_path / "bivlc" / "images" / f"{hashlib.sha256(big).hexdigest()}.png").exists()
