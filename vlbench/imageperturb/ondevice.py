"""A run's corruptions on the model's device: ``--pixels device`` with ``--corrupt-backend torch``.

The run's device path (vlbench/encoding/device_conditions.py) decodes the gallery on the model's device and hands
a condition's images to :func:`corrupt_images` as uint8 (3, H, W) tensors; they are corrupted there, in batches,
and go on to the model's preprocessing without leaving the device. Every step is the DataLoader workers' step
computed on tensors: the fit to the model's input is Pillow's arithmetic (:mod:`.ontorch.geometry`), each image
gets the seed the workers give it (:func:`vlbench.imageperturb.apply.derive_seed` of the run seed, corruption,
severity and the image's content key) and draws from its own generator in the same order. On the CPU device the
pixels are therefore the workers' pixels exactly (tested); on CUDA the generators draw other numbers, which the
cache key says (``@cuda``).

Batching: at ``--corrupt-at input`` (the default) every image of a condition is fitted to the same square, so a
batch of them is corrupted in one :func:`~vlbench.imageperturb.ontorch.corrupt_batch` call (fitted once per image
and shared by the conditions of one batch window). At ``--corrupt-at original`` the images keep their own sizes:
they are corrupted one at a time, still on the device. Plug-in corruptions run their own NumPy code and stay in
the DataLoader workers (the condition records ``corrupt_on: workers``).
"""

from __future__ import annotations

from .apply import MIN_SIDE, derive_seed
from .guard import check_size
from .registry import image_perturbations

#: a condition's ``corrupt_batches`` entry, by geometry
BATCHED = "batched: the images of a batch window corrupted together"
ONE_AT_A_TIME = "one image at a time on the device (--corrupt-at original: the images differ in size)"
PLUGIN_FALLBACK = "a plug-in corruption runs its own code in the DataLoader workers"


def device_type(adapter) -> str | None:
    """The type of the device (``cpu``, ``cuda``) that makes the model's pixels when the adapter takes ``--pixels
    device``, found without loading a lazy model; None on the reference pixel path (corruptions in the workers)."""
    if getattr(adapter, "pixels", "reference") != "device":
        return None
    where = getattr(adapter, "scoring_device", None)
    dev = where() if callable(where) else getattr(adapter, "device", "cpu")
    return str(dev).split(":")[0]


def placement(name: str, backend: str, adapter, at: str) -> tuple[str | None, dict]:
    """(device type to corrupt on, or None for the workers; what the condition's results entry records). ``at``:
    the geometry as bound (``original`` also when the model's input is not a square the images can be fitted to)."""
    device = device_type(adapter) if backend == "torch" else None
    if device is None:
        return None, {"corrupt_on": "workers"}
    if image_perturbations.entry(name).source != "builtin":
        return None, {"corrupt_on": "workers", "corrupt_fallback": PLUGIN_FALLBACK}
    return device, {"corrupt_on": "device", "corrupt_batches": BATCHED if at == "input" else ONE_AT_A_TIME}


def _fitted(images: list, contents: list, size: int, memo: dict) -> list:
    """Each image fitted to ``size`` x ``size`` (Pillow's bicubic and centre crop), images of one shape together;
    ``memo`` keeps the fits for the other conditions of the same images."""
    import torch  # lazy: torch only on the device path

    from .ontorch.geometry import fit_to_input

    todo: dict[tuple, list[int]] = {}
    for i, (img, c) in enumerate(zip(images, contents)):
        if ("fit", size, c) not in memo:
            todo.setdefault(tuple(img.shape), []).append(i)
    for rows in todo.values():
        out = fit_to_input(torch.stack([images[i] for i in rows]), size)
        for i, t in zip(rows, out):
            memo[("fit", size, contents[i])] = t
    return [memo[("fit", size, c)] for c in contents]


def corrupt_images(images: list, contents: list, name: str, severity: int, seed: int, input_size: int | None,
                   memo: dict | None = None) -> list:
    """The decoded uint8 (3, H, W) ``images`` (on one device) corrupted as the workers corrupt them: fitted to
    ``input_size`` first (None: at their own size), image i seeded from its content key ``contents[i]``."""
    import torch  # lazy: torch only on the device path

    from .ontorch import corrupt_batch

    memo = {} if memo is None else memo
    if input_size is not None:
        check_size((input_size, input_size), contents[0] if contents else "")
        x = torch.stack(_fitted(images, contents, int(input_size), memo))
        seeds = [derive_seed(seed, name, severity, c) for c in contents]
        return list(corrupt_batch(x, name, severity, seeds))
    return [_at_own_size(img, c, name, severity, seed) for img, c in zip(images, contents)]


def _at_own_size(img, content: str, name: str, severity: int, seed: int):
    """One image corrupted at its own size: a side under 32 pixels enlarged (nearest) first and the result shrunk
    back (box), as :func:`vlbench.imageperturb.apply.corrupt` does."""
    from .ontorch import corrupt_batch
    from .ontorch.geometry import resize

    h, w = int(img.shape[-2]), int(img.shape[-1])
    check_size((w, h), content)
    x = img[None]
    if min(h, w) < MIN_SIDE:
        scale = MIN_SIDE / min(w, h)
        x = resize(x, (max(MIN_SIDE, round(w * scale)), max(MIN_SIDE, round(h * scale))), "nearest")
    out = corrupt_batch(x, name, severity, [derive_seed(seed, name, severity, content)])
    if tuple(out.shape[-2:]) != (h, w):
        out = resize(out, (w, h), "box")
    return out[0]
