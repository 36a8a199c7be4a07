"""`vlbench run --model DUAL --rerank PAIR_SCORER --rerank-k K` against an independent recomputation: the first stage
from the tiny CLIP's vectors in float64, each pair scored by the tiny BLIP ITM model's own forward as its model card
calls it (processor(images=, text=), ``use_itm_head=True``, softmax, index 1), one pair per call, the final ranking
by the stated rule (the top K by descending pair score, equal scores in first-stage order, then the rest in
first-stage order), ranks and Recall@k from their definitions. The recomputation runs in float64 and one pair at a
time, the run in float32 and batched (up to ~1e-6 apart), so each comparison first checks that the data has no
near tie that such a difference could turn (a real tie, e.g. two captions the tiny tokenizer reads alike, is a
tie in both and follows the tie rule)."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.data import write_manifest
from support.tiny_pair_models import save_blip_itm

from vlbench.cli import main
from vlbench.datasets.core import load_dataset
from vlbench.encoding.encode import file_key, load_image
from vlbench.imageperturb import corrupt, fit_to_input
from vlbench.models.adapter import load_model
from vlbench.models.pairs import load_pair_scorer

NEAR = 1e-5  # relatively closer than this (and not equal) the float32 run and the float64 loop could order two apart


def _near(values) -> bool:
    """Two values that differ by less than NEAR of their size (a probability's float32 error is relative)."""
    v = np.asarray(values, dtype=np.float64)
    diff = np.abs(v[:, None] - v[None, :])
    return bool(((diff > 0) & (diff < NEAR * np.maximum(np.abs(v[:, None]), np.abs(v[None, :])))).any())


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("rerank")
    blip = save_blip_itm(root / "blip-itm")
    man = write_manifest(root / "data", 6)  # 6 images, 30 captions: every pair through the model card in seconds
    return {"clip": f"clip:{tiny_models('clip')}", "blip": blip, "manifest": man, "ds": load_dataset(f"custom:{man}")}


def _run(setup, out, k, *extra):
    args = ["run", "--model", setup["clip"], "--dataset", f"custom:{setup['manifest']}", "--rerank",
            f"blip-itm:{setup['blip']}", "--rerank-k", str(k), "--out", str(out), "--quiet", "--num-workers", "0",
            "--bootstrap", "50", "--validity", "off", *extra]
    assert main(args) == 0
    return json.loads((out / "results.json").read_text())


def _stage_one(spec, images, captions) -> np.ndarray:
    """(images, captions) cosine similarities of the dual encoder, float64."""
    model = load_model(spec, device="cpu")
    img = np.asarray(model.encode_images(torch.stack([model.preprocess(im) for im in images])).float(), np.float64)
    txt = np.asarray(model.encode_texts(list(captions)).float(), np.float64)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img @ txt.T


def _pair_matrix(folder, images, captions) -> np.ndarray:
    """p(match) of every (image, caption), one model-card forward per pair."""
    model = transformers.BlipForImageTextRetrieval.from_pretrained(folder).eval()
    proc = transformers.AutoProcessor.from_pretrained(folder)
    out = np.zeros((len(images), len(captions)))
    with torch.no_grad():
        for i, im in enumerate(images):
            for j, text in enumerate(captions):
                inputs = proc(images=im, text=text, return_tensors="pt", truncation=True, max_length=40)
                out[i, j] = float(torch.softmax(model(**inputs, use_itm_head=True).itm_score, dim=1)[0, 1])
    return out


def _final_ranks(sim: np.ndarray, pair: np.ndarray, c2i: np.ndarray, k: int) -> dict:
    """Per direction: each query's best positive's 1-based rank in the final ranking (the rule, by hand)."""
    out = {}
    for d, s, p in (("i2t", sim, pair), ("t2i", sim.T, pair.T)):
        ranks = []
        for q in range(len(s)):
            first = sorted(range(s.shape[1]), key=lambda c: (-s[q, c], c))  # score desc, index asc
            kk = min(k, len(first))
            head, rest = first[:kk], first[kk:]
            gaps = np.abs(np.diff(s[q, first[:kk + 1]]))
            assert ((gaps == 0) | (gaps > NEAR)).all(), "a near tie in the first stage"
            ps = np.array([p[q, c] for c in head])
            assert not _near(ps), "a near tie among the pair scores"
            final = sorted(range(kk), key=lambda j: (-ps[j], j))
            order = [head[j] for j in final] + rest
            positive = (lambda c, q=q: c2i[c] == q) if d == "i2t" else (lambda c, q=q: c == c2i[q])
            ranks.append(1 + next(r for r, c in enumerate(order) if positive(c)))
        out[d] = np.array(ranks)
    return out


def _per_query(out, condition) -> dict:
    with gzip.open(out / "per_query.csv.gz", "rt") as fh:
        rows = [r for r in csv.DictReader(fh) if r["condition"] == condition]
    return {d: np.array([int(r["best_rank"]) for r in rows if r["direction"] == d]) for d in ("i2t", "t2i")}


def _values(doc, condition, records=None) -> dict:
    return {(r["direction"], r["metric"], r["k"]): r["value"] for r in (records or doc["rerank"]["results"])
            if r["condition"] == condition}


@pytest.fixture(scope="module")
def clean(setup):
    ds = setup["ds"]
    images = [Image.open(ds.image_path(i)).convert("RGB") for i in range(ds.n_images)]
    return {"sim": _stage_one(setup["clip"], images, ds.captions), "pair": _pair_matrix(setup["blip"], images,
                                                                                        ds.captions)}


def test_reranked_metrics_equal_a_model_card_loop(setup, clean, tmp_path):
    doc = _run(setup, tmp_path / "r", 4)
    c2i = np.asarray(setup["ds"].caption_to_image)
    want = _final_ranks(clean["sim"], clean["pair"], c2i, 4)
    got = _per_query(tmp_path / "r", "rerank:clean")
    for d in ("i2t", "t2i"):
        np.testing.assert_array_equal(got[d], want[d])
        values = _values(doc, "clean")
        for k in (1, 5, 10):
            assert values[(d, "recall", k)] == pytest.approx(np.mean(want[d] <= k) * 100, abs=1e-9)
        assert values[(d, "medr", None)] == pytest.approx(float(np.median(want[d])))
        first = _stage_one_ranks(clean["sim"], c2i)[d]
        ceiling = {c["direction"]: c["value"] for c in doc["rerank"]["ceiling"] if c["condition"] == "clean"}
        assert ceiling[d] == pytest.approx(np.mean(first <= 4) * 100)
    stage_one = _values(doc, "clean", doc["results"])
    gain = {g["direction"]: g for g in doc["rerank"]["gain"] if g["condition"] == "clean"}
    rsum = {d: sum(_values(doc, "clean")[(d, "recall", k)] - stage_one[(d, "recall", k)] for k in (1, 5, 10))
            for d in ("i2t", "t2i")}
    assert gain["t2i"]["delta"] == pytest.approx(rsum["t2i"]) and gain["i2t"]["delta"] == pytest.approx(rsum["i2t"])
    assert gain["both"]["ci_low"] <= gain["both"]["delta"] <= gain["both"]["ci_high"]
    assert doc["rerank"]["k"] == 4 and doc["rerank"]["pair_scorer"]["name"] == "blip-itm"
    assert doc["timings"]["pairs"]["pairs"] == (6 + 30) * 4  # K x queries, both directions


def _stage_one_ranks(sim, c2i) -> dict:
    return _final_ranks(sim, np.zeros_like(sim), c2i, 1)  # K = 1: the first stage's own ranking


def test_k_gallery_is_the_pair_models_full_ranking_and_k_one_is_stage_one(setup, clean, tmp_path):
    ds, c2i = setup["ds"], np.asarray(setup["ds"].caption_to_image)
    full = _run(setup, tmp_path / "full", ds.n_captions)
    assert full["rerank"]["k_by_direction"] == {"i2t": ds.n_captions, "t2i": ds.n_images}
    # the pair model's full ranking: every candidate by descending pair score, equal scores by first-stage rank
    want = _final_ranks(clean["sim"], clean["pair"], c2i, ds.n_captions)
    by_pairs = {d: np.array([1 + min(int(np.sum(p[q] > p[q, c])) for c in pos(q)) for q in range(len(p))])
                for d, p, pos in (("i2t", clean["pair"], lambda q: np.flatnonzero(c2i == q)),
                                  ("t2i", clean["pair"].T, lambda q: [c2i[q]]))}
    got = _per_query(tmp_path / "full", "rerank:clean")
    for d in ("i2t", "t2i"):
        np.testing.assert_array_equal(got[d], want[d])
        assert (got[d] >= by_pairs[d]).all()  # ties (captions read alike) may only push a positive down
    one = _run(setup, tmp_path / "one", 1)
    assert _values(one, "clean") == _values(one, "clean", one["results"])
    first = _per_query(tmp_path / "one", "clean")
    got = _per_query(tmp_path / "one", "rerank:clean")
    for d in ("i2t", "t2i"):
        np.testing.assert_array_equal(got[d], first[d])


def test_flips_under_a_caption_perturbation_and_a_corruption_recounted_from_per_query(setup, clean, tmp_path):
    ds, c2i, out = setup["ds"], np.asarray(setup["ds"].caption_to_image), tmp_path / "p"
    doc = _run(setup, out, 4, "--perturb", "char-swap", "--perturb-images", "gaussian_noise:3", "--cache-dir",
               str(tmp_path / "cache"))
    audit = [json.loads(line) for line in (out / "validity_audit.jsonl").read_text().splitlines()]
    swapped = dict(zip(ds.caption_ids, ds.captions)) | {a["caption_id"]: a["perturbed"] for a in audit}
    texts = [swapped[c] for c in ds.caption_ids]
    images = [Image.open(ds.image_path(i)).convert("RGB") for i in range(ds.n_images)]
    noisy = [corrupt(fit_to_input(load_image(ds.image_path(i)), 32), "gaussian_noise", 3, 0,
                     file_key(ds.image_path(i))) for i in range(ds.n_images)]
    swap_sim = _stage_one(setup["clip"], images, texts)
    want = {"char-swap": _final_ranks(swap_sim, _pair_matrix(setup["blip"], images, texts), c2i, 4),
            "img:gaussian_noise:3": _final_ranks(_stage_one(setup["clip"], noisy, ds.captions),
                                                 _pair_matrix(setup["blip"], noisy, ds.captions), c2i, 4)}
    base = _final_ranks(clean["sim"], clean["pair"], c2i, 4)
    before = _per_query(out, "rerank:clean")
    for cond, ranks in want.items():
        after = _per_query(out, f"rerank:{cond}")
        for d in ("i2t", "t2i"):
            np.testing.assert_array_equal(after[d], ranks[d])
            lost = int(np.sum((before[d] == 1) & (after[d] > 1)))  # hit -> miss at R@1, from the per-query file
            gained = int(np.sum((before[d] > 1) & (after[d] == 1)))
            assert (lost, gained) == (int(np.sum((base[d] == 1) & (ranks[d] > 1))),
                                      int(np.sum((base[d] > 1) & (ranks[d] == 1))))
            r1 = _values(doc, cond)[(d, "recall", 1)] - _values(doc, "clean")[(d, "recall", 1)]
            assert r1 == pytest.approx((gained - lost) / len(before[d]) * 100)
    # retrieved.npz holds the final rankings too, and explain shows both stages' top 5 of every query it shows
    z = np.load(out / "retrieved.npz")
    for cond in ("clean", "char-swap"):
        for d in ("i2t", "t2i"):
            np.testing.assert_array_equal(z[f"rerank:{cond}|{d}|rank"], _per_query(out, f"rerank:{cond}")[d])
    assert main(["explain", str(out), "--out", str(tmp_path / "x.html")]) == 0
    page = (tmp_path / "x.html").read_text()
    shown = page.count('data-list="clean"')
    assert shown > 0 and page.count('data-list="clean, reranked"') == shown
    assert page.count('data-list="char-swap, reranked"') + page.count('data-list="img:gaussian_noise:3, reranked"') \
        == shown
    # each image once per condition that has pairs to score: clean's all, char-swap's those met with a changed
    # caption (its other pairs are clean's, scored already), the corrupted ones all (another image content)
    scorer = load_pair_scorer(f"blip-itm:{setup['blip']}")
    changed = _pair_set(scorer, swap_sim, texts, c2i, 4) - _pair_set(scorer, clean["sim"], ds.captions, c2i, 4)
    assert doc["timings"]["pairs"]["images_encoded"] == 2 * ds.n_images + len({i for i, _ in changed})


def _pair_set(scorer, sim, texts, c2i, k) -> set:
    """The distinct (image, caption key) pairs a condition's heads hold (both directions)."""
    keys = scorer.text_keys(texts)
    out = set()
    for q in range(sim.shape[0]):
        out |= {(q, keys[c]) for c in sorted(range(sim.shape[1]), key=lambda c: (-sim[q, c], c))[:k]}
    for q in range(sim.shape[1]):
        out |= {(i, keys[q]) for i in sorted(range(sim.shape[0]), key=lambda i: (-sim[i, q], i))[:k]}
    return out


def test_pair_cache_rescores_only_the_changed_captions(setup, clean, tmp_path):
    ds, c2i, cache = setup["ds"], np.asarray(setup["ds"].caption_to_image), str(tmp_path / "cache")
    scorer = load_pair_scorer(f"blip-itm:{setup['blip']}")
    first = _run(setup, tmp_path / "a", 4, "--cache-dir", cache)["timings"]["pairs"]
    clean_pairs = _pair_set(scorer, clean["sim"], ds.captions, c2i, 4)
    assert (first["scored"], first["cached"]) == (len(clean_pairs), 0)
    doc = _run(setup, tmp_path / "b", 4, "--cache-dir", cache, "--perturb", "char-swap")
    audit = [json.loads(line) for line in (tmp_path / "b" / "validity_audit.jsonl").read_text().splitlines()]
    swapped = dict(zip(ds.caption_ids, ds.captions)) | {a["caption_id"]: a["perturbed"] for a in audit}
    texts = [swapped[c] for c in ds.caption_ids]
    images = [Image.open(ds.image_path(i)).convert("RGB") for i in range(ds.n_images)]
    swap_pairs = _pair_set(scorer, _stage_one(setup["clip"], images, texts), texts, c2i, 4)
    second = doc["timings"]["pairs"]
    assert second["scored"] == len(swap_pairs - clean_pairs) > 0  # only the pairs whose caption changed
    assert second["cached"] == len(clean_pairs) + len(swap_pairs & clean_pairs)
    assert second["images_encoded"] > 0
    warm = _run(setup, tmp_path / "c", 4, "--cache-dir", cache, "--perturb", "char-swap")
    assert warm["timings"]["pairs"]["scored"] == 0 and warm["timings"]["pairs"]["images_encoded"] == 0
    assert warm["rerank"]["results"] == doc["rerank"]["results"]
    cold = _run(setup, tmp_path / "d", 4, "--cache-dir", cache, "--perturb", "char-swap", "--restart")
    assert cold["timings"]["pairs"]["cached"] == 0 and cold["rerank"]["results"] == doc["rerank"]["results"]
    # a leaderboard: the two-stage run's final ranking is an entry of its own beside the plain model's
    _board_of_a_reranked_and_a_plain_run(setup, tmp_path, tmp_path / "b", doc)


def _board_of_a_reranked_and_a_plain_run(setup, tmp_path, reranked, doc):
    """The final ranking's entry holds results.json rerank.results (the per-query rerank:<condition> rows behind its
    interval and rank group), the plain model's entry the plain run's values; both named by their stages."""
    from vlbench.leaderboards.build import build_leaderboard

    plain = tmp_path / "plain"
    assert main(["run", "--model", setup["clip"], "--dataset", f"custom:{setup['manifest']}", "--out", str(plain),
                 "--quiet", "--num-workers", "0", "--bootstrap", "20", "--validity", "off", "--perturb",
                 "char-swap"]) == 0
    board = tmp_path / "board"
    build_leaderboard([str(reranked), str(plain)], str(board), plots=False)
    runs = json.loads((board / "build_manifest.json").read_text())["runs"]
    assert sorted(r.get("stages", "dual") for r in runs) == ["dual", "dual + blip-itm@K4"]
    with open(board / "clean_retrieval.csv", newline="") as fh:
        clean = {r["stages"]: r for r in csv.DictReader(fh)}
    final, first = _values(doc, "clean"), _values(json.loads((plain / "results.json").read_text()), "clean",
                                                 json.loads((plain / "results.json").read_text())["results"])
    for d in ("i2t", "t2i"):
        for k in (1, 5, 10):
            assert float(clean["dual + blip-itm@K4"][f"{d}_recall@{k}"]) == pytest.approx(final[(d, "recall", k)])
            assert float(clean["dual"][f"{d}_recall@{k}"]) == pytest.approx(first[(d, "recall", k)])
    with open(board / "robustness_summary.csv", newline="") as fh:
        summary = {r["model"]: r for r in csv.DictReader(fh)}
    two = summary[clean["dual + blip-itm@K4"]["model"]]
    assert float(two["typos"]) == pytest.approx(100 * _values(doc, "char-swap")[("both", "rsum", None)] /
                                                final[("both", "rsum", None)], abs=0.05)
    assert two["typos_ci_low"] != ""  # drawn from the per-query rerank:<condition> rows, checked against its values
    with open(board / "rsum_changes.csv", newline="") as fh:  # the final entry's change and the run's interval of it
        (change,) = [r for r in csv.DictReader(fh) if r["model"] == two["model"] and r["condition"] == "char-swap"
                     and r["direction"] == "both"]
    with gzip.open(reranked / "per_query.csv.gz", "rt") as fh:
        pq = [r for r in csv.DictReader(fh) if r["condition"] in ("rerank:clean", "rerank:char-swap")]
    per = {(r["condition"], r["direction"]): [] for r in pq}
    for r in pq:
        per[(r["condition"], r["direction"])].append(float(r["rsum"]))
    delta = sum(np.mean(per[("rerank:char-swap", d)]) - np.mean(per[("rerank:clean", d)]) for d in ("i2t", "t2i"))
    assert float(change["delta"]) == pytest.approx(delta, abs=1e-4)  # recomputed from the per-query file
    (boot,) = [b for b in doc["rerank"]["bootstrap"] if b["condition"] == "char-swap" and b["direction"] == "both"]
    assert float(change["ci_low"]) == pytest.approx(boot["ci_low"], abs=1e-6) and \
        float(change["ci_low"]) <= float(change["delta"]) <= float(change["ci_high"])
    with open(board / "flips.csv", newline="") as fh:  # the final entry's flips: the run's rerank:<condition> rows
        flips = {(r["model"], r["condition"]): r for r in csv.DictReader(fh)}
    with open(reranked / "flips.csv", newline="") as fh:
        own = [r for r in csv.DictReader(fh) if r["condition"] == "rerank:char-swap" and r["direction"] == "t2i"]
    row = flips[(two["model"], "char-swap")]
    first_k = min(own, key=lambda r: int(r["k"]))
    assert (row["t2i_hit_to_miss"], row["t2i_miss_to_hit"]) == (first_k["hit_to_miss"], first_k["miss_to_hit"])
    with open(board / "rank_groups.csv", newline="") as fh:  # both entries ranked on their own per-query values
        groups = {r["model"]: float(r["mean_clean_rsum"]) for r in csv.DictReader(fh)}
    assert groups[two["model"]] == pytest.approx(final[("both", "rsum", None)], abs=1e-4)
    _compare_stages(reranked, plain, doc)
    out = tmp_path / "mteb"  # vlbench export --format mteb: the final ranking, named by its stages
    assert main(["export", str(reranked), "--format", "mteb", "--out", str(out), "--model-name", "tiny"]) == 0
    (clean_t2i,) = [p for p in out.rglob("*T2IRetrieval.json") if "experiments" not in str(p)]
    assert clean_t2i.parts[-3] == "tiny_+_blip-itm_K4"
    got = json.loads(clean_t2i.read_text())["scores"]["test"][0]
    assert got["hit_rate_at_1"] == pytest.approx(final[("t2i", "recall", 1)] / 100)


def _compare_stages(reranked, plain, doc):
    """vlbench compare: a two-stage run is compared on its final ranking, RUN@first on its first stage; the
    differences recomputed from the per-query file's rows (rerank:clean vs clean) and equal to rerank.gain."""
    from vlbench.compare import compare_runs
    from vlbench.errors import VlbenchError

    def rsum(folder, cond):
        with gzip.open(folder / "per_query.csv.gz", "rt") as fh:
            rows = [r for r in csv.DictReader(fh) if r["condition"] == cond]
        return sum(np.mean([float(r["rsum"]) for r in rows if r["direction"] == d]) for d in ("i2t", "t2i"))

    def diff(a, b, cond="clean"):
        rec = compare_runs([str(a), str(b)], n_resamples=200, conditions=cond, directions="both")
        (row,) = [r for r in rec["rows"] if r["kind"] == "difference"]
        return row, rec

    gain = next(g["delta"] for g in doc["rerank"]["gain"] if g["condition"] == "clean" and g["direction"] == "both")
    row, rec = diff(reranked, plain)  # the final ranking against the plain model: the reranker's gain
    assert row["diff"] == pytest.approx(rsum(reranked, "rerank:clean") - rsum(plain, "clean"), abs=1e-4)
    assert row["diff"] == pytest.approx(gain, abs=1e-4)
    assert rec["runs"][0]["label"].endswith(" + blip-itm@K4") and rec["runs"][0]["run_id"].endswith("+blip-itm@K4")
    row, _ = diff(f"{reranked}@first", plain)  # its first stage is the plain model: the same per-query values
    assert row["diff"] == pytest.approx(0.0, abs=1e-9)
    row, _ = diff(f"{reranked}@first", reranked)  # a run against its own first stage
    assert row["diff"] == pytest.approx(-gain, abs=1e-4)
    row, _ = diff(reranked, plain, "char-swap")
    assert row["diff"] == pytest.approx(rsum(reranked, "rerank:char-swap") - rsum(plain, "char-swap"), abs=1e-4)
    with pytest.raises(VlbenchError, match="one-stage run"):
        compare_runs([str(reranked), f"{plain}@final"], n_resamples=200)
    with pytest.raises(VlbenchError, match="same run"):
        compare_runs([str(reranked), f"{reranked}@final"], n_resamples=200)


def test_the_evaluator_takes_a_pair_scorer_held_in_memory(setup, tiny_models, tmp_path):
    from vlbench.training import Evaluator

    folder = tiny_models("clip")
    evaluator = Evaluator(f"custom:{setup['manifest']}", rerank=load_pair_scorer(f"blip-itm:{setup['blip']}"),
                          rerank_k=4, num_workers=0, n_boot=50, no_cache=True, validity="off")
    got = evaluator(transformers.CLIPModel.from_pretrained(folder),
                    processor=transformers.AutoProcessor.from_pretrained(folder)).results
    doc = _run(setup, tmp_path / "r", 4)
    assert got["results"] == doc["results"]  # the same first stage
    assert got["rerank"]["results"] == doc["rerank"]["results"] and got["rerank"]["k"] == 4
