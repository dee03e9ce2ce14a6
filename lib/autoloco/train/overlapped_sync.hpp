// Streaming DiLoCo's overlap (Douillard et al. 2025, arXiv 2501.18512, Algorithm 2 with one
// fragment): at a round's end Δ_i is staged and the communication thread carries its
// all-reduce while the replica trains outer.overlap_steps (τ) more inner steps; then the outer
// step moves the anchor by the averaged Δ and the replica becomes
//   θ_local <- α θ_local + (1 − α) θ_anchor          (α = outer.overlap_alpha)
// The thread owns the inter-dc link (its ring waits patiently), a duplicate of the intra-dc
// communicator for the all-gather of the averaged shards, and the staging buffer while the
// sync is in flight. Only the link time that the τ steps did not cover is exposed.
#pragma once

#include <memory>

#include "autoloco/comm/comm_thread.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/train/sync_pipeline.hpp"

namespace autoloco {

class OverlappedSync final : public SyncPipeline {
 public:
  OverlappedSync(const Config& config, FlatParams& params, MpiCommunicator& intra, WanLink& link,
                 torch::Device state_device, const Timer& wall, OuterSharding sharding = {});
  ~OverlappedSync() override;

  std::optional<RoundStats> poll(FlatParams& params, int64_t step) override;
  std::optional<RoundStats> end_round(FlatParams& params, const RoundInput& in,
                                      int64_t step) override;
  std::optional<RoundStats> flush(FlatParams& params) override;
  std::optional<PendingSync> settle() override;
  void restore(const PendingSync& pending) override;
  bool in_flight() const override { return state_ != State::idle; }
  SyncClock clock() const override { return clock_; }
  void restore_clock(const SyncClock& clock) override { clock_ = clock; }
  std::string describe() const override;
  FragmentedOuter& outer() override { return outer_; }

  // Bytes of the buffers the communication thread works in, per rank.
  int64_t thread_buffer_bytes() const;

 private:
  enum class State { idle, running, arrived };
  // The fragment's OuterSync that the sync in flight uses.
  OuterSync& current() { return outer_.at(round_.in.fragment); }
  double compute_now() const { return wall_.seconds() - clock_.wait_s; }
  // Waits for the thread (if running); the wait is the main thread's, not compute.
  void await();
  RoundStats apply(FlatParams& params);

  int64_t tau_;
  double alpha_;
  int64_t numel_;  // parameters
  const Timer& wall_;
  WanLink& link_;
  MpiCommunicator thread_intra_;  // the thread's duplicate of the intra-dc communicator
  HierarchicalAllreduce reducer_;
  FragmentedOuter outer_;
  State state_ = State::idle;
  StagedRound round_;
  int64_t due_step_ = 0;
  double handed_at_ = 0.0;  // compute clock when the sync was handed to the thread
  SyncClock clock_;
  // Last: the destructor stops (cancels and joins) it before the members its job uses go.
  std::unique_ptr<CommThread> thread_;
};

}  // namespace autoloco
