"""A choice task scored by a multi-vector model: ``vlbench run --task winoground --model colqwen2[:CHECKPOINT]``.

A multi-vector model (ColQwen2, ColPali: vlbench.models.multivector) scores an (image, caption) pair by MaxSim
of their token vectors, as it ranks a gallery:

    MaxSim(caption, image) = sum over the caption's tokens t of  max over the image's tokens s of  <q_t, d_s>

So a choice set reads those scores where a dual encoder's sets read cosine similarities (a
:class:`~vlbench.tasks.choice.PairScores`), and the set's own rule, its tie rule (a tie is a miss) and its
intervals are the same code. Each distinct image and each distinct candidate caption is encoded once, as token
vectors, through the retrieval run's path (vlbench.encoding.multivector: the ``token-vectors`` store, keyed by the
image content and the model's token ids), so a second run or a caption condition encodes only what it has not
seen. Each pair's MaxSim is computed on its own (one product of the image's and the caption's tokens, the BLAS
held to one thread, the sum in token order in float32): a pair's score does not depend on which other candidates
the run has. An image corruption (``--perturb-images``) encodes each corrupted image once (the retrieval run's
transform, key and geometry) and scores its sets' pairs on it.
"""

from __future__ import annotations

import numpy as np

from .. import stores
from ..encoding.multivector import (
    TokenStore,
    available_gib,
    check_memory,
    check_on_cpu,
    encode_conditions,
    encode_multivector,
    image_tokens_at_most,
)
from ..encoding.variant_images import bind_transforms
from ..errors import VlbenchError
from ..metrics.scan.maxsim import TokenVectors
from ..metrics.tiles import blas_one_thread
from ..models.multivector.colmodels import FAMILIES
from .choice import PairScores
from .pair_run import needed_pairs
from .registry import get_task

#: results.json ``task.rule`` of a set scored by a multi-vector model, after the set's own rule
MAXSIM_RULE = ("scored by a multi-vector model: the score of (image, caption) is MaxSim of their token vectors "
               "(the sum over the caption's tokens of the best dot product with any of the image's tokens) in place "
               "of the cosine similarity, compared by the same rule; a tie (equal float32 scores) is a miss")


def names_multivector(spec: str) -> bool:
    """Whether ``spec`` names a built-in multi-vector family (colqwen2, colpali): known before anything is read;
    a plug-in's is known once its session is open (``multivector`` on the adapter)."""
    return str(spec).partition(":")[0] in FAMILIES


def check_maxsim_task(task: str) -> None:
    """Refuse, before anything is read or loaded, a set that needs more than one score per (image, caption)."""
    why = get_task(task).pair_refused
    if why:
        raise VlbenchError(f"--task {task} cannot be scored by a multi-vector model (MaxSim of a pair): {why}",
                           "run this task with a dual encoder (--model clip...), or pick another task")


def maxsim_pair(image_tokens: np.ndarray, caption_tokens: np.ndarray) -> float:
    """MaxSim of one caption against one image (float32): the caption tokens' best dot products with the image
    tokens, summed in token order one float32 addition at a time."""
    best = (caption_tokens @ image_tokens.T).max(axis=1)
    return float(np.cumsum(best, dtype=np.float32)[-1])


def _table(need: dict, img: TokenVectors, row: dict, txt: TokenVectors, col: dict) -> dict:
    with blas_one_thread(None):
        return {(k, t): maxsim_pair(img.item(row[k]), txt.item(col[t])) for k, ts in need.items() for t in ts}


def score_sets_maxsim(cfg, session, sets: dict, image_path: dict, image_conditions: list, *,
                      log=lambda m: None) -> tuple[dict, dict]:
    """({None: the clean images' PairScores, image condition: its corrupted images' PairScores}, {image condition:
    what binding the corruption to the model adds to its meta}) over every pair the items of ``sets`` need; the
    memory the token vectors take is checked (against the memory available) before anything is encoded."""
    model = session.model
    need = needed_pairs(sets)
    keys = list(need)
    texts = list(dict.fromkeys(t for ts in need.values() for t in ts))
    paths = [image_path[k] for k in keys]
    bound = bind_transforms(model, image_conditions)
    check_on_cpu(image_conditions, cfg.model)
    adapter = model if getattr(model, "multivector", False) else model.real
    need_bytes = check_memory(len(set(paths)), image_tokens_at_most(adapter), adapter.text_lengths(texts),
                              int(adapter.identity().get("embed_dim") or 0) or 128, available_gib(), cfg.model,
                              galleries=1 + len(image_conditions))
    log(f"encoding {len(keys)} images and {len(texts)} candidate captions as token vectors with {cfg.model} "
        f"({need_bytes['total'] / 2**30:.3f} GiB with every image condition); MaxSim of "
        f"{sum(map(len, need.values()))} pairs")
    root = None if cfg.no_cache else stores.root(cfg.cache_dir)
    store = None if root is None else TokenStore(root, session.model_hash, read=not cfg.restart)
    img, txt = encode_multivector(session, paths, texts, list(model.text_keys(texts)), batch_size=cfg.batch_size,
                                  store=store)
    variant = encode_conditions(session, paths, image_conditions, batch_size=cfg.batch_size, store=store)
    row, col = {k: i for i, k in enumerate(keys)}, {t: j for j, t in enumerate(texts)}
    source = f"MaxSim of {cfg.model!r}"
    scores: dict[str | None, PairScores] = {None: PairScores(_table(need, img, row, txt, col), source=source)}
    for name, tokens in variant.items():
        scores[name] = PairScores(_table(need, tokens, row, txt, col), source=f"{source} under {name}")
    return scores, bound
