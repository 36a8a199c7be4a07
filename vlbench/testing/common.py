"""What every conformance check shares: the error it raises, the report it returns, and the runner of checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


class ConformanceError(AssertionError):
    """A plug-in breaks a clause of its contract: names the plug-in, the check, and what was expected and found."""

    def __init__(self, kind: str, plugin: str, check: str, expected: str, found: str):
        self.kind, self.plugin, self.check = kind, plugin, check
        self.expected, self.found = expected, found
        super().__init__(f"{kind} {plugin!r} fails the check {check!r}: expected {expected}; found {found}")

    def __reduce__(self):  # picklable with its fields (pytest-xdist, multiprocessing)
        return type(self), (self.kind, self.plugin, self.check, self.expected, self.found)


@dataclass
class Report:
    """The checks a plug-in passed, in order, and those that did not apply to it (check -> why)."""

    kind: str
    plugin: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        skipped = "".join(f"\n  skipped {name}: {why}" for name, why in self.skipped.items())
        return f"{self.kind} {self.plugin!r}: {len(self.passed)} checks passed ({', '.join(self.passed)}){skipped}"


class Checker:
    """Runs named checks of one plug-in; an exception escaping the plug-in's code fails the running check."""

    def __init__(self, kind: str, plugin: str):
        self.report = Report(kind, plugin)
        self.current = "load"

    def error(self, expected: str, found: str) -> ConformanceError:
        return ConformanceError(self.report.kind, self.report.plugin, self.current, expected, found)

    @contextmanager
    def check(self, name: str) -> Iterator[None]:
        self.current = name
        try:
            yield
        except ConformanceError:
            raise
        except Exception as exc:  # the plug-in's own code raised: the check fails, naming what was raised
            raise self.error("no exception", f"{type(exc).__name__}: {exc}") from exc
        if name not in self.report.passed:
            self.report.passed.append(name)

    def expect(self, condition: bool, expected: str, found: Any) -> None:
        if not condition:
            raise self.error(expected, found if isinstance(found, str) else repr(found))

    def skip(self, name: str, why: str) -> None:
        self.report.skipped[name] = why


def json_problem(obj) -> str | None:
    """Why ``obj`` is not plain JSON (strict: no ``default=str`` fallback, no NaN), or None."""
    try:
        json.dumps(obj, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def short(obj, n: int = 120) -> str:
    text = repr(obj)
    return text if len(text) <= n else text[:n] + "..."
