"""The shape of 2x2 sets: items of two images and two captions (c_k describes I_k), scored in both directions.
Winoground, ColorSwap and BiVLC (:mod:`.winoground`, :mod:`.colorswap`, :mod:`.bivlc`) are this shape: one
item type (:class:`PairItem`), one scoring (Winoground's rule) under each set's own names (:class:`PairScoring`),
one blind baseline and one table.

From ``s[i, j] = s(c_i, I_j)`` (cosine similarity), every comparison strict (a tie is a miss):

* ``i0_picks_c0``: ``s(c0, I0) > s(c1, I0)``; ``i1_picks_c1``: ``s(c1, I1) > s(c0, I1)`` (each image picks its caption);
* ``c0_picks_i0``: ``s(c0, I0) > s(c0, I1)``; ``c1_picks_i1``: ``s(c1, I1) > s(c1, I0)`` (each caption picks its image);
* ``text`` (image-to-text): both images pick; ``image`` (text-to-image): both captions pick; ``group``: all four.

Chance under random similarities: 50 percent for each single comparison, 25 for ``text`` and ``image`` (two
independent halves), 1/6 for ``group`` (the two matched pairs are the top two of four exchangeable values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import VlbenchError
from ...util.markdown import md_table
from ..choice import N_BOOT, _lookup, bootstrap_ci, distinct_images, distinct_texts, pair_scores_of

#: the flags of one item, in the order they are computed
FLAGS = ("i0_picks_c0", "i1_picks_c1", "c0_picks_i0", "c1_picks_i1", "text", "image", "group")
CHANCE = {"i0_picks_c0": 50.0, "i1_picks_c1": 50.0, "c0_picks_i0": 50.0, "c1_picks_i1": 50.0, "text": 25.0,
          "image": 25.0, "group": 100.0 / 6}
#: what each flag asks (the metric list's description of a 2x2 set's metric, whatever the set names it)
SAYS = {"i0_picks_c0": "s(c0, I0) > s(c1, I0)", "i1_picks_c1": "s(c1, I1) > s(c0, I1)",
        "c0_picks_i0": "s(c0, I0) > s(c0, I1)", "c1_picks_i1": "s(c1, I1) > s(c1, I0)",
        "text": "image-to-text: each image scores its own caption strictly higher",
        "image": "text-to-image: each caption scores its own image strictly higher"}
#: the blind (text-only) ceiling of every 2x2 set, by design (pairs_text_only)
BLIND_CEILING = ("0 for the image-to-text, text-to-image and group scores: a score that cannot see the image gives "
                 "each caption the same score under both images (a tie fails); only a single image-to-text "
                 "comparison can be won by text plausibility")


@dataclass(frozen=True)
class PairItem:
    """Two images and two captions: ``candidates[k]`` describes ``images[k]``. Both are plain fields (tuples), so
    ``dataclasses.replace(item, candidates=...)`` maps a caption perturbation over an item, and ``images=...`` an
    image condition. ``tag``: the item's kind (by_kind groups the scores by it)."""

    item_id: str
    images: tuple[str, str]
    candidates: tuple[str, str]
    tag: str = ""

    @property
    def image(self) -> str:
        return self.images[0]

    @property
    def captions(self) -> tuple[str, str]:
        return self.candidates


@dataclass(frozen=True)
class PairScoring:
    """A set's names for the flags it reports: ``metrics[flag]`` is the results.json metric (``group`` must be
    ``accuracy``); ``labels[flag]`` the table's column title; ``rule`` what results.json says."""

    metrics: dict
    labels: dict
    rule: str
    #: what ``by_kind`` names each score by: "metrics" (the results.json names) or "flags" (text / image / group,
    #: as Winoground's results have named them since it shipped)
    by_kind_names: str = "metrics"


@dataclass
class PairRecord:
    item_id: str
    image: str  # I0 (I1 is in extra_columns)
    image_1: str
    scores: list[float]  # s(c0,I0), s(c1,I0), s(c0,I1), s(c1,I1)
    flags: dict  # flag -> bool

    @property
    def chosen(self) -> int:  # the caption I0 scores highest (first on ties)
        return int(np.argmax(self.scores[:2]))

    @property
    def correct(self) -> bool:
        return self.flags["group"]

    @property
    def text(self) -> bool:  # the paper's three flags by their Winoground names
        return self.flags["text"]

    @property
    def image_ok(self) -> bool:
        return self.flags["image"]

    @property
    def group(self) -> bool:
        return self.flags["group"]

    @property
    def extra_columns(self) -> dict:
        return {"image_1": self.image_1, **{f"{k}_correct": int(v) for k, v in self.flags.items() if k != "group"},
                "group_correct": int(self.flags["group"])}


@dataclass
class PairResult:
    """The group score as ``accuracy`` (with ``ci_low`` / ``ci_high``), ``scores[flag]`` = (score, ci_low,
    ci_high) for every reported flag, percent; ``by_kind[tag]``: the scores per item tag."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_items: int
    scores: dict
    scoring: PairScoring
    records: list[PairRecord] = field(default_factory=list)
    ci_seed: int = 0
    chance: float = CHANCE["group"]
    by_kind: dict = field(default_factory=dict)

    def more_values(self) -> list[tuple[str, float, dict]]:
        """(metric, value, extra) of every reported score but the group one, and the chance of each."""
        names = self.scoring.metrics
        out = [(names[k], v, {"ci_low": lo, "ci_high": hi, "n": self.n_items})
               for k, (v, lo, hi) in self.scores.items() if k != "group"]
        return out + [(f"{names[k]}_chance", CHANCE[k], {}) for k in self.scores if k != "group"]

    def as_dict(self) -> dict:
        """The result as JSON; ``more_values`` (scores only, no chances) is what a run records beside the blind
        accuracy as ``blind_<metric>``."""
        names = self.scoring.metrics
        return {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high, "n_items": self.n_items,
                "chance": self.chance, "ci_seed": self.ci_seed, "n_boot": N_BOOT, "by_kind": self.by_kind,
                **{names[k]: dict(zip(("score", "ci_low", "ci_high"), v)) for k, v in self.scores.items()
                   if k != "group"},
                "more_values": [list(v) for v in self.more_values() if not v[0].endswith("_chance")]}


def declared_metrics(scoring: PairScoring) -> tuple:
    """(name, description) of every metric a 2x2 set with ``scoring`` reports besides accuracy / chance /
    blind_accuracy: each reported flag's score, its chance and its blind value (ChoiceTask ``metrics``)."""
    out = []
    for k in FLAGS:
        if k in scoring.metrics and k != "group":
            m = scoring.metrics[k]
            out += [(m, f"2x2 choice sets (--task winoground, colorswap, bivlc): {SAYS[k]}; a tie is a miss"),
                    (f"{m}_chance", f"2x2 choice sets: chance of {m} under random similarities"),
                    (f"blind_{m}", f"2x2 choice sets: {m} of the text-only (blind) baseline")]
    return tuple(out)


def pair_flags(s: np.ndarray) -> dict:
    """Every flag of one item from ``s[i, j] = s(c_i, I_j)`` (strict comparisons: a tie is a miss)."""
    f = {"i0_picks_c0": bool(s[0, 0] > s[1, 0]), "i1_picks_c1": bool(s[1, 1] > s[0, 1]),
         "c0_picks_i0": bool(s[0, 0] > s[0, 1]), "c1_picks_i1": bool(s[1, 1] > s[1, 0])}
    f["text"] = f["i0_picks_c0"] and f["i1_picks_c1"]
    f["image"] = f["c0_picks_i0"] and f["c1_picks_i1"]
    f["group"] = f["text"] and f["image"]
    return f


def _result(items: Sequence[PairItem], matrices, scoring: PairScoring, seed: int) -> PairResult:
    if not items:
        raise VlbenchError("no items of two images and two captions", "load the set's items first")
    reported = [k for k in FLAGS if k in scoring.metrics]
    records = []
    for it, s in zip(items, matrices):
        flags = pair_flags(s)
        records.append(PairRecord(it.item_id, it.images[0], it.images[1],
                                  [float(s[0, 0]), float(s[1, 0]), float(s[0, 1]), float(s[1, 1])], flags))
    scores = {}
    for k in reported:
        ok = np.array([r.flags[k] for r in records], dtype=np.float64)
        scores[k] = (float(ok.mean() * 100.0), *bootstrap_ci(ok, seed))
    by_kind: dict[str, dict] = {}
    for tag in sorted({it.tag for it in items if it.tag}):
        sel = [r for it, r in zip(items, records) if it.tag == tag]
        name = (lambda k: k) if scoring.by_kind_names == "flags" else scoring.metrics.get
        by_kind[tag] = {name(k): 100.0 * float(np.mean([r.flags[k] for r in sel])) for k in reported}
        by_kind[tag]["n"] = len(sel)
    g = scores["group"]
    return PairResult(g[0], g[1], g[2], len(items), scores, scoring, records, seed, by_kind=by_kind)


def evaluate_pairs(items: Sequence[PairItem], image_emb, text_emb, *, scoring: PairScoring,
                   seed: int = 0) -> PairResult:
    """The set's scores from embeddings: mappings key -> vector, or arrays whose rows follow
    ``distinct_images(items)`` / ``distinct_texts(items)`` (vectors are normalised here); or a pair scorer's
    scores (``image_emb`` a PairScores, ``text_emb`` None) in place of the cosine similarities."""
    pairs = pair_scores_of(image_emb, text_emb)
    if pairs is not None:
        return _result(items, [np.array([[pairs(i, c) for i in it.images] for c in it.candidates]) for it in items],
                       scoring, seed)
    img = _lookup(image_emb, distinct_images(items), "image")
    txt = _lookup(text_emb, distinct_texts(items), "text")
    mats = [np.array([[txt[c] @ img[i] for i in it.images] for c in it.candidates]) for it in items]
    return _result(items, mats, scoring, seed)


def pairs_text_only(items: Sequence[PairItem], text_score, *, scoring: PairScoring, seed: int = 0) -> PairResult:
    """The blind baseline: ``s(c, I) = text_score(c)`` under both images, scored by the same rule. By design a
    score that cannot see the image gets 0 on ``text`` (c0 cannot beat c1 under I0 and lose to it under I1),
    ``image`` (each caption ties with itself) and ``group``; only a single image-to-text comparison
    (``i0_picks_c0``) can be won by text plausibility alone, and then its twin ``i1_picks_c1`` is lost."""
    texts = distinct_texts(items)
    values = np.asarray(text_score(texts), dtype=np.float64)
    if values.shape != (len(texts),):
        raise VlbenchError(f"the text scorer returned shape {values.shape} for {len(texts)} texts",
                           "return one score per text")
    by_text = dict(zip(texts, values))
    mats = [np.array([[by_text[c], by_text[c]] for c in it.candidates]) for it in items]
    return _result(items, mats, scoring, seed)


def format_pairs_table(rec, scoring: PairScoring) -> str:
    """table.md of a run: the image-to-text, text-to-image and group scores side by side with their intervals and
    the text-to-image minus image-to-text gap, their chances, the blind (text-only) value of each, and the single
    comparisons when the set reports them."""
    main = ("text", "image", "group")
    single = [k for k in FLAGS[:4] if k in scoring.metrics]

    def cell(v):
        return f"{v.value:.2f} [{v.extra['ci_low']:.2f}, {v.extra['ci_high']:.2f}]" if v else "-"

    def joined(values):
        return " / ".join("-" if v is None else f"{v:.2f}" for v in values)

    rows = []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        value = {k: getattr(get.get(scoring.metrics[k]), "value", None) for k in (*main, *single)}
        blind = {k: getattr(get.get(f"blind_{scoring.metrics[k]}"), "value", None) for k in (*main, *single)}
        gap = None if value["text"] is None or value["image"] is None else value["image"] - value["text"]
        row = [cond, get["accuracy"].extra["n"], *(cell(get.get(scoring.metrics[k])) for k in main),
               "-" if gap is None else f"{gap:+.2f}", joined(CHANCE[k] for k in main), joined(blind[k] for k in main)]
        if single:
            row += [joined(value[k] for k in single), joined(blind[k] for k in single)]
        rows.append(row)
    names = " / ".join(scoring.labels[k] for k in main)
    head = ["set", "items", *(f"{scoring.labels[k]} %" for k in main),
            f"{scoring.labels['image']} - {scoring.labels['text']} (points)", f"chance % ({names})",
            f"blind (text-only) % ({names})"]
    if single:
        each = " / ".join(scoring.labels[k] for k in single)
        head += [f"{each} %", f"blind {each} %"]
    return md_table(head, rows, pad=True)
