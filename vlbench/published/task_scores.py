"""Published scores of the choice tasks, and the check of a finished task run against them.

Each set declares its published scores in its own module (vlbench/tasks/sets/, ChoiceTask ``published``): one
:class:`TaskEntry` per (task, model, source), the scores of each
item set, keyed by the run's condition (``task:sugarcrepe:swap_obj``) and metric (``accuracy``, Winoground's
``text_score`` / ``image_score``, What'sUp's ``pair_accuracy`` / ``set_accuracy``), the caption files they apply
to (sha256, first the one measured on) and the protocol facts that can move them (:data:`TASK_FACTS`).

A task run is matched by its task name (results.json ``task.name``), each condition it scored and its model
(the normalised spec among the entry's specs, as retrieval rows are matched). A condition whose caption file
is not one the entry's numbers apply to (its sha256 differs from every one listed) is not compared. Each
published score is compared with the run's value of the same condition and metric within the tolerance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..results import RunRecord
from ..util.markdown import md_table
from .table import FactCheck, _data, spec_key

#: the protocol facts that can move a published task score, in the order they are reported
TASK_FACTS = ("set_version", "implementation", "preprocessing", "precision", "lowercase", "prompt", "tie_rule")

TASK_FACT_LABELS = {
    "set_version": "the item files (the released version, its item count)",
    "implementation": "the code that ran the model (open_clip, OpenAI's clip package, transformers)",
    "preprocessing": "image size and resize (resize the shorter side, center crop, resampling)",
    "precision": "numeric precision (fp32 vs fp16 weights / AMP autocast)",
    "lowercase": "lower-casing of captions before tokenizing",
    "prompt": "prompting (a template around the caption, or the caption as written)",
    "tie_rule": "how a tie between the right and a wrong option is counted",
}
_MARK = {"differs": "DIFFERS", "same": "same", "unknown": "cannot tell"}


@dataclass(frozen=True)
class TaskEntry:
    """One source's published scores of one model on one task: ``sets[condition]`` = ``{"scores": {metric:
    percent}, "n_items", "sha256": [...]}``; ``match``: what a run's facts are compared with."""

    id: str
    task: str
    model: str
    specs: tuple
    sets: dict
    source: dict
    protocol: dict
    match: dict
    note: str = ""

    def citation(self) -> str:
        return f"{self.source['citation']}, {self.source['table']}"


@dataclass(frozen=True)
class ScoreCheck:
    condition: str
    metric: str
    published: float
    measured: float | None  # None: the run has no such value (another subset)
    within: bool | None  # None: not compared

    @property
    def diff(self) -> float | None:
        return None if self.measured is None else self.measured - self.published


@dataclass(frozen=True)
class TaskRowCheck:
    """One entry checked against one run: a ScoreCheck per published score, the facts, and the conditions
    left out because their files are not the ones the numbers apply to."""

    row: TaskEntry
    metrics: list
    facts: list
    skipped: list = field(default_factory=list)  # (condition, why)

    @property
    def passed(self) -> bool:
        compared = [m for m in self.metrics if m.within is not None]
        return bool(compared) and all(m.within for m in compared)

    def worst(self) -> float | None:
        diffs = [abs(m.diff) for m in self.metrics if m.diff is not None]
        return max(diffs) if diffs else None

    def to_json(self) -> dict:
        return {"id": self.row.id, "citation": self.row.citation(), "passed": self.passed,
                "metrics": [{"condition": m.condition, "metric": m.metric, "published": m.published,
                             "measured": m.measured, "within": m.within} for m in self.metrics],
                "facts": [vars(f) for f in self.facts],
                "skipped": [{"condition": c, "why": w} for c, w in self.skipped]}

    def lines(self, tolerance: float) -> list[str]:
        """The text of this entry's check (``vlbench check``)."""
        row = self.row
        out = [f"published: {row.model} on {row.task} ({row.source['kind']}): {row.citation()}",
               f"  read in: {row.source['read_in']}"]
        cells = [[m.condition, m.metric, _num(m.measured), _num(m.published),
                  "" if m.diff is None else f"{m.diff:+.2f}",
                  "not in this run" if m.within is None else "ok" if m.within else "OFF"] for m in self.metrics]
        out.append(md_table(["set", "score", "measured", "published", "difference", f"within {tolerance:g}"], cells,
                            pad=True))
        out += [f"  not compared: {c}: {w}" for c, w in self.skipped]
        if self.passed:
            out.append(f"check: pass (every published score of this run's sets within {tolerance:g} percentage "
                       "points)")
            return out
        out.append(f"check: OFF (tolerance {tolerance:g} percentage points). Protocol facts of this entry that can "
                   "move such scores:")
        for f in sorted(self.facts, key=lambda f: ("differs", "unknown", "same").index(f.status)):
            out.append(f"  [{_MARK[f.status]:11}] {TASK_FACT_LABELS[f.fact]}")
            out.append(f"                published: {f.published}; this run: {f.run}")
        if row.note:
            out.append(f"  note: {row.note}")
        return out


def _num(x) -> str:
    return "" if x is None else f"{x:.2f}"


def task_document() -> dict:
    """The published task scores as one document: ``about`` and ``not_shipped`` (task_scores.json) and
    ``entries``, every registered set's declared entries (its ChoiceTask ``published``) with their task."""
    doc = json.loads(_data("task_scores.json"))
    return {**doc, "entries": [{"task": name, **e} for name, task in _tasks().items() for e in task.published]}


def _tasks() -> dict:
    from ..tasks.registry import tasks  # lazy: the sets are imported only when published scores are read

    return tasks()


def task_entries() -> tuple[TaskEntry, ...]:
    """Every shipped task entry (the registered sets' declarations, in their listing order)."""
    return tuple(TaskEntry(e["id"], e["task"], e["model"], tuple(e["specs"]), e["sets"], e["source"], e["protocol"],
                           e["match"], e.get("note", "")) for e in task_document()["entries"])


def entries_for(spec: str, task: str) -> list[TaskEntry]:
    """The shipped entries of model ``spec`` on task ``task``."""
    want = spec_key(spec)  # a pair scorer's score options count: p(match) and logit + ITC are two protocols
    return [e for e in task_entries() if e.task == task and want in {spec_key(s) for s in e.specs}]


def task_name(rec: RunRecord) -> str | None:
    """The task of a choice-task run (results.json ``task.name``), None for a retrieval run."""
    task = rec.other.get("task")
    name = task.get("name") if isinstance(task, dict) else None
    return name if isinstance(name, str) else None


def _file_sha(rec: RunRecord, condition: str) -> str | None:
    """The sha256 of the item file the run read for ``condition`` (``dataset.source.sha256``: one per subset,
    or one for a task with one file)."""
    src = rec.dataset.fields.get("source")
    sha = src.get("sha256") if isinstance(src, dict) else None
    if isinstance(sha, str):
        return sha
    subset = condition.split(":", 2)[2] if condition.count(":") >= 2 else ""
    got = sha.get(subset) if isinstance(sha, dict) else None
    return got if isinstance(got, str) else None


def _n_items(rec: RunRecord, condition: str) -> int | None:
    for v in rec.values:
        if v.condition == condition and v.key.metric == "accuracy":
            n = v.extra.get("n")
            return n if isinstance(n, int) else None
    return None


def _fact_set_version(rec, entry, conds) -> tuple[str, str]:
    parts, statuses = [], []
    for cond in conds:
        want, sha, n = entry.sets[cond], _file_sha(rec, cond), _n_items(rec, cond)
        shas, n_pub = want.get("sha256") or [], want.get("n_items")
        parts.append(f"{cond.rsplit(':', 1)[-1]}: {n if n is not None else '?'} items"
                     + (f", file {sha[:12]}" if sha else ""))
        if shas and sha in shas:
            statuses.append("same" if sha == shas[0] else "differs")
        elif n_pub is not None and n is not None and n != n_pub:
            statuses.append("differs")
        else:
            statuses.append("unknown")
    status = next((s for s in ("differs", "unknown") if s in statuses), "same")
    return "; ".join(parts) or "no set of this entry", status


def _adapter(rec: RunRecord) -> str:
    ident = rec.model.fields.get("identity")
    adapter = ident.get("adapter") if isinstance(ident, dict) else None
    return str(adapter or rec.model.fields.get("name") or "?")


def _shown(adapter: str) -> str:
    return {"vlbench.openclip": "open_clip (vlbench.openclip)"}.get(adapter, f"{adapter} (its library's code)")


def _fact_implementation(rec, entry, conds):
    adapter, want = _adapter(rec), entry.match.get("adapter")
    return _shown(adapter), "unknown" if want is None else "same" if adapter == want else "differs"


def _fact_preprocessing(rec, entry, conds):
    adapter, want = _adapter(rec), entry.match.get("preprocessing_adapter")
    run = "open_clip transform" if adapter == "vlbench.openclip" else f"{adapter} (its library's image processor)"
    return run, "unknown" if want is None else "same" if adapter == want else "differs"


def _fact_precision(rec, entry, conds):
    run, want = str(rec.settings.get("precision") or "fp32"), entry.match.get("precision")
    return run, "unknown" if want is None else "same" if run == want else "differs"


def _fact_lowercase(rec, entry, conds):
    ident = rec.model.fields.get("identity")
    lower = ident.get("lowercase") if isinstance(ident, dict) else None
    run = "tokenizer's own" if lower is None else "yes" if lower else "no"
    return run, "same" if lower is None else "unknown"


def _fact_prompt(rec, entry, conds):
    return "none (vlbench scores each caption as written)", "same"


def _fact_tie_rule(rec, entry, conds):
    rule = str((rec.other.get("task") or {}).get("rule") or "")
    run = "strict (a tie is a miss)" if "tie" in rule and ("miss" in rule or "fail" in rule) else rule or "?"
    strict = run.startswith("strict")
    return run, "same" if strict == bool(entry.match.get("strict")) else "differs"


_FACTS = {"set_version": _fact_set_version, "implementation": _fact_implementation,
          "preprocessing": _fact_preprocessing, "precision": _fact_precision, "lowercase": _fact_lowercase,
          "prompt": _fact_prompt, "tie_rule": _fact_tie_rule}


def check_entry(rec: RunRecord, entry: TaskEntry, tolerance: float) -> TaskRowCheck:
    """One entry against one run: every published score of the sets the run scored on a file the numbers
    apply to; the others are listed as not in this run or not compared (and why)."""
    metrics, skipped, compared = [], [], []
    for cond, want in entry.sets.items():
        shas = want.get("sha256") or []
        present = cond in rec.conditions
        sha = _file_sha(rec, cond) if present else None
        if present and shas and sha not in shas:
            skipped.append((cond, f"its file (sha256 {str(sha)[:12]}...) is not a version these scores apply to "
                                  f"({', '.join(s[:12] for s in shas)})"))
            present = False
        if present:
            compared.append(cond)
        for metric, pub in want["scores"].items():
            got = rec.value(cond, "i2t", metric) if present else None
            metrics.append(ScoreCheck(cond, metric, float(pub), got,
                                      None if got is None else abs(got - float(pub)) <= tolerance))
    facts = []
    for name in TASK_FACTS:
        run, status = _FACTS[name](rec, entry, compared)
        facts.append(FactCheck(name, str(entry.protocol.get(name, "not stated")), run, status))
    return TaskRowCheck(entry, metrics, facts, skipped)


def task_rows(rec: RunRecord, tolerance: float) -> tuple[str, list, str]:
    """(the task, its entry checks, why none applies) of a task run."""
    task = task_name(rec) or "?"
    entries = entries_for(rec.model.spec, task)
    if not entries:
        known = sorted({e.task for e in task_entries()})
        return task, [], (f"no published scores for model {rec.model.spec!r} on task {task!r}: vlbench ships "
                          f"task scores for {', '.join(known)} (docs/published.md)")
    rows = [check_entry(rec, e, tolerance) for e in entries]
    if not any(m.within is not None for r in rows for m in r.metrics):
        why = "; ".join(f"{c}: {w}" for r in rows for c, w in r.skipped)
        return task, [], (f"no published score of {task!r} applies to the sets of this run "
                          f"({', '.join(rec.conditions) or 'none'})" + (f" ({why})" if why else ""))
    return task, rows, ""
