#!/usr/bin/env bash
# Quickstart: sets up if needed, prepares the default corpus (the Python documentation sources
# from Debian's python3-doc), trains configs/quickstart.yaml (AutoLoCo, 4 dcs of one rank) under
# mpirun, and prints its rounds, inter-dc bytes and eval loss next to what ddp would have sent
# for the same tokens.
#   scripts/run.sh [--ranks N] [extra autoloco-train args, e.g. --set run.steps=100]
# N ranks make N dcs of one rank (default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ranks=4
if [[ "${1:-}" == "--ranks" ]]; then ranks=$2; shift 2; fi

scripts/setup.sh release apps
bin=build/release/apps

data=data/pydoc
scripts/prepare-data.sh "$bin"

name="quickstart-$(date +%Y%m%d-%H%M%S)"
mpirun -n "$ranks" "$bin/autoloco-train" configs/quickstart.yaml \
  --set run.name="$name" "$@"

run_dir="runs/$name"
echo
echo "results in $run_dir: config.yaml, metrics.jsonl, summary.json"
"$AUTOLOCO_PYTHON" - "$run_dir" "$data/prepare.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
p = json.load(open(sys.argv[2]))


def si(x):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


h = p["val_unigram_entropy_nats"]
print(f"steps {s['steps']}, tokens {s['tokens']}, wall {s['wall_s']:.0f} s, "
      f"final eval loss {s['final_eval_loss']:.4f} nats "
      f"({100 * s['final_eval_loss'] / h:.1f}% of the val unigram byte entropy {h:.4f}), "
      f"{s['final_eval_bpb']:.4f} bits per byte")
if s["num_dcs"] > 1 and s["rounds"] > 0:
    # ddp all-reduces a gradient of the same size as a pseudo-gradient at every step.
    per_round = s["inter_dc_bytes"] / s["rounds"]
    hs = s["h_per_round"][:-1] or s["h_per_round"]  # the last round may be cut short by the end
    print(f"{s['method']} ({s['controller']}): {s['rounds']} rounds, H from {min(hs)} to "
          f"{max(hs)}, {si(s['inter_dc_bytes'])} over the inter-dc link, "
          f"{s['link_s']:.1f} s of simulated link time")
    print(f"ddp for the same tokens: {s['steps']} rounds, {si(per_round * s['steps'])} "
          f"({s['steps'] / s['rounds']:.1f}x the rounds and bytes)")
PY
