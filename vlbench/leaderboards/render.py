"""Writing tables as CSV, Markdown and one self-contained HTML page.

* CSV: fixed column order, numbers in one fixed format (6 decimals, no exponent, no ``-0``), empty
  cell for a missing value, ``\\n`` line ends; text cells that a spreadsheet would run as a formula
  (starting with ``= + - @`` or a tab / carriage return) get a leading ``'``. Numbers are never touched.
* Markdown: numbers rounded for reading (2 decimals, 4 for Jaccard), text escaped (``| * _`` etc.
  and HTML's ``< > &``) so that user-chosen names cannot break the table or inject markup.
* HTML: every cell and attribute escaped; sorting by an inline script (no network access); a
  Content-Security-Policy allows only that exact script (by hash) and inline images.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import math

from ..util.markdown import md_escape, md_table
from .paper.ranking import family_rank, pivot_rsum, ranking_table, summary_long
from .sections import with_groups
from .tables import Column, Table

__all__ = ["to_csv", "to_markdown", "to_html", "html_table", "family_rank", "md_escape", "neutralize", "display"]

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CSV_FLOAT = "{:.6f}"


def neutralize(text: str) -> str:
    """Defuse spreadsheet formula injection in a text cell (OWASP: prefix a single quote)."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def csv_cell(v, kind: str) -> str:
    if v is None:
        return ""
    if kind == "num":
        if not _finite(v):
            return ""
        s = CSV_FLOAT.format(float(v))
        return s[1:] if s.startswith("-") and float(s) == 0 else s
    if kind == "int" and _finite(v):
        return str(int(v))
    return neutralize(str(v))


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow([neutralize(c.key) for c in table.columns])
    for row in table.rows:
        w.writerow([csv_cell(v, c.kind) for v, c in zip(row, table.columns)])
    return buf.getvalue()


def display(v, kind: str, digits: int, short: int = 0) -> str:
    """A cell as shown to people (Markdown, HTML)."""
    if short and isinstance(v, str) and len(v) > short:
        return v[:short] + "\u2026"
    if v is None or (kind in ("num", "int") and not _finite(v)):
        return ""
    if kind == "num":
        s = f"{float(v):.{digits}f}"
        return s[1:] if s.startswith("-") and float(s) == 0 else s
    if kind == "int":
        return str(int(v))
    return str(v)


def to_markdown(table: Table, heading: str | None = "##") -> str:
    out = []
    if heading:
        out += [f"{heading} {md_escape(table.title)}", "", md_escape(table.description), ""]
    if not table.rows:
        return "\n".join(out + ["(no rows)", ""])
    cols = table.columns
    rows = [[md_escape(x) if c.kind == "text" else x
             for x, c in zip([display(v, c.kind, c.digits, c.short) for v, c in zip(row, cols)], cols)]
            for row in table.rows]
    out.append(md_table([md_escape(c.title) for c in cols], rows,
                        "".join("l" if c.kind == "text" else "r" for c in cols)))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1em auto;max-width:1360px;
padding:0 1em;color:#1b1b1b}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.2em;margin:1.4em 0 .2em}
table{border-collapse:collapse;margin:.3em 0 .8em;font-variant-numeric:tabular-nums;font-size:13px}
th,td{border:1px solid #ccc;padding:.15em .4em;white-space:nowrap}
td.wide{white-space:normal;overflow-wrap:anywhere;min-width:6em;max-width:18em}
th{background:#f2f2f2;cursor:pointer;user-select:none;position:sticky;top:0;white-space:normal;
overflow-wrap:normal;word-break:normal;hyphens:manual;vertical-align:bottom;font-weight:600}
details.big>summary{cursor:pointer;color:#1a4f8b;margin:.2em 0}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right}tbody tr:nth-child(even){background:#fafafa}
table[data-table=ranking] td:first-child{font-weight:bold}
.wrap{overflow-x:auto;max-width:100%}.note{color:#555;margin:.2em 0}
nav ul{margin:.2em 0;padding:0;list-style:none}nav li{display:inline;margin-right:1.2em}
#plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:.5em}
#plots h2{grid-column:1/-1}figure{margin:0}figure img{width:100%;border:1px solid #ddd}
figcaption{font-size:12px;color:#555}code{font-size:90%}
"""

# Sorting: click a header (numbers: descending first), or give the URL a hash such as
# #sort=clean_retrieval:t2i_rsum:desc (several joined by &). After the script ran, the <html> element
# carries data-js="ready", data-scroll-width (the laid-out width) and data-overflowing-tables (how many
# tables scroll sideways in their box), and each sorted table
# data-sorted-by="KEY:DIR".
_JS = """
(function () {
  "use strict";
  function cellValue(td, type) {
    var v = td.getAttribute("data-v");
    if (v === null) { v = td.textContent; }
    if (type === "num" || type === "int") { return v === "" ? null : parseFloat(v); }
    return v;
  }
  function sortTable(table, key, dir) {
    var ths = table.tHead.rows[0].cells, idx = -1, type = "text", i;
    for (i = 0; i < ths.length; i++) {
      if (ths[i].getAttribute("data-key") === key) { idx = i; type = ths[i].getAttribute("data-type"); }
    }
    if (idx < 0) { return false; }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (r, n) {
      return {row: r, n: n, v: cellValue(r.cells[idx], type)};
    });
    rows.sort(function (a, b) {
      if (a.v === null || b.v === null) { return (a.v === null) - (b.v === null) || a.n - b.n; }
      var c = type === "text" ? (a.v < b.v ? -1 : (a.v > b.v ? 1 : 0)) : a.v - b.v;
      return (dir === "desc" ? -c : c) || a.n - b.n;
    });
    rows.forEach(function (x) { body.appendChild(x.row); });
    for (i = 0; i < ths.length; i++) {
      ths[i].setAttribute("aria-sort", i === idx ? (dir === "asc" ? "ascending" : "descending") : "none");
    }
    table.setAttribute("data-sorted-by", key + ":" + dir);
    return true;
  }
  function fromHash() {
    var parts = (window.location.hash || "").replace(/^#/, "").split("&");
    parts.forEach(function (p) {
      if (p.indexOf("sort=") !== 0) { return; }
      var s = decodeURIComponent(p.slice(5)), a = s.indexOf(":"), b = s.lastIndexOf(":");
      if (a < 0 || b <= a) { return; }
      var table = document.querySelector('table[data-table="' + s.slice(0, a).replace(/[^A-Za-z0-9_]/g, "") + '"]');
      var dir = s.slice(b + 1) === "asc" ? "asc" : "desc";
      if (table) { sortTable(table, s.slice(a + 1, b), dir); }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.lb"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      function go() {
        var key = th.getAttribute("data-key"), cur = table.getAttribute("data-sorted-by") || "";
        var first = th.getAttribute("data-type") === "text" ? "asc" : "desc";
        var dir = cur === key + ":" + first ? (first === "asc" ? "desc" : "asc") : first;
        sortTable(table, key, dir);
      }
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); }
      });
    });
  });
  // #open (or #open&sort=...) opens every collapsed table: for reading all, and for layout checks
  if (/(^|[#&])open(&|$)/.test(window.location.hash || "")) {
    Array.prototype.forEach.call(document.querySelectorAll("details"), function (d) { d.open = true; });
  }
  fromHash();
  window.addEventListener("hashchange", fromHash);
  // for layout checks (tests): headers broken between two letters or digits (never wanted)
  var broken = 0, range = document.createRange();
  Array.prototype.forEach.call(document.querySelectorAll("th"), function (th) {
    var walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT), node, i, rect, top;
    while ((node = walker.nextNode())) {
      top = null;
      for (i = 0; i < node.data.length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        rect = range.getClientRects()[0];
        if (!rect) { top = null; continue; }
        if (top !== null && rect.top > top + 1 && /[A-Za-z0-9]/.test(node.data[i]) &&
            /[A-Za-z0-9]/.test(node.data[i - 1])) { broken++; }
        top = rect.top;
      }
    }
  });
  document.documentElement.setAttribute("data-broken-headers", String(broken));
  document.documentElement.setAttribute("data-scroll-height", String(document.documentElement.scrollHeight));
  document.documentElement.setAttribute("data-js", "ready");
  // for layout checks (tests): the page's full width once laid out
  var over = Array.prototype.filter.call(document.querySelectorAll(".wrap"), function (w) {
    return w.scrollWidth > w.clientWidth + 1;
  });
  document.documentElement.setAttribute("data-scroll-width", String(document.documentElement.scrollWidth));
  document.documentElement.setAttribute("data-overflowing-tables", String(over.length));
  document.documentElement.setAttribute("data-overflowing-ids", over.map(function (w) {
    var t = w.querySelector("table"); return t ? t.getAttribute("data-table") : "";
  }).join(" "));
}());
"""


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


# HTML-only shortening: ids and hashes are cut (full value in the cell's title and data-v, and in the
# provenance table / CSV files); free-text columns may wrap.
_HTML_SHORT = {"run_id": 14, "model_hash": 8, "dataset_hash": 8, "results_hash": 8, "created": 16}
_HTML_WRAP = ("flags", "perturbations", "conditions", "model_spec", "score", "model", "dataset", "worst", "condition",
              "corruption", "timing")
#: short headers on the page (the full key is the header's title and the CSV header)
_HTML_LABEL = {"direction": "dir.", "applicable": "appl.", "vlbench_version": "vlbench", "schema_version": "schema"}


#: tables with more rows than this are collapsed on the page (<details>; the CSV and Markdown have them all)
COLLAPSE_ROWS = 40


def _html_column(c: Column) -> Column:
    """Headers break only between words: underscores of a key shown as spaces (the key is the title)."""
    short = _HTML_SHORT.get(c.key, 8 if c.key.endswith("_hash") else c.short)
    return Column(c.key, c.kind, c.digits, c.label or _HTML_LABEL.get(c.key) or c.key.replace("_", " "), short)


def _conditions_cell(v) -> str:
    """Provenance on the page: the number of conditions a run provides, the names in provenance.csv."""
    names = str(v or "").split()
    return (f'<td data-v="{len(names)}" title="{_esc(" ".join(names))}"><a href="provenance.csv">'
            f'{len(names)} condition{"" if len(names) == 1 else "s"}</a></td>')


def html_table(table: Table) -> str:
    cols = [_html_column(c) for c in table.columns]
    table = Table(table.name, table.title, table.description, cols, table.rows, table.runs)
    head = "".join(f'<th data-key="{_esc(c.key)}" data-type="{c.kind}" tabindex="0" aria-sort="none" '
                   f'title="{_esc(c.key)}">{_esc(c.title)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        cells = []
        for v, c in zip(row, table.columns):
            shown = display(v, c.kind, c.digits, c.short)
            if table.name == "provenance" and c.key == "conditions":
                cells.append(_conditions_cell(v))
            elif c.kind == "text":
                full = "" if v is None or shown == str(v) else f' title="{_esc(v)}" data-v="{_esc(v)}"'
                wide = ' class="wide"' if c.key in _HTML_WRAP else ""
                cells.append(f"<td{wide}{full}>{_esc(shown)}</td>")
            else:
                raw = csv_cell(v, c.kind)
                cells.append(f'<td class="num" data-v="{_esc(raw)}">{_esc(shown)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="wrap"><table class="lb" data-table="{_esc(table.name)}" id="t-{_esc(table.name)}">'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody></table></div>")


def page_tables(tables: list[Table]) -> list[Table]:
    """The page's tables: the ranking first (when clean retrieval is there), RSUM per perturbation pivoted."""
    by = {t.name: t for t in tables}
    if "clean_retrieval" not in by:
        return tables

    rank = with_groups(ranking_table(by["clean_retrieval"], by.get("rsum_changes")), by.get("rank_groups"))
    order = [r[1] for r in rank.rows]
    views = {"rsum_per_perturbation": lambda t: pivot_rsum(t, order),
             "rsum_per_perturbation_total": lambda t: pivot_rsum(t, order), "robustness_summary": summary_long}
    return [rank] + [views.get(t.name, lambda t: t)(t) for t in tables if t.name != "rank_groups"]


def to_html(title: str, intro: list[str], tables: list[Table], figures: list[tuple[str, bytes]],
            notes: list[str]) -> str:
    """One self-contained page: the model ranking, tables (sortable), figures inlined as data: URIs, notes."""
    tables = page_tables(tables)
    script_hash = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode()
    csp = (f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
           "base-uri 'none'; form-action 'none'")
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f'<meta http-equiv="Content-Security-Policy" content="{_esc(csp)}">',
             f"<title>{_esc(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
             f"<h1>{_esc(title)}</h1>"]
    parts += [f'<p class="note">{_esc(p)}</p>' for p in intro]
    parts.append("<nav><ul>" + "".join(f'<li><a href="#{_esc(t.name)}">{_esc(t.title)}</a></li>' for t in tables) +
                 ('<li><a href="#plots">Plots</a></li>' if figures else "") +
                 ('<li><a href="#notes">Notes</a></li>' if notes else "") + "</ul></nav>")
    for t in tables:
        parts.append(f'<section id="{_esc(t.name)}"><h2>{_esc(t.title)}</h2><p class="note">{_esc(t.description)}'
                     f"</p>")
        body = html_table(t) if t.rows else "<p>(no rows)</p>"
        if len(t.rows) > COLLAPSE_ROWS:
            body = (f'<details class="big"><summary>show all {len(t.rows)} rows (also in {_esc(t.name)}.csv)'
                    f"</summary>{body}</details>")
        parts.append(body)
        parts.append("</section>")
    if figures:
        parts.append('<section id="plots"><h2>Plots</h2>')
        for cap, png in figures:
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<figure><img alt="{_esc(cap)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{_esc(cap)}</figcaption></figure>")
        parts.append("</section>")
    if notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{_esc(n)}</li>" for n in notes) +
                     "</ul></section>")
    parts += [f"<script>{_JS}</script>", "</body>", "</html>", ""]
    return "\n".join(parts)
