"""``vlbench ls`` and ``vlbench cache``: what is registered (every plug-in kind, with what a broken plug-in
broke) and what the caches hold, as plain-text tables. Neither imports torch or transformers."""

from __future__ import annotations

import importlib
import importlib.util

from .. import registry, stores
from ..imageperturb import image_perturbations
from ..metrics.specs import describe
from ..models.families import ModelFamily, facts_text


def _plugin_problem(entry, check: bool) -> str | None:
    """Why a plug-in entry cannot load, or None. Without --check only whether its module exists (no
    import: 'vlbench ls' stays fast and imports no torch); with --check it is imported."""

    if not isinstance(entry.target, str):
        return None
    module = entry.target.partition(":")[0]
    if not check:
        try:
            top = importlib.util.find_spec(module.split(".")[0])
        except (ImportError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if top is not None else f"module {module!r} is not installed"

    try:
        registry.resolve(entry.target)
    except (Exception, SystemExit) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _model_line(entry, desc: str, check: bool) -> str:
    """A model family's description and static facts, read from its record without loading the model;
    a plug-in's entry point is imported only under --check (a plain loader function has no facts)."""

    family = entry.target
    if isinstance(family, str) and check:
        try:
            family = entry.load()
        except (Exception, SystemExit):
            return desc
    if not isinstance(family, ModelFamily):
        return desc
    return "  ".join(x for x in (desc or family.describe(), facts_text(family)) if x)


#: what ``vlbench ls`` lists, in order: (section title, registry); every plug-in kind is one line here
def _sections() -> list:
    return [("models", registry.models), ("datasets", registry.datasets),
            ("perturbations", registry.perturbations), ("image-perturbations", image_perturbations),
            ("protocols", registry.protocols), ("galleries", registry.galleries),
            ("perturbation-variants", registry.perturbation_variants),
            ("granularity-profiles", registry.granularity_profiles), ("reproductions", registry.reproductions),
            ("suites", registry.suites), ("executors", registry.executors),
            ("exporters", registry.exporters), ("trackers", registry.trackers),
            ("pair-scorers", registry.pair_scorers)]


def _entry_line(title: str, e, check: bool) -> str:
    """One registered entry as ``vlbench ls`` prints it: name, family, description, source, what broke."""
    src = "" if e.source == "builtin" else f"  [{e.source}]"
    fam = e.meta.get("family")
    desc = e.description or ""
    if title == "models":
        desc = _model_line(e, desc, check)
    elif title not in ("models", "datasets") and not desc and check:  # a plug-in object's own description
        try:
            desc = str(getattr(e.load(), "description", "") or "")
        except (Exception, SystemExit):
            pass
    broken = _plugin_problem(e, check) if e.source != "builtin" else None
    mark = "!" if broken else " "
    line = (f"{mark} {e.name:<34} {('(' + fam + ') ') if fam else ''}{desc}{src}"
            + (f"  BROKEN: {broken}" if broken else ""))
    if e.meta.get("licence") or e.meta.get("citation"):  # a dataset record's terms and what to cite
        line += f"\n  {'':<34}   licence: {e.meta.get('licence') or '?'}; cite: {e.meta.get('citation') or '?'}"
    return line


def _cmd_ls(args) -> int:
    try:  # lazy: what a broken optional stack breaks is said here, not at vlbench's start
        from .. import perturbations  # noqa: F401 -- imported for the perturbations it registers
    except Exception as exc:  # pragma: no cover
        print(f"(perturbations unavailable: {exc})")

    want = args.what
    for title, reg in _sections():
        if want and want != title:
            continue
        print(f"{title}:")
        for e in reg.entries():
            print(_entry_line(title, e, args.check))
        if title == "datasets":
            print(f"  {'custom:<manifest.jsonl>':<34} your own test set: one JSON line per image, "
                  '{"image": "<path relative to the manifest>", "captions": [...]}')
            print(f"  {'hf:<ORG/NAME>[?options]':<34} a Hub image-text dataset (parquet), read through "
                  "huggingface_hub; columns detected unless named (docs/datasets.md)")
        for name, err in reg.plugin_errors.items():
            print(f"  ! {name}: {err}")
    for name, err in registry.study_errors.items():
        print(f"! study {name}: BROKEN: {err}")
    if not want or want == "tasks":
        from ..tasks.cli import print_tasks  # lazy: vlbench --help imports this module; keep it light

        print_tasks()
    if not want or want == "metrics":
        from ..tasks.registry import tasks  # lazy: the choice sets declare their own metrics (docs/tasks.md)
        tasks()
        print("metrics (name, unit, range, better, directions):")
        for m in describe():
            src = "" if m["source"] == "builtin" else f"  [{m['source']}]"
            if "error" in m:
                print(f"! {m['name']:<16} BROKEN: {m['error']}{src}")
                continue
            name = m["name"] + {"k": "@k", "p": "@p"}.get(m["param"], "")
            print(f"  {name:<16} {m['unit']:<5} {m['better']:<6} {'/'.join(m['directions']):<12} {m['range']}{src}")
    return 0


def _cmd_cache(args) -> int:
    # lazy: vlbench --help imports this module; keep it light
    from ..encoding.cache import clear_cache, list_cache, list_perturbation_cache
    from ..tasks.registry import tasks
    tasks()  # the choice sets declare their own stores (ARO's crops)
    if args.action == "ls":
        _print_cache(list_cache(args.cache_dir), list_perturbation_cache(args.cache_dir))
        print(f"stores under {stores.checked_root(args.cache_dir)}:")
        rows = [(r["name"], r["folder"] + "/", r["kind"], r["files"], r["bytes"], r["what"])
                for r in stores.usage(args.cache_dir)]
        for line in columns(("store", "folder", "kind", "files", "bytes", "what"), rows, right=(3, 4)):
            print("  " + line)
    elif args.model_hash is not None:
        n = clear_cache(args.cache_dir, args.model_hash)
        print(f"removed {n} model folder{'' if n == 1 else 's'} (vectors and text keys)")
    else:
        removed = stores.clear(args.cache_dir, downloads=args.downloads)
        print(f"removed {sum(removed.values())} file(s) under {stores.checked_root(args.cache_dir)}: "
              + ", ".join(f"{name} {n}" for name, n in removed.items()))
        kept = [r for r in stores.usage(args.cache_dir) if r["kind"] == "download" and r["files"]]
        if kept:
            print(f"kept downloads: {', '.join(r['name'] for r in kept)}; add --downloads to remove them too")
    return 0


def columns(header: tuple, rows: list, right: tuple = ()) -> list[str]:
    """A plain-text table whose columns line up whatever the cell widths: each column as wide as its widest
    cell, separated by two spaces; the columns in ``right`` (numbers) right-aligned, the last never padded."""
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for r in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        if len(header) - 1 not in right:
            parts[-1] = r[-1]
        out.append("  ".join(parts).rstrip())
    return out


def _print_cache(rows: list, prows: list) -> None:
    if not rows:
        print("the embedding cache is empty")
    else:
        table = [(r["model_hash"], r["model"] or "?", r["modality"], r["vectors"], r["shards"],
                  f"{r['bytes'] / 1e6:.1f}", r["modified"]) for r in rows]
        for line in columns(("model hash", "model", "modality", "vectors", "shards", "MB", "modified"), table,
                            right=(3, 4, 5)):
            print(line)
    print(f"perturbed captions: {len(prows)} cached set(s)")
    if prows:
        ptable = [(r["key"], f"{r['bytes'] / 1e6:.1f}", r["modified"], ", ".join(r["perturbations"])) for r in prows]
        for line in columns(("key", "MB", "modified", "perturbations"), ptable, right=(1,)):
            print("  " + line)
