"""Leaderboard tables and plots of the other modalities: image corruptions (RSUM per corruption and severity,
mCE) and compositional choice tasks (accuracy with CI). Pure Python on Runs, like tables.py; the plot of RSUM
against severity is in plots.py."""

from __future__ import annotations

from .table_types import Column, Table
from .tables import STAGES_COLUMN, STAGES_LABEL, _Ctx, _values

TASK_PREFIX = "task:"


def is_task(cond: str) -> bool:
    return cond.startswith(TASK_PREFIX)


def _mce(run, direction: str):
    ic = run.record.other.get("image_corruptions")
    try:
        return float(ic["directions"][direction]["mce"])
    except (TypeError, KeyError, ValueError):
        return None


def corruption_table(ctx: _Ctx) -> Table:
    """One row per (dataset, model, corruption, severity): RSUM per direction, the total's change against
    clean with its bootstrap CI, and the run's mCE (100 - R@1 based; relative when a reference was named)."""
    cols = [Column("dataset"), Column("model"), Column("corruption"), Column("family"), Column("severity", "int"),
            Column("rsum_i2t", "num", 2, "RSUM i2t"), Column("rsum_t2i", "num", 2, "RSUM t2i"),
            Column("rsum", "num", 2, "RSUM"), Column("rsum_clean", "num", 2, "clean RSUM"),
            Column("delta", "num", 2), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            Column("mce_i2t", "num", 4, "mCE i2t"), Column("mce_t2i", "num", 4, "mCE t2i"),
            Column("mce_reference"), Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for key in ctx.keys():
        mh, dn, dh = key
        for cond, run in ctx.pairs[key].items():
            meta = run.condition_meta(cond)
            if meta.get("kind") != "image":
                continue
            v, clean = _values(run, cond), _values(run, "clean")
            boot = next((b.fields for b in run.record.intervals if b.condition == cond
                         and b.get("direction") == "both" and b.get("metric") == "rsum"), {})
            total, base = v.get(("both", "rsum", None)), clean.get(("both", "rsum", None))
            ref = (run.record.other.get("image_corruptions") or {}).get("reference") or {}
            rows.append([ctx.dataset(dn, dh), ctx.model(mh), meta.get("corruption"), meta.get("corruption_family"),
                         meta.get("severity"), v.get(("i2t", "rsum", None)), v.get(("t2i", "rsum", None)), total,
                         base, boot.get("delta", None if total is None or base is None else total - base),
                         boot.get("ci_low"), boot.get("ci_high"), _mce(run, "i2t"), _mce(run, "t2i"),
                         ref.get("run_id") or "", run.ref, ctx.lab.run_flags(run)])
            runs.add(run.ref)
    rows.sort(key=lambda r: (r[0], r[1], str(r[3]), str(r[2]), r[4] or 0))
    return Table("image_corruptions", "Image corruptions: RSUM per corruption and severity",
                 "ImageNet-C corruptions of the images (both directions: corrupted query images for i2t, a "
                 "corrupted gallery for t2i; captions clean). delta = total RSUM minus clean, with the run's paired "
                 "bootstrap 95% interval. mCE: mean over corruptions of the corruption error (100 - R@1), "
                 "relative to the reference run when one was named (ImageNet-C), else unnormalised.",
                 cols, rows, sorted(runs))


def blind_note(run) -> str:
    """Why a choice-task run has no blind (text-only) value: its results.json ``task.blind_baseline.why`` (and the
    set's blind ceiling when its design fixes it), else ""."""
    task = run.record.other.get("task") or {}
    info = task.get("blind_baseline") or {}
    if info.get("available") is not False:
        return ""
    ceiling = f"; by design the set's blind ceiling is {task['blind_ceiling']}" if task.get("blind_ceiling") else ""
    return f"blind baseline unavailable: {info.get('why') or 'not recorded'}{ceiling}"


#: scores with a column of their own in the choice table already (accuracy; SugarCrepe++'s TOT)
_OWN_COLUMN = ("accuracy", "tot_accuracy")


def paper_scores(runs) -> list[tuple[str, str]]:
    """(metric, label) of every score the runs' sets report beside accuracy (results.json ``task.scores``, the set's
    declaration), first seen first; a run of an older vlbench without it adds none."""
    out: dict[str, str] = {}
    for run in runs:
        for s in (run.record.other.get("task") or {}).get("scores") or []:
            if isinstance(s, dict) and s.get("metric") not in _OWN_COLUMN:
                out.setdefault(str(s["metric"]), str(s.get("label") or s["metric"]))
    return list(out.items())


def choice_table(ctx: _Ctx) -> Table:
    """One row per (dataset, model, item set) of a choice-task run."""
    cols = [Column("dataset"), Column("model"), Column("task"), Column("set"), Column("items", "int"),
            Column("accuracy", "num", 2, "accuracy %"), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            Column("chance", "num", 2, "chance %"), Column("blind", "num", 2, "blind (text-only) %"),
            Column("run_id"), Column("flags")]
    rows, runs, extra = [], set(), []
    for key in ctx.keys():
        mh, dn, dh = key
        for cond, run in ctx.pairs[key].items():
            if not is_task(cond) or run.condition_meta(cond).get("set"):  # a set under a condition: compositional
                continue
            recs = {v.key.metric: v.to_json() for v in run.record.values if v.condition == cond}
            extra.append((run, recs))
            acc = recs.get("accuracy", {})
            task = str(run.condition_meta(cond).get("task") or cond.split(":")[1])
            rows.append([ctx.dataset(dn, dh), ctx.model(mh), task, cond[len(TASK_PREFIX):], acc.get("n"),
                         acc.get("value"), acc.get("ci_low"), acc.get("ci_high"),
                         recs.get("chance", {}).get("value"), recs.get("blind_accuracy", {}).get("value"), run.ref,
                         "; ".join(x for x in (blind_note(run), ctx.lab.run_flags(run)) if x)])
            tot = recs.get("tot_accuracy", {})  # SugarCrepe++'s text-only task (TOT)
            rows[-1][-2:-2] = [tot.get("value"), tot.get("ci_low"), tot.get("ci_high")]
            runs.add(run.ref)
    paired = sorted(zip(rows, extra), key=lambda p: (p[0][2], p[0][3], p[0][0], p[0][1]))
    rows, extra = [r for r, _ in paired], [x for _, x in paired]
    text = ("vlbench run --task NAME (vlbench ls tasks): each set's accuracy as the set defines it (most: percent of "
            "items where the right caption scores strictly above every other candidate; Winoground, ColorSwap, BiVLC: "
            "the group score; SugarCrepe++: ITT, both paraphrases above the negative; ARO: the macro accuracy; MMVP: "
            "pairs; a tie is a miss), with a 95% percentile bootstrap interval over items, the chance level, and a "
            "blind text-only baseline (a caption bigram model picking the more plausible text without the image; "
            "docs/tasks.md). A blank blind cell: the run had no blind baseline; its flags say why (e.g. the "
            "baseline's training captions, vlbench's coco caption file, were not in the run's data folder).")
    if any(r[-5] is not None for r in rows):  # SugarCrepe++ runs: its TOT accuracy beside ITT
        cols[-2:-2] = [Column("tot", "num", 2, "TOT % (text only)"), Column("tot_ci_low", "num", 2),
                       Column("tot_ci_high", "num", 2)]
        text += (" TOT (SugarCrepe++ only): the two paraphrases' text embeddings closer to each other than either "
                 "is to the negative.")
    else:
        rows = [r[:-5] + r[-2:] for r in rows]
    scores = paper_scores([run for run, _ in extra])
    if scores:  # every other score the sets' papers report, after accuracy and its interval
        at = [c.key for c in cols].index("ci_high") + 1
        cols[at:at] = [Column(m, "num", 2, f"{label} %") for m, label in scores]
        rows = [r[:at] + [recs.get(m, {}).get("value") for m, _ in scores] + r[at:]
                for r, (_, recs) in zip(rows, extra)]
        text += (" Every other score a set's paper reports has its column, as the set declares them (results.json "
                 "task.scores): Winoground and ColorSwap their text and image scores beside the group score, BiVLC "
                 "I2T and T2I, What'sUp pairs and sets of 4, MMVP each visual pattern; blank for a set without it.")
    if ctx.lab.stages:  # how each model scored the items: pair (an ITM head) or dual (cosine of two vectors)
        cols[2:2] = [Column(STAGES_COLUMN, label=STAGES_LABEL)]
        rows = [r[:2] + [ctx.lab.stages.get(run.model_hash)] + r[2:] for r, (run, _) in zip(rows, extra)]
        text += (" Kind / stages: pair (the items scored by a pair scorer's ITM head) or dual (the cosine of an image "
                 "and a caption vector), multi-vector, MLLM embedder.")
    return Table("choice_tasks", "Compositional choice tasks: accuracy", text, cols, rows, sorted(runs))
