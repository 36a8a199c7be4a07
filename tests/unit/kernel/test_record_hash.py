"""record_hash seals the whole results.json (results_hash proves the metric records only): an edited model spec,
dataset name or identity is refused by every reader (RunRecord.from_json); a file written before the seal is
read as before; a sealed record read and written back keeps its seal."""

from __future__ import annotations

import json

import pytest
from support.data import TESTS

from vlbench.results import RECORD_HASH, RunRecord, UnreadableResults, record_hash, seal

LEGACY = sorted((TESTS / "fixtures" / "legacy_v1" / "runs").glob("*/results.json"))


def _sealed() -> dict:
    return seal(json.loads(LEGACY[0].read_text()))


@pytest.mark.parametrize("edit", [
    lambda d: d["model"].update(spec="clip:another/model"),
    lambda d: d["dataset"].update(name="flickr30k"),
    lambda d: d["model"].setdefault("identity", {}).update(checkpoint="elsewhere"),
    lambda d: d["settings"].update(k=[1, 5, 100]),
    lambda d: d.update(run_id="copied-run"),
])
def test_an_edited_model_spec_or_dataset_name_is_refused(edit):
    doc = _sealed()
    edit(doc)  # results_hash still matches: the metric records were not touched
    with pytest.raises(UnreadableResults, match="record_hash does not match the record"):
        RunRecord.from_json(doc)


def test_a_sealed_record_reads_and_writes_back_with_its_seal():
    doc = _sealed()
    rec = RunRecord.from_json(json.dumps(doc))
    assert rec.sealed and rec.other[RECORD_HASH] == doc[RECORD_HASH]
    again = rec.to_json()
    assert again[RECORD_HASH] == record_hash(again)  # nothing lost or changed on the way through
    assert RunRecord.from_json(again).sealed


def test_a_file_written_before_the_seal_is_read_as_before():
    doc = json.loads(LEGACY[0].read_text())
    assert RECORD_HASH not in doc
    doc["dataset"]["name"] = "renamed"  # not provable without the seal: read, and marked as not sealed
    assert not RunRecord.from_json(doc).sealed


def test_the_seal_is_over_strict_json_with_nan_as_null():
    doc = _sealed()
    doc["wall_time_s"] = float("nan")
    sealed = seal(doc)
    assert sealed["wall_time_s"] is None and sealed[RECORD_HASH] == record_hash(json.loads(json.dumps(sealed)))
    assert RunRecord.from_json(json.dumps(sealed)).sealed
