"""Caption-length budgets as conditions (``--token-budget``, ``--sentence-budget``).

``budget:B`` evaluates the clean queries with every caption cut to B tokens by the model's own tokenizer, its
end token kept (models/budget.py); ``sentences:K`` with every caption cut to its first K sentences
(util/sentences.py). Each is a condition with every metric, like a perturbation, and its entry in results.json
says how many captions the budget actually cut (``n_cut``), how many the model's own context length cuts anyway
(``n_cut_by_context``), the mean caption length in tokens and the model's context length, so a curve of recall
against the budget can mark where the model stops reading. A caption within the budget is unchanged and is
encoded once for clean and every budget. Caption perturbations are not cut: they are read up to the model's
context length, as always.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean

from ..conditions import RunCondition
from ..errors import VlbenchError
from ..models.budget import MAX_BUDGET
from ..util.sentences import count_sentences, first_sentences


def check_budgets(tokens, sentences) -> None:
    for flag, values in (("--token-budget", tokens), ("--sentence-budget", sentences)):
        bad = [v for v in values or () if not 1 <= int(v) <= MAX_BUDGET]
        if bad:
            raise VlbenchError(f"{flag} {bad[0]} is out of range", f"give budgets from 1 to {MAX_BUDGET}")
        if len(set(values or ())) != len(values or ()):
            raise VlbenchError(f"{flag} names a budget twice", "give each budget once")


def token_conditions(budgets, captions: list[str], model) -> list[RunCondition]:
    context = model.text_context_length()
    cuts, lengths = model.cut_texts(captions, sorted(int(b) for b in budgets))  # each caption tokenized once
    out = []
    for budget, cut in cuts.items():
        meta = {"kind": "budget", "family": "budget", "unit": "tokens", "budget": int(budget),
                "context_length": context, "n_captions": len(captions),
                "n_cut": sum(n > budget for n in lengths),
                "n_cut_by_context": sum(n > context for n in lengths) if context else None,
                "mean_tokens": round(fmean(lengths), 3) if lengths else None,
                "reads_up_to": min(int(budget), context) if context else int(budget)}
        out.append(RunCondition(f"budget:{budget}", meta, texts=tuple(cut), kind="budget"))
    return out


def sentence_conditions(budgets, captions: list[str]) -> list[RunCondition]:
    counts = [count_sentences(c) for c in captions]
    out = []
    for k in sorted(budgets):
        cut = [first_sentences(c, int(k)) for c in captions]
        meta = {"kind": "budget", "family": "budget", "unit": "sentences", "budget": int(k),
                "n_captions": len(captions), "n_cut": sum(n > k for n in counts),
                "mean_sentences": round(fmean(counts), 3) if counts else None}
        out.append(RunCondition(f"sentences:{k}", meta, texts=tuple(cut), kind="budget"))
    return out


def with_budgets(cfg, plan, model, log=None):
    """The plan with its budget conditions added after the others (the plan itself when none is asked); ``log``
    gets one line per budget that cuts no caption (its numbers will be clean's)."""
    tokens, sentences = tuple(cfg.token_budget or ()), tuple(cfg.sentence_budget or ())
    if not tokens and not sentences:
        return plan
    captions = list(plan.ds.captions)
    extra = [*token_conditions(tokens, captions, model), *sentence_conditions(sentences, captions)]
    for c in extra:
        if log is not None and c.meta["n_cut"] == 0:
            log(uncut_note(c.name, c.meta))
    return dataclasses.replace(plan, conditions=tuple(plan.conditions) + tuple(extra))


def _budget_metas(conditions: dict) -> dict:
    return {name: meta for name, meta in (conditions or {}).items() if (meta or {}).get("kind") == "budget"}


def uncut_note(name: str, meta: Mapping) -> str:
    """The line that says a budget cut no caption (its numbers are clean's by construction)."""
    unit = meta.get("unit") or "tokens"
    return (f"{name} cut no caption (n_cut 0 of {meta.get('n_captions', '?')}: every caption is within "
            f"{meta.get('budget')} {unit}), so its numbers are clean's and its changes 0 by construction")


def budget_rows(conditions: dict) -> list[list[str]]:
    """Per budget condition of a run (results.json ``conditions``): its name, the captions it cut (``n_cut`` of
    all), the ones the model's context length cuts anyway, and a note when it cut none; empty without budgets."""
    rows = []
    for name, meta in _budget_metas(conditions).items():
        n_cut, total = meta.get("n_cut"), meta.get("n_captions")
        by_context = meta.get("n_cut_by_context")
        rows.append([name, f"{n_cut} of {total}", "" if by_context is None else str(by_context),
                     "cut no caption: same numbers as clean" if n_cut == 0 else ""])
    return rows


def curve_rows(results: dict) -> list[dict]:
    """Per budget condition and direction: R@k and RSUM, from a run's results (clean first, as budget "all")."""
    budgeted = _budget_metas(results.get("conditions") or {})
    rows: dict = {}
    for v in results.get("results") or []:
        name = v["condition"]
        if name != "clean" and name not in budgeted:
            continue
        meta = budgeted.get(name, {})
        for unit in ((meta.get("unit"),) if name != "clean" else {m.get("unit") for m in budgeted.values()}):
            key = (unit, meta.get("budget"), v["direction"])
            row = rows.setdefault(key, {"unit": unit, "budget": meta.get("budget", "all"), "condition": name,
                                        "direction": v["direction"], "n_cut": meta.get("n_cut", 0),
                                        "context_length": meta.get("context_length")})
            if v["metric"] == "recall":
                row[f"R@{v['k']}"] = v["value"]
            elif v["metric"] == "rsum":
                row["rsum"] = v["value"]
    return [rows[k] for k in sorted(rows, key=lambda k: (str(k[0]), k[1] is None, k[1] or 0, k[2]))]


def write_curve(out, results: dict) -> list:
    """budget_curve.csv and budget_curve.png (recall against the caption budget, the model's context length
    marked) in the run folder, when the run has budget conditions; the paths written."""
    rows = curve_rows(results)
    if not any(r["condition"] != "clean" for r in rows):
        return []
    out = Path(out)
    cols = ["unit", "budget", "condition", "direction", "n_cut", "context_length"]
    cols += sorted({k for r in rows for k in r if k.startswith("R@")}, key=lambda c: int(c[2:])) + ["rsum"]
    with open(out / "budget_curve.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return [out / "budget_curve.csv", _plot(out / "budget_curve.png", rows, results)]


def _plot(path, rows: list[dict], results: dict):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: matplotlib only when a curve is drawn
    from matplotlib.figure import Figure

    units = [u for u in ("tokens", "sentences") if any(r["unit"] == u and r["condition"] != "clean" for r in rows)]
    fig = Figure(figsize=(3.4 * len(units), 2.6), dpi=150)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(units), squeeze=False)[0]
    colours = {"t2i": "#0072B2", "i2t": "#D55E00"}
    recall = sorted({k for r in rows for k in r if k.startswith("R@")}, key=lambda c: int(c[2:]))[:1]
    for ax, unit in zip(axes, units):
        for direction, colour in colours.items():
            pts = [r for r in rows if r["unit"] == unit and r["direction"] == direction and r["condition"] != "clean"]
            clean = next((r for r in rows if r["condition"] == "clean" and r["direction"] == direction), None)
            for col, style in ((recall[0], "-"),) if recall else ():
                ax.plot([r["budget"] for r in pts], [r.get(col) for r in pts], style, marker="o", ms=3, color=colour,
                        label=f"{direction} {col}")
                if clean is not None:
                    ax.axhline(clean.get(col), color=colour, lw=0.7, ls=":")
        ctx = next((r["context_length"] for r in rows if r["unit"] == unit and r.get("context_length")), None)
        xs = [r["budget"] for r in rows if r["unit"] == unit and r["condition"] != "clean"]
        if unit == "tokens" and xs and max(xs) >= 8 * min(xs):
            ax.set_xscale("log", base=2)
        if unit == "tokens" and ctx:
            ax.axvline(ctx, color="#555555", lw=0.8, ls="--")
            ax.annotate(f"context {ctx}", (ctx, ax.get_ylim()[0]), fontsize=6, rotation=90, va="bottom", ha="right")
        ax.set_xlabel(f"caption budget ({unit})", fontsize=8)
        ax.set_ylabel("recall (%)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, frameon=False)
    model = (results.get("model") or {}).get("label") or (results.get("model") or {}).get("spec", "")
    fig.suptitle(str(model).replace("$", r"\$") + ": recall vs caption budget (dotted: clean)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    return path
