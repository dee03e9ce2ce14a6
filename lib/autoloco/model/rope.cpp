#include "autoloco/model/rope.hpp"

#include <cmath>

namespace autoloco {
namespace {

// Llama 3.1's rule on the unscaled inverse frequencies (float32 throughout, in transformers'
// order of operations, so that the tables agree with its to the last bits that matter).
torch::Tensor llama3_scaled(const torch::Tensor& inv, const ModelConfig& c) {
  const double original = static_cast<double>(c.rope_original_seq_len);
  const double low_wavelength = original / c.rope_low_freq_factor;
  const double high_wavelength = original / c.rope_high_freq_factor;
  const torch::Tensor wavelength = 2.0 * M_PI / inv;
  const torch::Tensor low = torch::where(wavelength > low_wavelength, inv / c.rope_factor, inv);
  const torch::Tensor smooth = (original / wavelength - c.rope_low_freq_factor) /
                               (c.rope_high_freq_factor - c.rope_low_freq_factor);
  const torch::Tensor blended = (1.0 - smooth) * low / c.rope_factor + smooth * low;
  const torch::Tensor between = torch::logical_not(wavelength < high_wavelength) &
                                torch::logical_not(wavelength > low_wavelength);
  return torch::where(between, blended, low);
}

}  // namespace

torch::Tensor rope_inverse_frequencies(const ModelConfig& c, int64_t head_dim,
                                       torch::Device device) {
  const auto exponent =
      torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong).device(device))
          .to(torch::kFloat) /
      static_cast<double>(head_dim);
  const torch::Tensor inv = 1.0 / torch::pow(c.rope_theta, exponent);
  if (c.rope_scaling == "linear") return inv / c.rope_factor;
  if (c.rope_scaling == "llama3") return llama3_scaled(inv, c);
  return inv;
}

Rotary rotary_tables(int64_t positions, const torch::Tensor& inverse_frequencies) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(inverse_frequencies.device());
  const auto freqs = torch::outer(torch::arange(positions, f32), inverse_frequencies);
  const auto angles = torch::cat({freqs, freqs}, -1);
  return {angles.cos(), angles.sin()};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const Rotary& rope) {
  const int64_t half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * rope.cos.to(x.scalar_type()) + rotated * rope.sin.to(x.scalar_type());
}

}  // namespace autoloco
