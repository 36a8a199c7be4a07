"""A study as a plan: a TOML file naming models, datasets, conditions, seeds and shared run options, read into a
:class:`Plan` and expanded (:func:`expand`) to the :class:`~vlbench.sweep.worker.Task` s of its grid, each with a
deterministic id and folder under the study folder.

The format is the one run configs already use (``vlbench run --config``): keys are ``vlbench run``'s long option
names (``batch-size`` or ``batch_size``), values as in such a file (strings, numbers, booleans, lists)::

    seeds = [0]                        # top-level keys first: the seeds of the grid (default [0])
    exclude = [{ model = "siglip", condition = "noise" }]

    [study]
    out = "studies/robustness"         # the study folder (--out overrides it)

    [options]                          # every run of the grid (vlbench run's options)
    n-boot = 200
    limit = 100

    [models]                           # display name = model spec (or a table: spec = ..., plus options)
    clip = "clip:openai/clip-vit-base-patch32"
    siglip = { spec = "siglip:google/siglip-base-patch16-224", batch-size = 32 }

    [datasets]                         # display name = dataset spec (or a table, as models)
    flickr30k = "flickr30k"

    [conditions]                       # name = the options of that condition (each one run per model x dataset)
    text = { perturb = ["typos", "lexical"] }
    noise = { perturb-images = "gaussian_noise:3" }

The grid is models x datasets x conditions x seeds, without the combinations an ``exclude`` entry matches (every
key it gives equal). A run's id is its model, dataset and condition names, its seed and a hash of everything that
changes its numbers (the model and dataset specs and each option that changes a number, as ``--resume`` compares
them), so expanding the same plan again gives the same ids and folders, and a plan whose options change gives new
ones (a finished run is never mixed with another).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..registry import close_matches
from ..util import options
from ..util.io import read_regular_file, sha256_json
from ..util.typeset import slug as _slug
from .checks import PlanError, check_cells, check_runs, check_size
from .worker import Task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_PLAN_BYTES = 1 << 20
TOP_KEYS = ("study", "options", "models", "datasets", "conditions", "seeds", "exclude")
AXES = ("model", "dataset", "condition", "seed")
NEEDS = ("gpus", "cpus", "mem_gb")
#: why a plan refuses the options the sweep sets itself (the grid's axes, the run folder, resuming) and those that
#: only shape the command line: the option table's rows that do not apply to a plan (tests check both agree)
RESERVED = {"model": "a model is an entry of [models]", "dataset": "a dataset is an entry of [datasets]",
            "out": "each run's folder is set by the sweep (under the study folder)",
            "resume": "the sweep always resumes finished and partial runs",
            "overwrite": "remove the run's folder (or the study) to run it again", "config": "give the options here",
            "seed": "give the seeds as the top-level list seeds = [...]",
            "quiet": "each run's output goes to its log",
            "json": "each run writes its results.json; the study's leaderboard lists them"}


def _fields() -> dict[str, str]:
    """Plan key (dashes) -> RunConfig field (or ``task``, ``images_dir``, ``perturb_options`` of a choice task):
    the option table's rows that apply to a plan, by their flag's spelling and their field's with dashes."""
    out = {}
    for o in options.applying("plan"):
        out[o.field.replace("_", "-")] = o.field
        out[o.key] = o.field
    return out


@dataclass(frozen=True)
class Entry:
    """A model, dataset or condition of the plan: its display name, spec (models, datasets) and options."""

    name: str
    spec: str | None
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    path: str
    models: tuple[Entry, ...]
    datasets: tuple[Entry, ...]
    conditions: tuple[Entry, ...]
    seeds: tuple[int, ...] = (0,)
    options: dict = field(default_factory=dict)
    exclude: tuple[dict, ...] = ()
    out: str | None = None
    name: str | None = None
    needs: dict = field(default_factory=dict)  # what each run asks of a node: gpus, cpus, mem_gb
    executors: dict = field(default_factory=dict)  # executor name -> its options ([study.executor.slurm])

    def iter_runs(self):
        """The grid one run at a time, in plan order (models, then datasets, conditions, seeds), exclusions left
        out: nothing is built that is not asked for."""
        grid = itertools.product(self.models, self.datasets, self.conditions, self.seeds)
        return ((m, d, c, s) for m, d, c, s in grid if not any(_excluded(x, m, d, c, s) for x in self.exclude))

    def runs(self) -> list[tuple[Entry, Entry, Entry, int]]:
        """The grid as a list (:meth:`iter_runs`)."""
        return list(self.iter_runs())


def _excluded(rule: dict, m: Entry, d: Entry, c: Entry, s: int) -> bool:
    have = {"model": m.name, "dataset": d.name, "condition": c.name, "seed": s}
    return all(have[k] == v for k, v in rule.items())


def _err(path: str, key: str, what: str, fix: str) -> PlanError:
    return PlanError(f"plan {path}: {key}: {what}", fix)


def read_plan(path: str | Path) -> Plan:
    """The plan at ``path``; :class:`PlanError` naming the file, the key and the fix for anything wrong."""
    path = str(path)
    try:
        raw = read_regular_file(path, MAX_PLAN_BYTES)
    except OSError as exc:
        raise PlanError(f"plan {path} cannot be read ({exc.strerror or exc})",
                        "pass a TOML plan file (docs/scale.md, 'The plan')") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError(f"plan {path} is not valid TOML ({exc})",
                        "fix the file; a plan is TOML as vlbench run --config files are") from None
    return parse_plan(doc, path)


def parse_plan(doc: dict, path: str = "<plan>") -> Plan:
    """A plan from its TOML document (``path``: the name errors give)."""
    for key in doc:
        if key not in TOP_KEYS:
            raise _err(path, key, "unknown top-level key", f"the keys of a plan are {', '.join(TOP_KEYS)}")
    fields = _fields()
    study = _table(doc, "study", path)
    for key in study:
        if key not in ("out", "name", "needs", "executor"):
            raise _err(path, f"study.{key}", "unknown key", "[study] takes out (the study folder), name, needs "
                                                            "(gpus, cpus, mem_gb) and executor (per executor)")
    needs = _table(study, "needs", path, "study.needs")
    for key, value in needs.items():
        if key not in NEEDS or isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _err(path, f"study.needs.{key}", f"unknown or not a number >= 0 ({value!r})",
                       "needs takes gpus, cpus and mem_gb, e.g. needs = { gpus = 1, mem_gb = 32 }")
    executors = _table(study, "executor", path, "study.executor")
    for key, value in executors.items():
        if not isinstance(value, dict):
            raise _err(path, f"study.executor.{key}", f"must be a table of that executor's options, got {value!r}",
                       '[study.executor.slurm] partition = "gpu"')
    options = _options(_table(doc, "options", path), "options", path, fields)
    models = _entries(doc, "models", path, fields, with_spec=True)
    datasets = _entries(doc, "datasets", path, fields, with_spec=True)
    conditions = _entries(doc, "conditions", path, fields, with_spec=False) if "conditions" in doc else (
        Entry("clean", None, {}),)
    seeds = doc.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63 for s in seeds):
        raise _err(path, "seeds", f"must be a non-empty list of non-negative integers, got {seeds!r}",
                   "e.g. seeds = [0, 1, 2]")
    if len(set(seeds)) != len(seeds):
        raise _err(path, "seeds", f"lists a seed twice ({seeds!r})", "list each seed once")
    exclude = _exclusions(doc.get("exclude", []), path, models, datasets, conditions, seeds)
    plan = Plan(path, models, datasets, conditions, tuple(seeds), options, exclude,
                out=_str(study, "out", "study.out", path), name=_str(study, "name", "study.name", path),
                needs=dict(needs), executors={k: dict(v) for k, v in executors.items()})
    if next(plan.iter_runs(), None) is None:
        raise _err(path, "exclude", "leaves no run in the grid", "exclude fewer combinations")
    return plan


def _str(table: dict, key: str, shown: str, path: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise _err(path, shown, f"must be a non-empty string, got {value!r}", f'e.g. {key} = "studies/mine"')
    return value


def _table(doc: dict, key: str, path: str, shown: str | None = None) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise _err(path, shown or key, f"must be a table, got {type(value).__name__}",
                   f"write it as [{shown or key}] with key = value lines")
    return value


def _options(table: dict, where: str, path: str, fields: dict) -> dict:
    """Plan keys -> RunConfig fields, each value checked for its shape; an unknown or reserved key refused."""
    out = {}
    for key, value in table.items():
        name = str(key).replace("_", "-")
        if name in RESERVED:
            raise _err(path, f"{where}.{key}", f"is not an option a plan sets ({RESERVED[name]})",
                       f"remove {key} from [{where}]")
        if name not in fields:
            near = close_matches(name, fields)
            raise _err(path, f"{where}.{key}", "is not an option of vlbench run",
                       f"did you mean {', '.join(near)}?" if near else "keys are vlbench run's long option names "
                       "(vlbench run --help)")
        if isinstance(value, dict) and name != "param":
            raise _err(path, f"{where}.{key}", f"takes one value or a list, got a table {value!r}",
                       f"write {key} as on the command line, e.g. {key} = \"...\"")
        if name == "param":  # "NAME.KEY=VALUE" strings, as --param takes them (a table {"NAME.KEY" = VALUE} too)
            value = [f"{k}={v}" for k, v in value.items()] if isinstance(value, dict) else value
            if not isinstance(value, list) or not all(isinstance(x, str) and "=" in x for x in value):
                raise _err(path, f"{where}.{key}", "must be a list of \"NAME.KEY=VALUE\" strings or a table",
                           'e.g. param = ["typos-keyboard.rate=0.1"]')
        out[fields[name]] = value
    return out


def _entries(doc: dict, key: str, path: str, fields: dict, *, with_spec: bool) -> tuple[Entry, ...]:
    table = doc.get(key)
    what = key[:-1]
    if not isinstance(table, dict) or not table:
        example = {"models": 'clip = "clip:openai/clip-vit-base-patch32"', "datasets": 'flickr30k = "flickr30k"',
                   "conditions": 'text = { perturb = ["typos"] }'}[key]
        raise _err(path, key, "is missing or empty" if not table else f"must be a table, got {table!r}",
                   f"add a [{key}] table with one {what} per line, e.g. {example}")
    out = []
    for name, value in table.items():
        if name in TOP_KEYS:  # TOML put a top-level key written after [models] etc. into that table
            raise _err(path, f"{key}.{name}", f"{name} is a top-level key of a plan, read here as a {what}",
                       f"move {name} = ... above the first [table] of the file")
        _check_name(path, f"{key}.{name}", name)
        where = f"{key}.{name}"
        if with_spec and isinstance(value, str):
            out.append(Entry(name, value.strip(), {}))
            continue
        if not isinstance(value, dict):
            fix = (f'{name} = "SPEC", or {name} = {{ spec = "SPEC", batch-size = 32 }}' if with_spec
                   else f'{name} = {{ perturb = ["typos"] }} (an empty table {{}} is the clean run)')
            raise _err(path, where, f"must be {'a spec or ' if with_spec else ''}a table, got {value!r}", fix)
        rest = dict(value)
        spec = rest.pop("spec", None)
        if key == "datasets" and spec is None and "task" in rest:  # a choice set: its task names its data
            out.append(Entry(name, None, _options(rest, where, path, fields)))
            continue
        if with_spec and (not isinstance(spec, str) or not spec.strip()):
            raise _err(path, f"{where}.spec", "is missing or not a string", f'{name} = {{ spec = "SPEC" }}' + (
                f', or a choice set: {name} = {{ task = "winoground" }}' if key == "datasets" else ""))
        if not with_spec and spec is not None:
            raise _err(path, f"{where}.spec", "a condition has no spec", "give the condition's run options only")
        out.append(Entry(name, spec.strip() if spec else None, _options(rest, where, path, fields)))
    return tuple(out)


def _check_name(path: str, where: str, name: str) -> None:
    if _slug(name, 40, strip="-") != name:
        raise _err(path, where, f"the name {name!r} cannot name a run folder",
                   "use letters, digits, dots, dashes and underscores (at most 40 characters)")


def _exclusions(rules, path: str, models, datasets, conditions, seeds) -> tuple[dict, ...]:
    if not isinstance(rules, list):
        raise _err(path, "exclude", f"must be a list of tables, got {rules!r}",
                   'e.g. exclude = [{ model = "clip", dataset = "coco" }]')
    known = {"model": [m.name for m in models], "dataset": [d.name for d in datasets],
             "condition": [c.name for c in conditions], "seed": list(seeds)}
    out = []
    for i, rule in enumerate(rules):
        where = f"exclude[{i}]"
        if not isinstance(rule, dict) or not rule:
            raise _err(path, where, f"must be a non-empty table, got {rule!r}", '{ model = "clip", dataset = "coco" }')
        for k, v in rule.items():
            if k not in AXES:
                raise _err(path, f"{where}.{k}", "is not an axis of the grid", f"use {', '.join(AXES)}")
            if v not in known[k]:
                raise _err(path, f"{where}.{k}", f"{v!r} is not a {k} of the plan",
                           f"the plan's {k}s: {', '.join(map(str, known[k]))}")
        out.append(dict(rule))
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# expansion

RUNS = "runs"  # the study folder's sub-folder of run folders (each with its log beside it)


def run_kwargs(plan: Plan, m: Entry, d: Entry, c: Entry, seed: int) -> dict:
    """The keyword arguments of :func:`vlbench.run` for one run of the grid (``out`` is set by the task); with a
    ``task`` (a choice set), those of :func:`vlbench.tasks.run.run_task` (``task = "retrieval"``: a retrieval run)."""
    kw = {**plan.options, **d.options, **m.options, **c.options}
    if kw.get("task") == "retrieval":
        del kw["task"]
    kw.update(model=m.spec, dataset=d.spec, seed=seed, quiet=True)
    kw.setdefault("model_name", m.name)
    kw.setdefault("dataset_name", d.name)
    return kw


def run_id(m: Entry, d: Entry, c: Entry, seed: int, kwargs: dict) -> str:
    """The run's id: its names, seed and a hash of what changes its numbers (the same kwargs: the same id). The
    batch sizes change numbers on an accelerator only: they count when the plan puts the run on one."""
    from ..pipeline.rerun import NOT_NUMBERS, ON_ACCELERATORS  # lazy: the table's list of what changes no number

    cpu = str(kwargs.get("device") or "auto").split(":")[0] in ("cpu", "auto")
    skip = NOT_NUMBERS | (ON_ACCELERATORS if cpu else frozenset())
    kept = {k: v for k, v in kwargs.items() if k not in skip or k in ("dataset", "model_name", "dataset_name")}
    digest = sha256_json(kept)[:10]
    return f"{m.name}--{d.name}--{c.name}--s{seed}--{digest}"


def expand(plan: Plan, study: str | Path, *, retries: int = 0, needs: dict | None = None) -> list[Task]:
    """The plan's runs as Tasks under ``study``/runs/ (folder = id; its log beside it as ``<id>.log``); a grid over
    :data:`~vlbench.sweep.checks.MAX_RUNS` runs is refused before it is built."""
    check_size(plan)
    base = Path(study) / RUNS
    tasks = []
    for m, d, c, s in plan.iter_runs():
        kw = run_kwargs(plan, m, d, c, s)
        rid = run_id(m, d, c, s, kw)
        folder = base / rid
        tasks.append(Task(run_id=rid, folder=str(folder), kwargs=kw, needs=dict(needs or {}),
                          log=str(base / f"{rid}.log"), retries=retries))
    return tasks


def check_tasks(plan: Plan, tasks: list[Task]) -> None:
    """The whole plan checked before any run starts: every cell (each model, dataset, perturbation, image
    corruption, probe and task, once) and every distinct run's options, as vlbench.run checks them; the first bad
    one is a PlanError naming the plan, the entry or run and the option (vlbench/sweep/checks.py)."""
    check_cells(plan)
    check_runs(plan, tasks)
