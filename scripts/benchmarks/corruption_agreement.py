"""The torch corruptions (--corrupt-backend torch) against the reference backend: the table of
docs/image_perturbations.md ("The torch backend") and the CPU speed figure of BENCHMARKS.md.

    python scripts/benchmarks/corruption_agreement.py [--seeds 8] [--json out.json] [--no-run] [--no-speed]

1. Same function: every corruption and severity on four 224 x 224 photographs (scikit-image's), the deterministic
   ones on the same pixels, the random ones on the reference's own draws: largest |torch - reference| in grey
   levels and the share of values that differ.
2. Statistics: the random corruptions with each backend's own random numbers, per severity: a statistic of the
   change (noise std, hit share, sharpness ratio, mean |change|) averaged over photographs x seeds, per backend.
3. Speed: CPU ms per 224 x 224 image at severity 3, one thread: the reference and the torch code as a run calls
   them (one image at a time, in a loader worker), and the torch code on a batch of 16.
4. Metric change on a run: a tiny CLIP (random weights, 16-d) on 24 synthetic images with real captions,
   --perturb-images all:1-5 with each backend: the RSUM change against clean per corruption, beside the change
   that another --seed of the reference alone makes (the noise floor of a random corruption on 24 images).
Uses tests/support (tiny models, the agreement functions and their stated tolerances).
"""

from __future__ import annotations

import argparse
import json
import statistics as pystats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import numpy as np  # noqa: E402
from support.corruption_agreement import GREY_LEVELS, STATISTIC, STATS_TOLERANCE, photos, same_function, statistics  # noqa: E402

from vlbench.imageperturb import NAMES  # noqa: E402


def agreement(seeds: int) -> list[dict]:
    imgs = photos()
    rows = []
    for name in NAMES:
        for severity in (1, 2, 3, 4, 5):
            row = {"corruption": name, "severity": severity, **{f"same_{k}": v for k, v in
                                                                  same_function(name, severity, imgs).items()}}
            if name in STATISTIC:
                st = statistics(name, severity, imgs, seeds)
                row.update(statistic=STATISTIC[name], reference=st["reference"], torch=st["torch"], rel=st["rel"])
            rows.append(row)
            print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return rows


def speed(repeats: int = 5) -> list[dict]:
    import torch
    from PIL import Image

    from vlbench.imageperturb import corrupt
    from vlbench.imageperturb.ontorch import corrupt_batch

    torch.set_num_threads(1)
    imgs = photos()
    pil = [Image.fromarray(im) for im in imgs]
    batch = torch.from_numpy(np.stack(imgs * 4).transpose(0, 3, 1, 2).copy())  # 16 images
    out = []
    for name in NAMES:
        def per_image(backend, name=name):
            corrupt(pil[0], name, 3, 0, "warm", backend)
            times = []
            for r in range(repeats):
                t = time.perf_counter()
                for i, im in enumerate(pil):
                    corrupt(im, name, 3, 0, f"img{r}-{i}", backend)
                times.append((time.perf_counter() - t) / len(pil) * 1000)
            return pystats.median(times)

        corrupt_batch(batch[:1], name, 3, [0])
        times = []
        for r in range(max(2, repeats // 2)):
            t = time.perf_counter()
            corrupt_batch(batch, name, 3, list(range(r * 16, r * 16 + 16)))
            times.append((time.perf_counter() - t) / len(batch) * 1000)
        out.append({"corruption": name, "reference_ms": per_image("reference"), "torch_ms": per_image("torch"),
                    "torch_batch16_ms": pystats.median(times)})
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def run_change(folder: Path) -> list[dict]:
    from support.data import write_manifest
    from support.tiny_models import save_clip

    import vlbench

    model = save_clip(folder / "clip")
    manifest = write_manifest(folder / "data", n=24)
    rsum = {}
    for label, backend, seed in (("reference", "reference", 0), ("torch", "torch", 0), ("reseeded", "reference", 1)):
        vlbench.run(model=f"clip:{model}", dataset=f"custom:{manifest}", perturb_images="all:1-5",
                    corrupt_backend=backend, out=str(folder / label), quiet=True, num_workers=0, n_boot=10,
                    validity="off", cache_dir=str(folder / "cache"), device="cpu", seed=seed)
        doc = json.loads((folder / label / "results.json").read_text())
        rsum[label] = {r["condition"]: r["value"] for r in doc["results"]
                       if r["metric"] == "rsum" and r["direction"] == "both"}
    out = []
    for name in NAMES:
        change = {b: [rsum[b][f"img:{name}:{s}"] - rsum[b]["clean"] for s in (1, 2, 3, 4, 5)] for b in rsum}
        out.append({"corruption": name, "reference_change": float(np.mean(change["reference"])),
                    "torch_change": float(np.mean(change["torch"])),
                    "mean_abs_difference": float(np.mean(np.abs(np.subtract(change["torch"], change["reference"])))),
                    "reseeded_abs_difference": float(np.mean(np.abs(np.subtract(change["reseeded"],
                                                                                change["reference"]))))})
    return out


def _print(rows, speeds, runs) -> None:
    by_name: dict[str, list[dict]] = {}
    for r in rows:
        by_name.setdefault(r["corruption"], []).append(r)
    print("| corruption | same function: max grey levels, severities 1-5 | share of values differing (max) "
          "| statistic (own draws) | relative difference, severities 1-5 | tolerance |\n|---|---|---:|---|---|---:|")
    for name, rs in by_name.items():
        rs = sorted(rs, key=lambda r: r["severity"])
        same = " / ".join(str(r["same_max"]) for r in rs)
        share = max(r["same_share"] for r in rs)
        if "statistic" in rs[0]:
            stat = (f"{rs[0]['statistic']} | " + " / ".join(f"{100 * r['rel']:.1f}%" for r in rs) +
                    f" | {100 * STATS_TOLERANCE[name]:.0f}%")
        else:
            stat = "none: deterministic | | "
        print(f"| {name} | {same} | {100 * share:.3f}% | {stat} |")
    print(f"\nstated bound: {GREY_LEVELS} grey level(s) on the same pixels / draws")
    if speeds:
        print("\n| corruption (severity 3, 224 px) | reference ms/image | torch ms/image (one at a time) "
              "| torch ms/image (batch of 16) |\n|---|---:|---:|---:|")
        for s in speeds:
            print(f"| {s['corruption']} | {s['reference_ms']:.1f} | {s['torch_ms']:.1f} | "
                  f"{s['torch_batch16_ms']:.1f} |")
        print(f"| **all 15 (sum)** | {sum(s['reference_ms'] for s in speeds):.0f} | "
              f"{sum(s['torch_ms'] for s in speeds):.0f} | {sum(s['torch_batch16_ms'] for s in speeds):.0f} |")
    if runs:
        print("\n| corruption | RSUM change, reference (mean of severities 1-5) | torch | mean abs difference "
              "torch - reference | same, reference at --seed 1 - reference |\n|---|---:|---:|---:|---:|")
        for r in runs:
            print(f"| {r['corruption']} | {r['reference_change']:+.2f} | {r['torch_change']:+.2f} | "
                  f"{r['mean_abs_difference']:.2f} | {r['reseeded_abs_difference']:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds per photograph for the statistics (default 8)")
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument("--no-speed", action="store_true", help="skip the speed measurement")
    ap.add_argument("--no-run", action="store_true", help="skip the tiny-model runs")
    ap.add_argument("--from-json", help="print the tables of an earlier --json file without measuring")
    ap.add_argument("--speed-only", action="store_true", help="measure and print the speed table only")
    args = ap.parse_args()
    if args.from_json:
        doc = json.loads(Path(args.from_json).read_text())
        _print(doc["agreement"], doc["speed"], doc["runs"])
        return
    if args.speed_only:
        speeds = speed()
        _print([], speeds, [])
        if args.json:
            Path(args.json).write_text(json.dumps({"speed": speeds}, indent=1))
        return
    rows = agreement(args.seeds)
    speeds = [] if args.no_speed else speed()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [] if args.no_run else run_change(Path(tmp))
    _print(rows, speeds, runs)
    if args.json:
        Path(args.json).write_text(json.dumps({"agreement": rows, "speed": speeds, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
