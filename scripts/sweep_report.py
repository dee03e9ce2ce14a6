#!/usr/bin/env python3
"""Report of a sweep (scripts/sweep.py): tables, the saving in rounds of the adaptive
controllers against DiLoCo, and plots.

    scripts/sweep_report.py OUT        # scripts/sweep.py also calls report(OUT) after a sweep

Reads OUT/sweep.json (the spec, and every run's group, grid values and seed) and, for every run
that finished (that has OUT/<run>/summary.json; the others are ignored), its summary.json, its
effective config.yaml (any setting, including those the summary lacks, flattened to
"section.key"; a key missing there is left empty), metrics.jsonl and syncs.jsonl. Writes to OUT:

  results.csv             one row per finished run: group, seed, grid values, settings, outcomes
  table.md                one row per configuration (group + grid values), seeds pooled
  saving.md, saving.json  the saving of every adaptive configuration against every curve
  loss_vs_rounds.png      final eval loss against rounds: the curves and the adaptive runs
  loss_vs_time.png        eval loss over training against simulated time at the configured link
  h_over_training.png     H per round of every adaptive run

The saving: saving = 1 − R_A/R_D at equal eval loss, interpolated on log R along the DiLoCo
curve, as ALGORITHMS.md §2 defines. A curve (the spec's "curves": groups and an optional
"where" filter, whose values compare loosely, 0.9 == "0.9") has one point per interval.H: of the
configurations with that H, the one with the lowest mean final eval loss over seeds (μ tuned per
H), at R = its mean rounds and L = its mean loss. The points sorted by R are made monotone by
their lower envelope (walking from few rounds to many, L is the running minimum: more rounds are
never credited with a worse loss than fewer). Every configuration of the spec's "adaptive"
groups is compared seed by seed: a run with R_A rounds and loss L_A is matched to the rounds R_D
at which the envelope reaches L_A, interpolated linearly in log R between the two points that
bracket L_A. Below the whole curve, the saving is 1 − R_A/R_best against the best (lowest-loss)
point and is a lower bound (≥). Above the whole curve (worse than its cheapest point) it is
1 − R_A/R_cheapest and an upper bound (≤). Every seed counts in the mean; the flags say which
are bounds.

Simulated time (loss_vs_time.png): step × c + the link seconds of the rounds that ended at or
before that step, where c is the median over the finished runs of (sim_time_s − link_s) / steps:
one compute cost per step for every run, free of the noise of a shared machine.
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
SETTINGS = ["interval.H", "outer.momentum", "outer.momentum_schedule", "outer.correction"]
# Outcomes from summary.json for results.csv; mean_H (steps / rounds) is computed.
OUTCOMES = ["steps", "tokens", "rounds", "inter_dc_bytes", "final_eval_loss",
            "final_train_loss", "mean_H", "wall_s", "link_s", "sim_time_s",
            "compute_utilisation"]
WORSE = "above the whole curve: upper bound against its cheapest point"
LOWER_BOUND = "below the whole curve: lower bound against its best point"


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

    def setting(self, key):
        """A config value: the grid's if the key is a grid axis, else the effective config's."""
        return self.grid[key] if key in self.grid else self.config.get(key)

    def outcome(self, key):
        """A summary value for results.csv; mean_H is steps per round."""
        if key == "mean_H":
            rounds = self.summary.get("rounds")
            return self.summary["steps"] / rounds if rounds else None
        return self.summary.get(key)

    @property
    def loss(self):
        return self.summary["final_eval_loss"]

    @property
    def rounds(self):
        return self.summary["rounds"]

    def evals(self):
        """(step, eval loss) of every evaluation over training."""
        return [(m["step"], m["eval_loss"]) for m in read_jsonl(
            os.path.join(self.dir, "metrics.jsonl")) if "eval_loss" in m]

    def syncs(self):
        return read_jsonl(os.path.join(self.dir, "syncs.jsonl"))


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

    @property
    def rounds(self):
        return mean_sd([r.rounds for r in self.runs])


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


def grid_keys(entries):
    """Every grid axis of any run, in order of first appearance."""
    return list(dict.fromkeys(k for e in entries for k in (e.get("grid") or {})))


def compute_per_step(runs):
    """c: median over runs of (sim_time_s − link_s) / steps, the compute seconds per step."""
    return float(np.median([(r.summary["sim_time_s"] - r.summary["link_s"])
                            / r.summary["steps"] for r in runs]))


def link_text(runs):
    """The configured link(s), e.g. '1 Gbit/s, 50 ms', for titles."""
    links = dict.fromkeys(
        (r.summary.get("wan", {}).get("bandwidth_gbps", r.config.get("wan.bandwidth_gbps")),
         r.summary.get("wan", {}).get("latency_ms", r.config.get("wan.latency_ms")))
        for r in runs)
    return "; ".join(f"{bw:g} Gbit/s, {lat:g} ms" for bw, lat in links)


# ---------------------------------------------------------------- results.csv, table.md


def write_results_csv(path, entries, runs):
    """One row per finished run; grid keys and settings come from the effective config."""
    keys = grid_keys(entries)
    settings = keys + [k for k in SETTINGS if k not in keys]
    header = ["name", "group", "seed"] + keys + ["method", "controller"] + \
        settings[len(keys):] + OUTCOMES
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
            writer.writerow([text(row[k]) for k in header])


def table_markdown(configs, entries, runs, c):
    """One row per configuration with finished runs, seeds pooled; the footer defines the
    simulated time of loss_vs_time.png."""
    keys = grid_keys(entries)
    lines = ["| group | " + " | ".join(keys + ["n", "rounds", "inter-dc bytes",
                                                "final eval loss", "H min/max"]) + " |",
             "|" + " --- |" * (len(keys) + 6)]
    for config in configs:
        if not config.runs:
            continue
        hs = [h for r in config.runs for h in r.summary.get("h_per_round", [])]
        lines.append("| " + " | ".join(
            [config.group] + [text(config.grid.get(k)) for k in keys] +
            [str(len(config.runs)), f"{config.rounds[0]:.1f}",
             si(np.mean([r.summary["inter_dc_bytes"] for r in config.runs])) + "B",
             pm(*config.loss), f"{min(hs)}/{max(hs)}" if hs else ""]) + " |")
    lines += ["", f"final eval loss: mean ± sample sd over seeds. Simulated time in "
              f"loss_vs_time.png: step × c + the link seconds of the rounds ended by that step, "
              f"c = median over the {len(runs)} finished runs of (sim_time_s − link_s) / steps "
              f"= {1000 * c:.2f} ms per step; link {link_text(runs)}."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the saving


def curve_points(configs, curve):
    """The curve's points sorted by rounds: per interval.H, the configuration of its groups
    matching `where` with the lowest mean final eval loss (μ tuned per H)."""
    where = curve.get("where") or {}
    best = {}
    for config in configs:
        if config.group not in curve["groups"] or not config.runs:
            continue
        if any(loose(config.setting(k)) != loose(v) for k, v in where.items()):
            continue
        h = config.setting("interval.H")
        if loose(h) not in best or config.loss[0] < best[loose(h)].loss[0]:
            best[loose(h)] = config
    points = [{"H": c.setting("interval.H"), "config": c.name, "n": len(c.runs),
               "rounds": c.rounds[0], "loss": c.loss[0], "sd": c.loss[1]}
              for c in best.values()]
    points.sort(key=lambda p: p["rounds"])
    for point, low in zip(points, lower_envelope([p["loss"] for p in points])):
        point["envelope"] = low
    return points


def lower_envelope(losses):
    """Running minimum from few rounds to many: a point is never credited with a worse loss
    than a cheaper one, so that loss → rounds can be inverted."""
    return list(np.minimum.accumulate(losses)) if losses else []


def rounds_at_loss(points, loss):
    """(R_D, flag): the rounds at which the envelope reaches `loss`, linear in log R between
    the two bracketing points; below the curve the best point's rounds and LOWER_BOUND; above
    it the cheapest point's rounds and WORSE (the saving is then an upper bound)."""
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


def compare(config, points):
    """The saving of one adaptive configuration against one curve, seed by seed and pooled."""
    seeds = []
    for run in config.runs:
        r_d, flag = rounds_at_loss(points, run.loss)
        seeds.append({"seed": run.seed, "rounds": run.rounds, "loss": run.loss,
                      "R_D": r_d, "saving": 1 - run.rounds / r_d if r_d else None,
                      "flag": flag})
    saving = mean_sd([s["saving"] for s in seeds])
    # The means of the configuration against the curve: less noisy than the seeds one by one.
    pooled_r_d, pooled_flag = rounds_at_loss(points, config.loss[0])
    best = min(p["loss"] for p in points)
    return {"n": len(seeds), "rounds": config.rounds, "loss": config.loss,
            "saving": saving, "saving_n": sum(s["saving"] is not None for s in seeds),
            "lower_bound": any(s["flag"] == LOWER_BOUND for s in seeds),
            "upper_bound": any(s["flag"] == WORSE for s in seeds),
            "pooled": {"R_D": pooled_r_d, "saving": 1 - config.rounds[0] / pooled_r_d,
                       "flag": pooled_flag},
            "gap_to_best": config.loss[0] - best, "seeds": seeds}


def saving_analysis(spec, configs):
    """Every curve's points and every adaptive configuration against every curve."""
    curves = {name: {"groups": c["groups"], "where": c.get("where") or {},
                     "points": curve_points(configs, c)}
              for name, c in (spec.get("curves") or {}).items()}
    adaptive = []
    for group in spec.get("adaptive") or []:
        members = [c for c in configs if c.group == group] or [None]
        for config in members:
            item = {"group": group, "config": config.name if config else group,
                    "grid": config.grid if config else {}, "status": "not run yet",
                    "against": {}}
            if config and config.runs:
                item["against"] = {name: compare(config, curve["points"])
                                   for name, curve in curves.items()
                                   if len(curve["points"]) >= 2}
                item["status"] = "" if item["against"] else "no curve with two points yet"
            adaptive.append(item)
    return {"definition": "saving = 1 − R_A/R_D at equal eval loss, interpolated on log R "
                          "along the DiLoCo curve (ALGORITHMS.md §2)",
            "curves": curves, "adaptive": adaptive}


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


def saving_markdown(analysis):
    """saving.md: the curves' points, then a table of every adaptive configuration against
    every curve with at least two points."""
    lines = ["# Saving in rounds at equal eval loss", "",
             "saving = 1 − R_A/R_D at equal eval loss, interpolated on log R along the DiLoCo "
             "curve, as ALGORITHMS.md §2 defines. Each curve point is, per H, the configuration "
             "with the lowest mean final eval loss over seeds; the inversion uses the curve's "
             "lower envelope (running minimum of the loss from few rounds to many). An adaptive "
             "run below the whole curve is compared with the curve's best point: a lower bound "
             "(≥); a run above the whole curve with its cheapest point: an upper bound (≤). "
             "Every seed counts in the mean.",
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
            lines += ["| H | configuration | n | rounds | final eval loss | envelope |",
                      "| --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {text(p['H'])} | {p['config']} | {p['n']} | {p['rounds']:.1f} | "
                      f"{pm(p['loss'], p['sd'])} | {p['envelope']:.4f} |"
                      for p in curve["points"]]
            lines.append("")
    lines += ["## Adaptive configurations against the curves", "",
              "| configuration | curve | n | rounds | final eval loss | saving (seeds used) | "
              "saving of the means | per seed | loss gap to best point | flags |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for item in analysis["adaptive"]:
        if not item["against"]:
            lines.append(f"| {item['config']} | | | | | {item['status']} | | | | |")
        for curve, c in item["against"].items():
            mean, sd = c["saving"]
            saving = "none" if mean is None else percent(mean, c["lower_bound"],
                                                         c["upper_bound"]) + (
                f" ± {100 * sd:.1f}%" if sd is not None else "")
            flags = "; ".join(f"s{s['seed']}: {s['flag']}" for s in c["seeds"] if s["flag"])
            lines.append(
                f"| {item['config']} | {curve} | {c['n']} | {pm(*c['rounds'], fmt='{:.1f}')} | "
                f"{pm(*c['loss'])} | {saving} ({c['saving_n']}/{c['n']}) | "
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
    """Each curve's points (sd over seeds, H at points) and each adaptive configuration."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    ticks = set()
    for name, curve in analysis["curves"].items():
        points = curve["points"]
        if not points:
            continue
        x = [p["rounds"] for p in points]
        bars = ax.errorbar(x, [p["loss"] for p in points], yerr=[p["sd"] or 0 for p in points],
                           marker="o", ms=4, capsize=3, lw=1, label=name)
        for p in points:
            ax.annotate(f"H{text(p['H'])}", (p["rounds"], p["loss"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points", color=bars[0].get_color())
        ticks.update(x)
    for i, config in enumerate(adaptive_configs(spec, configs)):
        (r, r_sd), (l, l_sd) = config.rounds, config.loss
        ax.errorbar([r], [l], xerr=[r_sd or 0], yerr=[l_sd or 0], fmt="sD^vP*X"[i % 7], ms=7,
                    capsize=3, label=f"{config.name} (n={len(config.runs)})")
    ax.set_xscale("log")
    if ticks:
        ax.minorticks_off()
        ax.set_xticks(sorted(ticks), [f"{t:g}" for t in sorted(ticks)])
    ax.set_xlabel("rounds (inter-dc synchronisations), log scale")
    ax.set_ylabel("final eval loss (mean ± sd over seeds)")
    ax.set_title("Final eval loss against rounds", fontsize=10)
    ax.grid(alpha=0.3)
    save(fig, path, ax)


def time_curve(runs, c):
    """(simulated time, eval loss) at each eval step, both averaged over the runs (seeds);
    time = step × c + the link seconds of the rounds ended at or before the step."""
    at = {}
    for run in runs:
        syncs = sorted(run.syncs(), key=lambda s: s["step"])
        steps = np.array([s["step"] for s in syncs])
        link = np.cumsum([s["link_s"] for s in syncs])
        for step, loss in run.evals():
            k = int(np.searchsorted(steps, step, side="right"))
            at.setdefault(step, []).append((step * c + (link[k - 1] if k else 0.0), loss))
    steps = sorted(at)
    return ([np.mean([t for t, _ in at[s]]) for s in steps],
            [np.mean([l for _, l in at[s]]) for s in steps])


def plot_loss_vs_time(path, analysis, spec, configs, runs, c):
    """Eval loss over training at the configured link: every curve's chosen configuration per
    H (thin, coloured by H, dashed differently within an H) and every adaptive configuration
    (thick)."""
    plt = pyplot()
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
        ax.plot(*time_curve(config.runs, c), lw=1, color=plt.cm.viridis(hs.index(h) / len(hs)),
                ls=["-", "--", ":", "-."][drawn[h] % 4], label=f"{name} ({', '.join(curves)})")
    for config in adaptive_configs(spec, configs):
        ax.plot(*time_curve(config.runs, c), lw=2.5, label=config.name)
    ax.set_xlabel(f"simulated time (s) = step × c + link seconds so far; c = median "
                  f"(sim_time_s − link_s)/steps = {1000 * c:.2f} ms", fontsize=8)
    ax.set_ylabel("eval loss (mean over seeds)")
    ax.set_title(f"Eval loss against simulated wall-clock, link {link_text(runs)}", fontsize=10)
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


# ---------------------------------------------------------------- entry points


def report(out_dir):
    """Write results.csv, table.md, saving.md/.json and the plots for the finished runs of
    the sweep in out_dir; print the paths (stderr) and the Markdown (stdout)."""
    spec, entries, configs, runs = load(out_dir)
    if not runs:
        print(f"sweep_report: no finished runs in {out_dir} yet", file=sys.stderr)
        return
    c = compute_per_step(runs)
    analysis = saving_analysis(spec, configs)
    written = []

    def path(name):
        written.append(os.path.join(out_dir, name))
        return written[-1]

    write_results_csv(path("results.csv"), entries, runs)
    markdown = {"table.md": table_markdown(configs, entries, runs, c),
                "saving.md": saving_markdown(analysis)}
    for name, body in markdown.items():
        with open(path(name), "w") as f:
            f.write(body)
    with open(path("saving.json"), "w") as f:
        json.dump(json_ready(analysis), f, indent=1, ensure_ascii=False)
    if any(curve["points"] for curve in analysis["curves"].values()) or \
            adaptive_configs(spec, configs):
        plot_loss_vs_rounds(path("loss_vs_rounds.png"), analysis, spec, configs)
        plot_loss_vs_time(path("loss_vs_time.png"), analysis, spec, configs, runs, c)
    if adaptive_configs(spec, configs):
        plot_h_over_training(path("h_over_training.png"), spec, configs)
    for body in markdown.values():
        print(body)
    for p in written:
        print(f"sweep_report: wrote {p}", file=sys.stderr)


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: sweep_report.py OUT  (a sweep's output directory, with sweep.json)")
    report(sys.argv[1])


if __name__ == "__main__":
    main()
