#include "autoloco/train/outer_sync.hpp"

#include <cmath>
#include <vector>

namespace autoloco {
namespace {

// The scalars that ride in the round's inter-dc message, summed over dcs.
enum Scalar { kWeight, kLoss, kDeltaSq, kDeltaNorm, kTokens, kLrSum, kSeconds, kNumScalars };
static_assert(kNumScalars == OuterSync::kRoundScalars);

}  // namespace

torch::Device outer_state_device(const std::string& state_device, torch::Device device,
                                 int64_t parameters) {
  if (state_device == "device") return device;
  if (state_device == "auto" && parameters <= kAutoDeviceParameters) return device;
  return torch::kCPU;
}

OuterSync::OuterSync(const OuterConfig& outer, int64_t H0, FlatParams& params,
                     HierarchicalAllreduce& reducer, WanLink& link, torch::Device state_device)
    : wire_(outer.wire_dtype == "bf16" ? DType::bf16 : DType::f32),
      optimizer_(make_outer_optimizer(outer, H0)),
      reducer_(reducer),
      link_(link) {
  torch::NoGradGuard no_grad;
  const bool gpu = params.values().is_cuda();
  anchor_ = params.values().detach().to(state_device, torch::kFloat, false, /*copy=*/true);
  // Host buffers that meet a GPU are pinned: the DMA engine then copies them directly, at full
  // link speed, instead of through the driver's pageable bounce buffer.
  if (gpu && !anchor_.is_cuda()) anchor_ = anchor_.pin_memory();
  staging_ = torch::empty({params.numel()},
                          torch::TensorOptions().dtype(torch::kFloat).pinned_memory(gpu));
}

void OuterSync::stage_delta(FlatParams& params) {
  const torch::Tensor& replica = params.values();
  if (replica.is_cuda() && !anchor_.is_cuda()) {
    // The replica comes to the host anchor: Δ_i = anchor − replica as anchor + (−replica),
    // which rounds exactly like the subtraction.
    staging_.copy_(replica);
    staging_.neg_().add_(anchor_);
    return;
  }
  // Where the anchor lives (the CPU, or the GPU next to the replica), then to the host.
  staging_.copy_(anchor_ - replica.to(anchor_.device()));
}

RoundStats OuterSync::sync(FlatParams& params, const RoundInput& in) {
  torch::NoGradGuard no_grad;
  stage_delta(params);
  const double delta_norm = staging_.norm().item<double>();
  const double weight = in.tokens / in.nominal_tokens;
  if (weight != 1.0) staging_.mul_(weight);

  const int g = link_.dcs();
  std::vector<double> scalars(message_scalars(g), 0.0);
  double* next_batch = scalars.data() + kNumScalars;
  double* demand = next_batch + g;
  next_batch[in.dc] = in.next_batch;
  // NaN would poison the sum: a dc without an answer sends −1.
  demand[in.dc] = std::isnan(in.demand) ? -1.0 : in.demand;
  scalars[kWeight] = weight;
  scalars[kLoss] = in.loss;
  scalars[kDeltaSq] = delta_norm * delta_norm;
  scalars[kDeltaNorm] = delta_norm;
  scalars[kTokens] = in.tokens;
  scalars[kLrSum] = in.lr_sum;
  scalars[kSeconds] = in.seconds;
  const double link_before = link_.link_seconds();
  const int64_t bytes_before = link_.dc_bytes();
  reducer_.allreduce_sum(staging_.data_ptr<float>(), static_cast<size_t>(staging_.numel()),
                         scalars.data(), scalars.size(), wire_);
  // Token-weighted mean: Σ w_i Δ_i / Σ w_i, a plain division by G when batches are equal.
  staging_.div_(scalars[kWeight]);

  RoundStats s;
  s.round = in.round;
  s.step = in.step;
  s.H = in.H;
  s.dcs = g;
  s.loss = scalars[kLoss] / g;
  s.lr_sum = scalars[kLrSum] / g;
  s.tokens = scalars[kTokens];
  s.mean_delta_sq = scalars[kDeltaSq] / g;
  s.mean_delta_norm = scalars[kDeltaNorm] / g;
  s.round_s = scalars[kSeconds] / g;
  const double avg_norm = staging_.norm().item<double>();
  s.avg_delta_sq = avg_norm * avg_norm;
  s.rho = RoundStats::agreement(g, s.mean_delta_sq, s.avg_delta_sq);
  s.next_batch.assign(next_batch, next_batch + g);
  for (int d = 0; d < g; ++d)
    s.demand.push_back(demand[d] < 0.0 ? std::nan("") : demand[d]);
  s.link_s = link_.link_seconds() - link_before;
  s.dc_bytes = link_.dc_bytes() - bytes_before;

  const torch::Tensor mean_delta =
      anchor_.is_cuda() ? staging_.to(anchor_.device(), /*non_blocking=*/false) : staging_;
  optimizer_->step(anchor_, mean_delta, s);
  params.values().copy_(anchor_);
  return s;
}

}  // namespace autoloco
