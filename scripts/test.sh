#!/usr/bin/env bash
# Sets vlbench up with the test extra (scripts/setup.sh --test), installs the external tools some tests drive (a
# headless Chromium, pdflatex, pdftoppm), runs ruff and mypy, then the whole test suite. This is what CI runs.
#
#   bash scripts/test.sh [PYTEST ARGS...]     # e.g. bash scripts/test.sh tests/unit -x
#
# CI cannot pass by skipping:
# * set-up installs the test extra and fails when it cannot (or when one of its packages does not import);
# * VLBENCH_REQUIRE_TOOLS names the test extra's packages that tests drive (mteb, pytrec_eval, submitit, ray, the
#   trackers, ...) and, where this script can install them (root, apt-get), chromium, pdflatex and pdftoppm: a test
#   that needs a missing one fails instead of skipping (tests/support/tools.py);
# * VLBENCH_STRICT_SKIPS=1: the run prints every skipped test with its reason and fails when a skip is not on the
#   allowlist in tests/support/skips.py (a gpu test without a GPU, real weights).
# A VLBENCH_REQUIRE_TOOLS or VLBENCH_STRICT_SKIPS already set (even empty) is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;;
esac
bash scripts/setup.sh --test
VPY="${VLBENCH_VENV:-.venv}/bin/python"
# the packages of the test extra that tests need (tests/support/tools.py: TEST_PACKAGES)
TEST_PACKAGES="mteb,pytrec_eval,eccv_caption,statsmodels,submitit,ray,wandb,mlflow,tensorboard,trackio"

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
  export VLBENCH_REQUIRE_TOOLS="${VLBENCH_REQUIRE_TOOLS-chromium,pdflatex,pdftoppm,$TEST_PACKAGES}"
else
  export VLBENCH_REQUIRE_TOOLS="${VLBENCH_REQUIRE_TOOLS-$TEST_PACKAGES}"
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
"$VPY" -m ruff check vlbench \
  || { echo "test.sh: ruff check failed (above); '$VPY -m ruff check --fix vlbench' fixes many"; exit 1; }
"$VPY" -m mypy \
  || { echo "test.sh: mypy found type errors (above)"; exit 1; }
export VLBENCH_STRICT_SKIPS="${VLBENCH_STRICT_SKIPS-1}"
echo "test.sh: VLBENCH_REQUIRE_TOOLS=$VLBENCH_REQUIRE_TOOLS VLBENCH_STRICT_SKIPS=$VLBENCH_STRICT_SKIPS"
exec "$VPY" -m pytest -q -p no:cacheprovider "$@"
