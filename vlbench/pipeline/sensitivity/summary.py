"""What a run with ``--probes`` records about each probe condition: results.json ``sensitivity`` (pairwise accuracy
with its interval and the blind text-only ceiling; the negated queries' denial shares), the per-item rows
(per_item.csv.gz) and the table's section. Definitions: :mod:`.scores` and docs/perturbations.md."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np

from ...datasets.captionlm import coco_caption_lm, normalized
from ...datasets.folds import fold_captions
from ...errors import DataError
from ...perturbations.probes import KIND, PROBES
from ...runfolder import PER_ITEM
from ...util.markdown import md_table
from . import scores

#: the per-query column (per_query.csv.gz, t2i rows of a pairwise probe): 100 when the original scores strictly above
#: its probe, 0 when not (a tie included), empty where the probe did not apply; its mean is the pairwise accuracy
PROBE_COLUMN = "probe_accuracy"
#: more of the blind scorer's training text than this among the evaluated texts: no ceiling (the choice tasks' rule)
MAX_EXCLUDED_SHARE = 0.5
DEFINITIONS = {
    "similarity": "s(image, text): the dot product of the run's image and text embeddings, in float64",
    "pairwise": "per applicable caption of image g: a win when s(g, original) > s(g, probe); a tie is a miss; "
                "accuracy = 100 x wins / applicable captions; 95% percentile bootstrap over the captions",
    "blind_accuracy": "the same rule with the text-only bigram plausibility (datasets/captionlm: mean log "
                      "probability per token) in place of s: how often text plausibility alone picks the original",
    "denied_share@K": "per negated query (a true denial), the share of its top K gallery images (score desc, then "
                      "gallery index asc; its fold's gallery) whose captions mention the denied object (the word, "
                      "its -s/-es/-ies or irregular plural, as whole lower-case words); the mean over applicable "
                      "queries; original_denied_share@K: the same for the caption before the denial",
    "recall@K": "the run's own t2i recall@K of the probe condition, over the applicable queries only",
}


def effect(ps) -> str:
    """"false" (the probe must lose to its original: scored pairwise) or "true" (a true addition: scored as
    retrieval queries), from the ProbeSet itself, else its probe class; an unknown probe counts as "false"."""
    own = getattr(ps, "effect", None)
    if own in ("true", "false"):
        return own
    cls = PROBES.get(getattr(ps, "name", ""))
    return getattr(cls, "effect", "false") if cls is not None else "false"


def sensitivity_conditions(plan) -> list:
    """The plan's conditions of kind sensitivity, in plan order."""
    return [c for c in plan.conditions if c.kind == "caption" and c.meta.get("kind") == KIND]


def _blind(conds, captions: list[str], data_dir) -> tuple[object | None, dict]:
    """The bigram scorer trained without any evaluated text (originals and probes), or why there is none."""
    evaluated = {normalized(c) for c in captions}
    evaluated |= {normalized(t) for c in conds for t, a in zip(c.texts, c.perturbation.applicable) if a}
    try:
        lm, info = coco_caption_lm(data_dir, set(), evaluated)
    except DataError as exc:
        return None, {"available": False, "why": str(exc)}
    if info["excluded_captions_by_content"] > MAX_EXCLUDED_SHARE * info["source_captions"]:
        return None, {"available": False, "why": f"{info['excluded_captions_by_content']:,} of its "
                      f"{info['source_captions']:,} training captions are evaluated captions: it would not be blind"}
    return lm, {**info, "available": True}


def _recall_columns(evals: list, ds, n: int) -> dict[str, np.ndarray]:
    """The condition's t2i recall@K per caption (dataset order), from the run's own per-query columns."""
    out: dict[str, np.ndarray] = {}
    parts = [np.arange(n)] if ds.folds is None else [fold_captions(ds.caption_to_image, f) for f in ds.folds]
    for ev, caps in zip(evals, parts):
        cols = ev.per_query("t2i")
        q = caps[np.asarray(cols["query"], dtype=np.int64)]
        for name, v in cols.items():
            if name.startswith("recall@"):
                out.setdefault(name, np.full(n, np.nan))[q] = np.asarray(v, dtype=np.float64)
    return out


def _negated(cond, plan, enc, evals, ks) -> tuple[dict, list[dict], dict]:
    ds, n = plan.ds, plan.ds.n_captions
    ps, off = cond.perturbation, enc.offsets[cond.name]
    app = np.flatnonzero(np.asarray(ps.applicable, dtype=bool))
    denied = [str((ps.meta[i] or {}).get("denied") or "") for i in app]
    mentions = scores.MentionIndex(ds.captions, ds.caption_to_image, len(enc.img_emb))
    parts = [(np.arange(len(enc.img_emb)), np.arange(n))] if ds.folds is None else \
        [(np.asarray(f, dtype=np.int64), fold_captions(ds.caption_to_image, f)) for f in ds.folds]
    shares: dict[str, np.ndarray] = {}
    named = app[np.asarray([bool(w) for w in denied], dtype=bool)] if len(app) else app  # a probe names its object
    for gallery, caps in parts:
        mine = named[np.isin(named, caps)]
        words = [denied[j] for j in np.searchsorted(app, mine)]
        for label, rows in (("denied_share", off + mine), ("original_denied_share", mine)):
            for k, v in scores.denial_shares(enc.txt_emb[rows], enc.img_emb, gallery, words, mentions, ks).items():
                shares.setdefault(f"{label}@{k}", np.full(n, np.nan))[mine] = v
    recall = _recall_columns(evals[cond.name], ds, n)
    cols = {**{k: v for k, v in recall.items()}, **shares}
    summary = {"effect": "true", "score": "negated queries", "n_applicable": int(len(app)),
               "n_not_applicable": int(n - len(app)),
               **{name: float(np.nanmean(v[app])) if np.isfinite(v[app]).any() else None
                  for name, v in cols.items()}}
    rows = [{"condition": cond.name, "item_id": ds.caption_ids[i], "image": ds.images[int(ds.caption_to_image[i])],
             "denied": denied[j], **{name: "" if v[i] != v[i] else f"{v[i]:.6g}" for name, v in cols.items()}}
            for j, i in enumerate(app)]
    return summary, rows, shares


def _pairwise(cond, plan, enc, lm, n_boot: int, seed: int) -> tuple[dict, list[dict], dict]:
    ds = plan.ds
    ps = cond.perturbation
    orig, probe = scores.pair_scores(enc.img_emb, enc.txt_emb, ds.caption_to_image, enc.offsets[cond.name])
    res = scores.pairwise(orig, probe, ps.applicable, n_boot=n_boot, seed=seed)
    wins = res.pop("wins")
    app = np.flatnonzero(np.asarray(ps.applicable, dtype=bool))
    blind = None
    if lm is not None and len(app):
        blind = 100.0 * float(np.mean([lm.score(ds.captions[i]) > lm.score(ps.texts[i]) for i in app]))
    rows = [{"condition": cond.name, "item_id": ds.caption_ids[i], "image": ds.images[int(ds.caption_to_image[i])],
             "n_candidates": 2, "chosen": int(probe[i] > orig[i]), "correct": int(w),
             "tie": int(orig[i] == probe[i]), "scores": json.dumps([float(orig[i]), float(probe[i])])}
            for i, w in zip(app, wins)]
    col = np.full(len(orig), np.nan)
    col[app] = 100.0 * wins
    return {"effect": "false", "score": "pairwise", **res, "blind_accuracy": blind}, rows, {PROBE_COLUMN: col}


def probe_results(cfg, plan, enc, evals, log=None) -> tuple[dict | None, list[dict], dict]:
    """(results.json ``sensitivity``, per-item rows, per-query t2i columns {condition: {column: per caption}}) of
    the run's probe conditions; (None, [], {}) without any. ``log``: told when the blind ceiling is unavailable."""
    conds = sensitivity_conditions(plan)
    if not conds:
        return None, [], {}
    falsy = [c for c in conds if effect(c.perturbation) == "false"]
    lm, blind = _blind(falsy, list(plan.ds.captions), cfg.data_dir) if falsy else (None, {"available": False,
                                                                                     "why": "no pairwise probe"})
    if falsy and log and not blind.get("available"):
        log(f"blind (text-only) ceiling of the probes unavailable: {blind.get('why')}")
    out, rows, cols = {}, [], {}
    for c in conds:
        if effect(c.perturbation) == "false":
            summary, r, cols[c.name] = _pairwise(c, plan, enc, lm, cfg.n_boot, cfg.seed)
        else:
            summary, r, cols[c.name] = _negated(c, plan, enc, evals, list(cfg.k))
        out[c.name] = {"probe": c.name, "family": c.meta.get("family"), **summary}
        rows += r
    return {"kind": KIND, "definitions": DEFINITIONS, "blind": blind, "conditions": out}, rows, cols


def write_per_item(out: Path, rows: list[dict]) -> str | None:
    """per_item.csv.gz: one row per applicable caption of every probe condition (its scores, win and tie; or its
    denial shares and recall); None (no file) without rows."""
    if not rows:
        return None
    header: list[str] = []
    for r in rows:
        header.extend(k for k in r if k not in header)
    tmp = out / f".{PER_ITEM}.tmp"
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            io.TextIOWrapper(gz, encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows([r.get(h, "") for h in header] for r in rows)
    tmp.replace(out / PER_ITEM)
    return PER_ITEM


def _cell(v, ci=None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" + ("" if ci is None or ci[0] is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]")


def probe_table(other: dict) -> str | None:
    """The table's section on the probes (kind sensitivity, never mixed with the invariance summary)."""
    sec = other.get("sensitivity")
    if not isinstance(sec, dict) or not sec.get("conditions"):
        return None
    pair, neg = [], []
    for name, s in sec["conditions"].items():
        if s.get("effect") == "false":
            pair.append([name, str(s["n_applicable"]), str(s["n_not_applicable"]),
                         _cell(s.get("accuracy"), (s.get("ci_low"), s.get("ci_high"))), str(s["n_ties"]),
                         _cell(s.get("blind_accuracy"))])
        else:
            ks = sorted(int(k.split("@")[1]) for k in s if k.startswith("denied_share@"))
            neg += [[name, str(s["n_applicable"]), str(k), _cell(s.get(f"recall@{k}")),
                     _cell(None if s.get(f"denied_share@{k}") is None else 100 * s[f"denied_share@{k}"]),
                     _cell(None if s.get(f"original_denied_share@{k}") is None
                           else 100 * s[f"original_denied_share@{k}"])] for k in ks]
    out = ["meaning-changing probes (kind sensitivity; never averaged with the meaning-preserving conditions)"]
    if pair:
        out.append(md_table(["probe", "applicable", "n/a", "pairwise accuracy % [95% CI]", "ties (misses)",
                             "blind text-only %"], pair, pad=True))
    blind = sec.get("blind") or {}
    if pair and not blind.get("available"):
        out.append(f"blind text-only: unavailable ({blind.get('why')})")
    if neg:
        out.append(md_table(["negated queries", "applicable", "K", "R@K", "denied share % of top K",
                             "same, original caption %"], neg, pad=True))
    return "\n\n".join(out)
