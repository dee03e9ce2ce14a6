// Causal scaled dot-product attention shared by the architectures: LibTorch's fused kernel
// (flash/memory-efficient on CUDA, a fused one on the CPU), the one transformers runs too.
#pragma once

#include <torch/torch.h>

namespace autoloco {

// q [B, H, T, D]; k, v [B, H_kv, T, D] with H_kv dividing H (grouped-query attention: query
// head j reads key/value head j / (H / H_kv), as Llama's repeat_kv arranges them).
// Returns [B, H, T, D]. Scale 1/sqrt(D).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v);

}  // namespace autoloco
