"""A run's conditions, one type for all kinds: the clean set, a caption perturbation, an image perturbation
(corruption), a shortcut probe, a gallery with injected distractors (``--distractors``) and a caption-length
budget (``--token-budget``, ``--sentence-budget``) are each a
:class:`RunCondition`.

A condition says what the model sees: the clean captions or its own (``texts``), the clean images or the
gallery passed through an :class:`ImageTransform` (``image``), and what results.json records about it
(``meta``). The modules that make conditions (vlbench/perturbations, vlbench/imageperturb,
vlbench/shortcuts) build these; the run pipeline (vlbench/pipeline) plans, encodes and scores them without
asking which kind it holds. Conditions are frozen: no step changes another step's condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

#: the kinds of condition, in the order a run lists them
KINDS = ("clean", "caption", "image", "shortcut", "gallery", "budget")


class ImageTransform(Protocol):
    """Picklable (it runs in DataLoader workers). ``index``: the image's position in the gallery;
    ``content``: its file's content key (``img:<sha256>``)."""

    def key(self, index: int, content: str) -> str | None: ...  # None: the image is left as it is

    def __call__(self, image, index: int, content: str): ...


@dataclass(frozen=True)
class RunCondition:
    """One condition of a run. ``name`` is its name in results (``clean``, ``char-swap``,
    ``img:gaussian_noise:3``, ``shortcut:matched``)."""

    name: str
    meta: Mapping[str, Any]  # its entry in results.json "conditions" (the record step adds validity)
    image: ImageTransform | None = None  # None: the clean images
    texts: tuple[str, ...] | None = None  # None: the clean captions
    kind: str = "clean"  # one of KINDS
    #: the caption perturbation's full output (vlbench.perturbations.PerturbedSet: applicability per caption),
    #: which validity and the audit file read; None for the other kinds
    perturbation: Any = field(default=None, repr=False, compare=False)
    #: kind "gallery": the injected candidates (vlbench.datasets.distractors.DistractorSet): the clean queries
    #: rank the real gallery plus these (vlbench/pipeline/distractors.py); None for the other kinds
    gallery: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"condition {self.name!r}: unknown kind {self.kind!r} (one of {', '.join(KINDS)})")
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        if self.texts is not None:
            object.__setattr__(self, "texts", tuple(self.texts))

    @property
    def label(self) -> str:  # the name image and shortcut conditions used before the kernel split
        return self.name

    @classmethod
    def clean(cls) -> RunCondition:
        return cls("clean", {"perturbation": None})

    @classmethod
    def from_perturbed(cls, ps) -> RunCondition:
        """The condition of one caption perturbation's output (a PerturbedSet)."""
        return cls(ps.name, {"perturbation": ps.name, **ps.describe()}, texts=tuple(ps.texts), kind="caption",
                   perturbation=ps)


#: the name image and shortcut conditions were built with before the kernel split (same class)
Variant = RunCondition
