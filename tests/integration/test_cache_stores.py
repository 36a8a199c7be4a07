"""One cache root with one owner (vlbench.stores): every store a run writes is declared, follows --cache-dir,
is listed by `vlbench cache ls` with its size and emptied by `vlbench cache clear`."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from support.data import ROOT
from vlbench import stores


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def _store_of(root, path):
    rel = path.relative_to(root).parts
    return next((s.name for s in stores.STORES.values() if rel[0] == s.folder or rel[0] in s.legacy), None)


@pytest.fixture
def every_store_run(tiny_models, manifest, tmp_path, monkeypatch):
    """Runs under a tmp --cache-dir that use every cache store: a local checkpoint (file digests, identity memo,
    text keys, embeddings), --perturb with validity on (perturbed captions, MiniLM vectors, drift summaries),
    --shortcuts (the digit bank) and a fixed relevance model (a second model's session)."""
    import vlbench.perturbations.guard as G
    import vlbench.shortcuts.digits as sc
    from vlbench.pipeline.runner import run

    def fake_mnist(root, download):  # what torchvision leaves: the download under the digit store
        (root / "MNIST" / "raw").mkdir(parents=True, exist_ok=True)
        (root / "MNIST" / "raw" / "t10k-images-idx3-ubyte").write_bytes(b"digits")
        return sc.load_digit_bank("sklearn-digits")

    monkeypatch.setattr(sc, "_mnist_bank", fake_mnist)
    monkeypatch.setattr(G, "_SHARED", G.VectorCache(disk=True))  # a fresh process's MiniLM cache
    folder = tmp_path / "ckpt"
    shutil.copytree(tiny_models("clip"), folder)
    cache = tmp_path / "cache"
    run(model=f"clip:{folder}", dataset=f"custom:{manifest}", perturb="distraction-true", shortcuts="matched",
        digits="mnist", relevance=f"clip:{tiny_models('clip', 1)}", cache_dir=str(cache),
        out=str(tmp_path / "run"), quiet=True, num_workers=0, n_boot=10)
    return cache


def test_every_store_follows_cache_dir_and_clear_leaves_nothing(every_store_run, tmp_path):
    cache = every_store_run
    default = tmp_path / "vlbench-cache"  # $VLBENCH_CACHE_DIR of every test (conftest)
    assert not default.exists() or not _files(default), _files(default)  # nothing beside --cache-dir
    files = _files(cache)
    assert [p for p in files if _store_of(cache, p) is None] == []  # every file belongs to a declared store
    used = {_store_of(cache, p) for p in files}
    assert used >= {"embeddings", "perturbations", "model-identity", "text-keys", "file-digests", "minilm-vectors",
                    "validity-drift", "digits"}, used
    clear = subprocess.run([sys.executable, "-m", "vlbench", "cache", "clear", "--cache-dir", str(cache)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert clear.returncode == 0, clear.stderr
    assert _files(cache) == []
    assert f"removed {len(files)} file(s)" in clear.stdout


def test_file_digests_follow_cache_dir(tiny_models, manifest, tmp_path, monkeypatch):
    """The file-digest memo of a local checkpoint was written to the default root whatever --cache-dir
    said."""
    from vlbench.pipeline.runner import run

    env_root = tmp_path / "env-cache"
    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(env_root))
    folder = tmp_path / "ckpt"
    shutil.copytree(tiny_models("clip"), folder)
    cache = tmp_path / "given"
    run(model=f"clip:{folder}", dataset=f"custom:{manifest}", cache_dir=str(cache), out=str(tmp_path / "r"),
        quiet=True, num_workers=0, n_boot=10)
    assert (stores.path("file-digests", cache) / "digests.json").is_file()
    assert not env_root.exists(), _files(env_root)
    # --no-cache: no vectors, identity memo, text keys or file digests, in the folder given or anywhere
    folder.joinpath("extra.txt").write_text("a new file: its digest is computed, not remembered")
    run(model=f"clip:{folder}", dataset=f"custom:{manifest}", cache_dir=str(tmp_path / "nc"), no_cache=True,
        out=str(tmp_path / "r2"), quiet=True, num_workers=0, n_boot=10)
    assert _files(tmp_path / "nc") == []
    assert not env_root.exists(), _files(env_root)


def test_cache_ls_lists_every_store_with_its_size(tmp_path):
    (tmp_path / "perturbations").mkdir()
    (tmp_path / "perturbations" / "abc.json").write_text('{"typos": {}}')
    (tmp_path / "minilm-vectors").mkdir()
    (tmp_path / "minilm-vectors" / "x.npz").write_bytes(b"0" * 1234)
    (tmp_path / "file-digests.json").write_text("{}")  # where an older vlbench kept the digests
    ls = subprocess.run([sys.executable, "-m", "vlbench", "cache", "ls", "--cache-dir", str(tmp_path)],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ls.returncode == 0, ls.stderr
    rows = {ln.split()[0]: ln.split() for ln in ls.stdout.split("stores under", 1)[1].splitlines()[2:]}
    from vlbench.tasks.registry import tasks

    tasks()  # the choice sets declare their own stores (ARO's crops), as `vlbench cache` loads them
    assert set(rows) == set(stores.STORES)
    assert rows["minilm-vectors"][3:5] == ["1", "1234"] and rows["perturbations"][3:5] == ["1", "13"]
    assert rows["file-digests"][3:5] == ["1", "2"] and rows["embeddings"][3:5] == ["0", "0"]
    assert {r["name"]: r["files"] for r in stores.usage(tmp_path)}["perturbations"] == 1


def test_clear_keeps_downloads_and_what_is_not_a_store(tmp_path, capsys):
    from vlbench import cli

    for folder in ("embeddings/abc/text", "data/flickr30k", "mine"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "f").write_text("x")
    assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "kept downloads: datasets;" in capsys.readouterr().out
    assert sorted(p.relative_to(tmp_path).as_posix() for p in _files(tmp_path)) == ["data/flickr30k/f", "mine/f"]
    assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path), "--downloads"]) == 0
    assert [p.relative_to(tmp_path).as_posix() for p in _files(tmp_path)] == ["mine/f"]


def test_store_roots(tmp_path, monkeypatch):
    from vlbench.errors import VlbenchError

    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(tmp_path / "env"))
    assert stores.path("embeddings") == tmp_path / "env" / "embeddings"
    assert stores.path("digits", tmp_path / "given") == tmp_path / "given" / "mnist"
    with stores.using(tmp_path / "run"):
        assert stores.path("file-digests") == tmp_path / "run" / "file-digests"
        assert stores.path("text-keys", tmp_path / "given") == tmp_path / "given" / "text-keys"
    assert stores.root() == tmp_path / "env"
    with pytest.raises(VlbenchError, match="no on-disk store is called 'vectors'"):
        stores.path("vectors")
