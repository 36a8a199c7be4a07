"""The sets added beside Winoground and What'sUp (ARO VG-Relation/VG-Attribution, MMVP-VLM, ColorSwap, BiVLC) run
under a caption perturbation and an image corruption through the generic hooks: each condition is recorded with
its set, the perturbed candidates are the ones the model scored, the flips in results.json equal a recount from
the per-item records, and the blind (text-only) ceiling under a corruption is the clean one."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from support.aro_mmvp import aro_row, noise_image, write_aro, write_mmvp
from support.pair_sets import write_bivlc, write_colorswap

from vlbench.cli import main


def _aro(root: Path) -> None:
    rel = [aro_row(f"{k % 2}.jpg", (k, k, 20, 18), f"the {a} is on the {b}", f"the {b} is on the {a}", "on")
           for k, (a, b) in enumerate([("man", "horse"), ("cup", "table"), ("dog", "sofa"), ("girl", "bike")])]
    att = [aro_row(f"{k % 2}.jpg", (k, k, 16, 14), "the red bag and the blue hat", "the blue bag and the red hat",
                   ("red", "blue")) for k in range(26)]
    aro = write_aro(root, rel, att)
    for k in range(2):
        noise_image(aro / "images" / f"{k}.jpg", 40 + k)


def _mmvp(root: Path) -> None:
    base = write_mmvp(root, [("Orientation", "The arrow points up", "The arrow points down"),
                             ("Color", "The apple is red", "The apple is green")])
    for q, kind in {1: "Orientation", 2: "Orientation", 3: "Color", 4: "Color"}.items():
        noise_image(base / "MLLM_VLM Images" / kind / f"{q}.jpg", 60 + q)


FIXTURES = {"aro": _aro, "mmvp": _mmvp, "bivlc": write_bivlc, "colorswap": write_colorswap}


@pytest.mark.parametrize("task", list(FIXTURES))
def test_a_new_set_under_a_perturbation_and_a_corruption(task, tiny_models, blind_data_dir, tmp_path):
    FIXTURES[task](blind_data_dir)
    out = tmp_path / task
    assert main(["run", "--task", task, "--model", f"clip:{tiny_models('clip')}", "--data-dir", str(blind_data_dir),
                 "--out", str(out), "--quiet", "--num-workers", "0", "--perturb", "shuffle-all-words",
                 "--perturb-images", "gaussian_noise:5"]) == 0
    doc = json.loads((out / "results.json").read_text())
    clean = [c for c in doc["conditions"] if "@" not in c]
    assert clean, doc["conditions"]
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    value = {(r["condition"], r["metric"]): r for r in doc["results"]}
    for cset in clean:
        shuffled, noisy = f"{cset}@shuffle-all-words", f"{cset}@img:gaussian_noise:5"
        assert doc["conditions"][shuffled]["set"] == cset and doc["conditions"][noisy]["set"] == cset
        assert doc["conditions"][shuffled]["perturbation"] == "shuffle-all-words"
        # the blind ceiling reads no image: under the corruption it is the clean set's, said so
        blind = value[(noisy, "blind_accuracy")]
        assert blind["value"] == value[(cset, "blind_accuracy")]["value"] and blind["same_as"] == cset
        # flips recounted from the per-item records: clean right -> perturbed wrong, and back
        by_item = {r["item_id"]: int(r["correct"]) for r in rows if r["condition"] == cset}
        for cond in (shuffled, noisy):
            pert = {r["item_id"]: int(r["correct"]) for r in rows if r["condition"] == cond}
            assert set(pert) == set(by_item)
            lost = sum(1 for k in by_item if by_item[k] and not pert[k])
            gained = sum(1 for k in by_item if pert[k] and not by_item[k])
            (iv,) = [i for i in doc["bootstrap"] if i["condition"] == cond and i.get("metric") == "accuracy"]
            assert (iv["hit_to_miss"], iv["miss_to_hit"]) == (lost, gained), (cond, iv)
            item_delta = 100.0 * (sum(pert.values()) - sum(by_item.values())) / len(by_item)
            # the recorded change is the reported accuracies' difference (ARO's is a macro mean over groups, so
            # its item-mean change is kept beside it)
            change = value[(cond, "accuracy")]["value"] - value[(cset, "accuracy")]["value"]
            assert iv["delta"] == pytest.approx(change)
            assert iv.get("item_delta", iv["delta"]) == pytest.approx(item_delta)
            assert iv["ci_low"] <= iv.get("item_delta", iv["delta"]) <= iv["ci_high"]
    assert doc["conditions"][f"{clean[0]}@shuffle-all-words"]["items_changed"] > 0
