"""``vlbench export RUN --format NAME --out DIR [--metrics ...] [--push-to-hub REPO]`` (docs/export.md).

The formats are the registered exporters (:data:`vlbench.registry.exporters`: the built-in ``mteb`` and
``model-index``, and a third party's through the entry-point group ``vlbench.exporters``); each is called the
same way, through :class:`~vlbench.plugins.exporter.Exporter`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import registry
from ..errors import OptionError, VlbenchError
from ..plugins.exporter import ExportRequest, run_kind
from ..results import RunRecord, SchemaTooNew, UnreadableResults

#: the format --push-to-hub pushes
PUSHED = "model-index"


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ("Write a finished run in the formats where the field reads results: MTEB result files (one JSON "
                     "per task, read by mteb's own loader; perturbed conditions as MTEB experiments), a Hugging "
                     "Face model card's model-index (plus the Hub's .eval_results file), or an installed plug-in's "
                     "format ('vlbench ls exporters'). --push-to-hub opens a pull request with the model-index on a "
                     "model repository. See docs/export.md.")
    p.add_argument("run", metavar="RUN", help="a run folder written by 'vlbench run'")
    p.add_argument("--format", required=True, metavar="FORMAT",
                   help="a registered exporter: mteb, model-index, or a plug-in's ('vlbench ls exporters')")
    p.add_argument("--out", default=None, metavar="DIR", help="write the files into DIR (needed unless --push-to-hub)")
    p.add_argument("--model-name", default=None, metavar="NAME",
                   help="the model's name in the files (an MTEB model name / the card's model-index name, e.g. "
                        "ORG/NAME); default: the --push-to-hub repository, else the run's --model-name, else its "
                        "model spec")
    p.add_argument("--metrics", default=None, metavar="LIST",
                   help="--format model-index: the metric records in the card, comma-separated (recall@5: both "
                        "directions; t2i_recall@5: one; recall: every k; all: every record); default: MTEB's main "
                        "score (binary nDCG@10, when the run has it) and recall@1,recall@5,recall@10")
    p.add_argument("--overwrite", action="store_true",
                   help="replace files in --out that vlbench did not write (a hand-written README.md)")
    p.add_argument("--push-to-hub", default=None, metavar="REPO",
                   help="--format model-index: open a pull request on the Hub model repository REPO with the results "
                        "(never a direct commit; HF_TOKEN and HF_ENDPOINT are honoured)")


def _metrics(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(x.strip() for x in value.split(",") if x.strip())
    if not names:
        raise OptionError("metrics", "{opt} names no metric", "give metric names, or all",
                          example="recall@1,recall@5,recall@10", flag="--metrics")
    return names


def main(a: argparse.Namespace) -> int:
    from ..runread import run_folder_of  # lazy: vlbench --help imports this module; keep it light

    exporter = registry.exporters.get(a.format)  # an unknown name: "did you mean", the registered ones
    if a.push_to_hub and a.format != PUSHED:
        raise OptionError("push_to_hub", "{opt} pushes a model card's model-index, not MTEB files",
                          "add --format model-index (MTEB results go to the MTEB results repository by its own "
                          "pull requests)", flag="--push-to-hub")
    if not a.out and not a.push_to_hub:
        raise OptionError("out", "vlbench export needs {opt} (or --push-to-hub REPO)", "give a folder",
                          example="exported", flag="--out")
    if a.out and os.path.exists(a.out) and not os.path.isdir(a.out):
        raise OptionError("out", f"{{opt}} {a.out} exists and is not a folder", "give a new or existing folder",
                          flag="--out")
    metrics = _metrics(a.metrics)
    folder = run_folder_of(a.run)
    try:
        record = RunRecord.load(folder)
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"run {folder} cannot be read: {exc}", "pass a run folder written by 'vlbench run'") \
            from None
    kind = run_kind(record)
    kinds = tuple(getattr(exporter, "run_kinds", ()) or ())
    if kind not in kinds:
        what = "a choice-task run (vlbench run --task): its accuracies are no image-text retrieval results" \
            if kind == "task" else f"a {kind} run"
        raise VlbenchError(f"run {folder} is {what}; the {a.format} format exports {' and '.join(kinds) or 'no'} "
                           "runs", "export a retrieval run (vlbench run without --task); a choice task's scores "
                           "are in its results.json and on 'vlbench leaderboard'")
    # the model-index names the model the card belongs to: the repository pushed to, unless named
    name = a.model_name or a.push_to_hub or record.model.label
    written: list = []
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        request = ExportRequest(Path(folder), record, Path(a.out), name, metrics, a.overwrite, note=print)
        written = list(exporter.export(request))
    for path in written:
        print(f"wrote {path}")
    if a.push_to_hub:
        from .hub import push  # lazy: as above (it imports huggingface_hub)

        print(f"opened a pull request on {a.push_to_hub}: {push(record, a.push_to_hub, name, metrics)}")
    return 0
