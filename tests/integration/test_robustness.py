"""Bad data, bad models, interrupted runs (docs/robustness.md has the policy for each case)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from support.data import ROOT, read_counts, write_images
from vlbench.encoding.encode import load_image
from vlbench.errors import DataError, ModelError, VlbenchError


# ------------------------------------------------------------------------------------------- images

def _png(path: Path, arr, mode=None):
    from PIL import Image

    Image.fromarray(arr, mode) if mode else Image.fromarray(arr)
    Image.fromarray(arr).save(path)
    return path


def test_image_missing(tmp_path):
    with pytest.raises(DataError, match=r"nope\.jpg.* is missing"):
        load_image(tmp_path / "nope.jpg")


def test_image_zero_bytes(tmp_path):
    (tmp_path / "z.jpg").write_bytes(b"")
    with pytest.raises(DataError, match=r"z\.jpg.* is empty \(0 bytes\)"):
        load_image(tmp_path / "z.jpg")


def test_image_truncated_jpeg(tmp_path):
    from PIL import Image

    Image.fromarray((np.random.default_rng(0).random((64, 64, 3)) * 255).astype(np.uint8)).save(tmp_path / "t.jpg")
    data = (tmp_path / "t.jpg").read_bytes()
    (tmp_path / "t.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"t\.jpg.* is corrupt or truncated"):
        load_image(tmp_path / "t.jpg")


def test_text_file_named_jpg(tmp_path):
    (tmp_path / "notes.jpg").write_text("this is not an image\n")
    with pytest.raises(DataError, match=r"notes\.jpg.* is not an image PIL can read"):
        load_image(tmp_path / "notes.jpg")


def test_cmyk_jpeg_is_converted(tmp_path):
    from PIL import Image

    Image.new("CMYK", (20, 10), (0, 255, 255, 0)).save(tmp_path / "c.jpg")  # cyan-free magenta+yellow = red
    im = load_image(tmp_path / "c.jpg")
    assert im.mode == "RGB" and im.size == (20, 10)
    r, g, b = im.getpixel((5, 5))
    assert r > 200 and g < 60 and b < 60


def test_16bit_png_is_scaled_not_clipped(tmp_path):
    from PIL import Image

    arr = np.full((8, 8), 32768, dtype=np.uint16)  # mid-grey in 16 bits
    Image.fromarray(arr).save(tmp_path / "g16.png")
    im = load_image(tmp_path / "g16.png")
    assert im.mode == "RGB"
    assert abs(im.getpixel((0, 0))[0] - 128) <= 1  # clipping would give 255


def test_rgba_png_is_composited_on_white(tmp_path):
    from PIL import Image

    Image.new("RGBA", (6, 6), (0, 0, 0, 0)).save(tmp_path / "a.png")  # fully transparent black
    assert load_image(tmp_path / "a.png").getpixel((1, 1)) == (255, 255, 255)


def test_grayscale_is_converted(tmp_path):
    from PIL import Image

    Image.new("L", (5, 5), 77).save(tmp_path / "l.png")
    assert load_image(tmp_path / "l.png").getpixel((0, 0)) == (77, 77, 77)


def test_decompression_bomb_is_refused(tmp_path):
    from PIL import Image

    Image.new("1", (10_000, 10_000)).save(tmp_path / "bomb.png")  # 100 Mpx, a few KB on disk
    assert (tmp_path / "bomb.png").stat().st_size < 200_000
    with pytest.raises(DataError, match=r"bomb\.png.* too large to decode safely"):
        load_image(tmp_path / "bomb.png")


def test_exif_rotation_is_applied(tmp_path):
    from PIL import Image

    im = Image.new("RGB", (20, 10), (10, 200, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW when displayed
    im.save(tmp_path / "r.jpg", exif=exif)
    assert load_image(tmp_path / "r.jpg").size == (10, 20)


def test_corrupt_image_in_a_run_names_the_file(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    bad = manifest.parent / "images" / "img003.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(DataError, match="img003.png"):
        run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "o"), quiet=True, num_workers=0)


# ------------------------------------------------------------------------------------------- captions

def _dataset(tmp_path, captions_per_image):
    names = write_images(tmp_path / "d", len(captions_per_image))
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": c}) for n, c in zip(names, captions_per_image)))
    return man


def test_empty_and_whitespace_captions_are_reported(counting_plugin, tmp_path):
    from vlbench.pipeline.runner import run

    man = _dataset(tmp_path, [["a dog on grass", ""], ["   \t", "a red car"], ["two birds"]])
    res = run(model="counting", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True, num_workers=0)
    issues = {i["caption_id"]: i["problem"] for i in res.results["caption_issues"]}
    assert issues == {"img000.png#1": "empty or whitespace-only caption",
                      "img001.png#0": "empty or whitespace-only caption"}
    assert res.results["dataset"]["caption_issues"] == 2
    assert res.results["dataset"]["n_captions"] == 5  # kept, as given, and counted


def test_emoji_and_non_latin_captions(tiny_models, tmp_path):
    from vlbench.pipeline.runner import run

    man = _dataset(tmp_path, [["🐶🐶 on the beach", "一只狗在草地上奔跑"], ["رجل يركب دراجة", "Мужчина едет на велосипеде"],
                              ["🎉"]])
    res = run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True,
              num_workers=0)
    assert res.results["dataset"]["n_captions"] == 5
    issues = {i["caption_id"]: i["problem"] for i in res.results["caption_issues"]}
    assert issues == {"img002.png#0": "caption has no letters or digits"}  # emoji-only is flagged, kept


def test_2000_word_caption_is_token_truncated(tiny_models, tmp_path):
    from vlbench.models.adapter import load_model

    m = load_model(f"clip:{tiny_models('clip')}")
    words = ["word"] * 2000
    key = m.text_keys([" ".join(words)])[0]
    assert len(key.split()) == m.max_length == 77  # tokens, not characters


def test_duplicate_captions_within_an_image_stay_positives(counting_plugin, tmp_path):
    from vlbench.pipeline.runner import run

    man = _dataset(tmp_path, [["a dog", "a dog"], ["a cat", "a bird"]])
    res = run(model="counting", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True, num_workers=0)
    assert res.results["encoding"]["texts_distinct"] == 3
    # both copies are positives of image 0: R-precision needs both in its top 2
    pq = res.evaluations["clean"][0].per_query("i2t")
    assert pq["n_positives"].tolist() == [2, 2]


# ------------------------------------------------------------------------------------------- datasets

def test_duplicate_image_entries_are_an_error(tmp_path):
    from vlbench.datasets.core import load_dataset

    man = tmp_path / "m.jsonl"
    man.write_text('{"image": "a.png", "captions": ["x"]}\n{"image": "b.png", "captions": ["y"]}\n'
                   '{"image": "a.png", "captions": ["z"]}\n')
    with pytest.raises(DataError, match=r"line 3: image 'a.png' is listed twice \(first at line 1\)"):
        load_dataset(f"custom:{man}", require_images=False)


def test_ragged_caption_counts(counting_plugin, tmp_path):
    from vlbench.pipeline.runner import run

    man = _dataset(tmp_path, [["a"] * 1 + ["one dog"], ["b c", "c d", "d e", "e f", "f g", "g h", "h i"], ["x y"]])
    res = run(model="counting", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True, num_workers=0)
    pq = res.evaluations["clean"][0].per_query("i2t")
    assert pq["n_positives"].tolist() == [2, 7, 1]


# ------------------------------------------------------------------------------------------- models

def test_model_returning_nan_embeddings(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    with pytest.raises(ModelError, match="NaN or infinite embeddings"):
        run(model="counting:nan", dataset=f"custom:{manifest}", out=str(tmp_path / "o"), quiet=True, num_workers=0)


def test_model_with_different_image_and_text_sizes(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    with pytest.raises(VlbenchError, match="image embeddings of size 32 but text embeddings of size 8"):
        run(model="counting:textdim=8", dataset=f"custom:{manifest}", out=str(tmp_path / "o"), quiet=True,
            num_workers=0)


def test_out_of_memory_retries_with_smaller_batches(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    ref = run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "ref"), quiet=True,
              num_workers=0, no_cache=True, batch_size=8)
    with pytest.warns(UserWarning, match="out of memory"):
        res = run(model="counting:oom_above=3", dataset=f"custom:{manifest}", out=str(tmp_path / "o"), quiet=True,
                  num_workers=0, no_cache=True, batch_size=8)
    assert res.results["encoding"]["oom_retries"] == [{"what": "images", "from": 8, "to": 4},
                                                      {"what": "images", "from": 4, "to": 2}]
    # smaller batches change BLAS blocking, so float sums may differ in the last bits; ranks may not
    for a, b in zip(res.results["results"], ref.results["results"]):
        assert (a["metric"], a["direction"], a["k"]) == (b["metric"], b["direction"], b["k"])
        assert a["value"] == pytest.approx(b["value"], rel=1e-6, abs=1e-9)
        if a["metric"] in ("recall", "medr", "meanr", "rsum", "r_precision", "map_at_r", "mrr", "precision", "map"):
            assert a["value"] == b["value"]


def test_trust_remote_code_is_off_by_default(monkeypatch, tiny_models):
    import transformers

    seen = []
    orig = transformers.AutoTokenizer.from_pretrained

    def spy(*a, **kw):
        seen.append(kw.get("trust_remote_code"))
        return orig(*a, **kw)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", spy)
    from vlbench.models.adapter import load_model

    load_model(f"clip:{tiny_models('clip')}")
    load_model(f"clip:{tiny_models('clip')}", trust_remote_code=True)
    assert seen == [False, True]


# ------------------------------------------------------------------------------------------- interruption

def _count_lines(path: Path, kind: str) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if json.loads(line)["kind"] == kind)


def _cached_vectors(cache: Path, modality: str) -> int:
    n = 0
    for shard in cache.glob(f"embeddings/*/{modality}/*.npz"):
        with np.load(shard, allow_pickle=False) as z:
            n += len(z["keys"])
    return n


@pytest.mark.slow
def test_sigkill_mid_encoding_then_resume(plugin_env, tmp_path):
    names = write_images(tmp_path / "d", 16)
    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl").read_text().splitlines()]
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": rows[i % len(rows)]["captions"]})
                             for i, n in enumerate(names)))
    cache = tmp_path / "cache"
    counts = tmp_path / "counts.jsonl"
    env = dict(plugin_env, VLBENCH_CACHE_DIR=str(cache), VLBENCH_COUNT_FILE=str(counts))
    cmd = [sys.executable, "-m", "vlbench", "run", "--model", "counting:slow=0.4", "--dataset", f"custom:{man}",
           "--batch-size", "2", "--num-workers", "0", "--quiet", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _count_lines(counts, "images") < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "run" / "results.json").exists()
    done = _cached_vectors(cache, "image")
    assert 2 <= done < 16 and done % 2 == 0  # whole batches only; nothing half-written is readable
    assert not list(cache.glob("embeddings/*/image/*.npz.tmp"))  # (temporary names never end in .npz)
    before = read_counts(counts)["images"]
    ok = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert read_counts(counts)["images"] - before == 16 - done  # finished batches were not encoded again
    ref_env = dict(plugin_env, VLBENCH_CACHE_DIR=str(tmp_path / "cache2"))
    ref = subprocess.run([*cmd[:-1], str(tmp_path / "ref")], env=ref_env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    a = json.loads((tmp_path / "run" / "results.json").read_text())
    b = json.loads((tmp_path / "ref" / "results.json").read_text())
    assert a["results"] == b["results"]


@pytest.mark.slow
def test_sigkill_while_encoding_captions_keeps_every_finished_text_batch(plugin_env, tmp_path):
    """Issue 44: a run killed while encoding captions kept none of them (the resume found 300/300 images in the
    cache and 0 of 1,499 captions). Every text batch the model finished must be in the cache after a SIGKILL,
    and the resume encodes only the batch in flight and those never started (counted by the plug-in)."""
    names = write_images(tmp_path / "d", 4)
    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl").read_text().splitlines()]
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": rows[i]["captions"]}) for i, n in enumerate(names)))
    cache, counts = tmp_path / "cache", tmp_path / "counts.jsonl"
    env = dict(plugin_env, VLBENCH_CACHE_DIR=str(cache), VLBENCH_COUNT_FILE=str(counts))
    cmd = [sys.executable, "-m", "vlbench", "run", "--model", "counting:slow=1.5", "--dataset", f"custom:{man}",
           "--batch-size", "4", "--text-batch-size", "3", "--num-workers", "0", "--quiet",
           "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    while _count_lines(counts, "texts") < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    started = _count_lines(counts, "texts")  # the last one started is in flight (the plug-in sleeps 1.5 s in it)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _cached_vectors(cache, "image") == 4
    kept = _cached_vectors(cache, "text")
    assert kept >= 3 * (started - 1) and kept % 3 == 0, (started, kept)  # every finished batch, whole batches
    before = read_counts(counts)
    ok = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    after = read_counts(counts)
    assert after["images"] == before["images"]  # 4/4 images from the cache
    distinct = json.loads((tmp_path / "run" / "results.json").read_text())["encoding"]["texts_distinct"]
    assert after["texts"] - before["texts"] == distinct - kept  # only what was not finished is encoded again

# ------------------------------------------------------------------------------------------- fuzz

def test_fuzz_random_bytes_and_unicode_never_crash_unhandled(counting_plugin, tmp_path):
    """Random bytes as images and random unicode as captions: only vlbench's own clear errors."""
    from vlbench.pipeline.runner import run

    rng = np.random.default_rng(1234)
    for trial in range(25):
        d = tmp_path / f"t{trial}"
        d.mkdir()
        (d / "x.jpg").write_bytes(rng.integers(0, 256, size=int(rng.integers(0, 400)), dtype=np.uint8).tobytes())
        with pytest.raises(DataError):
            load_image(d / "x.jpg")
    alphabet = [chr(c) for c in list(range(32, 0x2FF)) + list(range(0x400, 0x4FF)) + list(range(0x4E00, 0x4F00))
                + list(range(0x1F600, 0x1F650)) + [0x200B, 0x202E, 0xFEFF, 0x0]]
    caps = []
    for _ in range(3):
        caps.append(["".join(rng.choice(alphabet, size=int(rng.integers(0, 60)))) for _ in range(3)])
    man = _dataset(tmp_path / "u", caps)
    res = run(model="counting", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True, num_workers=0)
    assert res.results["dataset"]["n_captions"] == 9
