#include "autoloco/model/attention.hpp"

#include <torch/version.h>

#include <cmath>
#include <limits>

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

#if TORCH_VERSION_MAJOR < 2
// LibTorch 1.13 has no fused attention: scores masked above the diagonal, softmax, weighted sum.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t t = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  const auto future = torch::ones({t, t}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}
#else
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return torch::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                             /*is_causal=*/true);
}
#endif

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
  const int64_t rep = q.size(1) / k.size(1);
  return attend(q, repeat_heads(k, rep), repeat_heads(v, rep));
}

}  // namespace autoloco
