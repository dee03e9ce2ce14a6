#include "autoloco/sched/link_aware_interval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace autoloco {

double exposed_link_seconds(const std::vector<double>& sync_link_s, int64_t tau, double step_s) {
  double exposed = 0.0;
  for (const double T : sync_link_s)
    exposed += std::max(0.0, T - static_cast<double>(tau) * step_s);
  return exposed;
}

int64_t utilisation_floor(double target, double step_s, double exposed_s) {
  if (!(step_s > 0.0) || !(exposed_s > 0.0) || !(target > 0.0)) return 0;
  const double H = target * exposed_s / ((1.0 - target) * step_s);
  // The rounding of H t u* / ... must not cost the last step: ceil of a value a hair above an
  // integer would add one.
  return static_cast<int64_t>(std::ceil(H * (1.0 - 1e-12)));
}

LinkAwareInterval::LinkAwareInterval(std::unique_ptr<IntervalController> inner, double target,
                                     int64_t tau, int64_t max_H)
    : inner_(std::move(inner)), target_(target), tau_(tau), max_H_(max_H) {}

int64_t LinkAwareInterval::next_interval(const RoundStats& stats) {
  asked_ = inner_->next_interval(stats);
  step_s_ = stats.H > 0 ? stats.round_s / static_cast<double>(stats.H) : 0.0;
  const std::vector<double> syncs =
      stats.sync_link_s.empty() ? std::vector<double>{stats.link_s} : stats.sync_link_s;
  exposed_s_ = exposed_link_seconds(syncs, tau_, step_s_);
  floor_ = std::min(max_H_, utilisation_floor(target_, step_s_, exposed_s_));
  return std::max(asked_, floor_);
}

std::vector<std::pair<std::string, double>> LinkAwareInterval::decision() const {
  std::vector<std::pair<std::string, double>> d = inner_->decision();
  d.emplace_back("controller_H", static_cast<double>(asked_));
  d.emplace_back("link_floor_H", static_cast<double>(floor_));
  d.emplace_back("step_s", step_s_);
  d.emplace_back("exposed_link_s", exposed_s_);
  return d;
}

std::string LinkAwareInterval::describe() const {
  return fmt::format("{}; link-aware: H at least what keeps {:.0f}% compute utilisation",
                     inner_->describe(), 100.0 * target_);
}

}  // namespace autoloco
