"""``check_exporter``: an exporter (``vlbench export --format NAME``; vlbench/plugins/exporter.py) against its
contract.

The exporter writes a run -- ``run=`` a run folder, or by default a small synthetic retrieval run the check writes
(results.json only: clean and one caption perturbation, Recall@1/5/10, RSUM and MedR of both directions) -- into a
fresh folder, twice, with the working directory in a scratch folder: it must return every file it wrote, all
inside ``out``, leave the run folder and everything else as they were, and write the same bytes both times.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .. import registry
from ..plugins.exporter import RUN_KINDS, ExportRequest, run_kind
from ..results import Condition, DatasetInfo, MetricKey, MetricValue, ModelInfo, RunRecord, records_hash
from ..runfolder import RESULTS
from .common import Checker, Report, short


def sample_run(folder: Path) -> Path:
    """Write ``folder/results.json``: a synthetic retrieval run (clean and char-swap, both directions)."""
    values = []
    for j, cond in enumerate(("clean", "char-swap")):
        for d, step in (("i2t", 2.0), ("t2i", 1.0)):
            recalls = [40.0 - 5 * j + step * k for k in (1, 5, 10)]
            values += [MetricValue(cond, MetricKey(d, "recall", k), r) for k, r in zip((1, 5, 10), recalls)]
            values += [MetricValue(cond, MetricKey(d, "rsum"), sum(recalls)), MetricValue(cond, MetricKey(d, "medr"),
                                                                                           3.0 + j)]
    conds = {"clean": Condition("clean", {"perturbation": None}),
             "char-swap": Condition("char-swap", {"perturbation": "char-swap", "family": "typos", "version": "1",
                                                  "seed": 0})}
    spec = "check:sample"
    rec = RunRecord(run_id="check-sample", created="2026-01-01T00:00:00", metric_version="1.0",
                    model=ModelInfo(spec, "a" * 64, {"spec": spec, "name": "check", "hash": "a" * 64}),
                    dataset=DatasetInfo("custom:sample.jsonl", "d" * 64,
                                        {"name": "custom:sample.jsonl", "hash": "d" * 64, "n_images": 12,
                                         "n_captions": 60, "gallery_size": 12}),
                    conditions=conds, values=values, settings={"k": [1, 5, 10]}, vlbench_version="0.1.0")
    rec.other["results_hash"] = records_hash([v.to_json() for v in values])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS).write_text(json.dumps(rec.to_json(), indent=1), encoding="utf-8")
    return folder


def _files(root: Path) -> dict[str, str]:
    """relative path -> content hash of every file under ``root``."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _resolve(exporter) -> tuple[str, object]:
    if isinstance(exporter, str):
        return exporter, registry.exporters.get(exporter)
    return type(exporter).__name__, exporter


def check_exporter(exporter, run=None) -> Report:
    """Check an exporter (a registered name or the object); ``run``: a run folder of a kind it exports (default:
    a synthetic retrieval run). Returns a Report; raises ConformanceError naming the first broken clause."""
    name, obj = _resolve(exporter)
    c = Checker("exporter", name)
    with c.check("protocol"):
        desc = getattr(obj, "description", None)
        c.expect(isinstance(desc, str) and bool(desc.strip()) and "\n" not in desc,
                 "description: one non-empty line", short(desc))
        kinds: tuple = getattr(obj, "run_kinds", None) or ()
        c.expect(isinstance(kinds, tuple) and bool(kinds) and set(kinds) <= set(RUN_KINDS),
                 f"run_kinds: a non-empty tuple among {RUN_KINDS}", short(getattr(obj, "run_kinds", None)))
        c.expect(callable(getattr(obj, "export", None)), "export(request): a method", short(getattr(obj, "export",
                                                                                                       None)))
    with tempfile.TemporaryDirectory(prefix="vlbench-check-exporter-") as tmp:
        scratch = Path(tmp)
        folder = Path(run) if run is not None else sample_run(scratch / "run")
        record = RunRecord.load(folder / RESULTS)
        if run_kind(record) not in kinds:
            c.skip("export", f"the run is a {run_kind(record)} run; pass run= a run it exports ({kinds})")
            return c.report
        before_run = _files(folder)
        (scratch / "cwd").mkdir()
        before = _files(scratch)
        first = _export(c, obj, folder, record, scratch, "out1")
        with c.check("files"):
            got = _files(scratch / "out1")
            listed = {str(Path(p).resolve().relative_to((scratch / "out1").resolve())) for p in first}
            c.expect(set(got) <= listed, "every file written under out among the paths returned",
                     f"not returned: {sorted(set(got) - listed)[:3]}")
        with c.check("writes only under out"):
            c.expect(_files(folder) == before_run, "the run folder as it was", "a file of the run added or changed")
            c.expect(not _files(scratch / "cwd"), "nothing written in the working directory",
                     sorted(_files(scratch / "cwd"))[:3])
            beside = sorted(p for p in set(_files(scratch)) - set(before) if not p.startswith("out1" + os.sep))
            c.expect(not beside, "nothing written beside out", beside[:3])
        _export(c, obj, folder, record, scratch, "out2")
        with c.check("repeatable"):
            c.expect(_files(scratch / "out2") == _files(scratch / "out1"),
                     "the same files with the same bytes from the same run", "files or bytes that differ")
    return c.report


def _export(c: Checker, obj, folder: Path, record: RunRecord, scratch: Path, out_name: str) -> list:
    out = scratch / out_name
    out.mkdir()
    notes: list = []
    request = ExportRequest(folder, record, out, "org/model", note=notes.append)
    with c.check("export"):
        here = os.getcwd()
        os.chdir(scratch / "cwd")  # a relative path the exporter writes lands here, where it is seen
        try:
            written = obj.export(request)
        finally:
            os.chdir(here)
        c.expect(isinstance(written, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in written),
                 "a list of the paths written", short(written))
        c.expect(bool(written), "at least one file written", "an empty list")
        for p in written:
            path = Path(p) if Path(p).is_absolute() else out / p
            c.expect(path.resolve().is_relative_to(out.resolve()), f"every path inside out ({out})", str(p))
            c.expect(path.is_file(), "every path returned an existing file", str(p))
        c.expect(all(isinstance(n, str) and "\n" not in n for n in notes), "notes of one line each", short(notes))
    return [Path(p) if Path(p).is_absolute() else out / p for p in written]
