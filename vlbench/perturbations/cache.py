"""Perturbed captions remembered on disk (``<cache>/perturbations/``), so a warm run skips spaCy."""

from __future__ import annotations

import dataclasses
import json
from importlib.metadata import PackageNotFoundError, version

from .. import __version__, stores
from ..lang import SPACY_MODELS
from ..util.io import cache_write_bytes, sha256_json
from . import PerturbedSet, perturb_captions
from .engine import instantiate


def _tool_versions() -> dict:
    out: dict[str, str | None] = {}
    for dist in ("spacy", "nltk", "nlpaug", *[m.replace("_", "-") for m in SPACY_MODELS]):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def perturbed_captions(dataset, names: list[str], *, params: dict | None, seed: int, cache_dir=None,
                       read: bool = True, write: bool = True, progress: bool = True, log=None) -> dict:
    """Perturbed captions {name: PerturbedSet}, remembered under ``<cache>/perturbations/``.

    The key covers the dataset's content hash, the perturbations' names, versions and parameters,
    the seed, the vlbench version and the language tools' versions, so a warm run skips spaCy and a
    changed tagger or WordNet recomputes. An unreadable file is recomputed and overwritten atomically.
    log: optional callable(str) for one-line progress notes.
    """
    objs = {n: instantiate(n, (params or {}).get(n)) for n in names}
    key = sha256_json({"dataset": dataset.content_hash(), "seed": seed, "vlbench": __version__,
                       "perturbations": {n: [str(o.version), o.params] for n, o in objs.items()},
                       "tools": _tool_versions()})
    path = stores.path("perturbations", cache_dir) / f"{key[:32]}.json"
    if read and path.is_file():
        try:
            data = json.loads(path.read_text())
            out = {n: PerturbedSet(**data[n]) for n in names}
            if log:
                log(f"perturbed captions from the cache ({len(names)} perturbation(s))")
            _log_reasons(out, log)
            return out
        except (ValueError, KeyError, TypeError):
            pass
    if log:
        log(f"perturbing {dataset.n_captions:,} captions x {len(names)} perturbation(s) = "
            f"{dataset.n_captions * len(names):,} outputs: {', '.join(names)}")
    out = perturb_captions(dataset.captions, dataset.caption_ids, names, seed=seed, params=params or None,
                             progress=progress)
    if write:
        # a concurrent `cache clear`: retried (util.io.cache_write_bytes)
        cache_write_bytes(path, json.dumps({n: dataclasses.asdict(ps) for n, ps in out.items()}).encode())
    _log_reasons(out, log)
    return out


def _log_reasons(sets: dict, log) -> None:
    """One line per perturbation that recorded why it left captions unchanged (the guarded synonyms)."""
    for ps in sets.values():
        line = ps.reason_line() if log and hasattr(ps, "reason_line") else None
        if line:
            log(line)
