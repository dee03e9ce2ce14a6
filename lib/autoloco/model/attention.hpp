// Causal scaled dot-product attention shared by the architectures: the fused kernel of
// LibTorch 2.x (flash/memory-efficient on CUDA, a fused one on the CPU), or the plain
// masked-softmax form on LibTorch 1.13, which has none.
#pragma once

#include <torch/torch.h>

namespace autoloco {

// q [B, H, T, D]; k, v [B, H_kv, T, D] with H_kv dividing H (grouped-query attention: query
// head j reads key/value head j / (H / H_kv), as Llama's repeat_kv arranges them).
// Returns [B, H, T, D]. Scale 1/sqrt(D).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v);

}  // namespace autoloco
