"""The headless browser the HTML tests drive: ``VLBENCH_CHROMIUM``, else Chromium or Chrome on the PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def find_browser() -> str | None:
    env = os.environ.get("VLBENCH_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


BROWSER = find_browser()
NEEDS_BROWSER = pytest.mark.skipif(BROWSER is None, reason="no headless browser found (install Debian's 'chromium' "
                                                           "package or set VLBENCH_CHROMIUM)")
