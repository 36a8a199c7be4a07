"""``vlbench reproduce hendriksen2024``: the runs behind Tables 5.2-5.4 of the chapter, and the published
values beside the measured ones.

4 models (ALIGN, AltCLIP, CLIP, GroupViT) x 4 datasets (MS-COCO, MS-COCO-FG, Flickr30k, Flickr30k-FG) x 14
conditions (clean + the 13 perturbations), under the chapter's protocol (``--protocol hendriksen2024``) and,
with ``also_standard``, vlbench's standard protocol. One run folder per (protocol, model, dataset) under
``<out>/runs/``; a folder that already holds results.json is reused, and the embedding cache makes a restarted
run re-encode nothing it has (resume). The published values ship as package data with their source
(``data/hendriksen2024_published.json``). A measured value is "reproduced" when it is within 5% of the
published one, relative (the thesis' chapter 2, after Petrov and Macdonald 2022).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from vlbench.errors import VlbenchError
from vlbench.results import MetricKey, RunRecord
from vlbench.runfolder import RESULTS
from vlbench.util.markdown import md_table
from vlbench.util.paths import default_data_dir

from ..protocol import RELEVANCE_MODEL
from .plan import CAPTIONS, GALLERY, check_perturb, disk_bytes, problems, raise_if_missing  # noqa: F401  (re-exported: the sizes the plan checks)

MODELS = {"align": "align", "altclip": "altclip", "clip": "clip", "groupvit": "groupvit"}
DATASETS = {"coco": "coco", "coco-fg": "coco-fg", "flickr30k": "flickr30k", "flickr30k-fg": "flickr30k-fg"}
TOLERANCE = 0.05
#: Table 5.3 groups the typos, distractions and synonyms; vlbench compares their mean t2i RSUM
GROUPS = {"typos": ("char-swap", "missing-char", "extra-char", "nearby-char"),
          "distraction": ("distraction-true", "distraction-false"), "lexical": ("synonym-noun", "synonym-adjective")}
#: what the real run needs (docs/reproducing.md)
IMAGES = {"coco": "MS-COCO val2014 folder (40,504 images: the 5k test images + the rest as t2i gallery)",
          "coco-fg": "the same MS-COCO val2014 folder", "flickr30k": "flickr30k-images (31,783 images)",
          "flickr30k-fg": "the same flickr30k-images folder"}
SECONDS_PER_IMAGE = {"gpu": 0.004, "cpu": 0.15}
SECONDS_PER_CAPTION = {"gpu": 0.0005, "cpu": 0.02}


def published() -> dict:
    """The published values of Tables 5.2-5.4 and their source (package data)."""
    text = resources.files(__package__).joinpath("data/published.json").read_text("utf-8")
    return json.loads(text)


@dataclass(frozen=True)
class Job:
    protocol: str
    model: str  # key: align, altclip, clip, groupvit
    model_spec: str
    dataset: str  # key: coco, coco-fg, flickr30k, flickr30k-fg
    dataset_spec: str

    def folder(self, out: Path) -> Path:
        return out / "runs" / f"{self.protocol}-{self.model}-{self.dataset}"


def plan(models: dict | None = None, datasets: dict | None = None, also_standard: bool = False) -> list[Job]:
    models, datasets = {**MODELS, **(models or {})}, {**DATASETS, **(datasets or {})}
    for kind, given, known in (("model", models, MODELS), ("dataset", datasets, DATASETS)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise VlbenchError(f"reproduce hendriksen2024: unknown {kind} key(s) {unknown}",
                               f"override one of {', '.join(known)} (KEY=SPEC)")
    protocols = ("hendriksen2024", "standard") if also_standard else ("hendriksen2024",)
    return [Job(p, m, models[m], d, datasets[d]) for p in protocols for m in MODELS for d in DATASETS]


def needs(jobs: list[Job], out: Path | None, device: str = "gpu", *, relevance: str | None = None,
          perturb: str | None = "all", data_dir=None) -> str:
    """What the runs need, said before any work: weights (the relevance model as given), images and where they
    go, language data, disk, time (rough). The checks themselves: :func:`vlbench.reproduce.plan.problems`."""

    todo = [j for j in jobs if out is None or not (j.folder(out) / RESULTS).is_file()]
    specs = sorted({j.model_spec for j in todo})
    data = sorted({j.dataset for j in todo})
    n_img = sum(GALLERY.get(j.dataset, 0) for j in todo)
    n_conditions = 1 + len(check_perturb(perturb))
    n_cap = sum(CAPTIONS.get(j.dataset, 0) * n_conditions for j in todo)
    secs = n_img * SECONDS_PER_IMAGE[device] + n_cap * SECONDS_PER_CAPTION[device]
    rel = relevance or RELEVANCE_MODEL
    chapter = any(j.protocol == "hendriksen2024" for j in todo)
    rel_text = ("" if not chapter else " (relevance: the evaluated models' own scores, --relevance self)"
                if rel == "self" else f", plus the relevance model {rel} for the chapter protocol's DCG"
                + ("" if relevance else " (its default; --relevance replaces it)"))
    images = Path(data_dir).expanduser() if data_dir else default_data_dir()
    lines = [f"{len(jobs)} run(s), {len(jobs) - len(todo)} already done (reused), {len(todo)} to do",
             "weights: " + (", ".join(specs) + " (Hugging Face, downloaded on first use)" + rel_text
                            if specs else "none"),
             "images: " + ("; ".join(f"{d}: {IMAGES.get(d, 'its image folder')}" for d in data) +
                           f" (built-in datasets: under {images}/images/, see docs/reproducing.md)" if data
                           else "none"),
             "language data: spaCy English model, WordNet, and for the chapter protocol's compatible perturbations "
             "NLTK's punkt_tab + averaged_perceptron_tagger_eng (vlbench setup-language-data) and the typo package",
             f"disk: at most {disk_bytes(todo, perturb) / 1e9:.1f} GB of embeddings in the cache (float32, up to "
             f"1,024 wide; an image folder shared by two datasets or protocols is encoded once per model)",
             f"time: at most {secs / 3600:.1f} h on one {device.upper()} (rough: {SECONDS_PER_IMAGE[device]} s per "
             f"image, {SECONDS_PER_CAPTION[device]} s per caption; cached vectors cost nothing)"]
    return "\n".join(lines)


def tasks_of(jobs: list[Job], out: Path, *, retries: int = 0, **run_kwargs) -> dict:
    """{job: the sweep Task that runs it}: the run folder ``<out>/runs/<protocol>-<model>-<dataset>``, its log under
    ``<out>/logs/``, vlbench.run's options (the standard protocol has no fixed relevance model)."""
    from vlbench.sweep.worker import Task  # lazy: the sweep's unit of work

    tasks = {}
    for job in jobs:
        kw = dict(run_kwargs)
        if job.protocol == "standard":
            kw.pop("relevance", None)
        kw.update(model=job.model_spec, dataset=job.dataset_spec, protocol=job.protocol, dataset_name=job.dataset,
                  model_name=job.model)
        folder = job.folder(out)
        tasks[job] = Task(run_id=folder.name, folder=str(folder), kwargs=kw, retries=retries,
                          log=str(out / "logs" / f"{folder.name}.log"))
    return tasks


def run_jobs(jobs: list[Job], out: Path, *, log=print, executor: str = "inline", workers: int | None = None,
             retries: int = 0, **run_kwargs) -> tuple[dict, list]:
    """Run (or reuse) every job through the sweep (vlbench.sweep: a finished run folder, proven by its hashes, is
    reused; a failed run does not stop the others); returns ({job: RunRecord} of the finished jobs, the failed
    runs' outcomes)."""
    from vlbench.sweep.status import states  # lazy: the sweep's skip rule and executors
    from vlbench.sweep.study import execute_tasks

    tasks = tasks_of(jobs, out, retries=retries, **run_kwargs)
    outcomes = execute_tasks(states(list(tasks.values())), executor, {}, workers=workers)
    records, failed = {}, []
    for job, task in tasks.items():
        o = outcomes[task.run_id]
        if o.ok:
            records[job] = RunRecord.load(task.folder)
        else:
            failed.append(o)
    log(f"{len(records)} run(s) finished or reused, {len(failed)} failed")
    return records, failed


def _get(rec, cond: str, direction: str, metric: str, k=None):
    return rec.values_of(cond).get(MetricKey(direction, metric, k)) if cond in rec.conditions else None


def measured_5_2(rec, p: int) -> dict:
    out = {}
    for d in ("i2t", "t2i"):
        for k in (1, 5, 10):
            out[f"{d}_R@{k}"] = _get(rec, "clean", d, "recall", k)
        out[f"{d}_DCG"] = _get(rec, "clean", d, "dcg_cm", p)
    for d in ("i2t", "t2i"):
        out[f"{d}_rsum"] = _get(rec, "clean", d, "rsum")
    return out


def measured_5_3(rec, condition: str):
    names = GROUPS.get(condition, (condition,))
    vals = [_get(rec, c, "t2i", "rsum") for c in names]
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def measured_5_4(rec) -> dict:
    mia = rec.model_input_analysis or {}
    return dict(mia.get("jaccard") or {})


def compare(pub: float, got) -> dict:
    if got is None:
        return {"published": pub, "measured": None, "abs_diff": None, "rel_diff": None, "verdict": "not run"}
    diff = got - pub
    rel = diff / pub if pub else None
    ok = rel is not None and abs(rel) <= TOLERANCE
    return {"published": pub, "measured": got, "abs_diff": diff, "rel_diff": rel,
            "verdict": "reproduced" if ok else "not reproduced"}


def comparisons(records: dict, protocol: str) -> dict[str, list[dict]]:
    """Rows of every table: published vs measured, per cell."""
    pub = published()
    by = {(j.model, j.dataset): r for j, r in records.items() if j.protocol == protocol}
    out: dict[str, list] = {"table_5_2": [], "table_5_3": [], "table_5_4": []}
    for row in pub["table_5_2"]:
        rec = by.get((row["model"], row["dataset"]))
        got = measured_5_2(rec, rec.settings["p"]) if rec else {}
        for col, v in row.items():
            if col not in ("model", "dataset"):
                out["table_5_2"].append({"model": row["model"], "dataset": row["dataset"], "cell": col,
                                         **compare(v, got.get(col))})
    for row in pub["table_5_3"]:
        for ds in DATASETS:
            rec = by.get((row["model"], ds))
            out["table_5_3"].append({"model": row["model"], "dataset": ds, "cell": row["condition"],
                                     **compare(row[ds], measured_5_3(rec, row["condition"]) if rec else None)})
    for row in pub["table_5_4"]:
        rec = by.get((row["model"], row["dataset"]))
        got = measured_5_4(rec) if rec else {}
        for g in ("decreased", "increased", "unchanged"):
            out["table_5_4"].append({"model": row["model"], "dataset": row["dataset"], "cell": g,
                                     **compare(row[g], got.get(g))})
    return out


def _fmt(x, pct=False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}%" if pct else f"{x:.4g}" if abs(x) < 1 else f"{x:.2f}"


def _label(rec) -> str:
    proto = rec.settings.get("protocol")
    return proto.get("name", "standard") if isinstance(proto, dict) else "standard"


def write_tables(out: Path, records: dict) -> dict:
    """``<out>/<protocol>/table_5_{2,3,4}.md`` + ``comparison.json``; returns the verdict counts."""
    pub = published()
    summary = {}
    for protocol in sorted({j.protocol for j in records}):
        folder = out / protocol
        folder.mkdir(parents=True, exist_ok=True)
        tables = comparisons(records, protocol)
        labels = {f"{j.model}-{j.dataset}": _label(r) for j, r in records.items() if j.protocol == protocol}
        moved = sorted({lab for lab in labels.values() if lab != protocol})
        note = (f"Runs whose protocol moved from {protocol}: {', '.join(moved)} (a [gallery=N] run ranked a t2i "
                f"gallery smaller than the chapter's: its t2i cells are not comparable).\n\n" if moved else "")
        head = ["model", "dataset", "cell", "published", "measured", "abs diff", "rel diff", "verdict"]
        for name, rows in tables.items():
            body = [[r["model"], r["dataset"], r["cell"], _fmt(r["published"]), _fmt(r["measured"]),
                     _fmt(r["abs_diff"]), _fmt(r["rel_diff"], pct=True), r["verdict"]] for r in rows]
            text = (f"# {name.replace('_', ' ').title()} ({protocol} protocol): published vs measured\n\n"
                    f"Source of the published values: {pub['source']['title']}. Reproduced = within "
                    f"{TOLERANCE:.0%} relative (Petrov and Macdonald 2022).\n\n" + note + md_table(head, body, pad=True)
                    + "\n")
            (folder / f"{name}.md").write_text(text, encoding="utf-8")
        counts = {name: {v: sum(r["verdict"] == v for r in rows) for v in ("reproduced", "not reproduced", "not run")}
                  for name, rows in tables.items()}
        (folder / "comparison.json").write_text(json.dumps({"protocol": protocol, "tolerance": TOLERANCE,
                                                            "source": pub["source"], "counts": counts,
                                                            "run_protocols": labels,
                                                            "tables": tables}, indent=1, allow_nan=False))
        summary[protocol] = counts
    return summary


def reproduce(out, *, models: dict | None = None, datasets: dict | None = None, also_standard: bool = False,
              log=print, device_kind: str = "gpu", executor: str = "inline", workers: int | None = None,
              retries: int = 0, **run_kwargs) -> dict:
    """Plan, say what is needed, run (resuming), write the tables; returns the verdict counts per protocol."""

    out = Path(out)
    jobs = plan(models, datasets, also_standard)
    kw = {k: run_kwargs.get(k) for k in ("relevance", "data_dir")}
    log(needs(jobs, out, device_kind, perturb=run_kwargs.get("perturb", "all"), **kw))

    def done(j):
        return (j.folder(out) / RESULTS).is_file()

    found = problems(jobs, out, cache_dir=run_kwargs.get("cache_dir"), perturb=run_kwargs.get("perturb", "all"),
                     allow_partial_gallery=bool(run_kwargs.get("allow_partial_gallery")), done=done, **kw)
    raise_if_missing(found, sum(not done(j) for j in jobs))  # every run checked before the first starts
    records, failed = run_jobs(jobs, out, log=log, executor=executor, workers=workers, retries=retries, **run_kwargs)
    summary = write_tables(out, records)
    for protocol, counts in summary.items():
        log(f"{protocol}: " + "; ".join(f"{t}: {c['reproduced']} reproduced, {c['not reproduced']} not, "
                                       f"{c['not run']} not run" for t, c in counts.items()))
    if failed:  # the tables hold what finished ("not run" for these); the command says which runs failed and why
        raise VlbenchError(f"reproduce: {len(failed)} run(s) failed: " + "; ".join(
            f"{o.run_id}: {o.error} (log: {o.log})" for o in failed[:5]) + (" ..." if len(failed) > 5 else ""),
                           "fix the cause named in each log, then run the same command again: finished runs are "
                           "reused, only the failed ones run")
    return summary
