"""Scoring in blocks of rows x columns (--score-block, metrics/sharded.py) gives exactly the one-piece numbers,
on real-valued vectors with duplicates and near ties (the one tiled scorer, metrics/tiles.py)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from support.sharded_gallery import gallery, independent_best_ranks, per_query
from vlbench.errors import OptionError
from vlbench.metrics import compute
from vlbench.metrics.compute import EmbeddingSource, evaluate
from vlbench.metrics.sharded import parse_score_block
from vlbench.pipeline.run_config import RunConfig, validate


def _same(a, b) -> None:
    pa, pb = per_query(a), per_query(b)
    assert pa.keys() == pb.keys()
    for key in pa:
        assert np.array_equal(pa[key], pb[key]), key
    assert a.records() == b.records()


class _TextOnly(compute.ArraySource):
    directions = ("t2i",)


@pytest.mark.parametrize("dim", [64, 512])
@pytest.mark.parametrize("block", ["2x256", "7x300", "64x1000", "3x999", "1000x100000"])
def test_blocks_give_the_one_piece_values_on_real_valued_vectors_with_duplicates_and_near_ties(block, dim):
    """Real-valued normalised vectors (whose products round), duplicates and near twins (a few ulp apart):
    blocks that cut inside tiles and across them give the one-piece values bit for bit, a fixed relevance
    model's DCG and graded gains included."""
    img, txt, c2i, kw, one_piece = _real_valued_one_piece(dim)
    _same(one_piece, evaluate(EmbeddingSource(img, txt), c2i, score_block=block, **kw))


@cache
def _real_valued_one_piece(dim: int):
    """The real-valued problem of the test above and its one-piece result, computed once per dimension (the five
    block shapes compare with the same one-piece values; _same only reads them)."""
    img, txt, c2i = gallery(1_500, 400, dim=dim, seed=1)
    rng = np.random.default_rng(2)
    rel = EmbeddingSource(rng.standard_normal((1_500, 8)).astype(np.float32),
                          rng.standard_normal((400, 8)).astype(np.float32))
    graded = {"g": _TextOnly(np.round(rng.random((1_500, 400)), 1).astype(np.float32))}  # tied gains too
    kw = dict(relevance=rel, graded=graded, block_bytes=1 << 16, k=(1, 5, 10, 50), i2t_recall="fraction")
    return img, txt, c2i, kw, evaluate(EmbeddingSource(img, txt), c2i, **kw)


@pytest.mark.parametrize("block", ["1x256", "4x1000"])
def test_one_row_query_blocks_cut_into_shards(block):
    img, txt, c2i = gallery(3_000, 301, seed=3)
    kw = dict(block_bytes=4 * 3_000 * 2)  # t2i: query blocks of 2 rows asked for (one tile high in fact)
    _same(evaluate(EmbeddingSource(img, txt), c2i, **kw), evaluate(EmbeddingSource(img, txt), c2i, score_block=block,
                                                                   **kw))


def test_the_tie_rule_holds_on_every_query_by_an_independent_ranking():
    """The similarity matrix vlbench scores, ranked again by a plain NumPy stable sort (score desc, index asc):
    every query's best-positive rank is the same, in one piece and in blocks; duplicates score bit for bit
    as their first copy, in both directions."""
    img, txt, c2i = gallery(2_000, 300, dim=64, seed=4)
    src = EmbeddingSource(img, txt)
    sim = compute.similarity_matrix(src)
    assert np.array_equal(sim[5::97], np.broadcast_to(sim[3], sim[5::97].shape))
    assert np.array_equal(sim[:, 9::89], np.broadcast_to(sim[:, 2:3], sim[:, 9::89].shape))
    assert np.array_equal(src.rows("t2i", np.arange(300)), sim.T)  # both directions read one matrix
    want = independent_best_ranks(sim, c2i)
    for block in (None, "3x300", "64x1000"):
        ev = evaluate(EmbeddingSource(img, txt), c2i, score_block=block)
        for d in ("i2t", "t2i"):
            assert np.array_equal(ev.direction(d).best_rank, want[d]), (block, d)
    # the case has teeth: near twins tie to within rounding at the top of many rankings
    gaps = np.abs(sim[50::50] - sim[49:-1:50])
    assert (gaps < 1e-6).mean() > 0.9 and (want["t2i"] == 1).any() and (want["t2i"] > 10).any()


def test_one_row_requests_and_cut_shards_read_the_tile_bits():
    """A BLAS rounds the same dot product 1-2 ulp apart in products of other shapes (a one-row product against
    the many-row one: on this project's machines most elements differ). Through the tiled scorer, one-query
    requests and a shard cut mid-tile read exactly the bits of the whole block."""
    img, txt, _ = gallery(3_000, 64, dim=512, seed=5)
    whole = txt @ img.T
    src = EmbeddingSource(img, txt)
    tiled = src.rows("t2i", np.arange(64))
    assert np.array_equal(np.vstack([src.rows("t2i", np.array([i])) for i in range(8)]), tiled[:8])
    assert np.array_equal(src.block("t2i", np.arange(64), 1_000, 1_700), tiled[:, 1_000:1_700])
    assert np.abs(tiled - whole).max() < 1e-6  # the same numbers up to rounding


def test_tiles_are_computed_once_when_blocks_follow_the_grid():
    img, txt, c2i = gallery(3_000, 600, dim=32, seed=6)
    src = EmbeddingSource(img, txt)
    evaluate(src, c2i)
    g = src.grid
    n_tiles = -(-3_000 // g.ti) * -(-600 // g.tt)
    assert g.products <= 2 * n_tiles  # at most once per direction (and usually the cache serves t2i)


def test_first_copies_finds_the_lowest_index_with_the_same_bits():
    from vlbench.metrics.tiles import first_copies

    rng = np.random.default_rng(7)
    x = rng.standard_normal((1_000, 7)).astype(np.float32)
    x[10::100] = x[3]
    x[500] = x[499]
    x[501] = -0.0 * x[501]  # -0.0 and 0.0 differ in bits
    x[502] = 0.0 * x[502]
    first = first_copies(x)
    want = np.arange(1_000)
    want[10::100] = 3
    want[500] = 499
    assert np.array_equal(first, want)
    assert np.array_equal(first_copies(x[:1]), [0]) and len(first_copies(x[:0])) == 0


@pytest.mark.parametrize("bad", ["0x1000", "64x10", "64", "axb", (0, 512), "2x2.5"])
def test_a_bad_score_block_is_refused_by_option(bad):
    with pytest.raises(ValueError):
        parse_score_block(bad)
    with pytest.raises(OptionError) as e:
        validate(RunConfig(model="clip", dataset="flickr30k", score_block=bad))
    assert e.value.option == "score_block"


def test_positives_without_extras_are_arrays_equal_to_the_list_path():
    """A million-image gallery's positives cost arrays, not a Python list per image (the 185 MB of lists that
    dominated scoring's memory); the same Positives as the list path (taken here by an empty extra row)."""
    from vlbench.metrics.ranking import build_positives

    rng = np.random.default_rng(5)
    for n_img, n_cap in ((10, 0), (10, 1), (100, 500), (1_000, 37)):
        c2i = rng.integers(0, n_img, n_cap)
        fast = build_positives(c2i, n_img, None)
        lists = build_positives(c2i, n_img, {"t2i": {0: []}} if n_cap else {"i2t": {0: []}})
        for a, b in zip(fast[:2], lists[:2]):
            assert np.array_equal(a.ptr, b.ptr) and np.array_equal(a.idx, b.idx) and a.n_candidates == b.n_candidates
            assert a.ptr.dtype == b.ptr.dtype and a.idx.dtype == b.idx.dtype
        assert np.array_equal(fast[2], lists[2]) and fast[2].dtype == lists[2].dtype


class _RowsOnly(compute.SimilaritySource):
    """A source that gives whole rows only (no ``block``, no ``sim``), as a third party's may."""

    def __init__(self, sim: np.ndarray):
        self._src = compute.ArraySource(sim)
        self.n_images, self.n_captions = sim.shape

    def rows(self, direction, queries):
        return self._src.rows(direction, queries)


@pytest.mark.parametrize("kind", [compute.ArraySource, _RowsOnly])
@pytest.mark.parametrize("block", ["2x256", "64x1000"])
def test_a_precomputed_matrix_scores_the_same_in_blocks(block, kind):
    """A source without a tile grid (a float64 matrix with exact ties on a coarse grid of values, as an
    ArraySource or a source of whole rows only) is walked by the same scan, read as a grid of its own blocks in
    its own precision: every per-query value equals the whole-row pass, a relevance matrix's DCG and tied graded
    gains included."""
    rng = np.random.default_rng(8)
    sim = np.round(rng.random((700, 900)), 2)  # many exact ties, in float64
    c2i = rng.integers(0, 700, 900)
    rel = compute.ArraySource(np.round(rng.standard_normal((700, 900)), 1).astype(np.float32))
    graded = {"g": _TextOnly(np.round(rng.random((700, 900)), 1).astype(np.float32))}
    kw = dict(relevance=rel, graded=graded, k=(1, 5, 10), i2t_recall="fraction")
    _same(evaluate(kind(sim), c2i, **kw), evaluate(kind(sim), c2i, score_block=block, **kw))
    # without a relevance model DCG reads the similarities themselves: float64 kept, not rounded to float32
    _same(evaluate(kind(sim), c2i), evaluate(kind(sim), c2i, score_block=block))


def test_a_non_finite_precomputed_matrix_is_refused_naming_a_query_in_blocks():
    rng = np.random.default_rng(9)
    sim = rng.random((300, 400)).astype(np.float32)
    sim[5, 7] = np.inf
    with pytest.raises(ValueError, match=r"similarity has NaN or infinite values \((i2t query 5|t2i query 7)\)"):
        evaluate(compute.ArraySource(sim), np.arange(400) % 300, score_block="4x1000")


def test_a_tile_grid_refuses_an_unknown_backend_or_numpy_on_a_device():
    from vlbench.metrics.tiles import TileGrid

    x = np.ones((4, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="backend is one of numpy, torch"):
        TileGrid(x, x, backend="jax")
    with pytest.raises(ValueError, match="use backend='torch'"):
        TileGrid(x, x, device="cuda", backend="numpy")
    assert TileGrid(x, x, device="cpu").device is None and TileGrid(x, x, device="cpu", backend="torch").device == "cpu"
