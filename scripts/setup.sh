#!/usr/bin/env bash
# Installs what autoloco needs on Debian 12 (idempotent), then configures and builds.
#   scripts/setup.sh [PRESET [apps]]   PRESET: release (default), ci, debug, asan, or none
# "none" installs the packages only; "apps" builds only the executables (not the tests).
# Packages are installed only when missing; as root or through sudo. Nothing outside the
# system package manager is fetched, except the pinned tensorboard from PyPI into the venv
# .venv-tools/ (scripts/tensorboard.py; AUTOLOCO_TOOLS_VENV=0 skips it), and the Hugging Face
# venv of scripts/hf-env.sh (torch, transformers, ...; AUTOLOCO_HF_VENV=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

packages=(
  cmake ninja-build g++ pkg-config ccache   # ccache: rebuilds of unchanged files are instant
  libtorch-dev libopenblas0-openmp           # Debian's LibTorch (CPU) + a real BLAS (~9x faster)
  libopenmpi-dev openmpi-bin                 # launch and communication
  libhdf5-dev zlib1g-dev libyaml-cpp-dev libfmt-dev catch2
  libsentencepiece-dev sentencepiece         # autoloco-prepare --tokenizer sentencepiece; spm_encode
  python3 python3-venv python3-numpy python3-matplotlib python3-h5py python3-yaml  # scripts
  python3-doc                                # the default corpus (Python docs, reST sources)
  iproute2                                   # ip and tc: the network lab (scripts/netlab.sh)
  slurmctld slurmd slurm-client munge        # scripts/slurm-lab.sh: Slurm in the network lab
  clang-14 libclang-rt-14-dev                # scripts/fuzz.sh: clang and its libFuzzer runtime
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
[[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && sudo_cmd=(sudo)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's LibTorch calls whatever libblas.so.3 (and libopenblas.so.0) is: make sure it is
# OpenBLAS, not the reference, and its OpenMP build, which shares LibTorch's OpenMP thread pool.
# The pthread build (preferred by Debian when both are installed) keeps a pool of its own whose
# spinning fights LibTorch's: the trainer then keeps it to one thread (util/blas_threads.hpp), and
# 2 intra-op threads gain less (docs/results.md, Threads). An alternative set by hand is left.
for link in libblas.so.3 libopenblas.so.0; do
  name=$link-x86_64-linux-gnu
  query=$(update-alternatives --query "$name" 2>/dev/null || true)
  value=$(awk '/^Value:/{print $2}' <<<"$query")
  openmp=$(awk '/^Alternative:/{print $2}' <<<"$query" | grep '/openblas-openmp/' || true)
  if grep -q '^Status: auto' <<<"$query" && [[ -n "$openmp" && "$value" != "$openmp" ]]; then
    echo "setup: $link -> $openmp (OpenBLAS's OpenMP build; undo: update-alternatives --auto $name)" >&2
    "${sudo_cmd[@]}" update-alternatives --quiet --set "$name" "$openmp" ||
      echo "setup: warning: could not switch $link (needs root); see docs/results.md, Threads" >&2
  fi
done
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
if [[ -n "$blas" && "$blas" != *openblas* ]]; then
  echo "setup: warning: libblas.so.3 points at $blas, not OpenBLAS; training will be slow" >&2
fi

# Python tools that Debian does not package, in a venv of their own at .venv-tools/ (pinned, from
# PyPI): tensorboard for scripts/tensorboard.py. Skipped when the pinned version is there, or with
# AUTOLOCO_TOOLS_VENV=0; without PyPI only a warning (only scripts/tensorboard.py needs it).
tensorboard_pin=2.21.0
tools=.venv-tools
if [[ "${AUTOLOCO_TOOLS_VENV:-1}" != 0 ]] &&
  ! "$tools/bin/python" -c "import sys, tensorboard
sys.exit(tensorboard.__version__ != '$tensorboard_pin')" 2>/dev/null; then
  echo "setup: pip installing tensorboard==$tensorboard_pin into $tools (scripts/tensorboard.py)" >&2
  if ! { [[ -x "$tools/bin/python" ]] || python3 -m venv "$tools" >&2; } ||
    ! "$tools/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      "tensorboard==$tensorboard_pin" >&2; then
    echo "setup: warning: could not install tensorboard into $tools; scripts/tensorboard.py" \
      "needs it (rerun scripts/setup.sh none)" >&2
  fi
fi

# The Python environment of the Hugging Face checks (scripts/hf-env.sh: the torch 2.11 venv of
# scripts/torch-cuda.sh, about 760 MB to download once and shared by every clone, plus pinned
# transformers, safetensors and tokenizers from PyPI), which e2e tests and autoloco-prepare
# --tokenizer hf need. Installed when the tests are built (a PRESET other than none, without
# "apps") or with AUTOLOCO_HF_VENV=1; AUTOLOCO_HF_VENV=0 skips it. Without PyPI only a warning:
# the tests that need it then fail, saying to run scripts/hf-env.sh.
hf_venv=${AUTOLOCO_HF_VENV:-}
if [[ -z "$hf_venv" ]]; then
  hf_venv=1
  [[ "$preset" == none || "${2:-}" == apps ]] && hf_venv=0
fi
if [[ "$hf_venv" != 0 ]] && ! scripts/hf-env.sh >/dev/null; then
  echo "setup: warning: scripts/hf-env.sh failed (see above); the Hugging Face tests and" \
    "autoloco-prepare --tokenizer hf need it (rerun scripts/hf-env.sh)" >&2
fi

[[ "$preset" == none ]] && exit 0
cmake --preset "$preset" >/dev/null
targets=()
[[ "${2:-}" == apps ]] && targets=(--target autoloco-train autoloco-prepare autoloco-bench)
cmake --build --preset "$preset" "${targets[@]}" -- -j"$(getconf _NPROCESSORS_ONLN)"
echo "setup: built build/$preset" >&2
