#include "autoloco/train/sync_periods.hpp"

#include <fmt/format.h>

#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {

void CycleStats::add(const RoundStats& s) {
  mean_delta_sq_ += s.mean_delta_sq;
  avg_delta_sq_ += s.avg_delta_sq;
  mean_delta_norm_sq_ += s.mean_delta_norm * s.mean_delta_norm;
  dc_bytes_ += static_cast<double>(s.dc_bytes);
  link_s_.push_back(s.link_s);
}

RoundStats CycleStats::close(const RoundStats& last) {
  if (link_s_.empty()) return last;
  RoundStats c = last;
  c.mean_delta_sq += mean_delta_sq_;
  c.avg_delta_sq += avg_delta_sq_;
  // ‖Δ_i‖ of the whole model from its fragments' (the mean over dcs of a root is not the root
  // of the mean: an estimate, for the logs only).
  c.mean_delta_norm = std::sqrt(mean_delta_norm_sq_ + last.mean_delta_norm * last.mean_delta_norm);
  c.rho = RoundStats::agreement(c.dcs, c.mean_delta_sq, c.avg_delta_sq);
  c.dc_bytes += static_cast<int64_t>(dc_bytes_);
  c.sync_link_s = link_s_;
  c.sync_link_s.push_back(last.link_s);
  c.link_s = 0.0;
  for (const double T : c.sync_link_s)
    c.link_s += T;
  *this = CycleStats{};
  return c;
}

std::vector<double> CycleStats::state() const {
  std::vector<double> s = {mean_delta_sq_, avg_delta_sq_, mean_delta_norm_sq_, dc_bytes_};
  s.insert(s.end(), link_s_.begin(), link_s_.end());
  return s;
}

void CycleStats::load_state(const std::vector<double>& s) {
  if (s.size() < 4) {
    throw CheckpointError(fmt::format(
        "the cycle's fragment statistics have {} values, at least 4 expected", s.size()));
  }
  mean_delta_sq_ = s[0];
  avg_delta_sq_ = s[1];
  mean_delta_norm_sq_ = s[2];
  dc_bytes_ = s[3];
  link_s_.assign(s.begin() + 4, s.end());
}

}  // namespace autoloco
