"""Sentences of a caption, by one plain rule shared by ``--sentence-budget`` and ``vlbench analyze``: a
sentence is text ended by '.', '!' or '?' (with what follows: a space or the end), so "Dr. Smith" counts two;
a caption without such an ending is one sentence. Long-caption sets (ImageInWords, DOCCI) are written in
plain sentences, where the rule and a parser agree."""

from __future__ import annotations

import re

_END = re.compile(r"[.!?]+(?=\s|$)")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each with its own characters (ending included, surrounding spaces stripped)."""
    out, start = [], 0
    for m in _END.finditer(text):
        piece = text[start:m.end()].strip()
        if piece.strip(".!? "):
            out.append(piece)
        start = m.end()
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def count_sentences(text: str) -> int:
    return max(1, len(split_sentences(text)))


def first_sentences(text: str, k: int) -> str:
    """The first ``k`` sentences, as written (the text itself when it has at most ``k``)."""
    parts = split_sentences(text)
    if len(parts) <= k:
        return text
    return " ".join(parts[:k])
