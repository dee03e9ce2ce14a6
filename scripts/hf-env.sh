#!/usr/bin/env bash
# hf-env.sh: the Python environment of the Hugging Face checks (torch, transformers, safetensors,
# tokenizers; sentencepiece and protobuf for the SentencePiece tokenizer.model that transformers'
# LlamaTokenizer reads), and the interpreter of autoloco-prepare --tokenizer hf.
#
# It reuses the venv of scripts/torch-cuda.sh (torch==2.11.0, installed there with --no-deps;
# called first so that the venv exists: no second torch is downloaded) and pip installs into it,
# with --no-deps, the complete pinned list in scripts/hf-requirements.txt: torch's own Python
# requirements (sympy, networkx, jinja2, ...) and transformers, safetensors, tokenizers and theirs.
# Nothing floats. Rerunning is fast: a stamp in the venv records the list it installed.
#
# It also holds the pinned pyarrow, whose Arrow and Parquet C++ libraries autoloco-prepare's
# parquet reader links (configure after this script has run).
#
# Usage:
#   python=$(scripts/hf-env.sh | tail -1)
#   HF_HUB_OFFLINE=1 "$python" -c 'import torch, transformers, safetensors, tokenizers'
# The last line of stdout is the venv's python; progress goes to stderr.
#
# Environment: AUTOLOCO_TORCH_VENV (venv location, default $HOME/.cache/autoloco/torch-2.11.0),
# AUTOLOCO_PYTHON (interpreter that creates the venv), PIP_* (passed through to pip).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'hf-env.sh: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

requirements=scripts/hf-requirements.txt
[[ -f "$requirements" ]] || die "$requirements is missing"

torch_dir=$(scripts/torch-cuda.sh | tail -n 1) || die "scripts/torch-cuda.sh failed (see above)"
# torch_dir is <venv>/lib/pythonX.Y/site-packages/torch.
venv=$(cd "$torch_dir/../../../.." && pwd)
python=$venv/bin/python
[[ -x "$python" ]] || die "no interpreter at $python (from scripts/torch-cuda.sh: $torch_dir)"

stamp=$venv/.autoloco-hf-env
want=$(grep -v '^ *#' "$requirements" | grep -v '^ *$' | sort)

installed_ok() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    "$python" -c 'import tokenizers, safetensors, sentencepiece, google.protobuf, pyarrow' 2>/dev/null
}

if installed_ok; then
  log "reusing $venv"
else
  start=$SECONDS
  log "pip installing the $(wc -l <<<"$want") pinned packages of $requirements into $venv" \
    "(about 60 MB to download)"
  if ! "$python" -m pip install --disable-pip-version-check --no-input --no-deps -q \
    -r "$requirements" >&2; then
    die "pip could not install $requirements into $venv (network, PyPI mirror or disk space?)"
  fi
  # A quick import of everything, offline: a missing requirement shows here, not in a test.
  if ! HF_HUB_OFFLINE=1 "$python" -c 'import torch, transformers, safetensors, tokenizers
import sentencepiece, google.protobuf, pyarrow.parquet
from sentencepiece import sentencepiece_model_pb2
from transformers import LlamaForCausalLM, GPT2LMHeadModel, LlamaTokenizer' >&2; then
    die "the packages installed but do not import (see above); remove $stamp and rerun"
  fi
  printf '%s\n' "$want" >"$stamp"
  log "installed in $((SECONDS - start)) s"
fi

printf '%s\n' "$python"
