"""XM3600- and XTD10-shaped fixtures in the releases' layouts, written by the tests (tiny images, a few captions
per language), for the multilingual retrieval sets (vlbench/datasets/langsets)."""

from __future__ import annotations

import json
from pathlib import Path

from support.data import write_images

CAPTIONS = {  # per image: de (two captions each), fr (one), ja (one or two)
    "de": [["ein roter Bus auf der Straße", "ein Bus fährt"], ["zwei Hunde spielen im Schnee", "Hunde im Schnee"],
           ["eine Frau liest ein Buch", "Frau mit Buch am Fenster"], ["ein Boot auf dem See", "ein kleines Boot"],
           ["Kinder spielen Fußball", "ein Fußballspiel im Park"]],
    "fr": [["un bus rouge dans la rue"], ["deux chiens jouent dans la neige"], ["une femme lit un livre"],
           ["un bateau sur le lac"], ["des enfants jouent au football"]],
    "ja": [["赤い バス が 道 を 走る"], ["雪 の 中 で 遊ぶ 二匹 の 犬"], ["本 を 読む 女性"],
           ["湖 の 上 の ボート", "小さな ボート"], ["公園 で サッカー を する 子供たち"]],
}


def write_xm3600(root: Path, n: int = 5, langs=("de", "fr", "ja")) -> list[str]:
    """<root>/xm3600/captions.jsonl (one line per image: "image/key" and per language {"caption": [...], ...})
    and <root>/images/xm3600/<key>.jpg; returns the image file names."""
    names = write_images(root / "images" / "xm3600", n, fmt="jpg")
    rows = []
    for i, name in enumerate(names):
        row: dict = {"image/key": name[:-4]}
        for lang in langs:
            caps = CAPTIONS[lang][i]
            row[lang] = {"caption": caps, "caption/tokenized": caps, "caption/tokenized/lowercase": caps}
        rows.append(row)
    write_jsonl(root / "xm3600" / "captions.jsonl", rows)
    return names


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


XTD10_TEXT = {"en": ["a red bus on the street", "two dogs play in the snow", "a woman reads a book"],
              "de": ["ein roter Bus auf der Straße", "zwei Hunde im Schnee", "eine Frau liest ein Buch"],
              "ja": ["赤いバス", "雪の中の犬", "本を読む女性"]}


def write_xtd10(root: Path, langs=("en", "de", "ja")) -> list[str]:
    """<root>/xtd10/ as in the release (XTD10/test_image_names.txt; XTD10/, MIC/, STAIR/ caption files, CRLF in
    one, no final newline in another) and <root>/images/xtd10/; returns the image file names."""
    from vlbench.datasets.langsets import xtd10

    names = [f"COCO_val2014_{i:012d}.jpg" for i in range(3)]
    img = root / "images" / "xtd10"
    for src, name in zip(write_images(img, 3, fmt="jpg"), names):
        (img / src).rename(img / name)
    folder = root / "xtd10"
    (folder / "XTD10").mkdir(parents=True, exist_ok=True)
    (folder / xtd10.IMAGE_LIST.path).write_text("\n".join(names) + "\n")
    for lang in langs:
        path = folder / xtd10.FILES[lang].path
        path.parent.mkdir(parents=True, exist_ok=True)
        sep = "\r\n" if lang == "en" else "\n"
        path.write_bytes((sep.join(XTD10_TEXT[lang]) + ("" if lang == "ja" else sep)).encode("utf-8"))
    return names


def pin_xtd10(monkeypatch, root: Path) -> None:
    """Pin vlbench's XTD10 digests to the fixture files under ``root`` (the real ones pin the release's bytes)."""
    import dataclasses

    from vlbench.datasets.langsets import xtd10
    from vlbench.util.io import sha256_file

    folder = root / "xtd10"

    def pinned(src):
        path = folder / src.path
        return dataclasses.replace(src, sha256=sha256_file(path), size=path.stat().st_size) if path.is_file() else src

    monkeypatch.setattr(xtd10, "IMAGE_LIST", pinned(xtd10.IMAGE_LIST))
    monkeypatch.setattr(xtd10, "FILES", {c: pinned(s) for c, s in xtd10.FILES.items()})
