"""Image-perturbation plug-ins that misbehave, the pixel limit for --corrupt-at original,
and --mce-reference on another dataset."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image

from vlbench.cli import main
from vlbench.errors import DataError, VlbenchError
from vlbench.imageperturb import corrupt
from vlbench.imageperturb.registry import image_perturbations

SOURCE = "plugin:demo-corruptions 0.3"


def _raises(x, severity, rng):
    raise ValueError("boom in the plug-in")


def _wrong_shape(x, severity, rng):
    return x[:10, :10]


def _unit_floats(x, severity, rng):
    return x / 255.0


def _nan(x, severity, rng):
    out = x.astype(np.float64)
    out[0, 0, 0] = np.nan
    return out


def _global_noise(x, severity, rng):
    """Uses NumPy's global RandomState (and Python's random), not ``rng``: one grey level per image."""
    return np.full_like(x, np.random.randint(0, 256)) // 2 + random.randrange(0, 2)


PLUGINS = {"t_raises": _raises, "t_wrong_shape": _wrong_shape, "t_unit_floats": _unit_floats, "t_nan": _nan,
           "t_global_noise": _global_noise}


@pytest.fixture(scope="module", autouse=True)
def plugins():
    for name, fn in PLUGINS.items():
        image_perturbations.register(name, fn, source=SOURCE)
    yield
    for name in PLUGINS:
        del image_perturbations._entries[name]


def _img(h=40, w=48, seed=0):
    return Image.fromarray(np.random.RandomState(seed).randint(0, 256, (h, w, 3)).astype(np.uint8))


@pytest.mark.parametrize("name, said", [
    ("t_raises", "raised ValueError: boom in the plug-in on image 'a' at severity 2"),
    ("t_wrong_shape", "returned shape (10, 10, 3) for image 'a', expected (40, 48, 3)"),
    ("t_unit_floats", "returned floats in [0, 1] (max 1) for image 'a'"),
    ("t_nan", "returned 1 NaN or infinite values of 5760 for image 'a'"),
])
def test_bad_plugin_output_is_a_clear_error(name, said):
    with pytest.raises(DataError) as info:
        corrupt(_img(), name, 2, 0, "a")
    assert f"image perturbation {name!r} ({SOURCE})" in info.value.message and said in info.value.message
    assert name in info.value.hint


def test_black_input_may_give_unit_floats():
    """A plug-in's output in [0, 1] is refused only when the input was not black itself."""
    out = corrupt(Image.new("RGB", (40, 40)), "t_unit_floats", 1, 0, "black")
    assert np.asarray(out).max() == 0


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("name", ["t_raises", "t_wrong_shape"])
def test_bad_plugin_in_a_run_exits_2_without_traceback(counting_plugin, manifest, tmp_path, capsys, name, workers):
    rc = main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--perturb-images", f"{name}:1",
               "--num-workers", workers, "--quiet", "--out", str(tmp_path / "x"), "--validity", "off"])
    err = capsys.readouterr().err
    assert rc == 2 and f"image perturbation {name!r} ({SOURCE})" in err, err
    assert "Traceback" not in err and "images/img0" in err  # names the image file
    assert not (tmp_path / "x" / "results.json").exists()


def test_global_random_state_is_seeded_per_image():
    """The value a plug-in draws from the global states is fixed by (seed, name, severity, image id): worked
    out with the same seeding, whatever the caller did to the global state before; the caller's state is
    restored."""
    from vlbench.imageperturb.guard import _global_seed

    words = _global_seed("7|t_global_noise|3|img-1")
    expected_np = np.random.RandomState(words).randint(0, 256)
    random.seed(bytes(np.asarray(words, dtype="<u4").tobytes()))
    expected = expected_np // 2 + random.randrange(0, 2)
    for prior in (1, 2):
        np.random.seed(prior)
        random.seed(prior)
        out = np.asarray(corrupt(_img(), "t_global_noise", 3, 7, "img-1"))
        assert (out == expected).all()
        assert np.random.rand() == np.random.RandomState(prior).rand()  # caller's global state put back
        assert random.random() == random.Random(prior).random()
    other = np.asarray(corrupt(_img(), "t_global_noise", 3, 7, "img-2"))
    assert other[0, 0, 0] == np.random.RandomState(_global_seed("7|t_global_noise|3|img-2")).randint(0, 256) // 2 \
        + random.Random(bytes(np.asarray(_global_seed("7|t_global_noise|3|img-2"), dtype="<u4").tobytes())
                        ).randrange(0, 2)


def test_global_random_plugin_same_with_0_and_2_workers(manifest):
    import torch

    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.encode import file_key
    from vlbench.encoding.variant_images import _VariantImages
    from vlbench.imageperturb.conditions import CorruptionTransform

    ds = load_dataset(f"custom:{manifest}")
    t = CorruptionTransform("t_global_noise", 2, 5, "original")
    jobs = [(str(ds.image_path(i)), i, file_key(ds.image_path(i)), t) for i in range(ds.n_images)]
    runs = {}
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(_VariantImages(jobs, lambda im: np.asarray(im)[0, 0, 0]),
                                             batch_size=2, num_workers=workers, collate_fn=list)
        runs[workers] = [int(v) for batch in loader for v in batch]
    assert runs[0] == runs[2] and len(set(runs[0])) > 3  # one grey level per image, not one per worker
    assert runs[0][0] == int(np.asarray(corrupt(_img(), "t_global_noise", 2, 5, jobs[0][2]))[0, 0, 0])


def test_pixel_limit_for_original_size(monkeypatch):
    """The limit is patched down to 40 x 40 = 1,600 pixels: a 48 x 40 image (1,920) is refused by name, with
    the option to use; 40 x 40 passes; a bad limit value is reported as such, not as a bad image."""
    monkeypatch.setenv("VLBENCH_MAX_CORRUPT_PIXELS", "1600")
    with pytest.raises(DataError) as info:
        corrupt(_img(40, 48), "contrast", 1, 0, "photo.jpg")
    msg = info.value.message
    assert "image 'photo.jpg' is 48 x 40 pixels (1,920), above the 1,600-pixel limit" in msg
    assert "--corrupt-at input" in info.value.hint and "VLBENCH_MAX_CORRUPT_PIXELS" in info.value.hint
    assert corrupt(_img(40, 40), "contrast", 1, 0, "ok").size == (40, 40)
    monkeypatch.setenv("VLBENCH_MAX_CORRUPT_PIXELS", "lots")
    with pytest.raises(VlbenchError, match="VLBENCH_MAX_CORRUPT_PIXELS='lots' is not a positive whole number"):
        corrupt(_img(), "contrast", 1, 0, "x")
    monkeypatch.delenv("VLBENCH_MAX_CORRUPT_PIXELS")
    from vlbench.imageperturb.guard import MAX_CORRUPT_PIXELS, check_size

    with pytest.raises(DataError, match=r"8000 x 8000 pixels \(64,000,000\).*about 1.43 GiB"):
        check_size((8000, 8000), "huge.jpg")  # the case, refused before any float64 array exists
    check_size((4000, 4000), "ok.jpg")
    assert MAX_CORRUPT_PIXELS == 16_000_000


def test_pixel_limit_in_a_run_is_exit_2(counting_plugin, manifest, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VLBENCH_MAX_CORRUPT_PIXELS", "100")  # the fixture's images are 30 x 24 and up
    rc = main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--perturb-images", "contrast:1",
               "--corrupt-at", "original", "--num-workers", "2", "--quiet", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "above the 100-pixel limit" in err and "--corrupt-at input" in err
    assert "Traceback" not in err


def test_mce_reference_on_another_dataset_is_refused(counting_plugin, manifest, tmp_path, capsys):
    other = manifest.parent / "other.jsonl"  # 8 of the 12 images: another dataset
    other.write_text("".join(x + "\n" for x in manifest.read_text().splitlines()[:8]))
    common = ["--model", "counting", "--perturb-images", "contrast:1", "--quiet", "--num-workers", "0",
              "--validity", "off"]
    assert main(["run", "--dataset", f"custom:{other}", "--out", str(tmp_path / "ref")] + common) == 0
    capsys.readouterr()
    rc = main(["run", "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "m"),
               "--mce-reference", str(tmp_path / "ref")] + common)
    err = capsys.readouterr().err
    assert rc == 2 and "--mce-reference" in err and "another dataset" in err, err
    assert not (tmp_path / "m" / "results.json").exists()
