"""RunRecord.load and RunRecord.from_json read a run however it is handed over: a run
folder, its results.json (str or Path), JSON text (str or bytes) or the parsed dict, all giving the same
record; reading is bounded (a folder is not a file, a missing path is named, deep nesting is refused)."""

from __future__ import annotations

import json
import shutil

import pytest

from support.data import TESTS

from vlbench.results import MetricKey, RunRecord, UnreadableResults

RUN = TESTS / "fixtures" / "legacy_v1" / "runs" / "16-flickr-mini"


def test_every_form_gives_the_same_record(tmp_path):
    folder = tmp_path / "my run"  # a space in the path: still a path, not JSON text
    shutil.copytree(RUN, folder)
    path = folder / "results.json"
    text = path.read_text()
    doc = json.loads(text)
    want = next(r["value"] for r in doc["results"]
                if (r["condition"], r["direction"], r["metric"], r["k"]) == ("clean", "t2i", "recall", 5))
    records = [RunRecord.load(folder), RunRecord.load(path), RunRecord.load(str(folder)),
               RunRecord.from_json(path), RunRecord.from_json(str(path)), RunRecord.from_json(str(folder)),
               RunRecord.from_json(text), RunRecord.from_json(text.encode()), RunRecord.from_json(doc)]
    for rec in records:
        assert rec.run_id == doc["run_id"] and rec.results_hash == doc["results_hash"]
        assert rec.value("clean", "t2i", "recall", 5) == want
        assert rec.values_of("clean")[MetricKey("t2i", "recall", 5)] == want
        assert json.dumps(rec.to_json()) == json.dumps(doc)  # read and written back: the same document


def test_unreadable_inputs_are_named(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(UnreadableResults) as exc:
        RunRecord.load(missing)
    assert exc.value.path == str(missing) and "No such file or directory" in exc.value.reason
    with pytest.raises(UnreadableResults, match="No such file or directory"):
        RunRecord.from_json(str(missing))
    with pytest.raises(UnreadableResults, match=r"not valid JSON, truncated or corrupt \(Expecting"):
        RunRecord.from_json('{"schema_version": 1,')
    with pytest.raises(UnreadableResults, match="not a JSON object"):
        RunRecord.from_json("[1, 2]")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnreadableResults, match="is a folder without results.json: not a run folder"):
        RunRecord.load(tmp_path / "empty")
    deep = '{"schema_version": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(UnreadableResults, match="nested deeper than 64 levels"):
        RunRecord.from_json(deep)
    with pytest.raises(UnreadableResults, match="not strict JSON: Infinity is not a JSON number"):
        RunRecord.from_json('{"schema_version": 1, "x": Infinity}')
