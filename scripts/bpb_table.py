#!/usr/bin/env python3
"""Markdown tables that compare runs on eval bits per byte, for runs with different tokenizers.

    scripts/bpb_table.py RUN_DIR...        (e.g. runs/quickstart-i21 runs/quickstart-sp-i21)

Losses per token of different tokenizers do not compare; bits per byte do (docs/data.md). For
each run: its tokenizer and vocabulary, the val split's bytes per token, and every evaluation's
step, tokens, training text seen (tokens x the training split's bytes per token, from the
prepare.json beside data.train), wall-clock seconds, eval loss and eval bpb. Then the runs side by
side at equal tokens (each run's last evaluation at or below the fewest tokens any run reached)
and at equal wall time (each run's last evaluation at or before the shortest run's end).
"""
import glob
import json
import os
import sys

import yaml


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def train_bytes_per_token(config):
    """The training split's bytes per token from the prepare.json beside data.train."""
    pattern = config["data"]["train"]
    pattern = pattern[0] if isinstance(pattern, list) else pattern
    shards = sorted(glob.glob(pattern))
    if not shards:
        return None
    path = os.path.join(os.path.dirname(shards[0]), "prepare.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        p = json.load(f)
    if not p.get("train_bytes") or not p.get("train_tokens"):
        return None
    return p["train_bytes"] / p["train_tokens"]


class Run:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(os.path.normpath(path))
        with open(os.path.join(path, "summary.json")) as f:
            self.summary = json.load(f)
        with open(os.path.join(path, "config.yaml")) as f:
            self.config = yaml.safe_load(f)
        metrics = load_jsonl(os.path.join(path, "metrics.jsonl"))
        tokens_at = {m["step"]: m["tokens"] for m in metrics if "tokens" in m}
        per_step = self.summary["tokens"] / max(self.summary["steps"], 1)
        self.evals = []
        for m in metrics:
            if "eval_loss" not in m:
                continue
            tokens = tokens_at.get(m["step"], m["step"] * per_step)
            self.evals.append(dict(step=m["step"], tokens=tokens, wall=m["elapsed_s"],
                                   loss=m["eval_loss"], bpb=m.get("eval_bpb")))
        self.train_bpt = train_bytes_per_token(self.config)

    def last_eval(self, key, limit):
        chosen = [e for e in self.evals if e[key] <= limit]
        return chosen[-1] if chosen else None


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def run_table(run):
    s = run.summary
    lines = [f"`{run.name}`: {s.get('tokenizer', 'unknown')} tokens, vocabulary "
             f"{s.get('vocab_size')}, val {fmt(s.get('val_bytes_per_token'), '.4f')} bytes per "
             f"token, train {fmt(run.train_bpt, '.4f')}; {s['steps']} steps, "
             f"{s['tokens']:,} tokens, wall {s['wall_s']:.0f} s", "",
             "| step | tokens | text seen (MB) | wall (s) | eval loss (nats/token) | eval bpb |",
             "| --- | --- | --- | --- | --- | --- |"]
    for e in run.evals:
        text = e["tokens"] * run.train_bpt / 1e6 if run.train_bpt else None
        lines.append(f"| {e['step']} | {e['tokens']:,.0f} | {fmt(text, '.2f')} | {e['wall']:.0f} | "
                     f"{e['loss']:.4f} | {fmt(e['bpb'], '.4f')} |")
    return lines


def side_by_side(runs, key, limit, what):
    lines = [f"At equal {what} ({limit:,.0f}{' s' if key == 'wall' else ' tokens'}):", "",
             "| run | step | tokens | wall (s) | eval bpb |", "| --- | --- | --- | --- | --- |"]
    for run in runs:
        e = run.last_eval(key, limit)
        if e is None:
            lines.append(f"| `{run.name}` | – | – | – | no evaluation by then |")
        else:
            lines.append(f"| `{run.name}` | {e['step']} | {e['tokens']:,.0f} | {e['wall']:.0f} | "
                         f"{fmt(e['bpb'], '.4f')} |")
    return lines


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for path in paths:
        try:
            runs.append(Run(path))
        except (OSError, ValueError, KeyError) as e:
            print(f"bpb_table: {path}: {e}", file=sys.stderr)
            return 1
    out = []
    for run in runs:
        out += run_table(run) + [""]
    out += side_by_side(runs, "tokens", min(r.evals[-1]["tokens"] for r in runs if r.evals),
                        "tokens") + [""]
    out += side_by_side(runs, "wall", min(r.evals[-1]["wall"] for r in runs if r.evals),
                        "wall time")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
