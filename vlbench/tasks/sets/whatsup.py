"""``--task whatsup``: What'sUp (Kamath et al., EMNLP 2023), spatial relations, one registered record.

Files, in the layout the authors release (github.com/amitakamath/whatsup_vlms, ``dataset_zoo/aro_datasets.py``;
the JSON files and images are on their Google Drive, never shipped with vlbench), one JSON file per subset:

* Controlled_Images A / B (``controlled_images_dataset.json`` / ``controlled_clevr_dataset.json``): a list of
  ``{"image_path": "data/controlled_images/<file>", "caption_options": [4 captions]}``; images in
  ``controlled_images/`` / ``controlled_clevr/``;
* COCO-QA and VG-QA one / two objects (``coco_qa_one_obj.json``, ``coco_qa_two_obj.json``, ``vg_qa_one_obj.json``,
  ``vg_qa_two_obj.json``): a list of ``[image_id, correct caption, wrong caption]`` (2 options); images
  ``val2017/<id as 12 digits>.jpg`` (COCO val2017) and ``vg_images/<id>.jpg`` (Visual Genome).

The first caption option is always the right one. Score: accuracy over the options (4 for Controlled A / B,
2 for the QA subsets), correct only when the right caption scores strictly above every other (a tie is a
miss; the authors' ``np.argmax`` counts a tie with the first option as a hit).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

import numpy as np

from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ..choice import ChoiceItem, ChoiceResult, distinct_images, evaluate_choice, evaluate_text_only
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "whatsup"
REPO = "github.com/amitakamath/whatsup_vlms"
COMMIT = "7c1f255"  # the commit whose loaders (dataset_zoo/aro_datasets.py) this layout follows


@dataclass(frozen=True)
class Subset:
    file: str  # the released JSON file name
    images: str  # the image folder (under the images root)
    options: int  # caption options per image
    controlled: bool  # {"image_path", "caption_options"} rows (else [image_id, right, wrong] rows)


SUBSETS = {
    "controlled_a": Subset("controlled_images_dataset.json", "controlled_images", 4, True),
    "controlled_b": Subset("controlled_clevr_dataset.json", "controlled_clevr", 4, True),
    "coco_qa_one": Subset("coco_qa_one_obj.json", "val2017", 2, False),
    "coco_qa_two": Subset("coco_qa_two_obj.json", "val2017", 2, False),
    "vg_qa_one": Subset("vg_qa_one_obj.json", "vg_images", 2, False),
    "vg_qa_two": Subset("vg_qa_two_obj.json", "vg_images", 2, False),
}


#: items per released subset file where the paper pins it (Controlled A / B: the counts its Table 3 percentages are
#: whole numbers of; its section 2.1 prose gives 408 / 412 the other way round). COCO-QA one + two hold 2,687 images
#: together, VG-QA one + two 1,451 (its section 2.1); no per-file split is published, so those are not pinned.
SIZES = {"controlled_a": 412, "controlled_b": 408}
#: the paper's totals over a pair of QA subsets (COCO-spatial, GQA-spatial)
QA_TOTALS = {("coco_qa_one", "coco_qa_two"): 2687, ("vg_qa_one", "vg_qa_two"): 1451}
#: no sha256 is pinned: the JSON files are only on the authors' Google Drive (not in the repository), which the
#: release could not read; a run records the sha256 of each file it read (``dataset.source.sha256``)


def _fix(sub: Subset) -> str:
    return (f"use the unmodified {sub.file} of What'sUp ({REPO}, the Google Drive folder its README links), or a file "
            "of its layout")


#: Controlled A / B: the preposition pairs of one object pair (the file name's second "_" part, as the authors' code)
PAIRS = {"controlled_images": (("left", "right"), ("on", "under")),
         "controlled_clevr": (("left", "right"), ("in-front", "behind"))}


@dataclass
class WhatsUpResult(ChoiceResult):
    """A choice result with, for Controlled A / B, ``pair`` and ``set`` accuracies (percent, with their counts)."""

    groups: dict = field(default_factory=dict)  # name -> {"accuracy", "n"}

    def more_values(self) -> list[tuple[str, float, dict]]:
        return [(f"{name}_accuracy", g["accuracy"], {"n": g["n"]}) for name, g in self.groups.items()]

    def as_dict(self) -> dict:
        return super().as_dict() | {f"{name}_accuracy": g for name, g in self.groups.items()}


def controlled_groups(items, correct) -> dict:
    """The authors' pair and set accuracies of Controlled A / B items (``correct``: one bool per item). Each image
    file is ``<object>_<preposition>_..._<object>.jpeg``; a pair (left/right, on/under or in-front/behind of one
    object pair) is right when both its images are, a set when all four are; the percentages are over the pairs
    and sets present in full. Empty when the items are not Controlled ones or their names do not parse."""
    slots: dict[tuple, dict] = {}
    for it, ok in zip(items, correct):
        folder, _, name = it.image.partition("/")
        parts = name.rsplit(".", 1)[0].split("_")
        if folder not in PAIRS or len(parts) < 3:
            return {}
        slots.setdefault((folder, parts[0], parts[-1]), {})[parts[1]] = bool(ok)
    pairs, sets = [], []
    for (folder, _, _), got in slots.items():
        for a, b in PAIRS[folder]:
            if a in got and b in got:
                pairs.append(got[a] and got[b])
        if all(p in got for pair in PAIRS[folder] for p in pair):
            sets.append(all(got.values()))
    return {name: {"accuracy": 100.0 * float(np.mean(v)), "n": len(v)} for name, v in (("pair", pairs), ("set", sets))
            if v}


def evaluate_whatsup(items, image_emb, text_emb, *, seed: int = 0) -> WhatsUpResult:
    """The choice accuracy (:func:`evaluate_choice`) and, for Controlled A / B, the pair and set accuracies."""
    res = evaluate_choice(items, image_emb, text_emb, seed=seed)
    groups = controlled_groups(items, [r.correct for r in res.records])
    return WhatsUpResult(**{f.name: getattr(res, f.name) for f in fields(ChoiceResult)}, groups=groups)


def whatsup_text_only(items, text_score, *, seed: int = 0) -> WhatsUpResult:
    """The blind (text-only) accuracy, with the pair and set accuracies it implies."""
    res = evaluate_text_only(items, text_score, seed=seed)
    groups = controlled_groups(items, [r.correct for r in res.records])
    return WhatsUpResult(**{f.name: getattr(res, f.name) for f in fields(ChoiceResult)}, groups=groups)


def parse_whatsup_spec(spec: str | None) -> list[str]:
    """``whatsup`` (all six) or ``whatsup:controlled_a,vg-qa-one`` (``-`` or ``_``)."""
    name, _, rest = (spec or TASK).partition(":")
    if name != TASK:
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK}[:SUBSET,...], not {spec!r}",
                           f"e.g. --dataset {TASK} or --dataset {TASK}:controlled_a")
    subsets = [s.strip().replace("-", "_").lower() for s in rest.split(",") if s.strip()] or list(SUBSETS)
    bad = [s for s in subsets if s not in SUBSETS]
    if bad:
        raise VlbenchError(f"unknown What'sUp subset {bad[0]!r}", f"use some of {', '.join(SUBSETS)}")
    return list(dict.fromkeys(subsets))


def _image_key(sub: Subset, value, where: str, field: str) -> str:
    if sub.controlled:
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{where}: field {field!r} is not a non-empty string", "")
        name = PurePosixPath(value.replace("\\", "/")).name
    elif sub.images == "val2017":
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
            raise DataError(f"{where}: field {field!r} is {value!r}, not a COCO image id (an integer)", "")
        name = f"{int(value):012d}.jpg"
    else:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip():
            raise DataError(f"{where}: field {field!r} is {value!r}, not a Visual Genome image id", "")
        name = f"{value}.jpg"
    why = _bad_image_name(name)
    if why or "/" in name or "\\" in name:
        raise DataError(f"{where}: field {field!r}: image name {shown_name(name)} {why or 'is not a file name'}", "")
    return f"{sub.images}/{name}"


def read_whatsup_file(path: Path, subset: str) -> list[ChoiceItem]:
    """The items of a What'sUp subset file (candidate 0 is the right caption); a DataError naming the file, the
    item and the field when it is not UTF-8 JSON of the released layout."""
    sub = SUBSETS[subset]
    fix = _fix(sub)
    text = read_task_text(path, "What'sUp file", fix)
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"What'sUp file {path} is not valid JSON ({exc})", fix) from None
    shape = ('[{"image_path", "caption_options": [4 captions]}, ...]' if sub.controlled
             else "[[image_id, right caption, wrong caption], ...]")
    if not isinstance(raw, list) or not raw:
        raise DataError(f"What'sUp file {path} holds {'no items' if raw == [] else 'a JSON ' + type(raw).__name__}, "
                        f"not a list of items ({shape})", fix)
    items = []
    for i, row in enumerate(raw):
        where = f"What'sUp file {path} item {i}"
        try:
            if sub.controlled:
                if not isinstance(row, dict):
                    raise DataError(f"{where} is a JSON {type(row).__name__}, not an object ({shape})", "")
                image = _image_key(sub, row.get("image_path"), where, "image_path")
                options = row.get("caption_options")
                field = "caption_options"
            else:
                if not isinstance(row, list) or len(row) != 3:
                    raise DataError(f"{where} is not a list [image_id, right caption, wrong caption]", "")
                image = _image_key(sub, row[0], where, "image_id (position 0)")
                options = row[1:]
                field = "captions (positions 1-2)"
            if (not isinstance(options, list) or len(options) != sub.options
                    or not all(isinstance(c, str) and c.strip() for c in options)):
                raise DataError(f"{where}: field {field!r} is not {sub.options} non-empty caption strings", "")
        except DataError as exc:
            raise DataError(exc.message, fix) from None
        items.append(ChoiceItem(f"{subset}:{i}", image, tuple(options), 0))
    return items


def whatsup_root(data_dir=None, subsets=tuple(SUBSETS)) -> Path:
    """The folder with the JSON files of ``subsets``: <data-dir>/whatsup, or <data-dir> itself."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / TASK, base):
        if all((cand / SUBSETS[s].file).is_file() for s in subsets):
            return cand
    target = base / TASK
    missing = [SUBSETS[s].file for s in subsets if not (target / SUBSETS[s].file).is_file()]
    raise DataError(f"the What'sUp file{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                    f"{'are' if len(missing) > 1 else 'is'} not in {target}",
                    f"download them from the Google Drive folder linked in {REPO}'s README into {target}, or pass "
                    "--data-dir naming the folder that holds them")


def whatsup_items(root, subset: str, *, images_dir=None, check_images: bool = True) -> list[ChoiceItem]:
    """What'sUp's ``subset`` from ``root``; ``check_images``: a DataError naming the folder and the first missing
    file when images are not under ``images_dir`` (default ``root``: its controlled_images/, controlled_clevr/,
    val2017/ and vg_images/ folders, as the authors' data/ folder)."""
    (subset,) = parse_whatsup_spec(f"{TASK}:{subset}")
    path = Path(root) / SUBSETS[subset].file
    if not path.is_file():
        raise DataError(f"What'sUp file {path} not found", f"put {SUBSETS[subset].file} of What'sUp in {root}")
    items = read_whatsup_file(path, subset)
    if check_images:
        folder = Path(images_dir) if images_dir is not None else Path(root)
        missing = [it.image for it in items if not _image_present(folder, it.image, f"What'sUp {subset}")]
        if missing:
            raise DataError(f"{len(missing)} of {len(items)} images of What'sUp {subset} are missing from {folder} "
                            f"(first: {missing[0]})", f"unpack the subset's images so they sit in {folder}/"
                            f"{SUBSETS[subset].images}/, or pass --images-dir naming the folder that holds "
                            f"{SUBSETS[subset].images}/")
    return items


def whatsup_sets(cfg, note=None) -> ItemSets:
    """The item sets of ``vlbench run --task whatsup``: one per subset named by ``--dataset``."""
    subsets = parse_whatsup_spec(cfg.dataset)
    root = whatsup_root(cfg.data_dir, subsets)
    images = Path(cfg.images_dir).expanduser() if cfg.images_dir else root
    sets, notes, files = {}, {}, {}
    for s in subsets:
        cond = f"task:{TASK}:{s}"
        sets[cond] = whatsup_items(root, s, images_dir=images)
        files[s] = sha256_file(root / SUBSETS[s].file)
        notes[cond] = {"items": len(sets[cond]), "options": SUBSETS[s].options}
        if s in SIZES and len(sets[cond]) != SIZES[s] and note:
            note(f"What'sUp {s}: {len(sets[cond])} items, not the released {SIZES[s]} (a subset or a changed file)")
    for pair, total in QA_TOTALS.items():
        got = sum(len(sets[f"task:{TASK}:{s}"]) for s in pair if s in subsets)
        if all(s in subsets for s in pair) and got != total and note:
            note(f"What'sUp {' + '.join(pair)}: {got} items, not the released {total:,} (a subset or a changed file)")
    keys = distinct_images([it for items in sets.values() for it in items])
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"files": files}), "n_images": len(keys),
            "n_items": sum(len(v) for v in sets.values()), "subsets": subsets,
            "source": {"annotations": str(root), "sha256": files, "images": str(images),
                       "repository": f"{REPO}@{COMMIT}"}}
    return ItemSets(sets, {k: images / k for k in keys}, desc, notes)


#: the published scores of this set (vlbench.published.task_scores; docs/published.md): one entry per source
PUBLISHED = (
    {'id': 'whatsup-paper-openai-clip-vit-b-32',
     'model': "CLIP ViT-B/32 (the authors' openai-clip:ViT-B/32: OpenAI's clip package and weights)",
     'specs': ['openclip:ViT-B-32/openai', 'clip:openai/clip-vit-base-patch32', 'st:clip-ViT-B-32'],
     'sets': {'task:whatsup:controlled_a': {'scores': {'accuracy': 30.3, 'pair_accuracy': 0.5, 'set_accuracy': 0.0},
                                            'n_items': 412,
                                            'sha256': []},
              'task:whatsup:controlled_b': {'scores': {'accuracy': 31.6, 'pair_accuracy': 1.0, 'set_accuracy': 0.0},
                                            'n_items': 408,
                                            'sha256': []},
              'task:whatsup:coco_qa_one': {'scores': {'accuracy': 43.7}, 'n_items': None, 'sha256': []},
              'task:whatsup:coco_qa_two': {'scores': {'accuracy': 51.1}, 'n_items': None, 'sha256': []},
              'task:whatsup:vg_qa_one': {'scores': {'accuracy': 46.5}, 'n_items': None, 'sha256': []},
              'task:whatsup:vg_qa_two': {'scores': {'accuracy': 47.4}, 'n_items': None, 'sha256': []}},
     'source': {'kind': 'paper',
                'citation': 'Kamath, Hessel and Chang, What\'s "up" with vision-language models? Investigating '
                            'their struggle with spatial reasoning, EMNLP 2023 (arXiv:2310.19785)',
                'table': "Appendix Table 3 (detailed results), row CLIP ViT-B/32: What'sUp Subset A and B "
                         'individual / pair / set-of-4 accuracy, COCO-spatial and GQA-spatial one- and two-object '
                         'accuracy',
                'url': 'https://aclanthology.org/2023.emnlp-main.568/',
                'read_in': "a text copy of the paper (Appendix Table 3; Table 6's 'No Priors' block repeats the "
                           "row, Table 1's averages 31.0 / 47.4 / 46.9 are the means of its pairs)",
                'consistency': 'the Controlled values are whole numbers of 412 (A) and 408 (B) images, 206 and 204 '
                               'pairs'},
     'protocol': {'set_version': "the authors' JSON files (Google Drive folder of amitakamath/whatsup_vlms); no "
                                 'checksum is published',
                  'implementation': "OpenAI's clip package: clip.load('ViT-B/32') (whatsup_vlms model_zoo)",
                  'preprocessing': "the clip package's transform: resize the shorter side to 224 (bicubic), center "
                                   'crop 224, RGB, CLIP mean/std',
                  'precision': "fp16 (clip.load keeps the weights in half precision on a CUDA device, the authors' "
                               'default)',
                  'lowercase': "tokenizer's own (CLIP's BPE lower-cases)",
                  'prompt': 'none (the caption options as written)',
                  'tie_rule': 'np.argmax over the options: a tie with the first (right) option counts as a hit; '
                              'vlbench counts it as a miss'},
     'match': {'adapter': None, 'preprocessing_adapter': 'vlbench.openclip', 'precision': 'fp16', 'strict': False},
     'note': 'COCO-spatial = coco_qa_one / coco_qa_two, GQA-spatial = vg_qa_one / vg_qa_two (the file names of the '
             'release)'},
)


WHATSUP = register_task(ChoiceTask(
    TASK, "What'sUp (Kamath et al. 2023): spatial relations; Controlled A / B (4 options), COCO-QA and VG-QA one / "
          "two objects (2 options); --dataset whatsup[:SUBSET,...], --images-dir the folder of its image folders",
    whatsup_sets, evaluate=evaluate_whatsup, text_only=whatsup_text_only, images_dir=True,
    size="6 subsets, one item per image: " + ", ".join(f"{k} {n}" for k, n in SIZES.items()) + " (4 options each); "
         + ", ".join(f"{' + '.join(p)} {n:,} together" for p, n in QA_TOTALS.items())
         + " (2 options each; the paper gives no per-file split); counts recorded per run",
    licence="the repository is MIT (its LICENSE); the data files on its Google Drive state no licence of their own; "
            "images: COCO val2017 (Flickr terms), Visual Genome (CC BY 4.0), the authors' own photographs and renders",
    citation="Kamath, Hessel and Chang, What's \"up\" with vision-language models? Investigating their struggle "
             "with spatial reasoning, EMNLP 2023",
    metrics=(("pair_accuracy", "--task whatsup (Controlled A / B): pairs of images whose two items are both right"),
             ("set_accuracy", "--task whatsup (Controlled A / B): sets of four images whose items are all right")),
    scores=(("accuracy", "individual"), ("pair_accuracy", "pairs"), ("set_accuracy", "sets of 4")),
    published=PUBLISHED))
