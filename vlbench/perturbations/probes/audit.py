"""Validity audit of the meaning-changing probes, by a path independent of the generator.

The generator (:mod:`.words`) decides "absent" from the spaCy parse and WordNet base forms. The audit does
not use either: each caption is read as plain lower-case letter runs (``[a-z]+``), and a word counts as
mentioned when it, or a form a hand plural rule gives (``s``, ``es``, ``s -> sses``, ``y -> ies``, ``f/fe ->
ves``, ``-man -> -men``, a short irregular table), is one of those runs. For every applied probe it checks

* ``negation-absent`` / ``half-truth-object`` / ``half-truth-attribute``: the denied or added word is mentioned
  by NO caption of the image (``present`` counts the failures), and shares no WordNet synset with any word of
  those captions (``synonym`` counts the failures; WordNet looked up word by word, every part of speech);
* ``negation-present``: the denied word IS mentioned by the probed caption itself (``not_in_caption``);
* every probe: the probe text holds the denied / added word and the original words in order (``text``).

The replace, swap, count and antonym probes are checked by :mod:`.audit_changes` (same plain reading).
With ``repeat=True`` the probes are made a second time and compared (``deterministic``). Run it on a caption
file (one ``{"image", "captions"}`` object a line): ``python -m vlbench.perturbations.probes.audit FILE``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from functools import lru_cache

from ...lang import wordnet
from .audit_changes import CHANGE_PROBES, CHECKS, check_change
from .make import make_probes

_RUN = re.compile(r"[a-z]+")
_IRREGULAR = {"man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet",
              "tooth": "teeth", "mouse": "mice", "goose": "geese", "ox": "oxen"}


def plain_words(text: str) -> frozenset:
    return frozenset(_RUN.findall(text.lower()))


def hand_forms(word: str) -> set:
    """A noun or adjective with the plural forms a hand rule gives."""
    w = word.lower()
    out = {w, w + "s", w + "es"}
    if w.endswith("s"):  # bus -> busses
        out.add(w + "ses")
    if w.endswith("y"):
        out.add(w[:-1] + "ies")
    if w.endswith("fe"):
        out.add(w[:-2] + "ves")
    elif w.endswith("f"):
        out.add(w[:-1] + "ves")
    if w in _IRREGULAR:
        out.add(_IRREGULAR[w])
    elif w.endswith("man") and len(w) > 3:  # policeman -> policemen, fireman -> firemen
        out.add(w[:-3] + "men")
    return out


@lru_cache(maxsize=200_000)
def _synset_names(word: str) -> frozenset:
    return frozenset(s.name() for s in wordnet().synsets(word))


def shares_synset(word: str, others: frozenset) -> str | None:
    """A word of ``others`` that shares a WordNet synset (any part of speech) with ``word``, or None."""
    mine = _synset_names(word)
    if not mine:
        return None
    for o in sorted(others):
        if o != word and mine & _synset_names(o):
            return o
    return None


def _in_order(original: str, probe: str) -> bool:
    """The original's words appear in the probe in order (articles a/an read as one word)."""
    def norm(t):
        return ["a" if w == "an" else w for w in _RUN.findall(t.lower())]
    it = iter(norm(probe))
    return all(w in it for w in norm(original))


def audit_probes(captions: Sequence[str], images: Sequence[str], sets: dict, examples: int = 3) -> dict:
    """Per probe: counts of applied probes, not-applicable rate and each check's failures (with examples)."""
    words_of: dict[str, set] = {}
    texts_of: dict[str, list] = {}
    for cap, img in zip(captions, images):
        words_of.setdefault(str(img), set()).update(plain_words(cap) if isinstance(cap, str) else ())
        texts_of.setdefault(str(img), []).append(cap if isinstance(cap, str) else "")
    frozen = {img: frozenset(w) for img, w in words_of.items()}
    out = {}
    for name, ps in sets.items():
        fails: dict[str, list] = {"present": [], "synonym": [], "not_in_caption": [], "text": []}
        if name in CHANGE_PROBES:
            fails = {k: [] for k in CHECKS}
        for i, (cap, img, new, ok, meta) in enumerate(zip(captions, images, ps.texts, ps.applicable, ps.meta)):
            if not ok:
                continue
            if name in CHANGE_PROBES:
                for key in check_change(name, cap, new, meta, frozen[str(img)], texts_of[str(img)], hand_forms):
                    fails[key].append(f"{ps.caption_ids[i]}: {cap!r} -> {new!r}")
                continue
            word = meta.get("as_written") or meta.get("denied") or meta.get("added")
            if word is None or word.lower() not in plain_words(new) or not _in_order(cap, new):
                fails["text"].append(ps.caption_ids[i])
                continue
            if name == "negation-present":
                if word.lower() not in plain_words(cap):
                    fails["not_in_caption"].append(ps.caption_ids[i])
                continue
            if hand_forms(word) & frozen[str(img)]:
                fails["present"].append(ps.caption_ids[i])
            syn = shares_synset(word, frozen[str(img)])
            if syn is not None:
                fails["synonym"].append(f"{ps.caption_ids[i]}: {word} ~ {syn}")
        out[name] = {"n_captions": ps.n, "n_applied": ps.n_applicable,
                     "not_applicable_rate": round(ps.not_applicable_rate, 4),
                     "failures": {k: len(v) for k, v in fails.items()},
                     "examples": {k: v[:examples] for k, v in fails.items() if v}}
    return out


def audit_file(path: str, *, seed: int = 0, repeat: bool = True, limit: int | None = None) -> dict:
    """Make every probe of a caption file and audit them (timings in seconds)."""
    captions, ids, images = [], [], []
    with open(path, encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            if limit is not None and k >= limit:
                break
            row = json.loads(line)
            for j, c in enumerate(row["captions"]):
                captions.append(c)
                ids.append(f"{row['image']}#{j}")
                images.append(row["image"])
    t0 = time.perf_counter()
    sets = make_probes(captions, ids, images, seed=seed)
    t1 = time.perf_counter()
    report = {"file": path, "n_images": len(set(images)), "n_captions": len(captions), "seed": seed,
              "seconds_make": round(t1 - t0, 1), "probes": audit_probes(captions, images, sets)}
    report["seconds_audit"] = round(time.perf_counter() - t1, 1)
    if repeat:
        again = make_probes(captions, ids, images, seed=seed)
        report["deterministic"] = all(again[n].texts == s.texts and again[n].meta == s.meta for n, s in sets.items())
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m vlbench.perturbations.probes.audit CAPTIONS.jsonl [LIMIT]", file=sys.stderr)
        return 2
    limit = int(argv[1]) if len(argv) > 1 else None
    print(json.dumps(audit_file(argv[0], limit=limit), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
