"""vlbench.testing.check_executor: every built-in executor passes; an executor that breaks one clause of the
contract (vlbench.execution) fails it, and the error names the executor and the clause."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
from support.conformance import fails_clause

from vlbench.execution import RunOutcome, RunStatus
from vlbench.sweep.executors.inline import InlineExecutor
from vlbench.sweep.worker import run_task
from vlbench.testing import check_executor

ALL_CLAUSES = ["load", "protocol", "options", "no task", "bad option refused before any run", "execute", "outcomes",
               "retries honoured", "events"]


def test_the_inline_executor_passes_every_clause():
    assert check_executor("inline").passed == ALL_CLAUSES


def test_an_executor_plugin_passes_as_a_class_an_object_or_a_name():
    assert check_executor(InlineExecutor).passed == ALL_CLAUSES
    assert check_executor(InlineExecutor()).passed == ALL_CLAUSES


@pytest.mark.slow  # worker processes, submitit jobs, a private Ray: each starts interpreters
@pytest.mark.parametrize("name,options,package", [("local", {"workers": 2}, None),
                                                  ("slurm", {"cluster": "local", "poll_s": 0.5}, "submitit"),
                                                  ("ray", {"address": "local", "poll_s": 0.2}, "ray")])
def test_every_builtin_executor_passes(name, options, package):
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} (the extra of the {name} executor) is not installed")
    assert check_executor(name, options=options).passed == ALL_CLAUSES


# -- deliberately broken executors: each breaks one clause ---------------------------------------------------


class _NoCheckOptions:
    def execute(self, tasks, options, on_event):
        return InlineExecutor().execute(tasks, options, on_event)


class _TakesAnyOption(InlineExecutor):
    def check_options(self, options):
        return dict(options)

    def execute(self, tasks, options, on_event):
        return InlineExecutor().execute(tasks, {}, on_event)


class _ChecksOptionsTooLate(InlineExecutor):  # runs first, complains after
    def execute(self, tasks, options, on_event):
        out = InlineExecutor().execute(tasks, {}, on_event)
        self.check_options(options)
        return out


class _ReturnsDicts(InlineExecutor):  # the old hand-written dicts
    def execute(self, tasks, options, on_event):
        return [o.as_dict() for o in super().execute(tasks, options, on_event)]


class _ReversedOrder(InlineExecutor):
    def execute(self, tasks, options, on_event):
        return super().execute(tasks, options, on_event)[::-1]


class _DropsTheLastRun(InlineExecutor):
    def execute(self, tasks, options, on_event):
        return super().execute(tasks, options, on_event)[:-1]


class _ReportsFailuresAsDone(InlineExecutor):
    def execute(self, tasks, options, on_event):
        return [dataclasses.replace(o, status=RunStatus.DONE, error=None)
                for o in super().execute(tasks, options, on_event)]


class _RaisesForAFailedRun(InlineExecutor):
    def execute(self, tasks, options, on_event):
        out = super().execute(tasks, options, on_event)
        if tasks and any(not o.ok for o in out):
            raise RuntimeError("a run failed")
        return out


class _IgnoresRetries(InlineExecutor):
    def execute(self, tasks, options, on_event):
        self.check_options(options)
        out = []
        for t in tasks:
            on_event("started", t.run_id, {})
            o = run_task({**t.as_dict(), "retries": 0})
            on_event("failed", t.run_id, o.as_dict())
            out.append(o)
        return out


class _Silent(InlineExecutor):
    def execute(self, tasks, options, on_event):
        return super().execute(tasks, options, lambda kind, run_id, info: None)


class _OutcomesOnAnotherLog(InlineExecutor):
    def execute(self, tasks, options, on_event):
        return [RunOutcome(o.run_id, o.status, o.folder, o.log + ".elsewhere", o.seconds, o.attempts, o.error)
                for o in super().execute(tasks, options, on_event)]


BROKEN = [  # (the clause it breaks, how, the executor)
    ("protocol", "no-check-options", _NoCheckOptions()),
    ("options", "takes-any-option", _TakesAnyOption()),
    ("bad option refused before any run", "checks-options-after-running", _ChecksOptionsTooLate()),
    ("outcomes", "returns-dicts", _ReturnsDicts()),
    ("outcomes", "reversed-order", _ReversedOrder()),
    ("outcomes", "drops-the-last-run", _DropsTheLastRun()),
    ("outcomes", "reports-failures-as-done", _ReportsFailuresAsDone()),
    ("outcomes", "names-another-log", _OutcomesOnAnotherLog()),
    ("execute", "raises-for-a-failed-run", _RaisesForAFailedRun()),
    ("retries honoured", "ignores-retries", _IgnoresRetries()),
    ("events", "silent", _Silent()),
]


@pytest.mark.parametrize("clause, executor", [(c, e) for c, _, e in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_executor_fails_the_clause_it_breaks(clause, executor):
    err = fails_clause(check_executor, executor, "executor", clause)
    assert err.plugin == type(executor).__name__ and type(executor).__name__ in str(err)


def test_an_unknown_executor_name_fails_to_load_with_did_you_mean():
    err = fails_clause(check_executor, "locl", "executor", "load")
    assert "did you mean 'local'" in str(err)
