"""Flip analysis: flips.csv and retrieved.npz equal a hand count (3x3) and a numpy
recomputation from the embeddings of a small run; keeping the top-10 head moves no metric value."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from vlbench.metrics import compute as M
from vlbench.metrics.flips import flip_rows, retrieved_arrays, top_overlap

# images x captions, caption j belongs to image j
S_CLEAN = np.array([[0.9, 0.1, 0.2],
                    [0.3, 0.8, 0.1],
                    [0.2, 0.4, 0.7]])
S_PERT = np.array([[0.5, 0.6, 0.3],   # caption 0: images 0 and 1 tie at 0.5 -> image 0 (lower index) first
                   [0.5, 0.2, 0.6],   # caption 2: images 1 and 2 tie at 0.6 -> image 1 first, positive rank 2
                   [0.1, 0.3, 0.6]])


def _ev(sim):
    return M.evaluate(sim, [0, 1, 2], k=(1, 2))


def _rows(evals, ks=(1, 2)):
    rows, skipped = flip_rows(evals, ks)
    return {(r.condition, r.direction, r.k): r for r in rows}, skipped


def test_hand_worked_3x3():
    rows, skipped = _rows({"clean": [_ev(S_CLEAN)], "p": [_ev(S_PERT)]})
    assert not skipped and len(rows) == 4
    # t2i ranks: clean [1, 1, 1]; perturbed [1 (tie won by the lower index), 3, 2]; change [0, 2, 1]
    t1, t2 = rows[("p", "t2i", 1)], rows[("p", "t2i", 2)]
    assert (t1.n_queries, t1.hit_to_miss, t1.miss_to_hit) == (3, 2, 0)
    assert (t2.hit_to_miss, t2.miss_to_hit) == (1, 0)
    assert t1.rank_change_median == 1.0 and t1.rank_change_p90 == pytest.approx(1.8)  # [0,1,2]: 1 + 0.8 * 1
    assert t1.top10_overlap == 1.0  # a gallery of 3: every top list holds all three images
    # i2t ranks: clean [1, 1, 1]; perturbed rows: image 0 -> caption 1 first (rank 2), image 1 rank 3, image 2 rank 1
    i1, i2 = rows[("p", "i2t", 1)], rows[("p", "i2t", 2)]
    assert (i1.hit_to_miss, i1.miss_to_hit, i2.hit_to_miss) == (2, 0, 1)
    assert (i1.rank_change_median, i1.rank_change_p90, i1.top10_overlap) == (1.0, pytest.approx(1.8), None)
    assert i1.cells()[-1] == "" and t1.cells() == ["p", "t2i", "1", "3", "2", "0", "1", "1.8", "1"]
    # the other way round: misses become hits, ranks improve
    back, _ = _rows({"clean": [_ev(S_PERT)], "b": [_ev(S_CLEAN)]})
    b1 = back[("b", "t2i", 1)]
    assert (b1.hit_to_miss, b1.miss_to_hit, b1.rank_change_median) == (0, 2, -1.0)
    assert b1.rank_change_p90 == pytest.approx(-0.2)  # [-2,-1,0]: -1 + 0.8 * 1
    arr = retrieved_arrays({"clean": [_ev(S_CLEAN)], "p": [_ev(S_PERT)]})
    pad = [-1] * 7
    assert arr["clean|t2i"].tolist() == [[0, 1, 2] + pad, [1, 2, 0] + pad, [2, 0, 1] + pad]
    assert arr["p|t2i"].tolist() == [[0, 1, 2] + pad, [0, 2, 1] + pad, [1, 2, 0] + pad]
    assert arr["p|i2t"].tolist() == [[1, 0, 2] + pad, [2, 0, 1] + pad, [2, 1, 0] + pad]
    assert arr["p|t2i|rank"].tolist() == [1, 3, 2] and arr["p|i2t|rank"].tolist() == [2, 3, 1]
    assert arr["p|t2i"].dtype == np.int32 and arr["p|t2i|rank"].dtype == np.int32


def test_top_overlap_by_hand():
    a = np.array([[1, 2, 3, -1], [5, 6, 7, 8]])
    b = np.array([[3, 4, 1, -1], [8, 7, 6, 5]])
    assert top_overlap(a, b, width=4).tolist() == [0.5, 1.0]  # padding (-1) never counts


def test_folds_map_to_dataset_indices_and_misaligned_queries_are_skipped():
    folds = [np.array([3, 4, 5]), np.array([0, 1, 2])]
    caps = [np.array([6, 7, 8]), np.array([0, 1, 2])]
    evals = {"clean": [_ev(S_CLEAN), _ev(S_PERT)], "p": [_ev(S_PERT), _ev(S_CLEAN)]}
    arr = retrieved_arrays(evals, lambda f, d, ids: (folds[f] if d == "t2i" else caps[f])[ids])
    assert arr["clean|t2i"][:3, :3].tolist() == [[3, 4, 5], [4, 5, 3], [5, 3, 4]]
    assert arr["clean|t2i"][3:, :3].tolist() == [[0, 1, 2], [0, 2, 1], [1, 2, 0]]
    assert arr["p|i2t"][:3, :3].tolist() == [[7, 6, 8], [8, 6, 7], [8, 7, 6]]
    rows, _ = _rows(evals, ks=(1,))
    assert rows[("p", "t2i", 1)].n_queries == 6 and rows[("p", "t2i", 1)].hit_to_miss == 2
    assert rows[("p", "t2i", 1)].miss_to_hit == 2
    # a condition with other queries (another fold count) is not compared, and says why
    rows, skipped = _rows({"clean": [_ev(S_CLEAN)], "q": [_ev(S_PERT), _ev(S_PERT)]})
    assert not rows and "2 fold(s) against clean's 1" in skipped[("q", "t2i")]


def test_keeping_the_top10_head_moves_no_value(monkeypatch):
    """k=(1,), p=1, five positives per image: the metrics' head is 6 columns; the kept head of 10 changes
    no value bit for bit (the same records as with no head kept)."""
    rng = np.random.default_rng(3)
    img, txt = rng.normal(size=(8, 16)), rng.normal(size=(40, 16))
    txt[7] = txt[3]  # duplicate captions: a tie inside the head
    c2i = np.repeat(np.arange(8), 5)
    src = M.EmbeddingSource(img.astype(np.float32), txt.astype(np.float32))
    with_top = M.evaluate(src, c2i, k=(1,), p=1)
    monkeypatch.setattr(M, "TOP_KEEP", 0)
    without = M.evaluate(src, c2i, k=(1,), p=1)
    assert with_top.records() == without.records()
    for d in ("i2t", "t2i"):
        a, b = with_top.per_query(d), without.per_query(d)
        assert all(np.array_equal(a[c], b[c]) for c in a)
    assert with_top.t2i.top.shape == (40, 8) and without.t2i.top.shape == (40, 0)
    assert with_top.i2t.top.shape == (8, 10)


def _reference(img, txt, c2i, direction):
    """(ranks, top10) by numpy: float64 similarities, a stable sort of -similarity (lower index wins ties)."""
    img, txt = img.astype(np.float64), txt.astype(np.float64)
    if direction == "t2i":
        sim, pos = txt @ img.T, [[int(c2i[j])] for j in range(len(txt))]
    else:
        sim, pos = img @ txt.T, [list(np.flatnonzero(c2i == i)) for i in range(len(img))]
    order = np.argsort(-sim, axis=1, kind="stable")
    ranks = np.array([min(int(np.flatnonzero(order[q] == p)[0]) for p in pos[q]) + 1 for q in range(len(sim))])
    return ranks, order[:, :10]


@pytest.mark.slow  # a whole run of a tiny CLIP
def test_small_run_equals_numpy_recomputation(tiny_models, manifest, tmp_path, monkeypatch):
    import vlbench.pipeline.scoring as S
    from vlbench.pipeline.runner import run

    seen = {}
    original = S.score

    def spy(scoring, plan, enc, **kw):
        seen.update(plan=plan, enc=enc)
        return original(scoring, plan, enc, **kw)

    monkeypatch.setattr(S, "score", spy)
    res = run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{manifest}", out=str(tmp_path / "r"),
              perturb="nearby-char,shuffle-all-words", perturb_images="gaussian_noise:3", quiet=True, num_workers=0,
              n_boot=20, k=(1, 5, 10))
    plan, enc = seen["plan"], seen["enc"]
    c2i, n = np.asarray(plan.ds.caption_to_image), plan.ds.n_captions
    with open(res.out_dir / "flips.csv", newline="") as fh:
        got = {(r["condition"], r["direction"], int(r["k"])): r for r in csv.DictReader(fh)}
    saved = np.load(res.out_dir / "retrieved.npz")
    conds = [c.name for c in plan.conditions]
    assert len(conds) == 4 and len(got) == 3 * 2 * 3
    ref = {}
    for cond in conds:
        off = enc.offsets[cond]
        for d in ("i2t", "t2i"):
            ref[cond, d] = _reference(enc.variant_img.get(cond, enc.img_emb), enc.txt_emb[off:off + n], c2i, d)
            assert saved[f"{cond}|{d}|rank"].tolist() == ref[cond, d][0].tolist(), (cond, d)
            assert saved[f"{cond}|{d}"].tolist() == ref[cond, d][1].tolist(), (cond, d)
    moved = 0
    for cond in conds[1:]:
        for d in ("i2t", "t2i"):
            (r0, t0), (r1, t1) = ref["clean", d], ref[cond, d]
            change = r1 - r0
            moved += int(np.count_nonzero(change))
            for k in (1, 5, 10):
                row = got[cond, d, k]
                assert int(row["n_queries"]) == len(r0)
                assert int(row["hit_to_miss"]) == int(np.sum((r0 <= k) & (r1 > k)))
                assert int(row["miss_to_hit"]) == int(np.sum((r0 > k) & (r1 <= k)))
                assert float(row["rank_change_median"]) == pytest.approx(np.median(change), abs=1e-6)
                assert float(row["rank_change_p90"]) == pytest.approx(np.percentile(change, 90), abs=1e-5)
                if d == "t2i":
                    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(t0.tolist(), t1.tolist())])
                    assert float(row["top10_overlap"]) == pytest.approx(overlap, abs=1e-6)
                else:
                    assert row["top10_overlap"] == ""
    assert moved > 0  # the conditions do move ranks: the comparison is not vacuous


def test_folds_of_a_dataset_give_dataset_indices(manifest, tmp_path):
    """Folds that interleave images (not contiguous blocks): retrieved.npz rows hold dataset image / caption
    indices, fold by fold, equal to ranking each fold's gallery with numpy."""
    import dataclasses
    from types import SimpleNamespace

    from vlbench.datasets.core import load_dataset
    from vlbench.pipeline.report import write_flips
    from vlbench.pipeline.scoring import evaluate_folds

    ds = load_dataset(f"custom:{manifest}")
    folds = [np.arange(1, 12, 2), np.arange(0, 12, 2)]
    ds = dataclasses.replace(ds, folds=folds)
    rng = np.random.default_rng(5)
    img, txt = rng.normal(size=(12, 8)).astype(np.float32), rng.normal(size=(60, 8)).astype(np.float32)
    txt2 = txt + rng.normal(size=txt.shape).astype(np.float32)
    opts = SimpleNamespace(k=(1, 5), p=10, i2t_recall="hit")
    evals = {name: evaluate_folds(ds, img, t, opts, [{}, {}]) for name, t in (("clean", txt), ("p", txt2))}
    write_flips(tmp_path, ds, evals, (1, 5))
    z = np.load(tmp_path / "retrieved.npz")
    c2i = np.asarray(ds.caption_to_image)
    want_t2i, want_i2t = [], []
    for f in folds:
        caps = np.flatnonzero(np.isin(c2i, f))
        sim = txt2[caps].astype(np.float64) @ img[f].T.astype(np.float64)
        want_t2i += [list(f[row]) + [-1] * 4 for row in np.argsort(-sim, axis=1, kind="stable")]
        order = np.argsort(-sim.T, axis=1, kind="stable")[:, :10]
        want_i2t += [list(caps[row]) for row in order]
    assert z["p|t2i"].tolist() == want_t2i and z["p|i2t"].tolist() == want_i2t
    with open(tmp_path / "flips.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["direction"], r["k"], r["n_queries"]) for r in rows] == [("i2t", "1", "12"), ("i2t", "5", "12"),
                                                                        ("t2i", "1", "60"), ("t2i", "5", "60")]
    r0, r1 = z["clean|t2i|rank"], z["p|t2i|rank"]
    assert int(rows[2]["hit_to_miss"]) == int(np.sum((r0 <= 1) & (r1 > 1)))
