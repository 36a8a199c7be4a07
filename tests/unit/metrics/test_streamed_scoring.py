"""Scoring streamed over square tiles (metrics/scan/walk.py): the exact heads and ranks of the whole-row
ranking, on real-valued vectors with duplicates, exact ties across the head's cut and near twins; the tile
shape that makes it fast; the duplicate search's memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from support.sharded_gallery import gallery, independent_best_ranks, per_query

from vlbench.metrics import sharded
from vlbench.metrics.compute import EmbeddingSource, evaluate, similarity_matrix
from vlbench.metrics.ranking import build_positives
from vlbench.metrics.scan import duplicates
from vlbench.metrics.scan.walk import scan
from vlbench.metrics.tiles import TILE_ELEMENTS, TileGrid, first_copies, tile_shape


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _case(dups: bool, seed: int = 11):
    """2,600 images x 700 captions, 64-d: near twins, caption 1 just off image 3, whose 47 bit-identical copies
    (with duplicates; 20 of them in one tile) then tie exactly across the top-10 cut, in the tile and over the
    gallery, and captions 4 and 7 whose positive is a later copy; without duplicates every tile is dup-free."""
    img, txt, c2i = gallery(2_600, 700, dim=64, seed=seed)
    rng = np.random.default_rng(seed + 1)
    if dups:
        img[600:620] = img[3]
    else:
        img[5::97] = _unit(rng.standard_normal((len(img[5::97]), 64)))
        txt[9::89] = _unit(rng.standard_normal((len(txt[9::89]), 64)))
    c2i[1], c2i[4], c2i[7] = 3, 684, 610  # 684 and 610: later copies of image 3 (ties before them count)
    txt[1] = _unit(img[3:4] + 0.01 * rng.standard_normal((1, 64)))[0]
    return img, txt, c2i


@pytest.fixture
def streamed(monkeypatch):
    """The directions the streamed scan served (a spy on metrics/sharded.py's call)."""
    calls: list[str] = []
    real = sharded.scan

    def spy(grid, direction, *a, **kw):
        calls.append(direction)
        return real(grid, direction, *a, **kw)

    monkeypatch.setattr(sharded, "scan", spy)
    return calls


def test_tiles_stay_square_and_large_for_a_million_image_gallery():
    """Tiles derived from the other gallery's size were 2,048 images x 8 captions at 2,500 x 1M (products BLAS
    runs far below its peak, 150,000 of them): every side is now at least 256 wherever both galleries are."""
    for n_cap in (2_500, 25_000, 1_000_000):
        ti, tt = tile_shape(1_000_000, n_cap)
        assert min(ti, tt) >= 256 and ti * tt <= TILE_ELEMENTS, n_cap
    assert tile_shape(5_000, 25_000) == (512, 512)
    assert tile_shape(100, 1_000_000) == (128, 2_048)  # a short side lets the other grow
    assert tile_shape(3, 5) == (4, 8)


@pytest.mark.parametrize("dups", [True, False])
@pytest.mark.parametrize("block", ["2x256", "1000x100000"])
def test_streamed_scoring_gives_the_whole_row_values_bit_for_bit(dups, block, streamed):
    """Whole rows ranked at once (the one-piece pass at this size) against the tile stream (one tile in flight,
    and four), with and without duplicate rows to read from their first copies: every per-query column and
    top list equal."""
    img, txt, c2i = _case(dups)
    kw = dict(k=(1, 5, 10, 50), i2t_recall="fraction")
    whole = evaluate(EmbeddingSource(img, txt), c2i, **kw)
    assert streamed == []
    tiled = evaluate(EmbeddingSource(img, txt), c2i, score_block=block, **kw)
    assert sorted(streamed) == ["i2t", "t2i"]
    a, b = per_query(whole), per_query(tiled)
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    assert whole.records() == tiled.records()


def test_streamed_heads_and_ranks_follow_an_independent_stable_sort():
    """The matrix vlbench scores (close to the plain product), ranked by a NumPy stable sort of each column
    (score desc, index asc): the streamed top-10 of every caption and every best-positive rank are the sort's;
    caption 1's 27 exactly tied copies straddle the cut in index order."""
    img, txt, c2i = _case(dups=True)
    sim = similarity_matrix(EmbeddingSource(img, txt))
    assert np.abs(sim - img @ txt.T).max() < 1e-6
    ev = evaluate(EmbeddingSource(img, txt), c2i, score_block="4x4096")
    want_top = np.stack([np.argsort(-sim[:, j], kind="stable")[:10] for j in range(sim.shape[1])])
    assert np.array_equal(ev.direction("t2i").top, want_top)
    assert np.array_equal(want_top[1], np.r_[3, np.arange(5, 600, 97), np.arange(600, 620)][:10])  # image 3's copies
    assert (sim[:, 1] == sim[3, 1]).sum() > 10  # the tie straddles the cut: it has teeth
    want = independent_best_ranks(sim, c2i)
    for d in ("i2t", "t2i"):
        assert np.array_equal(ev.direction(d).best_rank, want[d]), d


def test_slices_at_tile_edges_merge_to_the_whole_scan():
    """As torchrun ranks split the gallery: the heads of two slices merged in the tie order, and their counts
    of candidates above the best positive added, are the whole gallery's."""
    img, txt, c2i = _case(dups=True)
    grid = EmbeddingSource(img, txt).grid
    _, t2i, _ = build_positives(c2i, len(img))
    q = np.arange(len(txt))
    head, bs, bc, n = scan(grid, "t2i", q, t2i, 11, 0, len(img))
    ix, v = head.ix, head.v
    parts = [scan(grid, "t2i", q, t2i, 11, lo, hi) for lo, hi in ((0, 1_024), (1_024, len(img)))]
    pix, pv = np.hstack([p[0].ix for p in parts]), np.hstack([p[0].v for p in parts])
    order = np.lexsort((pix, -pv), axis=1)[:, :11]
    assert np.array_equal(np.take_along_axis(pix, order, axis=1), ix)
    assert np.array_equal(np.take_along_axis(pv, order, axis=1), v)
    assert np.array_equal(parts[0][3] + parts[1][3], n)
    assert all(np.array_equal(p[1], bs) and np.array_equal(p[2], bc) for p in parts)


def test_non_finite_embeddings_take_the_checked_path():
    img, txt, c2i = _case(dups=False)
    img[7, 3] = np.nan
    src = EmbeddingSource(img, txt)
    assert not src.grid.finite_range()  # so the scan checks every tile
    with pytest.raises(ValueError, match="NaN or infinite"):
        evaluate(src, c2i, score_block="64x4096")


def test_first_copies_memory_stays_under_a_tenth_of_the_matrix():
    """The duplicate search holds a few integers per row (hashes while they are sorted, the int32 answer),
    never a copy of the matrix or full-length int64 temporaries: under 10% of the matrix's bytes."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200_000, 64), dtype=np.float32)
    x[1::1_000] = x[0]
    tracemalloc.start()
    try:
        first = first_copies(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.dtype == np.int32 and (first[1::1_000] == 0).all() and first[2] == 2
    assert peak <= 0.10 * x.nbytes, peak / x.nbytes


def test_first_copies_settles_rows_that_share_a_hash_but_differ(monkeypatch):
    """A coarse hash (forced collisions between different rows): the answer is still the lowest index of the
    same bits, checked against a dictionary of the rows' bytes."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((500, 5)).astype(np.float32)
    x[100:200] = x[rng.integers(0, 100, 100)]
    monkeypatch.setattr(duplicates, "_row_hashes", lambda words: words[:, 0].astype(np.uint64) % np.uint64(3))
    want, seen = np.empty(len(x), dtype=np.int64), {}
    for i, row in enumerate(x):
        want[i] = seen.setdefault(row.tobytes(), i)
    assert np.array_equal(first_copies(x), want)


def test_device_tiles_stream_one_at_a_time_with_the_block_path_values(streamed):
    """The GPU schedule (tiles as torch products, one at a time, no worker threads), run with torch on the CPU
    as the device: the streamed values equal the whole-row pass over the same device tiles."""
    import torch  # lazy: the other tests here do not need it
    img, txt, c2i = _case(dups=True)

    def on_torch():
        src = EmbeddingSource(img, txt)
        src.grid = TileGrid(img, txt, device="cpu", backend="torch")  # the CPU as a stand-in device
        assert isinstance(src.grid.product(0, 0, on_device=True), torch.Tensor)  # the device schedule's tiles
        return src

    whole, tiled = evaluate(on_torch(), c2i), evaluate(on_torch(), c2i, score_block="64x4096")
    assert sorted(streamed) == ["i2t", "t2i"]
    a, b = per_query(whole), per_query(tiled)
    assert all(np.array_equal(a[key], b[key]) for key in a)


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_the_numpy_and_torch_reducers_agree_on_the_same_tile(direction):
    """One reducer code path for NumPy and torch (ArrayOps): given the same tile (values on a coarse grid, so
    exact ties straddle the head's cut and meet the best positive), a NumPy grid and a torch grid (the CPU as
    the device) give the same counts, the same queries to merge and the same head, ids and scores, bit for bit;
    with and without a gather of the run's queries, and with the best positive before, inside and after it."""
    from vlbench.metrics.scan.reducers import TileRun, reduce_tile

    rng = np.random.default_rng(12)
    img = np.round(rng.standard_normal((300, 8)), 1).astype(np.float32)
    txt = np.round(rng.standard_normal((200, 8)), 1).astype(np.float32)
    img[10:40], txt[10:40] = img[5], txt[5]  # candidates 5 and 10..39 tie exactly for every query
    grids = [TileGrid(img, txt), TileGrid(img, txt, device="cpu", backend="torch")]
    tile = grids[0].product(0, 0)
    n_q = tile.shape[1] if direction == "t2i" else tile.shape[0]
    n_c = tile.shape[0] if direction == "t2i" else tile.shape[1]
    x = tile if direction == "t2i" else tile.T
    for offs in (None, np.arange(3, n_q, 4)):
        cols = np.arange(n_q) if offs is None else offs
        bc = rng.integers(-50, n_c + 50, len(cols))  # before the tile, inside it, after it
        bc[::2] = 20  # a best positive with equal scores before it (counted one by one) and after it
        bs = x[np.clip(bc, 0, n_c - 1), cols].astype(np.float64)
        out = []
        for g in grids:
            run = TileRun(g, direction, offs, cols, bs, bc, 7, False, np.zeros(0, dtype=np.int64),
                          np.zeros(0, dtype=np.int64), 0)
            out.append(reduce_tile(run, 0, 0, tile, None, slice(0, n_c), np.full(len(cols), -np.inf), None))
        (cnt_a, hit_a, head_a), (cnt_b, hit_b, head_b) = out
        assert np.array_equal(cnt_a, cnt_b) and np.array_equal(hit_a, hit_b)
        assert np.array_equal(head_a.ix, head_b.ix) and np.array_equal(head_a.v, head_b.v)
        assert (np.count_nonzero(x[:, cols] == bs.astype(np.float32), axis=0) > 1).any()  # ties at the positive


def test_slices_merge_to_the_whole_scan_with_relevances_and_graded_gains():
    """As torchrun ranks merge their heads (Head.merge): two slices at a tile edge, each scanned with a relevance
    model and tied graded labels, merge into the whole scan's head, the relevances and gains at it, and the
    largest relevances of non-positives and largest gains, bit for bit."""
    from vlbench.metrics.compute import ArraySource
    from vlbench.metrics.scan.reducers import Side

    img, txt, c2i = _case(dups=True)
    grid = EmbeddingSource(img, txt).grid
    _, t2i, _ = build_positives(c2i, len(img))
    rng = np.random.default_rng(13)
    side = Side(EmbeddingSource(rng.standard_normal((len(img), 8)).astype(np.float32),
                                rng.standard_normal((len(txt), 8)).astype(np.float32)),
                {"g": ArraySource(np.round(rng.random((len(img), len(txt))), 1).astype(np.float32))}, 10)
    q = np.arange(len(txt))
    whole = scan(grid, "t2i", q, t2i, 11, 0, len(img), side=side)[0]
    merged, other = (scan(grid, "t2i", q, t2i, 11, lo, hi, side=side)[0] for lo, hi in ((0, 1_024), (1_024, len(img))))
    merged.merge(other, 11, 10)
    for a, b in zip(whole.fields(), merged.fields()):
        assert np.array_equal(a, b)
    assert len(whole.fields()) == 6 and (whole.nonpos[:, 0] > whole.nonpos[:, -1]).all()
