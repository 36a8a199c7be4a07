"""Everything a run needs is checked up front, in seconds, and listed at once:
an uncached hub id on a machine without network used to fail only after perturbing every caption and a
minute of the hub client's retries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from support.data import ROOT, excerpt_rows, write_images

from vlbench.errors import DataError, ModelError
from vlbench.pipeline import preflight as PF
from vlbench.util.fetch import DownloadError, LocalWriteError


@pytest.fixture
def manifest_one_missing(tmp_path):
    rows = excerpt_rows(3)
    names = write_images(tmp_path / "d", 3)
    (tmp_path / "d" / names[2]).unlink()
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": r["captions"]}) for n, r in zip(names, rows)))
    return man


def _run(args, tmp_path, offline=True):
    env = dict(os.environ, HF_HOME=str(tmp_path / "empty-hf-home"), VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("HF_HUB_CACHE", None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "vlbench", "run", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    return proc, time.perf_counter() - t0


SLOW = pytest.mark.slow  # each case runs `vlbench run` in a subprocess (~0.9 s CPU, 2-3 s wall on a busy machine)


@SLOW  # the fast lane checks the same preflight in-process: test_one_problem_keeps_its_own_error_class
@pytest.mark.parametrize("model, repo", [("clip", "openai/clip-vit-base-patch32"),
                                         pytest.param("openclip", "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", marks=SLOW),
                                         pytest.param("align:kakaobrain/align-base", "kakaobrain/align-base",
                                                      marks=SLOW),
                                         pytest.param("openclip:hf-hub:org/some-model", "org/some-model",
                                                      marks=SLOW)])
def test_uncached_hub_model_offline_fails_fast_listing_everything(manifest_one_missing, tmp_path, model, repo):
    proc, seconds = _run(["--model", model, "--dataset", f"custom:{manifest_one_missing}", "--perturb", "all",
                          "--out", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert "2 thing(s) it needs are missing" in err
    assert "img002.png" in err and f"'{repo}' is not in the local Hugging Face cache" in err
    assert f"hf download {repo}" in err
    assert "perturbing" not in err and "Traceback" not in err and "Retrying" not in err
    assert not (tmp_path / "o").exists()  # no empty run folder left behind
    assert seconds < 10, f"took {seconds:.1f} s"


@SLOW
def test_missing_local_folder_is_named_without_a_hub_hint(manifest_one_missing, tmp_path):
    proc, seconds = _run(["--model", "clip:./models/nonexist", "--dataset", f"custom:{manifest_one_missing}"],
                         tmp_path)
    assert proc.returncode == 2
    assert "local folder 'models/nonexist' does not exist" in proc.stderr
    assert "hf download" not in proc.stderr
    assert seconds < 10


def test_one_problem_keeps_its_own_error_class(tmp_path, manifest_one_missing, tiny_models):
    from vlbench.pipeline.runner import run

    with pytest.raises(DataError, match="img002.png"):
        run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{manifest_one_missing}", quiet=True,
            out=str(tmp_path / "o"))
    with pytest.raises(ModelError, match="does not exist"):
        run(model=f"clip:{tmp_path / 'nope'}", dataset=f"custom:{_complete_manifest(tmp_path)}", quiet=True,
            out=str(tmp_path / "o2"))


def _complete_manifest(tmp_path):
    rows = excerpt_rows(2)
    names = write_images(tmp_path / "ok", 2)
    man = tmp_path / "ok" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": r["captions"]}) for n, r in zip(names, rows)))
    return man


def test_network_probe_without_offline_variables(monkeypatch):
    """No offline variable set and no network: the probe says so in one short timeout, no retries."""
    import socket

    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    calls = []

    def refuse(addr, timeout=None):
        calls.append((addr, timeout))
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    PF.network_reachable.cache_clear()
    try:
        assert PF.network_reachable() is False
        assert calls and all(t <= PF.PROBE_TIMEOUT for _, t in calls)
        p = PF.check_model("clip:someorg/not-cached-anywhere")
        assert len(p) == 1 and "cannot be reached" in p[0].what
    finally:
        PF.network_reachable.cache_clear()


def test_disk_check_names_the_folder(tmp_path):
    probs = PF.check_disk([tmp_path / "out"], need_bytes=2**62)
    assert len(probs) == 1 and str(tmp_path / "out") in probs[0].item and "MB free" in probs[0].what
    assert PF.check_disk([tmp_path / "out"], need_bytes=1) == []


def test_openclip_table_is_read_without_torch():
    code = ("import sys; from vlbench.models.hub import openclip_repo;"
            "print(openclip_repo('ViT-B-32', 'laion2b_s34b_b79k'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.split() == ["laion/CLIP-ViT-B-32-laion2B-s34B-b79K", "False"], out.stderr


@SLOW  # the fast lane asks check_model the same in-process: test_model_suggestions_for_other_unknown_specs
@pytest.mark.parametrize("model, suggestion", [("kakaobrain/align-base", "align:kakaobrain/align-base"),
                                               pytest.param("hf-hub:timm/x", "openclip:hf-hub:timm/x", marks=SLOW)])
def test_unknown_model_family_is_refused_up_front_with_did_you_mean(manifest_one_missing, tmp_path, model,
                                                                   suggestion):
    write_images(manifest_one_missing.parent, 3)  # all images present: the model is the only problem
    proc, _ = _run(["--model", model, "--dataset", f"custom:{manifest_one_missing}", "--perturb", "all",
                    "--out", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"unknown model family '{model.partition(':')[0]}'" in proc.stderr
    assert f"did you mean '--model {suggestion}'" in proc.stderr
    assert "perturbing" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_model_suggestions_for_other_unknown_specs():
    (problem,) = PF.check_model("kakaobrain/align-base")  # what the subprocess case above prints, in-process
    assert problem.what == "unknown model family 'kakaobrain/align-base'"
    assert "did you mean '--model align:kakaobrain/align-base'" in problem.fix
    assert "'clip'" in PF.check_model("clpi")[0].fix
    assert "openclip:ViT-B-32/laion2b_s34b_b79k" in PF.check_model("ViT-B-32/laion2b_s34b_b79k")[0].fix
    assert "clip:openai/clip-vit-large-patch14" in PF.check_model("openai/clip-vit-large-patch14")[0].fix


def test_language_check_finds_wordnet_by_its_files_without_importing_nltk(tmp_path, monkeypatch):
    from vlbench import lang

    code = ("import sys; from vlbench.pipeline.preflight import check_language; check_language('all'); "
            "print('nltk' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
    # nothing anywhere -> missing; NLTK_DATA with corpora/wordnet/data.noun, or corpora/wordnet.zip -> found
    monkeypatch.setattr(lang, "DEBIAN_WORDNET", tmp_path / "no-debian")
    monkeypatch.setattr(lang, "nltk_search_dirs", lambda: [tmp_path / "a", tmp_path / "b"])
    assert not lang.wordnet_available()
    problems = PF.check_language("synonym-noun")
    assert [p.item for p in problems if p.item == "WordNet"] == ["WordNet"]
    (tmp_path / "b" / "corpora").mkdir(parents=True)
    (tmp_path / "b" / "corpora" / "wordnet.zip").write_bytes(b"PK")
    assert lang.wordnet_available()
    monkeypatch.undo()
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nd"))
    assert lang.nltk_search_dirs()[0] == tmp_path / "nd"
    (tmp_path / "nd" / "corpora" / "wordnet").mkdir(parents=True)
    (tmp_path / "nd" / "corpora" / "wordnet" / "data.noun").write_text("x")
    monkeypatch.setattr(lang, "DEBIAN_WORDNET", tmp_path / "no-debian")
    assert lang.wordnet_available()


def test_unanswered_hub_switches_the_hub_client_offline_once(monkeypatch):
    """The probe found the Hub silent: the Hub client is put in offline mode for the process (no retries later),
    with one line naming the endpoint; an answering Hub, or an offline mode the user chose, changes nothing."""
    import socket

    from huggingface_hub import constants

    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    answers = {"ok": False}

    def probe(addr, timeout=None):
        if not answers["ok"]:
            raise OSError("Connection refused")
        return socket.socket()

    monkeypatch.setattr(socket, "create_connection", probe)
    lines: list[str] = []
    PF.network_reachable.cache_clear()
    try:
        answers["ok"] = True
        assert PF.choose_hub_mode(lines.append) is False and constants.HF_HUB_OFFLINE is False and lines == []
        PF.network_reachable.cache_clear()
        answers["ok"] = False
        assert PF.choose_hub_mode(lines.append) is True
        assert constants.HF_HUB_OFFLINE is True
        assert lines == ["the Hub at 127.0.0.1:9 does not answer: using the local cache only (no retries; set "
                         "HF_ENDPOINT for a mirror, or HF_HUB_OFFLINE=1 to skip this check)"]
        assert "HF_HUB_OFFLINE" not in os.environ  # vlbench's own downloads from other hosts stay allowed
        assert PF.choose_hub_mode(lines.append) is False and len(lines) == 1  # decided once
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        assert PF.choose_hub_mode(lines.append) is False and constants.HF_HUB_OFFLINE is False  # the user's choice
    finally:
        PF.network_reachable.cache_clear()


def test_malformed_hub_endpoint_is_named_not_a_traceback(monkeypatch):
    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://[::1")  # an unclosed IPv6 literal
    PF.network_reachable.cache_clear()
    try:
        with pytest.raises(ModelError) as err:
            PF.choose_hub_mode()
        assert "HF_ENDPOINT 'http://[::1'" in err.value.message and "unset it" in (err.value.hint or "")
    finally:
        PF.network_reachable.cache_clear()


@pytest.mark.parametrize("make", [
    lambda p: LocalWriteError(p / "x.jsonl", OSError(30, "Read-only file system")),
    lambda p: DownloadError("https://example.org/x", "404", "fix it"),
])
def test_one_problem_whose_error_has_its_own_constructor_is_raised_as_its_message(tmp_path, make):
    """Issue 44: a read-only data folder gave "AttributeError: 'str' object has no attribute 'name'": report()
    rebuilt the one problem's error from (message, fix), which LocalWriteError(path, exc) and DownloadError(url,
    reason, hint) do not take. It raises the nearest error class that does (DataError), with the same words."""
    exc = make(tmp_path)
    with pytest.raises(DataError) as err:
        PF.report([PF.Problem("dataset 'docci'", exc.message, exc.hint or "", type(exc))])
    assert (err.value.message, err.value.hint) == (exc.message, exc.hint)


def test_a_read_only_data_folder_with_a_file_not_yet_pinned_is_a_data_error_naming_the_fix(tmp_path, monkeypatch):
    """The lock and pin of a long-caption file pinned on first use cannot be written in a read-only folder (EROFS,
    simulated here: tests may run as root, whom permissions do not stop): the run's preflight says so and how to
    fix it, instead of a traceback."""
    import errno

    import filelock
    from PIL import Image

    class ReadOnlyLock:
        def __init__(self, path, *a, **k):
            self.path = path

        def acquire(self, *a, **k):
            raise OSError(errno.EROFS, "Read-only file system", self.path)

    root = tmp_path / "docci"
    (root / "images").mkdir(parents=True)
    row = {"example_id": "test_1", "split": "test", "image_file": "test_00001.jpg", "description": "A red car."}
    (root / "docci_descriptions.jsonlines").write_text(json.dumps(row) + "\n")
    Image.new("RGB", (8, 8)).save(root / "images" / "test_00001.jpg")
    monkeypatch.setattr(filelock, "FileLock", ReadOnlyLock)
    _, problems, _ = PF.check_dataset("docci", data_dir=tmp_path)
    with pytest.raises(DataError) as err:
        PF.report(problems)
    assert "is not pinned yet" in err.value.message and "Read-only file system" in err.value.message
    assert f"write access to {root}" in err.value.hint and "--data-dir" in err.value.hint
    assert not (root / "docci_descriptions.jsonlines.sha256").exists()
