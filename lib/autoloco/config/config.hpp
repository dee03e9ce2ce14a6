// The typed run configuration. Every key is declared once, in a visit() below, with its
// default (the member initializer) and a one-line doc; loading, --set overrides, printing,
// validation messages and docs/config.md are all generated from these declarations.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autoloco/config/elastic_config.hpp"
#include "autoloco/config/model_config.hpp"

namespace autoloco {

struct RunConfig {
  std::string name = "run";
  std::string out_dir = "runs";
  int64_t seed = 1234;
  int64_t steps = 1000;
  int64_t eval_every = 100;
  int64_t eval_batches = 8;
  int64_t log_every = 10;
  std::string device = "cpu";
  std::string precision = "auto";
  bool tf32 = true;
  int64_t threads = 0;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("name", s.name, "run name; the run directory is out_dir/name");
    v("out_dir", s.out_dir, "directory that holds run directories");
    v("seed", s.seed, "seed of model init and of every rank's data stream");
    v("steps", s.steps,
      "length of the run in inner steps at the initial batch; an adaptive batch ends the run "
      "after as many tokens (in fewer, larger steps)");
    v("eval_every", s.eval_every,
      "evaluate on the validation split every this many steps at the initial batch, i.e. at equal "
      "tokens whatever the batch (0: only at the end)");
    v("eval_batches", s.eval_batches, "validation batches per evaluation, spread over the ranks");
    v("log_every", s.log_every, "write a metrics line and a progress line every this many steps");
    v("device", s.device, "cpu or cuda (cuda needs a CUDA build of LibTorch)");
    v("precision", s.precision,
      "auto (bf16 on cuda, fp32 on cpu), fp32, or bf16: bf16 autocast of the forward pass "
      "(matmuls and attention in bf16) over fp32 weights, gradients and optimizer state");
    v("tf32", s.tf32,
      "let the float32 matmuls that remain on a GPU use TF32 tensor cores (no effect on cpu)");
    v("threads", s.threads, "intra-op threads per rank; 0 picks cores / ranks on this host");
  }
};

struct TopologyConfig {
  int64_t ranks_per_dc = 1;
  std::string shard = "none";

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("ranks_per_dc", s.ranks_per_dc,
      "MPI ranks per datacenter; the world size must be a multiple of it");
    v("shard", s.shard,
      "how a dc's state is split over its members (ZeRO, docs/sharding.md): none (every member "
      "keeps everything), optimizer (AdamW moments and the outer state sharded: stage 1), "
      "gradients (the gradient too, reduce-scattered bucket by bucket in backward: stage 2), "
      "full (the parameters too: each unit's all-gathered before its forward and its backward "
      "and freed after, its gradient reduce-scattered in backward: stage 3, FSDP)");
  }
};

// One corpus of a weighted mixture (data.sources).
struct DataSource {
  std::string name;                // label in metrics and eval; default: train's directory name
  std::vector<std::string> train;  // a directory autoloco-prepare wrote, or shard paths or globs
  std::vector<std::string> val;    // empty: DIR/val_*.bin of a train directory
  double weight = 1.0;             // relative share of the training samples
};

struct DataConfig {
  std::vector<std::string> train = {"data/pydoc/train_*.bin"};
  std::vector<std::string> val = {"data/pydoc/val_*.bin"};
  int64_t batch_size = 16;
  int64_t grad_accum = 1;
  std::string partition = "iid";
  std::vector<DataSource> sources;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("train", s.train, "training shard paths or globs (a string or a list)");
    v("val", s.val, "validation shard paths or globs (a string or a list)");
    v("sources", s.sources,
      "a weighted mixture instead of train and val: a list of {name, train, val, weight}, "
      "train a prepared directory (val then defaults to its val shards) or shard globs; each "
      "sample's source is drawn by weight (docs/data.md, Mixtures)");
    v("batch_size", s.batch_size, "sequences per rank per micro-step");
    v("grad_accum", s.grad_accum, "micro-steps accumulated per inner step");
    v("partition", s.partition,
      "iid: every rank samples all train shards; by_shard: dc d reads shards d, d+G, ...");
  }
};

struct InnerConfig {
  std::string optimizer = "adamw";
  double lr = 3e-3;
  int64_t warmup_steps = 50;
  std::string schedule = "cosine";
  double min_lr_ratio = 0.1;
  std::vector<double> betas = {0.9, 0.95};
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  std::string adamw = "auto";
  double muon_lr = 0.0;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("optimizer", s.optimizer,
      "adamw; muon (Muon on the blocks' matrices, AdamW on embeddings, head, norms and biases: "
      "docs/methods.md); or sgd (plain SGD without momentum or decay: a reference for tests)");
    v("lr", s.lr, "peak inner learning rate");
    v("warmup_steps", s.warmup_steps, "linear warm-up steps from 0 to lr");
    v("schedule", s.schedule, "after warm-up: cosine (decay to min_lr_ratio * lr) or constant");
    v("min_lr_ratio", s.min_lr_ratio, "floor of the cosine decay as a fraction of lr");
    v("betas", s.betas, "AdamW [beta1, beta2]");
    v("eps", s.eps, "AdamW epsilon");
    v("weight_decay", s.weight_decay,
      "decoupled weight decay, on matrices and embeddings only (not biases or norms)");
    v("grad_clip", s.grad_clip, "clip the global gradient norm to this (0: off)");
    v("adamw", s.adamw,
      "AdamW kernel: fused (LibTorch's one-pass kernel; needs LibTorch 2.x), flat (a few "
      "whole-buffer ops, any LibTorch) or auto (fused on cuda when LibTorch has it, else flat)");
    v("muon_lr", s.muon_lr,
      "Muon's peak learning rate, on the same schedule (0: inner.lr, which carries over because "
      "the update is scaled to AdamW's RMS)");
    v("muon_momentum", s.muon_momentum, "Muon's momentum mu (B <- mu B + G)");
    v("muon_nesterov", s.muon_nesterov, "Muon orthogonalises G + mu B instead of B");
    v("muon_ns_steps", s.muon_ns_steps, "Newton-Schulz iterations per matrix and step");
  }
};

struct OuterConfig {
  std::string method = "diloco";
  double lr = 0.7;
  double momentum = 0.9;
  std::vector<std::string> momentum_schedule = {};
  bool nesterov = true;
  std::string correction = "none";
  double correction_beta = 0.5;
  std::string wire_dtype = "fp32";
  int64_t wire_block = 256;
  std::string wire_rounding = "nearest";
  bool error_feedback = false;
  double error_feedback_beta = 1.0;
  std::string momentum_mode = "global";
  double wire_topk = 0.0;
  int64_t wire_topk_chunk = 4096;
  std::string state_device = "auto";
  std::string overlap = "streaming";
  int64_t overlap_steps = 0;
  double overlap_alpha = 0.0;
  int64_t fragments = 1;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("method", s.method,
      "ddp (gradients all-reduced over the world every step), diloco (outer SGD with momentum "
      "every H steps) or local_sgd (plain averaging every H steps: outer lr 1, no momentum)");
    v("lr", s.lr, "outer learning rate (diloco)");
    v("momentum", s.momentum,
      "outer momentum mu (diloco), until the first momentum_schedule entry");
    v("momentum_schedule", s.momentum_schedule,
      "outer momentum changes as \"STEP:MU\" entries, e.g. [\"400:0.9\"]: mu from inner step "
      "STEP on (rounds ending at or after STEP)");
    v("nesterov", s.nesterov, "Nesterov form of the outer momentum (DiLoCo's)");
    v("correction", s.correction,
      "AutoLoCo's outer correction for rounds of H_k != interval.H steps, r = H_k / interval.H: "
      "none, momentum (mu^r), lr (lr r^correction_beta) or both (mu^r, lr (1 - mu^r)/(1 - mu))");
    v("correction_beta", s.correction_beta, "exponent of r in correction: lr");
    v("wire_dtype", s.wire_dtype,
      "format of pseudo-gradients (and ddp gradients) on the inter-dc link, always summed in "
      "fp32: fp32, bf16, or with one fp32 scale per wire_block values fp8 (e4m3), int8, int4, "
      "int2 (ternary: -1, 0, 1) or e3m0 (4-bit sign and exponent; docs/methods.md)");
    v("wire_block", s.wire_block,
      "values per fp32 scale of the fp8, int8, int4, int2 and e3m0 formats (even; a multiple of "
      "4 for int2)");
    v("wire_rounding", s.wire_rounding,
      "rounding of those formats: nearest, or stochastic (seeded by run.seed, the round and the "
      "fragment: runs stay deterministic)");
    v("error_feedback", s.error_feedback,
      "each dc adds what rounding its last pseudo-gradient lost to the next one (fp8, int8, "
      "int4, int2 and e3m0, and every format with wire_topk; one fp32 value per parameter and "
      "dc, shared by its ranks)");
    v("error_feedback_beta", s.error_feedback_beta,
      "decay of the error-feedback residual before it joins the next pseudo-gradient, e <- beta "
      "e + Delta (SparseLoCo's accumulator; 1 keeps all of it)");
    v("momentum_mode", s.momentum_mode,
      "global (diloco's outer momentum) or error_feedback (no outer momentum: the decayed "
      "error-feedback accumulator takes its place, as in SparseLoCo; needs error_feedback)");
    v("wire_topk", s.wire_topk,
      "fraction of each wire_topk_chunk values a dc sends, its largest magnitudes in "
      "wire_dtype with their indices (SparseLoCo; needs error_feedback); 0 sends every value");
    v("wire_topk_chunk", s.wire_topk_chunk,
      "values per top-k chunk (2 to 16777216; indices take ceil(log2 chunk) bits)");
    v("state_device", s.state_device,
      "where the outer state (anchor, momentum; fp32) lives: cpu, device (run.device), or auto "
      "(the device for models up to 1B parameters, 8 GB of outer state; the cpu beyond)");
    v("overlap", s.overlap,
      "how a sync overlaps the inner steps when overlap_steps > 0: streaming (Streaming "
      "DiLoCo's tau-step overlap with alpha mixing); eager is not built (docs/methods.md)");
    v("overlap_steps", s.overlap_steps,
      "tau: inner steps the replica trains on while its round's all-reduce runs on a "
      "communication thread; 0 waits for it (blocking DiLoCo). Must be below every round's H");
    v("overlap_alpha", s.overlap_alpha,
      "alpha: when the late outer step lands, replica <- alpha replica + (1 - alpha) anchor; 0 "
      "drops the tau local steps, 0.5 averages");
    v("fragments", s.fragments,
      "P: the model synced in P fragments of whole transformer blocks (block b in fragment b mod "
      "P; embeddings and final norm fill the lightest), fragment p floor(p H / P) steps into "
      "each interval of H steps, so about 1/P of the model is on the link at a time (Streaming "
      "DiLoCo); 1: the whole model every H steps");
  }
};

struct IntervalConfig {
  std::string controller = "fixed";
  int64_t H = 20;
  int64_t H_min = 10;
  int64_t H_max = 80;
  int64_t max_rounds = 0;
  bool check_consistency = false;
  std::vector<std::string> schedule = {};
  double qsr_alpha = 0.01;
  double q_target = 0.03;
  int64_t q_auto_rounds = 3;
  double q_auto_ratio = 0.3;
  double smoothing = 0.5;
  double grow = 1.25;
  double shrink = 0.8;
  double band = 0.8;
  int64_t hold_rounds = 2;
  double target_utilisation = 0.0;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("controller", s.controller,
      "how the interval H is chosen: fixed (DiLoCo), schedule, adacomm, qsr or autoloco "
      "(docs/methods.md)");
    v("H", s.H, "inner steps per round (H_0: the first rounds' for adaptive controllers)");
    v("H_min", s.H_min, "smallest interval an adaptive controller may choose");
    v("H_max", s.H_max, "largest interval an adaptive controller may choose");
    v("max_rounds", s.max_rounds,
      "budget of rounds for the whole run (0: none); intervals are lengthened, beyond H_max if "
      "need be, so that the run ends within it");
    v("check_consistency", s.check_consistency,
      "debug: after each round, check with one extra collective that every rank chose the same "
      "next interval and outer step; abort naming the ranks if not");
    v("schedule", s.schedule,
      "controller schedule: interval changes as \"STEP:H\" entries, e.g. [\"250:10\"]: rounds "
      "starting at or after inner step STEP have H steps");
    v("qsr_alpha", s.qsr_alpha, "qsr: H = max(H, floor((qsr_alpha / lr)^2)), lr the round's mean");
    v("q_target", s.q_target,
      "autoloco: set-point q* of the smoothed per-step signal-to-noise q = rho/((1-rho) H); "
      "0: q_auto_ratio times the mean q of the first q_auto_rounds rounds after warm-up");
    v("q_auto_rounds", s.q_auto_rounds, "autoloco with q_target 0: rounds that set q*");
    v("q_auto_ratio", s.q_auto_ratio, "autoloco with q_target 0: q* relative to their mean q");
    v("smoothing", s.smoothing,
      "autoloco: weight of the newest q in its running average (1: no smoothing)");
    v("grow", s.grow, "autoloco: H is multiplied by this while the smoothed q is above q*");
    v("shrink", s.shrink,
      "autoloco: H is multiplied by this while the smoothed q is below band q*");
    v("band", s.band, "autoloco: shrink only below band * q* (a dead band against dithering)");
    v("hold_rounds", s.hold_rounds, "autoloco: rounds without a decision after each change");
    v("target_utilisation", s.target_utilisation,
      "u*: with any controller, H is at least the smallest interval whose syncs leave compute "
      "utilisation H t / (H t + E) >= u*, from the last round's compute seconds per step t and "
      "its exposed link seconds E (with overlap, max(0, T - tau t) per sync); 0: off");
  }
};

struct BatchConfig {
  std::string controller = "fixed";
  std::string test = "norm";
  double theta = 0.9;
  double nu = 0.9;
  double vartheta = 0.9;
  int64_t max_micro_batch = 0;
  int64_t max_batch = 256;
  double max_growth = 2.0;
  std::string lr_scaling = "none";
  int64_t instances = 1;
  int64_t merge_every = 4;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("controller", s.controller,
      "how each dc's batch is chosen: fixed (data.batch_size x data.grad_accum per rank) or "
      "adloco (grows as the gradient noise asks; docs/methods.md)");
    v("test", s.test,
      "adloco: norm (Byrd et al. 2012) or inner_product (augmented, Bollapragada et al. 2018)");
    v("theta", s.theta, "norm test: the batch gradient's relative error allowed, theta");
    v("nu", s.nu, "inner-product test: allowed relative variance along the gradient, nu");
    v("vartheta", s.vartheta,
      "inner-product test: allowed relative variance orthogonal to the gradient, vartheta");
    v("max_micro_batch", s.max_micro_batch,
      "largest micro-batch per rank in sequences (0: data.batch_size); a larger batch "
      "accumulates ceil(batch / max_micro_batch) micro-batches per step");
    v("max_batch", s.max_batch, "adloco: largest batch per rank, in sequences");
    v("max_growth", s.max_growth, "adloco: a dc's batch grows at most by this factor per round");
    v("lr_scaling", s.lr_scaling,
      "inner lr when a dc's batch grows from b0 to b: none, or sqrt (lr sqrt(b / b0))");
    v("instances", s.instances,
      "adloco: model instances per rank, each on its own data stream with its own batch, "
      "averaged into the dc's replica at every round's end (multi-instance training)");
    v("merge_every", s.merge_every,
      "adloco with instances > 1: every this many rounds the two instances with the smallest "
      "batch demand merge (batch-weighted), until one remains");
  }
};

struct WanConfig {
  double bandwidth_gbps = 1.0;
  double latency_ms = 50.0;
  std::string mode = "account";

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("bandwidth_gbps", s.bandwidth_gbps,
      "simulated inter-dc bandwidth per dc in Gbit/s (shared by the dc's members)");
    v("latency_ms", s.latency_ms, "simulated one-way inter-dc latency in milliseconds");
    v("mode", s.mode,
      "account (add the link time to a simulated clock), sleep (also wait it out, so "
      "wall-clock includes it) or real (the dcs are on real hosts: each sync's link time is "
      "measured, and the model's is reported beside it)");
  }
};

struct CommConfig {
  double timeout_s = 300.0;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("timeout_s", s.timeout_s,
      "the watchdog: a rank that waits this many seconds in one collective (intra-dc, inter-dc, "
      "the stop agreement, the communication thread's sync) prints what it waits for and ends "
      "the job with exit code 124, its last complete checkpoint intact (docs/faults.md); must "
      "exceed, with wan.mode sleep or real, the link time of "
      "one sync (checked at the start); a checkpoint's write and a resume's read are bounded by "
      "ckpt.timeout_s instead; 0: no watchdog");
  }
};

struct CkptConfig {
  int64_t every_steps = 0;
  double every_minutes = 30.0;
  int64_t keep_last = 3;
  bool on_signal = true;
  bool at_end = true;
  double timeout_s = 3600.0;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("every_steps", s.every_steps, "save a checkpoint every this many inner steps (0: never)");
    v("every_minutes", s.every_minutes,
      "save a checkpoint when this many minutes of wall-clock passed since the last (0: never)");
    v("keep_last", s.keep_last,
      "complete checkpoints kept in the run directory; older are removed");
    v("on_signal", s.on_signal,
      "on SIGTERM, SIGUSR1 or SIGINT save a checkpoint before stopping (then exit 0)");
    v("at_end", s.at_end, "save a checkpoint after the last step");
    v("timeout_s", s.timeout_s,
      "the watchdog's bound on a checkpoint's write and a resume's read, in place of "
      "comm.timeout_s (never shorter than it): every rank waits while the slowest writes; the "
      "start log gives the expected time of a checkpoint from its bytes and a measured write "
      "rate");
  }
};

// One downstream task scored on the anchor (eval.tasks, docs/tasks.md).
struct EvalTask {
  std::string name;    // label in metrics.jsonl and summary.json: tasks.<name>
  std::string path;    // the task file (json lines)
  std::string format;  // hellaswag, arc, piqa, mc or lambada
  int64_t limit = 0;   // score the file's first `limit` items (lm_eval --limit); 0: all
};

struct EvalConfig {
  std::vector<EvalTask> tasks;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("tasks", s.tasks,
      "downstream tasks scored on the anchor at every evaluation (run.eval_every and the "
      "end), as lm-evaluation-harness scores them: a list of {name, path, format, limit}, "
      "format hellaswag, arc, piqa, mc or lambada, limit the first items only (0: all); "
      "docs/tasks.md");
  }
};

struct Config {
  RunConfig run;
  TopologyConfig topology;
  ModelConfig model;
  DataConfig data;
  InnerConfig inner;
  OuterConfig outer;
  IntervalConfig interval;
  BatchConfig batch;
  WanConfig wan;
  CommConfig comm;
  CkptConfig ckpt;
  ElasticConfig elastic;
  EvalConfig eval;

  // Calls v.section(name, doc, section_struct) for each section, in file order.
  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v.section("run", "the run as a whole", s.run);
    v.section("topology", "how the MPI world is split into datacenters", s.topology);
    v.section("model", "the decoder: architecture, sizes, where its weights start", s.model);
    v.section("data", "token shards and batches", s.data);
    v.section("inner", "the inner optimizer (AdamW or Muon) and its schedule", s.inner);
    v.section("outer", "the method and its outer optimizer across datacenters", s.outer);
    v.section("interval", "the number of inner steps per round", s.interval);
    v.section("batch", "the batch of each dc, fixed or adaptive (AdLoCo)", s.batch);
    v.section("wan", "the simulated inter-dc link", s.wan);
    v.section("comm", "collectives: the watchdog that ends a hung job", s.comm);
    v.section("ckpt", "checkpoints (docs/checkpoints.md) and when they are written", s.ckpt);
    v.section("elastic", "each dc its own launch, joining and leaving (docs/elastic.md)",
              s.elastic);
    v.section("eval", "downstream tasks scored in the run (docs/tasks.md)", s.eval);
  }
};

// One entry of outer.momentum_schedule: from inner step `step` on, the outer momentum is `mu`.
struct MomentumChange {
  int64_t step = 0;
  double mu = 0.0;
};

// One entry of interval.schedule: rounds that start at or after inner step `step` have H steps.
struct IntervalChange {
  int64_t step = 0;
  int64_t H = 0;
};

// Parses interval.schedule ("STEP:H" entries, steps increasing). Throws ConfigError.
std::vector<IntervalChange> parse_interval_schedule(const IntervalConfig& interval);

// Parses outer.momentum_schedule ("STEP:MU" entries, steps increasing). Throws ConfigError.
std::vector<MomentumChange> parse_momentum_schedule(const OuterConfig& outer);

// What a Hugging Face directory says its model is (model.init_from), handed in by the
// executables (model/hf_config.hpp's read_hf_config: the config layer reads no model files).
using ModelDescriber = std::function<ModelConfig(const std::string& dir)>;

// Loads a YAML file, applies "section.key=value" overrides, validates. Throws ConfigError
// naming the key (and the nearest valid key for a typo). With `describe`, model.init_from
// describes the model: every model key that neither the file, --set nor model.preset gives
// takes the directory's value (a llama run keeps its own seq_len: the directory's is the
// released maximum, not a training context).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const ModelDescriber& describe = {});

// Same from YAML text (for tests and for configs embedded in checkpoints).
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                    const std::string& origin = "<string>", const ModelDescriber& describe = {});

// Checks values and combinations that do not depend on the MPI world. Throws ConfigError.
void validate(const Config& config);

// Checks what depends on the world (world size a multiple of ranks_per_dc, ...).
void validate_world(const Config& config, int world_size);

// The effective config as YAML, every key present, docs as comments; loads back to `config`.
std::string to_yaml(const Config& config);

// Markdown reference of every key: section, key, type, default, doc (docs/config.md).
std::string config_reference_markdown();

// Every key with its value as it is printed in the effective config ("section.key" -> value).
std::vector<std::pair<std::string, std::string>> config_values(const Config& config);

// Every valid "section.key".
std::vector<std::string> config_keys();

}  // namespace autoloco
