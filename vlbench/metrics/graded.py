"""Graded caption-caption relevance for t2i nDCG (Messina et al.'s TERN/TERAN protocol).

The relevance of a (caption query q, image i) pair is computed from the *captions* of image i:

* ``RougeLRelevance``: ROUGE-L of q scored against image i's captions, exactly coco-caption's
  ``Rouge.score(candidate=q, refs=captions of i)``: for each reference r, LCS = length of the longest
  common token subsequence, P_r = LCS / len(q), R_r = LCS / len(r); P = max_r P_r and R = max_r R_r
  (separately), F = ((1 + b^2) P R) / (R + b^2 P) with b = 1.2, and F = 0 if P or R is 0.
* ``MiniLMRelevance``: an embedding-based alternative: cosine similarity of all-MiniLM-L6-v2 sentence
  embeddings between q and each caption of i, max (or mean) over i's captions, clipped to [0, 1].
  Cheaper than ROUGE-L only with a GPU: on 2 CPU cores encoding the captions costs far more than the
  bit-parallel ROUGE-L (docs/graded_relevance.md).

Both are ``SimilaritySource``s for ``metrics.evaluate(..., relevance=...)``; only the t2i direction
(caption queries x image candidates) exists: ``rows("i2t", ...)`` raises ValueError.
``graded_ndcg`` computes Messina's t2i nDCG@p with purely graded gains (no "positive = 1" rule).

Decisions (docs/graded_relevance.md has the full text and the measured costs):

* tokens: ``re.findall(r"[a-z0-9]+", text.lower())`` (PTB-like: punctuation dropped, "t-shirt" ->
  "t", "shirt"). TERAN's copy of coco-caption split the raw lowercased text on single spaces (so
  "road." != "road"); pass ``tokenizer=lambda s: s.lower().split(" ")`` to reproduce that.
* ``max_tokens`` (<= 64): every caption is cut to its first ``max_tokens`` tokens, query and
  references alike (so a caption still matches itself with F = 1). The bit-parallel LCS keeps one
  reference in one 64-bit word. On the real test sets this touches 1 Flickr30k caption (70 tokens), no
  COCO caption (max 43).
* ``exclude_self`` (default False): with False the query caption is one of its own image's references,
  as in TERAN (which scored each query against all 5 captions of every image), so rel(q, own image) =
  1.0 exactly, consistent with "rel = 1 for a perfect match" and with metrics.py's rule that the
  positive gets gain 1. With True the query is removed from its own image's references (rel of the own
  image is then the overlap with the *other* captions; an image whose only caption is the query gets 0).
  Other captions that happen to be identical strings are never removed.

The tokenizer, the bit-parallel LCS and ROUGE-L are in rouge.py.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnknownNameError
from .compute import SimilaritySource, _discounts, _sorted_topk, graded_ndcg_rows
from .graded_sources import GRADED_VERSION, MiniLMRelevance, RougeLRelevance, load_minilm  # noqa: F401 -- re-exported
from .rouge import _LcsIndex, _popcount64, lcs_lengths, rouge_l, tokenize  # noqa: F401 -- re-exported

__all__ = ["tokenize", "lcs_lengths", "rouge_l", "RougeLRelevance", "MiniLMRelevance", "PrecomputedRelevance",
           "graded_relevance", "graded_ndcg", "GRADED_VERSION"]

# ---------------------------------------------------------------------------------------------
# precomputed labels (e.g. a saved matrix(), or TERAN's float32 memmap files)

class PrecomputedRelevance(SimilaritySource):
    """A (n_captions, n_images) relevance matrix (numpy array or memmap) as a t2i relevance source.

    E.g. a saved ``RougeLRelevance(...).matrix()`` (``np.save`` / ``np.load(path, mmap_mode="r")``), or
    TERAN's raw float32 memmaps of this layout:
    ``PrecomputedRelevance(np.memmap(path, np.float32, "r", shape=(n_captions, n_images)))``.
    """

    directions = ("t2i",)

    def __init__(self, matrix):
        m = matrix if isinstance(matrix, np.ndarray) else np.asarray(matrix)
        if m.ndim != 2:
            raise ValueError(f"relevance matrix must be 2-D (n_captions, n_images), got shape {m.shape}")
        self.relevance = m
        self.n_captions, self.n_images = m.shape

    def rows(self, direction, queries):
        if direction != "t2i":
            raise ValueError(f"graded caption relevance exists only for direction 't2i', not {direction!r}")
        q = np.asarray(queries, dtype=np.int64).reshape(-1)
        if len(q) and (q.min() < 0 or q.max() >= self.n_captions):
            raise ValueError(f"query caption index out of range 0..{self.n_captions - 1}")
        return np.asarray(self.relevance[q], dtype=np.float64)

    def describe(self) -> dict:
        return dict(kind="precomputed", shape=[self.n_captions, self.n_images])


def graded_relevance(kind: str, captions, caption_to_image, n_images: int, **kw) -> SimilaritySource:
    """Factory: kind "rouge-l" -> RougeLRelevance, "minilm" -> MiniLMRelevance (keywords passed on)."""
    k = kind.lower().replace("_", "-")
    if k in ("rouge-l", "rougel", "rouge"):
        return RougeLRelevance(captions, caption_to_image, n_images, **kw)
    if k in ("minilm", "all-minilm-l6-v2"):
        return MiniLMRelevance(captions, caption_to_image, n_images, **kw)

    raise UnknownNameError(f"unknown graded relevance {kind!r}", "use 'rouge-l' or 'minilm'")


# ---------------------------------------------------------------------------------------------
# Messina's t2i nDCG with purely graded gains

def graded_ndcg(similarity_source: SimilaritySource, relevance_source: SimilaritySource, caption_to_image,
                p: int = 10, *, gains: str = "exponential", block_rows: int = 1024) -> np.ndarray:
    """Per-query t2i nDCG@p with graded gains only (TERAN's ``ndcg_from_ranking``); returns (n_captions,).

    For caption query q: the model ranks all images (similarity descending, ties -> lower image index
    first, as in metrics.py); DCG = sum_{k=1..p} g(rel[q, img_k]) / log2(k + 1) with
    g(x) = 2^x - 1 (``gains="exponential"``, TERAN's choice) or g(x) = x (``"linear"``);
    the ideal DCG is the same sum over the images sorted by rel; nDCG = DCG / IDCG (0 if IDCG = 0).
    No special gain for the ground-truth image (with exclude_self=False its rel is 1 anyway).
    TERAN reported p = 25 (``p=25``). The mean over queries is the reported value.
    """
    if gains not in ("exponential", "linear"):
        raise ValueError(f"gains must be 'exponential' or 'linear', got {gains!r}")
    p = int(p)
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    c2i = np.asarray(caption_to_image).reshape(-1)
    n_img, n_cap = similarity_source.n_images, similarity_source.n_captions
    if len(c2i) != n_cap:
        raise ValueError(f"caption_to_image has {len(c2i)} entries but the similarity source has {n_cap} captions")
    if (relevance_source.n_images, relevance_source.n_captions) != (n_img, n_cap):
        raise ValueError(f"relevance source is {relevance_source.n_captions} captions x {relevance_source.n_images} "
                         f"images, similarity source {n_cap} x {n_img}")
    pp = min(p, n_img)
    disc = _discounts(pp)
    out = np.zeros(n_cap, dtype=np.float64)
    g = (lambda x: np.exp2(x) - 1.0) if gains == "exponential" else (lambda x: x)
    block_rows = max(1, int(block_rows))
    for a in range(0, n_cap, block_rows):
        qs = np.arange(a, min(n_cap, a + block_rows))
        sim = np.asarray(similarity_source.rows("t2i", qs))
        if sim.dtype not in (np.float32, np.float64):
            sim = sim.astype(np.float32)
        rel = np.asarray(relevance_source.rows("t2i", qs), dtype=np.float64)
        for name, x in (("similarity", sim), ("relevance", rel)):
            if not np.isfinite(x).all():
                bad = int(qs[np.flatnonzero(~np.isfinite(x).all(axis=1))[0]])
                raise ValueError(f"{name} has NaN or infinite values (t2i query {bad})")
        top, _ = _sorted_topk(np.ascontiguousarray(sim), pp)
        out[qs] = graded_ndcg_rows(g(rel), top, disc)  # the same code as evaluate(graded=...)
    return out
