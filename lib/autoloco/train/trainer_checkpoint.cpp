// The Trainer's checkpoints (docs/checkpoints.md): how the ranks agree that a checkpoint is
// complete before it is committed, each writing its files in parallel (what they hold:
// trainer_checkpoint_files.cpp; the resume: trainer_resume.cpp), and the start log's estimate
// of a checkpoint's cost. Everything here is collective over the world.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>
#include <utility>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/write_rate.hpp"
#include "autoloco/comm/text_collectives.hpp"
#include "autoloco/metrics/progress.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/train/inner_shard.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/signals.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

// For the test of a job killed while writing: AUTOLOCO_TEST_KILL_IN_CHECKPOINT=STEP makes world
// rank 0 kill itself after the data files of that step's checkpoint, before its manifest.
void maybe_die_for_test(int64_t step, int rank) {
  const char* at = std::getenv("AUTOLOCO_TEST_KILL_IN_CHECKPOINT");
  if (rank == 0 && at && std::atoll(at) == step) std::raise(SIGKILL);
}

}  // namespace

std::string Trainer::checkpoint_dir() const {
  return (fs::path(config_.run.out_dir) / config_.run.name / "checkpoints").string();
}

int64_t Trainer::checkpoint_bytes_rank0() const {
  constexpr int64_t kFloat = sizeof(float);
  const int64_t numel = instances_[0].params->numel();
  const int64_t members = topo_.ranks_per_dc;
  int64_t bytes = 0;
  if (sync_) {
    // The anchor and each outer state (momentum is made by the first outer step; one
    // fragment's optimizer names them without gathering the whole): |θ| each, or the shard.
    const int64_t vectors =
        1 + static_cast<int64_t>(sync_->outer().at(0).optimizer().state().size());
    bytes +=
        vectors * kFloat * (sync_->outer().sharded() ? (numel + members - 1) / members : numel);
    // The residual is the hierarchical all-reduce's shard in every mode.
    if (config_.outer.error_feedback) bytes += kFloat * ((numel + members - 1) / members);
  }
  for (const ModelInstance& inst : instances_) {
    bytes += inst.params->values().numel() * kFloat;  // the replica, or its shard
    if (dynamic_cast<const MomentOptimizer*>(inst.optimizer.get()) != nullptr) {
      bytes += 2 * kFloat * inst.shard->span().count();  // the moments, or their shards
    }
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

}  // namespace autoloco
