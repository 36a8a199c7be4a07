"""Image corruptions as run conditions (``vlbench run --perturb-images``) and their summary (mCE).

Condition ``img:<name>:<severity>``: the gallery images corrupted (both directions: i2t queries with
corrupted images, t2i ranks a corrupted gallery), the captions clean. Each corrupted image is encoded once
and cached under (corruption, severity, seed, implementation version, image content).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..conditions import RunCondition as Variant
from ..errors import VlbenchError
from ..results import DIRECTIONS, RunRecord, UnreadableResults
from ..runfolder import MAX_RESULTS_BYTES, results_path
from ..util.io import read_regular_file
from .mce import corruption_errors, error_from_metric
from .spec import IMPLEMENTATION_VERSION, TORCH_DEVICE, TORCH_VERSION, check_backend, family_of, parse_spec

PREFIX = "img:"
CORRUPT_AT = ("input", "original")  # --corrupt-at


class CorruptionTransform:
    """The ImageTransform of one (corruption, severity, seed); the image id is the file's content hash,
    so the corrupted pixels depend only on (seed, corruption, severity, image content, geometry).

    ``at="input"`` (default): corrupt at the model's input geometry (shorter side to the input size, centre
    crop, as ImageNet-C does), found from the model's preprocessing when the run binds the transform;
    ``at="original"``: corrupt the decoded image at its own size. ``backend``: ``reference`` (the reference
    code) or ``torch`` (vlbench/imageperturb/ontorch: on the CPU in the loader's workers, or, when the model makes
    its pixels on its device (``--pixels device``), there, in batches: :meth:`apply_batch`, :mod:`.ondevice`)."""

    def __init__(self, name: str, severity: int, seed: int, at: str = "input", backend: str = "reference"):
        if at not in CORRUPT_AT:
            raise VlbenchError(f"unknown corruption geometry {at!r}", "use --corrupt-at input or original")
        from .apply import CorruptedLoader  # lazy: PIL; --help imports this module

        self.name, self.severity, self.seed, self.at = name, int(severity), int(seed), at
        self.backend = check_backend(backend)
        self.loader = CorruptedLoader(name, severity, seed, backend=backend)
        self.device: str | None = None  # the device type it corrupts on (bind: --pixels device); None: the workers

    @property
    def on_device(self) -> bool:
        """Whether the run's device path corrupts this condition's images (:meth:`apply_batch`), not the workers."""
        return self.device is not None

    def bind(self, adapter) -> dict:
        """Fix the geometry from the model's preprocessing and where the corruption runs (the model's device under
        ``--pixels device`` with the torch backend, else the workers); called once per run, before cache keys.
        Returns what the condition's results entry gains from it (geometry, placement, version, cache key)."""
        from .apply import CorruptedLoader, model_input_size  # lazy: PIL; --help imports this module
        from .ondevice import placement  # lazy: as above

        size = model_input_size(adapter.preprocess) if self.at == "input" else None
        self.device, where = placement(self.name, self.backend, adapter, "input" if size else "original")
        self.loader = CorruptedLoader(self.name, self.severity, self.seed, input_size=size, backend=self.backend,
                                      device=self.device or TORCH_DEVICE)
        out = {"corrupted_at": size or "original size", "cache_key": self.loader.cache_key, **where}
        if self.device is not None:
            out["version"] = f"{TORCH_VERSION}@{self.device}"
        return out

    def key(self, index: int, content: str) -> str:
        return self.loader.cache_key

    def apply_batch(self, images: list, indices: list, contents: list, memo: dict | None = None) -> list:
        """The decoded uint8 (3, H, W) tensors ``images`` corrupted where they lie (the device path); the same
        pixels as :meth:`__call__` on the CPU. ``memo``: fits shared by the conditions of one batch window."""
        from .ondevice import corrupt_images  # lazy: torch only on the device path

        return corrupt_images(images, contents, self.name, self.severity, self.seed, self.loader.input_size, memo)

    def __call__(self, image, index: int, content: str):
        """Same pixels as ``self.loader(image, content)``; the fit to the input geometry is shared by the
        conditions of one image (consecutive calls with the same image object)."""
        from .apply import _to_rgb, corrupt, fit_to_input  # lazy: PIL; --help imports this module

        size = self.loader.input_size
        if size is None:
            return self.loader(image, content)
        global _FITTED
        if _FITTED is None or _FITTED[0] is not image or _FITTED[1] != size:
            _FITTED = (image, size, fit_to_input(_to_rgb(image, content), size))
        return corrupt(_FITTED[2], self.name, self.severity, self.seed, content, self.backend)


_FITTED: tuple | None = None  # (decoded image, size, fitted image) of the last call, per process


def image_variants(spec: str | None, seed: int, at: str = "input", backend: str = "reference") -> list:
    """The Variants of a ``--perturb-images`` spec (``gaussian_noise:3,motion_blur:1-5,all:3``); ``backend``:
    ``--corrupt-backend`` (recorded per condition as ``corrupt_backend``, with the torch code's version and device;
    ``corrupt_on``: the workers, until binding to a model that makes its pixels on its device says otherwise)."""
    if not spec:
        return []
    out = []
    version = IMPLEMENTATION_VERSION if check_backend(backend) == "reference" else f"{TORCH_VERSION}@{TORCH_DEVICE}"
    for c in parse_spec(spec):
        fam = family_of(c.name)
        meta = {"perturbation": PREFIX + c.label, "kind": "image", "corruption": c.name, "severity": c.severity,
                "family": f"image-{fam}", "corruption_family": fam, "seed": seed,
                "version": version, "corrupt_backend": backend, "corrupt_on": "workers", "not_applicable_rate": 0.0,
                "applied_to": "i2t: the query images; t2i: the gallery images; captions clean"}
        t = CorruptionTransform(c.name, c.severity, seed, at, backend)
        meta["cache_key"] = t.loader.cache_key
        out.append(Variant(PREFIX + c.label, meta, image=t, kind="image"))
    return out


def _r1_errors(rec, direction: str) -> dict:
    """{(corruption, severity): 100 - R@1} of one direction, from a run's typed record."""
    out = {}
    for c, cond in rec.conditions.items():
        r1 = rec.value(c, direction, "recall", 1)
        if cond.meta.get("kind") == "image" and r1 is not None:
            out[(cond.meta["corruption"], int(cond.meta["severity"]))] = error_from_metric(r1)
    return out


def check_same_dataset(reference, name: str, digest: str, path=None) -> None:
    """VlbenchError unless the reference run was made on the dataset (``name``, content hash ``digest``):
    an mCE divides by the reference model's errors on the same images and captions, so another dataset's
    run (or another subset, gallery or caption file of it) gives a meaningless ratio."""
    ref_ds = reference.dataset
    if ref_ds.hash != digest:
        where = path or reference.run_id
        raise VlbenchError(f"--mce-reference {str(where)!r} was run on another dataset: {ref_ds.name!r} (content "
                           f"hash {ref_ds.hash[:12]}) where this run uses {name!r} ({digest[:12]})",
                           "name a reference run made on the same dataset (same captions, images and gallery), "
                           "or run the reference model on this one first")


def read_reference(path: str, dataset=None):
    """The typed record (vlbench.results.RunRecord) of a reference run (a run folder or its results.json);
    with ``dataset`` (a vlbench Dataset), refused unless it was run on that dataset (:func:`check_same_dataset`)."""
    p = Path(path).expanduser()
    p = results_path(p) if p.is_dir() else p
    try:  # a results file is a few MB at most; a FIFO or device is refused unread
        rec = RunRecord.from_json(json.loads(read_regular_file(p, MAX_RESULTS_BYTES).decode("utf-8")), str(p))
    except (UnreadableResults, OSError, ValueError) as exc:
        raise VlbenchError(f"--mce-reference {path!r} is not a readable vlbench run ({exc})",
                           "name the run folder (or results.json) of the reference model's --perturb-images run") \
            from None
    if dataset is not None:
        check_same_dataset(rec, dataset.name, dataset.content_hash(), path)
    return rec


def corruption_summary(rec, reference=None) -> dict | None:
    """mCE per direction (ImageNet-C, error = 100 - R@1) of the run record ``rec``, relative to
    ``reference`` (the record of another model's run on the same conditions) when given, else
    unnormalised (mean error)."""
    if not any(c.meta.get("kind") == "image" for c in rec.conditions.values()):
        return None
    directions: dict[str, dict] = {}
    out = {"error": "100 - R@1 (percent)", "reference": None, "directions": directions}
    if reference is not None:
        check_same_dataset(reference, rec.dataset.name, rec.dataset.hash)
        out["reference"] = {"run_id": reference.run_id, "model": reference.model.spec,
                            "dataset": reference.dataset.name, "dataset_hash": reference.dataset.hash}
    for d in DIRECTIONS:
        errs = _r1_errors(rec, d)
        ref = _r1_errors(reference, d) if reference else None
        ce = corruption_errors(errs, ref)
        directions[d] = {"ce": ce, "mce": sum(ce.values()) / len(ce)}
    return out
