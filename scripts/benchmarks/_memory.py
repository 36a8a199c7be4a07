"""Memory figures of this process, shared by the benchmark scripts (Linux /proc)."""

from __future__ import annotations


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS now, VmHWM peak), in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")
