"""`vlbench run --shortcuts`: a model that reads the digits gains when matched and loses when mismatched."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vlbench.cli import main


@pytest.fixture(scope="module")
def digit_reader():
    from vlbench import registry

    if "digit-reader" not in registry.models:
        registry.models.register("digit-reader", "support.shortcut_reader:load", source="plugin:test")
    return "digit-reader"


@pytest.fixture
def colour_manifest(tmp_path):
    """10 images, 120x90: image i is colour i % 5 with noise; 2 captions each naming the colour, so the
    content alone cannot tell image i from image i + 5 (clean R@1 about 50%)."""
    from PIL import Image

    from support.shortcut_reader import COLOURS

    names = list(COLOURS)
    rng = np.random.default_rng(0)
    folder = tmp_path / "data"
    folder.mkdir()
    with open(folder / "m.jsonl", "w") as fh:
        for i in range(10):
            c = names[i % 5]
            arr = np.clip(np.asarray(COLOURS[c]) + rng.normal(0, 12, (90, 120, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(folder / f"{i}.png")
            fh.write(json.dumps({"image": f"{i}.png", "captions": [f"a {c} picture", f"something {c}"]}) + "\n")
    return folder / "m.jsonl"


def test_matched_rises_mismatched_falls(digit_reader, colour_manifest, tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--model", digit_reader, "--dataset", f"custom:{colour_manifest}", "--shortcuts",
                 "matched,mismatched,caption-only,image-only,bits=1", "--digits", "sklearn-digits", "--out",
                 str(out), "--quiet", "--num-workers", "0", "--bootstrap", "200"]) == 0
    doc = json.loads((out / "results.json").read_text())
    r1 = {(r["condition"], r["direction"]): r["value"] for r in doc["results"]
          if r["metric"] == "recall" and r["k"] == 1}
    for d in ("i2t", "t2i"):
        assert 30 <= r1[("clean", d)] <= 70  # the content alone is ambiguous
        assert r1[("shortcut:matched", d)] == 100.0  # the expected rise: the shared number decides
        assert r1[("shortcut:mismatched", d)] == 0.0  # the expected fall: it points to the wrong candidate
    assert r1[("shortcut:image-only", "i2t")] == r1[("clean", "i2t")]  # codes meet zeros: no change in ranking
    assert r1[("shortcut:caption-only", "t2i")] == r1[("clean", "t2i")]
    assert doc["shortcuts"]["digit_source"] == "sklearn-digits"
    assert doc["conditions"]["shortcut:matched"]["digit_source"] == "sklearn-digits"
    boots = {(b["condition"], b["direction"]): b for b in doc["bootstrap"]}
    assert boots[("shortcut:matched", "both")]["ci_low"] > 0 > boots[("shortcut:mismatched", "both")]["ci_high"]
    # image i carries the same number in matched, mismatched and image-only: rendered and encoded once; bits=1
    # gives images 0 and 1 their own numbers again (0 and 1), so only images 2-9 are new
    assert doc["encoding"]["images_encoded"] == 10 + 10 + 8
