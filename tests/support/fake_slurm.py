"""A stand-in for Slurm's commands (sbatch, srun, sacct, scancel) on this machine, so the Slurm executor's own
path runs end to end without a cluster: submitit writes the real sbatch script of the job array, ``sbatch``
keeps a copy and runs every array element as Slurm would (the script under bash, with the SLURM_* variables of
an array element, its output and error files named from the script's #SBATCH lines), ``srun`` runs its command,
``sacct`` reports each element's state. An element listed in ``<state>/node_fail`` is not run: its node "fails"
(state NODE_FAIL, a slurmstepd line in its error file), as when a node dies under a job."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_SBATCH = r'''
import os, re, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

state = Path(os.environ["FAKE_SLURM_STATE"])
if sys.argv[1] == "--run-array":
    script, job, n, parallel = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    text = Path(script).read_text()
    flags = dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", text, flags=re.M))
    fail = set((state / "node_fail").read_text().split()) if (state / "node_fail").exists() else set()

    def path(pattern, i):
        return pattern.strip("'").replace("%A", job).replace("%a", str(i)).replace("%j", f"{job}_{i}")

    def element(i):
        out, err = Path(path(flags["output"], i)), Path(path(flags["error"], i))
        out.parent.mkdir(parents=True, exist_ok=True)
        if str(i) in fail:
            err.write_text(f"slurmstepd: error: *** JOB {job}_{i} ON node{i} CANCELLED DUE TO NODE FAILURE ***\n")
            (state / f"{job}_{i}.state").write_text("NODE_FAIL")
            return
        (state / f"{job}_{i}.state").write_text("RUNNING")
        env = dict(os.environ, SLURM_JOB_ID=str(int(job) + 1 + i), SLURM_ARRAY_JOB_ID=job,
                   SLURM_ARRAY_TASK_ID=str(i), SLURM_NTASKS="1", SLURM_JOB_NUM_NODES="1", SLURM_NODEID="0",
                   SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_JOB_NODELIST=f"node{i}")
        with open(out, "a") as fo, open(err, "a") as fe:
            rc = subprocess.call(["bash", script], env=env, stdout=fo, stderr=fe)
        (state / f"{job}_{i}.state").write_text("COMPLETED" if rc == 0 else "FAILED")

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(element, range(n)))
    sys.exit(0)

script = sys.argv[-1]
text = Path(script).read_text()
counter = state / "next_job"
job = int(counter.read_text()) if counter.exists() else 4242
counter.write_text(str(job + 100))
(state / f"submitted-{job}.sh").write_text(text)
m = re.search(r"^#SBATCH --array=0-(\d+)%(\d+)$", text, flags=re.M)
n, parallel = (int(m.group(1)) + 1, int(m.group(2))) if m else (1, 1)
for i in range(n):
    (state / f"{job}_{i}.state").write_text("PENDING")
subprocess.Popen([sys.executable, __file__, "--run-array", script, str(job), str(n), str(parallel)],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=open(state / "sbatch.err", "a"))
print(f"Submitted batch job {job}")
'''

_SRUN = r'''
import os, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):
    args = args[2:] if args[0] in ("--output", "--error") else args[1:]
os.execvp(args[0], args)
'''

_SACCT = r'''
import os, sys
from pathlib import Path

state = Path(os.environ["FAKE_SLURM_STATE"])
print("JobID|State|NodeList")
for f in sorted(state.glob("*_*.state")):
    print(f"{f.stem}|{f.read_text().strip()}|node")
'''

_SCANCEL = r'''
import os, sys
from pathlib import Path

with open(Path(os.environ["FAKE_SLURM_STATE"]) / "scancel.log", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\n")
'''


def install(root: Path, monkeypatch, node_fail: tuple[int, ...] = ()) -> Path:
    """Put sbatch, srun, sacct and scancel stand-ins first on PATH (for this test); returns the state folder
    (``submitted-<job>.sh``: the scripts sbatch received)."""
    bin_dir, state = root / "bin", root / "state"
    bin_dir.mkdir(parents=True)
    state.mkdir(parents=True)
    for name, body in (("sbatch", _SBATCH), ("srun", _SRUN), ("sacct", _SACCT), ("scancel", _SCANCEL)):
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\n{body}")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    if node_fail:
        (state / "node_fail").write_text(" ".join(map(str, node_fail)))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    return state
