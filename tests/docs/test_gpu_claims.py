"""The docs say one true thing about what ran on a GPU (BENCHMARKS.md, "What ran on a GPU"): one lent H100 session
on 2026-11-24 (stage times, the tie rule's cost), nothing written since. No page may say that vlbench never ran on
a GPU, and the pages that state it point to the one paragraph."""

from __future__ import annotations

import re

from support.data import ROOT

NEVER = re.compile(r"no GPU (?:has been|was|is) lent to (?:this work|the project|vlbench)|never (?:been )?run on a GPU"
                   r"|this session had no GPU machine", re.I)


def _pages():
    for f in [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield f.relative_to(ROOT).as_posix(), f.read_text(encoding="utf-8")


def test_no_page_says_vlbench_never_ran_on_a_gpu():
    bad = [f"{rel}: {m.group(0)!r}" for rel, text in _pages() for m in NEVER.finditer(re.sub(r"\s+", " ", text))]
    assert not bad, bad


def test_the_gpu_statements_agree_with_the_benchmarks_paragraph():
    pages = dict(_pages())
    bench = re.sub(r"\s+", " ", pages["BENCHMARKS.md"])
    assert "**What ran on a GPU.** One session, on 2026-11-24, had a lent NVIDIA H100 machine" in bench
    assert "On the lent GPU machine (NVIDIA H100 80GB HBM3" in bench  # the stage times it names
    for rel in ("README.md", "docs/metrics.md"):
        text = re.sub(r"\s+", " ", pages[rel])
        assert "H100" in text and "2026-11-24" in text and "What ran on a GPU" in text, rel
