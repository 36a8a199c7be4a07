"""results.json files written before the results/runner redesign (tests/fixtures/legacy_v1, made by the
make_fixtures.py beside them) still load and rebuild the same leaderboard: every table (CSV and
Markdown) byte for byte. The presentation files are allowed to change with the page's design (the
ranking and the family-grouped plots came after the fixtures; issue #22 redrew the plots at paper size,
one per perturbation family, as PNG and SVG): index.html by name, the plots not at all (nor the list of
plots at the end of leaderboard.md), and the build manifest byte for byte except for those files. Tables
added by later features (image corruptions, choice tasks) are written for old runs too, without rows: they
may be the only extra files, and every file the old build wrote must be unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.data import TESTS

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
    plot = lambda f: f.startswith("plots/")  # noqa: E731
    got = {f: p for f, p in _files(out).items() if not plot(f)}
    want = {f: p for f, p in _files(LEGACY / "leaderboard").items() if not plot(f)}
    added = sorted(set(got) - set(want))
    assert set(want) <= set(got)
    new_tables = {name.rsplit(".", 1)[0] for name in added}
    assert new_tables <= {"image_corruptions", "choice_tasks"}, added
    for t in new_tables:  # header only: old runs have no such values
        assert got[f"{t}.csv"].read_text().count("\n") == 1 and "(no rows)" in got[f"{t}.md"].read_text()
    data = [name for name in want if name.endswith((".csv", ".md"))]
    assert len(data) >= 14  # tables (csv + md), values, provenance, leaderboard.md
    no_plots = lambda b: b.split(b"\n## Plots\n")[0]  # noqa: E731
    for name in data:
        assert no_plots(got[name].read_bytes()) == no_plots(want[name].read_bytes()), name
    import json

    presentation = lambda f: f == "index.html" or plot(f) or f == "leaderboard.md"  # noqa: E731
    g, w = json.loads(manifest.read_text()), json.loads(want["build_manifest.json"].read_text())
    for doc in (g, w):
        doc.pop("plots")
        doc["files"] = {f: h for f, h in doc["files"].items() if not presentation(f) and f not in added}
        doc["tables"] = {t: v for t, v in doc["tables"].items() if t not in new_tables}
    assert g == w
