"""XTD10 (Aggarwal and Kale, 2020): 1,000 MS-COCO 2014 images with one caption each in English and 10 other
languages, read in the release's layout (github.com/adobe-research/Cross-lingual-Test-Dataset-XTD10).

The release is one text file per language, line i captioning the image on line i of
``XTD10/test_image_names.txt`` (``COCO_train2014_*.jpg`` / ``COCO_val2014_*.jpg``):
``XTD10/test_1kcaptions_<code>.txt`` for en, es, it, ko, pl, ru, tr, zh (crowd-sourced for XTD10),
``MIC/test_1kcaptions_{de,fr}.txt`` (the MIC set) and ``STAIR/test_1kcaptions_jp.txt`` (STAIR Captions; vlbench
names the language ``ja``). Files: ``<data dir>/xtd10/`` as in the repository (a clone of it will do); the
images: ``<data dir>/images/xtd10/<file name>`` from MS-COCO 2014 train and val. Every file is pinned (sha256
and size at the release's last commit) and, while online, downloaded when missing.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import DataError
from ...util.fetch import download
from ...util.io import sha256_file
from ..longcaptions import SourceFile
from .common import LanguageSet, missing_language, parse_options

COMMIT = "d77ff16148468c84287f3efcbf602a015c5e4954"
RAW = f"https://raw.githubusercontent.com/adobe-research/Cross-lingual-Test-Dataset-XTD10/{COMMIT}"
IMAGE_LIST = SourceFile("XTD10/test_image_names.txt", f"{RAW}/XTD10/test_image_names.txt",
                        "504a472dfd40e44f2d0facd6320b9dc1c7d64c58aac9840f0b1da4807cb3a30a", 31600)
_FILES = {  # code -> (path in the release, sha256, size in bytes)
    "en": ("XTD10/test_1kcaptions_en.txt", "ac5531b6842c1d469fba80aa6f44e2af054e84a41da8f9eaf01d831e943039b9", 65828),
    "de": ("MIC/test_1kcaptions_de.txt", "51f1e9fe05d85b7cd33543676ed2fea51b05399cc403a5fca557ca7ecdb9a207", 75593),
    "fr": ("MIC/test_1kcaptions_fr.txt", "84aa16954706a0f654b59788ffb6a3bcb1b1d9d12dc9d7a3de26730bc04664b5", 79287),
    "es": ("XTD10/test_1kcaptions_es.txt", "cacc43d4e7af56b02033865531ea70494049f1d0dd3ea89ff2a217e7e190c4f2", 66315),
    "it": ("XTD10/test_1kcaptions_it.txt", "b4095d3550eb1accf8c9c78314b4bef45847a3929b5c5fe15a1264ea31dec7cc", 65178),
    "ja": ("STAIR/test_1kcaptions_jp.txt", "20908aa5763ee7b1bacc1f29aa507532d3dc6a7e6a8c43e6acd2ec72d1e80c10", 63028),
    "ko": ("XTD10/test_1kcaptions_ko.txt", "92d35e082cd081724560c9abdb2b45753ceb52aaabddb9a0f79dc04967a36800", 70124),
    "pl": ("XTD10/test_1kcaptions_pl.txt", "b6af6b7941f44e902b50736dcf9a7221af28e755a259511652c599cf6ae89c78", 66605),
    "ru": ("XTD10/test_1kcaptions_ru.txt", "7d93631ff85b53592091b3cbfd9ca963397e77038fb3d0fdd9374b1b02ae98a3", 95035),
    "tr": ("XTD10/test_1kcaptions_tr.txt", "147e9763dcb6e6ebba0b98fc799f0145c7d90005fa03ca8ec5a7cf29a04dd136", 71756),
    "zh": ("XTD10/test_1kcaptions_zh.txt", "17229ff02ac85dd2d165f8316515a24fbe5100dbf486c22aaa12105dfb3353bf", 58660),
}
FILES = {code: SourceFile(p, f"{RAW}/{p}", sha, size) for code, (p, sha, size) in _FILES.items()}
LANGUAGES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "ja": "Japanese",
             "ko": "Korean", "pl": "Polish", "ru": "Russian", "tr": "Turkish", "zh": "Chinese (Simplified)"}

XTD10 = LanguageSet(
    "xtd10", "XTD10: 1,000 MS-COCO images, one caption each in 11 languages (English + 10)", "xtd10", "xtd10",
    LANGUAGES, 1000,
    "Adobe Research License: non-commercial research only (XTD10's captions); MIC (de, fr) and STAIR Captions (ja) "
    "under their own terms; the images under the MS-COCO terms of use",
    "Aggarwal and Kale, Towards Zero-shot Cross-lingual Image Retrieval, arXiv:2012.05107 (2020); MIC (de, fr): "
    "Rajendran et al., NAACL 2016; STAIR Captions (ja): Yoshikawa et al., ACL 2017",
    "the MS-COCO 2014 train and val images (images.cocodataset.org/zips/train2014.zip and val2014.zip) named in "
    "XTD10/test_image_names.txt, flat in one folder")


def _lines(path: Path) -> list[str]:
    """The file's lines (LF or CRLF; the release mixes both), surrounding whitespace stripped; a last line without
    its newline counts."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        f"get the file again from {RAW}") from None
    lines = text.split("\n")
    if lines and lines[-1].strip() == "":
        lines.pop()
    return [ln.strip() for ln in lines]


def fetch(folder: Path, src: SourceFile, allowed: bool) -> Path:
    path = folder / src.path
    if not path.is_file() and allowed and src.url:
        download(src.url, path, sha256=src.sha256, size=src.size, what=f"xtd10 {src.path}", text=True)
    return path


def _checked(path: Path, src: SourceFile) -> None:
    digest = sha256_file(path)
    if digest != src.sha256:
        raise DataError(f"xtd10: {path} has sha256 {digest[:16]}..., expected {str(src.sha256)[:16]}... "
                        "(pinned in vlbench)",
                        f"the file is corrupt or another version: delete it and download {src.url}")


def load(data_dir: Path, options: str | None, *, download_missing: bool) -> tuple:
    """(LanguageSet, images, captions, selected, source) of ``xtd10[?languages=...]`` under ``data_dir``."""
    opts = parse_options(XTD10, options)
    folder = data_dir / XTD10.folder
    selected = opts["languages"] or list(LANGUAGES)
    unknown = [c for c in selected if c not in FILES]
    if unknown:
        raise DataError(f"xtd10 has no language {unknown[0]!r}; its languages are {', '.join(LANGUAGES)}",
                        f"select among them, e.g. --dataset xtd10?languages={','.join(list(LANGUAGES)[:3])}")
    names_path = fetch(folder, IMAGE_LIST, download_missing)
    if not names_path.is_file():
        raise DataError(f"xtd10: the image list {names_path} does not exist",
                        f"download {IMAGE_LIST.url} into {names_path.parent} (or clone the XTD10 repository into "
                        f"{folder})")
    files = {c: fetch(folder, FILES[c], download_missing) for c in selected}
    for c, path in files.items():
        if not path.is_file():
            present = [k for k, s in FILES.items() if (folder / s.path).is_file()]
            raise missing_language(XTD10, f"{folder} (no {FILES[c].path})", c, present)
    for path, src in [(names_path, IMAGE_LIST), *((files[c], FILES[c]) for c in selected)]:
        _checked(path, src)
    images = _lines(names_path)
    bad = next((i for i, name in enumerate(images) if not name), None)
    if bad is not None:
        raise DataError(f"{names_path}: line {bad + 1}: the image name field is empty",
                        f"get the image list again from {IMAGE_LIST.url}")
    captions = {}
    for c in selected:
        rows = _lines(files[c])
        if len(rows) != len(images):
            raise DataError(f"{files[c]}: {len(rows):,} caption lines for the {len(images):,} images of {names_path} "
                            f"(line i captions image i)", f"get the file again from {FILES[c].url}")
        captions[c] = [[r] for r in rows]
    source = {"caption_files": {c: FILES[c].path for c in selected}, "caption_sha256": {
              c: FILES[c].sha256 for c in selected}, "image_list": IMAGE_LIST.path, "release_commit": COMMIT,
              "captions": "all"}
    return XTD10, images, captions, selected, source
