#include "autoloco/optim/outer_optimizer.hpp"

#include <algorithm>

#include "autoloco/util/error.hpp"

namespace autoloco {

NesterovOuter::NesterovOuter(double lr, double momentum, std::vector<MomentumChange> schedule,
                             bool nesterov, OuterCorrection correction)
    : lr_(lr),
      momentum_(momentum),
      schedule_(std::move(schedule)),
      nesterov_(nesterov),
      correction_(correction) {}

double NesterovOuter::momentum_at(int64_t step) const {
  double mu = momentum_;
  for (const MomentumChange& c : schedule_) {
    if (step >= c.step) mu = c.mu;
  }
  return mu;
}

void NesterovOuter::step(torch::Tensor& anchor, torch::Tensor& mean_delta,
                         const RoundStats& stats) {
  torch::NoGradGuard no_grad;
  const OuterStep s = corrected_step(correction_, momentum_at(stats.step), lr_, stats.H);
  last_mu_ = s.momentum;
  last_lr_ = s.lr;
  if (last_mu_ == 0.0 && !buffer_.defined()) {
    // No momentum yet: skip the buffer; the update is exactly anchor − lr Δ̄ either way.
    anchor.sub_(mean_delta, last_lr_);
    return;
  }
  if (!buffer_.defined()) buffer_ = torch::zeros_like(anchor);
  buffer_.mul_(last_mu_).add_(mean_delta);
  if (nesterov_) {
    // Δ̄ + mu b into Δ̄'s storage, mu b rounded on its own first as in the two-temporary form
    // Δ̄ + mu * b; then the same update of the anchor, bit for bit.
    const torch::Tensor b = buffer_.view({-1});
    const torch::Tensor direction = mean_delta.view({-1});
    const int64_t n = direction.numel();
    if (!scratch_.defined() || scratch_.numel() < std::min(n, kScratchChunk)) {
      scratch_ = torch::empty({std::min(n, kScratchChunk)}, anchor.options());
    }
    for (int64_t begin = 0; begin < n; begin += kScratchChunk) {
      const int64_t len = std::min(kScratchChunk, n - begin);
      torch::Tensor mu_b = scratch_.narrow(0, 0, len);
      mu_b.copy_(b.narrow(0, begin, len)).mul_(last_mu_);
      direction.narrow(0, begin, len).add_(mu_b);
    }
    anchor.sub_(mean_delta, last_lr_);
  } else {
    anchor.sub_(buffer_, last_lr_);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> NesterovOuter::state() {
  return {{"momentum", buffer_}};
}

void NesterovOuter::load_state(const std::string& name, const torch::Tensor& value) {
  if (name != "momentum") {
    throw CheckpointError("the outer optimizer has no state '" + name + "'");
  }
  buffer_ = value.defined() ? value.clone() : torch::Tensor();
}

std::unique_ptr<OuterOptimizer> make_outer_optimizer(const OuterConfig& outer, int64_t H0) {
  if (outer.method == "diloco") {
    const OuterCorrection correction{parse_correction_mode(outer.correction), outer.correction_beta,
                                     H0};
    if (outer.momentum_mode == "error_feedback") {
      // SparseLoCo: anchor <- anchor − lr Δ̄, the residual's decay standing in for momentum.
      return std::make_unique<NesterovOuter>(outer.lr, 0.0, std::vector<MomentumChange>{}, false,
                                             correction);
    }
    return std::make_unique<NesterovOuter>(outer.lr, outer.momentum, parse_momentum_schedule(outer),
                                           outer.nesterov, correction);
  }
  if (outer.method == "local_sgd") {
    return std::make_unique<NesterovOuter>(1.0, 0.0, std::vector<MomentumChange>{}, false);
  }
  throw ConfigError("config key outer.method: '" + outer.method + "' has no outer optimizer");
}

}  // namespace autoloco
