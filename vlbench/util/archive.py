"""Bounded, safe extraction of a .zip or .tar(.gz/.bz2/.xz) archive the user hands over (or a download brings).

Refused with a :class:`DataError` naming the archive, never a traceback: a path that is not a regular file (a
FIFO would block the reader forever), a member path that escapes the target (absolute, ``..``, a drive),
a symbolic or hard link, a device or FIFO entry, more than ``max_members`` entries, more than ``max_bytes``
extracted (the declared sizes are checked first, and the bytes actually written are counted too, since a
header can lie), and a damaged member (bad CRC, truncated stream), named.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ..errors import DataError

MAX_EXTRACTED_BYTES = 1 << 30  # 1 GiB
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20


def _refuse(archive: Path, what: str, hint: str = "make the archive again from the folder itself") -> DataError:
    return DataError(f"archive {str(archive)!r} {what}", hint)


def _safe_name(name: str, archive: Path) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise _refuse(archive, f"holds an unsafe path {name!r}")
    return path


def check_regular(archive: Path) -> None:
    """Refuse anything but a regular file (a FIFO, a device, a socket), before it is opened."""
    st = os.stat(archive)
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{str(archive)!r} is not a regular file (a FIFO, device or socket); refusing to read it",
                        "give the archive file itself, or the unpacked folder")


def extract(archive: str | os.PathLike, dest: str | os.PathLike, *, max_bytes: int = MAX_EXTRACTED_BYTES,
            max_members: int = MAX_MEMBERS) -> Path:
    """Extract ``archive`` (.zip, .tar, .tar.gz, .tgz, .tar.bz2, .tar.xz) into ``dest``; returns ``dest``."""
    archive, dest = Path(archive), Path(dest)
    check_regular(archive)
    dest.mkdir(parents=True, exist_ok=True)
    name = archive.name.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                _extract_zip(zf, archive, dest, max_bytes, max_members)
        elif name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
            with tarfile.open(archive) as tf:
                _extract_tar(tf, archive, dest, max_bytes, max_members)
        else:
            raise _refuse(archive, "is neither a .zip nor a .tar(.gz) archive", "give a .zip or .tar.gz archive")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        raise _refuse(archive, f"is not a readable archive ({exc})",
                      "copy the archive again (it may be truncated or damaged)") from None
    return dest


def _too_big(archive: Path, max_bytes: int) -> DataError:
    return _refuse(archive, f"would extract to more than {max_bytes:,} bytes (the limit for an archive of this "
                            "kind); refusing it", "check the archive: it is not the expected data")


def _extract_zip(zf: zipfile.ZipFile, archive: Path, dest: Path, max_bytes: int, max_members: int) -> None:
    infos = zf.infolist()
    if len(infos) > max_members:
        raise _refuse(archive, f"has {len(infos):,} entries, over the limit of {max_members:,}")
    if sum(i.file_size for i in infos) > max_bytes:
        raise _too_big(archive, max_bytes)
    budget = [max_bytes]
    for info in infos:
        rel = _safe_name(info.filename, archive)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise _refuse(archive, f"holds a symbolic link {info.filename!r}; links are not extracted",
                          "make the archive without links (zip without --symlinks)")
        if info.is_dir():
            (dest / rel).mkdir(parents=True, exist_ok=True)
            continue
        try:
            with zf.open(info) as src:
                _copy(src, dest / rel, budget, archive, max_bytes)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise _refuse(archive, f"has a damaged member {info.filename!r} ({exc})",
                          "copy the archive again (it may be truncated or damaged)") from None


def _extract_tar(tf: tarfile.TarFile, archive: Path, dest: Path, max_bytes: int, max_members: int) -> None:
    budget, count = [max_bytes], 0
    for member in tf:  # streamed: the member list of a huge archive is never held at once
        count += 1
        if count > max_members:
            raise _refuse(archive, f"has more than {max_members:,} entries, the limit")
        rel = _safe_name(member.name, archive)
        if member.issym() or member.islnk():
            raise _refuse(archive, f"holds a {'symbolic' if member.issym() else 'hard'} link {member.name!r}; "
                                   "links are not extracted", "make the archive without links (tar without -h)")
        if member.isdir():
            (dest / rel).mkdir(parents=True, exist_ok=True)
            continue
        if not member.isfile():
            raise _refuse(archive, f"holds {member.name!r}, which is not a regular file (a device or FIFO entry)")
        if member.size > budget[0]:
            raise _too_big(archive, max_bytes)
        src = tf.extractfile(member)
        if src is None:
            continue
        try:
            with src:
                _copy(src, dest / rel, budget, archive, max_bytes)
        except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, (tarfile.ReadError, EOFError)) and exc.errno:
                raise
            raise _refuse(archive, f"has a damaged member {member.name!r} ({exc})",
                          "copy the archive again (it may be truncated or damaged)") from None


def _copy(src, target: Path, budget: list, archive: Path, max_bytes: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        for block in iter(lambda: src.read(_CHUNK), b""):
            budget[0] -= len(block)
            if budget[0] < 0:
                raise _too_big(archive, max_bytes)
            out.write(block)
