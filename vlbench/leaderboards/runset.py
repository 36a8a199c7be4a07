"""Which runs a leaderboard takes: a board that a stray or partial run cannot pollute.

Applied to the readable runs before the duplicate rule (:func:`vlbench.leaderboards.store.select`), in this order;
every run left out is named with its reason (``left_out``), printed by the build and kept in the manifest:

1. **one dataset per content hash**: runs whose ``dataset.hash`` is equal are one dataset, whatever
   ``--dataset-name`` each gave; it is shown under the name most of its runs use (ties: the alphabetically
   first), and the other names are reported as a name conflict (``names``);
2. ``run_set``: a file listing the runs to take (one run folder or run id per line; ``#`` starts a comment);
   every other run is left out, and a line that names no run is an error;
3. ``select``: shell patterns (``fnmatch``) matched against a run's id, its folder as given, its model label
   and spec, and its dataset name; a run that no pattern matches is left out;
4. **limited runs** (``settings.limit`` set: ``vlbench run --limit N``, the first N images) are left out unless
   ``allow_limited``; taken, their dataset is shown as ``NAME [first N images]``;
5. ``latest``: only the newest run (``created``, then run id) of each model hash and dataset hash;
6. **stray runs**: with two or more models in the build, a retrieval run (one with a clean condition) on a
   dataset that no other model of the build ran is *stray* (an exploratory run) and is left out unless
   ``keep_stray``: a board ranks models on the data they share (when no dataset is shared by two models at all,
   nothing is called stray: every model is then marked as partial). A dataset whose name is also used by another
   content hash is never called stray: that is a conflict the comparability check reports (labels.py).

Run folders holding a run's files but no results.json (a run that did not finish, or still runs) are listed as
left out too (:func:`unfinished`): there is nothing in them to take.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OptionError
from ..runfolder import EMBEDDING_KEYS, LOCK, PER_ITEM, PER_QUERY, RESULTS, TABLE
from ..util.io import read_regular_file
from .store import Run

#: files whose presence (without results.json) marks a run folder that did not finish
_RUN_TRACES = (LOCK, PER_QUERY, PER_ITEM, TABLE, EMBEDDING_KEYS)


@dataclass(frozen=True)
class Choice:
    """The user's run selection (``vlbench leaderboard build`` options)."""

    select: tuple[str, ...] = ()
    run_set: str | None = None
    latest: bool = False
    allow_limited: bool = False
    keep_stray: bool = False


@dataclass
class Taken:
    runs: list[Run]
    left_out: list[dict] = field(default_factory=list)  # {"folder", "run_id", "reason"}
    names: list[dict] = field(default_factory=list)  # {"hash", "shown_as", "names": {name: [folders]}}


def limit_of(run: Run) -> int | None:
    """``settings.limit`` of the run (an int), else None."""
    lim = run.record.settings.get("limit")
    return lim if isinstance(lim, int) and not isinstance(lim, bool) else None


def unify_datasets(runs: list[Run]) -> list[dict]:
    """Give every run of one dataset content hash the same dataset name; the conflicts found."""
    by_hash: dict[str, dict[str, list[Run]]] = {}
    for r in runs:
        by_hash.setdefault(r.dataset_hash, {}).setdefault(r.record.dataset.name, []).append(r)
    conflicts = []
    for h in sorted(by_hash):
        names = by_hash[h]
        if len(names) < 2:
            continue
        shown = min(names, key=lambda n: (-len(names[n]), n))
        for rs in names.values():
            for r in rs:
                r.dataset_alias = shown
        conflicts.append({"hash": h, "shown_as": shown,
                          "names": {n: sorted({r.public for r in rs}) for n, rs in sorted(names.items())}})
    return conflicts


#: a run-set file larger than this is refused unread (a line per run: 100,000 runs are a few MB)
MAX_RUN_SET_BYTES = 16 * 2**20


def _read_run_set(path: str) -> list[str]:
    try:  # a regular file of a bounded size, as every run file (a FIFO would block, /dev/zero never ends)
        text = read_regular_file(path, MAX_RUN_SET_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError("--run-set", f"cannot read {path} ({exc})", "give a text file with one run folder or "
                                                                      "run id per line") from None
    return [x for x in (line.split("#", 1)[0].strip() for line in text.splitlines()) if x]


def _in_run_set(run: Run, entry: str) -> bool:
    folder = os.path.dirname(run.path)
    return entry in (run.run_id, run.ref, run.shown, run.public) or (
        os.path.abspath(entry) in (folder, run.path))


def _matches(run: Run, pattern: str) -> bool:
    names = (run.run_id, run.shown, run.public, run.model_label, run.model_spec, run.record.dataset.name,
             run.dataset_name)
    return any(fnmatch.fnmatchcase(str(n), pattern) for n in names)


def _leave(left: list[dict], run: Run, reason: str) -> None:
    left.append({"folder": run.public, "run_id": run.ref, "reason": reason})


def _stray(runs: list[Run], left: list[dict]) -> list[Run]:
    retrieval = [r for r in runs if "clean" in r.conditions()]
    models = {r.first_stage_hash for r in retrieval}  # a two-stage run's final ranking: not another model on its data
    if len(models) < 2:
        return runs
    by_ds: dict[str, set[str]] = {}
    hashes_of_name: dict[str, set[str]] = {}
    for r in retrieval:
        by_ds.setdefault(r.dataset_hash, set()).add(r.first_stage_hash)
        hashes_of_name.setdefault(r.dataset_name, set()).add(r.dataset_hash)
    if all(len(ms) == 1 for ms in by_ds.values()):  # no dataset in common at all: nothing to rank on, keep all
        return runs
    stray = {h for h, ms in by_ds.items() if len(ms) == 1}
    keep = []
    for r in runs:
        if r in retrieval and r.dataset_hash in stray and len(hashes_of_name[r.dataset_name]) == 1:
            _leave(left, r, f"stray: the only model on dataset {r.dataset_name} [{r.dataset_hash[:8]}]; no other "
                            "model of this build ran it (--keep-stray takes it)")
        else:
            keep.append(r)
    return keep


def _latest(runs: list[Run], left: list[dict]) -> list[Run]:
    newest: dict[tuple, Run] = {}
    for r in runs:
        key = (r.model_hash, r.dataset_hash)
        if key not in newest or r.newness() > newest[key].newness():
            newest[key] = r
    keep = []
    for r in runs:
        best = newest[(r.model_hash, r.dataset_hash)]
        if r is best:
            keep.append(r)
        else:
            _leave(left, r, f"not the latest run of its model and dataset (--latest took {best.public})")
    return keep


def choose(runs: list[Run], choice: Choice, warn: Callable[[str], None] | None = None) -> Taken:
    """The runs a build takes, the ones it leaves out (with the reason) and the dataset-name conflicts."""
    names = unify_datasets(runs)
    for c in names:
        if warn:
            warn(f"dataset {c['hash'][:8]} has {len(c['names'])} names (" + "; ".join(
                f"{n}: {', '.join(f)}" for n, f in c["names"].items()) + f"): one dataset, shown as {c['shown_as']}")
    left: list[dict] = []
    keep = list(runs)
    if choice.run_set:
        entries = _read_run_set(choice.run_set)
        unknown = [e for e in entries if not any(_in_run_set(r, e) for r in runs)]
        if unknown:
            raise OptionError("--run-set", f"{choice.run_set} names runs that are not among the inputs: "
                                           f"{', '.join(unknown[:5])}" + (" ..." if len(unknown) > 5 else ""),
                              "list run folders (as given) or run ids of the RESULTS passed to the build")
        keep, out = [r for r in keep if any(_in_run_set(r, e) for e in entries)], \
            [r for r in keep if not any(_in_run_set(r, e) for e in entries)]
        for r in out:
            _leave(left, r, f"not in the run set {os.path.basename(choice.run_set)}")
    if choice.select:
        for r in [r for r in keep if not any(_matches(r, p) for p in choice.select)]:
            _leave(left, r, "not matched by --select " + " ".join(choice.select))
        keep = [r for r in keep if any(_matches(r, p) for p in choice.select)]
    for r in list(keep):
        n = limit_of(r)
        if n is None:
            continue
        if choice.allow_limited:
            r.dataset_alias = f"{r.dataset_name} [first {n} images]"
        else:
            keep.remove(r)
            _leave(left, r, f"limited: --limit {n} (the first {n} images only; --allow-limited takes it)")
    if choice.latest:
        keep = _latest(keep, left)
    if not choice.keep_stray:
        keep = _stray(keep, left)
    left.sort(key=lambda x: (x["folder"], x["run_id"]))
    return Taken(keep, left, names)


def unfinished(paths) -> list[dict]:
    """Run folders under ``paths`` that hold a run's files but no results.json: a run that did not finish (or
    is still running). Hidden and symlinked folders are not entered, as in discovery."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for given in paths:
        p = Path(given)
        if not p.is_dir():
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if RESULTS not in files and any(f in files for f in _RUN_TRACES):
                shown = os.path.normpath(root)
                public = shown if not os.path.isabs(shown) else "/".join(Path(shown).parts[-2:])
                out.append({"folder": public, "run_id": "", "reason": "not finished: run files but no "
                            f"{RESULTS} (the run stopped early or still runs)"})
    return sorted(out, key=lambda x: x["folder"])
