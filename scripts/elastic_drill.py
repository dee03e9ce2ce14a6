#!/usr/bin/env python3
"""Takes a dc out of an elastic run in each way docs/faults.md names, and measures the survivors.

    scripts/elastic_drill.py [--bin DIR] [--out runs/elastic-drill] [--dcs 3 4] [--cases ...]
    scripts/elastic_drill.py --table [--out runs/elastic-drill]   # the table of an earlier drill

Each case is a lighthouse and N dcs, each dc its own mpirun of one rank (docs/elastic.md), with
the default timeouts (heartbeat 0.5 s, heartbeat timeout 3 s). The last dc, N - 1, is taken out
in round 8 of 40:

  kill       SIGKILL mid-round (AUTOLOCO_FAULT=kill), relaunched with --resume auto at once
  stop       SIGSTOP of the whole dc mid-round (AUTOLOCO_FAULT=stop), SIGCONT 3 rounds later
  stop-sync  SIGSTOP as its inter-dc all-reduce starts, frozen inside the collective with its
             connections open (AUTOLOCO_FAULT=stop-sync), SIGCONT 3 rounds later
  partition  its host's link cut in the network lab (scripts/netlab.sh cut; needs root and
             network namespaces), mended 3 rounds later

A survivor's stall is its wait at the boundary of the rounds the fault struck (boundary_s in
syncs.jsonl: from posting ready to the commit) less its median wait over the rounds before the
fault; the row gives the largest over the survivors, and the largest over those that are not
ring neighbours of the lost dc (with 4 dcs, dc 1). `back_s` is the time from the relaunch (or
the SIGCONT, or the mend) to the lost dc's first committed round. For the relaunched dc of
`kill` that time is split as it went (the heal event of its metrics.jsonl): the process's start
up to its hello (MPI, data, model, its checkpoint), the rendezvous with the lighthouse, the wait
for the run's next boundary, the transfer of the state, its check, and the first round it then
trains itself. Everything lands under OUT/<N>dcs-<case>/ (the lighthouse's and each dc's log,
the run directories) and one line per case in OUT/drill.jsonl; the Markdown tables of
docs/faults.md are printed at the end.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from drill_dir import earlier_rows, fresh_out

REPO = Path(__file__).resolve().parent.parent
ROUNDS, H, FAULT_ROUND = 40, 10, 8
CASES = ["kill", "stop", "stop-sync", "partition"]
LAB = "eldrill"


def train_command(args, out, dc, dcs, lighthouse):
    cmd = ["mpirun", "-n", "1", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
           str(Path(args.bin) / "autoloco-train"), str(REPO / "configs/diloco.yaml")]
    sets = [
        "model.n_layer=2", "model.d_model=128", "model.n_head=4", "model.seq_len=128",
        "data.batch_size=8", f"run.steps={ROUNDS * H}", f"interval.H={H}", "run.eval_every=0",
        "run.log_every=10", "inner.warmup_steps=5", "run.threads=1", "ckpt.every_steps=50",
        f"data.train={args.data}/train_*.bin", f"data.val={args.data}/val_*.bin",
        f"run.out_dir={out}/runs", f"run.name=dc{dc}",
        f"elastic.lighthouse={lighthouse}", f"elastic.key_file={out}/key", f"elastic.dc={dc}",
        f"elastic.dcs={dcs}", "elastic.min_dcs=1", "elastic.quorum_timeout_s=120",
    ]
    for kv in sets:
        cmd += ["--set", kv]
    return cmd


def in_lab(host, cmd):
    return netlab("exec", host, "--") + cmd


def netlab(verb, *args):
    return [str(REPO / "scripts/netlab.sh"), verb, "--name", LAB, *args]


def syncs(out, dc):
    path = Path(out, "runs", f"dc{dc}", "syncs.jsonl")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def committed_round(out, dc):
    s = syncs(out, dc)
    return s[-1]["round"] if s else 0


class Case:
    """One lighthouse and its dcs; everything it started goes when it ends."""

    def __init__(self, args, dcs, fault):
        self.args, self.dcs, self.fault = args, dcs, fault
        self.out = Path(args.out) / f"{dcs}dcs-{fault}"
        self.out.mkdir(parents=True)
        self.lab = fault == "partition"
        self.procs = {}
        self.files = []

    def start(self, name, cmd, env=None):
        log = open(self.out / f"{name}.log", "a")
        self.files.append(log)
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})),
                                            start_new_session=True)
        return self.procs[name]

    def wait_for(self, what, happened, limit=300):
        end = time.monotonic() + limit
        while not happened():
            if time.monotonic() > end:
                raise RuntimeError(f"{self.out.name}: gave up waiting for {what} after {limit} s")
            time.sleep(0.05)

    def lighthouse(self):
        lh = [str(Path(self.args.bin) / "autoloco-lighthouse"), "--key-file", str(self.out / "key")]
        subprocess.run(lh[:1] + ["--make-key", str(self.out / "key")], check=True,
                       stdout=subprocess.DEVNULL)
        if self.lab:
            self.start("lighthouse", in_lab("head", lh + ["--host", "10.77.0.254", "--port", "29400"]))
            address = "10.77.0.254:29400"
            pattern = "listening on"
        else:
            self.start("lighthouse", lh + ["--host", "127.0.0.1", "--port", "0"])
            pattern = r"listening on (127\.0\.0\.1:[0-9]+)"
        log = self.out / "lighthouse.log"
        self.wait_for("the lighthouse", lambda: re.search(pattern, log.read_text()), 30)
        return address if self.lab else re.search(pattern, log.read_text()).group(1)

    def launch(self, dc, address, env=None, extra=()):
        cmd = train_command(self.args, self.out, dc, self.dcs, address) + list(extra)
        return self.start(f"dc{dc}", in_lab(f"h{dc}", cmd) if self.lab else cmd, env)

    def signal_dc(self, dc, sig):
        subprocess.run(["pkill", f"-{sig}", "-f", f"autoloco-train .*run.out_dir={self.out}/runs "
                        f".*run.name=dc{dc}( |$)"])

    def close(self):
        self.signal_dc(self.dcs - 1, "CONT")
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for f in self.files:
            f.close()


def run_case(args, dcs, fault):
    case = Case(args, dcs, fault)
    lost = dcs - 1
    step = (FAULT_ROUND - 1) * H + H // 2  # mid-round
    env = {"kill": f"kill:rank=0:step={step}", "stop": f"stop:rank=0:step={step}",
           "stop-sync": f"stop-sync:dc={lost}:round={FAULT_ROUND}"}.get(fault)
    try:
        address = case.lighthouse()
        for dc in range(dcs):
            case.launch(dc, address, {"AUTOLOCO_FAULT": env} if env and dc == lost else None)
        survivors = range(lost)
        if fault == "partition":
            case.wait_for("the round before the cut",
                          lambda: committed_round(case.out, 0) >= FAULT_ROUND - 1)
            subprocess.run(netlab("cut", f"h{lost}"), check=True)
        if fault == "kill":
            # Relaunched as soon as it is gone, as a scheduler's requeue would.
            case.wait_for("the killed dc's end", lambda: case.procs[f"dc{lost}"].poll() is not None)
            os.rename(case.out / f"dc{lost}.log", case.out / f"dc{lost}-killed.log")
            back_from = time.time()
            case.launch(lost, address, None, ["--resume", "auto"])
        # The survivors' third round after the fault: a stopped or cut-off dc comes back then.
        case.wait_for("the survivors' rounds after the fault",
                      lambda: all(committed_round(case.out, d) >= FAULT_ROUND + 3 for d in survivors))
        if fault == "partition":
            back_from = time.time()
            subprocess.run(netlab("mend", f"h{lost}"), check=True)
        elif fault != "kill":
            back_from = time.time()
            case.signal_dc(lost, "CONT")
        for name, p in case.procs.items():
            if name != "lighthouse":
                case.wait_for(f"{name}'s end", lambda: p.poll() is not None, 600)
        codes = {name: p.returncode for name, p in case.procs.items() if name != "lighthouse"}
    finally:
        case.close()
    return measure(case, dcs, fault, back_from, codes)


def measure(case, dcs, fault, back_from, codes):
    lost = dcs - 1
    stalls = {}
    for dc in range(lost):
        s = syncs(case.out, dc)
        before = [x["boundary_s"] for x in s if x["round"] < FAULT_ROUND - 1]
        struck = [x["boundary_s"] for x in s if FAULT_ROUND <= x["round"] <= FAULT_ROUND + 1]
        stalls[dc] = max(struck) - statistics.median(before)
    # Ring neighbours of the lost dc among the dcs of the round it was lost in.
    neighbours = {(lost - 1) % dcs, (lost + 1) % dcs}
    far = [stalls[d] for d in stalls if d not in neighbours]
    back = [x for x in syncs(case.out, lost) if x["committed_unix_s"] >= back_from]
    hashes = {syncs(case.out, d)[-1]["state_hash"] for d in range(dcs) if syncs(case.out, d)}
    struck_round = next((x for x in syncs(case.out, 0) if x["round"] == FAULT_ROUND), {})
    join = join_split(case.out, lost, back_from, back[0] if back else None)
    return {
        "dcs": dcs, "case": fault, "out": str(case.out), "exit_codes": codes,
        "stall_s": max(stalls.values()), "stall_far_s": max(far) if far else None,
        "stalls_s": stalls, "attempts_in_struck_round": struck_round.get("attempts"),
        "quorum_of_struck_round": struck_round.get("quorum_dcs"),
        "back_s": back[0]["committed_unix_s"] - back_from if back else None,
        "final_hashes_equal": len(hashes) == 1, "join": join,
    }


def join_split(out, dc, launched, first_commit):
    """A relaunched dc's way back, from its first heal after a join (None without one)."""
    path = Path(out, "runs", f"dc{dc}", "metrics.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] \
        if path.exists() else []
    heal = next((e for e in events if e.get("event") == "heal" and "rendezvous_s" in e), None)
    if heal is None or first_commit is None:
        return None
    parts = {k: heal[k] for k in ("rendezvous_s", "boundary_wait_s", "transfer_s", "check_s")}
    parts["start_s"] = heal["unix_s"] - launched - sum(parts.values())
    parts["first_round_s"] = first_commit["committed_unix_s"] - heal["unix_s"]
    return parts


def normal_sync_s(out, dcs):
    """A survivor's median wait at the boundary before the fault: one round's all-reduce."""
    waits = [x["boundary_s"] for dc in range(dcs - 1) for x in syncs(out, dc)
             if 1 < x["round"] < FAULT_ROUND - 1]
    return statistics.median(waits) if waits else float("nan")


def print_table(rows):
    print("| dcs | lost dc | survivors' stall (max) | non-neighbours' stall | a normal round's "
          "sync | attempts in the struck round | back in a committed round | final state hashes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    what = {"kill": "SIGKILL mid-round; relaunched with --resume auto",
            "stop": "SIGSTOP mid-round; SIGCONT 3 rounds later",
            "stop-sync": "SIGSTOP inside the all-reduce; SIGCONT 3 rounds later",
            "partition": "link cut (network lab); mended 3 rounds later"}
    # A survivor that waited less than usual (the lost dc's share of the cores freed) stalled 0.
    for r in rows:
        far = "-" if r["stall_far_s"] is None else f"{max(0.0, r['stall_far_s']):.2f} s"
        back = "never" if r["back_s"] is None else f"{r['back_s']:.2f} s"
        same = "equal" if r["final_hashes_equal"] else "DIFFER"
        print(f"| {r['dcs']} | {what[r['case']]} | {max(0.0, r['stall_s']):.2f} s | {far} | "
              f"{normal_sync_s(r['out'], r['dcs']):.3f} s | {r['attempts_in_struck_round']} | "
              f"{back} | {same} |")


def print_join_table(rows):
    joins = [r for r in rows if r.get("join")]
    if not joins:
        return
    print()
    print("| dcs | start, to its hello | rendezvous | waiting for the boundary | transfer | check "
          "| its first round | back in a committed round |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in joins:
        j = r["join"]
        cells = [j[k] for k in ("start_s", "rendezvous_s", "boundary_wait_s", "transfer_s",
                                "check_s", "first_round_s")]
        print(f"| {r['dcs']} | " + " | ".join(f"{c:.2f} s" for c in cells) +
              f" | {r['back_s']:.2f} s |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=str(REPO / "build/release/apps"))
    p.add_argument("--out", default=str(REPO / "runs/elastic-drill"))
    p.add_argument("--data", default=str(REPO / "data/pydoc"))
    p.add_argument("--dcs", type=int, nargs="+", default=[3, 4])
    p.add_argument("--cases", nargs="+", default=CASES, choices=CASES)
    p.add_argument("--table", action="store_true",
                   help="only print the table of an earlier drill's OUT/drill.jsonl")
    args = p.parse_args()
    if args.table:
        rows = earlier_rows(args.out)
        print_table(rows)
        print_join_table(rows)
        return
    out = fresh_out("elastic_drill", args)
    lab = "partition" in args.cases
    if lab:
        subprocess.run(netlab("up", str(max(args.dcs))), check=True)
    rows = []
    try:
        for dcs in args.dcs:
            for fault in args.cases:
                start = time.monotonic()
                r = run_case(args, dcs, fault)
                rows.append(r)
                with open(out / "drill.jsonl", "a") as f:
                    f.write(json.dumps(r) + "\n")
                print(f"elastic_drill: {dcs} dcs, {fault}: stall {r['stall_s']:.2f} s, back "
                      f"{r['back_s']}, {time.monotonic() - start:.0f} s", file=sys.stderr)
    finally:
        if lab:
            subprocess.run(netlab("down"))
    print_table(rows)
    print_join_table(rows)


if __name__ == "__main__":
    main()
