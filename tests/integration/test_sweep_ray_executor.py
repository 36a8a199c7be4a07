"""The Ray executor on a real multi-node Ray cluster started on this machine (ray.cluster_utils.Cluster: a head
that runs no task and two worker nodes, each its own raylet process with one CPU): a sweep of 3 models x 2
datasets x 2 conditions gives the numbers of the same runs made one by one with vlbench.run, even with one
worker node killed while it runs a run (Ray starts that run again on the other node, and the run resumes); and
the finished sweep run again does no forward pass and takes seconds."""

from __future__ import annotations

import importlib.util
import io
import re
import threading
import time
from pathlib import Path

import pytest
from support.data import write_manifest
from support.executor_runs import make_tasks, numbers, one_by_one
from support.tools import needs_package

pytestmark = needs_package("ray", "a real Ray cluster on this machine")

HEADER = re.compile(r"^== (\S+): attempt \d+ \(pid (\d+),", re.M)


def _raylet_pid(node) -> int:
    from ray._private import ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def _parent(pid: int) -> int | None:
    try:  # /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after its ")"
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _node_of(pid: int, raylets: dict[int, object]):
    """The cluster node whose raylet started the worker process ``pid`` (or None)."""
    seen = 0
    parent = _parent(pid)
    while parent and parent > 1 and seen < 16:
        if parent in raylets:
            return raylets[parent]
        parent, seen = _parent(parent), seen + 1
    return None


def _kill_a_node_mid_run(cluster, victim, tasks, killed: dict, stop: threading.Event):
    """Watch the runs' logs; when a run starts in a worker process of ``victim``, kill that node (raylet and
    workers, no grace) and record which run it interrupted."""
    raylets = {_raylet_pid(victim): victim}
    while not stop.is_set() and not killed:
        for t in tasks:
            log = Path(t.log)
            if not log.is_file() or (Path(t.folder) / "results.json").exists():
                continue
            for run_id, pid in HEADER.findall(log.read_text(errors="replace")):
                if _node_of(int(pid), raylets) is victim:
                    cluster.remove_node(victim, allow_graceful=False)
                    killed.update(run_id=run_id, pid=int(pid), at=time.monotonic())
                    return
        time.sleep(0.02)


@pytest.fixture(scope="module")
def ray_sweep(tiny_models, tmp_path_factory):
    from ray.cluster_utils import Cluster

    from vlbench.sweep.executors.ray import execute

    root = tmp_path_factory.mktemp("ray-sweep")
    models = {"clip-a": f"clip:{tiny_models('clip', seed=0)}", "clip-b": f"clip:{tiny_models('clip', seed=1)}",
              "groupvit": f"groupvit:{tiny_models('groupvit')}"}
    manifests = {"six": write_manifest(root / "data-six", 6), "eight": write_manifest(root / "data-eight", 8)}
    tasks = make_tasks(root / "study", models, manifests, cache=root / "cache")
    node_args = dict(object_store_memory=80 * 1024**2, include_dashboard=False)
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, **node_args))
    try:
        workers = [cluster.add_node(num_cpus=1, **node_args) for _ in range(2)]
        cluster.wait_for_nodes()
        killed: dict = {}
        stop = threading.Event()
        killer = threading.Thread(target=_kill_a_node_mid_run, args=(cluster, workers[0], tasks, killed, stop),
                                  daemon=True)
        killer.start()
        events: list = []
        start = time.monotonic()
        outcomes = execute(tasks, {"address": cluster.address, "max_retries": 2},
                           lambda kind, run_id, info: events.append((kind, run_id)))
        seconds = time.monotonic() - start
        stop.set()
        killer.join(5)
        files = {t.run_id: (Path(t.folder) / "results.json").stat().st_mtime_ns for t in tasks}
        again_start = time.monotonic()
        again = execute(tasks, {"address": cluster.address}, None)
        again_seconds = time.monotonic() - again_start
        yield dict(root=root, tasks=tasks, outcomes=outcomes, events=events, killed=killed, seconds=seconds,
                   files=files, again=again, again_seconds=again_seconds, cluster=cluster, models=models,
                   manifests=manifests)
    finally:
        cluster.shutdown()


def test_ray_sweep_on_a_three_node_cluster_equals_runs_made_one_by_one(ray_sweep, tmp_path):
    tasks, outcomes = ray_sweep["tasks"], ray_sweep["outcomes"]
    assert len(tasks) == 12
    assert [o.run_id for o in outcomes] == [t.run_id for t in tasks]
    assert all(o.status == "done" for o in outcomes), [o.error for o in outcomes if o.status != "done"]
    assert sorted(r for kind, r in ray_sweep["events"] if kind == "done") == sorted(t.run_id for t in tasks)
    alone = one_by_one(tasks, tmp_path / "alone")
    for t in tasks:
        assert numbers(t.folder) == alone[t.run_id], t.run_id


def test_ray_sweep_survives_a_worker_node_killed_mid_run(ray_sweep):
    killed = ray_sweep["killed"]
    assert killed, "no run started on the worker node to be killed"
    run = next(t for t in ray_sweep["tasks"] if t.run_id == killed["run_id"])
    pids = {int(pid) for _, pid in HEADER.findall(Path(run.log).read_text())}
    assert killed["pid"] in pids and len(pids) >= 2  # started again, in another worker process
    outcome = next(o for o in ray_sweep["outcomes"] if o.run_id == run.run_id)
    assert outcome.status == "done" and (Path(run.folder) / "results.json").is_file()


def test_ray_sweep_run_again_does_no_forward_pass_and_takes_seconds(ray_sweep):
    again = ray_sweep["again"]
    assert all(o.status == "done" for o in again)
    for t in ray_sweep["tasks"]:  # every run resumed as it was: nothing written again
        assert (Path(t.folder) / "results.json").stat().st_mtime_ns == ray_sweep["files"][t.run_id]
    assert ray_sweep["again_seconds"] < 60, ray_sweep["again_seconds"]
    print(f"ray sweep: {ray_sweep['seconds']:.1f} s with a node killed; again: {ray_sweep['again_seconds']:.1f} s")


@pytest.mark.skipif(importlib.util.find_spec("vlbench.sweep.study") is None,
                    reason="the sweep command (vlbench.sweep.study) is not in this checkout")
def test_ray_sweep_command_gives_the_numbers_of_the_local_executor(ray_sweep, tmp_path):
    """The same plan through `vlbench sweep` (its Python form) with --executor ray on the cluster and with
    --executor local: every run of the grid has the same numbers."""
    from vlbench.sweep.study import sweep

    models = {k: v for k, v in ray_sweep["models"].items() if k != "groupvit"}
    lines = ["[options]", "n-boot = 20", "num-workers = 0", 'validity = "off"', "[models]",
             *(f'{k} = "{v}"' for k, v in models.items()), "[datasets]",
             f'six = "custom:{ray_sweep["manifests"]["six"]}"', "[conditions]", "clean = {}",
             'swap = { perturb = ["char-swap"] }']
    plan = tmp_path / "plan.toml"
    plan.write_text("\n".join(lines) + "\n")
    on_ray = sweep(plan, tmp_path / "ray", executor="ray", leaderboard=False, stream=io.StringIO(),
                   executor_options={"address": ray_sweep["cluster"].address}, cache_dir=str(tmp_path / "cache"))
    local = sweep(plan, tmp_path / "local", executor="local", workers=1, leaderboard=False, stream=io.StringIO(),
                  cache_dir=str(tmp_path / "cache-local"))
    assert on_ray.ok and local.ok and len(on_ray.outcomes) == 4
    assert list(on_ray.outcomes) == list(local.outcomes)  # the same deterministic run ids
    for run_id in on_ray.outcomes:
        assert numbers(tmp_path / "ray" / "runs" / run_id) == numbers(tmp_path / "local" / "runs" / run_id)
