#!/usr/bin/env bash
# Sets vlbench up (scripts/setup.sh), runs ruff and mypy, then the whole test suite. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Optional: a headless browser for the leaderboard HTML test (skips with a reason if none can be installed).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  timeout 600 apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 \
    || echo "test.sh: chromium could not be installed; the HTML rendering test will skip"
fi
# Optional: pdflatex (and pdftoppm) for the test that compiles the leaderboard's LaTeX tables (skips without them).
if ! command -v pdflatex >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  timeout 900 apt-get install -y --no-install-recommends texlive-latex-base texlive-latex-recommended poppler-utils \
    >/dev/null 2>&1 || echo "test.sh: texlive could not be installed; the LaTeX compile test will skip"
fi
# Lint and types first (seconds; configured in pyproject.toml): a style or type error fails before the long suite.
.venv/bin/python -m ruff check vlbench \
  || { echo "test.sh: ruff check failed (above); '.venv/bin/python -m ruff check --fix vlbench' fixes many"; exit 1; }
.venv/bin/python -m mypy \
  || { echo "test.sh: mypy found type errors (above)"; exit 1; }
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
