"""Errors that vlbench raises for bad input.

Every error names the offending item and says how to fix it; the CLI prints the message
without a traceback and exits with status 2.
"""

from __future__ import annotations


class VlbenchError(Exception):
    """Base class: a problem the user can fix. ``hint`` says how."""

    def __init__(self, message: str, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  fix: {hint}")


class UnknownNameError(VlbenchError, KeyError):
    """An unknown model / dataset / perturbation / metric name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return Exception.__str__(self)


class DataError(VlbenchError):
    """A dataset, manifest, caption or image problem."""


class ModelError(VlbenchError):
    """A model could not be loaded or produced unusable output."""
