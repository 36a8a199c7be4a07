"""Whether runs can be compared: the same dataset, scored the same way, the same image conditions and the same
queries. The runs themselves are read by vlbench.runread (:func:`vlbench.runread.load_run`)."""

from __future__ import annotations

import dataclasses
import os

from ..errors import OptionError, VlbenchError
from ..pipeline.rerank.readback import PREFIX, final_record, second_stage
from ..results import RunRecord
from ..runread import RunData, check_against_record, load_run

#: the stages a RUN argument may name: ``RUN@first`` (a two-stage run's first stage alone), ``RUN@final`` (its final
#: ranking: the default for a two-stage run)
STAGES = ("first", "final")


def _protocol(rec: RunRecord) -> dict:
    s = rec.settings or {}
    proto = s.get("protocol")
    proto = proto if isinstance(proto, dict) else {}
    return {"k": s.get("k"), "protocol": proto.get("name"), "i2t_recall": proto.get("i2t_recall"),
            "gallery": proto.get("gallery"), "relevance": s.get("relevance")}


def _image_identity(meta: dict) -> dict:
    """What makes an image corruption the same condition in two runs: the corruption, severity, seed, the
    geometry it was made at (the model's input size, whichever it is, or the original size, as the leaderboard
    groups them) and the implementation that made it (a backend, where recorded)."""
    if meta.get("kind") != "image" and meta.get("condition_kind") != "image":  # a choice task's: condition_kind
        return {}
    at = meta.get("corrupted_at")
    geometry = "input" if isinstance(at, int) and not isinstance(at, bool) else "original" if \
        at == "original size" else str(at)
    return {"corruption": meta.get("corruption"), "severity": meta.get("severity"), "seed": meta.get("seed"),
            "geometry": geometry, **{k: v for k, v in meta.items() if "backend" in k}}


def check_comparable(runs: list[RunData]) -> None:
    """Refuse runs on different datasets (content hash), scored differently (k, protocol), or whose shared image
    condition was corrupted differently (geometry, seed, backend: :func:`_image_identity`)."""
    first = runs[0]
    for r in runs[1:]:
        a, b = first.record.dataset, r.record.dataset
        if a.hash != b.hash:
            raise VlbenchError(
                f"runs {first.folder} and {r.folder} are on different datasets: {a.name} [{str(a.hash)[:12]}] vs "
                f"{b.name} [{str(b.hash)[:12]}] (content hash differs), so their queries cannot be paired",
                "compare runs of the same dataset (same images and captions)")
        pa, pb = _protocol(first.record), _protocol(r.record)
        diff = [f"{k}: {pa[k]} vs {pb[k]}" for k in pa if pa[k] != pb[k]]
        if diff:
            raise VlbenchError(f"runs {first.folder} and {r.folder} were scored differently ({'; '.join(diff)})",
                               "compare runs made with the same --k, protocol and relevance options")
        for c in sorted(set(first.conditions) & set(r.conditions)):
            ia, ib = _image_identity(first.record.condition(c).meta), _image_identity(r.record.condition(c).meta)
            diff = [f"{k}: {ia[k]} vs {ib[k]}" for k in sorted(set(ia) | set(ib)) if ia.get(k) != ib.get(k)]
            if diff:
                raise VlbenchError(
                    f"runs {first.folder} and {r.folder} both have image condition {c!r}, but its corrupted images "
                    f"were made differently ({'; '.join(diff)}), so it is not the same condition",
                    "compare runs made with the same --corrupt-at and --seed (the leaderboard refuses the same mix)")


def check_same_queries(runs: list[RunData], condition: str, direction: str) -> None:
    """Refuse a (condition, direction) whose queries differ between runs, naming the first difference."""
    base = runs[0].tables[(condition, direction)].keys
    for r in runs[1:]:
        keys = r.tables[(condition, direction)].keys
        if keys != base:
            where = next((i for i, (x, y) in enumerate(zip(base, keys)) if x != y), min(len(base), len(keys)))
            what = (f"{len(base)} vs {len(keys)} queries" if len(base) != len(keys) else
                    f"query {where}: {base[where][2]} (fold {base[where][0]}) vs {keys[where][2]}")
            raise VlbenchError(f"runs {runs[0].folder} and {r.folder} do not share the queries of {condition} "
                               f"{direction} ({what}); paired comparisons need the same queries in the same order",
                               "compare runs of the same dataset, folds and perturbation settings")


def load_stage(arg: str) -> RunData:
    """A RUN argument read for comparing: a one-stage run as it is; a two-stage run (``vlbench run --rerank``) as its
    final ranking (``RUN`` or ``RUN@final``: the per-query ``rerank:<condition>`` rows under their conditions' names,
    checked against results.json ``rerank.results``, the model named ``<label> + <pair scorer>@K<k>``, the run id
    ``<run id>+<pair scorer>@K<k>``) or as its first stage alone (``RUN@first``)."""
    path, stage = str(arg), None
    base, sep, tail = path.rpartition("@")
    if sep and tail in STAGES and not os.path.exists(path):
        path, stage = base, tail
    run = load_run(path)
    second = second_stage(run.record)
    if second is None:
        if stage:
            raise OptionError("runs", f"{arg}: run {run.folder} is a one-stage run (made without --rerank), so it has "
                                      f"no {stage} stage to name", f"give the run folder alone: {path}", flag="RUN")
        return run
    firsts = {k: t for k, t in run.tables.items() if not k[0].startswith(PREFIX)}
    if stage == "first":
        return RunData(f"{run.folder}@first", run.record, firsts, run.header)
    rec = final_record(run.record)
    assert rec is not None  # second_stage(...) is not None: the run has a rerank section
    if not rec.model.fields.get("label"):  # the table names the two-stage model, never only its first stage
        rec = dataclasses.replace(rec, model=dataclasses.replace(
            rec.model, fields={**rec.model.fields, "label": f"{rec.model.label} + {second}"}))
    tables = {(c[len(PREFIX):], d): t for (c, d), t in run.tables.items() if c.startswith(PREFIX)}
    check_against_record(run.folder, rec, tables)
    return RunData(f"{run.folder}@final", rec, tables, run.header)
