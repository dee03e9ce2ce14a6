#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (token shards, manifest.json, the YAML config with
# --set, HDF5 checkpoint files, the prepare.json beside shards, safetensors files and their
# index, the lighthouse's control messages and handshake, autoloco-prepare's json lines and
# parquet readers) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into build/fuzz, and runs each for a given time.
#   scripts/fuzz.sh [--seconds N] [--jobs J] [TARGET...]
#   TARGET: shard, manifest, config, checkpoint, prepared, safetensors, control, rows, parquet
#   (default: all); N seconds per target (default 60);
#   J targets fuzzed at once (default 1).
# Each target starts from its committed seeds (tests/fuzz/corpus/<target>, never written to) and
# the corpus it grew before (build/fuzz/corpus/<target>, where new inputs go). A crash, hang,
# sanitizer report or excessive allocation is a finding: its input lands in
# build/fuzz/findings/<target>/, the log in build/fuzz/logs/<target>.log, and the script exits 1.
# Reproduce one with build/fuzz/fuzz_<target> <file> (for the checkpoint target with
# LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp). Needs clang and its libFuzzer runtime (Debian:
# clang-14 libclang-rt-14-dev; scripts/setup.sh installs them); FUZZ_CXX picks another clang++.
# tests/fuzz/README.md says more.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(shard manifest config checkpoint prepared safetensors control rows parquet)
seconds=60
jobs=1
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      [[ " ${all_targets[*]} " == *" $1 "* ]] ||
        { echo "fuzz.sh: unknown target '$1' (one of: ${all_targets[*]})" >&2; exit 2; }
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: --seconds must be a positive integer" >&2; exit 2; }
[[ $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]] || { echo "fuzz.sh: --jobs must be a positive integer" >&2; exit 2; }

# clang with libFuzzer's runtime (a separate package on Debian).
cc=${FUZZ_CC:-} cxx=${FUZZ_CXX:-}
if [[ -z "$cxx" ]]; then
  for v in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$v" >/dev/null; then cxx=$v; cc=${v/clang++/clang}; break; fi
  done
fi
[[ -z "$cc" ]] && cc=${cxx/clang++/clang}
if [[ -z "$cxx" ]] || ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: ${cxx:-clang++} not found; install it (Debian 12: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi
runtime=$("$cxx" -print-file-name="libclang_rt.fuzzer-$(uname -m).a")
if [[ ! -f "$runtime" ]]; then
  version=$("$cxx" -dumpversion); version=${version%%.*}
  echo "fuzz.sh: $cxx has no libFuzzer runtime (libclang_rt.fuzzer-$(uname -m).a); install it" \
    "(Debian: apt-get install libclang-rt-$version-dev)" >&2
  exit 1
fi

build=build/fuzz
config=(-S tests/fuzz -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx")
command -v ninja >/dev/null && [[ ! -f $build/Makefile ]] && config+=(-G Ninja)
if command -v ccache >/dev/null; then
  config+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
start=$SECONDS
cmake "${config[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"
echo "fuzz.sh: built ${targets[*]} in $((SECONDS - start)) s" >&2

# Runs one target for $seconds; prints its line of the summary; returns 1 on a finding.
run_target() {
  local t=$1 corpus=$build/corpus/$1 findings=$build/findings/$1/ log=$build/logs/$1.log
  local extra=() rc=0  # the target's own flags
  mkdir -p "$corpus" "$findings" "$build/logs"
  [[ $t == config ]] && cp configs/*.yaml "$corpus"/
  [[ -f tests/fuzz/$t.dict ]] && extra=(-dict="tests/fuzz/$t.dict")
  # A damaged header of an old-format HDF5 file makes libhdf5 malloc a buffer of the size it
  # claims (GBs to EBs), which it never touches: it fails with an error instead, or gets NULL and
  # fails. For the checkpoint target single allocations are not limited then (only C++'s new
  # still reports an impossible size), and memory in use stays capped by -rss_limit_mb.
  local asan=${ASAN_OPTIONS:-}
  if [[ $t == checkpoint ]]; then
    extra+=(-malloc_limit_mb=1048576)
    asan=${asan:+$asan:}allocator_may_return_null=1
  fi
  # -timeout: one input taking this long is a hang; -rss_limit_mb also caps single allocations.
  ASAN_OPTIONS=$asan LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp:print_suppressions=0 \
    "$build/fuzz_$t" "$corpus" "tests/fuzz/corpus/$t" "${extra[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
    -artifact_prefix="$findings" >"$log" 2>&1 || rc=$?
  local runs rate units
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  # The corpus libFuzzer kept (its last status line), not every file it ever added.
  units=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1 | cut -d' ' -f2)
  if ((rc == 0)); then
    printf 'fuzz.sh: %-10s %10s runs %7s exec/s  corpus %10s  no findings\n' \
      "$t" "${runs:-?}" "${rate:-?}" "${units:-?}"
    return 0
  fi
  local artifact
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
  if [[ -z "$artifact" ]]; then
    printf 'fuzz.sh: %-10s stopped with exit code %s and no input saved (log %s)\n' "$t" "$rc" "$log"
    return 1
  fi
  local what
  what=$(grep -m 1 -E '^terminate called|^==[0-9]+== ?ERROR|runtime error|^fuzz finding' "$log" ||
    echo "exit code $rc")
  printf 'fuzz.sh: %-10s %10s runs %7s exec/s  corpus %10s  FINDING: %s (log %s; reproduce: %s %s)\n' \
    "$t" "${runs:-?}" "${rate:-?}" "${units:-?}" "$what" "$log" "$build/fuzz_$t" "$artifact"
  return 1
}

status=0
pids=()
for t in "${targets[@]}"; do
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
  run_target "$t" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
echo "fuzz.sh: done in $((SECONDS - start)) s$( ((status)) && echo ': findings above')" >&2
exit "$status"
