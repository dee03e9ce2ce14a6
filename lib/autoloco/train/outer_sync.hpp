// The end of a round (DESIGN.md, data flow): pseudo-gradient Δ_i = anchor − replica, the
// hierarchical all-reduce of the token-weighted Δ_i with the round's scalars riding along, the
// round's statistics, the outer optimizer step on the anchor, and every replica reset to it.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/fragment_plan.hpp"
#include "autoloco/optim/outer_optimizer.hpp"
#include "autoloco/optim/round_stats.hpp"
#include "autoloco/train/replica_exchange.hpp"
#include "autoloco/train/topology_change.hpp"

namespace autoloco {

// What this dc brings to the round (identical on every member of the dc).
struct RoundInput {
  int64_t round = 0;
  int64_t step = 0;  // progress, as RoundStats::step
  int64_t H = 0;
  double loss = NAN;    // the dc's mean training loss over the round
  double lr_sum = 0.0;  // S_k
  double tokens = 0.0;  // the dc's tokens in the round
  double nominal_tokens =
      0.0;               // a full dc's tokens in a round of H steps; weights are relative to it
  double seconds = 0.0;  // the dc's compute seconds in the round
  int dc = 0;
  int64_t fragment = 0;     // which of outer.fragments this sync carries
  double next_batch = 0.0;  // the dc's sequences per rank in the next round
  double demand = NAN;      // what its batch test asked for
};

// outer.state_device for a run on `device` with `parameters` parameters: auto keeps the outer
// state next to the replica on a GPU up to kAutoDeviceParameters (8 GB of fp32 anchor and
// momentum), where the round's arithmetic is fastest, and on the host beyond, where GPU memory
// is better spent on activations.
constexpr int64_t kAutoDeviceParameters = int64_t{1} << 30;
torch::Device outer_state_device(const std::string& state_device, torch::Device device,
                                 int64_t parameters);

// The inter-dc wire format of outer.wire_dtype, wire_block and wire_rounding.
WireCodec wire_codec(const OuterConfig& outer);

// A round's message between its stages: staged on the main thread, reduced on whichever thread
// carries the link, finished on the main thread. After reduce() the staging buffer holds
// Σ_i w_i Δ_i and `scalars` their sums, identical on every rank.
struct StagedRound {
  RoundInput in;
  std::vector<double> scalars;
  double link_s = 0.0;     // the WAN model's link seconds of its all-reduce
  double wall_s = 0.0;     // real seconds this rank spent in it
  int64_t dc_bytes = 0;    // bytes of one dc's message
  int64_t sent_bytes = 0;  // bytes all dcs sent on the link
};

// How the members of a dc hold the outer state (topology.shard, ALGORITHMS.md §5): unsharded,
// each keeps the whole anchor and momentum of the fragment; sharded, member m keeps shard m
// (ShardSpan) of them and of the message, which is exactly what the hierarchical all-reduce
// gives it, and the round's end all-gathers the replica instead of the averaged message.
struct OuterSharding {
  bool sharded = false;
  // topology.shard full: the replica is sharded too (each member keeps its shard of the
  // parameters), and its outer elements come from their keepers (replica_exchange.hpp).
  bool full = false;
  Communicator* host = nullptr;     // the dc's members, host buffers, the main thread
  Communicator* replica = nullptr;  // the dc's members, where the replica lives (NCCL on GPUs)
};

class OuterSync {
 public:
  // Scalars that ride in each round's inter-dc message (weight w_i, loss, w_i ‖Δ_i‖², ‖Δ_i‖,
  // tokens, S_k, round seconds, w_i² ‖Δ_i‖²), then two slots per dc (next batch, batch demand)
  // that only that dc fills, so that the sum tells every rank every dc's batch.
  static constexpr size_t kRoundScalars = 8;
  static size_t message_scalars(int dcs) { return kRoundScalars + 2 * static_cast<size_t>(dcs); }
  // The messages of checkpoints written before w_i² ‖Δ_i‖² rode along: 7 round scalars.
  static constexpr size_t kLegacyRoundScalars = 7;
  static size_t legacy_message_scalars(int dcs) {
    return kLegacyRoundScalars + 2 * static_cast<size_t>(dcs);
  }
  // A checkpointed message's scalars of `change.from_dcs` dcs (message_scalars or
  // legacy_message_scalars of them) laid out for `change.to_dcs` as message_scalars(to_dcs): a
  // legacy message gets w_i² ‖Δ_i‖² = w_i ‖Δ_i‖² (exact when every weight was 1), and a sync in
  // flight across a topology change has its per-dc slots follow each dc's source. Any other
  // length comes back unchanged, for the caller to refuse.
  static std::vector<double> remap_scalars(const std::vector<double>& scalars,
                                           const TopologyChange& change);

  // Fragment `fragment` of `plan` (the whole model when the plan is whole): its anchor starts as
  // `params`' current values there; the outer state lives on `state_device`; H0 (interval.H)
  // is the reference interval of the outer correction; `rounding_seed` (run.seed) seeds
  // stochastic rounding on the wire. `plan` must outlive it.
  OuterSync(const OuterConfig& outer, int64_t H0, FlatParams& params, const FragmentPlan& plan,
            size_t fragment, HierarchicalAllreduce& reducer, WanLink& link,
            torch::Device state_device, uint64_t rounding_seed = 0, OuterSharding sharding = {});
  ~OuterSync();

  // One round's end, blocking, on every rank of the world together: stage, reduce, finish, and
  // the replica reset to the new anchor. Returns the round's statistics.
  RoundStats sync(FlatParams& params, const RoundInput& in);

  // Main thread: Δ_i = anchor − replica into the host staging buffer. With `asynchronous` and
  // the replica on a GPU, Δ_i (or the replica, for a host anchor) is snapshotted on the compute
  // stream and copied to the pinned buffer on a side stream; reduce() waits for that copy. The
  // replica may change as soon as this returns.
  StagedRound stage(FlatParams& params, const RoundInput& in, bool asynchronous = false);
  // Any one thread: weights Δ_i by the dc's tokens, fills the message's scalars and runs the
  // hierarchical all-reduce. Touches only the staging buffer (and reads the anchor). A Δ_i that
  // is not finite is a TrainingError naming the dc and the round.
  void reduce(StagedRound& r);
  // Main thread: the token-weighted mean, the round's statistics and the outer step on the
  // anchor (on the compute stream). The replica is not touched.
  RoundStats finish(const StagedRound& r);
  // replica <- alpha replica + (1 − alpha) anchor on this fragment; alpha = 0 copies the anchor.
  void merge(FlatParams& params, double alpha);

  // This fragment's anchor (its elements in the plan's range order; sharded: elements
  // [span().begin(), + span().count()) of them).
  torch::Tensor& anchor() { return anchor_; }
  // Which of the fragment's elements this member keeps (all of them unsharded).
  const ShardSpan& span() const { return span_; }
  bool sharded() const { return sharding_.sharded; }
  // The host buffer of the message (a pending result's Σ w_i Δ_i, for checkpoints): the
  // anchor's elements first (sharded: then the zero padding of the shard).
  torch::Tensor& staging() { return staging_; }
  // outer.error_feedback: what rounding this rank's shard of the last pseudo-gradient lost
  // (undefined without error feedback).
  torch::Tensor& residual() { return residual_; }
  // Bytes of the buffers that a sync on another thread uses (staging, GPU snapshot).
  int64_t buffer_bytes() const;
  // The elastic mode: the message's per-dc slots are the run's dc ids (elastic.dcs), while the
  // dcs that take part (the link's group) change with the quorum. 0: the link's dcs.
  void set_dc_slots(int slots) { dc_slots_ = slots; }
  OuterOptimizer& optimizer() { return *optimizer_; }
  const OuterOptimizer& optimizer() const { return *optimizer_; }

 private:
  // Δ_i = anchor − replica into staging_ (host, fp32).
  void stage_delta(FlatParams& params);
  void stage_delta_async(FlatParams& params);
  // The side stream's copy into staging_ (after stage_delta_async), then Δ_i on the host.
  void await_staging();
  // The replica's elements that the anchor holds.
  torch::Tensor replica_part(FlatParams& params) const;
  // The message's elements that the anchor holds (all of staging_ unsharded).
  torch::Tensor message() { return staging_.narrow(0, 0, anchor_.numel()); }
  // ‖x‖² of the whole fragment's vector when this member holds `x` of it: summed over the
  // members (with `members`) when sharded.
  double whole_norm_sq(const torch::Tensor& x, Communicator* members) const;

  struct DeviceStaging;  // the GPU side stream and its event (outer_sync.cpp)
  WireCodec codec_;
  double feedback_beta_;  // outer.error_feedback_beta
  uint64_t rounding_seed_;
  const FragmentPlan& plan_;
  size_t fragment_;
  std::unique_ptr<OuterOptimizer> optimizer_;
  HierarchicalAllreduce& reducer_;
  WanLink& link_;
  torch::Tensor anchor_;    // fp32, state device (pinned when on the host and params on a GPU)
  torch::Tensor staging_;   // fp32 host buffer for the wire (pinned when params live on a GPU)
  torch::Tensor residual_;  // fp32 host, this member's shard (outer.error_feedback)
  std::unique_ptr<DeviceStaging> device_staging_;
  OuterSharding sharding_;
  ShardSpan span_;
  std::unique_ptr<ReplicaExchange> exchange_;  // topology.shard full
  int dc_slots_ = 0;
};

}  // namespace autoloco
