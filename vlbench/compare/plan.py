"""What a comparison asks: the checked options, and the rows they select.

The default is the question asked first: is A better than B on clean data (``clean``), and does A lose more than B
under each family of perturbations (``families``: one robustness row per family, its conditions averaged per
query), in total RSUM (``both``). Per-condition detail is on request (``--conditions all`` or condition names).
Every row of the table is one test of the correction's family, so narrowing the rows asked for is what keeps a
real difference separable.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import OptionError
from ..results import DIRECTIONS
from ..runread import RunData

TESTS = ("randomization", "bootstrap", "ttest")
CORRECTIONS = ("holm", "bonferroni", "none")
DIRECTION_CHOICES = DIRECTIONS + ("both",)
#: at most this many resamples: memory and time grow with it (the bootstrap keeps one value per resample)
MAX_RESAMPLES = 1_000_000
MIN_RESAMPLES = 100
DEFAULT_CONDITIONS = "clean,families"


@dataclass(frozen=True)
class Ask:
    """One group of rows: ``label`` is the row's condition column; ``kind`` "clean" (difference rows),
    "condition" (difference and robustness rows) or "family" (one robustness row over ``conditions``)."""

    label: str
    kind: str
    conditions: tuple[str, ...]


def check_options(runs: list[RunData], metric: str, test: str, correction: str, n_resamples, alpha, seed,
                  names=None) -> None:
    """Refuse a bad option by name (the CLI shows its flag), before any resampling."""
    if len(runs) < 2:
        raise OptionError("runs", f"compare needs at least two runs, got {len(runs)}", "vlbench compare RUN_A RUN_B",
                          flag="RUN")
    if test not in TESTS:
        raise OptionError("test", f"{{opt}}: unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise OptionError("correction", f"{{opt}}: unknown correction {correction!r}; choose one of "
                                        f"{', '.join(CORRECTIONS)}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or \
            not MIN_RESAMPLES <= n_resamples <= MAX_RESAMPLES:
        raise OptionError("n_resamples", f"{{opt}} must be an integer from {MIN_RESAMPLES} to {MAX_RESAMPLES:,} "
                                         f"(the limit: memory and time grow with it), got {n_resamples!r}",
                          example=10000)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or math.isnan(alpha) or not 0 < alpha < 1:
        raise OptionError("alpha", f"{{opt}} must be between 0 and 1 (exclusive), got {alpha!r}", example=0.05)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
        raise OptionError("seed", f"{{opt}} must be an integer from 0 to 2**63 - 1, got {seed!r}", example=0)
    if names is not None and len(names) != len(runs):
        raise OptionError("model_name", f"{{opt}} given {len(names)} time(s) for {len(runs)} runs: give one name per "
                                        "run, in the order of the runs")
    _refuse_same_run(runs)
    task = next((r for r in runs if r.record.other.get("task")), None)
    if task is not None and metric not in task.header:
        raise OptionError("metric", f"{{opt}} {metric}: run {task.folder} is a choice-task run, whose per-item "
                                    f"columns are {', '.join(task.header[2:])}",
                          "compare choice-task runs item by item with --metric accuracy", example="accuracy")


def _refuse_same_run(runs: list[RunData]) -> None:
    seen: dict[tuple, RunData] = {}
    for r in runs:
        key = (os.path.realpath(r.folder),)
        ident = (r.record.run_id, r.record.results_hash)
        for k in (key, ident):
            if k in seen:
                raise OptionError("runs", f"{r.folder} and {seen[k].folder} are the same run (run "
                                          f"{r.record.run_id}): a run compared with itself differs by 0 on every "
                                          "query", "compare runs of different models", flag="RUN")
            seen[k] = r


def directions(spec: str | None, metric: str, test: str) -> tuple[str, ...]:
    """The directions asked for (default: ``both`` = total RSUM when it can be tested, else i2t and t2i)."""
    can_both = metric == "rsum" and test != "ttest"
    if spec is None:
        return ("both",) if can_both else DIRECTIONS
    out = tuple(dict.fromkeys(x.strip() for x in spec.split(",") if x.strip()))
    bad = [x for x in out if x not in DIRECTION_CHOICES]
    if bad or not out:
        raise OptionError("directions", f"{{opt}}: unknown direction(s) {', '.join(bad) or '(none)'}; choose from "
                                        f"{', '.join(DIRECTION_CHOICES)}", example="i2t,t2i")
    if "both" in out and not can_both:
        why = "the paired t-test runs per direction" if test == "ttest" else f"--metric {metric} has no total"
        raise OptionError("directions", f"{{opt}} both is the total RSUM of the two directions; {why}",
                          example="i2t,t2i")
    return out


def family_of(run: RunData, cond: str) -> str:
    """A condition's family (results.json conditions[c].family; a gallery condition: its kind); a choice task's
    condition: ``<set>@<family>`` (a family never mixes the items of two sets)."""
    meta = run.record.condition(cond).meta
    fam = str(meta.get("family") or meta.get("kind") or "other")
    return f"{meta['set']}@{fam}" if meta.get("set") else fam


def run_kind(run: RunData, cond: str) -> str | None:
    """A condition's kind as results.json records it (``sensitivity``: a meaning-changing probe), or None."""
    return run.record.condition(cond).meta.get("kind")


def base_of(run: RunData, cond: str) -> str:
    """The clean condition ``cond`` is compared against: ``clean``, or a choice task condition's item set."""
    return str(run.record.condition(cond).meta.get("set") or "clean")


def is_clean(run: RunData, cond: str) -> bool:
    """``clean``, or an item set of a choice-task run (scored clean; its conditions name it as their set)."""
    return cond == "clean" or bool(run.record.other.get("task")) and not run.record.condition(cond).meta.get("set")


def asks(runs: list[RunData], conds: list[str], spec: str | None) -> list[Ask]:
    """The groups of rows ``--conditions`` asks for, over the conditions every run shares (``conds``)."""
    fams: dict[str, list[str]] = {}
    cleans = [c for c in conds if is_clean(runs[0], c)]
    for c in conds:
        if c not in cleans:
            fams.setdefault(family_of(runs[0], c), []).append(c)
    out: list[Ask] = []
    tokens = [x.strip() for x in (spec or DEFAULT_CONDITIONS).split(",") if x.strip()]
    for tok in tokens:
        if tok == "all":
            out += [Ask(c, "clean" if c in cleans else "condition", (c,)) for c in conds]
        elif tok == "clean" and cleans:
            out += [Ask(c, "clean", (c,)) for c in cleans]
        elif tok == "families":  # robustness families only: a meaning-changing probe's loss is no robustness loss
            out += [Ask(f, "family", tuple(cs)) for f, cs in fams.items()
                    if not all(run_kind(runs[0], c) == "sensitivity" for c in cs)]
        elif tok in fams and tok not in conds:
            out.append(Ask(tok, "family", tuple(fams[tok])))
        elif tok in conds and tok not in cleans:
            out.append(Ask(tok, "condition", (tok,)))
        else:
            have = ", ".join(["clean", "families", "all"] + [f"{f} (family)" for f in fams] +
                             [c for c in conds if c != "clean"])
            raise OptionError("conditions", f"{{opt}}: {tok!r} is not a condition or family every run has; these "
                                            f"runs share: {have}", example="clean,families")
    return list(dict.fromkeys(out))
