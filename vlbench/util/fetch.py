"""The one downloader of files that do not live on the Hugging Face Hub (pinned GitHub sources of captions and
task files, NLTK's index and packages); Hub files go through ``huggingface_hub`` instead.

A download streams to a partial file beside its destination (``.NAME.part``), resumes a partial file with an
HTTP ``Range`` request (``If-Range`` on the validator the server gave, so a file changed in between is fetched
anew), retries dropped connections, 5xx answers and stalls with backoff, shows a tqdm byte bar on long
transfers, checks the pinned sha256 before anything is installed and installs with one atomic rename.
Every failure is a :class:`DownloadError` naming the URL that was asked.

Settings (environment):

* ``VLBENCH_MIRROR``: where non-Hub files are fetched from instead (:func:`mirrored`). Entries separated by
  spaces, commas or semicolons; ``PREFIX=REPLACEMENT`` rewrites URLs that start with PREFIX, a bare URL ``BASE``
  serves every host as ``BASE/HOST/PATH``. (Hub files follow ``HF_ENDPOINT``.)
* ``VLBENCH_DOWNLOAD_TIMEOUT`` (seconds without a byte before a connection counts as stalled, default 30; a
  positive finite number), ``VLBENCH_DOWNLOAD_RETRIES`` (default 4), ``VLBENCH_DOWNLOAD_BACKOFF`` (first wait in
  seconds, default 1, doubled after each try, each wait capped at 5 minutes), ``VLBENCH_DOWNLOAD_MAX_BYTES`` (the
  most a file without a pinned size may have, default 2 GiB; a pinned file may have exactly its pinned size).

Many processes (torchrun ranks, jobs on a shared file system) may download the same file at once: each download
holds the lock of its destination (``.NAME.lock`` beside it, through ``filelock``), and a process that waited for
the lock finds the file installed and checks it instead of fetching it again (docs/setup.md, "Shared storage and
many processes").
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataError  # noqa: F401  (this module's API, as before)
from . import locks
from .paths import offline
from .transfer import (  # noqa: F401  (Settings, the errors, mirror_rules, mirrored: this module's API)
    CHUNK,
    DEFAULT_MAX_BYTES,
    MAX_BACKOFF,
    DownloadError,
    LocalWriteError,
    Settings,
    _backoff,
    _hint,
    _remove,
    _transfer,
    mirror_rules,
    mirrored,
)


def hub_endpoint() -> str:
    """The Hub that Hub files come from: ``HF_ENDPOINT`` as set now (a mirror), else https://huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_cache_dir() -> str | None:
    """The Hub cache as the environment names it now (HF_HUB_CACHE, else HF_HOME/hub); None: the client's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    return None


def hub_blob_problem(path: str | os.PathLike, sha256: str | None = None) -> str | None:
    """Why a file of the Hugging Face cache differs from what its blob's name promises, or None.

    The Hub cache stores each file as ``blobs/<etag>``: the sha256 of the content for LFS files (64 hex digits),
    the git blob sha1 for the others (40 hex digits). A blob whose content no longer hashes to its own name was
    changed after the download (tampered with, or damaged). ``sha256``: the content's digest when already known."""
    blob = Path(path).resolve()
    name = blob.name.lower()
    if blob.parent.name != "blobs" or any(c not in "0123456789abcdef" for c in name):
        return None  # not a blob of the Hub cache (a local copy): nothing promised
    if len(name) == 64:
        digest = sha256 or _sha256(blob)
    elif len(name) == 40:
        h = hashlib.sha1(b"blob %d\0" % blob.stat().st_size)
        with open(blob, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
    else:
        return None
    if digest == name:
        return None
    return f"the blob {blob} holds content whose {'sha256' if len(name) == 64 else 'git sha1'} is {digest[:16]}..."


def _part_paths(dest: Path) -> tuple[Path, Path]:
    return dest.with_name(f".{dest.name}.part"), dest.with_name(f".{dest.name}.part.json")


def lock_path(dest: str | os.PathLike) -> Path:
    """The lock file of a destination: ``.NAME.lock`` beside it (held while the file is fetched or pinned)."""
    dest = Path(dest)
    return dest.with_name(f".{dest.name}.lock")


@contextmanager
def destination_lock(dest: str | os.PathLike, what: str = ""):
    """Hold the lock of ``dest`` (``filelock`` on ``.NAME.lock``: ``flock`` on POSIX, as huggingface_hub locks its
    blobs): one process at a time fetches, installs or pins that file; the others wait here. A lock file that is a
    link is removed first, never followed. The holder notes who it is beside the lock (``.NAME.lock.owner``); a
    process that waits more than a second says who holds the lock (and whether it is stopped), keeps saying it
    waits, and gives up with a LockWaitError naming the lock file after VLBENCH_LOCK_TIMEOUT seconds (default 600)
    in which the holder's partial file did not grow (util/locks.py)."""
    from filelock import FileLock  # lazy: only a download or a pin needs it

    path = lock_path(dest)
    what = what or Path(dest).name
    try:
        if path.is_symlink():
            path.unlink()
        lock = FileLock(str(path))
        locks.acquire(lock, path, what, progress=_part_paths(Path(dest))[0])
    except OSError as exc:
        raise LocalWriteError(path, exc, action="locking") from None
    locks.note_owner(path, what)
    try:
        yield path
    finally:
        locks.drop_owner(path)
        lock.release()


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None, size: int | None = None,
             what: str = "", settings: Settings | None = None, max_bytes: int | None = None,
             text: bool = False) -> Path:
    """Fetch ``url`` (through the mirror) to ``dest`` and install it atomically; returns ``dest``.

    Safe for many processes at once: the transfer happens under the lock of ``dest`` (:func:`destination_lock`), and
    once the lock is held ``dest`` is looked at again: a file another process installed meanwhile is checked
    (``sha256``/``size`` when pinned, the HTML sniff when ``text``) and returned without a second download. The
    partial file (``.NAME.part``, resumed with a Range request) is only ever opened by the lock holder, never
    through a link. ``size`` (when pinned) or ``max_bytes`` (else :data:`DEFAULT_MAX_BYTES`) bounds the body: a
    server that sends more is refused and the partial file deleted. ``text``: the file is JSON/JSONL/TSV text, so
    an HTML page (a proxy's or a login's) is refused rather than installed. A pinned ``sha256`` that differs
    installs nothing and drops the partial file."""
    real = mirrored(url)
    if offline():
        raise DownloadError(real, "offline mode is on", "unset VLBENCH_OFFLINE/HF_HUB_OFFLINE")
    settings = settings or Settings.from_env()
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalWriteError(dest, exc, action="making the folder of") from None
    limit = size if size is not None else (max_bytes or settings.max_bytes)
    with destination_lock(dest, what or dest.name):
        if _installed(dest, sha256, size, text):  # another process installed it while this one waited
            return dest
        part, meta = _part_paths(dest)
        _transfer(real, part, meta, settings, what or dest.name, limit, _hint(real))
        problem = _check_part(part, sha256, size, text)
        if problem:
            _remove(part, meta)
            reason, hint = problem
            raise DownloadError(real, reason, hint)
        try:
            with open(part, "rb") as fh:
                os.fsync(fh.fileno())
            if part.is_symlink() or not part.is_file():  # never install a link (or anything but our own file)
                raise OSError(f"{part} is not the partial file this process wrote")
            os.replace(part, dest)
        except FileNotFoundError as exc:  # without working locks another process may have installed it first
            if _installed(dest, sha256, size, text):
                return dest
            raise LocalWriteError(dest, exc, action="installing") from None
        except OSError as exc:
            raise LocalWriteError(dest, exc, action="installing") from None
        _remove(meta)
    return dest


def fetch_bytes(url: str, *, what: str = "", settings: Settings | None = None, max_bytes: int | None = None,
                text: bool = False) -> bytes:
    """The bytes of ``url`` (small files: captions, task files), fetched with :func:`download`'s retries and
    resume into a scratch folder; at most ``max_bytes`` (else VLBENCH_DOWNLOAD_MAX_BYTES)."""
    import tempfile  # lazy: only a download needs it

    with tempfile.TemporaryDirectory(prefix="vlbench-download-") as tmp:
        path = download(url, Path(tmp) / (url.rstrip("/").rsplit("/", 1)[-1] or "file"), what=what,
                        settings=settings, max_bytes=max_bytes, text=text)
        return path.read_bytes()


def looks_like_html(head: bytes) -> bool:
    """Whether the first bytes of a file are an HTML document (a proxy's notice, a login page) rather than the
    JSON/JSONL/TSV text asked for."""
    lead = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return lead.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or (
        lead.startswith(b"<") and b"<html" in lead[:4096])


def html_problem(url: str) -> tuple[str, str]:
    return ("the server answered with an HTML page, not the text file asked for (a proxy's notice, a login or "
            "captive-portal page, or a mirror that does not hold the file); nothing was installed",
            "open the URL in a browser to see the page; log in or configure the proxy (https_proxy), or point "
            "VLBENCH_MIRROR at a mirror that holds the file")


def _installed(dest: Path, sha256: str | None, size: int | None, text: bool) -> bool:
    """Whether ``dest`` already holds the file (installed by another process while this one waited for the lock):
    a regular file that passes the same checks a fresh download must pass."""
    try:
        if not dest.is_file():
            return False
    except OSError:
        return False
    return _check_part(dest, sha256, size, text) is None


def _check_part(path: Path, sha256: str | None, size: int | None, text: bool) -> tuple[str, str] | None:
    """(reason, hint) when the bytes of ``path`` are not what was asked for, else None."""
    try:
        if text:
            with open(path, "rb") as fh:
                if looks_like_html(fh.read(8192)):
                    return html_problem(str(path))
        if sha256:
            digest = _sha256(path)
            if digest != sha256:
                return (f"its content has sha256 {digest[:16]}..., pinned {sha256[:16]}... (changed upstream or "
                        "altered in transit); nothing was installed",
                        "try again later; if it persists the source changed: report it to vlbench")
        have = path.stat().st_size
        if size is not None and have != size:
            return (f"it has {have:,} bytes, pinned {size:,}; nothing was installed",
                    "try again later; if it persists the source changed: report it to vlbench")
    except OSError as exc:
        raise LocalWriteError(path, exc, action="reading") from None
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()
