"""Plots of ``vlbench analyze``: per run and direction, one panel per caption feature, the mean change per
quantile bin (x: the bin's median feature range) with its 95% interval, one line per condition family (or per
condition when no family has several). Drawn on matplotlib's Agg canvas without pyplot state, 7 in wide (a
two-column paper's full width), in the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..util.typeset import COLORS, plain, slug

WIDTH = 7.0


def plot_bins(bins, out: Path) -> list[Path]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: matplotlib is heavy
    from matplotlib.figure import Figure

    written = []
    for (_run, direction), rows in bins.groupby(["run", "direction"], sort=False):
        lines = rows[rows["scope"] == "family"]
        if lines.empty:
            lines = rows
        features = list(dict.fromkeys(lines["feature"]))
        ncol = 3
        nrow = int(np.ceil(len(features) / ncol))
        fig = Figure(figsize=(WIDTH, 2.0 * nrow + 0.6), dpi=150)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrow, ncol, squeeze=False)
        for ax, feature in zip(axes.flat, features):
            per = lines[lines["feature"] == feature]
            for c, (label, g) in enumerate(per.groupby("condition", sort=True)):
                x = (g["feature_min"].to_numpy() + g["feature_max"].to_numpy()) / 2
                y = g["mean"].to_numpy()
                err = np.vstack([y - g["ci_low"].to_numpy(), g["ci_high"].to_numpy() - y])
                ax.errorbar(x, y, yerr=np.abs(err), marker="o", ms=3, lw=1, capsize=2,
                            color=COLORS[c % (len(COLORS) - 1)],  # the palette but its last (yellow, weak on white)
                            label=plain(label.removeprefix("family:")))
            ax.axhline(0, color="#888888", lw=0.6)
            ax.set_title(feature.replace("_", " "), fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(features):]:
            ax.set_visible(False)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=7, frameon=False)
        model, dataset = rows["model"].iat[0], rows["dataset"].iat[0]
        fig.suptitle(plain(f"{model} on {dataset}, {direction}: mean {rows['outcome'].iat[0]} by feature bin"),
                     fontsize=9)
        fig.tight_layout(rect=(0, 0.08, 1, 0.95))
        path = out / f"analysis_bins--{slug(str(model), 60)}--{slug(str(dataset), 60)}--{direction}.png"
        fig.savefig(path, format="png", metadata={"Software": None})
        written.append(path)
    return written
