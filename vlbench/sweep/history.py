"""Stage times of finished runs on this machine, kept for a sweep's cost estimate (``--plan-only``).

After a sweep, each finished run's ``timings`` (results.json) is kept as one small JSON file in the cache store
``run-timings`` (one file per run record, written atomically: two sweeps writing the same record write the same
bytes). An estimate for a run still to do takes the runs of the same model spec on this machine (host name) and
scales their seconds per encoded item (images + captions x conditions) to the new run's size: rough, and said
to be rough; a model never run here has no estimate.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

from .. import stores
from ..util.io import read_regular_file, write_json

STORE = "run-timings"


def note(results: dict, cache_dir=None) -> None:
    """Keep the timings of a finished run's results.json document."""
    timings, ds = results.get("timings"), results.get("dataset") or {}
    if not isinstance(timings, dict):
        return
    wall = timings.get("wall_seconds")
    spec = (results.get("model") or {}).get("spec")
    if not isinstance(wall, (int, float)) or not spec or not results.get("record_hash"):
        return
    entry = {"host": platform.node(), "model": spec, "dataset": ds.get("name"),
             "images": ds.get("n_images"), "captions": ds.get("n_captions"),
             "conditions": len(results.get("conditions") or {}) or 1, "wall_seconds": wall,
             "stages": {k: v.get("seconds") for k, v in (timings.get("stages") or {}).items() if isinstance(v, dict)},
             "device": (results.get("hardware") or {}).get("device")}
    folder = stores.path(STORE, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / f"{results['record_hash'][:32]}.json", entry)


def entries(cache_dir=None) -> list[dict]:
    folder = stores.path(STORE, cache_dir)
    out: list[dict] = []
    if not folder.is_dir():
        return out
    for p in sorted(folder.glob("*.json")):
        try:
            e = json.loads(read_regular_file(p, 1 << 20).decode("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(e, dict) and e.get("host") == platform.node():
            out.append(e)
    return out


def _size(images, captions, conditions) -> float | None:
    if not isinstance(images, int) or not isinstance(captions, int):
        return None
    return float(images + captions * max(1, int(conditions or 1)))


def estimate(known: list[dict], model: str, images: int | None, captions: int | None,
             conditions: int) -> float | None:
    """Seconds a run of ``model`` on a dataset of that size would take here, from ``known`` runs; None: no run
    of that model is known."""
    size = _size(images, captions, conditions)
    rates = []
    for e in known:
        s = _size(e.get("images"), e.get("captions"), e.get("conditions"))
        if e.get("model") == model and s and isinstance(e.get("wall_seconds"), (int, float)):
            rates.append(e["wall_seconds"] / s)
    if not rates or size is None:
        return None
    rates.sort()
    return rates[len(rates) // 2] * size


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def cached_models(cache_dir=None) -> set[str]:
    """The model labels the embedding cache holds vectors of (read from each model folder's model.json)."""
    base = stores.path("embeddings", cache_dir)
    out: set[str] = set()
    if not base.is_dir():
        return out
    for d in base.iterdir():
        p = Path(d) / "model.json"
        try:
            label = json.loads(p.read_text("utf-8")).get("label")
        except (OSError, ValueError, AttributeError):
            continue
        if label and any(Path(d).glob("*/*.npz")):
            out.add(str(label))
    return out
