"""Building blocks shared by every perturbation: the per-caption RNG, parsed tokens, word units,
parameter handling and the result container :class:`PerturbedSet`.

This module is cheap to import (standard library only).

Plug-in protocol
----------------
A perturbation is an object with

* ``name`` (kebab-case str), ``family`` (str), ``version`` (str; bump it whenever outputs change),
* ``params`` (dict, JSON-able: every parameter with its effective value),
* ``needs_parse`` (bool: True when ``apply`` needs part-of-speech tags),
* ``apply(text, *, rng, tokens=None) -> str | None``: the perturbed caption, or ``None`` when the
  perturbation cannot apply to this caption ("not applicable"). ``rng`` is a :class:`CaptionRNG`
  private to (seed, perturbation name, caption id); ``tokens`` is a tuple of :class:`Token` (spaCy
  tokens reduced to text / offset / Penn tag / UPOS / trailing whitespace) when ``needs_parse``;
* optionally ``languages``: ISO 639-1 codes of the caption languages it handles (absent / None: any;
  :func:`vlbench.perturbations.check_language` refuses the others).

The entry point (group ``vlbench.perturbations``) names a class or factory; vlbench calls it with the
user's parameters as keyword arguments (``Factory(**params)``). The engine, not the plug-in, enforces
the common rules: empty input -> not applicable; a result equal to the input, ``None`` or empty ->
not applicable and the caption is kept unchanged.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import NamedTuple

from ..errors import VlbenchError

# ----------------------------------------------------------------------------------------------
# deterministic per-caption randomness

def caption_key(seed: int, name: str, caption_id: str) -> str:
    return f"{int(seed)}/{name}/{caption_id}"


class CaptionRNG:
    """A small portable random stream: SHA-256 in counter mode over a key.

    Block i of the stream is ``sha256(sha256(key) || i as 8-byte big-endian)``; it is read as four
    64-bit big-endian unsigned integers. Integers below n are drawn by rejection (unbiased), so the
    stream, and every draw made from it, is the same on any machine and Python version (unlike
    ``random.Random``, whose helper algorithms may change between versions).
    """

    __slots__ = ("_root", "_counter", "_buf")

    def __init__(self, key: str):
        self._root = hashlib.sha256(key.encode("utf-8")).digest()
        self._counter = 0
        self._buf: list[int] = []

    @classmethod
    def for_caption(cls, seed: int, name: str, caption_id: str) -> CaptionRNG:
        return cls(caption_key(seed, name, caption_id))

    def _u64(self) -> int:
        if not self._buf:
            block = hashlib.sha256(self._root + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._buf = [int.from_bytes(block[i:i + 8], "big") for i in (24, 16, 8, 0)]
        return self._buf.pop()

    def randbelow(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        if n <= 0:
            raise ValueError("randbelow(n) needs n >= 1")
        if n == 1:
            return 0
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self._u64()
            if x < limit:
                return x % n

    def random(self) -> float:
        """Uniform float in [0, 1) with 53 random bits."""
        return (self._u64() >> 11) / float(1 << 53)

    def choice(self, seq: Sequence):
        if not seq:
            raise IndexError("choice from an empty sequence")
        return seq[self.randbelow(len(seq))]

    def shuffle(self, items: list) -> None:
        """Fisher-Yates, in place, from the last position down."""
        for i in range(len(items) - 1, 0, -1):
            j = self.randbelow(i + 1)
            items[i], items[j] = items[j], items[i]

    def permutation(self, n: int) -> list[int]:
        out = list(range(n))
        self.shuffle(out)
        return out

    def sample(self, seq: Sequence, k: int) -> list:
        """k distinct elements, in draw order (partial Fisher-Yates)."""
        pool = list(seq)
        if not 0 <= k <= len(pool):
            raise ValueError("sample larger than population")
        for i in range(k):
            j = i + self.randbelow(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


# ----------------------------------------------------------------------------------------------
# parsed tokens and word units

class Token(NamedTuple):
    """One spaCy token, reduced to what perturbations use."""
    text: str
    idx: int  # character offset in the caption
    tag: str  # fine-grained Penn Treebank tag (spaCy ``tag_``)
    pos: str  # coarse universal tag of the Penn tag (the model's tag map; spaCy ``pos_`` minus token exceptions)
    ws: str  # trailing whitespace

    @property
    def end(self) -> int:
        return self.idx + len(self.text)


NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
ADJ_TAGS = frozenset({"JJ", "JJR", "JJS"})
# clitics that spaCy splits off a host word inside one whitespace-delimited chunk
CLITICS = frozenset({"'s", "'", "’s", "’", "n't", "n’t", "'re", "’re", "'ve", "’ve", "'ll", "’ll", "'d", "’d",
                     "'m", "’m"})


@cache
def is_punct_char(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def is_punct_text(s: str) -> bool:
    return bool(s) and all(is_punct_char(c) for c in s)


class Unit(NamedTuple):
    """A word unit: a whitespace-delimited chunk minus the punctuation at its two ends."""
    start: int
    end: int
    text: str


_CHUNK = re.compile(r"\S+")


@lru_cache(maxsize=65536)
def word_units(text: str) -> tuple[Unit, ...]:
    """The word units of ``text``, left to right.

    A chunk is a maximal run of non-whitespace characters. Its leading and trailing punctuation
    characters (Unicode category P*) are stripped; what remains, if anything, is the unit. So
    ``"Bridge."`` -> ``Bridge``, ``"(red)"`` -> ``red``, ``"man's"`` / ``"t-shirt"`` stay whole,
    and a chunk of punctuation only (``"-"``, ``"..."``) is no unit.
    """
    units = []
    for m in _CHUNK.finditer(text):
        a, b = m.span()
        while a < b and is_punct_char(text[a]):
            a += 1
        while b > a and is_punct_char(text[b - 1]):
            b -= 1
        if a < b:
            units.append(Unit(a, b, text[a:b]))
    return tuple(units)


def render_units(text: str, units: Sequence[Unit], new_texts: Sequence[str]) -> str:
    """``text`` with unit k's characters replaced by ``new_texts[k]``; everything else kept."""
    out, pos = [], 0
    for u, t in zip(units, new_texts):
        out.append(text[pos:u.start])
        out.append(t)
        pos = u.end
    out.append(text[pos:])
    return "".join(out)


def unit_tokens(units: Sequence[Unit], tokens: Sequence[Token]) -> list[list[Token]]:
    """For each unit, the tokens that overlap it (tokens never cross whitespace)."""
    out: list[list[Token]] = [[] for _ in units]
    k = 0
    nu = len(units)
    for tok in tokens:
        if not tok.text.strip():
            continue
        end = tok.idx + len(tok.text)
        while k < nu and units[k].end <= tok.idx:
            k += 1
        j = k
        while j < nu and units[j].start < end:
            out[j].append(tok)
            j += 1
    return out


def is_content(tok: Token) -> bool:
    """Not a punctuation token and not a clitic (possessive 's, n't, 're, ...)."""
    return tok.tag != "POS" and tok.text.lower() not in CLITICS and not is_punct_text(tok.text)


def content_tokens(toks: Sequence[Token]) -> list[Token]:
    """A unit's tokens without punctuation tokens and clitics."""
    return [t for t in toks if is_content(t)]


def unit_tag(toks: Sequence[Token]) -> str:
    """The Penn tag of a word unit: the tag of its last content token (English compounds are
    head-final: ``t-shirt`` -> ``shirt`` NN, ``ten-year-old`` -> ``old`` JJ, ``man's`` -> ``man`` NN).
    Falls back to the last token's tag, or "" for a unit without tokens."""
    content = content_tokens(toks)
    if content:
        return content[-1].tag
    return toks[-1].tag if toks else ""


class UnitInfo(NamedTuple):
    unit: Unit
    tokens: tuple  # tokens overlapping the unit
    content: tuple  # the same without punctuation and clitics
    tag: str  # unit_tag()


@lru_cache(maxsize=65536)
def analyze_units(text: str, tokens: tuple) -> tuple[UnitInfo, ...]:
    """Word units of ``text`` with their tokens, content tokens and tag (cached: the shuffles and the
    synonym perturbations of one caption share it)."""
    units = word_units(text)
    out = []
    for u, toks in zip(units, unit_tokens(units, tokens)):
        content = tuple(t for t in toks if is_content(t))
        tag = content[-1].tag if content else (toks[-1].tag if toks else "")
        out.append(UnitInfo(u, tuple(toks), content, tag))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# parameters

def merge_params(name: str, defaults: dict, given: dict | None) -> dict:
    """Defaults overridden by ``given``; an unknown key is an error naming the close ones."""
    params = dict(defaults)
    for key, value in (given or {}).items():
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=3, cutoff=0.5)
            hint = (f"did you mean {', '.join(repr(c) for c in close)}? " if close else "") + \
                f"{name} takes {', '.join(sorted(defaults)) or 'no parameters'}"
            raise VlbenchError(f"unknown parameter {key!r} for perturbation {name!r}", hint)
        params[key] = value
    return params


def check_choice(name: str, key: str, value, allowed: Sequence) -> None:
    if value not in allowed:
        raise VlbenchError(f"perturbation {name!r}: parameter {key}={value!r} is not allowed",
                           f"use one of {', '.join(repr(a) for a in allowed)}")


def check_int(name: str, key: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise VlbenchError(f"perturbation {name!r}: parameter {key}={value!r} must be an integer >= {minimum}",
                           f"pass e.g. {key}={max(minimum, 1)}")
    return value


def check_bool(name: str, key: str, value) -> bool:
    if not isinstance(value, bool):
        raise VlbenchError(f"perturbation {name!r}: parameter {key}={value!r} must be true or false",
                           f"pass {key}=true or {key}=false")
    return value


class BasePerturbation:
    """Base class of the built-ins (plug-ins may use it, or follow the protocol above)."""

    name: str = ""
    family: str = ""
    version: str = "1"
    needs_parse: bool = False
    defaults: dict = {}

    def __init__(self, **params):
        self.params = merge_params(self.name, self.defaults, params)
        self.validate()

    def validate(self) -> None:  # check self.params; raise VlbenchError
        pass

    def apply(self, text: str, *, rng: CaptionRNG, tokens: tuple[Token, ...] | None = None) -> str | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<perturbation {self.name} v{self.version} {self.params}>"


# ----------------------------------------------------------------------------------------------
# results

def captions_hash(caption_ids: Sequence[str], texts: Sequence[str]) -> str:
    """sha256 over the JSON list of [caption_id, text] pairs (compact, UTF-8)."""
    payload = json.dumps([[i, t] for i, t in zip(caption_ids, texts)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class PerturbedSet:
    """One perturbation applied to a list of captions (same length and order as the input)."""

    name: str
    family: str
    version: str
    params: dict
    seed: int
    caption_ids: list[str]
    texts: list[str]
    applicable: list[bool]
    source: str = "builtin"
    n_empty_input: int = 0  # captions that were empty / had no letters or digits (counted as not applicable)
    n_rejected: int = 0  # outputs the engine refused (empty result); counted as not applicable
    resources: dict = field(default_factory=dict)  # versions of the tagger / WordNet the output depends on
    not_applicable_reasons: dict = field(default_factory=dict)  # guarded synonyms: no_candidate, refused_by_guard

    @property
    def n(self) -> int:
        return len(self.texts)

    @property
    def n_applicable(self) -> int:
        return sum(1 for a in self.applicable if a)

    @property
    def n_not_applicable(self) -> int:
        return self.n - self.n_applicable

    @property
    def not_applicable_rate(self) -> float:
        return self.n_not_applicable / self.n if self.n else 0.0

    def captions_hash(self) -> str:
        return captions_hash(self.caption_ids, self.texts)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "family": self.family,
            "version": self.version,
            "source": self.source,
            "params": dict(self.params),
            "seed": self.seed,
            "n_captions": self.n,
            "n_applicable": self.n_applicable,
            "n_not_applicable": self.n_not_applicable,
            "not_applicable_rate": self.not_applicable_rate,
            "n_empty_input": self.n_empty_input,
            "n_rejected_output": self.n_rejected,
            "captions_hash": self.captions_hash(),
            "resources": dict(self.resources),
            **({"not_applicable_reasons": dict(self.not_applicable_reasons)} if self.not_applicable_reasons else {}),
        }

    def reason_line(self) -> str | None:
        """One console line saying why captions were left unchanged, when the perturbation recorded it."""
        r = self.not_applicable_reasons
        if not r or not self.n_not_applicable:
            return None
        return (f"{self.name}: left {self.n_not_applicable} of {self.n} captions unchanged: {r.get('no_candidate', 0)} "
                f"had no eligible word with a common same-sense synonym, {r.get('refused_by_guard', 0)} had candidates "
                f"the semantic guard refused (MiniLM cosine below threshold), {self.n_empty_input} were empty")

    def rows(self, originals: Sequence[str], images: Sequence[str | None] | None = None) -> list[dict]:
        """One JSON-able row per caption: caption_id, image, original, perturbed, applicable."""
        images = images if images is not None else [None] * self.n
        return [{"caption_id": cid, "image": img, "original": o, "perturbed": t, "applicable": a}
                for cid, img, o, t, a in zip(self.caption_ids, images, originals, self.texts, self.applicable)]

    def __repr__(self) -> str:
        return (f"PerturbedSet({self.name!r} v{self.version}, {self.n} captions, "
                f"{self.n_not_applicable} not applicable)")


def usable_text(text) -> bool:
    """A caption the perturbations may touch: a string with at least one letter or digit."""
    return isinstance(text, str) and any(unicodedata.category(c)[0] in "LN" for c in text)

