"""Dataset-level granularity: the granularity table (one row per feature, one column per dataset), the
FG-minus-original differences with paired bootstrap confidence intervals, and the files the
``vlbench granularity`` command writes.
"""

from __future__ import annotations

import math
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import lang
from ..datasets.core import Dataset, load_dataset
from ..datasets.specs import BUILTIN as BUILTIN_SPECS
from ..errors import VlbenchError
from ..util.io import atomic_write_text, dumps_strict
from ..util.markdown import md_table
from .features import COUNT_COLUMNS, DEFAULT_PROFILE, FEATURES, FeatureOptions, analyse_texts, resolve_options
from .pairing import check_bootstrap_settings, image_sums, resolve_pairs

if TYPE_CHECKING:
    import pandas as pd

#: (original, fine-grained) built-in datasets on the same images (dataset records), compared when both are requested
FG_PAIRS = tuple(sorted((s.fine_grained_of, s.name) for s in BUILTIN_SPECS.values() if s.fine_grained_of))

FEATURE_LABELS = {
    "adjectives": "Adjectives", "complement_phrases": "CPs", "articles": "Articles",
    "quantifiers": "Quantifiers", "concept_depth": "Concept Depth", "caption_length": "Caption Length",
    "words_per_caption": "Words per Caption", "concept_diversity": "Concept Diversity",
}


def _load(spec, data_dir):
    """A dataset's captions (images are never needed here)."""

    if isinstance(spec, Dataset):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise VlbenchError(f"dataset name {spec!r} is not valid", "give a dataset name or custom:<manifest.jsonl>")
    return load_dataset(spec, data_dir=data_dir, require_images=False)  # captions may be fetched, images never


def _images_of(ds) -> list[str]:
    """Each caption's image key: the manifest's image path (normalised: ``a/./b.jpg`` = ``a/b.jpg``),
    so two datasets are paired by image, whatever the order of their manifests. A dataset without an
    image assignment gets one key per caption ("#<index>")."""
    c2i = getattr(ds, "caption_to_image", None)
    images = list(getattr(ds, "images", None) or [])
    if c2i is None or len(c2i) != len(ds.captions) or not images:
        return [f"#{j}" for j in range(len(ds.captions))]
    keys = [posixpath.normpath(str(name).replace("\\", "/")) for name in images]
    return [keys[int(i)] for i in c2i]


def per_caption_frame(datasets: Sequence, *, data_dir=None, options: FeatureOptions | None = None,
                      batch_size: int = 1000, n_process: int = 1, limit: int | None = None,
                      progress: Callable[[str], None] | None = None, profile: str | None = None,
                      **feature_options):
    """Per-caption features of several datasets in one frame (each distinct caption parsed once).

    Columns: ``dataset``, ``caption_id``, ``image`` (the caption's image: its manifest path), ``text``,
    ``status``, ``reason``, the eight features and the raw counts.
    """
    opts = resolve_options(options, profile, **feature_options)
    loaded = [(name, ds) for name, ds, _ in _named_datasets(datasets, data_dir)]
    return _frame_of(loaded, opts, batch_size=batch_size, n_process=n_process, limit=limit, progress=progress)


def _named_datasets(datasets: Sequence, data_dir) -> list[tuple]:
    """(table name, loaded dataset, spec as given) per requested dataset; names are unique."""
    loaded = []
    for spec in datasets:
        ds = _load(spec, data_dir)
        custom = not isinstance(spec, str) or spec.startswith("custom:") or spec.endswith(".jsonl")
        loaded.append([ds.name if custom else spec, ds, spec])
    for item in loaded:  # two manifests with the same file name: name them by the path as given
        if isinstance(item[2], str) and sum(1 for x in loaded if x[0] == item[0]) > 1 and item[0] != item[2]:
            item[0] = item[2] if item[2].startswith("custom:") else f"custom:{item[2]}"
    names = [item[0] for item in loaded]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise VlbenchError(f"dataset(s) requested twice: {', '.join(dup)}", "name each dataset once")
    return [tuple(item) for item in loaded]


def _frame_of(loaded: list[tuple], opts: FeatureOptions, *, batch_size: int, n_process: int, limit,
              progress) -> pd.DataFrame:
    import pandas as pd

    names = [n for n, _ in loaded]
    all_texts: list[str] = []
    meta: list = []
    for name, ds in loaded:
        caps = list(ds.captions)
        ids = list(getattr(ds, "caption_ids", None) or [f"{j}" for j in range(len(caps))])
        imgs = _images_of(ds)
        n = len(caps) if limit is None else min(limit, len(caps))
        all_texts.extend(caps[:n])
        meta.extend((name, ids[j], imgs[j]) for j in range(n))
    if progress:
        progress(f"analysing {len(all_texts):,} captions of {len(loaded)} dataset(s) "
                 f"({len(set(t for t in all_texts if isinstance(t, str))):,} distinct texts)")
    cb = None if progress is None else (lambda k, n: progress(f"  parsed {k:,}/{n:,} distinct captions"))
    records = analyse_texts(all_texts, opts, batch_size=batch_size, n_process=n_process, progress=cb)
    df = pd.DataFrame.from_records(records, columns=["text", "status", "reason", *FEATURES, *COUNT_COLUMNS])
    df.insert(0, "image", [m[2] for m in meta])
    df.insert(0, "caption_id", [m[1] for m in meta])
    df.insert(0, "dataset", [m[0] for m in meta])
    df.attrs["datasets"] = names
    df.attrs["options"] = opts.to_dict()
    return df


def table_from_captions(per_caption) -> pd.DataFrame:
    """The granularity table: the mean of each feature over a dataset's analysed captions (NaN values skipped)."""
    import pandas as pd

    names = per_caption.attrs.get("datasets") or list(dict.fromkeys(per_caption["dataset"]))
    ok = per_caption[per_caption["status"] == "ok"]
    cols = {}
    for name in names:
        sub = ok[ok["dataset"] == name]
        cols[name] = [float(sub[f].mean()) if sub[f].notna().any() else math.nan for f in FEATURES]
    table = pd.DataFrame(cols, index=pd.Index(list(FEATURES), name="feature"))
    table.columns.name = None
    return table


def caption_report(per_caption) -> dict:
    """Per dataset: how many captions were analysed, excluded (listed), or lack a noun."""
    out = {}
    for name in per_caption.attrs.get("datasets") or list(dict.fromkeys(per_caption["dataset"])):
        sub = per_caption[per_caption["dataset"] == name]
        ok = sub[sub["status"] == "ok"]
        exc = sub[sub["status"] != "ok"]
        out[name] = {
            "n_captions": int(len(sub)),
            "n_analysed": int(len(ok)),
            "n_excluded": int(len(exc)),
            "n_without_noun": int((ok["n_nouns"] == 0).sum()),
            "n_without_wordnet_noun": int((ok["n_depth_words"] == 0).sum()),
            "n_values": {f: int(ok[f].notna().sum()) for f in FEATURES},
            "excluded": [{"caption_id": r.caption_id, "reason": r.reason, "text": r.text}
                         for r in exc.itertuples(index=False)],
        }
    return out


def default_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in FG_PAIRS if a in names and b in names]


def bootstrap_differences(per_caption, pairs: Sequence[tuple[str, str]], *, n_boot: int = 1000, seed: int = 0,
                          ci: float = 0.95, pairing: str = "image"):
    """For each (original, fine-grained) pair and feature: mean(FG) - mean(original), with a percentile
    bootstrap confidence interval, plus the relative change in percent.

    Resampling unit: the image. Images are matched by their manifest path, in any order (see
    ``pairing.pair_images``); the FG sets re-caption the originals' images, so the same resampled images are
    used for both (paired bootstrap) and the interval reflects image sampling only. Two datasets whose
    image sets differ are refused, unless ``pairing="independent"``: then each is resampled on its own. A dataset
    mean is a ratio estimator: sum of the resampled captions' values / their number (NaN skipped).
    """
    import pandas as pd

    check_bootstrap_settings(n_boot, seed, ci)
    rows = []
    alpha = (1 - ci) / 2
    for p_idx, (base, fine) in enumerate(pairs):
        rng = np.random.default_rng([seed, p_idx])
        stats, paired = image_sums(per_caption, base, fine, pairing)
        (ub, sb, cb), (uf, sf, cf) = stats[base], stats[fine]
        point_b = sb.sum(0) / np.where(cb.sum(0) > 0, cb.sum(0), np.nan)
        point_f = sf.sum(0) / np.where(cf.sum(0) > 0, cf.sum(0), np.nan)
        diffs, rels = [], []
        done = 0
        while done < n_boot:
            m = min(250, n_boot - done)
            wb = rng.multinomial(len(ub), np.full(len(ub), 1.0 / len(ub)), size=m).astype(float)
            wf = wb if paired else rng.multinomial(len(uf), np.full(len(uf), 1.0 / len(uf)), size=m).astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                mb = (wb @ sb) / (wb @ cb)
                mf = (wf @ sf) / (wf @ cf)
                diffs.append(mf - mb)
                rels.append(100.0 * (mf - mb) / mb)
            done += m
        d = np.concatenate(diffs) if diffs else np.empty((0, len(FEATURES)))
        r = np.concatenate(rels) if rels else np.empty((0, len(FEATURES)))
        for k, feat in enumerate(FEATURES):
            dk, rk = d[:, k][np.isfinite(d[:, k])], r[:, k][np.isfinite(r[:, k])]
            diff = point_f[k] - point_b[k]
            rows.append({
                "feature": feat, "pair": f"{fine} - {base}", "original": base, "fine_grained": fine,
                "original_mean": point_b[k], "fine_grained_mean": point_f[k], "difference": diff,
                "ci_low": float(np.quantile(dk, alpha)) if len(dk) else math.nan,
                "ci_high": float(np.quantile(dk, 1 - alpha)) if len(dk) else math.nan,
                "relative_change_pct": 100.0 * diff / point_b[k] if point_b[k] else math.nan,
                "rel_ci_low": float(np.quantile(rk, alpha)) if len(rk) else math.nan,
                "rel_ci_high": float(np.quantile(rk, 1 - alpha)) if len(rk) else math.nan,
                "paired": paired, "n_boot": n_boot, "ci": ci, "seed": seed,
            })
    return pd.DataFrame(rows, columns=["feature", "pair", "original", "fine_grained", "original_mean",
                                       "fine_grained_mean", "difference", "ci_low", "ci_high",
                                       "relative_change_pct", "rel_ci_low", "rel_ci_high", "paired",
                                       "n_boot", "ci", "seed"])


# ----------------------------------------------------------------------------------------------
# the whole report


@dataclass
class GranularityReport:
    table: pd.DataFrame                 # feature x dataset
    per_caption: pd.DataFrame
    differences: pd.DataFrame | None    # long form, one row per (pair, feature)
    captions: dict                        # caption_report()
    options: dict
    meta: dict = field(default_factory=dict)

    # ---- text renderings
    def table_markdown(self, digits: int = 3) -> str:
        return markdown_table(self.table, digits=digits)

    def differences_markdown(self, digits: int = 3) -> str:
        if self.differences is None or self.differences.empty:
            return ""
        return differences_markdown(self.differences, digits=digits)

    def exclusions_text(self, limit: int = 10) -> str:
        lines = []
        no_noun = ("NP ratios undefined, left out of those means" if self.options.get("np_unit") == "noun"
                   else "NP counts 0, included in the means")
        for name, rep in self.captions.items():
            line = (f"{name}: {rep['n_analysed']:,} of {rep['n_captions']:,} captions analysed, "
                    f"{rep['n_excluded']} excluded, {rep['n_without_noun']} without a noun ({no_noun})")
            lines.append(line)
            for e in rep["excluded"][:limit]:
                lines.append(f"  excluded {e['caption_id']}: {e['reason']}: {e['text']!r}")
            if len(rep["excluded"]) > limit:
                lines.append(f"  ... and {len(rep['excluded']) - limit} more (see granularity_excluded.csv)")
        return "\n".join(lines)

    # ---- files
    def write(self, out_dir) -> list[Path]:
        out = Path(out_dir)
        check_out_dir(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VlbenchError(f"cannot create the output folder {str(out)!r}: {exc.strerror or exc}",
                               "give --out a folder that can be created (or an existing folder)") from None
        written = []

        def put(name, text):
            atomic_write_text(out / name, text)
            written.append(out / name)

        put("granularity.csv", self.table.to_csv(float_format="%.6g"))
        put("granularity.md", "# Caption granularity\n\n" + self.table_markdown() + "\n\n"
            + self.exclusions_text(limit=20) + "\n")
        if self.differences is not None and not self.differences.empty:
            put("granularity_diff.csv", self.differences.to_csv(index=False, float_format="%.6g"))
            put("granularity_diff.md", "# Fine-grained minus original, with bootstrap confidence intervals\n\n"
                + self.differences_markdown() + "\n")
        cols = ["dataset", "caption_id", "image", "status", "reason", *FEATURES, *COUNT_COLUMNS, "text"]
        put("granularity_captions.csv", self.per_caption[cols].to_csv(index=False, float_format="%.6g"))
        excluded = self.per_caption[self.per_caption["status"] != "ok"][["dataset", "caption_id", "reason", "text"]]
        put("granularity_excluded.csv", excluded.to_csv(index=False))
        summary = {"options": self.options, "captions": self.captions, **self.meta}
        put("granularity_summary.json", dumps_strict(summary, indent=2) + "\n")
        return written


def check_out_dir(out) -> None:
    """--out must be a folder: refuse a path that is, or lies under, an existing non-folder."""
    p = Path(out).expanduser()
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                what = "is a file" if q == p else f"lies under {str(q)!r}, which is a file"
                raise VlbenchError(f"--out {str(out)!r} {what}, not a folder",
                                   "give --out a folder (new or existing): the command writes several files into it")
            return


def _fmt(x, digits):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}f}"


def markdown_table(table, digits: int = 3) -> str:
    rows = [[FEATURE_LABELS.get(f, f)] + [_fmt(v, digits) for v in table.loc[f]] for f in table.index]
    return md_table(["Feature", *table.columns], rows, "l" + "r" * len(table.columns))


def differences_markdown(diff, digits: int = 3) -> str:
    pairs = list(dict.fromkeys(diff["pair"]))
    ci = float(diff["ci"].iloc[0])
    head = ["Feature"] + [h for p in pairs for h in (f"{p}: difference [{ci:.0%} CI]", "change %")]
    body = []
    for feat in dict.fromkeys(diff["feature"]):
        cells = []
        for p in pairs:
            r = diff[(diff["pair"] == p) & (diff["feature"] == feat)].iloc[0]
            cells.append(f"{_fmt(r.difference, digits)} [{_fmt(r.ci_low, digits)}, {_fmt(r.ci_high, digits)}]")
            cells.append(f"{_fmt(r.relative_change_pct, 1)} [{_fmt(r.rel_ci_low, 1)}, {_fmt(r.rel_ci_high, 1)}]")
        body.append([FEATURE_LABELS.get(feat, feat)] + cells)
    n_boot = int(diff["n_boot"].iloc[0])
    pairing = ("paired: the same images in both, matched by image path" if bool(diff["paired"].all()) else
               "NOT paired: the image sets differ, each resampled independently (--unpaired)")
    note = (f"\n\nDifference = fine-grained mean - original mean; {n_boot} bootstrap samples of images "
            f"({pairing}), seed {int(diff['seed'].iloc[0])}, percentile intervals.")
    return md_table(head, body, "l" + "r" * (len(head) - 1)) + note


def granularity_report(datasets: Sequence, *, data_dir=None, pairs="auto", n_boot: int = 1000, seed: int = 0,
                       ci: float = 0.95, batch_size: int = 1000, n_process: int = 1, limit: int | None = None,
                       progress: Callable[[str], None] | None = None, options: FeatureOptions | None = None,
                       profile: str | None = None, pairing: str = "image", **feature_options) -> GranularityReport:
    """Everything ``vlbench granularity`` prints and writes.

    ``pairs``: "auto" (coco/coco-fg and flickr30k/flickr30k-fg when both are requested), or a list of
    (original, fine-grained) dataset names; ``n_boot=0`` skips the bootstrap. ``profile``: a named set of
    readings (``PROFILES``; default ``DEFAULT_PROFILE``), ``feature_options`` on top. ``pairing``: "image"
    (a pair must describe the same images, matched by image path) or "independent".
    """
    if not datasets:
        raise VlbenchError("no dataset given", "name at least one dataset, e.g. --dataset coco coco-fg")
    check_bootstrap_settings(n_boot, seed, ci)
    opts = resolve_options(options, profile, **feature_options)
    t0 = time.perf_counter()
    loaded = _named_datasets(datasets, data_dir)
    names = [name for name, _, _ in loaded]
    pairs = default_pairs(names) if pairs == "auto" else resolve_pairs(pairs or [], loaded)  # before parsing
    per_caption = _frame_of([(name, ds) for name, ds, _ in loaded], opts, batch_size=batch_size,
                            n_process=n_process, limit=limit, progress=progress)
    t_feat = time.perf_counter() - t0
    table = table_from_captions(per_caption)
    diff = (bootstrap_differences(per_caption, pairs, n_boot=n_boot, seed=seed, ci=ci, pairing=pairing)
            if pairs else None)
    meta = {
        "datasets": names,
        "pairs": [list(p) for p in pairs],
        "bootstrap": {"n_boot": n_boot, "seed": seed, "ci": ci, "unit": "image", "pairing": pairing},
        "profile": None if options is not None else (profile or DEFAULT_PROFILE),
        "spacy_model": _spacy_model_info(),
        "wordnet_version": _wordnet_version(),
        "seconds": {"features": round(t_feat, 2), "total": round(time.perf_counter() - t0, 2)},
    }
    return GranularityReport(table=table, per_caption=per_caption, differences=diff,
                             captions=caption_report(per_caption), options=opts.to_dict(), meta=meta)


def _spacy_model_info() -> str:
    try:
        m = lang.nlp().meta
        return f"{lang.spacy_model_name()} {m.get('version', '?')}"
    except Exception:  # pragma: no cover - informative only
        return "unknown"


def _wordnet_version() -> str:
    try:
        return str(lang.wordnet().get_version())
    except Exception:  # pragma: no cover
        return "unknown"


def granularity_table(datasets: Sequence, *, data_dir=None, **feature_options):
    """The granularity table as a pandas DataFrame: index ``feature`` (the eight ``FEATURES``), one column per
    dataset (its name, or ``custom:<file>``), values = dataset means of the per-caption features.

    ``profile`` names a set of readings (``"per-caption"``, the default, ``"per-noun"`` or a registered one; see
    docs/granularity.md); ``feature_options`` are fields of ``FeatureOptions`` set on top of it, plus
    ``batch_size``, ``n_process`` and ``limit`` (first N captions of each dataset). Caption counts and
    exclusions are in ``table.attrs["captions"]``.
    """
    run_kw = {k: feature_options.pop(k) for k in ("batch_size", "n_process", "limit", "progress", "options",
                                                  "profile") if k in feature_options}
    rep = granularity_report(datasets, data_dir=data_dir, pairs=[], n_boot=0, **run_kw, **feature_options)
    table = rep.table
    table.attrs["captions"] = rep.captions
    table.attrs["options"] = rep.options
    return table


def dataset_features(dataset, *, data_dir=None, **feature_options):
    """Per-caption features of one dataset (name, ``custom:<manifest>`` or a loaded Dataset)."""
    run_kw = {k: feature_options.pop(k) for k in ("batch_size", "n_process", "limit", "options", "profile")
              if k in feature_options}
    return per_caption_frame([dataset], data_dir=data_dir, **run_kw, **feature_options)
