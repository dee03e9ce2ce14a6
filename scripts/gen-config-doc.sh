#!/usr/bin/env bash
# Regenerates docs/config.md from the key declarations (docs/config.md.in + --config-reference).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/apps/autoloco-train}
{ cat docs/config.md.in; "$bin" --config-reference; } > docs/config.md
echo "wrote docs/config.md" >&2
