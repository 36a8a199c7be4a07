"""The headless browser the HTML tests drive: ``VLBENCH_CHROMIUM``, else Chromium or Chrome on the PATH."""

from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

from support.tools import needs_tool


def find_browser() -> str | None:
    env = os.environ.get("VLBENCH_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


BROWSER = find_browser()
NEEDS_BROWSER = needs_tool("chromium", BROWSER is not None, "no headless browser found (install Debian's 'chromium' "
                                                             "package or set VLBENCH_CHROMIUM)")


class Tables(HTMLParser):
    """A leaderboard page's tables: table data-table -> list of rows; a row is a list of (attrs, text) per cell."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list] = {}
        self.attrs: dict[str, dict] = {}
        self.root: dict = {}
        self._table = self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "table" and "data-table" in a:
            self._table = a["data-table"]
            self.tables[self._table] = []
            self.attrs[self._table] = a
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = [a, ""]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(tuple(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
