// Value and combination checks. Each message names the key and says what would be valid.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>

#include "autoloco/config/config.hpp"
#include "autoloco/config/validate_model.hpp"
#include "autoloco/config/validate_rules.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

using config_rules::require;
using config_rules::require_non_negative;
using config_rules::require_one_of;
using config_rules::require_positive;

void validate_run(const RunConfig& r) {
  require(!r.name.empty() && r.name.find('/') == std::string::npos, "run.name",
          fmt::format("must be a non-empty name without '/', got '{}'", r.name));
  require(!r.out_dir.empty(), "run.out_dir", "must not be empty");
  require_positive(r.steps, "run.steps");
  require_non_negative(r.eval_every, "run.eval_every");
  require_positive(r.eval_batches, "run.eval_batches");
  require_positive(r.log_every, "run.log_every");
  require_one_of(r.device, {"cpu", "cuda"}, "run.device");
  require_one_of(r.precision, {"auto", "fp32", "bf16"}, "run.precision");
  require_non_negative(r.threads, "run.threads");
}

// Names label metrics fields and eval lines: plain words, each once.
void validate_sources(const std::vector<DataSource>& sources) {
  std::set<std::string> names;
  for (size_t i = 0; i < sources.size(); ++i) {
    const DataSource& s = sources[i];
    const std::string key = fmt::format("data.sources[{}]", i);
    require(!s.train.empty(), key + ".train", "needs a prepared directory or shard globs");
    require(std::isfinite(s.weight) && s.weight > 0.0, key + ".weight",
            fmt::format("must be a positive number, got {}", s.weight));
    const bool plain = !s.name.empty() && std::all_of(s.name.begin(), s.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    require(plain, key + ".name",
            fmt::format("must be a name of letters, digits, '_', '-' or '.', got '{}'", s.name));
    require(names.insert(s.name).second, key + ".name",
            fmt::format("'{}' names two sources; give each its own name", s.name));
  }
}

// Names label metrics fields (tasks.<name>): plain words, each once.
void validate_eval(const EvalConfig& e) {
  std::set<std::string> names;
  for (size_t i = 0; i < e.tasks.size(); ++i) {
    const EvalTask& t = e.tasks[i];
    const std::string key = fmt::format("eval.tasks[{}]", i);
    const bool plain = !t.name.empty() && std::all_of(t.name.begin(), t.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    require(plain, key + ".name",
            fmt::format("must be a name of letters, digits, '_' or '-', got '{}'", t.name));
    require(names.insert(t.name).second, key + ".name",
            fmt::format("'{}' names two tasks; give each its own name", t.name));
    require(!t.path.empty(), key + ".path", "needs the task file (json lines)");
    require_one_of(t.format, {"hellaswag", "arc", "piqa", "mc", "lambada"}, key + ".format");
    require_non_negative(t.limit, key + ".limit");
  }
}

void validate_data(const DataConfig& d) {
  if (d.sources.empty()) {
    require(!d.train.empty(), "data.train", "needs at least one shard path or glob");
    require(!d.val.empty(), "data.val", "needs at least one shard path or glob");
  }
  validate_sources(d.sources);
  require_positive(d.batch_size, "data.batch_size");
  require_positive(d.grad_accum, "data.grad_accum");
  require_one_of(d.partition, {"iid", "by_shard"}, "data.partition");
}

void validate_inner(const InnerConfig& i) {
  require_one_of(i.optimizer, {"adamw", "muon", "sgd"}, "inner.optimizer");
  require(i.muon_lr >= 0.0 && i.muon_lr < 10.0, "inner.muon_lr",
          fmt::format("must be in [0, 10) (0: inner.lr), got {}", i.muon_lr));
  require(i.muon_momentum >= 0.0 && i.muon_momentum < 1.0, "inner.muon_momentum",
          fmt::format("must be in [0, 1), got {}", i.muon_momentum));
  require(i.muon_ns_steps >= 1 && i.muon_ns_steps <= 20, "inner.muon_ns_steps",
          fmt::format("must be in [1, 20], got {}", i.muon_ns_steps));
  require_one_of(i.adamw, {"auto", "fused", "flat"}, "inner.adamw");
  require(i.lr > 0.0 && i.lr < 10.0, "inner.lr", fmt::format("must be in (0, 10), got {}", i.lr));
  require_non_negative(i.warmup_steps, "inner.warmup_steps");
  require_one_of(i.schedule, {"cosine", "constant"}, "inner.schedule");
  require(i.min_lr_ratio >= 0.0 && i.min_lr_ratio <= 1.0, "inner.min_lr_ratio",
          fmt::format("must be in [0, 1], got {}", i.min_lr_ratio));
  require(
      i.betas.size() == 2, "inner.betas",
      fmt::format("must be a list of two numbers [beta1, beta2], got {} values", i.betas.size()));
  for (double b : i.betas) {
    require(b >= 0.0 && b < 1.0, "inner.betas",
            fmt::format("each beta must be in [0, 1), got {}", b));
  }
  require_positive(i.eps, "inner.eps");
  require_non_negative(i.weight_decay, "inner.weight_decay");
  require_non_negative(i.grad_clip, "inner.grad_clip");
}

void validate_outer(const OuterConfig& o) {
  require_one_of(o.method, {"ddp", "diloco", "local_sgd"}, "outer.method");
  require(o.lr > 0.0 && o.lr < 10.0, "outer.lr", fmt::format("must be in (0, 10), got {}", o.lr));
  require(o.momentum >= 0.0 && o.momentum < 1.0, "outer.momentum",
          fmt::format("must be in [0, 1), got {}", o.momentum));
  parse_momentum_schedule(o);
  require_one_of(o.correction, {"none", "momentum", "lr", "both"}, "outer.correction");
  require(o.correction == "none" || o.method == "diloco", "outer.correction",
          fmt::format("'{}' corrects the outer step of diloco; outer.method is {}: set "
                      "outer.correction=none or outer.method=diloco",
                      o.correction, o.method));
  require(o.correction_beta >= 0.0 && o.correction_beta <= 2.0, "outer.correction_beta",
          fmt::format("must be in [0, 2], got {}", o.correction_beta));
  require_one_of(o.wire_dtype, {"fp32", "bf16", "fp8", "int8", "int4", "int2", "e3m0"},
                 "outer.wire_dtype");
  require(o.wire_block >= 2 && o.wire_block % 2 == 0 && o.wire_block <= (int64_t{1} << 20),
          "outer.wire_block",
          fmt::format("must be an even number of values from 2 to 1048576 (4-bit values pair "
                      "up within a block), got {}",
                      o.wire_block));
  require(o.wire_dtype != "int2" || o.wire_block % 4 == 0, "outer.wire_block",
          fmt::format("must be a multiple of 4 with outer.wire_dtype int2 (four 2-bit values to "
                      "a byte, and every block starts on a byte), got {}",
                      o.wire_block));
  require_one_of(o.wire_rounding, {"nearest", "stochastic"}, "outer.wire_rounding");
  require(
      !o.error_feedback || o.wire_topk > 0.0 || (o.wire_dtype != "fp32" && o.wire_dtype != "bf16"),
      "outer.error_feedback",
      fmt::format("feeds back what the wire left out; outer.wire_dtype {} without "
                  "outer.wire_topk keeps no residual: set outer.wire_dtype to fp8, int8, "
                  "int4, int2 or e3m0, or outer.wire_topk, or outer.error_feedback=false",
                  o.wire_dtype));
  require(
      o.wire_topk >= 0.0 && o.wire_topk <= 1.0, "outer.wire_topk",
      fmt::format("is the fraction of each chunk sent, in [0, 1] (0: dense), got {}", o.wire_topk));
  require(o.wire_topk == 0.0 || o.error_feedback, "outer.wire_topk",
          "drops most of every pseudo-gradient, which only error feedback carries to later "
          "rounds: set outer.error_feedback=true");
  require(o.wire_topk_chunk >= 2 && o.wire_topk_chunk <= (int64_t{1} << 24),
          "outer.wire_topk_chunk",
          fmt::format("must be 2 to 16777216 values, got {}", o.wire_topk_chunk));
  require_one_of(o.momentum_mode, {"global", "error_feedback"}, "outer.momentum_mode");
  require(o.momentum_mode != "error_feedback" || (o.error_feedback && o.method == "diloco"),
          "outer.momentum_mode",
          "error_feedback replaces diloco's outer momentum with the error-feedback residual: "
          "set outer.error_feedback=true and outer.method=diloco, or outer.momentum_mode=global");
  require(o.error_feedback_beta >= 0.0 && o.error_feedback_beta <= 1.0, "outer.error_feedback_beta",
          fmt::format("must be in [0, 1], got {}", o.error_feedback_beta));
  require(!o.error_feedback || o.method != "ddp", "outer.error_feedback",
          "is for the outer sync's pseudo-gradients; ddp's gradients cross the link without it: "
          "set outer.error_feedback=false or outer.method=diloco");
  require_one_of(o.state_device, {"auto", "cpu", "device"}, "outer.state_device");
}

void validate_interval(const IntervalConfig& i) {
  require_one_of(i.controller, {"fixed", "schedule", "adacomm", "qsr", "autoloco"},
                 "interval.controller");
  require_positive(i.H, "interval.H");
  require_positive(i.H_min, "interval.H_min");
  require(i.H_max >= i.H_min, "interval.H_max",
          fmt::format("must be >= interval.H_min ({}), got {}", i.H_min, i.H_max));
  if (i.controller != "fixed") {
    require(i.H >= i.H_min && i.H <= i.H_max, "interval.H",
            fmt::format("the {} controller starts from H = {}, outside [H_min, H_max] = [{}, {}]",
                        i.controller, i.H, i.H_min, i.H_max));
  }
  require_non_negative(i.max_rounds, "interval.max_rounds");
  const auto changes = parse_interval_schedule(i);
  require(i.controller != "schedule" || !changes.empty(), "interval.schedule",
          "the schedule controller needs at least one \"STEP:H\" entry");
  require_positive(i.qsr_alpha, "interval.qsr_alpha");
  require_non_negative(i.q_target, "interval.q_target");
  require_positive(i.q_auto_rounds, "interval.q_auto_rounds");
  require_positive(i.q_auto_ratio, "interval.q_auto_ratio");
  require(i.smoothing > 0.0 && i.smoothing <= 1.0, "interval.smoothing",
          fmt::format("must be in (0, 1], got {}", i.smoothing));
  require(i.grow > 1.0, "interval.grow", fmt::format("must be > 1, got {}", i.grow));
  require(i.shrink > 0.0 && i.shrink < 1.0, "interval.shrink",
          fmt::format("must be in (0, 1), got {}", i.shrink));
  require(i.band > 0.0 && i.band <= 1.0, "interval.band",
          fmt::format("must be in (0, 1], got {}", i.band));
  require_non_negative(i.hold_rounds, "interval.hold_rounds");
}

void validate_batch(const BatchConfig& b, const Config& c) {
  require_one_of(b.controller, {"fixed", "adloco"}, "batch.controller");
  require_one_of(b.test, {"norm", "inner_product"}, "batch.test");
  require_positive(b.theta, "batch.theta");
  require_positive(b.nu, "batch.nu");
  require_positive(b.vartheta, "batch.vartheta");
  require_non_negative(b.max_micro_batch, "batch.max_micro_batch");
  require(b.max_growth > 1.0, "batch.max_growth", fmt::format("must be > 1, got {}", b.max_growth));
  require_one_of(b.lr_scaling, {"none", "sqrt"}, "batch.lr_scaling");
  require_positive(b.instances, "batch.instances");
  require_positive(b.merge_every, "batch.merge_every");
  require(b.instances == 1 || b.controller == "adloco", "batch.instances",
          fmt::format("{} instances merge by their batch demand, which batch.controller fixed "
                      "does not measure: set batch.controller=adloco or batch.instances=1",
                      b.instances));
  if (b.controller == "fixed") return;
  require(c.outer.method != "ddp", "batch.controller",
          "adloco adapts each dc's batch between outer syncs; outer.method ddp has none: use "
          "outer.method=diloco (or local_sgd) or batch.controller=fixed");
  const int64_t initial = c.data.batch_size * c.data.grad_accum;
  require(b.max_batch >= initial, "batch.max_batch",
          fmt::format("must be at least the initial batch data.batch_size x data.grad_accum = {}, "
                      "got {}",
                      initial, b.max_batch));
}

// The shortest interval any round may have (the fixed H, H_min of an adaptive controller, the
// entries of a schedule).
int64_t shortest_interval(const IntervalConfig& i) {
  int64_t shortest = i.controller == "fixed" ? i.H : std::min(i.H, i.H_min);
  if (i.controller == "schedule") {
    for (const IntervalChange& change : parse_interval_schedule(i))
      shortest = std::min(shortest, change.H);
  }
  return shortest;
}

// Overlap (outer.overlap_steps): the late outer step must land inside the next round, and
// everything a round's message tells the other dcs must be known before that round starts.
void validate_overlap(const Config& c) {
  const OuterConfig& o = c.outer;
  require_one_of(o.overlap, {"streaming", "eager"}, "outer.overlap");
  require(o.overlap != "eager", "outer.overlap",
          "eager updates (Kale et al. 2025) are not built: the paper's exact update rule could not "
          "be read (docs/methods.md, Overlap); use outer.overlap=streaming");
  require_non_negative(o.overlap_steps, "outer.overlap_steps");
  require(o.overlap_alpha >= 0.0 && o.overlap_alpha < 1.0, "outer.overlap_alpha",
          fmt::format("must be in [0, 1), got {}", o.overlap_alpha));
  if (o.overlap_steps == 0) return;
  require(o.method != "ddp", "outer.overlap_steps",
          "ddp all-reduces gradients at every step and has no round to overlap: use "
          "outer.method=diloco (or local_sgd) or outer.overlap_steps=0");
  const int64_t shortest = shortest_interval(c.interval);
  const int64_t P = o.fragments;
  // Consecutive fragment syncs are at least floor(H / P) steps apart (sched/fragment_schedule).
  const int64_t gap = shortest / P;
  require(o.overlap_steps < gap, "outer.overlap_steps",
          P == 1 ? fmt::format("tau = {} must be below every round's length (here as short as {} "
                               "steps: interval.H, interval.H_min or an interval.schedule "
                               "entry), so that a round's outer step lands before the next "
                               "round ends",
                               o.overlap_steps, shortest)
                 : fmt::format("tau = {} must be below the gap between two fragments' syncs, "
                               "floor(H / outer.fragments) = {} for the shortest interval H = "
                               "{} (interval.H, interval.H_min or an interval.schedule entry), "
                               "so that one fragment's sync lands before the next one starts",
                               o.overlap_steps, gap, shortest));
  require(c.batch.controller == "fixed" && c.batch.instances == 1, "outer.overlap_steps",
          "adaptive batches announce each dc's next batch in the round's message, which an "
          "overlapped round needs before it arrives: use batch.controller=fixed with "
          "batch.instances=1, or outer.overlap_steps=0");
}

// Fragments (outer.fragments): every fragment needs its own step in each interval, and what
// changes at a round's end for the whole dc must wait for a cycle's end.
void validate_fragments(const Config& c) {
  const OuterConfig& o = c.outer;
  require(o.fragments >= 1, "outer.fragments",
          fmt::format("must be at least 1, got {}", o.fragments));
  if (o.fragments == 1) return;
  require(o.method != "ddp", "outer.fragments",
          "ddp all-reduces every gradient at every step and has no fragments to stagger: use "
          "outer.method=diloco (or local_sgd) or outer.fragments=1");
  const int64_t shortest = shortest_interval(c.interval);
  require(shortest >= o.fragments, "outer.fragments",
          fmt::format("{} fragments need intervals of at least {} steps (one step apart), but an "
                      "interval may be as short as {} (interval.H, interval.H_min or an "
                      "interval.schedule entry)",
                      o.fragments, o.fragments, shortest));
  require(c.batch.instances == 1, "outer.fragments",
          "batch.instances > 1 averages whole instances at a round's end, which a fragment sync "
          "does not have: use batch.instances=1 or outer.fragments=1");
  require(c.interval.max_rounds == 0, "outer.fragments",
          "interval.max_rounds counts rounds, which fragments split into several syncs: use "
          "interval.max_rounds=0 or outer.fragments=1");
}

void validate_target_utilisation(const Config& c) {
  const double u = c.interval.target_utilisation;
  require(u >= 0.0 && u < 1.0, "interval.target_utilisation",
          fmt::format("must be in [0, 1) (0: off), got {}", u));
  require(u == 0.0 || c.outer.method != "ddp", "interval.target_utilisation",
          "ddp has no interval to raise: use outer.method=diloco or target_utilisation=0");
}

void validate_wan(const WanConfig& w) {
  require_positive(w.bandwidth_gbps, "wan.bandwidth_gbps");
  require_non_negative(w.latency_ms, "wan.latency_ms");
  require_one_of(w.mode, {"account", "sleep", "real"}, "wan.mode");
}

// The elastic mode: its keys, their nesting, and what it does not carry yet.
void validate_elastic(const Config& c) {
  const ElasticConfig& e = c.elastic;
  if (!e.enabled()) return;
  require(e.dcs >= 1, "elastic.dcs", "set how many dc ids the run has (e.g. elastic.dcs=4)");
  require(e.dc >= 0 && e.dc < e.dcs, "elastic.dc",
          fmt::format("this launch's dc id must be in 0..{} (elastic.dcs {}), got {}: launch "
                      "with --set elastic.dc=K",
                      e.dcs - 1, e.dcs, e.dc));
  require(e.min_dcs >= 1 && e.min_dcs <= e.dcs, "elastic.min_dcs",
          fmt::format("must be in 1..elastic.dcs ({}), got {}", e.dcs, e.min_dcs));
  require(!e.key_file.empty(), "elastic.key_file",
          "the elastic mode needs the key shared with the lighthouse (autoloco-lighthouse "
          "--make-key FILE, then copy FILE to every site)");
  require(e.port >= 0 && e.port <= 65535, "elastic.port",
          fmt::format("must be a port number (0: any free one), got {}", e.port));
  require_positive(e.heartbeat_s, "elastic.heartbeat_s");
  // Nested timeouts: a dead peer is found by its heartbeat before an exchange gives up on it,
  // and an exchange gives up before a dc gives up on the lighthouse.
  require(e.heartbeat_timeout_s > e.heartbeat_s, "elastic.heartbeat_timeout_s",
          fmt::format("must exceed elastic.heartbeat_s ({}), got {}", e.heartbeat_s,
                      e.heartbeat_timeout_s));
  require(e.collective_timeout_s > e.heartbeat_timeout_s, "elastic.collective_timeout_s",
          fmt::format("must exceed elastic.heartbeat_timeout_s ({}), got {}", e.heartbeat_timeout_s,
                      e.collective_timeout_s));
  require(e.quorum_timeout_s > e.collective_timeout_s, "elastic.quorum_timeout_s",
          fmt::format("must exceed elastic.collective_timeout_s ({}), got {}",
                      e.collective_timeout_s, e.quorum_timeout_s));
  require(e.round_deadline_s > 0 && e.round_deadline_s < e.quorum_timeout_s,
          "elastic.round_deadline_s",
          fmt::format("must be in (0, elastic.quorum_timeout_s = {}), got {}", e.quorum_timeout_s,
                      e.round_deadline_s));
  require(c.outer.method != "ddp", "outer.method",
          "ddp synchronizes every step across dcs, which the elastic mode does not carry: use "
          "diloco, or unset elastic.lighthouse");
  // Not carried across a membership change yet: refused rather than silently wrong.
  const auto not_yet = [](bool ok, const std::string& key, const std::string& what) {
    require(ok, key,
            what +
                " is not carried across a change of the quorum yet (docs/elastic.md): unset "
                "elastic.lighthouse to use it");
  };
  not_yet(c.outer.overlap_steps == 0, "outer.overlap_steps", "an overlapped sync");
  not_yet(c.outer.fragments == 1, "outer.fragments", "a fragmented sync");
  not_yet(c.batch.controller == "fixed", "batch.controller", "an adaptive batch");
  not_yet(c.batch.instances == 1, "batch.instances", "more than one instance per dc");
  not_yet(c.topology.shard == "none" || c.topology.ranks_per_dc == 1, "topology.shard",
          "a sharded outer state");
}

void validate_ckpt(const CkptConfig& k) {
  require_non_negative(k.every_steps, "ckpt.every_steps");
  require_non_negative(k.every_minutes, "ckpt.every_minutes");
  require_positive(k.keep_last, "ckpt.keep_last");
  require_non_negative(k.timeout_s, "ckpt.timeout_s");
}

// topology.shard splits a dc's inner and outer state; ddp has no outer state and sends the
// whole gradient across dcs at every step, so it keeps the unsharded path.
void validate_shard(const Config& c) {
  require_one_of(c.topology.shard, {"none", "optimizer", "gradients", "full"}, "topology.shard");
  require(c.topology.shard == "none" || c.outer.method != "ddp", "topology.shard",
          "topology.shard " + c.topology.shard +
              " shards the outer state of a low-communication method; outer.method ddp "
              "all-reduces whole gradients across dcs: use topology.shard none with ddp");
  // A member's shard cuts matrices, and Newton-Schulz needs each one whole.
  require(c.topology.shard == "none" || c.inner.optimizer != "muon", "topology.shard",
          "topology.shard " + c.topology.shard +
              " splits the blocks' matrices across a dc's members, and inner.optimizer muon "
              "orthogonalises each matrix whole: use topology.shard none with muon (or adamw)");
}

}  // namespace

namespace {

// "STEP:VALUE" entries with increasing steps, as (step, value) pairs; `key` names them in errors.
std::vector<std::pair<int64_t, double>> step_entries(const std::vector<std::string>& entries,
                                                     const std::string& key,
                                                     const std::string& example) {
  std::vector<std::pair<int64_t, double>> out;
  for (const std::string& entry : entries) {
    int64_t step = 0;
    double value = 0.0;
    const auto colon = entry.find(':');
    bool ok = colon != std::string::npos;
    try {
      size_t used = 0;
      ok = ok && (step = std::stoll(entry.substr(0, colon), &used), used == colon);
      const std::string text = ok ? entry.substr(colon + 1) : "";
      ok = ok && (value = std::stod(text, &used), used == text.size());
    } catch (const std::exception&) {
      ok = false;
    }
    require(ok, key, fmt::format("entry '{}' is not {}", entry, example));
    require(step >= 0, key, fmt::format("entry '{}' needs STEP >= 0", entry));
    if (!out.empty()) {
      require(step > out.back().first, key,
              fmt::format("steps must increase: '{}' follows step {}", entry, out.back().first));
    }
    out.emplace_back(step, value);
  }
  return out;
}

}  // namespace

std::vector<MomentumChange> parse_momentum_schedule(const OuterConfig& outer) {
  std::vector<MomentumChange> changes;
  for (const auto& [step, mu] : step_entries(outer.momentum_schedule, "outer.momentum_schedule",
                                             "STEP:MU (for example \"400:0.9\")")) {
    require(mu >= 0.0 && mu < 1.0, "outer.momentum_schedule",
            fmt::format("entry {}:{} needs MU in [0, 1)", step, mu));
    changes.push_back({step, mu});
  }
  return changes;
}

std::vector<IntervalChange> parse_interval_schedule(const IntervalConfig& interval) {
  std::vector<IntervalChange> changes;
  for (const auto& [step, h] :
       step_entries(interval.schedule, "interval.schedule", "STEP:H (for example \"250:10\")")) {
    require(h >= 1 && h == std::floor(h), "interval.schedule",
            fmt::format("entry {}:{} needs a whole H >= 1", step, h));
    changes.push_back({step, static_cast<int64_t>(h)});
  }
  return changes;
}

void validate(const Config& c) {
  validate_run(c.run);
  require_positive(c.topology.ranks_per_dc, "topology.ranks_per_dc");
  validate_shard(c);
  validate_model(c.model);
  validate_data(c.data);
  validate_eval(c.eval);
  validate_inner(c.inner);
  validate_outer(c.outer);
  validate_interval(c.interval);
  validate_batch(c.batch, c);
  validate_fragments(c);
  validate_overlap(c);
  validate_target_utilisation(c);
  validate_wan(c.wan);
  require_non_negative(c.comm.timeout_s, "comm.timeout_s");
  validate_ckpt(c.ckpt);
  validate_elastic(c);
}

void validate_world(const Config& c, int world_size) {
  require(!c.elastic.enabled() || world_size == c.topology.ranks_per_dc, "topology.ranks_per_dc",
          fmt::format("with elastic.lighthouse each launch is one dc: launch ranks_per_dc ({}) "
                      "ranks, not {}",
                      c.topology.ranks_per_dc, world_size));
  require(world_size % c.topology.ranks_per_dc == 0, "topology.ranks_per_dc",
          fmt::format("the world size {} is not a multiple of {}: launch a multiple of "
                      "ranks_per_dc ranks or change the key",
                      world_size, c.topology.ranks_per_dc));
  // Two gradient samples per dc at least: a dc of one rank splits its batch in two halves.
  require(c.batch.controller != "adloco" || c.topology.ranks_per_dc > 1 ||
              c.data.batch_size * c.data.grad_accum >= 2,
          "data.batch_size",
          "batch.controller adloco with one rank per dc measures the gradient noise between two "
          "halves of the batch: give data.batch_size x data.grad_accum >= 2");
}

}  // namespace autoloco
