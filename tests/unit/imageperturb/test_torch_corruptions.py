"""The torch corruptions (--corrupt-backend torch) against the reference, as docs/image_perturbations.md states:
the same function within 1 grey level (deterministic corruptions on the same pixels, random ones on the reference's
own draws), on photographs and on odd sizes; seeded per image, independent of the batch; clear errors.
The statistics of the random ones under each backend's own draws: tests/integration/test_torch_corruption_stats.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch  # noqa: E402
from support.corruption_agreement import GREY_LEVELS, photos, same_function

from vlbench.errors import VlbenchError
from vlbench.imageperturb import NAMES

DETERMINISTIC = {"defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate", "jpeg_compression"}
EXACT = {"contrast", "pixelate", "jpeg_compression", "shot_noise", "impulse_noise", "snow"}  # 0 levels measured


@pytest.fixture(scope="module")
def photo():
    return photos()[0]  # scikit-image's astronaut at 224 x 224


def test_the_photographs_are_real():
    """scikit-image's photographs, at the run's geometry (not blank or synthetic stand-ins)."""
    imgs = photos()
    assert len(imgs) == 4 and all(im.shape == (224, 224, 3) and im.std() > 30 for im in imgs)


def _odd(h=37, w=53, seed=3):
    rs = np.random.RandomState(seed)
    ramp = np.linspace(0, 255, w)[None, :, None] * np.ones((h, 1, 3))
    return np.uint8(np.clip(0.6 * ramp + 0.4 * rs.rand(h, w, 3) * 255, 0, 255))


def test_which_corruptions_draw_random_numbers():
    from vlbench.imageperturb.ontorch import is_random

    assert {n for n in NAMES if not is_random(n)} == DETERMINISTIC


@pytest.mark.slow  # a few seconds per corruption at 224 px; the 64 px variant below is in the fast lane
@pytest.mark.parametrize("name", NAMES)
def test_same_function_as_the_reference_at_224(name, photo):
    """As the docs table states (224 x 224, as a run corrupts at --corrupt-at input), all severities."""
    for severity in (1, 2, 3, 4, 5):
        got = same_function(name, severity, [photo])
        assert got["max"] <= GREY_LEVELS, (name, severity, got)
        assert got["share"] < 0.05, (name, severity, got)
        if name in EXACT:
            assert got["max"] == 0, (name, severity, got)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "glass_blur" else n for n in NAMES])
def test_same_function_as_the_reference(name):  # glass_blur slow: the reference's loop of copies, ~1 s CPU
    """Within the stated grey levels on a 64 px photograph (severities 1, 3, 5) and an odd 37 x 53 image (all 5)."""
    small = photos(64)[1]
    for severity in (1, 3, 5):
        got = same_function(name, severity, [small])
        assert got["max"] <= GREY_LEVELS, (name, severity, got)
        assert got["share"] < 0.05, (name, severity, got)  # an off-by-one is a rounding edge, not a pattern
        if name in EXACT:
            assert got["max"] == 0 or name == "pixelate", (name, severity, got)  # pixelate: docs (pass order)
    for severity in (1, 2, 3, 4, 5):
        got = same_function(name, severity, [_odd()])
        assert got["max"] <= GREY_LEVELS, (name, severity, got)


def test_glass_blur_moves_equal_the_sequential_copies():
    """The pointer-jumping resolution equals the reference's loop of copies, replayed one by one."""
    from vlbench.imageperturb.ontorch.blur import _moved_sources

    rs = np.random.RandomState(0)
    for h, w, delta in ((9, 11, 1), (12, 10, 2), (15, 15, 4)):
        steps = (h - 2 * delta) * (w - 2 * delta)
        offsets = rs.randint(-delta, delta, size=(steps, 2))
        src = list(range(h * w))  # the reference's copies on an index image, in its order
        k = 0
        for y in range(h - delta, delta, -1):
            for x in range(w - delta, delta, -1):
                dx, dy = offsets[k]
                k += 1
                src[y * w + x] = src[(y + dy) * w + x + dx]
        assert _moved_sources(h, w, delta, torch.as_tensor(offsets)).tolist() == src


@pytest.mark.slow  # seven corruptions over a batch of photos, together and one by one (~3 s CPU)
def test_an_image_does_not_depend_on_its_batch(photo):
    from vlbench.imageperturb.ontorch import corrupt_batch

    small = photos(64)
    x = torch.from_numpy(np.stack(small).transpose(0, 3, 1, 2).copy())
    for name in ("gaussian_noise", "glass_blur", "motion_blur", "snow", "frost", "fog", "elastic_transform"):
        together = corrupt_batch(x, name, 3, [11, 12, 13, 14])
        alone = torch.cat([corrupt_batch(x[i:i + 1], name, 3, [s]) for i, s in enumerate([11, 12, 13, 14])])
        assert torch.equal(together, alone), name
        assert torch.equal(corrupt_batch(x[:1], name, 3, [11]), together[:1])  # and again: seeded, not stateful
        assert not torch.equal(corrupt_batch(x[:1], name, 3, [99]), together[:1])


def test_the_run_path_equals_corrupt_batch():
    from PIL import Image

    from vlbench.imageperturb import corrupt
    from vlbench.imageperturb.apply import derive_seed
    from vlbench.imageperturb.ontorch import corrupt_batch

    img = _odd(40, 48)
    got = np.asarray(corrupt(Image.fromarray(img), "shot_noise", 2, 5, "img-a", backend="torch"))
    seed = derive_seed(5, "shot_noise", 2, "img-a")
    want = corrupt_batch(torch.from_numpy(img.transpose(2, 0, 1).copy())[None], "shot_noise", 2, [seed])
    assert np.array_equal(got, want[0].permute(1, 2, 0).numpy())
    ref = np.asarray(corrupt(Image.fromarray(img), "shot_noise", 2, 5, "img-a"))
    assert not np.array_equal(got, ref)  # the reference draws other numbers


def test_bad_input_is_a_clear_error():
    from vlbench.imageperturb.ontorch import corrupt_batch

    x = torch.zeros((1, 3, 32, 32), dtype=torch.uint8)
    with pytest.raises(VlbenchError):
        corrupt_batch(x.float(), "contrast", 1, [0])
    with pytest.raises(VlbenchError):
        corrupt_batch(x, "speckle_noise", 1, [0])
    with pytest.raises(VlbenchError):
        corrupt_batch(x, "contrast", 6, [0])
    with pytest.raises(VlbenchError):
        corrupt_batch(x, "contrast", 1, [0, 1])


def test_cache_keys_and_records_name_the_backend():
    from vlbench.imageperturb import CorruptedLoader, cache_key
    from vlbench.imageperturb.conditions import image_variants

    assert cache_key("fog", 2, 0) == "img:fog:2:seed0:imagenet-c/2"  # the reference's keys are unchanged
    assert cache_key("fog", 2, 0, "torch") == "img:fog:2:seed0:imagenet-c-torch/1@cpu"
    assert CorruptedLoader("fog", 2, 0, 224, backend="torch").cache_key.endswith("imagenet-c-torch/1@cpu:at224")
    ref, tor = image_variants("fog:2", 0), image_variants("fog:2", 0, backend="torch")
    assert ref[0].meta["corrupt_backend"] == "reference" and tor[0].meta["corrupt_backend"] == "torch"
    assert ref[0].meta["cache_key"] != tor[0].meta["cache_key"]
    with pytest.raises(VlbenchError):
        image_variants("fog:2", 0, backend="cuda")


def test_the_option_is_checked_before_any_work():
    from vlbench.errors import OptionError
    from vlbench.pipeline.run_config import RunConfig, validate

    with pytest.raises(OptionError) as err:
        validate(RunConfig(model="m", dataset="d", corrupt_backend="numpy", perturb_images="fog:1"))
    assert err.value.option == "corrupt_backend"
    with pytest.raises(OptionError) as err:
        validate(RunConfig(model="m", dataset="d", corrupt_backend="torch"))  # no --perturb-images: nothing to do
    assert err.value.option == "corrupt_backend"
    validate(RunConfig(model="m", dataset="d", corrupt_backend="torch", perturb_images="fog:1"))
