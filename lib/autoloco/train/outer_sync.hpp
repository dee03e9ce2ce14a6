// The end of a round (DESIGN.md, data flow): pseudo-gradient Δ_i = anchor − replica, the
// hierarchical all-reduce of the token-weighted Δ_i with the round's scalars riding along, the
// round's statistics, the outer optimizer step on the anchor, and every replica reset to it.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/outer_optimizer.hpp"
#include "autoloco/optim/round_stats.hpp"

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

class OuterSync {
 public:
  // Scalars that ride in each round's inter-dc message (weight, loss, ‖Δ_i‖², ‖Δ_i‖, tokens,
  // S_k, round seconds), then two slots per dc (next batch, batch demand) that only that dc
  // fills, so that the sum tells every rank every dc's batch.
  static constexpr size_t kRoundScalars = 7;
  static size_t message_scalars(int dcs) { return kRoundScalars + 2 * static_cast<size_t>(dcs); }

  // The anchor starts as `params`' current values; the outer state lives on `state_device`; H0
  // (interval.H) is the reference interval of the outer correction.
  OuterSync(const OuterConfig& outer, int64_t H0, FlatParams& params,
            HierarchicalAllreduce& reducer, WanLink& link, torch::Device state_device);

  // One round's end, on every rank of the world together. Returns the round's statistics.
  RoundStats sync(FlatParams& params, const RoundInput& in);

  torch::Tensor& anchor() { return anchor_; }
  OuterOptimizer& optimizer() { return *optimizer_; }
  const OuterOptimizer& optimizer() const { return *optimizer_; }

 private:
  // Δ_i = anchor − replica into staging_ (host, fp32).
  void stage_delta(FlatParams& params);

  DType wire_;
  std::unique_ptr<OuterOptimizer> optimizer_;
  HierarchicalAllreduce& reducer_;
  WanLink& link_;
  torch::Tensor anchor_;   // fp32, state device (pinned when on the host and params on a GPU)
  torch::Tensor staging_;  // fp32 host buffer for the wire (pinned when params live on a GPU)
};

}  // namespace autoloco
