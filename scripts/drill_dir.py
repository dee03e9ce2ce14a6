"""Shared by the drills (fault_drill.py, elastic_drill.py): their output directory and data."""
import json
import sys
from pathlib import Path


def earlier_rows(out):
    """The rows of an earlier drill's OUT/drill.jsonl."""
    with open(Path(out) / "drill.jsonl") as f:
        return [json.loads(line) for line in f]


def fresh_out(prog, args):
    """Checks that the data is prepared and OUT is new or empty; makes OUT and returns it."""
    if not list(Path(args.data).glob("train_*.bin")):
        sys.exit(f"{prog}: no shards in {args.data}; run scripts/prepare-data.sh {args.bin} first")
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{prog}: {out} is not empty; give another --out")
    out.mkdir(parents=True, exist_ok=True)
    return out
