"""The suite's fixtures (the only conftest.py; plain helpers are in tests/support/, see its __init__).

No test reaches the internet (HF_HUB_OFFLINE=1 for the whole session; the `mirror` fixture's tests undo it and
talk only to a local server on 127.0.0.1, support/mirror.py) and none reads or writes the user's home
folder: the session and every test get their own cache root (VLBENCH_CACHE_DIR under pytest's tmp folder), and
WordNet is assembled once per session into the session's language-data store (or read from the nltk_data
folder named by VLBENCH_TEST_NLTK_DATA), which is put on NLTK's search path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from support.data import ROOT, SHARED_CAPTIONS, TESTS, write_manifest

from vlbench.errors import VlbenchError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# ------------------------------------------------------------------------------------------------------------
# isolation


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory) -> Path:
    """The session's cache root (session-scoped fixtures run before any test's own one is set), and WordNet in
    its language-data store, assembled once from Debian's wordnet-base files unless NLTK already finds it or
    VLBENCH_TEST_NLTK_DATA names an nltk_data folder to use."""
    from vlbench import lang

    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("session-cache")
    mp.setenv("VLBENCH_CACHE_DIR", str(root))
    explicit = os.environ.get("VLBENCH_TEST_NLTK_DATA")
    store = Path(explicit) if explicit else lang.nltk_data_dir()
    if not explicit:
        lang.wordnet_files()  # a copy in the store (or NLTK finds one already); no nltk import
    import nltk

    if store.is_dir() and str(store) not in nltk.data.path:
        nltk.data.path.insert(0, str(store))
    yield root
    mp.undo()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch, _session_cache):
    """Each test gets its own embedding cache and store root (nothing under $HOME)."""
    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(tmp_path / "vlbench-cache"))


# ------------------------------------------------------------------------------------------------------------
# data


@pytest.fixture(scope="session")
def shared_captions() -> Path:
    if not (SHARED_CAPTIONS / "flickr30k_test.jsonl").is_file():
        pytest.skip(f"the real caption files are not at {SHARED_CAPTIONS} (set VLBENCH_SHARED_DATA or "
                    "VLBENCH_SHARED_CAPTIONS)")
    return SHARED_CAPTIONS


@pytest.fixture
def blind_data_dir(tmp_path, shared_captions) -> Path:
    """A --data-dir holding only the COCO test captions the choice tasks' blind (text-only) baseline trains on
    (a link to the shared file); a test adds its set's files in their released layout."""
    coco = shared_captions / "coco5k_test.jsonl"
    if not coco.is_file():
        pytest.skip(f"the COCO test captions are not at {coco}")
    root = tmp_path / "data"
    (root / "captions").mkdir(parents=True)
    (root / "captions" / coco.name).symlink_to(coco)
    return root


@pytest.fixture
def tiny_manifest(tmp_path) -> Path:
    """A custom dataset: 12 synthetic images with real Flickr30k captions (5 each), tmp_path/data/manifest.jsonl."""
    return write_manifest(tmp_path / "data", 12)


@pytest.fixture
def manifest(tiny_manifest) -> Path:
    """The tiny manifest under its older name."""
    return tiny_manifest


@pytest.fixture
def folder_manifest(tmp_path) -> Path:
    """The colour dataset of the protocol tests (support/colour_model.py): 5 solid-colour images in the folder,
    3 of them listed with two captions each."""
    from PIL import Image
    from support.colour_model import FOLDER_CAPTIONS, FOLDER_IMAGES
    from support.data import write_rows

    folder = tmp_path / "data" / "images"
    folder.mkdir(parents=True)
    for name, rgb in FOLDER_IMAGES.items():
        Image.fromarray(np.full((20, 20, 3), rgb, dtype=np.uint8)).save(folder / name)
    return write_rows(tmp_path / "data" / "m.jsonl", [{"image": f"images/{n}", "captions": c}
                                                      for n, c in FOLDER_CAPTIONS.items()])


# ------------------------------------------------------------------------------------------------------------
# models and runs


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """family -> folder of a tiny saved model, built on first use."""
    from support import tiny_models as T

    root = tmp_path_factory.mktemp("tiny-models")
    made: dict[str, Path] = {}

    def get(family: str, seed: int = 0) -> Path:
        key = f"{family}-{seed}"
        if key not in made:
            made[key] = T.SAVERS[family](root / key, seed=seed)
        return made[key]

    return get


@pytest.fixture(scope="session")
def counting_plugin():
    """Register the example plug-in in-process (the real install is tested with plugin_env)."""
    from vlbench import registry

    if "counting" not in registry.models:
        registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
    return "counting"


@pytest.fixture(scope="session")
def colour_models():
    """The colour-vec and colour-rel plug-ins of support/colour_model.py, registered in-process."""
    from vlbench import registry

    for name, target in (("colour-vec", "support.colour_model:load_vec"),
                         ("colour-rel", "support.colour_model:load_rel")):
        if name not in registry.models:
            registry.models.register(name, target, source="plugin:test")
    return "colour-vec", "colour-rel"


@pytest.fixture
def tiny_run(counting_plugin, tmp_path) -> Path:
    """The folder of a finished small run: the counting plug-in on 6 excerpt images, clean + char-swap."""
    from support.runs import counting_run

    return counting_run(tmp_path / "tiny-run")


@pytest.fixture(scope="session")
def plugin_env(tmp_path_factory):
    """Environment for subprocesses in which the example plug-in package is pip-installed for real."""
    import shutil
    import subprocess

    target = tmp_path_factory.mktemp("plugin-site")
    build = tmp_path_factory.mktemp("plugin-src")
    shutil.copytree(TESTS / "plugin_pkg", build / "pkg")  # build outside the repo: no build/ dirs in tests/
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(build / "pkg")],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"could not pip-install the plug-in package here: {pip.stderr[-300:]}")
    return dict(os.environ, PYTHONPATH=f"{target}{os.pathsep}{ROOT}", OMP_NUM_THREADS="1")


# ------------------------------------------------------------------------------------------------------------
# language data


@pytest.fixture(scope="session")
def language():
    """spaCy's English model and WordNet, or a skip naming what is missing."""
    from vlbench import lang

    try:
        lang.nlp()
        lang.wordnet()
    except VlbenchError as exc:  # pragma: no cover - how lang says the data is not installed; anything else fails
        pytest.skip(f"spaCy model or WordNet missing: {exc}")


@pytest.fixture(scope="session")
def wordnet_ready():
    from vlbench import lang

    try:
        return lang.wordnet()
    except VlbenchError as exc:  # pragma: no cover - depends on the machine; only "not installed" skips
        pytest.skip(f"WordNet is not available: {exc}")


@pytest.fixture(scope="session")
def parser_ready():
    from vlbench import lang

    try:
        return lang.nlp()
    except VlbenchError as exc:  # pragma: no cover - only "not installed" skips
        pytest.skip(f"no spaCy English model: {exc}")


@pytest.fixture(scope="session")
def vocab():
    """A blank English vocab for gold parses (support/gold_parse.py)."""
    import spacy

    return spacy.blank("en").vocab


# ------------------------------------------------------------------------------------------------------------
# the fast lane


def pytest_collection_modifyitems(config, items):
    """``pytest tests/unit`` (every argument a folder in tests/unit, no -m) is the fast lane: it leaves out the unit
    tests marked ``slow`` (real caption sets, bigger models). The whole suite, ``-m slow``, a test file or test id,
    or any path outside tests/unit runs them."""
    unit = TESTS / "unit"
    paths = [Path(str(a)).resolve() for a in config.args]
    if config.option.markexpr or not paths or not all(p.is_dir() and (p == unit or unit in p.parents) for p in paths):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config._vlbench_fast_lane = len(slow)


def pytest_terminal_summary(terminalreporter, config):
    n = getattr(config, "_vlbench_fast_lane", 0)
    if n:
        terminalreporter.write_line(f"fast lane: {n} unit tests marked slow were left out (pytest -m slow tests/unit, "
                                    "or the whole suite, runs them)")
    _report_skips(terminalreporter, config)


# ------------------------------------------------------------------------------------------------------------
# strict skips (VLBENCH_STRICT_SKIPS=1, set by scripts/test.sh): support/skips.py holds the allowlist

_SKIPS: list[tuple[str, str, str | None]] = []  # (test id, reason, the allowlist entry that covers it)


def _note_skip(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    from support.skips import allowed, skip_reason

    reason = skip_reason(report.longrepr)
    entry = allowed(getattr(report, "keywords", {}) or {}, reason)
    _SKIPS.append((report.nodeid, reason, entry.name if entry else None))


def pytest_runtest_logreport(report):
    _note_skip(report)


def pytest_collectreport(report):
    _note_skip(report)


def _bad_skips() -> list[tuple[str, str, str | None]]:
    return [s for s in _SKIPS if s[2] is None]


def _report_skips(terminalreporter, config) -> None:
    from support.skips import STRICT_VAR, strict

    if not strict():
        return
    tr = terminalreporter
    tr.section(f"skipped tests ({len(_SKIPS)}; {STRICT_VAR}: only tests/support/skips.py's allowlist may skip)")
    for nodeid, reason, entry in _SKIPS:
        tr.write_line(f"{'allowed (' + entry + ')' if entry else 'NOT ALLOWED'}: {nodeid}: {reason}")
    bad = _bad_skips()
    if bad:
        tr.write_line(f"strict skips: {len(bad)} skipped test(s) not on the allowlist: the run fails. Install what "
                      "they name (scripts/test.sh installs the test extra and the tools), or, for a skip every CI "
                      "machine must accept, add it to tests/support/skips.py with its reason", red=True, bold=True)
    elif not _SKIPS:
        tr.write_line("no test skipped")


def pytest_sessionfinish(session, exitstatus):
    from support.skips import strict

    if strict() and _bad_skips() and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_FULL_COLLECTIONS = [0]


def _freeze_after_full_collections(phase: str, info: dict) -> None:
    """What survives a full garbage collection (the modules, torch/transformers/spaCy/WordNet objects, the session's
    models: a million and a half objects) is frozen (gc.freeze), so the next full collections walk only what came
    since: they took 6.8 s CPU of a 33 s run of tests/unit/models + kernel + granularity, 2.2 s so. Every 10th
    unfreezes instead, and the full collection after it sees everything again: cyclic garbage among frozen objects
    is freed then, not kept for the whole session."""
    if phase != "stop" or info["generation"] != 2:
        return
    import gc

    _FULL_COLLECTIONS[0] += 1
    if _FULL_COLLECTIONS[0] % 10:
        gc.freeze()
    else:
        gc.unfreeze()


def pytest_configure(config):
    import gc

    if _freeze_after_full_collections not in gc.callbacks:
        gc.callbacks.append(_freeze_after_full_collections)


def pytest_unconfigure(config):
    """The session is over: collect the garbage once, then freeze what is left (gc.freeze) so the interpreter's
    exit does not walk it again and again. The objects of torch, transformers, spaCy and WordNet made every exit's
    collections cost seconds (5 s CPU of a 31 s run of tests/unit/models + kernel, 10 s of the fast lane); atexit
    handlers and finalizers of garbage still run (tests/README.md, "How long")."""
    import gc

    gc.collect()
    gc.freeze()


# ------------------------------------------------------------------------------------------------------------
# external tools and the GPU


def _cuda_device() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def pytest_runtest_setup(item):
    """A test marked ``needs_tool`` or ``gpu`` whose tool or CUDA device is missing skips with the reason, or
    fails when VLBENCH_REQUIRE_TOOLS names the tool (``cuda`` for the GPU tests): support/tools.py."""
    from support.tools import missing_tool

    for mark in item.iter_markers("needs_tool"):
        if not mark.kwargs["found"]:
            missing_tool(mark.args[0], mark.kwargs["reason"])
    if item.get_closest_marker("gpu") and not _cuda_device():
        missing_tool("cuda", "no CUDA device here (a test marked gpu; it runs where torch.cuda.is_available())")


# ------------------------------------------------------------------------------------------------------------
# the online path


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    """A local mirror (support/mirror.py) on 127.0.0.1, made this test's Hub (HF_ENDPOINT) and non-Hub source
    (VLBENCH_MIRROR), with the session's offline switches undone for this test (environment and the Hub client's
    import-time flag); every other host sits behind a dead proxy. ``mirror.env(hf_home=...)`` gives the same
    settings for a subprocess."""
    from huggingface_hub import constants
    from support.mirror import Mirror

    m = Mirror()
    for var, value in m.env(base={}, hf_home=tmp_path / "hf-home").items():
        monkeypatch.setenv(var, value)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLBENCH_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # the Hub client reads HF_ENDPOINT when it is imported (a user's environment is set before that); a test that
    # points it at the mirror after the import sets what the import made of it
    monkeypatch.setattr(constants, "ENDPOINT", m.url.rstrip("/"))
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        m.url.rstrip("/") + "/{repo_id}/resolve/{revision}/{filename}")
    yield m
    m.close()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A Hub cache of its own for one test: ``put(repo, files)`` fills it (support.hub_datasets.write_hub_cache);
    ``load(spec)`` loads a dataset offline from it with its own data folder."""
    from support.hub_datasets import use_hub_cache, write_hub_cache

    from vlbench.datasets.core import load_dataset

    use_hub_cache(monkeypatch, tmp_path / "hub")

    def put(repo, files):
        return write_hub_cache(tmp_path / "hub", repo, files)

    def load(spec, **kw):
        return load_dataset(spec, data_dir=tmp_path / "data", **kw)

    return put, load
