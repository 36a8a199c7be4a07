"""``build_leaderboard``: runs -> tables (CSV, Markdown), one HTML page, PNG plots, a build manifest.

All files are produced in memory first, then written atomically; the manifest (written last) lists
every file with its SHA-256, so a later build into the same folder removes files it no longer makes
and ``publish`` can check that the built files were not changed.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import VlbenchError
from ..pipeline.rerank.readback import stages_text
from ..util.io import sha256_bytes
from . import render
from .all_tables import build_tables
from .labels import protocol_of, stages_of
from .paper.latex import document, paper_view, to_latex
from .paper.plots import clean_vs_fg_plots, corruption_plots, rsum_change_plots
from .paper.sensitivity_map import sensitivity_map_plots
from .runset import Choice, Taken, choose, unfinished
from .sections import analysis_table, comparison_table, read_analyses, read_comparisons
from .store import Loaded, Run, Selection, condition_key, load_runs, select
from .tables import Labels, Table, _Ctx, long_order, long_rows, make_labels
from .writing import safe_rel, write_tree

__all__ = ["make", "build_leaderboard", "read_build", "load_results", "write_tree", "RESULT_COLUMNS", "MANIFEST"]

MANIFEST = "build_manifest.json"
MANIFEST_KIND = "vlbench-leaderboard-build"
#: tables shown in leaderboard.md and index.html (values.csv is CSV only: it holds every number)
PAGE_TABLES = ("rank_groups", "clean_retrieval", "robustness_summary", "sensitivity_map", "rsum_per_perturbation",
               "rsum_per_perturbation_total", "model_input_similarity", "rsum_changes",
               "image_corruptions", "choice_tasks", "compositional",  # choice tasks under conditions
               "multilingual", "distractors", "flips", "paired_comparisons", "caption_brittleness",
               "provenance")
#: tables written (files, page, manifest) only when some run has rows for them: a build of retrieval-only
#: runs stays byte-identical to one made before these tables existed
OPTIONAL_PAGE_TABLES = ("image_corruptions", "choice_tasks", "compositional", "multilingual",
                        "distractors", "flips", "rank_groups", "rank_pairs", "sensitivity_map")


class LeaderboardWarning(UserWarning):
    """A results file was skipped, or runs were superseded / mixed."""


@dataclass
class Built:
    files: dict[str, bytes]  # relative path -> content (manifest included)
    manifest: dict
    tables: dict[str, Table]
    loaded: Loaded
    selection: Selection
    labels: Labels
    figures: list[tuple[str, str, bytes]]
    taken: Taken


@dataclass
class BuildResult:
    out: Path
    files: list[str]
    manifest: dict
    tables: dict[str, Table]

    @property
    def skipped(self) -> list[dict]:
        return self.manifest["skipped"]

    @property
    def left_out(self) -> list[dict]:
        return self.manifest.get("left_out", [])


def _default_warn(msg: str) -> None:
    warnings.warn(msg, LeaderboardWarning, stacklevel=3)


def _perturbation_notes(runs: list[Run]) -> list[str]:
    """Perturbations of one name whose version, parameters or seed differ between runs."""
    seen: dict[str, dict[str, list[str]]] = {}
    for r in runs:
        for c in r.conditions():
            if c == "clean":
                continue
            m = r.condition_meta(c)
            sig = json.dumps({"version": m.get("version"), "params": m.get("params"), "seed": m.get("seed")},
                             sort_keys=True)
            seen.setdefault(c, {}).setdefault(sig, []).append(r.public)
    out = []
    for c in sorted(seen):
        if len(seen[c]) > 1:
            desc = "; ".join(f"{sig} in {', '.join(sorted(ids))}" for sig, ids in sorted(seen[c].items()))
            out.append(f"perturbation {c!r} differs between runs (version/params/seed): {desc}")
    return out


def _run_entry(run: Run, labels: Labels, selection: Selection) -> dict:
    used = sorted((k[3] for k, v in selection.values.items() if v is run), key=condition_key)
    if any(v is run for v in selection.mia.values()):
        used.append("model_input_analysis")
    return {"run_id": run.ref, "path": run.path, "folder": run.public, "model": labels.model[run.model_hash],
            "model_spec": labels.spec(run), "model_hash": run.model_hash, "dataset": run.dataset_name,
            "dataset_label": labels.dataset[(run.dataset_name, run.dataset_hash)], "dataset_hash": run.dataset_hash,
            "metric_version": run.metric_version, "vlbench_version": run.vlbench_version,
            "schema_version": run.original_schema, "created": run.created, "results_hash": run.results_hash,
            "used": used, "flags": labels.run_flags(run), **_stages_entry(run),
            **({} if protocol_of(run) == "standard" else {"protocol": protocol_of(run)})}


def _stages_entry(run: Run) -> dict:
    """The manifest's ``stages`` of a run entry (a one-stage dual encoder's: none, as before kinds were named) and,
    for the first stage of a two-stage run, ``first_stage_of``: the two-stage entry it is the first stage of."""
    stages = stages_of(run)
    return ({} if stages == "dual" else {"stages": stages}) | (
        {"first_stage_of": stages_text(run.record)} if run.reranked else {})


def _notes(loaded: Loaded, selection: Selection, labels: Labels, warn: Callable[[str], None],
           taken: Taken) -> list[str]:
    """The build's notes (also in the manifest); warnings for what the user should know."""
    notes = [
        "RSUM per perturbation (rsum_per_perturbation) shows text-to-image RSUM (t2i R@1 + R@5 + R@10); "
        "rsum_per_perturbation_total shows the total RSUM (i2t + t2i).",
        "Duplicate runs (same model hash, dataset and dataset hash, condition): the newest run (by its "
        "'created' time, then run id) provides the values; the others are listed as superseded in "
        f"{MANIFEST}.",
    ]
    if any(r.stage for r in loaded.runs):
        notes.append("Two-stage runs (vlbench run --rerank): the final ranking is an entry of its own, named "
                     "'<first stage> + <pair scorer>@K<k>' (its model hash: the first stage's, the pair scorer's and "
                     "K); its first stage counts for the plain model, where no plain run of that model has the "
                     "condition (a plain run wins whatever its time). The final ranking's changes under a condition "
                     "carry the interval the run drew for them (results.json rerank.bootstrap; none in runs made "
                     "before it was recorded).")

    protocols = sorted({protocol_of(r) for r in selection.used_runs()})
    if protocols != ["standard"]:  # standard-only builds read as before
        notes.append("Evaluation protocol: " + ", ".join(protocols) + " (docs/reproducing.md); runs of different "
                     "protocols are refused unless --allow-mixed, then flagged 'mixed: protocol ...'.")
    pert_notes = _perturbation_notes(selection.used_runs())
    for n in pert_notes:
        warn(n)
    notes += pert_notes
    folders = {r.ref: r.public for r in loaded.runs}
    firsts = {r.ref for r in loaded.runs if r.reranked}
    for s in selection.superseded:
        what = "entirely" if s["fully"] else "for " + _conditions(s["conditions"])
        by = sorted({folders.get(c["by"], c["by"]) for c in s["conditions"]})
        if s["run_id"] in firsts:  # a two-stage run's first stage: a plain run of its model gives those values
            notes.append(f"the first stage of two-stage run {s['folder']} is superseded {what} by plain run(s) "
                         f"{', '.join(by)} of its model (its final ranking is an entry of its own)")
            continue
        notes.append(f"run {s['folder']} is superseded {what} by newer run(s) {', '.join(by)}")
    for s in loaded.skipped:
        notes.append(f"skipped unreadable results file {s['folder']}: {s['reason']}")
    for c in taken.names:
        notes.append(f"one dataset (content hash {c['hash'][:8]}) under {len(c['names'])} names, shown as "
                     f"{c['shown_as']}: " + "; ".join(f"{n} in {', '.join(f)}" for n, f in c["names"].items()))
    for x in taken.left_out:
        notes.append(f"left out {x['folder']}" + (f" (run {x['run_id']})" if x["run_id"] else "") + f": {x['reason']}")
    if labels.mixed:
        notes.append("--allow-mixed: incomparable runs are shown side by side; their rows carry a 'mixed' flag "
                     "and datasets with several content hashes are labelled 'name [hash8]'.")
        warn("building with --allow-mixed: " + "; ".join(
            f"{m.get('dataset', m['what'].replace('_', ' '))}: {len(m['variants'])} variants" for m in labels.mixed))
    return notes


def _conditions(items: list[dict], most: int = 6) -> str:
    """Condition names of a superseded run, at most ``most`` of them (then a count)."""
    names = [c["condition"] for c in items]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _table_files(tables: dict, protocol: str) -> dict[str, bytes]:
    """Each table as CSV (every column), and as Markdown and LaTeX for a paper (no run ids or hashes: latex.py)."""
    files: dict[str, bytes] = {}
    for t in tables.values():
        files[f"{t.name}.csv"] = render.to_csv(t).encode("utf-8")
        if t.name != "values":
            files[f"{t.name}.md"] = (f"# {render.md_escape(t.title)}\n\n{render.md_escape(t.description)}\n\n" +
                                     render.to_markdown(paper_view(t), heading=None)).encode("utf-8")
            files[f"{t.name}.tex"] = to_latex(t, protocol).encode("utf-8")
    return files


def protocol_line(selection: Selection) -> str:
    """What a paper's caption states about how the numbers were measured: protocol, metric version, datasets."""
    runs = selection.used_runs()
    sizes = {}
    for r in runs:
        f = r.record.dataset.fields
        if isinstance(f.get("n_images"), int) and isinstance(f.get("n_captions"), int):
            sizes[r.dataset_name] = f"{f['n_images']:,} images, {f['n_captions']:,} captions"
    datasets = "; ".join(f"{d} ({sizes[d]})" if d in sizes else d for d in sorted({r.dataset_name for r in runs}))
    return (f"Protocol: {', '.join(sorted({protocol_of(r) for r in runs}))} (Recall@k: a query is a hit when a "
            f"positive is in its top k; ties to the lower index); metric version "
            f"{', '.join(sorted({str(r.metric_version) for r in runs}))}; datasets: {datasets}.")


def _page_files(intro: list[str], tables: dict, notes: list[str], figures: list) -> dict[str, bytes]:
    """leaderboard.md and index.html."""
    page = [tables[n] for n in PAGE_TABLES if n in tables]
    md = ["# vlbench leaderboard", ""] + [render.md_escape(x) for x in intro] + [""]
    for t in page:
        md.append(render.to_markdown(paper_view(t)))
    md += ["## Notes", ""] + [f"- {render.md_escape(n)}" for n in notes] + [""]
    if figures:
        md += ["## Plots", ""] + [f"![{render.md_escape(cap)}](plots/{name})" for name, cap, _ in figures] + [""]
    return {"leaderboard.md": "\n".join(md).encode("utf-8"),
            "index.html": render.to_html("vlbench leaderboard", intro, page, [(c, b) for _, c, b in figures],
                                         notes).encode("utf-8")}


def _manifest(allow_mixed: bool, loaded: Loaded, selection: Selection, labels: Labels, notes: list[str],
              tables: dict, figures: list, files: dict, taken: Taken) -> dict:
    return {
        "kind": MANIFEST_KIND,
        "format_version": 1,
        "vlbench_version": __version__,
        "allow_mixed": bool(allow_mixed),
        **({"keep_local_paths": True} if labels.keep_paths else {}),
        "rules": {
            "duplicates": "newest run per (model hash, dataset name, dataset hash, condition) wins; "
                          "ties broken by run id, results hash, file SHA-256, path",
            "rsum_per_perturbation": "t2i (rsum_per_perturbation), total = i2t + t2i (rsum_per_perturbation_total)",
            "mixed": "refused unless allow_mixed: several dataset hashes for one dataset name, or several "
                     "metric versions",
        },
        "runs": [_run_entry(r, labels, selection) for r in selection.used_runs()],
        "superseded": selection.superseded,
        "skipped": loaded.skipped,
        **({"left_out": taken.left_out} if taken.left_out else {}),
        **({"dataset_names": taken.names} if taken.names else {}),
        "mixed": labels.mixed,
        "notes": notes,
        "tables": {t.name: {"title": t.title, "description": t.description, "file": f"{t.name}.csv",
                            "columns": [c.key for c in t.columns], "rows": len(t.rows), "runs": t.runs}
                   for t in tables.values()},
        "plots": [{"file": f"plots/{name}", "caption": cap} for name, cap, _ in figures],
        "files": {k: sha256_bytes(v) for k, v in sorted(files.items())},
    }


def make(paths, *, allow_mixed: bool = False, plots: bool = True,
         warn: Callable[[str], None] | None = None, keep_paths: bool = False, comparisons=(),
         choice: Choice | None = None, analyses=()) -> Built:
    """Everything a build writes, in memory; ``comparisons``: ``vlbench compare`` records to show; ``choice``:
    which runs to take (runset.py: selection, limited and stray runs)."""
    warn = warn or _default_warn
    loaded = load_runs(paths, warn=warn)
    if not loaded.runs:
        why = "; ".join(f"{s['path']}: {s['reason']}" for s in loaded.skipped)
        raise VlbenchError(f"no readable results among the inputs ({why})",
                           "pass run folders written by 'vlbench run'")
    taken = choose(loaded.runs, choice or Choice(), warn)
    taken.left_out += unfinished(paths)
    if not taken.runs:
        raise VlbenchError("every run was left out: " + "; ".join(f"{x['folder']}: {x['reason']}"
                                                                  for x in taken.left_out),
                           "check --select / --run-set, or pass --allow-limited / --keep-stray")
    selection = select(taken.runs)
    labels = make_labels(taken.runs, selection, allow_mixed, keep_paths)
    tables = {t.name: t for t in build_tables(selection, labels) if t.rows or t.name not in OPTIONAL_PAGE_TABLES}
    if comparisons:  # vlbench compare records (--comparison): their rows whose runs this build uses
        tables["paired_comparisons"] = comparison_table(_Ctx(selection, labels), read_comparisons(comparisons, warn),
                                                        warn)
    if analyses:  # vlbench analyze outputs (--analysis): which captions make each model brittle
        tables["caption_brittleness"] = analysis_table(_Ctx(selection, labels), read_analyses(analyses, warn), warn)
    notes = _notes(loaded, selection, labels, warn, taken)
    protocol = protocol_line(selection)
    files = _table_files(tables, protocol)
    files["leaderboard.tex"] = document([tables[n] for n in PAGE_TABLES if n in tables], protocol).encode("utf-8")
    figures: list[tuple[str, str, bytes]] = []
    if plots:
        by_label = {lab: h for h, lab in labels.model.items()}
        drawn = (rsum_change_plots(tables["rsum_changes"], by_label) +
                 clean_vs_fg_plots(tables["clean_retrieval"], by_label) +
                 (corruption_plots(tables["image_corruptions"], by_label) if "image_corruptions" in tables
                  else []) +
                 (sensitivity_map_plots(tables["sensitivity_map"], by_label) if "sensitivity_map" in tables else []))
        for name, cap, png, svg in drawn:  # PNG for the page, SVG (vector) for a paper
            files[f"plots/{name}"] = png
            files[f"plots/{name[:-4]}.svg"] = svg
            figures.append((name, cap, png))
    intro = [f"Built by vlbench {__version__} from {len(selection.used_runs())} run(s); "
             f"{len(selection.superseded)} superseded, {len(loaded.skipped)} skipped" +
             (f", {len(taken.left_out)} left out (named in the notes)" if taken.left_out else "") +
             ". Every value comes from a results.json named in the provenance table."]
    files.update(_page_files(intro, tables, notes, figures))
    manifest = _manifest(allow_mixed, loaded, selection, labels, notes, tables, figures, files, taken)
    files[MANIFEST] = (json.dumps(manifest, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    return Built(files, manifest, tables, loaded, selection, labels, figures, taken)


def build_leaderboard(paths, out, allow_mixed: bool = False, *, plots: bool = True,
                      warn: Callable[[str], None] | None = None, keep_paths: bool = False,
                      comparisons=(), choice: Choice | None = None, analyses=()) -> BuildResult:
    """Build the leaderboard of the runs under ``paths`` into the folder ``out``.

    ``paths``: run folders, results.json files or folders holding run folders (searched recursively).
    Unreadable results files are skipped with a warning (``warn``; default: a LeaderboardWarning) and
    listed in the manifest's ``skipped``. Raises VlbenchError for incomparable runs unless
    ``allow_mixed``. Model specs with local paths are shortened to the folder's name unless ``keep_paths``.
    ``choice``: which runs to take (:class:`vlbench.leaderboards.runset.Choice`; by default limited and stray
    runs are left out, named in the manifest's ``left_out``).
    """
    built = make(paths, allow_mixed=allow_mixed, plots=plots, warn=warn, keep_paths=keep_paths,
                 comparisons=comparisons, choice=choice, analyses=analyses)
    written = write_tree(Path(out), built.files, MANIFEST, MANIFEST_KIND)
    return BuildResult(Path(out), written, built.manifest, built.tables)


def stderr_warn(msg: str) -> None:
    print(f"vlbench: warning: {msg}", file=sys.stderr, flush=True)


def read_build(build_dir) -> tuple[dict, dict[str, bytes]]:
    """The manifest and files of a finished build, checked against the manifest's hashes."""
    d = Path(build_dir)
    mpath = d / MANIFEST
    if not mpath.is_file():
        raise VlbenchError(f"{d} holds no {MANIFEST}", "pass a folder written by 'vlbench leaderboard build'")
    try:
        manifest = json.loads(mpath.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise VlbenchError(f"{mpath} cannot be read: {exc}", "rebuild the leaderboard") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise VlbenchError(f"{mpath} is not a leaderboard build manifest", "rebuild the leaderboard")
    files = {}
    for rel, digest in sorted((manifest.get("files") or {}).items()):
        p = d / rel
        if not safe_rel(rel) or not p.is_file():
            raise VlbenchError(f"{p} is listed in {MANIFEST} but missing", "rebuild the leaderboard")
        data = p.read_bytes()
        if sha256_bytes(data) != digest:
            raise VlbenchError(f"{p} changed after the build (its hash differs from {MANIFEST})",
                               "rebuild the leaderboard instead of editing built files")
        files[rel] = data
    files[MANIFEST] = mpath.read_bytes()
    return manifest, files


#: columns of :func:`load_results`, in order
RESULT_COLUMNS = ["model", "model_spec", "model_hash", "dataset", "dataset_name", "dataset_hash", "condition",
                  "family", "direction", "metric", "k", "value", "kept", "run_id", "created", "metric_version",
                  "vlbench_version", "schema_version", "perturbation_version", "perturbation_seed", "captions_hash",
                  "source"]


def load_results(paths, *, errors: str = "warn"):
    """Every value of the runs under ``paths`` as a long pandas DataFrame (:data:`RESULT_COLUMNS`).

    ``paths``: a run folder, a results.json file, a folder holding run folders (searched
    recursively), or a list of these. ``kept`` is True for the values a leaderboard would show (the
    newest run per model hash, dataset hash and condition); superseded duplicates have False.
    ``errors``: what to do with an unreadable results.json: "warn" (skip it with a warning),
    "ignore" (skip it silently) or "raise". Skipped files are in ``df.attrs["skipped"]``.
    """
    import pandas as pd


    if errors not in ("warn", "ignore", "raise"):
        raise ValueError("errors must be 'warn', 'ignore' or 'raise'")

    def warn(msg):
        if errors == "warn":
            warnings.warn(msg, UserWarning, stacklevel=3)

    loaded = load_runs(paths, warn=warn)
    if errors == "raise" and loaded.skipped:
        s = loaded.skipped[0]
        raise VlbenchError(f"{s['path']}: {s['reason']}", "remove or re-create this run, or use errors='warn'")
    selection = select(loaded.runs)
    labels = make_labels(loaded.runs, selection, allow_mixed=True, keep_paths=True)
    rows = []
    for run in loaded.runs:
        for r in long_rows(run, labels):
            r["kept"] = selection.values.get((run.model_hash, run.dataset_name, run.dataset_hash,
                                              r["condition"])) is run
            rows.append(r)
    rows.sort(key=lambda x: long_order(x) + (not x["kept"], x["run_id"], x["source"]))
    df = pd.DataFrame([[r[c] for c in RESULT_COLUMNS] for r in rows], columns=RESULT_COLUMNS)
    df["k"] = df["k"].astype("Int64")
    df["perturbation_seed"] = pd.array([s if isinstance(s, int) and not isinstance(s, bool) else None
                                        for s in df["perturbation_seed"]], dtype="Int64")
    df["value"] = df["value"].astype("float64")
    df["kept"] = df["kept"].astype(bool)
    df.attrs["skipped"] = loaded.skipped
    return df
