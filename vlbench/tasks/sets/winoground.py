"""``--task winoground``: Winoground (Thrush et al., CVPR 2022), 400 items of two images and two captions.

Files, in the layout released on the Hub (``facebook/winoground``, gated: accept its terms, then ``HF_TOKEN``):
``examples.jsonl`` (one JSON object a line: ``id``, ``image_0``, ``image_1``, ``caption_0``, ``caption_1``,
``tag``, ``secondary_tag``, ``num_main_preds``, ``collapsed_tag``) and ``images/<image_k>.png`` (``images.zip``
unpacked). Images are never shipped with vlbench.

Scores, from the model's 2x2 similarity matrix ``s(c_i, I_j)`` of each item, as the paper defines them:

* **text score**: ``s(c0, I0) > s(c1, I0)`` and ``s(c1, I1) > s(c0, I1)`` (each image picks its caption);
* **image score**: ``s(c0, I0) > s(c0, I1)`` and ``s(c1, I1) > s(c1, I0)`` (each caption picks its image);
* **group score**: both.

Every comparison is strict: a tie is a failure. Chance (random scores): 25 / 25 / 16.67 percent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ...util.markdown import md_table
from ..choice import N_BOOT, _lookup, bootstrap_ci, distinct_images, distinct_texts
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "winoground"
HUB_REPO = "facebook/winoground"
#: no sha256 is pinned: the files are in a gated Hub dataset that publishes no checksum outside the gate, and the
#: release could not read it; a run records the sha256 of the examples.jsonl it read (``dataset.source.sha256``)
N_ITEMS = 400
#: chance of each score under random similarities, percent (text, image: 1/4; group: 1/6, as the paper)
CHANCE = {"text": 25.0, "image": 25.0, "group": 100.0 / 6}
RULE = ("text: s(c0,I0) > s(c1,I0) and s(c1,I1) > s(c0,I1); image: s(c0,I0) > s(c0,I1) and s(c1,I1) > s(c1,I0); "
        "group: both; s = cosine similarity; strict (a tie is a failure), as Thrush et al. 2022")
#: metric name of each score in results.json (``accuracy`` is the group score, the strictest)
METRICS = {"group": "accuracy", "text": "text_score", "image": "image_score"}
FIELDS = ("image_0", "image_1", "caption_0", "caption_1")
FIX = (f"use the unmodified examples.jsonl of {HUB_REPO} on the Hub (one JSON object a line with id, image_0, "
       "image_1, caption_0, caption_1, tag, secondary_tag, collapsed_tag)")


@dataclass(frozen=True)
class WinogroundItem:
    """One Winoground item: ``images`` (I0, I1: file names under the images folder), ``captions`` (c0, c1);
    c_k describes I_k. ``tag``: the collapsed tag (Object, Relation, Both)."""

    item_id: str
    images: tuple[str, str]
    captions: tuple[str, str]
    tag: str = ""

    @property
    def image(self) -> str:
        return self.images[0]

    @property
    def candidates(self) -> tuple[str, str]:
        return self.captions


@dataclass
class WinogroundRecord:
    item_id: str
    image: str  # I0 (I1 is in extra_columns)
    image_1: str
    scores: list[float]  # s(c0,I0), s(c1,I0), s(c0,I1), s(c1,I1)
    text: bool
    image_ok: bool
    group: bool

    @property
    def chosen(self) -> int:  # the caption I0 scores highest (first on ties)
        return int(np.argmax(self.scores[:2]))

    @property
    def correct(self) -> bool:
        return self.group

    @property
    def extra_columns(self) -> dict:
        return {"image_1": self.image_1, "text_correct": int(self.text), "image_correct": int(self.image_ok),
                "group_correct": int(self.group)}


@dataclass
class WinogroundResult:
    """The group score as ``accuracy`` (with ``ci_low`` / ``ci_high``) and ``scores[name]`` = (score, ci_low,
    ci_high) for text, image and group; percent. ``by_kind[tag]``: the three scores per collapsed tag."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_items: int
    scores: dict
    records: list[WinogroundRecord] = field(default_factory=list)
    ci_seed: int = 0
    chance: float = CHANCE["group"]
    by_kind: dict = field(default_factory=dict)

    def more_values(self) -> list[tuple[str, float, dict]]:
        """(metric, value, extra) of the text and image scores, and the chance of each (results.json records)."""
        out = [(METRICS[k], v, {"ci_low": lo, "ci_high": hi, "n": self.n_items})
               for k, (v, lo, hi) in self.scores.items() if k != "group"]
        return out + [(f"{METRICS[k]}_chance", CHANCE[k], {}) for k in ("text", "image")]

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high, "n_items": self.n_items,
                "chance": self.chance, "ci_seed": self.ci_seed, "n_boot": N_BOOT,
                **{k: dict(zip(("score", "ci_low", "ci_high"), v)) for k, v in self.scores.items()}}


def winoground_scores(s: np.ndarray) -> tuple[bool, bool, bool]:
    """(text, image, group) of one item from ``s[i, j] = s(c_i, I_j)`` (strict comparisons)."""
    text = bool(s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1])
    image = bool(s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0])
    return text, image, text and image


def _result(items: Sequence[WinogroundItem], matrices, seed: int) -> WinogroundResult:
    if not items:
        raise VlbenchError("no Winoground items", "read them with winoground_items first")
    records: list[WinogroundRecord] = []
    flags: dict[str, list[bool]] = {"text": [], "image": [], "group": []}
    for it, s in zip(items, matrices):
        t, i, g = winoground_scores(s)
        records.append(WinogroundRecord(it.item_id, it.images[0], it.images[1],
                                        [float(s[0, 0]), float(s[1, 0]), float(s[0, 1]), float(s[1, 1])], t, i, g))
        for name, v in (("text", t), ("image", i), ("group", g)):
            flags[name].append(v)
    scores = {}
    for name, f in flags.items():
        ok = np.asarray(f, dtype=np.float64)
        scores[name] = (float(ok.mean() * 100.0), *bootstrap_ci(ok, seed))
    by_kind: dict[str, dict] = {}
    for tag in sorted({it.tag for it in items if it.tag}):
        sel = [k for k, it in enumerate(items) if it.tag == tag]
        by_kind[tag] = {name: 100.0 * float(np.mean([flags[name][k] for k in sel])) for name in flags} | {"n": len(sel)}
    group = scores["group"]
    return WinogroundResult(group[0], group[1], group[2], len(items), scores, records, seed, by_kind=by_kind)


def evaluate_winoground(items: Sequence[WinogroundItem], image_emb, text_emb, *, seed: int = 0) -> WinogroundResult:
    """Text, image and group scores from embeddings: mappings key -> vector, or arrays whose rows follow
    ``distinct_images(items)`` / ``distinct_texts(items)`` (vectors are normalised here)."""
    img = _lookup(image_emb, distinct_images(items), "image")
    txt = _lookup(text_emb, distinct_texts(items), "text")
    mats = [np.array([[txt[c] @ img[i] for i in it.images] for c in it.captions]) for it in items]
    return _result(items, mats, seed)


def evaluate_winoground_text_only(items: Sequence[WinogroundItem], text_score, *, seed: int = 0) -> WinogroundResult:
    """The blind baseline: ``s(c, I) = text_score(c)`` for both images, scored by the same rule. A score that
    cannot see the image gives each caption the same score under both images, so the image score is 0 (a tie
    is a failure) and the text score is 0 (c0 cannot beat c1 under I0 and lose to it under I1): Winoground's
    text-only ceiling is 0 by design, recorded so that it is shown, not assumed."""
    texts = distinct_texts(items)
    by_text = dict(zip(texts, np.asarray(text_score(texts), dtype=np.float64)))
    mats = [np.array([[by_text[c], by_text[c]] for c in it.captions]) for it in items]
    return _result(items, mats, seed)


def read_winoground_file(path: Path) -> list[WinogroundItem]:
    """The items of ``examples.jsonl``; a DataError naming the file, the line and the field when a line is not
    a JSON object with non-empty string image_0 / image_1 / caption_0 / caption_1, or repeats an id."""
    text = read_task_text(path, "Winoground file", FIX)
    items, seen = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"Winoground file {path} line {n}"
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{where} is not valid JSON ({exc})", FIX) from None
        if not isinstance(row, dict):
            raise DataError(f"{where} holds a JSON {type(row).__name__}, not an object", FIX)
        for f in FIELDS:
            if not isinstance(row.get(f), str) or not row[f].strip():
                raise DataError(f"{where}: field {f!r} is {'missing' if f not in row else 'not a non-empty string'}",
                                FIX)
        key = str(row.get("id", n - 1))
        if key in seen:
            raise DataError(f"{where}: field 'id' repeats {key!r}", FIX)
        seen.add(key)
        names = []
        for f in ("image_0", "image_1"):
            name = row[f] if row[f].lower().endswith(".png") else f"{row[f]}.png"
            why = _bad_image_name(name)
            if why:
                raise DataError(f"{where}: field {f!r}: image name {shown_name(name)} {why}",
                                "image names must be file names inside the images folder")
            names.append(name)
        tag = row.get("collapsed_tag")
        items.append(WinogroundItem(key, (names[0], names[1]), (row["caption_0"], row["caption_1"]),
                                    tag if isinstance(tag, str) else ""))
    if not items:
        raise DataError(f"Winoground file {path} holds no items", FIX)
    return items


def winoground_root(data_dir=None) -> Path:
    """The folder with ``examples.jsonl`` and ``images/``: <data-dir>/winoground (or its ``data/``, as the Hub
    repository lays it out), or <data-dir> itself."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / TASK, base / TASK / "data", base):
        if (cand / "examples.jsonl").is_file():
            return cand
    raise DataError(f"Winoground's examples.jsonl is not in {base / TASK}",
                    f"accept the terms of the gated dataset {HUB_REPO} on the Hub, set HF_TOKEN, run "
                    f"'hf download {HUB_REPO} --repo-type dataset --local-dir {base / TASK}' and unzip "
                    f"data/images.zip there (examples.jsonl beside images/), or pass --data-dir naming that folder")


def winoground_items(root, *, check_images: bool = True) -> list[WinogroundItem]:
    """Winoground's items from ``root/examples.jsonl``; ``check_images``: a DataError naming the folder and the
    first missing file when an image is not in ``root/images``."""
    items = read_winoground_file(Path(root) / "examples.jsonl")
    if check_images:
        folder = Path(root) / "images"
        missing = [k for it in items for k in it.images if not _image_present(folder, k, "Winoground")]
        if missing:
            raise DataError(f"{len(missing)} of {2 * len(items)} Winoground images are missing from {folder} "
                            f"(first: {missing[0]})", f"unzip data/images.zip of {HUB_REPO} in {root}")
    return items


def winoground_sets(cfg, note=None) -> ItemSets:
    """The one item set of ``vlbench run --task winoground``."""
    if cfg.dataset not in (None, TASK):
        raise VlbenchError(f"--task {TASK} reads its own files, not --dataset {cfg.dataset!r}",
                           "leave --dataset out (--data-dir names the folder holding winoground/)")
    root = winoground_root(cfg.data_dir)
    items = winoground_items(root)
    if len(items) != N_ITEMS and note:
        note(f"Winoground: {len(items)} items, not the released {N_ITEMS} (a subset or a changed file)")
    digest = sha256_file(root / "examples.jsonl")
    keys = distinct_images(items)
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"examples.jsonl": digest}),
            "n_images": len(keys), "n_items": len(items),
            "source": {"annotations": str(root / "examples.jsonl"), "sha256": digest, "images": str(root / "images"),
                       "repository": f"huggingface.co/datasets/{HUB_REPO}"}}
    return ItemSets({f"task:{TASK}": items}, {k: root / "images" / k for k in keys}, desc,
                    {f"task:{TASK}": {"items": len(items)}})


def format_winoground_table(rec) -> str:
    """table.md of a Winoground run: text, image and group scores with their intervals, chance and the blind
    group score."""

    def cell(v):
        return f"{v.value:.2f} [{v.extra['ci_low']:.2f}, {v.extra['ci_high']:.2f}]" if v else "-"

    rows = []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        rows.append([cond, get["accuracy"].extra["n"], cell(get.get("text_score")), cell(get.get("image_score")),
                     cell(get.get("accuracy")), f"{CHANCE['text']:.2f} / {CHANCE['image']:.2f} / "
                     f"{CHANCE['group']:.2f}", cell(get.get("blind_accuracy"))])
    return md_table(["set", "items", "text %", "image %", "group %", "chance % (text / image / group)",
                     "blind group (text-only) %"], rows, pad=True)


WINOGROUND = register_task(ChoiceTask(
    TASK, "Winoground (Thrush et al. 2022): 2 images x 2 captions per item; text, image and group scores "
          "(strict: a tie fails); files from the gated Hub dataset facebook/winoground", winoground_sets,
    evaluate=evaluate_winoground, text_only=evaluate_winoground_text_only, rule=RULE, table=format_winoground_table,
    size="400 items (800 images, 800 captions)",
    licence="Winoground's own terms, accepted on the Hub (gated; images licensed from Getty Images, research use)",
    citation="Thrush et al., Winoground: Probing Vision and Language Models for Visio-Linguistic "
             "Compositionality, CVPR 2022"))
