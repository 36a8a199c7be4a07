"""A leaderboard to publish at the size of a paper's study: 4 models x 2 datasets x 13
caption perturbations x 15 image corruptions x 5 severities (synthetic, valid results.json files written
through RunRecord). Every table the build makes is published in its own folder; caption perturbations
(RSUM per perturbation) and image corruptions are separate tables; plots are one per perturbation family and one per
corruption family, PNG at paper size and SVG, the severity axis spanning the severities run; no absolute
local path is published unless asked; the page stays under 8,000 px tall at 1,400 px wide, with no
header broken inside a word (measured in headless Chromium; set VLBENCH_SCREENSHOT_DIR to keep the
screenshot)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.browser import BROWSER, NEEDS_BROWSER
from support.synthetic_runs import CORRUPTIONS, PERTURBATIONS, synth_run

DATASETS = {"custom:flickr30k-test.jsonl": "a" * 64, "custom:mscoco-5k-test.jsonl": "b" * 64}


def _blank(fig) -> tuple[bytes, bytes]:
    """A white PNG of the figure's pixel size (the page lays it out exactly like the drawn one) and a stub
    SVG: drawing 16 figures twice would take most of this test's time; test_plots_* draw real ones."""
    from PIL import Image

    w, h = (round(x * fig.dpi) for x in fig.get_size_inches())
    buf = io.BytesIO()
    Image.new("RGB", (w, h), "white").save(buf, "PNG")
    return buf.getvalue(), b'<svg xmlns="http://www.w3.org/2000/svg"/>'


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from vlbench.leaderboards import build_leaderboard, publish_leaderboard
    from vlbench.leaderboards.paper import plots

    root = tmp_path_factory.mktemp("paper")
    perts = [p for ps in PERTURBATIONS.values() for p in ps]
    corrs = [c for cs in CORRUPTIONS.values() for c in cs]
    for i in range(4):
        for ds, h in DATASETS.items():
            synth_run(root / "runs" / f"m{i}-{ds[7:14]}", model=i, dataset=ds, dataset_hash=h, perturb=perts,
                      corrupt=corrs, severities=(1, 2, 3, 4, 5), clean_r1=60,
                      spec=f"clip:{root}/checkpoints/clip-vit-large-patch14-variant-{i}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "_both", _blank)
        build_leaderboard([root / "runs"], root / "lb")
    publish_leaderboard(root / "site", build_dir=root / "lb")
    return root


def test_every_built_table_is_published_in_its_own_folder(site):
    manifest = json.loads((site / "lb" / "build_manifest.json").read_text())
    built = set(manifest["tables"])
    assert built == {"clean_retrieval", "robustness_summary", "rsum_per_perturbation", "rsum_per_perturbation_total",
                     "model_input_similarity", "rsum_changes", "image_corruptions",
                     "values", "provenance"}
    for name in built:
        folder = site / "site" / name
        assert (folder / f"{name}.csv").read_bytes() == (site / "lb" / f"{name}.csv").read_bytes()
        assert (folder / "README.md").is_file()
    # caption perturbations and image corruptions apart: 2 datasets x 4 models x (clean + 13) rows in RSUM per perturbation,
    # 2 x 4 x 15 x 5 in image_corruptions, 2 x 4 x 13 x 3 directions of caption changes in rsum_changes
    rows = lambda n: (site / "lb" / f"{n}.csv").read_text().splitlines()[1:]  # noqa: E731
    assert len(rows("rsum_per_perturbation")) == 4 * 14 and not any(",img:" in r for r in rows("rsum_per_perturbation"))
    assert len(rows("image_corruptions")) == 2 * 4 * 15 * 5
    assert len(rows("rsum_changes")) == 2 * 4 * 13 * 3 and not any(",img:" in r for r in rows("rsum_changes"))
    # one plot per (dataset, perturbation family) and per (dataset, corruption family), each PNG + SVG
    pngs = sorted(p.name for p in (site / "site" / "plots").glob("*.png"))
    assert len([p for p in pngs if p.startswith("rsum_change--")]) == 2 * 4
    assert len([p for p in pngs if p.startswith("corruption_severity--")]) == 2 * 4
    assert sorted(p.name for p in (site / "site" / "plots").glob("*.svg")) == [p[:-4] + ".svg" for p in pngs]


def test_no_absolute_local_path_is_published(site, tmp_path):
    from vlbench.cli import main

    local = [str(site), os.path.expanduser("~"), str(Path.cwd())]
    for path in sorted((site / "site").rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            assert not any(p.encode() in data for p in local), path
    values = (site / "site" / "values" / "values.csv").read_text()
    assert "clip:clip-vit-large-patch14-variant-2" in values and "checkpoints" not in values
    # asked for: kept (build and publish both say so; a build that kept them is not published silently)
    assert main(["leaderboard", "build", str(site / "runs" / "m0-flickr3"), "--out", str(tmp_path / "lb"),
                 "--no-plots", "--keep-local-paths"]) == 0
    assert main(["leaderboard", "publish", "--from", str(tmp_path / "lb"), "--out", str(tmp_path / "s1")]) == 2
    assert main(["leaderboard", "publish", "--from", str(tmp_path / "lb"), "--out", str(tmp_path / "s2"),
                 "--keep-local-paths"]) == 0
    assert f"clip:{site}/checkpoints/clip-vit-large-patch14-variant-0" in \
        (tmp_path / "s2" / "values" / "values.csv").read_text()


def test_provenance_on_the_page_is_a_count_and_a_link(site):
    page = (site / "site" / "index.html").read_text()
    cells = re.findall(r'<td data-v="(\d+)" title="[^"]*"><a href="provenance.csv">(\d+) conditions</a></td>', page)
    assert len(cells) == 8 and all(a == b == str(1 + 13 + 75) for a, b in cells)


def _dom(page: Path, fragment: str, tmp: Path, png: Path | None = None) -> str:
    common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--no-first-run", "--disable-extensions", "--hide-scrollbars", "--window-size=1400,1000"]
    if png is not None:
        shot = subprocess.run(common + [f"--user-data-dir={tmp / 'shot'}", f"--screenshot={png}", page.as_uri()],
                              capture_output=True, text=True, timeout=120)
        assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
    dom = subprocess.run(common + [f"--user-data-dir={tmp / 'dom'}", "--dump-dom", page.as_uri() + fragment],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return re.search(r"<html[^>]*>", dom.stdout).group(0)


@NEEDS_BROWSER
def test_page_height_width_and_headers_in_chromium(site, tmp_path):
    png = Path(os.environ.get("VLBENCH_SCREENSHOT_DIR", tmp_path)) / "leaderboard-paper-1400.png"
    root = _dom(site / "site" / "index.html", "", tmp_path, png)
    assert 'data-js="ready"' in root
    height = int(re.search(r'data-scroll-height="(\d+)"', root).group(1))
    width = int(re.search(r'data-scroll-width="(\d+)"', root).group(1))
    assert 2000 < height < 8000 and width <= 1400, root
    assert 'data-overflowing-tables="0"' in root and 'data-broken-headers="0"' in root, root
    # every collapsed table opened (#open): headers still never break inside a word, nothing scrolls the page
    opened = _dom(site / "site" / "index.html", "#open", tmp_path / "open")
    assert int(re.search(r'data-scroll-height="(\d+)"', opened).group(1)) > 20000  # 600 + 312 rows now shown
    assert 'data-broken-headers="0"' in opened and int(re.search(r'data-scroll-width="(\d+)"', opened).group(1)) \
        <= 1400, opened


def test_plots_at_paper_size_with_the_severities_run(tmp_path, monkeypatch):
    """Real figures: 7.0 in (a two-column paper's text width) x 150 dpi = 1050 px wide PNGs; the severity axis
    shows clean (0) and the severities
    run (1-3), not 4 and 5; one bar per model in the family plot."""
    from PIL import Image

    from vlbench.leaderboards import build_leaderboard
    from vlbench.leaderboards.paper import plots

    figs = []
    real = plots._both
    monkeypatch.setattr(plots, "_both", lambda fig: (figs.append(fig), real(fig))[1])
    for i in range(2):
        synth_run(tmp_path / "runs" / f"m{i}", model=i, perturb=PERTURBATIONS["typos"], corrupt=["gaussian_noise"],
                  severities=(1, 2, 3))
    res = build_leaderboard([tmp_path / "runs"], tmp_path / "lb")
    names = sorted(p["file"] for p in res.manifest["plots"])
    assert names == ["plots/corruption_severity--noise--custom-mini.jsonl-111111-222222.png",
                     "plots/rsum_change--typos--custom-mini.jsonl.png"]
    for name in names:
        assert Image.open(tmp_path / "lb" / name).size[0] == 1050
        svg = (tmp_path / "lb" / name).with_suffix(".svg").read_text()
        assert svg.startswith("<?xml") and "<svg" in svg
    corr = next(f for f in figs if "corruptions" in f._suptitle.get_text())
    ax = corr.axes[0]
    assert list(ax.get_xticks()) == [0, 1, 2, 3]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    assert ax.get_xlabel() == "severity (0 = clean)"
    bars = next(f for f in figs if "perturbations" in f._suptitle.get_text())
    assert [t.get_text() for t in bars.axes[0].get_xticklabels()] == sorted(PERTURBATIONS["typos"])
    from matplotlib.container import BarContainer

    series = [c for c in bars.axes[0].containers if isinstance(c, BarContainer)]
    assert len(series) == 2 and [len(c) for c in series] == [4, 4]  # one bar series per model, a bar per typo
