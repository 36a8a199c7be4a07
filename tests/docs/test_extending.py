"""docs/extending.md: its four examples are the files in docs/examples (verbatim), and the run that puts
them together gives the numbers a computation by hand gives (similarities from the example model's own
vectors, ranks with the stated tie rule). tests/docs/test_doc_examples.py runs the page's blocks as written."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from support.data import ROOT

EXAMPLES = ROOT / "docs" / "examples"
NAMES = ("model_plugin", "dataset_plugin", "perturbation_plugin", "metric_plugin")


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"vlbench_doc_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_page_shows_each_example_file_verbatim():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), flags=re.S)
    for name in NAMES:
        assert (EXAMPLES / f"{name}.py").read_text() in blocks, name


def _ranks(sim: np.ndarray, positives: list[set]) -> np.ndarray:
    """1-based rank of the best positive per query row: score desc, then candidate index asc."""
    out = []
    for q, row in enumerate(sim):
        order = sorted(range(len(row)), key=lambda c: (-row[c], c))
        out.append(1 + min(order.index(c) for c in positives[q]))
    return np.asarray(out, dtype=float)


@pytest.fixture
def plugins(monkeypatch):
    from vlbench import registry

    mods = {n: _module(n) for n in NAMES}
    for reg, name, obj in ((registry.models, "colour", mods["model_plugin"].load_colour_model),
                           (registry.datasets, "colour-squares", mods["dataset_plugin"].load_colour_squares),
                           (registry.perturbations, "swap-colour", mods["perturbation_plugin"].SwapColour),
                           (registry.metrics, "reciprocal-rank", mods["metric_plugin"].RECIPROCAL_RANK)):
        reg.names()  # built-ins first
        monkeypatch.setitem(reg._entries, name, registry.Entry(name, obj, "", "plugin:test"))
    return mods


def _normalized(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_four_examples_give_the_hand_computed_numbers(plugins, tmp_path):
    from PIL import Image

    from vlbench import run

    res = run(model="colour", dataset="colour-squares", data_dir=str(tmp_path / "data"), perturb="swap-colour",
              out=str(tmp_path / "run"), num_workers=0, no_cache=True, quiet=True, n_boot=50, seed=3)
    rec = res.record
    model = plugins["model_plugin"].ColourModel()
    root = tmp_path / "data" / "colour-squares"
    images = [model.preprocess(Image.open(root / f"{c}.png").convert("RGB"))
              for c in plugins["dataset_plugin"].SQUARES]
    img = _normalized(model.encode_images(np.stack(images)))
    clean = [f"a {c} square" if j == 0 else f"a square painted {c}" for c in plugins["dataset_plugin"].SQUARES
             for j in range(2)]
    swapped = _swapped(tmp_path, rec.condition("swap-colour").meta["captions_hash"])
    assert len(swapped) == 8 and all(a != b for a, b in zip(clean, swapped))
    c2i = [j // 2 for j in range(8)]
    for cond, texts in (("clean", clean), ("swap-colour", swapped)):
        sim = img @ _normalized(model.encode_texts(texts)).T  # (4 images, 8 captions)
        t2i = _ranks(sim.T, [{c2i[j]} for j in range(8)])
        i2t = _ranks(sim, [{2 * i, 2 * i + 1} for i in range(4)])
        for d, ranks in (("t2i", t2i), ("i2t", i2t)):
            assert rec.value(cond, d, "reciprocal-rank") == pytest.approx(np.mean(1 / ranks), abs=1e-12)
            assert rec.value(cond, d, "recall", 1) == pytest.approx(100 * np.mean(ranks <= 1))
            assert rec.value(cond, d, "medr") == np.median(ranks)
    assert rec.value("swap-colour", "t2i", "recall", 1) == 0.0
    assert rec.condition("swap-colour").family == "lexical"


def _swapped(tmp_path, captions_hash: str) -> list[str]:
    """The perturbed captions the run evaluated: the perturbation applied again with the run's seed
    (outputs depend only on seed, name and caption id), checked against the hash the run recorded."""
    from vlbench.datasets.core import load_dataset
    from vlbench.perturbations import perturb_captions

    ds = load_dataset("colour-squares", data_dir=str(tmp_path / "data"), require_images=False)
    ps = perturb_captions(ds.captions, ds.caption_ids, ["swap-colour"], seed=3)["swap-colour"]
    assert ps.captions_hash() == captions_hash
    return ps.texts
