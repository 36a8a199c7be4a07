"""The results store: finding run folders, reading results.json of any schema version, picking values.

Only the standard library is imported here: ``import vlbench.leaderboards`` stays cheap.

Reading is done in three steps:

1. :func:`discover` turns the user's RESULTS arguments (run folders, results.json files, folders
   holding run folders at any depth) into a sorted list of results.json paths;
2. :func:`read_run` reads one file, upgrades it to the current schema (one small function per older
   version in :data:`UPGRADES`) and validates it. A file that is not valid JSON, not a vlbench
   result, or fails validation raises :class:`UnreadableResults` and is *skipped* by the callers
   (reported by name); a file written by a newer vlbench (unknown major schema version) raises
   :class:`SchemaTooNew`, which is fatal: upgrade vlbench instead of building a partial board;
3. :func:`select` applies the duplicate rule: for each (model hash, dataset name, dataset hash,
   condition) the newest run wins (``created``, then run id, then results hash, then path, so the
   choice never depends on the order of the inputs); the others are listed as superseded.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import VlbenchError

RESULTS_FILE = "results.json"
CURRENT_SCHEMA = 1
DIRECTIONS = ("i2t", "t2i", "both")


class UnreadableResults(Exception):
    """A results file that cannot be used (corrupt, truncated, not a vlbench result). Callers skip it."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class SchemaTooNew(VlbenchError):
    """A results file written by a newer vlbench with an unknown major schema version."""


# ----------------------------------------------------------------------------------------------
# schema versions

#: version n -> function turning a version-n document into a version n+1 document
#: (v1 is the first released schema; when v2 comes, add 1: _v1_to_v2 here and validate v2 below)
UPGRADES: dict[int, Callable[[dict], dict]] = {}


def parse_schema_version(value) -> tuple[int, int]:
    """``1`` -> (1, 0); ``"1.2"`` -> (1, 2). Raises ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value, 0
    if isinstance(value, str):
        parts = value.strip().split(".")
        if 1 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
            return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    raise ValueError(value)


def upgrade(doc: dict, path: str) -> dict:
    """Bring ``doc`` to the current schema. Newer minor versions of the current major are read as the
    current version (minor versions only add fields); a newer major version raises SchemaTooNew."""
    if "schema_version" not in doc:
        raise UnreadableResults(path, "no schema_version: not a vlbench results file")
    try:
        major, _minor = parse_schema_version(doc["schema_version"])
    except ValueError:
        raise UnreadableResults(path, f"schema_version {doc['schema_version']!r} is not a version number") from None
    if major > CURRENT_SCHEMA:
        raise SchemaTooNew(f"{path} was written with results schema version {doc['schema_version']} but this "
                           f"vlbench reads up to version {CURRENT_SCHEMA}",
                           "upgrade vlbench (pip install -U vlbench), or leave this run out of the RESULTS")
    v = major
    while v < CURRENT_SCHEMA:
        step = UPGRADES.get(v)
        if step is None:
            raise UnreadableResults(path, f"results schema version {v} is not supported (no upgrade to {v + 1})")
        doc = step(doc)
        v += 1
    return doc


# ----------------------------------------------------------------------------------------------
# validation (schema v1)

def _need(cond: bool, path: str, what: str) -> None:
    if not cond:
        raise UnreadableResults(path, what)


def _is_str(x) -> bool:
    return isinstance(x, str) and x != ""


def _num_or_none(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def parse_created(s) -> _dt.datetime | None:
    if not isinstance(s, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc)


def records_hash(records) -> str:
    return hashlib.sha256(json.dumps(records, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _hash_matches(records: list, expected: str) -> bool:
    if records_hash(records) == expected:
        return True
    # the runner hashes before strict-JSON cleaning, which turns NaN into null
    nan = [dict(r, value=math.nan) if r.get("value") is None else r for r in records]
    return records_hash(nan) == expected


def validate_v1(doc: dict, path: str) -> dict:
    """Check what the leaderboard relies on; fill optional parts with their empty values."""
    _need(_is_str(doc.get("run_id")), path, "missing run_id")
    _need(parse_created(doc.get("created")) is not None, path, f"'created' is not an ISO date: {doc.get('created')!r}")
    _need(_is_str(doc.get("metric_version")), path, "missing metric_version")
    model, ds = doc.get("model"), doc.get("dataset")
    _need(isinstance(model, dict) and _is_str(model.get("spec")) and _is_str(model.get("hash")), path,
          "missing model spec or hash")
    _need(isinstance(ds, dict) and _is_str(ds.get("name")) and _is_str(ds.get("hash")), path,
          "missing dataset name or hash")
    recs = doc.get("results")
    _need(isinstance(recs, list) and recs, path, "no result records")
    seen = set()
    for i, r in enumerate(recs):
        ok = (isinstance(r, dict) and _is_str(r.get("condition")) and r.get("direction") in DIRECTIONS
              and _is_str(r.get("metric")) and (r.get("k") is None or (isinstance(r["k"], int)
                                                                        and not isinstance(r["k"], bool)))
              and _num_or_none(r.get("value")))
        _need(ok, path, f"result record {i} is malformed: {str(r)[:120]}")
        key = (r["condition"], r["direction"], r["metric"], r["k"])
        _need(key not in seen, path, f"result record {i} repeats {key}")
        seen.add(key)
    if "results_hash" in doc:
        _need(_hash_matches(recs, doc["results_hash"]), path,
              "results_hash does not match the result records (the file was edited or is corrupt)")
    conds = doc.get("conditions")
    _need(isinstance(conds, dict), path, "'conditions' is not an object")
    for c in {r["condition"] for r in recs}:
        _need(c in conds, path, f"condition {c!r} has results but no entry in 'conditions'")
    for key in ("deltas", "bootstrap"):
        v = doc.get(key)
        _need(v is None or isinstance(v, list), path, f"'{key}' is not a list")
        doc[key] = [x for x in (v or []) if isinstance(x, dict)]
    mia = doc.get("model_input_analysis")
    _need(mia is None or (isinstance(mia, dict) and isinstance(mia.get("jaccard"), dict)), path,
          "'model_input_analysis' is malformed")
    for key in ("settings", "environment"):
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
    doc.setdefault("vlbench_version", None)
    return doc


# ----------------------------------------------------------------------------------------------
# runs

@dataclass(eq=False)
class Run:
    path: str
    doc: dict = field(repr=False)
    original_schema: str = "1"
    file_sha256: str = ""
    #: how tables name the run: its run_id, or ``run_id~<file sha256[:8]>`` when several loaded runs
    #: share one run_id (the runner's ids have one-second resolution)
    ref: str = ""

    def __post_init__(self):
        self.ref = self.ref or self.doc["run_id"]

    @property
    def run_id(self) -> str:
        return self.doc["run_id"]

    @property
    def created(self) -> str:
        return self.doc["created"]

    @property
    def model_spec(self) -> str:
        return self.doc["model"]["spec"]

    @property
    def model_label(self) -> str:
        """The name a leaderboard shows: --model-name, else the spec (files before it: the spec)."""
        label = self.doc["model"].get("label")
        return label if isinstance(label, str) and label.strip() else self.model_spec

    @property
    def model_hash(self) -> str:
        return self.doc["model"]["hash"]

    @property
    def dataset_name(self) -> str:
        return self.doc["dataset"]["name"]

    @property
    def dataset_hash(self) -> str:
        return self.doc["dataset"]["hash"]

    @property
    def metric_version(self) -> str:
        return str(self.doc["metric_version"])

    @property
    def vlbench_version(self):
        return self.doc.get("vlbench_version")

    @property
    def results_hash(self) -> str:
        return self.doc.get("results_hash") or records_hash(self.doc["results"])

    def newness(self) -> tuple:
        """Sort key: larger = newer. Total and independent of the input order."""
        return (parse_created(self.created).isoformat(), self.run_id, self.results_hash, self.file_sha256, self.path)

    def conditions(self) -> list[str]:
        return sorted({r["condition"] for r in self.doc["results"]}, key=condition_key)

    def records(self, condition: str) -> list[dict]:
        return [r for r in self.doc["results"] if r["condition"] == condition]

    def condition_meta(self, condition: str) -> dict:
        m = self.doc["conditions"].get(condition)
        return m if isinstance(m, dict) else {}


def condition_key(c: str) -> tuple:
    return (c != "clean", c)


#: results.json files larger than this are refused unread (a real one is well under 10 MB)
MAX_RESULTS_BYTES = 64 * 2**20  # a results.json of a full sweep is a few MB


def _read_regular(p: str) -> bytes:
    """The bytes of a regular file of bounded size. A FIFO (would block), a device (/dev/zero would never
    end), a folder or an oversized file is refused by name without reading it."""
    import stat

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
    if not raw.strip():
        raise UnreadableResults(p, "the file is empty")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UnreadableResults(p, "not UTF-8 text (corrupt file?)") from None
    except json.JSONDecodeError as exc:
        raise UnreadableResults(p, f"not valid JSON, truncated or corrupt ({exc.msg} at line {exc.lineno} "
                                   f"column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise UnreadableResults(p, "not a JSON object: not a vlbench results file")
    original = str(doc.get("schema_version"))
    doc = upgrade(doc, p)
    return Run(p, validate_v1(doc, p), original, hashlib.sha256(raw).hexdigest())


def discover(paths) -> list[str]:
    """results.json files named by ``paths``: a file is taken as is; a folder is searched recursively
    for files named results.json (hidden folders and symlinked folders are not entered). Sorted, unique."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: set[str] = set()
    for given in paths:
        p = Path(given)
        if p.is_file() or (p.exists() and not p.is_dir()):  # FIFOs, devices: read_run refuses them by name
            found.add(os.path.abspath(p))
        elif p.is_dir():
            n = 0
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                if RESULTS_FILE in files:
                    found.add(os.path.abspath(os.path.join(root, RESULTS_FILE)))
                    n += 1
            if not n:
                raise VlbenchError(f"no {RESULTS_FILE} found under {given}",
                                   "pass run folders written by 'vlbench run', or folders that contain them")
        else:
            raise VlbenchError(f"results path {given} does not exist",
                               "pass run folders, results.json files or folders that contain run folders")
    return sorted(found)


@dataclass
class Loaded:
    runs: list[Run]
    skipped: list[dict]  # {"path", "reason"}


def load_runs(paths, warn: Callable[[str], None] | None = None) -> Loaded:
    """Discover and read every run; unreadable files are reported through ``warn`` and listed in
    ``skipped``; a file from a newer vlbench (SchemaTooNew) is raised."""
    runs, skipped = [], []
    for f in discover(paths):
        try:
            runs.append(read_run(f))
        except UnreadableResults as exc:
            skipped.append({"path": exc.path, "reason": exc.reason})
            if warn:
                warn(f"skipped {exc.path}: {exc.reason}")
    by_id: dict[str, list[Run]] = {}
    for r in runs:
        by_id.setdefault(r.run_id, []).append(r)
    for same in by_id.values():
        if len(same) > 1:
            for r in same:
                r.ref = f"{r.run_id}~{r.file_sha256[:8]}"
    return Loaded(runs, skipped)


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


def _same_values(a: Run, b: Run, condition: str) -> bool:
    va = {(r["direction"], r["metric"], r["k"]): r["value"] for r in a.records(condition)}
    vb = {(r["direction"], r["metric"], r["k"]): r["value"] for r in b.records(condition)}
    return va == vb


def select(runs: list[Run]) -> Selection:
    """Apply the duplicate rule (newest run wins per model hash + dataset + condition)."""
    cands: dict[tuple, list[Run]] = {}
    mia_cands: dict[tuple, list[Run]] = {}
    for run in runs:
        base = (run.model_hash, run.dataset_name, run.dataset_hash)
        for c in run.conditions():
            cands.setdefault(base + (c,), []).append(run)
        if run.doc.get("model_input_analysis"):
            mia_cands.setdefault(base, []).append(run)
    values, lost = {}, {}
    for key in sorted(cands):
        group = sorted(cands[key], key=Run.newness, reverse=True)
        values[key] = group[0]
        for old in group[1:]:
            lost.setdefault(old.path, (old, []))[1].append(
                {"condition": key[3], "by": group[0].ref, "same_values": _same_values(old, group[0], key[3])})
    mia = {}
    for key in sorted(mia_cands):
        group = sorted(mia_cands[key], key=Run.newness, reverse=True)
        mia[key] = group[0]
        for old in group[1:]:
            lost.setdefault(old.path, (old, []))[1].append(
                {"condition": "model_input_analysis", "by": group[0].ref,
                 "same_values": old.doc["model_input_analysis"] == group[0].doc["model_input_analysis"]})
    superseded = []
    for path in sorted(lost):
        old, items = lost[path]
        used = any(v is old for v in values.values()) or any(v is old for v in mia.values())
        superseded.append({"run_id": old.ref, "path": path, "created": old.created, "fully": not used,
                           "conditions": sorted(items, key=lambda x: condition_key(x["condition"]))})
    return Selection(values, mia, superseded)
