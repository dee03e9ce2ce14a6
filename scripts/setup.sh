#!/usr/bin/env bash
# Installs what autoloco needs on Debian 12 (idempotent), then configures and builds.
#   scripts/setup.sh [PRESET [apps]]   PRESET: release (default), ci, debug, asan, tsan, or none
# "none" installs the packages only; "apps" builds only the executables (not the tests).
# $AUTOLOCO_CMAKE_ARGS (word-split) is added to the configure step.
# Packages are installed only when missing; as root or through sudo. Nothing outside the
# system package manager is fetched, except from PyPI: LibTorch, as the pinned torch==2.11.0
# wheel (scripts/torch-cuda.sh, into a venv under ~/.cache/autoloco shared by every clone), the
# pinned tensorboard into the venv .venv-tools/ (scripts/tensorboard.py; AUTOLOCO_TOOLS_VENV=0
# skips it), and the Hugging Face packages of scripts/hf-env.sh (transformers, ... beside that
# torch; AUTOLOCO_HF_VENV=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

packages=(
  cmake ninja-build g++ pkg-config ccache   # ccache: rebuilds of unchanged files are instant
  libopenmpi-dev openmpi-bin                 # launch and communication
  libhdf5-dev zlib1g-dev libyaml-cpp-dev libfmt-dev catch2
  libsentencepiece-dev sentencepiece         # autoloco-prepare --tokenizer sentencepiece; spm_encode
  libzstd-dev rapidjson-dev                  # autoloco-prepare: zstd json lines, json parsing
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
# LibTorch for every preset: the pinned wheel, where CMake finds it by itself
# (third_party/cmake/AutolocoDependencies.cmake). Already installed when hf-env.sh ran.
scripts/torch-cuda.sh >/dev/null
read -r -a cmake_args <<<"${AUTOLOCO_CMAKE_ARGS:-}"
cmake --preset "$preset" "${cmake_args[@]}" >/dev/null
targets=()
[[ "${2:-}" == apps ]] && targets=(--target autoloco-train autoloco-prepare autoloco-bench)
cmake --build --preset "$preset" "${targets[@]}" -- -j"$(getconf _NPROCESSORS_ONLN)"
echo "setup: built build/$preset" >&2
