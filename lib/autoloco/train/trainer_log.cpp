// The Trainer's reports: the start log, the metrics and syncs lines, evaluations and the
// summary (docs/run-directory.md lists every field).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "autoloco/metrics/progress.hpp"
#include "autoloco/model/hf_names.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/blas.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/slurm_job.hpp"

namespace autoloco {

namespace {

std::string describe_inner(const InnerOptimizer& optimizer, const InnerConfig& inner) {
  const auto kernel = [](const AdamWOptions& o) { return o.fused ? "fused" : "flat"; };
  if (const auto* adamw = dynamic_cast<const FlatAdamW*>(&optimizer))
    return fmt::format("adamw ({} kernel)", kernel(adamw->options()));
  if (const auto* muon = dynamic_cast<const FlatMuon*>(&optimizer)) {
    const MuonOptions& o = muon->options();
    return fmt::format(
        "muon on {} block matrices (momentum {}{}, {} Newton-Schulz steps, lr x {:g}), adamw ({} "
        "kernel) on the rest",
        muon->matrices().size(), o.momentum, o.nesterov ? " nesterov" : "", o.ns_steps, o.lr_ratio,
        kernel(o.adamw));
  }
  return inner.optimizer;
}

}  // namespace

// The architecture, its size and what its weights cost each rank: the line a user checks a
// preset and its overrides against.
void Trainer::log_model() const {
  const ModelConfig& m = config_.model;
  std::string shape = fmt::format("{} layers, {} heads", m.n_layer, m.n_head);
  if (m.arch == "llama") {
    shape += fmt::format(" ({} kv{}), ffn {}, rope_theta {}", kv_heads(m),
                         m.head_dim > 0 ? fmt::format(", {} wide", m.head_dim) : std::string(),
                         llama_ffn_hidden(m), m.rope_theta);
    if (m.rope_scaling == "linear") shape += fmt::format(" linear x{}", m.rope_factor);
    if (m.rope_scaling == "llama3") {
      shape += fmt::format(" llama3 x{} ({}..{} of {})", m.rope_factor, m.rope_low_freq_factor,
                           m.rope_high_freq_factor, m.rope_original_seq_len);
    }
    if (m.attention_bias) shape += ", q/k/v biases";
    if (m.qk_norm) shape += ", q/k norms";
    if (hf_model_type(m) != "llama") shape += fmt::format(" ({})", hf_model_type(m));
  }
  const torch::Tensor& values = instances_[0].params->values();
  const double bytes = static_cast<double>(values.numel() * values.element_size()) *
                       static_cast<double>(instances_.size());
  log::info(
      "model: {}{}, {}, d_model {}, seq_len {}, vocab {}, {} head | {} params | {} "
      "FLOPs/token | {}B of weights per rank ({}B with their gradients)",
      m.arch, m.preset.empty() ? "" : fmt::format(" (preset {})", m.preset), shape, m.d_model,
      m.seq_len, m.vocab_size, m.tie_embeddings ? "tied" : "untied",
      format_si(static_cast<double>(parameter_count(*instances_[0].model))),
      format_si(flops_per_token(m)), format_si(bytes), format_si(2.0 * bytes));
  if (!m.described.empty()) {
    std::vector<std::string> given;
    const auto all = config_values(config_);
    // Keys that only say something beside others: the scaling's parameters without a scaling,
    // the width rule's beside an explicit width.
    const auto moot = [&](const std::string& key) {
      return (m.rope_scaling == "none" && key.rfind("model.rope_", 0) == 0 &&
              key != "model.rope_theta" && key != "model.rope_scaling") ||
             (m.ffn_hidden > 0 &&
              (key == "model.multiple_of" || key == "model.ffn_dim_multiplier"));
    };
    for (const std::string& key : m.described) {
      if (moot(key)) continue;
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const auto& kv) { return kv.first == key; });
      if (it != all.end()) given.push_back(fmt::format("{}={}", key.substr(6), it->second));
    }
    log::info("model keys from {}/config.json (the config leaves them unset): {}", m.init_from,
              fmt::join(given, " "));
  }
}

void Trainer::log_start() const {
  if (!options_.print_progress) return;
  log::info(
      "autoloco {} | LibTorch {} | {} ranks = {} dc x {} members | device {} | {} threads, BLAS "
      "{}",
      AUTOLOCO_VERSION, TORCH_VERSION, topo_.world_size, topo_.num_dcs, topo_.ranks_per_dc,
      device_.str(), torch::get_num_threads(), blas_library());
  if (const auto job = slurm_job_from_env()) log::info("{}", job->describe());
  for (const DcPlacement& p : placement_) {
    log::info("{}", p.describe());
    if (p.spans_hosts()) {
      log::warn(
          "dc {} spans the hosts {}: its intra-dc all-reduce of every inner step crosses the "
          "network between them; put each dc's ranks on one host or on hosts joined by a fast "
          "network (docs/multi-host.md)",
          p.dc, fmt::join(p.hosts, ","));
    }
  }
  if (config_.run.threads == 0 && world_hosts(placement_).size() > 1) {
    log::info(
        "threads per rank follow each host's cores (run.threads 0): set run.threads where runs "
        "on different placements must compare bitwise (docs/multi-host.md)");
  }
  log_model();
  log_memory();
  log::info("data: {} train tokens in {} shards, {} val tokens | {} tokens/step",
            format_si(static_cast<double>(data_->train_tokens())), data_->train_shards(),
            format_si(static_cast<double>(data_->val_tokens())), tokens_per_step());
  for (size_t i = 0; data_->mixed() && i < data_->size(); ++i) {
    const MixtureSource& m = (*data_)[i];
    log::info("  source {}: weight {:.4f}, {} train tokens in {} shards, {} val tokens", m.name,
              m.weight, format_si(static_cast<double>(m.train->num_tokens())),
              m.train->num_shards(), format_si(static_cast<double>(m.val->num_tokens())));
  }
  const auto& o = config_.outer;
  const WireCodec codec = wire_codec(o);
  if (outer_method()) {
    log::info(
        "method {}: outer lr {} momentum {}{}{}, wire {}, state on {} | intra-dc {}", o.method,
        o.method == "local_sgd" ? 1.0 : o.lr, o.method == "local_sgd" ? 0.0 : o.momentum,
        o.momentum_schedule.empty() ? "" : " (scheduled)",
        o.correction == "none" ? "" : fmt::format(", correction {}", o.correction),
        codec.describe(), sync_->outer().at(0).anchor().device().str(), grad_comm_->backend());
    if (o.error_feedback) {
      int64_t residual = 0;
      for (size_t p = 0; p < sync_->outer().size(); ++p)
        residual += sync_->outer().at(p).residual().numel();
      log::info(
          "error feedback: {}B of residual per rank ({}B per dc: one fp32 value per "
          "parameter)",
          format_si(4.0 * static_cast<double>(residual)),
          format_si(4.0 * static_cast<double>(residual * topo_.ranks_per_dc)));
    }
    log::info("interval {}", controller_->describe());
    log::info("{}", sync_->describe());
    if (sync_->outer().size() > 1) {
      for (const std::string& line : sync_->outer().describe())
        log::info("  {}", line);
    }
  } else {
    log::info("method ddp: gradients all-reduced over the world every step, wire {} | intra-dc {}",
              codec.describe(), grad_comm_->backend());
  }
  log::info("precision {} | tf32 {} | inner {}", bf16_ ? "bf16 autocast over fp32 weights" : "fp32",
            device_.is_cuda() && config_.run.tf32 ? "on" : "off",
            describe_inner(*instances_[0].optimizer, config_.inner));
  log::info("batch {}{}", instances_[0].batch->describe(),
            instances_.size() > 1 ? fmt::format(" | {} instances per rank, merging every {} rounds",
                                                instances_.size(), config_.batch.merge_every)
                                  : "");
  if (topo_.num_dcs > 1) {
    const int64_t n = instances_[0].params->numel();
    log::info("inter-dc link: {} Gbit/s, {} ms ({}): {}B per dc per sync, {:.3f} s per sync{}",
              config_.wan.bandwidth_gbps, config_.wan.latency_ms, config_.wan.mode,
              format_si(static_cast<double>(sync_message_bytes(n))), sync_seconds(n),
              describe_fragment_syncs());
    if (config_.wan.mode == "real") {
      log::info(
          "wan.mode real: each sync's link time is measured (link_s) and the model's figure above "
          "is reported beside it (model_link_s); interval controllers plan with the model's");
    }
  }
  log::info("{}", config_.comm.timeout_s > 0
                      ? fmt::format("watchdog: a collective that waits {:g} s ends the job "
                                    "(comm.timeout_s)",
                                    config_.comm.timeout_s)
                      : std::string("watchdog: off (comm.timeout_s 0): a lost rank hangs the job"));
  const FaultPlan& faults = FaultPlan::from_env();
  if (!faults.empty() && topo_.world_rank == 0) {
    log::warn("AUTOLOCO_FAULT={}: faults are injected (test-only, docs/faults.md)", faults.text());
  }
}

std::vector<JsonObject> Trainer::placement_json() const {
  std::vector<JsonObject> out;
  for (const DcPlacement& p : placement_)
    out.push_back(p.json());
  return out;
}

int64_t Trainer::sync_message_bytes(int64_t numel) const {
  const size_t shard =
      HierarchicalAllreduce::shard_size(static_cast<size_t>(numel), topo_.ranks_per_dc);
  return static_cast<int64_t>(
             WanLink::message_bytes(shard, wire_codec(config_.outer), sync_scalars())) *
         topo_.ranks_per_dc;
}

double Trainer::sync_seconds(int64_t numel) const {
  const size_t shard =
      HierarchicalAllreduce::shard_size(static_cast<size_t>(numel), topo_.ranks_per_dc);
  return wan_->seconds(shard, wire_codec(config_.outer), sync_scalars());
}

size_t Trainer::sync_scalars() const {
  return outer_method() ? OuterSync::message_scalars(topo_.num_dcs) : 0;
}

std::string Trainer::describe_fragment_syncs() const {
  if (!sync_ || sync_->outer().size() < 2) return "";
  // The largest fragment's sync: what the link must carry at a time.
  int64_t largest = 0;
  for (size_t p = 0; p < sync_->outer().size(); ++p)
    largest = std::max(largest, sync_->outer().plan()[p].numel);
  return fmt::format(" of the whole model; {} fragment syncs of at most {}B per dc, {:.3f} s",
                     sync_->outer().size(),
                     format_si(static_cast<double>(sync_message_bytes(largest))),
                     sync_seconds(largest));
}

void Trainer::check_timeout_covers_sync() const {
  const double timeout = config_.comm.timeout_s;
  // In account mode the link time is only counted: nobody waits for it.
  if (timeout <= 0 || topo_.num_dcs < 2 || config_.wan.mode == "account") return;
  // One sync at a time crosses the link: the whole model, or the largest fragment.
  int64_t numel = instances_[0].params->numel();
  if (sync_ && sync_->outer().size() > 1) {
    numel = 0;
    for (size_t p = 0; p < sync_->outer().size(); ++p)
      numel = std::max(numel, sync_->outer().plan()[p].numel);
  }
  const double link_s = sync_seconds(numel);
  if (timeout >= link_s) return;
  throw ConfigError(fmt::format(
      "config key comm.timeout_s = {:g} s is shorter than the {:.1f} s that one sync of {}B per "
      "dc takes on the modelled link (wan.bandwidth_gbps = {:g}, wan.latency_ms = {:g}, "
      "outer.wire_dtype = {}, {} dcs): every sync would end the job. Give comm.timeout_s of at "
      "least {:.0f} (--set comm.timeout_s=N), or 0 for no watchdog",
      timeout, link_s, format_si(static_cast<double>(sync_message_bytes(numel))),
      config_.wan.bandwidth_gbps, config_.wan.latency_ms, config_.outer.wire_dtype, topo_.num_dcs,
      std::ceil(2 * link_s)));
}

void Trainer::log_step(const StepResult& r, double interval_loss, double interval_s) {
  const double tokens_per_s =
      static_cast<double>(tokens_ - loop_.tokens_at_log) / std::max(interval_s, 1e-9);
  loop_.tokens_at_log = tokens_;
  if (options_.print_progress) {
    ProgressState p{progress_step(), config_.run.steps, interval_loss, r.lr,
                    tokens_per_s,    wall_.seconds()};
    p.dcs = topo_.num_dcs;
    p.rounds = rounds_;
    p.inter_dc_bytes = inter_dc_bytes();
    log::info("{}", format_progress(p));
  }
  if (data_->mixed()) tokens_by_source_ = count_tokens_by_source();
  if (!run_dir_) return;
  JsonObject line;
  if (data_->mixed()) line.add("tokens_by_source", by_source(tokens_by_source_));
  run_dir_->append_metrics(line.add("step", step_)
                               .add("loss", interval_loss)
                               .add("lr", r.lr)
                               .add("grad_norm", r.grad_norm)
                               .add("tokens", tokens_)
                               .add("batch", dc_batch_sequences())
                               .add("tokens_per_s", tokens_per_s)
                               .add("rounds", rounds_)
                               .add("inter_dc_bytes", inter_dc_bytes())
                               .add("sim_time_s", sim_seconds())
                               .add("elapsed_s", wall_.seconds()));
}

void Trainer::log_round(const RoundStats& s, const std::vector<int64_t>& batches) {
  if (!run_dir_) return;
  std::vector<int64_t> next_batch;
  std::vector<double> demand;
  for (size_t d = 0; d < s.next_batch.size(); ++d) {
    next_batch.push_back(std::llround(s.next_batch[d]) * topo_.ranks_per_dc);
    demand.push_back(s.demand[d] * static_cast<double>(topo_.ranks_per_dc));
  }
  const OuterOptimizer& outer = sync_->outer().last_optimizer();
  JsonObject line;
  line.add("round", s.round);
  if (config_.outer.fragments > 1) line.add("fragment", s.fragment);
  // An overlapped sync lands some steps after it started.
  line.add("step", schedule_.last_synced()[static_cast<size_t>(s.fragment)])
      .add("H", s.H)
      .add("loss", s.loss)
      .add("lr_sum", s.lr_sum)
      .add("tokens", s.tokens)
      .add("progress_step", s.step)
      .add("batch", batches)
      .add("next_batch", next_batch)
      .add("batch_demand", demand)
      .add("inter_dc_bytes", s.dc_bytes * (elastic_ ? s.dcs : topo_.num_dcs))
      .add("sent_bytes", s.sent_bytes)
      .add("link_s", s.clock_link_s())
      .add("model_link_s", s.link_s)
      .add("delta_norm", std::sqrt(s.avg_delta_sq))
      .add("mean_delta_norm", s.mean_delta_norm)
      .add("rho", s.rho)
      .add("q", s.q())
      .add("round_s", s.round_s)
      .add("outer_lr", outer.last_lr())
      .add("outer_momentum", outer.last_momentum())
      .add("next_H", H_);
  // The controller's reasons (interval.target_utilisation) on the line of the sync that set H.
  if (s.fragment == 0) {
    for (const auto& [name, value] : controller_->decision())
      line.add(name, value);
  }
  if (elastic_) {
    std::vector<int64_t> members(elastic_last_.members.begin(), elastic_last_.members.end());
    line.add("dc", int64_t{dc_id()})
        .add("quorum", elastic_last_.quorum)
        .add("quorum_dcs", members)
        .add("attempts", int64_t{elastic_attempts_})
        .add("boundary_s", elastic_boundary_s_)
        .add("state_hash", elastic_hash_)
        // Wall-clock time, comparable across the dcs' hosts: how soon a joiner took part
        // (scripts/elastic_drill.py).
        .add("committed_unix_s",
             std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                 .count());
  }
  run_dir_->append_sync(line.add("landed_step", step_)
                            .add("sim_time_s", sim_seconds())
                            .add("elapsed_s", wall_.seconds()));
}

void Trainer::log_eval(double eval_loss) {
  const double bpb = eval_bpb(eval_loss);
  if (options_.print_progress) {
    log::info("eval at step {}: loss {:.4f} |{} perplexity {:.3f}", step_, eval_loss,
              std::isnan(bpb) ? std::string() : fmt::format(" bpb {:.4f} |", bpb),
              std::exp(eval_loss));
  }
  if (options_.print_progress && data_->mixed()) {
    std::vector<std::string> parts;
    for (size_t s = 0; s < eval_by_source_.size(); ++s)
      parts.push_back(fmt::format("{} {:.4f}", (*data_)[s].name, eval_by_source_[s]));
    log::info("  eval loss by source: {}", fmt::join(parts, ", "));
  }
  if (options_.print_progress && !task_results_.empty()) {
    log::info("  tasks: {} ({:.1f} s; the loss {:.1f} s)", tasks_progress(), tasks_s_, eval_s_);
  }
  if (!run_dir_) return;
  JsonObject line = JsonObject().add("step", step_).add("eval_loss", eval_loss);
  if (!std::isnan(bpb)) line.add("eval_bpb", bpb);
  if (data_->mixed()) line.add("eval_by_source", eval_by_source_json());
  if (!task_results_.empty()) line.add("tasks", tasks_json()).add("tasks_s", tasks_s_);
  run_dir_->append_metrics(line.add("eval_ppl", std::exp(eval_loss))
                               .add("eval_s", eval_s_)
                               .add("rounds", rounds_)
                               .add("inter_dc_bytes", inter_dc_bytes())
                               .add("sim_time_s", sim_seconds())
                               .add("elapsed_s", wall_.seconds()));
}

void Trainer::write_summary(const TrainSummary& s) {
  if (options_.print_progress) {
    log::info(
        "done: {} steps, {} tokens, {} rounds, {}B inter-dc, final eval loss {:.4f}{}, {} wall, "
        "{} simulated ({:.1f}% compute){}",
        s.steps, format_si(static_cast<double>(s.tokens)), s.rounds,
        format_si(static_cast<double>(s.inter_dc_bytes)), s.final_eval_loss,
        std::isnan(s.final_eval_bpb) ? std::string()
                                     : fmt::format(" ({:.4f} bpb)", s.final_eval_bpb),
        format_duration(s.wall_s), format_duration(s.sim_time_s), 100.0 * s.compute_utilisation,
        s.stopped_by_signal ? " (stopped by signal)" : "");
  }
  if (!run_dir_) return;
  const auto& wan = config_.wan;
  const auto& prepared = (*data_)[0].val->prepared();
  JsonObject summary =
      JsonObject()
          .add("steps", s.steps)
          .add("tokens", s.tokens)
          .add("rounds", s.rounds)
          .add("inter_dc_bytes", s.inter_dc_bytes)
          .add("sent_bytes", s.sent_bytes)
          .add("peak_sync_bytes", s.peak_sync_bytes)
          .add("final_train_loss", s.final_train_loss)
          .add("final_eval_loss", s.final_eval_loss)
          .add("final_eval_bpb", s.final_eval_bpb)
          .add("wall_s", s.wall_s)
          .add("link_s", s.link_s)
          .add("model_link_s", s.model_link_s)
          .add("exposed_link_s", s.exposed_link_s)
          .add("sync_wait_s", s.sync_wait_s)
          .add("sim_time_s", s.sim_time_s)
          .add("compute_utilisation", s.compute_utilisation)
          .add("compute_utilisation_wall", s.compute_utilisation_wall)
          .add("overlap_steps", config_.outer.overlap_steps)
          .add("overlap_alpha", config_.outer.overlap_alpha)
          .add("fragments", config_.outer.fragments)
          .add("target_utilisation", config_.interval.target_utilisation)
          .add("tokenizer", prepared ? prepared->tokenizer : std::string("unknown"))
          .add("vocab_size", config_.model.vocab_size)
          .add("val_bytes_per_token", data_->val_bytes_per_token())
          .add("method", config_.outer.method)
          .add("controller", outer_method() ? controller_->name() : std::string("none"))
          .add("correction", config_.outer.correction)
          .add("h_per_round", s.h_per_round)
          .add("batch_controller", instances_[0].batch->name())
          .add("instances", static_cast<int64_t>(instances_.size()))
          .add("final_batch", s.final_batch)
          .add("stopped_by_signal", s.stopped_by_signal)
          .add("world_size", int64_t{topo_.world_size})
          .add("num_dcs", int64_t{topo_.num_dcs})
          .add("ranks_per_dc", int64_t{topo_.ranks_per_dc})
          .add("placement", placement_json())
          .add("wan", JsonObject()
                          .add("bandwidth_gbps", wan.bandwidth_gbps)
                          .add("latency_ms", wan.latency_ms)
                          .add("mode", wan.mode))
          .add("parameters", parameter_count(*model()))
          .add("flops_per_token", flops_per_token(config_.model))
          .add("tokens_per_s", static_cast<double>(s.tokens) / s.wall_s)
          .add("memory_per_rank", memory_json(s));
  if (data_->mixed()) summary.add("sources", sources_json());
  if (!task_results_.empty()) summary.add("tasks", tasks_json());
  if (elastic_) {
    summary.add("state_hash", elastic_hash_)
        .add("elastic", JsonObject()
                            .add("dc", int64_t{dc_id()})
                            .add("dcs", config_.elastic.dcs)
                            .add("lighthouse", config_.elastic.lighthouse)
                            .add("heals", elastic_heals_));
  }
  // The resume of this segment continued a checkpoint of another number of dcs.
  if (topology_change_.changed()) summary.add("topology_change", topology_change_.json());
  // The job segment that wrote it (segments.jsonl has every segment's start).
  if (const auto job = slurm_job_from_env()) summary.add("slurm", job->json());
  run_dir_->write_summary(summary);
  log::info("results: {}/summary.json, {}/metrics.jsonl", run_dir_->path(), run_dir_->path());
}

}  // namespace autoloco
