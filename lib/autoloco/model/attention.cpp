#include "autoloco/model/attention.hpp"

namespace autoloco {
namespace {

// [B, H_kv, T, D] -> [B, H_kv * rep, T, D], each head repeated `rep` times in a row.
torch::Tensor repeat_heads(const torch::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const auto s = x.sizes();
  return x.unsqueeze(2)
      .expand({s[0], s[1], rep, s[2], s[3]})
      .reshape({s[0], s[1] * rep, s[2], s[3]});
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return torch::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                             /*is_causal=*/true);
}

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
  const int64_t rep = q.size(1) / k.size(1);
  return attend(q, repeat_heads(k, rep), repeat_heads(v, rep));
}

}  // namespace autoloco
