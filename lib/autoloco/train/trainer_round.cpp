// The Trainer at a sync's end and landing (outer methods): what the dc brings to a round's (with
// fragments, a fragment's) message, the batch decisions at a cycle's end, and the counters, the
// next interval and the log when a sync's outer step lands.
#include <algorithm>
#include <array>

#include "autoloco/train/trainer.hpp"
#include "autoloco/util/log.hpp"

namespace autoloco {

BatchDecision Trainer::decide_batches(const std::vector<NoiseSums>& sums) {
  // The dc's replica: its instances' mean, weighted by this round's batches.
  average_into_first(instances_);
  BatchDecision dc;
  dc.batch = 0;
  dc.demand = 0.0;
  for (size_t i = 0; i < instances_.size(); ++i) {
    const BatchDecision d = instances_[i].batch->next_batch(sums[i]);
    instances_[i].demand = d.demand;
    dc.batch += d.batch;
    dc.demand += d.demand;  // NaN if any instance had no answer
  }
  return dc;
}

std::optional<std::pair<size_t, size_t>> Trainer::due_merge() const {
  if (instances_.size() < 2 || (rounds_ + 1) % config_.batch.merge_every != 0) return std::nullopt;
  std::vector<double> demands;
  std::vector<int64_t> batches;
  for (const ModelInstance& inst : instances_) {
    demands.push_back(inst.demand);
    batches.push_back(inst.batch->plan().batch);
  }
  return merge_pair(demands, batches);
}

void Trainer::merge_two_instances(size_t i, size_t j) {
  if (options_.print_progress && topo_.member == 0) {
    log::info(
        "dc {}: after round {} instance {} (batch {}) merges into instance {} (batch {}); {} "
        "left",
        dc_id(), rounds_, instances_[j].id, instances_[j].batch->plan().batch, instances_[i].id,
        instances_[i].batch->plan().batch, instances_.size() - 1);
  }
  merge_instances(instances_[i], instances_[j]);
  instances_.erase(instances_.begin() + static_cast<std::ptrdiff_t>(j));
}

RoundInput Trainer::round_input(int64_t fragment) {
  const SyncPeriod& period = periods_[static_cast<size_t>(fragment)];
  // Batches change only at a cycle's end (fragment 0's sync; every sync without fragments).
  const bool cycle_end = fragment == 0;
  // One tiny intra-dc collective per sync: the dc's means, so that every member puts the same
  // scalars into the message, and at a cycle's end its gradient-noise sums.
  constexpr size_t kNoise = NoiseSums::kCount;
  std::vector<double> dc_sums(2 + (cycle_end ? kNoise * instances_.size() : 0), 0.0);
  dc_sums[0] = period.loss_sum / static_cast<double>(period.steps);
  dc_sums[1] = compute_seconds() - period.start_compute_s;
  const auto sequence_tokens = static_cast<double>(topo_.ranks_per_dc * config_.model.seq_len);
  RoundInput in;
  in.round = rounds_ + 1;
  in.fragment = fragment;
  in.step = progress_step();
  in.H = period.steps;
  in.lr_sum = period.lr_sum;
  // Dcs weigh in by their tokens (ALGORITHMS.md §1): relative to the first round's batch, so
  // that equal batches give weights of exactly 1.
  in.tokens = static_cast<double>(period.sequences) * sequence_tokens;
  in.nominal_tokens = static_cast<double>(initial_dc_batch_ * period.steps) * sequence_tokens;
  in.dc = dc_id();
  if (!cycle_end) {
    intra_mpi_->allreduce_sum(dc_sums.data(), dc_sums.size());
    in.loss = dc_sums[0] / topo_.ranks_per_dc;
    in.seconds = dc_sums[1] / topo_.ranks_per_dc;
    in.next_batch = static_cast<double>(dc_batches_[static_cast<size_t>(topo_.dc)]);
    return in;
  }
  for (size_t i = 0; i < instances_.size(); ++i) {
    const auto noise = instances_[i].round_noise.to_array();
    std::copy(noise.begin(), noise.end(),
              dc_sums.begin() + static_cast<std::ptrdiff_t>(2 + kNoise * i));
    instances_[i].round_noise = NoiseSums{};
  }
  intra_mpi_->allreduce_sum(dc_sums.data(), dc_sums.size());
  std::vector<NoiseSums> noise(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) {
    std::array<double, kNoise> a{};
    std::copy_n(dc_sums.begin() + static_cast<std::ptrdiff_t>(2 + kNoise * i), kNoise, a.begin());
    noise[i] = NoiseSums::from_array(a);
  }
  BatchDecision decision = decide_batches(noise);
  // A merge after this round changes the dc's next batch by the merged plan's rounding: the
  // message must carry the batch the dc will really run.
  pending_merge_ = due_merge();
  if (pending_merge_) {
    const BatchController& into = *instances_[pending_merge_->first].batch;
    const int64_t from = instances_[pending_merge_->second].batch->plan().batch;
    decision.batch += into.absorbed(from) - into.plan().batch - from;
  }
  in.loss = dc_sums[0] / topo_.ranks_per_dc;
  in.seconds = dc_sums[1] / topo_.ranks_per_dc;
  in.next_batch = static_cast<double>(decision.batch);
  in.demand = decision.demand;
  return in;
}

void Trainer::end_round(int64_t fragment, StepResult& r) {
  // A period as short as tau (the run's last) ends before its predecessor landed: land it now.
  if (auto late = sync_->flush(params())) on_round(*late, r);
  if (config_.interval.check_consistency && config_.outer.fragments > 1) check_sync_order(fragment);
  const RoundInput in = round_input(fragment);
  std::optional<RoundStats> landed =
      elastic_ ? elastic_round(in) : sync_->end_round(params(), in, step_);
  schedule_.synced(fragment, step_);
  periods_[static_cast<size_t>(fragment)] = SyncPeriod{};
  periods_[static_cast<size_t>(fragment)].start_compute_s = compute_seconds();
  // No steps are left to overlap the run's last sync.
  if (!landed && finished()) landed = sync_->flush(params());
  if (landed) on_round(*landed, r);
  if (landed && elastic_) elastic_committed();
}

void Trainer::on_round(const RoundStats& sync, StepResult& r) {
  landed_dc_bytes_ += sync.dc_bytes;
  peak_sync_dc_bytes_ = std::max(peak_sync_dc_bytes_, sync.dc_bytes);
  if (sync.fragment != 0) {
    // A fragment's sync within the cycle: its line, and its statistics for the cycle's.
    cycle_.add(sync);
    log_round(sync, dc_batch_sequences());  // batches change only at a cycle's end
    return;
  }
  const RoundStats s = cycle_.close(sync);
  for (size_t i = 1; i < instances_.size(); ++i) {
    torch::NoGradGuard no_grad;
    instances_[i].params->values().copy_(params().values());
  }
  last_round_batches_ = dc_batch_sequences();
  // The elastic mode runs fixed batches (validate.cpp), and its message's slots are dc ids.
  if (!elastic_) {
    for (size_t d = 0; d < dc_batches_.size(); ++d)
      dc_batches_[d] = std::llround(s.next_batch[d]);
  }
  ++rounds_;
  if (pending_merge_) merge_two_instances(pending_merge_->first, pending_merge_->second);
  pending_merge_.reset();
  h_per_round_.push_back(s.H);
  H_ = controller_->next_interval(s);
  if (config_.interval.check_consistency) check_round_consistency(s);
  // After the counters and the next H: the state every dc of the quorum must now hold alike.
  if (elastic_) elastic_hash_ = state_hash();
  log_round(sync, last_round_batches_);
  r.round = s;
}

}  // namespace autoloco
