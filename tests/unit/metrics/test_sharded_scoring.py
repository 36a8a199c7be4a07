"""Scoring in blocks of rows x columns (--score-block, metrics/sharded.py) gives exactly the one-piece numbers."""

from __future__ import annotations

import numpy as np
import pytest

from support.sharded_gallery import gallery, per_query
from vlbench.errors import OptionError
from vlbench.metrics import compute
from vlbench.metrics.compute import EmbeddingSource, evaluate
from vlbench.metrics.sharded import ALIGN, column_shards, parse_score_block
from vlbench.pipeline.run_config import RunConfig, validate


def _same(a, b) -> None:
    pa, pb = per_query(a), per_query(b)
    assert pa.keys() == pb.keys()
    for key in pa:
        assert np.array_equal(pa[key], pb[key]), key
    assert a.records() == b.records()


class _TextOnly(compute.ArraySource):
    directions = ("t2i",)


@pytest.mark.slow  # 2-6 s each: five block shapes over a 2,000-image gallery
@pytest.mark.parametrize("block", ["2x256", "7x300", "64x1000", "3x999", "1000x100000"])
def test_blocks_give_the_one_piece_values_with_ties_duplicates_relevance_and_graded_gains(block):
    img, txt, c2i = gallery(2_000, 700, seed=1)
    rng = np.random.default_rng(2)
    rel = EmbeddingSource(rng.standard_normal((2_000, 8)).astype(np.float32),
                          rng.standard_normal((700, 8)).astype(np.float32))
    graded = {"g": _TextOnly(np.round(rng.random((2_000, 700)), 1).astype(np.float32))}  # tied gains too
    kw = dict(relevance=rel, graded=graded, block_bytes=1 << 16, k=(1, 5, 10, 50), i2t_recall="fraction")
    _same(evaluate(EmbeddingSource(img, txt), c2i, **kw), evaluate(EmbeddingSource(img, txt), c2i, score_block=block,
                                                                   **kw))


@pytest.mark.parametrize("block", ["1x256", "4x1000"])
def test_one_row_query_blocks_cut_into_shards(block):
    img, txt, c2i = gallery(3_000, 301, seed=3)
    kw = dict(block_bytes=4 * 3_000 * 2)  # t2i: query blocks of 2 rows, the last one of 1 (a matrix-vector product)
    _same(evaluate(EmbeddingSource(img, txt), c2i, **kw), evaluate(EmbeddingSource(img, txt), c2i, score_block=block,
                                                                   **kw))


def test_shards_are_aligned_bounded_and_cover_the_gallery():
    for n, cols in ((200_000, 30_000), (1_000, 256), (257, 256), (100, 4096), (65_537, 1_000)):
        shards = column_shards(0, n, cols)
        assert shards[0][0] == 0 and shards[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(shards, shards[1:]))
        assert all(c1 - c0 <= cols and c0 % ALIGN == 0 for c0, c1 in shards)
        assert len(shards) == 1 or min(c1 - c0 for c0, c1 in shards) >= ALIGN


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
