"""vlbench/results.py: the typed run record. Old files read and written back are unchanged (key order
included), lookups by MetricKey, the upgrade table, and the checks that make a file unreadable."""

from __future__ import annotations

import json

import pytest

from support.data import TESTS

from vlbench.results import (SCHEMA_VERSION, UPGRADES, MetricKey, RunRecord, SchemaTooNew, UnreadableResults,
                             records_hash)

LEGACY = sorted((TESTS / "fixtures" / "legacy_v1" / "runs").glob("*/results.json"))


def _doc(i: int = 0) -> dict:
    return json.loads(LEGACY[i].read_text())


def test_legacy_files_round_trip_unchanged():
    assert len(LEGACY) == 4
    for path in LEGACY:
        doc = json.loads(path.read_text())
        rec = RunRecord.from_json(doc, str(path))
        assert json.dumps(rec.to_json()) == json.dumps(doc)  # same content, same key order
        assert rec.read_schema == "1" and rec.results_hash == doc["results_hash"]


def test_values_are_keyed_by_metric_key():
    doc = next(d for d in map(_doc, range(4)) if len(d["conditions"]) > 1)
    rec = RunRecord.from_json(doc)
    for r in doc["results"]:
        assert rec.value(r["condition"], r["direction"], r["metric"], r["k"]) == r["value"]
        assert rec.values_of(r["condition"])[MetricKey(r["direction"], r["metric"], r["k"])] == r["value"]
    assert rec.condition_names()[0] == "clean" and len(rec.condition_names()) == len(doc["conditions"])
    pert = rec.condition_names()[1]
    assert rec.condition(pert).family == doc["conditions"][pert]["family"]
    for d in doc["deltas"]:
        got = next(x for x in rec.deltas if x.condition == d["condition"] and x.key == (d["direction"], d["metric"], d["k"]))
        clean = rec.value("clean", d["direction"], d["metric"], d["k"])
        assert got.abs == d["abs"] == pytest.approx(rec.value(d["condition"], d["direction"], d["metric"], d["k"]) - clean)
    assert {i.get("direction") for i in rec.intervals if i.condition == pert} == {"i2t", "t2i", "both"}


def test_upgrade_table_and_newer_versions(monkeypatch):
    doc = _doc()
    old = dict(doc, schema_version=0, results=[dict(r, dir=r.pop("direction")) for r in
                                               json.loads(json.dumps(doc["results"]))])
    old.pop("results_hash")

    def v0_to_v1(d):
        return dict(d, schema_version=1, results=[{**{k: v for k, v in r.items() if k != "dir"}, "direction": r["dir"]}
                                                   for r in d["results"]])

    with pytest.raises(UnreadableResults, match="no upgrade to 1"):
        RunRecord.from_json(old)
    monkeypatch.setitem(UPGRADES, 0, v0_to_v1)
    rec = RunRecord.from_json(old)
    assert rec.read_schema == "0" and rec.schema_version == 1
    assert rec.values_of("clean") == RunRecord.from_json(doc).values_of("clean")
    assert RunRecord.from_json(dict(doc, schema_version=f"{SCHEMA_VERSION}.7")).read_schema == "1.7"
    with pytest.raises(SchemaTooNew, match="upgrade vlbench"):
        RunRecord.from_json(dict(doc, schema_version=SCHEMA_VERSION + 1))


@pytest.mark.parametrize("edit, reason", [
    (lambda d: d.pop("schema_version"), "no schema_version"),
    (lambda d: d.update(created="yesterday"), "not an ISO date"),
    (lambda d: d["model"].pop("hash"), "missing model spec or hash"),
    (lambda d: d["results"][3].update(direction="sideways"), "result record 3 is malformed"),
    (lambda d: d["results"].append(dict(d["results"][0])), "repeats"),
    (lambda d: d["results"][0].update(value=d["results"][0]["value"] + 1), "results_hash does not match"),
    (lambda d: d.update(conditions={}), "has results but no entry in 'conditions'"),
    (lambda d: d.update(deltas={}), "'deltas' is not a list"),
])
def test_what_makes_a_file_unreadable(edit, reason):
    doc = _doc()
    edit(doc)
    with pytest.raises(UnreadableResults, match=reason):
        RunRecord.from_json(doc, "x/results.json")


def test_nan_values_hashed_either_way():
    doc = _doc()
    doc["results"][0]["value"] = None  # NaN written as null; early runners hashed the NaN
    nan_hash = records_hash([dict(r, value=float("nan")) if r["value"] is None else r for r in doc["results"]])
    for h in (records_hash(doc["results"]), nan_hash):
        assert RunRecord.from_json(dict(doc, results_hash=h)).value("clean", doc["results"][0]["direction"],
                                                                      doc["results"][0]["metric"],
                                                                      doc["results"][0]["k"]) is None
