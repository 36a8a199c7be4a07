"""Paper-ready leaderboard outputs: every table as LaTeX that compiles (pdflatex, skipped when
absent) and whose numbers equal the CSV's; the best value bold; intervals as ±; no run ids or hashes in paper
tables; one page rendered to PNG (pdftoppm) for a person to look at (VLBENCH_SCREENSHOT_DIR keeps it)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.synthetic_runs import synth_run, write_per_query
from support.tools import missing_tool, needs_tool

PERTURB = ["char-swap", "missing-char", "synonym-noun", "shuffle-all-words"]
PDFLATEX = shutil.which("pdflatex")
NUM = re.compile(r"-?\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    from vlbench.leaderboards import build_leaderboard

    root = tmp_path_factory.mktemp("paper")
    rng = np.random.default_rng(0)
    for m, label in enumerate(["CLIP ViT-B/32 $x$", "SigLIP_base & co", "ours 100%"]):
        folder = synth_run(root / "runs" / f"m{m}", model=m, perturb=PERTURB, corrupt=["gaussian_noise"],
                           severities=(1, 2), label=label)
        write_per_query(folder, {(c, d): list(rng.integers(0, 4, size=30) * 100.0)
                                 for c in ["clean"] + PERTURB + ["img:gaussian_noise:1", "img:gaussian_noise:2"]
                                 for d in ("i2t", "t2i")})
    res = build_leaderboard([root / "runs"], root / "lb", warn=lambda m: None)
    return root / "lb", res


def _csv(path: Path) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    return rows[0], rows[1:]


def _tex_rows(text: str) -> list[list[str]]:
    body = text.split("\\midrule\n", 1)[1].split("\n\\bottomrule", 1)[0]
    body = body.split("\\endhead\n", 1)[-1]
    return [[c.strip() for c in line.strip().removesuffix("\\\\").split(" & ")] for line in body.splitlines()
            if line.strip()]


def _shown(head: list[str], rows: list[list[str]]) -> list[int]:
    """The CSV columns a paper table shows, in order: no provenance, no interval bounds (merged as ±), no empty
    flags column (an independent reading of what docs/leaderboards.md promises)."""
    out = []
    for i, k in enumerate(head):
        if k in ("run_id", "record") or k.endswith("_hash") or k.endswith(("ci_low", "ci_high")):
            continue
        if k == "flags" and not any(r[i] for r in rows):
            continue
        out.append(i)
    return out


def test_every_table_as_latex_with_the_csv_numbers(board):
    out, res = board
    names = [t for t in res.tables if t != "values"]
    assert "robustness_summary" in names and len(names) >= 10
    for name in names:
        tex = (out / f"{name}.tex").read_text()
        assert "\\toprule" in tex and "\\bottomrule" in tex and "\\caption{" in tex and "Protocol: standard" in tex
        head, rows = _csv(out / f"{name}.csv")
        if name not in ("provenance",):
            assert "run-m0" not in tex.split("\\midrule", 1)[1], name  # run ids only in provenance
        cells = [c for c in _tex_rows(tex) if "(no rows)" not in c[0]]
        assert len(cells) == len(rows), name
        cols = _shown(head, rows) if name != "provenance" else list(range(len(head)))
        for row, got in zip(rows, cells):
            assert len(got) == len(cols), (name, got)
            for i, cell in zip(cols, got):
                want = row[i]
                if not re.fullmatch(r"-?\d+\.\d{6}", want):
                    continue
                nums = [float(x) for x in NUM.findall(cell)]
                digits = len(NUM.findall(cell)[0].split(".")[1]) if "." in NUM.findall(cell)[0] else 0
                assert abs(nums[0] - float(want)) <= 0.5 * 10 ** -digits + 1e-9, (name, head[i], cell, want)
                lo_key = "ci_low" if head[i] in ("delta", "accuracy", "diff") else f"{head[i]}_ci_low"
                if lo_key in head and row[head.index(lo_key)] and len(nums) > 1:  # v ± h or v^{+a}_{-b}
                    lo, hi = float(row[head.index(lo_key)]), float(row[head.index(lo_key.replace("low", "high"))])
                    up, down = (nums[1], nums[1]) if "\\pm" in cell else (nums[1], -nums[2])
                    assert abs(nums[0] + up - hi) <= 10 ** -digits + 1e-9 and \
                        abs(nums[0] - down - lo) <= 10 ** -digits + 1e-9, (name, cell, lo, hi)


def test_the_best_value_is_bold(board):
    out, _ = board
    head, rows = _csv(out / "clean_retrieval.csv")
    cells = _tex_rows((out / "clean_retrieval.tex").read_text())
    cols = _shown(head, rows)
    j = cols.index(head.index("t2i_rsum"))
    best = max(range(len(rows)), key=lambda r: float(rows[r][head.index("t2i_rsum")]))
    assert [("\\boldmath" in c[j]) for c in cells] == [r == best for r in range(len(rows))]
    assert "SigLIP\\_base \\& co" in (out / "clean_retrieval.tex").read_text()  # names escaped for LaTeX


@needs_tool("pdflatex", PDFLATEX is not None, "pdflatex not installed (Debian: texlive-latex-base, "
                                              "texlive-latex-recommended; scripts/test.sh installs them)")
def test_leaderboard_tex_compiles_and_a_page_renders(board, tmp_path):
    out, _ = board
    shutil.copy(out / "leaderboard.tex", tmp_path / "leaderboard.tex")
    run = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "leaderboard.tex"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "leaderboard.pdf").stat().st_size > 1000
    assert "Overfull \\hbox" not in run.stdout  # wide tables are scaled to the line
    pdftoppm = shutil.which("pdftoppm")
    if pdftoppm is None:
        missing_tool("pdftoppm", "pdftoppm not installed (Debian: poppler-utils): the PDF compiled, no page image made")
    keep = Path(os.environ.get("VLBENCH_SCREENSHOT_DIR", tmp_path))
    subprocess.run([pdftoppm, "-png", "-r", "100", "-f", "3", "-l", "3", str(tmp_path / "leaderboard.pdf"),
                    str(keep / "leaderboard-tex-page")], check=True, timeout=60)
    from PIL import Image

    png = next(keep.glob("leaderboard-tex-page*.png"))
    pixels = np.asarray(Image.open(png).convert("L"))
    assert pixels.min() < 50 and pixels.mean() > 200  # black text on a white page


def test_markdown_tables_carry_no_run_ids_or_hashes(board):
    out, _ = board
    md = (out / "clean_retrieval.md").read_text()
    assert "run-m0" not in md and "1111111111" not in md
    assert "run-m0" in (out / "provenance.md").read_text()
    assert "run_id" in (out / "clean_retrieval.csv").read_text().splitlines()[0]  # the CSV keeps them
