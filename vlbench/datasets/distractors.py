"""Gallery distractors (``--distractors SPEC[,SPEC]``): where the injected candidates come from.

A spec names one source; several, comma-separated, are one distractor set (in the order given):

* ``images:FOLDER``: every image file directly in FOLDER (sorted by name), as t2i candidates;
* ``dataset:NAME``: the test images of another dataset (``dataset:coco``, ``dataset:custom:m.jsonl``), as
  t2i candidates (its captions are not used);
* ``captions:FILE``: one caption per non-empty line of a UTF-8 text file, as i2t candidates.

The set's identity is its content: a sha256 over every injected image file's bytes and every caption, in
order (:attr:`DistractorSet.content_hash`); the condition name carries its first 10 hex digits, so two runs
with different distractor files never share a label. The run pipeline (vlbench/pipeline/distractors.py)
turns the set into a condition and scores it; this module only reads and checks the sources.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError, OptionError
from ..util.io import sha256_file, sha256_json
from .captions import MAX_CAPTION_CHARS as MAX_CAPTION_CHARS  # the longest caption line of a ``captions:`` file
from .core import IMAGE_EXTS, load_dataset

KINDS = ("images", "dataset", "captions")
EXAMPLE = "images:negatives/,captions:adversarial.txt"
# MAX_CAPTION_CHARS (characters): the bound every caption source shares (:mod:`.captions`); a longer line of a
# ``captions:`` file is refused before any tokenizer sees it (a 24 MB line aborted the Rust tokenizer with no message)


def parse_spec(spec) -> list[tuple[str, str]]:
    """(kind, value) of every source of a ``--distractors`` spec; a bad spec raises OptionError."""
    if isinstance(spec, (list, tuple)):
        spec = ",".join(spec)
    if not isinstance(spec, str):
        raise OptionError("distractors", f"{{opt}} takes a string, got {type(spec).__name__}", example=EXAMPLE)
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise OptionError("distractors", f"{{opt}} is given but names no source ({spec!r})",
                          "give images:FOLDER, dataset:NAME and/or captions:FILE, or leave the option out",
                          example=EXAMPLE)
    out = []
    for part in parts:
        kind, sep, value = part.partition(":")
        kind, value = kind.strip(), value.strip()
        if not sep or kind not in KINDS:
            raise OptionError("distractors", f"{{opt}} source {part!r} is not KIND:VALUE with KIND one of "
                              f"{', '.join(KINDS)}", "write each source as images:FOLDER, dataset:NAME or "
                              "captions:FILE (comma-separated)", example=EXAMPLE)
        if not value:
            raise OptionError("distractors", f"{{opt}} source {part!r} names no {kind} after '{kind}:'",
                              f"give the {'folder' if kind == 'images' else 'file' if kind == 'captions' else 'name'}"
                              f" after '{kind}:'", example=EXAMPLE)
        out.append((kind, value))
    if len(set(out)) != len(out):
        raise OptionError("distractors", f"{{opt}} names a source twice ({spec!r})", "name each source once",
                          example=EXAMPLE)
    seen: dict = {}
    for kind, value in out:  # the same folder or file spelt two ways (images:neg, images:neg/, ./neg)
        key = (kind, os.path.realpath(os.path.expanduser(value)) if kind != "dataset" else value)
        if key in seen:
            raise OptionError("distractors", f"{{opt}} names the same {kind} source twice: {kind}:{seen[key]} and "
                              f"{kind}:{value} are both {key[1]!r}", "name each folder or file once",
                              example=EXAMPLE)
        seen[key] = value
    return out


def _folder_images(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                   and p.name.lower().endswith(IMAGE_EXTS)), key=lambda p: p.name)


def check_source(kind: str, value: str, data_dir=None) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) of one source, or None; quick (file system look-ups only, and the
    caption file / manifest of a ``dataset:`` source)."""
    if kind == "images":
        folder = Path(value).expanduser()
        if not folder.is_dir():
            return (f"images folder {value!r} does not exist" if not folder.exists() else
                    f"images:{value} is a file, not a folder", "give images: a folder that holds the image files")
        if not _folder_images(folder):
            return (f"images folder {value!r} holds no image files ({', '.join(IMAGE_EXTS)})",
                    "put the distractor images into the folder, or leave the source out")
    elif kind == "captions":
        path = Path(value).expanduser()
        if not path.is_file():
            return (f"captions file {value!r} does not exist" if not path.exists() else
                    f"captions:{value} is not a file", "give captions: a text file with one caption per line")
        try:
            lines = _caption_lines(path)
        except DataError as exc:
            return exc.message, exc.hint or ""
        if not lines:
            return f"captions file {value!r} holds no caption (no non-empty line)", "write one caption per line"
    else:
        try:
            ds = _dataset(value, data_dir)
        except Exception as exc:  # a VlbenchError above all; its message and hint say what is missing
            return f"dataset {value!r}: {getattr(exc, 'message', exc)}", getattr(exc, "hint", None) or \
                "run 'vlbench ls datasets' for the names"
        missing = [ds.image_path(i) for i in range(ds.n_images) if not ds.image_path(i).is_file()]
        if missing:
            return (f"dataset {value!r}: {len(missing)} of its {ds.n_images} images are missing "
                    f"(first: {missing[0]})", f"download them first (vlbench run --dataset {value} downloads them)")
    return None


def _dataset(name: str, data_dir):
    return load_dataset(name, data_dir=data_dir, require_images=False, download=False)


def _caption_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"captions file {str(path)!r} is not UTF-8 text", "save it as UTF-8, one caption per line") \
            from None
    except OSError as exc:
        raise DataError(f"captions file {str(path)!r} cannot be read ({exc.strerror})", "check the file") from None
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_CAPTION_CHARS:
            raise DataError(f"captions file {str(path)!r} line {n} is {len(line):,} characters long; the limit is "
                            f"{MAX_CAPTION_CHARS:,} characters per caption",
                            "one caption per line: split the file into lines, or shorten that line")
    return [line.strip() for line in lines if line.strip()]


@dataclass(frozen=True)
class DistractorSet:
    """The injected candidates: image files (t2i) and captions (i2t), each in spec order."""

    spec: str
    sources: tuple  # (kind, value, n items)
    images: tuple  # Path of every injected image
    captions: tuple  # every injected caption
    content_hash: str

    @property
    def label(self) -> str:
        """``images=neg+captions=adv.txt@<10 hex digits of the content hash>``."""
        names = []
        for kind, value, _n in self.sources:
            shown = value if kind == "dataset" and not value.startswith("custom:") else \
                Path(value.split(":", 1)[-1]).name or value
            names.append(f"{kind}={shown}".replace(",", "_").replace(" ", "_"))
        return "+".join(names) + "@" + self.content_hash[:10]

    def describe(self) -> dict:
        return {"spec": self.spec, "content_hash": self.content_hash, "n_images": len(self.images),
                "n_captions": len(self.captions),
                "sources": [{"kind": k, "value": v, "items": n} for k, v, n in self.sources]}


def load_distractors(spec, data_dir=None) -> DistractorSet:
    """Read every source of the spec (a missing one raises DataError naming it) and hash the set's content."""
    sources, images, captions = [], [], []
    for kind, value in parse_spec(spec):
        problem = check_source(kind, value, data_dir)
        if problem:
            raise DataError(f"--distractors {kind}:{value}: {problem[0]}", problem[1])
        if kind == "images":
            found = _folder_images(Path(value).expanduser())
            images += found
            count = len(found)
        elif kind == "dataset":
            ds = _dataset(value, data_dir)
            found = [ds.image_path(i) for i in range(ds.n_images)]
            images += found
            count = len(found)
        else:
            lines = _caption_lines(Path(value).expanduser())
            captions += lines
            count = len(lines)
        sources.append((kind, value, count))
    digest = sha256_json({"images": [sha256_file(p) for p in images], "captions": captions})
    text = spec if isinstance(spec, str) else ",".join(spec)
    return DistractorSet(text, tuple(sources), tuple(images), tuple(captions), digest)
