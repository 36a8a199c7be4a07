"""The chapter protocol offline: NLTK's punkt_tab and averaged_perceptron_tagger_eng
installed from a copied nltk_data folder or archive (checked file by file), found by preflight in under a
second without importing NLTK, and a `--protocol hendriksen2024 --perturb all` run on a custom manifest with a
local tiny model that runs all 13 compatible perturbations and records the NLTK version and data provenance."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from vlbench import langdata, langsetup
from vlbench.cli import main
from vlbench.errors import DataError

from support.data import SHARED_NLTK

TAGGER_DIR = "taggers/averaged_perceptron_tagger_eng"
PUNKT_DIR = "tokenizers/punkt_tab/english"


def _copy_shared(dst: Path) -> Path:
    if not (SHARED_NLTK / PUNKT_DIR / "ortho_context.tab").is_file():
        pytest.skip(f"no NLTK tokenizer/tagger copy at {SHARED_NLTK} (../shared is not part of the repository)")
    for sub in ("tokenizers", "taggers"):
        shutil.copytree(SHARED_NLTK / sub, dst / sub)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture
def nltk_copy(tmp_path) -> Path:
    """An nltk_data folder 'copied from a machine that has it' (the shared copy, see its SOURCES.md)."""
    return _copy_shared(tmp_path / "usb-stick" / "nltk_data")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(copied folder, cache folder): `vlbench setup-language-data --from <copy> --cache-dir <cache>` done once
    (the install loads the data through NLTK in a fresh process: seconds)."""
    root = tmp_path_factory.mktemp("offline-route")
    copy = _copy_shared(root / "usb-stick" / "nltk_data")
    cache = root / "cache"
    assert main(["setup-language-data", "--from", str(copy), "--cache-dir", str(cache)]) == 0
    from vlbench import lang

    lang.nlp()  # loaded once per process (seconds): warmed here so the run test times the run
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
    except LookupError:
        pass
    return copy, cache


@pytest.fixture(autouse=True)
def _restore_nltk_search_path(monkeypatch):
    """Runs here add vlbench's store to NLTK's search path (NLTK_DATA, nltk.data.path): undone after each test."""
    import nltk

    monkeypatch.setenv("NLTK_DATA", os.environ.get("NLTK_DATA", ""))
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    yield
    import nltk.tag
    import nltk.tokenize

    for loader in (getattr(nltk.tokenize, "_get_punkt_tokenizer", None), getattr(nltk.tag, "_get_tagger", None)):
        if hasattr(loader, "cache_clear"):  # NLTK keeps what it loaded from the per-test store: forget it
            loader.cache_clear()


@pytest.fixture
def only_store(monkeypatch):
    """NLTK's usual folders hidden from vlbench's file checks: only the (empty, per-test) store counts."""
    from vlbench import lang

    monkeypatch.setattr(lang, "nltk_search_dirs", lambda: [lang.nltk_data_dir()])


def test_missing_data_named_with_the_offline_route(only_store):
    from vlbench.pipeline.preflight import check_variant_data

    assert langdata.missing([langdata.TOKENIZER, langdata.TAGGER]) == [langdata.TOKENIZER, langdata.TAGGER]
    found = check_variant_data("all", None, "hendriksen2024")
    nltk_problem = [p for p in found if p.item == "NLTK data"]
    assert len(nltk_problem) == 1
    p = nltk_problem[0]
    # exactly the 4 of 13 compatible perturbations that tokenize / tag with NLTK
    assert ("hendriksen2024 variant of the perturbations shuffle-trigrams, shuffle-within-trigrams, "
            "synonym-adjective, synonym-noun (--perturb-variant" in p.what
            and "punkt_tab, averaged_perceptron_tagger_eng" in p.what)
    assert langdata.OFFLINE_ROUTE in p.fix and "nltk.download('punkt_tab')" in p.fix
    assert check_variant_data("all", None, "standard") == []  # vlbench's own perturbations need neither
    # only the trigram shuffles: the tokenizer alone
    only = check_variant_data("shuffle-trigrams", {"shuffle-trigrams": {"variant": "hendriksen2024"}}, None)
    assert [p.what.split(" (NLTK")[0] for p in only] == ["punkt_tab"]


def test_preflight_and_plan_only_answer_in_under_a_second_without_nltk(tmp_path):
    """A fresh process: preflight of a chapter-protocol run, and `reproduce --plan-only`, each timed alone."""
    (tmp_path / "img").mkdir()
    code = f"""
import sys, time, json
from pathlib import Path
from PIL import Image
Image.new("RGB", (8, 8)).save("{tmp_path}/img/a.png")
Path("{tmp_path}/m.jsonl").write_text(json.dumps({{"image": "img/a.png", "captions": ["a red car"]}}) + "\\n")
from vlbench.pipeline.preflight import preflight
from vlbench.pipeline.runner import RunConfig
from vlbench.pipeline.presets import resolve
from vlbench.cli import main
cfg = resolve(RunConfig(model="clip:{tmp_path}/no-such-model", dataset="custom:{tmp_path}/m.jsonl", perturb="all",
                        protocol="hendriksen2024", relevance="self", out="{tmp_path}/run"))
t = time.perf_counter()
try:
    preflight(cfg)
except Exception as exc:
    msg = str(exc)
t1 = time.perf_counter() - t
t = time.perf_counter()
rc = main(["reproduce", "hendriksen2024", "--plan-only", "--data-dir", "{tmp_path}/empty"])
t2 = time.perf_counter() - t
heavy = [m for m in ("nltk", "torch", "transformers", "spacy", "scipy", "sklearn") if m in sys.modules]
print(json.dumps({{"t1": t1, "t2": t2, "rc": rc, "heavy": heavy, "msg": msg}}))
"""
    env = {**os.environ, "VLBENCH_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path), "NLTK_DATA": "",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    print("preflight %.3f s, plan-only %.3f s" % (out["t1"], out["t2"]))
    assert out["heavy"] == [] and out["t1"] < 1.0 and out["t2"] < 1.0, out
    assert out["rc"] == 2
    for text in (out["msg"], done.stderr):  # preflight's message and the plan's
        assert "punkt_tab" in text and langdata.OFFLINE_ROUTE in text
    assert not (tmp_path / "run").exists()  # before any work


def test_setup_language_data_from_a_copied_folder_records_where_it_came_from(installed):
    copy, cache = installed
    store = cache / "nltk_data"
    assert langdata.verify(store) == []
    recorded = json.loads((store / langdata.PROVENANCE).read_text())
    assert recorded["punkt_tab"]["source"] == str(copy.resolve())
    import hashlib

    ortho = (copy / PUNKT_DIR / "ortho_context.tab").read_bytes()
    assert recorded["punkt_tab"]["sha256"]["ortho_context.tab"] == hashlib.sha256(ortho).hexdigest()
    weights = (copy / TAGGER_DIR / "averaged_perceptron_tagger_eng.weights.json").read_bytes()
    assert (recorded["averaged_perceptron_tagger_eng"]["sha256"]["averaged_perceptron_tagger_eng.weights.json"]
            == hashlib.sha256(weights).hexdigest())


def test_chapter_protocol_runs_all_13_compatible_perturbations_offline(tmp_path, installed, folder_manifest,  # noqa: F811
                                                                       tiny_models, only_store):
    copy, cache = installed
    model = tiny_models("clip")
    out = tmp_path / "run"
    rc = main(["run", "--model", f"clip:{model}", "--dataset", f"custom:{folder_manifest}", "--protocol",
               "hendriksen2024", "--perturb", "all", "--relevance", f"clip:{model}", "--out", str(out),
               "--cache-dir", str(cache), "--validity", "off", "--bootstrap", "5", "--quiet"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    from vlbench.studies.hendriksen2024.compat import NAMES

    assert len(NAMES) == 13 and set(NAMES) <= set(res["conditions"])
    proto = res["settings"]["protocol"]
    assert proto["name"] == "hendriksen2024+relevance=clip:" + str(model)  # the relevance model as given
    assert all(res["settings"]["protocol"][k] == v for k, v in (("gallery", "folder"), ("perturb_side", "t2i")))
    data = proto["language_data"]
    import importlib.metadata

    store = str(cache / "nltk_data")
    assert data["nltk"] == importlib.metadata.version("nltk")
    assert data["punkt_tab"]["found"] == store and data["punkt_tab"]["source"] == str(copy.resolve())
    assert data["averaged_perceptron_tagger_eng"]["found"] == store


def _archive(src: Path, dest: Path) -> Path:
    if dest.name.endswith(".zip"):
        with zipfile.ZipFile(dest, "w") as zf:
            for p in sorted(src.rglob("*")):
                zf.write(p, Path("nltk_data") / p.relative_to(src))
    else:
        with tarfile.open(dest, "w:gz") as tf:
            tf.add(src, arcname="home/me/nltk_data")  # deeper: the nltk_data root is found inside
    return dest


@pytest.mark.parametrize("name", ["copy.zip", "copy.tar.gz"])
def test_install_from_archive(tmp_path, nltk_copy, only_store, name):
    store = langsetup.install_from(_archive(nltk_copy, tmp_path / name))
    assert langdata.verify(store) == [] and langdata.missing([langdata.TOKENIZER, langdata.TAGGER]) == []
    assert json.loads((store / langdata.PROVENANCE).read_text())["punkt_tab"]["source"].endswith(name)


def test_broken_copies_are_refused_with_what_is_wrong(tmp_path, nltk_copy, only_store):
    route = langdata.OFFLINE_ROUTE
    with pytest.raises(DataError, match="does not exist") as e:
        langsetup.install_from(tmp_path / "nowhere")
    assert route in e.value.hint
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="neither a folder nor a .zip/.tar.gz"):
        langsetup.install_from(tmp_path / "notes.txt")
    (tmp_path / "bad.zip").write_bytes(b"PK not really")
    with pytest.raises(DataError, match="not a readable archive"):
        langsetup.install_from(tmp_path / "bad.zip")
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as zf:
        zf.writestr("../outside.txt", "x")
    with pytest.raises(DataError, match="unsafe path '../outside.txt'"):
        langsetup.install_from(tmp_path / "evil.zip")
    # a file missing, a weights file that is not the tagger's JSON, a punkt table with a broken line
    (nltk_copy / TAGGER_DIR / "averaged_perceptron_tagger_eng.tagdict.json").unlink()
    (nltk_copy / TAGGER_DIR / "averaged_perceptron_tagger_eng.weights.json").write_text('{"bias": [1, 2]}')
    with open(nltk_copy / PUNKT_DIR / "ortho_context.tab", "a") as fh:
        fh.write("word-without-count\n")
    with pytest.raises(DataError) as e:
        langsetup.install_from(nltk_copy)
    msg = e.value.message
    assert "taggers/averaged_perceptron_tagger_eng/averaged_perceptron_tagger_eng.tagdict.json is missing" in msg
    assert "weights.json is not a JSON object feature -> {tag: weight}" in msg
    assert "ortho_context.tab line 6153 is not 'word<TAB>number'" in msg or "ortho_context.tab line" in msg
    assert route in e.value.hint
    assert not (langdata.store() / "taggers").exists()  # nothing half-installed
    # through the CLI: exit 2, one line, no traceback
    assert main(["setup-language-data", "--from", str(tmp_path / "nowhere")]) == 2


def test_use_store_reaches_nltk_imported_later_and_already_imported(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "mine"))
    own = langdata.use_store()
    assert os.environ["NLTK_DATA"].split(os.pathsep) == [str(tmp_path / "mine"), str(own)]
    import nltk

    monkeypatch.setattr(nltk.data, "path", ["/x"])
    langdata.use_store()
    assert nltk.data.path == ["/x", str(own)]


def test_a_copy_with_nltks_zipped_packages_is_unpacked(tmp_path, nltk_copy, only_store, monkeypatch):
    """nltk.download leaves tokenizers/punkt_tab.zip (and usually its unpacked folder): the zip alone is enough."""
    punkt = nltk_copy / "tokenizers" / "punkt_tab"
    with zipfile.ZipFile(nltk_copy / "tokenizers" / "punkt_tab.zip", "w") as zf:
        for p in sorted(punkt.rglob("*")):
            zf.write(p, p.relative_to(punkt.parent))
    shutil.rmtree(punkt)
    loaded = []
    monkeypatch.setattr(langsetup, "load_check", lambda root, packages: loaded.append(root))  # checked above: slow
    store = langsetup.install_from(nltk_copy.parent)  # the folder that holds nltk_data/
    assert langdata.verify(store) == [] and len(loaded) == 1
    assert (store / PUNKT_DIR / "ortho_context.tab").read_bytes() == (SHARED_NLTK / PUNKT_DIR / "ortho_context.tab"
                                                                        ).read_bytes()


def test_data_in_the_default_store_is_found_by_a_run_with_another_cache_dir(tmp_path, monkeypatch):
    from vlbench import lang, stores

    monkeypatch.setattr(lang, "nltk_search_dirs", lambda: lang.own_nltk_dirs())  # vlbench's stores only
    default = langdata.store()  # $VLBENCH_CACHE_DIR/nltk_data (a plain `vlbench setup-language-data`)
    with stores.using(tmp_path / "other-cache"):
        assert langdata.missing([langdata.TOKENIZER]) == [langdata.TOKENIZER]
        folder, files = langdata.layout()[langdata.TOKENIZER]
        for f in files:
            (default / folder).mkdir(parents=True, exist_ok=True)
            (default / folder / f).write_text("a\n")
        assert langdata.missing([langdata.TOKENIZER]) == [] and langdata.find(langdata.TOKENIZER) == default
        assert lang.own_nltk_dirs() == [tmp_path / "other-cache" / "nltk_data", default]
        monkeypatch.setenv("NLTK_DATA", "")
        langdata.use_store()
        assert os.environ["NLTK_DATA"].split(os.pathsep) == [str(tmp_path / "other-cache" / "nltk_data"), str(default)]


def test_a_from_copy_is_installed_before_wordnet_is_required(monkeypatch, tmp_path, capsys):
    """Offline with no WordNet yet, the --from copy is what can bring it (_copy_wordnet): the copy must be
    installed before WordNet is looked for, else the command stops at 'WordNet is not available'."""
    from types import SimpleNamespace

    from vlbench import lang, langsetup

    calls = []
    monkeypatch.setattr(langsetup, "install_from", lambda src: calls.append("install_from") or tmp_path / "own")
    monkeypatch.setattr(lang, "ensure_wordnet", lambda: calls.append("ensure_wordnet") or tmp_path / "wn")
    monkeypatch.setattr(lang, "spacy_model_name", lambda: "en_core_web_sm")
    args = SimpleNamespace(cache_dir=str(tmp_path / "cache"), source=str(tmp_path / "copy"), nltk_optional=False)
    assert langsetup.main(args) == 0
    assert calls == ["install_from", "ensure_wordnet"]
    assert f"installed from {tmp_path / 'copy'} into {tmp_path / 'own'}" in capsys.readouterr().out
