"""A finished run as MTEB result files: the layout and JSON that ``mteb``'s own loader reads.

Layout (MTEB's results repository and ``mteb.ResultCache``)::

    OUT/results/<model name, '/' as '__'>/<revision>/model_meta.json
    OUT/results/<model>/<revision>/<TaskName>.json                        the clean condition
    OUT/results/<model>/<revision>/run_settings.jsonl                     package versions (MTEB's own file)
    OUT/results/<model>/<revision>/experiments/vlbench_condition_<c>/...  one folder per perturbed condition

``mteb.ResultCache(OUT).load_results()`` reads the clean files; with ``load_experiments="match_name"`` it also
reads every condition, each a ModelResult whose ``experiment_name`` is ``vlbench_condition_<condition>``.

Why conditions are MTEB *experiments* and not subsets or splits: MTEB averages a task's main score over every
``hf_subset`` and split it finds (``TaskResult.get_score``), so a perturbed condition written as a subset or split
would be averaged into the clean number on every leaderboard; an experiment is MTEB's own place for a variant of a
model's evaluation, kept apart from the default results (the default load skips it) and named by its
``experiment_kwargs`` (``{"vlbench_condition": "<condition>"}``), so a reader tells the conditions apart by name.

Metrics: only those vlbench computes as MTEB's retrieval evaluator does (pytrec_eval; docs/export.md has the
table): vlbench's Recall@k is the hit rate, MTEB's ``hit_rate_at_k`` (pytrec_eval ``success_k``); MTEB's
``recall_at_k`` is the share of a query's positives in the top k, equal to the hit rate only where every query
has exactly one positive (checked on the run's per-query positive counts); MRR@k, Precision@k, mAP@k and binary
nDCG@k map to ``mrr_at_k``, ``precision_at_k``, ``map_at_k``, ``ndcg_at_k`` when the run has them. Everything else
(RSUM, ranks, R-precision, mAP@R, nDCG with cosine gains) has no MTEB name and is left out.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .. import registry
from ..datasets.specs import BUILTIN
from ..errors import OptionError, VlbenchError
from ..metrics import specs  # noqa: F401 -- imported for the built-in metrics it registers
from ..pipeline.rerank.readback import STAGE_KEY, final_record, second_stage
from ..plugins.exporter import ExportRequest
from ..results import RunRecord, parse_created
from ..runfolder import FILES
from ..runread import proven_per_query
from ..util.io import atomic_write_text, write_json

#: vlbench datasets that are the test set of an MTEB task, per direction. vlbench's ``flickr30k`` is the Karpathy
#: 1k test split (1,000 images, 5,000 captions), the shape MTEB's Flickr30k tasks describe (their descriptive
#: statistics: 1,000 images and 5,000 captions in "test"). MTEB's MSCOCO tasks are M-BEIR's COCO (24,809 captions),
#: not the Karpathy 5k test set, so ``coco`` keeps a vlbench task name.
MTEB_TASKS = {"flickr30k": ({"i2t": "Flickr30kI2TRetrieval", "t2i": "Flickr30kT2IRetrieval"}, 1000, 5000)}
#: MTEB's main score of its image-text retrieval tasks (TaskMetadata.main_score of the tasks above)
MAIN_SCORE = "ndcg_at_10"
#: vlbench metric name -> MTEB's name prefix (``<prefix>_at_<k>``), for metrics defined as pytrec_eval defines them
CUT_NAMES = {"mrr": "mrr", "precision": "precision", "map": "map", "ndcg_binary": "ndcg"}
_LANGS = {"en": "eng-Latn", "de": "deu-Latn", "fr": "fra-Latn", "cs": "ces-Latn"}
EXPERIMENT_KEY = "vlbench_condition"
_UNSAFE = re.compile(r'[<>:"|?*\\/\0]')  # what MTEB replaces by "_" in an experiment folder name
_DIRECTION = {"i2t": "I2T", "t2i": "T2I"}


@dataclass(frozen=True)
class TaskFile:
    """One exported MTEB result: its path under OUT and its JSON document."""

    path: Path
    doc: dict


def task_name(record: RunRecord, direction: str) -> str:
    """MTEB's task name when the run's dataset is an MTEB task's test set, else
    ``VLBench<Dataset><I2T|T2I>Retrieval``."""
    info = record.dataset.fields
    known = MTEB_TASKS.get(record.dataset.name)
    whole = not info.get("limit") and not record.settings.get("limit") and not info.get("extra_positives")
    if known and whole and (info.get("n_images"), info.get("n_captions")) == known[1:] \
            and (info.get("gallery") or "test") == "test":
        return known[0][direction]
    words = re.split(r"[^0-9A-Za-z]+", record.dataset.name)
    return "VLBench" + "".join(w[:1].upper() + w[1:] for w in words if w) + f"{_DIRECTION[direction]}Retrieval"


def experiment_folder(condition: str) -> str:
    """The experiment folder of a condition, named as MTEB names an experiment from its kwargs."""
    return f"{EXPERIMENT_KEY}_{_UNSAFE.sub('_', condition)}"


def _unit_scale(metric: str) -> float | None:
    """1/100 for a percent metric, 1 for a fraction, None when this vlbench does not know the metric."""
    try:
        m = registry.metrics.get(metric)
    except (KeyError, VlbenchError):
        return None
    return 0.01 if getattr(m, "percent", False) or getattr(m, "unit", "") == "%" else 1.0


def scores(record: RunRecord, condition: str, direction: str, one_positive: bool) -> dict:
    """MTEB's score names -> values (fractions) of one condition and direction; ``one_positive``: every query of it
    has exactly one positive (then MTEB's recall_at_k is the hit rate too)."""
    protocol = record.settings.get("protocol") if isinstance(record.settings.get("protocol"), dict) else {}
    hit = direction == "t2i" or (protocol or {}).get("i2t_recall", "hit") == "hit"
    out: dict[str, float] = {}
    for key, value in record.values_of(condition).items():
        if key.direction != direction or value is None or key.k is None:
            continue
        if key.metric == "recall" and hit:
            out[f"hit_rate_at_{key.k}"] = value / 100.0
            if one_positive:
                out[f"recall_at_{key.k}"] = value / 100.0
        elif key.metric in CUT_NAMES:
            scale = _unit_scale(key.metric)
            if scale is not None:
                out[f"{CUT_NAMES[key.metric]}_at_{key.k}"] = value * scale if scale != 1.0 else value
    if "recall_at_1" in out:
        out["accuracy"] = out["recall_at_1"]  # MTEB's retrieval scores report Recall@1 as "accuracy" too
    return dict(sorted(out.items(), key=lambda kv: (kv[0].rsplit('_', 1)[0], _k(kv[0]))))


def _k(name: str) -> int:
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _one_positive(folder: str, record: RunRecord) -> dict:
    """{(condition, direction): every query has exactly one positive}, from the run's own per-query file (its
    ``n_positives`` column); empty when the run wrote none."""
    if not isinstance(record.other.get(FILES), dict):  # a run written before its files were hashed: no proof
        return {}
    try:
        tables = proven_per_query(folder, record)
    except (OSError, ValueError, EOFError) as exc:
        raise VlbenchError(f"the per-query file of run {folder} cannot be read ({exc})",
                           "export an intact run folder (re-run it with 'vlbench run')") from None
    out = {}
    for key, table in (tables or {}).items():
        n = table.columns.get("n_positives")
        out[key] = n is not None and len(n) > 0 and bool((n == 1).all())
    return out


def _languages(record: RunRecord) -> list[str]:
    lang = record.dataset.fields.get("language")
    spec = BUILTIN.get(record.dataset.name)
    if lang is None and spec is not None:
        lang = spec.language or "en"
    return [_LANGS[lang]] if lang in _LANGS else []


def model_revision(record: RunRecord) -> str:
    """The model's revision as MTEB keys it: the checkpoint's revision when the run recorded one, else vlbench's
    model hash (the content identity of the weights and preprocessing)."""
    ident = record.model.fields.get("identity")
    rev = ident.get("revision") if isinstance(ident, dict) else None
    return str(rev) if isinstance(rev, str) and rev.strip() else record.model.hash


def _segment(text: str) -> str:
    """One path segment: MTEB's spelling ('/' as '__', ' ' as '_'), other characters a folder name cannot hold
    safely as '_', never '.' or '..' (a name never writes outside OUT)."""
    seg = re.sub(r"[^0-9A-Za-z._=+-]", "_", text.replace("/", "__").replace(" ", "_"))
    return seg if seg.strip(".") else seg.replace(".", "_") or "_"


def model_folder(name: str) -> str:
    return _segment(name)


def model_meta(record: RunRecord, name: str, condition: str) -> dict:
    ident = record.model.fields.get("identity")
    return {"name": name, "revision": model_revision(record),
            "embed_dim": ident.get("embed_dim") if isinstance(ident, dict) else None,
            "modalities": ["image", "text"], "similarity_fn_name": "cosine",
            "experiment_kwargs": None if condition == "clean" else {EXPERIMENT_KEY: condition},
            "vlbench_model_spec": record.model.spec, "vlbench_model_hash": record.model.hash,
            **({"vlbench_stages": record.other[STAGE_KEY]} if STAGE_KEY in record.other else {})}


def is_probe(record: RunRecord, condition: str) -> bool:
    """A meaning-changing probe's condition (``--probes``: kind "sensitivity"): not exported (see :func:`notes`)."""
    return record.condition(condition).meta.get("kind") == "sensitivity"


def task_files(folder: str, record: RunRecord, name: str, source: RunRecord | None = None) -> list[TaskFile]:
    """Every MTEB result document of a run, per condition and direction (paths relative to OUT); ``source``: the
    record whose per-query file gives the queries' positives (a two-stage run's, when ``record`` is its final
    ranking: the same queries and positives)."""
    if record.other.get("task"):
        raise VlbenchError(f"run {folder} is a choice-task run: MTEB result files hold retrieval scores",
                           "export a retrieval run (vlbench run without --task)")
    one = _one_positive(folder, source or record)
    created = parse_created(record.created)
    timings = record.timings or {}
    wall = timings.get("wall_seconds", record.other.get("wall_time_s"))
    split = record.dataset.fields.get("gallery") or "test"
    base = Path("results") / model_folder(name) / _segment(model_revision(record))
    out = []
    for cond in [c for c in record.condition_names() if not is_probe(record, c)]:
        where = base if cond == "clean" else base / "experiments" / experiment_folder(cond)
        for d in ("i2t", "t2i"):
            s = scores(record, cond, d, one.get((cond, d), False))
            if not s:
                continue
            entry = {"hf_subset": "default", "languages": _languages(record), "main_score": s.get(MAIN_SCORE), **s}
            doc = {"dataset_revision": record.dataset.hash, "task_name": task_name(record, d), "mteb_version": None,
                   "scores": {split: [entry]}, "evaluation_time": wall, "kg_co2_emissions": None,
                   "date": created.timestamp() if created else None,
                   "vlbench": {"version": record.vlbench_version, "run_id": record.run_id,
                               "metric_version": record.metric_version, "condition": cond,
                               "condition_meta": record.condition(cond).meta, "dataset": record.dataset.name,
                               "tie_rule": record.settings.get("tie_rule")}}
            out.append(TaskFile(where / f"{doc['task_name']}.json", doc))
    if not out:
        raise VlbenchError(f"run {folder} has no score that MTEB reports (Recall@k as the hit rate, MRR@k, "
                           "Precision@k, mAP@k, binary nDCG@k)", "export a retrieval run written by 'vlbench run'")
    return out


def notes(record: RunRecord) -> list[str]:
    """What a reader of the exported files should know about this run's export (printed by the command)."""
    out = []
    has = any(k.metric == "ndcg_binary" and k.k == 10 for c in record.condition_names() for k in record.values_of(c))
    if not has or _unit_scale("ndcg_binary") is None:
        out.append("main_score is null in every file: the run has no binary nDCG@10 (MTEB's main score of image-text "
                   "retrieval); re-run with a vlbench that reports ndcg_binary and --k including 10 to fill it")
    probes = [c for c in record.condition_names() if is_probe(record, c)]
    if probes:
        out.append(f"{len(probes)} meaning-changing probe condition(s) left out ({', '.join(probes)}): MTEB has no "
                   "place for sensitivity scores (a probe is scored against its own relevance, not the task's test "
                   "set); they are in the run's results.json (sensitivity) and on 'vlbench leaderboard'")
    if STAGE_KEY in record.other:
        out.append(f"a two-stage run: the files hold its final ranking ({record.other[STAGE_KEY]['stages']}), "
                   "under the model name that says the stages; its first stage alone is the plain model's run "
                   "(export a run made without --rerank for it)")
    return out


def write(folder: str, record: RunRecord, out: str, name: str, source: RunRecord | None = None) -> list[str]:
    """Write the run's MTEB result files under ``out``; returns every path written (task files, model_meta.json,
    run_settings.jsonl). ``source``: as for :func:`task_files`."""
    files = task_files(folder, record, name, source)
    written = []
    versions = {"vlbench": record.vlbench_version, **{k: v for k, v in record.environment.items()
                                                       if isinstance(v, str) and k in ("torch", "transformers",
                                                                                       "open_clip_torch")}}
    for where in dict.fromkeys(f.path.parent for f in files):
        cond = next(f.doc["vlbench"]["condition"] for f in files if f.path.parent == where)
        os.makedirs(Path(out) / where, exist_ok=True)
        write_json(Path(out) / where / "model_meta.json", model_meta(record, name, cond))
        written.append(str(Path(out) / where / "model_meta.json"))
        here = [f for f in files if f.path.parent == where]
        lines = [json.dumps({"task": f.doc["task_name"], "splits": list(f.doc["scores"]), "version": versions,
                             "encode_kwargs": {"batch_size": record.settings.get("batch_size")},
                             "subsets": ["default"]}) for f in here]
        atomic_write_text(Path(out) / where / "run_settings.jsonl", "\n".join(lines) + "\n")
        written.append(str(Path(out) / where / "run_settings.jsonl"))
        for f in here:
            write_json(Path(out) / f.path, f.doc)
            written.append(str(Path(out) / f.path))
    return written


class MtebExporter:
    description = "MTEB result files, read by mteb's own loader (perturbed conditions as MTEB experiments)"
    run_kinds = ("retrieval",)

    def export(self, request: ExportRequest) -> list:
        if request.metrics is not None:
            raise OptionError("metrics", "{opt} selects the results of a model card: MTEB result files carry "
                              "every metric MTEB defines that the run has (docs/export.md)",
                              "leave out --metrics with --format mteb", flag="--metrics")
        record, name = request.record, request.model_name
        final = final_record(record)  # a two-stage run (--rerank): its final ranking, named by its stages
        if final is not None:
            record, name = final, f"{name} + {second_stage(request.record)}"
        written = write(str(request.folder), record, str(request.out), name, request.record)
        for line in notes(record):
            request.note(f"note: {line}")
        return written


EXPORTER = MtebExporter()
