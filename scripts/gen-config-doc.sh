#!/usr/bin/env bash
# Regenerates docs/config.md from the key declarations (docs/config.md.in + --config-reference).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/apps/autoloco-train}
[[ -x "$bin" ]] || { echo "gen-config-doc.sh: no $bin; build it or name another" >&2; exit 1; }
# Through a temporary file: a failing binary must not leave docs/config.md cut short.
{ cat docs/config.md.in; "$bin" --config-reference; } > docs/config.md.tmp
mv docs/config.md.tmp docs/config.md
echo "wrote docs/config.md" >&2
