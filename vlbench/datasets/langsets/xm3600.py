"""Crossmodal-3600 (XM3600; Thapliyal et al., EMNLP 2022): 3,600 geographically diverse images with human
captions in 36 languages, read from the release's ``captions.jsonl``.

The release (google.github.io/crossmodal-3600: ``web-data/captions.zip`` holding ``captions.jsonl``) has one
line per image: ``"image/key"`` (the image is ``<key>.jpg`` of ``images.tgz``) and, per language code, an object
whose ``"caption"`` is the list of that language's captions of the image (beside ``"caption/tokenized"`` and
``"caption/tokenized/lowercase"``, which vlbench does not read). Files: ``<data dir>/xm3600/captions.jsonl``
and the images in ``<data dir>/images/xm3600/``.

Options: ``xm3600?languages=de,fr,ja`` (default: every language of the file) and ``captions=first`` (only the
first caption of each image and language, CLIP_benchmark's protocol; default ``all``: every caption is a query
and an image's captions in the language are its positives). The captions file cannot be pinned here (the
release's zip was not reachable where vlbench was built): it is pinned on first use (``captions.jsonl.sha256``
beside it) and its digest recorded in the provenance.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import DataError
from ..longcaptions import MAX_LINE_BYTES, LongCaptionSet, SourceFile, check_source
from .common import LanguageSet, missing_language, parse_options

CAPTIONS_URL = "https://google.github.io/crossmodal-3600/web-data/captions.zip"
IMAGES_URL = "https://open-images-dataset.s3.amazonaws.com/crossmodal-3600/images.tgz"
KEY = "image/key"
#: the 36 languages of the release, in its order (codes as in captions.jsonl)
LANGUAGES = {
    "ar": "Arabic", "bn": "Bengali", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "fa": "Persian", "fi": "Finnish", "fil": "Filipino", "fr": "French", "he": "Hebrew",
    "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "mi": "Maori", "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese",
    "quz": "Cusco Quechua", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "sw": "Swahili", "te": "Telugu",
    "th": "Thai", "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese (Simplified)"}

XM3600 = LanguageSet(
    "xm3600", "Crossmodal-3600: 3,600 images, human captions in 36 languages", "xm3600", "xm3600", LANGUAGES, 3600,
    "CC BY 4.0 (the captions, Google LLC); the images: Open Images, each under its own CC BY licence "
    "(image_attributions.csv of the release)",
    "Thapliyal, Pont-Tuset, Chen and Soricut, Crossmodal-3600: A Massively Multilingual Multimodal Evaluation "
    "Dataset, EMNLP 2022",
    f"the images ({IMAGES_URL}; extract so that images/xm3600/<image key>.jpg exists)",
    options=("languages", "captions"))
CAPTIONS_HINT = f"{CAPTIONS_URL} and unzip its captions.jsonl"
_SOURCE = SourceFile("captions.jsonl", None, None)  # not pinned here: pinned on first use (module docstring)
#: the checksum check of the long-caption sets (first-use pin, its lock and its refusals), reused for this file
_PINNED = LongCaptionSet(XM3600.name, XM3600.description, "xm3600", XM3600.folder, _SOURCE, CAPTIONS_HINT,
                         XM3600.licence, XM3600.citation)


def _field_error(path: Path, n: int, field: str, problem: str) -> DataError:
    return DataError(f"{path}: line {n}: field {field!r} {problem}",
                     'each line is {"image/key": "<key>", "<lang>": {"caption": ["...", ...]}, ...} as in the '
                     f"release's captions.jsonl; get it again from {CAPTIONS_URL}")


def _row(path: Path, n: int, raw: bytes) -> dict:
    if len(raw) > MAX_LINE_BYTES:
        raise DataError(f"{path}: line {n} is {len(raw):,} bytes (over {MAX_LINE_BYTES:,})",
                        f"this is not the release's captions.jsonl; get it again from {CAPTIONS_URL}")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: line {n} is not a UTF-8 JSON object ({exc})",
                        f"get the release's captions.jsonl again from {CAPTIONS_URL}") from None
    if not isinstance(obj, dict):
        raise _field_error(path, n, KEY, "is missing: the line is not a JSON object")
    if not isinstance(obj.get(KEY), str) or not obj[KEY].strip():
        raise _field_error(path, n, KEY, "is missing or not a non-empty string")
    return obj


def _captions(path: Path, n: int, obj: dict, lang: str, first: bool) -> list[str]:
    entry = obj.get(lang)
    if entry is None:
        present = [k for k in obj if k != KEY]
        raise missing_language(XM3600, f"{path} (line {n}, image {obj[KEY]!r})", lang, present)
    caps = entry.get("caption") if isinstance(entry, dict) else None
    if not isinstance(caps, list) or not caps:
        raise _field_error(path, n, f"{lang}.caption", "is not a non-empty list of captions")
    for j, cap in enumerate(caps):
        if not isinstance(cap, str):
            raise _field_error(path, n, f"{lang}.caption", f"holds a {type(cap).__name__} at position {j}, not text")
    return [c.strip() for c in (caps[:1] if first else caps)]


def read_captions(path: Path, languages: list[str] | None, first: bool) -> tuple[list[str], dict, list[str]]:
    """(images, {lang: [captions of image i]}, the languages read) from the release's captions.jsonl."""
    images: list[str] = []
    captions: dict[str, list[list[str]]] = {}
    seen: dict[str, int] = {}
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            obj = _row(path, n, raw)
            if languages is None:  # every language of the file, in the release's order
                keys = [k for k in obj if k != KEY]
                languages = [c for c in LANGUAGES if c in keys] + sorted(k for k in keys if k not in LANGUAGES)
            key = obj[KEY].strip()
            if key in seen:
                raise _field_error(path, n, KEY, f"repeats image {key!r} (first on line {seen[key]})")
            seen[key] = n
            images.append(f"{key}.jpg")
            for lang in languages:
                captions.setdefault(lang, []).append(_captions(path, n, obj, lang, first))
    if not images or not languages:
        raise DataError(f"{path} holds no images with captions",
                        f"get the release's captions.jsonl from {CAPTIONS_URL}")
    return images, captions, languages


def load(data_dir: Path, options: str | None) -> tuple:
    """(LanguageSet, images, captions, selected, source) of ``xm3600[?options]`` under ``data_dir``."""
    opts = parse_options(XM3600, options)
    path = data_dir / XM3600.folder / "captions.jsonl"
    pin = check_source(path, _SOURCE, _PINNED)
    images, captions, selected = read_captions(path, opts["languages"], opts["captions"] == "first")
    source = {"caption_file": str(path), "caption_sha256": pin["sha256"], "pin": pin["pin"],
              "captions": opts["captions"], "caption_source": CAPTIONS_URL}
    return XM3600, images, captions, selected, source
