"""Exact MaxSim on the scan's tile grid (metrics/scan/maxsim.py): the streamed scan equals the one-piece matrix
bit for bit, the values equal MaxSim's definition, and the working memory stays within the stated units."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from vlbench.metrics import compute, tiles
from vlbench.metrics.ranking import ArraySource
from vlbench.metrics.scan import maxsim
from vlbench.metrics.scan.maxsim import MaxSimGrid, MaxSimSource, TokenVectors, maxsim_matrix, plan_bytes


def _tokens(rs, n: int, lo: int, hi: int, dim: int) -> TokenVectors:
    return TokenVectors.from_items([rs.randn(rs.randint(lo, hi + 1), dim).astype(np.float32) for _ in range(n)])


def _near_ties(seed: int = 0, n_img: int = 37, n_cap: int = 90, dim: int = 8):
    """Real-valued tokens with exact ties (copied tokens and items) and near ties (one ulp apart)."""
    rs = np.random.RandomState(seed)
    img = [rs.randn(rs.randint(3, 12), dim).astype(np.float32) for _ in range(n_img)]
    img[5] = img[2].copy()  # a duplicate image: exact ties in every column
    img[7] = img[3][::-1].copy()  # the same tokens in another order: the same max per caption token
    img[9] = np.nextafter(img[4], np.float32(np.inf))  # near ties
    cap = [rs.randn(rs.randint(1, 6), dim).astype(np.float32) for _ in range(n_cap)]
    cap[11] = cap[10].copy()
    return TokenVectors.from_items(img), TokenVectors.from_items(cap)


def _definition(img: TokenVectors, cap: TokenVectors) -> np.ndarray:
    """MaxSim from its definition in float64, pair by pair."""
    out = np.empty((len(img), len(cap)))
    for i in range(len(img)):
        d = img.item(i).astype(np.float64)
        for j in range(len(cap)):
            out[i, j] = (cap.item(j).astype(np.float64) @ d.T).max(axis=1).sum()
    return out


def test_maxsim_matrix_equals_the_definition():
    img, cap = _near_ties()
    np.testing.assert_allclose(maxsim_matrix(img, cap), _definition(img, cap), rtol=1e-5, atol=1e-5)


def test_maxsim_ties_are_exact_for_copies_and_reordered_tokens():
    img, cap = _near_ties()
    s = maxsim_matrix(img, cap)
    assert np.array_equal(s[5], s[2]) and np.array_equal(s[7], s[3]) and np.array_equal(s[:, 11], s[:, 10])


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_maxsim_tiles_equal_one_piece_bit_for_bit(monkeypatch, workers):
    monkeypatch.setattr(maxsim, "UNIT_BYTES", 4096)  # many units per tile, so tiles are computed in pieces
    monkeypatch.setattr(tiles, "TILE_SIDE", 16)
    monkeypatch.setattr(tiles, "TILE_ELEMENTS", 256)
    monkeypatch.setattr(tiles, "WORKERS", workers)
    monkeypatch.setattr(tiles, "_POOL", None)
    img, cap = _near_ties(1)
    whole = maxsim_matrix(img, cap)
    grid = MaxSimGrid(img, cap)
    assert (grid.ti, grid.tt) == (16, 16) and grid.gd * grid.gq < grid.ti * grid.tt
    ii, cc = np.arange(len(img)), np.arange(len(cap))
    assert np.array_equal(grid.scores(ii, cc), whole)
    assert np.array_equal(grid.scores(ii[::-3], cc[7::2]), whole[ii[::-3]][:, cc[7::2]])
    c2i = np.arange(len(cap)) % len(img)
    one = compute.evaluate(ArraySource(whole), c2i, k=(1, 5, 10))
    for block in (None, "1x256", "3x256"):
        got = compute.evaluate(MaxSimSource(img, cap), c2i, k=(1, 5, 10), score_block=block)
        assert got.records() == one.records()
        for d in ("t2i", "i2t"):
            assert np.array_equal(got.direction(d).best_rank, one.direction(d).best_rank)
            assert np.array_equal(got.direction(d).top, one.direction(d).top)
    tiles._POOL = None  # the next test makes its own pool at the real size


def test_maxsim_working_memory_stays_within_units(monkeypatch):
    monkeypatch.setattr(maxsim, "UNIT_BYTES", 1 << 20)
    rs = np.random.RandomState(3)
    img, cap = _tokens(rs, 96, 60, 60, 32), _tokens(rs, 600, 12, 12, 32)
    one_product = 4 * len(img.flat) * len(cap.flat)  # all image tokens x all caption tokens at once
    need = plan_bytes(96, 60, 600, 12, 32)
    tracemalloc.start()
    ev = compute.evaluate(MaxSimSource(img, cap), np.arange(600) % 96, k=(1,), score_block="1x256")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert ev.records()
    assert peak < need["scan"] + (4 << 20) < one_product / 4, (peak, need, one_product)


def test_token_vectors_refuse_an_item_without_tokens():
    with pytest.raises(ValueError, match="item 1 has no token vectors"):
        TokenVectors(np.zeros((2, 4), np.float32), np.array([0, 2, 2]))


def test_token_vectors_select_items():
    rs = np.random.RandomState(4)
    tv = _tokens(rs, 6, 1, 5, 4)
    for key in (slice(1, 4), np.array([4, 0, 4])):
        sub = tv[key]
        for k, i in enumerate(np.arange(6)[key]):
            assert np.array_equal(sub.item(k), tv.item(i))
