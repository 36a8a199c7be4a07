"""docs/README.md, the index of the docs: every page listed once, every page of docs/ listed, and tasks.md's line
names every choice task that tasks.md documents (it once described it as ARO order and SugarCrepe only)."""

from __future__ import annotations

import re

from support.data import ROOT

DOCS = ROOT / "docs"


def _listed() -> list[str]:
    return re.findall(r"^\| \[([\w./-]+\.md)\]\(", (DOCS / "README.md").read_text(encoding="utf-8"), re.M)


def test_every_page_is_listed_once():
    listed = _listed()
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not twice, f"listed more than once in docs/README.md: {twice}"
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    assert sorted(set(listed) & set(pages)) == pages, f"not listed: {sorted(set(pages) - set(listed))}"


def test_the_tasks_line_names_every_task_of_tasks_md():
    index = (DOCS / "README.md").read_text(encoding="utf-8").splitlines()
    line = next(x for x in index if x.startswith("| [tasks.md]"))
    tasks = (DOCS / "tasks.md").read_text(encoding="utf-8")
    heading = re.search(r"^## In a run: `vlbench run --task ([^`]+)`", tasks, re.M)
    assert heading, "tasks.md's 'In a run' heading lists the tasks"
    names = {"order": "ARO order", "sugarcrepe": "SugarCrepe", "sugarcrepe++": "SugarCrepe++",
             "winoground": "Winoground", "whatsup": "What'sUp", "colorswap": "ColorSwap", "bivlc": "BiVLC",
             "aro": "VG-Relation", "mmvp": "MMVP"}
    for task in heading.group(1).split("|"):  # a set without a display name here is looked for by its own name
        assert names.get(task, task).lower() in line.lower(), (task, line)
