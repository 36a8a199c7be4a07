"""The repository stays small: no tracked file over 1 MB unless it is listed here with the reason (a 21 MB folder
named ``--help/`` was once committed by a script that took ``--help`` as its output folder)."""

from __future__ import annotations

import subprocess

import pytest
from support.data import ROOT

#: the most bytes a tracked file may have unless it is listed in LARGE_FILES
MAX_BYTES = 1_000_000

#: tracked files allowed over MAX_BYTES: path -> the reason it must be in the repository
LARGE_FILES: dict[str, str] = {}


def _tracked() -> list[str]:
    git = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60)
    if git.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {git.stderr.decode(errors='replace')[-300:]} (the check needs a "
                    "git checkout)", pytrace=False)
    return [p for p in git.stdout.decode().split("\0") if p]


def oversized(paths: list[str], limit: int = MAX_BYTES) -> dict[str, int]:
    """path -> size of each existing file of ``paths`` (relative to the repository) over ``limit`` bytes."""
    out = {}
    for rel in paths:
        f = ROOT / rel
        if f.is_file() and not f.is_symlink() and f.stat().st_size > limit:
            out[rel] = f.stat().st_size
    return out


def test_no_tracked_file_is_over_1_mb_unless_listed_with_a_reason():
    big = {p: n for p, n in oversized(_tracked()).items() if p not in LARGE_FILES}
    assert not big, ("tracked files over 1 MB: " + ", ".join(f"{p} ({n / 1e6:.1f} MB)" for p, n in big.items())
                     + ": remove them (git rm), or list each in LARGE_FILES of this file with the reason")
    assert all(reason.strip() for reason in LARGE_FILES.values())


def test_the_size_check_sees_a_file_over_its_limit():
    """The measuring half of the check, on real files of the tree against a limit they are over and one they are not."""
    some = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "fixtures").iterdir() if p.is_file())[:2]
    sizes = {rel: (ROOT / rel).stat().st_size for rel in some}
    assert len(some) == 2 and oversized(some, limit=10) == sizes
    assert oversized(some, limit=max(sizes.values())) == {}


def test_no_folder_named_like_an_option_is_tracked():
    """What a script makes of an option it took for a folder name (``--help/``, ``-o/``) is never committed."""
    dashed = sorted({p.split("/")[0] for p in _tracked() if p.startswith("-")})
    assert not dashed, f"tracked paths that start with '-': {dashed} (a script took an option as its output folder)"
