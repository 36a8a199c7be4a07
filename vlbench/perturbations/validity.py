"""Validity of a robustness number: is the perturbed input really perturbed, and does it still
mean the same thing?

Per perturbation::

    {"applicable_rate": share of captions the perturbation changed,
     "effective_rate": share of captions whose model input changed after the evaluated model's own
                       truncation (adapter.text_keys: token ids after truncation); None without a model,
     "drift": {"mean", "p05", "p50", "p95"} of 1 - cosine(all-MiniLM-L6-v2) over the applied captions
              (a fixed-seed sample by default, see below), or None,
     "drift_n": captions the drift is over, "drift_mode": "sample" | "full" | "off",
     "drift_sample_size": the cap (sample mode), "drift_mean_ci95": the 95 % half width of the mean drift,
     "encoder": "sentence-transformers/all-MiniLM-L6-v2" (or None), "encoder_error": why drift is missing}

The sample: applied captions ordered by sha256(f"{seed}/validity/{caption_id}"); a prefix of that order is
used: at least MIN_SAMPLE captions, then STEP more at a time until the 95 % interval of the mean drift is within
+-PRECISION (finite-population corrected), at most ``sample_size`` scaled to the set (:func:`scaled_sample`: on a
small set a quarter of its captions, at least 50). So the sample depends on neither caption
order nor batch size, every perturbation's mean drift carries the same stated precision, and the samples of
two perturbations are prefixes of one caption order (their drifts compare the same queries, and each original
caption is encoded once for all of them). MiniLM encoding is the whole cost of validity on a CPU (about 300
captions/s on 2 cores); the precision rule spends it where the drift varies (typos: about 1,000 captions;
shuffles, distractions: 500) instead of 2,000 everywhere (docs/perturbations.md has the measured errors).
The audit file of a run folder (:func:`audit_rows`) takes 50 (original, perturbed) pairs per perturbation by
the same ordering with another salt. MiniLM vectors are cached per string for the process and on disk (shared
with the synonym guard), so strings the guard already encoded are not encoded again.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import OptionError, VlbenchError
from ..runfolder import VALIDITY_AUDIT
from ..util.io import atomic_write_text, dumps_strict

MODES = ("sample", "full", "off")
DEFAULT_SAMPLE = 2000  # at most this many applied captions per perturbation ...
MIN_SAMPLE = 500  # ... at least this many (25 beyond each of p05 and p95) ...
STEP = 100  # ... growing by this many ...
PRECISION = 0.005  # ... until the mean drift's 95 % interval is within +-0.005 (docs/perturbations.md)
SMALL_SET_SHARE = 4  # on a small set, at most one caption in 4 of the set per perturbation ...
SMALL_SET_FLOOR = 50  # ... but at least 50 (or every applied caption, if fewer)
AUDIT_PAIRS = 50
AUDIT_FILE = VALIDITY_AUDIT  # the name older code imported; vlbench.runfolder owns it


def check_mode(mode: str, sample_size: int, precision: float = PRECISION) -> None:
    # OptionError: from Python the message names the keyword (validity_sample=), on the command line the flag
    if mode not in MODES:
        raise OptionError("validity", f"unknown {{opt}} {mode!r}", "use sample (default), full or off")
    if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1:
        raise OptionError("validity_sample", f"{{opt}} (the validity sample size) {sample_size!r} is not a "
                          "positive integer", example=2000)
    if isinstance(precision, bool) or not isinstance(precision, (int, float)) or not 0 <= precision < 1:
        raise OptionError("validity_precision", f"{{opt}} (the validity precision) {precision!r} is not a number "
                          "in [0, 1)", "0: always the whole validity sample", example=0.005)


def scaled_sample(n_captions: int, sample_size: int = DEFAULT_SAMPLE) -> int:
    """The drift sample's cap for a set of ``n_captions``: ``sample_size``, but on a small set at most a quarter
    of the set (and at least SMALL_SET_FLOOR), so that measuring validity never costs more MiniLM encodings than
    the perturbations it describes produced captions (200 captions: 50 per perturbation, not 200). From 8,000
    captions on the cap is ``sample_size`` itself (2,000 by default)."""
    return max(1, min(sample_size, max(SMALL_SET_FLOOR, -(-n_captions // SMALL_SET_SHARE))))


def _order(ids: Sequence[str], idx: Sequence[int], seed: int, salt: str) -> list[int]:
    def key(i):
        return hashlib.sha256(f"{seed}/{salt}/{ids[i]}".encode()).digest()

    return sorted(idx, key=key)


def drift_stats(originals, perturbed, cache=None, *, population: int | None = None,
                precision: float | None = None) -> dict:
    """Drift summary of the (original, perturbed) pairs, taken in the given order.

    With ``precision``, the pairs are a sample (in sampling order) of ``population`` applied captions and only
    a prefix is used: at least ``MIN_SAMPLE`` pairs, then ``STEP`` more at a time until the 95 % interval of
    the mean drift is within +-``precision`` (finite-population corrected) or the pairs run out. Without it,
    every pair is used. Returns the summary plus ``n`` (pairs used) and ``mean_ci95`` (the interval's half
    width; 0 when the pairs are the whole population). Remembered on disk per pair list, rule and encoder, so a
    warm run reads one small file instead of the vectors."""
    from .guard import ENCODER_NAME, shared_cache  # lazy: the parser of `vlbench perturb` reads this module

    cache = shared_cache() if cache is None else cache
    population = len(originals) if population is None else population
    rule = f"{precision}/{MIN_SAMPLE}/{STEP}/{population}" if precision is not None else "all"
    key = hashlib.sha256("\0".join([ENCODER_NAME, rule, *(f"{o}\0{p}" for o, p in zip(originals, perturbed))])
                         .encode("utf-8", "surrogatepass")).hexdigest()
    path = cache.result_file(key)
    if path is not None and path.is_file():
        try:
            stats = json.loads(path.read_text())
            if isinstance(stats, dict) and "n" in stats:  # a file of another shape is computed again
                return stats
        except ValueError:
            pass  # unreadable: computed again and rewritten
    stats = _drift_summary(list(originals), list(perturbed), cache, population, precision)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, dumps_strict(stats))
        except OSError:  # a read-only cache only costs time later
            pass
    return stats


def _half_width(d, population: int) -> float:
    """95 % half width of the mean of ``d``, a simple random sample without replacement of ``population``."""
    n = len(d)
    if n >= population:
        return 0.0
    if n < 2:
        return math.inf
    return 1.96 * float(d.std(ddof=1)) / math.sqrt(n) * math.sqrt(1.0 - n / population)


def pair_drifts(originals, perturbed, cache):
    """1 - cosine (clipped to [0, 2]) of each (original, perturbed) pair; encodes what the cache lacks."""
    import numpy as np

    cache.ensure([*originals, *perturbed])
    return np.clip(1.0 - np.array([cache.cosine(o, p) for o, p in zip(originals, perturbed)], dtype=np.float64),
                   0, 2)


def sequential_prefix(drifts_of, total: int, population: int, precision: float | None):
    """The sampling rule: ``(n, drifts, half width)`` for the prefix it stops at. ``drifts_of(n)`` gives the
    drifts of the first ``n`` pairs in sampling order; ``precision`` None takes all ``total`` pairs."""
    n = total if precision is None else min(MIN_SAMPLE, total)
    while True:
        d = drifts_of(n)
        half = _half_width(d, population)
        if n >= total or (precision is not None and half <= precision):
            return n, d, half
        n = min(n + STEP, total)


def _drift_summary(originals, perturbed, cache, population: int, precision: float | None) -> dict:
    import numpy as np

    # each step encodes only the pairs it adds (the cache holds the earlier ones)
    _, d, half = sequential_prefix(lambda n: pair_drifts(originals[:n], perturbed[:n], cache), len(originals),
                                   population, precision)
    if not d.size:
        return {"mean": None, "p05": None, "p50": None, "p95": None, "n": 0, "mean_ci95": None}
    # 3 decimals: MiniLM vectors differ in the 7th digit with the batch they were encoded in, and the
    # manifest of `vlbench perturb` must be byte-identical across processes
    return {"mean": round(float(d.mean()), 3), "p05": round(float(np.percentile(d, 5)), 3),
            "p50": round(float(np.percentile(d, 50)), 3), "p95": round(float(np.percentile(d, 95)), 3),
            "n": int(d.size), "mean_ci95": round(half, 4) if np.isfinite(half) else None}


def validity(originals: Sequence[str], ps, *, input_keys=None, mode: str = "sample",
             sample_size: int = DEFAULT_SAMPLE, precision: float = PRECISION, cache=None) -> dict:
    """Validity of one PerturbedSet ``ps`` against its ``originals``; ``input_keys`` = (keys of the originals,
    keys of the perturbed captions): the evaluated model's input after truncation (None: effective_rate None).
    ``precision``: the sample grows until the mean drift's 95 % half width is at most this (0: always
    ``sample_size`` captions, or all applied ones if fewer)."""
    from .guard import ENCODER_NAME, check_available  # lazy: the parser of `vlbench perturb` reads this module

    n = len(originals)
    applied = [i for i, a in enumerate(ps.applicable) if a]
    out: dict[str, Any] = {"applicable_rate": len(applied) / n if n else 0.0, "effective_rate": None,
                           "drift": None, "drift_mode": mode, "drift_n": 0, "encoder": None}
    if input_keys is not None and n:
        ko, kp = input_keys
        out["effective_rate"] = sum(a != b for a, b in zip(ko, kp)) / n
    if mode == "off":
        return out
    # full: every applied caption; sample: sampling order, at most sample_size, fewer once precise enough
    cap = scaled_sample(n, sample_size)
    chosen = applied if mode == "full" else _order(ps.caption_ids, applied, ps.seed, "validity")[:cap]
    try:
        check_available()
        stats = drift_stats([originals[i] for i in chosen], [ps.texts[i] for i in chosen], cache,
                            population=len(applied), precision=None if mode == "full" else precision)
    except VlbenchError as exc:
        out["encoder_error"] = f"drift not measured: {exc.message}" + (f" (fix: {exc.hint})" if exc.hint else "")
        return out
    out["drift_n"], out["drift_mean_ci95"] = stats.pop("n"), stats.pop("mean_ci95")
    out["drift"], out["encoder"] = stats, ENCODER_NAME
    if mode == "sample":
        out["drift_sample_size"] = cap  # the cap used: sample_size, scaled down on a small set (scaled_sample)
    return out


def all_validity(originals, sets: dict, **kw) -> dict:
    """name -> validity for every PerturbedSet; the drift of all perturbations in one encoding pass."""
    from .guard import shared_cache  # lazy: the parser of `vlbench perturb` reads this module

    cache = kw.pop("cache", None)
    cache = shared_cache() if cache is None else cache
    return {name: validity(originals, ps, cache=cache, **kw) for name, ps in sets.items()}


def audit_rows(originals, sets: dict, n: int = AUDIT_PAIRS) -> list[dict]:
    """A fixed-seed sample of ``n`` applied (original, perturbed) pairs per perturbation, for reading."""
    rows = []
    for name, ps in sets.items():
        applied = [i for i, a in enumerate(ps.applicable) if a]
        for i in sorted(_order(ps.caption_ids, applied, ps.seed, f"audit/{name}")[:n]):
            rows.append({"perturbation": name, "caption_id": ps.caption_ids[i], "original": originals[i],
                         "perturbed": ps.texts[i]})
    return rows


def short(v: dict | None) -> str:
    """'applied 52.9 %, drift 0.041 +-0.004 (p95 0.102, n 500)' for tables and logs."""
    if not v:
        return "-"
    s = f"applied {100 * v['applicable_rate']:.1f} %"
    if v.get("effective_rate") is not None:
        s += f", effective {100 * v['effective_rate']:.1f} %"
    d = v.get("drift")
    if d and d.get("mean") is not None:
        ci = v.get("drift_mean_ci95")
        ci = f" +-{ci:.3f}" if isinstance(ci, (int, float)) and ci else ""
        s += f", drift {d['mean']:.3f}{ci} (p95 {d['p95']:.3f}, n {v.get('drift_n', 0)})"
    elif v.get("encoder_error"):
        s += ", drift n/a (encoder missing)"
    return s


def run_validity(originals: Sequence[str], perturbed: dict, keys: tuple, *, mode: str = "sample",
                 sample_size: int = DEFAULT_SAMPLE, precision: float = PRECISION, log=print) -> dict:
    """A run's validity of every perturbation: name -> validity dict, one log line each (and a warning on
    stderr, even with --quiet, when the drift encoder cannot be loaded).

    ``keys`` = (keys of the originals, {name: keys of that perturbation's captions}): the model inputs exactly
    as the encode step keyed them (token ids after the model's truncation and after --truncate-chars), so
    ``effective_rate`` counts what the evaluated model really saw change.
    """
    clean_keys, cond_keys = keys
    out = {}
    for name, ps in perturbed.items():
        out[name] = validity(originals, ps, input_keys=(clean_keys, cond_keys[name]), mode=mode,
                             sample_size=sample_size, precision=precision)
        log(f"validity {name}: {short(out[name])}")
    for e in sorted({e for v in out.values() if (e := v.get("encoder_error")) is not None}):
        print(f"warning: {e}", file=sys.stderr, flush=True)  # the run goes on, but the reader must know
    return out


def write_audit(out_dir, originals: Sequence[str], perturbed: dict) -> None:
    """The run folder's audit file: fixed-seed (original, perturbed) pairs per perturbation, to judge by eye."""
    rows = audit_rows(list(originals), perturbed)
    atomic_write_text(out_dir / AUDIT_FILE, "".join(dumps_strict(r) + "\n" for r in rows))
