#!/usr/bin/env python
"""Time every meaning-changing probe against every meaning-preserving perturbation on the same captions.

    python scripts/benchmarks/bench_probes.py [--dataset coco] [--data-dir /work/shared/data/captions] [--json FILE]

In one process, on the same captions (default: the 25,000 MS-COCO 5k test captions): spaCy and WordNet are
loaded first (not timed), then ``perturb_captions`` makes the 13 meaning-preserving perturbations (its spaCy
tagging timed apart; the synonyms with their default MiniLM guard, or ``--guard-off``), then ``make_probes``
makes the 11 probes from the SAME tagging (the parse shared, done once per caption); ``--probes-first`` swaps
the order. Before each side every cache of vlbench.perturbations and WordNet's parsed synsets are cleared, so
neither side inherits the other's warm caches (``--warm`` keeps them). The synonym guard's MiniLM vectors are
cached on disk by vlbench: point VLBENCH_CACHE_DIR at an empty folder to have them computed. Prints, for each
side, the wall and CPU seconds without the tagging and the milliseconds per output
(per perturbation of a caption, per probe of a caption), and the 1-minute load average before and after.
The goal (issue 46): a probe costs no more than a perturbation. Nothing is written unless ``--json FILE``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/_captions.py
sys.path.insert(0, str(ROOT))


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return None


def _cold() -> None:
    """Forget what the other side left warm: every lru/cache of vlbench.perturbations (word units, word forms,
    WordNet closures...) and the synsets NLTK's WordNet reader has parsed (its private cache; kept when absent)."""
    from vlbench.lang import wordnet

    for name, module in list(sys.modules.items()):
        if name.startswith("vlbench.perturbations") and module is not None:
            for obj in vars(module).values():
                if callable(getattr(obj, "cache_clear", None)):
                    obj.cache_clear()
    cache = getattr(wordnet(), "_synset_offset_cache", None)
    if cache is not None:
        cache.clear()


def _clock():
    return time.perf_counter(), time.process_time()


def main() -> int:
    from _captions import caption_parser

    ap = caption_parser(__doc__)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", default=None)
    ap.add_argument("--probes-first", action="store_true",
                    help="make the probes before the perturbations (the second side finds WordNet's synsets and the "
                         "shared word-unit cache warm; run both orders to see how much that is)")
    ap.add_argument("--guard-off", action="store_true",
                    help="the two synonym perturbations without their MiniLM semantic guard (the cheapest "
                         "perturbations: the strictest comparison for the probes)")
    ap.add_argument("--warm", action="store_true",
                    help="let the second side find the first side's caches warm (default: every cache of "
                         "vlbench.perturbations and WordNet's parsed synsets are cleared before each side)")
    args = ap.parse_args()

    import vlbench.perturbations as P
    from vlbench.datasets.core import load_dataset
    from vlbench.lang import wordnet
    from vlbench.perturbations import engine
    from vlbench.perturbations.base import usable_text
    from vlbench.perturbations.probes import PROBES, make_probes

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    captions, ids = list(ds.captions), list(ds.caption_ids)
    images = [str(ds.images[int(i)]) for i in ds.caption_to_image]
    engine.parse(["A dog runs on the grass."])  # spaCy loaded, not timed
    wordnet().synsets("dog")  # WordNet loaded, not timed
    load_before = _load()

    timings = {"parse_wall": 0.0, "parse_cpu": 0.0}
    shared: dict = {}
    real_parse = engine.parse

    def timed_parse(*a, **kw):
        w, c = _clock()
        try:
            out = real_parse(*a, **kw)
            shared.update(out)
            return out
        finally:
            timings["parse_wall"] += time.perf_counter() - w
            timings["parse_cpu"] += time.process_time() - c

    names = P.resolve("all")
    pert: dict = {}
    probe: dict = {}

    def run_perturbations():
        if not args.warm:
            _cold()
        engine.parse = timed_parse
        w0, c0 = _clock()
        params = {n: {"guard": "off"} for n in ("synonym-noun", "synonym-adjective")} if args.guard_off else None
        pert["sets"] = P.perturb_captions(captions, ids, names, seed=args.seed, params=params)
        pert["wall"], pert["cpu"] = time.perf_counter() - w0, time.process_time() - c0
        engine.parse = real_parse

    def run_probes():
        missing = [c for c in captions if usable_text(c) and c not in shared]
        if missing:  # tagged here (all of them when the probes go first), counted with the tagging
            w, c = _clock()
            shared.update(real_parse(missing))
            timings["parse_wall"] += time.perf_counter() - w
            timings["parse_cpu"] += time.process_time() - c
        if not args.warm:
            _cold()
        w1, c1 = _clock()
        probe["sets"] = make_probes(captions, ids, images, seed=args.seed, parsed=shared)
        probe["wall"], probe["cpu"] = time.perf_counter() - w1, time.process_time() - c1

    before_parse = dict(timings)
    if args.probes_first:
        run_probes()
        before_parse = dict(timings)
        run_perturbations()
    else:
        run_perturbations()
    pert_wall = pert["wall"] - (timings["parse_wall"] - before_parse["parse_wall"])
    pert_cpu = pert["cpu"] - (timings["parse_cpu"] - before_parse["parse_cpu"])
    if not args.probes_first:
        run_probes()
    sets, probes = pert["sets"], probe["sets"]
    probe_wall, probe_cpu = probe["wall"], probe["cpu"]
    load_after = _load()

    n = len(captions)
    n_pert, n_probe = n * len(sets), n * len(probes)
    report = {
        "dataset": ds.name, "n_captions": n, "n_images": len(set(images)), "seed": args.seed,
        "order": "probes first" if args.probes_first else "perturbations first",
        "synonym_guard": "off" if args.guard_off else "minilm (default)",
        "caches": "warm from the first side" if args.warm else "cleared before each side",
        "cpu_count": os.cpu_count(), "python": platform.python_version(),
        "load_average_1min": {"before": load_before, "after": load_after},
        "tagging": {"wall_s": round(timings["parse_wall"], 2), "cpu_s": round(timings["parse_cpu"], 2),
                    "captions": len(shared)},
        "perturbations": {"names": len(sets), "outputs": n_pert, "wall_s": round(pert_wall, 2),
                          "cpu_s": round(pert_cpu, 2), "ms_per_output_wall": round(1000 * pert_wall / n_pert, 4),
                          "ms_per_output_cpu": round(1000 * pert_cpu / n_pert, 4)},
        "probes": {"names": len(probes), "outputs": n_probe, "wall_s": round(probe_wall, 2),
                   "cpu_s": round(probe_cpu, 2), "ms_per_output_wall": round(1000 * probe_wall / n_probe, 4),
                   "ms_per_output_cpu": round(1000 * probe_cpu / n_probe, 4),
                   "applied": {k: ps.n_applicable for k, ps in probes.items()}},
    }
    assert list(probes) == list(PROBES)
    pr, pp = report["perturbations"], report["probes"]
    print(f"{ds.name}: {n} captions of {report['n_images']} images, {os.cpu_count()} CPU core(s), load average "
          f"{load_before} before, {load_after} after; {report['order']}; synonym guard {report['synonym_guard']}; "
          f"caches {report['caches']}")
    print(f"  spaCy tagging (once, shared)   {timings['parse_wall']:7.1f} s wall  {timings['parse_cpu']:7.1f} s CPU")
    print(f"  {pr['names']} perturbations x {n}      {pr['wall_s']:7.1f} s wall  {pr['cpu_s']:7.1f} s CPU   "
          f"{pr['ms_per_output_wall']:.4f} ms / perturbation (CPU {pr['ms_per_output_cpu']:.4f})")
    print(f"  {pp['names']} probes x {n}             {pp['wall_s']:7.1f} s wall  {pp['cpu_s']:7.1f} s CPU   "
          f"{pp['ms_per_output_wall']:.4f} ms / probe (CPU {pp['ms_per_output_cpu']:.4f})")
    verdict = "met" if pp["ms_per_output_cpu"] <= pr["ms_per_output_cpu"] else "NOT met"
    print(f"  goal (a probe costs no more than a perturbation, CPU): {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
