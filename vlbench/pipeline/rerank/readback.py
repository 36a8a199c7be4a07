"""A finished run's kind and stages read back from its results.json, and a two-stage run's final ranking as a record
of its own: what the leaderboard, ``vlbench compare`` and ``vlbench export`` show for a ``--rerank`` run.

Only the standard library and vlbench.results are imported (``import vlbench.leaderboards`` stays cheap).

* :func:`model_kind`: ``dual`` (one vector per image and caption), ``multi-vector`` (token vectors, MaxSim),
  ``MLLM embedder`` (an instruction-conditioned embedder on a VLM) or ``pair`` (a pair scorer: a choice task scored
  by an ITM head), read from the recorded model identity (its adapter) and ``model.kind``;
* :func:`stages_text`: the kind, and for a two-stage run the pair scorer and K: ``dual + blip-itm@K16``;
* :func:`final_record`: the two-stage run's final ranking as a :class:`~vlbench.results.RunRecord`: the values of
  results.json ``rerank.results`` under their own condition names (clean, char-swap, ...), the model a
  two-stage model of its own (:func:`two_stage_hash`: the first stage's hash, the pair scorer's and K), labelled
  ``<first stage> + <pair scorer>@K<k>`` (where the run was given a --model-name), its run id
  ``<run id>+<pair scorer>@K<k>``; its per-query rows are the run's ``rerank:<condition>`` rows
  (:data:`PREFIX`). Its changes under each condition against its own clean (``deltas``) are computed from those
  values; their intervals (``bootstrap``) are results.json ``rerank.bootstrap``, drawn by the run as its own
  (runs made before it was recorded: none).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from ...results import Delta, Interval, MetricKey, MetricValue, RunRecord, records_hash

#: the per-query file's condition prefix of a condition's final ranking (stage.PREFIX, which imports numpy)
PREFIX = "rerank:"
#: results.json ``other`` key a final-ranking record carries: {"first_stage_hash", "pair_scorer", "k"}
STAGE_KEY = "stage"


def rerank_section(rec: RunRecord) -> dict | None:
    """results.json ``rerank`` of a two-stage run (a dict with results), else None."""
    sec = rec.other.get("rerank")
    return sec if isinstance(sec, dict) and isinstance(sec.get("results"), list) else None


def model_kind(rec: RunRecord) -> str:
    """The kind of the run's model: ``dual``, ``multi-vector``, ``MLLM embedder`` or ``pair``."""
    fields = rec.model.fields
    if fields.get("kind") == "pair":
        return "pair"
    ident = fields.get("identity")
    adapter = str(ident.get("adapter") or "") if isinstance(ident, dict) else ""
    if adapter.startswith("vlbench.multivector."):
        return "multi-vector"
    if adapter.startswith("vlbench.mllm."):
        return "MLLM embedder"
    if adapter.startswith("vlbench.pairs."):
        return "pair"
    return "dual"


def second_stage(rec: RunRecord) -> str | None:
    """``<pair scorer>@K<k>`` of a two-stage run (its name, never a local path), else None."""
    sec = rerank_section(rec)
    if sec is None:
        return None
    scorer = sec.get("pair_scorer")
    name = scorer.get("name") if isinstance(scorer, dict) else None
    return f"{name or 'pair-scorer'}@K{sec.get('k')}"


def stages_text(rec: RunRecord, final: bool = True) -> str:
    """The model kind and stages: ``dual``; ``dual + blip-itm@K16`` for a two-stage run's final ranking (``final``;
    its first stage alone: the kind)."""
    if STAGE_KEY in rec.other:  # already a final-ranking record
        return str(rec.other[STAGE_KEY].get("stages"))
    second = second_stage(rec)
    return f"{model_kind(rec)} + {second}" if final and second else model_kind(rec)


def two_stage_hash(rec: RunRecord) -> str:
    """The identity of the two-stage model: its first stage's hash, the pair scorer's hash and K."""
    sec = rerank_section(rec) or {}
    got = sec.get("pair_scorer")
    scorer: dict = got if isinstance(got, dict) else {}
    key = {"first_stage": rec.model.hash, "pair_scorer": scorer.get("hash") or scorer.get("spec"), "k": sec.get("k")}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _delta(v: MetricValue, base: float) -> Delta:
    """The change of a value against its clean value, absolute and relative (None against 0), as a run's deltas."""
    value = float(v.value or 0.0)  # callers pass recorded values only
    return Delta(v.condition, v.key, value - base, (value - base) / base if base else None)


def final_record(rec: RunRecord) -> RunRecord | None:
    """The two-stage run's final ranking as a record of its own (see the module docstring); None for a run without
    ``--rerank``."""
    sec = rerank_section(rec)
    if sec is None:
        return None
    values = []
    for r in sec["results"]:
        if isinstance(r, dict) and isinstance(r.get("condition"), str) and r.get("condition") in rec.conditions:
            extra = {k: v for k, v in r.items() if k not in ("condition", "direction", "metric", "k", "value")}
            values.append(MetricValue(r["condition"], MetricKey(r["direction"], r["metric"], r.get("k")),
                                      r.get("value"), extra))
    clean = {v.key: v.value for v in values if v.condition == "clean" and v.value is not None}
    deltas = [_delta(v, clean[v.key]) for v in values
              if v.condition != "clean" and v.key in clean and v.value is not None]
    boots = [Interval(b["condition"], {k: x for k, x in b.items() if k != "condition"})
             for b in sec.get("bootstrap") or [] if isinstance(b, dict) and b.get("condition") in rec.conditions]
    second = second_stage(rec)
    fields = dict(rec.model.fields, hash=two_stage_hash(rec), stages=stages_text(rec))
    if isinstance(fields.get("label"), str) and fields["label"].strip():
        fields["label"] = f"{fields['label'].strip()} + {second}"
    model = dataclasses.replace(rec.model, hash=fields["hash"], fields=fields)
    used = {v.condition for v in values}
    other = {k: v for k, v in rec.other.items() if k not in ("results_hash", "rerank")}
    other["results_hash"] = records_hash([v.to_json() for v in values])
    other[STAGE_KEY] = {"stages": stages_text(rec), "first_stage_hash": rec.model.hash, "second_stage": second,
                        "per_query_prefix": PREFIX}
    return dataclasses.replace(rec, run_id=f"{rec.run_id}+{second}", model=model, values=values, deltas=deltas,
                               intervals=boots,
                               conditions={c: m for c, m in rec.conditions.items() if c in used},
                               model_input_analysis=None, other=other)
