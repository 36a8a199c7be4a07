"""`vlbench explain` on a run with gallery distractors: the range check of retrieved.npz takes each condition's own
gallery (the dataset's candidates plus the injected ones), and still refuses an index past that gallery."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from support.data import write_images

from vlbench.cli import main
from vlbench.runfolder import FILES, RESULTS, RETRIEVED, seal
from vlbench.util.io import sha256_file


@pytest.fixture(scope="module")
def distractor_run(tmp_path_factory):
    from support.data import write_manifest

    from vlbench import registry

    if "counting" not in registry.models:
        registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
    root = tmp_path_factory.mktemp("explain_distractors")
    manifest = write_manifest(root / "data", 8)
    write_images(root / "neg", 3, seed=7)
    (root / "adv.txt").write_text("a dog runs on the grass\na red car\n")
    out = root / "run"
    assert main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--perturb", "char-swap",
                 "--distractors", f"images:{root / 'neg'},captions:{root / 'adv.txt'}", "--out", str(out),
                 "--quiet", "--num-workers", "0", "--bootstrap", "10", "--validity", "off",
                 "--cache-dir", str(root / "cache")]) == 0
    return out


def _condition(folder, kind: str) -> str:
    conds = json.loads((folder / RESULTS).read_text())["conditions"]
    return next(c for c, m in conds.items() if (m.get("kind") or ("caption" if m.get("perturbation") else "")) == kind)


def _rewrite(src, dst, edit) -> None:
    """A copy of run ``src`` in ``dst`` whose retrieved.npz was edited by ``edit`` and re-hashed into results.json,
    the record resealed (so the file proof passes and the range check is what judges it)."""
    import shutil

    shutil.copytree(src, dst)
    with np.load(dst / RETRIEVED) as z:
        arrays = {k: z[k].copy() for k in z.files}
    edit(arrays)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    (dst / RETRIEVED).write_bytes(buf.getvalue())
    doc = json.loads((dst / RESULTS).read_text())
    doc[FILES][RETRIEVED] = {"sha256": sha256_file(dst / RETRIEVED), "bytes": (dst / RETRIEVED).stat().st_size}
    (dst / RESULTS).write_text(json.dumps(seal(doc)))  # resealed: only the range check can refuse it


def test_explain_accepts_a_run_with_a_distractor_gallery(distractor_run, tmp_path):
    name = _condition(distractor_run, "gallery")
    with np.load(distractor_run / RETRIEVED) as z:
        # the run ranked injected candidates: t2i ids 8..10 are the 3 images, i2t ids 40..41 the 2 captions
        assert z[f"{name}|t2i"].max() >= 8 and z[f"{name}|i2t"].max() >= 40
    page = tmp_path / "page.html"
    assert main(["explain", str(distractor_run), "--out", str(page)]) == 0
    assert page.is_file()


def test_explain_still_refuses_an_index_past_the_distractor_gallery(distractor_run, tmp_path, capsys):
    name = _condition(distractor_run, "gallery")

    def past(arrays):  # 8 images + 3 distractors: id 11 is no candidate
        arrays[f"{name}|t2i"][0, 0] = 11

    _rewrite(distractor_run, tmp_path / "bad", past)
    assert main(["explain", str(tmp_path / "bad"), "--out", str(tmp_path / "p.html")]) != 0
    err = capsys.readouterr().err
    assert name in err and "out of range for its gallery" in err, err


def test_explain_refuses_a_distractor_index_in_a_condition_without_distractors(distractor_run, tmp_path, capsys):
    caption = _condition(distractor_run, "caption")

    def injected(arrays):  # id 8 is a distractor image: the char-swap condition ranked no distractors
        arrays[f"{caption}|t2i"][0, 0] = 8

    _rewrite(distractor_run, tmp_path / "bad", injected)
    assert main(["explain", str(tmp_path / "bad"), "--out", str(tmp_path / "p.html")]) != 0
    err = capsys.readouterr().err
    assert caption in err and "out of range for its gallery" in err, err
