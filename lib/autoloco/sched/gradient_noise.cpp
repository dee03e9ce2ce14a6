#include "autoloco/sched/gradient_noise.hpp"

#include <algorithm>
#include <cmath>

namespace autoloco {

std::array<double, NoiseSums::kCount> NoiseSums::to_array() const {
  return {steps, sample_sq, dot_sq, dot_sq_rel, mean_sq, mean_sq2};
}

NoiseSums NoiseSums::from_array(const std::array<double, kCount>& a) {
  NoiseSums s;
  s.steps = a[0];
  s.sample_sq = a[1];
  s.dot_sq = a[2];
  s.dot_sq_rel = a[3];
  s.mean_sq = a[4];
  s.mean_sq2 = a[5];
  return s;
}

void NoiseSums::add_step(const double* sample_sq_norms, const double* dots, size_t local_samples,
                         double mean_sq_norm, bool count_mean) {
  for (size_t m = 0; m < local_samples; ++m) {
    sample_sq += sample_sq_norms[m];
    dot_sq += dots[m] * dots[m];
    if (mean_sq_norm > 0.0) dot_sq_rel += dots[m] * dots[m] / mean_sq_norm;
  }
  if (!count_mean) return;
  steps += 1.0;
  mean_sq += mean_sq_norm;
  mean_sq2 += mean_sq_norm * mean_sq_norm;
}

void NoiseSums::add(const NoiseSums& other) {
  const auto a = to_array();
  const auto b = other.to_array();
  std::array<double, kCount> sum{};
  for (size_t i = 0; i < kCount; ++i)
    sum[i] = a[i] + b[i];
  *this = from_array(sum);
}

NoiseEstimate estimate_noise(const NoiseSums& s, int64_t samples, int64_t sample_batch) {
  NoiseEstimate e;
  if (s.steps <= 0.0 || samples < 2) {
    e.mean_sq = e.mean_sq2 = e.variance = e.var_ip = e.var_orth = NAN;
    return e;
  }
  const double t = s.steps;
  const double m = static_cast<double>(samples);
  const double b = static_cast<double>(sample_batch);
  e.mean_sq = s.mean_sq / t;
  e.mean_sq2 = s.mean_sq2 / t;
  // Σ_m ‖g_m − ḡ‖² = Σ_m ‖g_m‖² − M ‖ḡ‖², and Σ_m ⟨g_m, ḡ⟩ = M ‖ḡ‖².
  e.variance = b / (m - 1.0) * (s.sample_sq - m * s.mean_sq) / t;
  e.var_ip = b / (m - 1.0) * (s.dot_sq - m * s.mean_sq2) / t;
  e.var_orth = b / (m - 1.0) * (s.sample_sq - s.dot_sq_rel) / t;
  return e;
}

double norm_test_batch(const NoiseSums& s, int64_t samples, int64_t sample_batch, double theta) {
  const NoiseEstimate e = estimate_noise(s, samples, sample_batch);
  if (!(e.mean_sq > 0.0)) return NAN;
  return std::max(0.0, e.variance) / (static_cast<double>(samples) * theta * theta * e.mean_sq);
}

double inner_product_test_batch(const NoiseSums& s, int64_t samples, int64_t sample_batch,
                                double nu, double vartheta) {
  const NoiseEstimate e = estimate_noise(s, samples, sample_batch);
  if (!(e.mean_sq > 0.0)) return NAN;
  const double ip = std::max(0.0, e.var_ip) / (nu * nu * e.mean_sq2);
  const double orth = std::max(0.0, e.var_orth) / (vartheta * vartheta * e.mean_sq);
  return std::max(ip, orth) / static_cast<double>(samples);
}

}  // namespace autoloco
