"""The run folder: the one owner of what a run leaves on disk (issue #28).

A run (``vlbench run``, a choice task) writes one folder: ``results.json`` (last: its presence marks the
run finished), ``table.md``, the per-query or per-item values, the validity audit, flips and retrieved
lists, the embedding index; later commands add ``explain.html`` and ``rescore/<suite>.json`` beside them.
Every module names these files through the constants here, claims a folder with :func:`claim_out`, makes
it with :func:`prepare_out`, asks :func:`is_finished` / :func:`require_finished`, writes the record with
:func:`write_results` and reads it back with :func:`read_results` (the typed reader is
``vlbench.results.RunRecord.load``, which finds the file here too).

To add a file a run writes: name it here (and in :data:`RUN_FILES` when ``--overwrite`` must remove it),
and write it from the step that computes it through ``vlbench.util.io``'s atomic writers.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
from pathlib import Path

from .errors import VlbenchError
from .util.io import FolderLock, atomic_write_text, read_regular_file, write_json

RESULTS = "results.json"  # the run record (vlbench.results); written last: it marks the run finished
TABLE = "table.md"  # the readable table of the record
PER_QUERY = "per_query.csv.gz"  # a retrieval run's per-query values (vlbench.pipeline.report)
PER_ITEM = "per_item.csv.gz"  # a choice task's per-item records (vlbench.tasks.run)
VALIDITY_AUDIT = "validity_audit.jsonl"  # vlbench.perturbations.validity
FLIPS = "flips.csv"  # hit -> miss, miss -> hit against clean (docs/flips.md)
RETRIEVED = "retrieved.npz"  # every condition's top lists and first-positive ranks
EMBEDDING_KEYS = "embedding_keys.npz"  # what `vlbench rescore` reads (vlbench.pipeline.embedding_index)
EXPLAIN_PAGE = "explain.html"  # `vlbench explain`'s default page
RESCORE_DIR = "rescore"  # `vlbench rescore` writes rescore/<suite>.json
LOCK = FolderLock.NAME  # the claim of a live run (vlbench.util.io.FolderLock)

#: the files a finished run leaves (results.json last); ``--overwrite`` removes these before running again
RUN_FILES = (TABLE, PER_QUERY, PER_ITEM, VALIDITY_AUDIT, FLIPS, RETRIEVED, EMBEDDING_KEYS, RESULTS)
#: results.json files larger than this are refused unread (a results.json of a full sweep is a few MB)
MAX_RESULTS_BYTES = 64 * 2**20


def results_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / RESULTS


def is_finished(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a finished run (its results.json exists)."""
    return results_path(folder).exists()


def refuse_finished(folder: str | os.PathLike) -> None:
    """A folder that already holds a finished run is never written to again."""
    if is_finished(folder):
        raise VlbenchError(f"{folder} already holds a finished run ({RESULTS})",
                           "runs are never overwritten: pass another --out folder")


def require_finished(folder: str | os.PathLike) -> Path:
    """``folder``'s results.json, or VlbenchError when the folder holds no finished run."""
    path = results_path(folder)
    if not path.is_file():
        raise VlbenchError(f"{folder} is not a finished run folder (no {RESULTS})",
                           "pass the folder that 'vlbench run --out' wrote")
    return path


def slug(s: str) -> str:
    """A file-name-safe form of ``s`` (at most 60 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "x"


def new_run_id(model_spec: str, dataset_name: str, model_hash: str, dataset_hash: str,
               task: str | None = None) -> str:
    """A new run's id: UTC time, model, task (if any), dataset, the two hashes' heads, a random tail."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    middle = f"{task}-" if task else ""
    return (f"{stamp}-{slug(model_spec.split(':')[0])}-{middle}{slug(dataset_name)}-{model_hash[:6]}"
            f"{dataset_hash[:6]}-{secrets.token_hex(3)}")


def prepare_out(out: str | None, run_id: str) -> Path:
    """The run folder (``--out``, else runs/<run id>), made; a finished run's folder is refused."""
    folder = Path(out) if out else Path("runs") / run_id
    refuse_finished(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def claim_out(out) -> FolderLock | None:
    """Claim --out for this run (rank 0 of a torchrun launch): a second live run with the same --out is
    refused at once, and a folder holding a finished run is never reused."""
    if not out or int(os.environ.get("RANK", "0")) != 0:
        return None
    try:
        lock = FolderLock(out).acquire()
    except BlockingIOError as exc:
        raise VlbenchError(f"another vlbench run ({exc}) is writing to {out}",
                           "wait for it to finish, or pass another --out folder") from None
    if is_finished(out):
        lock.release()
        refuse_finished(out)
    return lock


def write_results(out: Path, results: dict, table: str) -> None:
    """results.json (never replaced: a folder that received a finished run meanwhile is an error) and table.md."""
    try:
        write_json(results_path(out), results, replace=False)
    except FileExistsError:
        raise VlbenchError(f"{out} received a finished run from another process while this one ran",
                           "runs are never overwritten: pass another --out folder") from None
    atomic_write_text(Path(out) / TABLE, table + "\n")


def read_results(folder: str | os.PathLike) -> dict:
    """The results.json document of a finished run folder, as plain JSON (bounded: a regular file of at
    most MAX_RESULTS_BYTES). VlbenchError names the fix when the folder holds none or it cannot be read."""
    path = require_finished(folder)
    try:  # a regular file of a bounded size, as every results reader (a FIFO would block)
        return json.loads(read_regular_file(path, MAX_RESULTS_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise VlbenchError(f"{path} cannot be read ({type(exc).__name__}: {exc})",
                           "pass an intact run folder (re-run 'vlbench run' with a new --out)") from None


def remove_run_files(out: Path) -> list[str]:
    """Delete a finished run's files (``--overwrite``); the names removed, in :data:`RUN_FILES` order."""
    removed = [name for name in RUN_FILES if (Path(out) / name).is_file()]
    for name in removed:
        (Path(out) / name).unlink(missing_ok=True)
    return removed
