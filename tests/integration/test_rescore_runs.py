"""`vlbench rescore RUN --as SUITE` re-scores a finished run's cached embeddings under other
suites' published definitions (recomputed here independently), loads no model and does not import torch."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from support.data import ROOT, excerpt_rows, write_images
from vlbench.errors import VlbenchError
from vlbench.rescore import load_embeddings, rescore, score_suite
from vlbench.rescore.suites import mmeb_candidates


@pytest.fixture(scope="module")
def finished(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("rescore")
    rows = excerpt_rows(12)
    names = write_images(root / "data" / "images", len(rows))
    man = root / "data" / "manifest.jsonl"
    man.write_text("".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n"
                           for n, r in zip(names, rows)))
    from vlbench.cli import main

    spec = f"clip:{tiny_models('clip')}"
    assert main(["run", "--model", spec, "--dataset", f"custom:{man}", "--perturb", "char-swap", "--perturb-images",
                 "gaussian_noise:2", "--quiet", "--num-workers", "0", "--cache-dir", str(root / "cache"),
                 "--out", str(root / "run")]) == 0
    return {"run": root / "run", "cache": root / "cache", "spec": spec, "images": root / "data" / "images",
            "names": names, "captions": [c for r in rows for c in r["captions"]]}


def _sims(finished):
    meta, emb = load_embeddings(finished["run"])
    return meta, {c: (img @ txt.T).astype(np.float64) for c, (img, txt) in emb.items()}


def test_embeddings_come_back_from_the_cache_in_run_order(finished):
    from vlbench.encoding.session import EncodingSession

    meta, emb = load_embeddings(finished["run"])
    assert [c["name"] for c in meta["conditions"]] == ["clean", "char-swap", "img:gaussian_noise:2"]
    session = EncodingSession.open(finished["spec"], cache_dir=finished["cache"])
    paths = [finished["images"] / n for n in finished["names"]]
    img = session.images(paths, num_workers=0, progress=False)
    txt = session.texts(finished["captions"], progress=False)
    np.testing.assert_array_equal(emb["clean"][0], np.stack([img[i] for i in range(12)]))
    np.testing.assert_array_equal(emb["clean"][1], np.stack([txt[j] for j in range(60)]))
    assert session.stats.images_encoded == 0 and session.stats.texts_encoded == 0  # all from the cache
    assert not np.array_equal(emb["img:gaussian_noise:2"][0], emb["clean"][0])
    np.testing.assert_array_equal(emb["img:gaussian_noise:2"][1], emb["clean"][1])
    assert not np.array_equal(emb["char-swap"][1], emb["clean"][1])


def _positive_pairs(n_images: int) -> np.ndarray:
    """(captions x images) booleans: caption j belongs to image j // 5 (5 captions per image, in order)."""
    c2i = np.repeat(np.arange(n_images), 5)
    return c2i[:, None] == np.arange(n_images)[None, :]


def _clip_benchmark(scores: np.ndarray, positive_pairs: np.ndarray, k: int) -> float:
    # CLIP_benchmark clip_benchmark/metrics/zeroshot_retrieval.py (commit 48de38c), checked verbatim:
    #   recall_at_k: topk_indices = torch.topk(scores, k, dim=1)[1]; nb_positive = positive_pairs.sum(dim=1)
    #                nb_true_positive = (topk_indices_onehot * positive_pairs_reshaped).sum(dim=(1,2))
    #                recall_at_k = (nb_true_positive / nb_positive)
    #   metrics[f"image_retrieval_recall@{recall_k}"] = (batchify(recall_at_k, scores, positive_pairs, ...)>0)
    #                                                   .float().mean().item()
    #   text_retrieval_recall uses scores.T, positive_pairs.T; scores = texts_emb @ images_emb.t()
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    nb_true_positive = np.take_along_axis(positive_pairs, top, axis=1).sum(axis=1)
    return float(((nb_true_positive / positive_pairs.sum(axis=1)) > 0).mean())


def test_clip_benchmark_equals_its_code_formula(finished):
    _, sims = _sims(finished)
    pp = _positive_pairs(12)
    docs = rescore(finished["run"], ["clip_benchmark"])
    got = {(r["condition"], r["metric"]): r["value"] for r in docs["clip_benchmark"]["results"]}
    for cond, sim in sims.items():
        for k in (1, 5, 10):
            assert got[(cond, f"image_retrieval_recall@{k}")] == pytest.approx(_clip_benchmark(sim.T, pp, k))
            assert got[(cond, f"text_retrieval_recall@{k}")] == pytest.approx(_clip_benchmark(sim, pp.T, k))
    # CLIP_benchmark's recall is vlbench's hit recall: the run's own numbers, in percent
    res = json.loads((finished["run"] / "results.json").read_text())
    for r in res["results"]:
        if r["metric"] == "recall" and r["direction"] in ("i2t", "t2i"):
            name = ("image_retrieval_recall@{}" if r["direction"] == "t2i" else "text_retrieval_recall@{}")
            assert 100 * got[(r["condition"], name.format(r["k"]))] == pytest.approx(r["value"])


def test_mieb_fraction_recall_and_ndcg(finished):
    _, sims = _sims(finished)
    pp = _positive_pairs(12)
    got = {(r["condition"], r["direction"], r["metric"]): r["value"]
           for r in rescore(finished["run"], ["mieb"])["mieb"]["results"]}
    for cond, sim in sims.items():
        for d, scores, rel in (("t2i", sim.T, pp), ("i2t", sim, pp.T)):
            order = np.argsort(-scores, axis=1, kind="stable")
            hits = np.take_along_axis(rel, order, axis=1)  # relevance in rank order
            for k in (1, 5, 10):  # pytrec_eval recall.k: relevant retrieved in the top k / relevant
                assert got[(cond, d, f"recall_at_{k}")] == pytest.approx(np.mean(hits[:, :k].sum(1) / rel.sum(1)))
            gains = 1 / np.log2(np.arange(1, 11) + 1)  # trec_eval ndcg_cut.10, binary gains
            dcg = (hits[:, :10] * gains).sum(1)
            idcg = np.array([gains[:min(n, 10)].sum() for n in rel.sum(1)])
            assert got[(cond, d, "ndcg_at_10")] == pytest.approx(np.mean(dcg / idcg))
    assert got[("clean", "i2t", "recall_at_1")] <= 0.2  # one caption of five at most per image


def test_mmeb_precision_at_1_over_sampled_candidates(finished):
    meta, sims = _sims(finished)
    got = {(r["condition"], r["direction"]): r["value"]
           for r in rescore(finished["run"], ["mmeb"], seed=7)["mmeb"]["results"]}
    c2i = np.repeat(np.arange(12), 5)
    for cond, sim in sims.items():
        t2i = mmeb_candidates(12, {j: [int(c2i[j])] for j in range(60)}, 7)
        i2t = mmeb_candidates(60, {i: list(range(5 * i, 5 * i + 5)) for i in range(12)}, 8)
        for d, cands, scores in (("t2i", t2i, sim.T), ("i2t", i2t, sim)):
            wins = []
            for q, (p, neg) in cands.items():
                ids = np.sort(np.concatenate([[p], neg]))  # the candidate list in gallery order
                wins.append(ids[np.argmax(scores[q, ids])] == p)  # argmax: first of equal scores
            assert got[(cond, d)] == pytest.approx(np.mean(wins))
    # the lists: every non-positive when the gallery is small, no positive among the negatives
    assert all(len(neg) == 11 and p not in neg for p, neg in t2i.values())
    assert all(sorted(neg.tolist()) == [j for j in range(60) if j // 5 != i] for i, (p, neg) in i2t.items())
    big = mmeb_candidates(5000, {0: [3], 1: [4999]}, 0)
    assert all(len(n) == 999 and len(set(n.tolist())) == 999 and p not in n for p, n in big.values())
    again = mmeb_candidates(5000, {0: [3], 1: [4999]}, 0)
    assert all(np.array_equal(big[q][1], again[q][1]) for q in big)


def test_eccv_uses_the_official_definitions_hand_worked():
    # 2 images x 3 captions; ECCV positives: image 10 -> captions 100, 102; caption 101 -> image 11
    sim_img = np.eye(2, dtype=np.float32)
    txt = np.array([[0.6, 0.8], [0.8, 0.6], [1.0, 0.0]], dtype=np.float32)  # sims: img0 .6 .8 1.0; img1 .8 .6 0
    off = {"kind": "eccv", "image_ids": [10, 11], "caption_ids": [100, 101, 102],
           "gt": {"i2t": {"10": [100, 102]}, "t2i": {"101": [11]}}}
    gt = {"caption_to_image": [0, 1, 0], "n_gallery": 2, "folds": None, "official": off}
    got = {(d, m): v for d, m, k, v in score_suite("eccv", gt, sim_img, txt)}
    # i2t image 10 ranks 102 (1.0), 101 (.8), 100 (.6): R = 2, top 2 = [102, 101] -> P@1 = 1, rel(2) = 0
    assert got[("i2t", "eccv_map_at_r")] == pytest.approx(50.0)  # (1/2) * (1 * 1 + 0)
    assert got[("i2t", "eccv_r_precision")] == pytest.approx(50.0)
    assert got[("i2t", "eccv_r1")] == pytest.approx(100.0)
    # t2i caption 101 ranks image 10 (.8) before 11 (.6): R = 1, miss
    assert got[("t2i", "eccv_map_at_r")] == 0 and got[("t2i", "eccv_r1")] == 0


def test_eccv_without_official_ground_truth_is_refused(finished):
    with pytest.raises(VlbenchError) as e:
        rescore(finished["run"], ["eccv"])
    assert "--extra-positives eccv" in e.value.hint and "does not hold" in e.value.message


def test_cli_loads_no_model_and_no_torch_and_keeps_results_json(finished, tmp_path):
    run = finished["run"]
    before = hashlib.sha256((run / "results.json").read_bytes()).hexdigest()
    code = ("import sys\nfrom vlbench.cli import main\n"
            f"rc = main(['rescore', {str(run)!r}, '--as', 'clip_benchmark', '--as', 'mieb', '--as', 'mmeb'])\n"
            "bad = [m for m in ('torch', 'transformers', 'open_clip') if m in sys.modules]\n"
            "print('RC', rc, 'LOADED', bad)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "RC 0 LOADED []" in out.stdout, out.stdout + out.stderr
    assert "image_retrieval_recall@5" in out.stdout and "ndcg_at_10" in out.stdout
    doc = json.loads((run / "rescore" / "mieb.json").read_text())
    assert doc["suite"] == "mieb" and "pytrec_eval" in doc["reference"] and doc["results"]
    assert hashlib.sha256((run / "results.json").read_bytes()).hexdigest() == before


def test_old_run_without_the_index_says_to_rerun(finished, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(finished["run"], old)
    (old / "embedding_keys.npz").unlink()
    with pytest.raises(VlbenchError) as e:
        rescore(old, ["clip_benchmark"])
    assert "embedding_keys.npz" in e.value.message and "re-run" in e.value.hint
    from vlbench.cli import main

    assert main(["rescore", str(old), "--as", "clip_benchmark"]) == 2


def test_cleared_cache_is_named(finished, tmp_path):
    with pytest.raises(VlbenchError) as e:
        rescore(finished["run"], ["mieb"], cache_dir=str(tmp_path))
    assert "not in the embedding cache" in e.value.message and "--cache-dir" in e.value.hint


def test_condition_filter_and_unknown_condition(finished):
    docs = rescore(finished["run"], ["clip_benchmark"], conditions=["char-swap"], write=False)
    assert {r["condition"] for r in docs["clip_benchmark"]["results"]} == {"char-swap"}
    with pytest.raises(VlbenchError) as e:
        rescore(finished["run"], ["clip_benchmark"], conditions=["nope"])
    assert "'nope'" in e.value.message and "clean" in e.value.hint


def test_a_suite_registered_in_a_test_file_rescores_a_run(finished, tmp_path):
    """A rescore suite is one registered record; a new one (here, in this file) is scored and
    written by the kernel with no other module edited. Its numbers, by hand: the t2i hit@1 (the caption's
    image ranks first, ties to the lower index) from the same embeddings."""
    import shutil

    from vlbench.rescore import Suite, per_fold, register_suite, unregister_suite

    def top1(sim, pos, seed):
        hits = [float(np.argmax(sim[:, j]) == pos["t2i"][j][0]) for j in range(sim.shape[1])]
        return [("t2i", "top1", 1, float(np.mean(hits)))]

    suite = register_suite(Suite("top1", "t2i hit@1; fractions", "a test", "argmax: lower index", per_fold(top1)))
    run = tmp_path / "run"
    shutil.copytree(finished["run"], run)
    try:
        docs = rescore(run, ["top1"], conditions=["clean"])
        doc = json.loads((run / "rescore" / "top1.json").read_text())
        assert doc == docs["top1"] and doc["convention"] == "t2i hit@1; fractions" and doc["seed"] is None
        _, sims = _sims(finished)
        c2i = np.repeat(np.arange(12), 5)
        want = float(np.mean(np.argmax(sims["clean"], axis=0) == c2i))
        assert doc["results"] == [{"condition": "clean", "direction": "t2i", "metric": "top1", "k": 1,
                                   "value": pytest.approx(want), "value_percent": pytest.approx(100 * want)}]
    finally:
        unregister_suite("top1")
