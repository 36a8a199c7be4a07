"""Long-caption test sets: Urban1k, DOCCI, ImageInWords and DCI, read in their native layouts.

Each set is one :class:`LongCaptionSet` record: where its files live under the data folder, the source files
with their checksums, where its images come from, its licence and citation, and its protocol variant, named
in the dataset's own name (``iiw-400-sentences``, ``dci-extra``), never a silent choice:

* ``urban1k``: 1,000 photos, one ~130-word caption each (Long-CLIP's test set): ``Urban1k/image/<n>.jpg`` and
  ``Urban1k/caption/<n>.txt``;
* ``docci``: the DOCCI test split (5,000 images, one ~136-word description each):
  ``docci_descriptions.jsonlines`` (``example_id``, ``split``, ``image_file``, ``description``) and
  ``images/``;
* ``iiw-400``, ``iiw-docci-test``, ``iiw-dci-test``: ImageInWords' three human-annotated sets (``data.jsonl``
  of google/imageinwords; ~200 words, 7-11 sentences), one description per image; the ``-sentences``
  variants split each description into its sentences, every sentence a positive of the image (FLAIR's
  sentence-level IIW);
* ``dci-extra``, ``dci-short-extra``: DCI's test split of per-image annotation JSON files
  (``annotations/<id>.json`` with ``image``, ``short_caption``, ``extra_caption``; ``splits.json``), the text
  being the extra caption alone (FG-CLIP 2's protocol) or the short caption followed by the extra caption
  (FLAIR's); ``dci`` alone is refused and names the two. No DCI text is shipped (its licence is CC BY-NC).

``vlbench download NAME`` (and a first run while online) fetches the caption source when it is published at a URL
(ImageInWords' ``data.jsonl``, DOCCI's descriptions) through vlbench's one downloader (mirror, resume, checksum).

Checksums: a source file whose SHA-256 (and size) is pinned here is refused when it differs; a source this record
could not pin (its bytes were not reachable where vlbench was built) is pinned on first use: its digest is written
beside it (``<file>.sha256``, a plain file written atomically under the file's download lock, so two processes
loading the set at once pin the same installed bytes) and recorded in the dataset's provenance, and a later change
is refused. Source files are read line by line (a line over :data:`MAX_LINE_BYTES` is refused with its number); a
row without the fields the layout needs, or with a caption that is not text, is an error naming its line (file).
Images are never downloaded by these records: each names where its images are published and under which terms.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import DataError
from ..registry import datasets as DATASETS
from ..util.fetch import LocalWriteError, destination_lock, download, lock_path, looks_like_html
from ..util.io import atomic_write_text, read_regular_file, sha256_file
from ..util.paths import default_data_dir, offline
from ..util.sentences import split_sentences
from .core import Dataset, _build, check_images

IIW_COMMIT = "96d393777e2528becd8a7afa1389eb4b65084793"
IIW_RAW = f"https://raw.githubusercontent.com/google/imageinwords/{IIW_COMMIT}/datasets"
DOCCI = "https://storage.googleapis.com/docci/data"
_IIW_CITE = "Garg et al., ImageInWords: Unlocking Hyper-Detailed Image Descriptions, EMNLP 2024"
_DOCCI_CITE = "Onoe et al., DOCCI: Descriptions of Connected and Contrasting Images, ECCV 2024"
_DOCCI_IMAGES = (f"DOCCI's images ({DOCCI}/docci_images.tar.gz; CC BY 4.0): extract so that images/<image_file> "
                 "exists")
_AAR_IMAGES = (f"DOCCI's AAR images ({DOCCI}/docci_images_aar.tar.gz; CC BY 4.0): extract so that "
               "images_aar/<key>.jpg exists")
MAX_LINE_BYTES = 1 << 20  # one JSONL row (a description of a few hundred words is ~2 KB)
MAX_JSON_BYTES = 64 << 20  # one DCI file (splits.json, an annotation with its masks)
_SA1B = ("the SA-1B images (Meta's Segment Anything 1B: ai.meta.com/datasets/segment-anything, its own terms; "
         "accept them and download the files named in the set) in photos/")


@dataclass(frozen=True)
class SourceFile:
    path: str  # under the set's folder
    url: str | None  # where it is published (None: the user must obtain it; the note says how)
    sha256: str | None  # pinned digest, or None: pinned on first use
    size: int | None = None  # pinned size in bytes (bounds the download), beside the pinned digest


@dataclass(frozen=True)
class LongCaptionSet:
    name: str
    description: str
    layout: str  # urban1k | docci | iiw | dci
    folder: str  # under the data folder
    text: SourceFile | None  # the caption source (None: a folder of files, e.g. Urban1k's caption/*.txt)
    images: str  # where the images come from (the error message names it)
    licence: str
    citation: str
    variant: dict = field(default_factory=dict)  # the protocol variant, recorded in the provenance


def _iiw(name: str, set_name: str, sha: str, size: int, images: str, sentences: bool) -> LongCaptionSet:
    name = f"{name}-sentences" if sentences else name
    variant = {"set": set_name, "text": "IIW", "unit": "sentence" if sentences else "description"}
    what = "each sentence a positive of its image" if sentences else "one description per image"
    return LongCaptionSet(name, f"ImageInWords {set_name}: human hyper-detailed descriptions (~200 words), {what}",
                          "iiw", f"iiw/{set_name}",
                          SourceFile("data.jsonl", f"{IIW_RAW}/{set_name}/data.jsonl", sha, size),
                          images, "CC BY 4.0 (descriptions); the images' own terms", _IIW_CITE, variant)


_IIW_SETS = (("iiw-400", "IIW-400", "88809dde73731208fa98f72430225a9122c8f7e3c4ebcde98e255d62c5f203f2", 980_175,
              _AAR_IMAGES),
             ("iiw-docci-test", "DOCCI_Test", "f422b726c1af21a5154282cf8790ce110e03d5c94457d77d7002a50f17c984d1",
              208_145, _DOCCI_IMAGES),
             ("iiw-dci-test", "DCI_Test", "59ec2a3b5c3885a3313b73656d57db2bf9861d48e4414b0692833ba9380a2cf1", 168_998,
              _SA1B))

SETS: dict[str, LongCaptionSet] = {s.name: s for s in (
    LongCaptionSet("urban1k", "Urban1k (Long-CLIP): 1,000 urban photos, one long caption each", "urban1k", "Urban1k",
                   None, "the Urban1k release (huggingface.co/datasets/BeichenZhang/Urban1k, Urban1k.zip): "
                   "extract so that Urban1k/image/ and Urban1k/caption/ exist",
                   "as released with Long-CLIP (no licence file stated)",
                   "Zhang et al., Long-CLIP: Unlocking the Long-Text Capability of CLIP, ECCV 2024",
                   {"text": "caption/*.txt", "split": "all 1,000"}),
    LongCaptionSet("docci", "DOCCI test split: 5,000 images, one detailed description each", "docci", "docci",
                   SourceFile("docci_descriptions.jsonlines", f"{DOCCI}/docci_descriptions.jsonlines", None),
                   _DOCCI_IMAGES, "CC BY 4.0", _DOCCI_CITE, {"split": "test", "text": "description"}),
    *(_iiw(name, set_name, sha, size, images, sentences) for name, set_name, sha, size, images in _IIW_SETS
      for sentences in (False, True)),
    *(LongCaptionSet(f"dci-{v}", f"DCI test split, {what}", "dci", "dci/densely_captioned_images",
                     SourceFile("splits.json", None, None),
                     _SA1B, "CC BY-NC 4.0 (annotations: not shipped, loader only); SA-1B terms for the images",
                     "Urbanek et al., A Picture is Worth More Than 77 Text Tokens, CVPR 2024",
                     {"split": "test", "text": v})
      for v, what in (("extra", "the extra caption alone (FG-CLIP 2's protocol)"),
                      ("short-extra", "the short caption followed by the extra caption (FLAIR's protocol)"))),
)}


# -- native readers: each returns manifest rows {"image": path under the set's folder, "captions": [...]} ---------

def _read_urban1k(folder: Path, s: LongCaptionSet) -> list[dict]:
    captions = folder / "caption"
    if not captions.is_dir():
        raise DataError(f"{s.name}: {captions} does not exist", f"get {s.images}")
    images = {p.stem: p.name for p in (folder / "image").glob("*") if p.is_file()}
    rows = []
    for txt in sorted(captions.glob("*.txt"), key=lambda p: (len(p.stem), p.stem)):
        if txt.stem not in images:
            raise DataError(f"{s.name}: caption {txt.name} has no image {txt.stem}.* in {folder / 'image'}",
                            f"get {s.images}")
        rows.append({"image": f"image/{images[txt.stem]}", "captions": [txt.read_text(encoding="utf-8").strip()]})
    return rows


def _jsonl(path: Path, s: LongCaptionSet) -> list[tuple[int, dict]]:
    """(line number, row) of every non-blank line, read one line at a time (a huge file or line never sits in
    memory at once): a line over MAX_LINE_BYTES, not UTF-8, not JSON or not a JSON object is refused by number."""
    fix = f"download the file again ({s.text.url})" if s.text is not None and s.text.url else "get the file again"
    rows = []
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise DataError(f"{s.name}: {path} cannot be read ({exc.strerror or exc})", fix) from None
    with fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n") or len(raw) > MAX_LINE_BYTES + 1:
                raise DataError(f"{s.name}: {path}: line {n} is over {MAX_LINE_BYTES:,} bytes (a row holds one "
                                "description of a few KB); refusing to read it", fix)
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise DataError(f"{s.name}: {path}: line {n} is not UTF-8 text", fix) from None
            except ValueError as exc:
                raise DataError(f"{s.name}: {path}: line {n} is not JSON ({exc})", fix) from None
            if not isinstance(row, dict):
                raise DataError(f"{s.name}: {path}: line {n} is a JSON {type(row).__name__}, not an object with the "
                                "set's fields", fix)
            rows.append((n, row))
    return rows


def _field(row: dict, key: str, n: int, path: Path, s: LongCaptionSet, *, text: bool = False) -> str:
    """``row[key]`` as a string; missing, null or not a string (not text, for a caption) is an error naming the line."""
    value = row.get(key)
    if not isinstance(value, str) or (text and not value.strip()):
        what = "missing" if key not in row else ("null" if value is None else
                                                  "empty" if isinstance(value, str) else
                                                  f"a JSON {type(value).__name__}, not a string")
        raise DataError(f"{s.name}: {path}: line {n}: field {key!r} is {what}",
                        "every row needs it as " + ("non-empty text (a caption that is not text is an error, never "
                                                    "scored as an empty caption)" if text else "a string")
                        + "; download the file again or fix that line")
    return value


def _read_docci(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    path = folder / s.text.path
    rows = [(n, r) for n, r in _jsonl(path, s) if r.get("split") == s.variant["split"]]
    return [{"image": f"images/{_field(r, 'image_file', n, path, s)}",
             "captions": [_field(r, "description", n, path, s, text=True)]} for n, r in rows]


def _read_iiw(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    path = folder / s.text.path
    out = []
    for n, r in _jsonl(path, s):
        if "image/key" in r:
            image = f"images_aar/{_field(r, 'image/key', n, path, s)}.jpg"
        else:
            key = _field(r, "image", n, path, s)
            image = f"photos/{key}" if key.startswith("sa_") else f"images/{key}.jpg"
        text = _field(r, s.variant["text"], n, path, s, text=True)
        out.append({"image": image, "captions": split_sentences(text) if s.variant["unit"] == "sentence" else [text]})
    return out


_DCI_FIX = "point --data-dir at the folder holding dci/densely_captioned_images from facebookresearch/DCI"


def _dci_json(path: Path, s: LongCaptionSet, what: str):
    try:
        return json.loads(read_regular_file(path, MAX_JSON_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise DataError(f"{s.name}: {what} {path} does not exist", _DCI_FIX + " (the whole folder, annotations/ "
                        "included)") from None
    except OSError as exc:
        raise DataError(f"{s.name}: {what} {path} cannot be read ({exc.strerror or exc})", _DCI_FIX) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{s.name}: {what} {path} is not JSON ({exc})", "get the file again; " + _DCI_FIX) from None


def _dci_entry(entry, annotations: Path, s: LongCaptionSet, splits: Path) -> Path:
    """The annotation file a splits.json entry names: a relative path that stays inside the annotations folder."""
    parts = PurePosixPath(entry).parts if isinstance(entry, str) else ()
    if not parts or PurePosixPath(entry).is_absolute() or ".." in parts or "\\" in entry or "\0" in entry:
        raise DataError(f"{s.name}: {splits}: the {s.variant['split']!r} entry {entry!r} is not a file name inside "
                        f"{annotations}", "entries name annotation files (e.g. 'sa_1234.json') under annotations/; "
                        "get splits.json again from facebookresearch/DCI")
    return annotations.joinpath(*parts)


def _read_dci(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    splits = folder / s.text.path
    data = _dci_json(splits, s, "the split file")
    test = data.get(s.variant["split"]) if isinstance(data, dict) else None
    if not isinstance(test, list):
        raise DataError(f"{s.name}: {splits} has no readable {s.variant['split']!r} split (a list of annotation "
                        "file names)", _DCI_FIX)
    annotations = folder / "annotations"
    rows = []
    for entry in test:
        path = _dci_entry(entry, annotations, s, splits)
        ann = _dci_json(path, s, "the annotation")
        if not isinstance(ann, dict):
            raise DataError(f"{s.name}: the annotation {path} is a JSON {type(ann).__name__}, not an object",
                            "get the file again; " + _DCI_FIX)
        image = ann.get("image")
        extra, short = ann.get("extra_caption", ""), ann.get("short_caption", "")
        for key, value in (("image", image), ("extra_caption", extra), ("short_caption", short)):
            if not isinstance(value, str):
                raise DataError(f"{s.name}: the annotation {path}: field {key!r} is "
                                f"{'missing' if value is None else 'not a string'}", "get the file again; " + _DCI_FIX)
        assert isinstance(image, str) and isinstance(extra, str) and isinstance(short, str)
        extra = " ".join(extra.split())
        text = extra if s.variant["text"] == "extra" else f"{short.strip()} {extra}".strip()
        if not text:
            raise DataError(f"{s.name}: the annotation {path} has no {s.variant['text']} caption text",
                            "get the file again; " + _DCI_FIX)
        rows.append({"image": f"photos/{image}", "captions": [text]})
    return rows


READERS = {"urban1k": _read_urban1k, "docci": _read_docci, "iiw": _read_iiw, "dci": _read_dci}


def check_source(path: Path, src: SourceFile, s: LongCaptionSet) -> dict:
    """The source file's digest checked against the pinned one (or its first-use pin); its provenance entry.

    Pinning on first use happens under the file's download lock (util.fetch.destination_lock): the digest is
    taken from the installed file (installed whole by one rename) and written atomically beside it, so two
    processes that load the set at once pin the same bytes, and a pin file that is a link is never written
    through."""
    where = f"download {src.url}" if src.url else f"get {s.images}"
    if not path.is_file():
        raise DataError(f"{s.name}: {path} does not exist", f"{where} into {path.parent}")
    pin_file = path.with_name(path.name + ".sha256")
    pinned, how = src.sha256, "pinned in vlbench"
    if pinned is None:
        how = "pinned on first use"
        pinned = _read_pin(pin_file, s)
    if pinned is None:  # the first use: pin under the lock (another process may be pinning it right now)
        try:
            with destination_lock(path, f"{s.name} captions"):
                pinned = _read_pin(pin_file, s)
                digest = sha256_file(path)
                if pinned is None:
                    _pin(path, pin_file, digest, s, where)
                    pinned = digest
        except LocalWriteError as exc:  # a read-only (shared) data folder: the pin's lock cannot be made
            why = os.strerror(exc.errno) if exc.errno else "locking failed"
            raise DataError(f"{s.name}: {path} is not pinned yet (no {pin_file.name} beside it) and its folder cannot "
                            f"be written ({why}), so vlbench cannot pin its checksum on first use",
                            f"run vlbench once with write access to {path.parent} (it writes {pin_file.name} and "
                            f"{lock_path(path).name} there), or copy the folder somewhere writable and pass that as "
                            "--data-dir") from None
    else:
        digest = sha256_file(path)
    if digest != pinned:
        raise DataError(f"{s.name}: {path} has sha256 {digest[:16]}..., expected {pinned[:16]}... ({how})",
                        f"the file is corrupt or another version: delete it and download {src.url or 'it'} again"
                        + (f" (and its {pin_file.name})" if src.sha256 is None else ""))
    return {"file": str(path), "sha256": digest, "pin": how}


def _pin(path: Path, pin_file: Path, digest: str, s: LongCaptionSet, where: str) -> None:
    with open(path, "rb") as fh:
        if looks_like_html(fh.read(8192)):
            raise DataError(f"{s.name}: {path} is an HTML page, not the captions (a proxy's or a login page saved in "
                            "their place); it was not pinned", f"delete it and {where} again (through a proxy or "
                            "mirror that serves the file itself: VLBENCH_MIRROR)")
    try:
        atomic_write_text(pin_file, digest + "\n")  # a link there is replaced, never followed
    except OSError as exc:
        raise DataError(f"{s.name}: the checksum pin {pin_file} cannot be written ({exc.strerror or exc})",
                        f"make {pin_file.parent} writable") from None


def _read_pin(pin_file: Path, s: LongCaptionSet) -> str | None:
    """The first-use pin beside a source file, None when there is none yet; a pin that is a link, a folder or not a
    sha256 is an error naming it (vlbench writes its pins as plain files)."""
    fix = f"delete {pin_file} (vlbench pins the file again on its next use)"
    try:
        st = os.lstat(pin_file)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DataError(f"{s.name}: the checksum pin {pin_file} cannot be read ({exc.strerror or exc})", fix) from None
    if stat.S_ISLNK(st.st_mode):
        raise DataError(f"{s.name}: the checksum pin {pin_file} is a link (vlbench writes its pins as plain files and "
                        "never writes through a link)", fix)
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise DataError(f"{s.name}: the checksum pin {pin_file} is {kind}", fix)
    try:
        text = read_regular_file(pin_file, 1024).decode("ascii").strip().lower()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{s.name}: the checksum pin {pin_file} cannot be read ({exc})", fix) from None
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise DataError(f"{s.name}: the checksum pin {pin_file} does not hold a sha256 (64 hex digits)", fix)
    return text


def fetch_text(s: LongCaptionSet, data_dir=None) -> Path | None:
    """Download the set's caption source (through the one downloader: mirror, resume, its pinned checksum) when it
    is published at a URL; None when the set has none to fetch (a folder of files, or terms to accept first)."""
    if s.text is None or s.text.url is None:
        return None
    dest = Path(data_dir or default_data_dir()).expanduser() / s.folder / s.text.path
    if not dest.is_file():
        download(s.text.url, dest, sha256=s.text.sha256, size=s.text.size, what=f"{s.name} captions", text=True)
    return dest


def load_long_caption_set(s: LongCaptionSet, data_dir=None, require_images: bool = True,
                          download_missing: bool | None = None) -> Dataset:
    folder = Path(data_dir or default_data_dir()).expanduser() / s.folder
    source: dict = {"dataset": s.name, "folder": str(folder), "variant": dict(s.variant), "licence": s.licence,
                    "citation": s.citation}
    want = (not offline()) if download_missing is None else download_missing
    if s.text is not None and want and not (folder / s.text.path).is_file():
        fetch_text(s, data_dir)
    if s.text is not None:
        source["text"] = check_source(folder / s.text.path, s.text, s)
    rows = READERS[s.layout](folder, s)
    if not rows:
        raise DataError(f"{s.name}: no test images found in {folder}", f"get {s.images}")
    ds = _build(s.name, rows, folder.resolve(), source)
    if require_images:
        try:
            check_images(ds)
        except DataError as exc:
            raise DataError(f"{s.name}: {exc.message}", f"get {s.images}") from None
    return ds


def _factory(s: LongCaptionSet):
    def load(data_dir=None, gallery: str = "test", require_images: bool = True, download=None, **_) -> Dataset:
        if gallery != "test":
            raise DataError(f"--gallery {gallery} does not apply to {s.name}", "leave --gallery out")
        return load_long_caption_set(s, data_dir, require_images, download)
    load.__name__ = f"load_{s.name.replace('-', '_')}"
    return load


def _dci_without_variant(**_):
    raise DataError("dataset 'dci' needs its text variant named: the protocols of the field disagree",
                    "use --dataset dci-extra (the extra caption alone, FG-CLIP 2) or dci-short-extra (short + extra "
                    "caption, FLAIR)")


for _s in SETS.values():
    DATASETS.register(_s.name, _factory(_s), description=_s.description, licence=_s.licence, citation=_s.citation)
DATASETS.register("dci", _dci_without_variant, description="DCI: name the text variant (dci-extra, dci-short-extra)")
