#!/usr/bin/env python3
"""check_hf.py: autoloco's Hugging Face import and export checked against transformers itself.

Nine tiny models (hf_cases.py): four made from sizes (gpt2 tied, gpt2 untied, llama tied with
n_kv_head == n_head, llama untied with grouped-query attention and a rope_theta of 500000) and
five from the published config.json of the models people download, kept in tests/hf/fixtures
with layers, widths and vocabulary shrunk and every other field as published (Llama 3.2 1B with
its llama3 rope scaling over an original context of 16 tokens, so that the 32-token batch runs
through the scaled frequencies; Qwen2.5 0.5B with q/k/v biases; Qwen3 0.6B with query/key norms and heads
wider than hidden_size / heads; SmolLM2 135M; Mistral 7B v0.3, untied). The fixtures' runs train
across 2 dcs. Each model in three parts:

  import     transformers builds the model (GPT2Config / LlamaConfig, from_config, a fixed seed,
             every weight, norm and bias drawn at random so that none is left at its usual
             constant) and saves it with save_pretrained, once whole and once in shards with
             model.safetensors.index.json; `autoloco-ckpt logits` of both directories equal
             transformers' logits of a fixed batch.
  export     autoloco-train trains the model a few steps from scratch; `autoloco-ckpt export
             --format hf` writes it; safetensors lists exactly the tensors, shapes and dtype
             that transformers' own save_pretrained writes for that config;
             AutoModelForCausalLM.from_pretrained loads it with no missing, unexpected or
             mismatched weight, and its logits equal `autoloco-ckpt logits` of the checkpoint.
             An export sharded by --max-shard-bytes loads and gives the same logits.
  init_from  autoloco-train with model.init_from = the directory of `import` runs one step of
             SGD at lr 1e-30 (below every weight's float32 spacing) and checkpoints: the
             checkpoint's parameters, exported, equal transformers' bitwise and its logits
             transformers'. A run whose model.n_layer differs is refused before any step, naming
             the key and both values.

Logits are compared in float32, eval mode, on the CPU: the largest absolute difference must be
at most 1e-4. Nothing is downloaded (HF_HUB_OFFLINE=1). Prints a table of the differences and
exits 1, naming each failure, when any check fails.

Usage (the Python of scripts/hf-env.sh):
  check_hf.py --ckpt-exe build/release/apps/autoloco-ckpt --train-exe build/release/apps/autoloco-train \\
      [--mpiexec mpiexec] --data DIR --work DIR [--part import,export,init_from]
DIR of --data holds byte-token shards (train_*.bin, val_*.bin; vocabulary 256); --work is an
empty scratch directory that the script fills.
"""

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from hf_cases import CASES, SEQ_LEN, VOCAB  # noqa: E402  (beside this file)

TOLERANCE = 1e-4
BATCH = 3


class Checks:
    """Collects failures and the table of differences; nothing stops at the first failure."""

    def __init__(self):
        self.failures = []
        self.rows = []  # (case, what, max |diff|)
        self.notes = []

    def fail(self, case, message):
        self.failures.append(f"{case}: {message}")
        print(f"FAIL {case}: {message}", flush=True)

    def require(self, ok, case, message):
        if not ok:
            self.fail(case, message)
        return ok

    def diff(self, case, what, ours, theirs):
        if ours.shape != theirs.shape:
            self.fail(case, f"{what}: shapes differ, autoloco {tuple(ours.shape)}, "
                            f"transformers {tuple(theirs.shape)}")
            self.rows.append((case, what, float("nan")))
            return
        d = float((ours - theirs).abs().max())
        self.rows.append((case, what, d))
        if not d <= TOLERANCE:
            self.fail(case, f"{what}: max |diff| {d:.3e} > {TOLERANCE:g}")


checks = Checks()
args = None


def run(cmd, log, expect_ok=True, case="?"):
    """Runs cmd (a list), its output into the file `log`; returns (exit code, output)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(log, "w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    text = open(log, encoding="utf-8", errors="replace").read()
    if expect_ok and code != 0:
        checks.fail(case, f"exit code {code} of {' '.join(cmd)}:\n{text[-3000:]}")
    return code, text


def train(case, run_name, extra, log, expect_ok=True):
    """autoloco-train with the case's model keys and `extra` (key -> value): on 1 rank, or for a
    case with `dcs` across that many dcs of one rank (DiLoCo, a round every 4 steps)."""
    keys = case.model_keys()
    dcs = getattr(case, "dcs", 1)
    keys.update({"data.train": os.path.join(args.data, "train_*.bin"),
                 "data.val": os.path.join(args.data, "val_*.bin"),
                 "data.batch_size": 4, "run.eval_every": 0, "run.eval_batches": 1,
                 "run.log_every": 1, "run.threads": 1, "run.out_dir": os.path.join(args.work,
                                                                                   "runs"),
                 "run.name": run_name, "outer.method": "ddp" if dcs == 1 else "diloco",
                 "ckpt.at_end": "true", "ckpt.every_minutes": 0})
    if dcs > 1:
        keys.update({"interval.H": 4, "topology.ranks_per_dc": 1})
    keys.update(extra)
    config = os.path.join(args.work, "empty.yaml")
    with open(config, "w") as f:
        f.write("{}\n")
    cmd = []
    if args.mpiexec:
        cmd += [args.mpiexec, "-n", str(dcs), "--oversubscribe", "--allow-run-as-root",
                "--bind-to", "none"]
    cmd += [args.train_exe, config]
    for k, v in keys.items():
        cmd += ["--set", f"{k}={v}"]
    code, text = run(cmd, log, expect_ok, case.name)
    return code, text, os.path.join(args.work, "runs", run_name)


def last_checkpoint(run_dir):
    root = os.path.join(run_dir, "checkpoints")
    steps = sorted((int(d[5:]), d) for d in os.listdir(root) if re.fullmatch(r"step_\d+", d))
    return os.path.join(root, steps[-1][1])


def fixed_tokens():
    g = torch.Generator().manual_seed(20240601)
    return torch.randint(0, VOCAB, (BATCH, SEQ_LEN), generator=g)


def write_tokens(path, tokens):
    with open(path, "w") as f:
        for row in tokens.tolist():
            f.write(" ".join(str(t) for t in row) + "\n")


def our_logits(source, tag, case):
    """autoloco-ckpt logits of `source` (a checkpoint or an HF directory) on fixed_tokens()."""
    tokens_file = os.path.join(args.work, "tokens.txt")
    out = os.path.join(args.work, f"logits-{tag}.f32")
    if os.path.exists(out):
        os.remove(out)
    code, _ = run([args.ckpt_exe, "logits", source, "--tokens", tokens_file, "--out", out],
                  os.path.join(args.work, f"logits-{tag}.log"), case=case.name)
    if code != 0:
        return None
    values = np.fromfile(out, dtype="<f4")
    if values.size != BATCH * SEQ_LEN * VOCAB:
        checks.fail(case.name, f"{out}: {values.size} floats, expected {BATCH}x{SEQ_LEN}x{VOCAB}")
        return None
    return torch.from_numpy(values.reshape(BATCH, SEQ_LEN, VOCAB).copy())


def hf_logits(model):
    model.eval()
    with torch.no_grad():
        return model(input_ids=fixed_tokens()).logits.float()


class HfLog:
    """Captures transformers' warnings (its logger and Python's) while loading a directory."""

    def __init__(self, case, what):
        self.case, self.what = case, what

    def __enter__(self):
        self.records = []
        self.handler = logging.Handler()
        self.handler.emit = lambda r: self.records.append(r.getMessage())
        self.handler.setLevel(logging.WARNING)
        logging.getLogger("transformers").addHandler(self.handler)
        self.catch = warnings.catch_warnings(record=True)
        self.caught = self.catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self.catch.__exit__(*exc)
        logging.getLogger("transformers").removeHandler(self.handler)
        for message in self.records + [str(w.message) for w in self.caught]:
            checks.notes.append(f"{self.case} {self.what}: {message.strip()}")
        return False


def load_hf(path, case, what):
    with HfLog(case.name, what):
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True,
                                                           dtype=torch.float32)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(key):
            checks.fail(case.name, f"{what}: from_pretrained({path}) reports {key} {info[key]}")
    return model


def safetensors_listing(path):
    """{name: (shape, dtype)} of every tensor in a directory's safetensors files."""
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    listing = {}
    for name in files:
        with safe_open(os.path.join(path, name), "pt") as f:
            for key in f.keys():
                t = f.get_slice(key)
                listing[key] = (tuple(t.get_shape()), t.get_dtype())
    return files, listing


def randomize(model):
    """Draws every parameter (weights, norms, biases) so that a misplaced one shows in logits."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("ln" in name or "norm" in name):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 * 1.5)


def hf_made(case):
    """transformers' model of the case, saved whole and sharded; (model, dir, sharded dir)."""
    torch.manual_seed(1000 + CASES.index(case))
    config = case.hf_config()
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    randomize(model)
    model.eval()
    whole = os.path.join(args.work, f"hf-{case.name}")
    sharded = os.path.join(args.work, f"hf-{case.name}-sharded")
    if not os.path.isdir(whole):
        model.save_pretrained(whole)
        model.save_pretrained(sharded, max_shard_size="100KB")
    return model, whole, sharded


def part_import(case):
    model, whole, sharded = hf_made(case)
    theirs = hf_logits(model)
    index = os.path.join(sharded, "model.safetensors.index.json")
    files, _ = safetensors_listing(sharded)
    if checks.require(os.path.isfile(index) and len(files) > 1, case.name,
                      f"save_pretrained(max_shard_size='100KB') wrote no shards: {files}"):
        checks.notes.append(f"{case.name} import: transformers wrote {len(files)} shards")
    for tag, path in (("import", whole), ("import sharded", sharded)):
        ours = our_logits(path, f"{case.name}-{tag.replace(' ', '-')}", case)
        if ours is not None:
            checks.diff(case.name, tag, ours, theirs)


def expected_listing(config):
    """What transformers' save_pretrained writes for `config`: tensor names, shapes, dtypes."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    reference = os.path.join(args.work, f"reference-{time.monotonic_ns()}")
    model.save_pretrained(reference)
    _, listing = safetensors_listing(reference)
    shutil.rmtree(reference)
    return listing


def part_export(case):
    code, _, run_dir = train(case, f"export-{case.name}",
                             {"run.steps": 8, "inner.lr": 0.05, "inner.warmup_steps": 1,
                              "inner.schedule": "constant", "run.seed": 7},
                             os.path.join(args.work, f"train-export-{case.name}.log"))
    if code != 0:
        return
    ckpt = last_checkpoint(run_dir)
    ours = our_logits(ckpt, f"{case.name}-ckpt", case)
    for tag, extra in (("export", []), ("export sharded", ["--max-shard-bytes", "60000"])):
        out = os.path.join(args.work, f"export-{case.name}" + ("-sharded" if extra else ""))
        code, _ = run([args.ckpt_exe, "export", "--format", "hf", ckpt, out] + extra,
                      out + ".log", case=case.name)
        if code != 0:
            continue
        files, listing = safetensors_listing(out)
        if extra:
            checks.require(len(files) > 1 and os.path.isfile(
                os.path.join(out, "model.safetensors.index.json")), case.name,
                f"{tag}: --max-shard-bytes 60000 gave {files} and no index")
        else:
            checks.require(files == ["model.safetensors"], case.name,
                           f"{tag}: files {files}, expected model.safetensors")
        with open(os.path.join(out, "config.json")) as f:
            config_json = json.load(f)
        with HfLog(case.name, f"{tag} config"):
            config = transformers.AutoConfig.from_pretrained(out)
        expected = expected_listing(config)
        if listing != expected:
            missing = sorted(set(expected) - set(listing))
            extra_names = sorted(set(listing) - set(expected))
            wrong = sorted(k for k in set(expected) & set(listing) if expected[k] != listing[k])
            checks.fail(case.name, f"{tag}: safetensors differ from save_pretrained's: missing "
                                   f"{missing}, extra {extra_names}, shape/dtype {wrong}")
        if case.arch == "llama":
            theta = (config.rope_parameters or {}).get("rope_theta")
            checks.require(theta == case.rope_theta, case.name,
                           f"{tag}: transformers reads rope_theta {theta} from {config_json}")
        model = load_hf(out, case, tag)
        checks.require(model.config.tie_word_embeddings == case.tied, case.name,
                       f"{tag}: transformers reads tie_word_embeddings "
                       f"{model.config.tie_word_embeddings}")
        if ours is not None:
            checks.diff(case.name, tag, ours, hf_logits(model))


def part_init_from(case):
    model, whole, _ = hf_made(case)
    theirs = hf_logits(model)
    # One step of plain SGD at lr 1e-30 moves no weight by a float32 spacing.
    code, text, run_dir = train(case, f"init-{case.name}",
                                {"model.init_from": whole, "run.steps": 1,
                                 "inner.optimizer": "sgd", "inner.lr": 1e-30,
                                 "inner.warmup_steps": 0, "inner.schedule": "constant"},
                                os.path.join(args.work, f"train-init-{case.name}.log"))
    if code == 0:
        ckpt = last_checkpoint(run_dir)
        ours = our_logits(ckpt, f"{case.name}-init", case)
        if ours is not None:
            checks.diff(case.name, "init_from", ours, theirs)
        out = os.path.join(args.work, f"init-export-{case.name}")
        if run([args.ckpt_exe, "export", "--format", "hf", ckpt, out], out + ".log",
               case=case.name)[0] == 0:
            saved = {}
            with safe_open(os.path.join(whole, "model.safetensors"), "pt") as f:
                for k in f.keys():
                    saved[k] = f.get_tensor(k)
            with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
                back = {k: f.get_tensor(k) for k in f.keys()}
            checks.require(set(back) == set(saved), case.name,
                           f"init_from: exported names {sorted(back)} != saved {sorted(saved)}")
            differ = [k for k in saved if k in back and not torch.equal(saved[k], back[k])]
            checks.require(not differ, case.name,
                           f"init_from: parameters not bitwise transformers' after a step at "
                           f"lr 1e-30: {differ}")
            if not differ:
                checks.notes.append(f"{case.name} init_from: all {len(saved)} tensors bitwise "
                                    f"equal to transformers' after the run")
    # Another model than the directory's: refused before any step, naming key and values.
    wrong = case.n_layer + 1
    code, text, run_dir = train(case, f"init-wrong-{case.name}",
                                {"model.init_from": whole, "model.n_layer": wrong,
                                 "run.steps": 1},
                                os.path.join(args.work, f"train-init-wrong-{case.name}.log"),
                                expect_ok=False)
    named = re.search(rf"model\.n_layer\b[^\n]*\b{wrong}\b[^\n]*\b{case.n_layer}\b", text)
    checks.require(code != 0, case.name, "init_from with model.n_layer "
                                         f"{wrong} against {case.n_layer} was not refused")
    checks.require(named is not None, case.name,
                   f"the refusal does not name model.n_layer with {wrong} and {case.n_layer}:\n"
                   f"{text[-2000:]}")
    started = re.search(r"^step \d+/", text, re.M) or os.path.isdir(
        os.path.join(run_dir, "checkpoints"))
    checks.require(not started, case.name, f"the refused run trained or checkpointed:\n"
                                           f"{text[-2000:]}")
    if code != 0 and named:
        checks.rows.append((case.name, "init_from n_layer refused", None))


PARTS = {"import": part_import, "export": part_export, "init_from": part_init_from}


def main():
    global args
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt-exe", required=True)
    parser.add_argument("--train-exe", required=True)
    parser.add_argument("--mpiexec", default="")
    parser.add_argument("--data", required=True, help="byte-token shards: train_*.bin, val_*.bin")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--part", default="import,export,init_from")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    args = parser.parse_args()
    parts = args.part.split(",")
    for p in parts:
        if p not in PARTS:
            parser.error(f"--part {p}: use import, export, init_from")
    names = args.cases.split(",")
    cases = [c for c in CASES if c.name in names]
    if len(cases) != len(names):
        parser.error(f"--cases: choose from {', '.join(c.name for c in CASES)}")
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()
    write_tokens(os.path.join(args.work, "tokens.txt"), fixed_tokens())
    print(f"check_hf.py: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"parts {', '.join(parts)}, tolerance {TOLERANCE:g}", flush=True)
    start = time.monotonic()
    for part in parts:
        for case in cases:
            try:
                PARTS[part](case)
            except Exception as e:  # a crash of one case is a failure of that case, not the end
                import traceback
                checks.fail(case.name, f"{part}: {type(e).__name__}: {e}\n"
                                       f"{traceback.format_exc()}")
    print(f"\n{'case':<18} {'check':<26} max |logit diff|")
    for case, what, d in checks.rows:
        value = "refused as it should" if d is None else f"{d:.3e}"
        print(f"{case:<18} {what:<26} {value}")
    if checks.notes:
        print("\nnotes (transformers' warnings while loading, and facts):")
        for note in checks.notes:
            print(f"  {note}")
    print(f"\n{time.monotonic() - start:.1f} s")
    if checks.failures:
        print(f"\ncheck_hf.py: {len(checks.failures)} FAILED:")
        for f in checks.failures:
            print(f"  {f.splitlines()[0]}")
        return 1
    print(f"check_hf.py: all checks passed ({', '.join(parts)}; {len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
