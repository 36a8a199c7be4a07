"""Corrupting on the model's device (--pixels device --corrupt-backend torch): the fit to the model's input is Pillow's
resize value for value (compared with Pillow itself), a batch of images corrupted on the CPU device equals the
DataLoader workers' image by image, the placement and cache key name where it ran, and a refused image names its
file."""

from __future__ import annotations

import numpy as np
import pytest
import torch  # noqa: E402
from PIL import Image

from vlbench.errors import DataError

FILTERS = {"bicubic": Image.Resampling.BICUBIC, "box": Image.Resampling.BOX, "bilinear": Image.Resampling.BILINEAR,
           "nearest": Image.Resampling.NEAREST}


def _photo(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth gradient with noise (real-valued content, every grey level in play), uint8 H x W x 3."""
    rs = np.random.RandomState(seed)
    ramp = np.linspace(0, 255, w)[None, :, None] * np.linspace(0.3, 1, h)[:, None, None] * np.ones((1, 1, 3))
    return np.uint8(np.clip(0.7 * ramp + 0.3 * rs.rand(h, w, 3) * 255, 0, 255))


def _chw(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))


@pytest.mark.parametrize("name", list(FILTERS))
def test_resize_on_tensors_is_pillows_resize_value_for_value(name):
    from vlbench.imageperturb.ontorch.geometry import resize

    for i, ((h, w), (nw, nh)) in enumerate([((37, 53), (224, 160)), ((375, 500), (299, 224)), ((90, 41), (33, 120)),
                                            ((64, 64), (64, 31)), ((20, 300), (17, 17))]):
        img = _photo(h, w, i)
        want = np.asarray(Image.fromarray(img).resize((nw, nh), FILTERS[name]))
        got = resize(_chw(img)[None], (nw, nh), name)[0].permute(1, 2, 0).numpy()
        assert got.dtype == np.uint8 and np.array_equal(got, want), (name, h, w, nw, nh)


def test_fit_to_input_on_tensors_is_the_workers_fit():
    from vlbench.imageperturb.apply import fit_to_input as pil_fit
    from vlbench.imageperturb.ontorch.geometry import fit_to_input

    for i, (h, w, size) in enumerate([(375, 500, 224), (500, 333, 224), (640, 180, 224), (24, 30, 32), (224, 224, 224),
                                      (41, 97, 64)]):
        img = _photo(h, w, i)
        want = np.asarray(pil_fit(Image.fromarray(img), size))
        got = fit_to_input(_chw(img)[None], size)[0].permute(1, 2, 0).numpy()
        assert got.shape == (size, size, 3) and np.array_equal(got, want), (h, w, size)


class _Device:
    """A model making its pixels on its device (--pixels device), input 48 x 48."""
    pixels = "device"

    def __init__(self, device: str = "cpu"):
        self.device = device

    def preprocess(self, image):
        return np.zeros((3, 48, 48), np.float32)


def _bound(name: str, severity: int, at: str, device: str = "cpu"):
    from vlbench.imageperturb.conditions import CorruptionTransform

    t = CorruptionTransform(name, severity, 7, at, backend="torch")
    return t, t.bind(_Device(device))


@pytest.mark.slow  # frost's photographs and glass_blur's moves on two geometries: a few seconds
@pytest.mark.parametrize("at,names", [("input", ("gaussian_noise", "glass_blur", "pixelate", "frost")),
                                      ("original", ("gaussian_noise", "pixelate"))])
def test_a_batch_corrupted_on_the_cpu_device_equals_the_workers_image_by_image(at, names):
    sizes = [(37, 53), (60, 45), (20, 26), (37, 53)]  # two of one shape, one under 32 px (enlarged and shrunk back)
    images = [_photo(h, w, i) for i, (h, w) in enumerate(sizes)]
    contents = [f"img:{i:064x}" for i in range(len(images))]
    memo: dict = {}
    for name in names:
        t, meta = _bound(name, 3, at)
        assert t.on_device and meta["corrupt_on"] == "device" and meta["version"] == "imagenet-c-torch/1@cpu"
        got = t.apply_batch([_chw(a) for a in images], list(range(len(images))), contents, memo)
        for i, (img, c) in enumerate(zip(images, contents)):
            want = np.asarray(t(Image.fromarray(img), i, c))  # what a DataLoader worker makes
            assert np.array_equal(got[i].permute(1, 2, 0).numpy(), want), (name, at, i)


def test_where_a_corruption_runs_is_recorded_and_keyed():
    from vlbench.imageperturb.conditions import CorruptionTransform

    _, on_cpu = _bound("contrast", 2, "input")
    _, on_cuda = _bound("contrast", 2, "input", device="cuda:1")
    assert on_cpu["cache_key"].endswith("imagenet-c-torch/1@cpu:at48")  # the workers' key: the same pixels
    assert on_cuda["cache_key"].endswith("imagenet-c-torch/1@cuda:at48") and on_cuda["version"].endswith("@cuda")
    assert _bound("contrast", 2, "original")[1]["corrupt_batches"].startswith("one image at a time")

    class Wide(_Device):  # a model input that is not square: the images are corrupted at their own sizes
        def preprocess(self, image):
            return np.zeros((3, 48, 64), np.float32)

    wide = CorruptionTransform("contrast", 2, 7, "input", backend="torch").bind(Wide())
    assert wide["corrupted_at"] == "original size" and wide["corrupt_batches"].startswith("one image at a time")

    class Workers:  # the reference pixel path: corruptions stay in the DataLoader workers
        pixels = "reference"
        device = "cpu"

        def preprocess(self, image):
            return np.zeros((3, 48, 48), np.float32)

    t = CorruptionTransform("contrast", 2, 7, "input", backend="torch")
    assert t.bind(Workers())["corrupt_on"] == "workers" and not t.on_device
    ref = CorruptionTransform("contrast", 2, 7, "input", backend="reference")
    assert ref.bind(Workers())["corrupt_on"] == "workers" and ref.bind(_Device())["corrupt_on"] == "workers"


def test_a_plugin_corruption_stays_in_the_workers_and_says_why(monkeypatch):
    from vlbench.imageperturb import ondevice
    from vlbench.imageperturb.registry import image_perturbations

    class Entry:
        source = "plugin: example"

    monkeypatch.setattr(image_perturbations, "entry", lambda name: Entry())
    device, meta = ondevice.placement("my_blur", "torch", type("A", (), {"pixels": "device", "device": "cpu"})(),
                                      "input")
    assert device is None and meta == {"corrupt_on": "workers", "corrupt_fallback": ondevice.PLUGIN_FALLBACK}


def test_an_image_refused_on_the_device_is_named_by_its_file(tmp_path, monkeypatch):
    from vlbench.encoding.device_conditions import DeviceConditionBatches
    from vlbench.encoding.encode import EncodeStats

    monkeypatch.setenv("VLBENCH_MAX_CORRUPT_PIXELS", "2000")  # the 60 x 45 image is over it, the others not
    paths = []
    for i, (h, w) in enumerate([(37, 53), (60, 45), (20, 26)]):
        paths.append(str(tmp_path / f"im{i}.png"))
        Image.fromarray(_photo(h, w, i)).save(paths[-1])
    t, _ = _bound("contrast", 2, "original")

    class Adapter:
        pixels, device = "device", "cpu"

        def to_pixels(self, images):
            return torch.stack(images)

        def from_pixels(self, batch):
            return batch.float()

    jobs = {f"k{i}": (p, i, f"img:{i:064x}", t) for i, p in enumerate(paths)}
    with pytest.raises(DataError) as err:
        list(DeviceConditionBatches(Adapter(), [["k0", "k1", "k2"]], jobs, EncodeStats()))
    assert err.value.message.startswith(paths[1])
    assert "VLBENCH_MAX_CORRUPT_PIXELS" in err.value.message + str(err.value.hint)


@pytest.mark.slow  # all 15 corruptions at 224 px: several seconds
def test_every_corruption_on_the_cpu_device_gives_the_workers_pixels_at_224():
    from vlbench.imageperturb import NAMES

    images = [_photo(375, 500, 11)]  # a Flickr30k-sized photograph (the portrait fit: the fit test above)
    contents = [f"img:{i + 40:064x}" for i in range(len(images))]
    memo: dict = {}

    class Model(_Device):
        def preprocess(self, image):
            return np.zeros((3, 224, 224), np.float32)

    from vlbench.imageperturb.conditions import CorruptionTransform

    for name in NAMES:
        t = CorruptionTransform(name, 3, 0, "input", backend="torch")
        assert t.bind(Model())["corrupt_on"] == "device"
        got = t.apply_batch([_chw(a) for a in images], [0], contents, memo)
        for i, (img, c) in enumerate(zip(images, contents)):
            want = np.asarray(t(Image.fromarray(img), i, c))
            assert want.shape == (224, 224, 3) and np.array_equal(got[i].permute(1, 2, 0).numpy(), want), name
