"""`vlbench reproduce hendriksen2024` end to end with deterministic tiny models and a small synthetic stand-in
dataset (tests/support/colour_model.py; the data of tests/unit/studies/test_hendriksen2024_protocol.py), and the published values it ships."""

from __future__ import annotations

import json

import pytest

from vlbench.cli import main
from vlbench.studies.hendriksen2024.reproduce import run as H


def test_published_values_ship_with_their_source():
    pub = H.published()
    assert "chapter5_brittleness.md" in pub["source"]["file"]
    assert len(pub["table_5_2"]) == 16 and len(pub["table_5_3"]) == 36 and len(pub["table_5_4"]) == 16
    clip_coco = next(r for r in pub["table_5_2"] if r["model"] == "clip" and r["dataset"] == "coco")
    assert clip_coco["t2i_R@1"] == 16.15 and clip_coco["t2i_rsum"] == 91.32
    # Table 5.3's clean row is Table 5.2's t2i RSUM (as printed, up to the ALIGN/AltCLIP Flickr30k-FG swap)
    t53 = {(r["model"], r["condition"]): r for r in pub["table_5_3"]}
    for r in pub["table_5_2"]:
        if (r["model"], r["dataset"]) not in {("align", "flickr30k-fg"), ("altclip", "flickr30k-fg")}:
            assert t53[(r["model"], "clean")][r["dataset"]] == r["t2i_rsum"]


def test_verdict_is_five_percent_relative():
    assert H.compare(100.0, 104.9)["verdict"] == "reproduced"
    assert H.compare(100.0, 95.1)["verdict"] == "reproduced"
    assert H.compare(100.0, 105.1)["verdict"] == "not reproduced"
    assert H.compare(2.0, None)["verdict"] == "not run"
    c = H.compare(16.15, 50.0)
    assert c["abs_diff"] == pytest.approx(33.85) and c["rel_diff"] == pytest.approx(33.85 / 16.15)


def test_reproduce_end_to_end_and_resume(tmp_path, folder_manifest, colour_models, capsys):  # noqa: F811
    vec, rel = colour_models
    args = ["reproduce", "hendriksen2024", "--out", str(tmp_path / "r"), "--also-standard", "--perturb",
            "distraction", "--relevance", rel, "--bootstrap", "5", "--cache-dir", str(tmp_path / "cache")]
    for key in H.MODELS:
        args += ["--model", f"{key}={vec}"]
    for key in H.DATASETS:
        args += ["--dataset", f"{key}=custom:{folder_manifest}"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "32 run(s), 0 already done (reused), 32 to do" in err and "weights:" in err and "time: at most" in err
    runs = sorted(p.name for p in (tmp_path / "r" / "runs").iterdir())
    assert len(runs) == 32 and "hendriksen2024-clip-coco" in runs and "standard-groupvit-flickr30k-fg" in runs
    comp = json.loads((tmp_path / "r" / "hendriksen2024" / "comparison.json").read_text())
    cell = next(r for r in comp["tables"]["table_5_2"]
                if (r["model"], r["dataset"], r["cell"]) == ("clip", "coco", "t2i_R@1"))
    # hand-worked in tests/unit/studies/test_hendriksen2024_protocol.py: t2i R@1 over the whole folder = 3/6
    assert cell["measured"] == pytest.approx(50.0) and cell["published"] == 16.15
    assert cell["verdict"] == "not reproduced" and cell["rel_diff"] == pytest.approx((50.0 - 16.15) / 16.15)
    i2t5 = next(r for r in comp["tables"]["table_5_2"]
                if (r["model"], r["dataset"], r["cell"]) == ("clip", "coco", "i2t_R@5"))
    assert i2t5["measured"] == pytest.approx(100.0)  # fraction recall: every image's 2 captions in its top 5
    t53 = {(r["model"], r["dataset"], r["cell"]): r for r in comp["tables"]["table_5_3"]}
    assert t53[("clip", "coco", "shuffle-trigrams")]["verdict"] == "not run"  # only distractions were run
    assert t53[("clip", "coco", "distraction")]["measured"] is not None
    assert comp["counts"]["table_5_2"]["not run"] == 0
    assert (tmp_path / "r" / "standard" / "table_5_2.md").is_file()
    md = (tmp_path / "r" / "hendriksen2024" / "table_5_3.md").read_text()
    assert "published" in md and "rel diff" in md and "Petrov and Macdonald" in md
    # resume: a second call reuses every finished run folder
    assert main(args) == 0
    assert "32 already done (reused), 0 to do" in capsys.readouterr().err
