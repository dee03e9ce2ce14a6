// The Trainer's checkpoints (docs/checkpoints.md): what each rank writes, how the ranks agree
// that a checkpoint is complete before it is committed, and how a resume picks, checks and
// loads one. Everything here is collective over the world.
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/compatibility.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/write_rate.hpp"
#include "autoloco/comm/text_collectives.hpp"
#include "autoloco/metrics/progress.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/signals.hpp"
#include "autoloco/util/slurm_job.hpp"

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

// Reads a flat fp32 dataset into `into` (any device, same number of elements).
void read_tensor(const H5Reader& r, const std::string& name, torch::Tensor& into) {
  torch::Tensor host = torch::empty({into.numel()}, torch::kFloat32);
  r.read(name, host.data_ptr<float>(), host.numel());
  torch::NoGradGuard no_grad;
  into.copy_(host.view_as(into));
}

// Reads a flat fp32 dataset of the global file that every rank of a dc needs whole (the anchor,
// the outer state, a pending sum: |θ| each): member 0 reads it and broadcasts it inside the dc,
// so a resume reads the global file once per dc rather than once per rank. The dc first learns
// whether member 0 could read it, so that a damaged file fails every member rather than leaving
// them in the broadcast.
void read_tensor_in_dc(const H5Reader& g, const std::string& name, torch::Tensor& into,
                       Communicator& intra) {
  torch::Tensor host = torch::empty({into.numel()}, torch::kFloat32);
  std::string error;
  if (intra.rank() == 0) {
    try {
      g.read(name, host.data_ptr<float>(), host.numel());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int64_t ok = error.empty() ? 1 : 0;
  intra.broadcast(&ok, 1, DType::i64, 0);
  if (ok == 0) {
    throw CheckpointError(intra.rank() == 0 ? error
                                            : fmt::format("'{}': member 0 of this dc could not "
                                                          "read dataset '{}' (see its error)",
                                                          g.path(), name));
  }
  intra.broadcast(host.data_ptr<float>(), static_cast<size_t>(host.numel()), DType::f32, 0);
  torch::NoGradGuard no_grad;
  into.copy_(host.view_as(into));
}

ManifestFile finish(H5Writer& w, const std::string& name) {
  ManifestFile f;
  f.name = name;
  f.datasets = w.close();
  f.size = static_cast<int64_t>(fs::file_size(w.path()));
  return f;
}

// One line per parameter: "name shape offset", the model's identity in a checkpoint.
std::string param_table(const FlatParams& params) {
  std::string out;
  for (const ParamSlice& s : params.slices()) {
    out += fmt::format("{} [{}] {}\n", s.name, fmt::join(s.shape, ","), s.offset);
  }
  return out;
}

std::string first_difference(const std::string& saved, const std::string& now) {
  std::istringstream a(saved), b(now);
  std::string la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "";
    if (!more_a) return fmt::format("this model has '{}' which the checkpoint lacks", lb);
    if (!more_b) return fmt::format("the checkpoint has '{}' which this model lacks", la);
    if (la != lb) return fmt::format("the checkpoint has '{}' where this model has '{}'", la, lb);
  }
}

const ManifestFile& manifest_entry(const Manifest& m, const std::string& path,
                                   const std::string& name) {
  const ManifestFile* f = m.find(name);
  if (!f) {
    throw CheckpointError(fmt::format("'{}': the manifest lists no file {}", path, name));
  }
  return *f;
}

// Datasets of model instance `id` (batch.instances > 1): instance 0 keeps the names of a run
// without instances.
std::string instance_prefix(int id) {
  return id == 0 ? std::string() : fmt::format("instance_{}/", id);
}

NoiseSums noise_sums(const std::vector<double>& values, const std::string& file) {
  if (values.size() != NoiseSums::kCount) {
    throw CheckpointError(fmt::format("'{}': round/noise_sums holds {} values, not {}", file,
                                      values.size(), NoiseSums::kCount));
  }
  std::array<double, NoiseSums::kCount> a{};
  std::copy(values.begin(), values.end(), a.begin());
  return NoiseSums::from_array(a);
}

// A list of one value per dc of the checkpoint (`may_be_empty`: or none yet), which the loop
// indexes by dc: another length is damage, refused before use.
std::vector<int64_t> per_dc(const H5Reader& g, const std::string& name,
                            const TopologyChange& change, bool may_be_empty) {
  std::vector<int64_t> values = g.read_i64(name);
  if (values.size() != static_cast<size_t>(change.from_dcs) && !(may_be_empty && values.empty())) {
    throw CheckpointError(fmt::format(
        "'{}': {} holds {} values where the checkpoint's {} dcs have one each: the file is "
        "damaged; use another checkpoint",
        g.path(), name, values.size(), change.from_dcs));
  }
  return values;
}

// The config a checkpoint was written with. Its bytes passed their CRC-32, so one that this
// autoloco cannot read (a key renamed or removed since) makes the checkpoint incompatible, not
// damaged: an older checkpoint would not read either.
Config saved_config(const H5Reader& g, const std::string& path) {
  try {
    return parse_config(g.read_string("config"), {}, g.path());
  } catch (const ConfigError& e) {
    throw ResumeMismatch(
        fmt::format("cannot resume from '{}': its config does not load in this autoloco ({}); "
                    "resume it with the autoloco that wrote it",
                    path, e.what()));
  }
}

// Runs one step of reading checkpoint `path`. Whatever a damaged file makes a library throw
// (LibTorch's c10::Error for an RNG state of the wrong size, std::bad_alloc, std::length_error,
// ...) becomes a CheckpointError naming the checkpoint, so that --resume auto falls back to an
// older one instead of ending the job; CheckpointErrors (ResumeMismatch too) pass as they are.
template <class F>
auto restoring(const std::string& path, F&& body) {
  try {
    return body();
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& e) {  // its what() carries a C++ backtrace
    throw CheckpointError(
        fmt::format("'{}': cannot restore: {}", path, e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("'{}': cannot restore: {}", path, e.what()));
  }
}

// The progress clock's base (step, tokens) at the last topology change; none before one.
std::pair<int64_t, int64_t> progress_base(const H5Reader& g) {
  if (!g.has("counters/progress_base_step")) return {0, 0};
  return {g.read_int("counters/progress_base_step"), g.read_int("counters/progress_base_tokens")};
}

// For the test of a job killed while writing: AUTOLOCO_TEST_KILL_IN_CHECKPOINT=STEP makes world
// rank 0 kill itself after the data files of that step's checkpoint, before its manifest.
void maybe_die_for_test(int64_t step, int rank) {
  const char* at = std::getenv("AUTOLOCO_TEST_KILL_IN_CHECKPOINT");
  if (rank == 0 && at && std::atoll(at) == step) std::raise(SIGKILL);
}

// "runs/a/checkpoints/step_50/" and "runs/a/./checkpoints/step_50" name ".../step_50": the
// in-place test compares the checkpoint's grandparent with the run directory.
std::string checkpoint_path(const std::string& request) {
  const fs::path p = fs::path(request).lexically_normal();
  return (p.filename().empty() ? p.parent_path() : p).string();
}

// An overlapped sync that has not landed (sync_pipeline.hpp): its all-reduced sum and scalars
// are the same on every rank (the global file); when it was handed over is the rank's own.
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
  write_tensor(w, "sync/pending_sum", sync.outer().at(p->round.in.fragment).staging());
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

// The scalars of a sync in flight, laid out for this job's dcs. The outer step that lands them
// indexes the round's scalars and two per dc, so a list that remap_scalars could not lay out
// (it leaves another length as it is) is damage, refused before use.
std::vector<double> pending_scalars(const H5Reader& g, const TopologyChange& change) {
  const std::vector<double> stored = g.read_f64("sync/pending_scalars");
  std::vector<double> scalars = OuterSync::remap_scalars(stored, change);
  if (scalars.size() != OuterSync::message_scalars(change.to_dcs)) {
    throw CheckpointError(
        fmt::format("'{}': sync/pending_scalars holds {} values, which is no round message of {} "
                    "dcs: the file is damaged; use another checkpoint",
                    g.path(), stored.size(), change.from_dcs));
  }
  return scalars;
}

// The sync in flight, as the global file holds it (the same on every rank): read with the rest
// of the global file, before any rank reads its own files, so that the dc's broadcast of its
// sum never waits for a member that failed on a file of its own.
std::optional<PendingSync> read_pending_global(const H5Reader& g, SyncPipeline& sync,
                                               const TopologyChange& change, Communicator& intra) {
  if (!g.has("sync/pending") || g.read_int("sync/pending") == 0) return std::nullopt;
  PendingSync p;
  p.due_step = g.read_int("sync/pending_due_step");
  const std::vector<int64_t> round = g.read_i64("sync/pending_round");
  // Four values before fragments, then the fragment, then the bytes sent.
  if (round.size() < 4 || round.size() > 6) {
    throw CheckpointError(
        fmt::format("'{}': sync/pending_round has {} values, not 6", g.path(), round.size()));
  }
  p.round.in.fragment = round.size() >= 5 ? round[4] : 0;
  p.round.sent_bytes = round.size() >= 6 ? round[5] : 0;
  if (p.round.in.fragment < 0 || p.round.in.fragment >= static_cast<int64_t>(sync.outer().size())) {
    throw ResumeMismatch(
        fmt::format("'{}': the sync in flight is fragment {}, but this run has {} fragments "
                    "(outer.fragments): resume with the outer.fragments it was written with",
                    g.path(), p.round.in.fragment, sync.outer().size()));
  }
  p.round.in.round = round[0];
  p.round.in.step = round[1];
  p.round.in.H = round[2];
  p.round.dc_bytes = round[3];
  p.round.scalars = pending_scalars(g, change);
  p.round.link_s = g.read_double("sync/pending_link_s");
  read_tensor_in_dc(g, "sync/pending_sum", sync.outer().at(p.round.in.fragment).staging(), intra);
  return p;
}

// The rank's part of the sync's state (its clocks, when it handed the pending sync over), then
// the pending sync restored.
void read_sync_rank(const H5Reader& k, SyncPipeline& sync, const WanCounters& wan,
                    std::optional<PendingSync> pending) {
  // Checkpoints from before the overlap: every second of the link was exposed and waited for.
  sync.restore_clock(k.has("sync/wait_s") ? SyncClock{k.read_double("sync/wait_s"),
                                                      k.read_double("sync/exposed_link_s")}
                                          : SyncClock{wan.wall_s, wan.link_s});
  if (!pending) return;
  pending->round.wall_s = k.has("sync/pending_wall_s") ? k.read_double("sync/pending_wall_s") : 0.0;
  pending->handed_at =
      k.has("sync/pending_handed_at") ? k.read_double("sync/pending_handed_at") : 0.0;
  sync.restore(*pending);
}

}  // namespace

void Trainer::keep_instances(const std::vector<int64_t>& active, const std::string& file) {
  std::vector<ModelInstance> kept;
  for (ModelInstance& inst : instances_) {
    if (std::find(active.begin(), active.end(), inst.id) != active.end()) {
      kept.push_back(std::move(inst));
    }
  }
  if (kept.size() != active.size() || kept.empty() || kept[0].id != 0) {
    throw CheckpointError(fmt::format(
        "'{}': instances/active is [{}], which does not fit batch.instances = {} of this run", file,
        fmt::join(active, ", "), instances_.size()));
  }
  instances_ = std::move(kept);
}

std::string Trainer::checkpoint_dir() const {
  return (fs::path(config_.run.out_dir) / config_.run.name / "checkpoints").string();
}

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
    write_tensor(w, "outer/anchor", anchor());
    for (const auto& [name, tensor] : sync_->outer().optimizer_state()) {
      if (tensor.defined()) write_tensor(w, "outer/" + name, tensor);
    }
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
    write_tensor(w, at + "replica/values", inst.params->values());
    if (auto* adamw = dynamic_cast<FlatAdamW*>(inst.optimizer.get())) {
      w.write(at + "adamw/step", adamw->step_count());
      write_tensor(w, at + "adamw/exp_avg", adamw->exp_avg());
      write_tensor(w, at + "adamw/exp_avg_sq", adamw->exp_avg_sq());
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
    // Each state is |θ| once it exists (momentum is made by the first outer step).
    bytes += numel * kFloat * static_cast<int64_t>(sync_->outer().optimizer_state().size());
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

  // Each rank writes its own files; rank 0 learns their sums, or the first rank that failed.
  std::string mine;
  try {
    const double slow = FaultPlan::from_env().slow_checkpoint_s(step_, topo_.world_rank);
    if (slow > 0) std::this_thread::sleep_for(std::chrono::duration<double>(slow));
    std::vector<ManifestFile> files;
    if (topo_.world_rank == 0) files.push_back(write_global_file(tmp, reason));
    if (topo_.member == 0) files.push_back(write_dc_file(tmp));
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

// ---- resume ----

std::vector<std::string> Trainer::resume_candidates(const std::string& request) {
  std::string message;
  std::string joined;
  if (topo_.world_rank == 0) {
    if (request == "auto") {
      for (const CheckpointInfo& c : list_checkpoints(checkpoint_dir())) {
        if (c.ok()) {
          joined += c.path + "\n";
        } else if (c.manifest && c.manifest->format_version != kCheckpointFormat) {
          // Intact, for another autoloco version: left where it is.
          log::warn("skipping checkpoint {}: {}", c.path, c.problem);
        } else {
          log::warn("skipping checkpoint {}: {}", c.path, c.problem);
          rejected_checkpoints_.push_back(c.path);
        }
      }
    } else {
      const std::string dir = checkpoint_path(request);
      const CheckpointInfo c = inspect_checkpoint(dir);
      if (!fs::is_directory(request)) {
        message = fmt::format(
            "--resume {}: no such checkpoint directory (give checkpoints/step_<N> of a run, or "
            "--resume auto)",
            request);
      } else if (!c.ok()) {
        message = fmt::format("--resume {}: {}", request, c.problem);
      } else {
        joined = dir + "\n";
      }
    }
  }
  if (!all_succeeded(world_comm_->handle(), message.empty(), message)) {
    throw CheckpointError(message);
  }
  broadcast_text(world_comm_->handle(), joined, 0);
  std::vector<std::string> out;
  std::istringstream lines(joined);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

void Trainer::check_resumable(const std::string& path) {
  const Manifest m = read_manifest(path);
  const H5Reader g(path + "/" + kGlobalFile, &manifest_entry(m, path, kGlobalFile).datasets);
  const int64_t format = g.read_int("format_version");
  if (format != kCheckpointFormat) {
    throw ResumeMismatch(fmt::format("'{}' has checkpoint format {}; this autoloco reads format {}",
                                     path, format, kCheckpointFormat));
  }
  const int64_t world = g.read_int("topology/world_size");
  const int64_t per_dc = g.read_int("topology/ranks_per_dc");
  if (per_dc != topo_.ranks_per_dc || world <= 0 || world % per_dc != 0) {
    throw ResumeMismatch(fmt::format(
        "cannot resume from '{}': it was written by {} ranks = {} dc x {} members, this job has "
        "{} ranks = {} dc x {} members. Launch it with topology.ranks_per_dc = {} (the number "
        "of dcs may change with --allow-topology-change)",
        path, world, world / std::max<int64_t>(per_dc, 1), per_dc, topo_.world_size, topo_.num_dcs,
        topo_.ranks_per_dc, per_dc));
  }
  topology_change_ = TopologyChange{static_cast<int>(world / per_dc), topo_.num_dcs};
  if (topology_change_.changed() && !options_.allow_topology_change) {
    throw ResumeMismatch(fmt::format(
        "cannot resume from '{}' without --allow-topology-change: it was written by {} dcs x {} "
        "members, this job has {} dcs x {}. With the flag the run would go on as {} (replicas, "
        "AdamW and batch state; the anchor, outer optimizer, controllers and counters carry "
        "over). Pass it, or launch {} ranks",
        path, topology_change_.from_dcs, per_dc, topo_.num_dcs, topo_.ranks_per_dc,
        topology_change_.describe(), world));
  }
  const std::string diff =
      first_difference(g.read_string("model/parameters"), param_table(params()));
  if (!diff.empty()) {
    throw ResumeMismatch(fmt::format(
        "cannot resume from '{}': the model differs: {}. Use the model.* keys the checkpoint was "
        "written with",
        path, diff));
  }
  const int64_t progress = saved_progress(g);
  if (config_.run.steps < progress) {
    throw ResumeMismatch(fmt::format(
        "cannot resume from '{}': it is at step {} and run.steps is {}; give run.steps of at "
        "least {} (--set run.steps=N)",
        path, progress, config_.run.steps, progress));
  }
  const Config saved = saved_config(g, path);
  const std::vector<ConfigChange> changes = check_config_resumable(saved, config_, path);
  if (topo_.world_rank == 0) {
    for (const ConfigChange& c : changes) {
      log::info("resume: {} is {} (was {} in the checkpoint){}", c.key, c.now, c.saved,
                c.key == "run.steps" ? "; the lr schedule follows the new total" : "");
    }
  }
}

int64_t Trainer::saved_progress(const H5Reader& g) const {
  // run.steps counts steps at the initial batch: an adaptive batch has made fewer, larger ones.
  if (!g.has("counters/tokens")) return g.read_int("counters/step");
  // A step of the checkpoint's dcs (a topology change scales it).
  const int64_t per_step =
      initial_tokens_per_step_ / topology_change_.to_dcs * topology_change_.from_dcs;
  const auto [base_step, base_tokens] = progress_base(g);
  return base_step + (g.read_int("counters/tokens") - base_tokens) / per_step;
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

void Trainer::read_fragment_schedule(const H5Reader& g) {
  const auto P = static_cast<int64_t>(periods_.size());
  const int64_t written = g.has("fragments/last_synced")
                              ? static_cast<int64_t>(g.read_i64("fragments/last_synced").size())
                              : 1;
  if (written != P) {
    throw ResumeMismatch(
        fmt::format("'{}' was written with outer.fragments={}, this run has {}: resume with the "
                    "outer.fragments it was written with",
                    g.path(), written, P));
  }
  if (P == 1) {
    periods_[0].steps = g.read_int("counters/round_steps");
    periods_[0].lr_sum = g.read_double("counters/round_lr_sum");
    // A round runs one batch: the dc's current one.
    periods_[0].sequences = periods_[0].steps * dc_batches_[static_cast<size_t>(topo_.dc)];
    const int64_t start = step_ - periods_[0].steps;
    schedule_.restore(start, {start});
    return;
  }
  const std::vector<int64_t> steps = g.read_i64("fragments/period_steps");
  const std::vector<int64_t> sequences = g.read_i64("fragments/period_sequences");
  const std::vector<double> lr = g.read_f64("fragments/period_lr_sum");
  if (steps.size() != periods_.size() || sequences.size() != periods_.size() ||
      lr.size() != periods_.size()) {
    throw CheckpointError(
        fmt::format("'{}': the fragments/period_* datasets do not have {} values", g.path(), P));
  }
  for (size_t p = 0; p < periods_.size(); ++p) {
    periods_[p].steps = steps[p];
    periods_[p].sequences = sequences[p];
    periods_[p].lr_sum = lr[p];
  }
  schedule_.restore(g.read_int("fragments/cycle_start"), g.read_i64("fragments/last_synced"));
  cycle_.load_state(g.read_f64("fragments/cycle_stats"));
}

Trainer::Resumed Trainer::load_checkpoint(const std::string& path) {
  const Manifest m = read_manifest(path);
  Resumed r;
  r.path = path;
  // The global file first, on every rank alike: its large datasets are broadcast inside each dc
  // (read_tensor_in_dc), which must come before any read of a rank's own files can fail.
  std::optional<PendingSync> pending;
  {
    const H5Reader g(path + "/" + kGlobalFile, &manifest_entry(m, path, kGlobalFile).datasets);
    step_ = g.read_int("counters/step");
    rounds_ = g.read_int("counters/rounds");
    H_ = g.read_int("counters/H");
    h_per_round_ = g.read_i64("counters/h_per_round");
    if (g.has("counters/peak_sync_dc_bytes")) {
      peak_sync_dc_bytes_ = g.read_int("counters/peak_sync_dc_bytes");
    }
    // Checkpoints from before adaptive batches (same format) ran a fixed batch.
    tokens_ = g.has("counters/tokens") ? g.read_int("counters/tokens") : step_ * tokens_per_step();
    if (topology_change_.changed()) {
      // A step has another number of tokens now: the progress clock counts on from here.
      progress_base_step_ = saved_progress(g);
      progress_base_tokens_ = tokens_;
    } else {
      std::tie(progress_base_step_, progress_base_tokens_) = progress_base(g);
    }
    loop_.tokens_at_log =
        g.has("counters/tokens_at_log") ? g.read_int("counters/tokens_at_log") : tokens_;
    if (g.has("batch/dc_batches")) {
      dc_batches_ = topology_change_.remap(per_dc(g, "batch/dc_batches", topology_change_, false));
    }
    if (g.has("batch/last_round_batches")) {
      last_round_batches_ =
          topology_change_.remap(per_dc(g, "batch/last_round_batches", topology_change_, true));
    }
    loop_.eval_due = g.read_int("loop/eval_due") != 0;
    loop_.final_train_loss = g.read_double("loop/final_train_loss");
    loop_.final_eval_loss = g.read_double("loop/final_eval_loss");
    r.logs = LogSizes{g.read_int("run/metrics_bytes"), g.read_int("run/syncs_bytes")};
    if (sync_) {
      read_fragment_schedule(g);
      torch::Tensor whole = torch::empty_like(anchor());
      read_tensor_in_dc(g, "outer/anchor", whole, *intra_mpi_);
      sync_->outer().load_anchor(whole);
      for (const auto& [name, tensor] : sync_->outer().optimizer_state()) {
        const std::string key = "outer/" + name;
        torch::Tensor value;
        if (g.has(key)) {
          value = torch::empty_like(whole);
          read_tensor_in_dc(g, key, value, *intra_mpi_);
        }
        sync_->outer().load_optimizer_state(name, value);
      }
      controller_->load_state(g.read_f64("controller/state"));
      pending = read_pending_global(g, *sync_, topology_change_, *intra_mpi_);
    }
  }
  {
    const std::string name = dc_file(topology_change_.source_dc(topo_.dc));
    const H5Reader d(path + "/" + name, &manifest_entry(m, path, name).datasets);
    keep_instances(
        d.has("instances/active") ? d.read_i64("instances/active") : std::vector<int64_t>{0},
        path + "/" + name);
    for (ModelInstance& inst : instances_) {
      const std::string at = instance_prefix(inst.id);
      read_tensor(d, at + "replica/values", inst.params->values());
      if (auto* adamw = dynamic_cast<FlatAdamW*>(inst.optimizer.get())) {
        torch::Tensor m1 = torch::empty_like(adamw->exp_avg());
        torch::Tensor m2 = torch::empty_like(adamw->exp_avg_sq());
        read_tensor(d, at + "adamw/exp_avg", m1);
        read_tensor(d, at + "adamw/exp_avg_sq", m2);
        adamw->set_state(d.read_int(at + "adamw/step"), m1, m2);
      }
      // Checkpoints from before adaptive batches ran a fixed batch, which keeps no state.
      inst.batch->load_state(d.has(at + "batch/state") ? d.read_f64(at + "batch/state")
                                                       : std::vector<double>{});
    }
  }
  {
    // ranks_per_dc stays, so a dc that existed keeps its ranks' files; a new one reads its
    // source dc's for what is the same on every rank (clocks, counters).
    const bool fresh = topology_change_.fresh(topo_.dc);
    const int source_rank =
        topology_change_.source_dc(topo_.dc) * topo_.ranks_per_dc + topo_.member;
    const std::string name = rank_file(source_rank);
    const H5Reader k(path + "/" + name, &manifest_entry(m, path, name).datasets);
    if (!fresh) load_rank_own_state(k, path + "/" + name);
    if (!periods_.empty()) {
      periods_[0].loss_sum = k.read_double("round/loss_sum");
      periods_[0].start_compute_s = k.read_double("round/start_compute_s");
    }
    if (periods_.size() > 1) {
      const std::vector<double> loss = k.read_f64("fragments/loss_sum");
      const std::vector<double> start = k.read_f64("fragments/start_compute_s");
      for (size_t p = 0; p < periods_.size() && p < loss.size() && p < start.size(); ++p) {
        periods_[p].loss_sum = loss[p];
        periods_[p].start_compute_s = start[p];
      }
    }

    resumed_wall_s_ = k.read_double("clock/wall_s");
    // Checkpoints from before compressed formats did not count the bytes sent: from 0 on.
    wan_->restore(WanCounters{
        k.read_int("wan/dc_bytes"), k.has("wan/sent_bytes") ? k.read_int("wan/sent_bytes") : 0,
        k.read_int("wan/messages"), k.read_double("wan/link_s"), k.read_double("wan/wall_s")});
    if (sync_) {
      read_sync_rank(k, *sync_, wan_->counters(), pending);
      // Everything the link carried landed, but a pending sync's bytes.
      const std::optional<PendingSync> in_flight = sync_->settle();
      landed_dc_bytes_ = wan_->dc_bytes() - (in_flight ? in_flight->round.dc_bytes : 0);
    }
  }
  return r;
}

void Trainer::load_rank_own_state(const H5Reader& k, const std::string& file) {
  for (ModelInstance& inst : instances_) {
    const std::string at = instance_prefix(inst.id);
    inst.stream->set_cursor(StreamCursor{static_cast<uint64_t>(k.read_int(at + "data/cursor"))});
    if (k.has(at + "round/noise_sums")) {
      inst.round_noise = noise_sums(k.read_f64(at + "round/noise_sums"), file);
    }
  }
  {
    const std::vector<uint8_t> bytes = k.read_u8("rng/cpu");
    torch::Tensor state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
    std::copy(bytes.begin(), bytes.end(), state.data_ptr<uint8_t>());
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
  loop_.loss_sum = k.read_double("loop/loss_sum");
  loop_.loss_count = k.read_int("loop/loss_count");
  // A checkpoint written without error feedback has no residual: it starts from zero.
  if (sync_ && config_.outer.error_feedback && k.has("residual/0")) {
    for (size_t p = 0; p < sync_->outer().size(); ++p)
      read_tensor(k, fmt::format("residual/{}", p), sync_->outer().at(p).residual());
  }
}

std::optional<Trainer::Resumed> Trainer::resume(const std::string& request) {
  if (request.empty()) return std::nullopt;
  const Watch io("a resume's read of a checkpoint (every rank waits for the slowest reader)",
                 WatchBound{config_.ckpt.timeout_s, "ckpt.timeout_s"});
  const MPI_Comm world = world_comm_->handle();
  const std::vector<std::string> candidates = resume_candidates(request);
  int64_t damaged = static_cast<int64_t>(rejected_checkpoints_.size());
  AUTOLOCO_MPI(MPI_Bcast(&damaged, 1, MPI_INT64_T, 0, world));
  if (candidates.empty() && damaged > 0) {
    throw CheckpointError(fmt::format(
        "--resume auto: every checkpoint in '{}' is incomplete or damaged (see the warnings "
        "above). Start a new run with another run.name, or resume one by hand with --resume PATH",
        checkpoint_dir()));
  }
  if (candidates.empty()) {
    if (topo_.world_rank == 0) {
      log::info("--resume auto: no checkpoint in {}: starting a new run", checkpoint_dir());
    }
    return std::nullopt;
  }
  std::vector<std::string>& rejected = rejected_checkpoints_;  // rank 0's list
  for (const std::string& path : candidates) {
    std::string message;
    bool mismatch = false;
    bool checked = true;
    try {
      restoring(path, [&] { check_resumable(path); });
    } catch (const ResumeMismatch& e) {
      message = e.what();
      mismatch = true;
    } catch (const CheckpointError& e) {
      // Damaged where only the check reads (the config, the model table): loading it would skip
      // the check.
      message = e.what();
      checked = false;
    }
    if (!all_succeeded(world, !mismatch, message)) throw ResumeMismatch(message);
    // Every rank loads, or none: the load has collectives.
    const bool loadable = all_succeeded(world, checked, message);
    std::optional<Resumed> loaded;
    if (loadable) {
      try {
        loaded = restoring(path, [&] { return load_checkpoint(path); });
      } catch (const CheckpointError& e) {
        message = e.what();
      }
    }
    if (loadable && all_succeeded(world, loaded.has_value(), message)) {
      resumed_from_ = path;
      if (topo_.world_rank == 0) {
        log::info("resumed from {} at step {}, round {}, next round of {} steps", path, step_,
                  rounds_, H_);
        if (topology_change_.changed()) {
          log::info("resume: topology changed, {} (topology.ranks_per_dc {} stays)",
                    topology_change_.describe(), topo_.ranks_per_dc);
          if (config_.data.partition == "by_shard") {
            log::info(
                "resume: data.partition by_shard deals the shards over {} dcs now: each dc "
                "goes on at its sample count in its new stream",
                topo_.num_dcs);
          }
        }
        for (const std::string& bad : rejected) {
          log::warn("set aside {} as {}", bad, set_aside_checkpoint(bad, "rejected"));
        }
      }
      last_checkpoint_step_ = step_;
      return loaded;
    }
    if (request != "auto") {
      throw CheckpointError(fmt::format("cannot resume from '{}': {}", path, message));
    }
    if (topo_.world_rank == 0) {
      log::warn("checkpoint {} is damaged ({}); trying an older one", path, message);
      rejected.push_back(path);
    }
  }
  throw CheckpointError(
      fmt::format("--resume auto: every checkpoint in '{}' is damaged (see the warnings above). "
                  "Start a new run with another run.name, or resume one by hand with --resume PATH",
                  checkpoint_dir()));
}

void Trainer::open_run_directory(const std::optional<Resumed>& resumed) {
  if (!options_.write_run_directory || topo_.world_rank != 0) return;
  const fs::path run_path = fs::path(config_.run.out_dir) / config_.run.name;
  const bool in_place =
      resumed && fs::exists(run_path) &&
      fs::equivalent(fs::path(resumed->path).parent_path().parent_path(), run_path);
  if (in_place) {
    run_dir_.emplace(RunDirectory::reopen(run_path.string(), resumed->logs, step_));
    // Checkpoints from later steps belong to the abandoned continuation: kept, out of the way.
    for (const CheckpointInfo& c : list_checkpoints(checkpoint_dir())) {
      if (c.step > step_) {
        log::warn("set aside {} as {}", c.path, set_aside_checkpoint(c.path, "superseded"));
      }
    }
  } else {
    if (!resumed && options_.resume == "auto") {
      const std::string moved = RunDirectory::set_aside_files(run_path.string());
      if (!moved.empty()) {
        log::warn("{} held a run without a checkpoint: its files were moved to {}",
                  run_path.string(), moved);
      }
    }
    run_dir_.emplace(RunDirectory::create(config_.run.out_dir, config_.run.name));
  }
  run_dir_->write_config(to_yaml(config_));
  // Every start, fresh or resumed, in the history that resumes never cut back.
  JsonObject segment = JsonObject()
                           .add("started_utc", utc_now())
                           .add("start_step", step_)
                           .add("resumed_from", resumed ? resumed->path : std::string())
                           .add("num_dcs", topo_.num_dcs)
                           .add("world_size", topo_.world_size)
                           .add("placement", placement_json());
  if (const auto job = slurm_job_from_env()) segment.add("slurm", job->json());
  run_dir_->append_segment(segment);
  log::info("run directory: {}", run_dir_->path());
  log_checkpoint_estimate();
}

}  // namespace autoloco
