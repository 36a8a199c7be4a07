"""Folds: one owner of how a dataset with image folds (coco-1k: five 1k-image galleries) is cut.

A fold is a list of dataset image indices. Its captions are the dataset's captions whose image is in the
fold, in dataset order; within the fold they point at the image's position in the fold. The scorer, the
distractor scorer, the per-query file, the flips lists, the failure browser and ``vlbench rescore`` all cut
folds through these functions, so a query's row means the same everywhere.
"""

from __future__ import annotations

import numpy as np


def fold_captions(caption_to_image, fold) -> np.ndarray:
    """The dataset caption indices (ascending) whose image is in ``fold`` (dataset image indices)."""
    return np.flatnonzero(np.isin(np.asarray(caption_to_image), fold))


def fold_caption_to_image(caption_to_image, fold, n_images: int) -> np.ndarray:
    """caption_to_image of the fold's captions (:func:`fold_captions` order), as positions within ``fold``."""
    fold = np.asarray(fold, dtype=np.int64)
    remap = -np.ones(n_images, dtype=np.int64)
    remap[fold] = np.arange(len(fold))
    return remap[np.asarray(caption_to_image)[fold_captions(caption_to_image, fold)]]


def fold_index_maps(caption_to_image, folds) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per fold: (image indices, caption indices) of the dataset, int64, so a fold-local id (a row or a
    candidate of a fold's ranking) maps back to the dataset's index: images for t2i candidates and i2t
    queries, captions for i2t candidates and t2i queries."""
    return [(np.asarray(f, dtype=np.int64), fold_captions(caption_to_image, f)) for f in folds]
