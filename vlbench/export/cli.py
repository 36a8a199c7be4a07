"""``vlbench export RUN --format mteb|model-index --out DIR [--push-to-hub REPO]`` (docs/export.md)."""

from __future__ import annotations

import argparse
import os

from ..errors import OptionError, VlbenchError
from ..results import RunRecord, SchemaTooNew, UnreadableResults

FORMATS = ("mteb", "model-index")


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ("Write a finished run in the formats where the field reads results: MTEB result files (one JSON "
                     "per task, read by mteb's own loader; perturbed conditions as MTEB experiments) or a Hugging "
                     "Face model card's model-index (plus the Hub's .eval_results file). --push-to-hub opens a pull "
                     "request with the model-index on a model repository. See docs/export.md.")
    p.add_argument("run", metavar="RUN", help="a run folder written by 'vlbench run'")
    p.add_argument("--format", required=True, choices=FORMATS, help="mteb or model-index")
    p.add_argument("--out", default=None, metavar="DIR", help="write the files into DIR (needed unless --push-to-hub)")
    p.add_argument("--model-name", default=None, metavar="NAME",
                   help="the model's name in the files (an MTEB model name / the card's model-index name, e.g. "
                        "ORG/NAME); default: the --push-to-hub repository, else the run's --model-name, else its "
                        "model spec")
    p.add_argument("--push-to-hub", default=None, metavar="REPO",
                   help="--format model-index: open a pull request on the Hub model repository REPO with the results "
                        "(never a direct commit; HF_TOKEN and HF_ENDPOINT are honoured)")


def main(a: argparse.Namespace) -> int:
    from ..runread import run_folder_of  # lazy: vlbench --help imports this module; keep it light

    if a.push_to_hub and a.format != "model-index":
        raise OptionError("push_to_hub", "{opt} pushes a model card's model-index, not MTEB files",
                          "add --format model-index (MTEB results go to the MTEB results repository by its own "
                          "pull requests)", flag="--push-to-hub")
    if not a.out and not a.push_to_hub:
        raise OptionError("out", "vlbench export needs {opt} (or --push-to-hub REPO)", "give a folder",
                          example="exported", flag="--out")
    if a.out and os.path.exists(a.out) and not os.path.isdir(a.out):
        raise OptionError("out", f"{{opt}} {a.out} exists and is not a folder", "give a new or existing folder",
                          flag="--out")
    folder = run_folder_of(a.run)
    try:
        record = RunRecord.load(folder)
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"run {folder} cannot be read: {exc}", "pass a run folder written by 'vlbench run'") \
            from None
    # the model-index names the model the card belongs to: the repository pushed to, unless named
    name = a.model_name or a.push_to_hub or record.model.label
    if a.format == "mteb":
        from . import mteb  # lazy: vlbench --help imports this module; keep it light

        written = mteb.write(folder, record, a.out, name)
        for note in mteb.notes(record):
            print(f"note: {note}")
    else:
        from . import modelindex  # lazy: as above

        written = modelindex.write(record, a.out, name) if a.out else []
    for path in written:
        print(f"wrote {path}")
    if a.push_to_hub:
        from .hub import push  # lazy: as above (it imports huggingface_hub)

        print(f"opened a pull request on {a.push_to_hub}: {push(record, a.push_to_hub, name)}")
    return 0
