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
* ``VLBENCH_DOWNLOAD_TIMEOUT`` (seconds without a byte before a connection counts as stalled, default 30),
  ``VLBENCH_DOWNLOAD_RETRIES`` (default 4), ``VLBENCH_DOWNLOAD_BACKOFF`` (first wait in seconds, default 1,
  doubled after each try).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError
from .paths import offline

CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 8 << 20  # a bar only for transfers at least this long


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

    @classmethod
    def from_env(cls) -> Settings:
        def num(var: str, default: float, cast=float):
            raw = os.environ.get(var, "").strip()
            if not raw:
                return default
            try:
                value = cast(raw)
            except ValueError:
                raise DataError(f"{var}={raw!r} is not a number", f"unset {var} or give e.g. {var}={default}") \
                    from None
            if value < 0:
                raise DataError(f"{var}={raw!r} is negative", f"give e.g. {var}={default}")
            return value

        return cls(num("VLBENCH_DOWNLOAD_TIMEOUT", 30.0), int(num("VLBENCH_DOWNLOAD_RETRIES", 4, int)),
                   num("VLBENCH_DOWNLOAD_BACKOFF", 1.0))


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


def mirror_rules(raw: str | None = None) -> list[tuple[str, str]]:
    """The (prefix, replacement) pairs of ``VLBENCH_MIRROR``; a bare base URL is the rule ``"" -> BASE``."""
    raw = os.environ.get("VLBENCH_MIRROR", "") if raw is None else raw
    rules = []
    for entry in raw.replace(";", " ").replace(",", " ").split():
        prefix, eq, target = entry.partition("=")
        if eq and not prefix.startswith(("http://", "https://")) or not (target if eq else prefix).startswith(
                ("http://", "https://")):
            raise DataError(f"VLBENCH_MIRROR entry {entry!r} is neither PREFIX=URL nor a base URL",
                            "e.g. VLBENCH_MIRROR=https://mirror.example.org/files (every host as BASE/HOST/PATH) "
                            "or VLBENCH_MIRROR=https://raw.githubusercontent.com/=https://mirror.example.org/gh/")
        rules.append((prefix, target) if eq else ("", prefix.rstrip("/") + "/"))
    return rules


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


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None, what: str = "",
             settings: Settings | None = None) -> Path:
    """Fetch ``url`` (through the mirror) to ``dest``, resuming a partial file; verify ``sha256`` when pinned
    (a mismatch installs nothing and drops the partial file); install atomically. Returns ``dest``."""
    real = mirrored(url)
    if offline():
        raise DownloadError(real, "offline mode is on", "unset VLBENCH_OFFLINE/HF_HUB_OFFLINE")
    settings = settings or Settings.from_env()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part, meta = _part_paths(dest)
    _transfer(real, part, meta, settings, what or dest.name)
    if sha256:
        digest = _sha256(part)
        if digest != sha256:
            part.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
            raise DownloadError(real, f"its content has sha256 {digest[:16]}..., pinned {sha256[:16]}... (changed "
                                      "upstream or altered in transit); nothing was installed",
                                "try again later; if it persists the source changed: report it to vlbench")
    with open(part, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(part, dest)
    meta.unlink(missing_ok=True)
    return dest


def fetch_bytes(url: str, *, what: str = "", settings: Settings | None = None) -> bytes:
    """The bytes of ``url`` (small files: captions, task files), fetched with :func:`download`'s retries and
    resume into a scratch folder."""
    import tempfile  # lazy: only a download needs it

    with tempfile.TemporaryDirectory(prefix="vlbench-download-") as tmp:
        path = download(url, Path(tmp) / (url.rstrip("/").rsplit("/", 1)[-1] or "file"), what=what,
                        settings=settings)
        return path.read_bytes()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _transfer(url: str, part: Path, meta: Path, settings: Settings, label: str) -> None:
    """Bring ``part`` to the whole content of ``url``: each try resumes where the last one stopped."""
    last = "no attempt made"
    for attempt in range(settings.retries + 1):
        if attempt:
            time.sleep(settings.backoff * 2 ** (attempt - 1))
        try:
            if _attempt(url, part, meta, settings, label):
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
        except (OSError, http.client.HTTPException) as exc:  # reset, refused, cut short
            last = f"the connection failed ({type(exc).__name__}: {exc})"
    raise DownloadError(url, f"{last} (after {settings.retries + 1} tries)",
                        _hint(url) + "; a longer VLBENCH_DOWNLOAD_TIMEOUT or more VLBENCH_DOWNLOAD_RETRIES may help")


def _attempt(url: str, part: Path, meta: Path, settings: Settings, label: str) -> bool:
    """One request: resume ``part`` when the server's validator still matches. True when complete."""
    have = part.stat().st_size if part.is_file() else 0
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
            part.unlink(missing_ok=True)
            return False
        raise
    with response:
        resumed = response.status == 206 and have > 0
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        _write_meta(meta, {"url": url, "validator": validator, "total": total})
        _stream(response, part, append=resumed, total=total, have=have, label=label)
    size = part.stat().st_size
    return total is None or size == total


def _stream(response, part: Path, *, append: bool, total: int | None, have: int, label: str) -> None:
    bar = None
    if total is not None and total - have >= PROGRESS_MIN_BYTES:
        from tqdm.auto import tqdm  # lazy: a bar only for long transfers

        bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                   disable=None, leave=False)
    try:
        with open(part, "ab" if append else "wb") as fh:
            for block in iter(lambda: response.read(CHUNK), b""):
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
    """The disk (not the network) failed while a download was written: nothing is installed."""

    def __init__(self, part: Path, exc: OSError):
        super().__init__(f"writing the download {part.name.removeprefix('.').removesuffix('.part')} into "
                         f"{part.parent} failed: {exc.strerror or exc}; nothing was installed (the partial file "
                         f"{part.name} is kept and the next try resumes it)",
                         f"free space in {part.parent} (or point --data-dir / VLBENCH_CACHE_DIR elsewhere) and try "
                         "again")


def _read_meta(meta: Path) -> dict:
    try:
        data = json.loads(meta.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_meta(meta: Path, data: dict) -> None:
    try:
        meta.write_text(json.dumps(data))
    except OSError as exc:
        raise LocalWriteError(meta, exc) from None
