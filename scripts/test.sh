#!/usr/bin/env bash
# Sets up if needed, builds, and runs the whole test suite (CTest: unit, mpi, e2e).
#   scripts/test.sh [PRESET] [ctest args...]    PRESET: ci (default), release, debug, asan, cuda
# The cuda preset builds against the pinned torch==2.11.0 wheel (scripts/torch-cuda.sh) and
# runs the CPU tests of that build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
preset=${1:-ci}
shift || true

if [[ "$preset" == cuda ]]; then
  scripts/setup.sh none
  AUTOLOCO_TORCH_PREFIX=$(scripts/torch-cuda.sh | tail -n 1)
  export AUTOLOCO_TORCH_PREFIX
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda -- -j"$(getconf _NPROCESSORS_ONLN)"
else
  scripts/setup.sh "$preset"
fi
ctest --preset "$preset" -j"$(getconf _NPROCESSORS_ONLN)" "$@"
