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
from ..util import options
from ..util.io import dumps_strict
from . import galleries

#: the options that change no number a run reports (where it runs, how fast, where files go, labels), and the
#: dataset's, compared through its content hash: the option table's rows whose ``numbers`` is ``no`` or ``by content``
#: (vlbench/util/options.py); every other RunConfig field is compared by ``resume`` and a sweep
NOT_NUMBERS = options.changing_no_number()
#: the options that change numbers on an accelerator only (the batch sizes): compared when the device is not the CPU
ON_ACCELERATORS = options.on_accelerators()


def device_kind(device) -> str | None:
    """The kind of device a run uses: ``cpu``, ``cuda`` (any ``cuda:N``), ``mps``; None (or "auto") is resolved to
    the best device here without loading a model (vlbench.models.adapter.pick_device); None for a value that names
    no device (a warm run's ``not loaded``)."""
    text = str(device) if device is not None else None
    if text is None or text == "auto":
        from ..models.adapter import pick_device  # lazy: imports torch

        text = pick_device(None)
    kind = text.split(":")[0]
    return kind if kind in ("cpu", "cuda", "mps") else None


def number_options(cfg, device: str | None = None) -> dict:
    """results.json ``settings.options``: every option of ``cfg`` (after the protocol's presets) that changes a
    number, as JSON (the caption perturbations as the list they resolve to). The dataset is compared by its
    content hash and name instead of its path. ``device``: the device the run used (default: ``cfg.device``,
    resolved); it is recorded by kind (``cpu``, ``cuda``, ``mps``: numbers differ between kinds within a tolerance
    only, docs/metrics.md), and on an accelerator the batch sizes count too."""
    kind = device_kind(device) if device not in (None, "not loaded") else device_kind(cfg.device)
    skip = NOT_NUMBERS | (ON_ACCELERATORS if kind == "cpu" else frozenset())
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in skip}
    out["device"] = kind
    if cfg.perturb:
        out["perturb"] = list(perturbations.resolve(cfg.perturb))
    return json.loads(dumps_strict(out, default=str))


def recorded_options(rec) -> dict:
    """The number options a finished run recorded; a run recorded before the device counted gets the device kind
    (and on an accelerator the batch size) of its settings, so it is compared, never taken as equal."""
    stored = dict(rec.settings.get("options") or {})
    if "device" not in stored:
        said = rec.settings.get("device")
        stored["device"] = device_kind(said) if said not in (None, "not loaded") else None
        if stored["device"] != "cpu":
            stored.setdefault("batch_size", rec.settings.get("batch_size"))
    return stored


def option_differences(stored: dict, want: dict) -> list[str]:
    """Each option that changes a number and differs between a finished run's record (``stored``) and this run
    (``want``), as ``name 'recorded', not 'wanted'``: the comparison of ``resume`` and of a sweep's skip rule. A
    run on another kind of device (``cpu`` vs ``cuda``) or in another precision is another run."""
    names = sorted(set(want) | set(stored), key=lambda n: (n != "device", n))  # the device first: it explains the rest
    if stored.get("device") != want.get("device"):  # the batch sizes are compared on one kind of device only
        names = [n for n in names if n not in ON_ACCELERATORS]
    return [f"{name} {stored.get(name)!r}, not {want.get(name)!r}" for name in names
            if stored.get(name) != want.get(name)]


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
    if not isinstance(rec.settings.get("options"), dict):
        return ["no record of its options (written by a vlbench before they were recorded), so they cannot be "
                "proven the same"]
    found = option_differences(recorded_options(rec), number_options(cfg))
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
