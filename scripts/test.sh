#!/usr/bin/env bash
# Sets up if needed, builds, and runs the whole test suite (CTest: unit, mpi, e2e, net, slurm,
# and gpu, which skips without a GPU).
#   scripts/test.sh [PRESET] [ctest args...]   PRESET: release (default), ci, debug, asan, tsan,
#                                              cuda
#   scripts/test.sh --offline-check            configure the cuda preset only (below)
# release is the one build that scripts/run.sh uses too; ci is that same build (build/release)
# with warnings as errors and the CUDA/NCCL code required, which CI (.ci/run) runs: after it,
# scripts/run.sh compiles nothing. $AUTOLOCO_CMAKE_ARGS (word-split) is added to the configure
# step.
#
# The cuda preset is the configuration of a GPU machine without a package registry: LibTorch
# from the pinned torch==2.11.0 wheel (scripts/torch-cuda.sh), and MPI, HDF5, yaml-cpp, fmt,
# Catch2 and the zlib headers from the offline bundle (scripts/offline-bundle.sh, unpacked by
# scripts/offline-install.sh into .offline-prefix), with the system's /usr hidden from CMake.
# `scripts/test.sh cuda` checks that CMake found each of them in the prefix, builds it and runs
# its unit, mpi and gpu suites; --offline-check stops after the check (a configure of a few
# seconds, no build: what CI keeps of it). AUTOLOCO_OFFLINE=0 configures it against the system's
# packages instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
preset=${1:-release}
shift || true
read -r -a cmake_args <<<"${AUTOLOCO_CMAKE_ARGS:-}"

# Every package CMake found must lie under the offline prefix: a find that fell through to the
# system would pass here and fail on a machine that has no such package.
check_found_in_prefix() {
  local cache=$1/CMakeCache.txt prefix=$2 var value bad=0
  for var in MPI_C_HEADER_DIR MPI_mpi_LIBRARY MPIEXEC_EXECUTABLE HDF5_C_INCLUDE_DIR \
    HDF5_hdf5_LIBRARY_RELEASE ZLIB_INCLUDE_DIR yaml-cpp_DIR fmt_DIR Catch2_DIR zstd_DIR \
    RAPIDJSON_INCLUDE_DIR; do
    value=$(sed -n "s|^$var:[A-Z]*=||p" "$cache")
    if [[ "$value" != "$prefix"/* ]]; then
      echo "test.sh: $var is '$value', not under the offline prefix $prefix" >&2
      bad=1
    fi
  done
  ((bad == 0)) || { echo "test.sh: the cuda build found system packages; see above" >&2; exit 1; }
  echo "test.sh: MPI, HDF5, zlib, yaml-cpp, fmt, Catch2, zstd and RapidJSON all found under" \
    "$prefix" >&2
}

configure_cuda() {
  scripts/setup.sh none
  AUTOLOCO_TORCH_PREFIX=$(scripts/torch-cuda.sh | tail -n 1)
  export AUTOLOCO_TORCH_PREFIX
  if [[ "${AUTOLOCO_OFFLINE:-1}" != 0 ]]; then
    scripts/offline-bundle.sh --out .offline-bundle
    scripts/offline-install.sh .offline-bundle .offline-prefix
    source .offline-prefix/env.sh
    export AUTOLOCO_IGNORE_PREFIX_PATH=/usr
  fi
  cmake --preset cuda "${cmake_args[@]}" >/dev/null
  if [[ "${AUTOLOCO_OFFLINE:-1}" != 0 ]]; then
    check_found_in_prefix build/cuda "$AUTOLOCO_OFFLINE_PREFIX"
  fi
}

case "$preset" in
  --offline-check)
    configure_cuda
    exit 0
    ;;
  cuda)
    configure_cuda
    cmake --build --preset cuda -- -j"$(getconf _NPROCESSORS_ONLN)"
    ;;
  *) scripts/setup.sh "$preset" ;;
esac
ctest --preset "$preset" -j"$(getconf _NPROCESSORS_ONLN)" "$@"
