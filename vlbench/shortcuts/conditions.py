"""Shortcut probes as run conditions (``vlbench run --shortcuts matched,mismatched,caption-only,image-only,bits=2``).

Condition ``shortcut:<probe>``: the probe's numbers rendered on the images (both directions use them) and/or
appended to the captions (see :func:`vlbench.shortcuts.probe_plan`). Rendered images are encoded once and
cached under (number, seed, digit source, image content): image i carries the same number in the matched,
mismatched and image-only probes, so it is rendered and encoded once for all three.
"""

from __future__ import annotations

from ..conditions import RunCondition as Variant
from ..errors import VlbenchError
from ..util.paths import offline
from . import N_DIGITS, PROBES, apply_plan_to_captions, load_digit_bank, parse_probe, probe_plan, render

PREFIX = "shortcut:"
RENDER_VERSION = "svl-digits/1"  # bump when render() output changes (part of the cache key)


class ShortcutTransform:
    """The ImageTransform of a probe: image ``index`` gets ``numbers[index]`` (None: left as it is; the
    gallery's distractor images carry none). Exemplars are chosen per (seed, image content, position)."""

    def __init__(self, numbers, bank, seed: int):
        self.numbers, self.bank, self.seed = list(numbers), bank, int(seed)

    def _number(self, index: int):
        return self.numbers[index] if index < len(self.numbers) else None

    def key(self, index: int, content: str) -> str | None:
        n = self._number(index)
        return None if n is None else f"shortcut:{n:0{N_DIGITS}d}:seed{self.seed}:{self.bank.source}:{RENDER_VERSION}"

    def __call__(self, image, index: int, content: str):
        n = self._number(index)
        return image if n is None else render(image, n, bank=self.bank, seed=self.seed, image_id=content)


def parse_probes(spec: str) -> list[str]:
    probes = list(dict.fromkeys(p.strip() for p in spec.split(",") if p.strip()))
    if not probes:
        raise VlbenchError(f"--shortcuts {spec!r} names no probe",
                           f"use some of {', '.join(PROBES)}, bits=<n> (comma-separated)")
    for p in probes:
        parse_probe(p)  # raises with the list of probes
    return probes


def shortcut_variants(spec: str, ds, *, seed: int, digits: str = "auto", cache_dir=None) -> list:
    probes = parse_probes(spec)

    bank = load_digit_bank(digits, cache_dir=cache_dir, download=not offline())
    out = []
    for p in probes:
        plan = probe_plan(ds.n_images, ds.caption_to_image, p, seed=seed)
        on_images = any(k is not None for k in plan.image_numbers)
        on_captions = any(k is not None for k in plan.caption_numbers)
        meta = {"perturbation": PREFIX + p, "kind": "shortcut", "probe": p, "family": "shortcut", "seed": seed,
                "digit_source": bank.source, **({"digit_fallback": bank.fallback} if bank.fallback else {}),
                "version": RENDER_VERSION, "not_applicable_rate": 0.0,
                "images": "numbers rendered" if on_images else "clean",
                "captions": "numbers appended" if on_captions else "clean"}
        out.append(Variant(PREFIX + p, meta,
                           image=ShortcutTransform(plan.image_numbers, bank, seed) if on_images else None,
                           texts=tuple(apply_plan_to_captions(list(ds.captions), plan)) if on_captions else None,
                           kind="shortcut"))
    return out


def shortcut_summary(variants) -> dict:
    sc = [v for v in variants if v.meta.get("kind") == "shortcut"]
    return {"probes": [v.meta["probe"] for v in sc], "digit_source": sc[0].meta["digit_source"] if sc else None,
            "seed": sc[0].meta["seed"] if sc else None, "render_version": RENDER_VERSION,
            **({"digit_fallback": sc[0].meta["digit_fallback"]} if sc and sc[0].meta.get("digit_fallback") else {}),
            "reading": "matched: a model that reads the digits gains; mismatched: it loses; caption-only / "
                       "image-only: a robust model does not move"}
