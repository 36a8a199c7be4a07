"""The run folder: the one owner of what a run leaves on disk.

A run (``vlbench run``, a choice task) writes one folder: ``results.json`` (last: its presence marks the
run finished), ``table.md``, the per-query or per-item values, the validity audit, flips and retrieved
lists, the embedding index; later commands add ``explain.html`` and ``rescore/<suite>.json`` beside them.
Every module names these files through the constants here, claims a folder with :func:`claim_out`, makes
it with :func:`prepare_out`, asks :func:`is_finished` / :func:`require_finished`, writes the record with
:func:`write_results` and reads it back with :func:`read_results` (the typed reader is
``vlbench.results.RunRecord.load``, which finds the file here too).

To add a file a run writes: name it here (and in :data:`RUN_FILES` when ``--overwrite`` must remove it,
in :data:`HASHED` when other commands read it), and write it from the step that computes it through
``vlbench.util.io``'s atomic writers.

Run files prove what they claim: results.json's ``files`` holds the sha256 and size of every
file in :data:`HASHED` the run wrote (:func:`file_manifest`, taken just before results.json is written), and
every reader gets such a file only through :func:`run_file`, which refuses, by name, a file that is not in
the manifest, a link, another kind of file, or one whose bytes changed. A run written before the manifest
has no proof, so its files are refused with the fix (re-run: the embedding cache makes it cheap); its
results.json alone is still read (leaderboards, ``--resume`` refuses it too). Names inside run files are
never followed as paths: the ``per_query`` field must be the plain name the writer uses.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import stat as _stat
from pathlib import Path

from .errors import VlbenchError
from .util.io import (
    FolderLock,
    atomic_write_text,
    dumps_strict,
    read_regular_file,
    sha256_file,
    sha256_json,
    write_json,
)
from .util.typeset import slug as _slug

RESULTS = "results.json"  # the run record (vlbench.results); written last: it marks the run finished
TABLE = "table.md"  # the readable table of the record
PER_QUERY = "per_query.csv.gz"  # a retrieval run's per-query values (vlbench.pipeline.report)
PER_ITEM = "per_item.csv.gz"  # a choice task's per-item records (vlbench.tasks.run)
VALIDITY_AUDIT = "validity_audit.jsonl"  # vlbench.perturbations.validity
FLIPS = "flips.csv"  # hit -> miss, miss -> hit against clean (docs/flips.md)
RETRIEVED = "retrieved.npz"  # every condition's top lists and first-positive ranks
EMBEDDING_KEYS = "embedding_keys.npz"  # what `vlbench rescore` reads (vlbench.encoding.index)
EXPLAIN_PAGE = "explain.html"  # `vlbench explain`'s default page
RESCORE_DIR = "rescore"  # `vlbench rescore` writes rescore/<suite>.json
LOCK = FolderLock.NAME  # the claim of a live run (vlbench.util.io.FolderLock)

#: the files a finished run leaves (results.json last); ``--overwrite`` removes these before running again
RUN_FILES = (TABLE, PER_QUERY, PER_ITEM, VALIDITY_AUDIT, FLIPS, RETRIEVED, EMBEDDING_KEYS, RESULTS)
#: the files other commands read (compare, leaderboards, rescore, explain): hashed into results.json ``files``
HASHED = (PER_QUERY, PER_ITEM, VALIDITY_AUDIT, FLIPS, RETRIEVED, EMBEDDING_KEYS)
FILES = "files"  # the results.json field of the manifest: {file name: {"sha256": hex, "bytes": size}}
_HEX64 = re.compile(r"[0-9a-f]{64}")
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
    """A file-name-safe form of ``s`` (at most 60 characters; dots kept at the ends), as run ids use it."""
    return _slug(s, 60, strip="-")


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


#: the results.json field that seals the whole record (:func:`record_hash`)
RECORD_HASH = "record_hash"


def record_hash(doc: dict) -> str:
    """The hash of the whole results document (``record_hash``): every field as written, strict JSON with
    sorted keys, apart from the ``record_hash`` field itself.

    ``results_hash`` covers the metric records only: it is the same for two runs that computed the same
    numbers (comparisons and ``--resume`` rely on that), so it cannot notice an edited model spec, dataset
    name, identity or setting. This hash seals one file: nothing is left out, ids, times and paths included,
    because once written nothing in results.json legitimately changes (a run folder that is moved keeps its
    file as it is; a re-run writes a new file with a new hash)."""
    return sha256_json({k: v for k, v in doc.items() if k != RECORD_HASH})


def seal(doc: dict) -> dict:
    """``doc`` as it is written and read back (strict JSON: NaN as null), with its :func:`record_hash` last."""
    plain = json.loads(dumps_strict({k: v for k, v in doc.items() if k != RECORD_HASH}))
    plain[RECORD_HASH] = record_hash(plain)
    return plain


def write_results(out: Path, results: dict, table: str) -> None:
    """results.json (never replaced: a folder that received a finished run meanwhile is an error) and table.md.
    The document is sealed with its ``record_hash`` (:func:`seal`), also set in ``results``."""
    sealed = seal(results)
    results[RECORD_HASH] = sealed[RECORD_HASH]
    try:
        write_json(results_path(out), sealed, replace=False)
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


def _written_for(path: Path, needle: str) -> bool:
    """Whether the later command's file ``path`` holds ``needle`` (its page title, its JSON's run id)."""
    try:
        return needle in read_regular_file(path, MAX_RESULTS_BYTES).decode("utf-8", "replace")
    except OSError:
        return False


def remove_run_files(out: Path, run_id: str) -> list[str]:
    """Delete a finished run's files (``--overwrite``; the caller proved ``out`` holds run ``run_id``): the files
    of :data:`RUN_FILES` and what later commands wrote for that run (its explain page, its rescore/<suite>.json
    files; the rescore folder too once empty), nothing else. Returns the names removed, results.json last."""
    out = Path(out)
    later = []
    page = out / EXPLAIN_PAGE  # `vlbench explain`'s page of this run: its head names the run
    if page.is_file() and (_written_for(page, f'<meta name="vlbench-run" content="{run_id}">')
                           or _written_for(page, f"<title>vlbench failure browser: {run_id}</title>")):  # older pages
        later.append(EXPLAIN_PAGE)
    rescore = out / RESCORE_DIR
    if rescore.is_dir() and not rescore.is_symlink():
        later += [f"{RESCORE_DIR}/{p.name}" for p in sorted(rescore.glob("*.json"))
                  if p.is_file() and _written_for(p, f'"run_id": "{run_id}"')]
    removed = later + [name for name in RUN_FILES if (out / name).is_file() or (out / name).is_symlink()]
    for name in removed:
        (out / name).unlink(missing_ok=True)
    if later and rescore.is_dir() and not any(rescore.iterdir()):
        rescore.rmdir()
    return removed


# ----------------------------------------------------------------------------------------------
# the manifest: run files that prove what they claim

RERUN = ("re-run the same 'vlbench run' command with a new --out: the embedding cache makes it cheap (nothing is "
         "encoded again)")


def is_sha256(value) -> bool:
    """Whether ``value`` is a sha256 in lower-case hex (what vlbench writes for a model, a file, a dataset)."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def file_manifest(out: str | os.PathLike) -> dict:
    """results.json ``files``: {name: {"sha256", "bytes"}} of every file of :data:`HASHED` in ``out``."""
    found = {}
    for name in HASHED:
        path = Path(out) / name
        if path.is_file():
            found[name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return found


def _manifest(folder: Path, doc: dict) -> dict:
    files = doc.get(FILES)
    if files is None:
        raise VlbenchError(f"run {folder} has no file hashes in its {RESULTS} (written by a vlbench before run "
                           "files were hashed), so its files cannot be proven to be the run's own", RERUN)
    ok = isinstance(files, dict) and all(
        name in HASHED and isinstance(e, dict) and is_sha256(e.get("sha256")) and isinstance(e.get("bytes"), int)
        for name, e in files.items())
    if not ok:
        raise VlbenchError(f"run {folder}: the file hashes ('{FILES}') in its {RESULTS} are malformed (edited?)",
                           RERUN)
    return files


def run_file(folder: str | os.PathLike, doc: dict, name: str) -> Path | None:
    """``folder/name``, proven by the manifest of ``doc`` (the results.json document, or a RunRecord's
    ``other``): None when the run wrote no such file; VlbenchError naming the file when it is not the one the
    run wrote (changed, replaced, added afterwards, a link) or the run has no manifest."""
    folder = Path(folder)
    files = _manifest(folder, doc)
    path = folder / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise VlbenchError(f"{path} cannot be read ({exc.strerror})", RERUN) from None
    entry = files.get(name)
    if entry is None:
        if st is None:
            return None
        raise VlbenchError(f"{path} is not a file run {folder} wrote (its {RESULTS} lists no {name}): "
                           "copied in from elsewhere?", f"remove {path}, or {RERUN}")
    if st is None:
        raise VlbenchError(f"run {folder} has no {name} (its {RESULTS} lists it: removed after the run?)", RERUN)
    if not _stat.S_ISREG(st.st_mode):
        kind = "a link" if _stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise VlbenchError(f"{path} is {kind}, not the file run {folder} wrote", RERUN)
    if st.st_size != entry["bytes"] or sha256_file(path) != entry["sha256"]:
        raise VlbenchError(f"{path} is not the file run {folder} wrote: its sha256 differs from the one in "
                           f"{RESULTS} (the file was changed or replaced after the run)", RERUN)
    return path


def per_query_file(folder: str | os.PathLike, doc: dict) -> Path | None:
    """The run's per-query values, proven (:func:`run_file`). results.json names the file in ``per_query``;
    that name is never followed as a path: anything but the plain name the writer uses is refused."""
    named = doc.get("per_query", PER_QUERY)
    if named != PER_QUERY:
        raise VlbenchError(f"run {folder}: its {RESULTS} names {str(named)[:200]!r} as its per-query file; a run "
                           f"keeps it as {PER_QUERY} inside its own folder (paths are never followed)", RERUN)
    return run_file(folder, doc, PER_QUERY)


def check_run_files(folder: str | os.PathLike, doc: dict) -> None:
    """Every file the manifest of ``doc`` lists is the one the run wrote (and no unlisted hashed file lies
    beside it); VlbenchError naming the first that is not."""
    for name in HASHED:
        run_file(folder, doc, name)
