#include "autoloco/sched/qsr_interval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace autoloco {

int64_t QsrInterval::decide(const RoundStats& s) {
  const double lr = s.mean_lr();
  if (!(lr > 0.0)) return H_max_;
  // Compare in floating point first: (α/η)² can exceed what an int64 holds as η → 0.
  const double h = std::floor((alpha_ / lr) * (alpha_ / lr));
  if (h >= static_cast<double>(H_max_)) return H_max_;
  return std::max(H0_, static_cast<int64_t>(h));
}

std::string QsrInterval::describe() const {
  return fmt::format("qsr: H = max(H_0, floor(({} / lr_k)^2)), {}", alpha_, bounds());
}

void QsrInterval::load_state(const std::vector<double>& state) {
  check_state_size(name(), state, 0);
}

}  // namespace autoloco
