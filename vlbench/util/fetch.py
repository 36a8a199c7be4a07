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

import errno
import hashlib
import http.client
import json
import math
import os
import socket
import stat
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import DataError
from .io import atomic_write_bytes
from .paths import offline

CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 8 << 20  # a bar only for transfers at least this long
DEFAULT_MAX_BYTES = 2 << 30  # the most a file without a pinned size may have (VLBENCH_DOWNLOAD_MAX_BYTES)
MAX_BACKOFF = 300.0  # the longest wait between two tries, however many tries are asked for


class DownloadError(DataError):
    """One file could not be fetched: ``url`` (the address asked, after the mirror) and the plain ``reason``."""

    def __init__(self, url: str, reason: str, hint: str):
        self.url, self.reason = url, reason
        super().__init__(f"could not download {url}: {reason}", hint)


@dataclass(frozen=True)
class Settings:
    timeout: float = 30.0
    retries: int = 4
    backoff: float = 1.0
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_env(cls) -> Settings:
        def num(var: str, default, cast=float, positive: bool = False):
            raw = os.environ.get(var, "").strip()
            if not raw:
                return default
            try:
                value = cast(raw)
            except (ValueError, OverflowError):
                raise DataError(f"{var}={raw!r} is not a{'n integer' if cast is int else ' number'}",
                                f"unset {var} or give e.g. {var}={default}") from None
            if not math.isfinite(value):
                raise DataError(f"{var}={raw!r} is not a finite number", f"give e.g. {var}={default}")
            if value < 0 or positive and value == 0:
                raise DataError(f"{var}={raw!r} is {'negative' if value < 0 else 'zero'}",
                                f"give a {'positive' if positive else 'non-negative'} number, e.g. {var}={default}")
            return value

        return cls(num("VLBENCH_DOWNLOAD_TIMEOUT", 30.0, positive=True), num("VLBENCH_DOWNLOAD_RETRIES", 4, int),
                   num("VLBENCH_DOWNLOAD_BACKOFF", 1.0), num("VLBENCH_DOWNLOAD_MAX_BYTES", DEFAULT_MAX_BYTES, int,
                                                             positive=True))


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


def mirror_rules(raw: str | None = None) -> list[tuple[str, str]]:
    """The (prefix, replacement) pairs of ``VLBENCH_MIRROR``; a bare base URL is the rule ``"" -> BASE``."""
    raw = os.environ.get("VLBENCH_MIRROR", "") if raw is None else raw
    rules = []
    for entry in raw.replace(";", " ").replace(",", " ").split():
        prefix, eq, target = entry.partition("=")
        if eq and not prefix.startswith(("http://", "https://")) or not (target if eq else prefix).startswith(
                ("http://", "https://")) or not _parses(target if eq else prefix):
            raise DataError(f"VLBENCH_MIRROR entry {entry!r} is neither PREFIX=URL nor a base URL (an http(s) URL "
                            "with a host, and a port that is a number; an IPv6 host in brackets)",
                            "e.g. VLBENCH_MIRROR=https://mirror.example.org/files (every host as BASE/HOST/PATH; "
                            "an IPv6 mirror: http://[::1]:8080/files) "
                            "or VLBENCH_MIRROR=https://raw.githubusercontent.com/=https://mirror.example.org/gh/")
        rules.append((prefix, target) if eq else ("", prefix.rstrip("/") + "/"))
    return rules


def _parses(url: str) -> bool:
    """Whether ``url`` has a host (and port) urllib can use: a malformed IPv6 literal or port is not."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number in range
        return bool(parts.hostname)
    except ValueError:
        return False


def mirrored(url: str) -> str:
    """``url`` as ``VLBENCH_MIRROR`` says to fetch it (the first rule that matches), else unchanged."""
    for prefix, target in mirror_rules():
        if prefix and url.startswith(prefix):
            return target + url[len(prefix):]
        if not prefix:
            return target + url.split("://", 1)[-1]
    return url


def _hint(url: str) -> str:
    if mirror_rules():
        return (f"VLBENCH_MIRROR sent this request to {url}: check that the mirror holds the file and answers, or "
                "unset VLBENCH_MIRROR to fetch from the original source")
    return (f"check the network or proxy (https_proxy), or point VLBENCH_MIRROR at a mirror that holds {url}; "
            "or fetch the file by hand")


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
    link is removed first, never followed. Waiting longer than a second says so once on stderr."""
    from filelock import FileLock, Timeout  # lazy: only a download or a pin needs it

    path = lock_path(dest)
    try:
        if path.is_symlink():
            path.unlink()
        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=1.0)
        except Timeout:
            print(f"waiting for another process that is fetching {what or Path(dest).name} ({path}) ...",
                  file=sys.stderr, flush=True)
            lock.acquire()
    except OSError as exc:
        raise LocalWriteError(path, exc, action="locking") from None
    try:
        yield path
    finally:
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
        _transfer(real, part, meta, settings, what or dest.name, limit)
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


def _remove(*paths: Path) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError as exc:
            raise LocalWriteError(p, exc, action="removing") from None


def _held(part: Path) -> int:
    """Bytes already held in the partial file; a link there (or anything but a regular file) is removed, never
    followed."""
    try:
        st = os.lstat(part)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise LocalWriteError(part, exc, action="reading") from None
    if not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise LocalWriteError(part, IsADirectoryError(21, "a folder is in the way of the partial file"),
                                  action="writing")
        _remove(part)
        return 0
    return st.st_size


def _backoff(settings: Settings, attempt: int) -> float:
    """The wait before try ``attempt`` (1-based after the first): doubling, capped at :data:`MAX_BACKOFF`."""
    return min(settings.backoff * 2.0 ** min(attempt - 1, 32), MAX_BACKOFF)


def _transfer(url: str, part: Path, meta: Path, settings: Settings, label: str, limit: int) -> None:
    """Bring ``part`` to the whole content of ``url``: each try resumes where the last one stopped."""
    last = "no attempt made"
    for attempt in range(settings.retries + 1):
        if attempt:
            time.sleep(_backoff(settings, attempt))
        try:
            if _attempt(url, part, meta, settings, label, limit):
                return
            last = "the server closed the connection before the whole file came"
        except urllib.error.HTTPError as exc:
            if exc.code in (408, 429) or exc.code >= 500:
                last = f"the server answered HTTP {exc.code} {exc.reason}"
                continue
            raise DownloadError(url, f"the server answered HTTP {exc.code} {exc.reason}", _hint(url)) from None
        except TimeoutError:
            last = f"no data for {settings.timeout:g} s (the server stalled; timed out)"
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, socket.gaierror):  # no such host (or no DNS at all): retrying will not help
                raise DownloadError(url, f"the host name cannot be resolved ({exc.reason})", _hint(url)) from None
            if isinstance(exc.reason, TimeoutError):
                last = f"no answer in {settings.timeout:g} s (timed out)"
            else:
                last = str(exc.reason)
        except ValueError as exc:  # a URL urllib cannot parse (a malformed host or port)
            raise DownloadError(url, f"the address is malformed ({exc})", _hint(url)) from None
        except (OSError, http.client.HTTPException) as exc:  # reset, refused, cut short (local errors: LocalWriteError)
            last = f"the connection failed ({type(exc).__name__}: {exc})"
    raise DownloadError(url, f"{last} (after {settings.retries + 1} tries)",
                        _hint(url) + "; a longer VLBENCH_DOWNLOAD_TIMEOUT or more VLBENCH_DOWNLOAD_RETRIES may help")


def _range_start(content_range: str | None) -> tuple[int | None, int | None]:
    """(first byte, total) of a ``Content-Range: bytes FIRST-LAST/TOTAL`` header; None where absent or unreadable."""
    if not content_range or not content_range.strip().startswith("bytes "):
        return None, None
    span, _, total = content_range.strip()[6:].partition("/")
    first = span.partition("-")[0].strip()
    return (int(first) if first.isdigit() else None), (int(total) if total.strip().isdigit() else None)


def _attempt(url: str, part: Path, meta: Path, settings: Settings, label: str, limit: int) -> bool:
    """One request: resume ``part`` when the server's validator still matches. True when complete."""
    have = _held(part)
    if have > limit:  # more than the file can hold: not a prefix of it
        _remove(part, meta)
        have = 0
    saved = _read_meta(meta) if have else {}
    request = urllib.request.Request(url, headers={"User-Agent": "vlbench", "Accept-Encoding": "identity"})
    if have and saved.get("url") == url:
        request.add_header("Range", f"bytes={have}-")
        if saved.get("validator"):
            request.add_header("If-Range", saved["validator"])
    else:
        have = 0
    try:
        # an opener of its own: proxies as the environment says now, whatever opener another library installed
        response = urllib.request.build_opener().open(request, timeout=settings.timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is not a prefix of what the server has: start over
            _remove(part, meta)
            return False
        raise
    with response:
        resumed = response.status == 206 and have > 0
        length = response.headers.get("Content-Length")
        total = None
        if resumed:
            first, total = _range_start(response.headers.get("Content-Range"))
            if first != have:  # the server resumes somewhere else than where the bytes held end: start over
                _remove(part, meta)
                response.close()
                return _attempt(url, part, meta, settings, label, limit)
        else:
            have = 0
        if total is None and length and length.isdigit():
            total = have + int(length)
        if total is not None and total > limit:
            _remove(part, meta)
            raise _too_large(url, total, limit)
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        _write_meta(meta, {"url": url, "validator": validator, "total": total})
        _stream(url, response, part, meta, append=resumed, total=total, have=have, label=label, limit=limit)
    size = _held(part)
    if total is not None and size > total:  # more than the server announced (another writer without a lock)
        _remove(part, meta)
        return False
    return total is None or size == total


def _too_large(url: str, n: int, limit: int) -> DownloadError:
    return DownloadError(url, f"the server sends {'more than ' if n > limit else ''}{n:,} bytes, over the "
                              f"{limit:,} this file may have (its pinned size, or the cap for files without one); the "
                              "partial file was deleted and nothing was installed",
                         "the source or the mirror (VLBENCH_MIRROR) serves something else than the file: check "
                         "it; for a file that really is this large, raise VLBENCH_DOWNLOAD_MAX_BYTES")


def _stream(url: str, response, part: Path, meta: Path, *, append: bool, total: int | None, have: int, label: str,
            limit: int) -> None:
    bar = None
    if total is not None and total - have >= PROGRESS_MIN_BYTES:
        from tqdm.auto import tqdm  # lazy: a bar only for long transfers

        bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                   disable=None, leave=False)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if append else os.O_TRUNC)
    try:
        try:
            fd = os.open(part, flags, 0o666)  # never through a link: O_NOFOLLOW (a link here was removed)
        except OSError as exc:
            raise LocalWriteError(part, exc, action="opening") from None
        written = have
        with os.fdopen(fd, "ab" if append else "wb") as fh:
            for block in iter(lambda: response.read(CHUNK), b""):
                written += len(block)
                if written > limit:  # an endless (or wrong) body: stop before the disk fills
                    fh.close()
                    _remove(part, meta)
                    raise _too_large(url, written, limit)
                try:
                    fh.write(block)
                    fh.flush()
                except OSError as exc:  # the disk, not the network (ENOSPC, EFBIG, EDQUOT)
                    raise LocalWriteError(part, exc) from None
                if bar is not None:
                    bar.update(len(block))
    finally:
        if bar is not None:
            bar.close()


class LocalWriteError(DataError):
    """The local disk or folder (not the network) failed while a download was written: nothing is installed."""

    def __init__(self, path: Path, exc: OSError, action: str = "writing"):
        self.path, self.errno = path, getattr(exc, "errno", None)
        name = path.name.removeprefix(".").removesuffix(".part.json").removesuffix(".part").removesuffix(".lock")
        full = self.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        what = "the disk is full: " if self.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        kept = (f" (the partial file {path.name} is kept and the next try resumes it)"
                if path.name.endswith(".part") and full else "")
        if full:
            hint = f"free space in {path.parent} (or point --data-dir / VLBENCH_CACHE_DIR elsewhere) and try again"
        elif self.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            hint = (f"make {path.parent} writable for this user (or point --data-dir / VLBENCH_CACHE_DIR at a "
                    "folder that is) and try again")
        else:
            hint = f"check {path} and its folder (a local problem, not the network) and try again"
        super().__init__(f"{action} the download {name} in {path.parent} failed locally: {what}"
                         f"{getattr(exc, 'strerror', None) or exc}; nothing was installed{kept}", hint)


def _read_meta(meta: Path) -> dict:
    try:
        fd = os.open(meta, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # missing, or a link (never followed): no resume information
        return {}
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return {}
            data = json.loads(fh.read(1 << 16))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_meta(meta: Path, data: dict) -> None:
    try:
        if meta.is_dir() and not meta.is_symlink():
            raise IsADirectoryError(21, "a folder is in the way", str(meta))
        atomic_write_bytes(meta, json.dumps(data).encode())  # a link there is replaced, never written through
    except OSError as exc:
        raise LocalWriteError(meta, exc) from None
