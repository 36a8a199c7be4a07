"""``--task mmvp``: MMVP-VLM (Tong et al., CVPR 2024), pairs of images and statements with one visual pattern each.

Files, in the layout released on the Hub (``MMVP/MMVP_VLM``; github.com/tsb0601/MMVP ``scripts/evaluate_vlm.py``
reads it): ``Questions.csv`` (header ``Question ID,Type,Statement``; consecutive rows form a pair, the odd id first)
and ``MLLM_VLM Images/<Type>/<Question ID>.jpg`` (the README draws the folder as ``MMVP_VLM_Images``: both are
read). Images are never shipped with vlbench. Statement k describes image k of its pair; as the authors' script,
each statement is given to the model as ``"a photo of " + statement``.

Scores, with ``s(t_i, I_j)`` the cosine similarity of statement i and image j of a pair:

* **accuracy** (pair accuracy, the authors' script): each statement picks its own image, ``s(t1, I1) > s(t1, I2)``
  and ``s(t2, I2) > s(t2, I1)``; chance 25. Strict: a tie is a miss (the script's ``P(img1) > 0.5`` counts a tie
  as a pick of image 2, a hit for the second statement);
* **pattern_<name>**: the pair accuracy of each of the 9 visual patterns (the script's per-category numbers);
* **statement_accuracy**: the share of statements that pick their own image (chance 50);
* **i2t_pair_accuracy**: each image picks its own statement, ``s(t1, I1) > s(t2, I1)`` and ``s(t2, I2) > s(t1, I2)``
  (the image-to-text reading of the pair rule; chance 25).

A text-only scorer gives a statement the same score under both images, so every MMVP score is 0 for it by design.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ...util.markdown import md_table
from ..choice import N_BOOT, _lookup, bootstrap_ci, distinct_images, distinct_texts, pair_scores_of
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "mmvp"
HUB_REPO = "MMVP/MMVP_VLM"
REPO = "github.com/tsb0601/MMVP"
COMMIT = "763500597e65c3446f09047837ceda76f4e264bf"  # the commit of scripts/evaluate_vlm.py this module follows
CSV_FILE = "Questions.csv"
IMAGE_FOLDERS = ("MLLM_VLM Images", "MMVP_VLM_Images")  # the script's folder name, then the README's
COLUMNS = ("Question ID", "Type", "Statement")
PROMPT = "a photo of "
N_PAIRS = 135
CHANCE = {"accuracy": 25.0, "statement_accuracy": 50.0, "i2t_pair_accuracy": 25.0}
#: the 9 visual patterns: (metric suffix, the authors' name, words a Type folder name starts with)
PATTERNS = (("orientation", "Orientation and Direction", ("orientation", "direction")),
            ("presence", "Presence of Specific Features", ("presence", "feature", "features")),
            ("state", "State and Condition", ("state", "condition")),
            ("quantity", "Quantity and Count", ("quantity", "count")),
            ("positional", "Positional and Relational Context", ("positional", "position", "spatial", "relational")),
            ("color", "Color and Appearance", ("color", "colour", "appearance")),
            ("structural", "Structural Characteristics", ("structural", "structure")),
            ("text", "Texts", ("text", "texts")),
            ("viewpoint", "Viewpoint and Perspective", ("viewpoint", "camera", "perspective")))
RULE = ("pair right when each statement picks its own image: s(t1,I1) > s(t1,I2) and s(t2,I2) > s(t2,I1) "
        "(s = cosine similarity; strict: a tie is a miss), per pair and per visual pattern, as Tong et al. 2024's "
        "evaluate_vlm.py; statements prefixed with 'a photo of '")
FIX = (f"use the unmodified {CSV_FILE} of {HUB_REPO} on the Hub (header {','.join(COLUMNS)}; pairs on consecutive "
       "rows, the odd Question ID first)")


def pattern_of(folder: str) -> str:
    """The visual pattern of a Type value (its first word, lower case), or the Type itself made a name."""
    words = re.split(r"[^a-z0-9]+", folder.lower())
    first = next((w for w in words if w), "")
    for slug, _, starts in PATTERNS:
        if first in starts:
            return slug
    return "_".join(w for w in words if w)


@dataclass(frozen=True)
class MMVPItem:
    """One MMVP-VLM pair: ``images`` (I1, I2: keys under the images folder) and ``candidates`` (t1, t2, as the model
    reads them); t_k describes I_k. ``pattern``: the visual pattern (:data:`PATTERNS`)."""

    item_id: str
    images: tuple[str, str]
    candidates: tuple[str, str]
    pattern: str = ""

    @property
    def image(self) -> str:
        return self.images[0]


@dataclass
class MMVPRecord:
    item_id: str
    image: str  # I1 (I2 is in extra_columns)
    image_1: str
    scores: list[float]  # s(t1,I1), s(t2,I1), s(t1,I2), s(t2,I2)
    statements: tuple[bool, bool]  # t1 picks I1, t2 picks I2
    i2t: bool
    pattern: str

    @property
    def chosen(self) -> int:  # the image t1 picks (first on ties)
        return int(self.scores[2] > self.scores[0])

    @property
    def correct(self) -> bool:
        return all(self.statements)

    @property
    def extra_columns(self) -> dict:
        return {"image_1": self.image_1, "statement_1_correct": int(self.statements[0]),
                "statement_2_correct": int(self.statements[1]), "i2t_pair_correct": int(self.i2t),
                "pattern": self.pattern}


@dataclass
class MMVPResult:
    """``accuracy`` (pair accuracy) with ``ci_low`` / ``ci_high``; ``scores[name]`` = (value, ci_low, ci_high) of
    statement_accuracy and i2t_pair_accuracy; ``by_kind[pattern]``: the pair accuracy and count per pattern."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_items: int
    scores: dict
    records: list[MMVPRecord] = field(default_factory=list)
    ci_seed: int = 0
    chance: float = CHANCE["accuracy"]
    by_kind: dict = field(default_factory=dict)

    def more_values(self) -> list[tuple[str, float, dict]]:
        """(metric, value, extra): the other scores, then each pattern's pair accuracy."""
        out = [(name, v, {"ci_low": lo, "ci_high": hi, "n": n}) for name, (v, lo, hi, n) in self.scores.items()]
        return out + [(f"pattern_{p}", g["accuracy"], {"n": g["n"]}) for p, g in self.by_kind.items()]

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high, "n_items": self.n_items,
                "chance": self.chance, "ci_seed": self.ci_seed, "n_boot": N_BOOT, "by_pattern": self.by_kind,
                **{k: dict(zip(("value", "ci_low", "ci_high", "n"), v)) for k, v in self.scores.items()}}


def mmvp_flags(s: np.ndarray) -> tuple[bool, bool, bool]:
    """(t1 picks I1, t2 picks I2, each image picks its statement) from ``s[i, j] = s(t_i, I_j)``, strictly."""
    return (bool(s[0, 0] > s[0, 1]), bool(s[1, 1] > s[1, 0]), bool(s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]))


def _score(flags: list, seed: int, n: int) -> tuple:
    ok = np.asarray(flags, dtype=np.float64)
    return (float(ok.mean() * 100.0), *bootstrap_ci(ok, seed), n)


def _result(items: Sequence[MMVPItem], matrices, seed: int) -> MMVPResult:
    if not items:
        raise VlbenchError("no MMVP-VLM pairs", "read them with mmvp_items first")
    records = []
    for it, s in zip(items, matrices):
        t1, t2, i2t = mmvp_flags(s)
        records.append(MMVPRecord(it.item_id, it.images[0], it.images[1],
                                  [float(s[0, 0]), float(s[1, 0]), float(s[0, 1]), float(s[1, 1])], (t1, t2), i2t,
                                  it.pattern))
    pair, lo, hi, _ = _score([r.correct for r in records], seed, len(records))
    scores = {"statement_accuracy": _score([f for r in records for f in r.statements], seed, 2 * len(records)),
              "i2t_pair_accuracy": _score([r.i2t for r in records], seed, len(records))}
    by_kind = {}
    for p in dict.fromkeys(it.pattern for it in items):
        sel = [r.correct for r in records if r.pattern == p]
        by_kind[p] = {"accuracy": 100.0 * float(np.mean(sel)), "n": len(sel)}
    return MMVPResult(pair, lo, hi, len(items), scores, records, seed, by_kind=by_kind)


def evaluate_mmvp(items: Sequence[MMVPItem], image_emb, text_emb, *, seed: int = 0) -> MMVPResult:
    """The MMVP-VLM scores from embeddings: mappings key -> vector, or arrays whose rows follow
    ``distinct_images(items)`` / ``distinct_texts(items)`` (vectors are normalised here); or a pair scorer's
    scores (``image_emb`` a PairScores, ``text_emb`` None) in place of the cosine similarities."""
    pairs = pair_scores_of(image_emb, text_emb)
    if pairs is not None:
        return _result(items, [np.array([[pairs(i, t) for i in it.images] for t in it.candidates]) for it in items],
                       seed)
    img = _lookup(image_emb, distinct_images(items), "image")
    txt = _lookup(text_emb, distinct_texts(items), "text")
    return _result(items, [np.array([[txt[t] @ img[i] for i in it.images] for t in it.candidates]) for it in items],
                   seed)


def mmvp_text_only(items: Sequence[MMVPItem], text_score, *, seed: int = 0) -> MMVPResult:
    """The blind baseline: ``s(t, I) = text_score(t)`` under both images, scored by the same rules. A statement
    then ties between its two images (a miss), so every score is 0 by design; recorded so that it is shown."""
    texts = distinct_texts(items)
    by_text = dict(zip(texts, np.asarray(text_score(texts), dtype=np.float64)))
    return _result(items, [np.array([[by_text[t], by_text[t]] for t in it.candidates]) for it in items], seed)


def _row(row: list, where: str) -> tuple[int, str, str]:
    if len(row) != len(COLUMNS):
        raise DataError(f"{where} has {len(row)} fields, not {len(COLUMNS)} ({', '.join(COLUMNS)})", FIX)
    qid, folder, statement = (c.strip() for c in row)
    if not qid.isdigit():
        raise DataError(f"{where}: field 'Question ID' is {qid!r}, not a positive integer", FIX)
    why = _bad_image_name(folder) or ("is empty" if not folder else None) or (
        "is not a folder name" if "/" in folder or "\\" in folder else None)
    if why:
        raise DataError(f"{where}: field 'Type': folder name {shown_name(folder)} {why}", FIX)
    if not statement:
        raise DataError(f"{where}: field 'Statement' is empty", FIX)
    return int(qid), folder, statement


def _pair(a: tuple, b: tuple, where: str) -> MMVPItem:
    (q1, t1, s1), (q2, t2, s2) = a, b
    if q1 % 2 != 1 or q2 != q1 + 1:
        raise DataError(f"{where}: field 'Question ID' pairs {q1} with {q2}, not an odd id with the next one", FIX)
    if t1 != t2:
        raise DataError(f"{where}: field 'Type' is {t2!r} for {q2} but {t1!r} for {q1} (one pattern per pair)", FIX)
    return MMVPItem(str(q1), (f"{t1}/{q1}.jpg", f"{t1}/{q2}.jpg"), (PROMPT + s1, PROMPT + s2), pattern_of(t1))


def read_mmvp_file(path: Path) -> list[MMVPItem]:
    """The pairs of ``Questions.csv``; a DataError naming the file, the line and the field when it is not the
    released layout (header, three fields a row, pairs of consecutive ids, one Type per pair)."""
    text = read_task_text(path, "MMVP-VLM file", FIX, encoding="utf-8-sig")
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
        if header is None or tuple(c.strip() for c in header) != COLUMNS:
            missing = [c for c in COLUMNS if c not in [h.strip() for h in header or ()]]
            raise DataError(f"MMVP-VLM file {path} line 1: the header is {header!r}, not {','.join(COLUMNS)}"
                            + (f" (field {missing[0]!r} missing)" if missing else ""), FIX)
        rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise DataError(f"MMVP-VLM file {path} line {reader.line_num} is not CSV ({exc})", FIX) from None
    parsed = [(n, _row(r, f"MMVP-VLM file {path} line {n}")) for n, r in rows]
    if not parsed or len(parsed) % 2:
        raise DataError(f"MMVP-VLM file {path} holds {len(parsed)} statements" +
                        (f"; line {parsed[-1][0]} has no partner" if parsed else ""), FIX)
    seen: set[int] = set()
    items = []
    for (_, a), (m, b) in zip(parsed[::2], parsed[1::2]):
        if {a[0], b[0]} & seen:
            raise DataError(f"MMVP-VLM file {path} line {m}: field 'Question ID' repeats {a[0]} or {b[0]}", FIX)
        seen |= {a[0], b[0]}
        items.append(_pair(a, b, f"MMVP-VLM file {path} line {m}"))
    return items


def mmvp_root(data_dir=None) -> Path:
    """The folder with ``Questions.csv``: <data-dir>/mmvp_vlm (or MMVP_VLM), or <data-dir> itself."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / "mmvp_vlm", base / "MMVP_VLM", base):
        if (cand / CSV_FILE).is_file():
            return cand
    raise DataError(f"MMVP-VLM's {CSV_FILE} is not in {base / 'mmvp_vlm'}",
                    f"run 'hf download {HUB_REPO} --repo-type dataset --local-dir {base / 'mmvp_vlm'}' ({CSV_FILE} "
                    f"beside '{IMAGE_FOLDERS[0]}/'), or pass --data-dir naming that folder")


def mmvp_images_dir(root: Path, images_dir=None) -> Path:
    """The folder holding the Type folders: ``images_dir``, else the first of :data:`IMAGE_FOLDERS` in ``root``."""
    if images_dir is not None:
        return Path(images_dir).expanduser()
    for name in IMAGE_FOLDERS:
        if (Path(root) / name).is_dir():
            return Path(root) / name
    raise DataError(f"MMVP-VLM's image folder ('{IMAGE_FOLDERS[0]}') is not in {root}",
                    f"download {HUB_REPO} whole, or pass --images-dir naming the folder that holds the Type folders")


def mmvp_items(root, *, images_dir=None, check_images: bool = True) -> list[MMVPItem]:
    """MMVP-VLM's pairs from ``root/Questions.csv``; ``check_images``: a DataError naming the folder and the first
    missing file when an image is not in the images folder (:func:`mmvp_images_dir`)."""
    items = read_mmvp_file(Path(root) / CSV_FILE)
    if check_images:
        folder = mmvp_images_dir(root, images_dir)
        missing = [k for it in items for k in it.images if not _image_present(folder, k, "MMVP-VLM")]
        if missing:
            raise DataError(f"{len(missing)} of {2 * len(items)} MMVP-VLM images are missing from {folder} (first: "
                            f"{missing[0]})", f"download the images of {HUB_REPO}, or pass --images-dir")
    return items


def mmvp_sets(cfg, note=None) -> ItemSets:
    """The one item set of ``vlbench run --task mmvp``."""
    if cfg.dataset not in (None, TASK):
        raise VlbenchError(f"--task {TASK} reads its own files, not --dataset {cfg.dataset!r}",
                           "leave --dataset out (--data-dir names the folder holding mmvp_vlm/)")
    root = mmvp_root(cfg.data_dir)
    images = mmvp_images_dir(root, cfg.images_dir)
    items = mmvp_items(root, images_dir=images)
    if len(items) != N_PAIRS and note:
        note(f"MMVP-VLM: {len(items)} pairs, not the released {N_PAIRS} (a subset or a changed file)")
    digest = sha256_file(root / CSV_FILE)
    keys = distinct_images(items)
    patterns = {p: sum(it.pattern == p for it in items) for p in dict.fromkeys(it.pattern for it in items)}
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({CSV_FILE: digest}), "n_images": len(keys),
            "n_items": len(items), "prompt": PROMPT,
            "source": {"annotations": str(root / CSV_FILE), "sha256": digest, "images": str(images),
                       "repository": f"huggingface.co/datasets/{HUB_REPO}", "scoring": f"{REPO}@{COMMIT}"}}
    return ItemSets({f"task:{TASK}": items}, {k: images / k for k in keys}, desc,
                    {f"task:{TASK}": {"items": len(items), "pairs_by_pattern": patterns}})


def format_mmvp_table(rec) -> str:
    """table.md of an MMVP-VLM run: the pair, statement and image-to-text scores, then each pattern's pair score."""

    def cell(v):
        return "-" if v is None else f"{v.value:.2f}" + (
            f" [{v.extra['ci_low']:.2f}, {v.extra['ci_high']:.2f}]" if "ci_low" in v.extra else "")

    names = {slug: name for slug, name, _ in PATTERNS}
    rows, by_pattern = [], []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        rows.append([cond, get["accuracy"].extra["n"], cell(get.get("accuracy")), cell(get.get("statement_accuracy")),
                     cell(get.get("i2t_pair_accuracy")), "25 / 50 / 25", cell(get.get("blind_accuracy"))])
        by_pattern += [[cond, names.get(m[8:], m[8:]), v.extra.get("n"), f"{v.value:.2f}"]
                       for m, v in get.items() if m.startswith("pattern_")]
    return (md_table(["set", "pairs", "pair %", "statement %", "image-to-text pair %", "chance % (pair / statement / "
                      "i2t pair)", "blind pair (text-only) %"], rows, pad=True) + "\n\n" +
            md_table(["set", "visual pattern", "pairs", "pair %"], by_pattern, pad=True))


MMVP = register_task(ChoiceTask(
    TASK, "MMVP-VLM (Tong et al. 2024): 2 images x 2 statements per pair, 9 visual patterns; a pair is right when "
          "each statement picks its own image (strict); files from the Hub dataset MMVP/MMVP_VLM", mmvp_sets,
    evaluate=evaluate_mmvp, text_only=mmvp_text_only, rule=RULE, table=format_mmvp_table, images_dir=True,
    prompt=PROMPT,
    size="135 pairs (270 images, 270 statements): 9 visual patterns x 15 pairs",
    licence="not stated in the authors' GitHub repository (its only LICENSE is LLaVA's); read the Hub dataset card "
            "of MMVP/MMVP_VLM before redistributing; images collected by the authors from ImageNet and LAION",
    citation="Tong, Liu, Zhai, Ma, LeCun and Xie, Eyes Wide Shut? Exploring the Visual Shortcomings of Multimodal "
             "LLMs, CVPR 2024",
    metrics=(("statement_accuracy", "--task mmvp: statements whose own image scores strictly above the other image"),
             ("i2t_pair_accuracy", "--task mmvp: pairs whose images each score their own statement strictly higher"),
             *((f"pattern_{p}", f"--task mmvp: pair accuracy of the visual pattern {p}") for p, _, _ in PATTERNS)),
    scores=(("accuracy", "pairs (average)"), *((f"pattern_{p}", label) for p, label, _ in PATTERNS))))
