"""WordNet hypernym closures read straight from WordNet's data files: the lemma names and the hypernym pointers
of a synset, without building NLTK's full Synset (gloss, examples, lemma objects, every pointer). The probes
ask for the closure of thousands of nouns and verbs per caption set (:func:`.words.closure_lemmas`,
:func:`.slots.verb_closure`, :func:`.words.is_physical_object`); reading only the two fields they need is what
keeps a probe cheaper than a meaning-preserving perturbation (BENCHMARKS.md). The synsets are the ones
``wordnet.synsets(word, pos)`` gives, in its order (morphy forms, then the lemma index), and a synset's
hypernyms are its ``@`` pointers (``@i`` too where instance hypernyms are asked): the same sets as NLTK's
``synset.hypernyms()`` / ``instance_hypernyms()``. Where NLTK's reader lacks the internals this reads
(another NLTK), the public API is used instead.
"""

from __future__ import annotations

from functools import lru_cache

from ..synonym_words import _wn

_FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "s": "data.adj", "r": "data.adv"}
_OPEN: dict = {}


def fast_path() -> bool:
    """Whether this NLTK's WordNet reader has the lemma index, morphy and data folder read here."""
    wn = _wn()
    return all(hasattr(wn, a) for a in ("_lemma_pos_offset_map", "_morphy", "_root"))


def _data_file(pos: str):
    name = _FILES[pos]
    f = _OPEN.get(name)
    if f is None:
        f = _OPEN[name] = _wn()._root.join(name).open()  # binary: offsets are byte offsets
    return f


@lru_cache(maxsize=200_000)
def synset_fields(pos: str, offset: int) -> tuple[tuple[str, ...], tuple, tuple]:
    """A synset's lemma names (as NLTK gives them: syntactic markers such as "(p)" removed), its hypernyms and
    its instance hypernyms, as (pos, offset) pairs, read from its line of the data file."""
    f = _data_file(pos)
    f.seek(offset)
    cols = f.readline().decode("utf-8").split("|", 1)[0].split()
    n = int(cols[3], 16)
    names = []
    for k in range(n):
        name = cols[4 + 2 * k]
        if name.endswith(")") and "(" in name and "(" not in name[name.rindex("(") + 1:]:
            name = name[:name.rindex("(")]
        names.append(name)
    at = 4 + 2 * n
    hyper: list = []
    instance: list = []
    for k in range(int(cols[at])):
        symbol, off, p, ids = cols[at + 1 + 4 * k: at + 5 + 4 * k]
        if ids == "0000" and symbol in ("@", "@i"):
            (hyper if symbol == "@" else instance).append((p, int(off)))
    return tuple(names), tuple(hyper), tuple(instance)


def senses_of(word: str, pos: str) -> list[tuple[str, int]]:
    """The (pos, offset) of each synset ``wordnet.synsets(word, pos)`` gives, in its order."""
    wn = _wn()
    index = wn._lemma_pos_offset_map
    return [(pos, off) for form in wn._morphy(word.lower(), pos) for off in index[form].get(pos, [])]


def closure(starts, instance: bool) -> tuple[set, set]:
    """The synsets reachable from ``starts`` through hypernyms (and instance hypernyms when ``instance``), the
    starts included, and the lemma names of them all."""
    seen: set = set()
    names: set = set()
    stack = list(starts)
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        lemma_names, hyper, inst = synset_fields(*key)
        names.update(lemma_names)
        stack.extend(hyper)
        if instance:
            stack.extend(inst)
    return seen, names


@lru_cache(maxsize=8)
def synset_key(name: str) -> tuple[str, int]:
    """(pos, offset) of a synset named like "object.n.01"."""
    s = _wn().synset(name)
    return s.pos(), s.offset()
