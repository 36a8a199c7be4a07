"""The runner: the one place that orchestrates a benchmark run, in four steps you can read one at a time.

plan (data, perturbations, options) -> encode (images once, each distinct caption once, all conditions)
-> score (metrics per condition, fold means) -> record (deltas, bootstrap, results.json, table.md).

Work is never done twice: images are encoded once for all conditions, each distinct model input
(caption text after truncation) once over all conditions, and everything encoded goes to the
embedding cache as it is finished, so a second run (or a run restarted after a crash) re-encodes
nothing it already has. Statistics live in stats.py, output files in report.py, torchrun in distributed.py,
the options in run_config.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..util.env import library_versions
from ..util.io import sha256_json
from ..errors import VlbenchError
from ..metrics import compute as M
from ..datasets.core import Dataset, load_dataset
from ..encoding.distributed import claim_out, distributed, gather, phase, silence_library_progress
from .report import format_table, write_per_query, write_run_files
from . import protocol_settings as PS
from .run_config import RunConfig, validate
from ..metrics.stats import model_input_analysis, paired_bootstrap, query_scores
from ..results import SCHEMA_VERSION, Condition, DatasetInfo, Delta, Interval, MetricKey, MetricValue, ModelInfo, RunRecord

__all__ = ["RunConfig", "RunResult", "run", "format_table", "model_input_analysis", "SCHEMA_VERSION"]


@dataclass
class RunResult:
    out_dir: Path
    results: dict  # the results.json content (record.to_json())
    evaluations: dict  # condition -> list[Evaluation] (one per fold)
    record: RunRecord | None = None  # the typed record behind results

    def table(self) -> str:
        return format_table(self.record or RunRecord.from_json(self.results))


def _log(cfg: RunConfig, msg: str) -> None:
    if not cfg.quiet:
        print(msg, file=sys.stderr, flush=True)


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "x"


def prepare_out(cfg: RunConfig, run_id: str) -> Path:
    out = Path(cfg.out) if cfg.out else Path("runs") / run_id
    if (out / "results.json").exists():
        raise VlbenchError(f"{out} already holds a finished run (results.json)",
                           "runs are never overwritten: pass another --out folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _graded_sources(ds: Dataset, cfg: RunConfig) -> list[dict]:
    """Graded relevance labels per fold, from the clean captions (a perturbed query keeps its intent)."""
    if not cfg.graded:
        return [{}] * (1 if ds.folds is None else len(ds.folds))
    from ..metrics.graded import graded_relevance

    parts = [ds] if ds.folds is None else [ds.subset(f) for f in ds.folds]
    return [{kind.replace("-", "_"): graded_relevance(kind, d.captions, d.caption_to_image, len(d.gallery_images))
             for kind in cfg.graded} for d in parts]


def _evaluate_folds(ds: Dataset, img_emb, txt_emb, cfg: RunConfig, graded: list[dict],
                    device=None, relevance=None) -> list[M.Evaluation]:
    if ds.folds is None:
        rel = None if relevance is None else M.EmbeddingSource(*relevance, device=device)
        return [M.evaluate(M.EmbeddingSource(img_emb, txt_emb, device=device), ds.caption_to_image,
                           extra_positives=ds.extra_positives, k=cfg.k, p=cfg.p, graded=graded[0], relevance=rel)]
    out = []
    for fold, g in zip(ds.folds, graded):
        sub = ds.subset(fold)
        caps = np.flatnonzero(np.isin(ds.caption_to_image, fold))
        rel = None if relevance is None else M.EmbeddingSource(relevance[0][fold], relevance[1][caps], device=device)
        out.append(M.evaluate(M.EmbeddingSource(img_emb[fold], txt_emb[caps], device=device), sub.caption_to_image,
                              k=cfg.k, p=cfg.p, graded=g, relevance=rel))
    return out


def _mean_records(evals: list[M.Evaluation]) -> list[dict]:
    """Metric records; with folds, the mean over folds (as papers report COCO 1k)."""
    recs = [e.records() for e in evals]
    out = []
    for i, r in enumerate(recs[0]):
        vals = [rr[i]["value"] for rr in recs]
        out.append(dict(r, value=float(np.mean(vals))))
    return out


def run(config: RunConfig | None = None, **kwargs) -> RunResult | None:
    """Run a benchmark. ``run(model="clip", dataset="flickr30k", perturb="all", out="runs/x")``.

    Under torchrun every rank encodes its share of the batches; rank 0 gathers, scores and writes
    (and returns the RunResult; other ranks return None).
    """
    cfg = dataclasses.replace(config) if config else RunConfig(**kwargs)  # our copy: the caller's stays as given
    t0 = time.time()
    validate(cfg)
    cfg = PS.resolve(cfg)  # the protocol's settings (--protocol), each overridable on its own
    if cfg.quiet:
        silence_library_progress()
    from .preflight import preflight

    preflight(cfg)  # everything the run needs, listed at once, in seconds
    lock = claim_out(cfg.out)
    try:
        shard, dist, inited = distributed(cfg)
        try:
            if shard.rank != 0:
                cfg.quiet = True
            with _minilm_cache(cfg):  # the guard's and validity's vectors: the run's cache folder, then as before
                plan = make_plan(cfg)
                enc = encode(cfg, plan, shard, dist)
                if enc is None:  # not rank 0: its share is encoded and gathered
                    return None
                evals = score(cfg, plan, enc)
                return record(cfg, plan, enc, evals, t0)
        finally:
            if inited:
                dist.destroy_process_group()
    finally:
        if lock is not None:
            lock.release()


def _minilm_cache(cfg: RunConfig):
    """A run with perturbations keeps MiniLM vectors (guard, validity) in its --cache-dir, none with --no-cache;
    the process-wide settings are restored afterwards (a later call in the same process is not affected)."""
    if not cfg.perturb:
        return contextlib.nullcontext()
    from ..perturbations.guard import shared_cache

    return shared_cache().configured(cfg.cache_dir, disk=not cfg.no_cache)


@dataclass
class Plan:
    """What the run will evaluate: the dataset and, per perturbation, its perturbed captions."""

    ds: Dataset
    perturbed: dict  # perturbation name -> PerturbedSet (texts, describe())
    graded: list  # per fold: graded-relevance label sources, from the clean captions
    variants: list = field(default_factory=list)  # image corruptions, shortcut probes (variants.Variant)

    def texts(self) -> tuple[list[str], dict]:
        """All model inputs in one list (clean first), and the offset of each condition in it."""
        texts, offsets = list(self.ds.captions), {"clean": 0}
        for name, ps in self.perturbed.items():
            offsets[name] = len(texts)
            texts.extend(ps.texts)
        for v in self.variants:  # a variant with clean captions reads them at offset 0
            offsets[v.label] = 0 if v.texts is None else len(texts)
            texts.extend(v.texts or [])
        return texts, offsets


def make_plan(cfg: RunConfig) -> Plan:
    """Data and perturbations first: cheap, and bad input fails before a model is loaded."""
    ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=PS.dataset_gallery(cfg), require_images=True,
                      extra_positives=cfg.extra_positives)
    ds = PS.apply_gallery(ds, cfg)  # --gallery folder
    if cfg.dataset_name:
        ds.name = cfg.dataset_name.strip()
    if ds.issues:
        _log(cfg, f"warning: {len(ds.issues)} caption(s) of {ds.name} are empty or unusable "
                  f"(first: {ds.issues[0]['caption_id']}: {ds.issues[0]['problem']}); they stay in the "
                  f"evaluation as given and are listed in results.json")
    perturbed = {}
    if cfg.perturb:
        from .. import perturbations as P
        from ..perturbations.cache import perturbed_captions

        perturbed = perturbed_captions(ds, P.resolve(cfg.perturb), params=cfg.perturb_params, seed=cfg.seed,
                                       cache_dir=cfg.cache_dir, read=not cfg.no_cache and not cfg.restart,
                                       write=not cfg.no_cache, progress=not cfg.quiet, log=lambda m: _log(cfg, m))
    from .variants import plan_variants

    return Plan(ds, perturbed, _graded_sources(ds, cfg), plan_variants(cfg, ds))


@dataclass
class Encoded:
    """What the encode step hands on (rank 0 only)."""

    adapter: object  # the (lazy) model adapter
    model_hash: str
    run_id: str
    out: Path
    img_emb: np.ndarray
    txt_emb: np.ndarray  # every model input of Plan.texts(), in order
    offsets: dict
    stats: object  # EncodeStats
    cache: object  # EmbeddingCache or None
    world: int
    variant_img: dict = field(default_factory=dict)  # variant label -> its gallery embeddings
    relevance: tuple | None = None  # (image, clean caption) embeddings of a fixed relevance model


def _load_model(cfg: RunConfig):
    from ..encoding.cache import EmbeddingCache, default_cache_dir
    from ..models.lazy import LazyModel

    adapter = LazyModel(cfg.model, None if cfg.no_cache else Path(cfg.cache_dir or default_cache_dir()),
                        reuse=not cfg.restart, device=cfg.device, precision=cfg.precision,
                        trust_remote_code=cfg.trust_remote_code, revision=cfg.revision)
    model_hash = adapter.model_hash()
    cache = None if cfg.no_cache else EmbeddingCache(cfg.cache_dir, model_hash, read=not cfg.restart, label=cfg.model)
    return adapter, model_hash, cache


def _run_id(cfg: RunConfig, ds: Dataset, model_hash: str) -> str:
    import secrets

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return (f"{stamp}-{slug(cfg.model.split(':')[0])}-{slug(ds.name)}-{model_hash[:6]}"
            f"{ds.content_hash()[:6]}-{secrets.token_hex(3)}")


def encode(cfg: RunConfig, plan: Plan, shard, dist) -> Encoded | None:
    """Images once, each distinct text once over all conditions; under torchrun each rank its share."""
    from ..encoding.encode import EncodeStats, encode_images, encode_texts

    ds = plan.ds
    adapter, model_hash, cache = _load_model(cfg)
    run_id = _run_id(cfg, ds, model_hash)
    out = prepare_out(cfg, run_id) if shard.rank == 0 else None
    stats = EncodeStats()
    paths = [ds.image_path(i) for i in range(len(ds.gallery_images))]
    _log(cfg, f"encoding {len(paths)} images with {cfg.model} ({cfg.precision})"
              + (f", {shard.world} processes" if shard.world > 1 else ""))
    texts, offsets = plan.texts()
    texts = PS.truncate(cfg, texts)  # --truncate-chars
    img_local = phase(dist, shard, lambda: encode_images(
        adapter, paths, batch_size=cfg.batch_size, num_workers=cfg.num_workers, cache=cache, stats=stats,
        progress=not cfg.quiet, shard=shard))
    _log(cfg, f"encoding {len(texts)} captions ({len(plan.perturbed) + 1} condition(s))")
    txt_local = phase(dist, shard, lambda: encode_texts(
        adapter, texts, batch_size=cfg.text_batch_size or max(cfg.batch_size, 256), cache=cache, stats=stats,
        progress=not cfg.quiet, shard=shard))
    img_emb = gather(dist, shard, img_local, len(paths), "image")
    txt_emb = gather(dist, shard, txt_local, len(texts), "text")
    if shard.rank != 0:
        return None
    if img_emb.shape[1] != txt_emb.shape[1]:
        raise VlbenchError(f"model {cfg.model!r} gives image embeddings of size {img_emb.shape[1]} but text "
                           f"embeddings of size {txt_emb.shape[1]}",
                           "a dual encoder must map both modalities into one space (check the projection layers)")
    from ..encoding.variant_images import encode_variant_images  # image conditions: rank 0 encodes them

    variant_img = encode_variant_images(adapter, paths, plan.variants, batch_size=cfg.batch_size,
                                        num_workers=cfg.num_workers, cache=cache, stats=stats,
                                        progress=not cfg.quiet, clean=img_emb)
    return Encoded(adapter, model_hash, run_id, out, img_emb, txt_emb, offsets, stats, cache, shard.world,
                   variant_img, PS.encode_relevance(cfg, ds, paths, stats=stats))


def score(cfg: RunConfig, plan: Plan, enc: Encoded) -> dict:
    """Metrics per condition (condition -> one Evaluation per fold); options were checked by validate()."""
    ds, n = plan.ds, plan.ds.n_captions
    device = str(enc.adapter.device) if str(enc.adapter.device).startswith("cuda") else None
    evals = {cond: _evaluate_folds(ds, enc.variant_img.get(cond, enc.img_emb), enc.txt_emb[off:off + n], cfg,
                                   plan.graded, device=device, relevance=enc.relevance)
             for cond, off in enc.offsets.items()}
    from ..datasets.official import add_official  # --extra-positives eccv / cxc: the official protocols

    return PS.adjust_evaluations(cfg, plan, enc, add_official(cfg, plan, enc, evals))


def _deltas(cfg: RunConfig, plan: Plan, evals: dict, values: list[MetricValue]) -> tuple[list, list, dict]:
    """Per perturbation: the change of every metric against clean, and the bootstrap CIs of RSUM changes."""
    clean = {v.key: v.value for v in values if v.condition == "clean"}
    deltas, boots, conditions = [], [], {"clean": Condition("clean", {"perturbation": None})}
    metas = {cond: {"perturbation": cond, **ps.describe()} for cond, ps in plan.perturbed.items()}
    metas.update((v.label, v.meta) for v in plan.variants)  # image corruptions, shortcut probes
    for cond, meta in metas.items():
        conditions[cond] = Condition(cond, meta)
        for v in values:
            if v.condition == cond:
                base = clean[v.key]
                deltas.append(Delta(cond, v.key, v.value - base, (v.value - base) / base if base else None))
        boots += [Interval(cond, b) for b in paired_bootstrap(evals["clean"], evals[cond], cfg.n_boot, cfg.seed)]
    return deltas, boots, conditions


def _mia(cfg: RunConfig, plan: Plan, evals: dict):
    if len(plan.perturbed) < 2:
        return None
    clean_s = query_scores(evals["clean"], cfg.mia_score)
    mia = model_input_analysis(clean_s, {c: query_scores(evals[c], cfg.mia_score) for c in plan.perturbed})
    mia["score"] = cfg.mia_score
    return mia


def _metric_values(evals: dict) -> list[MetricValue]:
    return [MetricValue(cond, MetricKey(r["direction"], r["metric"], r["k"]), r["value"],
                        {n: x for n, x in r.items() if n not in ("direction", "metric", "k", "value")})
            for cond, ev in evals.items() for r in _mean_records(ev)]


def _settings(cfg: RunConfig, plan: Plan, enc: Encoded) -> dict:
    return {"k": list(cfg.k), "p": cfg.p, "relevance": cfg.relevance, "seed": cfg.seed, "protocol": PS.describe(cfg),
            "graded_relevance": {name: src.describe() for name, src in plan.graded[0].items()},
            "precision": cfg.precision, "device": str(enc.adapter.device), "batch_size": cfg.batch_size,
            "tie_rule": "score desc, then candidate index asc", "medr": "plain median of 1-based ranks",
            "folds": "mean over folds" if plan.ds.folds is not None else None}


def record(cfg: RunConfig, plan: Plan, enc: Encoded, evals: dict, t0: float) -> RunResult:
    """The typed record (deltas, statistics); results.json (never overwritten), per-query file and table.md."""
    from .variants import variant_summaries

    ds = plan.ds
    values = _metric_values(evals)
    deltas, boots, conditions = _deltas(cfg, plan, evals, values)
    from ..perturbations.validity import attach_to_run

    attach_to_run(cfg, plan, enc, conditions, log=lambda m: _log(cfg, m))
    per_query_file = write_per_query(enc.out, ds, evals)
    model = {"spec": cfg.model, "name": cfg.model.split(":")[0], "hash": enc.model_hash,
             **({"label": cfg.model_name.strip()} if cfg.model_name else {}), "identity": enc.adapter.identity()}
    dataset = ds.describe()
    rec = RunRecord(
        run_id=enc.run_id, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
        metric_version=M.METRIC_VERSION, vlbench_version=__version__,
        model=ModelInfo(cfg.model, enc.model_hash, model), dataset=DatasetInfo(dataset["name"], dataset["hash"], dataset),
        conditions=conditions, settings=_settings(cfg, plan, enc), values=values, deltas=deltas, intervals=boots,
        model_input_analysis=_mia(cfg, plan, evals), environment=library_versions(),
        other={"wall_time_s": round(time.time() - t0, 3),
               "encoding": enc.stats.as_dict() | {"processes": enc.world, "model_loaded": enc.adapter.loaded} |
                           ({"cache": enc.cache.stats, "cache_dir": str(enc.cache.root)} if enc.cache else {}),
               "caption_issues": ds.issues[:1000], "per_query": per_query_file,
               "results_hash": sha256_json([v.to_json() for v in values])})
    rec.other.update(variant_summaries(cfg, plan, rec))  # mCE, shortcut sources: read from the record
    results = rec.to_json()
    _write_results(enc.out, results, rec)
    _log(cfg, f"wrote {enc.out / 'results.json'}")
    return RunResult(enc.out, results, evals, rec)


def _write_results(out: Path, results: dict, rec: RunRecord) -> None:
    write_run_files(out, results, format_table(rec))