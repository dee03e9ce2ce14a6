#!/usr/bin/env bash
# torch-cuda.sh: provide LibTorch 2.11.0 built for CUDA 13.0 (the libtorch inside the PyPI
# `torch==2.11.0` wheel) for building autoloco's CUDA/NCCL configuration.
#
# Creates (or reuses) a Python venv outside the repository, at
#   ${AUTOLOCO_TORCH_VENV:-$HOME/.cache/autoloco/torch-2.11.0}
# so fresh clones share it, and pip installs into it, with --no-deps and pinned versions:
#   torch==2.11.0                 headers, libtorch*.so, CMake config (530 MB wheel, 1.2 GB unpacked)
#   nvidia-cusparselt-cu13==0.8.0 libcusparseLt.so.0   (170 MB wheel; NEEDED by libtorch_cuda.so)
#   nvidia-nvshmem-cu13==3.4.5    libnvshmem_host.so.3 (60 MB wheel; NEEDED by libtorch_nvshmem.so)
#   nvidia-cufile==1.15.1.6       libcufile.so.0       (1.2 MB wheel; NEEDED by libtorch_cuda.so)
# The other CUDA libraries torch needs (cudart 13, cuBLAS 13, cuFFT 12, cuSPARSE 12, cuRAND 10,
# cuDNN 9, NCCL 2) come from the system CUDA 13.0 toolkit (/usr/local/cuda). The three extras land
# in site-packages/nvidia/..., where torch's own RUNPATH ($ORIGIN/../../nvidia/...) finds them, both
# at link time and at run time. None of this needs a GPU: on a machine without one the binaries
# link, and run on the CPU (torch::cuda::is_available() is false).
#
# Usage:
#   prefix=$(scripts/torch-cuda.sh | tail -1)
#   cmake -S . -B build -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DTORCH_CUDA_ARCH_LIST=9.0
# The last line of stdout is the CMake prefix path (the wheel's torch/ directory: it holds
# share/cmake/Torch and lib/, so find_library() in TorchConfig.cmake finds the wheel's libc10.so
# and not Debian's /usr/lib/x86_64-linux-gnu/libc10.so). Progress goes to stderr.
#
# Running the built binaries needs no LD_LIBRARY_PATH when /usr/local/cuda's library directory is
# in the ld.so cache (ldconfig); otherwise run them with
#   LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# (the executable's RUNPATH covers torch/lib, but libtorch_cuda.so looks up cuBLAS, cuDNN, ... by
# its own RUNPATH and then the system search path).
#
# Environment: AUTOLOCO_TORCH_VENV (venv location), AUTOLOCO_PYTHON (interpreter used to create the
# venv; default python3, which needs Debian's python3-venv), PIP_* (passed through to pip).
set -euo pipefail

readonly TORCH_VERSION_PIN=2.11.0
readonly PACKAGES=(
  "torch==${TORCH_VERSION_PIN}"
  "nvidia-cusparselt-cu13==0.8.0"
  "nvidia-nvshmem-cu13==3.4.5"
  "nvidia-cufile==1.15.1.6"
)

venv=${AUTOLOCO_TORCH_VENV:-$HOME/.cache/autoloco/torch-${TORCH_VERSION_PIN}}
python=${AUTOLOCO_PYTHON:-python3}

log() { printf 'torch-cuda.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

if [[ ! -x "$venv/bin/python" ]]; then
  command -v "$python" >/dev/null 2>&1 || die "'$python' not found; install python3 (and python3-venv) or set AUTOLOCO_PYTHON"
  log "creating venv $venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv" >&2 ||
    die "'$python -m venv $venv' failed (on Debian: apt-get install python3-venv)"
fi

site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') ||
  die "cannot run $venv/bin/python; remove $venv and rerun"
torch_dir="$site/torch"
stamp="$venv/.autoloco-torch-cuda"
want=$(printf '%s\n' "${PACKAGES[@]}")

installed_ok() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    [[ -f "$torch_dir/share/cmake/Torch/TorchConfig.cmake" ]] &&
    [[ -f "$torch_dir/lib/libtorch_cuda.so" ]] &&
    [[ -f "$site/nvidia/cusparselt/lib/libcusparseLt.so.0" ]] &&
    [[ -f "$site/nvidia/nvshmem/lib/libnvshmem_host.so.3" ]] &&
    [[ -f "$site/nvidia/cu13/lib/libcufile.so.0" ]]
}

if installed_ok; then
  log "reusing $venv"
else
  log "pip installing into $venv: ${PACKAGES[*]} (about 760 MB to download, 1.5 GB on disk)"
  # torch's pip dependencies (sympy, triton, the nvidia-* CUDA runtime wheels, ...) are not
  # needed to build C++ against libtorch, hence --no-deps.
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --no-deps \
    "${PACKAGES[@]}" >&2; then
    die "pip could not install ${PACKAGES[*]} into $venv (network, PyPI mirror or disk space?)"
  fi
  grep -q "^cuda[^=]*= *'13\." "$torch_dir/version.py" ||
    die "$torch_dir is not a CUDA 13 build of torch ($(grep -h '^__version__' "$torch_dir/version.py" || true))"
  printf '%s\n' "$want" >"$stamp"
  installed_ok || die "install finished but expected files are missing under $site"
fi

# Tell the caller early if the system toolkit lacks something libtorch_cuda.so needs at run time.
if command -v ldd >/dev/null 2>&1; then
  missing=$(ldd "$torch_dir/lib/libtorch_cuda.so" "$torch_dir/lib/libtorch_cuda_linalg.so" 2>/dev/null |
    awk '/not found/ {print $1}' | sort -u | tr '\n' ' ') || true
  if [[ -n "$missing" ]]; then
    log "warning: not found by the dynamic loader: $missing"
    log "  (install the CUDA 13.0 toolkit, cuDNN 9 and NCCL 2 under /usr/local/cuda, and run the"
    log "  binaries with LD_LIBRARY_PATH=/usr/local/cuda/lib64 if that is not in the ld.so cache)"
  fi
fi

log "CMAKE_PREFIX_PATH=$torch_dir"
printf '%s\n' "$torch_dir"
