"""``vlbench perturb --perturb negation-absent,...``: show or write meaning-changing probes.

``--text CAPTION``: the caption is the only caption of its "image", so absence is checked against it alone and
the object vocabulary is the one-word COCO category names (:data:`.words.COCO_OBJECTS`); the absence-based
probes are shown marked "unverified". ``--dataset NAME``: every caption, grouped by image (an image with one
caption only is refused for the absence-based probes); with ``--out DIR`` one ``<probe>.jsonl`` per probe
(rows with ``meta`` and ``verified``) and ``probes.json`` (each probe's description).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ...util.io import atomic_write_text, dumps_strict, write_json
from .make import NEEDS_ABSENCE, make_probes, probe_text


def _show_text(text: str, sets: dict, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        for name, ps in sets.items():
            print(dumps_strict({"perturbation": name, "family": ps.family, "kind": ps.kind,
                                **ps.rows([text])[0]}), file=out)
        return
    print(f"original: {text}", file=out)
    width = max(len(n) for n in sets)
    for name, ps in sets.items():
        mark = " " if ps.applicable[0] else "-"
        note = "" if ps.verified[0] or not ps.applicable[0] else "  [unverified: one caption]"
        print(f"{mark} {name:<{width}}  {ps.family:<10}  {ps.texts[0]}{note}", file=out)
    if any(n in NEEDS_ABSENCE for n in sets):
        print("(meaning-changing probes, kind sensitivity; with --text the caption is the image's only caption, so "
              "'absent' is checked against it alone and objects come from the 80 COCO category names)", file=out)
    if any(not ps.applicable[0] for ps in sets.values()):
        print("(- : no probe can be made of this caption)", file=out)


def run_probes(args, names: list[str], params: dict) -> int:
    quiet = bool(getattr(args, "quiet", False))
    if args.text is not None:
        sets = probe_text(args.text, names, seed=args.seed, params=params)
        if not quiet:
            _show_text(args.text, sets, bool(getattr(args, "json", False)))
        if args.out:
            _write(args.out, sets, [args.text], ["text"])
        return 0
    from ...datasets.core import load_dataset  # lazy: vlbench perturb --text reads no dataset

    ds = load_dataset(args.dataset, data_dir=args.data_dir, require_images=False)
    images = [str(ds.images[int(i)]) for i in ds.caption_to_image]
    sets = make_probes(ds.captions, ds.caption_ids, images, names, seed=args.seed, params=params,
                       batch_size=int(getattr(args, "batch_size", 512) or 512))
    if args.out:
        _write(args.out, sets, ds.captions, images)
    if not quiet:
        print(f"{'probe':22s} {'family':11s} {'applied':>8s} {'n/a':>7s} {'n/a rate':>9s}")
        for name, ps in sets.items():
            print(f"{name:22s} {ps.family:11s} {ps.n_applicable:8d} {ps.n_not_applicable:7d} "
                  f"{100 * ps.not_applicable_rate:8.2f}%")
        if args.out:
            print(f"wrote {len(sets)} probe file(s) and probes.json to {args.out}")
    return 0


def _write(out_dir, sets: dict, originals, images) -> None:
    folder = Path(out_dir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    for name, ps in sets.items():
        atomic_write_text(folder / f"{name}.jsonl",
                          "".join(dumps_strict(r) + "\n" for r in ps.rows(list(originals), list(images))))
    write_json(folder / "probes.json", {name: ps.describe() for name, ps in sets.items()})
