#!/usr/bin/env python
"""How the guard's word-level threshold was chosen: all-MiniLM-L6-v2 cosine of a caption word
and its WordNet replacement, for word pairs met in COCO outputs of the synonym rules and judged by the
reviewer (an AI assistant, see docs/perturbations.md) as meaning-preserving ("kept") or not ("changed").
Prints each pair's cosine and, per threshold, the share of kept pairs that pass and of changed pairs that
are rejected.

    python scripts/dev/word_threshold.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

KEPT = [("several", "various"), ("car", "automobile"), ("small", "little"), ("large", "big"), ("picture", "image"),
        ("child", "kid"), ("couch", "sofa"), ("plane", "airplane"), ("luggage", "baggage"), ("cargo", "freight"),
        ("rock", "stone"), ("images", "pictures"), ("kids", "children"), ("building", "edifice"),
        ("misty", "hazy"), ("fake", "phony"), ("bearded", "bewhiskered"), ("shiny", "glistening"),
        ("next", "adjacent"), ("tie", "necktie"), ("steeple", "spire"), ("assorted", "mixed"),
        ("pitcher", "hurler"), ("toilet", "john"), ("silly", "wacky"), ("man", "adult male")]
CHANGED = [("group", "radical"), ("girl", "miss"), ("several", "respective"), ("cloudy", "nebulous"),
           ("bottom", "ass"), ("field", "plain"), ("lush", "riotous"), ("key", "central"), ("court", "tribunal"),
           ("view", "position"), ("branch", "subdivision"), ("food", "nutrient"), ("baby", "babe"),
           ("red", "crimson"), ("foul", "disgusting"), ("park", "ballpark"), ("plates", "homes"),
           ("track", "course"), ("area", "country"), ("grass", "gunter grass"), ("black", "bleak"),
           ("tall", "grandiloquent"), ("old", "older")]


def main() -> int:
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no options; --help prints this
    from vlbench.perturbations.drift import encode

    pairs = [(p, "kept") for p in KEPT] + [(p, "changed") for p in CHANGED]
    emb = encode([w for (a, b), _ in pairs for w in (a, b)])
    cos = [float(emb[2 * i] @ emb[2 * i + 1]) for i in range(len(pairs))]
    for ((a, b), lab), c in sorted(zip(pairs, cos), key=lambda x: -x[1]):
        print(f"{a:>10s} -> {b:<14s} {lab:8s} {c:.3f}")
    print(f"{'threshold':>9s} {'kept pass':>10s} {'changed rejected':>17s}")
    for t in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
        kp = sum(c >= t for (_, lab), c in zip(pairs, cos) if lab == "kept")
        cr = sum(c < t for (_, lab), c in zip(pairs, cos) if lab == "changed")
        print(f"{t:9.2f} {kp:5d}/{len(KEPT):<4d} {cr:11d}/{len(CHANGED)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
