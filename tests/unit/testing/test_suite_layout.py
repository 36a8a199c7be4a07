"""Rules of the test suite itself that keep `pytest tests/unit` and `python -m pytest tests/unit` equivalent.

`python -m pytest` puts the current folder on sys.path, plain `pytest` does not: a test that imports the
``tests`` package (``from tests.conftest import ...``) passes one way and errors the other
(``No module named 'tests'``). Helpers come from ``support`` (tests/ is on the path through pyproject.toml), and
nothing imports conftest.py (pytest loads it; importing it again makes a second module with its own state)."""

from __future__ import annotations

import ast

from support.data import TESTS


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def test_no_test_imports_the_tests_package_or_conftest():
    bad = [f"{p.relative_to(TESTS)}: import {name}" for p in sorted(TESTS.rglob("*.py"))
           for name in _imports(p) if name.split(".")[0] in ("tests", "conftest")]
    assert not bad, "import from support.* instead (tests/ is on the path):\n" + "\n".join(bad)
