"""One row per (dataset, model, item set) of the choice-task runs that scored a set under conditions
(``vlbench run --task NAME --perturb ... --perturb-images ...``): the clean accuracy with its interval, the blind
text-only accuracy, and per family of conditions the mean accuracy over its conditions and the mean change
against clean (each condition's change from its run's paired record). Pure Python on Runs, like tables.py."""

from __future__ import annotations

from ..modalities import paper_scores
from ..table_types import Column, Table
from ..tables import _Ctx

TASK_PREFIX = "task:"
#: families in this order first (caption perturbations, then image corruptions); others after, by name
FAMILY_ORDER = ("typos", "lexical", "distraction", "word-order", "image-noise", "image-blur", "image-weather",
                "image-digital")
RIGHT_ONLY = "correct"


def _family(meta: dict) -> str:
    """The column a condition counts in: its family, with ``_correct`` when only right candidates were perturbed."""
    fam = str(meta.get("family") or meta.get("perturbation") or "other")
    return fam + (f"_{RIGHT_ONLY}" if meta.get("perturb_options") == RIGHT_ONLY else "")


def _family_key(fam: str) -> tuple:
    right = fam.endswith(f"_{RIGHT_ONLY}")
    base = fam[:-len(RIGHT_ONLY) - 1] if right else fam
    order = FAMILY_ORDER.index(base) if base in FAMILY_ORDER else len(FAMILY_ORDER)
    return (order, base, right)


def _acc(run, cond: str):
    return next((v for v in run.record.values if v.condition == cond and v.key.metric == "accuracy"), None)


def _change(run, cond: str):
    b = next((b for b in run.record.intervals if b.condition == cond and b.get("metric") == "accuracy"), None)
    return None if b is None else b.get("delta")


def _mean(xs: list):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return sum(xs) / len(xs) if xs else None


def _set_row(ctx: _Ctx, key: tuple, cset: str, clean_run) -> tuple[list, dict, set] | None:
    """The fixed cells of one set's row, {family: (accuracies, changes)}, and the runs it reads; None when no
    condition of the set was run."""
    by_fam: dict[str, tuple[list, list]] = {}
    runs = {clean_run.ref}
    for cond, run in ctx.pairs[key].items():
        meta = run.condition_meta(cond)
        if meta.get("set") != cset:
            continue
        acc = _acc(run, cond)
        accs, changes = by_fam.setdefault(_family(meta), ([], []))
        accs.append(acc.value if acc else None)
        changes.append(_change(run, cond))
        runs.add(run.ref)
    if not by_fam:
        return None
    mh, dn, dh = key
    acc = _acc(clean_run, cset)
    blind = next((v.value for v in clean_run.record.values if v.condition == cset
                  and v.key.metric == "blind_accuracy"), None)
    task = str(clean_run.condition_meta(cset).get("task") or cset.split(":")[1])
    fixed = [ctx.dataset(dn, dh), ctx.model(mh), task, cset[len(TASK_PREFIX):], acc.extra.get("n") if acc else None,
             acc.value if acc else None, acc.extra.get("ci_low") if acc else None,
             acc.extra.get("ci_high") if acc else None, blind,
             {v.key.metric: v.value for v in clean_run.record.values if v.condition == cset}]
    return fixed, by_fam, runs


def compositional_table(ctx: _Ctx) -> Table:
    """Choice tasks x models, clean and under each family (see the module's docstring)."""
    found, runs, clean_runs = [], set(), []
    for key in ctx.keys():
        for cset, run in ctx.pairs[key].items():
            if cset.startswith(TASK_PREFIX) and not run.condition_meta(cset).get("set"):
                got = _set_row(ctx, key, cset, run)
                if got:
                    found.append(got[:2])
                    runs |= got[2]
                    clean_runs.append(run)
    scores = paper_scores(clean_runs)  # every other score the sets' papers report, clean
    families = sorted({f for _, by in found for f in by}, key=_family_key)
    cols = [Column("dataset"), Column("model"), Column("task"), Column("set"), Column("items", "int"),
            Column("clean", "num", 2, "clean %"), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            *(Column(m, "num", 2, f"clean {label} %") for m, label in scores),
            Column("blind", "num", 2, "blind (text-only) %")]
    for f in families:
        shown = f.replace(f"_{RIGHT_ONLY}", " (right caption only)")
        cols += [Column(f, "num", 2, f"{shown} %"), Column(f"{f}_delta", "num", 2, f"{shown} Δ")]
    rows = []
    for fixed, by in found:
        cells = []
        for f in families:
            accs, changes = by.get(f, ([], []))
            cells += [_mean(accs), _mean(changes)]
        clean = fixed[-1]
        rows.append(fixed[:8] + [clean.get(m) for m, _ in scores] + fixed[8:-1] + cells)
    rows.sort(key=lambda r: (r[2], r[3], r[0], r[1]))
    return Table("compositional", "Compositional choice tasks under perturbations and corruptions",
                 "vlbench run --task NAME with --perturb / --perturb-images: the clean accuracy of each item set (95% "
                 "bootstrap interval over items) and its blind text-only accuracy; per family, the mean accuracy "
                 "over the family's conditions and the mean change against clean in points (each condition's paired "
                 "bootstrap interval and flips: the run's results.json and flips.csv). Families marked 'right caption "
                 "only' perturbed only the right candidate of each item (--perturb-options correct), the others every "
                 "candidate. Image corruptions leave the blind baseline as it is (it reads no image). Every other "
                 "clean score a set's paper reports has its column (Winoground: text and image beside the group "
                 "score in clean). A blank blind cell: the run had no blind baseline (the choice_tasks table's flags "
                 "say why).",
                 cols, rows, sorted(runs))
