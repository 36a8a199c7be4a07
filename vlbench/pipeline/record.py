"""The record step of a run: the metric values, their changes against clean and bootstrap intervals, the
validity of every perturbation, the settings, and the run's files (results.json, per-query values, flips,
the embedding index, table.md): what :func:`vlbench.pipeline.runner.run` does once the gallery is scored."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..datasets.core import Dataset
from ..datasets.langsets import per_language
from ..encoding.index import write_index
from ..granularity import budgets
from ..metrics import compute
from ..metrics.stats import model_input_analysis, paired_bootstrap, query_scores
from ..perturbations.validity import run_validity, write_audit
from ..results import Condition, DatasetInfo, Delta, Interval, MetricValue, ModelInfo, RunRecord
from ..runfolder import FILES, file_manifest, results_path
from ..util.env import library_versions
from ..util.io import sha256_json
from . import presets, scoring, sensitivity, timing
from .report import format_printed, format_table, write_flips, write_per_query, write_run_files
from .rerun import number_options
from .run_config import RunConfig
from .scoring import metric_values
from .variants import variant_summaries


@dataclass
class RunResult:
    out_dir: Path
    results: dict  # the results.json content (record.to_json())
    evaluations: dict  # condition -> list[Evaluation] (one per fold)
    record: RunRecord | None = None  # the typed record behind results

    def table(self) -> str:  # table.md: every condition and metric
        return format_table(self.record or RunRecord.from_json(self.results))

    def printed(self) -> str:  # what vlbench run prints: default metrics, per-family summary, definitions
        return format_printed(self.record or RunRecord.from_json(self.results))


def _log(cfg: RunConfig, msg: str) -> None:
    if not cfg.quiet:
        print(msg, file=sys.stderr, flush=True)


def _deltas(n_boot: int, seed: int, plan: Any, evals: dict, values: list[MetricValue]) -> tuple[list, list]:
    """Per condition but clean: the change of every metric against clean, and the bootstrap CIs of RSUM changes."""
    clean = {v.key: v.value for v in values if v.condition == "clean"}
    deltas, boots = [], []
    for cond in (c.name for c in plan.conditions if c.kind != "clean"):
        for v in values:
            if v.condition == cond and v.key in clean:  # false_rate (--distractors) has no clean value
                base = clean[v.key]
                assert v.value is not None and base is not None  # a metric with a clean value has one here too
                deltas.append(Delta(cond, v.key, v.value - base, (v.value - base) / base if base else None))
        boots += [Interval(cond, b) for b in paired_bootstrap(evals["clean"], evals[cond], n_boot, seed)]
    return deltas, boots


def _validity(v, plan: Any, enc: Any, log) -> dict:
    """name -> validity of every caption perturbation, from the encode step's own model keys; the audit file."""
    if not plan.perturbed:
        return {}

    n, offsets = plan.ds.n_captions, plan.offsets
    keys = enc.text_keys
    cond_keys = {name: keys[offsets[name]:offsets[name] + n] for name in plan.perturbed}
    out = run_validity(plan.ds.captions, plan.perturbed, (keys[:n], cond_keys), mode=v.validity,
                       sample_size=v.validity_sample, precision=v.validity_precision, log=log)
    if enc.out is not None:
        write_audit(enc.out, plan.ds.captions, plan.perturbed)
    return out


def _conditions(plan: Any, enc: Any, validity: dict) -> dict:
    """results.json "conditions": every condition's meta, what binding to the model added to it, and its
    validity where it has one."""
    return {c.name: Condition(c.name, {**c.meta, **enc.condition_meta.get(c.name, {}),
                                       **({"validity": validity[c.name]} if c.name in validity else {})})
            for c in plan.conditions}


def _mia(score: str, plan: Any, evals: dict):
    if len(plan.perturbed) < 2:
        return None
    clean_s = query_scores(evals["clean"], score)  # meaning-changing probes (kind sensitivity) are no perturbation
    mia = model_input_analysis(clean_s, {c: query_scores(evals[c], score) for c, ps in plan.perturbed.items()
                                         if getattr(ps, "kind", None) != "sensitivity"})
    mia["score"] = score
    return mia


def _settings(cfg: RunConfig, plan: Any, enc: Any) -> dict:
    return {"k": list(cfg.k), "p": cfg.p, "relevance": cfg.relevance, "seed": cfg.seed,
            "protocol": presets.describe(cfg, plan.ds),  # plan.ds: a partial folder gallery names its size
            "graded_relevance": {name: src.describe() for name, src in plan.graded[0].items()},
            "precision": cfg.precision, "device": str(enc.adapter.device), "batch_size": cfg.batch_size,
            "tie_rule": "score desc, then candidate index asc", "medr": "plain median of 1-based ranks",
            "folds": "mean over folds" if plan.ds.folds is not None else None,
            **({"limit": cfg.limit} if cfg.limit is not None else {}),  # a smoke test: leaderboards refuse it
            "options": number_options(cfg, str(enc.adapter.device))}  # what --resume compares (rerun.py)


def cutoff_warnings(ks, ds: Dataset) -> list[str]:
    """A Recall@k cut-off at or above a direction's number of candidates (a small --limit or test set) makes R@k
    100 by construction: every candidate is within the top k. One warning per such direction (the smallest fold
    counts; --distractors add candidates to their own condition only)."""
    parts = [ds] if ds.folds is None else [ds.subset(f) for f in ds.folds]
    candidates = {"t2i": (min(len(p.gallery_images) for p in parts), "images"),
                  "i2t": (min(p.n_captions for p in parts), "captions")}
    out = []
    for direction, (n, what) in candidates.items():
        trivial = sorted({int(k) for k in ks if int(k) >= n})
        if trivial:
            names = ", ".join(f"R@{k}" for k in trivial)
            out.append(f"{direction} {names} with {n} candidates ({what}) {'is' if len(trivial) == 1 else 'are'} "
                       f"100 by construction: every candidate is within the top {trivial[0]}; give --k below {n}, "
                       + ("or a larger --limit" if ds.limit is not None else "or a larger test set"))
    return out


def _run_fields(cfg: RunConfig, enc: Any) -> dict:
    """timings and hardware; how the gallery was scored (--score-block) is a hardware fact: no number changes."""
    fields = timing.run_fields(cfg, enc)
    ranks = {"score_ranks": enc.world, "score_block": cfg.score_block or scoring.RANKS_BLOCK} if enc.world > 1 else \
        {"score_block": cfg.score_block}  # under torchrun every rank scored its slice of each gallery
    return {**fields, "hardware": {**fields["hardware"], **ranks}}


def record(cfg: RunConfig, plan: Any, enc: Any, evals: dict, reranked: Any = None) -> RunResult:
    """The typed record (deltas, statistics); results.json (never overwritten), per-query file and table.md.
    ``reranked``: the rerank stage's outcome (pipeline/rerank; --rerank): its final rankings' per-query rows under
    ``rerank:<condition>`` and results.json ``rerank``."""

    ds, out = plan.ds, enc.out
    assert out is not None  # rank 0's, the one that writes the run
    values = timing.timed("scoring", lambda: metric_values(evals))  # the metric values of the evaluations
    deltas, boots = timing.timed("bootstrap", lambda: _deltas(cfg.n_boot, cfg.seed, plan, evals, values),
                                 timing.resamples(cfg))
    conditions = _conditions(plan, enc, timing.timed("validity", lambda: _validity(cfg.validity_opts, plan, enc,
                                                                              log=lambda m: _log(cfg, m))))
    # meaning-changing probes (--probes): their own scores, per_item.csv.gz and per-query columns, apart from the
    # invariance numbers (pipeline/sensitivity)
    probes, probe_rows, probe_cols = timing.timed("scoring", lambda: sensitivity.probe_results(
        cfg, plan, enc, evals, log=lambda m: _log(cfg, m)))
    per_item_file = sensitivity.write_per_item(out, probe_rows)
    final = {} if reranked is None else {f"rerank:{c}": e for c, e in reranked.evals.items()}
    per_query_file = timing.timed("writing", lambda: write_per_query(out, ds, {**evals, **final}, probe_cols))
    timing.timed("flips", lambda: write_flips(out, ds, evals, cfg.k, final and reranked.evals))  # docs/flips.md
    timing.timed("writing", lambda: write_index(out, plan, enc))  # embedding_keys.npz: what `vlbench rescore` reads
    timing.enter("writing")  # from here on the record is built (library versions, dataset hash) and written
    model = {"spec": cfg.model, "name": cfg.model.split(":")[0], "hash": enc.model_hash,
             **({"label": cfg.model_name.strip()} if cfg.model_name else {}), "identity": enc.adapter.identity()}
    dataset = ds.describe()
    rec = RunRecord(
        run_id=enc.run_id, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
        metric_version=compute.METRIC_VERSION, vlbench_version=__version__,
        model=ModelInfo(cfg.model, enc.model_hash, model),
        dataset=DatasetInfo(dataset["name"], dataset["hash"], dataset),
        conditions=conditions, settings=_settings(cfg, plan, enc), values=values, deltas=deltas, intervals=boots,
        model_input_analysis=_mia(cfg.mia_score, plan, evals), environment=library_versions(),
        other={"wall_time_s": None, "timings": None, "hardware": None,  # the clock's report, taken last (below)
               "encoding": enc.stats.as_dict() | {"processes": enc.world, "model_loaded": enc.adapter.loaded} |
                           ({"cache": enc.cache.stats, "cache_dir": str(enc.cache.root)} if enc.cache else {}),
               "caption_issues": ds.issues[:1000], "per_query": per_query_file,
               **({"per_item": per_item_file, "sensitivity": probes} if probes else {}),
               "warnings": cutoff_warnings(cfg.k, ds),
               "results_hash": sha256_json([v.to_json() for v in values]),
               **per_language(ds, evals),  # a multilingual set: each language's values (their mean is the run's)
               **({} if reranked is None else {"rerank": reranked.section})})
    # mCE, shortcut sources: read from the record, placed in a new record (the first is never changed)
    rec = dataclasses.replace(rec, other={**rec.other, **variant_summaries(cfg, plan, rec),
                                          FILES: file_manifest(out)})  # what the run's files hash to
    budgets.write_curve(out, rec.to_json())  # budget_curve.csv/.png (--token-budget; not among the hashed files)
    # the clock's report, the last thing before results.json is serialised and written: wall_time_s counts from the
    # command's start to here (startup included); only that serialising and writing (milliseconds) comes after it
    run_fields = _run_fields(cfg, enc)
    if reranked is not None:  # the pair model's work: pairs scored (forwards) and served by the pair-score cache
        run_fields["timings"]["pairs"] = reranked.counts
    rec = dataclasses.replace(rec, other={**rec.other, "wall_time_s": round(run_fields["timings"]["wall_seconds"], 3),
                                          **run_fields})
    results = rec.to_json()
    _write_results(out, results, rec)
    _log(cfg, f"wrote {results_path(out)}")
    return RunResult(out, results, evals, rec)


def _write_results(out: Path, results: dict, rec: RunRecord) -> None:
    write_run_files(out, results, format_table(rec))