#!/usr/bin/env bash
# Prepares the default corpus (the Python documentation sources from Debian's python3-doc, byte
# tokens) into data/pydoc unless it is there already.
#   scripts/prepare-data.sh [BIN_DIR]   (where autoloco-prepare is; default build/release/apps)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/apps}
data=data/pydoc
if ! compgen -G "$data/train_*.bin" >/dev/null; then
  sources=$(ls -d /usr/share/doc/python3*-doc/html/_sources /usr/share/doc/python3.*/html/_sources 2>/dev/null | head -n 1 || true)
  [[ -n "$sources" ]] || { echo "prepare-data: the python3-doc sources were not found; install python3-doc" >&2; exit 1; }
  echo "prepare-data: preparing the default corpus from $sources into $data" >&2
  "$bin/autoloco-prepare" --out "$data" "$sources"
fi
