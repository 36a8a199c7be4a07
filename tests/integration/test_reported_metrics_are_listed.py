"""Issue #20: everything vlbench reports is a registered metric, listed by ``vlbench ls metrics``.

Runs last (file order): it reads every results.json that the tests before it wrote under this session's
temporary folder, keeps those a vlbench run wrote (this vlbench version and schema, an ``environment``
section), and checks each reported metric name against ``vlbench ls metrics``. Metric plug-ins that a run
recorded as used (``environment.plugins``) and the one built-in a test adds for the duration of that test
are the only names allowed to be missing. Alone (no earlier tests) it makes runs of its own first.
"""

from __future__ import annotations

import json

from vlbench import __version__
from vlbench.cli import main
from vlbench.results import SCHEMA_VERSION
from vlbench.util.io import read_regular_file

#: built-ins that a test registers for itself and removes (tests/test_metric_one_record.py)
ADDED_BY_A_TEST = {"inv_rank"}


def _listed(capsys) -> set[str]:
    assert main(["ls", "metrics"]) == 0
    lines = capsys.readouterr().out.split("metrics (name, unit, range, better, directions):")[1].splitlines()
    return {line.split()[0].split("@")[0] for line in lines if line.startswith("  ")}


def _run_results(root) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(root.rglob("results.json")):
        try:  # regular files of a sane size only: the robustness tests leave FIFOs, links, corrupt files and
            # deeply nested JSON (the leaderboard's bounded-parsing test)
            doc = json.loads(read_regular_file(path, 64 * 2**20).decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if (isinstance(doc, dict) and doc.get("vlbench_version") == __version__
                and str(doc.get("schema_version")) == str(SCHEMA_VERSION) and "environment" in doc
                and isinstance(doc.get("results"), list)):
            out.append((str(path), doc))
    return out


def test_every_metric_in_every_results_json_of_the_suite_is_listed(tmp_path_factory, counting_plugin, capsys):
    root = tmp_path_factory.getbasetemp()
    found = _run_results(root)
    if len(found) < 5:  # run alone: make the kinds of runs the suite makes
        from support.data import excerpt_rows, write_images

        from vlbench import run

        data = tmp_path_factory.mktemp("own-runs")
        names = write_images(data / "images", 6)
        (data / "m.jsonl").write_text("".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n"
                                              for n, r in zip(names, excerpt_rows(6))))
        kw = dict(model="counting", dataset=f"custom:{data / 'm.jsonl'}", quiet=True, num_workers=0, n_boot=10)
        run(out=str(data / "a"), perturb="nearby-char", graded=("rouge-l",), **kw)
        run(out=str(data / "b"), i2t_recall="fraction", perturb="nearby-char", perturb_side="t2i", **kw)
        assert main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{data / 'm.jsonl'}",
                     "--out", str(data / "task"), "--quiet", "--num-workers", "0"]) == 0
        found = _run_results(root)
    listed = _listed(capsys)
    missing = {}
    for path, doc in found:
        plugins = {k.split("/", 1)[1] for k in (doc["environment"].get("plugins") or {}) if k.startswith("metrics/")}
        for name in {r["metric"] for r in doc["results"]} - listed - plugins - ADDED_BY_A_TEST:
            missing.setdefault(name, path)
    assert len(found) >= 3
    assert missing == {}, f"reported but not listed by `vlbench ls metrics`: {missing}"
