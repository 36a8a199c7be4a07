"""``--distractors`` on a dataset with folds (coco-1k's layout: every fold's gallery gets the whole
distractor set). The run used to crash in write_flips (injected candidate ids past the fold's gallery were
looked up in the fold's index map); it now finishes, its false rate equals a per-fold recomputation from the
model's own vectors, and retrieved.npz names injected candidates past the dataset's gallery (docs/flips.md)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import vlbench
from support.data import write_images
from vlbench import registry
from vlbench.datasets.core import load_custom
from vlbench.encoding.session import EncodingSession


@pytest.fixture
def folded(manifest, monkeypatch):
    """``manifest`` (12 images, 5 captions each) as a dataset of two 6-image folds, like coco-1k's five."""
    def load(**kw):
        ds = load_custom(str(manifest), require_images=kw.get("require_images", True))
        return dataclasses.replace(ds, name="folded", folds=[np.arange(0, 6), np.arange(6, 12)])

    monkeypatch.setattr(registry.datasets, "_entries", dict(registry.datasets._entries))  # restored afterwards
    registry.datasets.register("folded", load, source="plugin:test")
    return load()


def _false_rate(q: np.ndarray, real: np.ndarray, positives: list[list[int]], injected: np.ndarray) -> float:
    """Percent of queries whose best injected candidate scores strictly above every positive."""
    s_real, s_inj = q @ real.T, q @ injected.T
    return 100 * float(np.mean([s_inj[i].max() > s_real[i, p].max() for i, p in enumerate(positives)]))


def test_distractors_on_a_dataset_with_folds_finish_and_score_each_fold(counting_plugin, folded, tmp_path):
    write_images(tmp_path / "neg", 4, seed=7)
    caps = tmp_path / "adv.txt"
    caps.write_text("a dog runs on the grass\ntwo people sit on a bench\na red car\n")
    res = vlbench.run(model="counting", dataset="folded", out=str(tmp_path / "run"), quiet=True, num_workers=0,
                      validity="off", n_boot=20, cache_dir=str(tmp_path / "cache"),
                      distractors=f"images:{tmp_path / 'neg'},captions:{caps}")
    assert (tmp_path / "run" / "results.json").exists()
    name = next(c for c in res.record.conditions if c.startswith("distractors:"))
    got = {v.key.direction: v.value for v in res.record.values if v.condition == name and v.key.metric == "false_rate"}

    session = EncodingSession.open("counting", cache_dir=tmp_path / "cache")
    img_v = session.images([folded.image_root / p for p in folded.images], num_workers=0, progress=False)
    txt_v = session.texts(list(folded.captions), progress=False)
    img = np.stack([img_v[i] for i in range(folded.n_images)])
    txt = np.stack([txt_v[j] for j in range(folded.n_captions)])
    neg = sorted((tmp_path / "neg").iterdir())
    inj_img = np.stack(list(session.images(neg, num_workers=0, progress=False).values()))
    inj_txt = np.stack(list(session.texts(caps.read_text().splitlines(), progress=False).values()))
    c2i = np.asarray(folded.caption_to_image)
    want = {"t2i": [], "i2t": []}
    for fold in folded.folds:
        caps_f = np.flatnonzero(np.isin(c2i, fold))
        want["t2i"].append(_false_rate(txt[caps_f], img[fold], [[int(np.flatnonzero(fold == c2i[j])[0])]
                                                                for j in caps_f], inj_img))
        want["i2t"].append(_false_rate(img[fold], txt[caps_f], [list(np.flatnonzero(c2i[caps_f] == i))
                                                                for i in fold], inj_txt))
    assert got["t2i"] == pytest.approx(np.mean(want["t2i"])) and got["i2t"] == pytest.approx(np.mean(want["i2t"]))
    assert got["t2i"] > 0 or got["i2t"] > 0  # the case has teeth: some query loses to an injected candidate

    retrieved = np.load(tmp_path / "run" / "retrieved.npz")
    top = retrieved[f"{name}|t2i"]  # rows: fold 0's 30 captions, then fold 1's; ids: dataset images, then injected
    assert top.max() < folded.n_images + len(neg) and (top >= folded.n_images).any()
    for rows, fold in ((top[:30], folded.folds[0]), (top[30:], folded.folds[1])):
        real = rows[rows < folded.n_images]
        assert np.isin(real, fold).all()  # a fold's real candidates are that fold's images
    assert json.loads((tmp_path / "run" / "results.json").read_text())["conditions"][name]["kind"] == "gallery"


def test_a_24_mb_caption_line_stops_the_run_with_the_limit_named(counting_plugin, manifest, tmp_path, capsys):
    from vlbench import cli
    from vlbench.datasets.distractors import MAX_CAPTION_CHARS

    big = tmp_path / "big.txt"
    big.write_text("a red car\n" + "x" * 24_000_000 + "\n")
    code = cli.main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "o"),
                     "--quiet", "--num-workers", "0", "--distractors", f"captions:{big}"])
    err = capsys.readouterr().err
    assert code == 2 and f"{MAX_CAPTION_CHARS:,}" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "results.json").exists()
