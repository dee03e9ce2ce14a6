// The Llama decoder: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, init.
#include "autoloco/model/llama.hpp"

#include <fmt/format.h>

#include <cmath>

#include "autoloco/model/attention.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr double kInitStd = 0.02;

torch::nn::Linear linear(int64_t in, int64_t out, bool bias = false) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

void check_llama(const ModelConfig& c) {
  const int64_t kv = kv_heads(c);
  if (kv <= 0 || c.n_head % kv != 0) {
    throw ConfigError(
        fmt::format("model.n_kv_head ({}) must divide model.n_head ({})", c.n_kv_head, c.n_head));
  }
  if (attention_head_dim(c) % 2 != 0) {
    throw ConfigError(
        fmt::format("model.head_dim: rotary embeddings need an even head width, got {}",
                    attention_head_dim(c)));
  }
}

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps)
    : weight(register_parameter("weight", torch::ones({dim}))), eps_(eps) {}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // Half precision inputs are normalised in float32 (as transformers does); double stays double.
  const auto xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  const auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const ModelConfig& config)
    : n_head_(config.n_head), n_kv_head_(kv_heads(config)), head_dim_(attention_head_dim(config)) {
  const int64_t d = config.d_model;
  const bool bias = config.attention_bias;
  q_proj = register_module("q_proj", linear(d, n_head_ * head_dim_, bias));
  k_proj = register_module("k_proj", linear(d, n_kv_head_ * head_dim_, bias));
  v_proj = register_module("v_proj", linear(d, n_kv_head_ * head_dim_, bias));
  o_proj = register_module("o_proj", linear(n_head_ * head_dim_, d));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, config.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, config.norm_eps));
  }
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const Rotary& rope) {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  auto heads = [&](const torch::Tensor& y, int64_t n, RMSNorm& norm) {
    const torch::Tensor h = y.view({b, t, n, head_dim_});
    return (norm ? norm->forward(h) : h).transpose(1, 2);
  };
  RMSNorm none{nullptr};
  const auto q = apply_rotary(heads(q_proj->forward(x), n_head_, q_norm), rope);
  const auto k = apply_rotary(heads(k_proj->forward(x), n_kv_head_, k_norm), rope);
  const auto v = heads(v_proj->forward(x), n_kv_head_, none);
  const auto y = causal_attention(q, k, v);
  return o_proj->forward(y.transpose(1, 2).contiguous().view({b, t, n_head_ * head_dim_}));
}

LlamaMLPImpl::LlamaMLPImpl(const ModelConfig& config) {
  const int64_t d = config.d_model;
  const int64_t h = llama_ffn_hidden(config);
  gate_proj = register_module("gate_proj", linear(d, h));
  up_proj = register_module("up_proj", linear(d, h));
  down_proj = register_module("down_proj", linear(h, d));
}

torch::Tensor LlamaMLPImpl::forward(const torch::Tensor& x) {
  return down_proj->forward(torch::silu(gate_proj->forward(x)) * up_proj->forward(x));
}

LlamaBlockImpl::LlamaBlockImpl(const ModelConfig& config)
    : input_layernorm(register_module("input_layernorm", RMSNorm(config.d_model, config.norm_eps))),
      self_attn(register_module("self_attn", LlamaAttention(config))),
      post_attention_layernorm(
          register_module("post_attention_layernorm", RMSNorm(config.d_model, config.norm_eps))),
      mlp(register_module("mlp", LlamaMLP(config))) {}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const Rotary& rope) {
  const auto h = x + self_attn->forward(input_layernorm->forward(x), rope);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

LlamaImpl::LlamaImpl(const ModelConfig& config) : DecoderImpl(config) {
  check_llama(config);
  embed_tokens =
      register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.d_model));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i)
    blocks->push_back(LlamaBlock(config));
  norm = register_module("norm", RMSNorm(config.d_model, config.norm_eps));
  if (!config.tie_embeddings) {
    lm_head = register_module("lm_head", linear(config.d_model, config.vocab_size));
  }
  init_weights();
}

void LlamaImpl::init_weights() {
  torch::NoGradGuard no_grad;
  embed_tokens->weight.normal_(0.0, kInitStd);
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config().n_layer));
  for (const auto& m : *blocks) {
    auto* block = m->as<LlamaBlockImpl>();
    auto& attn = *block->self_attn;
    auto& mlp = *block->mlp;
    for (auto* l : {&attn.q_proj, &attn.k_proj, &attn.v_proj, &mlp.gate_proj, &mlp.up_proj})
      (*l)->weight.normal_(0.0, kInitStd);
    for (auto* l : {&attn.q_proj, &attn.k_proj, &attn.v_proj}) {
      if ((*l)->bias.defined()) (*l)->bias.zero_();
    }
    attn.o_proj->weight.normal_(0.0, residual_std);
    mlp.down_proj->weight.normal_(0.0, residual_std);
  }
  if (lm_head) lm_head->weight.normal_(0.0, kInitStd);
}

torch::Tensor LlamaImpl::embed(const torch::Tensor& idx) {
  return embed_tokens->forward(idx);
}

const Rotary& LlamaImpl::rope_for(const torch::Tensor& x) {
  const int64_t t = x.size(1);
  if (!rope_.cos.defined() || rope_.cos.size(0) != t || rope_.cos.device() != x.device()) {
    const ModelConfig& c = config();
    rope_ = rotary_tables(t, rope_inverse_frequencies(c, attention_head_dim(c), x.device()));
  }
  return rope_;
}

torch::Tensor LlamaImpl::block(int64_t i, const torch::Tensor& x) {
  return blocks[static_cast<size_t>(i)]->as<LlamaBlockImpl>()->forward(x, rope_for(x));
}

torch::Tensor LlamaImpl::head(const torch::Tensor& x) {
  const torch::Tensor h = norm->forward(x);
  return lm_head ? lm_head->forward(h) : torch::matmul(h, embed_tokens->weight.t());
}

}  // namespace autoloco
