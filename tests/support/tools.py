"""What some tests need beyond the core install: external tools (a headless Chromium, pdflatex, pdftoppm), the CUDA
device of the ``gpu`` tests, and the Python packages of the test extra that serve as oracles or drive real
back-ends (mteb, pytrec_eval, submitit, Ray, the trackers, ...). A test that needs one that is missing skips with the
reason, unless ``VLBENCH_REQUIRE_TOOLS`` (a comma list: ``chromium,pdflatex,pdftoppm,cuda,mteb,...``) names it;
then it fails. scripts/test.sh sets it where it installs the tools (root and apt-get) and always for the test
extra's packages (it installs that extra), so nothing CI installs can go missing with CI green; a developer without
root or without the test extra gets skips.

Core dependencies (torch, transformers, open_clip, spaCy, pandas, scikit-image, ...) are never skipped on: tests
import them unconditionally, so a broken install fails.

Mark a test with :func:`needs_tool` or :func:`needs_package` (conftest.py's ``pytest_runtest_setup`` acts on the
mark), or call :func:`missing_tool` inside a test when the need shows only half-way.
"""

from __future__ import annotations

import importlib.util
import os
from typing import NoReturn

import pytest

#: the variable that turns a missing tool's or package's skip into a failure
REQUIRE_VAR = "VLBENCH_REQUIRE_TOOLS"

#: the test extra's packages that tests need, by the name VLBENCH_REQUIRE_TOOLS uses -> the module imported
#: (pyproject.toml's ``test`` extra installs them; scripts/test.sh requires every one of them)
TEST_PACKAGES: dict[str, str] = {
    "mteb": "mteb",
    "pytrec_eval": "pytrec_eval",
    "eccv_caption": "eccv_caption",
    "statsmodels": "statsmodels",
    "submitit": "submitit",
    "ray": "ray",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "tensorboard": "tensorboard",
    "trackio": "trackio",
}


def required_tools() -> set[str]:
    """The tools that must be present (``VLBENCH_REQUIRE_TOOLS``, comma-separated; empty or unset: none)."""
    return {t.strip().lower() for t in os.environ.get(REQUIRE_VAR, "").split(",") if t.strip()}


def missing_tool(name: str, reason: str) -> NoReturn:
    """Skip this test because ``name`` is missing, or fail it when ``VLBENCH_REQUIRE_TOOLS`` names ``name``."""
    if name.lower() in required_tools():
        pytest.fail(f"{reason}; {REQUIRE_VAR}={os.environ.get(REQUIRE_VAR)} requires {name} here (scripts/test.sh "
                    "sets it where it installs the tools and the test extra: see its output)", pytrace=False)
    pytest.skip(reason)


def needs_tool(name: str, found: bool, reason: str) -> pytest.MarkDecorator:
    """A mark: the test needs ``name`` (``found``: whether it is here); skipped, or failed when required, if not."""
    return pytest.mark.needs_tool(name, found=bool(found), reason=reason)


def has_package(name: str) -> bool:
    """Whether the test-extra package ``name`` (a key of :data:`TEST_PACKAGES`) can be imported here."""
    module = TEST_PACKAGES[name]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or half-installed
        return False


def needs_package(name: str, what: str = "") -> pytest.MarkDecorator:
    """A mark: the test needs the test extra's package ``name`` (a key of :data:`TEST_PACKAGES`); skipped with the
    install command when it is missing, failed instead when ``VLBENCH_REQUIRE_TOOLS`` names it."""
    if name not in TEST_PACKAGES:
        raise KeyError(f"{name!r} is not in support.tools.TEST_PACKAGES (add it there with its module)")
    reason = (f"{name} is not installed ({what + '; ' if what else ''}the test extra: pip install -e '.[test]' "
              "from the clone)")
    return needs_tool(name, has_package(name), reason)


def require_package(name: str, what: str = "") -> None:
    """Inside a test: skip (or fail, when required) unless the test-extra package ``name`` is here."""
    mark = needs_package(name, what)
    if not mark.kwargs["found"]:
        missing_tool(name, mark.kwargs["reason"])
