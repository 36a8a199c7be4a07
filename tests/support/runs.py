"""Finished small runs for tests that need one (the ``tiny_run`` fixture)."""

from __future__ import annotations

from pathlib import Path

from support.data import write_manifest


def counting_run(root: Path, n: int = 6, *, model: str = "counting:dim=16", perturb: str = "char-swap",
                 **run_kw) -> Path:
    """Run the counting plug-in (registered: the ``counting_plugin`` fixture) on ``n`` excerpt images written
    under ``root/data``; the run goes to ``root/run``. Returns the run folder."""
    from vlbench.pipeline.runner import run

    man = write_manifest(root / "data", n)
    kw = dict(quiet=True, num_workers=0, n_boot=20, no_cache=True)
    kw.update(run_kw)
    return run(model=model, dataset=f"custom:{man}", out=str(root / "run"), perturb=perturb, **kw).out_dir


def values_by_k(res, cond: str, direction: str, metric: str) -> dict:
    """{k: value} of one metric of one condition and direction of a finished run's result (``run(...)``)."""
    return {v.key.k: v.value for v in res.record.values
            if v.condition == cond and v.key.direction == direction and v.key.metric == metric}


def rehash(run_dir) -> None:
    """Record a run folder's files as they are now in its results.json ``files`` (a forger's step, for tests
    that edit a run file and check what stands behind the file hashes)."""
    import json

    from vlbench.runfolder import FILES, file_manifest

    path = Path(run_dir) / "results.json"
    doc = json.loads(path.read_text())
    doc[FILES] = file_manifest(run_dir)
    path.write_text(json.dumps(reseal(doc)))


def reseal(doc: dict) -> dict:
    """A forger's last step after editing a results document: its record_hash recomputed (when it has one)."""
    from vlbench.results import RECORD_HASH, seal

    return seal(doc) if RECORD_HASH in doc else doc
