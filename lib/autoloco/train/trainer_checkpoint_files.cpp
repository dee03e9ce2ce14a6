// The files of a Trainer's checkpoint (docs/checkpoints.md, Layout), by what they save: the
// global file (counters, controllers, the schedule; the outer state when it is whole), a dc's
// file (its replicas, AdamW and batch state; the moments when they are whole) and a rank's own
// (data cursor, RNG, accumulators, clocks; its shards of the moments and, in dc 0, of the outer
// state when they are sharded; its error-feedback residuals). The outer state's part is
// outer_checkpoint.cpp; trainer_checkpoint.cpp runs the write, trainer_load.cpp reads them.
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <filesystem>
#include <mutex>
#include <optional>

#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/train/inner_shard.hpp"
#include "autoloco/train/outer_checkpoint.hpp"
#include "autoloco/train/trainer.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

// A member's shard (its first span.count() values) as a piece of the vector of span.numel.
void write_shard(H5Writer& w, const std::string& name, const torch::Tensor& shard,
                 const ShardSpan& span) {
  const torch::Tensor host = host_flat(shard);
  write_flat_piece(w, name, host.data_ptr<float>(), {FlatRange{span.begin(), span.count()}});
}

ManifestFile finish(H5Writer& w, const std::string& name) {
  ManifestFile f;
  f.name = name;
  f.datasets = w.close();
  f.size = static_cast<int64_t>(fs::file_size(w.path()));
  return f;
}

// An overlapped sync that has not landed (sync_pipeline.hpp): its all-reduced scalars are the
// same on every rank (the global file; its sum there too when unsharded); when it was handed
// over is the rank's own.
void write_pending_global(H5Writer& w, SyncPipeline& sync) {
  const std::optional<PendingSync> p = sync.settle();
  w.write("sync/pending", int64_t{p ? 1 : 0});
  if (!p) return;
  w.write("sync/pending_due_step", p->due_step);
  w.write("sync/pending_round",
          std::vector<int64_t>{p->round.in.round, p->round.in.step, p->round.in.H,
                               p->round.dc_bytes, p->round.in.fragment, p->round.sent_bytes});
  w.write("sync/pending_scalars", p->round.scalars);
  w.write("sync/pending_link_s", p->round.link_s);
  if (!sync.outer().sharded()) write_pending_sum(w, sync.outer(), p->round.in.fragment);
}

void write_sync_rank(H5Writer& w, SyncPipeline& sync) {
  const std::optional<PendingSync> p = sync.settle();
  const SyncClock c = sync.clock();
  w.write("sync/wait_s", c.wait_s);
  w.write("sync/exposed_link_s", c.exposed_link_s);
  if (!p) return;
  w.write("sync/pending_handed_at", p->handed_at);
  w.write("sync/pending_wall_s", p->round.wall_s);
}

}  // namespace

ManifestFile Trainer::write_global_file(const std::string& dir, const std::string& reason) {
  H5Writer w(dir + "/" + kGlobalFile);
  w.write("format_version", kCheckpointFormat);
  w.write("autoloco_version", std::string(AUTOLOCO_VERSION));
  w.write("libtorch_version", std::string(TORCH_VERSION));
  w.write("hdf5_version", hdf5_version());
  w.write("reason", reason);
  w.write("config", to_yaml(config_));
  w.write("topology/world_size", int64_t{topo_.world_size});
  w.write("topology/num_dcs", int64_t{topo_.num_dcs});
  w.write("topology/ranks_per_dc", int64_t{topo_.ranks_per_dc});
  w.write("model/parameters", param_table(params()));
  w.write("model/numel", params().numel());
  w.write("counters/step", step_);
  w.write("counters/rounds", rounds_);
  // Fragment 0's period is the round (its keys are those of checkpoints before fragments).
  w.write("counters/round_steps", periods_.empty() ? int64_t{0} : periods_[0].steps);
  w.write("counters/H", H_);
  w.write("counters/h_per_round", h_per_round_);
  w.write("counters/round_lr_sum", periods_.empty() ? 0.0 : periods_[0].lr_sum);
  w.write("counters/peak_sync_dc_bytes", peak_sync_dc_bytes_);
  if (periods_.size() > 1) write_fragment_schedule(w);
  w.write("counters/tokens", tokens_);
  w.write("counters/progress_base_step", progress_base_step_);
  w.write("counters/progress_base_tokens", progress_base_tokens_);
  w.write("counters/tokens_at_log", loop_.tokens_at_log);
  w.write("batch/controller", instances_[0].batch->name());
  w.write("batch/dc_batches", dc_batches_);
  w.write("batch/last_round_batches", last_round_batches_);
  w.write("loop/eval_due", int64_t{loop_.eval_due});
  w.write("loop/final_train_loss", loop_.final_train_loss);
  w.write("loop/final_eval_loss", loop_.final_eval_loss);
  // On the disk before the checkpoint says they are: a node crash cannot leave them shorter.
  const LogSizes logs = run_dir_ ? run_dir_->durable_sizes() : LogSizes{};
  w.write("run/metrics_bytes", logs.metrics);
  w.write("run/syncs_bytes", logs.syncs);
  if (sync_) {
    if (!sync_->outer().sharded()) write_outer_whole(w, sync_->outer());
    write_pending_global(w, *sync_);
    w.write("controller/name", controller_->name());
    w.write("controller/state", controller_->state());
  }
  return finish(w, kGlobalFile);
}

ManifestFile Trainer::write_dc_file(const std::string& dir) {
  const std::string name = dc_file(topo_.dc);
  H5Writer w(dir + "/" + name);
  std::vector<int64_t> active;
  for (const ModelInstance& inst : instances_) {
    const std::string at = instance_prefix(inst.id);
    // Fully sharded, each member writes its shard of the replica (write_rank_shards).
    if (inst.params->keeps_all()) write_tensor(w, at + "replica/values", inst.params->values());
    if (auto* adamw = dynamic_cast<MomentOptimizer*>(inst.optimizer.get())) {
      w.write(at + "adamw/step", adamw->step_count());
      // Sharded, each member writes its shard of the moments (write_rank_file).
      if (inst.shard->span().whole()) {
        write_tensor(w, at + "adamw/exp_avg", adamw->exp_avg());
        write_tensor(w, at + "adamw/exp_avg_sq", adamw->exp_avg_sq());
      }
    }
    w.write(at + "batch/state", inst.batch->state());
    active.push_back(inst.id);
  }
  w.write("instances/active", active);
  return finish(w, name);
}

void Trainer::write_rank_shards(H5Writer& w) {
  for (const ModelInstance& inst : instances_) {
    const ShardSpan& span = inst.shard->span();
    const std::string at = instance_prefix(inst.id);
    if (!inst.params->keeps_all()) {
      write_shard(w, at + "replica/values", inst.params->values(), span);
    }
    auto* adamw = dynamic_cast<MomentOptimizer*>(inst.optimizer.get());
    if (!adamw || span.whole()) continue;
    write_shard(w, at + "adamw/exp_avg", adamw->exp_avg(), span);
    write_shard(w, at + "adamw/exp_avg_sq", adamw->exp_avg_sq(), span);
  }
  if (!sync_) return;
  FragmentedOuter& outer = sync_->outer();
  // The outer state is the same in every dc: dc 0's members write it.
  if (outer.sharded() && topo_.dc == 0) {
    write_outer_pieces(w, outer);
    if (const std::optional<PendingSync> p = sync_->settle())
      write_pending_sum(w, outer, p->round.in.fragment);
  }
  if (config_.outer.error_feedback)
    write_residuals(w, outer, reducer_->members(), reducer_->member());
}

ManifestFile Trainer::write_rank_file(const std::string& dir) {
  const std::string name = rank_file(topo_.world_rank);
  H5Writer w(dir + "/" + name);
  w.write("rank/dc", int64_t{topo_.dc});
  w.write("rank/member", int64_t{topo_.member});
  for (const ModelInstance& inst : instances_) {
    const std::string at = instance_prefix(inst.id);
    w.write(at + "data/cursor", static_cast<int64_t>(inst.stream->cursor().samples));
    const auto noise = inst.round_noise.to_array();
    w.write(at + "round/noise_sums", std::vector<double>(noise.begin(), noise.end()));
  }
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    const torch::Tensor rng = gen.get_state().contiguous();
    w.write("rng/cpu", rng.data_ptr<uint8_t>(), {rng.numel()});
  }
  w.write("loop/loss_sum", loop_.loss_sum);
  w.write("loop/loss_count", loop_.loss_count);
  w.write("round/loss_sum", periods_.empty() ? 0.0 : periods_[0].loss_sum);
  w.write("round/start_compute_s", periods_.empty() ? 0.0 : periods_[0].start_compute_s);
  if (periods_.size() > 1) {
    std::vector<double> loss, start;
    for (const SyncPeriod& p : periods_) {
      loss.push_back(p.loss_sum);
      start.push_back(p.start_compute_s);
    }
    w.write("fragments/loss_sum", loss);
    w.write("fragments/start_compute_s", start);
  }
  w.write("clock/wall_s", wall_.seconds());
  const WanCounters c = wan_->counters();
  w.write("wan/dc_bytes", c.dc_bytes);
  w.write("wan/sent_bytes", c.sent_bytes);
  w.write("wan/messages", c.messages);
  w.write("wan/link_s", c.link_s);
  w.write("wan/wall_s", c.wall_s);
  if (sync_) write_sync_rank(w, *sync_);
  write_rank_shards(w);
  return finish(w, name);
}

// With fragments, the schedule and each fragment's period (the global file; the per-rank parts
// are in the rank file); with one fragment the round's keys say it all.
void Trainer::write_fragment_schedule(H5Writer& w) {
  std::vector<int64_t> steps, sequences;
  std::vector<double> lr;
  for (const SyncPeriod& p : periods_) {
    steps.push_back(p.steps);
    sequences.push_back(p.sequences);
    lr.push_back(p.lr_sum);
  }
  w.write("fragments/period_steps", steps);
  w.write("fragments/period_sequences", sequences);
  w.write("fragments/period_lr_sum", lr);
  w.write("fragments/last_synced", schedule_.last_synced());
  w.write("fragments/cycle_start", schedule_.cycle_start());
  w.write("fragments/cycle_stats", cycle_.state());
}

}  // namespace autoloco
