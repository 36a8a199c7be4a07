"""--pixels device (encoding/device_pixels.py): the fallback to PIL is per file, so an image's pixels and vector
do not depend on its batch-mates; the decoder libraries' versions are in the pixel spec and in the device
path's identity key, so a decoder upgrade is another cache key."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.data import write_images

from vlbench.encoding.pixels import spec_hash
from vlbench.models.lazy import fingerprint
from vlbench.util import env


@pytest.mark.slow  # builds and loads a tiny CLIP
def test_an_images_device_pixels_do_not_depend_on_a_refused_batch_mate(tiny_models, tmp_path, monkeypatch):
    import torch
    import torchvision.io as tvio

    from vlbench.encoding.device_pixels import DeviceBatches
    from vlbench.encoding.encode import EncodeStats
    from vlbench.encoding.images import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(f"clip:{tiny_models('clip')}", device="cpu")
    paths = [str(tmp_path / n) for n in write_images(tmp_path, 3, fmt="jpg")]
    refused = Path(paths[2]).read_bytes()
    real = tvio.decode_jpeg

    def refusing(data, *args, **kw):  # as nvJPEG refuses a JPEG PIL reads: the whole call raises
        if any(bytes(t.numpy()) == refused for t in (data if isinstance(data, list) else [data])):
            raise RuntimeError("decode_jpeg: this file is not supported by the device decoder")
        return real(data, *args, **kw)

    monkeypatch.setattr(tvio, "decode_jpeg", refusing)
    batches = DeviceBatches(adapter, [], {}, EncodeStats())
    plain, on_device_plain = batches.pixels_of([paths[0], paths[1]])
    mixed, on_device_mixed = batches.pixels_of([paths[0], paths[2]])
    assert on_device_plain == 2 and on_device_mixed == 1  # only the refused file left the device decoder
    assert torch.equal(mixed[0], plain[0])  # the same pixels whatever its batch-mate
    assert torch.equal(mixed[1], adapter.to_pixels(load_image(paths[2])))  # the refused one: PIL, as reference
    vec_plain = adapter.encode_images(adapter.from_pixels(plain))[0]
    vec_mixed = adapter.encode_images(adapter.from_pixels(mixed))[0]
    assert torch.equal(vec_mixed, vec_plain)


def _upgraded(monkeypatch, dist: str) -> None:
    real = env.dist_version
    monkeypatch.setattr(env, "dist_version", lambda d: "99.0" if d == dist else real(d))


def test_a_pillow_upgrade_changes_the_pixel_spec(monkeypatch):
    spec = {"processor": {"size": {"shortest_edge": 224}}, "torchvision": "0.0"}
    before = spec_hash(spec)
    assert env.decoder_versions()["pillow"] and env.decoder_versions()["pillow_libjpeg"]
    _upgraded(monkeypatch, "pillow")
    assert spec_hash(spec) != before


def test_a_libjpeg_upgrade_changes_the_pixel_spec(monkeypatch):
    from PIL import features

    spec = {"processor": {"size": {"shortest_edge": 224}}}
    before = spec_hash(spec)
    real = features.version
    monkeypatch.setattr(features, "version", lambda f: "99.0" if f in ("libjpeg_turbo", "jpg") else real(f))
    assert spec_hash(spec) != before


def test_a_torchvision_upgrade_changes_the_device_paths_key_only(tmp_path, monkeypatch):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    kw = dict(precision="fp32", trust_remote_code=False, revision=None)
    spec = f"clip:{tmp_path / 'ckpt'}"
    device, reference = fingerprint(spec, pixels="device", **kw), fingerprint(spec, pixels="reference", **kw)
    assert device is not None and reference is not None
    _upgraded(monkeypatch, "torchvision")
    assert fingerprint(spec, pixels="device", **kw) != device
    assert fingerprint(spec, pixels="reference", **kw) == reference  # the reference path decodes with PIL only
