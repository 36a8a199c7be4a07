"""results.json files written before the results/runner redesign (tests/fixtures/legacy_v1, made by the
make_fixtures.py beside them) still load and rebuild the same leaderboard, byte for byte. The plots' PNG
bytes depend on the matplotlib/freetype build, so for them the file names are compared."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import TESTS

LEGACY = TESTS / "fixtures" / "legacy_v1"


def _files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}


def test_legacy_results_rebuild_the_same_leaderboard_bytes(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    runs = tmp_path / "runs"
    shutil.copytree(LEGACY / "runs", runs)
    out = tmp_path / "lb"
    build_leaderboard(sorted(p for p in runs.iterdir() if p.is_dir()), out)
    manifest = out / "build_manifest.json"
    manifest.write_text(manifest.read_text().replace(str(tmp_path) + "/", ""))
    got, want = _files(out), _files(LEGACY / "leaderboard")
    assert sorted(got) == sorted(want)
    text = [name for name in want if not name.endswith(".png")]
    assert len(text) >= 15  # tables (csv + md), values, provenance, manifest, html
    for name in text:
        assert got[name].read_bytes() == want[name].read_bytes(), name
