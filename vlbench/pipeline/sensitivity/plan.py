"""The probe conditions of a run (``--probes``): made once per dataset, seed and probe settings, remembered on disk
beside the perturbed captions (``<cache>/perturbations/probes-<key>.json``), so a warm run skips spaCy."""

from __future__ import annotations

import dataclasses
import json
from importlib.metadata import PackageNotFoundError, version

from ... import __version__, stores
from ...conditions import RunCondition
from ...errors import VlbenchError
from ...perturbations.probes import FAMILIES, KIND, NEEDS_ABSENCE, PROBES, ProbeSet, make_probes, resolve_probes
from ...util.io import cache_write_bytes, sha256_json

#: the language tools whose versions are in the cache key (a changed tagger or WordNet makes the probes again)
TOOLS = ("spacy", "nltk", "en-core-web-sm")


def probe_names(spec: str | None) -> list[str]:
    """The probes a ``--probes`` spec asks for: ``sensitivity`` (all), a family (negation, half-truth, ...) or
    probe names, comma-separated; VlbenchError naming the known ones for anything else."""
    if not spec:
        return []
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n != KIND and n not in FAMILIES and n not in PROBES]
    if unknown or not names:
        raise VlbenchError(f"--probes {spec!r}: unknown probe {unknown[0] if unknown else spec!r}",
                           f"use {KIND} (all), a family ({', '.join(FAMILIES)}) or probe names "
                           f"({', '.join(PROBES)}); 'vlbench perturb --dataset D --perturb {KIND}' shows them")
    return resolve_probes(",".join(names)) or []


def _tools() -> dict:
    out: dict[str, str | None] = {}
    for dist in TOOLS:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def _check_captions(ds, names: list[str]) -> None:
    """An absence-based probe on a set with one caption per image is refused with the run's own fix."""
    asked = [n for n in names if n in NEEDS_ABSENCE]
    counts: dict[int, int] = {}
    for g in ds.caption_to_image:
        counts[int(g)] = counts.get(int(g), 0) + 1
    single = [g for g, c in counts.items() if c < 2]
    if asked and single:
        raise VlbenchError(
            f"--probes {','.join(asked)}: {len(single)} of {len(counts)} images of {ds.name} have one caption only "
            f"(e.g. {ds.images[single[0]]!r}), so 'absent from every caption of the image' cannot be checked",
            "use a caption set with several captions per image, or ask only for probes that need no other captions "
            f"({', '.join(n for n in PROBES if n not in NEEDS_ABSENCE)})")


def probe_sets(ds, names: list[str], *, params: dict | None, seed: int, cache_dir=None, read: bool = True,
               write: bool = True, log=None) -> dict[str, ProbeSet]:
    """{name: ProbeSet} of the dataset's captions (grouped by image), from the cache when it has them."""
    _check_captions(ds, names)
    objs = {n: PROBES[n](**(params or {}).get(n, {})) for n in names}
    key = sha256_json({"dataset": ds.content_hash(), "seed": seed, "vlbench": __version__, "kind": KIND,
                       "probes": {n: [str(o.version), o.params] for n, o in objs.items()}, "tools": _tools()})
    path = stores.path("perturbations", cache_dir) / f"probes-{key[:32]}.json"
    if read and path.is_file():
        try:
            data = json.loads(path.read_text())
            out = {n: ProbeSet(**data[n]) for n in names}
            if log:
                log(f"probes from the cache ({len(names)} probe(s))")
            return out
        except (ValueError, KeyError, TypeError):
            pass
    if log:
        log(f"making {len(names)} meaning-changing probe(s) of {ds.n_captions:,} captions: {', '.join(names)}")
    images = [ds.images[int(g)] for g in ds.caption_to_image]
    out = make_probes(ds.captions, ds.caption_ids, images, names, seed=seed,
                      params={n: dict(o.params) for n, o in objs.items()})
    if write:
        cache_write_bytes(path, json.dumps({n: dataclasses.asdict(ps) for n, ps in out.items()}).encode())
    return out


def probe_conditions(cfg, ds, log=None) -> list[RunCondition]:
    """The run's probe conditions (kind "caption", meta kind "sensitivity"), one per asked probe."""
    names = probe_names(getattr(cfg, "probes", None))
    if not names:
        return []
    sets = probe_sets(ds, names, params=cfg.perturb_params, seed=cfg.seed, cache_dir=cfg.cache_dir,
                      read=not cfg.no_cache and not cfg.restart, write=not cfg.no_cache, log=log)
    return [RunCondition.from_perturbed(ps) for ps in sets.values()]
