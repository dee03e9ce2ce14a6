#!/usr/bin/env python3
"""A run's history of job segments as a Markdown table, from its run directory.

    scripts/segments_table.py RUN_DIR

Reads RUN_DIR/segments.jsonl (one line per start of the run, fresh or resumed; under Slurm with
the job id and the segment, SLURM_RESTART_COUNT) and RUN_DIR/summary.json. A segment's length is
the time from its start to the next segment's start (the requeue's wait included); the last
one's runs to the time summary.json was written.
"""
import datetime
import json
import os
import sys


def parse_utc(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def main(args):
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    run = args[0]
    try:
        with open(os.path.join(run, "segments.jsonl")) as f:
            segments = [json.loads(line) for line in f if line.strip()]
        with open(os.path.join(run, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        print(f"segments_table: {run}: {e}", file=sys.stderr)
        return 1
    print("| segment | job | started (UTC) | from step | resumed from | dcs | hosts | length (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for i, s in enumerate(segments):
        slurm = s.get("slurm") or {}
        if i + 1 < len(segments):
            length = (parse_utc(segments[i + 1]["started_utc"]) -
                      parse_utc(s["started_utc"])).total_seconds()
            length = f"{length:.0f}"
        else:
            end = datetime.datetime.utcfromtimestamp(
                os.path.getmtime(os.path.join(run, "summary.json")))
            length = f"{(end - parse_utc(s['started_utc'])).total_seconds():.0f} (to the summary)"
        hosts = ", ".join(",".join(p["hosts"]) for p in s.get("placement", []))
        resumed = os.path.basename(s["resumed_from"]) if s.get("resumed_from") else "-"
        print(f"| {slurm.get('segment', '-')} | {slurm.get('job_id', '-')} | "
              f"{s['started_utc'][11:19]} | {s['start_step']} | {resumed} | {s['num_dcs']} | "
              f"{hosts} | {length} |")
    print(f"\nsteps {summary['steps']}, stopped by a signal: {summary['stopped_by_signal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
