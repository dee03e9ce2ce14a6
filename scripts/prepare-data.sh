#!/usr/bin/env bash
# Prepares the default corpus (the Python documentation sources from Debian's python3-doc) unless
# it is there already: byte tokens into data/pydoc, or with `sentencepiece` a SentencePiece BPE
# vocabulary of 4096 pieces, trained on the training split, into data/pydoc-sp4k (the data of
# configs/quickstart-sp.yaml).
#   scripts/prepare-data.sh [BIN_DIR [bytes|sentencepiece]]
# BIN_DIR is where autoloco-prepare is (default build/release/apps).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/apps}
tokenizer=${2:-bytes}
case "$tokenizer" in
  bytes) data=data/pydoc; flags=() ;;
  sentencepiece) data=data/pydoc-sp4k; flags=(--tokenizer sentencepiece --vocab-size 4096) ;;
  *) echo "prepare-data: the tokenizer must be bytes or sentencepiece, not '$tokenizer'" >&2; exit 2 ;;
esac
if ! compgen -G "$data/train_*.bin" >/dev/null; then
  sources=$(ls -d /usr/share/doc/python3*-doc/html/_sources /usr/share/doc/python3.*/html/_sources 2>/dev/null | head -n 1 || true)
  [[ -n "$sources" ]] || { echo "prepare-data: the python3-doc sources were not found; install python3-doc" >&2; exit 1; }
  echo "prepare-data: preparing the default corpus from $sources into $data ($tokenizer)" >&2
  "$bin/autoloco-prepare" "${flags[@]}" --out "$data" "$sources"
fi
