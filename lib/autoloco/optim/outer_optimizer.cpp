#include "autoloco/optim/outer_optimizer.hpp"

#include "autoloco/util/error.hpp"

namespace autoloco {

NesterovOuter::NesterovOuter(double lr, double momentum, std::vector<MomentumChange> schedule,
                             bool nesterov)
    : lr_(lr), momentum_(momentum), schedule_(std::move(schedule)), nesterov_(nesterov) {}

double NesterovOuter::momentum_at(int64_t step) const {
  double mu = momentum_;
  for (const MomentumChange& c : schedule_) {
    if (step >= c.step) mu = c.mu;
  }
  return mu;
}

void NesterovOuter::step(torch::Tensor& anchor, const torch::Tensor& mean_delta,
                         const RoundStats& stats) {
  torch::NoGradGuard no_grad;
  last_mu_ = momentum_at(stats.step);
  if (last_mu_ == 0.0 && !buffer_.defined()) {
    // No momentum yet: skip the buffer; the update is exactly anchor − lr Δ̄ either way.
    anchor.sub_(mean_delta, lr_);
    return;
  }
  if (!buffer_.defined()) buffer_ = torch::zeros_like(anchor);
  buffer_.mul_(last_mu_).add_(mean_delta);
  if (nesterov_) {
    anchor.sub_(mean_delta + last_mu_ * buffer_, lr_);
  } else {
    anchor.sub_(buffer_, lr_);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> NesterovOuter::state() {
  return {{"outer_momentum", buffer_}};
}

std::unique_ptr<OuterOptimizer> make_outer_optimizer(const OuterConfig& outer) {
  if (outer.method == "diloco") {
    return std::make_unique<NesterovOuter>(outer.lr, outer.momentum, parse_momentum_schedule(outer),
                                           outer.nesterov);
  }
  if (outer.method == "local_sgd") {
    return std::make_unique<NesterovOuter>(1.0, 0.0, std::vector<MomentumChange>{}, false);
  }
  throw ConfigError("config key outer.method: '" + outer.method + "' has no outer optimizer");
}

}  // namespace autoloco
