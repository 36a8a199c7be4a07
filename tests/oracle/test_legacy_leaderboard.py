"""results.json files written before the results/runner redesign (tests/fixtures/legacy_v1, made by the
make_fixtures.py beside them) still load and rebuild the same leaderboard: every table (CSV and
Markdown) byte for byte. The presentation files are allowed to change with the page's design (the
ranking and the family-grouped plots came after the fixtures redrew the plots at paper size,
one per perturbation family, as PNG and SVG): index.html by name, the plots not at all (nor the list of
plots at the end of leaderboard.md), and the build manifest byte for byte except for those files. Tables
added by later features (image corruptions, choice tasks) are written for old runs too, without rows: they
may be the only extra files, and every file the old build wrote must be unchanged, apart from the renaming of
the renaming (tables named by what they show, not by the thesis' numbering): RENAMED maps each old file stem
and title to the new one, and every other byte is compared. Later the Markdown tables became paper tables (no
run ids, hashes or empty flags column: :func:`_paper_md` removes them from the old files, every other byte is
compared), added each table as LaTeX (``NAME.tex``, ``leaderboard.tex``) and the robustness summary, and named the
run folder in the manifest's runs; leaderboard.md, which holds every table, is presentation since. The clean table
shows the nDCG a run prints (bounded, [0, 1]) where it showed the signed DCG_CM: these runs recorded no such nDCG, so
its CSV must be the old one with those two columns renamed and empty (:func:`_ndcg_for_dcg`), every other byte
equal; its Markdown (the description changed with it) is left out of the byte comparison."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from support.data import TESTS

LEGACY = TESTS / "fixtures" / "legacy_v1"
#: old table name -> new (file stems, ids in the manifest), old title -> new
RENAMED = {"table_5_3_rsum": "rsum_per_perturbation", "table_5_3_total": "rsum_per_perturbation_total",
           "table_5_3": "rsum_per_perturbation",
           "table_5_2": "clean_retrieval", "table_5_4": "model_input_similarity"}
RETITLED = {"Table 5.2: clean retrieval performance": "Clean retrieval",
            "Table 5.3: RSUM per perturbation": "RSUM per perturbation",
            "Table 5.4: model-input analysis": "Model-input analysis",
            "text-to-image RSUM (t2i R@1 + R@5 + R@10), as in the chapter": "text-to-image RSUM (t2i R@1 + R@5 + R@10)",
            "Table 5.3 (rsum_per_perturbation) shows": "RSUM per perturbation (rsum_per_perturbation) shows"}


def _renamed(text: str) -> str:
    for old, new in [*RENAMED.items(), *RETITLED.items()]:  # as written, and as Markdown escapes it
        text = text.replace(old, new).replace(old.replace("_", "\\_"), new.replace("_", "\\_"))
    return text


_PROVENANCE = ("run\\_id", "model\\_hash", "dataset\\_hash", "results\\_hash")


def _paper_md(text: str) -> str:
    """An old Markdown table as a paper table: without the provenance columns and an empty flags column."""
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not rows:
        return text
    split = [[c.strip() for c in re.split(r"(?<!\\)\|", lines[i])[1:-1]] for i in rows]
    head = split[0]
    drop = {j for j, h in enumerate(head) if h in _PROVENANCE or h.endswith("\\_hash")}
    if "flags" in head and not any(r[head.index("flags")] for r in split[2:]):
        drop.add(head.index("flags"))
    for n, (i, cells) in enumerate(zip(rows, split)):
        kept = [c for j, c in enumerate(cells) if j not in drop]
        lines[i] = "|" + "|".join(kept) + "|" if n == 1 else "| " + " | ".join(kept) + " |"  # n = 1: the rule
    return "\n".join(lines)


#: the clean table's changed columns: old name -> new name (runs without an nDCG record leave them empty)
NDCG_FOR_DCG = {"i2t_dcg_cm": "i2t_ndcg", "t2i_dcg_cm": "t2i_ndcg"}
CHANGED = "clean_retrieval"


def _ndcg_for_dcg(csv_text: str) -> str:
    lines = csv_text.split("\n")
    head = lines[0].split(",")
    cols = [i for i, h in enumerate(head) if h in NDCG_FOR_DCG]
    out = [",".join(NDCG_FOR_DCG.get(h, h) for h in head)]
    for line in lines[1:]:
        cells = line.split(",")
        out.append(",".join("" if i in cols and len(cells) == len(head) else c for i, c in enumerate(cells)))
    return "\n".join(out)


def _files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}


def test_legacy_results_rebuild_the_same_leaderboard_bytes(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    runs = tmp_path / "runs"
    shutil.copytree(LEGACY / "runs", runs)
    out = tmp_path / "lb"
    build_leaderboard(sorted(p for p in runs.iterdir() if p.is_dir()), out)
    manifest = out / "build_manifest.json"
    manifest.write_text(manifest.read_text().replace(str(tmp_path) + "/", ""))
    plot = lambda f: f.startswith("plots/")  # noqa: E731
    got = {f: p for f, p in _files(out).items() if not plot(f)}
    want = {_renamed(f): p for f, p in _files(LEGACY / "leaderboard").items() if not plot(f)}
    added = sorted(set(got) - set(want))
    assert set(want) <= set(got)
    assert all(f"{name.rsplit('.', 1)[0]}.csv" in got for name in added if name.endswith(".tex")
               and name != "leaderboard.tex")  # every table as LaTeX
    new_tables = {name.rsplit(".", 1)[0] for name in added if not name.endswith(".tex")}
    assert new_tables <= {"image_corruptions", "choice_tasks", "robustness_summary"}, added
    for t in new_tables - {"robustness_summary"}:  # header only: old runs have no such values
        assert got[f"{t}.csv"].read_text().count("\n") == 1 and "(no rows)" in got[f"{t}.md"].read_text()
    assert got["robustness_summary.csv"].read_text().count("\n") == 1 + 4  # a row per model and dataset
    data = [name for name in want if name.endswith((".csv", ".md")) and name != "leaderboard.md"]
    assert len(data) >= 13  # tables (csv + md), values, provenance
    for name in data:
        old = _renamed(want[name].read_text())
        old = _paper_md(old) if name.endswith(".md") and name != "provenance.md" else old
        if name == f"{CHANGED}.md":
            continue
        old = _ndcg_for_dcg(old) if name == f"{CHANGED}.csv" else old
        assert got[name].read_bytes() == old.encode(), name
    import json

    presentation = lambda f: f == "index.html" or plot(f) or f == "leaderboard.md"  # noqa: E731
    g, w = json.loads(manifest.read_text()), json.loads(_renamed(want["build_manifest.json"].read_text()))
    for r in g["runs"]:
        r.pop("folder")  # The run folder as given, beside its path
    for doc in (g, w):
        doc.pop("plots")
        # a retitled table's bytes were compared above (after the renaming), so its hash is left out here
        doc["files"] = {f: h for f, h in doc["files"].items() if not presentation(f) and f not in added
                        and f.rsplit(".", 1)[0] not in RENAMED.values()
                        and not (f.endswith(".md") and f != "provenance.md")  # paper tables: compared above
                        and not f.startswith(f"{CHANGED}.")}  # nDCG for DCG_CM: compared above
        doc["tables"] = {t: v for t, v in doc["tables"].items() if t not in new_tables | {CHANGED}}
    assert g == w
