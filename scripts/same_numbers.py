"""Proof that moving code did not move the numbers: run a fixed set of runs of a tiny random-weight CLIP
(built through the real classes, loaded from a folder as a hub id would be) on a 12-image manifest, and
compare two such sets of results.json files, ignoring only what must differ between two runs (run ids,
timestamps, timings, cache statistics, folder paths).

    python scripts/same_numbers.py run OUT_DIR           # writes OUT_DIR/<case>/results.json
    python scripts/same_numbers.py compare BEFORE AFTER  # prints the differences; exit 1 if any
    python scripts/same_numbers.py compare BEFORE AFTER --new-metric ndcg  # AFTER adds a metric on purpose:
        # its records and deltas are dropped from AFTER, and the results hash and the protocol's DCG note
        # (which change with it) are not compared; every other number must be identical

Only the public API (``vlbench.run``) and the CLI are used, so the same script runs on code before and
after a refactor. Used for issue #20 (the closing note shows the diff).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test helpers (tests/support)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: case -> vlbench.run keyword arguments (model and dataset are added)
CASES = {
    "perturb-all": dict(perturb="all", graded=("rouge-l",), n_boot=200),
    "images-shortcuts": dict(perturb_images="gaussian_noise:1,jpeg_compression:2", shortcuts="matched,caption-only",
                             digits="sklearn-digits", n_boot=200),
    "truncate-k-p": dict(perturb="nearby-char,shuffle-all-words", truncate_chars=30, k=(1, 3), p=5, n_boot=100),
    "fraction-t2i-side": dict(perturb="synonym-noun,distraction-true", i2t_recall="fraction", perturb_side="t2i",
                              n_boot=100, validity="full"),
    # the study's protocol preset with every perturbation (its fixed relevance model: the tiny CLIP itself)
    "protocol-perturb-all": dict(protocol="hendriksen2024", perturb="all", n_boot=50, relevance="<model>"),
}
#: the reproduction of the study on the stand-in: 4 models x 4 datasets, all the tiny CLIP on the manifest
REPRODUCE = "reproduce-standin"
INPUTS = Path(os.environ.get("VLBENCH_SAME_NUMBERS_INPUTS", "/tmp/vlbench-same-numbers-inputs"))
#: keys whose values differ between any two runs (ids, clocks, caches, paths)
#: (embedding_keys.npz records the run id and cache folder; record_hash covers the whole file, ids included)
VOLATILE = {"embedding_keys.npz", "record_hash", "run_id", "created", "wall_time_s", "cache", "cache_dir", "per_query", "timings", "model_loaded",
            "images_cached", "texts_cached", "seconds"}


def _data(root: Path) -> tuple[Path, Path]:
    from support import tiny_models
    from support.data import write_manifest

    model = root / "tiny-clip"
    if not model.exists():
        tiny_models.SAVERS["clip"](model, seed=0)
    return model, write_manifest(root / "data", 12)


def run_all(out: Path) -> None:
    import vlbench

    out.mkdir(parents=True, exist_ok=True)
    model, man = _data(INPUTS)  # one place for every set: the model spec (its path) enters the model hash
    for case, kw in CASES.items():
        kw = {k: (f"clip:{model}" if v == "<model>" else v) for k, v in kw.items()}
        vlbench.run(model=f"clip:{model}", dataset=f"custom:{man}", dataset_name="same-numbers",
                    out=str(out / case), cache_dir=str(out / "_cache"), quiet=True, num_workers=0, **kw)
        print(f"{case}: {out / case / 'results.json'}")
    subprocess.run([sys.executable, "-m", "vlbench", "run", "--task", "order", "--model", f"clip:{model}",
                    "--dataset", f"custom:{man}", "--out", str(out / "task-order"), "--cache-dir", str(out / "_cache"),
                    "--quiet", "--num-workers", "0"], check=True)
    print(f"task-order: {out / 'task-order' / 'results.json'}")
    args = [sys.executable, "-m", "vlbench", "reproduce", "hendriksen2024", "--out", str(out / REPRODUCE),
            "--perturb", "distraction,shuffle-all-words", "--relevance", f"clip:{model}", "--bootstrap", "5",
            "--cache-dir", str(out / "_cache")]
    for key in ("align", "altclip", "clip", "groupvit"):
        args += ["--model", f"{key}=clip:{model}"]
    for key in ("coco", "coco-fg", "flickr30k", "flickr30k-fg"):
        args += ["--dataset", f"{key}=custom:{man}"]
    subprocess.run(args, check=True)
    print(f"{REPRODUCE}: {out / REPRODUCE}")


def _reproduce_files(root: Path) -> list[str]:
    """The JSON files of the reproduction (its comparison and every run's results.json), relative names."""
    base = root / REPRODUCE
    return sorted(str(p.relative_to(base)) for p in base.rglob("*.json") if p.name in ("results.json",
                                                                                      "comparison.json"))


def _clean(x, out: str):
    if isinstance(x, dict):
        return {k: _clean(v, out) for k, v in x.items()
                if k not in VOLATILE and not k.endswith("_seconds") and not k.endswith("_s")}
    if isinstance(x, list):
        return [_clean(v, out) for v in x]
    if isinstance(x, str):
        return x.replace(out, "<out>")
    return x


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k in b else 'before'}")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} after"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def _without(doc: dict, metrics: list) -> dict:
    """``doc`` (cleaned) without the records and deltas of ``metrics``, the results hash and the DCG note."""
    if not metrics:
        return doc
    out = {k: v for k, v in doc.items() if k != "results_hash"}
    for key in ("results", "deltas"):
        if isinstance(out.get(key), list):
            out[key] = [r for r in out[key] if not (isinstance(r, dict) and r.get("metric") in metrics)]
    proto = (out.get("settings") or {}).get("protocol")
    if isinstance(proto, dict):
        out["settings"] = {**out["settings"], "protocol": {k: v for k, v in proto.items() if k != "dcg"}}
    return out


def compare(before: Path, after: Path, new_metrics: list | None = None) -> int:
    n_diff = 0
    files = [f"{case}/results.json" for case in [*CASES, "task-order"]]
    files += [f"{REPRODUCE}/{f}" for f in _reproduce_files(before)]
    missing = sorted(set(f"{REPRODUCE}/{f}" for f in _reproduce_files(after)) - set(files))
    if missing:
        print(f"only after: {missing}")
        n_diff += len(missing)
    for case in files:
        if not (after / case).is_file():
            print(f"{case}: missing after")
            n_diff += 1
            continue
        a = _clean(json.loads((before / case).read_text()), str(before.resolve()))
        b = _clean(json.loads((after / case).read_text()), str(after.resolve()))
        a, b = _without(a, new_metrics or []), _without(b, new_metrics or [])
        d = _diff(a, b)
        n_diff += len(d)
        n_vals = len(a.get("results", []))
        print(f"{case}: {n_vals} metric records, {len(d)} difference(s)")
        for line in d[:40]:
            print("   ", line)
    return 1 if n_diff else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--new-metric", action="append", default=[],
                   help="a metric AFTER adds on purpose: not compared (nor the results hash, nor the DCG note)")
    a = ap.parse_args()
    if a.cmd == "run":
        run_all(a.out)
        return 0
    return compare(a.before, a.after, a.new_metric)


if __name__ == "__main__":
    sys.exit(main())
