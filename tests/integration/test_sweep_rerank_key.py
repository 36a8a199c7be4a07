"""A sweep plan's ``rerank`` / ``rerank-k`` keys (the option table's rows): a condition of the grid that makes a
two-stage run, whose results.json (both stages' values, results.json rerank) equals the same run made alone with
vlbench.run, and whose final ranking is an entry of its own on the study's leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

from support.data import write_manifest
from support.tiny_pair_models import save_blip_itm

from vlbench.cli import main
from vlbench.pipeline.runner import run

#: differ between two runs of the same options by construction (ids, clocks, machine, cache use; as in
#: test_sweep_local.py), and the pair stage's own counts of cache use and seconds
NOT_COMPARED = ("run_id", "created", "wall_time_s", "timings", "hardware", "environment", "encoding", "record_hash",
                "files")


def _compared(folder) -> dict:
    doc = json.loads((Path(folder) / "results.json").read_text())
    out = {k: v for k, v in doc.items() if k not in NOT_COMPARED}
    if "rerank" in out:
        out["rerank"] = {k: v for k, v in out["rerank"].items() if k != "pairs"}
    return out


def test_a_plan_with_rerank_keys_gives_the_lone_runs_numbers(tmp_path, tiny_models):
    data = write_manifest(tmp_path / "d", 6)
    blip = save_blip_itm(tmp_path / "blip-itm")
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""
[study]
out = "{tmp_path / 'study'}"

[options]
n-boot = 20
validity = "off"
num-workers = 0
cache-dir = "{tmp_path / 'cache-sweep'}"

[models]
m0 = "clip:{tiny_models('clip', 0)}"
m1 = "clip:{tiny_models('clip', 1)}"

[datasets]
d1 = "custom:{data}"

[conditions]
plain = {{}}
reranked = {{ rerank = "blip-itm:{blip}", rerank-k = 4, perturb = ["char-swap"] }}
""")
    assert main(["sweep", str(plan), "--workers", "1"]) == 0
    tasks = json.loads((tmp_path / "study" / "plan.json").read_text())["runs"]
    reranked = [t for t in tasks if t["kwargs"].get("rerank")]
    assert len(reranked) == 2 and all(t["kwargs"]["rerank_k"] == 4 for t in reranked)
    for task in reranked:
        single = tmp_path / "single" / task["run_id"]
        run(out=str(single), **{**task["kwargs"], "cache_dir": str(tmp_path / "cache-single")})
        got, want = _compared(task["folder"]), _compared(single)
        assert got["rerank"]["results"] and got == want, task["run_id"]
    board = json.loads((tmp_path / "study" / "leaderboard" / "build_manifest.json").read_text())
    stages = sorted(r.get("stages", "dual") for r in board["runs"])
    assert stages.count("dual + blip-itm@K4") == 2  # each model's final ranking, an entry of its own
