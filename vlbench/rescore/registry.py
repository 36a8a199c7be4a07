"""Rescore suites as registered records: ``vlbench rescore RUN --as NAME`` scores with the suite registered
as NAME, and the rescore kernel (vlbench.rescore.engine) reads only the record's fields.

A suite is one :class:`Suite`: its convention, reference and tie notes (copied into every document it
writes), ``score(gt, img, txt, seed)`` giving ``(direction, metric, k, value)`` records for one condition's
embeddings, and whether its values are already percentages and whether it uses the seed. A suite scored
fold by fold (the mean over folds, as vlbench's scorer) wraps a function of (similarity, positives, seed)
with :func:`per_fold`.

To add a suite: one module that builds a ``Suite`` and calls :func:`register_suite` (the built-ins are in
vlbench.rescore.suites, one record each).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..datasets.folds import fold_caption_to_image, fold_captions
from ..errors import VlbenchError
from ..metrics.compute import EmbeddingSource, similarity_matrix
from ..registry import Records

#: the module of the built-in suites, imported on the first lookup (it registers them)
BUILTIN_MODULE = "vlbench.rescore.suites"


@dataclass(frozen=True)
class Suite:
    name: str
    convention: str
    reference: str
    ties: str
    score: Callable  # score(gt, img, txt, seed) -> [(direction, metric, k, value)]
    names: dict = field(default_factory=dict)  # the suite's own metric names (documentation)
    percent: bool = False  # values are percentages already (otherwise fractions: value_percent = 100 x value)
    seeded: bool = False  # uses the seed (recorded in the document; None otherwise)

    def describe(self) -> dict:
        """The convention fields every document of the suite starts with."""
        return {"convention": self.convention, "reference": self.reference, "ties": self.ties}


SUITES = Records("rescore suite", Suite, (BUILTIN_MODULE,))
register_suite = SUITES.register
unregister_suite = SUITES.unregister
suites = SUITES.all


def check_suites(names) -> list[str]:
    """``names`` without repeats; VlbenchError naming the suites when one is unknown or none is given."""
    known = suites()
    bad = [s for s in names if s not in known]
    if bad or not names:
        raise VlbenchError(f"unknown suite {bad[0]!r}" if bad else "no suite given",
                           f"pass --as with one of: {', '.join(known)}")
    return list(dict.fromkeys(names))


def positives(caption_to_image: np.ndarray, n_gallery: int) -> dict:
    """Query positives per direction: t2i query j -> [its image]; i2t image i -> its captions (images with
    captions only: distractors are candidates, never queries). Values: lists of candidate indices."""
    c2i = np.asarray(caption_to_image, dtype=np.int64)
    by_image: dict[int, list[int]] = {}
    for j, i in enumerate(c2i):
        by_image.setdefault(int(i), []).append(j)
    return {"t2i": {j: [int(i)] for j, i in enumerate(c2i)},
            "i2t": {i: by_image[i] for i in sorted(by_image) if i < n_gallery}}


def similarity(img: np.ndarray, txt: np.ndarray) -> np.ndarray:
    """The (images x captions) similarities exactly as the run scored them (metrics.compute.similarity_matrix):
    bit-identical vectors get bit-identical scores, so the run's tie rule holds for duplicate captions here too
    (a plain ``img @ txt.T`` may round a duplicate's dot product differently)."""
    return similarity_matrix(EmbeddingSource(img, txt))


def fold_parts(gt: dict, img: np.ndarray, txt: np.ndarray):
    """(similarity, positives) per fold (one part without folds), as vlbench's scorer splits them."""
    c2i = np.asarray(gt["caption_to_image"], dtype=np.int64)
    if not gt.get("folds"):
        yield similarity(img, txt), positives(c2i, len(img))
        return
    for fold in gt["folds"]:
        fold = np.asarray(fold, dtype=np.int64)
        caps = fold_captions(c2i, fold)
        yield similarity(img[fold], txt[caps]), positives(fold_caption_to_image(c2i, fold, gt["n_gallery"]), len(fold))


def per_fold(fn: Callable) -> Callable:
    """A suite's ``score`` from ``fn(similarity, positives, seed) -> records``: the mean over folds."""
    def score(gt: dict, img: np.ndarray, txt: np.ndarray, seed: int = 0) -> list[tuple]:
        folds = [fn(sim, pos, seed) for sim, pos in fold_parts(gt, img, txt)]
        return [(d, m, k, float(np.mean([f[i][3] for f in folds]))) for i, (d, m, k, _) in enumerate(folds[0])]
    return score
