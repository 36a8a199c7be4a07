"""The text as a run encodes it (``--truncate-chars``) and the fixed relevance source of DCG (``--relevance``).

``relevance=self`` scores DCG gains with the evaluated model's own similarity; a model spec names a fixed
relevance model, encoded in its own encoding session (each distinct text once, through the cache) over
every caption as evaluated: the relevance of a perturbed query is that of the perturbed caption.
"""

from __future__ import annotations

import numpy as np

from ..encoding.session import EncodingSession


def truncate(cfg, texts: list[str]) -> list[str]:
    return list(texts) if not cfg.truncate_chars else [t[:cfg.truncate_chars] for t in texts]


def encode_relevance(cfg, ds, paths: list, *, stats=None, texts: list[str] | None = None):
    """(image, caption) embeddings of the fixed relevance model, or None for ``relevance=self``.

    ``texts``: every caption as evaluated (runner.Plan.texts(): clean, then each condition's own captions;
    default: the clean captions), each distinct (truncated) text encoded once.
    """
    if cfg.relevance in (None, "self"):
        return None
    session = EncodingSession.open(cfg.relevance, cache_dir=cfg.cache_dir, no_cache=cfg.no_cache,
                                   restart=cfg.restart, device=cfg.device, precision=cfg.precision,
                                   trust_remote_code=cfg.trust_remote_code, stats=stats, threads=cfg.threads)
    texts = truncate(cfg, ds.captions if texts is None else texts)
    img = session.images(paths, batch_size=cfg.batch_size, num_workers=cfg.num_workers, progress=not cfg.quiet)
    txt = session.texts(texts, batch_size=cfg.text_batch_size or max(cfg.batch_size, 256), progress=not cfg.quiet)
    return (np.stack([img[i] for i in range(len(paths))]), np.stack([txt[i] for i in range(len(texts))]))
