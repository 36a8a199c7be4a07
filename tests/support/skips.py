"""The skips CI accepts, in one place, each with its reason; every other skip fails a strict run.

``VLBENCH_STRICT_SKIPS=1`` (scripts/test.sh sets it, so CI runs with it) makes the suite print every skipped test
with its reason at the end and exit non-zero when a skip is not on :data:`ALLOWED`: a package of the test extra
that failed to install, a tool CI installs, the shared data beside the checkout, or a core dependency cannot go
missing with CI green. conftest.py's ``pytest_runtest_logreport`` / ``pytest_collectreport`` collect the skips and
``pytest_sessionfinish`` sets the exit status.

Keep this list short: a new entry needs a reason that holds on every CI machine.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: the variable that turns a skip that is not allowed into a failed run
STRICT_VAR = "VLBENCH_STRICT_SKIPS"


@dataclass(frozen=True)
class Allowed:
    """A skip CI accepts: a test carrying ``marker``, or a skip whose reason matches ``reason`` (a regex, from the
    start)."""

    name: str
    why: str
    marker: str | None = None
    reason: str | None = None

    def covers(self, keywords, reason: str) -> bool:
        if self.marker is not None and self.marker in keywords:
            return True
        return self.reason is not None and re.match(self.reason, reason) is not None


ALLOWED: tuple[Allowed, ...] = (
    Allowed("gpu", marker="gpu",
            why="needs a CUDA device; CI machines have none (where one is, VLBENCH_REQUIRE_TOOLS=cuda requires it)"),
    Allowed("weights", marker="weights",
            why="needs real pretrained weights, which cannot be downloaded on an offline machine"),
    Allowed("a GPU is here", reason=r"this machine has (a CUDA device|an NVIDIA device node)",
            why="the test shows what happens without a GPU; on a machine with one the gpu tests run instead"),
)


def strict() -> bool:
    """Whether this run fails on a skip that is not allowed (``VLBENCH_STRICT_SKIPS`` set, not 0/empty)."""
    return os.environ.get(STRICT_VAR, "").strip().lower() not in ("", "0", "false", "no")


#: the shared data (../shared/data beside the checkout, or VLBENCH_SHARED_DATA): real caption files, NLTK data,
#: SugarCrepe, open_clip's table. It is not part of the repository and a user's clone has none, so where the whole
#: folder is absent the tests that read it skip (with a reason naming the path) and the strict run accepts that.
#: Where the folder IS present, a skip over a missing file in it is not allowed: the copy is incomplete.
SHARED_ABSENT = Allowed("no shared data", why="../shared/data (or VLBENCH_SHARED_DATA) is not beside this checkout; "
                        "it is not part of the repository, and the tests that read it skip naming the path")


def _shared_roots() -> tuple[str, ...]:
    from support.data import SHARED_CAPTIONS, SHARED_DATA  # lazy: support.data reads the environment once

    return tuple(str(p) for p in (SHARED_DATA, SHARED_CAPTIONS) if not p.is_dir())


def allowed(keywords, reason: str) -> Allowed | None:
    """The entry of :data:`ALLOWED` that covers a skip (its test's keywords/markers and its reason), or None."""
    for entry in ALLOWED:
        if entry.covers(keywords, reason):
            return entry
    if any(root in reason for root in _shared_roots()):
        return SHARED_ABSENT
    return None


def skip_reason(longrepr) -> str:
    """The reason of a skipped report (pytest gives a (path, line, 'Skipped: reason') tuple)."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text
