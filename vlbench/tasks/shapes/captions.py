"""The shape of N-captions sets released as JSON files: one image and N candidate captions per item, the right one
first, one JSON file per piece of the set, in a public repository at a pinned commit.

A set of this shape is one :class:`JsonCaptionSet` (its repository, commit, pieces with the sha256 of each released
file, and ``row``: how one JSON entry becomes a :class:`~vlbench.tasks.choice.ChoiceItem`, or None when the set
leaves the entry out) and one ``ChoiceTask`` whose ``load`` is ``partial(caption_sets, the_set)``. This module owns
the rest: ``--dataset NAME[:PIECE,...]``, finding the files (``<data-dir>/<name>/``, downloaded from the pinned
commit when online and checked against the pins), reading them (bounded lines, UTF-8, a JSON object or list of
entries, image names inside the images folder, no repeated id), the images (``--images-dir``, default
``<data-dir>/<name>/images``) and the results' dataset record. Scoring is the plain choice rule
(:func:`~vlbench.tasks.choice.evaluate_choice`: the right caption strictly above every other, a tie a miss).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...datasets import download
from ...datasets.download import DownloadError
from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import atomic_write_bytes, sha256_bytes, sha256_file, sha256_json
from ..choice import ChoiceItem
from ..registry import ItemSets
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name


@dataclass(frozen=True)
class JsonCaptionSet:
    """One released set of this shape. ``files``: piece -> sha256 of ``<folder>/<piece>.json`` at ``commit``;
    ``counts``: piece -> the items ``row`` keeps from the released file (a run that reads another count says so);
    ``row(key, entry, piece) -> ChoiceItem | None`` raises DataError (its message names the field) on a bad entry."""

    task: str
    label: str  # how messages name the set
    repository: str  # "github.com/OWNER/NAME"
    commit: str
    folder: str  # the files' folder in the repository
    files: dict
    counts: dict
    row: Callable
    images: str  # where the images come from (a sentence for the error that names a missing one)

    @property
    def raw(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repository.removeprefix('github.com/')}/{self.commit}/" \
               f"{self.folder}"

    def fix(self) -> str:
        return f"use the unmodified {self.folder}/<piece>.json of {self.repository} (commit {self.commit[:7]})"


def parse_spec(s: JsonCaptionSet, spec: str | None) -> list[str]:
    """``NAME`` (every piece) or ``NAME:PIECE,...``."""
    name, _, rest = (spec or s.task).partition(":")
    if name != s.task:
        raise VlbenchError(f"--task {s.task} reads --dataset {s.task}[:PIECE,...], not {spec!r}",
                           f"e.g. --dataset {s.task} or --dataset {s.task}:{next(iter(s.files))}")
    pieces = [p.strip() for p in rest.split(",") if p.strip()] or list(s.files)
    bad = [p for p in pieces if p not in s.files]
    if bad:
        raise VlbenchError(f"unknown {s.label} piece {bad[0]!r}", f"use some of {', '.join(s.files)}")
    return list(dict.fromkeys(pieces))


def files_root(s: JsonCaptionSet, data_dir, pieces) -> Path:
    """The folder with the pieces' files: <data-dir>/<task> (or <data-dir> itself); online, a missing one is
    downloaded there from the pinned commit and refused unless it equals its pin."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / s.task, base):
        if all((cand / f"{p}.json").is_file() for p in pieces):
            return cand
    target = base / s.task
    missing = [f"{p}.json" for p in pieces if not (target / f"{p}.json").is_file()]
    where = (f"put {', '.join(missing)} from {s.repository} ({s.folder}/, commit {s.commit[:7]}: {s.raw}/<name>) in "
             f"{target}, or pass --data-dir naming the folder that holds them")
    if paths.offline():
        raise DataError(f"the {s.label} file{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                        f"{'are' if len(missing) > 1 else 'is'} not in {target}", where)
    for name in missing:
        try:
            body = download.http_get(f"{s.raw}/{name}")
        except DownloadError as exc:
            raise DataError(f"could not download {s.label}'s {name}: {exc.reason}", where) from None
        digest, pinned = sha256_bytes(body), s.files[name.removesuffix(".json")]
        if digest != pinned:
            raise DataError(f"the downloaded {s.label} {name} has sha256 {digest[:16]}..., pinned {pinned[:16]}... "
                            "(altered in transit, or not the pinned commit's file); nothing was written",
                            f"try again later, or {where}")
        atomic_write_bytes(target / name, body)
    return target


def read_file(s: JsonCaptionSet, path: Path, piece: str) -> list[ChoiceItem]:
    """The items of one piece's file; a DataError naming the file and the entry when it is not UTF-8 JSON of the
    released shape, names an image outside the images folder, or repeats an id."""
    what = f"{s.label} file"
    try:
        raw = json.loads(read_task_text(path, what, s.fix()))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"{what} {path} is not valid JSON ({exc})", s.fix()) from None
    entries = raw.items() if isinstance(raw, dict) else enumerate(raw) if isinstance(raw, list) else None
    if entries is None or not raw:
        raise DataError(f"{what} {path} holds {'no entries' if not raw else 'a JSON ' + type(raw).__name__}, not "
                        "entries (an object of id -> entry, or a list)", s.fix())
    items, seen = [], set()
    for key, entry in entries:
        where = f"{what} {path} entry {str(key)!r}"
        if not isinstance(entry, dict):
            raise DataError(f"{where} is a JSON {type(entry).__name__}, not an object", s.fix())
        try:
            item = s.row(str(key), entry, piece)
        except DataError as exc:
            raise DataError(f"{where}: {exc.message}", exc.hint or s.fix()) from None
        if item is None:
            continue
        why = _bad_image_name(item.image)
        if why:
            raise DataError(f"{where}: image name {shown_name(item.image)} {why}",
                            "image names must be file names inside the images folder (--images-dir)")
        if item.item_id in seen:
            raise DataError(f"{where}: its id repeats {item.item_id!r}", s.fix())
        seen.add(item.item_id)
        items.append(item)
    return items


def caption_sets(s: JsonCaptionSet, cfg, note=None) -> ItemSets:
    """The item sets of ``vlbench run --task <s.task>``: one per piece named by ``--dataset``."""
    pieces = parse_spec(s, cfg.dataset)
    root = files_root(s, cfg.data_dir, pieces)
    images = Path(cfg.images_dir).expanduser() if cfg.images_dir else root / "images"
    sets, notes, files = {}, {}, {}
    for p in pieces:
        cond = f"task:{s.task}:{p}"
        items = sets[cond] = read_file(s, root / f"{p}.json", p)
        files[p] = sha256_file(root / f"{p}.json")
        notes[cond] = {"items": len(items)}
        if files[p] != s.files[p] and note:
            note(f"{s.label} {p}: {len(items)} items, not the released {s.counts[p]} of {s.repository}@"
                 f"{s.commit[:7]} (its file differs from the pinned one: a subset or a changed file)")
    missing = [it.image for items in sets.values() for it in items if not _image_present(images, it.image, s.label)]
    if missing:
        raise DataError(f"{len(missing)} {s.label} images are missing from {images} (first: {missing[0]})",
                        f"get {s.images} into {images}, or pass --images-dir naming the folder that holds them")
    keys = dict.fromkeys(it.image for items in sets.values() for it in items)
    desc = {"name": (cfg.dataset_name or s.task).strip(), "hash": sha256_json({"files": files}), "n_images": len(keys),
            "n_items": sum(len(v) for v in sets.values()), "pieces": pieces,
            "source": {"annotations": str(root), "sha256": files, "images": str(images),
                       "files_match_release": all(files[p] == s.files[p] for p in pieces),
                       "repository": f"{s.repository}@{s.commit}"}}
    return ItemSets(sets, {k: images / k for k in keys}, desc, notes)
