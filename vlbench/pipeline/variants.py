"""Run conditions that change the images (and possibly the captions): image corruptions, shortcut probes.

:func:`plan_variants` turns the run's options into these conditions (vlbench/imageperturb, vlbench/shortcuts);
their images are encoded by vlbench/encoding/variant_images.py; :func:`variant_summaries` adds their
results.json sections (mCE, digit source). Both directions use a condition's images: i2t queries with
transformed images, t2i ranks a transformed gallery.
"""

from __future__ import annotations

import sys

from ..conditions import ImageTransform, Variant  # noqa: F401  (re-exported)
from ..errors import VlbenchError
from ..imageperturb.conditions import corruption_summary, image_variants, read_reference
from ..shortcuts.conditions import shortcut_summary, shortcut_variants


def plan_variants(cfg, ds) -> list[Variant]:
    """The image-side conditions a run's options ask for: ``--perturb-images``, ``--shortcuts``."""

    out = image_variants(cfg.perturb_images, cfg.seed, cfg.corrupt_at, cfg.corrupt_backend)
    if cfg.shortcuts:
        out += shortcut_variants(cfg.shortcuts, ds, seed=cfg.seed, digits=cfg.digits, cache_dir=cfg.cache_dir)
        report_fallbacks(out, quiet=cfg.quiet)
    if cfg.mce_reference:
        if not cfg.perturb_images:
            raise VlbenchError("--mce-reference needs --perturb-images", "add e.g. --perturb-images all:1-5")
        read_reference(cfg.mce_reference, dataset=ds)  # a bad path or another dataset fails before any encoding
    return out


def report_fallbacks(variants, *, quiet: bool = False, file=None) -> list[str]:
    """Print (to stderr) every fallback the conditions were built with, once each (e.g. scikit-learn's digits
    instead of MNIST): they change what is measured, so they are said on the console, not only in results.json."""

    notes = list(dict.fromkeys(v.meta["digit_fallback"] for v in variants if v.meta.get("digit_fallback")))
    if not quiet:
        for note in notes:
            print(f"note: {note}", file=file or sys.stderr, flush=True)
    return notes


def variant_summaries(cfg, plan, rec) -> dict:
    """Extra results.json sections of the run record ``rec``: ``image_corruptions`` (mCE) and
    ``shortcuts`` (digit source)."""
    out = {}
    if cfg.perturb_images:
        ref = read_reference(cfg.mce_reference) if cfg.mce_reference else None
        out["image_corruptions"] = corruption_summary(rec, ref)
    if cfg.shortcuts:
        out["shortcuts"] = shortcut_summary(plan.variants)
    return out
