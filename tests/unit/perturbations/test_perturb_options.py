"""Perturbation option values refused with exit status 2 and a message, English-only perturbations
refused on non-English captions (perturb CLI and a run's preflight), family names and lists in the Python API."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import vlbench.perturbations as P
from vlbench.cli import main as vlbench_main
from vlbench.errors import UnknownNameError, VlbenchError

from support.data import SHARED_DATA, TESTS

EXCERPT = TESTS / "fixtures" / "captions_excerpt.jsonl"
SHARED = SHARED_DATA / "captions"


def cli(argv, capsys):
    code = vlbench_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv, words", [
    (["--batch-size", "0"], ["--batch-size 0", "positive integer"]),
    (["--batch-size", "-1"], ["--batch-size -1", "positive integer"]),
    (["--validity-sample", "0"], ["--validity-sample 0", "--validity off"]),
    (["--validity-sample", "-5"], ["--validity-sample -5"]),
])
def test_bad_option_values_exit_2_with_a_message(argv, words, capsys):
    code, out, err = cli(["perturb", "--text", "A dog.", "--perturb", "typos", *argv], capsys)
    assert code == 2 and "Traceback" not in err
    for w in words:
        assert w in err
    code, _, err = cli(["perturb", "--dataset", f"custom:{EXCERPT}", "--perturb", "typos", *argv], capsys)
    assert code == 2 and words[0] in err


def test_out_that_is_a_file_is_a_clear_error(tmp_path, capsys):
    f = tmp_path / "results.txt"
    f.write_text("keep me")
    for out in (f, f / "sub"):
        code, _, err = cli(["perturb", "--dataset", f"custom:{EXCERPT}", "--perturb", "typos", "--validity", "off",
                            "--out", str(out)], capsys)
        assert code == 2 and "Traceback" not in err
        assert f"{f} is a file, not a folder" in err
    assert f.read_text() == "keep me"


def test_english_only_perturbations_are_refused_on_german_captions():
    with pytest.raises(VlbenchError) as e:
        P.check_language("all", "de", dataset="'flickr30k-de'")
    msg, hint = e.value.message, e.value.hint
    for name in ("nearby-char", "synonym-noun", "synonym-adjective", "distraction-true", "shuffle-nouns-adjectives"):
        assert name in msg
    assert "'flickr30k-de' has German captions ('de')" in msg
    assert hint.startswith("choose language-free perturbations for German: --perturb char-swap,missing-char,"
                           "extra-char,shuffle-all-words,shuffle-within-trigrams,shuffle-trigrams")
    P.check_language("char-swap,shuffle-trigrams", "de")  # language-free: no error
    P.check_language("all", "en")
    P.check_language("all", None)  # no recorded language: English
    with pytest.raises(VlbenchError, match="shuffle-trigrams"):  # the authors' trigrams use NLTK's English tokenizer
        P.check_language("shuffle-trigrams", "de", variant="hendriksen2024")


def test_dataset_language():
    assert P.dataset_language("flickr30k-de") == "de"
    assert P.dataset_language("flickr30k-multi30k-fr") == "fr"
    assert P.dataset_language("coco") == "en"
    assert P.dataset_language("custom:/x/manifest.jsonl") == "en"
    assert P.dataset_language(SimpleNamespace(source={"language": "cs"})) == "cs"
    assert P.dataset_language(SimpleNamespace(source={})) == "en"


def test_plugin_declares_its_languages(monkeypatch):
    from vlbench.registry import perturbations as REG

    class German:
        name, family, version, params, needs_parse, languages = "german-only", "x", "1", {}, False, ("de",)

        def apply(self, text, *, rng, tokens=None):
            return text + "!"

    REG.register("german-only", German, description="test", family="x", version="1")
    try:
        P.check_language("german-only", "de")
        with pytest.raises(VlbenchError, match="german-only only works on English captions"):
            P.check_language("german-only", "fr")
    finally:
        REG._entries.pop("german-only", None)


def test_run_preflight_refuses_english_perturbations_on_flickr30k_de(tmp_path, capsys, tiny_models):
    model = tiny_models("clip")
    code, _, err = cli(["run", "--model", f"clip:{model}", "--dataset", "flickr30k-de", "--data-dir",
                        str(tmp_path / "empty"), "--perturb", "lexical", "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "Traceback" not in err
    assert "synonym-noun, synonym-adjective only work on English captions" in err
    assert "German captions ('de')" in err and "--perturb char-swap,missing-char" in err
    assert not (tmp_path / "r").exists()  # refused before any work


@pytest.mark.skipif(not (SHARED / "multi30k" / "flickr30k_de_test.jsonl").is_file(),
                    reason=f"the Multi30K German captions are not in {SHARED}")
def test_perturb_cli_on_flickr30k_de(tmp_path, capsys):
    code, _, err = cli(["perturb", "--dataset", "flickr30k-de", "--data-dir", str(SHARED), "--perturb", "lexical",
                        "--validity", "off"], capsys)
    assert code == 2 and "German captions" in err and "Traceback" not in err
    out = tmp_path / "o"
    code, _, err = cli(["perturb", "--dataset", "flickr30k-de", "--data-dir", str(SHARED), "--perturb",
                        "char-swap", "--validity", "off", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    rows = [json.loads(x) for x in (out / "char-swap.jsonl").read_text().splitlines()]
    assert len(rows) == 5000 and sum(r["applicable"] for r in rows) > 4900


def test_perturb_captions_takes_family_names_and_lists():
    caps, ids = ["A small dog runs.", "Two cats sleep."], ["a", "b"]
    by_family = P.perturb_captions(caps, ids, ["typos"])
    assert list(by_family) == ["char-swap", "missing-char", "extra-char", "nearby-char"]
    assert list(P.perturb_captions(caps, ids, "typos,distraction-true")) == [
        "char-swap", "missing-char", "extra-char", "nearby-char", "distraction-true"]
    by_name = P.perturb_captions(caps, ids, ["char-swap"])
    assert by_family["char-swap"].texts == by_name["char-swap"].texts  # same seed stream either way
    assert P.perturb_captions(caps, ids, ["distraction"])["distraction-false"].texts == [
        "A small dog runs and false is false.", "Two cats sleep and false is false."]
    assert P.resolve(["typos", "shuffle-all-words"])[-1] == "shuffle-all-words"
    with pytest.raises(UnknownNameError, match="did you mean 'typos'"):
        P.perturb_captions(caps, ids, ["typoz"])
    with pytest.raises(VlbenchError, match="is empty"):
        P.resolve([])
