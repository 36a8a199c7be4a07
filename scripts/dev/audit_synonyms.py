#!/usr/bin/env python
"""Audit the two synonym perturbations on the 25,000 MS-COCO 5k test captions.

For ``synonym-noun`` and ``synonym-adjective`` with default settings (and, with ``--before``, with the
version-1.0 rule ``choice="first"``) prints the applicability rate and the counts of
(a) capitalised lemma for a lower-case word, (b) new adjacent repeated word, (c) replacement that is only
an inflection of the word, (d) change of grammatical number (nouns) / degree (adjectives), (e) a new
a/an error, (f) a replacement that is a word already in the caption (or a form of one) and (g) a
replacement that is the base of a derived word or the reverse ("bluish" -> "blue"), classified by
:mod:`vlbench.perturbations.synonym_audit` from a word diff of original and perturbed caption (independent
of how the candidates were chosen). Also counts the replacements listed in the issue ("grass" -> "Gunter
Grass", "fire hydrant" -> "firing hydrant", ...).

    python scripts/dev/audit_synonyms.py [--dataset coco] [--data-dir DIR] [--before] [--examples 5] [--json FILE]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/_captions.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# (original word(s), replacement) pairs named by the first review of the synonym perturbations, matched on the word diff (lower case)
ISSUE_PAIRS = [("grass", "gunter grass"), ("horse", "equus caballus"), ("water", "h2o"), ("bride", "bridget"),
               ("sand", "george sand"), ("cook", "james cook"), ("fire", "firing"), ("hot", "raging"),
               ("close", "near"), ("men", "work force"), ("black", "bleak"), ("other", "early"),
               ("several", "respective"), ("tall", "grandiloquent"), ("old", "older")]
KINDS = {"synonym-noun": "noun", "synonym-adjective": "adjective"}
CHECKS = ("capitalised", "repeat", "inflection", "number", "article", "present", "derivation")


def audit(captions, ids, choice: str | None, n_examples: int) -> dict:
    import vlbench.perturbations as P
    from vlbench.perturbations.synonym_audit import classify, replacements

    params = {n: ({"choice": choice} if choice else {}) for n in KINDS}
    t0 = time.perf_counter()
    sets = P.perturb_captions(captions, ids, list(KINDS), params=params)
    seconds = time.perf_counter() - t0
    out = {}
    for name, kind in KINDS.items():
        ps = sets[name]
        counts = {c: 0 for c in CHECKS}
        issue = {f"{a} -> {b}": 0 for a, b in ISSUE_PAIRS}
        examples = {c: [] for c in CHECKS}
        for orig, new, ok in zip(captions, ps.texts, ps.applicable):
            if not ok:
                continue
            flags = classify(orig, new, kind)
            for c in CHECKS:
                if flags[c]:
                    counts[c] += 1
                    if len(examples[c]) < n_examples:
                        examples[c].append([orig, new])
            reps = {(o.lower(), n.lower()) for o, n in replacements(orig, new)}
            for a, b in ISSUE_PAIRS:
                if (a, b) in reps or (a.split()[0], b) in reps:
                    issue[f"{a} -> {b}"] += 1
        out[name] = {"choice": ps.params["choice"], "n_captions": len(captions), "n_applicable": ps.n_applicable,
                     "applicable_rate": ps.n_applicable / len(captions), "counts": counts,
                     "issue_examples": {k: v for k, v in issue.items() if v}, "examples": examples}
    out["_seconds"] = seconds
    return out


def show(label: str, res: dict) -> None:
    print(f"== {label} (perturb_captions {res['_seconds']:.1f} s)")
    print(f"{'perturbation':20s} {'applicable':>16s} {'(a) cap':>8s} {'(b) rep':>8s} {'(c) infl':>8s} "
          f"{'(d) num':>8s} {'(e) a/an':>8s} {'(f) pres':>8s} {'(g) deriv':>9s}")
    for name in KINDS:
        r = res[name]
        c = r["counts"]
        print(f"{name:20s} {r['n_applicable']:6d} ({100 * r['applicable_rate']:5.2f} %) {c['capitalised']:8d} "
              f"{c['repeat']:8d} {c['inflection']:8d} {c['number']:8d} {c['article']:8d} {c['present']:8d} "
              f"{c['derivation']:9d}")
        if r["issue_examples"]:
            print("   replacements named by the first review:", ", ".join(f"{k} ({v})" for k, v in r["issue_examples"].items()))
        for check, ex in r["examples"].items():
            for o, n in ex:
                print(f"   [{check}] {o!r} -> {n!r}")


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("--before", action="store_true", help="also audit the version-1.0 rule (choice=first)")
    ap.add_argument("--examples", type=int, default=5, help="flagged examples printed per check")
    ap.add_argument("--json", metavar="FILE", default=None)
    args = ap.parse_args()

    from vlbench.datasets.core import load_dataset

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    results = {}
    if args.before:
        results["before (choice=first)"] = audit(ds.captions, ds.caption_ids, "first", args.examples)
    results["after (default)"] = audit(ds.captions, ds.caption_ids, None, args.examples)
    for label, res in results.items():
        show(label, res)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
