#!/usr/bin/env bash
# gpu-check.sh: the GPU check of issue 7, in one run on a machine with an NVIDIA GPU, PyTorch
# (CUDA) and nvcc but no network: installs the offline bundle (MPI, HDF5, yaml-cpp, fmt, ...),
# builds autoloco against the python torch package's LibTorch and NCCL (the system's, else the
# nvidia-nccl-cu13 wheel's), runs the gpu-labelled tests, then
# `autoloco-bench --train configs/gpt2-small.yaml` as 1 dc on the GPU and as 2 and 4 simulated
# dcs (one rank each) sharing it, and configs/llama-3.2-1b.yaml as 1 dc, then
# `autoloco-bench --optimizer` (Muon's inner step against AdamW's), and prints a table.
#
#   scripts/gpu-check.sh [--skip-build | --build-only] [--no-tests] [--no-bench] [--cpu-smoke]
#
#   --skip-build  use the existing build in the build directory (no configure, no build) and
#                 the installed bundle when PREFIX/env.sh exists
#   --no-tests    do not run (or build) the gpu tests
#   --no-bench    do not run the benchmarks
#   --build-only  install, configure and build (the bench and the gpu tests), run nothing
#   --cpu-smoke   check this script on a machine without a GPU: no nvidia-smi, no build (the build
#                 directory must hold a CPU build, e.g. AUTOLOCO_GPU_BUILD_DIR=build/release), the
#                 benches on the CPU with a tiny model
#
# Environment:
#   AUTOLOCO_BUNDLE          offline bundle to install (default .offline-bundle)
#   AUTOLOCO_OFFLINE_PREFIX  where to install it (default .offline-prefix)
#   AUTOLOCO_SKIP_INSTALL=1  skip the install and use the MPI on PATH
#   AUTOLOCO_GPU_BUILD_DIR   build directory (default build/gpu)
#   AUTOLOCO_GPU_TARGETS     targets to build (default: autoloco-bench and autoloco_gpu_tests, as
#                            the flags need them; "all" builds everything)
#   AUTOLOCO_GPU_CMAKE_ARGS  extra arguments for the configure step (word-split)
#   AUTOLOCO_GPU_PYTHON      the python whose torch and nvidia-nccl are used (default python3)
#   AUTOLOCO_GPU_STEPS, AUTOLOCO_GPU_WARMUP, AUTOLOCO_GPU_H   timed steps, warm-up steps and
#                            interval.H of each bench (default 30, 10, 10: 3 rounds timed)
#   AUTOLOCO_GPU_BENCH_TIMEOUT, AUTOLOCO_GPU_TEST_TIMEOUT     seconds (default 150, 240)
#   OUT                      if set (the device tool's output folder): receives gpu-check.log (the
#                            whole output), bench.jsonl, bench-*.err and ctest's LastTest.log
#
# Time budget: the whole script must fit in 10 minutes on one H200 with 16 cores. Expected: the
# install under a minute, configure and build of the two targets a few minutes, the gpu tests
# well under a minute (those needing two GPUs skip), each bench well under a minute (startup
# dominates: 40 steps of GPT-2 small at 16 x 1024 tokens take seconds). Every phase prints its
# duration, and each test run and bench has a timeout, so one hang cannot eat the budget. The
# build is the uncertain part (autoloco::core against LibTorch 2.x is about an hour of CPU time):
# where one call is limited, build first and measure in a second call on the same machine:
#   scripts/gpu-check.sh --build-only && scripts/gpu-check.sh --skip-build
#
# Exit status: 0 when every step passed; otherwise 1, after printing what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

skip_build=0 no_tests=0 no_bench=0 cpu_smoke=0 build_only=0
for arg in "$@"; do
  case "$arg" in
    --skip-build) skip_build=1 ;;
    --no-tests) no_tests=1 ;;
    --no-bench) no_bench=1 ;;
    --build-only) build_only=1 ;;
    --cpu-smoke) cpu_smoke=1 skip_build=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "gpu-check.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done

build_dir=${AUTOLOCO_GPU_BUILD_DIR:-build/gpu}
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
bundle=${AUTOLOCO_BUNDLE:-.offline-bundle}
prefix=${AUTOLOCO_OFFLINE_PREFIX:-.offline-prefix}
[[ "$prefix" == /* ]] || prefix="$root/$prefix"
# Resolved now: the bundle's env.sh may put other directories first on PATH.
python=$(command -v "${AUTOLOCO_GPU_PYTHON:-python3}" || true)
steps=${AUTOLOCO_GPU_STEPS:-30}
warmup=${AUTOLOCO_GPU_WARMUP:-10}
interval=${AUTOLOCO_GPU_H:-10}
bench_timeout=${AUTOLOCO_GPU_BENCH_TIMEOUT:-150}
test_timeout=${AUTOLOCO_GPU_TEST_TIMEOUT:-240}
cores=$(getconf _NPROCESSORS_ONLN)

# Everything this run writes besides the build: logs, bench output.
work="$build_dir/gpu-check"
mkdir -p "$work"
rm -f "$work"/bench.jsonl "$work"/bench-*.out "$work"/bench-*.err "$work"/LastTest.log
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  exec > >(tee "$work/gpu-check.log" "$OUT/gpu-check.log") 2>&1
else
  exec > >(tee "$work/gpu-check.log") 2>&1
fi
tee_pid=$!

# shellcheck source=scripts/env.sh
source scripts/env.sh

failures=()
tests_result="not run"
phase_start=$SECONDS
say() { printf '\n== gpu-check: %s (at %ds)\n' "$*" "$SECONDS"; }
fail() {
  failures+=("$1")
  printf 'gpu-check: FAILED: %s\n' "$1"
}

# Lets tee write the last lines before the script (and so the device tool) is done.
end_log() {
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
}

# Table, copies to $OUT, verdict: also when a step that later ones need failed.
finish() {
  local rc=$?
  set +e
  say "summary"
  if [[ -s "$work/bench.jsonl" && -n "$python" ]]; then
    "$python" - "$work/bench.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
def f(v, fmt):
    return "-" if v is None else format(v, fmt)
head = ("config", "ranks", "dcs", "device", "tokens/s", "inner tok/s", "MFU inner", "MFU",
        "outer round s", "inner frac")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join([
        r.get("label", "?"), str(r["world_size"]), str(r["num_dcs"]), r["device"],
        f(r.get("tokens_per_s"), ",.0f"), f(r.get("inner_tokens_per_s"), ",.0f"),
        f(r.get("mfu_inner"), ".3f"), f(r.get("mfu"), ".3f"),
        f(r.get("outer_round_s"), ".4f"), f(r.get("inner_fraction"), ".3f")]) + " |")
EOF
  else
    echo "(no bench results)"
  fi
  echo "gpu tests: $tests_result"
  if [[ -n "${OUT:-}" ]]; then
    cp "$work"/bench.jsonl "$work"/bench-*.err "$work"/LastTest.log "$OUT"/ 2>/dev/null
  fi
  if [[ $rc -ne 0 && ${#failures[@]} -eq 0 ]]; then failures+=("the script itself (exit $rc)"); fi
  if ((${#failures[@]})); then
    printf 'gpu-check: %d step(s) failed:\n' "${#failures[@]}"
    printf '  - %s\n' "${failures[@]}"
    echo "gpu-check: done in ${SECONDS}s: FAILED"
    end_log
    exit 1
  fi
  echo "gpu-check: done in ${SECONDS}s: all passed"
  end_log
  exit 0
}
trap finish EXIT

# A step that later ones need: record the failure and stop (finish still reports).
abort() {
  fail "$1"
  exit 1
}

# --- (a) the machine -----------------------------------------------------------------------
say "machine"
if ((cpu_smoke)); then
  echo "CPU smoke run: no GPU expected"
elif command -v nvidia-smi >/dev/null; then
  nvidia-smi -L || fail "nvidia-smi -L"
else
  fail "nvidia-smi not found"
fi
if [[ -n "$python" ]]; then
  echo "python: $python"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"| GPUs visible:", torch.cuda.device_count())' 2>&1 | tail -n 3 || echo "python torch: not importable"
else
  echo "python3: not found"
fi

# --- (b) the offline bundle ----------------------------------------------------------------
if [[ "${AUTOLOCO_SKIP_INSTALL:-0}" == 1 ]]; then
  say "install skipped (AUTOLOCO_SKIP_INSTALL=1): MPI from PATH"
elif ((skip_build)) && [[ -f "$prefix/env.sh" ]]; then
  # A second call after a build-only one: the prefix that build used.
  say "reusing the installed bundle in $prefix"
  # shellcheck disable=SC1091
  source "$prefix/env.sh"
else
  say "installing $bundle into $prefix"
  [[ -x scripts/offline-install.sh ]] || abort "scripts/offline-install.sh is missing"
  scripts/offline-install.sh "$bundle" "$prefix" || abort "offline install of $bundle"
  [[ -f "$prefix/env.sh" ]] || abort "the install wrote no $prefix/env.sh"
  # shellcheck disable=SC1091
  source "$prefix/env.sh"
fi
mpiexec=$(command -v mpiexec || true)
[[ -n "$mpiexec" ]] || abort "no mpiexec on PATH"
echo "mpiexec: $mpiexec ($("$mpiexec" --version 2>&1 | head -n 1))"
echo "phase: $((SECONDS - phase_start))s"
phase_start=$SECONDS

# --- (c) LibTorch and NCCL -----------------------------------------------------------------
# Without importing torch (seconds, and CUDA initialisation): the package directories only.
py_package_dir() {
  [[ -n "$python" ]] || return 1
  "$python" - "$1" <<'EOF' 2>/dev/null
import importlib.util, os, sys
spec = importlib.util.find_spec(sys.argv[1])
# nvidia.nccl may be a namespace package: no __file__, only search locations.
paths = list(spec.submodule_search_locations or []) if spec else []
if spec and not paths and spec.origin:
    paths = [os.path.dirname(spec.origin)]
for p in paths:
    print(p)
EOF
}

# Prints the include directory and the library (two lines) of an NCCL, the system's first: /usr/local/cuda, the ld.so cache,
# then the pip wheel nvidia-nccl-cu13 (lib/libnccl.so.2 and include/nccl.h).
find_nccl() {
  local lib="" inc="" d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -z "$lib" && -e "$d/libnccl.so.2" ]] && lib="$d/libnccl.so.2"
  done
  if [[ -z "$lib" ]] && command -v ldconfig >/dev/null; then
    lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
  fi
  if [[ -n "$lib" ]]; then
    for d in /usr/local/cuda/include /usr/include "$(dirname "$lib")/../include"; do
      [[ -z "$inc" && -f "$d/nccl.h" ]] && inc="$d"
    done
  fi
  if [[ -z "$lib" || -z "$inc" ]]; then
    lib="" inc=""
    while read -r d; do
      [[ -n "$d" && -z "$lib" && -e "$d/lib/libnccl.so.2" && -f "$d/include/nccl.h" ]] || continue
      lib="$d/lib/libnccl.so.2" inc="$d/include"
    done < <(py_package_dir nvidia.nccl || true)
  fi
  [[ -n "$lib" && -n "$inc" ]] && printf '%s\n%s\n' "$(cd "$inc" && pwd)" "$lib"
}

say "LibTorch and NCCL"
torch_dir=$(py_package_dir torch | head -n 1 || true)
if [[ -n "$torch_dir" && -f "$torch_dir/share/cmake/Torch/TorchConfig.cmake" ]]; then
  echo "LibTorch: $torch_dir"
else
  echo "LibTorch: no torch package with share/cmake/Torch under ${python:-python3}"
  torch_dir=""
fi
if ! nccl=$(find_nccl); then
  echo "NCCL: not found (no libnccl.so.2 with nccl.h in /usr/local/cuda, the ld.so cache or the" \
    "nvidia-nccl wheel)"
elif ((skip_build)); then
  echo "NCCL: ${nccl#*$'\n'} (not needed: no build)"
else
  nccl_inc=${nccl%%$'\n'*} nccl_lib=${nccl#*$'\n'}
  # CMake looks for libnccl.so, which the wheel lacks (only libnccl.so.2): a directory of links
  # under the build, named by NCCL_HOME, serves either source (and keeps /usr out of the way of
  # CMAKE_IGNORE_PREFIX_PATH).
  shim="$build_dir/nccl-shim"
  mkdir -p "$shim/include" "$shim/lib"
  ln -sfn "$nccl_inc/nccl.h" "$shim/include/nccl.h"
  ln -sfn "$nccl_lib" "$shim/lib/libnccl.so.2"
  ln -sfn "$nccl_lib" "$shim/lib/libnccl.so"
  export NCCL_HOME="$shim"
  echo "NCCL: $nccl_lib (header in $nccl_inc); NCCL_HOME=$shim"
fi
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

# --- (d) configure and build ---------------------------------------------------------------
targets=()
((no_bench && !build_only)) || targets+=(autoloco-bench)
((no_tests && !build_only)) || targets+=(autoloco_gpu_tests)
if [[ -n "${AUTOLOCO_GPU_TARGETS:-}" ]]; then read -r -a targets <<<"$AUTOLOCO_GPU_TARGETS"; fi
if ((skip_build)); then
  say "build skipped: using $build_dir"
  [[ -f "$build_dir/CMakeCache.txt" ]] || abort "$build_dir holds no build (CMakeCache.txt)"
elif ((${#targets[@]})); then
  [[ -n "$torch_dir" ]] || abort "LibTorch not found: install torch for ${python:-python3}"
  [[ -n "${NCCL_HOME:-}" ]] || abort "NCCL not found: pip install nvidia-nccl-cu13"
  say "configuring $build_dir"
  configure=(cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOLOCO_CUDA=ON
    -DAUTOLOCO_WERROR=OFF -DTORCH_CUDA_ARCH_LIST=9.0
    "-DCMAKE_PREFIX_PATH=$torch_dir;$prefix/usr")
  ((no_tests && !build_only)) && configure+=(-DAUTOLOCO_BUILD_TESTS=OFF)
  read -r -a extra <<<"${AUTOLOCO_GPU_CMAKE_ARGS:-}"
  # /usr ignored so that the bundle's packages and the wheel's LibTorch win over anything the
  # system has; CMake then also misses system-only headers (zlib's, say), hence the retry.
  if ! "${configure[@]}" -DCMAKE_IGNORE_PREFIX_PATH=/usr "${extra[@]}"; then
    echo "gpu-check: configure with CMAKE_IGNORE_PREFIX_PATH=/usr failed; retrying without it"
    "${configure[@]}" -DCMAKE_IGNORE_PREFIX_PATH= "${extra[@]}" || abort "configure"
  fi
  echo "phase: $((SECONDS - phase_start))s"
  phase_start=$SECONDS
  say "building ${targets[*]} on $cores cores"
  cmake --build "$build_dir" --target "${targets[@]}" -- -j"$cores" || abort "build"
fi
echo "phase: $((SECONDS - phase_start))s"
phase_start=$SECONDS
if ((build_only)); then
  no_tests=1 no_bench=1 tests_result="not run (--build-only)"
fi

# --- (e) the gpu tests ---------------------------------------------------------------------
if ((!no_tests)); then
  say "ctest -L gpu"
  no_tests_action=error
  ((cpu_smoke)) && no_tests_action=ignore # a CPU build has no gpu tests
  if timeout --kill-after=10 "$test_timeout" ctest --test-dir "$build_dir" -L gpu \
    --output-on-failure --no-tests="$no_tests_action" --timeout "$test_timeout"; then
    tests_result="passed"
  else
    tests_result="FAILED"
    fail "ctest -L gpu"
  fi
  cp "$build_dir/Testing/Temporary/LastTest.log" "$work/LastTest.log" 2>/dev/null || true
  if ((cpu_smoke)); then tests_result="$tests_result (CPU build: no gpu tests exist)"; fi
  echo "phase: $((SECONDS - phase_start))s"
  phase_start=$SECONDS
fi

# --- (f) the benches -----------------------------------------------------------------------
bench_overrides=(--set "interval.H=$interval" --set topology.ranks_per_dc=1)
if ((cpu_smoke)); then
  for kv in run.device=cpu model.n_layer=2 model.d_model=64 model.n_head=2 model.n_kv_head=0 \
    model.seq_len=64 model.vocab_size=256 data.batch_size=2 run.precision=fp32 run.threads=1; do
    bench_overrides+=(--set "$kv")
  done
fi

# run_bench LABEL NP [CONFIG]: one autoloco-bench --train under mpiexec (CONFIG default
# configs/gpt2-small.yaml); its JSON, labelled, goes to bench.jsonl.
run_bench() {
  local label=$1 np=$2 config=${3:-configs/gpt2-small.yaml} out="$work/bench-$1.out"
  local err="$work/bench-$1.err" json
  say "bench $label: $np rank(s)"
  if timeout --kill-after=10 "$bench_timeout" "$mpiexec" -n "$np" --oversubscribe \
    --allow-run-as-root --bind-to none "$build_dir/apps/autoloco-bench" --train \
    "$config" "${bench_overrides[@]}" --steps "$steps" --warmup "$warmup" \
    >"$out" 2>"$err"; then
    json=$(grep '^{"benchmark":"train"' "$out" | tail -n 1 || true)
    if [[ -n "$json" ]]; then
      echo "$json"
      echo "{\"label\":\"$label\",${json#\{}" >>"$work/bench.jsonl"
      return 0
    fi
    echo "(no JSON line in the output)"
  fi
  tail -n 20 "$err" "$out"
  fail "bench $label"
}

# run_optimizer_bench CONFIG: autoloco-bench --optimizer (inner.optimizer muon against adamw, and
# Newton-Schulz's share: issue 35) in one process; its JSON, labelled, goes to bench.jsonl.
run_optimizer_bench() {
  local config=$1 out="$work/bench-optimizer.out" err="$work/bench-optimizer.err" json
  say "bench optimizer: muon against adamw"
  if timeout --kill-after=10 "$bench_timeout" "$build_dir/apps/autoloco-bench" --optimizer \
    "$config" "${bench_overrides[@]}" --steps 10 --warmup 3 --repeats 2 >"$out" 2>"$err"; then
    json=$(grep '^{"benchmark":"optimizer"' "$out" | tail -n 1 || true)
    if [[ -n "$json" ]]; then
      echo "$json"
      echo "{\"label\":\"optimizer\",${json#\{}" >>"$work/bench.jsonl"
      return 0
    fi
    echo "(no JSON line in the output)"
  fi
  tail -n 20 "$err" "$out"
  fail "bench optimizer"
}

if ((!no_bench)); then
  [[ -x "$build_dir/apps/autoloco-bench" ]] || abort "$build_dir/apps/autoloco-bench is not built"
  run_bench 1dc 1
  run_bench 2dc 2
  run_bench 4dc 4
  # The llama preset's step time and MFU (issue 32): one dc on the GPU.
  run_bench llama-1b-1dc 1 configs/llama-3.2-1b.yaml
  # The Muon inner step against AdamW's, Newton-Schulz in bf16 (issue 35).
  run_optimizer_bench configs/gpt2-small.yaml
  echo "phase: $((SECONDS - phase_start))s"
fi
