"""Mean corruption error (Hendrycks & Dietterich 2019, ImageNet-C).

For corruption c, the corruption error sums the error over severities 1-5; with a reference model
(AlexNet in ImageNet-C) it is divided by the reference's sum: CE_c = sum_s E_{s,c} / sum_s E^ref_{s,c}.
mCE is the mean of CE_c over corruptions. Without a reference, CE_c is the mean error over severities
(unnormalised). Errors here are ``100 - R@1`` (percent) or ``1 - metric`` (fractions), as the caller gives.
"""

from __future__ import annotations

from ..errors import VlbenchError


def error_from_metric(value: float, percent: bool = True) -> float:
    """100 - R@1 for percentages, 1 - metric for fractions."""
    return (100.0 if percent else 1.0) - float(value)


def _checked(errors: dict, who: str) -> dict:
    if not errors:
        raise VlbenchError(f"mean corruption error: no errors given for {who}", "pass {(name, severity): error}")
    return errors


def corruption_errors(errors: dict, reference: dict | None = None) -> dict[str, float]:
    """CE per corruption from ``{(name, severity): error}`` (and the reference model's, if given)."""
    by_name: dict[str, dict[int, float]] = {}
    for (name, severity), err in _checked(errors, "the model").items():
        by_name.setdefault(name, {})[int(severity)] = float(err)
    out = {}
    for name, sev in sorted(by_name.items()):
        if reference is None:
            out[name] = sum(sev.values()) / len(sev)
            continue
        missing = [s for s in sev if (name, s) not in reference]
        if missing:
            raise VlbenchError(f"mean corruption error: the reference model has no error for {name} "
                               f"severities {missing}", "run the reference model on the same conditions")
        denom = sum(float(reference[(name, s)]) for s in sev)
        if denom <= 0:
            raise VlbenchError(f"mean corruption error: the reference model's error on {name} is 0",
                               "choose a reference model that makes errors, or leave it out")
        out[name] = sum(sev.values()) / denom
    return out


def mean_corruption_error(errors: dict, reference: dict | None = None) -> float:
    """mCE: mean over corruptions of :func:`corruption_errors`."""
    ce = corruption_errors(errors, reference)
    return sum(ce.values()) / len(ce)
