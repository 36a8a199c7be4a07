"""The docs' option lists come from the option table (vlbench/util/options.py): docs/usage.md's list is
markdown_table() as it is now, and docs/scale.md names each key a plan refuses and says that task is a plan key."""

from __future__ import annotations

import re

from support.data import ROOT

from vlbench.sweep.plan import RESERVED
from vlbench.util.options import markdown_table

BEGIN, END = "<!-- option table: begin", "<!-- option table: end -->"


def test_usage_md_lists_the_options_of_the_table():
    text = (ROOT / "docs" / "usage.md").read_text()
    shown = text[text.index("\n", text.index(BEGIN)) + 1:text.index(END)]
    assert shown == markdown_table("cli"), ("docs/usage.md's option list is not the table's: paste "
                                            "vlbench.util.options.markdown_table('cli') between its markers")


def test_scale_md_names_every_key_a_plan_refuses_and_allows_task():
    text = (ROOT / "docs" / "scale.md").read_text()
    refused = re.search(r"\*\*Refused keys\*\*:(.*?)\n\* ", text, flags=re.S).group(1)
    assert set(RESERVED) == set(re.findall(r"`([a-z-]+)`", refused)) - {"seeds"}  # seeds: the list a seed goes to
    assert 'task = "winoground"' in text and "not part of a sweep yet" not in text
