"""The two-stage options checked before any work: ``--rerank`` names a pair scorer (not a dual encoder), ``--model``
a dual encoder (not a pair scorer), ``--rerank-k`` comes with ``--rerank`` and is a positive integer; once the
plan knows the gallery, K is at most the number of candidates (:func:`check_k`). Light: only the registry."""

from __future__ import annotations

from ... import registry
from ...errors import OptionError

#: the K of ``--rerank`` without ``--rerank-k``
DEFAULT_K = 16


def _name(spec: str) -> str:
    return str(spec).partition("?")[0].partition(":")[0].strip()


def check_options(cfg) -> None:
    """--rerank, --rerank-k and --model as the two stages need them (OptionError naming the fix)."""
    model = _name(cfg.model)
    if model in registry.pair_scorers and model not in registry.models:
        raise OptionError("model", f"{model} is a pair scorer, not a dual encoder: it scores (image, caption) pairs "
                          "and cannot rank a gallery alone",
                          f"use --rerank {model} with a dual encoder as --model (e.g. --model clip --rerank {model})")
    k = cfg.rerank_k
    check_k_value(k)
    if cfg.rerank is None:
        if k is not None:
            raise OptionError("rerank_k", "{opt} is given without --rerank: there is no pair model to re-score the "
                              "top K", "add --rerank PAIR_SCORER (vlbench ls pair-scorers), or leave {opt} out")
        return
    if not isinstance(cfg.rerank, str) or not _name(cfg.rerank):
        raise OptionError("rerank", f"{{opt}} takes a pair scorer NAME[:CHECKPOINT], got {cfg.rerank!r}",
                          example="blip-itm")
    name = _name(cfg.rerank)
    if name in registry.models and name not in registry.pair_scorers:
        raise OptionError("rerank", f"{name} is a dual encoder, not a pair scorer: {{opt}} takes a model that scores "
                          "(image, caption) pairs", f"give {name} as --model; for {{opt}} use one of "
                          f"{', '.join(registry.pair_scorers.names())} (vlbench ls pair-scorers)")
    registry.pair_scorers.get(name)  # an unknown name: the registry's error, with the names it knows


def check_k_value(k) -> None:
    """None (the default K) or an integer >= 1."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise OptionError("rerank_k", f"{{opt}} must be an integer >= 1, got {k!r}",
                          "K is how many first-stage candidates of each query the pair model re-scores",
                          example=DEFAULT_K)


def rerank_k(cfg) -> int:
    return DEFAULT_K if cfg.rerank_k is None else int(cfg.rerank_k)


def check_k(cfg, ds) -> None:
    """K against the plan's gallery: at most the largest number of candidates of a query (the captions, which an
    image query ranks; a caption query ranks the images and re-scores min(K, images) of them). The smallest
    fold counts."""
    if cfg.rerank is None:
        return
    k = rerank_k(cfg)
    parts = [ds] if ds.folds is None else [ds.subset(f) for f in ds.folds]
    n_img = min(len(p.gallery_images) for p in parts)
    n_cap = min(p.n_captions for p in parts)
    if k > max(n_img, n_cap):
        raise OptionError("rerank_k", f"{{opt}} {k} is above the gallery: a query has at most {max(n_img, n_cap):,} "
                          f"candidates ({n_img:,} images, {n_cap:,} captions"
                          + (" in the smallest fold" if ds.folds is not None else "") + ")",
                          f"give {{opt}} at most {max(n_img, n_cap)} ({max(n_img, n_cap)}: the pair model ranks "
                          "every candidate)", example=min(DEFAULT_K, n_img))
