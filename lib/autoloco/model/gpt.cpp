// The GPT-2-style decoder: module definitions, GPT-2 initialisation, loss and size/FLOP counts.
#include "autoloco/model/gpt.hpp"

#include <torch/version.h>

#include <cmath>
#include <limits>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr double kInitStd = 0.02;

void check_config(const ModelConfig& c) {
  if (c.n_layer <= 0 || c.n_head <= 0 || c.d_model <= 0 || c.seq_len <= 0 || c.vocab_size <= 0) {
    throw ConfigError("model: n_layer, n_head, d_model, seq_len and vocab_size must be positive");
  }
  if (c.d_model % c.n_head != 0) {
    throw ConfigError("model.n_head (" + std::to_string(c.n_head) +
                      ") must divide model.d_model (" + std::to_string(c.d_model) + ")");
  }
}

#if TORCH_VERSION_MAJOR < 2
// LibTorch 1.13 has no fused attention: scores masked above the diagonal, softmax, weighted sum.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
  const int64_t t = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  const auto future = torch::ones({t, t}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}
#else
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
  return torch::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                             /*is_causal=*/true);
}
#endif

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config)
    : qkv(register_module("qkv", torch::nn::Linear(config.d_model, 3 * config.d_model))),
      proj(register_module("proj", torch::nn::Linear(config.d_model, config.d_model))),
      n_head_(config.n_head),
      d_model_(config.d_model) {}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  const int64_t head_dim = d_model_ / n_head_;
  // [B, T, 3C] -> three [B, n_head, T, head_dim]
  auto heads = [&](const torch::Tensor& part) {
    return part.view({b, t, n_head_, head_dim}).transpose(1, 2);
  };
  const auto parts = qkv->forward(x).split(d_model_, /*dim=*/2);
  const auto y = causal_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]));
  return proj->forward(y.transpose(1, 2).contiguous().view({b, t, d_model_}));
}

MLPImpl::MLPImpl(const ModelConfig& config)
    : fc(register_module("fc", torch::nn::Linear(config.d_model, 4 * config.d_model))),
      proj(register_module("proj", torch::nn::Linear(4 * config.d_model, config.d_model))) {}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return proj->forward(torch::gelu(fc->forward(x), "tanh"));
}

BlockImpl::BlockImpl(const ModelConfig& config)
    : ln_1(register_module("ln_1",
                           torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
      attn(register_module("attn", CausalSelfAttention(config))),
      ln_2(register_module("ln_2",
                           torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
      mlp(register_module("mlp", MLP(config))) {}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attn->forward(ln_1->forward(x));
  return h + mlp->forward(ln_2->forward(h));
}

GPTImpl::GPTImpl(const ModelConfig& config) : config_(config) {
  check_config(config);
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.d_model));
  wpe = register_module("wpe", torch::nn::Embedding(config.seq_len, config.d_model));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i)
    blocks->push_back(Block(config));
  ln_f =
      register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})));
  init_weights();
}

void GPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, kInitStd);
      linear->bias.zero_();
    } else if (auto* embedding = m->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, kInitStd);
    } else if (auto* norm = m->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  // Each block adds two outputs to the residual stream; scaling them keeps its variance at
  // initialisation independent of depth.
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (const auto& m : *blocks) {
    auto* block = m->as<BlockImpl>();
    block->attn->proj->weight.normal_(0.0, residual_std);
    block->mlp->proj->weight.normal_(0.0, residual_std);
  }
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx) {
  const int64_t t = idx.size(1);
  if (t > config_.seq_len) {
    throw Error("GPT::forward: sequence of " + std::to_string(t) +
                " tokens exceeds model.seq_len " + std::to_string(config_.seq_len));
  }
  const auto pos = torch::arange(t, idx.options().dtype(torch::kLong));
  auto x = wte->forward(idx) + wpe->forward(pos);
  for (const auto& m : *blocks)
    x = m->as<BlockImpl>()->forward(x);
  // Tied head: the token embedding doubles as the output projection.
  return torch::matmul(ln_f->forward(x), wte->weight.t());
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t vocab = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
}

int64_t parameter_count(const GPT& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters())
    n += p.numel();
  return n;
}

int64_t non_embedding_parameter_count(const GPT& model) {
  return parameter_count(model) - model->wte->weight.numel() - model->wpe->weight.numel();
}

int64_t non_embedding_parameter_count(const ModelConfig& c) {
  const int64_t d = c.d_model;
  // per block: 2 LayerNorms (4d), qkv (3d^2 + 3d), attn proj (d^2 + d), fc (4d^2 + 4d),
  // mlp proj (4d^2 + d); then ln_f (2d).
  return c.n_layer * (12 * d * d + 13 * d) + 2 * d;
}

double flops_per_token(const ModelConfig& c) {
  const auto n = static_cast<double>(non_embedding_parameter_count(c));
  const auto layers = static_cast<double>(c.n_layer);
  const auto d = static_cast<double>(c.d_model);
  return 6.0 * n + 12.0 * layers * d * static_cast<double>(c.seq_len) +
         6.0 * d * static_cast<double>(c.vocab_size);
}

}  // namespace autoloco
