"""The leaderboard page in a real headless browser: it renders offline, its script runs under the
page's Content-Security-Policy, cells show the runs' values, and sorting (via the URL hash, the same
function the header click calls) reorders the rows.

Needs Chromium (Debian: apt-get install chromium); skipped with the reason when none is found.
Set VLBENCH_CHROMIUM to use another binary."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from support.browser import BROWSER, NEEDS_BROWSER, Tables as _Tables
from support.data import excerpt_rows, write_images


pytestmark = NEEDS_BROWSER


def _render(page: Path, fragment: str, tmp_path: Path) -> _Tables:
    profile = tmp_path / f"profile-{abs(hash(fragment))}"
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
           "--dump-dom", page.resolve().as_uri() + fragment]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "<table" in proc.stdout, proc.stderr[-2000:]
    p = _Tables()
    p.feed(proc.stdout)
    return p


def _column(tables: _Tables, table: str, key: str) -> list:
    head, *rows = tables.tables[table]
    idx = [a.get("data-key") for a, _ in head].index(key)
    return [r[idx] for r in rows]


@pytest.fixture(scope="module")
def page(tmp_path_factory, counting_plugin):
    from vlbench.pipeline.runner import run
    from vlbench.leaderboards import build_leaderboard

    root = tmp_path_factory.mktemp("page")
    rows = excerpt_rows(12)
    names = write_images(root / "data" / "images", len(rows))
    with open(root / "data" / "mini.jsonl", "w") as fh:
        for name, row in zip(names, rows):
            fh.write(json.dumps({"image": f"images/{name}", "captions": row["captions"]}) + "\n")
    dirs = [run(model=m, dataset=f"custom:{root / 'data' / 'mini.jsonl'}", perturb="distraction-true,char-swap",
                out=str(root / "runs" / m.replace(":", "-").replace("=", "")), quiet=True, num_workers=0,
                n_boot=50, no_cache=True).out_dir for m in ("counting:dim=16", "counting:dim=24")]
    build_leaderboard(dirs, root / "lb")
    return root / "lb" / "index.html", dirs


@pytest.fixture(scope="module")
def plain(page, tmp_path_factory):
    """The page rendered without a sort request."""
    return _render(page[0], "", tmp_path_factory.mktemp("plain"))


def test_page_renders_with_values_and_script(page, plain):
    index, dirs = page
    t = plain
    assert t.root.get("data-js") == "ready"  # the inline script ran under the page's CSP
    assert list(t.tables)[0] == "ranking"
    assert set(t.tables) == {"ranking", "clean_retrieval", "robustness_summary", "rsum_per_perturbation",
                             "rsum_per_perturbation_total", "model_input_similarity", "rsum_changes", "flips",
                             "provenance"}  # flips: the runs write flips.csv
    # a cell shows the run's value
    # run ids are shown cut to 14 characters (the full id in the cell's title and in the provenance table)
    id_cells = _column(t, "clean_retrieval", "run_id")
    run_ids = [a.get("title", text) for a, text in id_cells]
    assert all(text == a["title"][:14] + "\u2026" for a, text in id_cells)
    rsums = _column(t, "clean_retrieval", "t2i_rsum")
    for d in dirs:
        res = json.loads((d / "results.json").read_text())
        want = next(r["value"] for r in res["results"] if (r["condition"], r["direction"], r["metric"]) ==
                    ("clean", "t2i", "rsum"))
        attrs, text = rsums[run_ids.index(res["run_id"])]
        assert float(attrs["data-v"]) == pytest.approx(want, abs=1e-6)
        assert text == f"{want:.2f}"
    # nothing on the page points to the network
    html = index.read_text()
    assert 'src="http' not in html and 'href="http' not in html and "Content-Security-Policy" in html


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_sorting_from_the_url_hash(page, plain, tmp_path, direction):
    index, _ = page
    before = [float(a["data-v"]) for a, _ in _column(plain, "rsum_changes", "delta")]
    t = _render(index, "#sort=" + quote(f"rsum_changes:delta:{direction}", safe=""), tmp_path)
    assert t.attrs["rsum_changes"].get("data-sorted-by") == f"delta:{direction}"
    after = [float(a["data-v"]) for a, _ in _column(t, "rsum_changes", "delta")]
    assert sorted(after, reverse=direction == "desc") == after and sorted(before) == sorted(after)
    head = t.tables["rsum_changes"][0]
    assert [a.get("aria-sort") for a, _ in head if a.get("data-key") == "delta"] == \
        ["ascending" if direction == "asc" else "descending"]
    # rows move as a whole: each row's delta still belongs with its own condition and direction
    conds = [c[1] for c in _column(t, "rsum_changes", "condition")]
    dirs_ = [c[1] for c in _column(t, "rsum_changes", "direction")]
    pairs0 = sorted(zip([c[1] for c in _column(plain, "rsum_changes", "condition")],
                        [c[1] for c in _column(plain, "rsum_changes", "direction")], before))
    assert sorted(zip(conds, dirs_, after)) == pairs0


def test_text_column_with_colons_sorts(page, tmp_path):
    """A column key holding ':' (model labels such as counting:dim=16, RSUM per perturbation's columns on the page)
    can be named in the hash."""
    index, _ = page
    t = _render(index, "#sort=" + quote("rsum_per_perturbation:counting:dim=16:asc", safe=""), tmp_path)
    assert t.attrs["rsum_per_perturbation"].get("data-sorted-by") == "counting:dim=16:asc"
    vals = [float(a["data-v"]) for a, _ in _column(t, "rsum_per_perturbation", "counting:dim=16")]
    assert vals == sorted(vals) and len(vals) == 3  # clean + 2 perturbations on one dataset
