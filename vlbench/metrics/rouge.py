"""Tokenizer, bit-parallel LCS and ROUGE-L (coco-caption's definition) for graded relevance (graded.py).

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

import re
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["WORD", "tokenize", "lcs_lengths", "rouge_l"]

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
                u, w = buf[0], buf[1]  # type: ignore[index]  # allocated above when there are dense tokens
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
