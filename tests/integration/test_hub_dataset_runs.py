"""Runs on a Hub dataset (``--dataset hf:ORG/NAME``, issue #30 item 3) and smoke-test runs (``--limit N``, item 4).

The Hub dataset is a parquet split in huggingface_hub's real cache layout (tests/support/hub_datasets.py), resolved
offline by the library's own snapshot_download; the same images and captions as a custom manifest must give the
same results.json numbers, number for number.
"""

from __future__ import annotations

import json

import pytest
from support.data import write_manifest
from support.hub_datasets import manifest_as_parquet, use_hub_cache, write_hub_cache


@pytest.fixture
def hub_and_manifest(tmp_path, monkeypatch):
    """A 12-image manifest (images beside it) and the same rows as hf:org/tiny-set, test split, 2 caption columns."""
    man = write_manifest(tmp_path / "data", 12, images="")
    write_hub_cache(tmp_path / "hub", "org/tiny-set",
                    {"data/test-00000-of-00001.parquet": manifest_as_parquet(man, split_at=2),
                     "data/train-00000-of-00001.parquet": manifest_as_parquet(write_manifest(
                         tmp_path / "other", 3, images="", seed=5, start=20))})
    use_hub_cache(monkeypatch, tmp_path / "hub")
    monkeypatch.setenv("VLBENCH_DATA_DIR", str(tmp_path / "vlbench-data"))
    return man


def _run(model, dataset, out, **kw):
    from vlbench.pipeline.runner import run

    return run(model=model, dataset=dataset, out=str(out), quiet=True, num_workers=0, **{"n_boot": 50, **kw})


def test_hub_dataset_with_two_caption_columns_equals_the_manifest(tiny_models, hub_and_manifest, tmp_path):
    model = f"clip:{tiny_models('clip')}"
    hub = _run(model, "hf:org/tiny-set", tmp_path / "hub-run", perturb="char-swap,shuffle-all-words")
    custom = _run(model, f"custom:{hub_and_manifest}", tmp_path / "custom-run", perturb="char-swap,shuffle-all-words")
    h, c = (json.loads((r.out_dir / "results.json").read_text()) for r in (hub, custom))
    assert h["results"] == c["results"] and h["deltas"] == c["deltas"] and h["bootstrap"] == c["bootstrap"]
    assert len(h["results"]) > 30 and h["dataset"]["n_captions"] == c["dataset"]["n_captions"] == 60
    source = h["dataset"]["source"]
    assert (source["split"], source["caption_columns"], source["revision"]) == ("test", ["caption", "sentences"],
                                                                               "0123456789abcdef" * 2 + "01234567")
    assert h["dataset"]["name"] == "hf:org/tiny-set"
    # per caption: the same ids (the parquet path names), so the same perturbed captions and per-query values
    assert (hub.out_dir / "per_query.csv.gz").read_bytes() and hub.record.dataset.hash == custom.record.dataset.hash


def test_hub_dataset_is_resumed_by_its_spec(counting_plugin, hub_and_manifest, tmp_path):
    first = _run("counting:dim=16", "hf:org/tiny-set?caption=sentences,caption", tmp_path / "r", no_cache=True)
    again = _run("counting:dim=16", "hf:org/tiny-set?caption=sentences,caption", tmp_path / "r", no_cache=True,
                 resume=True)
    assert again.record.run_id == first.record.run_id
    assert first.results["dataset"]["name"] == "hf:org/tiny-set?caption=sentences,caption"


def test_limit_run_prints_a_table_and_is_labelled(counting_plugin, hub_and_manifest, tmp_path, capsys):
    from vlbench.cli import main

    out = tmp_path / "lim"
    code = main(["run", "--model", "counting:dim=16", "--dataset", f"custom:{hub_and_manifest}", "--limit", "5",
                 "--out", str(out), "--num-workers", "0", "--bootstrap", "20", "--no-cache"])
    printed = capsys.readouterr().out
    assert code in (0, None)
    rows = [line.split("|")[1:3] for line in printed.splitlines() if line.startswith("|")]
    assert [c.strip() for c in rows[0]] == ["condition", "dir"]
    assert ["clean", "i2t"] in [[c.strip() for c in r] for r in rows]
    res = json.loads((out / "results.json").read_text())
    assert res["settings"]["limit"] == 5 and res["dataset"]["limit"] == 5
    assert "-limit5-" in res["run_id"]
    assert (res["dataset"]["n_images"], res["dataset"]["n_captions"]) == (5, 25)
    # the first 5 images of the manifest with their captions, nothing else: the same numbers as a 5-image manifest
    five = write_manifest(tmp_path / "five", 5, images="")
    full = _run("counting:dim=16", f"custom:{five}", tmp_path / "five-run", no_cache=True, n_boot=20)
    assert res["results"] == full.results["results"]
    assert "limit" not in full.results["settings"] and "limit" not in full.results["dataset"]


def test_resume_never_mixes_limited_and_full_runs(counting_plugin, hub_and_manifest, tmp_path):
    from vlbench.errors import OptionError

    _run("counting:dim=16", f"custom:{hub_and_manifest}", tmp_path / "full", no_cache=True)
    with pytest.raises(OptionError, match="limit None, not 4"):
        _run("counting:dim=16", f"custom:{hub_and_manifest}", tmp_path / "full", no_cache=True, limit=4, resume=True)
    _run("counting:dim=16", f"custom:{hub_and_manifest}", tmp_path / "lim", no_cache=True, limit=4)
    with pytest.raises(OptionError, match="limit 4, not None"):
        _run("counting:dim=16", f"custom:{hub_and_manifest}", tmp_path / "lim", no_cache=True, resume=True)
    same = _run("counting:dim=16", f"custom:{hub_and_manifest}", tmp_path / "lim", no_cache=True, limit=4,
                resume=True)
    assert same.record.settings["limit"] == 4


def test_limit_on_a_hub_dataset(counting_plugin, hub_and_manifest, tmp_path):
    from vlbench.runread import load_run_dataset

    res = _run("counting:dim=16", "hf:org/tiny-set", tmp_path / "r", no_cache=True, limit=3, dataset_name="tiny")
    assert (res.results["dataset"]["n_images"], res.results["settings"]["limit"]) == (3, 3)
    # explain finds the run's dataset again from its record: the Hub spec at the commit read, cut to 3 images
    assert res.results["dataset"]["source"]["spec"] == "hf:org/tiny-set?revision=" + "0123456789abcdef" * 2 + \
        "01234567"
    ds = load_run_dataset(res.results)
    assert ds.content_hash() == res.results["dataset"]["hash"] and ds.n_images == 3


def test_detected_options_are_printed(counting_plugin, hub_and_manifest, tmp_path, capsys):
    from vlbench.pipeline.runner import run

    run(model="counting:dim=16", dataset="hf:org/tiny-set?caption=caption", out=str(tmp_path / "r"),
        num_workers=0, n_boot=20, no_cache=True)
    err = capsys.readouterr().err
    assert "hf:org/tiny-set?caption=caption: detected split=test, image=image" in err
    assert "caption=caption," not in err  # the columns given are not "detected"


@pytest.mark.slow
def test_a_mirror_served_hub_dataset_equals_the_manifest(tiny_models, mirror, tmp_path, monkeypatch):
    """The same check online: hf:org/tiny-set served by the local mirror (HF_ENDPOINT), fetched by the Hub client
    itself (no pre-filled cache), equals the custom manifest number for number; only the split's parquet file
    is downloaded."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))  # an empty Hub cache: all online
    man = write_manifest(tmp_path / "data", 12, images="")
    mirror.add_dataset_repo("org/tiny-set-online", {
        "data/test-00000-of-00001.parquet": manifest_as_parquet(man, split_at=2),
        "data/train-00000-of-00001.parquet": manifest_as_parquet(write_manifest(tmp_path / "other", 3, images="",
                                                                                seed=5, start=20))})
    monkeypatch.setenv("VLBENCH_DATA_DIR", str(tmp_path / "vlbench-data"))
    model = f"clip:{tiny_models('clip')}"
    hub = _run(model, "hf:org/tiny-set-online", tmp_path / "hub-run", perturb="char-swap")
    custom = _run(model, f"custom:{man}", tmp_path / "custom-run", perturb="char-swap")
    h, c = (json.loads((r.out_dir / "results.json").read_text()) for r in (hub, custom))
    assert h["results"] == c["results"] and h["deltas"] == c["deltas"] and h["bootstrap"] == c["bootstrap"]
    assert h["dataset"]["source"]["caption_columns"] == ["caption", "sentences"]
    fetched = [r.path for r in mirror.gets("test-00000-of-00001.parquet")]
    assert fetched and not mirror.gets("train-00000-of-00001.parquet")  # only the split that is evaluated


# ----------------------------------------------------------------------------------------------
# hf: datasets that must be refused cheaply: before torch, without decompressing what the footer says is too big

_REFUSING_RUN = (  # the run itself; its peak is read by _PEAK, a small parent (a child of the big pytest process
    # would inherit pytest's peak RSS across exec)
    "import sys\n"
    "import PIL.Image\n"
    "PIL.Image.MAX_IMAGE_PIXELS = int(sys.argv[1])\n"
    "from vlbench.cli import main\n"
    "try:\n"
    "    rc = main(sys.argv[2:])\n"
    "except SystemExit as exc:\n"
    "    rc = exc.code\n"
    "print('RESULT', rc, 'torch' in sys.modules, file=sys.stderr)\n")
_PEAK = ("import resource, subprocess, sys\n"
         "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.stderr[-4000:])\n")


def _refused_run(tmp_path, model: str, dataset: str, max_pixels: int) -> tuple[int, int, bool, str]:
    """(exit status, peak RSS in KB, whether torch was imported, stderr) of ``vlbench run`` on ``dataset`` in a
    fresh process (PIL's pixel limit, and so the per-image byte bound, set to ``max_pixels``)."""
    import os
    import subprocess
    import sys

    from support.data import ROOT

    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1",
               VLBENCH_DATA_DIR=str(tmp_path / "vlbench-data"), VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", _PEAK, sys.executable, "-c", _REFUSING_RUN, str(max_pixels), "run",
                          "--model", model, "--dataset", dataset, "--out", str(tmp_path / "out"), "--num-workers", "0",
                          "--quiet"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300).stdout
    peak_kb, _, stderr = out.partition(" ")
    result = [line for line in stderr.splitlines() if line.startswith("RESULT ")]
    assert result, out[-2000:]
    _, rc, torch = result[-1].split()
    return int(rc), int(peak_kb), torch == "True", stderr


def test_refused_hub_datasets_cost_no_torch_and_no_decompression(tiny_models, tmp_path):
    """A 0-row split is refused before torch is loaded (it used to end in an IndexError after loading torch and
    the model, 1.3 GB); an image cell the footer shows over the per-image byte bound is refused without being
    decompressed (a 33 KiB file with a 1 GiB cell used to reach 4.3 GB and write 1.1 GB before "not an image PIL
    can read"). Here the bound is lowered to 1,065,536 bytes (PIL limit 250,000 pixels) so that a 64 MiB cell,
    cheap to make, shows it: the refusal's peak stays within 32 MiB of the 0-row refusal's, though reading the
    cell alone would add 64 MiB."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from support.hub_datasets import IMAGE_TYPE

    def table_bytes(columns: dict) -> bytes:
        buf = io.BytesIO()
        pq.write_table(pa.table(columns), buf, compression="zstd")
        return buf.getvalue()

    cell = 64 << 20
    bomb = table_bytes({"image": pa.array([{"bytes": bytes(cell), "path": "bomb.png"}], type=IMAGE_TYPE),
                        "caption": ["a picture"]})
    assert len(bomb) < 64 << 10
    write_hub_cache(tmp_path / "hub", "org/bomb", {"test.parquet": bomb})
    write_hub_cache(tmp_path / "hub", "org/empty", {"data/test-00000-of-00001.parquet": table_bytes(
        {"image": pa.array([], type=IMAGE_TYPE), "caption": pa.array([], type=pa.string())})})
    model = f"clip:{tiny_models('clip')}"
    rc, empty_kb, torch, err = _refused_run(tmp_path, model, "hf:org/empty", 250_000)
    assert (rc, torch) == (2, False), err[-2000:]
    assert "'org/empty', split default/test" in err and "data/test-00000-of-00001.parquet hold 0 rows" in err
    assert "Traceback" not in err and empty_kb < 300 * 1024, f"peak {empty_kb / 1024:.0f} MB"
    rc, bomb_kb, torch, err = _refused_run(tmp_path, model, "hf:org/bomb", 250_000)
    assert (rc, torch) == (2, False), err[-2000:]
    assert "test.parquet: row 1 holds an image cell over the limit of 1,065,536 bytes" in err
    assert "Traceback" not in err
    assert bomb_kb < empty_kb + 32 * 1024, f"peak {bomb_kb / 1024:.0f} MB vs {empty_kb / 1024:.0f} MB (0 rows)"
    assert not (tmp_path / "vlbench-data").exists() or not any(p.is_file() for p in
                                                               (tmp_path / "vlbench-data").rglob("*"))
    print(f"peak RSS: {bomb_kb / 1024:.0f} MB refusing the 64 MiB cell, {empty_kb / 1024:.0f} MB refusing 0 rows")
