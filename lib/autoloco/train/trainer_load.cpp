// The Trainer's load of one checkpoint (docs/checkpoints.md): the global file (its large
// datasets once per dc), the dc's file and the rank's own, into every part of the run's state.
// trainer_resume.cpp chooses the checkpoint and falls back when a load fails.
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <tuple>

#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/train/outer_checkpoint.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"

namespace autoloco {
namespace {

// Elements [span.begin(), + span.count()) of vector `name`: whole in `whole_file`, or in the
// pieces of `piece_files`.
torch::Tensor read_shard(const H5Reader& whole_file,
                         const std::vector<const H5Reader*>& piece_files, const std::string& name,
                         const ShardSpan& span) {
  FlatPieces pieces(name, span.numel);
  pieces.add_whole(whole_file);
  for (const H5Reader* file : piece_files)
    pieces.add(*file, {});
  return read_span(pieces, span);
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

// The sync in flight, as the global file holds it (the same on every rank; its sum whole there
// or in pieces): read with the rest of the global file, before any rank reads its own files, so
// that the dc's broadcast of its sum never waits for a member that failed on a file of its own.
std::optional<PendingSync> read_pending_global(const OuterFiles& files, SyncPipeline& sync,
                                               const TopologyChange& change, Communicator& intra) {
  const H5Reader& g = *files.global;
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
  load_pending_sum(files, sync.outer(), p.round.in.fragment, intra);
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
  CheckpointReaders files(path, m);
  Resumed r;
  r.path = path;
  const int old_members = topology_change_.from_members;
  // The global file first, on every rank alike: its whole vectors are broadcast inside each dc
  // (outer_checkpoint.cpp), which must come before any read of a rank's own files can fail.
  std::optional<PendingSync> pending;
  {
    const H5Reader& g = files.open(kGlobalFile);
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
      // A sharded run wrote the outer vectors as pieces of its dc 0's rank files.
      OuterFiles outer{&g, {}};
      if (!g.has("outer/anchor")) outer.pieces = files.dc_rank_files(0, old_members);
      load_outer(outer, sync_->outer(), *intra_mpi_);
      controller_->load_state(g.read_f64("controller/state"));
      pending = read_pending_global(outer, *sync_, topology_change_, *intra_mpi_);
    }
  }
  const int source_dc = topology_change_.source_dc(topo_.dc);
  {
    const std::string name = dc_file(source_dc);
    const H5Reader& d = files.open(name);
    keep_instances(
        d.has("instances/active") ? d.read_i64("instances/active") : std::vector<int64_t>{0},
        path + "/" + name);
    const std::vector<const H5Reader*> members = files.dc_rank_files(source_dc, old_members);
    for (ModelInstance& inst : instances_) {
      const std::string at = instance_prefix(inst.id);
      // Whole in the dc's file, or the pieces of its members' rank files (topology.shard full):
      // this member reads what it keeps of the replica, whatever shard mode wrote it.
      FlatParams& params = *inst.params;
      const ShardSpan kept = params.keeps_all()
                                 ? ShardSpan(params.numel(), 1, 0)
                                 : ShardSpan(params.numel(), topo_.ranks_per_dc, topo_.member);
      {
        torch::NoGradGuard no_grad;
        params.values().copy_(read_shard(d, members, at + "replica/values", kept));
      }
      if (auto* adamw = dynamic_cast<MomentOptimizer*>(inst.optimizer.get())) {
        // Whole in the dc's file, or the pieces of its members' rank files: this member reads
        // its shard of them, whatever shard mode and ranks_per_dc wrote them.
        const ShardSpan& span = inst.shard->span();
        adamw->set_state(d.read_int(at + "adamw/step"),
                         read_shard(d, members, at + "adamw/exp_avg", span),
                         read_shard(d, members, at + "adamw/exp_avg_sq", span));
      }
      // Checkpoints from before adaptive batches ran a fixed batch, which keeps no state.
      inst.batch->load_state(d.has(at + "batch/state") ? d.read_f64(at + "batch/state")
                                                       : std::vector<double>{});
    }
  }
  {
    // A rank that continues one of the checkpoint's reads its file; a new one (a new dc, or a
    // member past the old count) reads one of its source dc's for what is the same on every
    // rank (clocks, counters).
    const bool fresh = topology_change_.fresh(topo_.dc, topo_.member);
    const std::string name = rank_file(topology_change_.source_rank(topo_.dc, topo_.member));
    const H5Reader& k = files.open(name);
    if (!fresh) load_rank_own_state(k, path + "/" + name);
    // The residuals are the dc's, split over its members: re-split from every old member's.
    if (sync_ && config_.outer.error_feedback && !topology_change_.fresh(topo_.dc) &&
        !load_residuals(files.dc_rank_files(source_dc, old_members), k,
                        !topology_change_.members_changed(), sync_->outer(), reducer_->members(),
                        reducer_->member()) &&
        topo_.world_rank == 0) {
      log::warn(
          "resume: '{}' is a checkpoint of format 1, whose error-feedback residuals cannot be "
          "re-split over {} members: they start from zero",
          path, topo_.ranks_per_dc);
    }
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
}

}  // namespace autoloco
