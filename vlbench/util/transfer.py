"""One HTTP transfer of :mod:`vlbench.util.fetch` into a partial file, and where its requests go.

A request goes where ``VLBENCH_MIRROR`` says (:func:`mirrored`). The transfer streams into ``.NAME.part``, resumes it
with a Range request when the server's validator still matches (and only when the ``Content-Range`` starts where
the bytes held end), retries dropped connections, 5xx answers and stalls with a capped backoff, stops a body that
runs past the file's bound, and reports a failing local disk or folder as a :class:`LocalWriteError`, never as the
network. The partial file is never opened through a link. The caller (``fetch.download``) holds the destination's
lock, so one process at a time runs a transfer into a given partial file.
"""

from __future__ import annotations

import errno
import http.client
import json
import math
import os
import socket
import stat
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import DataError
from .io import atomic_write_bytes

CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 8 << 20  # a bar only for transfers at least this long
MAX_BACKOFF = 300.0  # the longest wait between two tries, however many tries are asked for
DEFAULT_MAX_BYTES = 2 << 30  # the most a file without a pinned size may have (VLBENCH_DOWNLOAD_MAX_BYTES)


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


class DownloadError(DataError):
    """One file could not be fetched: ``url`` (the address asked, after the mirror) and the plain ``reason``."""

    def __init__(self, url: str, reason: str, hint: str):
        self.url, self.reason = url, reason
        super().__init__(f"could not download {url}: {reason}", hint)


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


def _transfer(url: str, part: Path, meta: Path, settings: Settings, label: str, limit: int, hint: str) -> None:
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
            raise DownloadError(url, f"the server answered HTTP {exc.code} {exc.reason}", hint) from None
        except TimeoutError:
            last = f"no data for {settings.timeout:g} s (the server stalled; timed out)"
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, socket.gaierror):  # no such host (or no DNS at all): retrying will not help
                raise DownloadError(url, f"the host name cannot be resolved ({exc.reason})", hint) from None
            if isinstance(exc.reason, TimeoutError):
                last = f"no answer in {settings.timeout:g} s (timed out)"
            else:
                last = str(exc.reason)
        except ValueError as exc:  # a URL urllib cannot parse (a malformed host or port)
            raise DownloadError(url, f"the address is malformed ({exc})", hint) from None
        except (OSError, http.client.HTTPException) as exc:  # reset, refused, cut short (local errors: LocalWriteError)
            last = f"the connection failed ({type(exc).__name__}: {exc})"
    raise DownloadError(url, f"{last} (after {settings.retries + 1} tries)",
                        hint + "; a longer VLBENCH_DOWNLOAD_TIMEOUT or more VLBENCH_DOWNLOAD_RETRIES may help")


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
