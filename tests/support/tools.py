"""External tools some tests drive (a headless Chromium, pdflatex, pdftoppm) and the CUDA device of the ``gpu``
tests: a test that needs one that is missing skips with the reason, unless ``VLBENCH_REQUIRE_TOOLS`` (a comma list:
``chromium,pdflatex,pdftoppm,cuda``) names it; then it fails. scripts/test.sh sets it where it installs the tools
(root and apt-get), so a tool CI installs cannot go missing with CI green; a developer without root gets skips.

Mark a test with :func:`needs_tool` (conftest.py's ``pytest_runtest_setup`` acts on the mark), or call
:func:`missing_tool` inside a test when the need shows only half-way.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: the variable that turns a missing tool's skip into a failure
REQUIRE_VAR = "VLBENCH_REQUIRE_TOOLS"


def required_tools() -> set[str]:
    """The tools that must be present (``VLBENCH_REQUIRE_TOOLS``, comma-separated; empty or unset: none)."""
    return {t.strip().lower() for t in os.environ.get(REQUIRE_VAR, "").split(",") if t.strip()}


def missing_tool(name: str, reason: str) -> NoReturn:
    """Skip this test because ``name`` is missing, or fail it when ``VLBENCH_REQUIRE_TOOLS`` names ``name``."""
    if name.lower() in required_tools():
        pytest.fail(f"{reason}; {REQUIRE_VAR}={os.environ.get(REQUIRE_VAR)} requires {name} here (scripts/test.sh "
                    "sets it where it can install the tools: see its apt-get output)", pytrace=False)
    pytest.skip(reason)


def needs_tool(name: str, found: bool, reason: str) -> pytest.MarkDecorator:
    """A mark: the test needs ``name`` (``found``: whether it is here); skipped, or failed when required, if not."""
    return pytest.mark.needs_tool(name, found=bool(found), reason=reason)
