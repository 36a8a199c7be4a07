"""``--task aro``: ARO's VG-Relation and VG-Attribution (Yuksekgonul et al., ICLR 2023), one registered record.

Files, in the layout the authors release (github.com/mertyg/vision-language-models-are-bows,
``dataset_zoo/aro_datasets.py``; the JSON files and ``vgr_vga_images.zip`` are on their Google Drive, never shipped
with vlbench): ``visual_genome_relation.json`` and ``visual_genome_attribution.json``, each a list of
``{"image_path", "bbox_x", "bbox_y", "bbox_w", "bbox_h", "true_caption", "false_caption", ...}`` with
``relation_name`` (VG-Relation) or ``attributes`` (VG-Attribution: the two attributes), and ``images/<image_path>``.

As the authors' loader does, each image is cropped to its item's box (``PIL.Image.crop((x, y, x + w, y + h))`` of
the RGB image) before the model sees it; the crops are written once as PNG files into the ``aro-crops`` cache.

Scores, as the authors' notebook (``notebooks/Replicate ARO! VG-Relation, VG-Attribution.ipynb``) computes the
paper's numbers: an item is right when the true caption scores above the false one (strictly: a tie is a miss, as
the authors' ``argmax`` over [false, true] also counts it); **macro accuracy** (``accuracy``) is the unweighted mean
of the per-group accuracies, a group being a relation (VG-Relation, leaving out the relations the notebook lists,
:data:`EXCLUDED_RELATIONS`) or an attribute pair ``"<a1>_<a2>"`` (VG-Attribution, only pairs with at least
:data:`MIN_ATTRIBUTE_ITEMS` items, as ``evaluate_scores``). ``micro_accuracy``: over all items. Chance: 50.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ... import stores
from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ...util.markdown import md_table
from ..choice import N_BOOT, ChoiceItem, ChoiceResult, evaluate_choice, evaluate_text_only
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "aro"
REPO = "github.com/mertyg/vision-language-models-are-bows"
COMMIT = "81fdd20dc5b6f434aa5a4a971717bc80d1cedb0d"  # the commit whose loaders and notebook this module follows
IMAGES_ZIP = "vgr_vga_images.zip"  # Google Drive id 1qaPlrwhGNMrR3a11iopZUT_GPP_LrgP9 (the authors' download())
MIN_ATTRIBUTE_ITEMS = 25  # VG-Attribution: attribute pairs with fewer items are left out of the macro accuracy
BOX = ("bbox_x", "bbox_y", "bbox_w", "bbox_h")
CROPS = "aro-crops"  # the cache store of the cropped images


@dataclass(frozen=True)
class Subset:
    file: str  # the released JSON file name
    group: str  # the field naming an item's group (relation_name, or attributes: two strings)
    n_items: int  # items in the released file (the paper's Table 1)


SUBSETS = {"vg_relation": Subset("visual_genome_relation.json", "relation_name", 23937),
           "vg_attribution": Subset("visual_genome_attribution.json", "attributes", 28748)}

#: VG-Relation: relations the authors' notebook leaves out of the macro accuracy (its list ``symmetric``: relations
#: whose swapped caption can be as true as the original, and rare ones); their items still count in micro_accuracy
EXCLUDED_RELATIONS = frozenset((
    "adjusting", "around", "attached to", "beside", "between", "bigger than", "biting", "boarding", "brushing", "by",
    "chewing", "cleaning", "climbing", "close to", "coming from", "coming out of", "contain", "crossing", "dragging",
    "draped over", "drinking", "drinking from", "driving", "driving down", "driving on", "eating from", "eating in",
    "enclosing", "exiting", "facing", "filled with", "floating in", "floating on", "flying", "flying above",
    "flying in", "flying over", "flying through", "full of", "going down", "going into", "going through",
    "grazing in", "growing in", "growing on", "guiding", "hanging from", "hanging in", "hanging off", "hanging over",
    "higher than", "holding onto", "hugging", "in between", "jumping off", "jumping on", "jumping over", "kept in",
    "larger than", "leading", "leaning over", "leaving", "licking", "longer than", "looking in", "looking into",
    "looking out", "looking over", "looking through", "lying next to", "lying on top of", "making", "mixed with",
    "mounted on", "moving", "near", "next to", "of", "on the back of", "on the edge of", "on the front of",
    "on the other side of", "on the side of", "opening", "painted on", "parked at", "parked beside", "parked by",
    "parked in", "parked in front of", "parked near", "parked next to", "perched on", "petting", "piled on",
    "playing", "playing in", "playing on", "playing with", "pouring", "reaching for", "reading", "reflected on",
    "riding on", "running in", "running on", "running through", "seen through", "sitting behind", "sitting beside",
    "sitting by", "sitting in front of", "sitting near", "sitting next to", "sitting under", "skiing down",
    "skiing on", "sleeping in", "sleeping on", "smiling at", "sniffing", "splashing", "sprinkled on", "stacked on",
    "standing against", "standing around", "standing behind", "standing beside", "standing in front of",
    "standing near", "standing next to", "staring at", "stuck in", "surrounding", "swimming in", "swinging",
    "talking to", "topped with", "touching", "traveling down", "traveling on", "tying", "typing on", "underneath",
    "wading in", "waiting for", "walking across", "walking by", "walking down", "walking next to", "walking through",
    "with", "working in", "working on", "worn on", "wrapped around", "wrapped in"))
RULE = ("right when the true caption scores strictly above the false one (cosine similarity; a tie is a miss); "
        "accuracy = macro accuracy: the mean over groups of each group's accuracy (VG-Relation: relations, less the "
        "authors' excluded list; VG-Attribution: attribute pairs with >= 25 items), as Yuksekgonul et al. 2023")


@dataclass(frozen=True)
class AroItem(ChoiceItem):
    """One ARO item: ``candidates`` = (false caption, true caption), ``correct`` = 1 (the authors' order); ``image``:
    the key of the cropped image (``<image_path>#x,y,w,h``); ``group``: the relation, or ``"<a1>_<a2>"``."""

    subset: str = ""
    group: str = ""
    source: str = ""  # the image file, relative to the images folder
    box: tuple = ()  # (x, y, w, h) as in the file


@dataclass
class AroResult(ChoiceResult):
    """``accuracy``: the macro accuracy (its interval: a bootstrap resampling items within each counted group);
    ``micro``: (accuracy over all items, ci_low, ci_high); ``by_kind[group]``: accuracy, n, in_macro."""

    micro: tuple = ()

    def more_values(self) -> list[tuple[str, float, dict]]:
        value, lo, hi = self.micro
        return [("micro_accuracy", value, {"ci_low": lo, "ci_high": hi, "n": self.n_items})]

    def as_dict(self) -> dict:
        return super().as_dict() | {"micro_accuracy": dict(zip(("accuracy", "ci_low", "ci_high"), self.micro)),
                                    "groups_in_macro": sum(g["in_macro"] for g in self.by_kind.values()),
                                    "more_values": [list(v) for v in self.more_values()]}


def macro_groups(subset: str, groups) -> set[str]:
    """The groups the macro accuracy averages over, from the items' groups alone (never from scores)."""
    counts = Counter(groups)
    if subset == "vg_relation":
        return {g for g in counts if g not in EXCLUDED_RELATIONS}
    return {g for g, n in counts.items() if n >= MIN_ATTRIBUTE_ITEMS}


def stratified_ci(flags: list[np.ndarray], seed: int = 0, n_boot: int = N_BOOT) -> tuple[float, float]:
    """95% percentile bootstrap of the mean of group means, resampling items within each group, in percent."""
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for f in flags:
        total += f[rng.integers(0, len(f), size=(n_boot, len(f)))].mean(axis=1)
    means = total / len(flags) * 100.0
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _aro_result(items, res: ChoiceResult, seed: int) -> AroResult:
    subsets = {it.subset for it in items}
    if len(subsets) != 1:
        raise VlbenchError(f"ARO items of {len(subsets)} subsets scored together", "score each subset on its own")
    ok: dict[str, list[bool]] = {}
    for it, rec in zip(items, res.records):
        ok.setdefault(it.group, []).append(rec.correct)
    counted = macro_groups(subsets.pop(), [it.group for it in items])
    if not counted:
        raise DataError(f"no group of these {len(items)} ARO items enters the macro accuracy (VG-Attribution: no "
                        f"attribute pair has {MIN_ATTRIBUTE_ITEMS} items; VG-Relation: only excluded relations)",
                        "use the released file, or a subset that keeps whole groups")
    flags = {g: np.asarray(v, dtype=np.float64) for g, v in ok.items()}
    macro = float(np.mean([flags[g].mean() for g in sorted(counted)]) * 100.0)
    lo, hi = stratified_ci([flags[g] for g in sorted(counted)], seed)
    by_kind = {g: {"accuracy": 100.0 * float(f.mean()), "n": len(f), "in_macro": g in counted}
               for g, f in sorted(flags.items())}
    base = {f.name: getattr(res, f.name) for f in fields(ChoiceResult)}
    return AroResult(**(base | {"accuracy": macro, "ci_low": lo, "ci_high": hi, "by_kind": by_kind}),
                     micro=(res.accuracy, res.ci_low, res.ci_high))


def evaluate_aro(items, image_emb, text_emb, *, seed: int = 0) -> AroResult:
    """Macro and micro accuracy of one subset's items from embeddings (see :func:`evaluate_choice`)."""
    return _aro_result(items, evaluate_choice(items, image_emb, text_emb, seed=seed), seed)


def aro_text_only(items, text_score, *, seed: int = 0) -> AroResult:
    """The blind (text-only) macro and micro accuracy: the more plausible caption wins, no image."""
    return _aro_result(items, evaluate_text_only(items, text_score, seed=seed), seed)


def parse_aro_spec(spec: str | None) -> list[str]:
    """``aro`` (both) or ``aro:vg_relation`` / ``aro:vg-attribution`` (``-`` or ``_``)."""
    name, _, rest = (spec or TASK).partition(":")
    if name != TASK:
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK}[:SUBSET,...], not {spec!r}",
                           f"e.g. --dataset {TASK} or --dataset {TASK}:vg_relation")
    subsets = [s.strip().replace("-", "_").lower() for s in rest.split(",") if s.strip()] or list(SUBSETS)
    bad = [s for s in subsets if s not in SUBSETS]
    if bad:
        raise VlbenchError(f"unknown ARO subset {bad[0]!r}", f"use some of {', '.join(SUBSETS)}")
    return list(dict.fromkeys(subsets))


def _fix(sub: Subset) -> str:
    return f"use the unmodified {sub.file} of ARO ({REPO}, the Google Drive file its loader downloads)"


def _number(row: dict, name: str, where: str, positive: bool) -> float:
    v = row.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or (positive and v <= 0):
        what = "missing" if name not in row else f"{v!r}, not a {'positive ' if positive else ''}number"
        raise DataError(f"{where}: field {name!r} is {what}", "")
    return v


def _text(row: dict, name: str, where: str) -> str:
    v = row.get(name)
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"{where}: field {name!r} is {'missing' if name not in row else 'not a non-empty string'}", "")
    return v


def _check_box_size(box: tuple, where: str) -> None:
    """A DataError naming the item when its crop would be larger than the largest image vlbench decodes
    (``PIL.Image.MAX_IMAGE_PIXELS``): a crop is made at the box's size whatever the image's, so a box of
    200,000 x 200,000 pixels would be a decompression bomb (PIL refuses it with a traceback at crop time)."""
    from PIL import Image  # lazy: Pillow is only needed when a run reads ARO

    limit = Image.MAX_IMAGE_PIXELS
    w, h = box[2], box[3]
    if limit and w * h > limit:
        raise DataError(f"{where}: its box is {w:g} x {h:g} pixels ({w * h:,.0f}), more than the {limit:,} pixels "
                        "of the largest image vlbench decodes (PIL.Image.MAX_IMAGE_PIXELS)",
                        "fix the item's bbox_w / bbox_h (the released boxes lie inside their Visual Genome image) or "
                        "use the unmodified file; for a trusted huge box raise PIL.Image.MAX_IMAGE_PIXELS")


def _item(row, i: int, subset: str, where: str) -> AroItem:
    if not isinstance(row, dict):
        raise DataError(f"{where} is a JSON {type(row).__name__}, not an object", "")
    name = _text(row, "image_path", where)
    why = _bad_image_name(name)
    if why:
        raise DataError(f"{where}: field 'image_path': image name {shown_name(name)} {why}", "")
    box = tuple(_number(row, f, where, positive=f in ("bbox_w", "bbox_h")) for f in BOX)
    _check_box_size(box, where)
    if subset == "vg_relation":
        group = _text(row, "relation_name", where)
    else:
        attrs = row.get("attributes")
        if not (isinstance(attrs, list) and len(attrs) == 2 and all(isinstance(a, str) and a.strip() for a in attrs)):
            raise DataError(f"{where}: field 'attributes' is {'missing' if attrs is None else 'not 2 strings'}", "")
        group = f"{attrs[0]}_{attrs[1]}"
    key = f"{name}#{','.join(str(v) for v in box)}"
    return AroItem(f"{subset}:{i}", key, (_text(row, "false_caption", where), _text(row, "true_caption", where)), 1,
                   ("false_caption", "true_caption"), subset, group, name, box)


def read_aro_file(path: Path, subset: str) -> list[AroItem]:
    """The items of an ARO VG file; a DataError naming the file, the item and the field when it is not UTF-8 JSON
    of the released layout."""
    sub = SUBSETS[subset]
    text = read_task_text(path, "ARO file", _fix(sub))
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"ARO file {path} is not valid JSON ({exc})", _fix(sub)) from None
    if not isinstance(raw, list) or not raw:
        raise DataError(f"ARO file {path} holds {'no items' if raw == [] else 'a JSON ' + type(raw).__name__}, not "
                        'a list of items ([{"image_path", "bbox_x", ..., "true_caption", "false_caption"}, ...])',
                        _fix(sub))
    items = []
    for i, row in enumerate(raw):
        try:
            items.append(_item(row, i, subset, f"ARO file {path} item {i}"))
        except DataError as exc:
            raise DataError(exc.message, exc.hint or _fix(sub)) from None
    return items


def aro_root(data_dir=None, subsets=tuple(SUBSETS)) -> Path:
    """The folder with the JSON files of ``subsets``: <data-dir>/aro, or <data-dir> itself."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / TASK, base):
        if all((cand / SUBSETS[s].file).is_file() for s in subsets):
            return cand
    missing = [SUBSETS[s].file for s in subsets if not (base / TASK / SUBSETS[s].file).is_file()]
    raise DataError(f"the ARO file{'s' if len(missing) > 1 else ''} {', '.join(missing)} not in {base / TASK}",
                    f"download them (and {IMAGES_ZIP}, unzipped as images/) with the Google Drive ids in {REPO}'s "
                    f"dataset_zoo/aro_datasets.py into {base / TASK}, pass --data-dir naming the folder holding "
                    f"them, or name only the sets you have (--dataset {TASK}:vg_relation)")


def aro_items(root, subset: str, *, images_dir=None, check_images: bool = True) -> list[AroItem]:
    """ARO's ``subset`` from ``root``; ``check_images``: a DataError naming the folder and the first missing file
    when images are not in ``images_dir`` (default ``root/images``)."""
    (subset,) = parse_aro_spec(f"{TASK}:{subset}")
    items = read_aro_file(Path(root) / SUBSETS[subset].file, subset)
    if check_images:
        folder = Path(images_dir) if images_dir is not None else Path(root) / "images"
        missing = [n for n in dict.fromkeys(it.source for it in items) if not _image_present(folder, n, "ARO")]
        if missing:
            raise DataError(f"{len(missing)} images of ARO {subset} are missing from {folder} (first: {missing[0]})",
                            f"unzip {IMAGES_ZIP} in {root} (it makes images/), or pass --images-dir naming the "
                            "folder that holds them")
    return items


def _crops_of(src: Path, boxes: list[tuple], folder: Path) -> list[Path]:
    """The crops of one image to each box as the authors make them (the RGB image, ``crop((x, y, x + w, y + h))``),
    each written once as a PNG named by its inputs; the image is decoded once, and only when a crop is missing."""
    from PIL import Image  # lazy: Pillow is only needed when a run crops images

    st = src.stat()
    stem = f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}|"
    outs = [folder / (hashlib.sha256(f"{stem}{box!r}".encode()).hexdigest()[:40] + ".png") for box in boxes]
    todo = [(out, box) for out, box in zip(outs, boxes) if not out.is_file()]
    if todo:
        try:
            with Image.open(src) as im:
                rgb = im.convert("RGB")
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise DataError(f"ARO image {src} cannot be read ({exc})", f"replace it with the file from {IMAGES_ZIP}") \
                from None
        for out, (x, y, w, h) in todo:
            tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
            rgb.crop((x, y, x + w, y + h)).save(tmp, format="PNG", compress_level=1)  # lossless and fast to write
            tmp.replace(out)
    return outs


def crop_images(items, images_dir: Path, folder: Path) -> dict[str, Path]:
    """image key -> the file of its crop (made in ``folder`` when not there yet; several images at a time)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_source: dict[str, dict[str, tuple]] = {}
    for it in items:
        by_source.setdefault(it.source, {})[it.image] = it.box
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        done = pool.map(lambda src: _crops_of(Path(images_dir) / src, list(by_source[src].values()), folder),
                        by_source)
        return {key: path for keys, paths in zip(by_source.values(), done) for key, path in zip(keys, paths)}


def aro_sets(cfg, note=None) -> ItemSets:
    """The item sets of ``vlbench run --task aro``: one per subset named by ``--dataset``."""
    subsets = parse_aro_spec(cfg.dataset)
    root = aro_root(cfg.data_dir, subsets)
    images = Path(cfg.images_dir).expanduser() if cfg.images_dir else root / "images"
    sets, notes, files = {}, {}, {}
    for s in subsets:
        cond = f"task:{TASK}:{s}"
        items = sets[cond] = aro_items(root, s, images_dir=images)
        files[s] = sha256_file(root / SUBSETS[s].file)
        groups = [it.group for it in items]
        counted = macro_groups(s, groups)
        notes[cond] = {"items": len(items), "groups": len(set(groups)), "groups_in_macro": len(counted),
                       "items_in_macro": sum(g in counted for g in groups)}
        if len(items) != SUBSETS[s].n_items and note:
            note(f"ARO {s}: {len(items)} items, not the released {SUBSETS[s].n_items} (a subset or a changed file)")
    every = [it for items in sets.values() for it in items]
    crops = crop_images(every, images, stores.path(CROPS, cfg.cache_dir))
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"files": files}), "n_images": len(crops),
            "n_items": len(every), "subsets": subsets,
            "source": {"annotations": str(root), "sha256": files, "images": str(images),
                       "repository": f"{REPO}@{COMMIT}",
                       "crop": "PIL crop (x, y, x + w, y + h) of the RGB image, as the authors' loader"}}
    return ItemSets(sets, crops, desc, notes)


def format_aro_table(rec) -> str:
    """table.md of an ARO run: macro and micro accuracy with intervals, chance and the blind (text-only) values."""

    def cell(v, ci=True):
        return "-" if v is None else f"{v.value:.2f}" + (f" [{v.extra['ci_low']:.2f}, {v.extra['ci_high']:.2f}]"
                                                          if ci and "ci_low" in v.extra else "")

    rows = []
    for cond in rec.conditions:
        get = {v.key.metric: v for v in rec.values if v.condition == cond}
        meta = rec.conditions[cond].meta
        rows.append([cond, get["accuracy"].extra["n"], f"{meta.get('groups_in_macro', '-')}",
                     cell(get.get("accuracy")), cell(get.get("micro_accuracy")), cell(get.get("chance"), False),
                     cell(get.get("blind_accuracy"), False), cell(get.get("blind_micro_accuracy"), False)])
    return md_table(["set", "items", "groups in macro", "macro accuracy %", "micro accuracy %", "chance %",
                     "blind macro (text-only) %", "blind micro %"], rows, pad=True)


ARO = register_task(ChoiceTask(
    TASK, "ARO VG-Relation and VG-Attribution (Yuksekgonul et al. 2023): the true caption against its swapped one, "
          "on the box crop; macro accuracy as the paper; --dataset aro[:vg_relation,vg_attribution]", aro_sets,
    evaluate=evaluate_aro, text_only=aro_text_only, rule=RULE, table=format_aro_table, images_dir=True,
    size="VG-Relation 23,937 items (48 relations), VG-Attribution 28,748 items (117 attribute pairs), as the paper "
         "counts them; 2 options each; counts recorded per run",
    licence="the repository is MIT (its LICENSE); the annotation files on its Google Drive state no licence of their "
            "own; built from GQA / Visual Genome (CC BY 4.0), whose images they crop",
    citation="Yuksekgonul, Bianchi, Kalluri, Jurafsky and Zou, When and why vision-language models behave like "
             "bags-of-words, and what to do about it?, ICLR 2023",
    metrics=(("micro_accuracy", "--task aro: items right over all items (accuracy is the paper's macro accuracy)"),
             ("blind_micro_accuracy", "--task aro: micro_accuracy of the text-only (blind) baseline")),
    scores=(("accuracy", "macro accuracy"),),
    stores=(stores.Store(CROPS, CROPS, __name__, "box crops of ARO's VG-Relation / VG-Attribution images"),)))
