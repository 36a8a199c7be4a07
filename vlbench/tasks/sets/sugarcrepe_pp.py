"""SugarCrepe++ (Dumpala et al., NeurIPS 2024 D&B): an image, two paraphrased positive captions and a hard negative.

Files: ``data/<subset>.json`` of github.com/Sri-Harsha/scpp, a JSON list of
``{"id", "filename", "caption", "caption2", "negative_caption"}`` (images: COCO val2017 file names). Scores, as
the authors' evaluation scripts (``VLMs/test_*.py``, ``evaluate_ulms.py``) compute them from unit embeddings:

* **ITT** (image-to-text): correct when cos(image, P1) > cos(image, N) **and** cos(image, P2) > cos(image, N);
* **TOT** (text-only): correct when cos(P1, P2) > cos(P1, N) **and** cos(P1, P2) > cos(P2, N);
* **P1** / **P2** (the scripts' "Image-P1-Neg" / "Image-P2-Neg"): cos(image, Pi) > cos(image, N) alone.

Every comparison is strict (a tie is a miss), as in the scripts. Each accuracy has the choice tasks' percentile
bootstrap interval over items (:func:`vlbench.tasks.choice.bootstrap_ci`, same seed, so the four share resamples).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...datasets import download
from ...datasets.download import DownloadError
from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import atomic_write_bytes, sha256_file, sha256_json
from ...util.markdown import md_table
from ..blind import SUGARCREPE_TEST_IMAGES
from ..choice import N_BOOT, _lookup, bootstrap_ci, distinct_images, distinct_texts, pair_scores_of
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, check_coco_images, coco_val2017_dir, read_task_text, shown_name

TASK = "sugarcrepe++"
SCPP_SUBSETS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
SCPP_REPO = "github.com/Sri-Harsha/scpp"
SCPP_COMMIT = "c083bbf039a5ca215acaf25e7ee736d2ea6f3864"
SCPP_RAW = f"https://raw.githubusercontent.com/Sri-Harsha/scpp/{SCPP_COMMIT}/data"
#: sha256 and item count of each file at SCPP_COMMIT (4,757 items in all, as the paper)
SCPP_FILES = {
    "replace_att": ("6826413592894754eeca02aeebbcbbc8b95a7456998abcc714e71c033ce6fe87", 788),
    "replace_obj": ("5c6dc499ec8f511a8aa4ec1b7b5eb0eca90317488abe36ec39573355e2d361ab", 1652),
    "replace_rel": ("040fb95d3f0619bf515db60879e99709a87a5e9b4f524ec3403b127243480fd4", 1406),
    "swap_att": ("450d0fd9fcad3e6f44950dc634e7f901ab1c6d9c60a569ade5ae8ffb3d203ad8", 666),
    "swap_obj": ("5f33cae824de431a7ecd3c5de6301f689815f9497aa36d96b154bbaf117b201b", 245),
}
CHANCE = 100.0 / 3  # random scores: the negative is the lowest of three (ITT), cos(P1,P2) the highest (TOT)
RULE = ("ITT: cos(image, P1) > cos(image, N) and cos(image, P2) > cos(image, N); TOT: cos(P1, P2) > cos(P1, N) and "
        "cos(P1, P2) > cos(P2, N); strict (a tie is a miss), as the SugarCrepe++ evaluation scripts")
#: metric name of each accuracy in results.json (``accuracy`` is ITT, so the choice-task table shows it)
METRICS = {"itt": "accuracy", "tot": "tot_accuracy", "p1": "p1_accuracy", "p2": "p2_accuracy"}


@dataclass(frozen=True)
class TripletItem:
    """One SugarCrepe++ item: ``image`` (a file name) with positives ``p1``, ``p2`` and hard negative ``neg``."""

    item_id: str
    image: str
    p1: str
    p2: str
    neg: str

    @property
    def candidates(self) -> tuple[str, str, str]:
        return (self.p1, self.p2, self.neg)


@dataclass
class TripletRecord:
    item_id: str
    image: str
    scores: list[float]  # cos(image, P1), cos(image, P2), cos(image, N)
    text_scores: list[float]  # cos(P1, P2), cos(P1, N), cos(P2, N)
    itt: bool
    tot: bool
    p1: bool
    p2: bool

    @property
    def chosen(self) -> int:  # the caption the image scores highest (first on ties)
        return int(np.argmax(self.scores))

    @property
    def correct(self) -> bool:
        return self.itt

    @property
    def extra_columns(self) -> dict:
        return {"tot_correct": int(self.tot), "p1_correct": int(self.p1), "p2_correct": int(self.p2),
                "text_scores": json.dumps(self.text_scores)}


@dataclass
class TripletResult:
    """ITT accuracy as ``accuracy`` (with ``ci_low`` / ``ci_high``), and ``scores[name]`` = (accuracy, ci_low,
    ci_high) for each of itt, tot, p1, p2; percent."""

    accuracy: float
    ci_low: float
    ci_high: float
    n_items: int
    scores: dict
    records: list[TripletRecord] = field(default_factory=list)
    ci_seed: int = 0
    chance: float = CHANCE
    by_kind: dict = field(default_factory=dict)

    def more_values(self) -> list[tuple[str, float, dict]]:
        """(metric, value, extra) of the accuracies other than ITT (results.json records)."""
        return [(METRICS[k], acc, {"ci_low": lo, "ci_high": hi, "n": self.n_items})
                for k, (acc, lo, hi) in self.scores.items() if k != "itt"]

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high, "n_items": self.n_items,
                "chance": self.chance, "ci_seed": self.ci_seed, "n_boot": N_BOOT,
                **{k: dict(zip(("accuracy", "ci_low", "ci_high"), v)) for k, v in self.scores.items()}}


def _summary(flags: dict[str, list[bool]], records, seed: int) -> TripletResult:
    if not records:
        raise VlbenchError("no SugarCrepe++ items", "build items with scpp_items first")
    scores = {}
    for name, f in flags.items():
        ok = np.asarray(f, dtype=np.float64)
        scores[name] = (float(ok.mean() * 100.0), *bootstrap_ci(ok, seed))
    itt = scores["itt"]
    return TripletResult(itt[0], itt[1], itt[2], len(records), scores, records, seed)


#: why a pair scorer cannot be the model of this set (ChoiceTask ``pair_refused``)
PAIR_REFUSED = ("its text-only-text (TOT) score compares the two positive captions with each other by the model's "
                "text embeddings, and a pair scorer scores an image with a text, never two texts")


def evaluate_triplets(items: Sequence[TripletItem], image_emb, text_emb, *, seed: int = 0) -> TripletResult:
    """ITT, TOT, P1 and P2 accuracies from embeddings: mappings key -> vector, or arrays whose rows follow
    ``distinct_images(items)`` / ``distinct_texts(items)`` (vectors are normalised here). Pair scores are refused
    (:data:`PAIR_REFUSED`): TOT compares two captions with each other, which a pair scorer cannot score."""
    if pair_scores_of(image_emb, text_emb) is not None:
        raise VlbenchError(f"SugarCrepe++ cannot be scored with pair scores alone: {PAIR_REFUSED}",
                           "run --task sugarcrepe++ with a dual encoder, or --task sugarcrepe with the pair scorer")
    img = _lookup(image_emb, distinct_images(items), "image")
    txt = _lookup(text_emb, distinct_texts(items), "text")
    records: list[TripletRecord] = []
    flags: dict[str, list[bool]] = {"itt": [], "tot": [], "p1": [], "p2": []}
    for it in items:
        v, p1, p2, n = img[it.image], txt[it.p1], txt[it.p2], txt[it.neg]
        s = [float(v @ p1), float(v @ p2), float(v @ n)]
        t = [float(p1 @ p2), float(p1 @ n), float(p2 @ n)]
        rec = TripletRecord(it.item_id, it.image, s, t, s[0] > s[2] and s[1] > s[2], t[0] > t[1] and t[0] > t[2],
                            s[0] > s[2], s[1] > s[2])
        records.append(rec)
        for name in flags:
            flags[name].append(getattr(rec, name))
    return _summary(flags, records, seed)


def evaluate_triplets_text_only(items: Sequence[TripletItem], text_score, *, seed: int = 0) -> TripletResult:
    """A blind ITT: both positives more plausible than the negative under a text-only scorer (no image);
    ``text_score`` maps a list of texts to one score each (higher = more plausible). TOT needs embeddings,
    so a blind result holds ITT, P1 and P2 only."""
    texts = distinct_texts(items)
    by_text = dict(zip(texts, np.asarray(text_score(texts), dtype=np.float64)))
    records: list[TripletRecord] = []
    flags: dict[str, list[bool]] = {"itt": [], "p1": [], "p2": []}
    for it in items:
        s = [float(by_text[c]) for c in it.candidates]
        rec = TripletRecord(it.item_id, it.image, s, [], s[0] > s[2] and s[1] > s[2], False, s[0] > s[2], s[1] > s[2])
        records.append(rec)
        for name in flags:
            flags[name].append(getattr(rec, name))
    return _summary(flags, records, seed)


def parse_scpp_spec(spec: str | None) -> list[str]:
    """``sugarcrepe++`` (all five) or ``sugarcrepe++:swap_obj,replace-att`` (``-`` or ``_``)."""
    name, _, rest = (spec or TASK).partition(":")
    if name != TASK:
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK}[:SUBSET,...], not {spec!r}",
                           f"e.g. --dataset {TASK} or --dataset {TASK}:swap_obj")
    subsets = [s.strip().replace("-", "_") for s in rest.split(",") if s.strip()] or list(SCPP_SUBSETS)
    bad = [s for s in subsets if s not in SCPP_SUBSETS]
    if bad:
        raise VlbenchError(f"unknown SugarCrepe++ subset {bad[0]!r}", f"use some of {', '.join(SCPP_SUBSETS)} "
                           "(SugarCrepe++ has no add_att / add_obj sets)")
    return list(dict.fromkeys(subsets))


def read_scpp_file(path: Path, subset: str) -> list[TripletItem]:
    """The items of a SugarCrepe++ file; a DataError naming the file (and item) when it is not UTF-8 JSON of the
    official shape, has no items, repeats an id, or names an image outside the images folder."""
    fix = f"use the unmodified data/{path.name} of {SCPP_REPO} (commit {SCPP_COMMIT[:10]}), or a file of its format"
    text = read_task_text(path, "SugarCrepe++ file", fix)
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"SugarCrepe++ file {path} is not valid JSON ({exc})", fix) from None
    if not isinstance(raw, list) or not raw:
        raise DataError(f"SugarCrepe++ file {path} holds {'no items' if raw == [] else 'a JSON ' + type(raw).__name__}"
                        ', not a list of items ([{"id", "filename", "caption", "caption2", "negative_caption"}, ...])',
                        fix)
    out, seen = [], set()
    for i, row in enumerate(raw):
        where = f"SugarCrepe++ file {path} item {i}"
        if not isinstance(row, dict) or not all(isinstance(row.get(f), str) and row[f].strip() for f in
                                                ("filename", "caption", "caption2", "negative_caption")):
            raise DataError(f"{where} lacks filename / caption / caption2 / negative_caption (each a non-empty "
                            "string)", fix)
        key = str(row.get("id", i))
        if key in seen:
            raise DataError(f"{where} repeats id {key!r}", fix)
        seen.add(key)
        why = _bad_image_name(row["filename"])
        if why:
            raise DataError(f"{where}: image name {shown_name(row['filename'])} {why}",
                            "image names must be file names inside the images folder (--images-dir)")
        out.append(TripletItem(f"{subset}:{key}", row["filename"], row["caption"], row["caption2"],
                               row["negative_caption"]))
    return out


def scpp_items(root, subset: str, *, images_dir=None, check_images: bool = True) -> list[TripletItem]:
    """SugarCrepe++'s ``subset`` from ``root/<subset>.json``; ``check_images``: a DataError naming the folder
    when images are missing from ``images_dir`` (default: the COCO val2017 folder of ``--task sugarcrepe``)."""
    (subset,) = parse_scpp_spec(f"{TASK}:{subset}")
    path = Path(root) / f"{subset}.json"
    if not path.is_file():
        raise DataError(f"SugarCrepe++ file {path} not found", f"put data/{subset}.json of {SCPP_REPO} in {root}")
    items = read_scpp_file(path, subset)
    if check_images:
        check_coco_images(items, images_dir, f"SugarCrepe++ {subset}")
    return items


def scpp_root(data_dir=None, subsets=SCPP_SUBSETS, note=None) -> Path:
    """The folder with the files of ``subsets``: <data-dir>/sugarcrepe_pp (or <data-dir> itself); online, missing
    ones are downloaded there from the pinned commit and checked against their pinned sha256."""

    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / "sugarcrepe_pp", base):
        if all((cand / f"{s}.json").is_file() for s in subsets):
            return cand
    target = base / "sugarcrepe_pp"
    missing = [s for s in subsets if not (target / f"{s}.json").is_file()]
    names = ", ".join(f"{s}.json" for s in missing)
    where = (f"put {names} from the data/ folder of {SCPP_REPO} (commit {SCPP_COMMIT[:10]}, {SCPP_RAW}/<name>.json) "
             f"in {target}, or pass --data-dir naming the folder that holds them")
    if paths.offline():
        raise DataError(f"the SugarCrepe++ file(s) {names} are not in {target}", where)


    for s in missing:
        try:
            body = download.http_get(f"{SCPP_RAW}/{s}.json")
        except DownloadError as exc:
            raise DataError(f"could not download SugarCrepe++'s {s}.json: {exc.reason}", where) from None
        digest = hashlib.sha256(body).hexdigest()
        if digest != SCPP_FILES[s][0]:
            raise DataError(f"the downloaded SugarCrepe++ {s}.json has sha256 {digest[:16]}..., pinned "
                            f"{SCPP_FILES[s][0][:16]}... (altered in transit, or not the pinned commit's file); "
                            "nothing was written", f"try again later, or {where}")
        atomic_write_bytes(target / f"{s}.json", body)
        if note:
            note(f"downloaded SugarCrepe++ {s}.json to {target}")
    return target


def scpp_sets(cfg, note=None) -> ItemSets:
    """The item sets of ``vlbench run --task sugarcrepe++``: one per subset named by ``--dataset``."""

    subsets = parse_scpp_spec(cfg.dataset)
    root = scpp_root(cfg.data_dir, subsets, note)
    images = Path(cfg.images_dir).expanduser() if cfg.images_dir else coco_val2017_dir()
    sets, notes, files = {}, {}, {}
    for s in subsets:
        sets[f"task:{TASK}:{s}"] = scpp_items(root, s, images_dir=images)
        files[s] = sha256_file(root / f"{s}.json")
        notes[f"task:{TASK}:{s}"] = {"items": len(sets[f"task:{TASK}:{s}"]),
                                     "pinned_file": files[s] == SCPP_FILES[s][0]}
    changed = [s for s in subsets if files[s] != SCPP_FILES[s][0]]
    if changed and note:
        note(f"SugarCrepe++ {', '.join(changed)}: not the pinned file (sha256 differs from commit "
             f"{SCPP_COMMIT[:10]}); recorded as pinned_file=false")
    keys = dict.fromkeys(it.image for items in sets.values() for it in items)
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"files": files}), "n_images": len(keys),
            "n_items": sum(len(v) for v in sets.values()), "subsets": subsets,
            "source": {"annotations": str(root), "sha256": files, "images": str(images),
                       "repository": f"{SCPP_REPO}@{SCPP_COMMIT}"}}
    return ItemSets(sets, {k: images / k for k in keys}, desc, notes)


def format_scpp_table(rec) -> str:
    """table.md of a SugarCrepe++ run: ITT, TOT, P1, P2 with their intervals, chance and the blind ITT."""

    def cell(v):
        return f"{v.value:.2f} [{v.extra['ci_low']:.2f}, {v.extra['ci_high']:.2f}]" if v else "-"

    rows = []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        rows.append([cond, get["accuracy"].extra["n"], *(cell(get.get(m)) for m in METRICS.values()),
                     f"{get['chance'].value:.2f}", cell(get.get("blind_accuracy"))])
    return md_table(["set", "items", "ITT %", "TOT %", "image P1>N %", "image P2>N %", "chance %",
                     "blind ITT (text-only) %"], rows, pad=True)


SUGARCREPE_PP = register_task(ChoiceTask(
    TASK, "SugarCrepe++ (Dumpala et al. 2024): image, two paraphrased positives and a hard negative; ITT and TOT "
          "accuracies, COCO val2017 images; --dataset sugarcrepe++[:SUBSET,...]", scpp_sets,
    evaluate=evaluate_triplets, text_only=evaluate_triplets_text_only, rule=RULE, table=format_scpp_table,
    pair_refused=PAIR_REFUSED,
    # its images are a subset of SugarCrepe's (every file name of its five sets is in SugarCrepe's)
    images_dir=True, blind_excluded_images=SUGARCREPE_TEST_IMAGES,
    right_candidates=lambda item: (0, 1),  # --perturb-options correct: both positives are right
    metrics=(("tot_accuracy", "--task sugarcrepe++: text-only task, cos(P1, P2) above cos(P1, N) and cos(P2, N)"),
             ("p1_accuracy", "--task sugarcrepe++: cos(image, P1) above cos(image, N), P2 not considered"),
             ("p2_accuracy", "--task sugarcrepe++: cos(image, P2) above cos(image, N), P1 not considered")),
    scores=(("accuracy", "ITT"), ("tot_accuracy", "TOT")),
    size="4,757 items in 5 sets (an image, two paraphrased positives, a hard negative): "
         + ", ".join(f"{s} {n:,}" for s, (_, n) in SCPP_FILES.items()),
    licence="the repository's README: CC BY 4.0 (its LICENSE file: MIT); images: COCO 2017 val (Flickr terms)",
    citation="Dumpala, Jaiswal, Sastry, Milios, Oore and Sajjad, SugarCrepe++ Dataset: Vision-Language Model "
             "Sensitivity to Semantic and Lexical Alterations, NeurIPS 2024 Datasets and Benchmarks"))
