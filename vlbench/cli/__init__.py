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

from .. import __version__, lang, registry
from ..config import expand_config
from ..datasets.builtin import download_dataset
from ..errors import OptionError, PluginInterrupt, VlbenchError
from ..pipeline.run_options import (
    REPEAT_RULE,
    RUN_OPTIONS,
    ConfigFileAction,
    add_run_options,
    check_repeats,
    config_from_args,
    flag_of,
    list_flags,
)
from ..tasks.run import SHARED_OPTIONS, TASKS
from ..util import options
from .listing import _cmd_cache, _cmd_ls, columns  # noqa: F401 -- columns: kept importable from vlbench.cli


def _add_run(sub):
    p = sub.add_parser("run", help="evaluate a model on a dataset (optionally under perturbations)",
                       description="Encode every image once and every distinct caption once, compute all retrieval "
                                   "metrics in both directions, and write results.json + per-query values.",
                       epilog=REPEAT_RULE.format(flags=list_flags()))
    row = options.by_field()  # the help of each option: the option table (vlbench/util/options.py)
    p.add_argument("--config", metavar="FILE.toml", default=None, action=ConfigFileAction, help=row["config"].help)

    add_run_options(p)  # one option per RunConfig field, grouped as RunConfig's groups (pipeline/run_options.py)
    kind = p.add_argument_group("kind of run", "a retrieval run takes every option above; a choice task (--task) "
                                               "takes --model, --dataset, " +
                                ", ".join(flag_of(f) for f in SHARED_OPTIONS) + " and refuses the others")
    kind.add_argument("--task", default=None, choices=["retrieval", *TASKS], help=row["task"].help)
    kind.add_argument("--images-dir", default=None, help=row["images_dir"].help)
    kind.add_argument("--perturb-options", default=None, choices=["all", "correct"], help=row["perturb_options"].help)
    p.add_argument("--json", action="store_true", help=row["json"].help)


def _cmd_run(args) -> int:
    check_repeats(args)  # a comma-list option given twice: refused, for a choice task too
    if args.task not in (None, "retrieval"):
        from ..tasks.cli import run_task_from_args  # lazy: vlbench --help imports this module; keep it light

        return _published_check(args, run_task_from_args(args))
    if args.images_dir is not None:
        from ..tasks.cli import images_dir_tasks  # lazy: vlbench --help imports this module; keep it light

        raise VlbenchError(f"--images-dir applies to --task {images_dir_tasks()}, not to a retrieval run",
                           "leave it out, or add --task NAME for one of those tasks")
    if getattr(args, "perturb_options", None) is not None:
        raise VlbenchError("--perturb-options applies to a choice task (--task NAME --perturb SPEC), not to a "
                           "retrieval run", "leave it out (a retrieval run perturbs every caption)")
    if not args.dataset:
        raise VlbenchError("vlbench run needs --dataset", "e.g. --dataset flickr30k (vlbench ls datasets)")
    from ..pipeline import timing  # lazy: vlbench --help imports this module; keep it light
    from ..pipeline.runner import run  # lazy: as above

    if getattr(args, "process_start", None) is not None:  # the run's clock starts with the command: the process's
        # start for the program, main()'s entry when main(argv) is called in a Python process
        timing.note_process_start((timing.process_started() if args.as_program else None) or args.process_start)
    cfg = config_from_args(args)
    res = run(cfg)
    if res is None:  # a non-zero rank of a torchrun launch: rank 0 reports
        return 0
    from ..pipeline.report import print_run_result  # lazy: vlbench --help imports this module; keep it light

    print_run_result(res, as_json=args.json, quiet=args.quiet)
    return _published_check(args, res)


def _published_check(args, res) -> int:
    """After a printed run: measured vs published, when a published row or a set's published scores apply."""
    if not (args.json or args.quiet):
        from ..published.check import check_run  # lazy: vlbench --help imports this module; keep it light
        report = check_run(res.record or res.results)
        if report.applies:
            print("\n" + report.format())
    return 0


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
                                                "exporters", "trackers", "executors", "pair-scorers"])
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
    run's clock starts with the process (its interpreter start-up and imports are the run's ``startup`` stage);
    ``main(argv)`` from Python: the clock starts at this call (reading the options and importing the pipeline are
    ``startup``)."""
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
    # the command's start: main()'s entry, or for the program the kernel's record of the process's start (read when
    # a run starts: _cmd_run)
    args.process_start, args.as_program = entered, as_program
    if as_program:  # NLTK without the SciPy / scikit-learn helpers vlbench never calls (seconds): lang.py
        lang.LEAN_NLTK = True
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
        from ..encoding.cache import interrupted_note  # true for the state reached

        if isinstance(exc, PluginInterrupt):  # Which plug-in's import was interrupted
            print(f"vlbench: {exc}", file=sys.stderr)
        print(f"vlbench: {interrupted_note()}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
