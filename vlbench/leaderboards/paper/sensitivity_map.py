"""The invariance / sensitivity map (docs/leaderboards.md, "The invariance / sensitivity map"): per model and
dataset, how much of the clean score survives changes that keep the meaning, against how often a change of
meaning is noticed. Only the two together say whether a model reads the caption: a model that ignores word order
and negation keeps everything under shuffles (invariance 100) and notices no swap (sensitivity at or below 50).

* **invariance** = the mean, over the caption-perturbation families run (meaning-preserving: typos, lexical,
  distraction, word-order, ...), of the family's RSUM retained (100 x mean of RSUM_c / RSUM_clean over the
  family's conditions; :mod:`.summary`). Image corruptions, gallery distractors, shortcut and sensitivity
  conditions are not in it.
* **sensitivity** = the mean pairwise accuracy (results.json ``sensitivity``: % of applicable captions whose
  original scores strictly above its probe; a tie is a miss) over the probe conditions run that make the caption
  false; per probe family, the mean over that family's probes. Negated-query probes (true denials) are retrieval
  numbers, not in the mean.
* **reference**: a model whose identity says it is order-free (``order_free``: the bag-of-words model), the point
  that shows what ignoring word order and negation looks like.
"""

from __future__ import annotations

from ...util.typeset import COLORS, GREY, plain, slug
from ..store import Run
from ..table_types import Column, Table
from ..tables import _Ctx
from .plots import WIDTH, _both, _figure, _rows
from .summary import _family

#: condition kinds that are no meaning-preserving caption perturbation
_NOT_INVARIANCE = ("image", "gallery", "shortcut", "sensitivity", "budget")


def probe_entry(run: Run, cond: str) -> dict | None:
    """The results.json ``sensitivity`` entry of a probe condition scored pairwise, or None."""
    sec = run.record.other.get("sensitivity")
    entry = (sec.get("conditions") or {}).get(cond) if isinstance(sec, dict) else None
    if not isinstance(entry, dict) or entry.get("effect") != "false" or entry.get("accuracy") is None:
        return None
    return entry


def is_reference(run: Run) -> bool:
    """The order-free (bag-of-words) reference model: its identity says ``order_free``."""
    ident = (run.record.model.fields or {}).get("identity")
    return bool(isinstance(ident, dict) and ident.get("order_free"))


def _invariance(by_cond: dict[str, Run]) -> tuple[float | None, int]:
    """(mean of the caption families' RSUM retained, how many families), from the clean run's clean RSUM."""
    clean_run = by_cond.get("clean")
    clean = clean_run.values("clean").get(("both", "rsum", None)) if clean_run else None
    if clean is None or clean <= 0:
        return None, 0
    fams: dict[str, list[float]] = {}
    for c, r in by_cond.items():
        fam = _family(r, c)
        kind = r.condition_meta(c).get("kind")
        if fam is None or kind in _NOT_INVARIANCE or str(fam).startswith("image-") or c.startswith("img:"):
            continue
        v = r.values(c).get(("both", "rsum", None))
        if v is not None:
            fams.setdefault(fam, []).append(100.0 * float(v) / clean)
    if not fams:
        return None, 0
    return sum(sum(v) / len(v) for v in fams.values()) / len(fams), len(fams)


def _sensitivity(by_cond: dict[str, Run]) -> tuple[float | None, dict[str, float], int]:
    """(mean pairwise accuracy over the probes, per probe family, how many probes)."""
    accs: dict[str, float] = {}
    fams: dict[str, list[float]] = {}
    for c, r in by_cond.items():
        entry = probe_entry(r, c)
        if entry is None:
            continue
        accs[c] = float(entry["accuracy"])
        fams.setdefault(str(entry.get("family") or r.condition_meta(c).get("family") or "other"), []).append(accs[c])
    if not accs:
        return None, {}, 0
    return sum(accs.values()) / len(accs), {f: sum(v) / len(v) for f, v in fams.items()}, len(accs)


def sensitivity_map(ctx: _Ctx) -> Table:
    """One row per model and dataset that ran probes: invariance, sensitivity, sensitivity per probe family."""
    cells = {}
    for key in ctx.keys():
        by_cond = ctx.pairs[key]
        sens, per_fam, n_probes = _sensitivity(by_cond)
        if sens is None:
            continue
        inv, n_fams = _invariance(by_cond)
        cells[key] = (inv, n_fams, sens, per_fam, n_probes, any(is_reference(r) for r in by_cond.values()))
    fams = sorted({f for c in cells.values() for f in c[3]})
    cols = [Column("dataset"), Column("model"), Column("reference"),
            Column("invariance", "num", 1, "invariance (% RSUM retained)"), Column("invariance_families", "int"),
            Column("sensitivity", "num", 1, "sensitivity (pairwise accuracy %)"), Column("probes", "int")]
    cols += [Column(f"sensitivity_{f}", "num", 1, f"{f} accuracy %") for f in fams]
    rows: list[list] = []
    runs: set[str] = set()
    for key, (inv, n_fams, sens, per_fam, n_probes, ref) in cells.items():
        rows.append([ctx.dataset(*key[1:]), ctx.model(key[0]), "bag-of-words reference" if ref else "",
                     inv, n_fams, sens, n_probes] + [per_fam.get(f) for f in fams])
        runs.update(r.ref for r in ctx.pairs[key].values())
    return Table("sensitivity_map", "The invariance / sensitivity map: meaning kept against meaning noticed",
                 "One row per model and dataset with probe results. invariance: the mean over the caption-perturbation "
                 "families of RSUM retained (100 x RSUM under the condition / clean RSUM; 100 = unaffected); "
                 "sensitivity: the mean pairwise accuracy over the probes that make the caption false (% of "
                 "applicable captions whose original scores strictly above its probe; a tie is a miss), and per "
                 "probe family. The two are never averaged together. reference: an order-free (bag-of-words) "
                 "model. docs/leaderboards.md.", cols, rows, sorted(runs))


def sensitivity_map_plots(table: Table, model_hash: dict[str, str]) -> list[tuple[str, str, bytes, bytes]]:
    """One scatter per dataset: invariance (x) against sensitivity (y), a point per model; the reference model
    as a grey square. Models without invariance (no caption perturbation run) are left out of the plot."""
    groups: dict[str, list[dict]] = {}
    for r in _rows(table):
        if r["invariance"] is not None and r["sensitivity"] is not None:
            groups.setdefault(r["dataset"], []).append(r)
    out = []
    for dataset, rows in sorted(groups.items()):
        fig = _figure(WIDTH / 2, 2.8)
        ax = fig.add_subplot(1, 1, 1)
        for j, r in enumerate(sorted(rows, key=lambda x: x["model"])):
            ref = bool(r["reference"])
            ax.scatter([r["invariance"]], [r["sensitivity"]], s=22, marker="s" if ref else "o",
                       color=GREY if ref else COLORS[j % len(COLORS)],
                       label=plain(str(r["model"])[:40] + (" (bag-of-words reference)" if ref else "")))
        ax.axhline(50, color="black", linewidth=0.5, linestyle=":")
        ax.set_xlabel("invariance: % RSUM retained (meaning kept)", fontsize=7)
        ax.set_ylabel("sensitivity: pairwise accuracy %", fontsize=7)
        ax.set_ylim(0, 100)
        ax.tick_params(labelsize=6.5)
        ax.legend(fontsize=6, loc="lower left", frameon=False)
        ax.set_title(plain(f"invariance / sensitivity on {dataset}"[:70]), fontsize=8)
        fig.tight_layout()
        mh = "-".join(model_hash.get(r["model"], "")[:6] for r in rows)[:40]
        out.append((f"sensitivity_map--{slug(dataset)}-{mh}.png",
                    f"Invariance (% RSUM retained under meaning-preserving perturbations) against sensitivity "
                    f"(pairwise accuracy on meaning-changing probes; the dotted line: 50) on {dataset}",
                    *_both(fig)))
    return out
