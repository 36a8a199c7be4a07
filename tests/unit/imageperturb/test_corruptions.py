"""Image corruptions: reference equality, independent definitions, determinism, spec parser, mCE."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from vlbench.errors import UnknownNameError, VlbenchError
from vlbench.imageperturb import (NAMES, ImageCondition, CorruptedLoader, cache_key, corrupt, family_of,
                                  mean_corruption_error, parse_spec)
from vlbench.imageperturb.apply import derive_seed
from vlbench.imageperturb.mce import corruption_errors


def _image(h=40, w=48, seed=0):
    rs = np.random.RandomState(seed)
    ramp = np.linspace(0, 255, w)[None, :, None] * np.ones((h, 1, 3))
    return np.uint8(np.clip(0.6 * ramp + 0.4 * rs.rand(h, w, 3) * 255, 0, 255))


def _legacy_seed(seed, name, severity, image_id):
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, name, severity, image_id)))
    return int(rng.integers(0, 2**32))


@pytest.mark.parametrize("name", NAMES)
def test_equals_reference(name):
    """Each corruption equals imagecorruptions' function run with the same global-RandomState draws."""
    from vlbench.imageperturb.backend import _load
    ref = _load()
    x = _image()
    for severity in (1, 3, 5):
        np.random.seed(_legacy_seed(11, name, severity, "img-1"))
        expected = np.uint8(getattr(ref, name)(Image.fromarray(x), severity))
        got = np.asarray(corrupt(Image.fromarray(x), name, severity, 11, "img-1"))
        assert got.shape == x.shape
        assert np.array_equal(got, expected), (name, severity)  # tolerance: exact


def test_gaussian_noise_definition():
    """x/255 + N(0, c^2), clipped to [0, 1], times 255, truncated to uint8; c = 0.18 at severity 3."""
    x = _image()
    noise = np.random.RandomState(_legacy_seed(3, "gaussian_noise", 3, 7)).normal(size=x.shape, scale=0.18)
    expected = np.uint8(np.clip(x / 255.0 + noise, 0, 1) * 255)
    assert np.array_equal(np.asarray(corrupt(Image.fromarray(x), "gaussian_noise", 3, 3, 7)), expected)


def test_impulse_noise_definition():
    """Salt-and-pepper noise with amount c = 0.09 at severity 3 (skimage's s&p, rng seeded per image)."""
    from skimage.util import random_noise
    x = _image()
    draw = np.random.RandomState(_legacy_seed(0, "impulse_noise", 3, "q")).randint(0, 2**32, dtype=np.uint64)
    noisy = random_noise(x / 255.0, mode="s&p", amount=0.09, rng=np.random.default_rng(int(draw)))
    expected = np.uint8(np.clip(noisy, 0, 1) * 255)
    got = np.asarray(corrupt(Image.fromarray(x), "impulse_noise", 3, 0, "q"))
    assert np.array_equal(got, expected)
    assert 0.05 < np.mean(got != x) < 0.13  # about 9% of values replaced (some by an equal value)


def test_contrast_definition():
    """(x - channel-agnostic image mean) * c + mean, c = 0.1 at severity 4; no randomness."""
    x = np.zeros((32, 32, 3), np.uint8)
    x[:, :16] = 255  # mean 0.5 -> 0.5 +- 0.05 -> 0.55 * 255 = 140.25, 0.45 * 255 = 114.75
    out = np.asarray(corrupt(Image.fromarray(x), "contrast", 4, 0, "a"))
    assert set(np.unique(out[:, :16])) == {140} and set(np.unique(out[:, 16:])) == {114}


def test_glass_blur_fast_equals_reference_loop():
    from vlbench.imageperturb.backend import run_reference
    from vlbench.imageperturb.glass import glass_blur
    x = _image(37, 50, seed=4)
    for severity in range(1, 6):
        fast = np.uint8(np.clip(glass_blur(x, severity, 99), 0, 255))
        assert np.array_equal(fast, run_reference("glass_blur", x, severity, 99))


@pytest.mark.parametrize("mode,size", [("L", (50, 40)), ("RGBA", (40, 60)), ("P", (33, 70)),
                                       ("RGB", (12, 9)), ("RGB", (300, 90))])
def test_any_size_and_mode(mode, size):
    img = Image.fromarray(_image(size[1], size[0])).convert(mode)
    for name in ("frost", "zoom_blur", "fog", "pixelate"):
        out = corrupt(img, name, 5, 0, "x")
        assert out.mode == "RGB" and out.size == size


def test_rgba_composited_over_white():
    img = Image.new("RGBA", (40, 40), (0, 0, 0, 0))  # fully transparent -> white before corruption
    out = np.asarray(corrupt(img, "brightness", 1, 0, "t"))
    assert out.min() == 255


def test_deterministic_and_depends_on_inputs():
    img = Image.fromarray(_image())
    for name in NAMES:
        assert corrupt(img, name, 2, 5, "id-1").tobytes() == corrupt(img, name, 2, 5, "id-1").tobytes(), name
    a = corrupt(img, "shot_noise", 2, 5, "id-1").tobytes()
    assert a != corrupt(img, "shot_noise", 2, 5, "id-2").tobytes()
    assert a != corrupt(img, "shot_noise", 2, 6, "id-1").tobytes()
    np.random.seed(1)
    state = np.random.get_state()[1].copy()
    corrupt(img, "snow", 2, 5, "id-1")
    assert np.array_equal(np.random.get_state()[1], state)  # the caller's global state is untouched


class _Images:
    def __init__(self, n):
        self.n, self.loader = n, CorruptedLoader("motion_blur", 3, seed=2)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.array(self.loader(Image.fromarray(_image(seed=i)), f"im{i}"))


def test_byte_identical_across_worker_counts():
    import torch
    ds = _Images(6)
    outs = []
    for workers in (0, 2, 0):
        dl = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=workers)
        outs.append(b"".join(batch.numpy().tobytes() for batch in dl))
    assert outs[0] == outs[1] == outs[2]
    assert pickle.loads(pickle.dumps(ds.loader)).cache_key == ds.loader.cache_key


def test_cache_key_and_loader_validation():
    assert cache_key("fog", 2, 0) == "img:fog:2:seed0:imagenet-c/2"
    assert cache_key("fog", 2, 0) != cache_key("fog", 3, 0) != cache_key("fog", 2, 1)
    with pytest.raises(UnknownNameError, match="did you mean 'fog'"):
        CorruptedLoader("fgo", 1)
    with pytest.raises(VlbenchError, match="outside 1-5"):
        corrupt(Image.new("RGB", (40, 40)), "fog", 6, 0, "a")


def test_parse_spec():
    conds = parse_spec("gaussian_noise:3,motion-blur:1-5,all:3")
    assert len(conds) == 15 + 4  # all:3 includes gaussian_noise:3 and motion_blur:3
    assert ImageCondition("motion_blur", 5) in conds and ImageCondition("pixelate", 3) in conds
    assert parse_spec("noise:1") == [ImageCondition(n, 1) for n in sorted(["gaussian_noise", "shot_noise",
                                                                         "impulse_noise"])]
    assert len(parse_spec("fog")) == 5 and family_of("fog") == "weather"
    for bad, msg in [("gausian_noise:3", "did you mean 'gaussian_noise'"), ("fog:0", "outside 1-5"),
                     ("fog:2-9", "outside 1-5"), ("fog:x", "not a number"), (" , ", "names no corruption")]:
        with pytest.raises(VlbenchError, match=msg):
            parse_spec(bad)


def test_mean_corruption_error_hand_worked():
    # R@1 (%) of model and reference on two corruptions x two severities
    errors = {("fog", 1): 100 - 60, ("fog", 2): 100 - 40, ("snow", 1): 100 - 70, ("snow", 2): 100 - 50}
    ref = {("fog", 1): 50, ("fog", 2): 70, ("snow", 1): 40, ("snow", 2): 60}
    # fog: (40 + 60) / (50 + 70) = 100/120 = 0.8333; snow: (30 + 50) / (40 + 60) = 0.8; mean 0.81667
    assert corruption_errors(errors, ref) == pytest.approx({"fog": 100 / 120, "snow": 0.8})
    assert mean_corruption_error(errors, ref) == pytest.approx((100 / 120 + 0.8) / 2)
    # unnormalised: fog mean 50, snow mean 40 -> 45
    assert mean_corruption_error(errors) == pytest.approx(45.0)
    with pytest.raises(VlbenchError, match="no error for snow"):
        mean_corruption_error(errors, {k: v for k, v in ref.items() if k[0] == "fog"})


def test_light_import():
    code = ("import sys, vlbench.imageperturb as ip; ip.parse_spec('all:3'); ip.image_perturbations.names();"
            "bad = [m for m in ('torch', 'scipy', 'skimage', 'cv2', 'numpy') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plugin_function_interface():
    """A plug-in entry (as an entry point would provide) is called with (uint8 array, severity, Generator)."""
    from vlbench.imageperturb import image_perturbations
    seen = {}

    def invert(x, severity, rng):
        seen["args"] = (x.dtype, x.shape, severity, type(rng).__name__)
        return 255 - x

    image_perturbations.register("test_invert", invert, source="plugin:demo 1.0")
    try:
        x = _image()
        out = np.asarray(corrupt(Image.fromarray(x), "test_invert", 2, 0, "p"))
        assert np.array_equal(out, 255 - x)
        assert seen["args"] == (np.uint8, (40, 48, 3), 2, "Generator")
        assert cache_key("test_invert", 2, 0) == "img:test_invert:2:seed0:plugin:demo 1.0"
        assert parse_spec("test-invert:2") == [ImageCondition("test_invert", 2)]
        assert family_of("test_invert") == "plugin"
    finally:
        del image_perturbations._entries["test_invert"]


@pytest.mark.slow  # the reference zoom blur at photo sizes
@pytest.mark.parametrize("shape", [(224, 224, 3), (120, 161, 3), (161, 120, 3), (32, 200, 3)])
def test_fast_zoom_blur_equals_reference_at_photo_sizes(shape):
    """The separable zoom_blur equals scipy.ndimage.zoom's (the reference) bit for bit, square or not."""
    from vlbench.imageperturb.backend import run_reference
    from vlbench.imageperturb.zoom import zoom_blur
    x = _image(*shape[:2], seed=3)
    for severity in range(1, 6):
        fast = np.uint8(np.clip(np.asarray(zoom_blur(x, severity), dtype=np.float64), 0, 255))
        assert np.array_equal(fast, run_reference("zoom_blur", x, severity, 0)), (shape, severity)


def test_fit_to_input_is_clip_geometry():
    """Shorter side to 224 (bicubic), centre crop: the pixels a CLIP-style preprocessor would keep."""
    from vlbench.imageperturb import fit_to_input
    img = Image.fromarray(_image(300, 500))
    out = fit_to_input(img, 224)
    assert out.size == (224, 224)
    resized = img.resize((373, 224), Image.BICUBIC)  # 500 * 224 / 300 = 373.3 -> 373
    left = int(round((373 - 224) / 2.0))
    assert np.array_equal(np.asarray(out), np.asarray(resized.crop((left, 0, left + 224, 224))))
    same = Image.fromarray(_image(224, 224))
    assert np.array_equal(np.asarray(fit_to_input(same, 224)), np.asarray(same))  # already at input size


def test_loader_at_input_size():
    img = Image.fromarray(_image(300, 500))
    at = CorruptedLoader("zoom_blur", 2, seed=5, input_size=64)
    plain = CorruptedLoader("zoom_blur", 2, seed=5)
    assert at.cache_key == plain.cache_key + ":at64"  # another geometry, another cache entry
    from vlbench.imageperturb import fit_to_input
    expected = corrupt(fit_to_input(img, 64), "zoom_blur", 2, 5, "a")
    assert np.array_equal(np.asarray(at(img, "a")), np.asarray(expected))
    assert at(img, "a").size == (64, 64) and plain(img, "a").size == (500, 300)
    assert pickle.loads(pickle.dumps(at)).input_size == 64
    with pytest.raises(VlbenchError, match="input_size"):
        CorruptedLoader("zoom_blur", 2, input_size=8)


def test_model_input_size_from_preprocessing():
    from vlbench.imageperturb import model_input_size
    assert model_input_size(lambda im: np.zeros((3, 224, 224))) == 224
    assert model_input_size(lambda im: np.zeros((3, 256, 320))) is None  # not square: corrupt the original
    assert model_input_size(lambda im: im) is None  # a PIL image has no C x H x W shape
