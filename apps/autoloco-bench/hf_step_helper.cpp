// The Python program of --hf-step's transformers side (hf_step_helper.hpp).
#include "hf_step_helper.hpp"

namespace autoloco::bench {

const char* const kHfStepHelper = R"PY(
import json, math, os, sys, time

# The socket (our stdin and stdout) is the channel; anything a library prints goes to stderr.
chan_in = os.fdopen(os.dup(0), "r")
chan_out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)

def reply(line):
    chan_out.write(line + "\n")
    chan_out.flush()

def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return -1

s = json.loads(sys.argv[1])
try:
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
except Exception as e:
    reply("error cannot import torch and transformers under %s: %s: %s"
          % (sys.executable, type(e).__name__, str(e).replace("\n", " ")))
    sys.exit(1)

torch.set_num_threads(s["threads"])
torch.manual_seed(s["seed"])
baseline = status_bytes("VmRSS")
# The class config.json's model_type names: LlamaForCausalLM, MistralForCausalLM,
# Qwen2ForCausalLM or Qwen3ForCausalLM, as model.family makes autoloco export it.
config = AutoConfig.from_pretrained(os.path.dirname(s["config"]))
model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)
model.train()
params = [p for p in model.parameters() if p.requires_grad]
# Decay on matrices and embeddings only, as autoloco's (optim/flat_params.cpp: dim >= 2).
groups = [
    {"params": [p for p in params if p.dim() >= 2], "weight_decay": s["weight_decay"]},
    {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
]
kind = s["adamw"]
options = {"fused": kind == "fused", "foreach": kind == "foreach"}
if kind == "default":
    options = {}
opt = torch.optim.AdamW(groups, lr=s["lr"], betas=tuple(s["betas"]), eps=s["eps"], **options)

def lr_at(step):  # optim/lr_schedule.cpp
    if step < s["warmup_steps"]:
        return s["lr"] * (step + 1) / s["warmup_steps"]
    if s["schedule"] == "constant":
        return s["lr"]
    low = s["min_lr_ratio"] * s["lr"]
    span = max(1, s["total_steps"] - s["warmup_steps"])
    progress = min(max((step - s["warmup_steps"]) / span, 0.0), 1.0)
    return low + (s["lr"] - low) * 0.5 * (1.0 + math.cos(math.pi * progress))

vocab, batch, seq = s["vocab_size"], s["batch_size"], s["seq_len"]
gen = torch.Generator().manual_seed(s["seed"])
step_index = 0

def step():
    global step_index
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=gen)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    lr = lr_at(step_index)
    for g in opt.param_groups:
        g["lr"] = lr
    logits = model(input_ids=inputs, use_cache=False).logits
    loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    loss.backward()
    if s["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_(params, s["grad_clip"])
    opt.step()
    opt.zero_grad(set_to_none=True)
    step_index += 1
    return loss.detach()

blas = "mkl" if torch.backends.mkl.is_available() else "other"
info = {
    "torch": torch.__version__, "transformers": transformers.__version__, "blas": blas,
    "parameters": sum(p.numel() for p in params), "threads": torch.get_num_threads(),
    "attn": model.config._attn_implementation, "adamw": kind, "rss_baseline": baseline,
    "class": type(model).__name__,
}
reply("ready " + " ".join("%s=%s" % (k, v) for k, v in info.items()))
for line in chan_in:
    words = line.split()
    if not words or words[0] == "quit":
        break
    if words[0] == "run":
        start = time.perf_counter()
        loss = None
        for _ in range(int(words[1])):
            loss = step()
        seconds = time.perf_counter() - start
        reply("ok %.9g %.9g" % (seconds, float(loss) if loss is not None else float("nan")))
    elif words[0] == "profile":
        from torch.profiler import ProfilerActivity, profile
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(int(words[1])):
                step()
        seconds = time.perf_counter() - start
        reply("ok %.9g " % seconds + " ".join("%s=%.1f" % (e.key.replace(" ", "_"), e.self_cpu_time_total)
                               for e in prof.key_averages()))
    elif words[0] == "peak":
        reply("ok %d" % status_bytes("VmHWM"))
    else:
        reply("error unknown request " + words[0])
)PY";

}  // namespace autoloco::bench
