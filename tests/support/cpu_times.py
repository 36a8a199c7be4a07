"""A pytest plug-in that measures CPU time, which a busy machine inflates far less than wall time:
``pytest -p support.cpu_times tests/unit`` prints the collection's CPU seconds, the tests' own and their
subprocesses', and the tests that cost most; ``VLBENCH_CPU_TIMES=file.tsv`` also writes every test's row
(node id, own CPU s, subprocess CPU s, wall s). tests/README.md ("How long") says how the lanes were measured."""

from __future__ import annotations

import os
import time

import pytest

_ROWS: list[tuple[str, float, float, float]] = []


def _now() -> tuple[float, float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system, time.perf_counter()


def _timed(name: str, before: tuple[float, float, float]) -> None:
    after = _now()
    _ROWS.append((name, after[0] - before[0], after[1] - before[1], after[2] - before[2]))


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    before = _now()
    yield
    _timed("<collection>", before)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _now()
    yield
    _timed(item.nodeid, before)


def pytest_terminal_summary(terminalreporter):
    tests = [r for r in _ROWS if not r[0].startswith("<")]
    collection = sum(r[1] for r in _ROWS if r[0] == "<collection>")
    own, sub = sum(r[1] for r in tests), sum(r[2] for r in tests)
    everything = _now()
    write = terminalreporter.write_line
    write(f"cpu times: collection {collection:.1f} s; {len(tests)} tests {own:.1f} s own + {sub:.1f} s in "
          f"subprocesses; the process so far {everything[0]:.1f} s + {everything[1]:.1f} s in subprocesses")
    for name, mine, theirs, wall in sorted(tests, key=lambda r: -(r[1] + r[2]))[:15]:
        write(f"  {mine:5.2f} s own {theirs:5.2f} s sub {wall:6.2f} s wall  {name}")
    out = os.environ.get("VLBENCH_CPU_TIMES")
    if out:
        with open(out, "w") as f:
            f.writelines(f"{n}\t{a:.3f}\t{b:.3f}\t{c:.3f}\n" for n, a, b, c in _ROWS)
