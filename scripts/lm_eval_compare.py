#!/usr/bin/env python3
"""A run's in-loop task scores against lm-evaluation-harness's on the run's export.

    python=$(scripts/hf-env.sh | tail -1)
    autoloco-ckpt export --format hf RUN_DIR/checkpoints/step_N EXPORT_DIR
    "$python" scripts/lm_eval_compare.py RUN_DIR EXPORT_DIR [--out DIR] [--batch-size B]
        [--json FILE]

For each task of the run's eval.tasks (its config.yaml), writes an lm-eval task config over the
same items (for hellaswag, arc, piqa and lambada the harness's own task, hellaswag.yaml,
arc_easy.yaml, piqa.yaml, lambada_openai.yaml, included with only the data source changed; for
mc the generic multiple-choice task of docs/tasks.md), runs

    lm_eval run --model hf --model_args pretrained=EXPORT_DIR --device cpu --log_samples ...

offline (HF_HUB_OFFLINE), and compares with the run's last evaluation: summary.json's
tasks.<name> (acc, acc_norm, n) and RUN_DIR/tasks/<name>.scores.jsonl (each choice's
log-likelihood, against lm-eval's samples). The checkpoint must be the one of that evaluation
(the run's last, at its end). Prints a table; --json writes the figures.

Exit status: 0 when every task's item count and correct counts (acc, acc_norm) are equal; 1 when
one differs or a file is missing; 2 on usage errors; 3 when lm_eval fails. A differing decision
on a near-tie (the two best choices within --tie of each other on either side) is reported but,
being float noise, only counted as such.
"""

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

try:
    import yaml
except ImportError:  # pragma: no cover
    print("lm_eval_compare.py: run it with the Python of scripts/hf-env.sh", file=sys.stderr)
    sys.exit(2)

HARNESS_TASKS = {"hellaswag": "hellaswag/hellaswag.yaml", "arc": "arc/arc_easy.yaml",
                 "piqa": "piqa/piqa.yaml", "lambada": "lambada/lambada_openai.yaml"}


def fail(message, code=1):
    print(f"lm_eval_compare.py: {message}", file=sys.stderr)
    sys.exit(code)


def harness_dir():
    try:
        import lm_eval
    except ImportError:
        fail("lm_eval is not installed in this Python: run it with $(scripts/hf-env.sh | tail -1)",
             2)
    return os.path.join(os.path.dirname(lm_eval.__file__), "tasks")


def items_file(task, out_dir):
    """The task file's non-blank lines (its first `limit`), as the run scored them."""
    lines = []
    with open(task["path"], encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line if line.endswith("\n") else line + "\n")
    limit = int(task.get("limit") or 0)
    if limit > 0:
        lines = lines[:limit]
    path = os.path.abspath(os.path.join(out_dir, "data", task["name"] + ".jsonl"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path, len(lines)


def task_config(task, data_file, harness):
    name = "autoloco_" + task["name"]
    config = {"task": name, "dataset_path": "json", "dataset_name": None,
              "dataset_kwargs": {"data_files": {"test": data_file}},
              "training_split": None, "validation_split": None, "test_split": "test",
              "tag": [], "metadata": {"version": 1.0}}
    if task["format"] in HARNESS_TASKS:
        config["include"] = os.path.join(harness, HARNESS_TASKS[task["format"]])
    else:  # mc: the generic multiple-choice task (docs/tasks.md)
        config.update({"output_type": "multiple_choice", "doc_to_text": "context",
                       "doc_to_choice": "choices", "doc_to_target": "gold",
                       "metric_list": [{"metric": m, "aggregation": "mean",
                                        "higher_is_better": True}
                                       for m in ("acc", "acc_norm")]})
    return name, config


def run_lm_eval(export_dir, task_dir, names, out_dir, batch_size):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HOME=os.path.join(out_dir, "hf-home"), TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "lm_eval", "run", "--model", "hf",
               "--model_args", f"pretrained={os.path.abspath(export_dir)}",
               "--include_path", task_dir, "--tasks", ",".join(names), "--device", "cpu",
               "--batch_size", str(batch_size), "--output_path",
               os.path.join(out_dir, "lm_eval"), "--log_samples"]
    print("$", " ".join(command), flush=True)
    start = time.monotonic()
    log_path = os.path.join(out_dir, "lm_eval.log")
    with open(log_path, "w") as log:
        code = subprocess.call(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    if code != 0:
        with open(log_path) as log:
            sys.stderr.write(log.read()[-4000:])
        fail(f"lm_eval exited with {code} (its log: {log_path})", 3)
    results = sorted(glob.glob(os.path.join(out_dir, "lm_eval", "**", "results_*.json"),
                               recursive=True))
    if not results:
        fail(f"lm_eval wrote no results_*.json under {out_dir}/lm_eval")
    with open(results[-1]) as f:
        return json.load(f), os.path.dirname(results[-1]), seconds


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def first_argmax(values):
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def near_tie(values, tie):
    ordered = sorted(values, reverse=True)
    return len(ordered) > 1 and ordered[0] - ordered[1] < tie


def compare_samples(ours, samples, chars, tie):
    """Per item: |Δ log-likelihood| and decisions that differ (off ties / on near-ties)."""
    samples = sorted(samples, key=lambda s: s["doc_id"])
    max_diff = 0.0
    differ = ties = 0
    for item, sample, lengths in zip(ours, samples, chars):
        theirs = [float(r[0]) for r in sample["filtered_resps"]]
        mine = item["loglikelihoods"]
        for a, b in zip(mine, theirs):
            max_diff = max(max_diff, abs(a - b))
        for transform in (lambda v: v, lambda v: [x / n for x, n in zip(v, lengths)]):
            if first_argmax(transform(mine)) != first_argmax(transform(theirs)):
                if near_tie(transform(mine), tie) or near_tie(transform(theirs), tie):
                    ties += 1
                else:
                    differ += 1
    return max_diff, differ, ties


def choice_chars(ids_path):
    rows = read_jsonl(ids_path)[1:]
    return [[c["chars"] for c in row["choices"]] for row in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("export_dir")
    parser.add_argument("--out", help="work directory (default RUN_DIR/lm_eval_compare)")
    parser.add_argument("--batch-size", type=int, default=8, help="lm_eval --batch_size")
    parser.add_argument("--tie", type=float, default=1e-4,
                        help="log-likelihood gap under which differing decisions are float "
                             "noise (default 1e-4)")
    parser.add_argument("--json", help="write the comparison here")
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out or os.path.join(args.run_dir, "lm_eval_compare"))
    os.makedirs(out_dir, exist_ok=True)
    try:
        with open(os.path.join(args.run_dir, "config.yaml")) as f:
            tasks = (yaml.safe_load(f).get("eval") or {}).get("tasks") or []
        with open(os.path.join(args.run_dir, "summary.json")) as f:
            summary = json.load(f)
    except OSError as e:
        fail(f"{e}: is {args.run_dir} a finished run directory?")
    if not tasks:
        fail(f"{args.run_dir}/config.yaml has no eval.tasks")
    harness = harness_dir()
    task_dir = os.path.join(out_dir, "tasks")
    os.makedirs(task_dir, exist_ok=True)
    names = []
    for task in tasks:
        data_file, _ = items_file(task, out_dir)
        name, config = task_config(task, data_file, harness)
        with open(os.path.join(task_dir, name + ".yaml"), "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        names.append(name)
    results, samples_dir, lm_eval_s = run_lm_eval(args.export_dir, task_dir, names, out_dir,
                                                  args.batch_size)
    metrics = [json.loads(line) for line in open(os.path.join(args.run_dir, "metrics.jsonl"))]
    last_eval = [m for m in metrics if "tasks" in m][-1]
    rows = []
    ok = True
    for task, name in zip(tasks, names):
        ours = summary.get("tasks", {}).get(task["name"])
        theirs = results["results"].get(name)
        if ours is None or theirs is None:
            fail(f"task {task['name']}: no figures in summary.json or lm_eval's results")
        n_theirs = results["n-samples"][name]["effective"]
        row = {"task": task["name"], "format": task["format"], "n": ours["n"],
               "n_lm_eval": n_theirs}
        for metric in ("acc", "acc_norm"):
            if metric in ours:
                row[metric] = ours[metric]
                row[metric + "_lm_eval"] = theirs[metric + ",none"]
                row[metric + "_stderr"] = ours[metric + "_stderr"]
                row[metric + "_stderr_lm_eval"] = theirs.get(metric + "_stderr,none")
                same = round(ours[metric] * ours["n"]) == round(theirs[metric + ",none"] * n_theirs)
                ok = ok and same
        if "perplexity" in ours:
            row["perplexity"] = ours["perplexity"]
            row["perplexity_lm_eval"] = theirs["perplexity,none"]
        ok = ok and ours["n"] == n_theirs
        samples = glob.glob(os.path.join(samples_dir, f"samples_{name}_*.jsonl"))
        scores = os.path.join(args.run_dir, "tasks", task["name"] + ".scores.jsonl")
        ids = os.path.join(args.run_dir, "tasks", task["name"] + ".ids.jsonl")
        if samples and os.path.exists(scores):
            diff, differ, ties = compare_samples(read_jsonl(scores), read_jsonl(samples[-1]),
                                                 choice_chars(ids), args.tie)
            row.update({"max_abs_ll_diff": diff, "decisions_differ": differ,
                        "decisions_differ_on_ties": ties})
        rows.append(row)
    n_items = sum(r["n"] for r in rows)
    report = {"tasks": rows, "items": n_items, "autoloco_tasks_s": last_eval.get("tasks_s"),
              "lm_eval_s": results.get("total_evaluation_time_seconds"),
              "lm_eval_process_s": lm_eval_s, "equal": ok}
    print(f"{'task':<12} {'n':>6} {'acc':>15} {'acc_norm':>15} {'max|dll|':>10} "
          f"{'differ':>6}  (autoloco / lm-eval)")
    for r in rows:
        acc = f"{r['acc']:.4f}/{r['acc_lm_eval']:.4f}"
        norm = (f"{r['acc_norm']:.4f}/{r['acc_norm_lm_eval']:.4f}" if "acc_norm" in r
                else f"ppl {r['perplexity']:.4g}/{r['perplexity_lm_eval']:.4g}")
        print(f"{r['task']:<12} {r['n']:>6} {acc:>15} {norm:>15} "
              f"{r.get('max_abs_ll_diff', math.nan):>10.2e} {r.get('decisions_differ', '-'):>6}")
    lm_s = report["lm_eval_s"]
    if report["autoloco_tasks_s"] and lm_s:
        print(f"scoring: autoloco {n_items / report['autoloco_tasks_s']:.1f} items/s "
              f"({report['autoloco_tasks_s']:.2f} s in the run), lm-eval "
              f"{n_items / float(lm_s):.1f} items/s ({float(lm_s):.2f} s; process "
              f"{lm_eval_s:.1f} s)")
    print("equal" if ok else "DIFFERENT")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
