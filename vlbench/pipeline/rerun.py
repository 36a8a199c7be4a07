"""Running again into a folder that holds a finished run: ``resume`` and ``overwrite`` (``--resume``,
``--overwrite``), so a notebook cell that writes to a fixed ``out`` can be run twice on purpose.

Without either, such a folder is refused (runs are never overwritten silently). ``resume=True`` returns
the finished run as it is (read back from its results.json, nothing recomputed) when it was made by the
same model on the same dataset and has every caption perturbation asked for; otherwise it says what
differs. ``overwrite=True`` deletes the finished run's files (said on the console) and runs again. An
unfinished run in the folder (stopped before results.json) continues either way: the embedding cache
holds its finished batches.
"""

from __future__ import annotations

from pathlib import Path

from .. import perturbations
from ..datasets.hub import canonical_name, is_hub_spec
from ..errors import OptionError
from ..results import RunRecord
from ..runfolder import RESULTS, RUN_FILES, is_finished, remove_run_files  # noqa: F401  RUN_FILES re-exported


def expected_dataset_name(cfg) -> str:
    """The dataset name a run of ``cfg`` records (``--dataset-name``, else custom:<file name>, else the name)."""
    if cfg.dataset_name:
        return cfg.dataset_name.strip()
    if cfg.dataset.startswith("custom:"):
        return f"custom:{Path(cfg.dataset[len('custom:'):]).name}"
    if is_hub_spec(cfg.dataset):
        return canonical_name(cfg.dataset)
    return cfg.dataset


def _differences(cfg, rec) -> list[str]:
    found = []
    if rec.model.spec != cfg.model:
        found.append(f"model {rec.model.spec!r}, not {cfg.model!r}")
    if rec.dataset.name != expected_dataset_name(cfg):
        found.append(f"dataset {rec.dataset.name!r}, not {expected_dataset_name(cfg)!r}")
    if rec.settings.get("limit") != cfg.limit:  # --limit: a smoke test never stands in for a full run, or back
        found.append(f"limit {rec.settings.get('limit')}, not {cfg.limit}")
    if cfg.perturb:
        missing = [n for n in perturbations.resolve(cfg.perturb) if n not in rec.conditions]
        if missing:
            found.append(f"no condition {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return found


def finished_run(cfg, log):
    """The finished run in ``cfg.out`` to return as it is (``resume``), or None: nothing finished there, or
    ``overwrite`` removed it (``log`` says so), so the run goes ahead. With neither, a finished run there is
    refused here, before any work."""
    if not cfg.out or not is_finished(cfg.out):
        return None
    out = Path(cfg.out)
    if cfg.resume:
        rec = RunRecord.load(out)
        diff = _differences(cfg, rec)
        if diff:
            raise OptionError("resume", f"{out} holds a finished run with {'; '.join(diff)}: {{opt}} returns a "
                              "finished run only for the same model, dataset and perturbations",
                              "pass another out folder, or overwrite to replace that run")
        log(f"{out} already holds a finished run ({rec.run_id}): returned as it is (resume); "
            f"nothing was recomputed")
        return out, rec
    if not cfg.overwrite:
        raise OptionError("out", f"{{opt}} {str(out)!r} already holds a finished run ({RESULTS})",
                          "pass another {opt} folder; to get that run back as it is ask for resume, to replace it "
                          "for overwrite (resume=True / overwrite=True in Python, --resume / --overwrite on the "
                          "command line)")
    if cfg.overwrite:
        removed = remove_run_files(out)
        log(f"{out} held a finished run: replacing it (overwrite); removed {', '.join(removed)}")
    return None
