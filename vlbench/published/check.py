"""A finished run's clean Recall@k checked against the published numbers of the same model and dataset.

``check_run(results) -> CheckReport`` (results: a results.json dict, its path or run folder, or a
``RunRecord``). For every shipped row (``table.rows_for``) of the run's model on the run's built-in
dataset it compares each published R@k with the run's clean R@k of the same direction (within
``tolerance`` percentage points), and compares the protocol facts the row was measured under with the
run's, read from results.json (settings, protocol, hardware, the model's identity): each fact is
``same``, ``differs`` or ``unknown`` (the row or the run does not say). The report passes when every
compared number of at least one row is within the tolerance and that row's weights are the run's: the weights are a
protocol fact (the Hub at a commit or a library's named download; a local folder by its content hash), and a local
folder, even one named like the Hub repository (``./openai/clip-vit-base-patch32`` in the working directory is read
for ``clip:openai/clip-vit-base-patch32``), never passes as the released checkpoint (status ``off``, column "other
weights").

The dataset is matched by content only: the pinned sha256 of the built-in caption file the run read
(``dataset.source.caption_sha256``), never by its name, so a custom set run with ``--dataset-name flickr30k``
has no published numbers. The one exception is a multilingual set whose caption file vlbench cannot pin (XM3600):
a run of it is matched by what the set's loader recorded (every language, every caption, the released images;
multilingual.py). A two-stage row (``rerank``: a pair scorer re-scoring the first stage's top K) is compared only
with a run whose settings name the same ``rerank`` and ``rerank_k``. A run file whose values no hash proves (no
``results_hash``: typed in or written by another tool) is not compared: its status is ``unverified`` (exit 1), as
the leaderboard flags such runs.
A file with ``results_hash`` but no ``record_hash`` (written before whole records were sealed) is checked,
with a note that its model and dataset fields are not proven.

A choice-task run (results.json ``task.name``) is checked against the published task scores instead
(:mod:`.task_scores`: matched by task, item set and model; each published score within ``tolerance``).

``vlbench check RUN`` prints :meth:`CheckReport.format` (exit 0 pass, 1 off, 2 no row applies), and
``vlbench run`` (with or without ``--task``) prints it after the table when a row applies. For a leaderboard column:
``check_run(rec).column()`` ("pass", "off 3.0", "other weights", or "" when no row applies) and ``.status``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from ..datasets.specs import SPECS
from ..errors import OptionError
from ..models.identity import weights_source
from ..results import RunRecord
from .multilingual import language_set, language_set_mismatch
from .report import format_report
from .table import FACT_LABELS, FACTS, FactCheck, PublishedRow, rows_for, stages_text
from .task_scores import task_name, task_rows

#: default tolerance, percentage points of R@k (open_clip measured with AMP on GPU; fp32 on CPU moves R@1 of
#: a 1k set by a few tenths at most)
TOLERANCE = 1.0
_BUILTIN_BY_SHA: dict[str, str] = {}
for _s in SPECS:
    _BUILTIN_BY_SHA.setdefault(_s.sha256, _s.name)


@dataclass(frozen=True)
class MetricCheck:
    direction: str
    k: int
    published: float
    measured: float | None  # None: the run has no such value (e.g. other k)
    within: bool | None  # None: not compared

    @property
    def diff(self) -> float | None:
        return None if self.measured is None else self.measured - self.published


@dataclass(frozen=True)
class RowCheck:
    row: PublishedRow
    metrics: list
    facts: list

    @property
    def numbers_within(self) -> bool:
        compared = [m for m in self.metrics if m.within is not None]
        return bool(compared) and all(m.within for m in compared)

    @property
    def other_weights(self) -> FactCheck | None:
        """The weights fact when the run's weights are not the row's (a local folder, random weights), else None."""
        return next((f for f in self.facts if f.fact == "weights" and f.status == "differs"), None)

    @property
    def passed(self) -> bool:
        """Every compared number within the tolerance, measured with the row's weights: numbers of a local folder
        (one named like the Hub repository included) never pass as the published checkpoint's."""
        return self.numbers_within and self.other_weights is None

    def worst(self) -> float | None:
        diffs = [abs(m.diff) for m in self.metrics if m.diff is not None]
        return max(diffs) if diffs else None

    def to_json(self) -> dict:
        return {"id": self.row.id, "citation": self.row.citation(), "passed": self.passed,
                "metrics": [{"direction": m.direction, "k": m.k, "published": m.published, "measured": m.measured,
                             "within": m.within} for m in self.metrics],
                "facts": [vars(f) for f in self.facts]}


@dataclass(frozen=True)
class CheckReport:
    """The check of one run: ``rows`` (one RowCheck per applicable published row), or ``reason`` when none."""

    model: str
    dataset: str
    tolerance: float
    rows: list = field(default_factory=list)
    reason: str = ""
    #: why the run's values are not compared although rows apply (no hash proves them); "" when they are
    unverified: str = ""
    notes: list = field(default_factory=list)

    @property
    def applies(self) -> bool:
        return bool(self.rows)

    @property
    def passed(self) -> bool:
        return not self.unverified and any(r.passed for r in self.rows)

    @property
    def status(self) -> str:
        """"pass", "off", "unverified" (no hash proves the run's values) or "none" (no published row applies)."""
        if not self.rows:
            return "none"
        return "unverified" if self.unverified else "pass" if self.passed else "off"

    def column(self) -> str:
        """A leaderboard cell: "pass", "off <largest |difference|>", "other weights" (the numbers are within, the
        weights are not the published ones), "unverified", or "" when no row applies."""
        if not self.rows:
            return ""
        if self.unverified:
            return "unverified"
        if self.passed:
            return "pass"
        if any(getattr(r, "numbers_within", False) and getattr(r, "other_weights", None) for r in self.rows):
            return "other weights"
        worst = min((w for w in (r.worst() for r in self.rows) if w is not None), default=None)
        return "off" if worst is None else f"off {worst:.1f}"

    def exit_code(self) -> int:
        return {"pass": 0, "off": 1, "unverified": 1, "none": 2}[self.status]

    def to_json(self) -> dict:
        return {"model": self.model, "dataset": self.dataset, "tolerance": self.tolerance, "status": self.status,
                "reason": self.reason or None, "unverified": self.unverified or None, "notes": list(self.notes),
                "rows": [r.to_json() for r in self.rows]}

    def format(self) -> str:
        return format_report(self)


def builtin_dataset(rec: RunRecord) -> str | None:
    """The built-in dataset a run used, by its caption file's pinned sha256 only (whatever --dataset-name
    said), ``coco-1k`` for the COCO file read in folds, None for any other data."""
    src = rec.dataset.fields.get("source") or {}
    name = _BUILTIN_BY_SHA.get(str(src.get("caption_sha256"))) if isinstance(src, dict) else None
    if name in ("coco", "coco-1k"):
        return "coco-1k" if rec.dataset.fields.get("folds") else "coco"
    return name


def _identity(rec: RunRecord) -> dict:
    ident = rec.model.fields.get("identity")
    return ident if isinstance(ident, dict) else {}


def _protocol(rec: RunRecord) -> dict:
    p = rec.settings.get("protocol")
    return p if isinstance(p, dict) else {}


def _tokens(text: str) -> int | None:
    m = re.search(r"(\d+) tokens", text or "")
    return int(m.group(1)) if m else None


def _fact_recall(rec, row):
    run = _protocol(rec).get("i2t_recall") or rec.settings.get("i2t_recall") or "hit"
    return run, "same" if run == row.protocol.get("recall") else "differs"


def _fact_split(rec, row):
    ds = builtin_dataset(rec) or language_set(rec) or rec.dataset.name
    run = {"flickr30k": "flickr30k 1k test (Karpathy)", "coco": "coco 5k test (Karpathy)",
           "coco-1k": "coco 1k (mean of five 1k folds)",
           "xm3600": "xm3600, 3,600 images, 36 languages, every caption (mean of the languages' R@k)"}.get(ds, ds)
    return run, "same" if ds == row.dataset else "differs"


def _fact_gallery(rec, row):
    f = rec.dataset.fields
    size, n = f.get("gallery_size"), f.get("n_images")
    extra = f.get("extra_positives")
    gallery = f.get("gallery") or "test"
    run = f"{gallery}, {size if size is not None else '?'} images" + (f", extra positives {extra}" if extra else "")
    if extra or gallery != "test" or (size is not None and n is not None and size != n):
        return run, "differs"
    return run, "same"


def _fact_truncation(rec, row):
    ident = _identity(rec)
    limit = ident.get("context_length") or ident.get("max_text_tokens") or ident.get("max_length")
    chars = _protocol(rec).get("truncate_chars")
    run = (f"{limit} tokens" if limit else "the model's token limit (not recorded)") + (
        f", cut to {chars} characters first" if chars else "")
    want = _tokens(row.protocol.get("truncation", ""))
    if chars:
        return run, "differs"
    if want is None or not limit:
        return run, "unknown"
    return run, "same" if int(limit) == want else "differs"


def _fact_preprocessing(rec, row):
    adapter = str(_identity(rec).get("adapter") or rec.model.fields.get("name") or "?")
    run = "open_clip transform" if adapter == "vlbench.openclip" else f"{adapter} (its library's image processor)"
    if row.protocol.get("preprocessing") != "open_clip transform":
        return run, "unknown"
    return run, "same" if adapter == "vlbench.openclip" else "differs"


def _fact_precision(rec, row):
    hw = rec.hardware or {}
    run = str(hw.get("precision") or rec.settings.get("precision") or "fp32")
    want = row.protocol.get("precision", "not stated")
    if want == "not stated":
        return run, "unknown"
    return run, "same" if run == want else "differs"


def _fact_lowercase(rec, row):
    ident = _identity(rec)
    lower = ident.get("lowercase")
    run = "tokenizer's own" if lower is None else "yes" if lower else "no"
    want = row.protocol.get("lowercase", "not stated")
    if want == "not stated":
        return run, "unknown"
    if want.startswith("yes"):
        return run, "same" if lower else "differs" if lower is False else "unknown"
    return run, "same" if lower is None else "unknown"


def _fact_weights(rec, row):
    """The run's weights against the row's (the released checkpoint its specs name): a Hub commit or a library's
    named download is the same; a local folder or file (even one named like the Hub repository: ./ORG/NAME in the
    working directory is read first) or random weights differ, since nothing proves local bytes are the released
    ones; an identity that does not say is unknown."""
    kind, words = weights_source(_identity(rec), rec.model.spec)
    status = {"hub": "same", "library": "same", "local": "differs", "random": "differs"}.get(kind, "unknown")
    return words, status


def _fact_image_set(rec, row):
    return "not recorded (results.json names the image files, not their pixels)", "unknown"


_FACTS = {"weights": _fact_weights, "recall": _fact_recall, "split": _fact_split, "gallery": _fact_gallery,
          "truncation": _fact_truncation,
          "preprocessing": _fact_preprocessing, "precision": _fact_precision, "lowercase": _fact_lowercase,
          "image_set": _fact_image_set}


def _row_check(rec: RunRecord, row: PublishedRow, tolerance: float) -> RowCheck:
    metrics = []
    for (direction, k), pub in sorted(row.values.items(), key=lambda kv: (kv[0][0] != "t2i", kv[0][1])):
        got = _final_recall(rec, direction, k) if row.rerank else rec.value("clean", direction, "recall", k)
        metrics.append(MetricCheck(direction, k, pub, got, None if got is None else abs(got - pub) <= tolerance))
    facts = []
    for name in FACTS:
        run, status = _FACTS[name](rec, row)
        default = f"the released weights of {row.model}" if name == "weights" else "not stated"
        facts.append(FactCheck(name, str(row.protocol.get(name, default)), run, status))
    return RowCheck(row, metrics, facts)


def _final_recall(rec: RunRecord, direction: str, k: int) -> float | None:
    """A reranked run's clean R@k of its final (two-stage) ranking: results.json ``rerank.results``; the run's
    own ``results`` hold the first stage's numbers (docs/usage.md, two-stage runs)."""
    section = rec.other.get("rerank")
    for v in (section.get("results") or []) if isinstance(section, dict) else []:
        if (isinstance(v, dict) and v.get("condition") == "clean" and v.get("direction") == direction
                and v.get("metric") == "recall" and v.get("k") == k and isinstance(v.get("value"), (int, float))):
            return float(v["value"])
    return None


def _record(results) -> RunRecord:
    return results if isinstance(results, RunRecord) else RunRecord.from_json(results)


#: the built-in sets with published rows, as a reader names them
_PUBLISHED_SETS = {"flickr30k": "Flickr30k test split (1k)", "coco": "COCO test split (5k)",
                   "coco-1k": "COCO test split (5k)"}


def check_tolerance(tolerance) -> float:
    """``tolerance`` as a float, or OptionError: a finite number of percentage points, at least 0."""
    try:
        value = float(tolerance)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise OptionError("tolerance", f"{{opt}} must be a finite number of percentage points >= 0, got "
                                       f"{tolerance!r}", "compare within a stated distance", example=TOLERANCE)
    return value


def check_run(results, *, tolerance: float = TOLERANCE) -> CheckReport:
    """Check a finished run (results.json dict, path, run folder or RunRecord) against the published rows of
    its model and built-in dataset. Never raises for a run that has no row: the report says why. A tolerance
    that is not a finite number >= 0 raises OptionError."""
    tolerance = check_tolerance(tolerance)
    rec = _record(results)
    label = str(rec.model.fields.get("label") or rec.model.spec)
    if task_name(rec) is not None:  # a choice-task run: the published task scores (task_scores.py)
        task, rows, reason = task_rows(rec, tolerance)
        report = CheckReport(label, task, tolerance, rows, reason=reason)
        return _verified(rec, report) if rows else report
    ds = builtin_dataset(rec) or language_set(rec)
    if ds is None and language_set_mismatch(rec):
        return CheckReport(label, rec.dataset.name, tolerance, reason=f"no published numbers for this selection: "
                                                                      f"{language_set_mismatch(rec)}")
    if ds is None:
        named = _PUBLISHED_SETS.get(rec.dataset.name)
        return CheckReport(label, rec.dataset.name, tolerance, reason=(
            f"no published numbers for this data (its captions are not the built-in {named}; the check "
            "matches a run to published rows by the pinned sha256 of the caption file it read, never by the "
            "dataset's name)" if named else
            f"dataset {rec.dataset.name!r} is not a built-in Flickr30k or COCO test set: published numbers exist "
            "only for flickr30k (1k), coco (5k; coco-1k is compared with them, the split named as a difference) "
            "and the full xm3600"))
    rerank, rerank_k = run_stages(rec)
    rows = rows_for(rec.model.spec, ds, rerank, rerank_k)
    if not rows:
        others = rows_for(rec.model.spec, ds, any_stages=True)
        if others:  # rows of this model and data, measured with other stages: never compared
            told = "; ".join(f"{r.id}: {stages_text(r.rerank.get('model'), r.rerank.get('k'))}" for r in others)
            return CheckReport(label, ds, tolerance, reason=(
                f"no published row for model {rec.model.spec!r} on {ds} with this run's stages "
                f"({stages_text(rerank, rerank_k)}): the published rows were measured otherwise ({told}); a "
                "reranked run is compared only with rows of the same pair scorer, K and first stage"))
        return CheckReport(label, ds, tolerance, reason=(
            f"no published row for model {rec.model.spec!r} on {ds}: vlbench ships open_clip's table "
            "(openclip:ARCH/TAG) and the papers' numbers of the built-in families (docs/published.md)"))
    return _verified(rec, CheckReport(label, ds, tolerance, [_row_check(rec, r, tolerance) for r in rows]))


def run_stages(rec: RunRecord) -> tuple[str | None, int | None]:
    """The run's second stage from its settings (``rerank``: the pair scorer's spec, ``rerank_k``: K; a run
    records them in ``settings.options``), or (None, None) for a one-stage run."""
    stored = rec.settings.get("options")
    options: dict = stored if isinstance(stored, dict) else {}
    rerank = rec.settings.get("rerank") or options.get("rerank")  # settings.options: what `vlbench run` records
    k = rec.settings.get("rerank_k", options.get("rerank_k"))
    if not rerank:
        return None, None
    return str(rerank), (int(k) if isinstance(k, (int, float)) and not isinstance(k, bool) else None)


def _verified(rec: RunRecord, report: CheckReport) -> CheckReport:
    """``report`` marked ``unverified`` when no results_hash proves the run's values, with a note when no
    record_hash proves its model and dataset fields."""
    unverified, notes = "", []
    if "results_hash" not in rec.other:
        unverified = ("the run file has no results_hash, so nothing proves its values are the ones a vlbench run "
                      "computed (typed in, or written by another tool): it is not compared with published numbers")
    elif rec.read_schema is not None and not rec.sealed:  # read from a file (a record just computed is proof)
        notes.append("the run file has no record_hash (written before vlbench sealed whole records): its metric "
                     "records are proven by results_hash, its model and dataset fields are not")
    return dataclasses.replace(report, unverified=unverified, notes=notes)


def fact_label(name: str) -> str:
    return FACT_LABELS[name]
