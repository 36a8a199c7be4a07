"""The model-card export: the model-index (and the Hub's .eval_results file) parsed back with huggingface_hub's own
parsers gives the run's (condition, metric, value) triples; --push-to-hub opens a pull request on the local Hub
stand-in, with the token, and leaves the default branch as it was."""

from __future__ import annotations

import json

import pytest
import yaml
from support.synthetic_runs import synth_run

from vlbench.cli import main
from vlbench.export import modelindex
from vlbench.results import RunRecord


def _triples_of_results_json(run) -> set:
    """(condition, metric type, value) of every record of the run's results.json, read as plain JSON."""
    doc = json.loads((run / "results.json").read_text())
    return {(r["condition"], f"{r['direction']}_{r['metric']}" + ("" if r["k"] is None else f"@{r['k']}"), r["value"])
            for r in doc["results"] if r["value"] is not None}


@pytest.fixture
def run(tmp_path):
    return synth_run(tmp_path / "run", perturb=("char-swap", "shuffle-all-words"), corrupt=("gaussian_noise",),
                     severities=(2,))


def test_model_index_parses_back_into_the_runs_condition_metric_value_triples(run, tmp_path):
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import model_index_to_eval_results

    assert main(["export", str(run), "--format", "model-index", "--out", str(tmp_path / "card"),
                 "--model-name", "org/model", "--metrics", "all"]) == 0
    card = ModelCard.load(tmp_path / "card" / "README.md")
    name, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert name == "org/model"
    assert {(r.dataset_config, r.metric_type, r.metric_value) for r in results} == _triples_of_results_json(run)
    assert len(results) == len(_triples_of_results_json(run))  # no record twice
    assert {(r.task_type, r.dataset_type, r.dataset_split, r.dataset_revision) for r in results} == {
        ("image-text-retrieval", "custom:mini.jsonl", "test", "d" * 64)}
    conditions = {r.dataset_config for r in results}
    assert conditions == {"clean", "char-swap", "shuffle-all-words", "img:gaussian_noise:2"}


def test_eval_results_file_parses_with_huggingface_hub_into_the_same_triples(run, tmp_path):
    from huggingface_hub import parse_eval_result_entries

    main(["export", str(run), "--format", "model-index", "--out", str(tmp_path / "card"), "--metrics", "all"])
    path = tmp_path / "card" / ".eval_results" / "vlbench_custom_mini.jsonl.yaml"
    entries = parse_eval_result_entries(yaml.safe_load(path.read_text()))
    got = {(*e.task_id.split("/", 1), e.value) for e in entries}
    assert got == _triples_of_results_json(run)
    assert {(e.dataset_id, e.dataset_revision) for e in entries} == {("custom:mini.jsonl", "d" * 64)}


def test_an_existing_card_keeps_its_text_and_other_results(run):
    from huggingface_hub import ModelCard

    existing = ("---\nlicense: mit\nmodel-index:\n- name: org/model\n  results:\n  - task:\n      type: "
                "image-classification\n    dataset:\n      name: Beans\n      type: beans\n    metrics:\n    - type: "
                "accuracy\n      value: 0.9\n---\n\n# My model\n\nHand-written text.\n")
    card = ModelCard(str(modelindex.model_card(RunRecord.load(run), "org/model", existing, ("all",))))
    assert card.data.license == "mit" and "Hand-written text." in card.text
    kinds = {(r.dataset_type, r.metric_type) for r in card.data.eval_results}
    assert ("beans", "accuracy") in kinds and ("custom:mini.jsonl", "t2i_recall@1") in kinds


def test_push_to_hub_opens_a_pull_request_with_the_token_and_leaves_main_as_it_was(run, mirror, monkeypatch):
    from huggingface_hub import ModelCard, hf_hub_download

    readme = b"---\nlicense: mit\n---\n\n# org/model\n\nThe owner's text.\n"
    mirror.add_model_repo("org/model", {"README.md": readme, "config.json": b"{}"})
    before = dict(mirror.repos[("model", "org/model")].files)
    monkeypatch.setenv("HF_TOKEN", "hf_export_test_token")
    assert main(["export", str(run), "--format", "model-index", "--push-to-hub", "org/model", "--metrics", "all"]) == 0

    repo = mirror.repos[("model", "org/model")]
    assert repo.files == before  # nothing committed to main
    assert [(c.create_pr, c.pr_num) for c in mirror.commits] == [(True, 1)]
    commits = [r for r in mirror.log if r.method == "POST" and "/commit/" in r.path]
    assert len(commits) == 1 and "create_pr=1" in commits[0].query
    assert commits[0].headers.get("Authorization") == "Bearer hf_export_test_token"
    assert set(repo.prs[0].files) == {"README.md", ".eval_results/vlbench_custom_mini.jsonl.yaml"}
    # the pull request's card, read back from its ref through the Hub client: the owner's text and the results
    card = ModelCard.load(hf_hub_download("org/model", "README.md", revision="refs/pr/1"))
    assert "The owner's text." in card.text and card.data.license == "mit"
    assert {(r.dataset_config, r.metric_type, r.metric_value) for r in card.data.eval_results} == \
        _triples_of_results_json(run)


def test_push_to_hub_to_a_missing_repository_is_refused_by_name(run, mirror, capsys):
    assert main(["export", str(run), "--format", "model-index", "--push-to-hub", "org/missing"]) == 2
    assert "org/missing" in capsys.readouterr().err
    assert mirror.commits == []


@pytest.mark.parametrize("argv, option", [(["--format", "mteb", "--push-to-hub", "org/model", "--out", "x"],
                                           "--push-to-hub"),
                                          (["--format", "model-index"], "--out")])
def test_export_options_that_do_not_fit_are_refused_naming_the_option(run, argv, option, capsys):
    assert main(["export", str(run), *argv]) == 2
    assert option in capsys.readouterr().err


@pytest.mark.parametrize("dead", ["readme", "commit"])
def test_push_to_an_unreachable_hub_is_refused_without_opening_a_pull_request(run, mirror, monkeypatch, capsys, dead):
    # "readme": the repository's README.md cannot be read (the commit API would answer), so the card is unknown,
    # not absent, and no pull request may replace it with a new one; "commit": the commit API does not answer
    from huggingface_hub import constants

    mirror.add_model_repo("org/model", {"README.md": b"---\nlicense: mit\n---\n\n# The owner's card\n"})
    nowhere = "http://127.0.0.1:9"  # the discard port: nothing answers
    if dead == "readme":  # what huggingface_hub raises when the Hub does not answer for a file (after retries)
        from huggingface_hub import HfApi
        from huggingface_hub.errors import LocalEntryNotFoundError

        def unanswered(self, **kw):
            raise LocalEntryNotFoundError("the Hub did not answer and the file is not in the local cache")

        monkeypatch.setattr(HfApi, "hf_hub_download", unanswered)
    else:
        monkeypatch.setattr(constants, "ENDPOINT", nowhere)
    assert main(["export", str(run), "--format", "model-index", "--push-to-hub", "org/model"]) == 2
    assert "could not be reached" in capsys.readouterr().err
    assert mirror.commits == []
