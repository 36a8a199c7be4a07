"""``vlbench check RUN``: a finished run's clean R@k (or a task run's scores) against the published numbers of its
model and dataset (or task)."""

from __future__ import annotations

import json

from ..errors import VlbenchError
from ..results import RunRecord, UnreadableResults
from .check import TOLERANCE, check_run, check_tolerance


def configure(p) -> None:
    p.description = ("Compare a finished run's clean Recall@k with the published numbers of the same model on the "
                     "same built-in dataset (open_clip's table, the papers of the built-in families), or a choice-task "
                     "run's scores with the published scores of the same model on the same task and item sets "
                     "(SugarCrepe, Winoground, What'sUp), and name the protocol differences known to move them. "
                     "Exit 0: within the tolerance; 1: off, or unverified (no results_hash proves the run's values); "
                     "2: no published row applies (or the run cannot be read).")
    p.add_argument("run", metavar="RUN", help="a run folder or its results.json")
    p.add_argument("--tolerance", type=str, default=str(TOLERANCE),
                   help=f"largest accepted |measured - published|, in percentage points (default {TOLERANCE:g})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args) -> int:
    tolerance = check_tolerance(args.tolerance)  # nan, inf and negative numbers: OptionError naming --tolerance
    try:
        rec = RunRecord.load(args.run)
    except UnreadableResults as exc:
        raise VlbenchError(f"cannot check {args.run!r}: {exc}",
                           "pass a run folder written by 'vlbench run' (or its results.json)") from None
    report = check_run(rec, tolerance=tolerance)
    print(json.dumps(report.to_json(), indent=1) if args.json else report.format())
    return report.exit_code()
