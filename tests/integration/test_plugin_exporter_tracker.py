"""A third party's exporter and tracker, pip-installed for real with the example plug-in package
(tests/plugin_pkg: entry points in the groups vlbench.exporters and vlbench.trackers): listed by 'vlbench ls',
used by 'vlbench run --report-to' and 'vlbench export --format' with no change to vlbench, and their output read
back and compared with the run's results.json."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest


def _vlbench(env, cwd, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "vlbench", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def _records(run) -> dict:
    doc = json.loads((run / "results.json").read_text())
    return {(r["condition"], r["direction"], r["metric"], r["k"]): r["value"] for r in doc["results"]
            if r["value"] is not None}


@pytest.mark.slow  # pip-installs the plug-in package, runs subprocesses
def test_third_party_exporter_and_tracker_work_end_to_end(plugin_env, tmp_path, manifest):
    tracked = tmp_path / "tracked.jsonl"
    env = dict(plugin_env, COUNTING_TRACKER_FILE=str(tracked))
    for kind, name in (("exporters", "counting-csv"), ("trackers", "counting-jsonl")):
        ls = _vlbench(env, tmp_path, "ls", kind, "--check", timeout=120)
        assert ls.returncode == 0, ls.stderr
        line = next(x for x in ls.stdout.splitlines() if name in x)
        assert "vlbench-counting-plugin 0.3.0" in line and "BROKEN" not in line
        assert "(example plug-in)" in line  # --check imports it and shows its own description

    run = tmp_path / "run"
    r = _vlbench(env, tmp_path, "run", "--model", "counting:dim=16", "--dataset", f"custom:{manifest}", "--out",
                 str(run), "--quiet", "--num-workers", "0", "--perturb", "char-swap", "--report-to", "counting-jsonl")
    assert r.returncode == 0, r.stderr
    assert "reported to counting-jsonl in" in r.stderr and str(tracked) in r.stderr  # the one line: where it went
    [sent] = [json.loads(x) for x in tracked.read_text().splitlines()]
    doc = json.loads((run / "results.json").read_text())
    assert sent["name"] == doc["run_id"] and sent["project"] == "vlbench" and sent["config"]["model"] == \
        doc["model"]["spec"]
    want = {f"{c}/{d}/{m}" + ("" if k is None else f"@{k}"): v for (c, d, m, k), v in _records(run).items()}
    assert {n: v for n, v in sent["metrics"].items() if n in want} == want

    out = tmp_path / "exported"
    e = _vlbench(env, tmp_path, "export", str(run), "--format", "counting-csv", "--out", str(out), "--model-name",
                 "org/counting", timeout=120)
    assert e.returncode == 0, e.stderr
    [path] = out.glob("*.csv")
    assert f"wrote {path}" in e.stdout and "metric records" in e.stdout  # its note, printed by vlbench
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    got = {(r["condition"], r["direction"], r["metric"], int(r["k"]) if r["k"] else None): float(r["value"])
           for r in rows}
    assert got == _records(run) and {r["model"] for r in rows} == {"org/counting"}

    # the plug-ins pass vlbench's own conformance checks, loaded from the installed package
    check = subprocess.run([sys.executable, "-c", "from vlbench.testing import check_exporter, check_tracker; "
                            "print(check_exporter('counting-csv')); print(check_tracker('counting-jsonl'))"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "exporter 'counting-csv': 5 checks passed" in check.stdout
    assert "tracker 'counting-jsonl': 5 checks passed" in check.stdout
