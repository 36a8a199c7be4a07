"""The results of a run as typed records: one object that is written, read, upgraded and compared.

``results.json`` is :meth:`RunRecord.to_json` of the record the runner builds, and the leaderboard reads
files only through :meth:`RunRecord.from_json`, which upgrades older schema versions (:data:`UPGRADES`,
one small function per version step) and checks what readers rely on. Values are keyed by
:class:`MetricKey` ``(direction, metric, k)``; the per-condition lookup is built once, in the record.

Design (after MTEB's ``TaskResult`` and lm-evaluation-harness's results schema): the record owns its
schema version and its upgrades, so no other module holds a schema constant or a hand-written checker.
Fields the record does not type (encoding counts, environment, per-query file name, and anything a newer
minor version adds) are kept as given and written back in place, so a file read and written again keeps
its content. Only the standard library is imported: ``import vlbench.leaderboards`` stays cheap.
"""

from __future__ import annotations

# size: module: the record, its schema upgrades and the bounded reading of its file are one unit
import datetime as _dt
import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import VlbenchError
from .runfolder import MAX_RESULTS_BYTES, RECORD_HASH, RESULTS, record_hash, seal  # noqa: F401  seal re-exported
from .util.io import read_regular_file

#: the one results schema version this vlbench writes (minor versions only add fields)
SCHEMA_VERSION = 1
#: the two query directions (image -> caption, caption -> image), in the order every table and file lists
#: them: the one definition every module imports
DIRECTIONS = ("i2t", "t2i")
#: the directions a metric record may name: the two query directions and ``both`` (totals over the two)
RECORD_DIRECTIONS = DIRECTIONS + ("both",)

#: version n -> function turning a version-n document into a version n+1 document
#: (v1 is the first released schema; when v2 comes, add 1: _v1_to_v2 here and type v2 below)
UPGRADES: dict[int, Callable[[dict], dict]] = {}


#: deepest nesting of arrays / objects accepted (the runner writes at most 6 levels)
MAX_NESTING = 64


class UnreadableResults(Exception):
    """A results file that cannot be used (corrupt, truncated, not a vlbench result). Callers skip it."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class SchemaTooNew(VlbenchError):
    """A results file written by a newer vlbench with an unknown major schema version."""


class MetricKey(NamedTuple):
    """Which value: ``("t2i", "recall", 5)``; ``k`` is None for metrics without a cut-off."""

    direction: str
    metric: str
    k: int | None = None


@dataclass(frozen=True)
class MetricValue:
    """One metric value of one condition (NaN is written as null)."""

    condition: str
    key: MetricKey
    value: float | None
    extra: dict = field(default_factory=dict, compare=False)

    def to_json(self) -> dict:
        return {"condition": self.condition, "direction": self.key.direction, "metric": self.key.metric,
                "k": self.key.k, "value": self.value, **self.extra}


@dataclass(frozen=True)
class Delta:
    """The change of one metric under a perturbation against clean: absolute and relative (None if clean is 0)."""

    condition: str
    key: MetricKey
    abs: float | None
    rel: float | None

    def to_json(self) -> dict:
        return {"condition": self.condition, "direction": self.key.direction, "metric": self.key.metric,
                "k": self.key.k, "abs": self.abs, "rel": self.rel}


@dataclass(frozen=True)
class Interval:
    """A paired-bootstrap interval of a metric change (queries resampled); fields as the runner wrote them."""

    condition: str
    fields: dict = field(compare=False)  # direction, metric, delta, ci_low, ci_high, n_boot, alpha, seed

    def get(self, name: str, default=None):
        return self.fields.get(name, default)

    def to_json(self) -> dict:
        return {"condition": self.condition, **self.fields}


@dataclass(frozen=True)
class Condition:
    """One evaluated condition: ``clean`` or a perturbation, with the perturbation's description."""

    name: str
    meta: dict = field(compare=False)  # perturbation, family, version, seed, captions_hash, ...

    @property
    def family(self) -> str:
        return "" if self.name == "clean" else str(self.meta.get("family") or "")


@dataclass(frozen=True)
class ModelInfo:
    """The model: its spec as given, content hash, optional display label and the adapter's identity."""

    spec: str
    hash: str
    fields: dict = field(compare=False)  # everything as written (name, label, identity, ...)

    @property
    def label(self) -> str:
        """The name a leaderboard shows: --model-name, else the spec."""
        label = self.fields.get("label")
        return label if isinstance(label, str) and label.strip() else self.spec


@dataclass(frozen=True)
class DatasetInfo:
    """The dataset: its name and content hash, with its description as written."""

    name: str
    hash: str
    fields: dict = field(compare=False)


# ----------------------------------------------------------------------------------------------
# schema versions

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
    if major > SCHEMA_VERSION:
        raise SchemaTooNew(f"{path} was written with results schema version {doc['schema_version']} but this "
                           f"vlbench reads up to version {SCHEMA_VERSION}",
                           "upgrade vlbench (pip install -U vlbench), or leave this run out of the RESULTS")
    v = major
    while v < SCHEMA_VERSION:
        step = UPGRADES.get(v)
        if step is None:
            raise UnreadableResults(path, f"results schema version {v} is not supported (no upgrade to {v + 1})")
        doc = step(doc)
        v += 1
    return doc


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_results_text(raw: bytes | str, path: str = "<results>") -> dict:
    """The JSON object of a results file, parsed with bounds: strict JSON (no NaN / Infinity literals), at
    most :data:`MAX_NESTING` levels deep (checked iteratively after the C parser, whose own recursion limit
    is caught). Raises UnreadableResults naming what is wrong."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnreadableResults(path, "not UTF-8 text (corrupt file?)") from None
    if not raw.strip():
        raise UnreadableResults(path, "the file is empty")
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise UnreadableResults(path, f"nested deeper than {MAX_NESTING} levels: not a vlbench results file") from None
    except json.JSONDecodeError as exc:
        raise UnreadableResults(path, f"not valid JSON, truncated or corrupt ({exc.msg} at line {exc.lineno} "
                                      f"column {exc.colno})") from None
    except ValueError as exc:
        raise UnreadableResults(path, f"not strict JSON: {exc}") from None
    stack = [(doc, 1)]
    while stack:
        x, depth = stack.pop()
        _need(depth <= MAX_NESTING, path, f"nested deeper than {MAX_NESTING} levels: not a vlbench results file")
        items = x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()
        stack += [(y, depth + 1) for y in items if isinstance(y, (dict, list))]
    return doc


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
    """The hash of the value records as they are written (``results_hash``)."""
    return hashlib.sha256(json.dumps(records, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _hash_matches(records: list, expected: str) -> bool:
    if records_hash(records) == expected:
        return True
    # early runners hashed before strict-JSON cleaning, which turns NaN into null
    nan = [dict(r, value=math.nan) if r.get("value") is None else r for r in records]
    return records_hash(nan) == expected


# ----------------------------------------------------------------------------------------------
# reading: checks (schema v1)

def _need(cond: bool, path: str, what: str) -> None:
    if not cond:
        raise UnreadableResults(path, what)


def _is_str(x) -> bool:
    return isinstance(x, str) and x != ""


def _num_or_none(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _is_k(k) -> bool:
    return k is None or (isinstance(k, int) and not isinstance(k, bool))


def _read_values(doc: dict, path: str) -> list[MetricValue]:
    recs = doc.get("results")
    _need(isinstance(recs, list) and bool(recs), path, "no result records")
    assert isinstance(recs, list)  # _need raised otherwise
    out, seen = [], set()
    for i, r in enumerate(recs):
        ok = (isinstance(r, dict) and _is_str(r.get("condition")) and r.get("direction") in RECORD_DIRECTIONS
              and _is_str(r.get("metric")) and _is_k(r.get("k")) and _num_or_none(r.get("value")))
        _need(ok, path, f"result record {i} is malformed: {str(r)[:120]}")
        key = (r["condition"], r["direction"], r["metric"], r["k"])
        _need(key not in seen, path, f"result record {i} repeats {key}")
        seen.add(key)
        extra = {n: v for n, v in r.items() if n not in ("condition", "direction", "metric", "k", "value")}
        out.append(MetricValue(r["condition"], MetricKey(r["direction"], r["metric"], r["k"]), r["value"], extra))
    if "results_hash" in doc:
        _need(_hash_matches(recs, doc["results_hash"]), path,
              "results_hash does not match the result records (the file was edited or is corrupt)")
    return out


def _read_deltas(items: list) -> list[Delta]:
    return [Delta(x.get("condition"), MetricKey(x.get("direction"), x.get("metric"), x.get("k")),
                  x.get("abs"), x.get("rel")) for x in items]


def _read_intervals(items: list) -> list[Interval]:
    return [Interval(x.get("condition"), {n: v for n, v in x.items() if n != "condition"}) for x in items]


def _read_lists(doc: dict, path: str) -> dict:
    out = {}
    for key in ("deltas", "bootstrap"):
        v = doc.get(key)
        _need(v is None or isinstance(v, list), path, f"'{key}' is not a list")
        out[key] = [x for x in (v or []) if isinstance(x, dict)]
    return out


#: the top-level fields in the order the runner writes them; ``None`` marks the typed ones
_ORDER = ("schema_version", "metric_version", "vlbench_version", "run_id", "created", "wall_time_s", "timings",
          "hardware", "task", "model",
          "dataset", "conditions", "settings", "results", "deltas", "bootstrap", "model_input_analysis",
          "encoding", "caption_issues", "per_query", "per_item", "environment", "results_hash", RECORD_HASH)
_TYPED = {"schema_version", "metric_version", "vlbench_version", "run_id", "created", "model", "dataset",
          "conditions", "settings", "results", "deltas", "bootstrap", "model_input_analysis", "environment"}


@dataclass(eq=False)
class RunRecord:
    """Everything one run wrote. Build one with the constructor (the runner) or :meth:`from_json` (readers)."""

    run_id: str
    created: str
    metric_version: str
    model: ModelInfo
    dataset: DatasetInfo
    conditions: dict[str, Condition]
    values: list[MetricValue]
    deltas: list[Delta] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    model_input_analysis: dict | None = None
    environment: dict = field(default_factory=dict)
    vlbench_version: str | None = None
    schema_version: int | str = SCHEMA_VERSION
    #: the schema version the file was written with (a record read from an older file: that version)
    read_schema: str | None = None
    #: the untyped parts (wall time, encoding, caption issues, per-query file, results hash, newer fields)
    other: dict = field(default_factory=dict)

    def __post_init__(self):
        self._index: dict[str, dict[MetricKey, float | None]] = {}
        for v in self.values:
            self._index.setdefault(v.condition, {})[v.key] = v.value

    # -- lookups -----------------------------------------------------------------------------------
    def condition_names(self) -> list[str]:
        """Conditions with values, clean first, then by name."""
        return sorted(self._index, key=lambda c: (c != "clean", c))

    def values_of(self, condition: str) -> dict[MetricKey, float | None]:
        """``{MetricKey: value}`` of one condition (empty if the run has none)."""
        return self._index.get(condition, {})

    def value(self, condition: str, direction: str, metric: str, k: int | None = None) -> float | None:
        return self._index.get(condition, {}).get(MetricKey(direction, metric, k))

    def condition(self, name: str) -> Condition:
        return self.conditions.get(name) or Condition(name, {})

    @property
    def timings(self) -> dict | None:
        """Stage times (``{"wall_seconds", "stages": {stage: {"seconds", "items", "items_per_s"}}}``), or None
        for runs written before they were recorded (or a malformed entry)."""
        t = self.other.get("timings")
        ok = (isinstance(t, dict) and _num_or_none(t.get("wall_seconds")) and isinstance(t.get("stages"), dict)
              and all(isinstance(v, dict) and _num_or_none(v.get("seconds")) for v in t["stages"].values()))
        return t if ok else None

    @property
    def hardware(self) -> dict | None:
        """Device, GPU name, CPU count, torch / CUDA versions, precision, batch size, workers; None if absent."""
        h = self.other.get("hardware")
        return h if isinstance(h, dict) else None

    @property
    def sealed(self) -> bool:
        """Whether the file carried a :func:`record_hash` (checked when read): runs written before whole
        records were sealed have only ``results_hash``, which proves the metric records alone."""
        return RECORD_HASH in self.other

    @property
    def results_hash(self) -> str:
        return self.other.get("results_hash") or records_hash([v.to_json() for v in self.values])

    # -- writing and reading -----------------------------------------------------------------------
    def to_json(self) -> dict:
        """The results.json document (plain JSON types; NaN stays a float, the writer makes it null)."""
        typed = {"schema_version": self.schema_version, "metric_version": self.metric_version,
                 "vlbench_version": self.vlbench_version, "run_id": self.run_id, "created": self.created,
                 "model": self.model.fields, "dataset": self.dataset.fields,
                 "conditions": {c.name: c.meta for c in self.conditions.values()}, "settings": self.settings,
                 "results": [v.to_json() for v in self.values], "deltas": [d.to_json() for d in self.deltas],
                 "bootstrap": [i.to_json() for i in self.intervals],
                 "model_input_analysis": self.model_input_analysis, "environment": self.environment}
        doc = {}
        for name in _ORDER:
            if name in typed:
                doc[name] = typed[name]
            elif name in self.other:
                doc[name] = self.other[name]
        doc.update({n: v for n, v in self.other.items() if n not in doc})
        return doc

    @classmethod
    def load(cls, path) -> RunRecord:
        """Read a run folder or its results.json (bounded: a regular file of at most 64 MiB, strict JSON,
        bounded nesting). Raises UnreadableResults (e.g. a missing file) or SchemaTooNew."""


        p = os.path.join(path, RESULTS) if os.path.isdir(path) else os.fspath(path)
        if os.path.isdir(path) and not os.path.lexists(p):
            raise UnreadableResults(os.fspath(path), f"is a folder without {RESULTS}: not a run folder written "
                                                     "by 'vlbench run' (or the run did not finish)")
        try:
            raw = read_regular_file(p, MAX_RESULTS_BYTES)
        except OSError as exc:
            raise UnreadableResults(p, f"cannot be read ({exc.strerror or exc})") from None
        return cls.from_json(parse_results_text(raw, p), p)

    @classmethod
    def from_json(cls, doc, path: str = "<results>") -> RunRecord:
        """Upgrade ``doc`` to the current schema and type it. ``doc``: the parsed dict, JSON text (str or
        bytes), or a path (str or os.PathLike) of a run folder or results.json (read by :meth:`load`).
        Raises UnreadableResults (the reason names what is wrong) or SchemaTooNew."""

        if isinstance(doc, os.PathLike) or (isinstance(doc, str) and not doc.lstrip().startswith(("{", "["))):
            return cls.load(doc)
        if isinstance(doc, (str, bytes)):
            doc = parse_results_text(doc, path)
        if not isinstance(doc, dict):
            raise UnreadableResults(path, "not a JSON object: not a vlbench results file")
        original = str(doc.get("schema_version"))
        sealed_as = record_hash(doc) if RECORD_HASH in doc else None  # the document as written, not upgraded
        doc = upgrade(dict(doc), path)
        _need(_is_str(doc.get("run_id")), path, "missing run_id")
        _need(parse_created(doc.get("created")) is not None, path,
              f"'created' is not an ISO date: {doc.get('created')!r}")
        _need(_is_str(doc.get("metric_version")), path, "missing metric_version")
        model, ds = doc.get("model"), doc.get("dataset")
        _need(isinstance(model, dict) and _is_str(model.get("spec")) and _is_str(model.get("hash")), path,
              "missing model spec or hash")
        _need(isinstance(ds, dict) and _is_str(ds.get("name")) and _is_str(ds.get("hash")), path,
              "missing dataset name or hash")
        values = _read_values(doc, path)  # results_hash first: an edited value is named as such
        _need(sealed_as is None or doc[RECORD_HASH] == sealed_as, path,
              "record_hash does not match the record: a field (the model, the dataset, a setting, ...) was edited "
              "after the run wrote it, or the file is corrupt")
        conds = doc.get("conditions")
        _need(isinstance(conds, dict), path, "'conditions' is not an object")
        for c in sorted({v.condition for v in values}):
            _need(c in conds, path, f"condition {c!r} has results but no entry in 'conditions'")
        lists = _read_lists(doc, path)
        mia = doc.get("model_input_analysis")
        _need(mia is None or (isinstance(mia, dict) and isinstance(mia.get("jaccard"), dict)), path,
              "'model_input_analysis' is malformed")
        dicts = {key: doc[key] if isinstance(doc.get(key), dict) else {} for key in ("settings", "environment")}
        return cls(run_id=doc["run_id"], created=doc["created"], metric_version=str(doc["metric_version"]),
                   model=ModelInfo(model["spec"], model["hash"], model),
                   dataset=DatasetInfo(ds["name"], ds["hash"], ds),
                   conditions={n: Condition(n, m if isinstance(m, dict) else {}) for n, m in conds.items()},
                   values=values, deltas=_read_deltas(lists["deltas"]),
                   intervals=_read_intervals(lists["bootstrap"]), settings=dicts["settings"],
                   model_input_analysis=mia, environment=dicts["environment"],
                   vlbench_version=doc.get("vlbench_version"), schema_version=doc["schema_version"],
                   read_schema=original,
                   other={n: v for n, v in doc.items() if n not in _TYPED})
