#!/usr/bin/env python3
"""Markdown table of run summaries (summary.json files written by autoloco-train).

    scripts/results_table.py runs/compare-*/*/summary.json

Columns: run, method, dcs, H, rounds, inter-dc bytes (and the ratio of the first ddp run's
bytes to each run's), final eval loss (and its gap to that ddp run), wall-clock, simulated time
at the run's link and compute utilisation.
"""
import json
import os
import sys


def si(value):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


def h_of(summary):
    hs = sorted(set(summary.get("h_per_round", [])))
    if summary["method"] == "ddp":
        return "1"
    return "/".join(str(h) for h in hs[:4]) + ("/..." if len(hs) > 4 else "")


def main(paths):
    if not paths:
        sys.exit("usage: results_table.py SUMMARY.json...")
    runs = []
    for path in paths:
        with open(path) as f:
            summary = json.load(f)
        runs.append((os.path.basename(os.path.dirname(path)), summary))
    ddp = next((s for _, s in runs if s["method"] == "ddp"), None)
    print("| run | method | dcs | H | rounds | inter-dc bytes | ddp bytes / bytes | "
          "final eval loss | vs ddp | wall | simulated time | compute util. |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, s in runs:
        ratio = (f"{ddp['inter_dc_bytes'] / s['inter_dc_bytes']:.0f}x"
                 if ddp and s["inter_dc_bytes"] else "-")
        gap = (f"{100 * (s['final_eval_loss'] / ddp['final_eval_loss'] - 1):+.2f}%"
               if ddp else "-")
        print(f"| {name} | {s['method']} | {s['num_dcs']} | {h_of(s)} | {s['rounds']} | "
              f"{si(s['inter_dc_bytes'])}B | {ratio} | {s['final_eval_loss']:.4f} | {gap} | "
              f"{s['wall_s']:.0f} s | {s['sim_time_s']:.0f} s | "
              f"{100 * s['compute_utilisation']:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1:])
