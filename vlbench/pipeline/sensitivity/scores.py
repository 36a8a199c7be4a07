"""The two scores of a meaning-changing probe, from the run's vectors (NumPy, float64), by their definitions.

* :func:`pair_scores` / :func:`pairwise`: per caption i of image g, s(g, original_i) against s(g, probe_i), where
  s is the run's similarity (the dot product of the image and text embeddings as the model gave them; vlbench's
  adapters L2-normalise, so it is the cosine), in float64. A win is ``s(original) > s(probe)``; a tie (equal
  scores) is a miss, the rule of the choice tasks. Only captions the probe applied to count.
* :func:`denial_shares`: a negated query (a true denial: "... There is no dog.") ranks the gallery (its fold's
  gallery on a dataset with folds) by s, best first, ties broken by the lower gallery index (the run's tie rule);
  its share at K is the fraction of its top K images (K capped at the gallery's size) whose captions mention
  the denied object (:func:`mention_index`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...datasets.captionlm import tokens
from ...metrics.stats import resample_means

#: plural forms a mention may take besides the word and its regular plural (-s, -es, -y -> -ies)
IRREGULAR_PLURALS = {"man": "men", "woman": "women", "person": "people", "child": "children", "mouse": "mice",
                     "foot": "feet", "tooth": "teeth", "goose": "geese", "knife": "knives", "leaf": "leaves",
                     "wife": "wives", "shelf": "shelves", "sheep": "sheep", "fish": "fish", "ox": "oxen"}
#: the query rows ranked at a time (a block of queries x the gallery, float64)
BLOCK = 512


def pair_scores(img_emb, txt_emb, image_of: Sequence[int], offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(s(image, original), s(image, probe)) per caption: rows 0..n-1 of ``txt_emb`` are the originals, rows
    ``offset``..``offset + n - 1`` the probe texts; ``image_of[i]``: caption i's gallery row."""
    img = np.asarray(img_emb, dtype=np.float64)[np.asarray(image_of, dtype=np.int64)]
    n = len(img)
    txt = np.asarray(txt_emb, dtype=np.float64)
    return np.einsum("ij,ij->i", img, txt[:n]), np.einsum("ij,ij->i", img, txt[offset:offset + n])


def pairwise(original: np.ndarray, probe: np.ndarray, applicable: Sequence[bool], *, n_boot: int,
             seed: int) -> dict:
    """Accuracy (percent of applicable captions whose original scores strictly above its probe) with a 95%
    percentile bootstrap interval (the run's resampling: :func:`vlbench.metrics.stats.resample_means`, captions
    resampled with replacement), and the counts. ``accuracy_ties_half`` counts each tie as half a win (a coin
    flip): beside the accuracy it shows where an order-free model's ties put it (50 when every pair ties).
    ``wins``: the 0/1 outcome of every applicable caption."""
    app = np.asarray(applicable, dtype=bool)
    a, b = np.asarray(original)[app], np.asarray(probe)[app]
    wins = (a > b).astype(np.float64)
    n_ties = int((a == b).sum())
    out = {"n_applicable": int(app.sum()), "n_not_applicable": int((~app).sum()), "n_ties": n_ties,
           "tie_rule": "a tie (equal scores) is a miss", "n_boot": n_boot, "seed": seed}
    if not len(wins):
        return {**out, "accuracy": None, "ci_low": None, "ci_high": None, "accuracy_ties_half": None, "wins": wins}
    dist = resample_means(wins, n_boot, np.random.default_rng(seed)) * 100.0
    return {**out, "accuracy": float(wins.mean() * 100.0), "ci_low": float(np.quantile(dist, 0.025)),
            "ci_high": float(np.quantile(dist, 0.975)),
            "accuracy_ties_half": float((wins.sum() + 0.5 * n_ties) / len(wins) * 100.0), "wins": wins}


def word_forms(word: str) -> tuple[str, ...]:
    """The token sequences that mention ``word`` (lower case): the word, its regular plurals (-s, -es; -y after
    a consonant -> -ies) and an irregular plural (:data:`IRREGULAR_PLURALS`); a several-word object ("teddy
    bear") inflects its last word."""
    *head, last = tokens(word) or [word.lower()]
    forms = {last, last + "s", last + "es"}
    if last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        forms.add(last[:-1] + "ies")
    if last in IRREGULAR_PLURALS:
        forms.add(IRREGULAR_PLURALS[last])
    return tuple(" ".join([*head, f]) for f in sorted(forms))


class MentionIndex:
    """Which gallery images' captions mention a word: an image mentions ``word`` when one of
    :func:`word_forms` occurs, as whole words, in the lower-cased word tokens of one of its captions
    (:func:`vlbench.datasets.captionlm.tokens`). Images without captions (distractors) mention nothing."""

    def __init__(self, captions: Sequence[str], caption_to_image: Sequence[int], n_gallery: int):
        self.n = n_gallery
        self.by_token: dict[str, set[int]] = {}
        self.texts: list[list[str]] = [[] for _ in range(n_gallery)]
        for text, g in zip(captions, caption_to_image):
            toks = tokens(text if isinstance(text, str) else "")
            self.texts[int(g)].append(" " + " ".join(toks) + " ")
            for t in toks:
                self.by_token.setdefault(t, set()).add(int(g))
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, word: str) -> np.ndarray:
        """A boolean per gallery image."""
        if word not in self._cache:
            hit = np.zeros(self.n, dtype=bool)
            for form in word_forms(word):
                if " " not in form:
                    hit[list(self.by_token.get(form, ()))] = True
                else:  # a phrase: only the images holding its first word are read
                    first = form.split(" ")[0]
                    for g in self.by_token.get(first, ()):
                        hit[g] |= any(f" {form} " in t for t in self.texts[g])
            self._cache[word] = hit
        return self._cache[word]


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the column indices of its ``k`` highest scores, best first, equal scores by the lower index: the
    k-th best value by a partition, then every column above it and the lowest-indexed ones equal to it, sorted
    (a whole sort of every row would cost ten times as much on a 5,000-image gallery)."""
    if k >= scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable")  # stable: equal scores keep the lower index first
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(scores, part, axis=1).min(axis=1)
    out = np.empty((len(scores), k), dtype=np.int64)
    for r, (row, t) in enumerate(zip(scores, kth)):
        above = np.flatnonzero(row > t)
        idx = np.concatenate([above, np.flatnonzero(row == t)[:k - len(above)]])
        out[r] = idx[np.lexsort((idx, -row[idx]))]
    return out


def top_k(q_emb, img_emb, candidates: np.ndarray, k: int) -> np.ndarray:
    """The gallery rows (from ``candidates``, ascending) of each query's top ``k`` by the dot product, best
    first, ties by the lower gallery row; k capped at the number of candidates."""
    q = np.asarray(q_emb, dtype=np.float64)
    g = np.asarray(img_emb, dtype=np.float64)[candidates]
    k = min(int(k), len(candidates))
    out = np.empty((len(q), k), dtype=np.int64)
    for s in range(0, len(q), BLOCK):
        out[s:s + BLOCK] = candidates[_best(q[s:s + BLOCK] @ g.T, k)]
    return out


def denial_shares(q_emb, img_emb, candidates: np.ndarray, denied: Sequence[str], mentions: MentionIndex,
                  ks: Sequence[int]) -> dict[int, np.ndarray]:
    """K -> per query, the share of its top K images whose captions mention the query's denied word."""
    top = top_k(q_emb, img_emb, np.asarray(candidates, dtype=np.int64), max(ks))
    flags = np.stack([mentions(w)[row] for w, row in zip(denied, top)]) if len(top) else \
        np.zeros((0, top.shape[1]), dtype=bool)
    return {int(k): flags[:, :min(int(k), top.shape[1])].mean(axis=1) if len(flags) else np.zeros(0)
            for k in ks}
