"""``vlbench run --task order|sugarcrepe``: a choice task through the same run folder conventions as a
retrieval run (results.json + per-item records + table.md, the embedding cache, warm runs, --out claim).

Results: one record per item set (condition ``task:order`` or ``task:sugarcrepe:<subset>``), direction
``i2t`` (the image picks a caption), metric ``accuracy`` in percent with its 95% bootstrap CI, so the
leaderboard reads them with the retrieval runs and keeps them apart (their own table). With ``--perturb`` /
``--perturb-images`` every set is also scored under each condition (``<set>@<condition>``: vlbench.tasks.conditions),
with its flips against the clean set (flips.csv, per_item.csv.gz, results.json deltas and intervals).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..encoding.multivector import is_multivector
from ..errors import VlbenchError
from ..metrics import compute
from ..pipeline.run_config import RunConfig, check_folder
from ..pipeline.run_options import flag_of
from ..results import Condition, DatasetInfo, Delta, Interval, MetricKey, MetricValue, ModelInfo, RunRecord
from ..runfolder import FILES, PER_ITEM, claim_out, file_manifest, new_run_id, prepare_out, results_path, write_results
from ..util.env import library_versions
from ..util.io import sha256_json
from ..util.markdown import md_table
from . import conditions as task_conditions
from . import maxsim_run, pair_run
from .blind import blind_baseline as baseline
from .choice import N_BOOT, distinct_images, distinct_texts
from .registry import ItemSets, TaskDescriptions, get_task, tasks
from .sets.sugarcrepe import SUGARCREPE_COMMIT, SUGARCREPE_RAW, parse_sugarcrepe_spec, sugarcrepe_root  # noqa: F401  re-exported

#: name -> description of every registered task (vlbench.tasks.registry), read when used
TASKS = TaskDescriptions()


#: the retrieval-run options a choice task takes too: declared once, in RunConfig (same defaults, same CLI flags)
SHARED_OPTIONS = ("out", "data_dir", "device", "precision", "batch_size", "num_workers", "seed", "cache_dir",
                  "no_cache", "restart", "quiet", "trust_remote_code", "revision", "dataset_name", "model_name",
                  "perturb", "perturb_params", "perturb_images", "corrupt_at", "corrupt_backend")


def _task_fields():
    shared = {f.name: f for f in dataclasses.fields(RunConfig)}
    return [("task", str), ("model", str), ("dataset", "str | None", dataclasses.field(default=None)),
            # SugarCrepe: the COCO val2017 folder (default $VLBENCH_COCO_VAL2017)
            ("images_dir", "str | None", dataclasses.field(default=None)),
            # --perturb: which candidates of an item a caption perturbation changes (all | correct; None: all)
            ("perturb_options", "str | None", dataclasses.field(default=None)),
            *[(n, shared[n].type, _default(shared[n])) for n in SHARED_OPTIONS]]


def _default(f: dataclasses.Field):
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=f.default_factory)
    return dataclasses.field(default=f.default)


#: Any: its fields are made at import time from RunConfig's, so no type checker can know them
_TaskFields: Any = dataclasses.make_dataclass("_TaskFields", _task_fields(), frozen=True)
_TaskFields.__module__ = __name__


def retrieval_only() -> tuple:
    """The RunConfig fields a choice task does not use (every field that is not a TaskConfig field)."""

    mine = {f.name for f in dataclasses.fields(_TaskFields)}
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in mine)


def refuse_retrieval_options(task: str, given) -> None:
    """VlbenchError naming the first retrieval-only option in ``given`` (RunConfig field names)."""

    for name in retrieval_only():
        if name in given:
            raise VlbenchError(f"{flag_of(name)} applies to retrieval runs, not to --task {task}",
                               f"leave {flag_of(name)} out (command line, --config file or keyword): a choice task "
                               "scores each item's candidates against its image, with no retrieval settings")


class TaskConfig(_TaskFields):
    """A choice-task run's options: ``task``, ``model``, ``dataset``, ``images_dir`` and
    :data:`SHARED_OPTIONS` (frozen). A retrieval-only option (``k=5``) is a VlbenchError naming it."""

    __slots__ = ()

    def __init__(self, **kwargs):
        refuse_retrieval_options(kwargs.get("task", "?"), kwargs)
        super().__init__(**kwargs)


def _log(cfg: TaskConfig, msg: str) -> None:
    if not cfg.quiet:
        print(msg, file=sys.stderr, flush=True)


def load_item_sets(cfg: TaskConfig) -> ItemSets:
    """The item sets of the run's task (its registered record's ``load``); an unknown task names the known."""
    return get_task(cfg.task).load(cfg, lambda m: _log(cfg, f"note: {m}"))


@dataclass
class TaskRunResult:
    out_dir: Path
    results: dict  # the results.json content (record.to_json())
    evaluations: dict  # condition -> ChoiceResult
    record: RunRecord | None = None  # the typed record behind results

    def table(self) -> str:
        return format_task_table(self.record or RunRecord.from_json(self.results))


def _check(cfg: TaskConfig) -> None:
    if cfg.batch_size < 1:
        raise VlbenchError(f"--batch-size must be >= 1, got {cfg.batch_size}", "e.g. --batch-size 64")
    if cfg.num_workers is not None and cfg.num_workers < 0:
        raise VlbenchError(f"--num-workers must be >= 0, got {cfg.num_workers}", "e.g. --num-workers 4")
    if not 0 <= cfg.seed < 2**63:
        raise VlbenchError(f"--seed must be a non-negative integer below 2**63, got {cfg.seed}", "e.g. --seed 0")
    for opt, value in (("--out", cfg.out), ("--cache-dir", None if cfg.no_cache else cfg.cache_dir)):
        check_folder(opt, value)


def _encode(cfg: TaskConfig, sets: ItemSets, adapter, cache, stats):
    """Each distinct image and each distinct model input once, over all item sets (cached)."""
    # lazy: vlbench --help imports this module; keep it light
    from ..encoding.encode import encode_images, encode_texts, stack

    all_items = [it for items in sets.sets.values() for it in items]
    keys, texts = distinct_images(all_items), distinct_texts(all_items)
    _log(cfg, f"encoding {len(keys)} images and {len(texts)} candidate captions with {cfg.model}")
    img = stack(encode_images(adapter, [sets.image_path[k] for k in keys], batch_size=cfg.batch_size,
                              num_workers=cfg.num_workers, cache=cache, stats=stats, progress=not cfg.quiet),
                len(keys), "image")
    txt = stack(encode_texts(adapter, texts, batch_size=max(cfg.batch_size, 256), cache=cache, stats=stats,
                             progress=not cfg.quiet), len(texts), "text")
    if img.shape[1] != txt.shape[1]:
        raise VlbenchError(f"model {cfg.model!r} gives image embeddings of size {img.shape[1]} but text embeddings "
                           f"of size {txt.shape[1]}", "a dual encoder must map both modalities into one space")
    return dict(zip(keys, img)), dict(zip(texts, txt))


def run_task(config: TaskConfig | None = None, **kwargs) -> TaskRunResult:
    """Run a choice task: ``run_task(task="order", model="clip", dataset="flickr30k", out="runs/x")``."""
    from ..encoding.session import EncodingSession  # lazy: vlbench --help imports this module; keep it light

    cfg = dataclasses.replace(config) if config else TaskConfig(**kwargs)
    t0 = time.time()
    _check(cfg)
    plan = task_conditions.plan_conditions(cfg)  # a bad --perturb spec fails before any data is read
    pair = pair_run.is_pair_scorer(cfg.model)  # a pair scorer as the task's model (vlbench.tasks.pair_run)
    if pair:
        pair_run.check_pair_task(cfg.task, plan)
    elif maxsim_run.names_multivector(cfg.model):  # a plug-in's: once its session is open, below
        maxsim_run.check_maxsim_task(cfg.task)
    lock = claim_out(cfg.out)
    try:
        sets = with_conditions(cfg, load_item_sets(cfg), plan)  # data first: bad input fails before a model loads
        session: Any = pair_run.PairSession.open(cfg) if pair else EncodingSession.open(
            cfg.model, cache_dir=cfg.cache_dir, no_cache=cfg.no_cache, restart=cfg.restart, device=cfg.device,
            precision=cfg.precision, trust_remote_code=cfg.trust_remote_code, revision=cfg.revision)
        adapter, model_hash, cache, stats = session.model, session.model_hash, session.cache, session.stats
        multi = not pair and is_multivector(adapter)  # token vectors, MaxSim pair scores (tasks/maxsim_run.py)
        if multi:
            maxsim_run.check_maxsim_task(cfg.task)
        run_id = new_run_id(cfg.model, sets.dataset["name"], model_hash, sets.dataset["hash"], task=cfg.task)
        out = prepare_out(cfg.out, run_id)
        if pair:
            scores = pair_run.score_sets(session, sets.sets, sets.image_path, batch_size=cfg.batch_size,
                                         log=lambda m: _log(cfg, m))
            evaluate = get_task(cfg.task).evaluate
            evals = {c: evaluate(items, scores, None, seed=cfg.seed) for c, items in sets.sets.items()}
            adapter = session  # what the record reads: identity(), device, loaded
        elif multi:
            evals = _evaluate_maxsim(cfg, sets, plan, session)
        else:
            evals = _evaluate_embeddings(cfg, sets, plan, adapter, cache, stats)
        blind = blind_baseline(cfg, sets)
        rec = _record(cfg, sets, evals, adapter, model_hash, run_id, t0, stats, cache, out, blind)
        results = rec.to_json()
        write_results(out, results, format_task_table(rec))
        _log(cfg, f"wrote {results_path(out)}")
        return TaskRunResult(out, results, evals, rec)
    finally:
        if lock is not None:
            lock.release()


def _evaluate_embeddings(cfg: TaskConfig, sets: ItemSets, plan, adapter, cache, stats) -> dict:
    """Each set's result from the dual encoder's embeddings (clean and corrupted images, every caption)."""
    img, txt = _encode(cfg, sets, adapter, cache, stats)
    corrupted, bound = task_conditions.encode_corrupted(
        adapter, plan, img, sets.image_path, batch_size=cfg.batch_size, num_workers=cfg.num_workers,
        cache=cache, stats=stats, progress=not cfg.quiet)
    evaluate = get_task(cfg.task).evaluate
    evals = {cond: evaluate(items, corrupted.get(_image_condition(sets, cond), img), txt, seed=cfg.seed)
             for cond, items in sets.sets.items()}
    for cond in evals:  # what binding a corruption to the model fixed (its geometry, its cache key)
        if bound.get(_image_condition(sets, cond)):
            sets.notes[cond].update(bound[_image_condition(sets, cond)])
    return evals


def _evaluate_maxsim(cfg: TaskConfig, sets: ItemSets, plan, session) -> dict:
    """Each set's result from a multi-vector model's MaxSim pair scores (clean and corrupted images)."""
    clean = {c: items for c, items in sets.sets.items() if not _image_condition(sets, c)}
    scores, bound = maxsim_run.score_sets_maxsim(cfg, session, clean, sets.image_path, list(plan.images),
                                                 log=lambda m: _log(cfg, m))
    evaluate = get_task(cfg.task).evaluate
    evals = {cond: evaluate(items, scores[_image_condition(sets, cond)], None, seed=cfg.seed)
             for cond, items in sets.sets.items()}
    for cond in evals:  # what binding a corruption to the model fixed (its geometry, its cache key)
        if bound.get(_image_condition(sets, cond)):
            sets.notes[cond].update(bound[_image_condition(sets, cond)])
    return evals


def with_conditions(cfg: TaskConfig, sets: ItemSets, plan) -> ItemSets:
    """The item sets with every (set x condition) added after its set; each condition's meta in ``notes``."""
    if not plan:
        return sets
    text_sets, text_meta = task_conditions.perturb_sets(get_task(cfg.task), sets.sets, plan, cfg.seed)
    image_sets, image_meta = task_conditions.image_sets(sets.sets, plan)
    for name, meta in text_meta.items():
        if meta["n_not_applicable"]:  # said as retrieval runs say it: the texts are left as they are
            _log(cfg, f"note: {name}: left {meta['n_not_applicable']} of the {meta['n_captions']} candidate texts "
                      f"it was asked to change unchanged (not applicable to them)")
    metas = {**text_meta, **image_meta}
    notes = {c: {**sets.notes.get(c, {}), "perturbation": None, "condition_kind": "clean"} for c in sets.sets}
    notes.update({c: {**sets.notes.get(m["set"], {}), **m} for c, m in metas.items()})
    return ItemSets(task_conditions.ordered(sets.sets, {**text_sets, **image_sets}), sets.image_path, sets.dataset,
                    notes)


def _image_condition(sets: ItemSets, cond: str) -> str | None:
    """The image condition (``img:...``) of a condition, None for a clean set or a caption perturbation."""
    return (sets.notes.get(cond) or {}).get("image_condition")


def blind_baseline(cfg: TaskConfig, sets: ItemSets) -> dict:
    """The text-only baseline per item set (vlbench.tasks.blind), or why there is none (said on the console).
    An image condition's is its clean set's (the scorer reads no image), recorded as such; a caption
    perturbation's is recomputed on its perturbed candidates."""

    texts = {c: items for c, items in sets.sets.items() if not _image_condition(sets, c)}
    out = baseline(cfg.task, texts, cfg.data_dir, cfg.seed, note=lambda m: _log(cfg, f"note: {m}"))
    if out.get("sets"):
        for cond in sets.sets:
            if _image_condition(sets, cond):
                base = sets.notes[cond]["set"]
                out["sets"][cond] = {**out["sets"][base], "same_as": base}
    return out


def _values(evals: dict, blind: dict) -> list[MetricValue]:
    """Accuracy with its interval, the task's other scores, chance and the blind text-only accuracy (its
    ``same_as``: the clean set it was taken from) per condition."""
    values = []
    for cond, res in evals.items():
        values.append(MetricValue(cond, MetricKey("i2t", "accuracy"), res.accuracy,
                                  {"ci_low": res.ci_low, "ci_high": res.ci_high, "n": res.n_items}))
        values += [MetricValue(cond, MetricKey("i2t", m), v, x) for m, v, x in getattr(res, "more_values", list)()]
        values.append(MetricValue(cond, MetricKey("i2t", "chance"), res.chance))
        b = (blind.get("sets") or {}).get(cond)
        if b:
            values.append(MetricValue(cond, MetricKey("i2t", "blind_accuracy"), b["accuracy"],
                                      {"ci_low": b["ci_low"], "ci_high": b["ci_high"], "n": b["n_items"],
                                       **({"same_as": b["same_as"]} if "same_as" in b else {})}))
            # a set with several scores gives the blind value of each beside it (its result's "more_values")
            values += [MetricValue(cond, MetricKey("i2t", f"blind_{m}"), v, x) for m, v, x in b.get("more_values", ())]
    return values


def _changes(cfg, sets: ItemSets, evals: dict, out: Path) -> tuple[list, list, dict]:
    """Per condition with a clean set: the accuracy change (deltas), its paired bootstrap interval with the flip
    counts (intervals), and flips.csv (written into ``out``; its name for results.json)."""
    metas = {c: m for c, m in sets.notes.items() if m.get("set") and c in evals}
    found = task_conditions.all_flips(evals, metas, cfg.seed, N_BOOT)
    key = MetricKey("i2t", "accuracy")
    deltas, intervals = [], []
    for cond, f in found.items():
        base = evals[metas[cond]["set"]].accuracy
        deltas.append(Delta(cond, key, f["delta"], f["delta"] / base if base else None))
        intervals.append(Interval(cond, {"direction": "i2t", "metric": "accuracy", **f}))
    name = task_conditions.write_flips(out, evals, metas, found)
    return deltas, intervals, ({"flips": name} if name else {})


def _record(cfg, sets: ItemSets, evals: dict, adapter, model_hash, run_id, t0, stats, cache, out,
            blind: dict) -> RunRecord:
    """The typed record of a choice-task run (accuracy with its interval, chance and the blind text-only
    accuracy where there is one, per item set and condition; the conditions' changes and flips)."""

    values = _values(evals, blind)
    deltas, intervals, flips = _changes(cfg, sets, evals, out)
    conditions = {cond: Condition(cond, {"task": cfg.task, "kind": "choice", **sets.notes.get(cond, {}),
                                         "by_kind": res.by_kind}) for cond, res in evals.items()}
    kind = get_task(cfg.task)
    pair = isinstance(adapter, pair_run.PairSession)
    scored_by = pair_run.PAIR_RULE if pair else maxsim_run.MAXSIM_RULE if is_multivector(adapter) else None
    task = {"name": cfg.task, "kind": "choice", "description": kind.description,
            "rule": f"{kind.rule}; {scored_by}" if scored_by else kind.rule,
            "ci": {"method": "percentile bootstrap over items", "n_boot": N_BOOT, "alpha": 0.05, "seed": cfg.seed},
            "blind_baseline": {k: v for k, v in blind.items() if k != "sets"},
            # every score the set's paper reports, in its order (the leaderboard shows each), and the blind ceiling
            "scores": [{"metric": m, "label": label} for m, label in kind.scores],
            **({"blind_ceiling": kind.blind_ceiling} if kind.blind_ceiling else {}),
            **({"conditions": _conditions_said(cfg)} if intervals else {})}
    model = {"spec": cfg.model, "name": cfg.model.split(":")[0], "hash": model_hash,
             **({"kind": "pair"} if pair else {}), **({"label": cfg.model_name.strip()} if cfg.model_name else {}),
             "identity": adapter.identity()}
    return RunRecord(
        run_id=run_id, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
        metric_version=compute.METRIC_VERSION, vlbench_version=__version__,
        model=ModelInfo(cfg.model, model_hash, model),
        dataset=DatasetInfo(sets.dataset["name"], sets.dataset["hash"], sets.dataset), conditions=conditions,
        settings={"seed": cfg.seed, "precision": cfg.precision, "device": str(adapter.device),
                  "batch_size": cfg.batch_size},
        values=values, deltas=deltas, intervals=intervals, environment=library_versions(),
        other={"wall_time_s": round(time.time() - t0, 3), "task": task,
               "encoding": stats.as_dict() | {"model_loaded": adapter.loaded} |
                           ({"cache": cache.stats, "cache_dir": str(cache.root)} if cache else {}),
               "per_item": _write_per_item(out, evals, sets.notes), **flips,
               "results_hash": sha256_json([v.to_json() for v in values]), FILES: file_manifest(out)})


def _conditions_said(cfg) -> dict:
    """results.json task.conditions: the condition options as given, and how flips are counted."""
    return {"perturb": cfg.perturb, "perturb_params": dict(cfg.perturb_params or {}),
            "perturb_options": cfg.perturb_options or task_conditions.DEFAULT_PERTURB_OPTIONS,
            "perturb_images": cfg.perturb_images, "corrupt_at": cfg.corrupt_at, "corrupt_backend": cfg.corrupt_backend,
            "name": f"<set>{task_conditions.SEP}<condition>",
            "flips": "per item: clean correct -> condition wrong (hit_to_miss) and back (miss_to_hit); the accuracy "
                     "change with a paired percentile bootstrap over items (intervals, flips.csv)"}


def _write_per_item(out: Path, evals: dict, notes: dict) -> str:
    import pandas as pd

    rows = []
    conditions = any((notes.get(c) or {}).get("set") for c in evals)
    for cond, res in evals.items():
        base = (notes.get(cond) or {}).get("set") or cond  # a clean set is its own
        clean = {r.item_id: int(r.correct) for r in evals[base].records}
        for r in res.records:
            flip = {}
            if conditions:  # the item's set, its clean answer and its flip (none for the clean set itself)
                was, now = clean[r.item_id], int(r.correct)
                flip = {"set": base, "clean_correct": was,
                        "flip": "hit_to_miss" if was > now else "miss_to_hit" if now > was else ""}
            rows.append({"condition": cond, "item_id": r.item_id, "image": r.image, "n_candidates": len(r.scores),
                         "chosen": r.chosen, "correct": int(r.correct), "scores": json.dumps(r.scores),
                         **getattr(r, "extra_columns", {}), **flip})
    name = PER_ITEM
    tmp = out / f".{name}.tmp"
    pd.DataFrame(rows).to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
    tmp.replace(out / name)
    return name


def format_task_table(rec: RunRecord) -> str:
    name = (rec.other.get("task") or {}).get("name")
    kind = tasks().get(name) if isinstance(name, str) else None
    if kind is not None and kind.table is not None:  # a task with a table of its own (SugarCrepe++)
        return kind.table(rec) + format_flips_table(rec)
    rows = []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        acc, blind = get["accuracy"], get.get("blind_accuracy")
        ci = f"[{acc.extra['ci_low']:.2f}, {acc.extra['ci_high']:.2f}]"
        rows.append([cond, acc.extra["n"], f"{acc.value:.2f}", ci,
                     f"{get['chance'].value:.2f}", f"{blind.value:.2f}" if blind else "-"])
    return md_table(["set", "items", "accuracy %", "95% CI", "chance %", "blind (text-only) %"], rows,
                    pad=True) + format_flips_table(rec)


def format_flips_table(rec: RunRecord) -> str:
    """The conditions' changes against their clean sets (empty for a run without conditions)."""
    rows = [[b.condition, b.get("n"), f"{b.get('delta'):+.2f}", f"[{b.get('ci_low'):+.2f}, {b.get('ci_high'):+.2f}]",
             b.get("hit_to_miss"), b.get("miss_to_hit")] for b in rec.intervals if b.get("metric") == "accuracy"]
    if not rows:
        return ""
    return "\n\n" + md_table(["condition", "items", "change (points)", "paired 95% CI", "right -> wrong",
                               "wrong -> right"], rows, pad=True)
