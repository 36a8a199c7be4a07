"""spaCy documents with hand-written part-of-speech tags and dependencies (the granularity tests' gold parses),
so counting rules are checked independently of the statistical parser. The ``vocab`` fixture gives the vocab."""

from __future__ import annotations


def gold(vocab, spec: str):
    """Doc from 'word/POS/TAG/dep/head' items (head = absolute index; ROOT points at itself)."""
    from spacy.tokens import Doc

    items = [x.split("/") for x in spec.split()]
    return Doc(vocab, words=[i[0] for i in items], pos=[i[1] for i in items], tags=[i[2] for i in items],
               deps=[i[3] for i in items], heads=[int(i[4]) for i in items])
