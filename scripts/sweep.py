#!/usr/bin/env python3
"""Sweeps: a grid of autoloco-train runs over a base config, run locally under mpirun or
submitted to Slurm, then collected into results.csv, table.md, saving.md and plots.

Two ways to describe a sweep:

  # a spec file (the experiments in docs/results.md are such files)
  scripts/sweep.py --spec configs/sweeps/autoloco-vs-diloco.yaml

  # or on the command line: methods x H values x controllers x seeds, any --grid axis, any --set
  scripts/sweep.py configs/diloco.yaml --out runs/my-sweep --ranks 4 \
      --H 10,20,40 --controllers fixed,autoloco --seeds 1,2,3 \
      --grid outer.momentum=0.9,0.81 --set run.steps=1000

A spec file (YAML):
  base: configs/diloco.yaml          # the base config
  out: runs/sweep-x                  # where run directories go
  ranks: 4                           # MPI ranks per run
  seeds: [1, 2, 3]                   # run.seed values; every configuration runs once per seed
  set: {run.steps: 1000}             # overrides applied to every run
  groups:                            # each group is a grid (the product of its value lists)
    - name: diloco
      set: {interval.controller: fixed}
      grid: {interval.H: [10, 20, 40, 80], outer.momentum: [0.9, 0.81, 0.75, 0.66]}
  curves:                            # reference curves for the saving (see sweep_report.py)
    diloco-tuned: {groups: [diloco]}
  adaptive: [autoloco]               # groups compared against every curve
  launcher: mpirun -n 4              # optional: the command that starts a run's ranks (default
                                     # mpirun -n RANKS; --launcher overrides it), e.g.
                                     # scripts/netlab.sh run --dcs 4 --ranks-per-dc 1 --

A run is named after its group, its grid values and its seed (e.g. diloco_H10_mu0.81_s1).
Finished runs (summary.json without "stopped_by_signal": true) are skipped, and every run is
launched with --resume auto, so an interrupted sweep resumes where it stopped: a run that was
stopped or killed continues from its newest checkpoint (docs/checkpoints.md), and one that left
no checkpoint starts over (the trainer moves its old files into the run directory's
restarted-*/ folder).
Locally, as many runs go at once as the cores allow (cores // ranks, at least 1; --jobs N).
With --slurm, one batch script per run is written to OUT/slurm/ from
scripts/slurm/sweep-run.sbatch.in and submitted with sbatch (--no-submit only writes them);
run `scripts/sweep.py --spec ... --report` once the jobs have finished.
"""
import argparse
import importlib.util
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

# Short names for run names; other keys use their last component.
SHORT = {
    "interval.H": "H",
    "outer.momentum": "mu",
    "outer.momentum_schedule": "msched",
    "outer.correction": "corr",
    "interval.controller": "",
    "outer.method": "",
    "interval.q_target": "q",
    "batch.theta": "theta",
    "batch.controller": "",
    "batch.test": "",
    "batch.lr_scaling": "lr",
    "outer.overlap_steps": "tau",
    "outer.overlap_alpha": "alpha",
    "wan.bandwidth_gbps": "gbps",
    "outer.wire_dtype": "",
    "inner.optimizer": "",
    "run.seed": "s",
}


def die(message):
    print(f"sweep: error: {message}", file=sys.stderr)
    sys.exit(2)


def require_report_modules():
    """The report needs numpy and matplotlib: say so before hours of runs, not after them (a
    python3 first on PATH, pyenv's for one, may lack them where Debian's has them)."""
    missing = [m for m in ("numpy", "matplotlib")
               if importlib.util.find_spec(m) is None]
    if missing:
        die(f"{sys.executable} lacks {', '.join(missing)}, which the report needs: run "
            f"/usr/bin/python3 {os.path.relpath(__file__)} ... (scripts/setup.sh installs them "
            f"there) or pip install {' '.join(missing)}")


def load_yaml(path):
    try:
        with open(path) as f:
            return yaml.safe_load(f) or {}
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    except yaml.YAMLError as e:
        die(f"{path} is not valid YAML: {e}")


def value_text(value):
    """A value as autoloco-train's --set reads it (YAML; JSON is YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z0-9_./*+-]+", value) else json.dumps(value)
    return json.dumps(value)


def name_part(key, value):
    short = SHORT.get(key, key.split(".")[-1])
    if isinstance(value, list):
        text = "+".join(str(v).replace(":", "@") for v in value) or "none"
    else:
        text = value_text(value)
    return short + re.sub(r"[^A-Za-z0-9.+@-]", "", text)


class Run:
    def __init__(self, group, grid_values, seed, overrides):
        self.group = group
        self.grid = grid_values  # ordered {key: value} of the grid axes
        self.seed = seed
        self.overrides = overrides  # ordered {key: value}: spec set, group set, grid, seed
        parts = [group] + [name_part(k, v) for k, v in grid_values.items()] + [f"s{seed}"]
        self.name = "_".join(p for p in parts if p)


def expand(spec):
    """Every run of the spec, in a stable order."""
    seeds = spec.get("seeds", [1])
    runs = []
    names = set()
    for group in spec["groups"]:
        gname = group.get("name") or die("every group needs a name")
        grid = group.get("grid") or {}
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                die(f"group {gname}: grid key {key} needs a non-empty list of values")
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            grid_values = dict(zip(keys, combo))
            for seed in group.get("seeds", seeds):
                overrides = dict(spec.get("set") or {})
                overrides.update(group.get("set") or {})
                overrides.update(grid_values)
                overrides["run.seed"] = seed
                run = Run(gname, grid_values, seed, overrides)
                if run.name in names:
                    die(f"two runs are both named {run.name}: give the groups distinct names")
                names.add(run.name)
                runs.append(run)
    return runs


def spec_from_args(args):
    """The command-line form: one group 'run', a grid of the given axes."""
    if not args.config:
        die("give a base CONFIG or --spec FILE")
    grid = {}
    if args.methods:
        grid["outer.method"] = args.methods.split(",")
    if args.controllers:
        grid["interval.controller"] = args.controllers.split(",")
    if args.H:
        grid["interval.H"] = [int(h) for h in args.H.split(",")]
    for axis in args.grid:
        key, _, values = axis.partition("=")
        if not values:
            die(f"--grid {axis}: expected key=v1,v2,...")
        grid[key] = [yaml.safe_load(v) for v in values.split(",")]
    sets = {}
    for assignment in args.set:
        key, eq, value = assignment.partition("=")
        if not eq:
            die(f"--set {assignment}: expected key=value")
        sets[key] = yaml.safe_load(value)
    return {
        "base": args.config,
        "out": args.out or f"runs/sweep-{time.strftime('%Y%m%d-%H%M%S')}",
        "ranks": args.ranks or 4,
        "seeds": [int(s) for s in args.seeds.split(",")],
        "set": sets,
        "groups": [{"name": "run", "grid": grid}],
    }


def command(spec, run, binary, launcher):
    cmd = launcher + [binary, os.path.join(REPO, spec["base"])]
    for key, value in run.overrides.items():
        cmd += ["--set", f"{key}={value_text(value)}"]
    cmd += ["--set", f"run.out_dir={spec['out_abs']}", "--set", f"run.name={run.name}"]
    return cmd + ["--resume", "auto"]


def done(out, run):
    """Finished: a summary that a stop signal did not write (that run resumes)."""
    path = os.path.join(out, run.name, "summary.json")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return not json.load(f).get("stopped_by_signal", False)


def launcher(spec):
    """The command that starts a run's ranks, in front of autoloco-train."""
    text = spec.get("launcher")
    return shlex.split(text) if text else ["mpirun", "-n", str(spec["ranks"])]


def run_local(spec, runs, binary, jobs):
    out = spec["out_abs"]
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    todo = [r for r in runs if not done(out, r)]
    print(f"sweep: {len(runs)} runs, {len(runs) - len(todo)} done, {len(todo)} to go, "
          f"{jobs} at a time, {spec['ranks']} ranks each", file=sys.stderr)
    started = time.time()
    failed = []

    def one(run):
        log_path = os.path.join(logs, run.name + ".log")
        t0 = time.time()
        with open(log_path, "w") as log:
            rc = subprocess.call(command(spec, run, binary, launcher(spec)), stdout=log,
                                 stderr=subprocess.STDOUT, cwd=REPO)
        return run, rc, time.time() - t0, log_path

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, r) for r in todo]
        for i, future in enumerate(as_completed(futures), 1):
            run, rc, seconds, log_path = future.result()
            eta = (time.time() - started) / i * (len(todo) - i)
            if rc == 0 and done(out, run):
                with open(os.path.join(out, run.name, "summary.json")) as f:
                    s = json.load(f)
                bpb = s.get("final_eval_bpb")
                bpb = f" ({bpb:.4f} bpb)" if isinstance(bpb, (int, float)) else ""
                print(f"sweep: [{i}/{len(todo)}] {run.name}: eval loss "
                      f"{s['final_eval_loss']:.4f}{bpb}, {s['rounds']} rounds, {seconds:.0f} s "
                      f"(about {eta / 60:.0f} min left)", file=sys.stderr)
            else:
                failed.append(run.name)
                with open(log_path) as f:
                    tail = "".join(f.readlines()[-5:])
                print(f"sweep: [{i}/{len(todo)}] {run.name} FAILED (exit {rc}); log "
                      f"{log_path}:\n{tail}", file=sys.stderr)
    return failed


def write_slurm(spec, runs, binary, submit, sbatch_args):
    out = spec["out_abs"]
    folder = os.path.join(out, "slurm")
    os.makedirs(folder, exist_ok=True)
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    with open(os.path.join(REPO, "scripts", "slurm", "sweep-run.sbatch.in")) as f:
        template = f.read()
    written = []
    for run in runs:
        if done(out, run):
            continue
        cmd = " ".join(shlex.quote(c) for c in command(spec, run, binary, ["srun"]))
        text = (template.replace("@NAME@", run.name).replace("@RANKS@", str(spec["ranks"]))
                .replace("@LOG@", os.path.join(out, "logs", run.name + ".%j.log"))
                .replace("@EXTRA@", "\n".join(f"#SBATCH {a}" for a in sbatch_args))
                .replace("@REPO@", REPO)
                .replace("@SUMMARY@", os.path.join(out, run.name, "summary.json"))
                .replace("@COMMAND@", cmd))
        path = os.path.join(folder, run.name + ".sbatch")
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    print(f"sweep: wrote {len(written)} batch scripts to {folder}", file=sys.stderr)
    if submit:
        for path in written:
            subprocess.check_call(["sbatch", path])
        print(f"sweep: submitted {len(written)} jobs; when they are done run the same command "
              "with --report", file=sys.stderr)


def record(spec, runs):
    """OUT/sweep.json: the spec and every run's group, grid values and seed, for the report."""
    out = spec["out_abs"]
    os.makedirs(out, exist_ok=True)
    data = {
        "spec": {k: v for k, v in spec.items() if k != "out_abs"},
        "runs": [{"name": r.name, "group": r.group, "grid": r.grid, "seed": r.seed} for r in runs],
    }
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump(data, f, indent=1)


def mpi_environment():
    """What scripts/env.sh sets: Open MPI as root and oversubscribed, one OpenMP thread per rank."""
    for key, value in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                       ("OMPI_MCA_rmaps_base_oversubscribe", "1"), ("OMP_NUM_THREADS", "1")):
        os.environ.setdefault(key, value)


def main():
    mpi_environment()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("config", nargs="?", help="base config (command-line form)")
    p.add_argument("--spec", help="sweep spec file (YAML)")
    p.add_argument("--out", help="output directory (overrides the spec's)")
    p.add_argument("--ranks", type=int, help="MPI ranks per run (default: spec's, or 4)")
    p.add_argument("--methods", help="outer.method values, comma-separated")
    p.add_argument("--controllers", help="interval.controller values, comma-separated")
    p.add_argument("--H", help="interval.H values, comma-separated")
    p.add_argument("--seeds", default="1", help="run.seed values (command-line form)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="one more grid axis")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override for every run (after the spec's)")
    p.add_argument("--only", action="append", default=[], metavar="GROUP",
                   help="run only these groups (repeatable); the report still reads all")
    p.add_argument("--jobs", type=int, help="runs at once (default: cores // ranks, at least 1)")
    p.add_argument("--bin", default="build/release/apps/autoloco-train")
    p.add_argument("--no-build", action="store_true", help="do not call scripts/setup.sh")
    p.add_argument("--launcher", help="the command that starts a run's ranks (default: the "
                   "spec's launcher, else mpirun -n RANKS), e.g. 'scripts/netlab.sh run --dcs 4 "
                   "--ranks-per-dc 1 --'")
    p.add_argument("--slurm", action="store_true", help="write Slurm batch scripts and submit")
    p.add_argument("--no-submit", action="store_true", help="with --slurm: only write them")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="extra #SBATCH line, e.g. --sbatch=--partition=gpu (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the commands and stop")
    p.add_argument("--report", action="store_true", help="only collect, tabulate and plot")
    args = p.parse_args()

    if args.spec:
        spec = load_yaml(args.spec)
        for key in ("base", "out", "groups"):
            if key not in spec:
                die(f"{args.spec}: missing key '{key}'")
        spec["spec_file"] = args.spec
        for assignment in args.set:
            key, _, value = assignment.partition("=")
            spec.setdefault("set", {})[key] = yaml.safe_load(value)
    else:
        spec = spec_from_args(args)
    if args.out:
        spec["out"] = args.out
    if args.ranks:
        spec["ranks"] = args.ranks
    if args.launcher:
        spec["launcher"] = args.launcher
    spec.setdefault("ranks", 4)
    spec["out_abs"] = os.path.abspath(os.path.join(REPO, spec["out"]))
    if not os.path.exists(os.path.join(REPO, spec["base"])):
        die(f"base config {spec['base']} not found")

    runs = expand(spec)
    selected = [r for r in runs if not args.only or r.group in args.only]
    if args.only and not selected:
        die(f"--only {','.join(args.only)}: no such group")
    binary = os.path.abspath(os.path.join(REPO, args.bin))

    if args.dry_run:
        for r in selected:
            print(" ".join(shlex.quote(c) for c in command(spec, r, binary, launcher(spec))))
        return 0
    if not args.slurm:  # with --slurm the report comes later, from --report
        require_report_modules()
    record(spec, runs)
    failed = []
    if not args.report:
        if not args.no_build:
            subprocess.check_call([os.path.join(REPO, "scripts", "setup.sh"), "release", "apps"])
            subprocess.check_call([os.path.join(REPO, "scripts", "prepare-data.sh"),
                                   os.path.dirname(binary)])
        if args.slurm:
            write_slurm(spec, selected, binary, not args.no_submit, args.sbatch)
            return 0
        jobs = args.jobs or max(1, (os.cpu_count() or 1) // spec["ranks"])
        failed = run_local(spec, selected, binary, jobs)

    import sweep_report

    sweep_report.report(spec["out_abs"])
    if failed:
        print(f"sweep: {len(failed)} runs failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
