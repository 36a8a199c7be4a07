"""``check_pair_scorer``: a pair scorer (vlbench/models/pairs/protocol.py) against what a rerank relies on.

A rerank encodes each image once (``preprocess``, ``collate``, ``encode_images``), gathers the rows of the pairs
it scores (``state[index]``), scores them in batches of any size and order (``score_pairs``), caches scores by
``text_keys`` and the model hash, and sorts by score. So: plain, stable JSON identity; float32 scores of shape
(n,), finite; the same score for a pair whatever its batch mates, their order or the batch size; a gathered row
scores as the image encoded alone; texts with one key score alike; a mismatch of image rows and texts refused
(never truncated to the shorter); and the scores depend on the text and on the image.
"""

from __future__ import annotations

import numpy as np

from ..models.pairs.protocol import REQUIRED, load_pair_scorer
from .adapter import TEXTS, _images
from .common import Checker, Report, json_problem, short


def _scores(c: Checker, out, n: int) -> np.ndarray:
    c.expect(isinstance(out, np.ndarray), "score_pairs returns a NumPy array", type(out).__name__)
    c.expect(out.dtype == np.float32, "float32 scores", str(out.dtype))
    c.expect(out.shape == (n,), f"scores of shape ({n},), one per pair", f"shape {out.shape}")
    c.expect(bool(np.isfinite(out).all()), "finite scores", f"NaN or infinite at {np.flatnonzero(~np.isfinite(out))}")
    return out


def _close(c: Checker, a: np.ndarray, b: np.ndarray, atol: float, expected: str) -> None:
    diff = float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0
    c.expect(a.shape == b.shape and diff <= atol, f"{expected} (within {atol:g})",
             f"shapes {a.shape} / {b.shape}, largest difference {diff:.3g}")


def _check_protocol_and_identity(c: Checker, scorer, device: str):
    with c.check("protocol"):
        obj = load_pair_scorer(scorer, device=device) if isinstance(scorer, str) else scorer
        missing = [m for m in REQUIRED if not callable(getattr(obj, m, None))]
        c.expect(not missing, "a PairScorer (subclass vlbench.models.pairs.PairScorer)",
                 f"{type(obj).__name__} without {', '.join(missing)}")
    with c.check("identity"):
        ident = obj.identity()
        c.expect(isinstance(ident, dict), "identity() returns a dict", type(ident).__name__)
        problem = json_problem(ident)
        c.expect(problem is None, "identity() is plain JSON (it is written into results)", problem)
        c.expect(obj.identity() == ident, "identity() gives the same dict on every call", "a different dict")
        h = obj.model_hash()
        c.expect(isinstance(h, str) and len(h) == 64 and h == obj.model_hash(), "a stable 64-hex model hash", h)
    return obj


def _check_batches(c: Checker, obj, state, img_idx: np.ndarray, txt: list[str], atol: float) -> np.ndarray:
    with c.check("score_pairs"):
        ref = _scores(c, obj.score_pairs(state[img_idx], txt), len(txt))
    with c.check("determinism"):
        _close(c, _scores(c, obj.score_pairs(state[img_idx], txt), len(txt)), ref, atol,
               "the same pairs give the same scores")
    with c.check("batch independence"):
        one = np.concatenate([_scores(c, obj.score_pairs(state[img_idx[i:i + 1]], txt[i:i + 1]), 1)
                              for i in range(len(txt))])
        _close(c, one, ref, atol, "scoring pairs one by one gives the scores of one batch")
        perm = np.random.default_rng(0).permutation(len(txt))
        shuffled = _scores(c, obj.score_pairs(state[img_idx[perm]], [txt[i] for i in perm]), len(txt))
        _close(c, shuffled[np.argsort(perm)], ref, atol, "a shuffled batch gives the same scores")
        half = len(txt) // 2
        parts = np.concatenate([_scores(c, obj.score_pairs(state[img_idx[a:b]], txt[a:b]), b - a)
                                for a, b in ((0, half), (half, len(txt)))])
        _close(c, parts, ref, atol, "two batches of half the pairs give the scores of one batch")
    return ref


def _check_keys_and_dependence(c: Checker, obj, texts: list[str], ref: np.ndarray, n_images: int,
                               atol: float) -> None:
    with c.check("text keys name the text"):
        keys = obj.text_keys(texts)
        c.expect(isinstance(keys, list) and len(keys) == len(texts) and all(isinstance(k, str) for k in keys),
                 f"text_keys gives {len(texts)} strings", short(keys))
        c.expect(obj.text_keys(texts) == keys, "the same keys on every call", "different keys")
        for i in range(len(texts)):
            for j in range(i):
                if keys[i] == keys[j]:
                    _close(c, ref[i:len(ref):len(texts)], ref[j:len(ref):len(texts)], atol,
                           f"texts {j} and {i}, which share a key, score alike with every image")
    with c.check("scores depend on the pair"):
        grid = ref.reshape(n_images, len(texts))
        c.expect(float(np.ptp(grid, axis=1).max()) > 0, "different texts score differently with one image",
                 "every text scores alike with every image")
        c.expect(float(np.ptp(grid, axis=0).max()) > 0, "different images score differently with one text",
                 "every image scores alike with every text")


def _check_edges(c: Checker, obj, state, texts: list[str]) -> None:
    with c.check("mismatched pairs refused"):
        try:
            out = obj.score_pairs(state[np.array([0, 1])], texts[:3])
        except Exception:
            out = None
        c.expect(out is None, "an exception for 2 image rows and 3 texts (never a silent zip to the shorter)",
                 f"returned {short(out)}")
    try:
        empty = obj.score_pairs(state[np.zeros(0, dtype=int)], [])
    except Exception as exc:  # refused: fine, a rerank never asks for no pairs
        c.skip("no pairs", f"refused with {type(exc).__name__} (a rerank never asks for it)")
    else:
        with c.check("no pairs"):
            c.expect(isinstance(empty, np.ndarray) and empty.shape == (0,), "no scores for no pairs (or an exception)",
                     short(empty))


def check_pair_scorer(scorer, *, texts=None, atol: float = 1e-5, device: str = "cpu") -> Report:
    """Check a pair scorer: the object or a spec ``NAME[:CHECKPOINT]`` of the ``pair_scorers`` registry (loaded on
    ``device``). ``texts``: captions instead of the built-in sample. Returns the :class:`Report` of the checks
    passed; raises :class:`ConformanceError` at the first failure."""
    c = Checker("pair scorer", scorer if isinstance(scorer, str) else
                getattr(scorer, "spec", None) or type(scorer).__name__)
    obj = _check_protocol_and_identity(c, scorer, device)
    texts = list(texts or TEXTS)
    images = _images()
    with c.check("preprocess, collate and encode_images"):
        state = obj.encode_images(obj.collate([obj.preprocess(im) for im in images]))
        c.expect(len(state) == len(images), f"an image state of {len(images)} rows", f"{short(len(state))} rows")
        rows = state[np.array([1, 0])]
        c.expect(len(rows) == 2, "rows gathered with an index array (state[np.array([1, 0])])", f"{len(rows)} rows")
    # every image with every text: the grid the other checks cut into batches
    img_idx = np.repeat(np.arange(len(images)), len(texts))
    ref = _check_batches(c, obj, state, img_idx, [texts[j] for j in np.tile(np.arange(len(texts)), len(images))],
                         atol)
    with c.check("image encoded alone"):  # a row of a batch's state is the state of the image encoded alone
        for i, im in enumerate(images):
            alone = obj.encode_images(obj.collate([obj.preprocess(im)]))
            got = _scores(c, obj.score_pairs(alone[np.zeros(len(texts), dtype=int)], texts), len(texts))
            _close(c, got, ref[i * len(texts):(i + 1) * len(texts)], atol,
                   f"image {i} encoded alone scores as its row of the batch")
    _check_keys_and_dependence(c, obj, texts, ref, len(images), atol)
    _check_edges(c, obj, state, texts)
    return c.report
