"""Running again into a folder that holds a finished run: ``resume`` and ``overwrite`` (``--resume``,
``--overwrite``), so a notebook cell that writes to a fixed ``out`` can be run twice on purpose.

Without either, such a folder is refused (runs are never overwritten silently). ``resume=True`` returns
the finished run as it is (read back from its results.json, nothing recomputed) only when it is what this
run would compute: every option that changes a number equal to the one the run recorded
(``settings.options``, :func:`number_options`), the dataset's content equal to the run's (its content hash),
and the run's files the ones it wrote (their hashes, vlbench.runfolder); otherwise it says which option
differs. A run written before its options were recorded cannot be proven equal and is not resumed.
``overwrite=True`` replaces only a folder that holds a vlbench run (its results.json a readable vlbench
record whose results hash holds): it deletes what that run wrote (and the explain page and rescore files
written for it), nothing else, says so on the console, and runs again. An unfinished run in the folder
(stopped before results.json) continues either way: the embedding cache holds its finished batches.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .. import perturbations
from ..datasets.core import limited, load_dataset
from ..datasets.hub import canonical_name, is_hub_spec
from ..errors import OptionError, VlbenchError
from ..results import RunRecord, SchemaTooNew, UnreadableResults
from ..runfolder import RESULTS, RUN_FILES, check_run_files, is_finished, remove_run_files  # noqa: F401  re-exported
from ..util.io import dumps_strict
from . import galleries

#: the options that change no number a run reports (where it runs, how fast, where files go, labels); every
#: other RunConfig field is compared by ``resume`` (a new option is compared until it is listed here)
NOT_NUMBERS = frozenset({"model_name", "device", "batch_size", "text_batch_size", "num_workers", "dataset",
                         "dataset_name", "data_dir", "allow_partial_gallery", "trust_remote_code", "out",
                         "cache_dir", "no_cache", "restart", "quiet", "resume", "overwrite", "report_to",
                         "score_block"})  # scoring in blocks gives the same numbers bit for bit (metrics/sharded.py)


def number_options(cfg) -> dict:
    """results.json ``settings.options``: every option of ``cfg`` (after the protocol's presets) that changes a
    number, as JSON (the caption perturbations as the list they resolve to). The dataset is compared by its
    content hash and name instead of its path."""
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in NOT_NUMBERS}
    if cfg.perturb:
        out["perturb"] = list(perturbations.resolve(cfg.perturb))
    return json.loads(dumps_strict(out, default=str))


def expected_dataset_name(cfg) -> str:
    """The dataset name a run of ``cfg`` records (``--dataset-name``, else custom:<file name>, else the name)."""
    if cfg.dataset_name:
        return cfg.dataset_name.strip()
    if cfg.dataset.startswith("custom:"):
        return f"custom:{Path(cfg.dataset[len('custom:'):]).name}"
    if is_hub_spec(cfg.dataset):
        return canonical_name(cfg.dataset)
    return cfg.dataset


def _dataset_hash(cfg) -> str:
    """The content hash of the dataset ``cfg`` names, as a run of it would record it (nothing downloaded)."""
    try:
        ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=galleries.dataset_gallery(cfg),
                          require_images=False, download=False, extra_positives=cfg.extra_positives)
        return limited(galleries.apply_gallery(ds, cfg), cfg.limit).content_hash()  # --limit: the cut set
    except VlbenchError as exc:
        raise OptionError("resume", f"{{opt}} cannot check that the dataset is the finished run's: {exc.message}",
                          "make the dataset available, or pass another out folder") from None


def _differences(cfg, rec) -> list[str]:
    if rec.model.spec != cfg.model:
        return [f"model {rec.model.spec!r}, not {cfg.model!r}"]
    if rec.dataset.name != expected_dataset_name(cfg):
        return [f"dataset {rec.dataset.name!r}, not {expected_dataset_name(cfg)!r}"]
    stored = rec.settings.get("options")
    if not isinstance(stored, dict):
        return ["no record of its options (written by a vlbench before they were recorded), so they cannot be "
                "proven the same"]
    want = number_options(cfg)
    found = [f"{name} {stored.get(name)!r}, not {want.get(name)!r}" for name in sorted(set(want) | set(stored))
             if stored.get(name) != want.get(name)]
    if found:
        return found
    if _dataset_hash(cfg) != rec.dataset.hash:
        return [f"dataset content {rec.dataset.hash[:12]} (the dataset {cfg.dataset!r} now has other captions, "
                "images or gallery)"]
    return []


def _load(out: Path, what: str):
    """The finished run's record, or an error naming the folder (a truncated results.json, a folder in its
    place, a file that is no vlbench record)."""
    try:
        return RunRecord.load(out)
    except (UnreadableResults, SchemaTooNew) as exc:
        raise OptionError(what, f"{{opt}}: {out / RESULTS} is not a readable vlbench run record "
                                f"({getattr(exc, 'reason', None) or exc})",
                          "pass another out folder; remove or repair that file yourself if it is yours") from None


def finished_run(cfg, log):
    """The finished run in ``cfg.out`` to return as it is (``resume``), or None: nothing finished there, or
    ``overwrite`` removed it (``log`` says so), so the run goes ahead. With neither, a finished run there is
    refused here, before any work."""
    if not cfg.out or not is_finished(cfg.out):
        return None
    out = Path(cfg.out)
    if cfg.resume:
        rec = _load(out, "resume")
        diff = _differences(cfg, rec)
        if diff:
            raise OptionError("resume", f"{out} holds a finished run with {'; '.join(diff[:5])}: {{opt}} returns a "
                              "finished run only when every option that changes a number is the same",
                              "pass another out folder, or overwrite to replace that run")
        try:
            check_run_files(out, rec.other)
        except VlbenchError as exc:
            raise OptionError("resume", f"{{opt}} cannot return the run in {out}: {exc.message}",
                              "pass another out folder, or overwrite to replace that run") from None
        log(f"{out} already holds a finished run ({rec.run_id}): returned as it is (resume); "
            f"nothing was recomputed")
        return out, rec
    if not cfg.overwrite:
        raise OptionError("out", f"{{opt}} {str(out)!r} already holds a finished run ({RESULTS})",
                          "pass another {opt} folder; to get that run back as it is ask for resume, to replace it "
                          "for overwrite (resume=True / overwrite=True in Python, --resume / --overwrite on the "
                          "command line)")
    rec = _load(out, "overwrite")  # proof that a vlbench run is there: a user's own results.json is never deleted
    if "results_hash" not in rec.other:
        raise OptionError("overwrite", f"{{opt}}: {out / RESULTS} has no results_hash, so it cannot be proven a "
                                       "vlbench run; nothing was deleted", "pass another out folder")
    removed = remove_run_files(out, rec.run_id)
    log(f"{out} held a finished run: replacing it (overwrite); removed {', '.join(removed)}")
    return None
