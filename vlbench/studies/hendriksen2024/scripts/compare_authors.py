#!/usr/bin/env python
"""Measure the differences between vlbench's perturbations, the authors' code and ARO.

1. keyboard maps: vlbench's QWERTY neighbours vs the ``typo`` package's (``NEIGHBORINGLETTERS``), as
   unordered letter pairs: how many each has, which pairs only one of them has, and asymmetric entries;
2. where the authors' typos land: they build ``typo.StrErrer(caption, seed=42)`` for every caption, so the
   random position depends only on the caption's number of ``\\w`` characters; on the COCO captions, the
   share where missing-char, extra-char and nearby-char edit the same position (first differing character);
3. ARO's trigrams: ARO cuts NLTK tokens (punctuation and clitics are tokens) into trigrams; vlbench cuts
   word units (punctuation stays in place, ``man's`` is one unit). Share of COCO captions whose trigram
   partition of the words differs (NLTK's Treebank word tokenizer, which ``word_tokenize`` applies after
   sentence splitting; captions are one sentence).

    python vlbench/studies/hendriksen2024/scripts/compare_authors.py [--dataset coco] [--data-dir DIR]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))


def keyboard() -> None:
    from typo.keyboardlayouts.en_default import NEIGHBORINGLETTERS as TYPO

    from vlbench.perturbations.typos import QWERTY

    def pairs(m):
        return {frozenset((a, b)) for a, ns in m.items() for b in ns if a != b and a.isalpha() and b.isalpha()}

    ours, theirs = pairs(QWERTY), pairs(TYPO)
    d_ours = {(a, b) for a, ns in QWERTY.items() for b in ns}
    d_theirs = {(a, b) for a, ns in TYPO.items() for b in ns}
    print(f"keyboard (directed a->b entries): vlbench {len(d_ours)}, typo package {len(d_theirs)}; "
          f"{len(d_ours - d_theirs)} only in vlbench, {len(d_theirs - d_ours)} only in typo")
    asym = sorted(f"{a}->{b}" for a, ns in TYPO.items() for b in ns if a not in TYPO.get(b, []))
    print(f"keyboard: vlbench {len(ours)} neighbour pairs, typo package {len(theirs)}; "
          f"{len(ours - theirs)} only in vlbench, {len(theirs - ours)} only in typo")
    print("  only in vlbench:", " ".join(sorted("".join(sorted(p)) for p in ours - theirs)))
    if theirs - ours:
        print("  only in typo:", " ".join(sorted("".join(sorted(p)) for p in theirs - ours)))
    print(f"  typo's one-way entries ({len(asym)}):", " ".join(asym))


def _first_diff(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def typo_positions(captions) -> None:
    from vlbench.studies.hendriksen2024.compat import typo_compat

    same = n = 0
    for c in captions:
        if len(re.findall(r"\w", c)) < 2:
            continue
        pos = {_first_diff(c, typo_compat(name, c)) for name in ("missing-char", "extra-char", "nearby-char")}
        n += 1
        same += len(pos) == 1
    print(f"authors' typos: missing-, extra- and nearby-char change the same first position in {same} of {n} "
          f"captions ({100 * same / n:.1f} %); the drawn index is the same in all (one randint after seed 42)")


def trigram_partitions(captions) -> None:
    """Two figures: (1) the trigram blocks differ at all (ARO's blocks of NLTK tokens, punctuation and
    clitic tokens included, vs vlbench's blocks of word units); (2) the words are grouped differently: each
    word unit gets the block of the first ARO token inside it, and the resulting grouping of the units is
    compared with vlbench's (unit i in block i // 3)."""
    from nltk.tokenize import NLTKWordTokenizer

    from vlbench.perturbations.base import word_units

    tok = NLTKWordTokenizer()
    any_diff = word_diff = n = 0
    for c in captions:
        units = word_units(c)
        spans = list(tok.span_tokenize(c))
        if not units or not spans:
            continue
        n += 1
        ours = [tuple(u.text for u in units[i:i + 3]) for i in range(0, len(units), 3)]
        theirs = [tuple(c[a:b] for a, b in spans[i:i + 3]) for i in range(0, len(spans), 3)]
        any_diff += ours != theirs
        block = [next((j // 3 for j, (a, b) in enumerate(spans) if a < u.end and b > u.start), -1) for u in units]
        same_ours = [i // 3 == (i - 1) // 3 for i in range(1, len(units))]
        same_aro = [block[i] == block[i - 1] for i in range(1, len(units))]
        word_diff += same_ours != same_aro
    print(f"ARO trigrams: blocks differ from vlbench's in {any_diff} of {n} captions ({100 * any_diff / n:.1f} %); "
          f"the words are grouped differently in {word_diff} ({100 * word_diff / n:.1f} %)")


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    args = ap.parse_args()
    from vlbench.datasets.core import load_dataset

    keyboard()
    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    caps = [c for c in ds.captions if isinstance(c, str) and c.strip()]
    typo_positions(caps)
    trigram_partitions(caps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
