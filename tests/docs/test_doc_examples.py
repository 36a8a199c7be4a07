"""Every Python example in README.md and docs/*.md runs as written.

Each file's ```python blocks run in order in one namespace, in a fresh working folder that holds what
the prose around them says a user has: a `runs/` folder with finished runs (leaderboards), the README's tiny
CLIP and 12-image manifest (`models/tiny-clip`, `data/manifest.jsonl`: what scripts/dev/readme_demo.py builds) and,
for the granularity examples, the real caption files in $VLBENCH_DATA_DIR (skipped without ../shared)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from support.data import ROOT, excerpt_rows, write_images

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEEDS_CAPTIONS = {"granularity.md"}
NEEDS_RUNS = {"leaderboards.md", "flips.md", "export.md"}
NEEDS_MODEL = {"README.md", "studies.md"}


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def test_every_doc_with_python_has_blocks_found():
    found = {p.name for p in DOCS if _blocks(p)}
    assert {"README.md", "granularity.md", "leaderboards.md", "perturbations.md", "extending.md"} <= found


@pytest.fixture
def _registries_restored(counting_plugin):
    """Examples may register plug-ins in the process (docs/extending.md); later tests must not see them. The
    session's counting plug-in is registered before the snapshot, so restoring keeps it for later tests."""
    from vlbench import registry

    regs = (registry.models, registry.datasets, registry.perturbations, registry.metrics, registry.protocols,
            registry.perturbation_variants, registry.granularity_profiles, registry.reproductions,
            registry.exporters, registry.trackers, registry.executors, registry.pair_scorers)
    from vlbench.tasks.registry import TASKS

    tasks = dict(TASKS.all())  # docs/tasks.md registers a task of its own; the sets declare their metrics first
    for reg in regs:
        reg.names()  # built-ins and installed plug-ins first, so the snapshot holds them
    saved = [dict(reg._entries) for reg in regs]
    yield
    for reg, entries in zip(regs, saved):
        reg._entries.clear()
        reg._entries.update(entries)
    for name in set(TASKS.all()) - set(tasks):
        TASKS.unregister(name)


@pytest.mark.parametrize("doc", [p for p in DOCS if _blocks(p)], ids=lambda p: p.name)
def test_examples_run_as_written(doc, tmp_path, monkeypatch, request, _registries_restored):
    monkeypatch.chdir(tmp_path)
    if doc.name in NEEDS_CAPTIONS:
        shared = request.getfixturevalue("shared_captions")
        data = tmp_path / "data"
        data.mkdir()
        for name in ("flickr30k_test.jsonl", "flickr30k_fg_test.jsonl"):
            (data / name).symlink_to(shared / name)
        monkeypatch.setenv("VLBENCH_DATA_DIR", str(data))
    if doc.name in NEEDS_MODEL:
        request.getfixturevalue("manifest")  # data/manifest.jsonl + data/images/, as the README's run reads them
        (tmp_path / "models").mkdir()
        (tmp_path / "models" / "tiny-clip").symlink_to(request.getfixturevalue("tiny_models")("clip"))
    if doc.name in NEEDS_RUNS:
        request.getfixturevalue("counting_plugin")
        from vlbench.pipeline.runner import run

        rows = excerpt_rows(5)
        names = write_images(tmp_path / "d", len(rows))
        man = tmp_path / "d" / "m.jsonl"
        man.write_text("\n".join(json.dumps({"image": n, "captions": r["captions"]}) for n, r in zip(names, rows)))
        run(model="counting:dim=16", dataset=f"custom:{man}", perturb="char-swap", out="runs/a", quiet=True,
            num_workers=0, n_boot=20, no_cache=True)
    namespace: dict = {"__name__": "__doc_example__"}
    for i, code in enumerate(_blocks(doc)):
        try:
            exec(compile(code, f"{doc.name}[python block {i + 1}]", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # name the block in the failure
            pytest.fail(f"{doc.name}, python block {i + 1} fails as written: {type(exc).__name__}: {exc}")
    assert os.getcwd() == str(tmp_path)
