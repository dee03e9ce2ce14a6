#!/usr/bin/env python3
"""Report of a sweep (scripts/sweep.py): tables, the saving in rounds of the adaptive
controllers against DiLoCo, and plots.

    scripts/sweep_report.py OUT        # scripts/sweep.py also calls report(OUT) after a sweep

Reads OUT/sweep.json (the spec, and every run's group, grid values and seed) and, for every run
that finished (that has OUT/<run>/summary.json; the others are ignored), its summary.json, its
effective config.yaml (any setting, including those the summary lacks, flattened to
"section.key"; a key missing there is left empty), metrics.jsonl and syncs.jsonl. Writes to OUT:

  results.csv             one row per finished run: group, seed, grid values, settings, outcomes
  table.md                one row per configuration (group + grid values), seeds pooled; with
                          eval.tasks, each task's final acc_norm (acc for lambada) ± its
                          standard error beside the loss and bpb (results.csv: every figure,
                          task.<name>.<figure>)
  saving.md, saving.json  the saving of every adaptive configuration against every curve
  loss_vs_rounds.png      the final measure (below) against rounds: the curves and the adaptive
                          runs
  loss_vs_time.png        the measure over training against simulated time at the configured link
  h_over_training.png     H per round of every adaptive run
  batch.md                with adaptive batches (a run whose batch_controller is not "fixed"):
                          one row per configuration, seeds pooled: steps, tokens, final batch,
                          batch changes, final eval loss (and bpb), link and simulated time
  batch_over_training.png with adaptive batches: the batch per round (mean over dcs) against
                          the progress in steps at the initial batch, one line per run
  overlap.md              with overlapped, fragmented or link-paced syncs: per configuration,
                          how its syncs ran, utilisation, link seconds, peak and total bytes
  wire.md                 with a wire format other than fp32 or error feedback: per
                          configuration, its bytes per round and final measure against the same
                          settings in fp32
  time_to_target.md/.png  with the spec's time_to_target {reference: GROUP, within: 0.01} (or
                          {loss: L} or {bpb: B}; optional by: AXIS; optional where: {KEY: V}
                          narrowing the reference group to the configurations with those
                          settings, then every row's "vs reference" is against that one): the
                          simulated time of every configuration to the target, and the measure
                          against simulated time, one panel per value of `by`

The measure: eval bpb (bits per byte of the validation text: the eval loss in nats per token /
ln 2 / the validation split's bytes per token, from the shards' prepare.json) when every finished
run has it, else eval loss (nats per token). Losses per token of runs with different tokenizers
do not compare (a token of a 4k-piece vocabulary holds about 4 bytes, a byte token one); bits per
byte do, so the comparisons run on bpb whenever they can, and on eval loss for sweeps written
before bpb (or on shards without prepare.json), whose table headers and axis labels then say
"eval loss". A run has bpb when its evaluations (metrics.jsonl) have eval_bpb and its final
value is known: summary.json's final_eval_bpb, else the last evaluation's eval_bpb (the final
evaluation is logged there too). Every target, envelope, saving and time to target runs on the
one measure; the tables keep the final eval loss beside the final eval bpb. saving.json keeps
its keys ("loss" and "sd" are eval loss) and adds "bpb" and "bpb_sd" beside them (null when the
report runs on eval loss); its "measure" ("bpb" or "loss") says which of the two the envelope,
R_D, the saving and gap_to_best are on. An absolute time_to_target names its measure: {loss: L}
is on eval loss, {bpb: B} on eval bpb (and needs every run to have it).

A run whose summary.json has no batch_controller (written before adaptive batches) is a
fixed-batch run; one without final_batch has no final batch, and its batch cells stay empty.

The saving: saving = 1 − R_A/R_D at equal measure (eval bpb or eval loss), interpolated on log
R along the DiLoCo curve, as ALGORITHMS.md §2 defines for the loss. A curve (the spec's
"curves": groups and an optional "where" filter, whose values compare loosely, 0.9 == "0.9") has
one point per interval.H: of the configurations with that H, the one with the lowest mean final
measure over seeds (μ tuned per H), at R = its mean rounds and L = its mean measure (the "loss"
of this paragraph). The points sorted by R are made monotone by their lower envelope (walking
from few rounds to many, L is the running minimum: more rounds are never credited with a worse
loss than fewer). Every configuration of the spec's "adaptive"
groups is compared seed by seed: a run with R_A rounds and loss L_A is matched to the rounds R_D
at which the envelope reaches L_A, interpolated linearly in log R between the two points that
bracket L_A. Below the whole curve, the saving is 1 − R_A/R_best against the best (lowest-loss)
point and is a lower bound (≥). Above the whole curve (worse than its cheapest point) it is
1 − R_A/R_cheapest and an upper bound (≤). Every seed counts in the mean; the flags say which
are bounds.

Simulated time (loss_vs_time.png, batch.md, time_to_target.md): tokens × c_tok + the exposed
link seconds of the syncs that landed by then (a sync overlapped with τ steps exposes
max(0, link_s − the compute of those steps at c_tok); a blocking one all of its link_s), where
tokens are the tokens (all ranks) done by then and c_tok is the median over the finished runs
of (sim_time_s − exposed_link_s) / tokens: one compute cost per token for every
run, free of the noise of a shared machine, and fair between runs whose batches differ (a step
of a grown batch costs more). A sweep over inner.optimizer charges each optimizer its own
median instead (c_tok times its cost_scale), since Muon's step costs more than AdamW's. With one fixed batch for every run, tokens are proportional to
steps and this is step × c with c = c_tok × tokens per step, the median compute seconds per step.
The tokens done at an evaluation are interpolated (linearly in steps, exact within a round, whose
batch is fixed) between the known points: 0 at step 0, each round's end (syncs.jsonl: the sum of
the rounds' tokens), each training line of metrics.jsonl and the summary's steps and tokens. A
configuration's line averages its seeds at equal simulated time (their measures interpolated
linearly in time; the first and last points are the means of the seeds' first and last
evaluations), since seeds whose batch or interval adapt evaluate at different steps. In a sweep
with adaptive batches, loss_vs_time.png also draws every configuration that is neither a curve
point nor in an adaptive group.
"""
import csv
import json
import math
import os
import sys

import numpy as np
import yaml

from results_table import si

# Settings read from every run's config for results.csv, after the grid keys.
SETTINGS = ["interval.H", "outer.momentum", "outer.momentum_schedule", "outer.correction",
            "batch.controller", "batch.test", "batch.theta", "batch.lr_scaling",
            "outer.overlap_steps", "outer.overlap_alpha", "outer.fragments",
            "interval.target_utilisation", "outer.wire_dtype", "outer.wire_block",
            "outer.wire_rounding", "outer.error_feedback", "outer.wire_topk",
            "outer.wire_topk_chunk", "outer.error_feedback_beta", "outer.momentum_mode",
            "inner.optimizer", "wan.mode"]
# Outcomes from summary.json for results.csv; mean_H (steps / rounds) and final_batch_mean (the
# mean over dcs of final_batch) are computed, final_eval_bpb falls back to metrics.jsonl.
OUTCOMES = ["steps", "tokens", "rounds", "inter_dc_bytes", "sent_bytes", "peak_sync_bytes",
            "final_eval_loss", "final_eval_bpb",
            "final_train_loss", "mean_H", "final_batch_mean", "wall_s", "link_s", "model_link_s",
            "sim_time_s",
            "compute_utilisation", "exposed_link_s", "sync_wait_s", "compute_utilisation_wall",
            "tokenizer", "vocab_size", "val_bytes_per_token"]
WORSE = "above the whole curve: upper bound against its cheapest point"
LOWER_BOUND = "below the whole curve: lower bound against its best point"
# What the report compares runs on (choose_measure), in words for headers and labels.
MEASURES = {"bpb": "eval bpb", "loss": "eval loss"}


# ---------------------------------------------------------------- reading


def read_jsonl(path):
    """The JSON objects of a .jsonl file; none when it is missing (an older run)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def flatten(tree, prefix=""):
    """A nested config as {"section.key": value}, the form --set and sweep grids use."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


class Run:
    """One finished run: its sweep entry, summary and effective config."""

    def __init__(self, out, entry):
        self.name = entry["name"]
        self.group = entry["group"]
        self.grid = entry.get("grid") or {}
        self.seed = entry["seed"]
        self.dir = os.path.join(out, self.name)
        with open(os.path.join(self.dir, "summary.json")) as f:
            self.summary = json.load(f)
        config_path = os.path.join(self.dir, "config.yaml")
        self.config = {}
        if os.path.exists(config_path):
            with open(config_path) as f:
                self.config = flatten(yaml.safe_load(f) or {})
        # Its inner optimizer's compute cost per token relative to c_tok (compute_per_token):
        # 1 unless the sweep compares inner optimizers, whose steps cost differently.
        self.cost_scale = 1.0

    def setting(self, key):
        """A config value: the grid's if the key is a grid axis, else the effective config's."""
        return self.grid[key] if key in self.grid else self.config.get(key)

    def outcome(self, key):
        """A summary value for results.csv; mean_H is steps per round, final_batch_mean the
        mean over dcs of final_batch (empty without one)."""
        if key == "mean_H":
            rounds = self.summary.get("rounds")
            return self.summary["steps"] / rounds if rounds else None
        if key == "final_batch_mean":
            return self.final_batch_mean
        if key == "final_eval_bpb":
            return self.bpb
        return self.summary.get(key)

    @property
    def loss(self):
        return self.summary["final_eval_loss"]

    @property
    def bpb(self):
        """Final eval bits per byte: summary.json's final_eval_bpb, else the last evaluation's
        eval_bpb in metrics.jsonl (a summary written before the key, whose evaluations have it);
        None when unknown (a run written before bpb, or shards without prepare.json)."""
        if self.summary.get("final_eval_bpb") is not None:
            return self.summary["final_eval_bpb"]
        lines = [m for m in self.metrics() if "eval_loss" in m]
        return lines[-1].get("eval_bpb") if lines else None

    def final(self, measure):
        """The final value of a measure ("bpb" or "loss"); None when unknown."""
        return self.bpb if measure == "bpb" else self.loss

    @property
    def has_bpb(self):
        """Whether the report can use bpb for this run: its final bpb is known and every
        evaluation over training has eval_bpb."""
        return self.bpb is not None and all(m.get("eval_bpb") is not None
                                            for m in self.metrics() if "eval_loss" in m)

    @property
    def rounds(self):
        return self.summary["rounds"]

    @property
    def tokens(self):
        """Tokens of the run, all ranks; None in a summary without them."""
        return self.summary.get("tokens")

    @property
    def batch_controller(self):
        """"fixed" or "adloco"; a run written before adaptive batches is a fixed-batch run."""
        return self.summary.get("batch_controller") or self.config.get("batch.controller") \
            or "fixed"

    @property
    def adaptive_batch(self):
        return self.batch_controller != "fixed"

    @property
    def final_batch(self):
        """Sequences per inner step of every dc in the last round run: syncs.jsonl's last
        `batch` (in the first AdLoCo builds summary.json's final_batch held the choice for a
        round that never ran), else summary.json's final_batch; None without either."""
        syncs = self.syncs()
        if syncs and syncs[-1].get("batch"):
            return syncs[-1]["batch"]
        return self.summary.get("final_batch") or None

    @property
    def final_batch_mean(self):
        return float(np.mean(self.final_batch)) if self.final_batch else None

    def batch_changes(self):
        """Rounds whose batch (any dc's) differs from the previous round's; None when the
        rounds do not record their batch."""
        batches = [s.get("batch") for s in self.syncs()]
        if not batches or any(b is None for b in batches):
            return None
        return sum(a != b for a, b in zip(batches, batches[1:]))

    def metrics(self):
        if not hasattr(self, "_metrics"):
            self._metrics = read_jsonl(os.path.join(self.dir, "metrics.jsonl"))
        return self._metrics

    def evals(self, measure="loss"):
        """(step, value) of every evaluation over training of a measure ("loss": eval_loss,
        "bpb": eval_bpb)."""
        key = "eval_" + measure
        return [(m["step"], m[key]) for m in self.metrics() if m.get(key) is not None]

    def syncs(self):
        if not hasattr(self, "_syncs"):
            self._syncs = read_jsonl(os.path.join(self.dir, "syncs.jsonl"))
        return self._syncs

    def tokens_at(self, step):
        """Tokens (all ranks) done by an inner step, linear in steps between the known points:
        0 at step 0, every round's end (the sum of the rounds' tokens in syncs.jsonl, whose
        lines hold each round's own), every training line of metrics.jsonl (tokens so far) and
        the summary's steps and tokens. Exact at a round's end, where evaluations happen. With
        fragments (outer.fragments > 1) only fragment 0's lines count, whose periods tile the
        run."""
        if not hasattr(self, "_token_points"):
            self._token_points = self.token_points()
        steps, tokens = self._token_points
        return float(np.interp(step, steps, tokens))

    def token_points(self):
        """The (steps, tokens) points that tokens_at interpolates between."""
        known = {0: 0}
        # With fragments a line's tokens are its fragment's period: fragment 0's periods tile
        # the run.
        syncs = [s for s in self.syncs() if s.get("fragment", 0) == 0]
        if syncs and all("tokens" in s for s in syncs):
            done = 0
            for s in sorted(syncs, key=lambda s: s["step"]):
                done += s["tokens"]
                known[s["step"]] = done
        known.update({m["step"]: m["tokens"] for m in self.metrics()
                      if "tokens" in m and "eval_loss" not in m})
        if self.tokens is not None:
            known[self.summary["steps"]] = self.tokens
        steps = sorted(known)
        return steps, [known[s] for s in steps]

    def exposed_link_at(self, step, c_tok):
        """Exposed link seconds of the syncs that landed at or before an inner step: a sync
        handed over at its step and landed at landed_step (later with outer.overlap_steps > 0)
        is charged max(0, link_s − the compute of the tokens done between the two) at c_tok,
        ALGORITHMS.md §4's E = max(0, T − τ t); a blocking sync (landed where it ended, or a
        line without landed_step) is charged all of its link_s."""
        exposed = 0.0
        for s in self.syncs():
            landed = s.get("landed_step", s["step"])
            if landed > step:
                continue
            covered = c_tok * self.cost_scale * (self.tokens_at(landed) -
                                                  self.tokens_at(s["step"]))
            exposed += max(0.0, s["link_s"] - covered)
        return exposed

    def exposed_link_s(self, c_tok):
        """exposed_link_at the run's last step: the whole run's exposed link seconds."""
        return self.exposed_link_at(self.summary["steps"], c_tok)


class Config:
    """A configuration (group + grid values) and its finished runs, one per seed."""

    def __init__(self, entry):
        self.group = entry["group"]
        self.grid = entry.get("grid") or {}
        suffix = f"_s{entry['seed']}"
        self.name = entry["name"][:-len(suffix)] if entry["name"].endswith(suffix) \
            else entry["name"]
        self.runs = []

    def setting(self, key):
        return self.runs[0].setting(key) if self.runs else self.grid.get(key)

    @property
    def loss(self):
        return mean_sd([r.loss for r in self.runs])

    def final(self, measure):
        """Mean and sd over seeds of a final measure; both None unless every seed has it (a
        mean over some seeds would not compare with the others')."""
        values = [r.final(measure) for r in self.runs]
        return mean_sd(values) if None not in values else (None, None)

    @property
    def rounds(self):
        return mean_sd([r.rounds for r in self.runs])

    @property
    def adaptive_batch(self):
        """Whether any of its runs adapted its batch (batch_controller not "fixed")."""
        return any(r.adaptive_batch for r in self.runs)


def load(out):
    """The spec, the entries of sweep.json, its configurations (in sweep order) and the
    finished runs."""
    with open(os.path.join(out, "sweep.json")) as f:
        sweep = json.load(f)
    configs = {}
    runs = []
    for entry in sweep["runs"]:
        key = (entry["group"], json.dumps(entry.get("grid") or {}, sort_keys=True))
        config = configs.setdefault(key, Config(entry))
        if os.path.exists(os.path.join(out, entry["name"], "summary.json")):
            run = Run(out, entry)
            config.runs.append(run)
            runs.append(run)
    return sweep["spec"], sweep["runs"], list(configs.values()), runs


# ---------------------------------------------------------------- helpers


def mean_sd(values):
    """Mean and sample sd; sd is None for one value, both None for none."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return float(np.mean(values)), sd


def pm(mean, sd, fmt="{:.4f}"):
    """'mean ± sd' in Markdown; just the mean for one seed, '–' for none."""
    if mean is None:
        return "–"
    return fmt.format(mean) + (f" ± {fmt.format(sd)}" if sd is not None else "")


def loose(value):
    """A value normalised so that 0.9, "0.9" and 0.90 compare equal."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return tuple(loose(v) for v in value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def text(value):
    """A setting as a table or CSV cell: lists as JSON, missing as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def grid_keys_of(configs):
    """The grid axes of the configurations, in first-seen order."""
    return list(dict.fromkeys(k for c in configs for k in c.grid))


def grid_keys(entries):
    """Every grid axis of any run, in order of first appearance."""
    return list(dict.fromkeys(k for e in entries for k in (e.get("grid") or {})))


def run_cost(run):
    """A run's measured compute seconds per token (all ranks)."""
    s = run.summary
    return (s["sim_time_s"] - s.get("exposed_link_s", s["link_s"])) / run.tokens


def compute_per_token(runs):
    """c_tok: median over the runs of (sim_time_s − exposed_link_s) / tokens, the compute
    seconds per token (all ranks); None when no run has tokens. When the runs differ in
    inner.optimizer, each run's cost_scale becomes its optimizer's median over c_tok, so that a
    costlier step (Muon's Newton-Schulz) is charged as measured."""
    timed = [r for r in runs if r.tokens]
    if not timed:
        return None
    c_tok = float(np.median([run_cost(r) for r in timed]))
    optimizers = {r.config.get("inner.optimizer", "adamw") for r in timed}
    if len(optimizers) > 1:
        for optimizer in optimizers:
            own = [r for r in timed if r.config.get("inner.optimizer", "adamw") == optimizer]
            scale = float(np.median([run_cost(r) for r in own])) / c_tok
            for r in own:
                r.cost_scale = scale
    return c_tok


def sim_time(run, step, c_tok):
    """Simulated seconds by an inner step: tokens done × c_tok + the exposed link seconds of
    the syncs landed by then (Run.exposed_link_at)."""
    return run.tokens_at(step) * c_tok * run.cost_scale + run.exposed_link_at(step, c_tok)


def cost_text(runs, c_tok):
    """c_tok in words for footers and labels, with the cost of a step when every fixed-batch
    run has the same tokens per step (then simulated time is step × that + link)."""
    if c_tok is None:
        return "c_tok unknown (no summary.json has tokens)"
    words = f"c_tok = {1e6 * c_tok:.4g} µs per token"
    scales = sorted({(r.config.get("inner.optimizer", "adamw"), r.cost_scale) for r in runs
                     if r.cost_scale != 1.0})
    if scales:
        words += " (times " + ", ".join(f"{s:.3f} for inner.optimizer {o}"
                                        for o, s in scales) + ": each optimizer's median)"
    per_step = {r.tokens / r.summary["steps"] for r in runs
                if not r.adaptive_batch and r.tokens and r.summary.get("steps")}
    if len(per_step) == 1:
        tokens = per_step.pop()
        words += f" ({1000 * c_tok * tokens:.2f} ms per step of {tokens:g} tokens)"
    return words


def link_text(runs):
    """The configured link(s), e.g. '1 Gbit/s, 50 ms', for titles."""
    links = dict.fromkeys(
        (r.summary.get("wan", {}).get("bandwidth_gbps", r.config.get("wan.bandwidth_gbps")),
         r.summary.get("wan", {}).get("latency_ms", r.config.get("wan.latency_ms")))
        for r in runs)
    return "; ".join(f"{bw:g} Gbit/s, {lat:g} ms" for bw, lat in links)


def choose_measure(runs):
    """"bpb" when every finished run has eval bpb (Run.has_bpb), else "loss": one measure for
    every comparison of the report, eval bpb across tokenizers, eval loss for older sweeps."""
    return "bpb" if runs and all(r.has_bpb for r in runs) else "loss"


def measure_text(measure, runs):
    """The measure in words for footers: what it is, and why eval loss when it is that."""
    if measure == "bpb":
        return ("Measure: eval bpb, bits per byte of the validation text (eval loss in nats per "
                "token / ln 2 / the validation split's bytes per token), which compares runs "
                f"with different tokenizers; all {len(runs)} finished runs have it.")
    lacking = [r.name for r in runs if not r.has_bpb]
    some = f"all {len(runs)}" if len(lacking) == len(runs) else f"{len(lacking)} of the {len(runs)}"
    lack = "lacks" if len(lacking) == 1 else "lack"
    words = (f"Measure: eval loss (nats per token), since {some} finished runs {lack} eval bpb "
             f"({', '.join(lacking[:3])}"
             f"{', ...' if len(lacking) > 3 else ''}: written before bpb, or on shards without "
             "prepare.json).")
    tokenizers = sorted({f"{r.summary['tokenizer']} {text(r.summary.get('vocab_size'))}".strip()
                         for r in runs if r.summary.get("tokenizer") not in (None, "unknown")})
    if len(tokenizers) > 1:
        words += (f" The runs use different tokenizers ({', '.join(tokenizers)}), whose losses "
                  "per token do not compare.")
    return words


def bpb_columns(measure):
    """The final eval bpb column that tables add beside the final eval loss when the report
    runs on bpb."""
    return ["final eval bpb"] if measure == "bpb" else []


def bpb_cells(config, measure):
    """The cell of bpb_columns for a configuration: mean ± sd over seeds."""
    return [pm(*config.final("bpb"))] if measure == "bpb" else []


def task_names(runs):
    """The downstream tasks (eval.tasks) of the runs' summaries, in order of first appearance."""
    names = []
    for r in runs:
        for name in (r.summary.get("tasks") or {}):
            if name not in names:
                names.append(name)
    return names


def task_figure(figures):
    """The headline figure of a task: acc_norm for multiple choice, acc for lambada."""
    return "acc_norm" if "acc_norm" in figures else "acc"


def task_column(runs, name):
    """A task's column header: its name and headline figure."""
    figures = next(r.summary["tasks"][name] for r in runs if name in (r.summary.get("tasks") or {}))
    return f"{name} {task_figure(figures)}"


def task_cell(config, name):
    """A task's final headline figure of a configuration: the mean over seeds ± the mean of
    the runs' standard errors over the items (lm-eval's stderr); '–' where no run scored it."""
    figures = [(r.summary.get("tasks") or {}).get(name) for r in config.runs]
    figures = [f for f in figures if f]
    if not figures:
        return "–"
    key = task_figure(figures[0])
    mean = float(np.mean([f[key] for f in figures]))
    errors = [f.get(key + "_stderr") for f in figures if f.get(key + "_stderr") is not None]
    error = f" ± {np.mean(errors):.3f}" if errors else ""
    return f"{mean:.3f}{error}"


TASK_FIGURES = ["acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "perplexity", "n"]


# ---------------------------------------------------------------- results.csv, table.md


def write_results_csv(path, entries, runs):
    """One row per finished run; grid keys and settings come from the effective config."""
    keys = grid_keys(entries)
    settings = keys + [k for k in SETTINGS if k not in keys]
    tasks = [f"task.{name}.{figure}" for name in task_names(runs) for figure in TASK_FIGURES]
    header = ["name", "group", "seed"] + keys + ["method", "controller"] + \
        settings[len(keys):] + OUTCOMES + tasks
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for r in runs:
            row = {"name": r.name, "group": r.group, "seed": r.seed,
                   "method": r.summary.get("method", r.config.get("outer.method")),
                   "controller": r.summary.get("controller",
                                               r.config.get("interval.controller"))}
            row.update({k: r.setting(k) for k in settings})
            row.update({k: r.outcome(k) for k in OUTCOMES})
            for key in tasks:
                _, name, figure = key.split(".", 2)
                row[key] = ((r.summary.get("tasks") or {}).get(name) or {}).get(figure)
            writer.writerow([text(row[k]) for k in header])


def table_markdown(configs, entries, runs, c_tok, measure):
    """One row per configuration with finished runs, seeds pooled; the footer defines the
    measure and the simulated time of loss_vs_time.png."""
    keys = grid_keys(entries)
    tasks = task_names(runs)
    columns = ["n", "rounds", "inter-dc bytes", "final eval loss"] + bpb_columns(measure) + \
        [task_column(runs, name) for name in tasks] + ["H min/max"]
    lines = ["| group | " + " | ".join(keys + columns) + " |",
             "|" + " --- |" * (len(keys) + len(columns) + 1)]
    for config in configs:
        if not config.runs:
            continue
        hs = [h for r in config.runs for h in r.summary.get("h_per_round", [])]
        lines.append("| " + " | ".join(
            [config.group] + [text(config.grid.get(k)) for k in keys] +
            [str(len(config.runs)), f"{config.rounds[0]:.1f}",
             si(np.mean([r.summary["inter_dc_bytes"] for r in config.runs])) + "B",
             pm(*config.loss)] + bpb_cells(config, measure) +
            [task_cell(config, name) for name in tasks] +
            [f"{min(hs)}/{max(hs)}" if hs else ""]) + " |")
    final = "final eval loss and bpb" if measure == "bpb" else "final eval loss"
    lines += ["", f"{final}: mean ± sample sd over seeds. {measure_text(measure, runs)} "
              f"Simulated time in "
              f"loss_vs_time.png: tokens done (all ranks) × c_tok + the exposed link seconds "
              f"of the syncs landed by then, c_tok = median over the {len(runs)} finished runs "
              f"of (sim_time_s − exposed_link_s) / tokens; {cost_text(runs, c_tok)}; "
              f"link {link_text(runs)}."]
    if tasks:
        lines += ["", "Tasks (eval.tasks, scored on the final anchor as lm-evaluation-harness "
                  "scores them): acc_norm (acc for lambada) at the end, mean over seeds ± the "
                  "mean over seeds of each run's standard error over the task's items; two "
                  "configurations differ in accuracy only where their gap exceeds about twice "
                  "that error."]
    if any(r.adaptive_batch for r in runs):
        lines += ["", "Adaptive batches: steps, tokens and batches per configuration in "
                  "batch.md, the batch per round in batch_over_training.png."]
    return "\n".join(lines) + "\n"


def overlapped(run):
    """Whether the run overlapped, fragmented or link-paced its syncs (outer.overlap_steps > 0,
    outer.fragments > 1 or interval.target_utilisation > 0)."""
    s = run.summary
    return ((s.get("overlap_steps") or 0) > 0 or (s.get("fragments") or 1) > 1 or
            (s.get("target_utilisation") or 0) > 0)


def overlap_markdown(configs, entries, measure):
    """overlap.md: one row per configuration, seeds pooled: how its syncs ran (tau, alpha,
    fragments P, target utilisation u*), the mean interval, the compute utilisation on the
    simulated clock and on the wall clock, the link and waiting seconds, the peak and total
    bytes, and the final eval loss (and bpb)."""
    keys = grid_keys(entries)
    # wan.mode real: link s is measured, and the model's figure goes beside it.
    real = any(r.summary.get("wan", {}).get("mode") == "real" for c in configs for r in c.runs)
    columns = ["n", "tau", "alpha", "P", "u*", "mean H", "utilisation (simulated)",
               "utilisation (wall)", "link s"] + (["model link s"] if real else []) + [
               "exposed link s", "main-thread wait s", "wall s",
               "peak sync bytes", "inter-dc bytes", "final eval loss"] + bpb_columns(measure)
    lines = ["| group | " + " | ".join(keys + columns) + " |",
             "|" + " --- |" * (len(keys) + len(columns) + 1)]
    for config in configs:
        rs = config.runs
        if not rs:
            continue

        def stat(key, fmt):
            return pm(*mean_sd([r.summary.get(key) for r in rs]), fmt)

        def mean_H():
            return pm(*mean_sd([r.summary["steps"] / max(1, r.summary["rounds"]) for r in rs]),
                      "{:.1f}")

        def bytes_of(key):
            values = [r.summary.get(key) for r in rs if r.summary.get(key) is not None]
            return si(float(np.mean(values))) + "B" if values else "-"

        first = rs[0].summary
        lines.append("| " + " | ".join(
            [config.group] + [text(config.grid.get(k)) for k in keys] +
            [str(len(rs)), text(first.get("overlap_steps", 0)),
             text(first.get("overlap_alpha", 0.0)), text(first.get("fragments", 1)),
             text(first.get("target_utilisation", 0.0)), mean_H(),
             stat("compute_utilisation", "{:.3f}"), stat("compute_utilisation_wall", "{:.3f}"),
             stat("link_s", "{:.1f}")] + ([stat("model_link_s", "{:.1f}")] if real else []) + [
             stat("exposed_link_s", "{:.1f}"),
             stat("sync_wait_s", "{:.1f}"), stat("wall_s", "{:.1f}"),
             bytes_of("peak_sync_bytes"), bytes_of("inter_dc_bytes"), pm(*config.loss)] +
            bpb_cells(config, measure)) + " |")
    lines += ["", "mean ± sample sd over seeds. utilisation (simulated): compute / (compute + "
              "exposed link time); utilisation (wall): compute / wall-clock time, where compute "
              "is wall time minus the main thread's waits on the link (docs/run-directory.md). "
              "mean H: inner steps per round (with fragments, per cycle). peak sync bytes: the "
              "largest single sync, all dcs; inter-dc bytes: the whole run's."] + (
                  ["wan.mode real: link s is the measured time of the syncs' all-reduces, model "
                   "link s what the WAN model charges for them, and the exposed link time what "
                   "the ranks waited (docs/multi-host.md)."] if real else [])
    return "\n".join(lines) + "\n"


def batch_markdown(configs, entries, runs, c_tok, measure):
    """batch.md: one row per configuration with finished runs, seeds pooled: what the batch
    did and what it cost in tokens, link and simulated time."""
    keys = grid_keys(entries)
    columns = ["n", "steps", "rounds", "tokens", "final batch (mean)", "final batch (max)",
               "batch changes", "final eval loss"] + bpb_columns(measure) + [
               "link s", "simulated time (s)", "sim_time_s"]
    lines = ["| group | " + " | ".join(keys + columns) + " |",
             "|" + " --- |" * (len(keys) + len(columns) + 1)]
    for config in configs:
        if not config.runs:
            continue
        rs = config.runs
        batches = [r.final_batch for r in rs if r.final_batch]
        final_mean = mean_sd([r.final_batch_mean for r in rs])[0]
        changes = mean_sd([r.batch_changes() for r in rs])[0]
        tokens = mean_sd([r.tokens for r in rs])[0]
        simulated = mean_sd([r.tokens * c_tok * r.cost_scale + r.exposed_link_s(c_tok) for r in rs
                             if r.tokens is not None and c_tok is not None])
        lines.append("| " + " | ".join(
            [config.group] + [text(config.grid.get(k)) for k in keys] +
            [str(len(rs)), pm(mean_sd([r.summary["steps"] for r in rs])[0], None, "{:.1f}"),
             pm(*config.rounds, fmt="{:.1f}"), si(tokens) if tokens is not None else "–",
             pm(final_mean, None, "{:.1f}"),
             str(max(max(b) for b in batches)) if batches else "–",
             pm(changes, None, "{:.1f}"), pm(*config.loss)] + bpb_cells(config, measure) + [
             pm(mean_sd([r.summary["link_s"] for r in rs])[0], None, "{:.2f}"),
             pm(*simulated, fmt="{:.1f}"),
             pm(mean_sd([r.summary["sim_time_s"] for r in rs])[0], None, "{:.1f}")]) + " |")
    lines += ["", "Per configuration (group + grid values), means over its n finished runs "
              "(seeds). steps: inner steps done (run.steps counts steps at the initial batch, "
              "so a run whose batch grew ends after as many tokens in fewer steps). rounds: "
              "inter-dc synchronisations, mean ± sample sd. tokens: all ranks. final batch: "
              "sequences per inner step of each dc (all its ranks) in the last round "
              "(syncs.jsonl's last batch); (mean) is the mean over seeds of the mean over dcs, "
              "(max) the largest of any dc and seed; – for runs without final_batch. batch "
              "changes: rounds whose batch (syncs.jsonl) differs from the previous round's on "
              f"any dc. {'final eval loss and bpb' if measure == 'bpb' else 'final eval loss'}"
              ": mean ± sample sd. link s: simulated link seconds "
              "(summary.json link_s). simulated time: tokens × c_tok + the exposed link "
              "seconds, mean ± sample sd, with c_tok = median over the "
              f"{len(runs)} finished runs of (sim_time_s − exposed_link_s) / tokens, one "
              f"compute cost per token for every run: {cost_text(runs, c_tok)}. sim_time_s: "
              "the simulated time each run measured (its own compute seconds + its exposed "
              "link seconds), noisy on a shared "
              f"machine. Link {link_text(runs)}."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the saving


def curve_points(configs, curve, measure):
    """The curve's points sorted by rounds: per interval.H, the configuration of its groups
    matching `where` with the lowest mean final measure (μ tuned per H). A point holds the eval
    loss ("loss", "sd") and bpb ("bpb", "bpb_sd"; None on eval loss) and the envelope on the
    measure."""
    where = curve.get("where") or {}
    best = {}
    for config in configs:
        if config.group not in curve["groups"] or not config.runs:
            continue
        if any(loose(config.setting(k)) != loose(v) for k, v in where.items()):
            continue
        h = config.setting("interval.H")
        if loose(h) not in best or config.final(measure)[0] < best[loose(h)].final(measure)[0]:
            best[loose(h)] = config
    points = [{"H": c.setting("interval.H"), "config": c.name, "n": len(c.runs),
               "rounds": c.rounds[0], "loss": c.loss[0], "sd": c.loss[1],
               "bpb": bpb_of(c, measure)[0], "bpb_sd": bpb_of(c, measure)[1]}
              for c in best.values()]
    points.sort(key=lambda p: p["rounds"])
    for point, low in zip(points, lower_envelope([p[measure] for p in points])):
        point["envelope"] = low
    return points


def bpb_of(config, measure):
    """A configuration's final bpb (mean, sd) for saving.json; None on eval loss, so that the
    file never mixes the two measures."""
    return config.final("bpb") if measure == "bpb" else (None, None)


def point_stat(point, measure):
    """A curve point's (mean, sd) of the measure."""
    return point[measure], point["sd" if measure == "loss" else "bpb_sd"]


def lower_envelope(losses):
    """Running minimum from few rounds to many: a point is never credited with a worse loss
    than a cheaper one, so that loss → rounds can be inverted."""
    return list(np.minimum.accumulate(losses)) if losses else []


def rounds_at_loss(points, loss):
    """(R_D, flag): the rounds at which the envelope reaches `loss` (a value of the measure
    that the envelope is on), linear in log R between the two bracketing points; below the
    curve the best point's rounds and LOWER_BOUND; above it the cheapest point's rounds and
    WORSE (the saving is then an upper bound)."""
    rounds = [p["rounds"] for p in points]
    env = [p["envelope"] for p in points]
    if loss > env[0]:
        return rounds[0], WORSE
    if loss < env[-1]:
        return rounds[env.index(env[-1])], LOWER_BOUND
    i = next(i for i, e in enumerate(env) if e <= loss)
    if i == 0:
        return rounds[0], ""
    t = (env[i - 1] - loss) / (env[i - 1] - env[i])
    return math.exp(math.log(rounds[i - 1]) + t * math.log(rounds[i] / rounds[i - 1])), ""


def compare(config, points, measure):
    """The saving of one adaptive configuration against one curve at equal measure, seed by
    seed and pooled."""
    seeds = []
    for run in config.runs:
        r_d, flag = rounds_at_loss(points, run.final(measure))
        seeds.append({"seed": run.seed, "rounds": run.rounds, "loss": run.loss,
                      "bpb": run.bpb if measure == "bpb" else None,
                      "R_D": r_d, "saving": 1 - run.rounds / r_d if r_d else None,
                      "flag": flag})
    saving = mean_sd([s["saving"] for s in seeds])
    # The means of the configuration against the curve: less noisy than the seeds one by one.
    value = config.final(measure)[0]
    pooled_r_d, pooled_flag = rounds_at_loss(points, value)
    best = min(p[measure] for p in points)
    return {"n": len(seeds), "rounds": config.rounds, "loss": config.loss,
            "bpb": bpb_of(config, measure),
            "saving": saving, "saving_n": sum(s["saving"] is not None for s in seeds),
            "lower_bound": any(s["flag"] == LOWER_BOUND for s in seeds),
            "upper_bound": any(s["flag"] == WORSE for s in seeds),
            "pooled": {"R_D": pooled_r_d, "saving": 1 - config.rounds[0] / pooled_r_d,
                       "flag": pooled_flag},
            "gap_to_best": value - best, "seeds": seeds}


def saving_analysis(spec, configs, measure):
    """Every curve's points and every adaptive configuration against every curve, at equal
    measure ("bpb" or "loss")."""
    curves = {name: {"groups": c["groups"], "where": c.get("where") or {},
                     "points": curve_points(configs, c, measure)}
              for name, c in (spec.get("curves") or {}).items()}
    adaptive = []
    for group in spec.get("adaptive") or []:
        members = [c for c in configs if c.group == group] or [None]
        for config in members:
            item = {"group": group, "config": config.name if config else group,
                    "grid": config.grid if config else {}, "status": "not run yet",
                    "against": {}}
            if config and config.runs:
                item["against"] = {name: compare(config, curve["points"], measure)
                                   for name, curve in curves.items()
                                   if len(curve["points"]) >= 2}
                item["status"] = "" if item["against"] else "no curve with two points yet"
            adaptive.append(item)
    return {"definition": f"saving = 1 − R_A/R_D at equal {MEASURES[measure]}, interpolated on "
                          "log R along the DiLoCo curve (ALGORITHMS.md §2)",
            "measure": measure, "curves": curves, "adaptive": adaptive}


def percent(value, lower_bound=False, upper_bound=False):
    """A saving as a percentage, "≥" marking a lower bound, "≤" an upper one."""
    mark = ""
    if lower_bound != upper_bound:
        mark = "≥" if lower_bound else "≤"
    return mark + f"{100 * value:.1f}%"


def seed_text(seed):
    """One seed's saving for the per-seed column."""
    return f"s{seed['seed']} " + percent(seed["saving"], seed["flag"] == LOWER_BOUND,
                                         seed["flag"] == WORSE)


def pooled_text(pooled):
    """The saving of a configuration's mean rounds and mean loss."""
    return percent(pooled["saving"], pooled["flag"] == LOWER_BOUND, pooled["flag"] == WORSE)


def saving_markdown(analysis, note):
    """saving.md: the curves' points, then a table of every adaptive configuration against
    every curve with at least two points; `note` says which measure and why."""
    measure = analysis["measure"]
    words = MEASURES[measure]
    lines = [f"# Saving in rounds at equal {words}", "",
             f"saving = 1 − R_A/R_D at equal {words}, interpolated on log R along the DiLoCo "
             "curve, as ALGORITHMS.md §2 defines. Each curve point is, per H, the configuration "
             f"with the lowest mean final {words} over seeds; the inversion uses the curve's "
             f"lower envelope (running minimum of the {words} from few rounds to many). An "
             "adaptive run below the whole curve is compared with the curve's best point: a "
             "lower bound (≥); a run above the whole curve with its cheapest point: an upper "
             "bound (≤). Every seed counts in the mean. " + note,
             ""]
    for name, curve in analysis["curves"].items():
        where = ", ".join(f"{k} = {text(v)}" for k, v in curve["where"].items())
        lines += [f"## Curve {name}", "",
                  f"groups {', '.join(curve['groups'])}" + (f"; where {where}" if where else ""),
                  ""]
        if len(curve["points"]) < 2:
            lines += [f"{len(curve['points'])} point(s): needs at least two values of H, "
                      "not run yet.", ""]
        if curve["points"]:
            columns = ["H", "configuration", "n", "rounds", f"final {words}"] + \
                (["final eval loss"] if measure == "bpb" else []) + ["envelope"]
            lines += ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
            lines += [f"| {text(p['H'])} | {p['config']} | {p['n']} | {p['rounds']:.1f} | "
                      f"{pm(*point_stat(p, measure))} | " +
                      (f"{pm(p['loss'], p['sd'])} | " if measure == "bpb" else "") +
                      f"{p['envelope']:.4f} |"
                      for p in curve["points"]]
            lines.append("")
    columns = ["configuration", "curve", "n", "rounds", f"final {words}"] + \
        (["final eval loss"] if measure == "bpb" else []) + \
        ["saving (seeds used)", "saving of the means", "per seed",
         f"{measure} gap to best point", "flags"]
    lines += ["## Adaptive configurations against the curves", "",
              "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for item in analysis["adaptive"]:
        if not item["against"]:
            cells = [item["config"]] + [""] * (len(columns) - 6) + [item["status"]] + [""] * 4
            lines.append("| " + " | ".join(cells) + " |")
        for curve, c in item["against"].items():
            mean, sd = c["saving"]
            saving = "none" if mean is None else percent(mean, c["lower_bound"],
                                                         c["upper_bound"]) + (
                f" ± {100 * sd:.1f}%" if sd is not None else "")
            flags = "; ".join(f"s{s['seed']}: {s['flag']}" for s in c["seeds"] if s["flag"])
            lines.append(
                f"| {item['config']} | {curve} | {c['n']} | {pm(*c['rounds'], fmt='{:.1f}')} | "
                f"{pm(*c[measure])} | " + (f"{pm(*c['loss'])} | " if measure == "bpb" else "") +
                f"{saving} ({c['saving_n']}/{c['n']}) | "
                f"{pooled_text(c['pooled'])} | "
                f"{', '.join(seed_text(s) for s in c['seeds'])} | {c['gap_to_best']:+.4f} | "
                f"{flags} |")
    return "\n".join(lines) + "\n"


def json_ready(value):
    """Tuples (mean, sd) as {"mean", "sd"} for saving.json."""
    if isinstance(value, tuple):
        return {"mean": value[0], "sd": value[1]}
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    return float(value) if isinstance(value, np.floating) else value


# ---------------------------------------------------------------- plots


def pyplot():
    """matplotlib on the Agg backend: sweeps run on machines without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path, ax):
    """Legend outside the axes, so that it hides no point."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    pyplot().close(fig)


def adaptive_configs(spec, configs):
    """The configurations of the adaptive groups that have finished runs."""
    return [c for c in configs if c.group in (spec.get("adaptive") or []) and c.runs]


def plot_loss_vs_rounds(path, analysis, spec, configs):
    """Each curve's points (sd over seeds, H at points) and each adaptive configuration, on the
    analysis's measure."""
    plt = pyplot()
    measure = analysis["measure"]
    fig, ax = plt.subplots(figsize=(8, 5))
    ticks = set()
    for name, curve in analysis["curves"].items():
        points = curve["points"]
        if not points:
            continue
        x = [p["rounds"] for p in points]
        stats = [point_stat(p, measure) for p in points]
        bars = ax.errorbar(x, [m for m, _ in stats], yerr=[sd or 0 for _, sd in stats],
                           marker="o", ms=4, capsize=3, lw=1, label=name)
        for p in points:
            ax.annotate(f"H{text(p['H'])}", (p["rounds"], p[measure]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points", color=bars[0].get_color())
        ticks.update(x)
    for i, config in enumerate(adaptive_configs(spec, configs)):
        (r, r_sd), (l, l_sd) = config.rounds, config.final(measure)
        ax.errorbar([r], [l], xerr=[r_sd or 0], yerr=[l_sd or 0], fmt="sD^vP*X"[i % 7], ms=7,
                    capsize=3, label=f"{config.name} (n={len(config.runs)})")
    ax.set_xscale("log")
    if ticks:
        ax.minorticks_off()
        ax.set_xticks(sorted(ticks), [f"{t:g}" for t in sorted(ticks)])
    ax.set_xlabel("rounds (inter-dc synchronisations), log scale")
    ax.set_ylabel(f"final {MEASURES[measure]} (mean ± sd over seeds)")
    ax.set_title(f"Final {MEASURES[measure]} against rounds", fontsize=10)
    ax.grid(alpha=0.3)
    save(fig, path, ax)


def time_curve(runs, c_tok, measure):
    """(simulated time, measure) over training, averaged over the runs (seeds) at equal
    simulated time; a run's time at an evaluation is the tokens done by its step × c_tok + the
    link seconds of the rounds ended at or before the step. The first and last points are the
    means of the runs' first and last evaluations (time and value); between them, at every time
    at which a run evaluated strictly inside the span that every run covers, the mean of the
    runs' values interpolated linearly in time. Runs that evaluate at the same times (one fixed
    batch and one fixed H) give the means at those times. Seeds whose batches or intervals
    differ evaluate at different times and end at different steps: averaging at equal steps
    would mix different amounts of training."""
    series = [sorted((sim_time(run, step, c_tok), value)
                     for step, value in run.evals(measure))
              for run in runs]
    series = [s for s in series if s]
    if not series:
        return [], []
    lo = max(s[0][0] for s in series)
    hi = min(s[-1][0] for s in series)
    inside = sorted({t for s in series for t, _ in s if lo < t < hi})
    times = [np.mean([s[0][0] for s in series])] + inside + \
        [np.mean([s[-1][0] for s in series])]
    losses = [np.mean([s[0][1] for s in series])] + \
        [np.mean([np.interp(t, [p[0] for p in s], [p[1] for p in s]) for s in series])
         for t in inside] + [np.mean([s[-1][1] for s in series])]
    if all(len(s) == 1 for s in series):  # one evaluation each: first and last are one
        return times[:1], losses[:1]
    return times, losses


def plot_loss_vs_time(path, analysis, spec, configs, runs, c_tok):
    """The analysis's measure (eval bpb or eval loss) over training at the configured link:
    every curve's chosen configuration per H (thin, coloured by H, dashed differently within
    an H) and every adaptive configuration (thick). In a sweep with adaptive batches, every
    other configuration too: fixed batches thin and dashed, adaptive batches thick."""
    plt = pyplot()
    measure = analysis["measure"]
    by_name = {config.name: config for config in configs}
    chosen = {}
    for name, curve in analysis["curves"].items():
        for p in curve["points"]:
            chosen.setdefault(p["config"], []).append(name)
    hs = sorted({loose(by_name[n].setting("interval.H")) for n in chosen})
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = {}
    for name, curves in chosen.items():
        config = by_name[name]
        h = loose(config.setting("interval.H"))
        drawn[h] = drawn.get(h, -1) + 1
        ax.plot(*time_curve(config.runs, c_tok, measure), lw=1,
                color=plt.cm.viridis(hs.index(h) / len(hs)),
                ls=["-", "--", ":", "-."][drawn[h] % 4], label=f"{name} ({', '.join(curves)})")
    adaptive = adaptive_configs(spec, configs)
    for config in adaptive:
        ax.plot(*time_curve(config.runs, c_tok, measure), lw=2.5, label=config.name)
    if any(config.adaptive_batch for config in configs):
        for config in configs:
            if config.runs and config.name not in chosen and config not in adaptive:
                batch = config.adaptive_batch
                ax.plot(*time_curve(config.runs, c_tok, measure), lw=2 if batch else 1,
                        ls="-" if batch else "--",
                        label=f"{config.name} ({'adaptive' if batch else 'fixed'} batch)")
    ax.set_xlabel(f"simulated time (s) = tokens so far × c_tok + link seconds so far; c_tok = "
                  f"median (sim_time_s − exposed_link_s)/tokens = {1e6 * c_tok:.4g} µs per token",
                  fontsize=8)
    ax.set_ylabel(f"{MEASURES[measure]} (mean over seeds)")
    ax.set_title(f"{MEASURES[measure].capitalize()} against simulated wall-clock, link "
                 f"{link_text(runs)}", fontsize=10)
    ax.grid(alpha=0.3)
    save(fig, path, ax)


def plot_h_over_training(path, spec, configs):
    """H per round against the step at which the round ended, one panel per adaptive
    configuration, one line per seed."""
    plt = pyplot()
    members = adaptive_configs(spec, configs)
    cols = min(2, len(members))
    rows = math.ceil(len(members) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8, max(3.0, 2.5 * rows)), squeeze=False,
                             sharex=True)
    for ax, config in zip(axes.flat, members):
        for run in config.runs:
            syncs = run.syncs()
            if syncs:
                ax.plot([0] + [s["step"] for s in syncs], [syncs[0]["H"]] +
                        [s["H"] for s in syncs], drawstyle="steps-pre", lw=1,
                        label=f"seed {run.seed}")
        ax.set_title(config.name, fontsize=9)
        ax.set_ylabel("H")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[len(members):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("inner step at the end of the round")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_batch_over_training(path, configs):
    """The batch per round (mean over dcs of syncs.jsonl's batch) against the progress in steps
    at the initial batch at the round's end, one line per run, one colour per configuration
    with an adaptive batch."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    members = [c for c in configs if c.runs and c.adaptive_batch]
    largest = 1.0
    for i, config in enumerate(members):
        colour = plt.cm.tab10(i % 10)
        label = f"{config.name} (n={len(config.runs)})"
        for run in config.runs:
            syncs = [s for s in run.syncs() if s.get("batch")]
            if not syncs:
                continue
            batch = [float(np.mean(s["batch"])) for s in syncs]
            largest = max(largest, max(batch) / min(batch))
            ax.plot([0] + [s.get("progress_step", s["step"]) for s in syncs],
                    [batch[0]] + batch, drawstyle="steps-pre", lw=1, color=colour,
                    label=label)
            label = None
    if largest >= 4:
        from matplotlib.ticker import ScalarFormatter

        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("progress at the end of the round (inner steps at the initial batch)")
    ax.set_ylabel("batch: sequences per inner step, mean over dcs")
    ax.set_title("Batch per round of the adaptive-batch runs (one line per seed)", fontsize=10)
    ax.grid(alpha=0.3)
    save(fig, path, ax)


# ---------------------------------------------------------------- wire formats

# Settings that tell configurations apart without making them different experiments.
RUN_KEYS = {"run.name", "run.seed", "run.out_dir"}
# What makes a wire (its format, sparsity and error feedback, and SparseLoCo's outer step that
# replaces the momentum by the accumulator, with its own rate): a twin differs only in these.
WIRE_KEYS = {"outer.wire_dtype", "outer.error_feedback", "outer.wire_topk",
             "outer.wire_topk_chunk", "outer.error_feedback_beta", "outer.momentum_mode",
             "outer.lr"}


def compressed(run):
    """Whether the run sent anything but fp32 on the link, or fed its rounding back."""
    return run.config.get("outer.wire_dtype", "fp32") != "fp32" or \
        bool(run.config.get("outer.error_feedback")) or \
        float(run.config.get("outer.wire_topk") or 0) > 0


def wire_text(config):
    """The wire of a run's config: its format, and the kept fraction of each chunk when sparse."""
    wire = text(config.get("outer.wire_dtype", "fp32"))
    topk = float(config.get("outer.wire_topk") or 0)
    if topk > 0:
        wire += f" top {topk:g} of {config.get('outer.wire_topk_chunk', 4096)}"
    return wire


def feedback_text(config):
    """Error feedback of a run's config: no, yes, or yes with its decay and the momentum it
    replaces (SparseLoCo)."""
    if not config.get("outer.error_feedback"):
        return "no"
    beta = float(config.get("outer.error_feedback_beta") or 1.0)
    out = "yes" if beta == 1.0 else f"yes, β {beta:g}"
    if config.get("outer.momentum_mode") == "error_feedback":
        out += f", as momentum (outer lr {float(config.get('outer.lr')):g})"
    return out


def fp32_twin(config, configs):
    """The configuration with the same settings but fp32 and no error feedback (None if the
    sweep has none)."""
    def key(c):
        return json.dumps({k: v for k, v in c.runs[0].config.items()
                           if k not in RUN_KEYS | WIRE_KEYS}, sort_keys=True, default=str)
    for other in configs:
        if other.runs and not any(compressed(r) for r in other.runs) and key(other) == key(config):
            return other
    return None


def wire_markdown(configs, entries, measure):
    """wire.md: one row per configuration, seeds pooled: its grid values other than the wire's,
    its wire format (and top-k), error feedback, rounds, the bytes of a round's messages and
    sent on the link (all dcs), their ratio to the fp32 twin's, and the final eval loss (and
    bpb), the measure against the twin's."""
    keys = [k for k in grid_keys(entries) if k not in WIRE_KEYS]
    columns = ["group"] + keys + ["wire", "error feedback", "n", "rounds",
                                  "message bytes / round", "sent bytes / round", "bytes vs fp32",
                                  "final eval loss"] + \
        bpb_columns(measure) + [f"{measure} vs fp32"]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for config in configs:
        rs = config.runs
        if not rs:
            continue
        twin = fp32_twin(config, configs)

        def per_round(runs, key):
            return float(np.mean([r.summary.get(key, 0) / max(1, r.rounds) for r in runs]))

        ratio = per_round(rs, "sent_bytes") / per_round(twin.runs, "sent_bytes") \
            if twin and per_round(twin.runs, "sent_bytes") > 0 else None
        value, twin_value = config.final(measure)[0], twin.final(measure)[0] if twin else None
        first = rs[0].config
        lines.append("| " + " | ".join([config.group] + [text(config.grid.get(k)) for k in keys] + [
            wire_text(first), feedback_text(first), str(len(rs)),
            pm(*config.rounds, fmt="{:.1f}"), si(per_round(rs, "inter_dc_bytes")) + "B",
            si(per_round(rs, "sent_bytes")) + "B", f"{ratio:.3f}" if ratio else "–",
            pm(*config.loss)] + bpb_cells(config, measure) +
            [f"{100 * (value / twin_value - 1):+.2f}%" if twin_value else "–"]) + " |")
    lines += ["", "mean ± sample sd over seeds. message bytes: the all-reduced messages of a "
              "round (values, block scales, scalars), all dcs; sent bytes: what the dcs sent on "
              "the link for it (summary.json sent_bytes / rounds), which the link time is "
              "charged for. vs fp32: against the configuration with the same settings in fp32 "
              "without error feedback, top-k or its outer step (the bytes per round, the mean final "
              f"{MEASURES[measure]})."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- time to a target loss


def target_measure(spec, measure):
    """The measure of the time to target, given the report's: an absolute target names its own
    (`bpb: B` eval bpb, used when the report is on bpb; `loss: L` eval loss); a relative one
    (`reference`, `within`) is on the report's."""
    t = spec.get("time_to_target") or {}
    if t.get("bpb") is not None and (measure == "bpb" or t.get("loss") is None):
        return "bpb"
    return "loss" if t.get("loss") is not None else measure


def target_value(spec, configs, measure):
    """The spec's time_to_target target on target_measure: its `bpb` or `loss`, else the mean
    final measure of every run of its `reference` group times 1 + `within` (default 0.01); None
    without a time_to_target, without finished reference runs, or with a bpb target in a report
    on eval loss (some run lacks bpb)."""
    t = spec.get("time_to_target")
    if not t:
        return None
    own = target_measure(spec, measure)
    if own == "bpb" and measure != "bpb":
        return None
    if t.get(own) is not None:
        return float(t[own])
    finals = [r.final(own) for c in reference_configs(t, configs) for r in c.runs]
    return float(np.mean(finals)) * (1.0 + float(t.get("within", 0.01))) if finals else None


def reference_configs(t, configs):
    """The configurations of time_to_target's `reference` group that match its optional `where`
    (settings compared loosely, as a curve's)."""
    where = t.get("where") or {}
    return [c for c in configs if c.group == t.get("reference") and c.runs and
            all(loose(c.setting(k)) == loose(v) for k, v in where.items())]


def run_time_to_target(run, target, c_tok, measure):
    """(inner step, simulated seconds) at which the run's measure first reaches the target,
    both interpolated linearly between the two evaluations that bracket it (at the first
    evaluation if that one reaches it already); None if no evaluation reaches it."""
    points = sorted(run.evals(measure))
    previous = None
    for step, loss in points:
        if loss <= target:
            t1 = sim_time(run, step, c_tok)
            if previous is None:
                return step, t1
            step0, loss0 = previous
            t0 = sim_time(run, step0, c_tok)
            w = (loss0 - target) / (loss0 - loss)
            return step0 + w * (step - step0), t0 + w * (t1 - t0)
        previous = (step, loss)
    return None


def time_to_target_rows(spec, configs, c_tok, measure):
    """One row per configuration: (config, link value, reached runs, seconds, steps, the
    post-hoc exposed link and utilisation), ordered by the spec's `by` axis (as listed in the
    grid) and then by configuration order; with the target on target_measure."""
    target = target_value(spec, configs, measure)
    measure = target_measure(spec, measure)
    by = spec["time_to_target"].get("by")
    rows = []
    for order, config in enumerate(configs):
        if not config.runs:
            continue
        reached = [run_time_to_target(r, target, c_tok, measure) for r in config.runs]
        exposed = [r.exposed_link_s(c_tok) for r in config.runs]
        compute = [r.tokens * c_tok * r.cost_scale for r in config.runs]
        rows.append({
            "config": config, "by": config.setting(by) if by else None, "order": order,
            "n": len(config.runs), "reached": sum(x is not None for x in reached),
            "seconds": mean_sd([x[1] for x in reached if x is not None]),
            "steps": mean_sd([x[0] for x in reached if x is not None]),
            "exposed": mean_sd(exposed),
            "utilisation": mean_sd([c / (c + e) for c, e in zip(compute, exposed)])})
    values = list(dict.fromkeys(row["by"] for row in rows))
    rows.sort(key=lambda row: (values.index(row["by"]), row["order"]))
    return target, by, rows


def time_to_target_markdown(spec, configs, c_tok, measure, note):
    """time_to_target.md: the simulated time of every configuration to the spec's target (eval
    bpb or eval loss, target_measure), with its ratio to the reference group's at the same link;
    `note` says which measure the report is on and why."""
    target, by, rows = time_to_target_rows(spec, configs, c_tok, measure)
    own = target_measure(spec, measure)
    t = spec["time_to_target"]
    # The reference: with `where`, its one configuration for every row; else the reference
    # group's first configuration at each value of `by`.
    chosen = reference_configs(t, configs)
    reference = {}
    for row in rows:
        if row["config"] in chosen:
            reference.setdefault(row["by"], row["seconds"][0])
    if t.get("where") and reference:
        single = next(iter(reference.values()))
        reference = {row["by"]: single for row in rows}
    keys = [k for k in grid_keys_of(configs) if k != by]
    columns = ["group"] + ([by] if by else []) + keys + [
        "reached", "steps to target", "simulated s to target", "vs reference",
        "exposed link s (run)", "utilisation (simulated)", "final eval loss"] + \
        bpb_columns(measure)
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        seconds = row["seconds"][0]
        ref = reference.get(row["by"])
        ratio = f"{seconds / ref:.2f}" if seconds is not None and ref else "–"
        lines.append("| " + " | ".join(
            [row["config"].group] + ([text(row["by"])] if by else []) +
            [text(row["config"].grid.get(k)) for k in keys] +
            [f"{row['reached']}/{row['n']}", pm(*row["steps"], fmt="{:.0f}"),
             pm(*row["seconds"], fmt="{:.1f}"), ratio, pm(*row["exposed"], fmt="{:.1f}"),
             pm(*row["utilisation"], fmt="{:.3f}"), pm(*row["config"].loss)] +
            bpb_cells(row["config"], measure)) + " |")
    where = ", ".join(f"{k} {text(v)}" for k, v in (t.get("where") or {}).items())
    name = f"{t['reference']} ({where})" if where else t["reference"]
    source = (f"{name}'s mean final {MEASURES[own]} × "
              f"{1 + float(t.get('within', 0.01)):g}"
              if t.get(own) is None else f"the spec's time_to_target.{own}")
    versus = (f"that of {name}" if where else
              "that of the reference group's first configuration at the same "
              f"{by or 'setting'}")
    lines += ["", f"Target {MEASURES[own]} {target:.4f} ({source}). reached: runs (seeds) whose "
              "evaluations reach it; steps and simulated seconds to target: mean ± sample sd "
              "over those runs, each interpolated linearly between the two evaluations that "
              "bracket the target. Simulated time: tokens done × c_tok + the exposed link "
              "seconds of the syncs landed by then, a sync exposing max(0, link_s − the compute "
              "of the steps it overlapped at c_tok) (sweep_report.py, Run.exposed_link_at); "
              f"{cost_text([r for row in rows for r in row['config'].runs], c_tok)}. vs "
              f"reference: the mean time over {versus}. utilisation (simulated): tokens × "
              "c_tok / (that + the whole "
              "run's exposed link seconds). " + note]
    return "\n".join(lines) + "\n"


def target_window(target, measure):
    """The y range of time_to_target.png around the target: 0.15 nats below to 0.6 above on
    eval loss; on bpb the same in proportion to the target (about −6% to +25%, as at a loss of
    2.4), since a nat per token is no fixed number of bits per byte."""
    if measure == "loss":
        return target - 0.15, target + 0.6
    return target * (1 - 0.15 / 2.4), target * (1 + 0.6 / 2.4)


def plot_time_to_target(path, spec, configs, c_tok, measure):
    """The target's measure (target_measure) against simulated time, one panel per value of
    the spec's `by` axis, one line per configuration (seeds averaged at equal time), the target
    as a dotted line."""
    plt = pyplot()
    target, by, rows = time_to_target_rows(spec, configs, c_tok, measure)
    measure = target_measure(spec, measure)
    values = list(dict.fromkeys(row["by"] for row in rows))
    fig, axes = plt.subplots(1, len(values), figsize=(5.5 * len(values), 4), squeeze=False)
    for ax, value in zip(axes[0], values):
        for row in (r for r in rows if r["by"] == value):
            times, measured = time_curve(row["config"].runs, c_tok, measure)
            ax.plot(times, measured, label=row["config"].group)
        ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:.3f}")
        ax.set_title(f"{by} = {text(value)}" if by else "")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel(MEASURES[measure])
        ax.set_ylim(*target_window(target, measure))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# ---------------------------------------------------------------- entry points


def report(out_dir):
    """Write results.csv, table.md, saving.md/.json (every comparison on eval bpb when every
    run has it, else eval loss: choose_measure), batch.md (with adaptive batches),
    overlap.md (with overlapped syncs), wire.md (with compressed formats), time_to_target.md
    (with a time_to_target in the spec) and the
    plots for the finished runs of the sweep in out_dir; print the paths (stderr) and the
    Markdown (stdout)."""
    spec, entries, configs, runs = load(out_dir)
    if not runs:
        print(f"sweep_report: no finished runs in {out_dir} yet", file=sys.stderr)
        return
    c_tok = compute_per_token(runs)
    measure = choose_measure(runs)
    note = measure_text(measure, runs)
    analysis = saving_analysis(spec, configs, measure)
    adaptive_batch = any(r.adaptive_batch for r in runs)
    written = []

    def path(name):
        written.append(os.path.join(out_dir, name))
        return written[-1]

    write_results_csv(path("results.csv"), entries, runs)
    markdown = {"table.md": table_markdown(configs, entries, runs, c_tok, measure),
                "saving.md": saving_markdown(analysis, note)}
    if adaptive_batch:
        markdown["batch.md"] = batch_markdown(configs, entries, runs, c_tok, measure)
    if any(overlapped(r) for r in runs):
        markdown["overlap.md"] = overlap_markdown(configs, entries, measure)
    if any(compressed(r) for r in runs):
        markdown["wire.md"] = wire_markdown(configs, entries, measure)
    timed = c_tok is not None and target_value(spec, configs, measure) is not None
    if timed:
        markdown["time_to_target.md"] = time_to_target_markdown(spec, configs, c_tok, measure,
                                                                note)
    elif target_measure(spec, measure) == "bpb" and measure == "loss":
        print("sweep_report: no time_to_target.md: time_to_target.bpb needs eval bpb in every "
              "run. " + note, file=sys.stderr)
    for name, body in markdown.items():
        with open(path(name), "w") as f:
            f.write(body)
    with open(path("saving.json"), "w") as f:
        json.dump(json_ready(analysis), f, indent=1, ensure_ascii=False)
    if any(curve["points"] for curve in analysis["curves"].values()) or \
            adaptive_configs(spec, configs):
        plot_loss_vs_rounds(path("loss_vs_rounds.png"), analysis, spec, configs)
    if c_tok is not None and (any(curve["points"] for curve in analysis["curves"].values())
                              or adaptive_configs(spec, configs) or adaptive_batch):
        plot_loss_vs_time(path("loss_vs_time.png"), analysis, spec, configs, runs, c_tok)
    if adaptive_configs(spec, configs):
        plot_h_over_training(path("h_over_training.png"), spec, configs)
    if adaptive_batch:
        plot_batch_over_training(path("batch_over_training.png"), configs)
    if timed:
        plot_time_to_target(path("time_to_target.png"), spec, configs, c_tok, measure)
    for body in markdown.values():
        print(body)
    for p in written:
        print(f"sweep_report: wrote {p}", file=sys.stderr)
    print(f"sweep_report: compared on {MEASURES[measure]}", file=sys.stderr)


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: sweep_report.py OUT  (a sweep's output directory, with sweep.json)")
    report(sys.argv[1])


if __name__ == "__main__":
    main()
