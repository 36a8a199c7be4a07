"""The ``vlbench`` command line: a thin layer over the Python API.

``vlbench --help`` and ``vlbench ls`` import neither torch nor transformers.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import os
import sys
import time

from . import __version__, registry, stores
from .config import expand_config
from .datasets.builtin import download_dataset
from .errors import OptionError, PluginInterrupt, VlbenchError
from .imageperturb import image_perturbations
from .metrics.specs import describe
from .models.families import ModelFamily, facts_text
from .pipeline.run_options import (
    REPEAT_RULE,
    RUN_OPTIONS,
    ConfigFileAction,
    add_run_options,
    check_repeats,
    config_from_args,
    flag_of,
    list_flags,
)
from .tasks.run import SHARED_OPTIONS, TASKS


def _add_run(sub):
    p = sub.add_parser("run", help="evaluate a model on a dataset (optionally under perturbations)",
                       description="Encode every image once and every distinct caption once, compute all retrieval "
                                   "metrics in both directions, and write results.json + per-query values.",
                       epilog=REPEAT_RULE.format(flags=list_flags()))
    p.add_argument("--config", metavar="FILE.toml", default=None, action=ConfigFileAction,
                   help="read options from a TOML file whose keys are these long option names (batch-size = 32); "
                        "options given here override the file")

    add_run_options(p)  # one option per RunConfig field, grouped as RunConfig's groups (pipeline/run_options.py)
    kind = p.add_argument_group("kind of run", "a retrieval run takes every option above; a choice task (--task) "
                                               "takes --model, --dataset, " +
                                ", ".join(flag_of(f) for f in SHARED_OPTIONS) + " and refuses the others")
    kind.add_argument("--task", default=None, choices=["retrieval", *TASKS],
                      help="retrieval (default), or a compositional choice task: order (ARO word order, captions of "
                           "--dataset), sugarcrepe or sugarcrepe++ (see docs/tasks.md)")
    kind.add_argument("--images-dir", default=None, help="--task sugarcrepe / sugarcrepe++: the COCO val2017 image "
                                                         "folder (default $VLBENCH_COCO_VAL2017 or "
                                                         "<cache>/coco/val2017)")
    kind.add_argument("--perturb-options", default=None, choices=["all", "correct"],
                      help="--task with --perturb: perturb every candidate of an item (all, the default) or only "
                           "its right one(s) (correct); recorded (docs/tasks.md)")
    p.add_argument("--json", action="store_true", help="print the results records as JSON")


def _cmd_run(args) -> int:
    check_repeats(args)  # a comma-list option given twice: refused, for a choice task too
    if args.task not in (None, "retrieval"):
        from .tasks.cli import run_task_from_args  # lazy: vlbench --help imports this module; keep it light

        return run_task_from_args(args)
    if args.images_dir is not None:
        from .tasks.cli import images_dir_tasks  # lazy: vlbench --help imports this module; keep it light

        raise VlbenchError(f"--images-dir applies to --task {images_dir_tasks()}, not to a retrieval run",
                           "leave it out, or add --task NAME for one of those tasks")
    if getattr(args, "perturb_options", None) is not None:
        raise VlbenchError("--perturb-options applies to a choice task (--task NAME --perturb SPEC), not to a "
                           "retrieval run", "leave it out (a retrieval run perturbs every caption)")
    if not args.dataset:
        raise VlbenchError("vlbench run needs --dataset", "e.g. --dataset flickr30k (vlbench ls datasets)")
    from .pipeline import timing  # lazy: vlbench --help imports this module; keep it light
    from .pipeline.runner import run  # lazy: as above

    if getattr(args, "process_start", None) is not None:  # the program: the run's clock starts with the process
        timing.note_process_start(timing.process_started() or args.process_start)
    cfg = config_from_args(args)
    res = run(cfg)
    if res is None:  # a non-zero rank of a torchrun launch: rank 0 reports
        return 0
    from .pipeline.report import print_run_result  # lazy: vlbench --help imports this module; keep it light

    print_run_result(res, as_json=args.json, quiet=args.quiet)
    if not (args.json or args.quiet):
        from .published.check import check_run  # lazy: vlbench --help imports this module; keep it light

        report = check_run(res.record or res.results)
        if report.applies:  # a built-in dataset and a model with a published row: measured vs published
            print("\n" + report.format())
    return 0


def _plugin_problem(entry, check: bool) -> str | None:
    """Why a plug-in entry cannot load, or None. Without --check only whether its module exists (no
    import: 'vlbench ls' stays fast and imports no torch); with --check it is imported."""

    if not isinstance(entry.target, str):
        return None
    module = entry.target.partition(":")[0]
    if not check:
        try:
            top = importlib.util.find_spec(module.split(".")[0])
        except (ImportError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if top is not None else f"module {module!r} is not installed"

    try:
        registry.resolve(entry.target)
    except (Exception, SystemExit) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _model_line(entry, desc: str, check: bool) -> str:
    """A model family's description and static facts, read from its record without loading the model;
    a plug-in's entry point is imported only under --check (a plain loader function has no facts)."""

    family = entry.target
    if isinstance(family, str) and check:
        try:
            family = entry.load()
        except (Exception, SystemExit):
            return desc
    if not isinstance(family, ModelFamily):
        return desc
    return "  ".join(x for x in (desc or family.describe(), facts_text(family)) if x)


def _cmd_ls(args) -> int:
    try:  # lazy: what a broken optional stack breaks is said here, not at vlbench's start
        from . import perturbations  # noqa: F401 -- imported for the perturbations it registers
    except Exception as exc:  # pragma: no cover
        print(f"(perturbations unavailable: {exc})")

    sections = [("models", registry.models), ("datasets", registry.datasets),
                ("perturbations", registry.perturbations), ("image-perturbations", image_perturbations),
                ("protocols", registry.protocols), ("galleries", registry.galleries),
                ("perturbation-variants", registry.perturbation_variants),
                ("granularity-profiles", registry.granularity_profiles), ("reproductions", registry.reproductions),
                ("suites", registry.suites),
                ("executors", registry.executors)]
    want = args.what
    for title, reg in sections:
        if want and want != title:
            continue
        print(f"{title}:")
        for e in reg.entries():
            src = "" if e.source == "builtin" else f"  [{e.source}]"
            fam = e.meta.get("family")
            desc = e.description or ""
            if title == "models":
                desc = _model_line(e, desc, args.check)
            broken = _plugin_problem(e, args.check) if e.source != "builtin" else None
            mark = "!" if broken else " "
            print(f"{mark} {e.name:<34} {('(' + fam + ') ') if fam else ''}{desc}{src}"
                  + (f"  BROKEN: {broken}" if broken else ""))
            if e.meta.get("licence") or e.meta.get("citation"):  # a dataset record's terms and what to cite
                print(f"  {'':<34}   licence: {e.meta.get('licence') or '?'}; cite: {e.meta.get('citation') or '?'}")
        if title == "datasets":
            print(f"  {'custom:<manifest.jsonl>':<34} your own test set: one JSON line per image, "
                  '{"image": "<path relative to the manifest>", "captions": [...]}')
            print(f"  {'hf:<ORG/NAME>[?options]':<34} a Hub image-text dataset (parquet), read through "
                  "huggingface_hub; columns detected unless named (docs/datasets.md)")
        for name, err in reg.plugin_errors.items():
            print(f"  ! {name}: {err}")
    for name, err in registry.study_errors.items():
        print(f"! study {name}: BROKEN: {err}")
    if not want or want == "tasks":
        from .tasks.cli import print_tasks  # lazy: vlbench --help imports this module; keep it light

        print_tasks()
    if not want or want == "metrics":
        print("metrics (name, unit, range, better, directions):")
        for m in describe():
            src = "" if m["source"] == "builtin" else f"  [{m['source']}]"
            if "error" in m:
                print(f"! {m['name']:<16} BROKEN: {m['error']}{src}")
                continue
            name = m["name"] + {"k": "@k", "p": "@p"}.get(m["param"], "")
            print(f"  {name:<16} {m['unit']:<5} {m['better']:<6} {'/'.join(m['directions']):<12} {m['range']}{src}")
    return 0


def _cmd_cache(args) -> int:
    # lazy: vlbench --help imports this module; keep it light
    from .encoding.cache import clear_cache, list_cache, list_perturbation_cache

    if args.action == "ls":
        _print_cache(list_cache(args.cache_dir), list_perturbation_cache(args.cache_dir))
        print(f"stores under {stores.checked_root(args.cache_dir)}:")
        rows = [(r["name"], r["folder"] + "/", r["kind"], r["files"], r["bytes"], r["what"])
                for r in stores.usage(args.cache_dir)]
        for line in columns(("store", "folder", "kind", "files", "bytes", "what"), rows, right=(3, 4)):
            print("  " + line)
    elif args.model_hash is not None:
        n = clear_cache(args.cache_dir, args.model_hash)
        print(f"removed {n} model folder{'' if n == 1 else 's'} (vectors and text keys)")
    else:
        removed = stores.clear(args.cache_dir, downloads=args.downloads)
        print(f"removed {sum(removed.values())} file(s) under {stores.checked_root(args.cache_dir)}: "
              + ", ".join(f"{name} {n}" for name, n in removed.items()))
        kept = [r for r in stores.usage(args.cache_dir) if r["kind"] == "download" and r["files"]]
        if kept:
            print(f"kept downloads: {', '.join(r['name'] for r in kept)}; add --downloads to remove them too")
    return 0


def columns(header: tuple, rows: list, right: tuple = ()) -> list[str]:
    """A plain-text table whose columns line up whatever the cell widths: each column as wide as its widest
    cell, separated by two spaces; the columns in ``right`` (numbers) right-aligned, the last never padded."""
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for r in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        if len(header) - 1 not in right:
            parts[-1] = r[-1]
        out.append("  ".join(parts).rstrip())
    return out


def _print_cache(rows: list, prows: list) -> None:
    if not rows:
        print("the embedding cache is empty")
    else:
        table = [(r["model_hash"], r["model"] or "?", r["modality"], r["vectors"], r["shards"],
                  f"{r['bytes'] / 1e6:.1f}", r["modified"]) for r in rows]
        for line in columns(("model hash", "model", "modality", "vectors", "shards", "MB", "modified"), table,
                            right=(3, 4, 5)):
            print(line)
    print(f"perturbed captions: {len(prows)} cached set(s)")
    if prows:
        ptable = [(r["key"], f"{r['bytes'] / 1e6:.1f}", r["modified"], ", ".join(r["perturbations"])) for r in prows]
        for line in columns(("key", "MB", "modified", "perturbations"), ptable, right=(1,)):
            print("  " + line)


def _cmd_download(args) -> int:
    for name in args.datasets:
        download_dataset(name, args.data_dir, captions_only=args.captions_only)
    return 0


def _lazy_sub(sub, name, module, help_text):
    """Sub-commands implemented in their own part of the package (configure/main)."""
    p = sub.add_parser(name, help=help_text)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # the part is not built yet / broken: say so when used
        p.set_defaults(_func=lambda a, exc=exc: (_ for _ in ()).throw(
            VlbenchError(f"'vlbench {name}' is unavailable: {exc}", "reinstall vlbench")))
        return p
    mod.configure(p)
    p.set_defaults(_func=mod.main)
    return p


def _reproduce_sub(sub):
    """``vlbench reproduce NAME``: one sub-command per registered reproduction (a study's; each entry is a
    module or object with ``configure(parser)`` and ``main(args)``)."""
    p = sub.add_parser("reproduce", help="reproduce published results: " + ", ".join(registry.reproductions.names()),
                       description="Reproduce published results; one sub-command per registered reproduction.")
    which = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    for entry in registry.reproductions.entries():
        q = which.add_parser(entry.name, help=entry.description)
        try:
            target = registry.reproductions.get(entry.name)
        except VlbenchError as exc:  # a broken study: say so when used
            q.set_defaults(_func=lambda a, exc=exc: (_ for _ in ()).throw(exc))
            continue
        target.configure(q)
        q.set_defaults(_func=target.main)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vlbench", description="Evaluation and robustness benchmark for "
                                                                 "image-text retrieval with dual encoders.")
    parser.add_argument("--version", action="version", version=f"vlbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    ls = sub.add_parser("ls", help="list models, datasets, perturbations, metrics, protocols, ... (plug-ins and "
                                   "studies included)")
    ls.add_argument("what", nargs="?", choices=["models", "datasets", "perturbations", "image-perturbations", "tasks",
                                                "metrics", "protocols", "galleries", "perturbation-variants",
                                                "granularity-profiles", "reproductions", "suites",
                                                "executors"])
    ls.add_argument("--check", action="store_true", help="import every plug-in to find broken ones (slower)")
    _lazy_sub(sub, "perturb", "vlbench.perturbations.cli", "write perturbed captions of a dataset, or of one --text")
    _lazy_sub(sub, "granularity", "vlbench.granularity.cli", "granularity statistics of test sets")
    _lazy_sub(sub, "leaderboard", "vlbench.leaderboards.cli", "build and publish leaderboards from run folders")
    _lazy_sub(sub, "compare", "vlbench.compare.cli", "paired comparisons of models on the same dataset's queries")
    _reproduce_sub(sub)
    _lazy_sub(sub, "sweep", "vlbench.sweep.cli", "run a study's grid of runs from a plan or a suite (local, Slurm, "
              "Ray)")
    _lazy_sub(sub, "rescore", "vlbench.rescore.cli", "score a finished run's cached embeddings as other suites do")
    _lazy_sub(sub, "explain", "vlbench.explain.cli", "a static HTML page of the queries a run's perturbations flip")
    _lazy_sub(sub, "analyze", "vlbench.analyze.cli", "which captions make a model brittle: per-query changes vs "
              "caption granularity (bins, regression, fine-grained vs original)")
    _lazy_sub(sub, "export", "vlbench.export.cli", "a finished run as MTEB result files or a Hugging Face model card's "
              "model-index (--push-to-hub opens a pull request)")
    _lazy_sub(sub, "check", "vlbench.published.cli", "a finished run's clean R@k against the published numbers")
    c = sub.add_parser("cache", help="inspect or clear everything vlbench keeps under its cache folder")
    c.add_argument("action", choices=["ls", "clear"])
    c.add_argument("--cache-dir", default=None, help="the cache folder (default $VLBENCH_CACHE_DIR, else "
                                                     "~/.cache/vlbench)")
    c.add_argument("--downloads", action="store_true", help="clear: also remove downloaded datasets and language "
                                                            "data kept under the cache folder")
    c.add_argument("--model-hash", default=None,
                   help="clear only this model's vectors (its hash, or an unambiguous prefix of >= 8 characters)")
    d = sub.add_parser("download", help="download built-in datasets (captions and images) while online")
    d.add_argument("datasets", nargs="+")
    d.add_argument("--data-dir", default=None)
    d.add_argument("--captions-only", action="store_true")
    _lazy_sub(sub, "setup-language-data", "vlbench.langsetup", "check/install the spaCy model, WordNet and NLTK's "
              "tokenizer/tagger data (online, or offline --from a copied nltk_data folder)")
    return parser


def _filesystem_error(exc: OSError) -> str | None:
    """A clear message for a full, read-only or forbidden disk met while writing; None for other errors."""

    what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
            errno.EPERM: "operation not permitted"}.get(exc.errno) if exc.errno is not None else None
    if what is None:
        return None
    where = f" while writing {exc.filename!r}" if exc.filename else ""
    return (f"{what}{where} ({exc.strerror})\n  fix: free space or pick another folder (--out, --cache-dir); "
            f"nothing finished is lost: completed results and cached batches stay, so rerunning the same command "
            f"resumes")


def _cli_text(exc: VlbenchError) -> str:
    """The error as the command line says it: an OptionError names the option's flag (``--batch-size``),
    not the keyword argument the Python API names (``batch_size``)."""

    if not isinstance(exc, OptionError):
        return str(exc)

    flag = exc.flag or next((o.flag for o in RUN_OPTIONS if o.field == exc.option), None)
    return exc.cli_text(flag)


def main(argv=None) -> int:
    """The command line; ``argv`` None: called as the program (the console script, ``python -m vlbench``), so a
    run's clock starts with the process (its interpreter start-up and imports are the run's ``startup`` stage)."""
    entered = time.perf_counter()
    as_program = argv is None
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = expand_config(argv, parser)
    except VlbenchError as exc:
        print(f"vlbench: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    funcs = {"run": _cmd_run, "ls": _cmd_ls, "cache": _cmd_cache, "download": _cmd_download}
    if args.command is None:
        parser.print_help()
        return 2
    func = funcs.get(args.command) or args._func
    if as_program:
        args.process_start = entered  # the kernel's record of the start is read when a run starts (_cmd_run)
    try:
        return int(func(args) or 0)
    except VlbenchError as exc:
        print(f"vlbench: error: {_cli_text(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. 'head', which stopped reading: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        fs = _filesystem_error(exc)
        if fs is None:
            raise
        print(f"vlbench: error: {fs}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # lazy: vlbench --help imports this module; keep it light
        from .encoding.cache import interrupted_note  # true for the state reached

        if isinstance(exc, PluginInterrupt):  # Which plug-in's import was interrupted
            print(f"vlbench: {exc}", file=sys.stderr)
        print(f"vlbench: {interrupted_note()}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
