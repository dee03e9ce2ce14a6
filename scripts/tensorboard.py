#!/usr/bin/env python3
"""TensorBoard event files from autoloco run directories, so that runs open in TensorBoard.

    scripts/tensorboard.py RUN_DIR...                # each into RUN_DIR/tensorboard/
    scripts/tensorboard.py runs/sweep/* --out runs/tb   # into runs/tb/<run name>/, to compare
    .venv-tools/bin/tensorboard --logdir runs/tb        # then open http://localhost:6006
    scripts/tensorboard.py --dump LOGDIR...          # what TensorBoard reads back, as JSON lines

Reads each run directory's metrics.jsonl, syncs.jsonl and summary.json (docs/run-directory.md)
and writes one event file per run, events.out.tfevents.0000000000.autoloco, replaced on every
call: a rerun (for instance while the run goes on) gives the same file for the same lines.
Scalars, all against the inner step:
  train/<key>    every number of a training line of metrics.jsonl (train/loss, train/lr,
                 train/grad_norm, train/tokens, train/inter_dc_bytes, ...)
  eval/<name>    every eval_<name> number of an evaluation line (eval/loss, eval/ppl, eval/bpb,
                 eval/s), and eval/tasks_s
  tasks/<task>/<figure>  each downstream task's figures of an evaluation line (eval.tasks:
                 tasks/hellaswag/acc_norm, tasks/hellaswag/acc_norm_stderr, tasks/hellaswag/n,
                 tasks/lambada/perplexity, ...)
  sync/<key>     every number of a syncs.jsonl line (sync/H, sync/rho, sync/q, sync/link_s,
                 sync/inter_dc_bytes, sync/outer_lr, ...), at its landed_step (where its outer
                 step landed and its sim_time_s was taken); and sync/compute_utilisation, the
                 round's H t / (H t + E) as the link-aware interval computes it: t = round_s / H,
                 E = the line's exposed_link_s, else max(0, link_s - (landed_step - step) t);
                 not for fragment syncs without exposed_link_s
  summary/<key>  the final figures of summary.json (compute_utilisation, sim_time_s, link_s,
                 inter_dc_bytes, final_eval_loss, ...), at its last step
A list (per dc, such as batch) gives <tag>/dc<i>; null, text and booleans are left out.
Values are stored as 32-bit floats, as TensorBoard stores every scalar.

Time: every event's wall_time is the run's simulated time (sim_time_s: compute + exposed link
seconds) instead of the clock time, so TensorBoard's "Relative" x-axis shows simulated seconds
(counted from each run's first point in the chart: its first logged step, or first evaluation)
and its "Wall" axis the simulated time as a clock started at 1970-01-01 00:00 UTC, the same
start for every run.

The tensorboard package (PyPI) is needed: scripts/setup.sh installs the pinned version into the
venv .venv-tools/; run with another interpreter, this script restarts itself with that venv's
python when it cannot import tensorboard.

Exit status: 0 done; 1 a run directory or file is missing or a line is malformed (the file and
line number are named); 2 usage; 3 the tensorboard package is not installed.
"""

import argparse
import json
import math
import os
import re
import struct
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_VENV = os.path.join(REPO, ".venv-tools")
EVENT_FILE = "events.out.tfevents.0000000000.autoloco"
REEXEC_MARK = "AUTOLOCO_TENSORBOARD_REEXEC"

# This file is named tensorboard.py: its own directory, first on sys.path, would shadow the
# package.
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]

# The figures of summary.json worth a point at the end of the run.
SUMMARY_KEYS = [
    "final_train_loss",
    "final_eval_loss",
    "final_eval_bpb",
    "compute_utilisation",
    "compute_utilisation_wall",
    "sim_time_s",
    "wall_s",
    "link_s",
    "model_link_s",
    "exposed_link_s",
    "sync_wait_s",
    "inter_dc_bytes",
    "sent_bytes",
    "peak_sync_bytes",
    "rounds",
    "tokens",
    "tokens_per_s",
]


class RunError(Exception):
    """A missing file or a malformed line: exit status 1."""


def import_tensorboard():
    """Imports tensorboard, restarting under .venv-tools/bin/python where only that has it."""
    try:
        import tensorboard  # noqa: F401

        return
    except ImportError:
        pass
    venv_python = os.path.join(TOOLS_VENV, "bin", "python")
    in_venv = os.path.realpath(sys.prefix) == os.path.realpath(TOOLS_VENV)
    if os.path.exists(venv_python) and not in_venv and not os.environ.get(REEXEC_MARK):
        os.environ[REEXEC_MARK] = sys.executable  # the interpreter that could not import it
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(venv_python, [venv_python, os.path.abspath(__file__)] + sys.argv[1:])
    tried = [os.environ.get(REEXEC_MARK) or sys.executable]
    if os.path.exists(venv_python) and os.path.realpath(tried[0]) != os.path.realpath(venv_python):
        tried.append(venv_python)
    pin = "2.21.0"
    try:
        with open(os.path.join(REPO, "scripts", "setup.sh"), encoding="utf-8") as f:
            pin = re.search(r"^tensorboard_pin=(\S+)", f.read(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    print(
        f"tensorboard.py: the tensorboard package is not installed (tried {' and '.join(tried)})."
        "\nInstall it with\n"
        f"  scripts/setup.sh none    (also the Debian packages; makes {TOOLS_VENV})\n"
        "or by hand:\n"
        f"  python3 -m venv {TOOLS_VENV} && {TOOLS_VENV}/bin/pip install tensorboard=={pin}",
        file=sys.stderr,
    )
    sys.exit(3)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_jsonl(path):
    """The objects of a .jsonl file, with their line numbers. A last line without its newline is
    one the trainer is still writing: left out. Any other line that is not a JSON object, or has
    no numeric "step", is an error naming the file and the line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = text.split("\n")
    partial = lines.pop() if lines else ""  # after the last newline: "" or a line in progress
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise RunError(f"{path}:{number}: malformed line ({e}): {line[:120]}")
        if not isinstance(obj, dict):
            raise RunError(f"{path}:{number}: malformed line (not a JSON object): {line[:120]}")
        if not is_number(obj.get("step")):
            raise RunError(f'{path}:{number}: malformed line (no numeric "step"): {line[:120]}')
        out.append((number, obj))
    if partial.strip():
        print(
            f"tensorboard.py: {path}:{len(lines) + 1}: left out the last line, not yet complete",
            file=sys.stderr,
        )
    return out


def numbers(prefix, key, value):
    """(tag, value) pairs of one field: a number, or a list of them per dc."""
    if is_number(value):
        return [(f"{prefix}/{key}", float(value))]
    if isinstance(value, list):
        return [(f"{prefix}/{key}/dc{i}", float(v)) for i, v in enumerate(value) if is_number(v)]
    return []


def sim_time(obj, path, number, missing):
    value = obj.get("sim_time_s")
    if is_number(value):
        return float(value)
    missing.append(f"{path}:{number}")
    return 0.0


def round_utilisation(line):
    """H t / (H t + E) of a syncs.jsonl line, or None where E is not known."""
    round_s, link_s = line.get("round_s"), line.get("link_s")
    if not is_number(round_s) or round_s <= 0:
        return None
    exposed = line.get("exposed_link_s")
    if not is_number(exposed):
        if "fragment" in line or not is_number(link_s):
            return None
        H, step, landed = line.get("H"), line.get("step"), line.get("landed_step", line["step"])
        if not is_number(H) or H <= 0 or not is_number(landed):
            return None
        exposed = max(0.0, link_s - (landed - step) * round_s / H)
    return round_s / (round_s + exposed)


def run_scalars(run_dir):
    """(step, wall_time, tag, value) of a run directory, ordered by step."""
    if not os.path.isdir(run_dir):
        raise RunError(f"{run_dir}: no such run directory")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(metrics):
        raise RunError(f"{run_dir}: not a run directory (no metrics.jsonl)")
    points = []
    missing = []
    for number, line in read_jsonl(metrics):
        step, wall = int(line["step"]), sim_time(line, metrics, number, missing)
        evaluation = any(key.startswith("eval_") for key in line)
        for key, value in line.items():
            if key == "step":
                continue
            if evaluation:
                if key.startswith("eval_"):
                    points += [(step, wall, t, v) for t, v in numbers("eval", key[5:], value)]
                elif key == "tasks_s":
                    points += [(step, wall, t, v) for t, v in numbers("eval", key, value)]
                elif key == "tasks" and isinstance(value, dict):
                    for task, figures in value.items():
                        for name, figure in (figures or {}).items():
                            points += [(step, wall, t, v)
                                       for t, v in numbers(f"tasks/{task}", name, figure)]
            else:
                points += [(step, wall, t, v) for t, v in numbers("train", key, value)]
    syncs = os.path.join(run_dir, "syncs.jsonl")
    if os.path.isfile(syncs):
        for number, line in read_jsonl(syncs):
            landed = line.get("landed_step", line["step"])
            if not is_number(landed):
                raise RunError(f'{syncs}:{number}: malformed line ("landed_step" not a number)')
            step, wall = int(landed), sim_time(line, syncs, number, missing)
            for key, value in line.items():
                if key not in ("step", "landed_step"):
                    points += [(step, wall, t, v) for t, v in numbers("sync", key, value)]
            utilisation = round_utilisation(line)
            if utilisation is not None:
                points.append((step, wall, "sync/compute_utilisation", utilisation))
    summary_path = os.path.join(run_dir, "summary.json")
    if os.path.isfile(summary_path):
        try:
            with open(summary_path, encoding="utf-8") as f:
                summary = json.load(f)
        except ValueError as e:
            raise RunError(f"{summary_path}: malformed ({e})")
        if not isinstance(summary, dict):
            raise RunError(f"{summary_path}: malformed (not a JSON object)")
        if is_number(summary.get("steps")):
            step = int(summary["steps"])
            wall = sim_time(summary, summary_path, 1, missing)
            for key in SUMMARY_KEYS:
                points += [(step, wall, t, v) for t, v in numbers("summary", key, summary.get(key))]
    if missing:
        print(
            f"tensorboard.py: {len(missing)} lines without sim_time_s (first {missing[0]}): their"
            " wall_time is 0",
            file=sys.stderr,
        )
    points.sort(key=lambda p: p[0])  # stable: within a step, the files' order
    return points


def write_events(points, out_dir):
    """One event file in out_dir, replacing the one an earlier call wrote."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, EVENT_FILE)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        writer = RecordWriter(f)
        # wall_time 0: the start of the simulated clock, like every other event's.
        header = event_pb2.Event(wall_time=0.0, file_version="brain.Event:2")
        header.source_metadata.writer = "autoloco scripts/tensorboard.py"
        writer.write(header.SerializeToString())
        for step, wall, tag, value in points:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            event = event_pb2.Event(wall_time=wall, step=step, summary=summary)
            writer.write(event.SerializeToString())
        writer.flush()
    os.replace(tmp, path)
    return path


def float32_text(value):
    """The shortest decimal that reads back as the same 32-bit float."""
    for digits in range(1, 10):
        text = "%.*g" % (digits, value)
        if struct.unpack("f", struct.pack("f", float(text)))[0] == value:
            return float(text)
    return value


def dump(logdirs):
    """Every scalar that TensorBoard's EventAccumulator reads from each LOGDIR, one JSON line per
    event: {"tag", "step", "wall_time", "value", "logdir"}, by tag and step."""
    from tensorboard.backend.event_processing import event_accumulator

    for logdir in logdirs:
        if not os.path.isdir(logdir):
            raise RunError(f"{logdir}: no such directory")
        accumulator = event_accumulator.EventAccumulator(
            logdir, size_guidance={event_accumulator.SCALARS: 0}
        )
        accumulator.Reload()
        for tag in sorted(accumulator.Tags()["scalars"]):
            for e in accumulator.Scalars(tag):
                value = float32_text(e.value) if math.isfinite(e.value) else None
                print(
                    json.dumps(
                        {
                            "tag": tag,
                            "step": e.step,
                            "wall_time": e.wall_time,
                            "value": value,
                            "logdir": logdir,
                        }
                    )
                )


def main():
    parser = argparse.ArgumentParser(
        description="Write TensorBoard event files from autoloco run directories "
        "(metrics.jsonl, syncs.jsonl, summary.json); wall_time = simulated time.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write to DIR/<run name>/ (for tensorboard --logdir DIR) instead of "
        "RUN_DIR/tensorboard/",
    )
    parser.add_argument(
        "--dump",
        action="store_true",
        help="instead, print the scalars read back from the given TensorBoard log directories",
    )
    args = parser.parse_args()
    if args.dump and args.out:
        parser.error("--dump takes log directories and no --out")
    targets = []
    if not args.dump:
        names = {}
        for run_dir in args.run_dirs:
            name = os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
            if args.out and name in names:
                parser.error(
                    f"{names[name]} and {run_dir} are both named {name}: with --out each run "
                    "goes to DIR/<its directory's name>/"
                )
            names[name] = run_dir
            out_dir = (
                os.path.join(args.out, name) if args.out else os.path.join(run_dir, "tensorboard")
            )
            targets.append((run_dir, out_dir))
    import_tensorboard()
    try:
        if args.dump:
            dump(args.run_dirs)
            return 0
        # Every run is read before any file is written: a malformed line writes nothing.
        scalars = [run_scalars(run_dir) for run_dir, _ in targets]
        for (run_dir, out_dir), points in zip(targets, scalars):
            path = write_events(points, out_dir)
            tags = len({p[2] for p in points})
            print(f"{run_dir}: {len(points)} scalars, {tags} tags -> {path}")
    except BrokenPipeError:  # the reader of --dump went away (| head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (RunError, OSError) as e:
        print(f"tensorboard.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
