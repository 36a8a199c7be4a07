"""The names around trackers: which trackers ``--report-to`` names (the registry's), and the metric names every
tracker shows (``clean/t2i/recall@1``; MLflow's legal variant)."""

from __future__ import annotations

import re

from .. import registry
from ..errors import OptionError


def parse_report_to(value, option: str = "report_to") -> tuple[str, ...]:
    """``"wandb,mlflow"``, a list of names, ``"none"``, ``"all"`` (every registered tracker) or None -> the
    tracker names, in order, each once; an unknown name raises :class:`~vlbench.errors.OptionError` with the
    registered ones and the closest match."""
    if value is None:
        return ()
    if isinstance(value, str):
        names = [x.strip().lower() for x in value.split(",") if x.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        names = [x.strip().lower() for x in value if x.strip()]
    else:
        raise OptionError(option, f"{{opt}} takes tracker names, got {type(value).__name__}",
                          example="wandb,tensorboard")
    if names in (["none"], ["all"]):
        return () if names == ["none"] else tuple(registry.trackers.names())
    known = registry.trackers.names()
    for name in names:
        if name not in known:
            close = registry.close_matches(name, known)
            guess = f"did you mean {', '.join(map(repr, close))}? " if close else ""
            raise OptionError(option, f"unknown tracker {name!r} in {{opt}}",
                              f"{guess}use one or more of {', '.join(known)} (comma-separated; 'vlbench ls "
                              "trackers' lists them), or none", example="wandb,tensorboard")
    return tuple(dict.fromkeys(names))


def metric_name(condition: str, direction: str, metric: str, k: int | None = None) -> str:
    """``clean/t2i/recall@1``: the name every tracker shows a metric record under (MLflow: :func:`mlflow_name`)."""
    return f"{condition}/{direction}/{metric}" + ("" if k is None else f"@{k}")


def mlflow_name(name: str) -> str:
    """A metric name MLflow accepts (letters, digits, ``_ - . / :`` and spaces): ``@`` -> ``_at_``, any other
    refused character -> ``_``."""
    return re.sub(r"[^\w\-./: ]", "_", name.replace("@", "_at_"))
