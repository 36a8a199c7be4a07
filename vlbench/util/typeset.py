"""How vlbench sets a user's text (model and dataset names, conditions, free text) in what it writes: one place for
every application (leaderboards, analyze, compare, explain).

* :func:`tex_escape` -- LaTeX: specials escaped, a few symbols as LaTeX, characters beyond Latin-1 as '?';
* :func:`plain` and :data:`COLORS` / :data:`GREY` -- matplotlib: ``$`` escaped (never read as mathtext), the
  Okabe-Ito palette (distinguishable with every common colour-vision deficiency);
* :func:`slug` -- a file-name-safe form (Markdown is :mod:`vlbench.util.markdown`'s).
"""

from __future__ import annotations

import re

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


_UNICODE = {"\u2192": r"$\rightarrow$", "\u00b1": r"$\pm$", "\u2026": r"\ldots{}", "\u2013": "--", "\u2014": "---",
            "\u2212": "-"}

#: Okabe & Ito (2008), "Color Universal Design": blue, orange, bluish green, vermillion, sky blue, reddish purple,
#: black, yellow (last: weak on white)
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#000000", "#F0E442")
GREY = "#999999"


def tex_escape(text) -> str:
    """Free text in a LaTeX cell or caption: specials escaped, a few symbols as LaTeX, other characters beyond
    Latin-1 (which pdflatex's default set-up cannot typeset) as '?'."""
    return "".join(_TEX.get(ch) or _UNICODE.get(ch) or (ch if ord(ch) < 256 else "?")
                   for ch in " ".join(str(text).split()))


def plain(text) -> str:
    """A user's text for matplotlib as written: ``$`` escaped, so '$x$' is not typeset (or refused) as math."""
    return str(text).replace("$", r"\$")


def slug(text: str, n: int = 40, strip: str = "-.") -> str:
    """A file-name-safe form of ``text``: runs of other characters as '-', ``strip`` cut from both ends, at most
    ``n`` characters ("x" when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(strip)[:n] or "x"
