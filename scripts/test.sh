#!/usr/bin/env bash
# Sets vlbench up (scripts/setup.sh), installs the external tools some tests drive (a headless Chromium, pdflatex,
# pdftoppm), runs ruff and mypy, then the whole test suite. This is what CI runs.
#
# Where this script can install the tools (root, apt-get), it also requires them: it exports
# VLBENCH_REQUIRE_TOOLS=chromium,pdflatex,pdftoppm, which turns those tests' "tool not found" skips into failures,
# so a tool that failed to install makes CI red instead of quietly skipping its tests. Elsewhere (no root) the tests
# skip with the reason, as before. A VLBENCH_REQUIRE_TOOLS already set (even empty) is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

APT_UPDATED=""
apt_install() {  # apt_install PACKAGE...: Debian's package lists are refreshed once, before the first install
  local log
  log=$(mktemp)
  if [ -z "$APT_UPDATED" ]; then
    echo "test.sh: apt-get update (once, before installing the test tools)"
    timeout 300 apt-get update -qq >"$log" 2>&1 || { echo "test.sh: apt-get update failed:"; tail -5 "$log"; }
    APT_UPDATED=1
  fi
  echo "test.sh: apt-get install $*"
  if ! timeout 900 apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1; then
    echo "test.sh: apt-get install $* failed:"; tail -5 "$log"; rm -f "$log"; return 1
  fi
  rm -f "$log"
}
has() { command -v "$1" >/dev/null 2>&1; }

CAN_INSTALL=""
if has apt-get && [ "$(id -u)" = 0 ]; then CAN_INSTALL=1; fi
if [ -n "$CAN_INSTALL" ]; then
  # a headless browser for the leaderboard and failure-browser HTML tests
  if ! has chromium; then apt_install chromium || true; fi
  # pdflatex and pdftoppm for the test that compiles the leaderboard's LaTeX tables and renders a page
  if ! has pdflatex || ! has pdftoppm; then
    apt_install texlive-latex-base texlive-latex-recommended poppler-utils || true
  fi
  export VLBENCH_REQUIRE_TOOLS="${VLBENCH_REQUIRE_TOOLS-chromium,pdflatex,pdftoppm}"
else
  echo "test.sh: not root or no apt-get: chromium, pdflatex and pdftoppm are not installed here; the tests that" \
       "need one skip with the reason when it is missing"
fi
for tool in chromium pdflatex pdftoppm; do
  if ! has "$tool"; then
    case ",${VLBENCH_REQUIRE_TOOLS-}," in
      *",$tool,"*) echo "test.sh: $tool is missing and required (VLBENCH_REQUIRE_TOOLS): the tests that need it will fail";;
      *) echo "test.sh: $tool is missing: the tests that need it will skip";;
    esac
  fi
done

# Lint and types first (seconds; configured in pyproject.toml): a style or type error fails before the long suite.
.venv/bin/python -m ruff check vlbench \
  || { echo "test.sh: ruff check failed (above); '.venv/bin/python -m ruff check --fix vlbench' fixes many"; exit 1; }
.venv/bin/python -m mypy \
  || { echo "test.sh: mypy found type errors (above)"; exit 1; }
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
