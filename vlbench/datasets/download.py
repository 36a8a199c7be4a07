"""Downloads of the built-in datasets (only when online; every file is checksum-verified).

Captions come from the same pinned public sources as the normalized files vlbench expects, and are
converted the same way; the result must match the pinned sha256 of the normalized file, so a
changed upstream file is detected rather than silently evaluated:

* Flickr30k: multi30k/dataset (Karpathy test image list + the five raw English caption files);
* MS-COCO: the ALBEF/BLIP-style Karpathy test annotation (data-ming-and-application/CVLR-RD);
* FG captions: cwj1412/MSCOCO-Flikcr30K_FG at a pinned commit, reordered to the original image order.

Images come from the Hugging Face datasets nlphuji/flickr_1k_test_image_text_retrieval and
nlphuji/mscoco_2014_5k_test_image_text_retrieval (zip archives, verified where a digest is pinned).
"""

from __future__ import annotations

import gzip
import html
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from ..errors import DataError
from ..util.io import atomic_write_bytes, sha256_bytes, sha256_file
from ..util.paths import offline
from .specs import BUILTIN, IMAGE_SOURCES


class DownloadError(DataError):
    """One file could not be fetched: ``url`` and the plain ``reason`` (the caller says what it was for)."""

    def __init__(self, url: str, reason: str, hint: str):
        self.url, self.reason = url, reason
        super().__init__(f"could not download {url}: {reason}", hint)


def _reason(exc: Exception) -> str:
    """The root cause of a failed download in plain words (``[Errno -3] ...``, not ``<urlopen error ...>``)."""
    inner = getattr(exc, "reason", None)
    return str(inner if inner is not None and not isinstance(exc, urllib.error.HTTPError) else exc)


def http_get(url: str, timeout: float = 60.0) -> bytes:
    if offline():
        raise DownloadError(url, "offline mode is on", "unset VLBENCH_OFFLINE/HF_HUB_OFFLINE")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (fixed https URLs)
            return r.read()
    except Exception as exc:
        raise DownloadError(url, _reason(exc), "check the network, or fetch the file by hand") from None


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _multi30k(data_dir: Path, images: str, captions: str, files: int = 5) -> bytes:
    """Line i of caption file j is caption j of image i; whitespace stripped, HTML entities unescaped."""
    names = [x.strip() for x in http_get(images).decode("utf-8").splitlines() if x.strip()]
    caps = []
    for j in range(1, files + 1):
        raw = gzip.decompress(http_get(captions.format(j=j))).decode("utf-8").splitlines()
        caps.append([html.unescape(x.strip()) for x in raw])
    if any(len(c) != len(names) for c in caps):
        raise DataError(f"the Multi30K files do not have one caption per image ({len(names)} images, "
                        f"{[len(c) for c in caps]} lines)", "the upstream files changed: report it to vlbench")
    return _jsonl({"image": n, "captions": [c[i] for c in caps]} for i, n in enumerate(names))


def _karpathy_json(data_dir: Path, url: str) -> bytes:
    data = json.loads(http_get(url))
    return _jsonl({"image": os.path.basename(e["image"]), "captions": [c.strip() for c in e["caption"][:5]]}
                  for e in data)


def _fg_reorder(data_dir: Path, url: str, order_of: str) -> bytes:
    original = fetch_captions(order_of, data_dir)
    data = json.loads(http_get(url))
    order = [json.loads(line)["image"] for line in original.read_text().splitlines() if line.strip()]
    return _jsonl({"image": n, "captions": data[n[:-4] if n.endswith(".jpg") else n]} for n in order)


#: recipe step (vlbench.datasets.specs.RECIPE_STEPS) -> function(data_dir, **args) -> file bytes
STEPS: dict[str, Callable[..., bytes]] = {
    "multi30k": _multi30k, "karpathy_json": _karpathy_json, "fg_reorder": _fg_reorder}


def fetch_captions(name: str, data_dir: Path) -> Path:
    """The normalized caption file of built-in ``name`` in ``data_dir``, made by its recipe if missing."""
    spec = BUILTIN[name]
    target = Path(data_dir) / spec.captions
    if target.is_file() and sha256_file(target) == spec.sha256:
        return target
    try:
        blob = STEPS[spec.recipe.step](Path(data_dir), **spec.recipe.args)
    except DownloadError as exc:  # one flat message: which captions, which file, why
        raise DataError(f"the captions of {name!r} are not in {data_dir} and could not be downloaded: "
                        f"{exc.url}: {exc.reason}",
                        f"put {spec.captions} (sha256 {spec.sha256[:16]}...) into {data_dir} or pass "
                        f"--data-dir with the folder that holds it; online, 'vlbench download {name}' fetches it") \
            from None
    except DataError as exc:  # the dataset this one is made from (an FG set's original) failed: say so once
        if spec.recipe.step != "fg_reorder" or exc.message.startswith(f"the captions of {name!r}"):
            raise
        base = spec.recipe.args["order_of"]
        raise DataError(f"the captions of {name!r} are made from those of {base!r}, and {exc.message}",
                        f"{exc.hint}; then 'vlbench download {name}' (or put {spec.captions} into {data_dir})") \
            from None
    digest = sha256_bytes(blob)
    if digest != spec.sha256:
        raise DataError(f"the downloaded captions of {name!r} have sha256 {digest[:16]}..., expected "
                        f"{spec.sha256[:16]}...", "the upstream file changed; report it to vlbench")
    atomic_write_bytes(target, blob)
    return target


def fetch_images(name: str, ds, data_dir: Path) -> None:
    """Download and unpack the images of ``ds`` (a built-in dataset) that are missing under ``data_dir``."""
    spec = BUILTIN[name]
    root = Path(data_dir) / "images" / spec.images
    missing = [n for n in ds.images if not (root / n).is_file()]
    if not missing:
        return
    src = IMAGE_SOURCES[spec.images]
    print(f"downloading {src.url} ({len(missing)} images missing) ...", flush=True)
    with tempfile.TemporaryDirectory(dir=data_dir) as tmp:
        zpath = Path(tmp) / "images.zip"
        if offline():
            raise DataError(f"{len(missing)} image(s) of {name!r} are missing and offline mode is on",
                            f"download {src.url} and unzip its images into {root}")
        try:
            with urllib.request.urlopen(src.url, timeout=120) as r, open(zpath, "wb") as fh:  # noqa: S310 (fixed https URLs)
                shutil.copyfileobj(r, fh, 1 << 20)
        except OSError as exc:  # URLError, timeouts, resets, a full disk
            raise DataError(f"could not download the images of {name!r} from {src.url}: {exc}",
                            f"check the network (or set VLBENCH_OFFLINE=1), or download the archive by hand "
                            f"and unzip its images into {root}") from None
        digest = sha256_file(zpath)
        if src.sha256 and digest != src.sha256:
            raise DataError(f"{src.url} has sha256 {digest}, expected {src.sha256}",
                            "the archive changed or is corrupt: retry, or download it by hand")
        wanted = set(ds.images)
        root.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(zpath) as z:
            for info in z.infolist():
                base = os.path.basename(info.filename)
                if base in wanted and not info.is_dir():
                    atomic_write_bytes(root / base, z.read(info))  # flat, by base name: no path escapes
        (root / ".source.json").write_text(json.dumps({"url": src.url, "sha256": digest}))
