"""Plots sized for a two-column paper (:data:`WIDTH`: the text width, for a ``figure*``; :data:`COLUMN`: one
column), as PNG at 150 dpi and as SVG, in the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency), drawn on matplotlib's Agg canvas without pyplot state (imported only when plots are made). Every text
from a user (model and dataset names) is shown as written: ``$`` is escaped, never read as mathtext.

* ``rsum_change--FAMILY--DATASET``: RSUM change per caption perturbation of one family (typos, lexical,
  distraction, word-order), i2t and t2i panels, one bar per model with the run's paired-bootstrap 95% interval;
* ``clean_vs_fg--MODEL``: clean Recall@1/5/10 per direction on each dataset next to its fine-grained version
  (``X`` and ``X-fg``), when both were run for that model;
* ``corruption_severity--FAMILY--DATASET-...``: total RSUM against severity for one image-corruption family
  (noise, blur, weather, digital), one panel per corruption, one line per model; the axis spans clean and
  the severities that were run.

Each plot is returned as (file name, caption, PNG bytes, SVG bytes); the caller writes them atomically. Both
formats are reproducible for one matplotlib version (no Software or Date stamp, a fixed SVG id salt).
"""

from __future__ import annotations

import io

from ...results import DIRECTIONS
from ...util.typeset import COLORS, GREY, plain, slug
from ..tables import Table, fg_base
from .ranking import family_rank

WIDTH = 7.0  # inches: the text width of a two-column paper (a figure* spanning both columns)
COLUMN = 3.4  # inches: one column of a two-column paper
DPI = 150
def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _svg(fig) -> bytes:
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "vlbench", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _both(fig) -> tuple[bytes, bytes]:
    return _png(fig), _svg(fig)


def _rows(table: Table) -> list[dict]:
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, r)) for r in table.rows]


def _bars(ax, rows: list[dict], conds: list[str], models: list[str], direction: str) -> None:
    """One bar per model at each condition, with the bootstrap interval as error bar."""
    width = 0.8 / max(1, len(models))
    for j, model in enumerate(models):
        xs, ys, lo, hi = [], [], [], []
        for i, c in enumerate(conds):
            r = next((x for x in rows if x["condition"] == c and x["direction"] == direction
                      and x["model"] == model), None)
            if r is None or r["delta"] is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(r["delta"])
            ok = r["ci_low"] is not None and r["ci_high"] is not None
            lo.append(max(0.0, r["delta"] - r["ci_low"]) if ok else 0.0)
            hi.append(max(0.0, r["ci_high"] - r["delta"]) if ok else 0.0)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=1.5, color=COLORS[j % len(COLORS)], label=plain(model[:40]),
               error_kw={"linewidth": 0.6})
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(conds)))
    ax.set_xticklabels([plain(c) for c in conds], rotation=30, ha="right", fontsize=6.5)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(f"{direction} RSUM", fontsize=8)


def _legend_below(fig, ax) -> None:
    """One legend for the whole figure, below the panels (never over the data), then the tight layout."""
    handles, labels = ax.get_legend_handles_labels()
    ncol = max(1, min(len(labels), 4 if max(map(len, labels), default=0) <= 24 else 2))
    rows = -(-len(labels) // ncol) if labels else 0
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=6.5, frameon=False)
    fig.tight_layout(rect=(0, 0.045 + 0.055 * rows, 1, 1))


def rsum_change_plots(changes: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes, bytes]]:
    """One figure per (dataset, perturbation family): conditions on the x axis, a bar per model."""
    groups: dict[tuple, list[dict]] = {}
    for r in _rows(changes):
        groups.setdefault((r["dataset"], r.get("family") or ""), []).append(r)
    out = []
    for (dataset, family), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], family_rank(kv[0][1]))):
        conds = list(dict.fromkeys(r["condition"] for r in rows))
        models = sorted({r["model"] for r in rows})
        fig = _figure(WIDTH, 2.6)
        axes = fig.subplots(1, 2, sharey=True)
        for ax, d in zip(axes, DIRECTIONS):
            _bars(ax, rows, conds, models, d)
        axes[0].set_ylabel("RSUM change vs clean", fontsize=7)
        fig.suptitle(plain(f"{family or 'other'} perturbations on {dataset}"[:90]), fontsize=8.5)
        _legend_below(fig, axes[0])
        name = f"rsum_change--{slug(family or 'other')}--{slug(dataset)}"
        out.append((f"{name}.png", f"RSUM change per {family or 'other'} perturbation on {dataset}, one bar per "
                    "model (error bars: the run's 95% paired-bootstrap interval)", *_both(fig)))
    return out


def clean_vs_fg_plots(t52: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes, bytes]]:
    rows = _rows(t52)
    by_model: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["dataset"]] = r
    metrics = [f"{d}_recall@{k}" for d in DIRECTIONS for k in (1, 5, 10)]
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
        fig = _figure(COLUMN, 1.9 * len(pairs) + 0.4)
        for i, (base, fg) in enumerate(pairs):
            ax = fig.add_subplot(len(pairs), 1, i + 1)
            xs = range(len(metrics))
            for j, (ds, color) in enumerate(((base, GREY), (fg, COLORS[0]))):
                ys = [dsets[ds].get(m) for m in metrics]
                ax.bar([x + (j - 0.5) * 0.4 for x in xs], [y if y is not None else 0.0 for y in ys], 0.4,
                       color=color, label=plain(ds[:50]))
            ax.set_xticks(list(xs))
            ax.set_xticklabels([m.replace("_recall@", " R@") for m in metrics], fontsize=6, rotation=30, ha="right")
            ax.tick_params(axis="y", labelsize=6.5)
            ax.set_ylabel("Recall (%)", fontsize=7)
            ax.legend(fontsize=6)
            ax.set_title(plain(f"{model}: clean vs fine-grained"[:60]), fontsize=7.5)
        fig.tight_layout()
        mh = model_hash.get(model, "")[:8]
        out.append((f"clean_vs_fg--{slug(model)}-{mh}.png", f"Clean vs fine-grained (FG) datasets: {model}",
                    *_both(fig)))
    return out


def corruption_plots(table: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes, bytes]]:
    """One figure per (dataset, corruption family): a panel per corruption, total RSUM against severity (0 =
    clean; only the severities run), one line per model."""
    groups: dict[tuple, dict] = {}
    for r in _rows(table):
        line = groups.setdefault((r["dataset"], r["family"]), {}).setdefault(r["corruption"], {}) \
            .setdefault(r["model"], {})
        if r["rsum"] is not None:
            line[r["severity"]] = r["rsum"]
        if r["rsum_clean"] is not None:
            line[0] = r["rsum_clean"]
    out = []
    for (dataset, family), by_corr in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        corrs = sorted(by_corr, key=str)
        models = sorted({m for lines in by_corr.values() for m in lines})
        sevs = sorted({s for lines in by_corr.values() for pts in lines.values() for s in pts if s is not None})
        fig = _figure(WIDTH, 2.7)
        axes = fig.subplots(1, len(corrs), sharey=True, squeeze=False)[0]
        for ax, corr in zip(axes, corrs):
            for j, model in enumerate(models):
                pts = by_corr[corr].get(model, {})
                xs = sorted(x for x in pts if x is not None)
                ax.plot(xs, [pts[x] for x in xs], marker="os^Dv<>p"[j % 8], markersize=2.5, linewidth=1,
                        color=COLORS[j % len(COLORS)], label=plain(model[:40]))
            ax.set_xticks(sevs)
            ax.set_xticklabels([str(x) for x in sevs], fontsize=6.5)
            ax.set_xlim(min(sevs) - 0.3, max(sevs) + 0.3)
            ax.tick_params(axis="y", labelsize=7)
            ax.set_title(plain(corr), fontsize=7.5)
            ax.set_xlabel("severity (0 = clean)", fontsize=6.5)
        axes[0].set_ylabel("RSUM (i2t + t2i)", fontsize=7)
        fig.suptitle(plain(f"{family} corruptions on {dataset}"[:90]), fontsize=8.5)
        _legend_below(fig, axes[0])
        mh = "-".join(model_hash.get(m, "")[:6] for m in models)[:40]
        out.append((f"corruption_severity--{slug(str(family))}--{slug(dataset)}-{mh}.png",
                    f"RSUM against severity, {family} corruptions, {dataset}", *_both(fig)))
    return out
