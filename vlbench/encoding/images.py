"""Image files as the encode step reads them: checked before anything heavy is loaded, decoded by fixed rules.

Every problem with a file (missing, a folder, a name too long for the file system, unreadable, empty, not an
image, corrupt, too large, an extreme aspect ratio) and with the ``VLBENCH_MAX_IMAGE_ASPECT`` setting is an
error naming the file (or the setting) and the fix, never a traceback.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..errors import DataError, VlbenchError

#: longest side / shortest side above which an image is refused. Preprocessing resizes the shortest side
#: to the model's input size, so memory grows with this ratio: a 6 KB PNG of 2,000,000 x 1 pixels would
#: become a 448,000,000 x 224 image (301 GB as 8-bit RGB). Override with VLBENCH_MAX_IMAGE_ASPECT.
MAX_ASPECT = 32.0


def max_aspect() -> float:
    """The aspect-ratio limit: ``$VLBENCH_MAX_IMAGE_ASPECT`` (a number >= 1; ``inf``: no limit) or 32."""
    raw = os.environ.get("VLBENCH_MAX_IMAGE_ASPECT")
    if raw is None or not raw.strip():
        return MAX_ASPECT
    try:
        limit = float(raw)
    except ValueError:
        limit = float("nan")
    if not limit >= 1:  # also NaN
        raise VlbenchError(f"the environment variable VLBENCH_MAX_IMAGE_ASPECT={raw!r} is not a number >= 1 (it is "
                           f"the largest longest-side / shortest-side ratio an image may have)",
                           f"set it to a number such as 64, or unset it for the default {MAX_ASPECT:g}")
    return limit


def _check_shape(path: Path, size: tuple[int, int], limit: float) -> None:
    w, h = size
    if min(w, h) < 1 or max(w, h) / min(w, h) > limit:
        long_side = round(max(w, h) / max(min(w, h), 1) * 224)
        raise DataError(f"image file {str(path)!r} is {w} x {h} pixels: its aspect ratio exceeds {limit:g}:1, and "
                        f"resizing its short side to 224 pixels (a usual model input size) would make it "
                        f"{long_side:,} x 224 pixels, {long_side * 224 * 3 / 1e9:,.1f} GB as 8-bit RGB",
                        "crop or pad it to a normal aspect ratio, or set VLBENCH_MAX_IMAGE_ASPECT if you trust it")


@contextmanager
def _opened(path: Path):
    """The image opened lazily (header read, nothing decoded), its size checked; every failure inside the
    block becomes a DataError naming the file and the fix."""
    from PIL import Image, UnidentifiedImageError

    limit = max_aspect()  # a bad setting is named as such, not blamed on the image
    problem = file_problem(path)
    if problem is not None:
        raise problem
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                _check_shape(path, im.size, limit)  # before decoding: the header gives the size
                yield im
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DataError(f"image file {str(path)!r} is too large to decode safely ({exc})",
                        "downscale it, or raise PIL.Image.MAX_IMAGE_PIXELS if you trust the file") from None
    except UnidentifiedImageError:
        raise DataError(f"image file {str(path)!r} is not an image PIL can read",
                        "replace it with a valid JPEG/PNG file") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"image file {str(path)!r} is corrupt or truncated ({exc})",
                        "re-download or replace the file") from None


#: (path, device, inode, size, mtime in ns, aspect limit) of the image headers found good in this process: a run
#: checks its gallery before a model it must load (encoding/session.py) and again before encoding each batch
_CHECKED: set[tuple] = set()


def check_image_header(path: str | os.PathLike) -> None:
    """Refuse an unreadable or extreme image from its header alone (no decoding, no model): the encode
    step calls it for every image it is about to encode, before the model is loaded, so such an image
    costs neither the model's memory nor any finished work. A header found good is not read again while
    the file is unchanged."""
    try:
        st = os.stat(path)
        memo: tuple | None = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, max_aspect())
    except OSError:
        memo = None  # _opened names the problem
    if memo is not None and memo in _CHECKED:
        return
    with _opened(Path(path)):
        pass
    if memo is not None:
        _CHECKED.add(memo)


def load_image(path: str | os.PathLike):
    """Open an image as RGB with the documented rules (docs/robustness.md):
    EXIF orientation applied; CMYK/grayscale/palette converted; 16-bit scaled to 8-bit;
    transparency composited on white; PIL's decompression-bomb limit enforced."""
    from PIL import Image, ImageOps

    with _opened(Path(path)) as im:
        im.load()
        im = ImageOps.exif_transpose(im)
        if im.mode in ("I;16", "I;16B", "I;16L", "I"):
            arr = np.asarray(im, dtype=np.float64)
            hi = 65535.0 if im.mode.startswith("I;16") or arr.max() > 255 else 255.0
            im = Image.fromarray(np.clip(arr / hi * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
        if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
            im = im.convert("RGBA")
            bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
            im = Image.alpha_composite(bg, im)
        return im.convert("RGB")


def _shown(path: Path) -> str:
    """A path as messages quote it: names longer than 120 characters are cut in the middle (with the length)."""
    s = str(path)
    return repr(s) if len(s) <= 120 else f"{s[:60]!r}...{s[-40:]!r} ({len(s):,} characters)"


def file_problem(path: str | os.PathLike) -> DataError | None:
    """Why ``path`` cannot be an image file (missing, a folder, a name too long for the file system, unreadable,
    empty), as the error to raise; None when it is a non-empty regular file."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        return DataError(f"image file {_shown(path)} is missing", "put the file there or fix the manifest")
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return DataError(f"image file name {_shown(path)} is too long for the file system ({exc.strerror}; "
                             f"its last part is {len(path.name):,} characters)",
                             "rename the file (and its entry in the manifest) to a name of at most 255 bytes")
        return DataError(f"image file {_shown(path)} cannot be read ({exc.strerror})",
                         "check the path in the manifest and the file's permissions")
    if stat.S_ISDIR(st.st_mode):
        return DataError(f"image path {_shown(path)} is a folder, not an image file",
                         "name the image file itself in the manifest (relative to the manifest's folder)")
    if not stat.S_ISREG(st.st_mode):
        return DataError(f"image path {_shown(path)} is not a regular file", "replace it with a JPEG/PNG file")
    if st.st_size == 0:
        return DataError(f"image file {_shown(path)} is empty (0 bytes)", "re-download or replace the file")
    return None


#: (path, device, inode, size, mtime in ns) -> content key: a run's steps (images, image conditions, the relevance
#: model, the embedding index) ask for the same gallery's keys; each file is read and hashed once per process,
#: and again as soon as it is rewritten (any change of size, mtime or inode)
_KEYS: dict[tuple, str] = {}


def file_key(path: str | os.PathLike) -> str:
    """The content key of an image file ("img:" + SHA-256 of its bytes)."""
    try:
        st = os.stat(path)
        memo = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if memo in _KEYS:
            return _KEYS[memo]
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:  # missing, a folder, a name too long, no permission: a message, not a traceback
        raise (file_problem(path) or DataError(f"image file {_shown(Path(path))} cannot be read ({exc.strerror})",
                                               "check the file and its permissions")) from None
    _KEYS[memo] = key = "img:" + h.hexdigest()
    return key
