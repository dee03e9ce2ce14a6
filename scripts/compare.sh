#!/usr/bin/env bash
# Runs several configs one after another under mpirun with the same data and tokens, into one
# output directory, and prints a Markdown table of their summaries (scripts/results_table.py).
#   scripts/compare.sh [--ranks N] [--out DIR] [--tag TAG] [--bin DIR] CONFIG.yaml... [-- extra autoloco-train args]
# Each run is named after its config (plus -TAG), e.g. diloco-h50 for
#   scripts/compare.sh --out runs/x --tag h50 configs/diloco.yaml -- --set interval.H=50
# Example (the table in docs/results.md):
#   scripts/compare.sh --ranks 4 configs/ddp.yaml configs/diloco.yaml
# Runs one at a time so that each one's wall-clock and simulated time are its own. --bin DIR
# runs the executables in DIR (a copy of a build, so that a rebuild cannot change a running
# comparison) instead of building build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ranks=4
out="runs/compare-$(date +%Y%m%d-%H%M%S)"
tag=""
configs=()
bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --) shift; break ;;
    *) configs+=("$1"); shift ;;
  esac
done
[[ ${#configs[@]} -gt 0 ]] || { echo "usage: $0 [--ranks N] [--out DIR] [--tag TAG] [--bin DIR] CONFIG.yaml... [-- args]" >&2; exit 2; }

if [[ -z "$bin" ]]; then
  scripts/setup.sh release apps
  bin=build/release/apps
fi
[[ -x "$bin/autoloco-train" ]] || { echo "compare: no autoloco-train in $bin (--bin)" >&2; exit 2; }
scripts/prepare-data.sh "$bin"

for config in "${configs[@]}"; do
  name=$(basename "$config" .yaml)${tag:+-$tag}
  if [[ -f "$out/$name/summary.json" ]]; then
    echo "compare: $out/$name is done, skipping" >&2
    continue
  fi
  echo "compare: $config -> $out/$name ($ranks ranks)" >&2
  mpirun -n "$ranks" "$bin/autoloco-train" "$config" --set run.out_dir="$out" \
    --set run.name="$name" "$@"
done
"$AUTOLOCO_PYTHON" scripts/results_table.py "$out"/*/summary.json | tee "$out/table.md"
echo "compare: table in $out/table.md" >&2
