"""The summary a paper's results section starts from (the definition is argued in
docs/leaderboards.md, "The robustness summary"): per model and dataset, the clean total RSUM, the chance level, and
one headline number per family of caption perturbations and of image corruptions with its bootstrap interval:

* **RSUM retained** of a family F = 100 x mean over F's conditions of RSUM_c / RSUM_clean, in percent (total RSUM,
  i2t + t2i; 100 = unaffected, below 100 = a loss). An image family averages its corruptions and severities.
* its **95% interval**: the percentile bootstrap over queries, each direction's queries resampled with replacement
  (as the runs' own intervals), the same resample for clean and every condition (paired), :data:`N_BOOT` resamples
  from a generator seeded by (:data:`SEED`, the run id and the family); from the run's per_query.csv.gz, so only
  where clean and every condition of the family come from one run that has the file (else the cell is empty).
* **chance**: the total RSUM of a random ranking (:func:`chance_rsum`): E[hit@k] is k / N for a t2i query with its
  one image among N, and 1 - C(M - m, k) / C(M, k) for an i2t query with m positive captions among M (m: the
  dataset's captions per image on average; per fold when the dataset has folds).
"""

from __future__ import annotations

import zlib

import numpy as np

from ...results import DIRECTIONS
from ..sections import run_per_query
from ..store import Run
from ..table_types import Column, Table
from ..tables import _Ctx
from .ranking import family_rank

N_BOOT = 1000
CHUNK = 100  # resamples drawn at a time
SEED = 0
ALPHA = 0.05
#: condition kinds without a robustness family here (gallery distractors, shortcut probes have their own tables)
_SKIP_KINDS = ("gallery", "shortcut", "sensitivity")  # sensitivity: meaning-changing probes, never "retained"


def hit_chance(k: int, gallery: float, positives: float = 1.0) -> float:
    """Expected hit@k (0-1) of a uniformly random ranking of ``gallery`` candidates, ``positives`` of them relevant:
    1 - C(gallery - positives, k) / C(gallery, k) (real ``positives``: the product form)."""
    if k >= gallery - positives + 1:
        return 1.0
    miss = 1.0
    for j in range(int(k)):
        miss *= (gallery - positives - j) / (gallery - j)
    return 1.0 - miss


def chance_rsum(dataset: dict, ks=(1, 5, 10)) -> float | None:
    """Total RSUM (i2t + t2i, percent hits summed over ``ks``) of a random ranking on ``dataset`` (results.json's
    dataset record: n_images, n_captions, gallery_size, folds); None when the sizes are not recorded."""
    n_img, n_cap = dataset.get("n_images"), dataset.get("n_captions")
    if not (isinstance(n_img, int) and isinstance(n_cap, int) and n_img > 0 and n_cap > 0):
        return None
    f, g = dataset.get("folds"), dataset.get("gallery_size")
    folds = f if isinstance(f, int) and f > 0 else 1
    gallery = g if isinstance(g, int) else n_img
    extra = max(0, gallery - n_img)  # distractor images beside the dataset's own (a t2i gallery option)
    n_t2i, n_i2t, per_image = n_img / folds + extra, n_cap / folds, n_cap / n_img
    return 100.0 * sum(hit_chance(k, n_t2i) + hit_chance(k, n_i2t, per_image) for k in ks)


def _family(run: Run, cond: str) -> str | None:
    meta = run.condition_meta(cond)
    if cond == "clean" or cond.startswith("task:") or meta.get("kind") in _SKIP_KINDS:
        return None
    return str(meta.get("family") or "other")


def _per_query(run: Run, conds: list[str]) -> dict | None:
    """{(condition, direction): per-query RSUM} of ``conds`` + clean, aligned with clean's queries, or None."""
    try:  # only the run's own file, proven by its file hashes and agreeing with its record (as rank groups read it)
        tabs = run_per_query(run, set(conds) | {"clean"})
        if tabs is None:
            return None
    except Exception:  # an unproven or unreadable per-query file: no interval (the value still comes from results.json)
        return None
    out = {}
    for c in ["clean"] + conds:
        for d in DIRECTIONS:
            t = tabs.get((c, d))
            if t is None or "rsum" not in t.columns or t.keys != tabs[("clean", d)].keys:
                return None
            out[(c, d)] = t.columns["rsum"]
    return out if all(np.isfinite(v).all() for v in out.values()) else None


def retained_interval(pq: dict, conds: list[str], key: str) -> tuple[float, float] | None:
    """The percentile bootstrap interval of RSUM retained (see the module docstring)."""
    rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
    sums = np.zeros((N_BOOT, len(conds) + 1))  # resampled total RSUM: clean, then each condition
    for d in DIRECTIONS:
        m = np.stack([pq[(c, d)] for c in ["clean"] + conds])  # (conditions, queries)
        n = m.shape[1]
        for start in range(0, N_BOOT, CHUNK):  # memory: CHUNK x queries at a time
            b = min(CHUNK, N_BOOT - start)
            idx = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]  # resample r's draws, offset r * n
            counts = np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
            sums[start:start + b] += counts @ m.T / n
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = 100.0 * sums[:, 1:].mean(axis=1) / sums[:, 0]
    stat = stat[np.isfinite(stat)]
    if len(stat) < N_BOOT // 2:
        return None
    return float(np.quantile(stat, ALPHA / 2)), float(np.quantile(stat, 1 - ALPHA / 2))


def _cells(ctx: _Ctx, by_cond: dict[str, Run], clean_run: Run, families: list[str]) -> list:
    clean = clean_run.values("clean").get(("both", "rsum", None))
    out: list = []
    for fam in families:
        conds = sorted(c for c, r in by_cond.items() if _family(r, c) == fam)
        got = [by_cond[c].values(c).get(("both", "rsum", None)) for c in conds]
        vals = [float(v) for v in got if v is not None]
        if not conds or clean is None or clean <= 0 or len(vals) < len(conds):
            out += [None, None, None]
            continue
        value = 100.0 * sum(vals) / len(vals) / clean
        ci = None
        if all(by_cond[c] is clean_run for c in conds):
            pq = _per_query(clean_run, conds)
            ci = retained_interval(pq, conds, f"{clean_run.run_id}|{fam}") if pq else None
        out += [value, *(ci or (None, None))]
    return out


def robustness_summary(ctx: _Ctx) -> Table:
    """One row per model and dataset with clean results: clean RSUM, chance, RSUM retained per family."""
    fams = sorted({f for by in ctx.pairs.values() for c, r in by.items() if (f := _family(r, c))},
                  key=lambda f: (f.startswith("image-"), family_rank(f)))
    cols = [Column("dataset"), Column("model"), Column("clean_rsum", "num", 1, "clean RSUM"),
            Column("chance_rsum", "num", 1, "chance RSUM")]
    for f in fams:
        cols += [Column(f, "num", 1, f"{f} % retained"), Column(f"{f}_ci_low", "num", 1),
                 Column(f"{f}_ci_high", "num", 1)]
    rows: list[list] = []
    runs: set[str] = set()
    for key in ctx.keys():
        by_cond = ctx.pairs[key]
        run = by_cond.get("clean")
        if run is None:
            continue
        ks = run.record.settings.get("k")
        ks = tuple(ks) if isinstance(ks, list) and all(isinstance(k, int) for k in ks) else (1, 5, 10)
        rows.append([ctx.dataset(*key[1:]), ctx.model(key[0]), run.values("clean").get(("both", "rsum", None)),
                     chance_rsum(run.record.dataset.fields, ks)] + _cells(ctx, by_cond, run, fams))
        runs.update(r.ref for r in by_cond.values())
    return Table("robustness_summary", "Summary: clean RSUM, chance and RSUM retained per perturbation family",
                 "One row per model and dataset. clean RSUM: total RSUM (i2t + t2i, 0-600); chance: the total RSUM of "
                 "a random ranking for this gallery size; per family: RSUM retained, 100 x the mean over the family's "
                 "conditions of RSUM under the condition / clean RSUM (100 = unaffected), with its 95% paired "
                 "bootstrap interval over queries (1000 resamples; empty without per-query values). "
                 "docs/leaderboards.md.", cols, rows, sorted(runs))

