#!/usr/bin/env bash
# Quickstart: sets up if needed, prepares the default corpus (the Python documentation sources
# from Debian's python3-doc), trains configs/quickstart.yaml under mpirun and prints where the
# results are.
#   scripts/run.sh [--ranks N] [extra autoloco-train args, e.g. --set run.steps=100]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ranks=2
if [[ "${1:-}" == "--ranks" ]]; then ranks=$2; shift 2; fi

scripts/setup.sh release apps
bin=build/release/apps

data=data/pydoc
scripts/prepare-data.sh "$bin"

name="quickstart-$(date +%Y%m%d-%H%M%S)"
mpirun -n "$ranks" "$bin/autoloco-train" configs/quickstart.yaml \
  --set topology.ranks_per_dc="$ranks" --set run.name="$name" "$@"

run_dir="runs/$name"
echo
echo "results in $run_dir: config.yaml, metrics.jsonl, summary.json"
"$AUTOLOCO_PYTHON" - "$run_dir" "$data/prepare.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
p = json.load(open(sys.argv[2]))
h = p["val_unigram_entropy_nats"]
print(f"steps {s['steps']}, tokens {s['tokens']}, wall {s['wall_s']:.0f} s, "
      f"final eval loss {s['final_eval_loss']:.4f} nats "
      f"({100 * s['final_eval_loss'] / h:.1f}% of the val unigram byte entropy {h:.4f})")
PY
