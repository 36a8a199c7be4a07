"""``--task negbench-mcq``: NegBench's multiple-choice questions with negated captions (Alhamoud et al., CVPR 2025).

NegBench ("Vision-Language Models Do Not Understand Negation", github.com/m1k2zoo/negbench) releases its evaluation
sets as CSV files on the authors' Google Drive (the repository's datasets.md links them). A multiple-choice file
(``COCO_val_mcq_llama3.1_rephrased.csv``, ``VOC2007_mcq_llama3.1_rephrased.csv``) has one row per question and
the columns ``correct_answer`` (the right caption's index), ``caption_0`` .. ``caption_3`` (four captions, LLM
paraphrases of the templates "This image features A and B", "... does not feature N", "... features B, but not
N"), ``correct_answer_template`` (the question type: ``positive`` = affirmation, ``negative`` = negation,
``hybrid``) and ``image_path`` (the authors' own path of the image: COCO val2017 or VOC2007 test). vlbench keeps
the file name of ``image_path`` and finds it in the images folder. Scored as every choice set: the right caption
strictly above the three others (a tie is a miss), overall and per question type (the paper's breakdown).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

import numpy as np

from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ..choice import ChoiceItem, ChoiceResult, evaluate_choice, evaluate_text_only
from ..registry import CHOICE_RULE, ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, _image_present, coco_val2017_dir, read_task_text, shown_name

TASK = "negbench-mcq"
REPOSITORY = "github.com/m1k2zoo/negbench"
#: the repository's commit read for the layout, the protocol and the published numbers
COMMIT = "2ac009b5adfb18d1d7c185c466b2bced10f43f6a"
#: piece -> (the released file, where its images come from)
PIECES = {"coco": ("COCO_val_mcq_llama3.1_rephrased.csv", "the COCO 2017 validation images (val2017)"),
          "voc2007": ("VOC2007_mcq_llama3.1_rephrased.csv",
                      "the VOC2007 test images (VOCdevkit/VOC2007/JPEGImages of VOCtest_06-Nov-2007.tar)")}
N_OPTIONS = 4
COLUMNS = ("correct_answer", *(f"caption_{k}" for k in range(N_OPTIONS)), "correct_answer_template", "image_path")
#: the file's question type -> the paper's name, in the paper's order
TYPES = {"positive": "affirmation", "negative": "negation", "hybrid": "hybrid"}
#: how the authors' evaluation names the wrong answer at caption_1..caption_3 when the right one is caption_0
#: (benchmarks/src/evaluation/mcq.py: 1 hybrid, 2 positive, 3 negative)
WRONG_KINDS = ("wrong:hybrid", "wrong:affirmation", "wrong:negation")
DOWNLOAD = "https://drive.google.com/drive/folders/1kSEq0mkV1t1T8GuOAM65iz_iAA7e5gxB (datasets.md of " \
           f"{REPOSITORY})"


@dataclass(frozen=True)
class NegBenchItem(ChoiceItem):
    """One question: ``candidates`` are caption_0..caption_3 in file order, ``correct`` the file's
    correct_answer, ``question_type`` the paper's name of its correct_answer_template."""

    question_type: str = ""


@dataclass
class NegBenchResult(ChoiceResult):
    """A choice result with the accuracy per question type (percent, with its count): ``types[name]``."""

    types: dict = field(default_factory=dict)

    def more_values(self) -> list[tuple[str, float, dict]]:
        return [(f"{name}_accuracy", t["accuracy"], {"n": t["n"]}) for name, t in self.types.items()]

    def as_dict(self) -> dict:
        return super().as_dict() | {"types": self.types, "more_values": [list(v) for v in self.more_values()]}


def type_accuracies(items, correct) -> dict:
    """Percent of each question type's items answered correctly (``correct``: one bool per item), in the
    paper's order; a type with no item is left out."""
    out = {}
    for name in TYPES.values():
        got = [bool(ok) for it, ok in zip(items, correct) if it.question_type == name]
        if got:
            out[name] = {"accuracy": 100.0 * float(np.mean(got)), "n": len(got)}
    return out


def _with_types(res: ChoiceResult, items) -> NegBenchResult:
    types = type_accuracies(items, [r.correct for r in res.records])
    return NegBenchResult(**{f.name: getattr(res, f.name) for f in fields(ChoiceResult)}, types=types)


def evaluate_negbench(items, image_emb, text_emb, *, seed: int = 0) -> NegBenchResult:
    """The choice accuracy (:func:`evaluate_choice`: strict, a tie is a miss) and the accuracy per type."""
    return _with_types(evaluate_choice(items, image_emb, text_emb, seed=seed), items)


def negbench_text_only(items, text_score, *, seed: int = 0) -> NegBenchResult:
    """The blind (text-only) accuracy, overall and per question type."""
    return _with_types(evaluate_text_only(items, text_score, seed=seed), items)


def _fix(piece: str) -> str:
    return f"use the unmodified {PIECES[piece][0]} of NegBench ({DOWNLOAD}), or a file of its columns " \
           f"({', '.join(COLUMNS)})"


def image_name(path: str) -> str:
    """The file name of a released ``image_path`` (the authors' absolute path, POSIX or Windows separators)."""
    path = path.strip().replace("\\", "/")
    return "" if path.endswith("/") else PurePosixPath(path).name


def _row_item(piece: str, n: int, row: dict, where: str) -> NegBenchItem:
    """The item of data row ``n`` (1-based) of a piece's file; a DataError naming the row and the column."""
    caps = []
    for k in range(N_OPTIONS):
        text = row.get(f"caption_{k}")
        if text is None or not text.strip():
            raise DataError(f"{where}: caption_{k} is empty", _fix(piece))
        caps.append(text)
    raw = (row.get("correct_answer") or "").strip()
    try:
        correct = int(raw)
    except ValueError:
        raise DataError(f"{where}: correct_answer {raw!r} is not a whole number (the index of the right caption, "
                        f"0..{N_OPTIONS - 1})", _fix(piece)) from None
    if not 0 <= correct < N_OPTIONS:
        raise DataError(f"{where}: correct_answer {correct} is out of range: the row has {N_OPTIONS} captions "
                        f"(caption_0..caption_{N_OPTIONS - 1})", f"set it to the index of the right caption; "
                                                                 f"{_fix(piece)}")
    template = (row.get("correct_answer_template") or "").strip()
    if template not in TYPES:
        raise DataError(f"{where}: correct_answer_template {template!r} is not one of {', '.join(TYPES)}",
                        _fix(piece))
    name = image_name(row.get("image_path") or "")
    why = "names no file" if not name else _bad_image_name(name)
    if why:
        raise DataError(f"{where}: image_path {shown_name(row.get('image_path') or '')} {why}", _fix(piece))
    kinds = ("right", *WRONG_KINDS) if correct == 0 else ()
    return NegBenchItem(f"{piece}:{n}", f"{piece}/{name}", tuple(caps), correct, kinds, TYPES[template])


def read_piece(path: Path, piece: str) -> list[NegBenchItem]:
    """The questions of one piece's CSV file (comma-separated, a header row, as the authors' pandas reads it); a
    DataError naming the file and the row on a missing column, a bad value, or an image name whose file name
    repeats another row's with a different path."""
    what = f"NegBench {piece} MCQ file"
    reader = csv.DictReader(io.StringIO(read_task_text(path, what, _fix(piece)), newline=""))
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"{what} {path} has no column {', '.join(map(repr, missing))} (its header: "
                        f"{', '.join(map(repr, header)) or 'empty'})", _fix(piece))
    items: list[NegBenchItem] = []
    paths_of: dict[str, tuple[str, int]] = {}
    for n, row in enumerate(reader, start=1):
        where = f"{what} {path} row {n} (line {reader.line_num})"
        if None in row:
            raise DataError(f"{where} has more fields than the header's {len(header)}", _fix(piece))
        item = _row_item(piece, n, row, where)
        first = paths_of.setdefault(item.image, (row["image_path"].strip(), n))
        if first[0] != row["image_path"].strip():
            raise DataError(f"{where}: image_path {shown_name(row['image_path'])} has the file name of row "
                            f"{first[1]}'s {shown_name(first[0])}, another path", "the images are found by file "
                            "name in one folder (--images-dir): give the two images different names")
        items.append(item)
    if not items:
        raise DataError(f"{what} {path} holds no question", _fix(piece))
    return items


def parse_spec(spec: str | None) -> list[str]:
    """``negbench-mcq`` (COCO and VOC2007) or ``negbench-mcq:coco``."""
    name, _, rest = (spec or TASK).partition(":")
    if name != TASK:
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK}[:PIECE,...], not {spec!r}",
                           f"e.g. --dataset {TASK} or --dataset {TASK}:coco")
    pieces = [p.strip().lower() for p in rest.split(",") if p.strip()] or list(PIECES)
    bad = [p for p in pieces if p not in PIECES]
    if bad:
        raise VlbenchError(f"unknown NegBench MCQ piece {bad[0]!r}", f"use some of {', '.join(PIECES)}")
    return list(dict.fromkeys(pieces))


def files_root(data_dir, pieces) -> Path:
    """The folder with the pieces' files: <data-dir>/negbench (or <data-dir> itself). The files are on Google
    Drive only (no pinned raw URL): a missing one is an error saying where to get it."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / "negbench", base):
        if all((cand / PIECES[p][0]).is_file() for p in pieces):
            return cand
    missing = [PIECES[p][0] for p in pieces if not (base / "negbench" / PIECES[p][0]).is_file()]
    raise DataError(f"the NegBench file{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                    f"{'are' if len(missing) > 1 else 'is'} not in {base / 'negbench'}",
                    f"download {', '.join(missing)} from {DOWNLOAD} into {base / 'negbench'}, or pass --data-dir "
                    "naming the folder that holds them")


def _images_dir(cfg, piece: str, root: Path) -> Path:
    if cfg.images_dir:
        return Path(cfg.images_dir).expanduser()
    return coco_val2017_dir() if piece == "coco" else root / "images" / piece


def negbench_sets(cfg, note=None) -> ItemSets:
    """The item sets of ``vlbench run --task negbench-mcq``: one per piece named by ``--dataset``."""
    pieces = parse_spec(cfg.dataset)
    root = files_root(cfg.data_dir, pieces)
    sets, notes, files, image_path, folders = {}, {}, {}, {}, {}
    for p in pieces:
        path = root / PIECES[p][0]
        cond = f"task:{TASK}:{p}"
        items = sets[cond] = read_piece(path, p)
        files[p], folders[p] = sha256_file(path), _images_dir(cfg, p, root)
        notes[cond] = {"items": len(items), "types": {t: sum(it.question_type == t for it in items)
                                                      for t in TYPES.values()}}
        for n, it in enumerate(items, start=1):
            name = it.image.split("/", 1)[1]
            if it.image not in image_path:
                if not _image_present(folders[p], name, f"NegBench {p}"):
                    raise DataError(f"NegBench {p} MCQ file {path} row {n}: its image {shown_name(name)} is not in "
                                    f"{folders[p]}", f"get {PIECES[p][1]} into {folders[p]}, or pass --images-dir "
                                    "naming the folder that holds them (found by the file name of image_path)")
                image_path[it.image] = folders[p] / name
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"files": files}),
            "n_images": len(image_path), "n_items": sum(len(v) for v in sets.values()), "pieces": pieces,
            "source": {"annotations": str(root), "sha256": files, "images": {p: str(folders[p]) for p in pieces},
                       "repository": f"{REPOSITORY}@{COMMIT}", "download": DOWNLOAD}}
    return ItemSets(sets, image_path, desc, notes)


PROTOCOL = {
    "set_version": "the files the authors' README links (COCO_val_mcq_llama3.1_rephrased.csv, "
                   "VOC2007_mcq_llama3.1_rephrased.csv; Google Drive, no checksum published); item counts not stated "
                   "(the COCO value is 1162/2957 in lowest terms, VOC2007 1948/5031)",
    "implementation": "open_clip create_model_and_transforms('ViT-B-32', pretrained='openai') "
                      "(benchmarks/scripts/run_openai_clip.sh, src/evaluation/eval_negation.py)",
    "preprocessing": "open_clip's transform for the OpenAI weights: resize the shorter side to 224 (bicubic), center "
                     "crop 224, RGB, CLIP mean/std",
    "precision": "fp32 (the MCQ evaluation runs without autocast; --precision amp keeps fp32 weights)",
    "lowercase": "tokenizer's own (CLIP's BPE lower-cases)",
    "prompt": "none (each caption as written in the file)",
    "tie_rule": "argmax, first index on a tie (torch.argmax): the right caption is caption_0 in the released files, "
                "so a tie with it counts as a hit; vlbench counts a tie as a miss",
}

#: the published scores of this set (vlbench.published.task_scores): the repository's updated (03/2025) totals
PUBLISHED = (
    {'id': 'negbench-repo-openai-vit-b-32',
     'model': "OpenAI CLIP ViT-B-32 (open_clip ViT-B-32, pretrained='openai')",
     'specs': ['openclip:ViT-B-32/openai', 'clip:openai/clip-vit-base-patch32', 'st:clip-ViT-B-32'],
     'sets': {f"task:{TASK}:coco": {"scores": {"accuracy": 39.30}, "n_items": None, "sha256": []},
              f"task:{TASK}:voc2007": {"scores": {"accuracy": 38.72}, "n_items": None,
                                     "sha256": []}},
     'source': {'kind': 'repository results',
                'citation': 'Alhamoud, Alshammari, Tian, Li, Torr, Kim and Ghassemi, Vision-Language Models Do Not '
                            'Understand Negation, CVPR 2025 (arXiv:2501.09425)',
                'table': 'results/mcq/1_baseline_total.csv, row CLIP-OpenAI (COCO MCQ Total Accuracy '
                         '0.39296584376056815, VOC2007 MCQ Total Accuracy 0.38719936394355; times 100, rounded to 2 '
                         'decimals)',
                'url': f'https://{REPOSITORY}/blob/{COMMIT}/results/mcq/1_baseline_total.csv',
                'read_in': f'{REPOSITORY}, results/mcq/1_baseline_total.csv at commit {COMMIT} (updated 2025-03-13: '
                           'the README names it the corrected values after L2-normalising the features, which moved '
                           "the preprint's Figure 4)",
                'consistency': 'each total is a ratio of whole numbers: 1162/2957 (COCO), 1948/5031 (VOC2007)'},
     'protocol': PROTOCOL,
     'match': {'adapter': 'vlbench.openclip', 'preprocessing_adapter': 'vlbench.openclip', 'precision': 'fp32',
               'strict': False},
     'note': "per-type accuracies are not declared: results/mcq/1_baseline_breakdown.csv was not updated with the "
             "totals (its COCO counts, 1405/2032, 64/935, 791/2012, sum to 2260/4979 = 45.39 %, not the total's "
             "39.30 %)"},
)

BLIND_CEILING = ("none fixed by design: the four options are different sentences; the released files keep the "
                 "right answer at caption_0, a position that vlbench's text-only scorer never sees (it scores each "
                 "option's text)")

NEGBENCH_MCQ = register_task(ChoiceTask(
    TASK, "NegBench MCQ (Alhamoud et al. 2025): which of 4 captions with and without negation fits the image, "
          "affirmation / negation / hybrid questions; COCO val2017 and VOC2007; --dataset negbench-mcq[:coco,voc2007]",
    negbench_sets, evaluate=evaluate_negbench, text_only=negbench_text_only, images_dir=True,
    rule=CHOICE_RULE + "; per question type (affirmation, negation, hybrid) the same rule over its questions",
    size="COCO and VOC2007 pieces, 4 options each (counts not stated by the authors; a run records them)",
    licence="code MIT (the repository's LICENSE); the CSV files carry no licence of their own; images: COCO 2017 val "
            "(Flickr terms, annotations CC BY 4.0), VOC2007 (Flickr terms)",
    citation="Alhamoud, Alshammari, Tian, Li, Torr, Kim and Ghassemi, Vision-Language Models Do Not Understand "
             "Negation, CVPR 2025",
    metrics=(("affirmation_accuracy", "NegBench MCQ: accuracy on the affirmation questions"),
             ("negation_accuracy", "NegBench MCQ: accuracy on the negation questions"),
             ("hybrid_accuracy", "NegBench MCQ: accuracy on the hybrid questions")),
    scores=(("accuracy", "accuracy"), ("affirmation_accuracy", "affirmation"), ("negation_accuracy", "negation"),
            ("hybrid_accuracy", "hybrid")),
    blind_ceiling=BLIND_CEILING, published=PUBLISHED))
