"""vlbench.testing.check_exporter: the built-in exporters and the example plug-in's pass; an exporter that breaks
one clause fails it, and the error names the exporter and the clause."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from support.conformance import fails_clause
from vlbench_counting_plugin.exporters import CountingCsv

from vlbench import registry
from vlbench.testing import check_exporter

CLAUSES = ["protocol", "export", "files", "writes only under out", "repeatable"]


@pytest.mark.parametrize("name", [n for n in registry.exporters.names() if n != "mteb"])
def test_builtin_exporters_pass(name):
    assert check_exporter(name).passed == CLAUSES


@pytest.mark.slow  # a whole run (the tiny_run fixture)
def test_mteb_exporter_passes_on_a_real_run(tiny_run):
    """MTEB's files need the run's per-query file (proven by its hashes): a real run, not the synthetic one."""
    assert check_exporter("mteb", run=tiny_run).passed == CLAUSES


def test_the_example_plugin_exporter_passes():
    assert check_exporter(CountingCsv()).passed == CLAUSES


class _Csv(CountingCsv):
    """The example with one thing changed per broken exporter below."""


def _with(**members):
    return type("Broken", (_Csv,), members)()


_counter = itertools.count()


def _outside(self, request):
    written = CountingCsv.export(self, request)
    (request.out.parent / "stray.txt").write_text("x")
    return written


def _in_cwd(self, request):
    Path("relative.csv").write_text("x")
    return CountingCsv.export(self, request)


def _touches_run(self, request):
    (request.folder / "extra.json").write_text("{}")
    return CountingCsv.export(self, request)


def _unlisted(self, request):
    (request.out / "also.txt").write_text("x")
    return CountingCsv.export(self, request)


def _changing(self, request):
    written = CountingCsv.export(self, request)
    with open(written[0], "a") as fh:
        fh.write(f"# {next(_counter)}\n")
    return written


def _multiline_note(self, request):
    request.note("two\nlines")
    return CountingCsv.export(self, request)


BROKEN = [  # (the clause it breaks, how, the exporter)
    ("protocol", "no-description", _with(description="")),
    ("protocol", "two-line-description", _with(description="a\nb")),
    ("protocol", "run-kinds-not-a-tuple", _with(run_kinds="retrieval")),
    ("protocol", "unknown-run-kind", _with(run_kinds=("retrieval", "video"))),
    ("protocol", "no-export-method", _with(export=None)),
    ("export", "raises", _with(export=lambda self, r: 1 / 0)),
    ("export", "returns-nothing", _with(export=lambda self, r: [])),
    ("export", "returns-a-string", _with(export=lambda self, r: str(CountingCsv.export(self, r)[0]))),
    ("export", "returns-a-missing-file", _with(export=lambda self, r: [str(r.out / "ghost.csv")])),
    ("export", "returns-a-path-outside-out", _with(export=lambda self, r: [os.fspath(r.folder / "results.json")])),
    ("export", "multi-line-note", _with(export=_multiline_note)),
    ("files", "writes-a-file-it-does-not-return", _with(export=_unlisted)),
    ("writes only under out", "writes-beside-out", _with(export=_outside)),
    ("writes only under out", "writes-in-the-working-directory", _with(export=_in_cwd)),
    ("writes only under out", "changes-the-run-folder", _with(export=_touches_run)),
    ("repeatable", "other-bytes-each-time", _with(export=_changing)),
]


@pytest.mark.parametrize("clause, exporter", [(c, e) for c, _, e in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_exporter_fails_the_clause_it_breaks(clause, exporter):
    err = fails_clause(check_exporter, exporter, "exporter", clause)
    assert err.plugin == "Broken" and "'Broken'" in str(err)
