// Rotary position embeddings (Su et al. 2021) in Hugging Face's rotate-half layout, with the
// frequency scalings that released Llama-family configs carry (model.rope_scaling): none,
// linear (positions divided by a factor), and Llama 3.1's rule (Grattafiori et al. 2024,
// transformers' rope_type "llama3"): frequencies whose wavelength exceeds
// original_seq_len / low_freq_factor are divided by the factor, those below
// original_seq_len / high_freq_factor are kept, and those between are blended linearly in
// original_seq_len / wavelength. docs/models.md gives the formulas.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "autoloco/config/config.hpp"

namespace autoloco {

// The cos and sin tables for positions 0..T-1, [T, head_dim] each.
struct Rotary {
  torch::Tensor cos;
  torch::Tensor sin;
};

// The inverse frequencies theta^(-2i / head_dim), i < head_dim / 2, after model.rope_scaling,
// in float32 as transformers computes them.
torch::Tensor rope_inverse_frequencies(const ModelConfig& config, int64_t head_dim,
                                       torch::Device device);

Rotary rotary_tables(int64_t positions, const torch::Tensor& inverse_frequencies);

// x [B, H, T, D] rotated: x cos + rotate_half(x) sin, rotate_half(x) = (-x2, x1) of its halves.
torch::Tensor apply_rotary(const torch::Tensor& x, const Rotary& rope);

}  // namespace autoloco
