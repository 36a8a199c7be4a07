"""``vlbench leaderboard build|publish``. Imports nothing heavy until a command runs."""

from __future__ import annotations

import argparse

from ..errors import VlbenchError

_RESULTS_HELP = ("run folders, results.json files, or folders that contain run folders (searched recursively)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Build leaderboards (clean retrieval, RSUM per perturbation and model-input analysis as CSV "
                          "and Markdown, one static HTML page, PNG and SVG plots) from run folders, and lay them out "
                          "for publishing.")
    sub = parser.add_subparsers(dest="lb_command", metavar="ACTION")
    b = sub.add_parser("build", help="build tables, page and plots from run results",
                       description="Build CSV, Markdown and LaTeX tables, index.html and PNG + SVG plots from "
                                   "results.json files. It prints the runs it took and those it left out, with "
                                   "the reason (stray runs, --limit runs, unfinished run folders, runs not "
                                   "selected). Unreadable results files are skipped with a warning and listed in "
                                   "build_manifest.json. Duplicate runs: the newest per model, dataset and "
                                   "condition wins.")
    b.add_argument("results", nargs="+", metavar="RESULTS", help=_RESULTS_HELP)
    b.add_argument("--out", required=True, help="output folder (new, empty, or an earlier build: rewritten)")
    b.add_argument("--allow-mixed", action="store_true",
                   help="put runs side by side even when a dataset's content hash or the metric version differ "
                        "(their rows are flagged 'mixed')")
    b.add_argument("--no-plots", action="store_true", help="skip the plots (PNG and SVG)")
    b.add_argument("--keep-local-paths", action="store_true",
                   help="keep local paths in model specs (default: clip:/home/u/my-clip is shown as clip:my-clip)")
    b.add_argument("--analysis", action="append", default=[], metavar="DIR",
                   help="a 'vlbench analyze' output folder (or its analysis_regression.csv) to show as the caption "
                        "brittleness table; repeatable")
    b.add_argument("--comparison", action="append", default=[], metavar="RECORD",
                   help="a 'vlbench compare' record (comparison.json or its folder) to show as the paired "
                        "comparisons table; repeatable")
    _selection_options(b)
    p = sub.add_parser("publish", help="lay out a built leaderboard (or RESULTS) as a folder to commit/upload",
                       description="Write one folder per table with a README.md giving the provenance of every "
                                   "row, plus index.html, plots and manifests.")
    p.add_argument("results", nargs="*", metavar="RESULTS", help=_RESULTS_HELP + " (instead of --from)")
    p.add_argument("--from", dest="build_dir", metavar="BUILD", default=None,
                   help="a folder written by 'vlbench leaderboard build'")
    p.add_argument("--out", required=True, help="output folder (new, empty, or an earlier publish: rewritten)")
    p.add_argument("--allow-mixed", action="store_true", help="as for build (with RESULTS)")
    p.add_argument("--no-plots", action="store_true", help="as for build (with RESULTS)")
    p.add_argument("--keep-local-paths", action="store_true",
                   help="publish local paths of model specs (default: only the folder's name)")
    _selection_options(p)
    parser.set_defaults(_lb_parser=parser)


def _selection_options(b: argparse.ArgumentParser) -> None:
    g = b.add_argument_group("which runs (docs/leaderboards.md, 'Which runs a build takes'; publish: with RESULTS)")
    g.add_argument("--select", action="append", default=[], metavar="PATTERN",
                   help="take only runs whose run id, folder, model or dataset name matches this shell pattern "
                        "(e.g. 'runs/final-*', 'clip*'); repeatable (any pattern matches)")
    g.add_argument("--run-set", default=None, metavar="FILE",
                   help="take only the runs listed in FILE (one run folder or run id per line, # comments)")
    g.add_argument("--latest", action="store_true",
                   help="take only the newest run of each model and dataset (older ones are left out whole)")
    g.add_argument("--allow-limited", action="store_true",
                   help="take runs made with 'vlbench run --limit N' (left out by default: the first N images "
                        "only); their dataset is shown as 'NAME [first N images]'")
    g.add_argument("--keep-stray", action="store_true",
                   help="take stray runs: runs on a dataset no other model of the build ran (left out by "
                        "default when the build holds two or more models)")


def _choice(args):
    from .runset import Choice  # lazy: vlbench --help imports this module; keep it light

    return Choice(select=tuple(args.select), run_set=args.run_set, latest=args.latest,
                  allow_limited=args.allow_limited, keep_stray=args.keep_stray)


def _print_taken(res) -> None:
    m = res.manifest
    print(f"leaderboard: took {len(m['runs'])} run(s), {len(m['superseded'])} superseded, "
          f"{len(m['skipped'])} skipped, {len(res.left_out)} left out; wrote {len(res.files)} files to {res.out}")
    for r in m["runs"]:
        stages = f" [the first stage of {r['first_stage_of']}]" if r.get("first_stage_of") else \
            f" [{r['stages']}]" if r.get("stages", "dual") != "dual" else ""
        print(f"  took      {r['folder']} ({r['run_id']}): {r['model']}{stages} on {r['dataset_label']}")
    for x in res.left_out:
        print(f"  left out  {x['folder']}" + (f" ({x['run_id']})" if x["run_id"] else "") + f": {x['reason']}")
    for s in m["skipped"]:
        print(f"  skipped   {s['folder']}: {s['reason']}")


def main(args) -> int:
    from .build import build_leaderboard, stderr_warn  # lazy: vlbench --help imports this module; keep it light

    cmd = getattr(args, "lb_command", None)
    if cmd == "build":
        res = build_leaderboard(args.results, args.out, allow_mixed=args.allow_mixed, plots=not args.no_plots,
                                warn=stderr_warn, keep_paths=args.keep_local_paths, comparisons=args.comparison,
                                analyses=args.analysis,
                                choice=_choice(args))
        _print_taken(res)
        return 0
    if cmd == "publish":
        from .publish import publish_leaderboard  # lazy: vlbench --help imports this module; keep it light

        if args.build_dir and args.results:
            raise VlbenchError("give either --from BUILD or RESULTS, not both",
                               "vlbench leaderboard publish --from BUILD --out DIR")
        if not args.build_dir and not args.results:
            raise VlbenchError("nothing to publish", "pass --from BUILD (a built leaderboard) or RESULTS folders")
        files = publish_leaderboard(args.out, build_dir=args.build_dir, paths=args.results or None,
                                    allow_mixed=args.allow_mixed, plots=not args.no_plots, warn=stderr_warn,
                                    keep_paths=args.keep_local_paths, choice=_choice(args))
        print(f"published {len(files)} files to {args.out}")
        return 0
    args._lb_parser.print_help()
    return 2
