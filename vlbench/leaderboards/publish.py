"""``publish_leaderboard``: lay a built leaderboard out as a folder ready to commit or upload.

Layout (one folder per table, provenance everywhere)::

    README.md            overview, the rules used, provenance of every run (= of every row)
    index.html           the self-contained sortable page
    leaderboard.md       all tables in one Markdown file
    leaderboard.tex      all tables in one LaTeX document (each table also as NAME/NAME.tex)
    provenance.csv       one row per run used
    build_manifest.json  the build's manifest (local paths shortened to run-folder/results.json)
    clean_retrieval/           clean_retrieval.csv, .md, .tex, README.md (columns + provenance of its rows)
    rsum_per_perturbation/  rsum_per_perturbation_total/  model_input_similarity/  rsum_changes/  image_corruptions/ 
    choice_tasks/
    provenance/  values/  (a folder per table the build made)
    plots/*.png, plots/*.svg
    publish_manifest.json  every published file and its SHA-256
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..errors import VlbenchError
from ..util.io import sha256_bytes
from ..util.markdown import md_escape, md_table
from .build import MANIFEST, PAGE_TABLES, make, read_build, write_tree
from .runset import Choice

PUBLISH_MANIFEST = "publish_manifest.json"
PUBLISH_KIND = "vlbench-leaderboard-publish"
TABLE_FOLDERS = PAGE_TABLES + ("values",)


def table_folders(manifest: dict) -> list[str]:
    """Every table the build made, one folder each: the page's order, then values, then any other by name."""
    made = manifest.get("tables") or {}
    return [n for n in TABLE_FOLDERS if n in made] + sorted(set(made) - set(TABLE_FOLDERS))


def _short_path(p: str) -> str:
    parts = Path(p).parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else p


def _public_manifest(manifest: dict) -> dict:
    m = json.loads(json.dumps(manifest))
    for key in ("runs", "superseded", "skipped"):
        for e in m.get(key) or []:
            if "path" in e:
                e["path"] = _short_path(e["path"])
    m["notes"] = [n for n in m.get("notes", []) if not n.startswith("skipped unreadable")] + \
        [f"skipped unreadable results file {e['path']}: {e['reason']}" for e in m.get("skipped") or []]
    return m


_PROV_HEAD = ["run id", "model spec", "model hash", "dataset", "dataset hash", "metric version", "vlbench version",
              "created", "provides"]


def _prov_rows(runs: list[dict]) -> list[str]:
    def esc(cells):
        return [md_escape("" if c is None else c) for c in cells]

    # a model of another kind than a dual encoder: its kind / stages beside the spec ("clip:x [dual + blip-itm@K16]")
    rows = [esc([r["run_id"], r["model_spec"] + (f" [{r['stages']}]" if r.get("stages") else ""), r["model_hash"],
                 r["dataset_label"], r["dataset_hash"],
                 r["metric_version"], r["vlbench_version"], r["created"], " ".join(r["used"])]) for r in runs]
    return md_table(esc(_PROV_HEAD), rows).split("\n")


def _root_readme(m: dict, folders: list[str]) -> str:
    lines = ["# vlbench leaderboard", "",
             f"Built with vlbench {md_escape(m.get('vlbench_version'))} from {len(m['runs'])} run(s). "
             "Open `index.html` for sortable tables and plots (it works offline, from the file system). "
             "Every table is derived from the runs below; nothing was edited by hand (each file's SHA-256 is "
             f"in `{PUBLISH_MANIFEST}`).", "", "## Tables", ""]
    for f in folders:
        t = m["tables"][f]
        lines.append(f"- [{md_escape(f)}/]({f}/README.md): {md_escape(t['title'])} (rows: {t['rows']})")
    if m.get("plots"):
        lines.append(f"- `plots/`: {len(m['plots'])} plot(s), each as PNG and SVG (same name)")
    lines += ["", "## Rules", ""] + [f"- {md_escape(k)}: {md_escape(v)}" for k, v in sorted(m["rules"].items())]
    if m.get("allow_mixed"):
        lines.append("- built with --allow-mixed: rows of incomparable runs are flagged 'mixed'")
    lines += ["", "## Provenance of every row", "",
              "Each row of each table comes from one of these runs (the `run_id` column of the tables, "
              "and of `values/values.csv`, names it).", ""] + _prov_rows(m["runs"])
    if m.get("superseded"):
        lines += ["", "## Superseded runs (not shown)", "",
                  "Older runs of the same model, dataset and condition; the newest run wins.", ""]
        for s in m["superseded"]:
            conds = ", ".join(f"{c['condition']} (by {c['by']}{'' if c['same_values'] else ', values differ'})"
                              for c in s["conditions"])
            lines.append(f"- {md_escape(s['run_id'])}: {md_escape(conds)}")
    if m.get("left_out"):
        lines += ["", "## Runs left out", "", "Runs the build did not take (docs/leaderboards.md, "
                  "\"Which runs a build takes\"):", ""]
        lines += [f"- {md_escape(x['folder'])}: {md_escape(x['reason'])}" for x in m["left_out"]]
    if m.get("skipped"):
        lines += ["", "## Skipped results files", ""]
        lines += [f"- {md_escape(s['path'])}: {md_escape(s['reason'])}" for s in m["skipped"]]
    return "\n".join(lines) + "\n"


def _table_readme(name: str, m: dict) -> str:
    t = m["tables"][name]
    runs = [r for r in m["runs"] if r["run_id"] in set(t["runs"])]
    lines = [f"# {md_escape(t['title'])}", "", md_escape(t["description"]), "",
             f"Files: {md_escape(name)}.csv (fixed column order, 6-decimal numbers, sorted rows)" +
             ("" if name == "values" else f", {md_escape(name)}.md and {md_escape(name)}.tex (for a paper: no run ids "
              "or hashes)") + f". Rows: {t['rows']}.", "",
             "Columns, in order: " + ", ".join(md_escape(c) for c in t["columns"]) + ".", "",
             "## Provenance of the rows", ""] + _prov_rows(runs)
    return "\n".join(lines) + "\n"


def layout(manifest: dict, built: dict[str, bytes]) -> dict[str, bytes]:
    """Published relative path -> content."""
    files: dict[str, bytes] = {}
    for name in table_folders(manifest):
        for ext in ("csv", "md", "tex"):
            if f"{name}.{ext}" in built:
                files[f"{name}/{name}.{ext}"] = built[f"{name}.{ext}"]
        files[f"{name}/README.md"] = _table_readme(name, manifest).encode("utf-8")
    for rel, data in built.items():
        if rel.startswith("plots/") or rel in ("index.html", "leaderboard.md", "leaderboard.tex", "provenance.csv"):
            files[rel] = data
    public = _public_manifest(manifest)
    files[MANIFEST] = (json.dumps(public, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    folders = table_folders(manifest)
    files["README.md"] = _root_readme(public, folders).encode("utf-8")
    files[PUBLISH_MANIFEST] = (json.dumps({"kind": PUBLISH_KIND, "vlbench_version": __version__,
                                           "files": {k: sha256_bytes(v) for k, v in sorted(files.items())}},
                                          indent=1) + "\n").encode("utf-8")
    return files


def refuse_links(out) -> None:
    """Refuse an ``--out`` folder holding a symbolic link anywhere below it (to a file or a folder).

    Publishing rewrites and removes files under ``out``; through a link it would write or delete files
    outside ``out``. Links are not followed, not replaced and not removed: the user decides. ``out``
    itself may be a link (the user named it)."""
    out = Path(out)
    if not out.is_dir():
        return
    for top, dirs, files in os.walk(out, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(top) / name
            if path.is_symlink():
                raise VlbenchError(
                    f"--out {out} holds a symbolic link, {path} -> {os.readlink(path)}; publishing would write "
                    "or delete files outside --out through it",
                    f"remove the link (rm {path}) or publish into a new folder")


def publish_leaderboard(out, *, build_dir=None, paths=None, allow_mixed: bool = False, plots: bool = True,
                        warn: Callable[[str], None] | None = None, keep_paths: bool = False,
                        choice: Choice | None = None) -> list[str]:
    """Publish from a finished build (``build_dir``) or straight from results (``paths``; ``choice``: which runs,
    as for a build). Model specs with local paths (``clip:/home/u/my-clip``) are published as the folder's name
    unless ``keep_paths``."""
    if (build_dir is None) == (not paths):
        raise VlbenchError("publish needs either a built leaderboard (--from DIR) or RESULTS, not both",
                           "vlbench leaderboard publish --from BUILD --out DIR, or publish RESULTS... --out DIR")
    refuse_links(out)  # before the (slow) build, and again right before writing
    if build_dir is not None:
        manifest, built = read_build(build_dir)
        if manifest.get("keep_local_paths") and not keep_paths:
            raise VlbenchError(f"the build in {build_dir} keeps local paths in model specs (--keep-local-paths); "
                               "publishing it would write them",
                               "rebuild without --keep-local-paths, or pass --keep-local-paths to publish as well")
    else:
        b = make(paths, allow_mixed=allow_mixed, plots=plots, warn=warn, keep_paths=keep_paths, choice=choice)
        manifest, built = b.manifest, b.files
    refuse_links(out)
    return write_tree(Path(out), layout(manifest, built), PUBLISH_MANIFEST, PUBLISH_KIND)
