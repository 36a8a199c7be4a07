"""Writing a leaderboard (or a published) folder: every file atomically, the manifest last, files of an earlier
write of the same kind that are not written again removed, and never through a symbolic link."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import VlbenchError
from ..util.io import atomic_write_bytes


def safe_rel(rel: str) -> bool:
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts


def _refuse_links(out: Path, rel: str) -> None:
    """No folder between ``out`` and ``out/rel`` may be a symbolic link: writing or deleting through one
    would touch files outside ``out``. (A link in place of a *file* is harmless: the atomic rename
    replaces the link itself, and unlinking removes only the link.)"""
    here = out
    for part in Path(rel).parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise VlbenchError(f"{here} is a symbolic link (to {os.readlink(here)}); writing the leaderboard "
                               f"through it would change files outside {out}",
                               "remove the link, or choose a new or empty --out folder")


def write_tree(out: Path, files: dict[str, bytes], manifest_name: str, kind: str) -> list[str]:
    """Write ``files`` under ``out`` atomically (manifest last); remove files of an earlier write of the
    same kind that are not written again. Refuses a non-empty folder that holds no such earlier write."""
    out = Path(out)
    old: dict = {}
    if out.exists():
        if not out.is_dir():
            raise VlbenchError(f"--out {out} exists and is not a folder", "choose a new or empty folder")
        prev = out / manifest_name
        if prev.is_file():
            try:
                old = json.loads(prev.read_text("utf-8"))
            except (OSError, ValueError):
                old = {}
            if not isinstance(old, dict) or old.get("kind") != kind:
                raise VlbenchError(f"{prev} is not a {kind} manifest", "choose a new or empty --out folder")
        elif any(out.iterdir()):
            raise VlbenchError(f"--out {out} is not empty and holds no earlier leaderboard ({manifest_name})",
                               "choose a new or empty folder; leaderboard folders are rewritten as a whole")
    names = sorted(k for k in files if k != manifest_name)
    for rel in names + sorted(old.get("files") or {}):
        _refuse_links(out, rel)
    mode = _file_mode()
    for rel in names + [manifest_name]:
        atomic_write_bytes(out / rel, files[rel])
        os.chmod(out / rel, mode)  # the temporary file behind the atomic write is private (0600)
    for rel in sorted(set(old.get("files") or {}) - set(files)):
        if safe_rel(rel) and (out / rel).is_file():
            (out / rel).unlink()
            parent = (out / rel).parent
            if parent != out and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
    return names + [manifest_name]


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
