"""``vlbench granularity``: the granularity table of one or more datasets (captions only; no image is needed).

Prints the table (one row per feature, one column per dataset) and writes to ``--out``:

* ``granularity.csv`` / ``granularity.md``: the table (CSV first column ``feature``);
* ``granularity_diff.csv`` / ``granularity_diff.md``: fine-grained minus original for each requested
  pair (coco/coco-fg, flickr30k/flickr30k-fg), with seeded bootstrap confidence intervals;
* ``granularity_captions.csv``: the per-caption values and counts;
* ``granularity_excluded.csv``: captions left out (empty, no letters, non-Latin script) and why;
* ``granularity_summary.json``: options, caption counts, model versions, timings.

The module imports nothing heavy: argument parsing stays instant.
"""

from __future__ import annotations

import argparse
import sys

from .. import registry
from ..errors import VlbenchError

DEFAULT_OUT = "runs/granularity"


def _digits(s: str) -> int:
    try:
        n = int(s)
    except ValueError:
        n = -1
    if not 0 <= n <= 12:
        raise argparse.ArgumentTypeError(f"--digits takes a whole number from 0 to 12, got {s!r}")
    return n


def _pair(s: str) -> tuple[str, str]:
    a, sep, b = s.partition(",")
    if not sep and ":" in s and "custom:" not in s:  # coco:coco-fg
        a, sep, b = s.partition(":")
    a, b = a.strip(), b.strip()
    if sep and a and b:
        return a, b
    raise argparse.ArgumentTypeError(f"--pair takes ORIGINAL,FINE_GRAINED (e.g. coco,coco-fg), got {s!r}")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Granularity statistics of caption sets: adjectives, complement "
                          "phrases, articles and quantifiers (per caption or per noun: --profile), WordNet concept "
                          "depth, caption length, words per caption and concept diversity, averaged over captions; for "
                          "coco/coco-fg "
                          "and flickr30k/flickr30k-fg, the difference with bootstrap confidence intervals. "
                          "Feature readings: docs/granularity.md.")
    g = parser.add_argument_group("input and output")
    g.add_argument("--dataset", "--datasets", dest="datasets", nargs="+", required=True, metavar="NAME",
                   help="coco, coco-fg, flickr30k, flickr30k-fg, coco-1k or custom:<manifest.jsonl>")
    g.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    g.add_argument("--data-dir", default=None, help="folder with the caption files (default: $VLBENCH_DATA_DIR "
                                                    "or ~/.cache/vlbench/data)")
    g.add_argument("--pair", dest="pairs", action="append", type=_pair, default=None, metavar="ORIG,FG",
                   help="compare these two requested datasets, written as in --dataset (repeatable; default: "
                        "coco,coco-fg and flickr30k,flickr30k-fg when both are requested)")
    g.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples for the difference CIs "
                                                               "(0: none; default 1000)")
    g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    g.add_argument("--ci", type=float, default=0.95, help="confidence level, strictly between 0 and 1 "
                                                               "(default 0.95)")
    g.add_argument("--limit", type=int, default=None, help="only the first N captions of each dataset (quick look)")
    g.add_argument("--batch-size", type=int, default=1000, help="spaCy batch size (default 1000)")
    g.add_argument("--n-process", type=int, default=1, help="spaCy worker processes (default 1; see docs)")
    g.add_argument("--digits", type=_digits, default=3, help="decimals in the printed/Markdown tables (0-12)")
    g.add_argument("--quiet", action="store_true", help="print only the table")
    g.add_argument("--unpaired", action="store_true",
                   help="compare pairs whose image sets differ, resampling each independently (default: a "
                        "pair must describe the same images, matched by image path in any order)")
    _feature_options(parser)


def _feature_options(parser: argparse.ArgumentParser) -> None:
    f = parser.add_argument_group("feature readings (a profile sets them all; the options below override "
                                  "single readings; docs/granularity.md)")
    f.add_argument("--profile", choices=registry.Names(registry.granularity_profiles), default=None,
                   help="per-caption (default): NP features per caption, participles and predicative adjectives "
                        "counted, CPs inside noun phrases, numerals as quantifiers, depth of nouns and verbs, "
                        "distinct concepts per caption; per-noun: NP features per identified noun with the "
                        "definitions' readings; others: registered profiles (a study's reading of its table)")
    f.add_argument("--np-unit", choices=["noun", "caption"], default=None,
                   help="adjectives, CPs, articles, quantifiers per identified noun (per-noun profile) or per "
                        "caption (per-caption profile)")
    f.add_argument("--normalize", choices=["none", "fg"], default=None,
                   help="analyse captions as released (default) or in the FG release's form "
                        "(lowercase, no punctuation) so originals and FG versions are formatted alike")
    f.add_argument("--noun-pos", default=None, help="parts of speech of nouns (default NOUN,PROPN)")
    f.add_argument("--compounds-as-nouns", action="store_true", default=None,
                   help="count compound modifiers ('motor' in 'motor bike') as nouns of their own")
    f.add_argument("--participles", action="store_true", default=None,
                   help="count attributive participles ('a crocheted hat') as adjectives (per-caption profile)")
    f.add_argument("--predicative", action="store_true", default=None,
                   help="count predicative adjectives ('the dog is brown') as adjectives of the subject "
                        "(per-caption profile)")
    f.add_argument("--cp-relations", default=None,
                   help="dependency relations from a noun that make a complement phrase (default prep,acl,relcl)")
    f.add_argument("--cp-scope", choices=["noun", "np", "caption"], default=None,
                   help="complement phrases attached to a noun (per-noun profile), anywhere inside its "
                        "phrase (per-caption profile) or anywhere in the caption (paper profile)")
    f.add_argument("--quantifier-set", choices=["all", "numerals"], default=None,
                   help="quantifiers: numerals, quantifying words and 'a lot of' & co. (per-noun profile) or the "
                        "numerals only (per-caption profile)")
    f.add_argument("--no-phrasal-quantifiers", dest="phrasal_quantifiers", action="store_false", default=None,
                   help="treat 'a lot of', 'a couple of', ... as nouns, not quantifiers")
    f.add_argument("--depth-synsets", choices=["max", "min", "mean", "first"], default=None,
                   help="a word's depth: max (default), min or mean over its synsets, or its first synset")
    f.add_argument("--depth-measure", choices=["min_depth", "max_depth"], default=None,
                   help="per-synset depth (default min_depth: shortest hypernym path to the root)")
    f.add_argument("--depth-pos", default=None, help="words with a depth: NOUN (per-noun profile) or NOUN,VERB "
                                                         "(per-caption profile)")
    f.add_argument("--no-multiword", dest="multiword", action="store_false", default=None,
                   help="do not look noun compounds up as WordNet multiwords ('fire_hydrant')")
    f.add_argument("--length-unit", choices=["chars", "chars_nospace", "words"], default=None,
                   help="caption length in characters (default), characters without spaces, or words")
    f.add_argument("--word-unit", choices=["token", "whitespace"], default=None,
                   help="a word is a spaCy token with a letter or digit (default) or a whitespace-separated chunk")
    f.add_argument("--diversity", choices=["synonyms", "first_sense", "lemmas", "synonym_pool", "concepts"],
                   default=None,
                   help="concept diversity: distinct concepts among all words, per caption (concepts, per-caption "
                        "profile), or per word: distinct content concepts with WordNet synonyms merged "
                        "(synonyms, per-noun profile), distinct first senses, distinct lemmas, or the size of "
                        "the WordNet synonym pool")


FEATURE_ARGS = ("np_unit", "normalize", "noun_pos", "compounds_as_nouns", "participles", "predicative",
                "cp_relations", "cp_scope", "quantifier_set", "phrasal_quantifiers", "depth_synsets",
                "depth_measure", "depth_pos", "multiword", "length_unit", "word_unit", "diversity")


def main(args) -> int:
    from .pairing import check_bootstrap_settings  # lazy: vlbench --help imports this module; keep it light
    from .table import check_out_dir, granularity_report  # lazy: vlbench --help imports this module; keep it light

    check_bootstrap_settings(args.bootstrap, args.seed, args.ci)  # before anything is loaded or parsed
    check_out_dir(args.out)
    if args.limit is not None and args.limit < 1:
        raise VlbenchError("--limit must be >= 1")
    if args.batch_size < 1 or args.n_process < 1:
        raise VlbenchError("--batch-size and --n-process must be >= 1")
    say = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    opts = {k: getattr(args, k) for k in FEATURE_ARGS if getattr(args, k) is not None}
    rep = granularity_report(args.datasets, data_dir=args.data_dir,
                             pairs="auto" if args.pairs is None else args.pairs, n_boot=args.bootstrap,
                             seed=args.seed, ci=args.ci, batch_size=args.batch_size, n_process=args.n_process,
                             limit=args.limit, progress=say, profile=args.profile,
                             pairing="independent" if args.unpaired else "image", **opts)
    files = rep.write(args.out)
    print(rep.table_markdown(digits=args.digits))
    if rep.differences is not None and not rep.differences.empty:
        print()
        print(rep.differences_markdown(digits=args.digits))
    if not args.quiet:
        print()
        print(rep.exclusions_text(limit=5))
        print(f"\n{rep.meta['seconds']['total']:.1f} s; written: {', '.join(str(p) for p in files)}")
    return 0


def _standalone(argv=None) -> int:  # python -m vlbench.granularity.cli ...
    parser = argparse.ArgumentParser(prog="vlbench granularity")
    configure(parser)
    args = parser.parse_args(argv)
    try:
        return main(args)
    except VlbenchError as exc:
        print(f"vlbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_standalone())
