"""The pixel split (encoding/pixels.py): to_pixels then from_pixels is the adapter's preprocess bit for bit on
real photographs; the pixel store proves its files and survives a concurrent clear."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from vlbench.encoding.pixels import PixelStore, pixel_checksum


def _photos():
    import skimage.data as skdata
    from PIL import Image

    return [Image.fromarray(getattr(skdata, n)()).convert("RGB") for n in ("astronaut", "coffee", "chelsea",
                                                                           "rocket", "camera")]


@pytest.mark.slow  # builds and loads a tiny CLIP
def test_the_pixel_split_equals_the_processor_bit_for_bit(tiny_models):
    import torch

    from vlbench.models.adapter import load_model

    adapter = load_model(f"clip:{tiny_models('clip')}", device="cpu")
    assert adapter.pixel_spec() is not None
    photos = _photos()
    pixels = torch.stack([adapter.to_pixels(im) for im in photos])
    assert pixels.dtype == torch.uint8
    ref = torch.stack([adapter.preprocess(im) for im in photos])
    assert torch.equal(adapter.from_pixels(pixels), ref)


@pytest.mark.slow  # builds and loads a tiny CLIP
def test_the_spec_leaves_out_normalisation_only(tiny_models):
    from vlbench.models.adapter import load_model

    spec = load_model(f"clip:{tiny_models('clip')}", device="cpu").pixel_spec()
    proc = spec["processor"]
    assert {"size", "crop_size", "resample", "do_center_crop"} <= set(proc)
    assert not {"image_mean", "image_std", "do_normalize"} & set(proc)
    assert spec["torchvision"] and spec["transformers"]


def test_store_round_trip_damage_and_concurrent_clear(tmp_path, capsys):
    store = PixelStore.open(tmp_path, {"size": 4})
    px = np.arange(3 * 4 * 4, dtype=np.uint8).reshape(3, 4, 4)
    assert store.get("ab" * 32) == (None, "miss")
    store.put("ab" * 32, px)
    got, how = store.get("ab" * 32)
    assert how == "hit" and np.array_equal(got, px)
    p = store.path("ab" * 32)
    np.savez(p, pixels=px[::-1].copy(), checksum=np.array(pixel_checksum(store.spec, "ab" * 32, px)))
    assert store.get("ab" * 32) == (None, "bad")
    assert p.with_name(p.name + ".damaged").exists() and "damaged" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "pixels")  # `vlbench cache clear` meanwhile: the next write recreates the folder
    store.put("cd" * 32, px)
    assert store.get("cd" * 32)[1] == "hit"
    other = PixelStore.open(tmp_path, {"size": 5})  # another spec: another folder, nothing shared
    assert other.folder != store.folder and other.get("cd" * 32) == (None, "miss")


def test_cache_writes_survive_a_concurrent_clear(tmp_path, monkeypatch):
    """`vlbench cache clear` removing a store's folder between its creation and the rename of a write
    (the model-identity memo's atomic write, 1 in 24 tries) is retried, never a traceback."""
    import tempfile

    import vlbench.util.io as io_

    real, cleared = tempfile.mkstemp, []

    def racing(*args, dir=None, **kw):
        if not cleared:  # the first write: the folder vanishes just before the temporary file is made
            cleared.append(dir)
            shutil.rmtree(dir)
        return real(*args, dir=dir, **kw)

    monkeypatch.setattr(io_.tempfile, "mkstemp", racing)
    target = tmp_path / "models" / "memo.json"
    assert io_.cache_write_bytes(target, b"{}") is True
    assert cleared and target.read_bytes() == b"{}"
    monkeypatch.setattr(io_.tempfile, "mkstemp", lambda *a, dir=None, **kw: (_ for _ in ()).throw(
        FileNotFoundError(dir)))
    assert io_.cache_write_bytes(tmp_path / "models" / "other.json", b"{}") is False  # keeps vanishing: skipped


def test_an_unknown_pixel_path_is_refused_by_option():
    from vlbench.errors import OptionError
    from vlbench.pipeline.run_config import RunConfig, validate

    with pytest.raises(OptionError) as err:
        validate(RunConfig(model="clip", dataset="custom:m.jsonl", pixels="gpu"))
    assert err.value.option == "pixels"
