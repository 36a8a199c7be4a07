"""Beside the cache: store paths follow --cache-dir (nothing under $HOME), image-path and
VLBENCH_MAX_IMAGE_ASPECT messages instead of tracebacks, and a true message when a command is interrupted."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from support.data import excerpt_rows, write_images
from vlbench.encoding.encode import check_image_header, file_key, load_image, max_aspect
from vlbench.errors import DataError, VlbenchError


def _manifest(folder, first_image=None, n=4):
    rows = excerpt_rows(n)
    names = write_images(folder / "images", n)
    if first_image is not None:
        names[0] = first_image
    path = folder / "m.jsonl"
    path.write_text("\n".join(json.dumps({"image": name if first_image and i == 0 else f"images/{name}",
                                          "captions": r["captions"]}) for i, (name, r) in enumerate(zip(names, rows))))
    return path


def test_a_run_with_cache_dir_writes_nothing_under_home(tiny_models, tmp_path, monkeypatch):
    """--cache-dir is the root of every store (file digests of a local checkpoint included): with HOME pointing
    at a fresh folder and no VLBENCH_CACHE_DIR / XDG_CACHE_HOME, a run leaves it empty."""
    from vlbench.pipeline.runner import run

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("VLBENCH_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert os.path.expanduser("~") == str(home)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_models("clip"), ckpt)
    cache = tmp_path / "given"
    run(model=f"clip:{ckpt}", dataset=f"custom:{_manifest(tmp_path / 'd')}", cache_dir=str(cache),
        out=str(tmp_path / "run"), quiet=True, num_workers=0, n_boot=10)
    assert [q for q in home.rglob("*")] == []
    assert (cache / "file-digests" / "digests.json").is_file() and list(cache.glob("embeddings/*/image/*.npz"))


def test_a_no_cache_run_writes_nothing_under_the_cache_folder(tiny_models, tmp_path, monkeypatch):
    """--no-cache keeps nothing on disk, not even the weights digests of a local checkpoint (which a
    --no-cache run used to write under the user's cache folder)."""
    from vlbench.pipeline.runner import run

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("VLBENCH_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_models("clip"), ckpt)
    res = run(model=f"clip:{ckpt}", dataset=f"custom:{_manifest(tmp_path / 'd')}", no_cache=True,
              out=str(tmp_path / "run"), quiet=True, num_workers=0, n_boot=10)
    assert res.results["model"]["identity"]["local"]["content_sha256"]  # the digests were computed ...
    assert [q for q in home.rglob("*")] == []  # ... and kept nowhere


@pytest.mark.parametrize("value", ["abc", "", " ", "0.5", "nan", "-3", "32x"])
def test_max_aspect_setting_is_named_not_blamed_on_the_image(tmp_path, monkeypatch, value):
    img = tmp_path / "fine.png"
    write_images(tmp_path, 1)
    (tmp_path / "img000.png").rename(img)
    monkeypatch.setenv("VLBENCH_MAX_IMAGE_ASPECT", value)
    if not value.strip():  # empty: the default
        assert max_aspect() == 32.0 and load_image(img).size == (30, 24)
        return
    with pytest.raises(VlbenchError) as err:
        check_image_header(img)
    assert f"VLBENCH_MAX_IMAGE_ASPECT={value!r} is not a number >= 1" in err.value.message
    assert "corrupt" not in err.value.message and "fine.png" not in err.value.message
    assert "unset it for the default 32" in err.value.hint
    monkeypatch.setenv("VLBENCH_MAX_IMAGE_ASPECT", "inf")
    assert max_aspect() == float("inf")


def test_a_folder_or_an_overlong_name_as_an_image_is_a_clear_error(tmp_path):
    (tmp_path / "sub").mkdir()
    for fn in (file_key, check_image_header, load_image):
        with pytest.raises(DataError, match=r"image path '.*sub' is a folder, not an image file") as err:
            fn(tmp_path / "sub")
        assert "name the image file itself" in err.value.hint
    long = tmp_path / ("x" * 5000 + ".png")
    for fn in (file_key, check_image_header):
        with pytest.raises(DataError, match=r"is too long for the file system .*5,004 characters") as err:
            fn(long)
        assert "(5,0" in err.value.message and len(err.value.message) < 400  # cut in the middle, length given
        assert "rename the file" in err.value.hint


@pytest.mark.parametrize("image", [".", "./", "x" * 5000 + ".png"])
def test_dot_or_overlong_image_path_in_a_manifest_exits_2_without_traceback(counting_plugin, tmp_path, image,
                                                                             capsys):
    from vlbench import cli

    man = _manifest(tmp_path / "d", first_image=image)
    rc = cli.main(["run", "--model", "counting", "--dataset", f"custom:{man}", "--out", str(tmp_path / "run"),
                   "--quiet", "--num-workers", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "fix:" in err
    if image.startswith("."):
        assert "line 1: image path '.' names the data folder itself" in err
    else:
        assert "(5,0" in err and "File name too long" in err and "rename the file" in err
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.fixture
def interrupting_plugin(tmp_path, monkeypatch):
    """Model plug-ins registered for one test: one whose import is interrupted (Ctrl-C), one interrupted while
    encoding its second image batch."""
    from vlbench import registry
    import vlbench.encoding.cache as C

    (tmp_path / "ctrl_c_on_import.py").write_text("raise KeyboardInterrupt\n")
    (tmp_path / "ctrl_c_later.py").write_text(
        "import numpy as np\nfrom vlbench_counting_plugin import CountingModel\n"
        "class Late(CountingModel):\n"
        "    def encode_images(self, batch):\n"
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        if self.calls == 2:\n"
        "            raise KeyboardInterrupt\n"
        "        return super().encode_images(batch)\n"
        "def load(ckpt, **kw):\n    return Late({})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.models._entries, "ctrlc-import",
                        registry.Entry("ctrlc-import", "ctrl_c_on_import:load", "", "plugin:test"))
    monkeypatch.setitem(registry.models._entries, "ctrlc-late",
                        registry.Entry("ctrlc-late", "ctrl_c_later:load", "", "plugin:test"))
    monkeypatch.setattr(C, "_WRITTEN_IN_PROCESS", 0)  # a fresh command line process
    return tmp_path


def test_an_interrupt_says_only_what_is_true(interrupting_plugin, counting_plugin, manifest, tmp_path, capsys):
    from vlbench import cli

    args = ["--dataset", f"custom:{manifest}", "--quiet", "--num-workers", "0", "--batch-size", "4"]
    assert cli.main(["run", "--model", "ctrlc-import", "--out", str(tmp_path / "a"), *args]) == 130
    err = capsys.readouterr().err
    assert "interrupted before this command wrote any batch to the embedding cache" in err
    # The plug-in whose import raised it is named
    assert "while importing the plug-in 'ctrlc-import' (plugin:test: ctrl_c_on_import:load)" in err
    assert "finished batches are in the embedding cache" not in err and "are in the embedding cache" not in err
    assert cli.main(["run", "--model", "ctrlc-late", "--out", str(tmp_path / "b"), *args]) == 130
    err = capsys.readouterr().err
    assert "the 1 batch(es) encoded before the interruption are in the embedding cache" in err
    shards = list((tmp_path / "vlbench-cache").glob("embeddings/*/image/*.npz"))
    assert len(shards) == 1 and len(np.load(shards[0])["keys"]) == 4
