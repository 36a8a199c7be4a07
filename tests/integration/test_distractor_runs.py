"""Gallery distractors in a real run (counting model): the clean embeddings are shared through the cache,
the condition's identity carries the content hash, and bad specs fail before any work with exit status 2."""

from __future__ import annotations

import json

import pytest

import vlbench
from vlbench import cli
from vlbench.errors import DataError, OptionError
from support.data import read_counts, write_images


def _run(manifest, out, **kw):
    base = dict(model="counting", dataset=f"custom:{manifest}", out=str(out), quiet=True, num_workers=0,
                validity="off", n_boot=20)
    return vlbench.run(**{**base, **kw})


@pytest.fixture
def sources(tmp_path):
    write_images(tmp_path / "neg", 3, seed=7)
    caps = tmp_path / "adv.txt"
    caps.write_text("a dog runs on the grass\n\n  two people sit on a bench  \na red car\n")
    return tmp_path / "neg", caps


def test_a_run_with_distractors_encodes_only_the_distractors(counting_plugin, manifest, tmp_path, monkeypatch,
                                                             sources):
    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    _run(manifest, tmp_path / "clean")
    first = read_counts(counts)
    assert first == {"images": 12, "texts": 60}
    folder, caps = sources
    res = _run(manifest, tmp_path / "dist", distractors=f"images:{folder},captions:{caps}")
    after = read_counts(counts)
    # only the 3 injected images and the 3 injected captions (blank line skipped) reach the model
    assert (after["images"] - first["images"], after["texts"] - first["texts"]) == (3, 3)
    names = [c for c in res.record.conditions if c.startswith("distractors:")]
    assert len(names) == 1
    name = names[0]
    meta = res.record.conditions[name].meta
    assert meta["kind"] == "gallery" and meta["distractors"]["n_images"] == 3 and meta["distractors"]["n_captions"] == 3
    assert name == f"distractors:images=neg+captions=adv.txt@{meta['distractors']['content_hash'][:10]}"
    vals = {(v.condition, v.key.direction, v.key.metric, v.key.k): v.value for v in res.record.values}
    per_query = res.evaluations
    for d in ("i2t", "t2i"):
        ranks_clean = per_query["clean"][0].direction(d).best_rank
        ranks = per_query[name][0].direction(d).best_rank
        assert (ranks >= ranks_clean).all()  # more candidates never improve a rank
        assert vals[(name, d, "false_rate", None)] == pytest.approx(100 * (ranks > ranks_clean).mean())
        assert vals[(name, d, "recall", 1)] <= vals[("clean", d, "recall", 1)]
    deltas = {(x.condition, x.key.direction, x.key.metric, x.key.k): x.abs for x in res.record.deltas}
    assert deltas[(name, "t2i", "recall", 1)] == pytest.approx(vals[(name, "t2i", "recall", 1)]
                                                               - vals[("clean", "t2i", "recall", 1)])
    assert {b.get("direction") for b in res.record.intervals if b.condition == name} == {"i2t", "t2i", "both"}
    # another caption file, another identity (the hash of the content, not of the path)
    caps.write_text("a dog runs on the grass\n")
    other = _run(manifest, tmp_path / "dist2", distractors=f"images:{folder},captions:{caps}")
    assert name not in other.record.conditions


@pytest.mark.parametrize("spec, text", [
    ("pictures:x", "is not KIND:VALUE with KIND one of images, dataset, captions"),
    ("images:", "names no images after 'images:'"),
    ("", "is given but names no source"),
])
def test_bad_specs_are_refused_before_any_work(counting_plugin, manifest, tmp_path, capsys, spec, text):
    with pytest.raises(OptionError) as exc:
        _run(manifest, tmp_path / "o", distractors=spec)
    assert exc.value.option == "distractors" and text in exc.value.message
    code = cli.main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "c"),
                     "--quiet", "--distractors", spec])
    assert code == 2
    err = capsys.readouterr().err
    assert "--distractors" in err and text in err and "Traceback" not in err


def test_missing_sources_are_listed_by_the_preflight(counting_plugin, manifest, tmp_path, capsys, monkeypatch):
    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as exc:
        _run(manifest, tmp_path / "o", distractors=f"images:{tmp_path / 'nope'},captions:{tmp_path / 'none.txt'}")
    assert "images folder" in exc.value.message and "does not exist" in exc.value.message
    assert "captions file" in exc.value.message
    code = cli.main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "c"),
                     "--quiet", "--distractors", f"images:{tmp_path / 'empty'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "holds no image files" in err and "Traceback" not in err
    assert read_counts(counts) == {"images": 0, "texts": 0}  # nothing was encoded
    assert not (tmp_path / "c" / "results.json").exists()
    json.dumps(err)
