"""Choice items, scoring from embeddings, and encoding with a model adapter (each image/text once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import DataError, VlbenchError

N_BOOT = 1000


@dataclass(frozen=True)
class ChoiceItem:
    """One choice: ``image`` (a key: a file name relative to an image root) and its candidate captions;
    ``candidates[correct]`` is the right one. ``kinds[k]`` says how candidate k was made."""

    item_id: str
    image: str
    candidates: tuple[str, ...]
    correct: int = 0
    kinds: tuple[str, ...] = ()


@dataclass
class ChoiceRecord:
    item_id: str
    image: str
    chosen: int  # argmax of the scores (first on ties)
    correct: bool  # the right caption scores strictly above every other candidate
    scores: list[float]


@dataclass
class ChoiceResult:
    accuracy: float  # percent of items answered correctly
    ci_low: float  # percentile bootstrap over items (N_BOOT resamples, fixed seed), percent
    ci_high: float
    n_items: int
    chance: float  # expected accuracy of a random pick, percent
    records: list[ChoiceRecord] = field(default_factory=list)
    ci_seed: int = 0
    # per negative kind: percent of its pairs where the right caption scores strictly higher, and the count
    by_kind: dict[str, dict] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "n_items": self.n_items, "chance": self.chance, "ci_seed": self.ci_seed, "n_boot": N_BOOT,
                "by_kind": self.by_kind}


class HasCandidates(Protocol):
    """What :func:`distinct_images` / :func:`distinct_texts` read: a ChoiceItem, or a SugarCrepe++ triplet."""

    @property
    def image(self) -> str: ...

    @property
    def candidates(self) -> tuple[str, ...]: ...


def item_images(item: HasCandidates) -> tuple[str, ...]:
    """The image keys of an item: its ``images`` when it has several (a Winoground pair), else its ``image``."""
    return tuple(getattr(item, "images", None) or (item.image,))


def distinct_images(items: Sequence[HasCandidates]) -> list[str]:
    """Each image key once, in first-seen order (the row order :func:`evaluate_choice` accepts); an item with
    several images (``images``) contributes each of them, in its order."""
    return list(dict.fromkeys(k for it in items for k in item_images(it)))


def distinct_texts(items: Sequence[HasCandidates]) -> list[str]:
    """Each candidate text once, in first-seen order."""
    return list(dict.fromkeys(t for it in items for t in it.candidates))


def _lookup(emb, keys: list[str], what: str) -> dict[str, np.ndarray]:
    """A {key: unit vector} map from a mapping or an array aligned with ``keys``."""
    if isinstance(emb, Mapping):
        missing = [k for k in keys if k not in emb]
        if missing:
            raise VlbenchError(f"no {what} embedding for {missing[0]!r} ({len(missing)} missing)",
                               f"embed every {what} of the items (see distinct_{what}s)")
        arr = np.stack([np.asarray(emb[k], dtype=np.float64) for k in keys])
    else:
        arr = np.asarray(_numpy(emb), dtype=np.float64)
        if arr.ndim != 2 or len(arr) != len(keys):
            raise VlbenchError(f"{what} embeddings have shape {arr.shape}, expected ({len(keys)}, d)",
                               f"pass one row per entry of distinct_{what}s(items), in that order")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms == 0).any():
        raise VlbenchError(f"a {what} embedding is all zeros", "check the model's output")
    return dict(zip(keys, arr / norms))


class PairScores:
    """``s(image key, text)`` of every (image, candidate) pair a set's items need, from a pair scorer (an ITM head's
    p(match): higher is a better match). What a set's ``evaluate`` takes in place of its two embedding maps,
    ``evaluate(items, PairScores(table), None, seed=)``: the set's own scoring code then reads these scores where
    it would read cosine similarities, so its rule (and its tie rule: a tie is a miss) is the same for both."""

    def __init__(self, table: Mapping[tuple[str, str], float], source: str = "pair scorer"):
        self.table = {k: float(v) for k, v in table.items()}
        self.source = source

    def __call__(self, image: str, text: str) -> float:
        try:
            return self.table[(image, text)]
        except KeyError:
            raise VlbenchError(f"no {self.source} score for the image {image!r} with the text {text!r}",
                               "score every (image, candidate) pair of the items (vlbench.tasks.pair_run)") from None

    def __len__(self) -> int:
        return len(self.table)


def pair_scores_of(image_emb, text_emb) -> PairScores | None:
    """``image_emb`` when it is a :class:`PairScores` (then ``text_emb`` must be None), else None."""
    if not isinstance(image_emb, PairScores):
        return None
    if text_emb is not None:
        raise VlbenchError("pair scores were given together with text embeddings",
                           "pass evaluate(items, PairScores(...), None): a pair scorer gives one score per pair")
    return image_emb


def _numpy(x):
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy()
    return x


def bootstrap_ci(correct: np.ndarray, seed: int = 0, n_boot: int = N_BOOT) -> tuple[float, float]:
    """95% percentile bootstrap of the mean of a 0/1 vector (resampling items), in percent."""
    if len(correct) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(correct), size=(n_boot, len(correct)))
    means = correct[idx].mean(axis=1) * 100.0
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _result(items, score_rows, seed: int) -> ChoiceResult:
    if not items:
        raise VlbenchError("no choice items", "build items with order_items or sugarcrepe_items first")
    records = []
    for it, s in zip(items, score_rows):
        others = np.delete(s, it.correct)
        records.append(ChoiceRecord(it.item_id, it.image, int(np.argmax(s)), bool(s[it.correct] > others.max()),
                                    [float(v) for v in s]))
    ok = np.array([r.correct for r in records], dtype=np.float64)
    lo, hi = bootstrap_ci(ok, seed)
    chance = float(np.mean([100.0 / len(it.candidates) for it in items]))
    return ChoiceResult(float(ok.mean() * 100.0), lo, hi, len(items), chance, records, seed, _by_kind(items, records))


def _by_kind(items, records) -> dict[str, dict]:
    """Pairwise wins of the right caption against each kind of negative (items without kinds: none)."""
    wins: dict[str, list[bool]] = {}
    for it, rec in zip(items, records):
        for k, kind in enumerate(it.kinds):
            if k != it.correct:
                wins.setdefault(kind, []).append(rec.scores[it.correct] > rec.scores[k])
    return {kind: {"win_rate": 100.0 * float(np.mean(w)), "n": len(w)} for kind, w in sorted(wins.items())}


def _check_items(items: Sequence[ChoiceItem]) -> None:
    for it in items:
        if len(it.candidates) < 2 or not 0 <= it.correct < len(it.candidates):
            raise VlbenchError(f"choice item {it.item_id!r} has {len(it.candidates)} candidates and correct="
                               f"{it.correct}", "give at least 2 candidates and a valid correct index")


def evaluate_choice(items: Sequence[ChoiceItem], image_emb, text_emb, *, seed: int = 0) -> ChoiceResult:
    """Accuracy of picking ``candidates[correct]`` by cosine similarity with the image.

    ``image_emb`` / ``text_emb``: a mapping key -> vector, or an array whose rows follow
    :func:`distinct_images` / :func:`distinct_texts`; or ``image_emb`` a :class:`PairScores` and ``text_emb``
    None (a pair scorer's scores, compared by the same rule). An item counts as correct only when the right caption
    scores strictly above every other candidate (a tie is a miss).
    """
    _check_items(items)
    pairs = pair_scores_of(image_emb, text_emb)
    if pairs is not None:  # a pair scorer's score of each (image, candidate) in place of the cosine similarity
        return _result(items, [np.array([pairs(it.image, c) for c in it.candidates]) for it in items], seed)
    img = _lookup(image_emb, distinct_images(items), "image")
    txt = _lookup(text_emb, distinct_texts(items), "text")
    rows = [np.array([img[it.image] @ txt[c] for c in it.candidates]) for it in items]
    return _result(items, rows, seed)


def evaluate_text_only(items: Sequence[ChoiceItem], text_score: Callable[[list[str]], Sequence[float]], *,
                       seed: int = 0) -> ChoiceResult:
    """A blind baseline: pick by a text-only plausibility score (higher = more plausible), no image.
    ``text_score`` maps a list of texts to one score each."""
    _check_items(items)
    texts = distinct_texts(items)
    scores = np.asarray(text_score(texts), dtype=np.float64)
    if scores.shape != (len(texts),):
        raise VlbenchError(f"the text scorer returned shape {scores.shape} for {len(texts)} texts",
                           "return one score per text")
    by_text = dict(zip(texts, scores))
    return _result(items, [np.array([by_text[c] for c in it.candidates]) for it in items], seed)


def _encode_in_batches(fn: Callable, inputs: list, batch_size: int) -> np.ndarray:
    parts = [np.asarray(_numpy(fn(inputs[i:i + batch_size])), dtype=np.float64)
             for i in range(0, len(inputs), batch_size)]
    return np.concatenate(parts) if parts else np.zeros((0, 0))


def _open_image(root: Path | None, key: str):
    from PIL import Image

    path = Path(key) if root is None else Path(root) / key
    if not path.is_file():
        raise DataError(f"image {key!r} not found at {path}", "put the image there or pass the right image root")
    with Image.open(path) as im:
        return im.convert("RGB")


def run_choice_task(adapter, items: Sequence[ChoiceItem], *, image_root=None, load_image: Callable | None = None,
                    batch_size: int = 64, seed: int = 0) -> ChoiceResult:
    """Encode each distinct image and text once (in batches) with ``adapter`` and score the items.

    Images are opened from ``image_root / item.image`` unless ``load_image(key) -> PIL.Image`` is given.
    """
    if batch_size < 1:
        raise VlbenchError(f"batch_size {batch_size} is not positive", "pass batch_size >= 1")
    _check_items(items)
    keys, texts = distinct_images(items), distinct_texts(items)
    load = load_image or (lambda k: _open_image(image_root, k))
    collate = getattr(adapter, "collate", list)

    def encode_images(batch_keys):
        return adapter.encode_images(collate([adapter.preprocess(load(k)) for k in batch_keys]))

    img = _encode_in_batches(encode_images, keys, batch_size)
    txt = _encode_in_batches(adapter.encode_texts, texts, batch_size)
    return evaluate_choice(items, img, txt, seed=seed)
