// The gradient-noise tests of AdLoCo (ALGORITHMS.md §3): how many sequences a batch needs so that
// its gradient is accurate enough, estimated from M gradient samples of one dc, each the mean
// over b sequences. The sums are accumulated over a round's steps and the tests use their
// means, so one round's decision rests on all of its steps' samples.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace autoloco {

// Sums over the steps of a round, and over the dc's samples g_m with ḡ = mean_m g_m.
struct NoiseSums {
  static constexpr size_t kCount = 6;

  double steps = 0.0;       // steps summed
  double sample_sq = 0.0;   // Σ_t Σ_m ‖g_m‖²
  double dot_sq = 0.0;      // Σ_t Σ_m ⟨g_m, ḡ⟩²
  double dot_sq_rel = 0.0;  // Σ_t Σ_m ⟨g_m, ḡ⟩² / ‖ḡ‖²
  double mean_sq = 0.0;     // Σ_t ‖ḡ‖²
  double mean_sq2 = 0.0;    // Σ_t ‖ḡ‖⁴

  std::array<double, kCount> to_array() const;
  static NoiseSums from_array(const std::array<double, kCount>& a);
  // One step: the dc-wide terms (steps, ‖ḡ‖², ‖ḡ‖⁴) only where `count_mean` (one member of
  // the dc), this rank's samples' terms always, so that a sum over the dc's members is whole.
  void add_step(const double* sample_sq_norms, const double* dots, size_t local_samples,
                double mean_sq_norm, bool count_mean);
  void add(const NoiseSums& other);
};

// Per-sequence variance estimates (each sample's variance scaled by b), round means. Sample
// variances use M − 1; ALGORITHMS.md writes the orthogonal term as a plain mean, which
// underestimates it by (M − 1) / M.
struct NoiseEstimate {
  double mean_sq = 0.0;   // ‖ḡ‖²
  double mean_sq2 = 0.0;  // ‖ḡ‖⁴
  double variance = 0.0;  // V = b/(M−1) Σ_m ‖g_m − ḡ‖²
  double var_ip = 0.0;    // V_ip = b var_m ⟨g_m, ḡ⟩
  double var_orth = 0.0;  // V_orth = b/(M−1) Σ_m ‖g_m − (⟨g_m,ḡ⟩/‖ḡ‖²) ḡ‖²
};

NoiseEstimate estimate_noise(const NoiseSums& s, int64_t samples, int64_t sample_batch);

// Sequences per sample that each test asks for (before rounding up and before any cap); NaN
// when nothing can be said (no steps, ḡ = 0). M = `samples`, b = `sample_batch`.
//   norm:          V / (M θ² ‖ḡ‖²)
//   inner product: max(V_ip / (ν² ‖ḡ‖⁴), V_orth / (ϑ² ‖ḡ‖²)) / M
double norm_test_batch(const NoiseSums& s, int64_t samples, int64_t sample_batch, double theta);
double inner_product_test_batch(const NoiseSums& s, int64_t samples, int64_t sample_batch,
                                double nu, double vartheta);

}  // namespace autoloco
