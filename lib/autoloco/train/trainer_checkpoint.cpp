// The Trainer's checkpoints (docs/checkpoints.md): what each rank writes, and how the ranks
// agree that a checkpoint is complete before it is committed (the resume: trainer_resume.cpp).
// Everything here is collective over the world.
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/write_rate.hpp"
#include "autoloco/comm/text_collectives.hpp"
#include "autoloco/metrics/progress.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/train/inner_shard.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/signals.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

torch::Tensor host_copy(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU).contiguous().reshape({-1});
}

void write_tensor(H5Writer& w, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor host = host_copy(t);
  w.write(name, host.data_ptr<float>(), {host.numel()});
}

ManifestFile finish(H5Writer& w, const std::string& name) {
  ManifestFile f;
  f.name = name;
  f.datasets = w.close();
  f.size = static_cast<int64_t>(fs::file_size(w.path()));
  return f;
}

// For the test of a job killed while writing: AUTOLOCO_TEST_KILL_IN_CHECKPOINT=STEP makes world
// rank 0 kill itself after the data files of that step's checkpoint, before its manifest.
void maybe_die_for_test(int64_t step, int rank) {
  const char* at = std::getenv("AUTOLOCO_TEST_KILL_IN_CHECKPOINT");
  if (rank == 0 && at && std::atoll(at) == step) std::raise(SIGKILL);
}

// An overlapped sync that has not landed (sync_pipeline.hpp): its all-reduced sum and scalars
// are the same on every rank (the global file); when it was handed over is the rank's own.
void write_pending_global(H5Writer& w, SyncPipeline& sync, const torch::Tensor& sum) {
  const std::optional<PendingSync> p = sync.settle();
  w.write("sync/pending", int64_t{p ? 1 : 0});
  if (!p) return;
  w.write("sync/pending_due_step", p->due_step);
  w.write("sync/pending_round",
          std::vector<int64_t>{p->round.in.round, p->round.in.step, p->round.in.H,
                               p->round.dc_bytes, p->round.in.fragment, p->round.sent_bytes});
  w.write("sync/pending_scalars", p->round.scalars);
  w.write("sync/pending_link_s", p->round.link_s);
  write_tensor(w, "sync/pending_sum", sum);
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

std::string Trainer::checkpoint_dir() const {
  return (fs::path(config_.run.out_dir) / config_.run.name / "checkpoints").string();
}

namespace {

// A member's shard of a buffer of span.numel values made whole on every member of the dc.
torch::Tensor gather_whole(const torch::Tensor& shard, const ShardSpan& span,
                           Communicator& members) {
  torch::Tensor whole = torch::zeros({span.numel}, shard.options());
  whole.narrow(0, span.begin(), span.count()).copy_(shard.narrow(0, 0, span.count()));
  allgather_shards(whole, span, members);
  return whole;
}

}  // namespace

Trainer::WholeState Trainer::whole_state() {
  WholeState s;
  if (sync_) {
    FragmentedOuter& outer = sync_->outer();
    s.anchor = outer.anchor();
    s.outer_state = outer.optimizer_state();
    if (const std::optional<PendingSync> p = sync_->settle()) {
      OuterSync& f = outer.at(p->round.in.fragment);
      s.pending_sum = f.sharded() ? gather_whole(f.staging(), f.span(), *intra_mpi_) : f.staging();
    }
  }
  for (ModelInstance& inst : instances_) {
    auto* adamw = dynamic_cast<FlatAdamW*>(inst.optimizer.get());
    if (!adamw) {
      s.moments.emplace_back();
      continue;
    }
    const ShardSpan& span = inst.shard->span();
    if (span.whole()) {
      s.moments.emplace_back(adamw->exp_avg(), adamw->exp_avg_sq());
      continue;
    }
    s.moments.emplace_back(gather_whole(adamw->exp_avg(), span, *grad_comm_),
                           gather_whole(adamw->exp_avg_sq(), span, *grad_comm_));
  }
  return s;
}

ManifestFile Trainer::write_global_file(const std::string& dir, const std::string& reason,
                                        const WholeState& whole) {
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
    write_tensor(w, "outer/anchor", whole.anchor);
    for (const auto& [name, tensor] : whole.outer_state) {
      if (tensor.defined()) write_tensor(w, "outer/" + name, tensor);
    }
    write_pending_global(w, *sync_, whole.pending_sum);
    w.write("controller/name", controller_->name());
    w.write("controller/state", controller_->state());
  }
  return finish(w, kGlobalFile);
}

ManifestFile Trainer::write_dc_file(const std::string& dir, const WholeState& whole) {
  const std::string name = dc_file(topo_.dc);
  H5Writer w(dir + "/" + name);
  std::vector<int64_t> active;
  for (size_t i = 0; i < instances_.size(); ++i) {
    const ModelInstance& inst = instances_[i];
    const std::string at = instance_prefix(inst.id);
    write_tensor(w, at + "replica/values", inst.params->values());
    if (auto* adamw = dynamic_cast<FlatAdamW*>(inst.optimizer.get())) {
      w.write(at + "adamw/step", adamw->step_count());
      write_tensor(w, at + "adamw/exp_avg", whole.moments[i].first);
      write_tensor(w, at + "adamw/exp_avg_sq", whole.moments[i].second);
    }
    w.write(at + "batch/state", inst.batch->state());
    active.push_back(inst.id);
  }
  w.write("instances/active", active);
  return finish(w, name);
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
  if (sync_ && config_.outer.error_feedback) {
    for (size_t p = 0; p < sync_->outer().size(); ++p)
      write_tensor(w, fmt::format("residual/{}", p), sync_->outer().at(p).residual());
  }
  return finish(w, name);
}

int64_t Trainer::checkpoint_bytes_rank0() const {
  constexpr int64_t kFloat = sizeof(float);
  const int64_t numel = instances_[0].params->numel();
  int64_t bytes = 0;
  if (sync_) {
    bytes += numel * kFloat;  // the anchor
    // Each state is |θ| once it exists (momentum is made by the first outer step); one
    // fragment's optimizer names them without gathering the whole.
    bytes += numel * kFloat * static_cast<int64_t>(sync_->outer().at(0).optimizer().state().size());
    if (config_.outer.error_feedback) bytes += numel * kFloat;  // the residual
  }
  for (const ModelInstance& inst : instances_) {
    const bool adamw = dynamic_cast<const FlatAdamW*>(inst.optimizer.get()) != nullptr;
    bytes += inst.params->numel() * kFloat * (adamw ? 3 : 1);  // replica (and moments)
  }
  return bytes;
}

void Trainer::log_checkpoint_estimate() {
  if (!run_dir_) return;
  // Large enough to pass the page cache's first absorption on most machines, small enough to
  // cost a start a fraction of a second.
  constexpr int64_t kProbeBytes = int64_t{16} << 20;
  double rate = 0.0;
  try {
    rate = measure_write_rate(run_dir_->path(), kProbeBytes);
  } catch (const Error& e) {
    log::warn("checkpoints: could not measure the write rate: {}", e.what());
    return;
  }
  const int64_t bytes = checkpoint_bytes_rank0();
  const double expected = static_cast<double>(bytes) / rate;
  log::info(
      "checkpoints: world rank 0 writes {}B of each (the most of any rank): about {:.1f} s at the "
      "{}B/s measured here ({}B written and flushed); ckpt.timeout_s {:g}",
      format_si(static_cast<double>(bytes)), expected, format_si(rate),
      format_si(static_cast<double>(kProbeBytes)), config_.ckpt.timeout_s);
  // A probe says little about a shared file system under load: leave a wide margin.
  if (config_.comm.timeout_s > 0 &&
      4 * expected > std::max(config_.ckpt.timeout_s, config_.comm.timeout_s)) {
    log::warn(
        "checkpoints: the expected write time ({:.0f} s) is over a quarter of ckpt.timeout_s "
        "({:g} s): the watchdog may end the job while a checkpoint is written; raise "
        "ckpt.timeout_s",
        expected, config_.ckpt.timeout_s);
  }
}

unsigned Trainer::checkpoint_flags() {
  unsigned flags = stop_signal_received() != 0 ? StopAgreement::kStop : 0u;
  // The agreement lands one step later: ask one step early to stop exactly at stop_at_step.
  if (options_.stop_at_step >= 0 && step_ + 1 >= options_.stop_at_step) {
    flags |= StopAgreement::kStop;
  }
  // Rank 0's clock decides when a timed checkpoint is due; asking once until it is written
  // keeps the one-step-late agreement from saving twice.
  const double minutes = config_.ckpt.every_minutes;
  if (topo_.world_rank == 0 && minutes > 0 && !timed_checkpoint_asked_ &&
      since_checkpoint_.seconds() >= 60.0 * minutes) {
    flags |= StopAgreement::kCheckpoint;
    timed_checkpoint_asked_ = true;
  }
  return flags;
}

std::string Trainer::save_checkpoint(const std::string& reason) {
  const std::string dir = checkpoint_dir();
  if (last_checkpoint_step_ == step_) return (fs::path(dir) / checkpoint_name(step_)).string();
  // Every rank waits while the slowest writes: storage, not a lost rank.
  const Watch io("a checkpoint's write (every rank waits for the slowest writer)",
                 WatchBound{config_.ckpt.timeout_s, "ckpt.timeout_s"});
  Timer timer;
  const MPI_Comm world = world_comm_->handle();
  std::string message;
  std::string tmp;
  if (topo_.world_rank == 0) {
    try {
      tmp = begin_checkpoint(dir, step_);
    } catch (const CheckpointError& e) {
      message = e.what();
    }
  }
  if (!all_succeeded(world, message.empty(), message)) throw CheckpointError(message);
  broadcast_text(world, tmp, 0);

  // A sync in flight finishes its messages before any file is written: the rank file's link
  // counters are read before write_sync_rank settles it, and would miss the sync's bytes
  // whenever the communication thread was still sending.
  if (sync_) sync_->settle();
  // Sharded state is gathered before any file is written (a collective of each dc); while the
  // checkpoints keep one layout, any shard mode resumes any other.
  const WholeState whole = whole_state();

  // Each rank writes its own files; rank 0 learns their sums, or the first rank that failed.
  std::string mine;
  try {
    const double slow = FaultPlan::from_env().slow_checkpoint_s(step_, topo_.world_rank);
    if (slow > 0) std::this_thread::sleep_for(std::chrono::duration<double>(slow));
    std::vector<ManifestFile> files;
    if (topo_.world_rank == 0) files.push_back(write_global_file(tmp, reason, whole));
    if (topo_.member == 0) files.push_back(write_dc_file(tmp, whole));
    if (FaultPlan::from_env().fails_checkpoint(step_, topo_.world_rank)) {
      throw CheckpointError(
          fmt::format("'{}/{}': write failed: no space left on device (injected "
                      "by AUTOLOCO_FAULT)",
                      tmp, rank_file(topo_.world_rank)));
    }
    files.push_back(write_rank_file(tmp));
    for (const ManifestFile& f : files)
      mine += f.to_json() + "\n";
  } catch (const CheckpointError& e) {
    message = e.what();
  }
  if (!all_succeeded(world, message.empty(), message)) {
    throw CheckpointError(
        fmt::format("checkpoint at step {} failed ({}); the previous checkpoints "
                    "in '{}' are untouched",
                    step_, message, dir));
  }
  const std::vector<std::string> parts = gather_text(world, mine, 0);
  maybe_die_for_test(step_, topo_.world_rank);

  std::string committed;
  if (topo_.world_rank == 0) {
    try {
      Manifest m;
      m.format_version = kCheckpointFormat;
      m.step = step_;
      m.round = rounds_;
      m.reason = reason;
      m.created = utc_now();
      for (const std::string& part : parts) {
        std::istringstream lines(part);
        for (std::string line; std::getline(lines, line);) {
          if (!line.empty()) m.files.push_back(parse_manifest_file(line, tmp));
        }
      }
      write_manifest(tmp, m);
      committed = commit_checkpoint(dir, tmp, step_);
      prune_checkpoints(dir, config_.ckpt.keep_last, committed);
      log::info("checkpoint ({}) at step {}, round {}: {} ({}B in {:.2f} s)", reason, step_,
                rounds_, committed, format_si(static_cast<double>(m.total_bytes())),
                timer.seconds());
    } catch (const CheckpointError& e) {
      message = e.what();
    }
  }
  if (!all_succeeded(world, message.empty(), message)) throw CheckpointError(message);
  broadcast_text(world, committed, 0);
  last_checkpoint_step_ = step_;
  since_checkpoint_.reset();
  timed_checkpoint_asked_ = false;
  return committed;
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
