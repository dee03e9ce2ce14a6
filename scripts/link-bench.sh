#!/usr/bin/env bash
# The WAN model held against real links: autoloco-bench --comm --link-gbps across the hosts of a
# network lab (scripts/netlab.sh), one dc of one rank per host, for several shaped rates and dc
# counts. Writes OUT/G<g>-<rate>mbit.json per measurement and prints the table of
# docs/results.md ("The WAN model against shaped links").
#   scripts/link-bench.sh [--out DIR] [--rates "50 200 800"] [--dcs "2 4"] [--sizes n1,n2,...]
#                         [--iters I] [--bin DIR] [--open-mpi-defaults]
# Sizes are fp32 values of the all-reduced vector (default 64 KiB to 64 MiB). Needs root.
# --open-mpi-defaults measures without netlab.sh run's TCP tuning (docs/multi-host.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=runs/link-bench
rates="50 200 800"
dcs="2 4"
sizes=16384,262144,1048576,4194304,16777216
iters=5
bin=build/release/apps
tuning=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --dcs) dcs=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --open-mpi-defaults) tuning=(--open-mpi-defaults); shift ;;
    *) echo "link-bench: unknown option '$1' (see the top of $0)" >&2; exit 1 ;;
  esac
done
bench=$(readlink -f "$bin/autoloco-bench")
[[ -x $bench ]] || { echo "link-bench: no $bench: build first (scripts/setup.sh release)" >&2; exit 1; }
mkdir -p "$out"
max_dcs=$(tr ' ' '\n' <<<"$dcs" | sort -n | tail -1)
lab=linkbench
# One lab for every measurement, reshaped between them; removed however the script ends.
scripts/netlab.sh down --name "$lab" 2>/dev/null || true
trap 'scripts/netlab.sh down --name "$lab"' EXIT
scripts/netlab.sh up "$max_dcs" --name "$lab" >&2
for g in $dcs; do
  for r in $rates; do
    scripts/netlab.sh shape --name "$lab" --rate "${r}mbit"
    gbps=$(awk -v r="$r" 'BEGIN { print r / 1000 }')
    echo "link-bench: G=$g at ${r} Mbit/s" >&2
    scripts/netlab.sh run --name "$lab" --dcs "$g" --ranks-per-dc 1 "${tuning[@]}" -- "$bench" --comm \
      --link-gbps "$gbps" --sizes "$sizes" --iters "$iters" --warmup 1 >"$out/G$g-${r}mbit.json"
  done
done
"$AUTOLOCO_PYTHON" - "$out" <<'PY'
import glob, json, os, sys

rows = []
for path in glob.glob(os.path.join(sys.argv[1], "G*-*mbit.json")):
    d = json.load(open(path))
    for r in d["link"]["results"]:
        rows.append((d["dcs"], d["link"]["rate_gbps"] * 1000, d["link"]["latency_ms"], r))
rows.sort(key=lambda x: (x[0], x[1], x[3]["bytes"]))
print("| G | rate, Mbit/s | latency, ms | message | measured, s | model at the rate, s (error) | "
      "model at the goodput, s (error) | busbw, Mbit/s | busbw / rate |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for g, rate, lat, r in rows:
    mib = r["bytes"] / 2**20
    size = f"{mib:g} MiB" if mib >= 1 else f"{r['bytes'] // 1024} KiB"
    print(f"| {g} | {rate:g} | {lat:.3f} | {size} | {r['measured_s']:.4f} | "
          f"{r['model_s']:.4f} ({100 * r['model_error']:+.1f}%) | "
          f"{r['model_goodput_s']:.4f} ({100 * r['model_goodput_error']:+.1f}%) | "
          f"{1000 * r['busbw_gbps']:.1f} | {r['busbw_of_rate']:.3f} |")
PY
