"""Run one shortcut probe with a model adapter: render, encode, score with vlbench's retrieval metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import VlbenchError
from ..metrics.compute import EmbeddingSource, evaluate
from . import DigitBank, ProbePlan, apply_plan_to_captions, probe_plan, render


@dataclass
class ProbeResult:
    probe: str  # "clean" or a probe name
    seed: int
    digit_source: str
    plan: ProbePlan | None
    metrics: dict  # vlbench.score keys: i2t_recall@1, t2i_recall@1, rsum, ...
    evaluation: object  # vlbench.metrics.compute.Evaluation: per_query("i2t"/"t2i") gives per-query records


def _embed(fn: Callable, inputs: list, batch_size: int) -> np.ndarray:
    parts = []
    for i in range(0, len(inputs), batch_size):
        out = fn(inputs[i:i + batch_size])
        parts.append(np.asarray(out.detach().float().cpu().numpy() if hasattr(out, "detach") else out,
                                dtype=np.float64))
    return np.concatenate(parts)


def run_probe(adapter, images: Sequence, captions: Sequence[str], caption_to_image, probe: str | None, *,
              bank: DigitBank, seed: int = 0, image_ids: Sequence[str] | None = None,
              batch_size: int = 64) -> ProbeResult:
    """Retrieval metrics of ``adapter`` on a dataset with the shortcut of ``probe`` (None: clean).

    ``images``: PIL images, or zero-argument callables returning one (loaded lazily, one batch at a time).
    ``image_ids`` seed the digit exemplars (default: the image index). Similarity: the dot product of the
    adapter's embeddings (L2-normalised here, i.e. cosine).
    """
    n = len(images)
    ids = [str(i) for i in range(n)] if image_ids is None else [str(x) for x in image_ids]
    if len(ids) != n:
        raise VlbenchError(f"{len(ids)} image ids for {n} images", "pass one id per image")
    if batch_size < 1:
        raise VlbenchError(f"batch_size {batch_size} is not positive", "pass batch_size >= 1")
    plan = None if probe is None else probe_plan(n, caption_to_image, probe, seed=seed)
    texts = list(captions) if plan is None else apply_plan_to_captions(list(captions), plan)
    collate = getattr(adapter, "collate", list)

    def encode_images(idx):
        batch = []
        for i in idx:
            im = images[i]() if callable(images[i]) else images[i]
            k = None if plan is None else plan.image_numbers[i]
            im = im if k is None else render(im, k, bank=bank, seed=seed, image_id=ids[i])
            batch.append(adapter.preprocess(im))
        return adapter.encode_images(collate(batch))

    img = _embed(encode_images, list(range(n)), batch_size)
    txt = _embed(adapter.encode_texts, texts, batch_size)
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    ev = evaluate(EmbeddingSource(img, txt), np.asarray(caption_to_image))
    return ProbeResult(probe or "clean", seed, bank.source, plan, ev.as_dict(), ev)
