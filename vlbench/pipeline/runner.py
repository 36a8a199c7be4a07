"""The runner: the one place that orchestrates a benchmark run, in four steps you can read one at a time.

plan (data, perturbations, options) -> encode (images once, each distinct caption once, all conditions)
-> score (metrics per condition, fold means) -> record (deltas, bootstrap, results.json, table.md).

Work is never done twice: images are encoded once for all conditions, each distinct model input
(caption text after truncation) once over all conditions, and everything encoded goes to the
embedding cache as it is finished, so a second run (or a run restarted after a crash) re-encodes
nothing it already has.

Each step takes plain inputs and returns a frozen value that the next step reads; no step edits what another
one made (``Plan``: the dataset and its :class:`~vlbench.conditions.RunCondition` s; ``Encoded``: embeddings,
the model keys as encoded, what binding added to the conditions; the score step's Evaluations; the record).
The score step is pipeline/scoring.py, statistics metrics/stats.py, output files report.py, the encoding
session encoding/session.py, torchrun encoding/distributed.py, the options run_config.py.
"""
# size: module: the four steps of a run and the frozen values between them read best in one file; what each step
# does lives in its own module (scoring, report, timing, galleries, budgets, distractors, ...)

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from .. import perturbations
from ..conditions import RunCondition
from ..datasets.core import Dataset, limited, load_dataset
from ..encoding.distributed import claim_out, distributed, gather, phase, share, silence_library_progress
from ..encoding.multivector import is_multivector, multivector_inputs
from ..encoding.session import EncodingSession, check_headers
from ..encoding.variant_images import bind_transforms
from ..errors import VlbenchError
from ..granularity import budgets
from ..metrics.graded import graded_relevance
from ..metrics.sharded import TorchGroup
from ..metrics.stats import model_input_analysis
from ..models.identity import shadows_hub_id, weights_source
from ..perturbations.cache import perturbed_captions
from ..perturbations.guard import shared_cache
from ..results import (
    SCHEMA_VERSION,
)
from ..runfolder import FILES, file_manifest, new_run_id, prepare_out, results_path, slug  # noqa: F401  prepare_out, slug re-exported
from . import distractors, galleries, presets, relevance, scoring, sensitivity, timing
from .preflight import preflight
from .record import RunResult, _log, record
from .report import format_table
from .rerank import stage as rerank_stage
from .rerun import finished_run
from .run_config import RunConfig, validate
from .variants import plan_variants

__all__ = ["RunConfig", "RunResult", "run", "format_table", "model_input_analysis", "SCHEMA_VERSION"]


def _graded_sources(ds: Dataset, graded: tuple) -> list[dict]:
    """Graded relevance labels per fold, from the clean captions (a perturbed query keeps its intent)."""
    if not graded:
        return [{}] * (1 if ds.folds is None else len(ds.folds))

    parts = [ds] if ds.folds is None else [ds.subset(f) for f in ds.folds]
    return [{kind.replace("-", "_"): graded_relevance(kind, d.captions, d.caption_to_image, len(d.gallery_images))
             for kind in graded} for d in parts]


def run(config: RunConfig | None = None, **kwargs) -> RunResult | None:
    """Run a benchmark. ``run(model="clip", dataset="flickr30k", perturb="all", out="runs/x")``.

    Under torchrun every rank encodes its share of the batches; rank 0 gathers, scores and writes
    (and returns the RunResult; other ranks return None).
    """
    cfg = dataclasses.replace(config) if config else RunConfig(**kwargs)  # our copy: the caller's stays as given
    timing.start()  # where the time went (results.json timings, wall_time_s): pipeline/timing.py
    validate(cfg)
    cfg = presets.resolve(cfg)  # the protocol's settings (--protocol), each overridable on its own

    done = finished_run(cfg, lambda m: _log(cfg, m))
    if done is not None:
        return RunResult(done[0], done[1].to_json(), {}, done[1])
    if cfg.quiet:
        silence_library_progress()

    # everything the run needs, listed at once, in seconds (and the dataset it read); a silent Hub: its cache only
    checked = preflight(cfg, lambda m: _log(cfg, m))
    trackers = None
    if cfg.report_to:  # their start-up (imports, services) in a background thread, off the run's critical path
        from .. import trackers as tracking  # lazy: only with --report-to

        trackers = tracking.start(cfg.report_to)
    lock = claim_out(cfg.out)
    try:
        cfg, shard, dist, inited = distributed(cfg)
        try:
            if shard.rank != 0:
                cfg = dataclasses.replace(cfg, quiet=True)
            with _minilm_cache(cfg):  # the guard's and validity's vectors: the run's cache folder, then as before
                plan = make_plan(cfg, checked)
                rerank_stage.announce(cfg, plan, lambda m: _log(cfg, m))  # --rerank: K checked, the cost said
                enc = encode(cfg, plan, shard, dist)
                plan = enc.plan  # with the budget conditions the model's tokenizer made
                group = None if dist is None else TorchGroup(dist)  # every rank scores its slice of each gallery
                evals = timing.timed("scoring", lambda: score(cfg, plan, enc, group), len)
                if shard.rank != 0:
                    return None
                reranked = timing.timed("rerank", lambda: rerank_stage.run_stage(cfg, plan, enc, evals),
                                        lambda r: 0 if r is None else r.counts["scored"])
                result = record(cfg, plan, enc, evals, reranked)
                for line in rerank_stage.summary(reranked):  # both stages' RSUM, the gain, the ceiling
                    _log(cfg, line)
                if cfg.report_to:  # after the run's files are written; a tracker's failure is one line, not an error
                    from ..trackers import report  # lazy: only with --report-to
                    report(result, cfg.report_to, log=_say, quiet=cfg.quiet, started=trackers)
                return result
        finally:
            if inited:
                dist.destroy_process_group()
    finally:
        if lock is not None:
            lock.release()


def _say(msg: str) -> None:
    """A line printed even with --quiet: where each tracker put the run (one line each, not their banners)."""
    print(msg, file=sys.stderr, flush=True)


def _minilm_cache(cfg: RunConfig):
    """A run with perturbations keeps MiniLM vectors (guard, validity) in its --cache-dir, none with --no-cache;
    the process-wide settings are restored afterwards (a later call in the same process is not affected)."""
    if not cfg.perturb and not cfg.probes:
        return contextlib.nullcontext()

    return shared_cache().configured(cfg.cache_dir, disk=not cfg.no_cache)


@dataclass(frozen=True)
class Plan:
    """What the run will evaluate: the dataset and its conditions (clean first, then caption perturbations,
    image perturbations and shortcut probes, each a :class:`~vlbench.conditions.RunCondition`), and every
    caption the model will read, once, with each condition's offset in that list. Frozen."""

    ds: Dataset
    conditions: tuple  # RunCondition, clean first
    graded: tuple  # per fold: graded-relevance label sources, from the clean captions

    @functools.cached_property
    def _inputs(self) -> tuple[tuple[str, ...], MappingProxyType]:
        texts, offsets = list(self.ds.captions), {}
        for c in self.conditions:  # a condition with the clean captions reads them at offset 0
            offsets[c.name] = 0 if c.texts is None else len(texts)
            texts.extend(c.texts or ())
        return tuple(texts), MappingProxyType(offsets)

    def texts(self) -> tuple[list[str], dict]:
        """All model inputs in one list (clean first), and the offset of each condition in it."""
        texts, offsets = self._inputs
        return list(texts), dict(offsets)

    @property
    def offsets(self):
        """Condition name -> where its captions start in :meth:`texts` (read-only)."""
        return self._inputs[1]

    @property
    def perturbed(self) -> dict:
        """Caption perturbation name -> its PerturbedSet."""
        return {c.name: c.perturbation for c in self.conditions if c.kind == "caption"}

    @property
    def variants(self) -> list:
        """The conditions that change images or add their own captions (image corruptions, shortcut probes)."""
        return [c for c in self.conditions if c.kind in ("image", "shortcut")]


def make_plan(cfg: RunConfig, ds: Dataset | None = None) -> Plan:
    """Data and perturbations first: cheap, and bad input fails before a model is loaded. ``ds``: the dataset
    as the preflight loaded it, complete with its images (None: load it here, downloading what is missing)."""
    if ds is None:
        ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=galleries.dataset_gallery(cfg),
                          require_images=True,
                          extra_positives=cfg.extra_positives)
    ds = galleries.apply_gallery(ds, cfg)  # --gallery folder
    ds = limited(ds, cfg.limit)  # --limit N: the first N images (after the gallery: the cut ones are not distractors)
    if cfg.dataset_name:
        ds = dataclasses.replace(ds, name=cfg.dataset_name.strip())
    if ds.source.get("detected"):  # a Hub dataset's options that were detected, not given (datasets/hub.py)
        _log(cfg, f"{ds.name}: detected {', '.join(f'{k}={v}' for k, v in ds.source['detected'].items())} "
                  f"(give them in the spec to choose others: hf:ORG/NAME?split=...&image=...&caption=...)")
    if ds.source.get("note"):  # a published set read at another size than its release (datasets/langsets)
        _log(cfg, f"note: {ds.source['note']}")
    if ds.issues:
        _log(cfg, f"warning: {len(ds.issues)} caption(s) of {ds.name} are empty or unusable "
                  f"(first: {ds.issues[0]['caption_id']}: {ds.issues[0]['problem']}); they stay in the "
                  f"evaluation as given and are listed in results.json")
    perturbed = {}
    if cfg.perturb:
        spec = cfg.perturb
        perturbed = timing.timed("perturbation", lambda: perturbed_captions(
            ds, perturbations.resolve(spec), params=cfg.perturb_params, seed=cfg.seed, cache_dir=cfg.cache_dir,
            read=not cfg.no_cache and not cfg.restart, write=not cfg.no_cache, progress=not cfg.quiet,
            log=lambda m: _log(cfg, m)), timing.caption_count)

    probes = timing.timed("perturbation", lambda: sensitivity.probe_conditions(cfg, ds, lambda m: _log(cfg, m)))
    conditions = (RunCondition.clean(), *map(RunCondition.from_perturbed, perturbed.values()), *probes,
                  *plan_variants(cfg, ds), *distractors.plan_distractors(cfg, ds))
    return Plan(ds, conditions, tuple(_graded_sources(ds, cfg.graded)))


@dataclass(frozen=True)
class Encoded:
    """What the encode step hands on (on every rank; ``out`` only on rank 0, which writes the run)."""

    adapter: Any  # the (lazy) model adapter
    model_hash: str
    run_id: str
    out: Path | None  # rank 0 only (it writes the run)
    img_emb: np.ndarray
    txt_emb: np.ndarray  # every model input of Plan.texts(), in order
    offsets: dict
    stats: Any  # EncodeStats
    cache: Any  # EmbeddingCache or None
    world: int
    variant_img: dict = field(default_factory=dict)  # variant label -> its gallery embeddings
    #: (image, caption) embeddings of a fixed relevance model; its captions are every input of Plan.texts()
    relevance: tuple | None = None
    #: the model's key of every input of Plan.texts() as encoded (after --truncate-chars and the model's own
    #: truncation): what validity's effective rate compares
    text_keys: tuple = ()
    #: what binding to the model adds to a condition's results entry (e.g. the corruption geometry)
    condition_meta: dict = field(default_factory=dict)
    distractors: dict = field(default_factory=dict)  # gallery condition -> its injected candidates (distractors.py)
    plan: Any = None  # the plan as encoded: the one given, with its budget conditions added (budgets.py)


def _say_weights(cfg: RunConfig, model) -> None:
    """One line saying where the model's weights came from (models/identity.py: the Hub at a commit, a library's
    download, a local folder by content hash); a local folder that shadows a hub-shaped name (./ORG/NAME in the
    working directory for ORG/NAME) is said even under --quiet, as a warning."""
    ident = model.identity() if callable(getattr(model, "identity", None)) else {}
    kind, words = weights_source(ident if isinstance(ident, dict) else {}, cfg.model_opts.model)
    if kind == "local" and shadows_hub_id(cfg.model_opts.model, str(ident.get("checkpoint") or "")):
        print(f"vlbench: warning: model weights: {words}", file=sys.stderr, flush=True)
    else:
        _log(cfg, f"model weights: {words}")


def _load_model(m, o, images: list | None = None):
    """The run's encoding session (the lazy model, its embedding cache, the encode statistics) from the
    model and output option groups; ``images``: checked before a model that must be loaded at once."""

    return EncodingSession.open(m.model, cache_dir=o.cache_dir, no_cache=o.no_cache, restart=o.restart,
                                device=m.device, precision=m.precision, trust_remote_code=m.trust_remote_code,
                                revision=m.revision, images=images, pixels=m.pixels, threads=m.threads)


def _run_id(model_spec: str, ds: Dataset, model_hash: str) -> str:
    label = ds.name if ds.limit is None else f"{ds.name}-limit{ds.limit}"  # --limit: said in the run id
    return new_run_id(model_spec, label, model_hash, ds.content_hash())


def encode(cfg: RunConfig, plan: Plan, shard, dist, session: Any = None) -> Encoded:
    """Images once, each distinct text once over all conditions; under torchrun each rank its share.
    ``session``: this EncodingSession (a model held in memory: vlbench/training) instead of opening the run's."""

    ds, m = plan.ds, cfg.model_opts
    paths = [ds.image_path(i) for i in range(len(ds.gallery_images))]
    checked = "torch" not in sys.modules and session is None
    if checked:  # its first import takes seconds: say so before the wait, not after
        check_headers(paths)  # but a bad image first: refused before hundreds of MB are imported
        _log(cfg, "loading torch and the model's library (a few seconds on first use)")
        importlib.import_module("torch")
    session = session or _load_model(m, cfg.output_opts, None if checked else paths)
    _say_weights(cfg, session.model)
    plan = timing.timed("perturbation",  # --token-budget, --sentence-budget
                        lambda: budgets.with_budgets(cfg, plan, session.model, log=lambda m: _log(cfg, m)))
    timing.enter("writing")  # the run's id and its output folder
    run_id = _run_id(m.model, ds, session.model_hash)
    out = prepare_out(cfg.out, run_id) if shard.rank == 0 else None
    timing.enter("other")
    progress = not cfg.quiet
    distinct = len(set(paths))  # a language set repeats its images once per language; each is encoded once
    _log(cfg, f"encoding {distinct:,} images with {m.model} ({m.precision})"
              + (f" ({len(paths):,} gallery entries: the same images once per fold)" if distinct < len(paths) else "")
              + (f", {shard.world} processes" if shard.world > 1 else ""))
    texts, offsets = plan.texts()
    texts = relevance.truncate(cfg, texts)  # --truncate-chars
    if is_multivector(session.model) or cfg.token_memory is not None:  # token vectors, MaxSim (encoding/multivector.py)
        return _token_encoded(cfg, plan, session, paths, (texts, offsets), run_id, out, shard.world)
    img_local = timing.encoding("image_decode_preprocess", session.stats, lambda: phase(dist, shard, lambda: (
        session.images(paths, batch_size=m.batch_size, num_workers=m.num_workers, progress=progress, shard=shard))))
    keys: list = []  # the model's inputs after its truncation, computed once for encoding and validity

    def texts_phase():  # after the images, whose headers are checked before anything loads the model
        keys.extend(session.model.text_keys(texts))  # the bar counts the distinct ones, so the line says so
        _log(cfg, f"encoding {len(set(keys)):,} distinct captions ({len(texts):,} over {len(plan.perturbed) + 1} "
                  "condition(s); each distinct model input once)")
        return session.texts(texts, batch_size=m.text_batch_size or max(m.batch_size, 256), progress=progress,
                             shard=shard, keys=keys)

    txt_local = timing.encoding("text_preprocess", session.stats, lambda: phase(dist, shard, texts_phase))
    img_emb = gather(dist, shard, img_local, len(paths), "image", everywhere=True)
    txt_emb = gather(dist, shard, txt_local, len(texts), "text", everywhere=True)
    if img_emb.shape[1] != txt_emb.shape[1]:
        raise VlbenchError(f"model {m.model!r} gives image embeddings of size {img_emb.shape[1]} but text "
                           f"embeddings of size {txt_emb.shape[1]}",
                           "a dual encoder must map both modalities into one space (check the projection layers)")
    rank0 = None
    if shard.rank == 0:  # image conditions, the relevance model and distractors: encoded on rank 0, then shared
        bound = timing.timed("image_decode_preprocess",  # image conditions fit the model's input
                             lambda: bind_transforms(session.model, plan.variants))
        variant_img = timing.encoding("image_decode_preprocess", session.stats, lambda: session.variant_images(
            paths, plan.variants, batch_size=m.batch_size, num_workers=m.num_workers, progress=progress,
            clean=img_emb))
        rel = timing.timed("relevance_encode", lambda: relevance.encode_relevance(
            cfg, ds, paths, stats=session.stats, texts=plan.texts()[0]))
        rank0 = (variant_img, rel, bound, distractors.encode_distractors(session, cfg, plan, session.stats))
    variant_img, rel, bound, injected = share(dist, shard, rank0)
    return Encoded(session.model, session.model_hash, run_id, out, img_emb, txt_emb, offsets, session.stats,
                   session.cache, shard.world, variant_img, rel, tuple(keys), bound, injected, plan)


def _token_encoded(cfg: RunConfig, plan: Plan, session, paths: list, texts, run_id: str, out, world: int) -> Encoded:
    """A multi-vector model's encode step: token vectors of the gallery, of each image condition's gallery, of
    the injected distractors and of every caption (TokenVectors), after the memory check
    (encoding/multivector.py); scoring reads them through MaxSim."""
    img, txt, keys, variant, bound, injected = multivector_inputs(session, cfg, plan, paths, texts[0], world, log=_log,
                                                                  truncate=lambda t: relevance.truncate(cfg, t))
    return Encoded(session.model, session.model_hash, run_id, out, img, txt, texts[1], session.stats, session.cache,
                   world, variant_img=variant, text_keys=tuple(keys), condition_meta=bound, plan=plan,
                   distractors={name: distractors.Injected(*pair) for name, pair in injected.items()})


def score(cfg: RunConfig, plan: Plan, enc: Encoded, group=None) -> dict:
    """Metrics per condition (condition -> one Evaluation per fold): pipeline/scoring.py; under torchrun
    (``group``) every rank scores its slice of each gallery and every rank gets the same evaluations."""

    return scoring.score(cfg.scoring_opts, plan, enc, group=group)


