"""The results store: finding run folders, reading results.json of any schema version, picking values.

Only the standard library is imported here: ``import vlbench.leaderboards`` stays cheap.

Reading is done in three steps:

1. :func:`discover` turns the user's RESULTS arguments (run folders, results.json files, folders
   holding run folders at any depth) into a sorted list of results.json paths;
2. :func:`read_run` reads one file and turns it into a typed :class:`vlbench.results.RunRecord`
   (which upgrades older schema versions, one small function per version in :data:`UPGRADES`, and
   checks what readers rely on). A file that is not valid JSON, not a vlbench
   result, or fails validation raises :class:`UnreadableResults` and is *skipped* by the callers
   (reported by name); a file written by a newer vlbench (unknown major schema version) raises
   :class:`SchemaTooNew`, which is fatal: upgrade vlbench instead of building a partial board;
3. :func:`select` applies the duplicate rule: for each (model hash, dataset name, dataset hash,
   condition) the newest run wins (``created``, then run id, then results hash, then path, so the
   choice never depends on the order of the inputs); the others are listed as superseded. A plain run wins over
   the first stage of a two-stage run (``--rerank``) of the same model whatever their times; the final ranking of
   a two-stage run is a model of its own (:func:`two_stage_views`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VlbenchError
from ..pipeline.rerank.readback import PREFIX, final_record, second_stage
from ..results import (
    MAX_RESULTS_BYTES,
    SCHEMA_VERSION,
    UPGRADES,
    RunRecord,
    SchemaTooNew,
    UnreadableResults,
    parse_created,
    parse_results_text,
    records_hash,
)
from ..runfolder import RESULTS
from .integrity import check_run

RESULTS_FILE = RESULTS  # the name older code imported; the run folder (vlbench.runfolder) owns it
CURRENT_SCHEMA = SCHEMA_VERSION  # the name older code imported; the version lives in vlbench.results
__all__ = ["RESULTS_FILE", "CURRENT_SCHEMA", "UPGRADES", "Run", "RunRecord", "SchemaTooNew", "UnreadableResults",
           "parse_created", "records_hash", "read_run", "discover", "discover_named", "load_runs", "select",
           "Selection", "Loaded",
           "condition_key"]


# ----------------------------------------------------------------------------------------------
# runs

@dataclass(eq=False)
class Run:
    """One results file as read: where it is, its typed record, and how tables name it."""

    path: str
    record: RunRecord
    file_sha256: str = ""
    #: how tables name the run: its run_id, or ``run_id~<file sha256[:8]>`` when several loaded runs
    #: share one run_id (the runner's ids have one-second resolution)
    ref: str = ""
    #: the run folder as the user named it (a RESULTS argument, or below one): what warnings say
    shown: str = ""
    #: flags the integrity checks put on the run (e.g. "unverified: no results_hash")
    integrity: list = field(default_factory=list)
    #: the dataset's name in this build when it differs from the run's own (one content hash, several names:
    #: runset.unify_datasets)
    dataset_alias: str = ""
    #: "final": the final ranking of a two-stage run (``--rerank``), an entry of its own (:func:`two_stage_views`)
    stage: str = ""

    def __post_init__(self):
        self.ref = self.ref or self.record.run_id
        self.shown = self.shown or os.path.dirname(self.path) or self.path

    @property
    def public(self) -> str:
        """The run folder as published: as given when relative, else its last two path parts (no local paths)."""
        return self.shown if not os.path.isabs(self.shown) else "/".join(Path(self.shown).parts[-2:])

    run_id = property(lambda self: self.record.run_id)
    created = property(lambda self: self.record.created)
    model_spec = property(lambda self: self.record.model.spec)
    model_label = property(lambda self: self.record.model.label)
    model_hash = property(lambda self: self.record.model.hash)
    dataset_name = property(lambda self: self.dataset_alias or self.record.dataset.name)
    dataset_hash = property(lambda self: self.record.dataset.hash)
    metric_version = property(lambda self: self.record.metric_version)
    vlbench_version = property(lambda self: self.record.vlbench_version)
    results_hash = property(lambda self: self.record.results_hash)
    original_schema = property(lambda self: self.record.read_schema or str(self.record.schema_version))

    def newness(self) -> tuple:
        """Sort key: larger = newer. Total and independent of the input order."""
        created = parse_created(self.created)
        assert created is not None  # read_results accepts no record without a valid created time
        return (created.isoformat(), self.run_id, self.results_hash, self.file_sha256, self.path)

    def conditions(self) -> list[str]:
        return self.record.condition_names()

    @property
    def first_stage_hash(self) -> str:
        """The model hash of the retriever that ranked the gallery (a final ranking's: its first stage's)."""
        return str(self.record.other["stage"]["first_stage_hash"]) if self.stage == "final" else self.model_hash

    @property
    def reranked(self) -> bool:
        """The first stage of a two-stage run (its final ranking is another Run: :func:`two_stage_views`)."""
        return not self.stage and second_stage(self.record) is not None

    def side_condition(self, condition: str) -> str:
        """The condition's name in the run's per-query and flips files (a final ranking's: ``rerank:<name>``)."""
        return PREFIX + condition if self.stage == "final" else condition

    def values(self, condition: str) -> dict:
        """``{MetricKey(direction, metric, k): value}`` of one condition."""
        return self.record.values_of(condition)

    def condition_meta(self, condition: str) -> dict:
        return self.record.condition(condition).meta


def condition_key(c: str) -> tuple:
    return (c != "clean", c)


def _read_regular(p: str) -> bytes:
    """The bytes of a regular file of bounded size. A FIFO (would block), a device (/dev/zero would never
    end), a folder or an oversized file is refused by name without reading it."""

    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    except OSError as exc:
        raise UnreadableResults(p, f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a device" if
                    stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                    else "not a regular file")
            raise UnreadableResults(p, f"is {kind}, not a results file" +
                                    (f" (a link to {os.path.realpath(p)})" if os.path.islink(p) else ""))
        if st.st_size > MAX_RESULTS_BYTES:
            raise UnreadableResults(p, f"is {st.st_size / 2**20:.0f} MB, larger than any results file "
                                       f"({MAX_RESULTS_BYTES // 2**20} MB at most)")
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_RESULTS_BYTES + 1)
    except OSError as exc:
        raise UnreadableResults(p, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_run(path: str | os.PathLike) -> Run:
    """Read, upgrade and validate one results.json. Raises UnreadableResults or SchemaTooNew."""
    p = str(path)
    raw = _read_regular(p)
    run = Run(p, RunRecord.from_json(parse_results_text(raw, p), p), hashlib.sha256(raw).hexdigest())
    check_run(run)  # values within their metrics' declared ranges, deltas consistent with the values
    return run


def discover(paths) -> list[str]:
    """results.json files named by ``paths``: a file is taken as is; a folder is searched recursively
    for files named results.json (hidden folders and symlinked folders are not entered). Sorted, unique."""
    return sorted(discover_named(paths))


def discover_named(paths) -> dict[str, str]:
    """{absolute results.json path: its run folder as the user named it} (see :func:`discover`)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: dict[str, str] = {}
    for given in paths:
        p = Path(given)
        if p.is_file() or (p.exists() and not p.is_dir()):  # FIFOs, devices: read_run refuses them by name
            named = os.fspath(given)
            found.setdefault(os.path.abspath(p), os.path.dirname(named) if p.name == RESULTS_FILE and
                             os.path.dirname(named) else named)
        elif p.is_dir():
            n = 0
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                if RESULTS_FILE in files:
                    found.setdefault(os.path.abspath(os.path.join(root, RESULTS_FILE)), os.path.normpath(root))
                    n += 1
            if not n:
                raise VlbenchError(f"no {RESULTS_FILE} found under {given}",
                                   "pass run folders written by 'vlbench run', or folders that contain them")
        else:
            raise VlbenchError(f"results path {given} does not exist",
                               "pass run folders, results.json files or folders that contain run folders")
    return found


@dataclass
class Loaded:
    runs: list[Run]
    skipped: list[dict]  # {"path", "reason"}


def load_runs(paths, warn: Callable[[str], None] | None = None) -> Loaded:
    """Discover and read every run; unreadable files are reported through ``warn`` and listed in
    ``skipped``; a file from a newer vlbench (SchemaTooNew) is raised."""
    runs, skipped = [], []
    for f, shown in sorted(discover_named(paths).items()):
        try:
            runs.append(read_run(f))
            runs[-1].shown = shown
        except UnreadableResults as exc:
            if os.path.basename(f) == RESULTS_FILE and os.path.basename(shown) != RESULTS_FILE:
                shown = os.path.join(shown, RESULTS_FILE)  # the file, as the user named its folder
            public = shown if not os.path.isabs(shown) else "/".join(Path(shown).parts[-2:])
            skipped.append({"path": exc.path, "folder": public,
                            "reason": exc.reason.replace(os.path.dirname(exc.path), os.path.dirname(public))})
            if warn:
                warn(f"skipped {shown}: {exc.reason}")
    by_id: dict[str, list[Run]] = {}
    for r in runs:
        by_id.setdefault(r.run_id, []).append(r)
    for same in by_id.values():
        if len(same) > 1:
            for r in same:
                r.ref = f"{r.run_id}~{r.file_sha256[:8]}"
    return Loaded(runs + two_stage_views(runs), skipped)


def two_stage_views(runs: list[Run]) -> list[Run]:
    """The final ranking of every two-stage run (``vlbench run --rerank``) as a Run of its own: another model (the
    first stage's hash, the pair scorer's and K: readback.two_stage_hash), so it is never merged with, nor
    deduplicated against, the plain model's entry; its run id in tables is ``<run id>+<pair scorer>@K<k>``."""
    out = []
    for r in runs:
        rec = final_record(r.record)
        if rec is not None:
            out.append(Run(r.path, rec, r.file_sha256, ref=f"{r.ref}+{second_stage(r.record)}", shown=r.shown,
                           integrity=list(r.integrity), stage="final"))
    return out


# ----------------------------------------------------------------------------------------------
# the duplicate rule

@dataclass
class Selection:
    """Which run provides each value."""

    #: (model_hash, dataset_name, dataset_hash, condition) -> Run
    values: dict[tuple, Run]
    #: (model_hash, dataset_name, dataset_hash) -> Run (the newest run with a model-input analysis)
    mia: dict[tuple, Run]
    #: one entry per run that lost at least one condition
    superseded: list[dict]

    def used_runs(self) -> list[Run]:
        seen = {id(r): r for r in list(self.values.values()) + list(self.mia.values())}
        return sorted(seen.values(), key=lambda r: (r.ref, r.path))


def _precedence(run: Run) -> tuple:
    """Which of a model's runs gives a value (larger first): a plain run before a two-stage run's first stage (the
    same model's numbers: a two-stage run counts for the plain model only where no plain run has the condition),
    then the newest."""
    return (not run.reranked, run.newness())


def _same_values(a: Run, b: Run, condition: str) -> bool:
    return a.values(condition) == b.values(condition)


def select(runs: list[Run]) -> Selection:
    """Apply the duplicate rule (newest run wins per model hash + dataset + condition)."""
    cands: dict[tuple, list[Run]] = {}
    mia_cands: dict[tuple, list[Run]] = {}
    for run in runs:
        base = (run.model_hash, run.dataset_name, run.dataset_hash)
        for c in run.conditions():
            cands.setdefault(base + (c,), []).append(run)
        if run.record.model_input_analysis:
            mia_cands.setdefault(base, []).append(run)
    values: dict = {}
    lost: dict = {}
    for key in sorted(cands):
        group = sorted(cands[key], key=_precedence, reverse=True)
        values[key] = group[0]
        for old in group[1:]:
            lost.setdefault(old.ref, (old, []))[1].append(
                {"condition": key[3], "by": group[0].ref, "same_values": _same_values(old, group[0], key[3])})
    mia = {}
    for key in sorted(mia_cands):
        group = sorted(mia_cands[key], key=Run.newness, reverse=True)
        mia[key] = group[0]
        for old in group[1:]:
            lost.setdefault(old.ref, (old, []))[1].append(
                {"condition": "model_input_analysis", "by": group[0].ref,
                 "same_values": old.record.model_input_analysis == group[0].record.model_input_analysis})
    superseded = []
    for ref in sorted(lost, key=lambda x: (lost[x][0].path, x)):
        old, items = lost[ref]
        used = any(v is old for v in values.values()) or any(v is old for v in mia.values())
        superseded.append({"run_id": old.ref, "path": old.path, "folder": old.public, "created": old.created,
                           "fully": not used,
                           "conditions": sorted(items, key=lambda x: condition_key(x["condition"]))})
    return Selection(values, mia, superseded)
