"""The duplicate search: which rows of an embedding matrix repeat an earlier row bit for bit.

:func:`first_copies` maps every row to the lowest index holding the same bits, without a copy of the matrix.
It is part of the similarity matrix's definition (metrics/tiles.py): a duplicate's score IS its first copy's,
read from the copy's tile and never recomputed, so the tie rule (a lower index first) holds among duplicates in
every schedule of the scan.
"""

from __future__ import annotations

import numpy as np


def _row_hashes(words: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's bytes, in slabs of about 2 MB (the uint64 view of a slab, never of the
    whole matrix)."""
    n, width = words.shape
    pad = (-width) % 8
    h = np.empty(n, dtype=np.uint64)
    step = max(1, (2 << 20) // (width + pad))
    mult = np.uint64(0x9E3779B97F4A7C15)
    for r0 in range(0, n, step):
        w = words[r0:r0 + step]
        w = np.ascontiguousarray(np.pad(w, ((0, 0), (0, pad))) if pad else w).view(np.uint64)
        acc = np.zeros(len(w), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for c in range(w.shape[1]):
                acc = (acc ^ w[:, c]) * mult
                acc ^= acc >> np.uint64(29)
        h[r0:r0 + step] = acc
    return h


def first_copies(x: np.ndarray) -> np.ndarray:
    """For each row of ``x``, the lowest index of a row with the same bits (itself when it is the first);
    int32 below 2**31 rows.

    Rows are hashed to 64 bits; only the rows whose hash is shared are compared, bit for bit, so the extra
    memory is two hashes per row while they are sorted (a million rows: 16 MB), not a copy of the matrix."""
    n = len(x)
    itype = np.int32 if n < 2**31 else np.int64
    if n < 2 or x.shape[1] == 0:
        return np.arange(n, dtype=itype)
    words = np.ascontiguousarray(x).view(np.uint8).reshape(n, -1)
    h = _row_hashes(words)
    hs = np.sort(h)
    shared = np.unique(hs[1:][hs[1:] == hs[:-1]])
    del hs
    first = np.arange(n, dtype=itype)
    if not len(shared):
        return first
    chunk = 1 << 16  # membership in slabs: no full-length temporaries
    members = np.concatenate([r0 + np.flatnonzero(shared[np.minimum(np.searchsorted(shared, h[r0:r0 + chunk]),
                                                                      len(shared) - 1)] == h[r0:r0 + chunk])
                              for r0 in range(0, n, chunk)]).astype(itype)
    members = members[np.argsort(h[members], kind="stable")]  # by hash, then by index (the lowest first)
    mh = h[members]
    starts = np.flatnonzero(np.r_[True, mh[1:] != mh[:-1]])
    ends = np.r_[starts[1:], len(members)]
    lead = np.repeat(members[starts], ends - starts)  # each member's run's lowest index
    same = np.concatenate([(words[members[i:i + chunk]] == words[lead[i:i + chunk]]).all(axis=1)
                           for i in range(0, len(members), chunk)])
    first[members[same]] = lead[same]
    for s0, s1 in zip(starts, ends):
        if not same[s0:s1].all():  # two different rows share a hash: compare the run's rows pairwise
            _settle_run(words, members[s0:s1], first)
    return first


def _settle_run(words: np.ndarray, members: np.ndarray, first: np.ndarray) -> None:
    firsts: list[int] = []
    for m in members:  # ascending index
        for f in firsts:
            if np.array_equal(words[m], words[f]):
                first[m] = f
                break
        else:
            first[m] = m
            firsts.append(int(m))
