"""Small I/O helpers: atomic writes, strict JSON, hashing."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat as _stat
import tempfile
from pathlib import Path
from typing import Any

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder + rename.

    A reader never sees a half-written file: either the old content or the new one. With
    ``replace=False`` an existing ``path`` is never replaced (the new file is hard-linked into place,
    which fails atomically if the name exists): FileExistsError.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cache_write_bytes(path: str | os.PathLike, data: bytes, *, attempts: int = 3) -> bool:
    """:func:`atomic_write_bytes` for a file under the cache root, which ``vlbench cache clear`` may empty while a
    run writes: a folder removed between its creation and the write (FileNotFoundError) is made again and the
    write retried; if it keeps vanishing the file is skipped (False), since a cache file can always be made
    again. Other errors (a full disk, no permission) are raised as before."""
    for _ in range(attempts):
        try:
            atomic_write_bytes(path, data)
            return True
        except FileNotFoundError:
            continue
    return False


def atomic_write_text(path: str | os.PathLike, text: str, *, replace: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), replace=replace)


class FolderLock:
    """An exclusive claim on a folder for this process's lifetime (``fcntl.flock`` on a lock file).

    The kernel drops the claim when the process ends, however it ends (SIGKILL included), so a crashed
    run never blocks the rerun that resumes it; a second live process fails at once with BlockingIOError.
    """

    NAME = ".vlbench.lock"

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder) / self.NAME
        self.fd: int | None = None

    def acquire(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
        try:
            import fcntl  # lazy: vlbench --help imports this module; keep it light
        except ImportError:  # pragma: no cover - Windows: no flock; runs still never replace results.json
            self.fd = fd
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip()
            os.close(fd)
            raise BlockingIOError(holder or "another process") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        """Drop the claim; a folder that holds nothing but the lock file (a run refused or failed before
        writing anything) is removed, so no empty run folder is left behind."""
        if self.fd is not None:
            try:
                if [p.name for p in self.path.parent.iterdir()] == [self.NAME]:
                    self.path.unlink()
                    self.path.parent.rmdir()
            except OSError:
                pass
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _clean(obj: Any) -> Any:
    """Replace non-finite floats by None so the JSON is strict (no bare NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return _clean(obj.item())
    return obj


def dumps_strict(obj: Any, **kw) -> str:
    return json.dumps(_clean(obj), allow_nan=False, ensure_ascii=False, **kw)


def write_json(path: str | os.PathLike, obj: Any, *, replace: bool = True) -> None:
    atomic_write_text(path, dumps_strict(obj, indent=2, sort_keys=False) + "\n", replace=replace)


def read_regular_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """Bytes of ``path`` if it is a regular file of at most ``max_bytes``; otherwise OSError naming why.

    The type and size are checked before reading (a FIFO would block, /dev/zero never ends), and again
    on the opened descriptor (O_NONBLOCK: a file swapped for a FIFO in between does not block either)."""
    st = os.stat(path)  # follows symlinks: a link to /dev/zero is judged by what it points to
    _check_regular(path, st, max_bytes)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        _check_regular(path, os.fstat(fd), max_bytes)
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"{path} grew past {max_bytes} bytes while being read")
    return data


def _check_regular(path, st: os.stat_result, max_bytes: int) -> None:
    if _stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{path} is a folder, not a file")
    if not _stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file (a FIFO, device or socket); refusing to read it")
    if st.st_size > max_bytes:
        raise OSError(f"{path} is {st.st_size} bytes, over the {max_bytes}-byte limit for this kind of file")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_json(obj: Any) -> str:
    """Hash of the strict-JSON form (non-finite floats as null), so it matches what is written."""
    return sha256_bytes(json.dumps(_clean(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
