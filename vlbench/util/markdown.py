"""The one Markdown table writer of the package (run tables, leaderboards, granularity tables).

``md_table(head, rows, align)`` writes a GitHub-flavoured pipe table. ``align`` is one letter per column,
``"l"`` (text, separator ``---``) or ``"r"`` (numbers, separator ``---:``); ``pad=True`` right-justifies every
cell to its column's width so the table also reads well in a terminal (``table.md`` of a run). Cells are
written as given: escaping is the caller's (:func:`md_escape` for free text).
"""

from __future__ import annotations

import html

_MD_SPECIAL = "\\`*_[]|~#"


def md_escape(text) -> str:
    """Free text made safe inside a table cell: one line, Markdown specials backslash-escaped, HTML escaped."""
    text = " ".join(str(text).split())  # no line breaks inside a table row
    text = "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)
    return html.escape(text, quote=False)


def md_table(head, rows, align: str | None = None, pad: bool = False) -> str:
    """Header, separator and one line per row, joined by newlines (no trailing newline)."""
    head = [str(x) for x in head]
    rows = [[str(x) for x in r] for r in rows]
    if pad:
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]

        def padded(r):
            return "| " + " | ".join(x.rjust(w) for x, w in zip(r, widths)) + " |"

        sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        return "\n".join([padded(head), sep] + [padded(r) for r in rows])
    align = align or "l" * len(head)

    def line(r):
        return "| " + " | ".join(r) + " |"

    sep = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return "\n".join([line(head), sep] + [line(r) for r in rows])
