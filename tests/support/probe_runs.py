"""Runs with meaning-changing probe conditions for the sensitivity tests: a run through the pipeline's own steps
with extra hand-made ProbeSets (a probe the library does not make, e.g. a word swap: the scorer must not care),
and synthetic results.json files with probe results (for the invariance / sensitivity map)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vlbench.perturbations.probes import ProbeSet


def hand_probe(name: str, family: str, dataset_captions: list[str], caption_ids: list[str], change) -> ProbeSet:
    """A ProbeSet made by ``change(text) -> new text or None`` (None: not applicable)."""
    texts, applicable, meta = [], [], []
    for t in dataset_captions:
        new = change(t)
        ok = new is not None and new != t
        texts.append(new if ok else t)
        applicable.append(ok)
        meta.append({"changed": "by hand", "why": "a hand-made probe of the tests"} if ok else None)
    return ProbeSet(name=name, family=family, version="1", params={}, seed=0, caption_ids=list(caption_ids),
                    texts=texts, applicable=applicable, meta=meta, verified=[True] * len(texts))


def run_with_probes(extra, **kw):
    """A run (``vlbench.run`` keywords ``kw``) through plan -> encode -> score -> record, with the ProbeSets
    ``extra(dataset) -> [ProbeSet]`` added to the plan as conditions. Returns the RunResult."""
    from vlbench.conditions import RunCondition
    from vlbench.encoding.distributed import SINGLE
    from vlbench.pipeline import presets, runner
    from vlbench.pipeline.record import record
    from vlbench.pipeline.run_config import RunConfig, validate

    cfg = RunConfig(**kw)
    validate(cfg)
    cfg = presets.resolve(cfg)
    plan = runner.make_plan(cfg)
    added = tuple(RunCondition.from_perturbed(ps) for ps in extra(plan.ds))
    plan = dataclasses.replace(plan, conditions=plan.conditions + added)
    enc = runner.encode(cfg, plan, SINGLE, None)
    evals = runner.score(cfg, enc.plan, enc)
    return record(cfg, enc.plan, enc, evals)


def add_probe_results(folder: Path, accuracies: dict[str, tuple[str, float]], *, order_free: bool = False) -> Path:
    """Add probe conditions (kind sensitivity) with their pairwise accuracies ({probe: (family, accuracy)}) to a
    synthetic run's results.json (support.synthetic_runs.synth_run); ``order_free``: the model's identity says so."""
    from vlbench.results import Condition, MetricValue, RunRecord, records_hash

    path = Path(folder) / "results.json"
    rec = RunRecord.from_json(json.loads(path.read_text()))
    clean = {v.key: v.value for v in rec.values if v.condition == "clean"}
    entries = {}
    for name, (family, acc) in accuracies.items():
        rec.conditions[name] = Condition(name, {"perturbation": name, "family": family, "kind": "sensitivity",
                                                "changes_meaning": True})
        rec.values += [MetricValue(name, k, v - 10.0) for k, v in clean.items()]  # a probe lowers RSUM: no loss
        entries[name] = {"probe": name, "family": family, "effect": "false", "score": "pairwise", "accuracy": acc,
                         "ci_low": acc - 5, "ci_high": acc + 5, "n_applicable": 50, "n_not_applicable": 10,
                         "n_ties": 0}
    rec.other["sensitivity"] = {"kind": "sensitivity", "conditions": entries}
    if order_free:
        rec.model.fields["identity"] = {"adapter": "tests.bow_model", "order_free": True}
    rec.other["results_hash"] = records_hash([v.to_json() for v in rec.values])
    path.write_text(json.dumps(rec.to_json(), indent=1))
    return Path(folder)
