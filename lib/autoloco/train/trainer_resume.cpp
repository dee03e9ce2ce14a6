// The Trainer's resume (docs/checkpoints.md): which checkpoint it takes, the check that this run
// can continue it, the fallback to an older one when a load fails (trainer_load.cpp), and the
// reopened run directory. Everything here is collective over the world.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/compatibility.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/comm/text_collectives.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/slurm_job.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

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

// "runs/a/checkpoints/step_50/" and "runs/a/./checkpoints/step_50" name ".../step_50": the
// in-place test compares the checkpoint's grandparent with the run directory.
std::string checkpoint_path(const std::string& request) {
  const fs::path p = fs::path(request).lexically_normal();
  return (p.filename().empty() ? p.parent_path() : p).string();
}

}  // namespace

std::vector<std::string> Trainer::resume_candidates(const std::string& request) {
  std::string message;
  std::string joined;
  if (topo_.world_rank == 0) {
    if (request == "auto") {
      for (const CheckpointInfo& c : list_checkpoints(checkpoint_dir())) {
        if (c.ok()) {
          joined += c.path + "\n";
        } else if (c.manifest && !readable_checkpoint_format(c.manifest->format_version)) {
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
  if (!readable_checkpoint_format(format)) {
    throw ResumeMismatch(
        fmt::format("'{}' has checkpoint format {}; this autoloco reads formats {} to {}", path,
                    format, kOldestCheckpointFormat, kCheckpointFormat));
  }
  const int64_t world = g.read_int("topology/world_size");
  const int64_t per_dc = g.read_int("topology/ranks_per_dc");
  if (per_dc <= 0 || world <= 0 || world % per_dc != 0) {
    throw CheckpointError(fmt::format(
        "'{}': topology/world_size {} is no whole number of dcs of topology/ranks_per_dc {}: the "
        "file is damaged; use another checkpoint",
        g.path(), world, per_dc));
  }
  topology_change_ = TopologyChange{static_cast<int>(world / per_dc), topo_.num_dcs,
                                    static_cast<int>(per_dc), topo_.ranks_per_dc};
  if (topology_change_.changed() && !options_.allow_topology_change) {
    throw ResumeMismatch(fmt::format(
        "cannot resume from '{}' without --allow-topology-change: it was written by {} dcs x {} "
        "members, this job has {} dcs x {}. With the flag the run would go on as {} (replicas, "
        "AdamW and batch state; the anchor, outer optimizer, controllers and counters carry "
        "over). Pass it, or launch {} ranks with topology.ranks_per_dc = {}",
        path, topology_change_.from_dcs, per_dc, topo_.num_dcs, topo_.ranks_per_dc,
        topology_change_.describe(), world, per_dc));
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
  const int64_t per_step = topology_change_.saved_step_tokens(initial_tokens_per_step_);
  const auto [base_step, base_tokens] = progress_base(g);
  return base_step + (g.read_int("counters/tokens") - base_tokens) / per_step;
}

void Trainer::find_resume_candidates(const std::string& request) {
  if (request.empty()) return;
  const Watch io("a resume's listing of checkpoints (every rank waits for world rank 0)",
                 WatchBound{config_.ckpt.timeout_s, "ckpt.timeout_s"});
  resume_candidates_ = resume_candidates(request);
  int64_t damaged = static_cast<int64_t>(rejected_checkpoints_.size());
  AUTOLOCO_MPI(MPI_Bcast(&damaged, 1, MPI_INT64_T, 0, world_comm_->handle()));
  if (resume_candidates_.empty() && damaged > 0) {
    throw CheckpointError(fmt::format(
        "--resume auto: every checkpoint in '{}' is incomplete or damaged (see the warnings "
        "above). Start a new run with another run.name, or resume one by hand with --resume PATH",
        checkpoint_dir()));
  }
  if (!resume_candidates_.empty() && !config_.model.init_from.empty() && topo_.world_rank == 0) {
    log::info("model.init_from {}: its weights are not read, the resume restores a checkpoint",
              config_.model.init_from);
  }
}

std::optional<Trainer::Resumed> Trainer::resume(const std::string& request) {
  if (request.empty()) return std::nullopt;
  const Watch io("a resume's read of a checkpoint (every rank waits for the slowest reader)",
                 WatchBound{config_.ckpt.timeout_s, "ckpt.timeout_s"});
  const MPI_Comm world = world_comm_->handle();
  const std::vector<std::string>& candidates = resume_candidates_;
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
          log::info("resume: topology changed, {}", topology_change_.describe());
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
      // This run's directory holds that checkpoint: no need to write it again (a checkpoint
      // of another run, e.g. one forked from it, is written anew when asked).
      std::error_code ec;
      if (fs::equivalent(fs::path(path).parent_path(), checkpoint_dir(), ec)) {
        last_checkpoint_step_ = step_;
      }
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
