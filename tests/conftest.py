"""Shared fixtures. No test downloads anything: HF_HUB_OFFLINE=1 is set for the whole session."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

TESTS = Path(__file__).parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "plugin_pkg"))

SHARED_CAPTIONS = Path(os.environ.get("VLBENCH_SHARED_CAPTIONS", ROOT.parent / "shared" / "data" / "captions"))
EXCERPT = TESTS / "fixtures" / "flickr30k_excerpt.jsonl"


@pytest.fixture(scope="session")
def shared_captions() -> Path:
    if not (SHARED_CAPTIONS / "flickr30k_test.jsonl").is_file():
        pytest.skip(f"the real caption files are not at {SHARED_CAPTIONS} (set VLBENCH_SHARED_CAPTIONS)")
    return SHARED_CAPTIONS


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Each test gets its own embedding cache and run folder root."""
    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(tmp_path / "vlbench-cache"))
    # keep the language data where the session already assembled it (shared, read-only use)
    home_nltk = Path(os.path.expanduser("~")) / ".cache" / "vlbench" / "nltk_data"
    if home_nltk.is_dir():
        import nltk

        if str(home_nltk) not in nltk.data.path:
            nltk.data.path.insert(0, str(home_nltk))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """family -> folder of a tiny saved model, built on first use."""
    import tiny_models as T

    root = tmp_path_factory.mktemp("tiny-models")
    made: dict[str, Path] = {}

    def get(family: str, seed: int = 0) -> Path:
        key = f"{family}-{seed}"
        if key not in made:
            made[key] = T.SAVERS[family](root / key, seed=seed)
        return made[key]

    return get


def write_images(folder: Path, n: int, seed: int = 0, fmt: str = "png") -> list[str]:
    from PIL import Image

    rng = np.random.default_rng(seed)
    names = []
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        base = rng.integers(0, 255, size=3)
        arr = np.clip(base + rng.normal(0, 40, size=(24 + i, 30, 3)), 0, 255).astype(np.uint8)
        name = f"img{i:03d}.{fmt}"
        Image.fromarray(arr).save(folder / name)
        names.append(name)
    return names


def excerpt_rows(n: int | None = None) -> list[dict]:
    rows = [json.loads(x) for x in EXCERPT.read_text().splitlines() if x.strip()]
    return rows[:n] if n else rows


@pytest.fixture
def manifest(tmp_path) -> Path:
    """A custom dataset: 12 synthetic images with real Flickr30k captions (5 each)."""
    rows = excerpt_rows(12)
    names = write_images(tmp_path / "data" / "images", len(rows))
    path = tmp_path / "data" / "manifest.jsonl"
    with open(path, "w") as fh:
        for name, row in zip(names, rows):
            fh.write(json.dumps({"image": f"images/{name}", "captions": row["captions"]}) + "\n")
    return path


@pytest.fixture(scope="session")
def counting_plugin():
    """Register the example plug-in in-process (the real install is tested in test_plugins.py)."""
    from vlbench import registry

    if "counting" not in registry.models:
        registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
    return "counting"


def read_counts(path: Path) -> dict:
    out = {"images": 0, "texts": 0}
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out[rec["kind"]] += rec["n"]
    return out


@pytest.fixture(scope="session")
def plugin_env(tmp_path_factory):
    """Environment for subprocesses in which the example plug-in package is pip-installed for real."""
    import subprocess

    target = tmp_path_factory.mktemp("plugin-site")
    build = tmp_path_factory.mktemp("plugin-src")
    import shutil

    shutil.copytree(TESTS / "plugin_pkg", build / "pkg")  # build outside the repo: no build/ dirs in tests/
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(build / "pkg")],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"could not pip-install the plug-in package here: {pip.stderr[-300:]}")
    return dict(os.environ, PYTHONPATH=f"{target}{os.pathsep}{ROOT}", OMP_NUM_THREADS="1")


@pytest.fixture(scope="session")
def language():
    """spaCy's English model and WordNet, or a skip naming what is missing."""
    from vlbench import lang

    try:
        lang.nlp()
        lang.wordnet()
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"spaCy model or WordNet missing: {exc}")
