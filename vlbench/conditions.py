"""The data of a run variant (an image corruption or a shortcut probe as a run condition), apart from the code
that encodes variants (variants.py), so the modules that make variants need not import that code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ImageTransform(Protocol):
    """Picklable (it runs in DataLoader workers). ``index``: the image's position in the gallery;
    ``content``: its file's content key (``img:<sha256>``)."""

    def key(self, index: int, content: str) -> str | None: ...  # None: the image is left as it is

    def __call__(self, image, index: int, content: str): ...


@dataclass
class Variant:
    label: str  # the condition name in results, e.g. img:gaussian_noise:3, shortcut:matched
    meta: dict  # its entry in results.json "conditions"
    image: ImageTransform | None = None  # None: the clean images
    texts: list[str] | None = None  # None: the clean captions
