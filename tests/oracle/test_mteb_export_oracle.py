"""The MTEB export against MTEB itself (the installed ``mteb`` package: its task registry, its evaluator's score
names, its model metadata and its result loader), on synthetic records; a real run: tests/integration."""

from __future__ import annotations

import pytest
from support.export_records import record as _record
from support.tools import needs_package

from vlbench.export import mteb as M

pytestmark = needs_package("mteb", "mteb's own registry, evaluator and result loader are the oracle")


def test_exported_metric_names_are_mteb_retrieval_score_names(monkeypatch):
    from support.mteb_reference import mteb_score_names

    # the ranking metrics are looked up by name at export time; here they are given percent units
    monkeypatch.setattr(M, "_unit_scale", lambda name: 0.01)
    values = {("clean", "t2i", m, k): 50.0 for m in ("recall", *M.CUT_NAMES) for k in (1, 5, 10)}
    s = M.scores(_record(values), "clean", "t2i", one_positive=True)
    assert set(s) <= mteb_score_names()
    assert {"ndcg_at_10", "mrr_at_10", "map_at_5", "precision_at_1", "hit_rate_at_5", "recall_at_10"} <= set(s)


def test_main_score_is_the_main_score_of_mteb_image_text_retrieval_tasks():
    import mteb

    for name in M.MTEB_TASKS["flickr30k"][0].values():
        assert mteb.get_task(name).metadata.main_score == M.MAIN_SCORE


def test_flickr30k_karpathy_test_takes_mteb_task_names_and_other_sets_take_names_mteb_lacks():
    import mteb

    whole = _record({}, dataset="flickr30k", fields={"n_images": 1000, "n_captions": 5000})
    assert M.task_name(whole, "i2t") == "Flickr30kI2TRetrieval"
    for name in (M.task_name(whole, "i2t"), M.task_name(whole, "t2i")):
        assert mteb.get_task(name).metadata.name == name
    limited = _record({}, dataset="flickr30k", fields={"n_images": 100, "n_captions": 500},
                      settings={"limit": 100})
    others = [M.task_name(limited, "t2i"), M.task_name(_record({}, dataset="coco"), "i2t"),
              M.task_name(_record({}, dataset="custom:mini.jsonl"), "t2i")]
    assert others == ["VLBenchFlickr30kT2IRetrieval", "VLBenchCocoI2TRetrieval", "VLBenchCustomMiniJsonlT2IRetrieval"]
    known = set(mteb.get_tasks().names) if hasattr(mteb.get_tasks(), "names") else {
        t.metadata.name for t in mteb.get_tasks()}
    assert not set(others) & known


@pytest.mark.parametrize("condition", ["char-swap", "img:gaussian_noise:3", "a/b?c"])
def test_condition_folder_is_the_experiment_name_mteb_gives_its_kwargs(condition):
    from mteb.models.model_meta import ModelMeta

    rec = _record({}, conditions=("clean", condition))
    meta = ModelMeta.model_construct(**M.model_meta(rec, "org/model", condition))
    assert meta.experiment_name == M.experiment_folder(condition)


def test_mteb_loader_reads_every_condition_apart_and_the_default_load_only_clean(tmp_path):
    import mteb

    values = {}
    for j, cond in enumerate(("clean", "char-swap")):
        for d in ("i2t", "t2i"):
            for k in (1, 5, 10):
                values[(cond, d, "recall", k)] = 10.0 * k - j
    rec = _record(values, conditions=("clean", "char-swap"))
    (tmp_path / "run").mkdir()
    M.write(str(tmp_path / "run"), rec, str(tmp_path / "out"), "org/model")
    cache = mteb.ResultCache(tmp_path / "out")
    default = cache.load_results(include_remote=False)
    assert [(m.model_name, m.experiment_name) for m in default.model_results] == [("org/model", None)]
    every = cache.load_results(include_remote=False, load_experiments="match_name")
    got = {}
    for m in every.model_results:
        cond = "clean" if m.experiment_name is None else m.experiment_name.removeprefix("vlbench_condition_")
        for t in m.task_results:
            d = "i2t" if "I2T" in t.task_name else "t2i"
            for name, v in t.scores["test"][0].items():
                if name.startswith("hit_rate_at_"):
                    got[(cond, d, "recall", int(name.rsplit("_", 1)[1]))] = v
    assert got == {key: v / 100.0 for key, v in values.items()}


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_exported_scores_equal_mteb_evaluator_on_the_same_similarities(direction):
    """Every score the export writes equals what MTEB's own evaluator (pytrec_eval) computes on the same
    real-valued similarities (no ties), five captions per image: i2t has five positives per query, so MTEB's
    recall_at_k (a share of the positives) is not vlbench's Recall@k and must not be written for i2t."""
    import numpy as np
    from support.mteb_reference import mteb_retrieval_scores

    from vlbench.metrics.compute import evaluate

    rng = np.random.default_rng(7)
    sim = rng.standard_normal((8, 40))
    c2i = np.repeat(np.arange(8), 5)
    ev = evaluate(sim, c2i, k=(1, 5, 10), p=10)
    rec = _record({("clean", r["direction"], r["metric"], r["k"]): r["value"] for r in ev.records()
                   if r["direction"] in ("i2t", "t2i")})
    ours = M.scores(rec, "clean", direction, one_positive=direction == "t2i")
    theirs = mteb_retrieval_scores(sim, c2i, direction, (1, 5, 10))
    assert {"hit_rate_at_1", "hit_rate_at_5", "hit_rate_at_10"} <= set(ours)
    for name, value in ours.items():
        assert value == pytest.approx(theirs[name], abs=1e-5), name  # MTEB rounds its pytrec_eval means to 5 places
    if direction == "i2t":
        # at k=1 MTEB's recall finds one of five positives: a fifth of the hit rate, never the hit rate itself
        assert "recall_at_1" not in ours and theirs["recall_at_1"] == pytest.approx(theirs["hit_rate_at_1"] / 5)


def test_flickr30k_files_pass_mtebs_task_validation_and_their_main_score_reads_back(tmp_path, monkeypatch):
    """A whole-Flickr30k-test run exported under MTEB's task names: MTEB validates each file against its own task
    metadata (splits, subsets) and its get_score reads the main score, as its leaderboards do."""
    import mteb

    monkeypatch.setattr(M, "_unit_scale", lambda name: 0.01 if name != "ndcg_binary" else 1.0)
    values = {("clean", d, m, k): v for d, v in (("i2t", 70.0), ("t2i", 50.0)) for m in ("recall", "mrr")
              for k in (1, 5, 10)}
    values.update({("clean", "i2t", "ndcg_binary", 10): 0.71, ("clean", "t2i", "ndcg_binary", 10): 0.55})
    rec = _record(values, dataset="flickr30k", fields={"n_images": 1000, "n_captions": 5000})
    (tmp_path / "run").mkdir()
    M.write(str(tmp_path / "run"), rec, str(tmp_path / "out"), "org/model")
    loaded = mteb.ResultCache(tmp_path / "out").load_results(include_remote=False, validate_and_filter=True)
    [model] = loaded.model_results
    got = {t.task_name: t.get_score() for t in model.task_results}
    assert got == {"Flickr30kI2TRetrieval": 0.71, "Flickr30kT2IRetrieval": 0.55}
