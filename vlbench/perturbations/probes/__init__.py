"""Meaning-changing probes (kind "sensitivity"): caption changes a model SHOULD notice, kept apart from the
meaning-preserving perturbations (kind "invariance": typos, lexical, distraction, word-order).

Probes are not in ``vlbench.perturbations.BUILTINS`` or ``FAMILIES``: ``--perturb all`` and the family
names never select them, and their results carry ``kind: "sensitivity"`` so that a run's family summary and
the leaderboards' "RSUM retained" never average them with invariance families. Unlike a perturbation, a probe
needs every caption of the image (what is "absent"), so it is made by :func:`make_probes` over captions grouped
by image.

* ``negation-absent`` (family negation): "<caption> There is no <obj>." where <obj> is in no caption of the
  image (a true addition);
* ``negation-present`` (family negation): "<caption> There is no <noun>." denying a noun the caption says (a
  contradiction: the original must win);
* ``half-truth-object`` (family half-truth): "<caption> next to a <obj>." with an absent object;
* ``half-truth-attribute`` (family half-truth): a colour no caption mentions before an unmodified noun.
* ``replace-object``, ``replace-attribute``, ``replace-relation`` (family replace, :mod:`.changes`): a noun, an
  adjective, or a spatial preposition / -ing verb replaced by one no caption of the image supports and that is
  never a WordNet synonym of it;
* ``swap-object``, ``swap-attribute`` (family swap, :mod:`.swaps`): two nouns, or the adjectives of two nouns,
  exchanged;
* ``count`` (family count): a number changed to one no caption of the image gives ("a dog" -> "three dogs");
* ``antonym-attribute`` (family antonym): an adjective replaced by a WordNet antonym no caption uses.

Each applied probe records ``meta`` (what was denied or added, against how many captions, and why that changes
the meaning); :func:`audit.audit_probes` checks them by an independent count (:mod:`.audit_changes` for the
replace, swap, count and antonym probes). See docs/perturbations.md,
"Meaning-changing probes".
"""

from __future__ import annotations

from ...errors import VlbenchError
from .make import NEEDS_ABSENCE, PROBES, ProbeSet, check_absence_possible, make_probes, probe_text
from .probe import FORMS, KIND

FAMILIES: dict[str, list[str]] = {}
for _name, _cls in PROBES.items():
    FAMILIES.setdefault(_cls.family, []).append(_name)
del _name, _cls


def resolve_probes(spec: str) -> list[str] | None:
    """Probe names for a ``--perturb`` spec made only of probe names, their families (negation, half-truth,
    replace, swap, count, antonym) or "sensitivity" (all of them); None when the spec names no probe. A spec
    mixing probes and meaning-preserving perturbations is refused (they are different kinds, scored apart)."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    out: list[str] = []
    other: list[str] = []
    for item in items:
        if item == KIND:
            out.extend(PROBES)
        elif item in FAMILIES:
            out.extend(FAMILIES[item])
        elif item in PROBES:
            out.append(item)
        else:
            other.append(item)
    if not out:
        return None
    if other:
        raise VlbenchError(f"--perturb {spec!r} mixes meaning-changing probes with {', '.join(other)}",
                           "probes (kind sensitivity) are made and reported apart: ask for them in a "
                           "separate --perturb")
    return list(dict.fromkeys(out))


__all__ = ["PROBES", "FAMILIES", "KIND", "FORMS", "NEEDS_ABSENCE", "ProbeSet", "make_probes", "probe_text",
           "check_absence_possible", "resolve_probes"]
