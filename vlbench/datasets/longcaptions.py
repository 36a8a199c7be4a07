"""Long-caption test sets (issue #33 item 1): Urban1k, DOCCI, ImageInWords and DCI, read in their native layouts.

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

Checksums: a source file whose SHA-256 is pinned here is refused when it differs; a source this record could not
pin (its bytes were not reachable where vlbench was built) is pinned on first use: its digest is written beside
it (``<file>.sha256``) and recorded in the dataset's provenance, and a later change is refused. Images are never
downloaded by these records: each names where its images are published and under which terms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
from ..registry import datasets as DATASETS
from ..util.fetch import download
from ..util.io import sha256_file
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
_SA1B = ("the SA-1B images (Meta's Segment Anything 1B: ai.meta.com/datasets/segment-anything, its own terms; "
         "accept them and download the files named in the set) in photos/")


@dataclass(frozen=True)
class SourceFile:
    path: str  # under the set's folder
    url: str | None  # where it is published (None: the user must obtain it; the note says how)
    sha256: str | None  # pinned digest, or None: pinned on first use


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


def _iiw(name: str, set_name: str, sha: str, images: str, sentences: bool) -> LongCaptionSet:
    name = f"{name}-sentences" if sentences else name
    variant = {"set": set_name, "text": "IIW", "unit": "sentence" if sentences else "description"}
    what = "each sentence a positive of its image" if sentences else "one description per image"
    return LongCaptionSet(name, f"ImageInWords {set_name}: human hyper-detailed descriptions (~200 words), {what}",
                          "iiw", f"iiw/{set_name}", SourceFile("data.jsonl", f"{IIW_RAW}/{set_name}/data.jsonl", sha),
                          images, "CC BY 4.0 (descriptions); the images' own terms", _IIW_CITE, variant)


_IIW_SETS = (("iiw-400", "IIW-400", "88809dde73731208fa98f72430225a9122c8f7e3c4ebcde98e255d62c5f203f2", _AAR_IMAGES),
             ("iiw-docci-test", "DOCCI_Test", "f422b726c1af21a5154282cf8790ce110e03d5c94457d77d7002a50f17c984d1",
              _DOCCI_IMAGES),
             ("iiw-dci-test", "DCI_Test", "59ec2a3b5c3885a3313b73656d57db2bf9861d48e4414b0692833ba9380a2cf1", _SA1B))

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
    *(_iiw(name, set_name, sha, images, sentences) for name, set_name, sha, images in _IIW_SETS
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


def _jsonl(path: Path, s: LongCaptionSet) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise DataError(f"{s.name}: {path}: line {n} is not JSON ({exc})", "download the file again") from None
    return rows


def _read_docci(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    rows = [r for r in _jsonl(folder / s.text.path, s) if r.get("split") == s.variant["split"]]
    return [{"image": f"images/{r['image_file']}", "captions": [r["description"]]} for r in rows]


def _read_iiw(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    out = []
    for r in _jsonl(folder / s.text.path, s):
        key = r.get("image/key") or r.get("image")
        image = f"images_aar/{key}.jpg" if "image/key" in r else (
            f"photos/{key}" if str(key).startswith("sa_") else f"images/{key}.jpg")
        text = r[s.variant["text"]]
        out.append({"image": image, "captions": split_sentences(text) if s.variant["unit"] == "sentence" else [text]})
    return out


def _read_dci(folder: Path, s: LongCaptionSet) -> list[dict]:
    assert s.text is not None
    try:
        test = json.loads((folder / s.text.path).read_text(encoding="utf-8"))[s.variant["split"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{s.name}: {folder / s.text.path} has no readable {s.variant['split']!r} split ({exc})",
                        "point --data-dir at the folder holding dci/densely_captioned_images from "
                        "facebookresearch/DCI") from None
    rows = []
    for entry in test:
        ann = json.loads((folder / "annotations" / entry).read_text(encoding="utf-8"))
        extra = " ".join(ann.get("extra_caption", "").split())
        text = extra if s.variant["text"] == "extra" else f"{ann.get('short_caption', '').strip()} {extra}".strip()
        rows.append({"image": f"photos/{ann['image']}", "captions": [text]})
    return rows


READERS = {"urban1k": _read_urban1k, "docci": _read_docci, "iiw": _read_iiw, "dci": _read_dci}


def check_source(path: Path, src: SourceFile, s: LongCaptionSet) -> dict:
    """The source file's digest checked against the pinned one (or its first-use pin); its provenance entry."""
    if not path.is_file():
        where = f"download {src.url}" if src.url else f"get {s.images}"
        raise DataError(f"{s.name}: {path} does not exist", f"{where} into {path.parent}")
    digest = sha256_file(path)
    pin_file = path.with_name(path.name + ".sha256")
    pinned = src.sha256
    how = "pinned in vlbench"
    if pinned is None:
        how = "pinned on first use"
        if pin_file.is_file():
            pinned = pin_file.read_text().strip()
        else:
            pin_file.write_text(digest + "\n")
            pinned = digest
    if digest != pinned:
        raise DataError(f"{s.name}: {path} has sha256 {digest[:16]}..., expected {pinned[:16]}... ({how})",
                        f"the file is corrupt or another version: delete it and download {src.url or 'it'} again"
                        + (f" (and its {pin_file.name})" if src.sha256 is None else ""))
    return {"file": str(path), "sha256": digest, "pin": how}


def fetch_text(s: LongCaptionSet, data_dir=None) -> Path | None:
    """Download the set's caption source (through the one downloader: mirror, resume, its pinned checksum) when it
    is published at a URL; None when the set has none to fetch (a folder of files, or terms to accept first)."""
    if s.text is None or s.text.url is None:
        return None
    dest = Path(data_dir or default_data_dir()).expanduser() / s.folder / s.text.path
    if not dest.is_file():
        download(s.text.url, dest, sha256=s.text.sha256, what=f"{s.name} captions")
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
