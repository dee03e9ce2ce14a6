#!/usr/bin/env python3
"""Injects each fault of docs/faults.md into a real job and records how the job ended.

    scripts/fault_drill.py [--bin DIR] [--out runs/fault-drill] [--timeout S] [--data DIR]
    scripts/fault_drill.py --table [--out runs/fault-drill]      # the table of an earlier drill

Every case runs 2 dcs x 2 ranks under mpirun (AUTOLOCO_FAULT, util/fault_injection.hpp) with
comm.timeout_s = S and writes its run directory under OUT/runs/<case>, its output under
OUT/<case>.log (each line stamped with the seconds since launch), and one line of
OUT/drill.jsonl: the exit code, the seconds from the fault to the end of the job, the first
error line, whether a rank outlived the job, and the newest complete checkpoint and whether it
verifies (autoloco-ckpt verify). The Markdown table of docs/results.md ("Reliability") is
printed at the end. One case runs without the watchdog (comm.timeout_s 0) to show what it
prevents: the drill kills that job itself after 4 x S.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from drill_dir import earlier_rows, fresh_out

REPO = Path(__file__).resolve().parent.parent

# name, AUTOLOCO_FAULT, extra --set overrides, what the case shows
CASES = [
    ("stop", "stop:rank=3:step=30", [], "a rank stopped (SIGSTOP) in round 2"),
    ("late-past-timeout", "late:dc=1:seconds=3600:round=2", [],
     "dc 1 an hour late into the sync of round 2"),
    ("late-overlap", "late:dc=1:seconds=3600:round=2", ["outer.overlap_steps=2"],
     "the same with the sync on the communication thread (outer.overlap_steps 2)"),
    ("kill", "kill:rank=1:step=30", [], "a rank killed (SIGKILL) in round 2"),
    ("ckpt-fail", "ckpt-fail:step=40:rank=2", [], "rank 2's checkpoint file fails to write"),
    ("late-within-timeout", "late:dc=0:seconds={late}", [],
     "dc 0 late into every sync by half the timeout"),
    ("no-watchdog", "stop:rank=3:step=30", ["comm.timeout_s=0"],
     "a stopped rank without the watchdog"),
]
FAULT_LINE = re.compile(r"AUTOLOCO_FAULT: (stopping|killing|starting)")


def job(args, name, fault, sets):
    train = [
        "mpirun", "-n", "4", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
        str(Path(args.bin) / "autoloco-train"), str(REPO / "configs/diloco.yaml"),
    ]
    base = [
        "topology.ranks_per_dc=2", "model.n_layer=2", "model.d_model=64", "model.n_head=2",
        "model.seq_len=64", "data.batch_size=4", "run.steps=60", "run.eval_every=0",
        "run.log_every=10", "inner.warmup_steps=5", "interval.H=20", "run.threads=1",
        "ckpt.every_steps=20", f"comm.timeout_s={args.timeout:g}", "wan.mode=sleep",
        f"data.train={args.data}/train_*.bin", f"data.val={args.data}/val_*.bin",
        f"run.out_dir={args.out}/runs", f"run.name={name}",
    ]
    for kv in base + sets:
        train += ["--set", kv]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if fault:
        env["AUTOLOCO_FAULT"] = fault
    return train, env


def run_case(args, name, fault, sets, limit):
    """Runs one job; returns its exit code, its stamped lines and when the fault struck."""
    cmd, env = job(args, name, fault, sets)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines = []

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    killed_by_drill = False
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        # The ranks are killed, as a node failure would; mpirun then ends and removes its
        # shared-memory files (on SIGTERM it would resume the stopped rank first).
        killed_by_drill = True
        subprocess.run(["pkill", "-9", "-f", f"^[^ ]*autoloco-train .*run.name={name}( |$)"])
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
    reader.join()
    end = time.monotonic() - start
    with open(Path(args.out) / f"{name}.log", "w") as f:
        for t, line in lines:
            f.write(f"{t:8.2f} {line}\n")
    fault_at = next((t for t, line in lines if FAULT_LINE.search(line)), None)
    return proc.returncode, lines, fault_at, end, killed_by_drill


def live_ranks(run_dir):
    out = subprocess.run(["pgrep", "-f", f"run.name={Path(run_dir).name}( |$)"],
                         capture_output=True, text=True)
    return len(out.stdout.split())


def newest_checkpoint(args, run_dir):
    ckpts = sorted(Path(run_dir, "checkpoints").glob("step_*"),
                   key=lambda p: int(p.name.split("_")[1]))
    if not ckpts:
        return None, None
    newest = ckpts[-1]
    ok = subprocess.run([str(Path(args.bin) / "autoloco-ckpt"), "verify", str(newest)],
                        capture_output=True).returncode == 0
    return newest.name, ok


def anchor_crc(run_dir, step):
    manifest = json.loads(Path(run_dir, "checkpoints", f"step_{step}", "manifest.json").read_text())
    for f in manifest["files"]:
        if f["name"] == "global.h5":
            return f["datasets"]["outer/anchor"]["crc32"]
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=str(REPO / "build/release/apps"))
    p.add_argument("--out", default=str(REPO / "runs/fault-drill"))
    p.add_argument("--timeout", type=float, default=10.0, help="comm.timeout_s of the jobs")
    p.add_argument("--data", default=str(REPO / "data/pydoc"))
    p.add_argument("--table", action="store_true",
                   help="only print the table of an earlier drill's OUT/drill.jsonl")
    args = p.parse_args()
    if args.table:
        print_table(earlier_rows(args.out))
        return
    out = fresh_out("fault_drill", args)

    # The reference for the late-within-timeout case: the same job without a fault.
    rc, _, _, _, _ = run_case(args, "reference", "", [], 600)
    if rc != 0:
        sys.exit(f"fault_drill: the reference job failed (exit {rc}); see {out}/reference.log")

    results = []
    for name, fault, sets, what in CASES:
        fault = fault.format(late=args.timeout / 2)
        limit = 4 * args.timeout + 120 if name != "no-watchdog" else 4 * args.timeout
        rc, lines, fault_at, end, killed = run_case(args, name, fault, sets, limit)
        run_dir = out / "runs" / name
        time.sleep(2)  # ranks that mpirun killed go within a moment
        ckpt, verified = newest_checkpoint(args, run_dir)
        error = next((line for _, line in lines if "] error: " in line), "")
        r = {
            "case": name, "fault": fault, "sets": sets, "what": what, "timeout_s": args.timeout,
            "exit_code": rc, "killed_by_drill": killed,
            "fault_at_s": fault_at, "ended_after_fault_s": None if fault_at is None else end - fault_at,
            "wall_s": end, "first_error": error, "ranks_left": live_ranks(run_dir),
            "last_checkpoint": ckpt, "checkpoint_verifies": verified,
        }
        if name == "late-within-timeout" and rc == 0:
            r["anchor_equals_reference"] = anchor_crc(run_dir, 60) == anchor_crc(
                out / "runs" / "reference", 60)
        results.append(r)
        with open(out / "drill.jsonl", "a") as f:
            f.write(json.dumps(r) + "\n")
        print(f"fault_drill: {name}: exit {rc}, {end:.1f} s", file=sys.stderr)

    print_table(results)


def print_table(results):
    print("| case | fault | exit | ended after the fault | ranks left | last checkpoint | outcome |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        after = "-" if r["ended_after_fault_s"] is None else f"{r['ended_after_fault_s']:.1f} s"
        if r["killed_by_drill"]:
            after = f"hung: killed by the drill after {r['wall_s']:.0f} s"
        elif r["exit_code"] == 0:
            after = f"finished ({r['wall_s']:.0f} s)"
        ckpt = "-" if not r["last_checkpoint"] else (
            f"{r['last_checkpoint']} ({'verifies' if r['checkpoint_verifies'] else 'DAMAGED'})")
        outcome = r["what"]
        if "anchor_equals_reference" in r:
            outcome += "; anchor bitwise equal to the reference: " + (
                "yes" if r["anchor_equals_reference"] else "NO")
        print(f"| {r['case']} | `{r['fault']}` | {r['exit_code']} | {after} | {r['ranks_left']} "
              f"| {ckpt} | {outcome} |")


if __name__ == "__main__":
    main()
