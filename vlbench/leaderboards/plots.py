"""PNG plots (matplotlib's Agg canvas, no pyplot state, imported only when plots are made).

* ``rsum_change--MODEL--DATASET.png``: RSUM change per perturbation for one model and dataset, i2t and
  t2i side by side, with the run's paired-bootstrap 95% interval;
* ``clean_vs_fg--MODEL.png``: clean Recall@1/5/10 per direction on each dataset next to its
  fine-grained version (``X`` and ``X-fg``), when both were run for that model.

Each plot is returned as PNG bytes; the caller writes them atomically.
"""

from __future__ import annotations

import io
import re

from .render import family_rank
from .tables import Table, fg_base


def slug(text: str, n: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:n] or "x"


def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _rows(table: Table) -> list[dict]:
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, r)) for r in table.rows]


def _by_family(rows: list[dict]) -> tuple[list[str], list[str]]:
    """Conditions grouped by perturbation family (the built-in family order, then others by name), each
    family's conditions in the table's order; returns the conditions and their families."""
    fam: dict[str, str] = {}
    for r in rows:
        fam.setdefault(r["condition"], r.get("family") or "")
    first = {c: i for i, c in enumerate(fam)}
    conds = sorted(fam, key=lambda c: (family_rank(fam[c]), first[c]))
    return conds, [fam[c] for c in conds]


def _family_bands(ax, fams: list[str]) -> None:
    """Dotted lines between families and the family name above its group."""
    start = 0
    for i in range(1, len(fams) + 1):
        if i == len(fams) or fams[i] != fams[start]:
            if i < len(fams):
                ax.axvline(i - 0.5, color="#999999", linewidth=0.8, linestyle=":")
            ax.text((start + i - 1) / 2, 1.0, fams[start], transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8, color="#444444")
            start = i


def rsum_change_plots(changes: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes]]:
    """(file name, caption, png) per (model, dataset) with at least one perturbation."""
    groups: dict[tuple, list[dict]] = {}
    for r in _rows(changes):
        groups.setdefault((r["model"], r["dataset"]), []).append(r)
    out = []
    for (model, dataset), rows in sorted(groups.items()):
        conds, fams = _by_family(rows)
        fig = _figure(max(5.0, 1.0 + 0.55 * len(conds)), 3.6)
        ax = fig.add_subplot(111)
        width = 0.4
        for j, (d, color) in enumerate((("i2t", "#4C72B0"), ("t2i", "#DD8452"))):
            xs, ys, lo, hi = [], [], [], []
            for i, c in enumerate(conds):
                r = next((x for x in rows if x["condition"] == c and x["direction"] == d), None)
                if r is None or r["delta"] is None:
                    continue
                xs.append(i + (j - 0.5) * width)
                ys.append(r["delta"])
                ok = r["ci_low"] is not None and r["ci_high"] is not None
                lo.append(max(0.0, r["delta"] - r["ci_low"]) if ok else 0.0)
                hi.append(max(0.0, r["ci_high"] - r["delta"]) if ok else 0.0)
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=color, label=f"{d} RSUM")
        ax.axhline(0, color="black", linewidth=0.8)
        _family_bands(ax, fams)
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels(conds, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("RSUM change vs clean")
        ax.set_title(f"{model} on {dataset}"[:90], fontsize=9, pad=14)
        ax.legend(fontsize=8)
        fig.tight_layout()
        mh = model_hash.get(model, "")[:8]
        name = f"rsum_change--{slug(model)}-{mh}--{slug(dataset)}.png"
        out.append((name, f"RSUM change per perturbation: {model} on {dataset} (bars: 95% bootstrap interval)",
                    _png(fig)))
    return out


def clean_vs_fg_plots(t52: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes]]:
    rows = _rows(t52)
    by_model: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["dataset"]] = r
    metrics = [f"{d}_recall@{k}" for d in ("i2t", "t2i") for k in (1, 5, 10)]
    out = []
    for model, dsets in sorted(by_model.items()):
        pairs = []
        for fg in sorted(dsets):
            name = fg.split(" [")[0]  # a mixed dataset label is "name [hash8]"
            base = fg_base(name)
            if base is None:
                continue
            for cand in sorted(dsets):
                if cand.split(" [")[0] == base:
                    pairs.append((cand, fg))
        if not pairs:
            continue
        fig = _figure(7.0, 2.8 * len(pairs) + 0.4)
        for i, (base, fg) in enumerate(pairs):
            ax = fig.add_subplot(len(pairs), 1, i + 1)
            xs = range(len(metrics))
            for j, (ds, color) in enumerate(((base, "#8c8c8c"), (fg, "#55A868"))):
                ys = [dsets[ds].get(m) for m in metrics]
                ax.bar([x + (j - 0.5) * 0.4 for x in xs], [y if y is not None else 0.0 for y in ys], 0.4,
                       color=color, label=ds[:50])
            ax.set_xticks(list(xs))
            ax.set_xticklabels([m.replace("_recall@", " R@") for m in metrics], fontsize=8)
            ax.set_ylabel("Recall (%)")
            ax.legend(fontsize=7)
            ax.set_title(f"{model}: clean vs fine-grained captions"[:90], fontsize=9)
        fig.tight_layout()
        mh = model_hash.get(model, "")[:8]
        out.append((f"clean_vs_fg--{slug(model)}-{mh}.png", f"Clean vs fine-grained (FG) datasets: {model}",
                    _png(fig)))
    return out


def corruption_plots(table: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes]]:
    """(file name, caption, png) per (dataset, corruption family): total RSUM against severity (0 = clean),
    one line per model and corruption."""
    groups: dict[tuple, dict] = {}
    for r in _rows(table):
        line = groups.setdefault((r["dataset"], r["family"]), {}).setdefault((r["model"], r["corruption"]), {})
        if r["rsum"] is not None:
            line[r["severity"]] = r["rsum"]
        if r["rsum_clean"] is not None:
            line[0] = r["rsum_clean"]
    out = []
    for (dataset, family), lines in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        fig = _figure(6.0, 3.8)
        ax = fig.add_subplot(111)
        for (model, corruption), pts in sorted(lines.items()):
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], marker="o", label=f"{model[:30]}: {corruption}")
        ax.set_xticks(range(6))
        ax.set_xticklabels(["clean", "1", "2", "3", "4", "5"])
        ax.set_xlabel("severity")
        ax.set_ylabel("RSUM (i2t + t2i)")
        ax.set_title(f"{family} corruptions on {dataset}"[:90], fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        models = sorted({m for m, _ in lines})
        mh = "-".join(model_hash.get(m, "")[:6] for m in models)[:40]
        out.append((f"corruption_severity--{slug(str(family))}--{slug(dataset)}-{mh}.png",
                    f"RSUM against severity, {family} corruptions, {dataset}", _png(fig)))
    return out
