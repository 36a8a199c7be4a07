"""A leaderboard table as plain data: its columns (kind, digits, label) and rows. Defined apart from the code
that fills tables (tables.py, modalities.py, sections.py, paper/summary.py) so any of them can use it without importing
the others."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    key: str  # CSV header and HTML data-key
    kind: str = "text"  # text | num | int
    digits: int = 2  # decimals in Markdown / HTML (CSV always uses the fixed 6-decimal format)
    label: str | None = None  # Markdown / HTML header (default: key)
    short: int = 0  # show only the first N characters in Markdown / HTML (hashes); CSV keeps all

    @property
    def title(self) -> str:
        return self.label or self.key


@dataclass
class Table:
    name: str  # file stem
    title: str
    description: str
    columns: list[Column]
    rows: list[list]
    runs: list[str] = field(default_factory=list)  # run ids the rows come from

    def column(self, key: str) -> int:
        return [c.key for c in self.columns].index(key)
