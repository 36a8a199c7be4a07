"""``vlbench rescore RUN --as SUITE``: a finished run's embeddings scored as other suites score them.

The run folder's ``embedding_keys.npz`` (vlbench.encoding.index) names the model hash, the
embedding-cache folder and the ordered cache keys of every condition's images and captions; the vectors come
from the cache, the ground truth from the index. No model is loaded and torch is not imported (the ECCV /
CxC ranking head may import it for speed on a large matrix, as vlbench's scorer does). Results go to
``RUN/rescore/<suite>.json``, beside results.json, which is never changed. The suites are registered
records (vlbench.rescore.registry); this module reads only their fields.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import numpy as np

from ..errors import OptionError, VlbenchError
from ..runfolder import RESCORE_DIR
from ..util.io import write_json
from .registry import check_suites
from .registry import suites as registered


def _vectors(cache, modality: str, keys: np.ndarray, run_dir, cache_dir) -> np.ndarray:
    uniq, inverse = np.unique(keys, return_inverse=True)
    found, vecs = cache.lookup(modality, [str(k) for k in uniq])
    if not found.all() and cache.stats["bad_shards"]:  # found, but damaged: the cache moved them aside
        shards = ", ".join(cache.stats["refused_shards"][:3])
        raise VlbenchError(f"{int((~found).sum())} of {len(uniq)} {modality} embeddings of run {run_dir} are in "
                           f"damaged shard(s) of the embedding cache at {cache_dir} ({shards}: their vectors no "
                           "longer match their checksum), moved aside as <name>.npz.damaged and not used",
                           "re-run the 'vlbench run' command with a new --out: it encodes the damaged items again "
                           "and writes a new run to rescore")
    if not found.all():
        raise VlbenchError(f"{int((~found).sum())} of {len(uniq)} {modality} embeddings of run {run_dir} are not in "
                           f"the embedding cache at {cache_dir} (cleared, or another --cache-dir?)",
                           "pass the run's cache with --cache-dir, or re-run the 'vlbench run' command with a new "
                           "--out (it encodes what is missing and writes a new run)")
    return vecs[inverse.reshape(-1)]


def load_embeddings(run_dir, cache_dir=None) -> tuple[dict, dict]:
    """(index meta, {condition: (image embeddings, caption embeddings)}) of a finished run, from the cache."""
    from ..encoding.cache import EmbeddingCache  # lazy: vlbench --help imports this module; keep it light
    from ..encoding.index import read_index  # lazy: vlbench --help imports this module; keep it light

    meta, arrays = read_index(run_dir)
    root = cache_dir or meta.get("cache_dir")
    if root is None:
        raise VlbenchError(f"run {run_dir} was made with --no-cache: its embeddings were not kept",
                           "re-run it without --no-cache (with a new --out), then rescore that run")
    if not os.path.isdir(root):
        raise VlbenchError(f"the embedding cache {root} of run {run_dir} does not exist",
                           "pass the folder that holds it with --cache-dir")
    cache = EmbeddingCache(root, meta["model_hash"], read=True, write=False, warn=lambda m: None)
    images = {name[len("image_keys|"):]: _vectors(cache, "image", a, run_dir, root)
              for name, a in arrays.items() if name.startswith("image_keys|")}
    texts, n = arrays["text_keys"], meta["n_captions"]
    out = {}
    for c in meta["conditions"]:
        off = c["text_offset"]
        out[c["name"]] = (images[c["images"]], _vectors(cache, "text", texts[off:off + n], run_dir, root))
    return meta, out


def score_suite(suite: str, gt: dict, img: np.ndarray, txt: np.ndarray, seed: int = 0) -> list[tuple]:
    """(direction, metric, k, value) of one registered suite on one condition's embeddings."""
    return registered()[check_suites([suite])[0]].score(gt, img, txt, seed)


def rescore(run_dir, suites, *, cache_dir=None, seed: int = 0, conditions=None, write: bool = True) -> dict:
    """{suite: document} for a finished run; each document is written to RUN/rescore/<suite>.json."""
    names_asked = check_suites(list(suites))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise OptionError("seed", f"{{opt}} must be a whole number from 0 to 2**63 - 1, got {seed!r}", example=0,
                          flag="--seed")
    meta, emb = load_embeddings(run_dir, cache_dir)
    names = list(conditions) if conditions else list(emb)
    missing = [c for c in names if c not in emb]
    if missing:
        why = ("is not re-scored (its gallery is not the dataset's)" if missing[0] in meta.get("not_indexed", ())
               else "has no such condition")
        raise VlbenchError(f"run {run_dir} condition {missing[0]!r}: {why}",
                           f"conditions that can be re-scored: {', '.join(emb)}")
    docs = {}
    for suite in names_asked:
        s = registered()[suite]
        records = [{"condition": c, "direction": d, "metric": m, "k": k, "value": v,
                    "value_percent": v if s.percent else 100.0 * v}
                   for c in names for d, m, k, v in s.score(meta["ground_truth"], *emb[c], seed)]
        docs[suite] = {"suite": suite, **s.describe(), "run_id": meta["run_id"], "model_hash": meta["model_hash"],
                       "seed": seed if s.seeded else None, "folds": "mean over folds" if
                       meta["ground_truth"].get("folds") else None,
                       "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       "results": records}
        if write:
            out = Path(run_dir) / RESCORE_DIR / f"{suite}.json"
            out.parent.mkdir(exist_ok=True)
            write_json(out, docs[suite])  # strict JSON (a NaN mean becomes null), written atomically
    return docs


def format_table(docs: dict) -> str:
    """One line per (suite, condition, direction, metric), values in percent."""
    lines = [f"{'suite':<15} {'condition':<24} {'dir':<4} {'metric':<28} {'value %':>8}"]
    for suite, doc in docs.items():
        for r in doc["results"]:
            lines.append(f"{suite:<15} {r['condition'][:24]:<24} {r['direction']:<4} {r['metric']:<28} "
                         f"{r['value_percent']:>8.2f}")
    return "\n".join(lines)
