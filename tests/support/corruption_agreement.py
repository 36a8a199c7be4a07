"""The torch corruptions against the reference: what scripts/benchmarks/corruption_agreement.py tables
(docs/image_perturbations.md) and the tests (tests/unit/imageperturb/test_torch_corruptions.py,
tests/integration/test_torch_corruption_stats.py) assert, from one set of functions and stated tolerances.

Images: four photographs that scikit-image ships (astronaut, chelsea, coffee, rocket), each brought to 224 x 224 as
a run brings it (shorter side to 224, bicubic, centre crop: :func:`vlbench.imageperturb.fit_to_input`).

* ``same_function``: deterministic corruptions (no random numbers) on the same pixels, and random ones on the
  reference's own draws (vlbench.imageperturb.ontorch.replay): the largest difference in grey levels and the
  share of values that differ at all.
* ``statistics``: random corruptions with each backend's own draws (the reference: NumPy's RandomState; torch:
  torch.Generator): per severity, the mean over photographs and seeds of a statistic of the change each makes,
  and the relative difference between the backends (what ``STATS_TOLERANCE`` bounds).
"""

from __future__ import annotations

import numpy as np

from vlbench.imageperturb.apply import derive_seed, fit_to_input
from vlbench.imageperturb.backend import _FAST, run_reference

PHOTOS = ("astronaut", "chelsea", "coffee", "rocket")
SIDE = 224
#: the stated bound on |torch - reference| in grey levels, same pixels (and for random corruptions the same draws)
GREY_LEVELS = 1
#: the stated bound on the relative difference of a random corruption's statistic between the backends
STATS_TOLERANCE = {"gaussian_noise": 0.02, "shot_noise": 0.02, "impulse_noise": 0.03, "glass_blur": 0.03,
                   "motion_blur": 0.15, "snow": 0.15, "frost": 0.15, "fog": 0.10, "elastic_transform": 0.05}
#: the statistic of each random corruption: "noise std" = std of (out - in) in grey levels; "hit share" = share of
#: values set to 0 or 255 that were not; "mean |change|" = mean |out - in|; "sharpness" = mean squared gradient of
#: out / of in (the blur kernel's energy at high frequencies)
STATISTIC = {"gaussian_noise": "noise std", "shot_noise": "noise std", "impulse_noise": "hit share",
             "glass_blur": "sharpness", "motion_blur": "sharpness", "snow": "mean |change|",
             "frost": "mean |change|", "fog": "mean |change|", "elastic_transform": "mean |change|"}


def photos(side: int = SIDE) -> list[np.ndarray]:
    """The photographs at ``side`` x ``side`` (H x W x 3 uint8)."""
    import skimage.data
    from PIL import Image

    return [np.asarray(fit_to_input(Image.fromarray(getattr(skimage.data, n)()), side)) for n in PHOTOS]


def _torch(img: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))[None]


def reference_output(img: np.ndarray, name: str, severity: int, legacy_seed: int) -> np.ndarray:
    """The reference backend's output as a run gets it (glass_blur and zoom_blur through their exact fast paths,
    equal to the reference code bit for bit: tests/unit/imageperturb/test_corruptions.py)."""
    if name in _FAST:
        return np.uint8(np.clip(_FAST[name]()(img, severity, legacy_seed), 0, 255))
    return run_reference(name, img, severity, legacy_seed)


def torch_output(img: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
    from vlbench.imageperturb.ontorch import corrupt_batch

    return corrupt_batch(_torch(img), name, severity, [seed])[0].permute(1, 2, 0).numpy()


def same_function(name: str, severity: int, images: list[np.ndarray], legacy_seed: int = 5) -> dict:
    """{"max": largest |torch - reference| in grey levels, "share": share of values that differ} over ``images``,
    the reference's draws fed to the torch code for a random corruption."""
    from vlbench.imageperturb.ontorch import apply_draws, is_random
    from vlbench.imageperturb.ontorch.replay import reference_draws

    worst, differ, total = 0, 0, 0
    for img in images:
        draws = [reference_draws(name, img, severity, legacy_seed)] if is_random(name) else None
        got = apply_draws(_torch(img), name, severity, draws)[0].permute(1, 2, 0).numpy().astype(int)
        diff = np.abs(got - reference_output(img, name, severity, legacy_seed).astype(int))
        worst, differ, total = max(worst, int(diff.max())), differ + int((diff > 0).sum()), total + diff.size
    return {"max": worst, "share": differ / total}


def statistic(name: str, clean: np.ndarray, out: np.ndarray) -> float:
    x, y = clean.astype(np.float64), out.astype(np.float64)
    kind = STATISTIC[name]
    if kind == "noise std":
        return float(np.std(y - x))
    if kind == "hit share":
        return float(np.mean(((y == 0) | (y == 255)) & (x != y)))
    if kind == "sharpness":
        def energy(a):
            return float(np.mean(np.diff(a, axis=0) ** 2) + np.mean(np.diff(a, axis=1) ** 2))
        return energy(y) / energy(x)
    return float(np.mean(np.abs(y - x)))


def statistics(name: str, severity: int, images: list[np.ndarray], seeds: int = 8) -> dict:
    """{"reference": mean statistic, "torch": mean statistic, "rel": |torch - reference| / reference} over
    ``images`` x ``seeds`` (per-image seeds derived as a run derives them)."""
    ref, tor = [], []
    for i, img in enumerate(images):
        for s in range(seeds):
            seed = derive_seed(s, name, severity, f"photo{i}")
            legacy = int(np.random.Generator(np.random.PCG64(seed)).integers(0, 2**32))
            ref.append(statistic(name, img, reference_output(img, name, severity, legacy)))
            tor.append(statistic(name, img, torch_output(img, name, severity, seed)))
    r, t = float(np.mean(ref)), float(np.mean(tor))
    return {"reference": r, "torch": t, "rel": abs(t - r) / abs(r)}


#: the corruptions that draw no random numbers: the same pixels go in under both backends
DETERMINISTIC = ("defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate", "jpeg_compression")


def record_changes(folder, n_images: int = 24, severity: int = 3, corrupt_at: str = "input") -> dict[str, dict]:
    """How far the deterministic corruptions' 1-grey-level differences move a run's numbers: a tiny CLIP (random
    weights, 16-d; tests/support/tiny_models.py, seed 0) on ``n_images`` synthetic images with real captions, the
    deterministic corruptions at ``severity``, once with ``--corrupt-backend reference`` and once with ``torch``
    (CPU, one thread, no loader workers), corrupted at ``corrupt_at`` (``input``: the model's 32 px input geometry,
    the default of a run; ``original``: each image's own size). Per corruption: the metric records of its
    condition, how many differ at all between the backends (which metrics, the largest difference), and both runs'
    RSUM (both directions)."""
    import json
    from pathlib import Path

    import torch
    from support.data import write_manifest
    from support.tiny_models import save_clip

    import vlbench

    folder = Path(folder)
    model = save_clip(folder / "clip")
    manifest = write_manifest(folder / "data", n=n_images)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the encoder's CPU forward depends on the thread count: one, on every machine
    try:
        records = {}
        for backend in ("reference", "torch"):
            vlbench.run(model=f"clip:{model}", dataset=f"custom:{manifest}",
                        perturb_images=",".join(f"{n}:{severity}" for n in DETERMINISTIC), corrupt_backend=backend,
                        out=str(folder / backend), quiet=True, num_workers=0, n_boot=10, validity="off",
                        cache_dir=str(folder / "cache"), device="cpu", corrupt_at=corrupt_at)
            doc = json.loads((folder / backend / "results.json").read_text())
            records[backend] = {(r["condition"], r["direction"], r["metric"], r.get("k")): r["value"]
                                for r in doc["results"]}
    finally:
        torch.set_num_threads(threads)
    out = {}
    for name in DETERMINISTIC:
        cond = f"img:{name}:{severity}"
        keys = sorted((k for k in records["reference"] if k[0] == cond), key=str)
        assert keys and set(keys) == {k for k in records["torch"] if k[0] == cond}, name
        out[name] = {"records": len(keys),
                     "differ": sum(records["reference"][k] != records["torch"][k] for k in keys),
                     "metrics_that_differ": sorted({f"{k[1]} {k[2]}" + (f"@{k[3]}" if k[3] is not None else "")
                                                    for k in keys if records["reference"][k] != records["torch"][k]}),
                     "largest_difference": max(abs(records["reference"][k] - records["torch"][k]) for k in keys),
                     "rsum_reference": records["reference"][(cond, "both", "rsum", None)],
                     "rsum_torch": records["torch"][(cond, "both", "rsum", None)]}
    return out
