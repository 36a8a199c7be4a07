"""Rules of the test suite itself that keep `pytest tests/unit` and `python -m pytest tests/unit` equivalent.

`python -m pytest` puts the current folder on sys.path, plain `pytest` does not: a test that imports the
``tests`` package (``from tests.conftest import ...``) passes one way and errors the other
(``No module named 'tests'``). Helpers come from ``support`` (tests/ is on the path through pyproject.toml), and
nothing imports conftest.py (pytest loads it; importing it again makes a second module with its own state)."""

from __future__ import annotations

import re

from support.data import TESTS

#: an import statement (at any indentation) of the tests package or of conftest
BAD_IMPORT = re.compile(r"^\s*(?:from\s+(?:tests|conftest)(?:\.\w+)*\s+import\b|import\s+(?:tests|conftest)\b)",
                        re.MULTILINE)


def test_no_test_imports_the_tests_package_or_conftest():
    bad = [f"{p.relative_to(TESTS)}: {m.group(0).strip()}" for p in sorted(TESTS.rglob("*.py"))
           for m in BAD_IMPORT.finditer(p.read_text(encoding="utf-8"))]
    assert not bad, "import from support.* instead (tests/ is on the path):\n" + "\n".join(bad)


def test_the_import_rule_sees_both_spellings():
    assert BAD_IMPORT.search("    from tests.conftest import SHARED_CAPTIONS\n")
    assert BAD_IMPORT.search("import conftest\n") and BAD_IMPORT.search("from conftest import x\n")
    assert not BAD_IMPORT.search("from support.data import SHARED_CAPTIONS\nimport testsuite\n")
