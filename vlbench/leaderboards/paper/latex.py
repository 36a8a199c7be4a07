"""Tables a paper can take as they are: every leaderboard table as a LaTeX ``table`` (booktabs),
and the paper view shared with the Markdown files.

* **paper view** (:func:`paper_view`): run ids, hashes and an empty flags column are provenance, not results: they
  stay in the CSV, the page and the provenance table, not in the Markdown and LaTeX tables;
* **best value in bold**: in a column whose better direction is known (:func:`better`: recalls, RSUM, DCG, accuracy,
  retained RSUM and changes higher; mCE, ranks and false rates lower), the best of the rows that share their
  grouping cells (dataset, condition, family, direction, corruption, severity, task, ...; rows of different models)
  is bold, when two or more rows compete;
* **intervals as ±**: a value with a ``ci_low`` / ``ci_high`` pair (``X_ci_low`` / ``X_ci_high`` for a column
  ``X``) is one cell, ``v ± h`` when the interval is symmetric at the shown precision, else ``v^{+a}_{-b}`` (a
  percentile bootstrap interval need not be symmetric: ± alone would misstate it);
* the caption is the table's title and description plus the protocol line the build gives (protocol, metric
  version, datasets and their sizes); the label is ``tab:vlbench-<name>``. Long tables (more than
  :data:`LONG_ROWS` rows) are ``longtable`` s; a table wider than the line is scaled down to it.

Needs ``\\usepackage{booktabs,graphicx,longtable}``; :func:`document` wraps tables into a document that compiles.
"""

from __future__ import annotations

import math
import re

from ...util.typeset import tex_escape
from ..table_types import Column, Table

#: columns that are provenance, not results (kept in the CSV, the page and the provenance table)
PROVENANCE = ("run_id", "model_hash", "dataset_hash", "results_hash", "record")
#: cells that group rows competing for the bold best value
GROUPING = ("dataset", "condition", "family", "direction", "rsum", "corruption", "severity", "task", "set", "k")
LONG_ROWS = 40
#: tables whose rows are not models competing on one measurement (pairs of models, runs, values)
NO_BEST = ("paired_comparisons", "rank_pairs", "provenance", "values", "model_input_similarity")
_HIGHER = re.compile(r"(recall|rsum|dcg|accuracy|retained|^delta$|^diff$|^tot$|^rel$|overlap|r@)", re.I)
_LOWER = re.compile(r"(^mce|false_rate|medr|meanr)", re.I)
_NOT_SCORES = re.compile(r"(chance|ci_low|ci_high|^p$|p_holm|p_adj|n_boot|applicable|drift|rank$|items|pairs|"
                         r"datasets|dcg_p|blind|^n$)", re.I)
def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def paper_view(table: Table) -> Table:
    """The table without provenance columns (and without a flags column that is empty in every row)."""
    if table.name in ("provenance", "values"):
        return table
    keep = [i for i, c in enumerate(table.columns) if c.key not in PROVENANCE and not c.key.endswith("_hash")
            and not (c.key == "flags" and not any(r[i] for r in table.rows))]
    return Table(table.name, table.title, table.description, [table.columns[i] for i in keep],
                 [[r[i] for i in keep] for r in table.rows], table.runs)


def better(col: Column, table: str = "") -> str | None:
    """"max", "min" or None (not a score, no known direction, or rows that are not competing models)."""
    if col.kind != "num" or _NOT_SCORES.search(col.key) or table in NO_BEST:
        return None
    if _LOWER.search(col.key):
        return "min"
    if table.startswith("rsum_per_perturbation") or table == "robustness_summary":  # RSUM, RSUM retained
        return "max"
    return "max" if _HIGHER.search(col.key) or _HIGHER.search(col.title) or col.key.startswith("clean_rsum:") \
        else None


def _pairs(cols: list[Column]) -> dict[int, tuple[int, int]]:
    """{value column: (ci_low column, ci_high column)}."""
    keys = [c.key for c in cols]
    out = {}
    for i, k in enumerate(keys):
        if k.endswith("ci_low") and k.replace("ci_low", "ci_high") in keys:
            prefix = k[: -len("ci_low")].rstrip("_")
            value = prefix if prefix else next((keys[j] for j in range(i - 1, -1, -1)
                                                if cols[j].kind == "num" and not keys[j].endswith("ci_high")), None)
            if value in keys:
                out[keys.index(value)] = (i, keys.index(k.replace("ci_low", "ci_high")))
    return out


def _num(v, digits: int) -> str:
    s = f"{float(v):.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def _with_ci(v, lo, hi, digits: int) -> str:
    shown = _num(v, digits)
    if not (_finite(lo) and _finite(hi)):
        return f"${shown}$"
    up, down = _num(hi - v, digits), _num(v - lo, digits)
    if up == down and not up.startswith("-"):
        return f"${shown} \\pm {up}$"
    return f"${shown}^{{{_signed(hi - v, digits)}}}_{{{_signed(lo - v, digits)}}}$"


def _signed(x: float, digits: int) -> str:
    """An offset with its sign (a percentile interval need not hold its point estimate: the sign says so)."""
    s = _num(x, digits)
    return s if s.startswith("-") else "+" + s


def at_chance(table: Table) -> set[int]:
    """Rows whose clean score is at or below chance (a table with ``clean_rsum`` and ``chance_rsum``: the total RSUM
    of a uniformly random ranking, from R@k's chance k / n_candidates per query with one positive; summary.py):
    retaining a random ranking's score is no robustness, so such a row is never the best retained."""
    keys = [c.key for c in table.columns]
    if "clean_rsum" not in keys or "chance_rsum" not in keys:
        return set()
    clean, chance = keys.index("clean_rsum"), keys.index("chance_rsum")
    return {i for i, r in enumerate(table.rows) if _finite(r[clean]) and _finite(r[chance])
            and float(r[clean]) <= float(r[chance])}


def _best(table: Table, col: int, how: str) -> set[int]:
    keys = [c.key for c in table.columns]
    group = [keys.index(g) for g in GROUPING if g in keys]
    groups: dict[tuple, list[int]] = {}
    skip = at_chance(table) if keys[col] != "clean_rsum" else set()  # no "best retained" at or below chance
    for i, r in enumerate(table.rows):
        if _finite(r[col]) and i not in skip:
            groups.setdefault(tuple(r[g] for g in group), []).append(i)
    out: set[int] = set()
    for rows in groups.values():
        if len(rows) < 2:
            continue
        vals = [round(float(table.rows[i][col]), table.columns[col].digits) for i in rows]
        top = max(vals) if how == "max" else min(vals)
        if vals.count(top) < len(vals):  # bold only a best that is better than some other row
            out.update(i for i, v in zip(rows, vals) if v == top)
    return out


def _bold(cell: str) -> str:
    """Bold text, or a number in math mode set in bold math (digits and the ± sign)."""
    return f"{{\\boldmath{cell}}}" if cell.startswith("$") else f"\\textbf{{{cell}}}"


def _cell(v, col: Column) -> str:
    if v is None or (col.kind in ("num", "int") and not _finite(v)):
        return "--"
    if col.kind == "num":
        return f"${_num(v, col.digits)}$"
    if col.kind == "int":
        return str(int(v))
    return tex_escape(v)


def to_latex(table: Table, protocol: str = "") -> str:
    """One ``table`` (or ``longtable``) environment: booktabs rules, bold best values, intervals as ±."""
    t = paper_view(table)
    pairs = _pairs(t.columns)
    hidden = {j for lo_hi in pairs.values() for j in lo_hi}
    shown = [i for i in range(len(t.columns)) if i not in hidden]
    bold = {i: _best(t, i, how) for i in shown if (how := better(t.columns[i], t.name))}
    head = " & ".join(tex_escape(t.columns[i].title) for i in shown)
    body = []
    for n, r in enumerate(t.rows):
        cells = []
        for i in shown:
            c = t.columns[i]
            cell = (_with_ci(r[i], r[pairs[i][0]], r[pairs[i][1]], c.digits) if i in pairs and _finite(r[i])
                    else _cell(r[i], c))
            cells.append(_bold(cell) if n in bold.get(i, ()) else cell)
        body.append(" & ".join(cells) + r" \\")
    align = "".join("l" if t.columns[i].kind == "text" else "r" for i in shown)
    caption = tex_escape(f"{t.title}. {t.description}" + (f" {protocol}" if protocol else "")) + (
        " Intervals: the 95\\% interval as $v \\pm h$, or $v^{+a}_{-b}$ where it is not symmetric." if pairs else "")
    label = f"tab:vlbench-{t.name.replace('_', '-')}"
    rows = body or [f"\\multicolumn{{{max(len(shown), 1)}}}{{l}}{{(no rows)}} \\\\"]
    intro = f"% {t.name}: written by vlbench from the runs in provenance.csv; needs booktabs, graphicx, longtable\n"
    if len(t.rows) > LONG_ROWS:
        return (intro + f"{{\\scriptsize\n\\begin{{longtable}}{{{align}}}\n\\caption{{{caption}}}"
                f"\\label{{{label}}}\\\\\n\\toprule\n{head} \\\\\n\\midrule\n\\endhead\n" + "\n".join(rows) +
                "\n\\bottomrule\n\\end{longtable}}\n")
    tabular = f"\\begin{{tabular}}{{{align}}}\n\\toprule\n{head} \\\\\n\\midrule\n" + "\n".join(rows) + \
        "\n\\bottomrule\n\\end{tabular}"
    # scaled down to the line width only when wider than it (never scaled up)
    tabular = f"\\resizebox{{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}}{{!}}{{%\n{tabular}}}"
    return (intro + f"\\begin{{table}}[tbp]\n\\centering\n\\small\n\\caption{{{caption}}}\n\\label{{{label}}}\n"
            f"{tabular}\n\\end{{table}}\n")


def document(tables: list[Table], protocol: str = "") -> str:
    """A LaTeX document holding every table (what ``leaderboard.tex`` is): compiles with pdflatex as it is."""
    body = "\n\\clearpage\n".join(to_latex(t, protocol) for t in tables)
    return ("\\documentclass{article}\n\\usepackage[margin=2cm]{geometry}\n\\usepackage{booktabs}\n"
            "\\usepackage{graphicx}\n\\usepackage{longtable}\n\\begin{document}\n" + body + "\n\\end{document}\n")
