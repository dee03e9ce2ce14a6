#include "autoloco/sched/adacomm_interval.hpp"

#include <fmt/format.h>

namespace autoloco {

int64_t AdaCommInterval::decide(const RoundStats& s) {
  const double lr = s.mean_lr();
  if (!(lr > 0.0) || !(s.loss > 0.0)) return s.H;  // nothing to scale by
  if (std::isnan(loss0_)) {
    loss0_ = s.loss;
    lr0_ = lr;
  }
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(H0_) * std::sqrt(lr0_ * s.loss / (lr * loss0_))));
}

std::string AdaCommInterval::describe() const {
  return fmt::format("adacomm: H = ceil(H_0 sqrt(lr_0 L_k / (lr_k L_0))), {}", bounds());
}

void AdaCommInterval::load_state(const std::vector<double>& state) {
  check_state_size(name(), state, 2);
  loss0_ = state[0];
  lr0_ = state[1];
}

}  // namespace autoloco
