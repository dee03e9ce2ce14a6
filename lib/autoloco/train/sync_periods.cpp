#include "autoloco/train/sync_periods.hpp"

#include <fmt/format.h>

#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {

void CycleStats::add_weighted(double mean_delta_sq, double effective_dcs) {
  if (!(mean_delta_sq > 0.0)) return;  // Δ = 0: nothing to either sum, no G_e
  self_delta_sq_ += mean_delta_sq / effective_dcs;
  if (std::isnan(effective_dcs_)) {
    effective_dcs_ = effective_dcs;
  } else if (effective_dcs_ != effective_dcs) {
    effective_dcs_ = kMixedDcs;
  }
}

void CycleStats::add(const RoundStats& s) {
  mean_delta_sq_ += s.mean_delta_sq;
  avg_delta_sq_ += s.avg_delta_sq;
  add_weighted(s.mean_delta_sq, s.effective_dcs);
  mean_delta_norm_sq_ += s.mean_delta_norm * s.mean_delta_norm;
  dc_bytes_ += static_cast<double>(s.dc_bytes);
  link_s_.push_back(s.link_s);
}

RoundStats CycleStats::close(const RoundStats& last) {
  if (link_s_.empty()) return last;
  RoundStats c = last;
  if (std::isnan(self_delta_sq_)) self_delta_sq_ = mean_delta_sq_ / last.effective_dcs;
  add_weighted(last.mean_delta_sq, last.effective_dcs);
  c.mean_delta_sq += mean_delta_sq_;
  c.avg_delta_sq += avg_delta_sq_;
  // The whole model's G_e = Σ n̄ / Σ P over the fragments (agreement() of the summed sums).
  c.effective_dcs = effective_dcs_ == kMixedDcs ? c.mean_delta_sq / self_delta_sq_ : effective_dcs_;
  // ‖Δ_i‖ of the whole model from its fragments' (the mean over dcs of a root is not the root
  // of the mean: an estimate, for the logs only).
  c.mean_delta_norm = std::sqrt(mean_delta_norm_sq_ + last.mean_delta_norm * last.mean_delta_norm);
  c.rho = RoundStats::agreement(c.dcs, c.effective_dcs, c.mean_delta_sq, c.avg_delta_sq);
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
  std::vector<double> s = {kStateLayout, mean_delta_sq_, avg_delta_sq_, mean_delta_norm_sq_,
                           dc_bytes_,    self_delta_sq_, effective_dcs_};
  s.insert(s.end(), link_s_.begin(), link_s_.end());
  return s;
}

void CycleStats::load_state(const std::vector<double>& s) {
  // The layout before the weighted statistics: Σ n̄, Σ a, Σ ‖Δ_i‖², bytes, link seconds.
  const bool legacy = s.empty() || s[0] != kStateLayout;
  const size_t fixed = legacy ? 4 : 7;
  if (s.size() < fixed) {
    throw CheckpointError(fmt::format(
        "the cycle's fragment statistics have {} values, at least {} expected", s.size(), fixed));
  }
  const size_t first = legacy ? 0 : 1;
  mean_delta_sq_ = s[first];
  avg_delta_sq_ = s[first + 1];
  mean_delta_norm_sq_ = s[first + 2];
  dc_bytes_ = s[first + 3];
  self_delta_sq_ = legacy ? std::nan("") : s[5];
  effective_dcs_ = legacy ? std::nan("") : s[6];
  link_s_.assign(s.begin() + static_cast<std::ptrdiff_t>(fixed), s.end());
}

}  // namespace autoloco
